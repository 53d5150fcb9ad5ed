"""The headline of the eager-vs-cooperative report: what a capacity planner pays for a
rebalance, first the stall (partitions nobody processes, the whole group stopped, records
delayed), then how long the rebalance takes and in how many rounds; one sentence per scenario
with the eager/cooperative ratio.

Column names are for people, with units; the metric each one shows is named in ``COLUMNS``
(defined once in ``sim.metrics``; here only chosen and labelled).
"""

from __future__ import annotations

import math

import pandas as pd

EAGER = ("range", "roundrobin", "sticky")
COOPERATIVE = "cooperative-sticky"
# The consumer group protocol (KIP-848) with the coordinator's uniform assignor, as a value of the
# ``assignor`` column beside the classic assignors.
CONSUMER = "consumer-uniform"

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


def headline_table(points: pd.DataFrame, size: int, order=EAGER + (COOPERATIVE,)) -> pd.DataFrame:
    """One row per (scenario, membership, assignor) at group size ``size``."""
    p = points[points["members"] == size].copy()
    rank = {a: i for i, a in enumerate(order)}
    p["_o"] = p["assignor"].map(rank)
    p = p.sort_values(["scenario", "membership", "_o"])
    out = pd.DataFrame({"scenario": p["scenario"], "members": p["membership"], "assignor": p["assignor"],
                        "protocol": [protocol_of(a) for a in p["assignor"]]})
    for label, col, kind in COLUMNS:
        values = p[col]
        # a median of rounds across an even number of seeds can be x.5: rounds are counted, so round
        out[label] = values.round().astype("Int64") if kind is int else values.astype(float)
    return out.reset_index(drop=True)


def _ratio(a: float, b: float) -> str:
    if b == 0:
        return "no" if a == 0 else "infinitely more"
    r = a / b
    return f"{r:,.0f}x" if r >= 10 else f"{r:.1f}x"


def _num(v: float) -> str:
    if v == 0:
        return "0"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _rounds(n) -> str:
    return f"{n} round" + ("" if n == 1 else "s")


def sentences(table: pd.DataFrame) -> list[str]:
    """One sentence per (scenario, membership): cooperative-sticky against the eager assignor
    that stalls least (the fairest comparison for eager)."""
    out = []
    for (scenario, membership), g in table.groupby(["scenario", "members"], sort=False):
        coop = g[g["assignor"] == COOPERATIVE]
        eager = g[g["assignor"].isin(EAGER)]
        if coop.empty or eager.empty:
            continue
        c = coop.iloc[0]
        e = eager.sort_values("unassigned partition-s").iloc[0]
        cs, es = float(c["unassigned partition-s"]), float(e["unassigned partition-s"])
        head = f"{scenario}, {membership} members: "
        if math.isclose(cs, es, rel_tol=0.05, abs_tol=1e-9):
            text = (f"cooperative-sticky and eager {e['assignor']} stall about the same "
                    f"({_num(cs)} unassigned partition-seconds)")
        elif cs < es:
            text = (f"cooperative-sticky stalls {_ratio(es, cs)} less than the best eager assignor "
                    f"({e['assignor']}): {_num(cs)} vs {_num(es)} unassigned partition-seconds, "
                    f"{_num(float(c['records delayed']))} vs {_num(float(e['records delayed']))} records "
                    f"delayed, stop-the-world {_num(float(c['stop-the-world s']))} vs "
                    f"{_num(float(e['stop-the-world s']))} s")
        else:
            text = (f"cooperative-sticky stalls {_ratio(cs, es)} more than eager {e['assignor']}: "
                    f"{_num(cs)} vs {_num(es)} unassigned partition-seconds")
        cr, er = float(c["rebalance s"]), float(e["rebalance s"])
        if c["rounds"] == 0 and e["rounds"] == 0:
            text += ("; no rebalance round happens (the stall is the time a restarting member "
                     "is down).")
        else:
            text += (f"; its rebalance takes {cr:.1f} s in {_rounds(c['rounds'])} vs {er:.1f} s in "
                     f"{_rounds(e['rounds'])}.")
        out.append(head + text)
    return out


def _versus(c: float, o: float, what: str, other: str) -> str:
    """'3.1x less stall than OTHER' / '2.0x more stall than OTHER' / 'about the same stall as
    OTHER' for the consumer protocol's ``c`` against another protocol's ``o``."""
    if math.isclose(c, o, rel_tol=0.05, abs_tol=1e-9):
        return f"about the same {what} as {other}"
    if c < o:
        return f"{_ratio(o, c)} less {what} than {other}" if c > 0 else f"no {what} where {other} has {_num(o)}"
    return f"{_ratio(c, o)} more {what} than {other}"


def consumer_vs_classic(c, k, e, eager_name: str = "classic eager") -> str:
    """The consumer protocol (row ``c``) against classic cooperative (``k``) and classic eager
    (``e``), stall first, then time to settle. Rows are mappings with the labels of ``HUMAN``;
    records processed twice are quoted when the rows have them."""
    st, dl, rp = HUMAN["unassigned_partition_s"], HUMAN["throughput_loss_records"], HUMAN["records_reprocessed"]
    se = HUMAN["rebalance_time_total_s"]
    quoted = (f"{_num(c[st])} vs {_num(k[st])} vs {_num(e[st])} unassigned partition-seconds; "
              f"{_num(c[dl])} vs {_num(k[dl])} vs {_num(e[dl])} records delayed")
    if rp in c and rp in k and rp in e:
        quoted += f"; {_num(c[rp])} vs {_num(k[rp])} vs {_num(e[rp])} records processed twice"
    text = (f"the consumer protocol has {_versus(c[st], k[st], 'stall', 'classic cooperative')} and "
            f"{_versus(c[st], e[st], 'stall', eager_name)} ({quoted}); it settles in {c[se]:.1f} s vs "
            f"{k[se]:.1f} s (cooperative) and {e[se]:.1f} s (eager)")
    best = min(k[se], e[se])
    if c[se] > best * 1.05:
        return text + f", {_ratio(c[se], best)} slower than the faster classic protocol."
    if c[se] < best / 1.05:
        return text + f", {_ratio(best, c[se])} faster than the faster classic protocol."
    return text + "."


def human_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """Rename ``metric_stat`` columns (``unassigned_max_s_p90``) to ``longest gap s p90``."""
    names = {}
    for col in frame.columns:
        for metric, label in HUMAN.items():
            if col.startswith(metric + "_"):
                names[col] = f"{label} {col[len(metric) + 1:]}"
            elif col == metric:
                names[col] = label
    return frame.rename(columns=names)
