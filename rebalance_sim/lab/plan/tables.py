"""The plan's tables, from the engine's aggregated ``points`` and ``runs`` and the runs' limit
crossings (``limits``): one row per (fault, set-up, size) with each answer's median across seeds
and its p10-p90 band, whether the fault was measured, and the limits crossed; and the ranking of
today's set-up and the full alternatives at today's size.

Column names are for people and are the ones the report's sentences quote
(``rebalance_sim.lab.report.headline.same`` and ``quote`` read ``"<label> p10"`` / ``"<label> p90"``).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from .group import Group
from .variants import FAULTS, SetUp, Variant, set_up, variants

# (aggregate metric, label): the four answers per fault, stall first.
METRICS = (
    ("unassigned_partition_s", "stall partition-s"),
    ("peak_lag_records", "peak lag records"),
    ("records_reprocessed", "records re-processed"),
    ("rebalance_time_total_s", "settle s"),
)
STALL = METRICS[0][1]
LAG = METRICS[1][1]
REPROCESSED = METRICS[2][1]
SETTLE = METRICS[3][1]


def _limits_by_point(runs: pd.DataFrame, limits: pd.DataFrame, phase: str) -> pd.DataFrame:
    keys = ["fault", "variant", "factor"]
    lim = limits[limits["phase"] == phase].merge(
        runs[["run_id", *keys, "members"]], on="run_id", how="inner"
    )
    if lim.empty:
        return pd.DataFrame(columns=keys)
    g = lim.groupby(keys, sort=False)
    out = g.agg(
        poll_timeouts=("poll_timeouts", "median"),
        poll_timeouts_max=("poll_timeouts", "max"),
        sessions_expired=("sessions_expired", "median"),
        sessions_expired_max=("sessions_expired", "max"),
        rebalance_timeouts=("rebalance_timeouts", "median"),
        rebalance_timeouts_max=("rebalance_timeouts", "max"),
        max_assigned=("max_assigned", "max"),
        max_revoked=("max_revoked", "max"),
        runs_crossing=(
            "poll_timeouts",
            "size",
        ),
    ).reset_index()
    crossing = lim.assign(
        any_=(lim["poll_timeouts"] + lim["sessions_expired"] + lim["rebalance_timeouts"]) > 0
    )
    out["runs_crossing"] = crossing.groupby(keys, sort=False)["any_"].sum().to_numpy()
    return out


def result_table(
    group: Group,
    points: pd.DataFrame,
    runs: pd.DataFrame,
    limits: pd.DataFrame,
) -> pd.DataFrame:
    """One row per (fault, set-up, size): the answers with their bands, whether the fault was
    measured in every seed, and the limits crossed after it and in the group's cold start."""
    meta = {v.key: v for v in variants(group)}
    fault_rank = {f: i for i, f in enumerate(FAULTS)}
    variant_rank = {k: i for i, k in enumerate(meta)}
    rows: list[dict[str, Any]] = []
    measured = _measured(runs)
    after = _limits_by_point(runs, limits, "fault").set_index(["fault", "variant", "factor"])
    cold = _limits_by_point(runs, limits, "cold").set_index(["fault", "variant", "factor"])
    for p in points.itertuples(index=False):
        p = p._asdict()
        key = (p["fault"], p["variant"], float(p["factor"]))
        v = meta[p["variant"]]
        cfg = _consumer(group, v)
        row: dict[str, Any] = {
            "fault": p["fault"],
            "variant": p["variant"],
            "set-up": v.label,
            "factor": float(p["factor"]),
            "members": int(p["members"]),
            "partitions": int(p["partitions"]),
            "seeds": int(p["seeds"]),
            "measured": bool(measured.get(key, False)),
        }
        for metric, label in METRICS:
            row[label] = float(p[f"{metric}_median"])
            row[f"{label} p10"] = float(p[f"{metric}_p10"])
            row[f"{label} p90"] = float(p[f"{metric}_p90"])
        row["records delayed"] = float(p["throughput_loss_records_median"])
        for prefix, table in (("", after), ("cold ", cold)):
            lim = table.loc[key] if key in table.index else None
            for col in (
                "poll_timeouts",
                "poll_timeouts_max",
                "sessions_expired",
                "sessions_expired_max",
                "rebalance_timeouts",
                "rebalance_timeouts_max",
                "max_assigned",
                "max_revoked",
                "runs_crossing",
            ):
                row[prefix + col] = float(lim[col]) if lim is not None else 0.0
        row["assign_s"] = row["max_assigned"] * cfg.assign_cost_ms / 1000.0
        row["revoke_s"] = row["max_revoked"] * cfg.revoke_cost_ms / 1000.0
        row["cold assign_s"] = row["cold max_assigned"] * cfg.assign_cost_ms / 1000.0
        row["cold revoke_s"] = row["cold max_revoked"] * cfg.revoke_cost_ms / 1000.0
        row["max_poll_interval_s"] = cfg.max_poll_interval_s
        row["_f"] = fault_rank.get(p["fault"], 99)
        row["_v"] = variant_rank.get(p["variant"], 99)
        rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    out = out.sort_values(["factor", "_f", "_v"]).drop(columns=["_f", "_v"])
    return out.reset_index(drop=True)


def _consumer(group: Group, v: Variant):
    import attrs

    return attrs.evolve(group.consumer_config(), **dict(v.consumer))


def _measured(runs: pd.DataFrame) -> dict[tuple, bool]:
    """Per point: whether every seed's fault was an episode of its own (the group had formed
    before it: not swallowed by the cold start)."""
    ok = (runs["episodes"].fillna(0) >= 1) & (runs["formation_s"] < runs["fault_at_s"])
    frame = runs.assign(ok=ok)
    return {
        (f, v, float(x)): bool(g["ok"].all())
        for (f, v, x), g in frame.groupby(["fault", "variant", "factor"], sort=False)
    }


def ranking(table: pd.DataFrame, group: Group) -> pd.DataFrame:
    """Today's set-up and the full alternatives at today's size, best first: ranked by their
    stall over one of each fault (the sum of the medians), with, per fault, whether each stalls
    less than today (outside the seeds' p10-p90 bands), about the same, or more."""
    from ..report.headline import same

    full = [v.key for v in variants(group) if v.full]
    t = table[(table["factor"] == 1.0) & table["variant"].isin(full)]
    today = t[t["variant"] == "today"].set_index("fault")
    faults = [f for f in FAULTS if f in today.index]
    rows = []
    for key in full:
        mine = t[t["variant"] == key].set_index("fault")
        if not faults or not set(faults) <= set(mine.index):
            continue
        row: dict[str, Any] = {"variant": key, "set-up": mine.iloc[0]["set-up"]}
        row["total stall partition-s"] = float(sum(mine.loc[f, STALL] for f in faults))
        for f in faults:
            if key == "today" or f not in today.index:
                row[f] = "-"
            elif same(mine.loc[f], today.loc[f], STALL):
                row[f] = "same"
            else:
                row[f] = "less" if mine.loc[f, STALL] < today.loc[f, STALL] else "more"
        row["measured"] = bool(mine["measured"].all())
        rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    out = out.sort_values("total stall partition-s", kind="stable").reset_index(drop=True)
    out.insert(0, "rank", range(1, len(out) + 1))
    return out


def best_alternative(table: pd.DataFrame, group: Group) -> str | None:
    """The full alternative that ranks first among the alternatives (None if there is none)."""
    r = ranking(table, group)
    alts = r[r["variant"] != "today"] if not r.empty else r
    return None if alts.empty else str(alts.iloc[0]["variant"])


def best_from_stall(stall: dict[tuple[str, str], float], group: Group) -> str | None:
    """The full alternative with the least summed stall medians over the faults, from
    ``stall[(fault, variant)]`` (the medians of today's-size runs; a light read used to choose
    what the growth phase runs, before the full aggregation)."""
    best, best_total = None, math.inf
    faults = [f for f in FAULTS if (f, "today") in stall]
    for v in variants(group):
        if not v.full or v.key == "today" or not faults:
            continue
        values = [stall.get((f, v.key)) for f in faults]
        if any(x is None for x in values):
            continue
        total = float(sum(values))  # type: ignore[arg-type]
        if total < best_total:
            best, best_total = v.key, total
    return best


def today_set_up(group: Group) -> SetUp:
    return set_up(group)
