"""The recorder: ``events`` and ``intervals`` rows of one run, derived intervals, Parquet output.

Actors append rows as they go; rows are sorted by explicit keys at the end, so the files do not
depend on the order in which trio ran the actors. ``unassigned`` and ``double_processing``
intervals are derived once, here, from ``owned``, ``stalled`` and ``paused`` intervals: a member
processes a partition while it owns it and is neither stalled (in a rebalance callback or the
assignor) nor paused.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sim.observe.zombies import ZOMBIE_KINDS, ZombieTracker

EVENTS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("t", pa.float64()),
        ("kind", pa.string()),
        ("member", pa.string()),
        ("generation", pa.int64()),
        ("detail", pa.string()),
    ]
)

INTERVALS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("kind", pa.string()),
        ("member", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int64()),
        ("start", pa.float64()),
        ("end", pa.float64()),
    ]
)

INTERVAL_KINDS = ("owned", "unassigned", "rebalance", "paused", "stalled", "double_processing")


# Events held before they are written to a stream: a row group of the file.
STREAM_CHUNK_ROWS = 1 << 18


class EventStream:
    """An events file written as the run goes, a row group at a time, through a temporary file
    that ``close`` renames into place (``abort`` deletes it): the file is whole or absent."""

    def __init__(self, path: str, run_id: str):
        self.path = path
        self.run_id = run_id
        self._tmp = _temp_parquet_beside(path)
        self._writer: pq.ParquetWriter | None = pq.ParquetWriter(
            self._tmp, EVENTS_SCHEMA, compression="zstd", write_statistics=True
        )

    def write(self, rows: list[tuple]) -> None:
        """Rows ``(t, rank, seq, kind, member, generation, detail)`` in table order."""
        if self._writer is not None:
            self._writer.write_table(_table(rows, _EVENT_ROW, self.run_id, EVENTS_SCHEMA))

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            os.replace(self._tmp, self.path)

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if os.path.exists(self._tmp):
            os.unlink(self._tmp)


class Recorder:
    """Collects rows during a run.

    ``keep_kinds``: the kinds of event kept as rows (None: every kind). The events a run's
    metrics and invariants read are a small share of a large group's events (the classic
    protocol's JoinGroup and SyncGroup traffic is every member's in every generation), so a run
    that writes no events file keeps only those (``sim.run``'s ``record``). The events the zombie
    check reads (``sim.observe.zombies``) go to ``zombies`` as they happen, an instant at a time,
    whether they are kept or not."""

    def __init__(self, keep_kinds: frozenset[str] | None = None, stream: EventStream | None = None):
        self.events: list[tuple] = []  # (t, rank, seq, kind, member, generation, detail)
        # every event goes to ``stream`` (a file) as the run goes; ``events`` keeps ``keep_kinds``
        self._stream = stream
        self._streamed: list[tuple] = []  # the events not yet written, all before ``_stream_t``
        self._stream_t = -math.inf
        self._open: dict[tuple, float] = {}  # (kind, member, topic, partition) -> start
        self.intervals: list[tuple] = []  # (kind, member, topic, partition, start, end)
        self.violations: list[tuple[float, str]] = []
        self.processing_union: tuple[np.ndarray, np.ndarray] | None = None  # set by finish()
        self._keep_all = keep_kinds is None
        self._keep: frozenset[str] = frozenset() if keep_kinds is None else keep_kinds
        self.zombies = ZombieTracker()
        self._zombie_kinds = frozenset(ZOMBIE_KINDS)
        self._instant = -math.inf  # the instant whose zombie-check events are in ``_pending``
        self._pending: list[tuple] = []  # (rank, seq, kind, member, generation, detail)

    def event(self, t, rank, seq, kind, member, generation, detail) -> None:
        if kind in self._zombie_kinds:
            if t != self._instant:
                self._to_zombies(t)
            self._pending.append((rank, seq, kind, member, generation, detail))
        row = (t, rank, seq, kind, member, generation, detail)
        if self._stream is not None:
            if t != self._stream_t:
                # every row held is of an earlier instant: they are final, in table order once
                # sorted
                if len(self._streamed) >= STREAM_CHUNK_ROWS:
                    self.write_streamed()
                self._stream_t = t
            self._streamed.append(row)
        if self._keep_all or kind in self._keep:
            self.events.append(row)

    def write_streamed(self) -> None:
        """Write the events held for the stream (every event of the run so far)."""
        if self._stream is not None and self._streamed:
            self._streamed.sort()
            self._stream.write(self._streamed)
            self._streamed = []

    def _to_zombies(self, t: float) -> None:
        """Hand the pending instant's events to the zombie tracker in table order; ``t`` is the
        next instant."""
        if self._pending:
            self._pending.sort(key=_rank_seq)
            self.zombies.feed(self._instant, [row[2:] for row in self._pending])
            self._pending = []
        if t < self._instant:
            self.violations.append((t, f"an event at t={t} came after one at t={self._instant}"))
        self._instant = t

    def record(self, t: float, rank: int, seq: int, effect: tuple) -> None:
        """One recording effect of the actor of rank ``rank`` (``sim.wire.messages``): an
        "event" (with its sequence number ``seq``), an interval's "open" or "close", or an
        invariant "violation". The kernel's ``EffectSink.record``."""
        op = effect[0]
        if op == "event":
            self.event(t, rank, seq, effect[1], effect[2], effect[3], effect[4])
        elif op == "open":
            self.open(t, effect[1], effect[2], effect[3], effect[4])
        elif op == "close":
            self.close(t, effect[1], effect[2], effect[3], effect[4])
        elif op == "violation":
            self.violations.append((t, effect[1]))
        else:
            raise ValueError(f"unknown effect {effect!r}")

    def open_intervals(self) -> dict[tuple, float]:
        """The intervals open now: (kind, member, topic, partition) -> start."""
        return self._open

    def open(self, t, kind, member, topic, partition) -> None:
        key = (kind, member, topic, partition)
        if key in self._open:
            self.violations.append(
                (t, f"{kind} interval of {member} {topic}-{partition} opened twice")
            )
            return
        self._open[key] = t

    def close(self, t, kind, member, topic, partition) -> None:
        start = self._open.pop((kind, member, topic, partition), None)
        if start is None:
            return
        if t > start:
            self.intervals.append((kind, member, topic, partition, start, t))

    def violation(self, t, text) -> None:
        self.violations.append((t, text))

    def finish(
        self, end: float, partitions_alive: dict[tuple[str, int], tuple[float, float]]
    ) -> None:
        """Close what is still open at ``end`` and derive ``unassigned`` / ``double_processing``.

        ``partitions_alive`` maps each partition that should have had an owner to the time span
        during which it existed and was subscribed.
        """
        self._to_zombies(self._instant)
        self.write_streamed()
        for (kind, member, topic, partition), start in sorted(self._open.items(), key=_open_key):
            if end > start:
                self.intervals.append((kind, member, topic, partition, start, end))
        self._open.clear()
        spans = ProcessingSpans(self.intervals)
        # the group-wide processing union, for the metrics (from the same rows it would read back
        # from the table: building the spans once saves a pass over every owned row)
        self.processing_union = spans.union()
        self.intervals.extend(derive(self.intervals, partitions_alive, spans))

    # ---- tables

    def events_table(self, run_id: str) -> pa.Table:
        # (t, rank, seq) is unique (an actor's seq only grows), so plain tuple order is key order
        return _table(sorted(self.events), _EVENT_ROW, run_id, EVENTS_SCHEMA)

    def intervals_table(self, run_id: str) -> pa.Table:
        return _table(
            sorted(self.intervals, key=_interval_key), _INTERVAL_ROW, run_id, INTERVALS_SCHEMA
        )


# The recorder's rows as Arrow structs (converted in one pass instead of a column at a time)
_EVENT_ROW = pa.struct(
    [
        ("t", pa.float64()),
        ("rank", pa.int64()),
        ("seq", pa.int64()),
        *((f.name, f.type) for f in EVENTS_SCHEMA if f.name not in ("run_id", "t")),
    ]
)
_INTERVAL_ROW = pa.struct([(f.name, f.type) for f in INTERVALS_SCHEMA if f.name != "run_id"])


def _table(rows: list[tuple], row_type: pa.StructType, run_id: str, schema: pa.Schema) -> pa.Table:
    """``rows`` (tuples in ``row_type``'s field order) as a table of ``schema``, whose first
    column is ``run_id`` on every row."""
    columns = (
        pa.array(rows, type=row_type).flatten()
        if rows
        else [pa.array([], f.type) for f in row_type]
    )
    by_name = {f.name: c for f, c in zip(row_type, columns, strict=True)}
    by_name["run_id"] = pa.array([run_id] * len(rows), pa.string())
    return pa.table([by_name[f.name] for f in schema], schema=schema)


def table_rows(table: pa.Table, columns, kinds: tuple[str, ...] | None = None) -> list[tuple]:
    """The rows of an events or intervals ``table`` as tuples of ``columns``, in table order; only
    those whose ``kind`` is one of ``kinds`` if given."""
    if kinds is not None:
        table = table.filter(pc.is_in(table.column("kind"), value_set=pa.array(kinds, pa.string())))
    return list(zip(*[table.column(c).to_pylist() for c in columns], strict=True))


def _rank_seq(row: tuple) -> tuple:
    return (row[0], row[1])


def _open_key(item):
    (kind, member, topic, partition), start = item
    return (kind, member or "", topic or "", -1 if partition is None else partition, start)


def _interval_key(r):
    return (r[0], r[2] or "", -1 if r[3] is None else r[3], r[4], r[1] or "", r[5])


def subtract_spans(
    spans: list[tuple[float, float]], holes: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    """``spans`` minus the union of ``holes`` (both sorted by start)."""
    if not holes:
        return spans
    out = []
    for s, e in spans:
        cur = s
        for hs, he in holes:
            if he <= cur:
                continue
            if hs >= e:
                break
            if hs > cur:
                out.append((cur, hs))
            cur = max(cur, he)
            if cur >= e:
                break
        if cur < e:
            out.append((cur, e))
    return out


def union_spans(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


class ProcessingSpans:
    """The spans during which each member processed each partition, as parallel arrays (one entry
    per span): ``tp`` indexes ``tps`` ((topic, partition) pairs), ``member`` indexes ``members``
    (in order of each member's first ``owned`` row), ``start`` and ``end`` are seconds.

    A member processes a partition while it owns it and is neither stalled nor paused: each
    ``owned`` row minus the union of its member's ``stalled`` and ``paused`` rows. The subtraction
    runs on arrays (every owned row against every gap between its member's holes), since a run at
    10,000 members has 100,000 owned rows or more; the bounds are the rows' own values, so the
    spans are exactly those of subtracting row by row."""

    def __init__(self, intervals):
        blocked: dict[str, list] = defaultdict(list)
        member_ix: dict[str, int] = {}
        tp_ix: dict[tuple[str, int], int] = {}
        rows_member, rows_tp, rows_start, rows_end = [], [], [], []
        for kind, member, topic, partition, start, end in intervals:
            if kind == "owned":
                mi = member_ix.get(member)
                if mi is None:
                    mi = member_ix[member] = len(member_ix)
                ti = tp_ix.get((topic, partition))
                if ti is None:
                    ti = tp_ix[(topic, partition)] = len(tp_ix)
                rows_member.append(mi)
                rows_tp.append(ti)
                rows_start.append(start)
                rows_end.append(end)
            elif kind in ("stalled", "paused"):
                blocked[member].append((start, end))
        self.members = list(member_ix)
        self.tps = list(tp_ix)
        self.tp_index = tp_ix
        # the gaps between each member's holes: (-inf, first hole), ..., (last hole, inf)
        gap_start, gap_end, first_gap = [], [], []
        hole_starts, hole_ends = [], []
        for member in self.members:
            first_gap.append(len(gap_start))
            prev = -math.inf
            holes = union_spans(blocked.get(member, []))
            for hs, he in holes:
                gap_start.append(prev)
                gap_end.append(hs)
                prev = he
            gap_start.append(prev)
            gap_end.append(math.inf)
            hole_starts.append(np.array([h[0] for h in holes], dtype=float))
            hole_ends.append(np.array([h[1] for h in holes], dtype=float))
        row_member = np.array(rows_member, dtype=np.int64)
        row_start = np.array(rows_start, dtype=float)
        row_end = np.array(rows_end, dtype=float)
        # Each row against only the gaps it can overlap: gap k (between holes k - 1 and k) can
        # when hole k starts after the row starts and hole k - 1 ends before the row ends. Every
        # other gap leaves nothing, so the spans are those of every row against every gap of its
        # member, in the same order, without the rows x gaps arrays (an eager one-at-a-time
        # restart gives each member rows and holes in proportion to the group).
        low = np.zeros(row_member.size, dtype=np.int64)
        high = np.zeros(row_member.size, dtype=np.int64)
        by_member = np.argsort(row_member, kind="stable")
        bounds = np.searchsorted(row_member[by_member], np.arange(len(self.members) + 1))
        for mi in range(len(self.members)):
            rows = by_member[bounds[mi] : bounds[mi + 1]]
            if rows.size:
                low[rows] = np.searchsorted(hole_starts[mi], row_start[rows], side="right")
                high[rows] = np.searchsorted(hole_ends[mi], row_end[rows], side="left")
        per_row = np.maximum(high - low + 1, 0)
        row = np.repeat(np.arange(row_member.size), per_row)
        within = np.arange(row.size) - np.repeat(np.cumsum(per_row) - per_row, per_row)
        gap = (
            np.array(first_gap, dtype=np.int64)[row_member][row] + low[row] + within
            if row.size
            else row
        )
        start = np.maximum(row_start[row], np.array(gap_start, dtype=float)[gap])
        end = np.minimum(row_end[row], np.array(gap_end, dtype=float)[gap])
        keep = end > start
        self.member = row_member[row][keep]
        self.tp = np.array(rows_tp, dtype=np.int64)[row][keep]
        self.start = start[keep]
        self.end = end[keep]

    def by_tp(self) -> tuple[np.ndarray, np.ndarray]:
        """(order, bounds): the spans of ``tps[i]`` are ``order[bounds[i]:bounds[i + 1]]``, by
        member (first appearance) and then in row order."""
        order = np.lexsort((np.arange(self.tp.size), self.member, self.tp))
        bounds = np.zeros(len(self.tps) + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.tp, minlength=len(self.tps)), out=bounds[1:])
        return order, bounds

    def union(self) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of the union of every span (as ``union_spans`` merges: touching spans join)."""
        if self.start.size == 0:
            return np.zeros(0), np.zeros(0)
        order = np.lexsort((self.end, self.start))
        s, e = self.start[order], self.end[order]
        reach = np.maximum.accumulate(e)
        new = np.ones(s.size, dtype=bool)
        new[1:] = s[1:] > reach[:-1]
        first = np.nonzero(new)[0]
        last = np.append(first[1:], s.size) - 1
        return s[first], reach[last]


def processing_spans(intervals) -> dict[tuple[str, int], list[tuple[str, float, float]]]:
    """Per partition: (member, start, end) spans during which that member processed it."""
    spans = ProcessingSpans(intervals)
    order, bounds = spans.by_tp()
    out: dict[tuple[str, int], list] = {}
    members, start, end = spans.members, spans.start.tolist(), spans.end.tolist()
    member = spans.member.tolist()
    for i, tp in enumerate(spans.tps):
        rows = order[bounds[i] : bounds[i + 1]].tolist()
        if rows:
            out[tp] = [(members[member[j]], start[j], end[j]) for j in rows]
    return out


def derive(intervals, partitions_alive, spans: ProcessingSpans | None = None) -> list[tuple]:
    """``unassigned`` and ``double_processing`` rows from owned/stalled/paused rows (``spans``:
    their ``ProcessingSpans`` when the caller has built it).

    A partition processed by one member at a time (most of them) is handled on arrays; one with
    two or more spans goes through the span-by-span sweep below."""
    if spans is None:
        spans = ProcessingSpans(intervals)
    order, bounds = spans.by_tp()
    count = np.diff(bounds)
    tp_index = spans.tp_index
    alive = list(partitions_alive.items())
    ix = np.fromiter((tp_index.get(tp, -1) for tp, _ in alive), dtype=np.int64, count=len(alive))
    n = np.where(ix >= 0, count[np.maximum(ix, 0)] if count.size else 0, 0)
    a0 = np.fromiter((span[0] for _, span in alive), dtype=float, count=len(alive))
    e0 = np.fromiter((span[1] for _, span in alive), dtype=float, count=len(alive))
    rows = []
    # nobody processed it: unassigned while it was alive
    for i in np.nonzero(n == 0)[0].tolist():
        tp = alive[i][0]
        rows.append(("unassigned", None, tp[0], tp[1], float(a0[i]), float(e0[i])))
    # one span (s, e): unassigned before it and after it, within the alive span
    one = np.nonzero(n == 1)[0]
    if one.size:
        first = order[bounds[ix[one]]]
        s, e = spans.start[first], spans.end[first]
        before_end = np.minimum(s, e0[one])
        after_start = np.maximum(e, a0[one])
        for k in np.nonzero(before_end > a0[one])[0].tolist():
            tp = alive[one[k]][0]
            rows.append(("unassigned", None, tp[0], tp[1], float(a0[one[k]]), float(before_end[k])))
        for k in np.nonzero(e0[one] > after_start)[0].tolist():
            tp = alive[one[k]][0]
            rows.append(
                ("unassigned", None, tp[0], tp[1], float(after_start[k]), float(e0[one[k]]))
            )
    members = spans.members
    for i in np.nonzero(n > 1)[0].tolist():
        tp, (alive_start, alive_end) = alive[i]
        js = order[bounds[ix[i]] : bounds[ix[i] + 1]]
        mine = list(
            zip(
                [members[j] for j in spans.member[js].tolist()],
                spans.start[js].tolist(),
                spans.end[js].tolist(),
                strict=True,
            )
        )
        rows.extend(derive_shared(tp, alive_start, alive_end, mine))
    return rows


def derive_shared(tp, alive_start, alive_end, mine) -> list[tuple]:
    """The rows of one partition with two or more processing spans ``mine`` (member, start, end)."""
    rows: list[tuple] = []
    covered = union_spans([(s, e) for _, s, e in mine])
    for s, e in subtract_spans([(alive_start, alive_end)], covered):
        rows.append(("unassigned", None, tp[0], tp[1], s, e))
    if len(covered) == len(mine):
        return rows  # no two spans overlap (nor touch): never two members at once
    # sweep for times with two or more processing members
    points = []
    for member, s, e in mine:
        points.append((s, 1, member))
        points.append((e, -1, member))
    points.sort(key=lambda p: (p[0], p[1]))
    active: dict[str, int] = {}
    cur_start = None
    cur_members: tuple = ()
    for t, d, member in points:
        before = tuple(sorted(k for k, v in active.items() if v > 0))
        active[member] = active.get(member, 0) + d
        after = tuple(sorted(k for k, v in active.items() if v > 0))
        if len(before) >= 2 and (after != before) and cur_start is not None and t > cur_start:
            rows.append(("double_processing", ",".join(cur_members), tp[0], tp[1], cur_start, t))
            cur_start = None
        if len(after) >= 2 and after != before:
            cur_start, cur_members = t, after
        elif len(after) < 2:
            cur_start = None
    return rows


def _temp_parquet_beside(path: str) -> str:
    """A new empty temporary file in ``path``'s directory (made if missing), to be renamed to
    ``path``."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".parquet", dir=directory)
    # mkstemp makes the file 0600: give it the mode the user's umask allows, like any new file
    mask = os.umask(0o022)
    os.umask(mask)
    os.fchmod(fd, 0o666 & ~mask)
    os.close(fd)
    return tmp


def write_parquet_atomic(table: pa.Table, path: str) -> None:
    """Write ``table`` to ``path`` through a temporary file and ``os.replace``."""
    tmp = _temp_parquet_beside(path)
    try:
        pq.write_table(table, tmp, compression="zstd", write_statistics=True)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
