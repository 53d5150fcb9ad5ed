"""The inputs of ``calibration/server_assignors_java.csv``, built exactly as its README says.

Each CSV row names an assignor, a member count, a topic count, a total partition count, a
subscription type and a scenario; ``calibration_input(row)`` rebuilds the ``GroupSpec`` and topic
metadata Kafka's assignor was timed on:

- topics ``topic-0`` ... with ``partitions // topics`` partitions each (Kafka's JMH
  ``ServerSideAssignorBenchmark`` computes ``members * ratio / topics`` in integers);
- members ``member0`` ... put into the coordinator's ``HashMap`` in that order (``newMember``
  last); ``HOMOGENEOUS``: every member subscribes to every topic; ``HETEROGENEOUS``: 5 buckets of
  ``ceil(n / 5)`` consecutive members, bucket ``b`` subscribing to the ``b``-th slice of
  ``ceil(topics / 5)`` consecutive topics (``AssignorBenchmarkUtils.createHeterogeneousBucketedMembers``);
- ``fresh``: no member has a target; ``join``: ``members - 1`` members (bucketed as such) hold the
  assignor's own fresh result and ``newMember`` joins, subscribed like ``member<members - 2>``
  (every topic when homogeneous); ``leave``: every member holds the fresh result of all
  ``members`` and ``member<members // 2>`` is gone.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from pathlib import Path

import attrs

from assignors.server import GroupAssignment, GroupMembers, GroupSpec, get_server_assignor
from assignors.server.kafka_time import ServerWork

CSV = Path(__file__).resolve().parents[2] / "calibration" / "server_assignors_java.csv"
BUCKETS = 5  # ServerSideAssignorBenchmark.MAX_BUCKET_COUNT
NEW_MEMBER = "newMember"


@attrs.frozen
class Row:
    """One row of the CSV."""

    assignor: str
    members: int
    topics: int
    partitions: int
    subscription_type: str
    scenario: str
    median_ms: float

    @property
    def name(self) -> str:
        return (
            f"{self.assignor}-{self.members}m-{self.topics}t-{self.partitions}p-"
            f"{self.subscription_type.lower()[:6]}-{self.scenario}"
        )


def rows() -> Iterator[Row]:
    with CSV.open(newline="") as f:
        for r in csv.DictReader(f):
            yield Row(
                r["assignor"],
                int(r["members"]),
                int(r["topics"]),
                int(r["partitions"]),
                r["subscription_type"],
                r["scenario"],
                float(r["median_ms"]),
            )


def topic_names(topics: int) -> list[str]:
    return [f"topic-{i}" for i in range(topics)]


def subscriptions(members: int, topics: int, homogeneous: bool) -> dict[str, frozenset[str]]:
    """``member0`` ... ``member<members - 1>`` and their subscriptions."""
    names = topic_names(topics)
    if homogeneous:
        every = frozenset(names)
        return {f"member{i}": every for i in range(members)}
    buckets = min(BUCKETS, members)
    per_bucket_topics = math.ceil(topics / buckets)
    per_bucket_members = math.ceil(members / buckets)
    out: dict[str, frozenset[str]] = {}
    for b in range(buckets):
        subscribed = frozenset(names[b * per_bucket_topics : (b + 1) * per_bucket_topics])
        for i in range(b * per_bucket_members, min((b + 1) * per_bucket_members, members)):
            out[f"member{i}"] = subscribed
    return out


def _put_order(member_id: str) -> int:
    # the order the members went into the coordinator's HashMap: member0, member1, ..., newMember
    return 1 << 40 if member_id == NEW_MEMBER else int(member_id.removeprefix("member"))


def group_members(subs: dict[str, frozenset[str]]) -> GroupMembers:
    members = GroupMembers(tie=_put_order)
    for mid, topics in subs.items():
        members.put(mid, topics)
    return members


@attrs.frozen
class CalibrationInput:
    """What the timed ``assign`` call was given (and the fresh result the previous target came
    from, for ``join`` and ``leave``)."""

    row: Row
    members: GroupMembers
    spec: GroupSpec
    partitions_per_topic: dict[str, int]
    previous: GroupAssignment | None


ASSIGNORS = ("range", "uniform")
SCENARIOS = ("fresh", "join", "leave")


def kafka_works(row: Row) -> dict[tuple[str, str], ServerWork]:
    """What Kafka's assignors do in each scenario of the row's group: ``(assignor, scenario)``
    -> ``ServerWork``, on the inputs ``calibration_input`` builds, each group built once (for a
    homogeneous group the fresh and the leave inputs share one ``GroupMembers``, one member apart,
    and the join's members are the same less two, plus one; a heterogeneous group buckets
    ``members - 1`` members afresh for the join)."""
    if row.subscription_type != "HOMOGENEOUS":
        return {
            (a, s): _work(calibration_input(attrs.evolve(row, assignor=a, scenario=s)))
            for a in ASSIGNORS
            for s in SCENARIOS
        }
    n = row.members
    names = topic_names(row.topics)
    counts = dict.fromkeys(names, row.partitions // row.topics)
    every = frozenset(names)
    members = group_members(subscriptions(n, row.topics, True))
    out: dict[tuple[str, str], ServerWork] = {}

    def assign(a: str, spec: GroupSpec) -> GroupAssignment:
        return get_server_assignor(a).assign(spec, counts)

    fresh = {a: assign(a, GroupSpec.from_members(members)) for a in ASSIGNORS}
    members.remove(f"member{n // 2}")
    for a in ASSIGNORS:
        out[a, "fresh"] = _known(fresh[a])
        out[a, "leave"] = _known(assign(a, GroupSpec.from_members(members, fresh[a])))
    # join: member0 .. member<n - 2> hold their fresh target, then newMember joins
    members.remove(f"member{n - 1}")
    if n // 2 != n - 1:
        members.put(f"member{n // 2}", every)
    before = {a: assign(a, GroupSpec.from_members(members)) for a in ASSIGNORS}
    members.put(NEW_MEMBER, every)
    for a in ASSIGNORS:
        out[a, "join"] = _known(assign(a, GroupSpec.from_members(members, before[a])))
    return out


def _known(result: GroupAssignment) -> ServerWork:
    assert result.kafka_work is not None
    return result.kafka_work


def _work(ci: CalibrationInput) -> ServerWork:
    return _known(get_server_assignor(ci.row.assignor).assign(ci.spec, ci.partitions_per_topic))


def calibration_input(row: Row) -> CalibrationInput:
    homogeneous = row.subscription_type == "HOMOGENEOUS"
    names = topic_names(row.topics)
    counts = dict.fromkeys(names, row.partitions // row.topics)
    assignor = get_server_assignor(row.assignor)
    if row.scenario == "fresh":
        members = group_members(subscriptions(row.members, row.topics, homogeneous))
        return CalibrationInput(row, members, GroupSpec.from_members(members), counts, None)
    if row.scenario == "join":
        subs = subscriptions(row.members - 1, row.topics, homogeneous)
        members = group_members(subs)
        previous = assignor.assign(GroupSpec.from_members(members), counts)
        joiner = frozenset(names) if homogeneous else subs[f"member{row.members - 2}"]
        members.put(NEW_MEMBER, joiner)
    elif row.scenario == "leave":
        members = group_members(subscriptions(row.members, row.topics, homogeneous))
        previous = assignor.assign(GroupSpec.from_members(members), counts)
        members.remove(f"member{row.members // 2}")
    else:
        raise ValueError(f"scenario {row.scenario!r}")
    spec = GroupSpec.from_members(members, previous)
    return CalibrationInput(row, members, spec, counts, previous)
