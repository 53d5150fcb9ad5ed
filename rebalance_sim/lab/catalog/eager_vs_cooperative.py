"""The main job: eager vs cooperative rebalancing (range, roundrobin, sticky, cooperative-sticky;
static and dynamic members; scale-out, crash and a full rolling deploy; 10..1000 members; 20 seeds,
6 at 1,000 members; medians with p10-p90 bands).

A declaration for the generic pipeline (``rebalance_sim.lab.engine.pipeline``): ``grid`` says which runs;
the page is ``rebalance_sim.lab.report.eager_vs_cooperative``, given the scales as data.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import attrs

from sim.scenario.builtins import to_toml

from ..engine.grid import RunSpec, resolve
from ..engine.pipeline import Experiment, Options, scenario_dir
from ..report import eager_vs_cooperative as recipe
from ..vocabulary import (
    BUILTIN_FAULT_S,
    CONSUMER,
    DEPLOY_BATCH,
    MAIN_JOB_SCENARIOS,
    MAIN_JOB_VARIANTS,
)
from .common import (
    formation_allowance_s,
    scenario_dict,
    seeds_for,
    seeds_text,
    variant_overrides,
)


@attrs.frozen
class Scale:
    sizes: tuple[int, ...]
    partitions_per_member: int
    deploy_batch: str = (
        DEPLOY_BATCH  # the rolling deploy restarts the whole group, this much at a time
    )
    seeds: tuple[int, ...] = (0, 1, 2)
    # (group size, number of seeds) where a size runs fewer seeds than ``seeds`` (the largest
    # groups cost the most per run; docs/design.md says what a seed samples)
    seeds_by_size: tuple[tuple[int, int], ...] = ()
    # the eager assignors other than range (roundrobin, sticky) run only up to this group size
    # (None: at every size); they stall as range does under the eager protocol
    all_eager_up_to: int | None = None
    timing_shapes: tuple[tuple[int, int], ...] = tuple(
        (m, p) for m in (100, 1000) for p in (1_000, 10_000, 100_000)
    )
    # group sizes run under the consumer group protocol (None: all). Since idle heartbeats are
    # elided a 1000-member run takes seconds; 10,000 members still take minutes per deploy.
    consumer_sizes: tuple[int, ...] | None = None

    def seeds_for(self, members: int) -> tuple[int, ...]:
        """The seeds run at group size ``members``."""
        return seeds_for(self.seeds, self.seeds_by_size, members)

    def variants_for(self, members: int) -> tuple[str, ...]:
        """The ``assignor`` column values run at group size ``members``."""
        return tuple(
            v
            for v in MAIN_JOB_VARIANTS
            if not (
                v == CONSUMER
                and self.consumer_sizes is not None
                and members not in self.consumer_sizes
            )
            and not (
                v in ("roundrobin", "sticky")
                and self.all_eager_up_to is not None
                and members > self.all_eager_up_to
            )
        )

    def seeds_text(self) -> str:
        """How many seeds each size runs, for the report."""
        return seeds_text(self.seeds, self.seeds_by_size, self.sizes)

    def runs_consumer(self, members: int) -> bool:
        """Whether group size ``members`` runs the consumer group protocol."""
        return self.consumer_sizes is None or members in self.consumer_sizes

    def fault_at_s(self, members: int) -> float:
        """When the fault comes at group size ``members``: the built-ins' time, later by
        ``formation_allowance_s`` where the consumer protocol runs."""
        allowance = formation_allowance_s(members * self.partitions_per_member)
        return BUILTIN_FAULT_S + (allowance if self.runs_consumer(members) else 0.0)


SCALES = {
    # Seeds: a seed samples the members' start instants (and so their auto-commit and poll
    # phases), member ids, link latencies and the fault's instant within 15 s. Twenty seeds per
    # point up to 100 members; the 1,000-member runs cost ten times as much each, so they run
    # six seeds, and of the eager assignors only range.
    "default": Scale(
        sizes=(10, 100, 1000),
        partitions_per_member=2,
        seeds=tuple(range(20)),
        seeds_by_size=((1000, 6),),
        all_eager_up_to=100,
    ),
    # Up to 10,000 members, few seeds (the runs at 10,000 members dominate; docs/performance.md).
    "large": Scale(
        sizes=(10, 100, 1000, 10_000),
        partitions_per_member=2,
        seeds=tuple(range(6)),
        seeds_by_size=((10_000, 1),),
        all_eager_up_to=100,
        consumer_sizes=(10, 100, 1000),
    ),
    # A quick look (and the tests): tiny groups, two seeds.
    "smoke": Scale(
        sizes=(4, 8), partitions_per_member=2, seeds=(0, 1), timing_shapes=((10, 100), (10, 1000))
    ),
}


def eager_vs_coop_specs(scale: Scale, scenarios: Path) -> list[RunSpec]:
    """Every run of the experiment; scenario files are written under ``scenarios`` (a local
    directory: the specs carry the files' text to the executors)."""
    from ..atomic import atomic_write_text

    specs: list[RunSpec] = []
    for label in MAIN_JOB_SCENARIOS:
        for membership in ("dynamic", "static"):
            for members in scale.sizes:
                partitions = members * scale.partitions_per_member
                data = scenario_dict(
                    label,
                    membership,
                    members,
                    partitions,
                    scale.deploy_batch,
                    scale.runs_consumer(members),
                )
                path = scenarios / f"{label}-{membership}-{members}.toml"
                text = to_toml(data)
                if not path.exists() or path.read_text() != text:
                    atomic_write_text(path, text)
                for assignor in scale.variants_for(members):
                    point = (
                        ("scenario", label),
                        ("assignor", assignor),
                        ("membership", membership),
                        ("members", members),
                        ("partitions", partitions),
                    )
                    specs.extend(
                        RunSpec(str(path.resolve()), variant_overrides(assignor), seed, point)
                        for seed in scale.seeds_for(members)
                    )
    return resolve(specs, "eager-vs-cooperative")


def grid(opts: Options) -> list[RunSpec]:
    """Every run: scenarios x memberships x group sizes x assignors x seeds."""
    scale = SCALES[opts.scale]
    return eager_vs_coop_specs(scale, scenario_dir(opts))


EXPERIMENT = Experiment(
    "eager-vs-cooperative",
    "range vs roundrobin vs sticky vs cooperative-sticky vs the consumer group protocol, static and "
    "dynamic members, scale-out / crash / full rolling deploy, 10-1000 members, medians and p10-p90 "
    "bands across seeds (the main job)",
    title="Eager vs cooperative rebalancing",
    grid=grid,
    report=partial(recipe.report, scales=SCALES),
)
