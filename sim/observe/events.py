"""The events a run records: their kinds, and the typed details that what reads events decodes.

``EventKind`` names every kind of event the cores, the director and the runner record (its
values are the strings the events table holds). An event's ``detail`` is text, kept as it is in
``events.parquet``; where something reads a value back from it (the metrics, the invariants, the
sweep's aggregation), the kind has a typed detail here with one ``encode`` (what the emitter
records) and one ``decode`` (what the readers call), so a change of format is made in one place
and nowhere else parses a detail. These details and their text are the simulator's own; Kafka
records no such events.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple


class EventKind(StrEnum):
    """Every kind of event a run records (``events.kind``)."""

    # the timeline and the run (the director, the runner)
    TRIGGER = "trigger"
    WATCH_DROPPED = "watch_dropped"
    SETTLED = "settled"
    UNSETTLED = "unsettled"
    # the coordinators
    REBALANCE_START = "rebalance_start"
    JOIN_RECEIVED = "join_received"
    JOIN_COMPLETE = "join_complete"
    JOIN_REJECTED = "join_rejected"
    STABLE = "stable"
    EMPTY = "empty"
    MEMBER_ADDED = "member_added"
    MEMBER_REMOVED = "member_removed"
    MEMBER_FENCED = "member_fenced"
    MEMBER_RECONCILED = "member_reconciled"
    MEMBER_STABLE = "member_stable"
    STATIC_REJOIN = "static_rejoin"
    STATIC_LEAVE = "static_leave"
    TARGET_ASSIGNMENT = "target_assignment"
    FENCED_EPOCH = "fenced_epoch"
    GROUP_CONVERTED = "group_converted"
    CONVERSION_REFUSED = "conversion_refused"
    CLASSIC_JOIN = "classic_join"
    # the clients
    START = "start"
    CLOSE = "close"
    CRASH = "crash"
    PAUSE = "pause"
    RESUME = "resume"
    FATAL = "fatal"
    JOIN_PREPARE = "join_prepare"
    JOIN_SENT = "join_sent"
    JOIN_FAILED = "join_failed"
    SYNC_RECEIVED = "sync_received"
    SYNC_FAILED = "sync_failed"
    SYNC_DISCARDED = "sync_discarded"
    ASSIGNMENT_COMPUTED = "assignment_computed"
    ASSIGNMENT_RECEIVED = "assignment_received"
    ASSIGNMENT_MISMATCH = "assignment_mismatch"
    ASSIGN = "assign"
    REVOKE = "revoke"
    RECONCILE = "reconcile"
    PARTITIONS_LOST = "partitions_lost"
    REBALANCE_LEARNED = "rebalance_learned"
    FENCED_LEARNED = "fenced_learned"
    GENERATION_RESET = "generation_reset"
    HEARTBEAT_FAILED = "heartbeat_failed"
    LEAVE_GROUP = "leave_group"
    POLL_TIMEOUT = "poll_timeout"
    METADATA_CHANGED = "metadata_changed"
    COMMIT_FAILED = "commit_failed"
    OFFSET_FETCH_FAILED = "offset_fetch_failed"
    OFFSET_FETCH_DROPPED = "offset_fetch_dropped"
    FIRST_RECORD = "first_record"
    REPROCESSED = "reprocessed"
    OWNED_REPORT_BEFORE_CALLBACK = "owned_report_before_callback"


def _fields(detail: str | None) -> dict[str, str]:
    """The ``key=value`` words of a detail (words without ``=`` are left out)."""
    out: dict[str, str] = {}
    for word in (detail or "").split():
        key, eq, value = word.partition("=")
        if eq:
            out.setdefault(key, value)
    return out


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _int(text: str | None) -> int | None:
    if text is None or not text.isdigit():
        return None
    return int(text)


class Trigger(NamedTuple):
    """``trigger``: the action's fields as ``key=value`` (``Action.describe``); the readers need
    how long a fault lasts (``duration_s``, None for an action without one)."""

    duration_s: float | None

    @staticmethod
    def decode(detail: str | None) -> Trigger:
        return Trigger(_float(_fields(detail).get("duration_s")))


class Revoke(NamedTuple):
    """``revoke``: how many partitions a client gives up (``count``), and why (``eager``, ``cooperative``,
    ``consumer``, ``leaving``, ``topic deleted``)."""

    partitions: int
    why: str

    def encode(self) -> str:
        return f"count={self.partitions} {self.why}"

    @staticmethod
    def decode(detail: str | None) -> Revoke | None:
        count, _, why = (detail or "").partition(" ")
        n = _int(count.removeprefix("count=")) if count.startswith("count=") else None
        return None if n is None else Revoke(n, why)


class Reprocessed(NamedTuple):
    """``reprocessed``: records a new owner processes again (``records``, over ``partitions``
    produced at ``rate`` records/s in all), by the cause of the gap (``sim.observe.metrics``)."""

    records: float
    partitions: int
    rate: float
    cause: str

    def encode(self) -> str:
        return (
            f"records={self.records:.6f} partitions={self.partitions} "
            f"rate={self.rate:.6f} cause={self.cause}"
        )

    @staticmethod
    def decode(detail: str | None) -> Reprocessed | None:
        f = _fields(detail)
        records, n, rate = (
            _float(f.get("records")),
            _int(f.get("partitions")),
            _float(f.get("rate")),
        )
        cause = f.get("cause")
        if records is None or n is None or rate is None or not cause:
            return None
        return Reprocessed(records, n, rate, cause)


class FirstRecord(NamedTuple):
    """``first_record``: the first batch of ``partitions`` newly assigned ones (``count``), ``after_s``
    seconds after the assignment."""

    partitions: int
    after_s: float

    def encode(self) -> str:
        return f"count={self.partitions} after_s={self.after_s:.6f}"

    @staticmethod
    def decode(detail: str | None) -> FirstRecord | None:
        f = _fields(detail)
        count, after_s = _int(f.get("count")), _float(f.get("after_s"))
        return None if count is None or after_s is None else FirstRecord(count, after_s)


# what the sweep's aggregation reads ``AssignmentComputed.cost_s`` with (Spark's
# ``regexp_extract``, group 1), kept beside its ``encode`` so that the two change together
ASSIGNMENT_COST_PATTERN = r"cost=([0-9.eE+-]+)s"
# what the capacity plan's limits read with Spark (``regexp_extract``, group 1): the partition
# count of ``assign``, ``revoke`` and ``partitions_lost`` (``Revoke.encode``; the clients write
# ``count=N`` first for all three), and the reason of ``member_removed`` (``member_id=ID
# reason=WHY``, written by both coordinators)
COUNT_PATTERN = r"count=(\d+)"
REMOVAL_REASON_PATTERN = r"reason=(\w+)"


class AssignmentComputed(NamedTuple):
    """``assignment_computed`` (the classic leader) and ``target_assignment`` (the consumer
    group's coordinator): the assignor, the members it assigned, the group epoch (the consumer
    protocol's only) and the simulated time it took (``cost_s``)."""

    assignor: str
    members: int
    epoch: int | None
    cost_s: float

    def encode(self) -> str:
        epoch = "" if self.epoch is None else f" epoch={self.epoch}"
        return f"assignor={self.assignor} members={self.members}{epoch} cost={self.cost_s:.6f}s"

    @staticmethod
    def decode(detail: str | None) -> AssignmentComputed | None:
        f = _fields(detail)
        members, cost = _int(f.get("members")), _float(f.get("cost", "").removesuffix("s"))
        if members is None or cost is None:
            return None
        epoch = f.get("epoch")
        return AssignmentComputed(f.get("assignor", ""), members, _int(epoch), cost)


class OwnedReportBeforeCallback(NamedTuple):
    """``owned_report_before_callback``: the partitions (topic, partition) a consumer-protocol
    member processes but left out of the owned partitions its heartbeat reported."""

    member_id: str
    partitions: tuple[tuple[str, int], ...]

    def encode(self) -> str:
        names = ",".join(f"{topic}-{partition}" for topic, partition in self.partitions)
        return f"member_id={self.member_id} partitions={names}"

    @staticmethod
    def decode(detail: str | None) -> OwnedReportBeforeCallback | None:
        f = _fields(detail)
        names = f.get("partitions")
        if not names:
            return None
        parts = []
        for name in names.split(","):
            topic, _, partition = name.rpartition("-")
            if not partition.isdigit():
                return None
            parts.append((topic, int(partition)))
        return OwnedReportBeforeCallback(f.get("member_id", ""), tuple(parts))


# the kinds whose detail names the member id they are about, as ``member_id=...``
MEMBER_ID_KINDS = (
    EventKind.SYNC_RECEIVED,
    EventKind.ASSIGNMENT_RECEIVED,
    EventKind.MEMBER_ADDED,
    EventKind.MEMBER_REMOVED,
    EventKind.MEMBER_FENCED,
)


def member_id_of(detail: str | None) -> str | None:
    """The member id an event of ``MEMBER_ID_KINDS`` is about."""
    return _fields(detail).get("member_id")


UPGRADE = "classic->consumer"  # GroupConverted.direction
DOWNGRADE = "consumer->classic"


class GroupConverted(NamedTuple):
    """``group_converted``: the direction of an online migration (``classic->consumer`` or
    ``consumer->classic``), then the group's figures after it, as text."""

    direction: str
    rest: str

    def encode(self) -> str:
        return f"{self.direction} {self.rest}"

    @staticmethod
    def decode(detail: str | None) -> GroupConverted:
        direction, _, rest = (detail or "").partition(" ")
        return GroupConverted(direction, rest)
