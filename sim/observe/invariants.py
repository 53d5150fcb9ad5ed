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

from sim.observe.events import GroupConverted, OwnedReportBeforeCallback
from sim.observe.recorder import table_rows
from sim.observe.zombies import ZOMBIE_KINDS, ZombieTracker, tracker_from_rows

# the events the check that generations only increase reads
_GENERATION_KINDS = ("join_complete", "group_converted")
# every event kind the invariants read from a run's events (the zombie check's are fed to its
# tracker as the run goes)
INVARIANT_EVENT_KINDS = (*_GENERATION_KINDS, "owned_report_before_callback")

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
    zombies: ZombieTracker | None = None,
) -> tuple[list[str], dict[str, float]]:
    """(violations, hazards): the run-level invariants' violations, and Kafka's hazards counted
    (see the module docstring): ``kafka_hazard_double_ownership_partition_s`` (partition-seconds
    two members owned a partition at once through the hazard) and
    ``kafka_hazard_records_processed_twice`` (records both processed meanwhile, with the topics'
    production ``rates``). ``zombies``: the run's ``ZombieTracker`` when it was fed as the run went
    (``Recorder.zombies``); None reads the zombie-check events from ``events_t``."""
    out: list[str] = []
    cols = ["t", "kind", "member", "generation", "detail"]
    if zombies is None:
        zombies = tracker_from_rows(table_rows(events_t, cols, ZOMBIE_KINDS))
    events = table_rows(events_t, cols, _GENERATION_KINDS + _Reports.KINDS)
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
