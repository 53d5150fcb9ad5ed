"""Invariants checked after every run, from its events and intervals (the cores check the
per-round ones while running: duplicate assignment in a generation, cooperative hand-over,
generations going back).

- no partition is owned by two members at once unless one of them is a zombie (removed by the
  coordinator, or left out of the group's current generation, and not yet aware of it); double
  processing happens only with a zombie;
- the coordinator's generations only increase;
- every partition is owned by a live processing member once the last fault is over (the run
  ended settled).

Kafka's hazards are told apart from violations: what Kafka's own client and coordinator do, which
a faithful run must reproduce, though it breaks the rule above. One is modelled:
``assigned-callback report`` (issue 34): a consumer-protocol member sends a full heartbeat while
onPartitionsAssigned runs, reporting ``currentAssignment`` (AbstractMembershipManager updates it
only once the callbacks have run), which leaves out partitions it already processes; the
coordinator takes them as released and gives them to another member, and the two own (and
process) them at once until the first member's next reconciliation revokes them. An overlap
whose earlier owner sent such a report for the partition while owning it (the client's
``owned_report_before_callback`` event) is that hazard: it is counted
(``check_run_with_hazards``), not reported as a violation.
"""

from __future__ import annotations

import bisect
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sim.observe.events import DOWNGRADE, GroupConverted, OwnedReportBeforeCallback, member_id_of
from sim.observe.recorder import table_rows

# The run-level violation of a run that ended unsettled; a sweep that expects a run not to settle
# (a bounded run of a group that loops) tells it from the others by this prefix.
NOT_SETTLED = "the group did not settle after the last timeline action"


class _Reports:
    """When each client reported owning less than it processed (``owned_report_before_callback``):
    (client, topic, partition) -> the instants, ascending."""

    KINDS = ("owned_report_before_callback",)

    def __init__(self, events: list[tuple]):
        self.at: dict[tuple[str, str, int], list[float]] = defaultdict(list)
        for t, kind, member, _gen, detail in events:
            if kind != "owned_report_before_callback" or not member:
                continue
            report = OwnedReportBeforeCallback.decode(detail)
            if report is not None:
                for topic, partition in report.partitions:
                    self.at[(member, topic, partition)].append(t)

    def __bool__(self) -> bool:
        return bool(self.at)

    def reported(self, client: str, topic: str, partition: int, since: float, until: float) -> bool:
        """Whether ``client`` left the partition out of a report in ``[since, until]``."""
        times = self.at.get((client, topic, partition))
        if not times:
            return False
        i = bisect.bisect_left(times, since)
        return i < len(times) and times[i] <= until


class _Zombies:
    """Answers "was this client a zombie at time t?" from the events.

    A zombie holds a stale generation without knowing it (KIP-341): the coordinator removed or
    fenced the member id it last synced with (after that id last joined: under the consumer
    protocol a client rejoins under its own id), or the group completed a generation that the
    client never joined (a static member that missed the join barrier stays in the group but is
    left out of the new generation). The second rule is the classic protocol's: it applies to a
    client whose last assignment came from SyncGroup (a group that migrates between the
    protocols has consumer-protocol clients, which never join a classic generation). A conversion
    into a classic group counts as a completed generation (``sim.coordinator.migration``)."""

    # the events it reads (check_run hands it only these)
    KINDS = (
        "sync_received",
        "assignment_received",
        "member_added",
        "member_removed",
        "member_fenced",
        "join_received",
        "join_complete",
        "group_converted",
    )

    def __init__(self, events: list[tuple]):
        # (t, event index) orders events of one instant as they were recorded
        self.syncs: dict[str, list[tuple[float, int, str]]] = defaultdict(list)
        self.classic_sync: dict[tuple[str, int], bool] = {}  # (client, event index): from SyncGroup
        self.added: dict[str, list[tuple[float, int]]] = defaultdict(list)
        self.removed: dict[str, list[tuple[float, int]]] = defaultdict(list)
        self.joined: dict[str, list[tuple[float, int]]] = defaultdict(list)
        self.completed: list[tuple[float, int]] = []
        for i, (t, kind, member, gen, detail) in enumerate(events):
            if kind in ("sync_received", "assignment_received") and member:
                member_id = member_id_of(detail)
                if member_id is not None:
                    self.syncs[member].append((t, i, member_id))
                    self.classic_sync[(member, i)] = kind == "sync_received"
            elif kind in ("member_removed", "member_fenced", "member_added"):
                member_id = member_id_of(detail)
                if member_id is not None:
                    (self.added if kind == "member_added" else self.removed)[member_id].append(
                        (t, i)
                    )
            elif kind == "join_received" and member:
                self.joined[member].append((t, gen))
            elif kind == "join_complete" or (
                kind == "group_converted" and GroupConverted.decode(detail).direction == DOWNGRADE
            ):
                # a downgrade makes a classic generation (the group epoch) that no member joined:
                # a classic member behind it gets ILLEGAL_GENERATION from now on
                self.completed.append((t, gen))

    def zombie(self, client: str, t: float) -> bool:
        syncs = self.syncs.get(client, [])
        i = bisect.bisect_right(syncs, (t, float("inf"))) - 1
        if i < 0:
            return False
        synced_t, synced_i, member_id = syncs[i]
        # the removals of that member id since it last joined before the sync
        adds = self.added.get(member_id, [])
        k = bisect.bisect_left(adds, (synced_t, synced_i)) - 1
        since = adds[k] if k >= 0 else (float("-inf"), -1)
        removals = self.removed.get(member_id, [])
        r = bisect.bisect_right(removals, since)
        if r < len(removals) and removals[r][0] <= t:
            return True
        if not self.classic_sync[(client, synced_i)]:
            return False
        j = bisect.bisect_right(self.completed, (t, float("inf"))) - 1
        if j < 0:
            return False
        joins = self.joined.get(client, [])
        k = bisect.bisect_right(joins, (t, float("inf"))) - 1
        return k < 0 or joins[k][1] < self.completed[j][1]


def _overlapping(owned: pa.Table) -> set[tuple[str, int]]:
    """The partitions with two ``owned`` rows that overlap in time, found on arrays. Sorted by
    start, a partition has an overlapping pair exactly when some row starts before the end of the
    row just before it (if rows i < j overlap, so do i and i + 1: s[i+1] <= s[j] < e[i])."""
    if owned.num_rows < 2:
        return set()
    topic = owned.column("topic").combine_chunks().dictionary_encode()
    topic_ix = topic.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    partition = owned.column("partition").to_numpy(zero_copy_only=False).astype(np.int64)
    start = owned.column("start").to_numpy()
    end = owned.column("end").to_numpy()
    order = np.lexsort((start, partition, topic_ix))
    same = (topic_ix[order][1:] == topic_ix[order][:-1]) & (
        partition[order][1:] == partition[order][:-1]
    )
    hit = order[1:][same & (start[order][1:] < end[order][:-1])]
    names = topic.dictionary.to_pylist()
    return {
        (names[t], p) for t, p in zip(topic_ix[hit].tolist(), partition[hit].tolist(), strict=True)
    }


def check_run(
    events_t: pa.Table, intervals_t: pa.Table, *, settled: bool, cooperative: bool
) -> list[str]:
    """Violations (strings) of the run-level invariants."""
    return check_run_with_hazards(events_t, intervals_t, settled=settled, cooperative=cooperative)[
        0
    ]


def check_run_with_hazards(
    events_t: pa.Table,
    intervals_t: pa.Table,
    *,
    settled: bool,
    cooperative: bool,
    rates: dict[str, float] | None = None,
) -> tuple[list[str], dict[str, float]]:
    """(violations, hazards): the run-level invariants' violations, and Kafka's hazards counted
    (see the module docstring): ``kafka_hazard_double_ownership_partition_s`` (partition-seconds
    two members owned a partition at once through the hazard) and
    ``kafka_hazard_records_processed_twice`` (records both processed meanwhile, with the topics'
    production ``rates``)."""
    out: list[str] = []
    cols = ["t", "kind", "member", "generation", "detail"]
    events = table_rows(events_t, cols, _Zombies.KINDS + _Reports.KINDS)
    zombies = _Zombies(events)
    reports = _Reports(events)
    owned_s = 0.0
    twice = 0.0
    rates = rates or {}

    def owner_since(member: str, topic: str, partition: int, t: float) -> float | None:
        """The start of ``member``'s owned row of the partition that covers ``t``."""
        for s0, e0, mm in owned_rows.get((topic, partition), ()):
            if mm == member and s0 <= t < e0:
                return s0
        return None

    def hazard(members, topic: str, partition: int, t: float) -> bool:
        if not reports:
            return False
        for mm in members:
            since = owner_since(mm, topic, partition, t)
            if since is not None and reports.reported(mm, topic, partition, since, t):
                return True
        return False

    last_gen = None
    for t, kind, _m, gen, detail in events:
        if kind == "join_complete":
            if last_gen is not None and gen <= last_gen:
                out.append(f"t={t:.6f}: generation went from {last_gen} to {gen}")
            last_gen = gen
        elif kind == "group_converted" and GroupConverted.decode(detail).rest.startswith("empty"):
            # a group of the other type made in place of an empty one is a new group: Kafka
            # deletes the empty group and the new one counts its generations from the start
            last_gen = None

    icol = ["kind", "member", "topic", "partition", "start", "end"]
    # Two owners at once: only the partitions whose owned rows overlap at all need the pairwise
    # look (with zombies) below; the table is sorted by partition, so they come in its order.
    owned_t = intervals_t.filter(pc.equal(intervals_t.column("kind"), "owned"))
    suspects = _overlapping(owned_t)
    owned: dict[tuple, list] = defaultdict(list)
    if suspects:
        for _kind, member, topic, partition, s, e in table_rows(owned_t, icol, ("owned",)):
            if (topic, partition) in suspects:
                owned[(topic, partition)].append((s, e, member))
    owned_rows = owned
    for _kind, member, topic, partition, s, e in table_rows(
        intervals_t, icol, ("double_processing",)
    ):
        members = (member or "").split(",")
        if any(zombies.zombie(mm, s) for mm in members):
            continue
        if hazard(members, topic, partition, s):
            twice += (e - s) * rates.get(topic, 0.0)
        else:
            out.append(
                f"t={s:.6f}: {topic}-{partition} processed by {member} at once and none is a zombie"
            )
    for (topic, partition), rows in owned.items():
        if len(rows) < 2:
            continue
        rows.sort()
        for i, (_s, e, member) in enumerate(rows):
            for s2, _e2, member2 in rows[i + 1 :]:
                if s2 >= e:
                    break
                if member2 == member:
                    continue
                if zombies.zombie(member, s2) or zombies.zombie(member2, s2):
                    continue
                if hazard((member, member2), topic, partition, s2):
                    owned_s += min(e, _e2) - s2
                else:
                    out.append(
                        f"t={s2:.6f}: {topic}-{partition} owned by {member} and {member2} at once "
                        f"({'cooperative' if cooperative else 'eager'} group)"
                    )
    if not settled:
        out.append(
            f"{NOT_SETTLED} "
            "(some partition never got a live processing owner, or a rebalance never ended)"
        )
    return out, {
        "kafka_hazard_double_ownership_partition_s": owned_s,
        "kafka_hazard_records_processed_twice": twice,
    }
