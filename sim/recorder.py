"""The recorder: ``events`` and ``intervals`` rows of one run, derived intervals, Parquet output.

Actors append rows as they go; rows are sorted by explicit keys at the end, so the files do not
depend on the order in which trio ran the actors. ``unassigned`` and ``double_processing``
intervals are derived once, here, from ``owned``, ``stalled`` and ``paused`` intervals: a member
processes a partition while it owns it and is neither stalled (in a rebalance callback or the
assignor) nor paused.
"""

from __future__ import annotations

import os
import tempfile
from collections import defaultdict

import pyarrow as pa
import pyarrow.parquet as pq

EVENTS_SCHEMA = pa.schema([
    ("run_id", pa.string()),
    ("t", pa.float64()),
    ("kind", pa.string()),
    ("member", pa.string()),
    ("generation", pa.int64()),
    ("detail", pa.string()),
])

INTERVALS_SCHEMA = pa.schema([
    ("run_id", pa.string()),
    ("kind", pa.string()),
    ("member", pa.string()),
    ("topic", pa.string()),
    ("partition", pa.int64()),
    ("start", pa.float64()),
    ("end", pa.float64()),
])

INTERVAL_KINDS = ("owned", "unassigned", "rebalance", "paused", "stalled", "double_processing")


class Recorder:
    """Collects rows during a run."""

    def __init__(self):
        self.events: list[tuple] = []        # (t, rank, seq, kind, member, generation, detail)
        self._open: dict[tuple, float] = {}  # (kind, member, topic, partition) -> start
        self.intervals: list[tuple] = []     # (kind, member, topic, partition, start, end)
        self.violations: list[tuple[float, str]] = []

    def event(self, t, rank, seq, kind, member, generation, detail) -> None:
        self.events.append((t, rank, seq, kind, member, generation, detail))

    def open(self, t, kind, member, topic, partition) -> None:
        key = (kind, member, topic, partition)
        if key in self._open:
            self.violations.append((t, f"{kind} interval of {member} {topic}-{partition} opened twice"))
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

    def finish(self, end: float, partitions_alive: dict[tuple[str, int], tuple[float, float]]) -> None:
        """Close what is still open at ``end`` and derive ``unassigned`` / ``double_processing``.

        ``partitions_alive`` maps each partition that should have had an owner to the time span
        during which it existed and was subscribed.
        """
        for (kind, member, topic, partition), start in sorted(self._open.items(), key=_open_key):
            if end > start:
                self.intervals.append((kind, member, topic, partition, start, end))
        self._open.clear()
        self.intervals.extend(derive(self.intervals, partitions_alive))

    # ---- tables

    def events_table(self, run_id: str) -> pa.Table:
        rows = sorted(self.events, key=lambda r: (r[0], r[1], r[2]))
        return pa.table({
            "run_id": pa.array([run_id] * len(rows), pa.string()),
            "t": pa.array([r[0] for r in rows], pa.float64()),
            "kind": pa.array([r[3] for r in rows], pa.string()),
            "member": pa.array([r[4] for r in rows], pa.string()),
            "generation": pa.array([r[5] for r in rows], pa.int64()),
            "detail": pa.array([r[6] for r in rows], pa.string()),
        }, schema=EVENTS_SCHEMA)

    def intervals_table(self, run_id: str) -> pa.Table:
        rows = sorted(self.intervals, key=_interval_key)
        return pa.table({
            "run_id": pa.array([run_id] * len(rows), pa.string()),
            "kind": pa.array([r[0] for r in rows], pa.string()),
            "member": pa.array([r[1] for r in rows], pa.string()),
            "topic": pa.array([r[2] for r in rows], pa.string()),
            "partition": pa.array([r[3] for r in rows], pa.int64()),
            "start": pa.array([r[4] for r in rows], pa.float64()),
            "end": pa.array([r[5] for r in rows], pa.float64()),
        }, schema=INTERVALS_SCHEMA)


def _open_key(item):
    (kind, member, topic, partition), start = item
    return (kind, member or "", topic or "", -1 if partition is None else partition, start)


def _interval_key(r):
    return (r[0], r[2] or "", -1 if r[3] is None else r[3], r[4], r[1] or "", r[5])


def _subtract(spans: list[tuple[float, float]], holes: list[tuple[float, float]]) -> list[tuple[float, float]]:
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


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def processing_spans(intervals) -> dict[tuple[str, int], list[tuple[str, float, float]]]:
    """Per partition: (member, start, end) spans during which that member processed it."""
    blocked: dict[str, list] = defaultdict(list)
    owned: dict[str, list] = defaultdict(list)
    for kind, member, topic, partition, start, end in intervals:
        if kind in ("stalled", "paused"):
            blocked[member].append((start, end))
        elif kind == "owned":
            owned[member].append((topic, partition, start, end))
    out: dict[tuple[str, int], list] = defaultdict(list)
    for member, rows in owned.items():
        holes = _union(blocked.get(member, []))
        for topic, partition, start, end in rows:
            for s, e in _subtract([(start, end)], holes):
                out[(topic, partition)].append((member, s, e))
    return out


def derive(intervals, partitions_alive) -> list[tuple]:
    """``unassigned`` and ``double_processing`` rows from owned/stalled/paused rows."""
    spans = processing_spans(intervals)
    rows = []
    for tp, (alive_start, alive_end) in partitions_alive.items():
        mine = spans.get(tp, [])
        covered = _union([(s, e) for _, s, e in mine])
        for s, e in _subtract([(alive_start, alive_end)], covered):
            rows.append(("unassigned", None, tp[0], tp[1], s, e))
        if len(mine) > 1:
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


def write_parquet_atomic(table: pa.Table, path: str) -> None:
    """Write ``table`` to ``path`` through a temporary file and ``os.replace``."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".parquet", dir=directory)
    # mkstemp makes the file 0600: give it the mode the user's umask allows, like any new file
    mask = os.umask(0o022)
    os.umask(mask)
    os.fchmod(fd, 0o666 & ~mask)
    os.close(fd)
    try:
        pq.write_table(table, tmp, compression="zstd", write_statistics=True)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
