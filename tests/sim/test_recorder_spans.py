"""The recorder's array-based derivations give exactly the rows of the row-by-row definitions."""

from __future__ import annotations

import random

import pytest

from sim.observe.recorder import (
    ProcessingSpans,
    derive,
    derive_shared,
    processing_spans,
    subtract_spans,
    union_spans,
)


def _spans_by_rows(intervals):
    """The definition: each owned row minus the union of its member's stalled and paused rows."""
    blocked, owned, out = {}, {}, {}
    for kind, member, topic, partition, start, end in intervals:
        if kind in ("stalled", "paused"):
            blocked.setdefault(member, []).append((start, end))
        elif kind == "owned":
            owned.setdefault(member, []).append((topic, partition, start, end))
    for member, rows in owned.items():
        holes = union_spans(blocked.get(member, []))
        for topic, partition, start, end in rows:
            for s, e in subtract_spans([(start, end)], holes):
                out.setdefault((topic, partition), []).append((member, s, e))
    return out


def _random_intervals(rng: random.Random):
    times = [round(rng.uniform(0, 50), 1) for _ in range(12)] + [0.0, 50.0]  # shared bounds: ties

    def span():
        a, b = sorted(rng.sample(times, 2))
        return a, b

    rows = []
    for member in rng.sample(["m0", "m1", "m2", "m3"], rng.randrange(1, 5)):
        for _ in range(rng.randrange(0, 6)):
            s, e = span()
            if e > s:
                rows.append(("owned", member, rng.choice("ab"), rng.randrange(3), s, e))
        for _ in range(rng.randrange(0, 4)):
            s, e = span()
            if e > s:
                rows.append((rng.choice(["stalled", "paused"]), member, None, None, s, e))
    rng.shuffle(rows)
    return rows


@pytest.mark.parametrize("seed", range(200))
def test_processing_spans_and_derived_rows_match_the_row_by_row_definition(seed):
    """Spans, their union and the unassigned / double-processing rows equal the definitions'."""
    rng = random.Random(seed)
    intervals = _random_intervals(rng)
    expected = _spans_by_rows(intervals)
    assert processing_spans(intervals) == expected
    s, e = ProcessingSpans(intervals).union()
    assert list(zip(s.tolist(), e.tolist(), strict=True)) == union_spans(
        [(a, b) for rows in expected.values() for _, a, b in rows]
    )
    alive = {(t, p): (0.0 if rng.random() < 0.8 else 5.0, 50.0) for t in "ab" for p in range(3)}
    got = sorted(derive(intervals, alive), key=str)
    want = []
    for tp, (a0, e0) in alive.items():
        mine = expected.get(tp, [])
        covered = union_spans([(x, y) for _, x, y in mine])
        want += [
            ("unassigned", None, tp[0], tp[1], x, y) for x, y in subtract_spans([(a0, e0)], covered)
        ]
    assert [r for r in got if r[0] == "unassigned"] == sorted(want, key=str)
    # double processing: the sweep of the old row-by-row code, fed the spans in the same order
    want_dp = [
        r
        for tp, (a0, e0) in alive.items()
        if len(expected.get(tp, [])) > 1
        for r in derive_shared(tp, a0, e0, expected[tp])
        if r[0] == "double_processing"
    ]
    assert [r for r in got if r[0] == "double_processing"] == sorted(want_dp, key=str)
