"""Random scenarios with fault schedules, drawn from any source of choices.

One definition serves two masters: the property tests draw through Hypothesis (which shrinks a
failure to a small example; see ``tests/strategies.py``) and ``rebalance-sim soak`` draws through
a seeded ``random.Random`` (schedule ``i`` of seed ``S`` is the same on every machine, so a
failure replays from two numbers). A ``Chooser`` is the only thing the two have in common.

What is drawn: a small group (2-5 members, 1-2 topics), the group protocol and its settings
(``GROUP_PROTOCOLS``: the classic protocol with one of Kafka's assignors or an
eager-to-cooperative mix, or the consumer protocol of KIP-848 with the broker's default assignor
or one a member asks for, or a mixed group that migrates between the two: KIP-848's online
migration; static or dynamic members), client timeouts and costs, the network,
the leader's assignment cost, and a timeline of faults: crashes, pauses shorter and longer than
the session timeout and max.poll.interval, joins and leaves (sometimes at the same instant),
restarts, one- and two-way network partitions, delay spikes, windows of packet loss, and leader
crashes timed inside the JoinGroup or SyncGroup phase of a rebalance.

These are modelling choices of ours (Kafka defines no fault distribution): small groups make
races between members and the coordinator likely, which is where protocol bugs live.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from sim.config import KAFKA_VERSIONS

T = TypeVar("T")


class Chooser(Protocol):
    """A source of choices: Hypothesis's ``draw`` or a seeded ``random.Random``."""

    def choice(self, options: Sequence[T]) -> T: ...
    def integer(self, lo: int, hi: int) -> int: ...  # lo..hi inclusive
    def real(self, lo: float, hi: float) -> float: ...


class RandomChooser:
    """Choices from a ``random.Random`` (deterministic for a given seed)."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def choice(self, options: Sequence[T]) -> T:
        return options[self.rng.randrange(len(options))]

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def real(self, lo: float, hi: float) -> float:
        return self.rng.uniform(lo, hi)


# Assignment strategies of the classic protocol: every assignor alone, and the mixed list a group
# has midway through an eager-to-cooperative upgrade (KIP-429's two rolling bounces).
CLASSIC_STRATEGIES = (
    ("range",),
    ("roundrobin",),
    ("sticky",),
    ("cooperative-sticky",),
    ("stream-join-sticky",),
    ("range", "cooperative-sticky"),
)
FAULT_KINDS = (
    "crash",
    "pause",
    "add_members",
    "remove_members",
    "join_and_leave",
    "rolling_restart",
    "network_partition",
    "delay_spike",
    "packet_loss",
    "crash_leader",
)


def _classic(c: Chooser, consumer: dict, strategies: Sequence[tuple[str, ...]]) -> None:
    """The classic group protocol (JoinGroup/SyncGroup): EAGER or COOPERATIVE by assignor."""
    consumer["partition_assignment_strategy"] = list(c.choice(strategies))


def _consumer(c: Chooser, consumer: dict, strategies: Sequence[tuple[str, ...]]) -> None:
    """The consumer group protocol (KIP-848): the coordinator assigns, with the broker's default
    server-side assignor or the one the members ask for (``group.remote.assignor``)."""
    consumer["group_protocol"] = "consumer"
    remote = c.choice([None, "uniform", "range"])
    if remote is not None:
        consumer["group_remote_assignor"] = remote


def _mixed(c: Chooser, consumer: dict, strategies: Sequence[tuple[str, ...]]) -> None:
    """A group of both protocols (KIP-848's online migration): the classic members' assignors,
    and the protocol the group starts with (``migration_plan`` adds the members of the other
    one and the rolling restarts that move the group between them)."""
    _classic(c, consumer, strategies)
    consumer["group_protocol"] = c.choice(["classic", "consumer"])


# group protocol name -> function that fills the consumer table for it. A new protocol adds an
# entry here; the soak and the property tests then draw it too.
GROUP_PROTOCOLS: dict[str, Callable[[Chooser, dict, Sequence[tuple[str, ...]]], None]] = {
    "classic": _classic,
    "consumer": _consumer,
    "mixed": _mixed,
}


def migration_plan(
    c: Chooser, members: int, base: str, start_s: float = 10.0, end_s: float = 200.0
) -> tuple[dict[str, dict], list[dict]]:
    """Member overrides and timeline actions of a mixed group: some initial members run the
    other protocol from the start, and one or two rolling restarts of the whole group switch
    every member's protocol (an upgrade, a downgrade, or one then the other), among the faults."""
    other = "consumer" if base == "classic" else "classic"
    names = [f"c{i:03d}" for i in range(members)]
    overrides = {n: {"group_protocol": other} for n in names if c.integer(0, 3) == 0}
    moves = c.choice([[other], [base], [other, base], [base, other]])
    actions = []
    at = round(c.real(start_s, end_s / 2), 3)
    for to in moves:
        batch_size = c.choice([1, 2])
        down_s = c.choice([1.0, 5.0])
        gap_s = c.choice([5.0, 20.0])
        restart = {
            "action": "rolling_restart",
            "at_s": at,
            "group_protocol": to,
            "batch_size": batch_size,
            "down_s": down_s,
            "gap_s": gap_s,
            "graceful": c.choice([True, True, False]),
        }
        actions.append(restart)
        at = round(at + c.real(0.0, (members + 2) * (down_s + gap_s)), 3)
    return overrides, actions


def fault_schedule(
    c: Chooser,
    members: int,
    session_s: float,
    poll_s: float,
    max_faults: int = 6,
    start_s: float = 10.0,
    end_s: float = 200.0,
) -> list[dict]:
    """Timeline actions on the initial members c000..c{members-1} (see the module docstring)."""
    names = [f"c{i:03d}" for i in range(members)]
    actions: list[dict] = []
    for _ in range(c.integer(0, max_faults)):
        # a quarter of the faults reuse the instant of an earlier one (ties in the kernel)
        if actions and c.integer(0, 3) == 0:
            at = c.choice([a["at_s"] for a in actions])
        else:
            at = round(c.real(start_s, end_s), 3)
        kind = c.choice(FAULT_KINDS)
        member = c.choice(names)
        if kind == "crash":
            actions.append({"action": "crash", "at_s": at, "member": member})
        elif kind == "pause":
            duration = c.choice([0.5, session_s * 0.5, session_s + 2.0, poll_s + 2.0])
            actions.append(
                {"action": "pause", "at_s": at, "member": member, "duration_s": duration}
            )
        elif kind == "add_members":
            actions.append({"action": "add_members", "at_s": at, "count": c.integer(1, 2)})
        elif kind == "remove_members":
            actions.append({"action": "remove_members", "at_s": at, "members": [member]})
        elif kind == "join_and_leave":
            actions.append({"action": "add_members", "at_s": at})
            actions.append({"action": "remove_members", "at_s": at, "members": [member]})
        elif kind == "rolling_restart":
            actions.append(
                {
                    "action": "rolling_restart",
                    "at_s": at,
                    "members": [member],
                    "down_s": c.choice([1.0, session_s + 5.0]),
                    "graceful": c.choice([False, True]),
                }
            )
        elif kind == "network_partition":
            actions.append(
                {
                    "action": "network_partition",
                    "at_s": at,
                    "member": member,
                    "duration_s": c.choice([2.0, session_s + 5.0]),
                    "direction": c.choice(["both", "to_coordinator", "from_coordinator"]),
                }
            )
        elif kind == "delay_spike":
            actions.append(
                {
                    "action": "delay_spike",
                    "at_s": at,
                    "duration_s": c.choice([1.0, 8.0]),
                    "extra_ms": c.choice([50.0, 2000.0]),
                    "member": c.choice([None, member]),
                }
            )
        elif kind == "packet_loss":
            actions.append(
                {
                    "action": "packet_loss",
                    "at_s": at,
                    "duration_s": c.choice([5.0, 60.0]),
                    "probability": c.choice([0.05, 0.2]),
                    "member": c.choice([None, member]),
                }
            )
        else:
            actions.append({"action": "add_members", "at_s": at})  # starts a rebalance
            actions.append(
                {
                    "action": "crash_leader",
                    "at_s": at,
                    "phase": c.choice(["join", "sync"]),
                    "delay_s": c.choice([0.0, 0.0005, 0.001, 0.002]),
                }
            )
    return [{k: v for k, v in a.items() if v is not None} for a in actions]


def faulty_scenario(
    c: Chooser,
    max_faults: int = 6,
    protocols: Sequence[str] | None = None,
    strategies: Sequence[tuple[str, ...]] = CLASSIC_STRATEGIES,
    name: str = "faults",
) -> dict[str, Any]:
    """A scenario table (``Scenario.from_dict`` input) with random settings and faults."""
    members = c.integer(2, 5)
    session_ms = c.choice([10000, 45000])
    poll_ms = c.choice([30000, 60000, 300000])
    topics = [{"name": "t", "partitions": c.integer(1, 10), "rate": c.choice([10.0, 200.0])}]
    if c.choice([False, True]):
        topics.append({"name": "u", "partitions": c.integer(0, 4), "rate": 10.0})
    consumer: dict[str, Any] = {}
    protocol = c.choice(list(protocols or GROUP_PROTOCOLS))
    GROUP_PROTOCOLS[protocol](c, consumer, strategies)
    if (
        "stream-join-sticky" in consumer.get("partition_assignment_strategy", ())
        and len(topics) > 1
    ):
        # KIP-315's assignor joins co-partitioned topics: it needs equal partition counts
        topics[1]["partitions"] = topics[0]["partitions"]
    consumer.update(
        {
            "static": c.choice([False, True]),
            "session_timeout_ms": session_ms,
            "max_poll_interval_ms": poll_ms,
            "capacity": c.choice([10000.0, 1000.0]),
            "max_poll_records": c.choice([500, 100]),
            "revoke_cost_ms": c.choice([0.0, 50.0]),
            "assign_cost_ms": c.choice([0.0, 300.0]),
            # the application's commit strategy: auto-commit half the time, else commitSync or
            # commitAsync after every poll batch
            "commit_mode": c.choice(["auto", "auto", "sync-per-batch", "async-per-batch"]),
        }
    )
    data: dict[str, Any] = {
        "name": name,
        "members": members,
        "topics": topics,
        "max_duration_s": 4000.0,
        "consumer": consumer,
        "network": {
            "latency": c.choice(
                [{"kind": "constant", "ms": 1.0}, {"kind": "lognormal", "ms": 2.0, "sigma": 1.0}]
            ),
            # loss that never ends is kept small: a lost message waits for its request
            # timeout, so heavy endless loss can keep a group rebalancing for hours
            "drop_probability": c.choice([0.0, 0.0, 0.0, 0.005]),
        },
        "assignor_cost": c.choice(["kafka", "zero", "model", "fixed:0.5"]),
        "timeline": fault_schedule(c, members, session_ms / 1000.0, poll_ms / 1000.0, max_faults),
    }
    if protocol == "mixed":
        overrides, moves = migration_plan(c, members, consumer["group_protocol"])
        if overrides:
            data["member_overrides"] = overrides
        data["timeline"] = sorted(data["timeline"] + moves, key=lambda a: a["at_s"])
    if protocol in ("consumer", "mixed"):
        # KIP-848: the session timeout is the broker's (group.consumer.session.timeout.ms), so the
        # drawn one goes there and the pauses above are timed against the timeout that applies;
        # a timeout below group.consumer.min.session.timeout.ms (45 s) needs that bound lowered
        data["group"] = {
            "consumer_session_timeout_ms": session_ms,
            "consumer_min_session_timeout_ms": min(session_ms, 45000),
        }
    # the group coordinator's release (sim.coordinator.behaviour), drawn last so that the
    # draws above stay those of a schedule drawn before there was a choice
    data["kafka_version"] = c.choice(list(KAFKA_VERSIONS))
    return data
