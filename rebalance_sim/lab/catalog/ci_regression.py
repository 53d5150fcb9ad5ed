"""The regression suite (``rebalance_sim.lab.engine.regression``) as a catalog entry: not a sweep, so it
replaces the pipeline with its own ``run``."""

from __future__ import annotations

from ..engine import regression as ci_regression
from ..engine.pipeline import Experiment

EXPERIMENT = Experiment(
    "ci-regression",
    "a small deterministic suite compared metric by metric with results/baseline/ (exit 1 on a "
    "move beyond tolerance; --update-baseline)",
    run=ci_regression.run,
)
