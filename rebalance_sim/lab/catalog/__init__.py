"""The experiments, as declarations: one module each, registered here by name.

Each module defines ``EXPERIMENT`` (``rebalance_sim.lab.engine.pipeline.Experiment``): a grid and a
reference to its report recipe (``rebalance_sim.lab.report``), given the scales as data, that the
generic pipeline runs. To add an experiment, add a module and list it below.
"""

from __future__ import annotations

from ..engine.pipeline import Experiment
from . import assignor_scaling, ci_regression, eager_vs_cooperative, protocols

EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in (
        eager_vs_cooperative.EXPERIMENT,
        assignor_scaling.EXPERIMENT,
        protocols.EXPERIMENT,
        ci_regression.EXPERIMENT,
    )
}
