"""What does moving a group to the consumer group protocol (KIP-848) buy, and where does it cost
more? Classic eager (range), classic cooperative (cooperative-sticky) and the consumer protocol
(the coordinator's uniform assignor) on the same scenarios, group sizes and partition counts.

Scenarios (dynamic members, the main job's consumer profile and latency):
- ``scale-out``: one member joins;
- ``crash``: the second member dies without leaving (noticed after the 45 s session timeout);
- ``rolling-deploy``: every member restarts once, a quarter of the group at a time;
- ``slow-member``: one member joins while another member's poll loop is slow: its capacity is cut
  so that one poll batch (max.poll.records) takes ``SLOW_POLL_S`` seconds, well inside
  max.poll.interval.ms. The member acts on a rebalance only between batches (Kafka runs the group
  protocol inside poll()), so a classic group waits for it at the JoinGroup barrier; the consumer
  protocol has no group-wide barrier. Kafka defines no "slow member"; this is our fault model.

Beside them, ``protocol-migration``: the rolling deploy whose restarted members come back with
``group.protocol=consumer`` (KIP-848's online migration, ``sim.coordinator.migration``), from classic eager and
from classic cooperative, at the first partition count.

A second, small grid varies the consumer protocol's heartbeat interval
(``group.consumer.heartbeat.interval.ms``) at one group size: a member learns of its new target
assignment, and the coordinator of its revocations, only at heartbeats, so the interval paces
reconciliation.

A third grid compares the group coordinator of Kafka 4.0 (commit 1eb7644) with 4.3's
(``kafka_version``, ``sim.coordinator.behaviour``) under the consumer protocol where they differ:
the group's formation (``scale-out``'s start), a rolling deploy and ``slow-assignor`` (a scale-out
whose target assignment takes 20 s, its own fixed cost). What a user learns: what upgrading the
brokers buys the group. Every other run is under 4.3, the default.

Under 4.0, ``slow-assignor``'s group never settles: every join's heartbeat computes a 20 s target,
requests time out behind the computations and are retried, a member fenced for a stale epoch
rejoins with epoch 0 and is fenced again (Kafka 4.0 before KAFKA-19233), and the loop goes on for
as long as the run does (thousands of simulated seconds, millions of inputs). So that cell is
bounded (``Scale.versions_bounded``): both releases run it to ``SLOW_ASSIGNOR_BOUND_S`` of
simulated time (``max_duration_s``), and its 4.0 runs are declared as expected to end unsettled
(``RunSpec.may_end_unsettled``): the pipeline counts their "did not settle" violation apart
instead of failing the experiment, while any other violation of theirs, and any violation of
every other run (4.3's of the same cell included), still fails it. The page says how long the
4.0 group ran unsettled and how many group epochs, target computations and fenced heartbeats it
went through.

Every run but ``slow-assignor``'s takes Kafka's own assignment time (``assignor_cost=kafka``, on
both sides), so the time spent assigning is visible and reproducible.

Metrics are the simulator's summary (``sim.observe.metrics``), aggregated across seeds by
``rebalance_sim.lab.engine.aggregate``; the time spent assigning is ``rebalance_sim.lab.engine.aggregate.assignment_time``.
A declaration for the generic pipeline (``rebalance_sim.lab.engine.pipeline``); the page is
``rebalance_sim.lab.report.protocols``, given the scales as data.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import attrs

from sim.scenario.builtins import to_toml

from ..engine.grid import RunSpec, resolve
from ..engine.pipeline import Experiment, Options, scenario_dir
from ..report import protocols as recipe
from ..vocabulary import (
    CLASSIC_HEARTBEAT_MS,
    CONSUMER,
    CONSUMER_HEARTBEAT_MS,
    DEPLOY_BATCH,
    MIGRATION,
    MIGRATION_FROM,
    PROTOCOLS,
    SLOW_POLL_S,
)
from ..vocabulary import PROTOCOLS_SCENARIOS as SCENARIOS
from .common import scenario_dict, seeds_for, seeds_text, variant_overrides

COMMON = ("assignor_cost=kafka",)


@attrs.frozen
class Scale:
    sizes: tuple[int, ...]
    partitions_per_member: tuple[int, ...]
    seeds: tuple[int, ...]
    heartbeat_size: int  # group size of the heartbeat-interval grid
    heartbeat_ms: tuple[int, ...]  # intervals besides the default 5000 ms
    # the largest group that also runs the partition counts after the first (None: every size)
    more_partitions_up_to: int | None = None
    # (group size, number of seeds) where a size runs fewer seeds than ``seeds``
    seeds_by_size: tuple[tuple[int, int], ...] = ()
    # the largest group that runs the consumer protocol, and the migration onto it (None: every
    # size)
    consumer_up_to: int | None = None
    # the 4.0-vs-4.3 grid: (scenario, members) run under the consumer protocol by both releases,
    # with this many seeds
    versions: tuple[tuple[str, int], ...] = ()
    versions_seeds: int = 1
    # cells of that grid which Kafka 4.0's coordinator keeps from settling: (scenario, members,
    # max_duration_s). Both releases run them to that bound of simulated time (None: the
    # scenario's own); a 4.0 run that ends there unsettled is the cell's expected outcome, and a
    # 4.3 run must settle like any other.
    versions_bounded: tuple[tuple[str, int, float | None], ...] = ()

    def bound_of(self, label: str, members: int) -> tuple[bool, float | None]:
        """(whether the 4.0-vs-4.3 cell is bounded, its max_duration_s)."""
        for scenario, size, bound_s in self.versions_bounded:
            if (scenario, size) == (label, members):
                return True, bound_s
        return False, None

    def runs_consumer(self, members: int) -> bool:
        return self.consumer_up_to is None or members <= self.consumer_up_to

    def points(self) -> list[tuple[int, int]]:
        """(members, partitions per member) of the main grid."""
        return [
            (members, ppm)
            for members in self.sizes
            for i, ppm in enumerate(self.partitions_per_member)
            if i == 0 or self.more_partitions_up_to is None or members <= self.more_partitions_up_to
        ]

    def seeds_for(self, members: int) -> tuple[int, ...]:
        return seeds_for(self.seeds, self.seeds_by_size, members)

    def seeds_text(self) -> str:
        """How many seeds each size runs, for the report."""
        return seeds_text(self.seeds, self.seeds_by_size, self.sizes)


# How long the 4.0-vs-4.3 grid lets a slow-assignor group run (simulated s). Under 4.3 the
# group forms and the scale-out settles within about 100 s; under 4.0 it never settles (the
# fencing loop, see the module docstring), and each further simulated second only adds fenced
# heartbeats: ten times 4.3's time is long enough to tell the two apart.
SLOW_ASSIGNOR_BOUND_S = 600.0

SCALES = {
    # A few minutes on 2 cores. A seed samples start instants, member ids, latencies and the
    # fault's instant (see the main job); ten seeds per point, three at 1,000 members, whose runs
    # cost ten times as much.
    "default": Scale(
        sizes=(10, 100, 1000),
        partitions_per_member=(2, 10),
        seeds=tuple(range(10)),
        heartbeat_size=100,
        heartbeat_ms=(1000, 2500),
        seeds_by_size=((1000, 3),),
        versions=(
            ("scale-out", 100),
            ("scale-out", 1000),
            ("rolling-deploy", 100),
            ("slow-assignor", 20),
        ),
        versions_seeds=3,
        versions_bounded=(("slow-assignor", 20, SLOW_ASSIGNOR_BOUND_S),),
    ),
    # Up to 10,000 members x 100,000 partitions, the consumer protocol included: under 4.3 a
    # group computes one target per group.consumer.assignment.interval.ms (KIP-1263) and a fenced
    # member rejoins at once (KAFKA-19233), so 10,000 joining members form a group. Under 4.0
    # every join's heartbeat computed a target, joins came faster than the coordinator computed
    # them and members were fenced again and again: the 4.0-vs-4.3 grid shows it at 1,000 and
    # 10,000 members with one seed (4.0's runs at 10,000 end at the run's time limit).
    "large": Scale(
        sizes=(10, 100, 1000, 10_000),
        partitions_per_member=(2, 10),
        seeds=tuple(range(3)),
        heartbeat_size=1000,
        heartbeat_ms=(1000, 2500),
        seeds_by_size=((10_000, 1),),
        versions=(
            ("scale-out", 1000),
            ("scale-out", 10_000),
            ("rolling-deploy", 1000),
            ("slow-assignor", 1000),
        ),
        versions_seeds=1,
        versions_bounded=(
            ("scale-out", 10_000, None),
            ("slow-assignor", 1000, SLOW_ASSIGNOR_BOUND_S),
        ),
    ),
    # The tests.
    "smoke": Scale(
        sizes=(4,),
        partitions_per_member=(2,),
        seeds=(0, 1),
        heartbeat_size=4,
        heartbeat_ms=(1000,),
        # 4.0's slow-assignor group of 6 members loops (it is fenced again and again) well
        # before 300 s, a bound 4.3's settles within, so the bounded cell is tested too
        versions=(("scale-out", 4), ("slow-assignor", 6)),
        versions_seeds=1,
        versions_bounded=(("slow-assignor", 6, 300.0),),
    ),
}


def _slow_member_dict(members: int, partitions: int, consumer: bool = True) -> dict:
    """A scale-out while the second member (by name) processes so slowly that one full poll batch
    takes ``SLOW_POLL_S``; it falls behind (production exceeds its capacity), so every batch is full."""
    from sim import Scenario
    from sim.scenario.scenario import member_names

    data = scenario_dict("scale-out", "dynamic", members, partitions, DEPLOY_BATCH, consumer)
    sc = Scenario.from_dict(data)
    names, _ = member_names(sc.config, sc.timeline)
    slow = names[1] if len(names) > 1 else names[0]
    records = sc.config.consumer.max_poll_records
    data["member_overrides"] = {slow: {"capacity": records / SLOW_POLL_S}}
    data["name"] = "slow-member"
    data["description"] = (
        f"scale-out while {slow}'s poll loop takes {SLOW_POLL_S:g} s per batch "
        "(protocols experiment)"
    )
    return data


def _scenario(label: str, members: int, partitions: int, consumer: bool = True) -> dict:
    """The scenario of ``label`` at this size; ``consumer``: whether the consumer protocol runs it
    too (its fault then waits for that protocol's formation)."""
    if label == "slow-member":
        data = _slow_member_dict(members, partitions, consumer)
    elif label == MIGRATION:
        data = scenario_dict(label, "dynamic", members, partitions, DEPLOY_BATCH)
        for action in data["timeline"]:
            action["batch_size"] = DEPLOY_BATCH  # the rolling deploy's batches
        data["description"] = (
            f"{label}, the rolling deploy onto the consumer protocol (protocols experiment)"
        )
    else:
        data = scenario_dict(label, "dynamic", members, partitions, DEPLOY_BATCH, consumer)
        data["description"] = f"{label}, dynamic members (protocols experiment)"
    return data


# Where the 4.0-vs-4.3 grid's runs are told apart from the rest (every run's point says which
# group coordinator ran it).
VERSIONS = ("4.0", "4.3")
MAIN_VERSION = "4.3"
# The 4.0-vs-4.3 grid draws seeds of its own: its 4.3 runs of a point the main grid also runs
# (scale-out at 1,000 members) would otherwise be the main grid's runs, which a sweep refuses
# as two specs of one simulation. Both releases of the grid share these seeds.
VERSIONS_SEED_BASE = 1000


def _point(
    label, assignor, members, partitions, heartbeat_ms, kafka_version=MAIN_VERSION, grid="main"
):
    return (
        ("scenario", label),
        ("assignor", assignor),
        ("members", members),
        ("partitions", partitions),
        ("heartbeat_ms", heartbeat_ms),
        ("kafka_version", kafka_version),
        ("grid", grid),
    )


def protocol_specs(scale: Scale, scenarios: Path) -> list[RunSpec]:
    """The grid: scenarios x sizes x partitions per member x protocols x seeds, plus the consumer
    protocol's heartbeat intervals at one size (scale-out and rolling deploy)."""
    from ..atomic import atomic_write_text

    specs: list[RunSpec] = []

    def scenario_file(label, members, partitions) -> str:
        path = scenarios / f"protocols-{label}-{members}-{partitions}.toml"
        text = to_toml(_scenario(label, members, partitions, scale.runs_consumer(members)))
        if not path.exists() or path.read_text() != text:
            atomic_write_text(path, text)
        return str(path.resolve())

    for label in SCENARIOS:
        for members, ppm in scale.points():
            partitions = members * ppm
            path = scenario_file(label, members, partitions)
            for assignor in PROTOCOLS:
                if assignor == CONSUMER and not scale.runs_consumer(members):
                    continue
                hb = CONSUMER_HEARTBEAT_MS if assignor == CONSUMER else CLASSIC_HEARTBEAT_MS
                specs.extend(
                    RunSpec(
                        path,
                        (*variant_overrides(assignor), *COMMON),
                        seed,
                        _point(label, assignor, members, partitions, hb),
                    )
                    for seed in scale.seeds_for(members)
                )
    for members in filter(scale.runs_consumer, scale.sizes):
        partitions = members * scale.partitions_per_member[0]
        path = scenario_file(MIGRATION, members, partitions)
        for assignor in MIGRATION_FROM:
            specs.extend(
                RunSpec(
                    path,
                    (*variant_overrides(assignor), *COMMON),
                    seed,
                    _point(MIGRATION, assignor, members, partitions, CLASSIC_HEARTBEAT_MS),
                )
                for seed in scale.seeds_for(members)
            )
    members = scale.heartbeat_size
    partitions = members * scale.partitions_per_member[0]
    for label in ("scale-out", "rolling-deploy"):
        path = scenario_file(label, members, partitions)
        for hb in scale.heartbeat_ms:
            overrides = (
                *variant_overrides(CONSUMER),
                *COMMON,
                f"group.consumer_heartbeat_interval_ms={hb}",
                # below group.consumer.min.heartbeat.interval.ms
                f"group.consumer_min_heartbeat_interval_ms={hb}",
            )
            specs.extend(
                RunSpec(path, overrides, seed, _point(label, CONSUMER, members, partitions, hb))
                for seed in scale.seeds_for(members)
            )
    for label, members in scale.versions:
        partitions = members * scale.partitions_per_member[0]
        path = scenario_file(label, members, partitions)
        # slow-assignor fixes its own assignment time (the point of the scenario)
        cost = () if label == "slow-assignor" else COMMON
        bounded, bound_s = scale.bound_of(label, members)
        # written as a float: the runs table's column must have one type across runs, and an
        # override "600" would be read as an integer
        bound = () if bound_s is None else (f"max_duration_s={bound_s:.1f}",)
        for version in VERSIONS:
            specs.extend(
                RunSpec(
                    path,
                    (*variant_overrides(CONSUMER), *cost, *bound, f"kafka_version={version}"),
                    seed,
                    _point(
                        label,
                        CONSUMER,
                        members,
                        partitions,
                        CONSUMER_HEARTBEAT_MS,
                        version,
                        "versions",
                    ),
                    may_end_unsettled=bounded and version == "4.0",
                )
                for seed in (VERSIONS_SEED_BASE + s for s in scale.seeds[: scale.versions_seeds])
            )
    return resolve(specs, "protocols")


def grid(opts: Options) -> list[RunSpec]:
    return protocol_specs(SCALES[opts.scale], scenario_dir(opts))


EXPERIMENT = Experiment(
    "protocols",
    "classic eager vs classic cooperative vs the consumer group protocol (KIP-848): scale-out, crash, "
    "rolling deploy and a slow member, 10-1000 members (10,000 with --scale large), two partition counts",
    title="Classic eager, classic cooperative and the consumer group protocol",
    grid=grid,
    report=partial(recipe.report, scales=SCALES),
    windows=False,
)
