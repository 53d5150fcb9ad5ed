"""Which simulations a plan runs: for each fault, set-up and group size, a scenario file, and
seeds; with the cost estimate that orders them, cuts the plan to its time budget and makes its
ETA.

The faults (Kafka defines none of them; each is a timeline action of the simulator):

- ``deploy``: every member restarted once, as the group file's ``[deploy]`` says
  (``rolling_restart``);
- ``crash``: the second member by name dies without leaving (``crash``; noticed when its session
  expires);
- ``slow-member``: the second member's poll loop slows down so that one poll batch
  (max.poll.records) takes ``faults.slow_poll_s``, and one member joins: a classic group waits
  for the slow member at the JoinGroup barrier (Kafka runs the group protocol inside poll());
  the ``protocols`` experiment's fault;
- ``scale-out``: ``faults.scale_out`` members join at once (``add_members``).

Each comes at the same instant for every set-up of a group size, after the slowest set-up's
cold start (``fault_at_s``), with a per-seed jitter over 15 s (a whole number of heartbeat and
auto-commit cycles: ``sim.scenario.builtins``). Links have a lognormal latency, median 2 ms, as
the experiments' (a model: it is what makes two seeds of one set-up differ).

Growth multiplies the members and every topic's partitions by a factor (the traffic grows with
the group; the rate per partition, the deploy's batches as a share of the group and everything
else stay).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from .group import MAX_PLAN_MEMBERS, Group, scenario_table
from .variants import FAULTS, Variant, variants

# Faults come no earlier than the built-ins' 60 s, later by whole multiples of the jitter's
# period when a cold start needs longer (see fault_at_s).
BASE_FAULT_S = 60.0
JITTER_S = 15.0


@attrs.frozen
class Mode:
    """How much a plan runs: seeds at today's size (at least ``min_seeds``, up to ``seeds`` as
    the budget allows) and at each growth size, and the wall time its runs may take on the cores
    at hand (None: no limit, every growth size)."""

    name: str
    min_seeds: int
    seeds: int
    growth_seeds: int
    wall_s: float | None


# Three seeds are the fewest whose p10-p90 band says something; a quick look makes do with two.
MODES = {
    "quick": Mode("quick", 2, 3, 3, 45.0),
    "default": Mode("default", 3, 5, 3, 255.0),
    "thorough": Mode("thorough", 5, 10, 5, None),
}


def growth_factors(group: Group) -> list[float]:
    """The group's growth factors that stay within the members a plan simulates, plus the one
    that reaches that limit when a factor asked for would pass it."""
    out = [f for f in group.growth if group.members * f <= MAX_PLAN_MEMBERS]
    if len(out) < len(group.growth) and group.members < MAX_PLAN_MEMBERS:
        cap = math.floor(MAX_PLAN_MEMBERS / group.members * 100) / 100  # (2 decimals, at most)
        if cap > 1 and (not out or cap > out[-1] * 1.01):
            out.append(cap)
    return out


def base_dict(group: Group, variant: Variant | None = None, factor: float = 1.0) -> dict:
    """The scenario table of ``group`` under ``variant`` at ``factor`` times its size, without a
    timeline."""
    if variant is None:
        return scenario_table(group, factor=factor)
    return scenario_table(group, variant.consumer, variant.broker, factor)


def member_name(index: int, total: int) -> str:
    """The scenario format's name of member ``index`` when ``total`` members ever exist
    (``c000``, ...; names widen past 1,000 members: README, "Your own scenario")."""
    return f"c{index:0{max(3, len(str(total - 1)))}d}"


def count_of(value: int | str, members: int) -> int:
    """A count or a percentage of ``members`` (rounded up, at least 1)."""
    if isinstance(value, str):
        return max(1, math.ceil(members * float(value[:-1]) / 100 - 1e-9))
    return value


def _cold_start_s(group: Group, variant: Variant, factor: float) -> float:
    """How long the group takes to form, roughly, from its members' start: under the consumer
    protocol the first member to join is assigned every partition (KIP-848 has no
    group.initial.rebalance.delay.ms), runs onPartitionsAssigned for all of them, then revokes
    all but its share; under the classic protocol the initial delay, then each member's share."""
    from sim import Scenario

    sc = Scenario.from_dict(base_dict(group, variant, factor))
    cfg, broker = sc.config.consumer, sc.config.group
    partitions = sum(t.partitions for t in sc.config.topics)
    cost_s = (cfg.assign_cost_ms + cfg.revoke_cost_ms) / 1000.0
    spread = sc.config.start_spread_s
    if cfg.group_protocol == "consumer":
        return spread + partitions * cost_s + 2 * broker.consumer_heartbeat_interval_s
    share = math.ceil(partitions / max(1, sc.config.members))
    return spread + broker.initial_rebalance_delay_s + share * cost_s + 2 * cfg.heartbeat_interval_s


def fault_at_s(group: Group, factor: float) -> float:
    """When every fault comes at ``factor`` times the group: the built-ins' 60 s, or later by
    whole multiples of the jitter's period so that every set-up has formed (the same instant for
    all, so that all see the same scenario: the jitter draws depend only on the seed)."""
    need = max(_cold_start_s(group, v, factor) for v in variants(group))
    return BASE_FAULT_S + JITTER_S * math.ceil(max(0.0, need + JITTER_S - BASE_FAULT_S) / JITTER_S)


def scenario_dict(group: Group, variant: Variant, fault: str, factor: float, at_s: float) -> dict:
    """The scenario of one (fault, set-up, size)."""
    data = base_dict(group, variant, factor)
    members = data["members"]
    when = {"at_s": at_s, "jitter_s": JITTER_S}
    target = 1 if members > 1 else 0  # the second member by name: rarely the leader
    if fault == "deploy":
        d = group.deploy
        timeline = [
            {
                "action": "rolling_restart",
                **when,
                "batch_size": d.batch_size,
                "down_s": d.down_s,
                "gap_s": d.gap_s,
                "graceful": d.graceful,
            }
        ]
    elif fault == "crash":
        timeline = [{"action": "crash", **when, "member": target}]
    elif fault == "slow-member":
        from sim import Scenario

        records = Scenario.from_dict(data).config.consumer.max_poll_records
        slow = member_name(target, members + 1)
        data["member_overrides"] = {slow: {"capacity": records / group.faults.slow_poll_s}}
        timeline = [{"action": "add_members", **when, "count": 1}]
    elif fault == "scale-out":
        timeline = [
            {"action": "add_members", **when, "count": count_of(group.faults.scale_out, members)}
        ]
    else:
        raise ValueError(f"unknown fault {fault!r}")
    data["timeline"] = timeline
    data["name"] = scenario_name(group, variant, fault, factor)
    data["description"] = (
        f"{group.name}: {fault} under {variant.label}, {members:,} members (rebalance-sim plan)"
    )
    return data


def scenario_name(group: Group, variant: Variant, fault: str, factor: float) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", group.name).strip("-") or "group"
    return f"{slug}-{fault}-{variant.key}-x{factor:g}"


# ---------------------------------------------------------------------------------------------
# The broker's version


def kafka_version_overrides(broker_version: str) -> tuple[str, ...]:
    """The run override that asks the simulator for the brokers' Kafka version
    (``kafka_version=4.3``), or none when the scenario format has no such setting yet. Wiring
    point: when the simulator's coordinator knows versions (a top-level ``kafka_version``), this
    passes the group file's ``broker_version`` to every run unchanged; a format that knows the
    key but refuses the value (as ``--set`` parses it) is an error, not a silent omission."""
    from sim import ConfigError

    from .group import PlanError

    override = f"kafka_version={broker_version}"
    try:
        try_override(override)
    except ConfigError as e:
        if "unknown key" in e.reason:
            return ()
        raise PlanError(f"broker_version: the simulator refuses {override}: {e.reason}") from None
    return (override,)


def try_override(override: str) -> None:
    """Load a minimal scenario file with ``override`` as a run's ``--set`` gives it, by the
    loader every run goes through; raises its ``ConfigError``."""
    import tempfile

    from sim.scenario.builtins import load_scenario

    with tempfile.TemporaryDirectory(prefix="rebalance-sim-plan-") as tmp:
        path = Path(tmp) / "probe.toml"
        path.write_text('[[topics]]\nname = "t"\npartitions = 1\n', encoding="utf-8")
        load_scenario(str(path), [override])


def scenario_knows_kafka_version() -> bool:
    """Whether the runs are told the brokers' version (see ``kafka_version_overrides``)."""
    return bool(kafka_version_overrides("4.3"))


# ---------------------------------------------------------------------------------------------
# Cost: seconds of one core on the machine the plan's budgets were set on (2 cores, Python 3.11,
# the simulator's source), fitted to runs of 1,000 and 2,000 members: work units (members +
# partitions / 20) times the group's start and the fault's rebalance rounds, per protocol (and
# server-side assignor: range moves more partitions, so its members reconcile longer).

# (start, per round) in seconds per work unit
COST = {
    "classic": (1.15e-3, 7.6e-4),
    "consumer-uniform": (2.2e-3, 3.5e-4),
    "consumer-range": (3.0e-3, 9.2e-4),
}
# Rounds a fault adds to the start's, per protocol kind: a deploy adds two per batch (the batch
# leaving, then coming back; a static batch almost none: no rebalance), a scale-out about one.
SCALE_OUT_ROUNDS = {"classic": 1.4, "consumer-uniform": 0.8, "consumer-range": 1.2}
STATIC_ROUND = 0.05


def estimated_s(
    members: int, partitions: int, kind: str, static: bool, fault: str, group: Group
) -> float:
    """Estimated seconds of one core to simulate ``fault`` on a group of this size; ``kind``:
    ``classic``, ``consumer-uniform`` or ``consumer-range``."""
    start, per_round = COST.get(kind, COST["classic"])
    rounds = 0.0
    if fault == "deploy":
        waves = math.ceil(members / count_of(group.deploy.batch_size, members))
        rounds = waves * (STATIC_ROUND if static else 2.0)
    elif fault == "scale-out":
        rounds = SCALE_OUT_ROUNDS.get(kind, 1.0)
    units = members + partitions / 20.0
    return 0.05 + units * (start + rounds * per_round)


def cost_kind(consumer) -> str:
    """The cost model's kind of a ``ConsumerConfig`` (see ``COST``)."""
    if consumer.group_protocol != "consumer":
        return "classic"
    return "consumer-range" if consumer.group_remote_assignor == "range" else "consumer-uniform"


@attrs.frozen
class Block:
    """One (fault, set-up, size) with its scenario file and seeds."""

    fault: str
    variant: Variant
    factor: float
    members: int
    partitions: int
    at_s: float
    path: Path
    seeds: tuple[int, ...]
    cost_s: float  # estimated seconds of one core, per seed

    def point(self) -> tuple[tuple[str, Any], ...]:
        return (
            ("fault", self.fault),
            ("variant", self.variant.key),
            ("factor", float(self.factor)),
            ("members", self.members),
            ("partitions", self.partitions),
            ("fault_at_s", float(self.at_s)),
        )


def blocks_for(
    group: Group,
    scenario_dir: Path,
    factor: float,
    keys: Sequence[str] | None,
    seeds: tuple[int, ...],
    write: bool = True,
) -> list[Block]:
    """The blocks of one size: every fault of every set-up in ``keys`` (None: all), their
    scenario files written under ``scenario_dir`` (rewritten only when they change; not at all
    without ``write``: for estimates)."""
    from sim import Scenario
    from sim.scenario.builtins import to_toml

    from ..atomic import atomic_write_text

    at_s = fault_at_s(group, factor)
    out = []
    for variant in variants(group):
        if keys is not None and variant.key not in keys:
            continue
        for fault in FAULTS:
            if fault not in variant.faults:
                continue
            data = scenario_dict(group, variant, fault, factor, at_s)
            scenario = Scenario.from_dict(data)
            path = scenario_dir / f"{data['name']}.toml"
            text = to_toml(data)
            if write and (not path.exists() or path.read_text(encoding="utf-8") != text):
                atomic_write_text(path, text)
            out.append(
                Block(
                    fault,
                    variant,
                    factor,
                    scenario.config.members,
                    sum(t.partitions for t in scenario.config.topics),
                    at_s,
                    path,
                    seeds,
                    estimated_s(
                        scenario.config.members,
                        sum(t.partitions for t in scenario.config.topics),
                        cost_kind(scenario.config.consumer),
                        scenario.config.consumer.static,
                        fault,
                        group,
                    ),
                )
            )
    return out


def specs_of(blocks: Sequence[Block], overrides: tuple[str, ...], where: str = "plan"):
    """The sweep's ``RunSpec``s of ``blocks`` (resolved: run ids, and the plan's own cost
    estimates, which order the runs and make the ETA)."""
    from ..engine.grid import RunSpec, resolve

    specs = [
        RunSpec(str(b.path.resolve()), overrides, seed, b.point())
        for b in blocks
        for seed in b.seeds
    ]
    cost = {(str(b.path.resolve()), s): b.cost_s for b in blocks for s in b.seeds}
    return [attrs.evolve(s, cost=cost[(s.scenario, s.seed)]) for s in resolve(specs, where)]


def cost_of(blocks: Sequence[Block]) -> float:
    return sum(b.cost_s * len(b.seeds) for b in blocks)
