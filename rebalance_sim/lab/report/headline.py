"""The headline of the eager-vs-cooperative report: what a capacity planner pays for a
rebalance, first the stall (partitions nobody processes, the whole group stopped, records
delayed), then how long the rebalance takes and in how many rounds; one sentence per scenario
with the eager/cooperative ratio.

Column names are for people, with units; the metric each one shows is named in ``COLUMNS``
(defined once in ``sim.observe.metrics``; here only chosen and labelled).
"""

from __future__ import annotations

import math

import pandas as pd

from ..vocabulary import CONSUMER

EAGER = ("range", "roundrobin", "sticky")
COOPERATIVE = "cooperative-sticky"

# (column label, points column, kind); stall first, then duration. Medians across seeds.
COLUMNS = [
    ("unassigned partition-s", "unassigned_partition_s_median", float),
    ("stop-the-world s", "stop_the_world_s_median", float),
    ("records delayed", "throughput_loss_records_median", float),
    ("records processed twice", "records_reprocessed_median", float),
    ("longest gap s", "unassigned_max_s_median", float),
    ("rebalance s", "rebalance_time_total_s_median", float),
    ("rounds", "rounds_total_median", int),
]
# Metric names as people read them, for the wider tables of the report.
HUMAN = {
    "rebalance_time_total_s": "rebalance s",
    "rounds_total": "rounds",
    "unassigned_partition_s": "unassigned partition-s",
    "unassigned_max_s": "longest gap s",
    "throughput_loss_records": "records delayed",
    "records_reprocessed": "records processed twice",
    "first_record_max_s": "first record s",
    "stop_the_world_s": "stop-the-world s",
}


def protocol_of(assignor: str) -> str:
    """The protocol an ``assignor`` column value runs: eager, cooperative (both classic) or consumer."""
    if assignor == CONSUMER:
        return "consumer"
    return "cooperative" if assignor == COOPERATIVE else "eager"


def rows_by_assignor(
    p: pd.DataFrame, keys: list[str], order, names: dict[str, str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``p`` (aggregated points) sorted by ``keys`` then by the assignor's place in ``order``, and
    the start of a table of it: ``names`` (table column -> points column), then ``assignor``,
    ``protocol`` and ``seeds``."""
    p = p.copy()
    rank = {a: i for i, a in enumerate(order)}
    p["_o"] = p["assignor"].map(rank)
    p = p.sort_values([*keys, "_o"])
    out = pd.DataFrame(
        {
            **{name: p[col] for name, col in names.items()},
            "assignor": p["assignor"],
            "protocol": [protocol_of(a) for a in p["assignor"]],
            "seeds": p["seeds"],
        }
    )
    return p, out


def headline_table(points: pd.DataFrame, size: int, order=EAGER + (COOPERATIVE,)) -> pd.DataFrame:
    """One row per (scenario, membership, assignor) at group size ``size``: each metric's median
    across seeds under its label, and its p10 and p90 under ``"<label> p10"`` / ``"<label> p90"``."""
    p, out = rows_by_assignor(
        points[points["members"] == size],
        ["scenario", "membership"],
        order,
        {"scenario": "scenario", "members": "membership"},
    )
    for label, col, kind in COLUMNS:
        values = p[col]
        # a median of rounds across an even number of seeds can be x.5: rounds are counted, so round
        out[label] = values.round().astype("Int64") if kind is int else values.astype(float)
    for label, col, _ in COLUMNS:
        metric = col.removesuffix("_median")
        for stat in ("p10", "p90"):
            out[f"{label} {stat}"] = p[f"{metric}_{stat}"].astype(float)
    return out.reset_index(drop=True)


def with_bands(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` for people: each metric that has ``p10`` / ``p90`` columns shown as one text
    column, ``median (p10-p90)``; the band columns dropped."""
    out = table.copy()
    for col in list(table.columns):
        lo, hi = f"{col} p10", f"{col} p90"
        if lo in table.columns and hi in table.columns:
            out[col] = [
                _cell(m, a, b) for m, a, b in zip(table[col], table[lo], table[hi], strict=True)
            ]
            out = out.drop(columns=[lo, hi])
    return out.rename(
        columns={c: f"{c} (p10-p90)" for c in out.columns if f"{c} p10" in table.columns}
    )


def _cell(median, lo, hi) -> str:
    if median is None or median != median:
        return "-"
    if lo == hi:
        return num(float(median))
    return f"{num(float(median))} ({num(float(lo))}-{num(float(hi))})"


def band(row, label: str) -> tuple[float, float]:
    """The p10-p90 band of metric ``label`` in a row of ``headline_table`` (or any mapping with
    the same columns); the median alone where the row has no band."""
    m = float(row[label])
    return float(row.get(f"{label} p10", m)), float(row.get(f"{label} p90", m))


def same(a, b, label: str) -> bool:
    """Whether rows ``a`` and ``b`` are about the same on ``label``: their p10-p90 bands across
    seeds overlap, or their medians are within 5%. A difference inside the seeds' spread is not
    stated as one."""
    (alo, ahi), (blo, bhi) = band(a, label), band(b, label)
    if alo <= bhi and blo <= ahi:
        return True
    return math.isclose(float(a[label]), float(b[label]), rel_tol=0.05, abs_tol=1e-9)


def _ratio(a: float, b: float) -> str:
    if b == 0:
        return "no" if a == 0 else "infinitely more"
    r = a / b
    return f"{r:,.0f}x" if r >= 10 else f"{r:.1f}x"


def num(v: float) -> str:
    if v == 0:
        return "0"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _rounds(n) -> str:
    return f"{n} round" + ("" if n == 1 else "s")


STALL = "unassigned partition-s"


def best_eager(eager: pd.DataFrame) -> tuple[pd.Series, str]:
    """The eager row that stalls least, and how to name it: by its assignor when its band is apart
    from every other eager assignor's, else as the eager assignors that are about the same."""
    eager = eager.sort_values(STALL, kind="stable")
    e = eager.iloc[0]
    ties = [r["assignor"] for _, r in eager.iloc[1:].iterrows() if same(e, r, STALL)]
    if not ties:
        return e, f"the best eager assignor ({e['assignor']})"
    return e, f"eager ({', '.join([e['assignor'], *ties])} alike)"


def sentences(table: pd.DataFrame) -> list[str]:
    """One sentence per (scenario, membership): cooperative-sticky against the eager assignor
    that stalls least (the fairest comparison for eager), each figure a median across seeds with
    its p10-p90 band; bands that overlap are "about the same"."""
    out = []
    for (scenario, membership), g in table.groupby(["scenario", "members"], sort=False):
        coop = g[g["assignor"] == COOPERATIVE]
        eager = g[g["assignor"].isin(EAGER)]
        if coop.empty or eager.empty:
            continue
        c = coop.iloc[0]
        e, eager_name = best_eager(eager)
        cs, es = float(c[STALL]), float(e[STALL])
        head = f"{scenario}, {membership} members: "
        quoted = (
            f"{quote(c, STALL)} vs {quote(e, STALL)} unassigned partition-seconds, "
            f"{num(float(c['records delayed']))} vs {num(float(e['records delayed']))} records "
            f"delayed, stop-the-world {num(float(c['stop-the-world s']))} vs "
            f"{num(float(e['stop-the-world s']))} s"
        )
        if same(c, e, STALL):
            text = f"cooperative-sticky and {eager_name} stall about the same ({quoted})"
        elif cs < es:
            text = f"cooperative-sticky stalls {_ratio(es, cs)} less than {eager_name}: {quoted}"
        else:
            text = f"cooperative-sticky stalls {_ratio(cs, es)} more than {eager_name}: {quoted}"
        cr, er = float(c["rebalance s"]), float(e["rebalance s"])
        if c["rounds"] == 0 and e["rounds"] == 0:
            text += (
                "; no rebalance round happens (the stall is the time a restarting member is down)."
            )
        else:
            text += (
                f"; its rebalance takes {cr:.1f} s in {_rounds(c['rounds'])} vs {er:.1f} s in "
                f"{_rounds(e['rounds'])}."
            )
        out.append(head + text)
    return out


def quote(row, label: str) -> str:
    """A median with its p10-p90 band, ``4,614 [3,900-5,200]`` (the median alone without a band)."""
    lo, hi = band(row, label)
    m = float(row[label])
    return num(m) if lo == hi else f"{num(m)} [{num(lo)}-{num(hi)}]"


def _versus(c, o, label: str, what: str, other: str) -> str:
    """'3.1x less stall than OTHER' / '2.0x more stall than OTHER' / 'about the same stall as
    OTHER' for the consumer protocol's row ``c`` against another protocol's row ``o``."""
    cv, ov = float(c[label]), float(o[label])
    if same(c, o, label):
        return f"about the same {what} as {other}"
    if cv < ov:
        return (
            f"{_ratio(ov, cv)} less {what} than {other}"
            if cv > 0
            else f"no {what} where {other} has {num(ov)}"
        )
    return f"{_ratio(cv, ov)} more {what} than {other}"


def consumer_vs_classic(c, k, e, eager_name: str = "classic eager") -> str:
    """The consumer protocol (row ``c``) against classic cooperative (``k``) and classic eager
    (``e``), stall first, then time to settle. Rows are mappings with the labels of ``HUMAN``
    (medians across seeds) and, where the rows have them, ``"<label> p10"`` / ``"<label> p90"``
    bands: a difference inside overlapping bands is "about the same". Records processed twice are
    quoted when the rows have them."""
    st, dl, rp = (
        HUMAN["unassigned_partition_s"],
        HUMAN["throughput_loss_records"],
        HUMAN["records_reprocessed"],
    )
    se = HUMAN["rebalance_time_total_s"]
    quoted = (
        f"{quote(c, st)} vs {quote(k, st)} vs {quote(e, st)} unassigned partition-seconds; "
        f"{num(c[dl])} vs {num(k[dl])} vs {num(e[dl])} records delayed"
    )
    if rp in c and rp in k and rp in e:
        quoted += f"; {quote(c, rp)} vs {quote(k, rp)} vs {quote(e, rp)} records processed twice"
    text = (
        f"the consumer protocol has {_versus(c, k, st, 'stall', 'classic cooperative')} and "
        f"{_versus(c, e, st, 'stall', eager_name)} ({quoted}); it settles in {c[se]:.1f} s vs "
        f"{k[se]:.1f} s (cooperative) and {e[se]:.1f} s (eager)"
    )
    best = k if float(k[se]) <= float(e[se]) else e
    if same(c, best, se):
        return text + ", about as fast as the faster classic protocol."
    if c[se] > best[se]:
        return text + f", {_ratio(c[se], best[se])} slower than the faster classic protocol."
    return text + f", {_ratio(best[se], c[se])} faster than the faster classic protocol."


def human_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """Rename ``metric_stat`` columns (``unassigned_max_s_p90``) to ``longest gap s p90``."""
    names = {}
    for col in frame.columns:
        for metric, label in HUMAN.items():
            if col.startswith(metric + "_"):
                names[col] = f"{label} {col[len(metric) + 1 :]}"
            elif col == metric:
                names[col] = label
    return frame.rename(columns=names)
