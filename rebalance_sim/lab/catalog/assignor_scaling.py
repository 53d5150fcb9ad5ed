"""When does the leader's assignment dominate a rebalance? Our assignors timed directly, then a
simulated scale-out with the assignor cost ``measured``, 100..10,000 members.

A declaration for the generic pipeline (``rebalance_sim.lab.engine.pipeline``); the page is
``rebalance_sim.lab.report.assignor_scaling``.
"""

from __future__ import annotations

from functools import partial

from ..engine.grid import RunSpec, resolve
from ..engine.pipeline import Experiment, Options
from ..report import assignor_scaling as recipe
from ..vocabulary import CLASSIC_ASSIGNORS

ASSIGNORS = CLASSIC_ASSIGNORS
MEMBERS = (100, 1000, 10_000)
PARTITIONS = (1_000, 10_000, 100_000, 1_000_000)


def grid(opts: Options) -> list[RunSpec]:
    """Scale-outs with the measured assignor cost, 20 partitions per member, one seed."""
    sim_sizes = (100, 1000, 3000) if opts.scale != "large" else (100, 1000, 3000, 10_000)
    specs = []
    for members in sim_sizes:
        for assignor in ASSIGNORS:
            partitions = members * 20
            specs.append(
                RunSpec(
                    "scale-out",
                    (
                        f"members={members}",
                        f"partitions={partitions}",
                        f"assignor={assignor}",
                        "assignor_cost=measured",
                        "group.initial_rebalance_delay_ms=0",
                    ),
                    0,
                    (
                        ("scenario", "scale-out"),
                        ("assignor", assignor),
                        ("members", members),
                        ("partitions", partitions),
                    ),
                )
            )
    return resolve(specs, opts.name)


EXPERIMENT = Experiment(
    "assignor-scaling",
    "leader assignment time per assignor (100-10,000 members, up to 1,000,000 partitions) and its "
    "share of a simulated rebalance (100-3,000 members; 10,000 with --scale large)",
    title="Assignor scaling",
    grid=grid,
    report=partial(recipe.report, assignors=ASSIGNORS, members=MEMBERS, partitions=PARTITIONS),
    windows=False,
)
