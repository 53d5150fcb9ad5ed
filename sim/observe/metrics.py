"""Every metric of a run, computed in one place from its ``events`` and ``intervals`` tables.

Episode: starts at a trigger (a timeline action; the group's formation at t=0 is episode 0) and
ends at the first ``settled`` event after it: the group is Stable, every member is Stable with
nothing pending (cooperative: after the follow-up round), and every subscribed partition is owned
by a live, processing member. A trigger during an open episode joins that episode.

Per episode: end-to-end rebalance time, rounds (generations), time to detect (trigger to the
coordinator's first PreparingRebalance), time in the JoinGroup barrier and in SyncGroup, time in
rebalance callbacks, unassigned partition-seconds with max / p50 / p99 window and partitions
touched, throughput loss, peak lag and lag recovery, stop-the-world time, double-processing
partition-seconds.

Records processed twice: a new owner starts from the committed offset (``sim.coordinator.offsets``), so it
processes again what earlier owners processed beyond it (``reprocessed`` events, by the cause of
the gap: ``crash`` since the last auto-commit, ``failed_commit`` when the last commit before the
handover was rejected, ``fenced`` for partitions lost without a commit or taken from a paused
member, ``uncommitted`` otherwise), plus what a zombie processes while the new owner does too
(production rate x double-processing time, cause ``zombie``). Time to first record: from an
assignment to the first batch of the new partitions (OffsetFetch round trip, then a fetch).

Lag is a fluid model over the ``unassigned`` intervals: during a gap a partition's lag grows at its
production rate; afterwards its new owner drains it with the group's spare capacity (capacity over
production minus one, shared in proportion to the rates; a ``sync-per-batch`` member's capacity
less its commit round trip per batch, ``ConsumerConfig.drain_capacity``), and gaps add up. Throughput loss is the
records produced while unassigned (not processed when they would have been in steady state).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import defaultdict
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sim.config import SimConfig
from sim.observe.events import FirstRecord, Reprocessed, Revoke, Trigger
from sim.observe.recorder import ProcessingSpans, table_rows

# The event kinds the metrics read; every other event leaves them unchanged, so the events of a
# run are read filtered to these (a 1,000-member deploy has 71,000-77,000 events, 10-23% of
# them these).
METRIC_EVENT_KINDS = (
    "trigger",
    "unsettled",
    "settled",
    "rebalance_start",
    "join_complete",
    "target_assignment",
    "stable",
    "revoke",
    "reprocessed",
    "first_record",
)


def _clipped(start: np.ndarray, end: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Per span, how much of [start, end] lies in [lo, hi] (0 if nothing)."""
    return np.maximum(0.0, np.minimum(end, hi) - np.maximum(start, lo))


def _pct(values: np.ndarray, q: float) -> float | None:
    if values.size == 0:
        return None
    return float(np.percentile(values, q, method="inverted_cdf"))


REPROCESS_CAUSES = ("crash", "failed_commit", "fenced", "zombie", "uncommitted")


class Metric(NamedTuple):
    """One metric: its column (``name``), whether it is an episode's (``compute_metrics``'s
    episode rows) or a run's (its summary), its Spark type, the header ``rebalance-sim run``
    shows it under in the episode table (None: not shown), and whether a sweep summarises it
    across seeds (``rebalance_sim.lab.engine.aggregate``)."""

    name: str
    scope: str  # "episode" or "run"
    type: str = "double"  # Spark's: "double", "long", "string" or "boolean"
    header: str | None = None
    across_seeds: bool = False


# Every metric, defined once: the episode table, the run summary and the sweep's aggregation
# read this list (tests/sim/test_events.py checks it against what compute_metrics returns). The
# episode metrics come in the order the episode table shows them, the run metrics a sweep
# summarises in the order of its columns.
METRICS: tuple[Metric, ...] = (
    Metric("episode", "episode", "long", "#"),
    Metric("start_s", "episode", header="start s"),
    Metric("rebalance_time_s", "episode", header="rebalance s"),
    Metric("rounds", "episode", "long", "rounds"),
    Metric("time_to_detect_s", "episode", header="detect s"),
    Metric("join_barrier_s", "episode", header="join s"),
    Metric("sync_s", "episode", header="sync s"),
    Metric("callbacks_s", "episode", header="callbacks s"),
    Metric("unassigned_partition_s", "episode", header="unassigned p*s"),
    Metric("unassigned_max_s", "episode", header="max gap s"),
    Metric("partitions_touched", "episode", "long", "touched"),
    Metric("stop_the_world_s", "episode", header="stop-world s"),
    Metric("double_processing_partition_s", "episode", header="double p*s"),
    Metric("records_reprocessed", "episode", header="again recs"),
    Metric("first_record_max_s", "episode", header="1st rec s"),
    Metric("peak_lag_records", "episode", header="peak lag"),
    Metric("triggers", "episode", "string"),
    Metric("end_s", "episode"),
    Metric("settled", "episode", "boolean"),
    Metric("generations", "episode", "string"),
    Metric("callbacks_max_member_s", "episode"),
    Metric("members_revoking", "episode", "long"),
    Metric("partitions_revoked", "episode", "long"),
    Metric("unassigned_p50_s", "episode"),
    Metric("unassigned_p99_s", "episode"),
    Metric("throughput_loss_records", "episode"),
    Metric("lag_recovery_s", "episode"),
    *(Metric(f"records_reprocessed_{c}", "episode") for c in REPROCESS_CAUSES),
    Metric("rebalance_time_total_s", "run", across_seeds=True),
    Metric("rebalance_time_max_s", "run", across_seeds=True),
    Metric("rounds_total", "run", "long", across_seeds=True),
    Metric("unassigned_partition_s", "run", across_seeds=True),
    Metric("unassigned_max_s", "run", across_seeds=True),
    Metric("throughput_loss_records", "run", across_seeds=True),
    Metric("stop_the_world_s", "run", across_seeds=True),
    Metric("peak_lag_records", "run", across_seeds=True),
    Metric("double_processing_partition_s", "run", across_seeds=True),
    Metric("records_reprocessed", "run", across_seeds=True),
    Metric("first_record_max_s", "run", across_seeds=True),
    Metric("episodes", "run", "long", across_seeds=True),
    # Kafka's double-ownership hazard (sim.observe.invariants, run_scenario): counted, not a
    # violation
    Metric("kafka_hazard_double_ownership_partition_s", "run", across_seeds=True),
    Metric("kafka_hazard_records_processed_twice", "run", across_seeds=True),
    Metric("formation_s", "run"),
    Metric("episodes_unsettled", "run", "long"),
    Metric("time_to_detect_max_s", "run"),
    Metric("join_barrier_total_s", "run"),
    Metric("sync_total_s", "run"),
    Metric("callbacks_total_s", "run"),
    Metric("partitions_revoked_total", "run", "long"),
    Metric("unassigned_p99_s", "run"),
    Metric("partitions_touched", "run", "long"),
    Metric("lag_recovery_max_s", "run"),
    *(Metric(f"records_reprocessed_{c}", "run") for c in REPROCESS_CAUSES),
)


def metrics_of(scope: str) -> tuple[Metric, ...]:
    """The metrics of ``scope`` ("episode" or "run"), in ``METRICS``'s order."""
    return tuple(m for m in METRICS if m.scope == scope)


# A paused member's progress is handed on with the cause "zombie" (sim.client.classic: it becomes one
# when it resumes); what its partitions' next owner processes again from the committed offset up
# to that progress is the paused member's uncommitted work, taken from it: ``fenced``. ``zombie``
# counts only what a zombie processes while the new owner does too (double processing x rate).
_EVENT_CAUSES = {"zombie": "fenced"}


def _episodes_windows(events, last_t: float) -> list[dict]:
    """[{start, end, triggers, closed}] from trigger / settled / unsettled events (``events`` may
    hold others too; ``last_t``: the time of the run's last event, where open episodes end).

    An episode ends at the first ``settled`` event after the group became unsettled in it. A
    trigger that does not unsettle the group (a delay spike, a partition that heals in time)
    gives a zero-length episode, unless the group unsettles before its fault window is over.
    """
    episodes: list[dict] = [
        {"start": 0.0, "end": None, "triggers": ["formation"], "shaken": True, "quiet_until": 0.0}
    ]
    open_ep: dict | None = episodes[0]
    i, n = 0, len(events)
    while i < n:
        t = events[i][0]
        j = i
        while j < n and events[j][0] == t:
            j += 1
        if open_ep is not None and not open_ep["shaken"] and t > open_ep["quiet_until"]:
            open_ep["end"] = open_ep["start"]  # nothing happened within the fault window
            open_ep = None
        for _, kind, member, _g, detail in events[i:j]:
            if kind == "trigger":
                label = f"{detail}" + (f" [{member}]" if member else "")
                duration_s = Trigger.decode(detail).duration_s
                until = t + (duration_s or 0.0)
                if open_ep is None:
                    open_ep = {
                        "start": t,
                        "end": None,
                        "triggers": [label],
                        "shaken": False,
                        "quiet_until": until,
                    }
                    episodes.append(open_ep)
                else:
                    open_ep["triggers"].append(label)
                    open_ep["quiet_until"] = max(open_ep["quiet_until"], until)
            elif kind == "unsettled":
                if open_ep is not None:
                    open_ep["shaken"] = True
            elif kind == "settled" and open_ep is not None and open_ep["shaken"]:
                open_ep["end"] = t
                open_ep = None
        i = j
    if open_ep is not None and not open_ep["shaken"]:
        open_ep["end"] = open_ep["start"]
    for ep in episodes:
        ep["closed"] = ep["end"] is not None
        if ep["end"] is None:
            ep["end"] = last_t
    return episodes


def compute_metrics(
    events_t: pa.Table,
    intervals_t: pa.Table,
    config: SimConfig,
    rates: dict[str, float],
    processing_union: tuple[np.ndarray, np.ndarray] | None = None,
    check: Callable[[], None] | None = None,
) -> tuple[list[dict], dict]:
    """(episodes, summary) for one run. Both hold only JSON types. ``processing_union``: the
    ``ProcessingSpans(...).union()`` of these intervals when the caller has it already. ``check``
    is called before each episode (a run's deadline: it raises to stop)."""
    events = table_rows(
        events_t, ["t", "kind", "member", "generation", "detail"], METRIC_EVENT_KINDS
    )
    intervals = table_rows(intervals_t, ["kind", "member", "topic", "partition", "start", "end"])
    last_t = pc.max(events_t.column("t")).as_py() if events_t.num_rows else 0.0
    run_end = max([last_t, *(r[5] for r in intervals), 0.0])
    windows = _episodes_windows(events, last_t)

    by_kind: dict[str, list] = defaultdict(list)
    for r in intervals:
        by_kind[r[0]].append(r)
    unassigned = by_kind["unassigned"]
    ua_start = np.array([r[4] for r in unassigned], dtype=float)
    ua_end = np.array([r[5] for r in unassigned], dtype=float)
    ua_rate = np.array([rates.get(r[2], 0.0) for r in unassigned], dtype=float)
    ua_part = [(r[2], r[3]) for r in unassigned]
    dp = by_kind["double_processing"]
    dp_start = np.array([r[4] for r in dp], dtype=float)
    dp_end = np.array([r[5] for r in dp], dtype=float)
    dp_rate = np.array([rates.get(r[2], 0.0) for r in dp], dtype=float)
    stalled = by_kind["stalled"]
    st_start = np.array([r[4] for r in stalled], dtype=float)
    st_end = np.array([r[5] for r in stalled], dtype=float)
    st_members: dict[str, int] = {}
    st_member = np.array(
        [st_members.setdefault(r[1], len(st_members)) for r in stalled], dtype=np.int64
    )
    st_names = list(st_members)
    reprocessed = []  # (t, records, rate, cause)
    first_records = []  # (t, seconds after assignment)
    for t, kind, _m, _g, detail in events:
        if kind == "reprocessed":
            rp = Reprocessed.decode(detail)
            if rp is not None:
                reprocessed.append((t, rp.records, rp.rate, rp.cause))
        elif kind == "first_record":
            fr = FirstRecord.decode(detail)
            if fr is not None:
                first_records.append((t, fr.after_s))

    # their instants, to find an episode's rows by bisection (None: not in time order)
    rp_t = _instants([r[0] for r in reprocessed])
    fr_t = _instants([r[0] for r in first_records])

    # group-wide processing (for stop-the-world)
    bu_s, bu_e = (
        ProcessingSpans(intervals).union() if processing_union is None else processing_union
    )

    # lag: fluid bumps over unassigned intervals
    total_rate = sum(rates.get(t.name, 0.0) * t.partitions for t in config.topics) or 0.0
    owned_end = max((r[5] for r in by_kind["owned"]), default=run_end)
    final_members = {r[1] for r in by_kind["owned"] if r[5] >= owned_end}
    # what each member drains a backlog at (a commitSync per batch costs a round trip per batch)
    capacity = (
        sum(
            config.consumer_for(m).drain_capacity(2.0 * config.network.latency_of(m).mean_s())
            for m in final_members
        )
        if final_members
        else 0.0
    )
    spare = capacity / total_rate - 1.0 if total_rate > 0 else math.inf
    # Re-processed records add to the lag as if the partitions had been unassigned for the span
    # they are processed again, ending when the new owner learns its position.
    rp_rate = np.array([r[2] for r in reprocessed], dtype=float)
    rp_end = np.array([r[0] for r in reprocessed], dtype=float)
    rp_start = rp_end - np.array([r[1] for r in reprocessed], dtype=float) / np.where(
        rp_rate > 0, rp_rate, 1.0
    )
    lag = _lag_curve(
        np.concatenate([ua_start, rp_start]),
        np.concatenate([ua_end, rp_end]),
        np.concatenate([ua_rate, rp_rate]),
        spare,
    )

    ev_t = np.array([e[0] for e in events], dtype=float)
    episodes = []
    for idx, w in enumerate(windows):
        if check is not None:
            check()
        s, e = w["start"], w["end"]
        lo = np.searchsorted(ev_t, s, side="left")
        hi = np.searchsorted(ev_t, e, side="right")
        window_events = events[lo:hi]
        rounds = 0
        detect = None
        join_s = 0.0
        sync_s = 0.0
        prep_at = None
        join_at = None
        revoked = 0
        revoking_members = set()
        gens = []
        for t, kind, member, gen, detail in window_events:
            if kind == "rebalance_start":
                if detect is None:
                    detect = t - s
                if prep_at is None:
                    prep_at = t
            elif kind == "join_complete":
                rounds += 1
                gens.append(gen)
                if prep_at is not None:
                    join_s += t - prep_at
                    prep_at = None
                join_at = t
            elif kind == "target_assignment":  # the consumer protocol's round: one group epoch
                rounds += 1
                gens.append(gen)
            elif kind == "stable":
                if join_at is not None:
                    sync_s += t - join_at
                    join_at = None
            elif kind == "revoke":
                rv = Revoke.decode(detail)
                if rv is not None:
                    revoked += rv.partitions
                revoking_members.add(member)
        # unassigned windows clipped to the episode
        if ua_start.size:
            cs = np.maximum(ua_start, s)
            ce = np.minimum(ua_end, e)
            mask = ce > cs
            lengths = (ce - cs)[mask]
            touched = len({ua_part[i] for i in np.nonzero(mask)[0].tolist()})
            loss = float(np.sum(lengths * ua_rate[mask]))
        else:
            lengths = np.zeros(0)
            touched = 0
            loss = 0.0
        cb = _per_member(_clipped(st_start, st_end, s, e), st_member, st_names)
        dp_in = _clipped(dp_start, dp_end, s, e)
        dps = sum(dp_in.tolist())  # sums in row order, one float at a time, as ever
        again = dict.fromkeys(REPROCESS_CAUSES, 0.0)
        lo, hi = _window(rp_t, s, e)
        for t, records, _rate, cause in reprocessed[lo:hi]:
            if s <= t <= e:
                again[_EVENT_CAUSES.get(cause, cause) if cause in again else "uncommitted"] += (
                    records
                )
        again["zombie"] += sum((dp_rate * dp_in).tolist())
        lo, hi = _window(fr_t, s, e)
        firsts = [after for t, after in first_records[lo:hi] if s <= t <= e]
        processing = (
            float(np.sum(np.clip(np.minimum(bu_e, e) - np.maximum(bu_s, s), 0, None)))
            if bu_s.size
            else 0.0
        )
        stw = max(0.0, (e - s) - processing)
        peak, recovery = _lag_in_window(lag, s, e)
        episodes.append(
            {
                "episode": idx,
                "triggers": "; ".join(w["triggers"]),
                "start_s": s,
                "end_s": e,
                "settled": w["closed"],
                "rebalance_time_s": e - s,
                "rounds": rounds,
                "generations": ",".join(str(g) for g in gens),
                "time_to_detect_s": detect,
                "join_barrier_s": join_s,
                "sync_s": sync_s,
                "callbacks_s": float(sum(cb.values())),
                "callbacks_max_member_s": float(max(cb.values(), default=0.0)),
                "members_revoking": len(revoking_members),
                "partitions_revoked": revoked,
                "unassigned_partition_s": float(np.sum(lengths)),
                "unassigned_max_s": float(lengths.max()) if lengths.size else 0.0,
                "unassigned_p50_s": _pct(lengths, 50) or 0.0,
                "unassigned_p99_s": _pct(lengths, 99) or 0.0,
                "partitions_touched": touched,
                "throughput_loss_records": loss + sum(again.values()),
                "peak_lag_records": peak,
                "lag_recovery_s": recovery,
                "stop_the_world_s": stw,
                "double_processing_partition_s": float(dps),
                "records_reprocessed": float(sum(again.values())),
                **{f"records_reprocessed_{c}": float(v) for c, v in again.items()},
                "first_record_max_s": float(max(firsts, default=0.0)),
            }
        )
    return episodes, _summarize(episodes)


def _per_member(seconds: np.ndarray, member: np.ndarray, names: list[str]) -> dict[str, float]:
    """Per member, the sum of its positive ``seconds`` (rows in order; ``member`` indexes
    ``names``), members in the order of their first positive row: the sums and their order are
    those of adding row by row into a dict."""
    positive = seconds > 0
    who = member[positive]
    if who.size == 0:
        return {}
    sums = np.bincount(who, weights=seconds[positive], minlength=len(names))  # row order per member
    present, first = np.unique(who, return_index=True)
    return {names[i]: float(sums[i]) for i in present[np.argsort(first)].tolist()}


def _lag_curve(start: np.ndarray, end: np.ndarray, rate: np.ndarray, spare: float):
    """Total lag as breakpoints ``(times, values, slope_after)``: each gap adds a bump rising at
    ``rate`` and then draining at ``rate * spare`` until empty."""
    if start.size == 0:
        return np.zeros(1), np.zeros(1), np.zeros(1)
    drain = rate * spare if spare > 0 else np.zeros_like(rate)
    safe = np.where(drain > 0, drain, 1.0)
    zero_at = np.where(drain > 0, end + rate * (end - start) / safe, np.inf)
    times = np.concatenate([start, end, zero_at])
    slopes = np.concatenate([rate, -(rate + drain), drain])
    finite = np.isfinite(times)
    times, slopes = times[finite], slopes[finite]
    order = np.argsort(times, kind="stable")
    times, slopes = times[order], slopes[order]
    slope_after = np.cumsum(slopes)
    dt = np.diff(times, prepend=times[0])
    slope_before = np.concatenate([[0.0], slope_after[:-1]])
    values = np.maximum(np.cumsum(slope_before * dt), 0.0)
    return times, values, slope_after


def _instants(ts: list[float]) -> list[float] | None:
    """``ts`` if it is in time order (events are), else None."""
    return ts if all(a <= b for a, b in itertools.pairwise(ts)) else None


def _window(ts: list[float] | None, s: float, e: float) -> tuple[int, int | None]:
    """The rows of ``ts`` (instants in time order, or None for all rows) that may lie in
    [s, e]: an episode reads its own rows, not the whole run's."""
    if ts is None:
        return 0, None
    return bisect.bisect_left(ts, s), bisect.bisect_right(ts, e)


def _lag_at(curve, x: float) -> float:
    times, values, slope_after = curve
    i = int(np.searchsorted(times, x, side="right")) - 1
    if i < 0:
        return 0.0
    return max(0.0, float(values[i] + slope_after[i] * (x - times[i])))


def _lag_in_window(curve, s, e) -> tuple[float, float | None]:
    """(peak lag in [s, e], seconds after e until the lag is back to its value at s)."""
    times, values, _ = curve
    base = _lag_at(curve, s)
    inside = values[(times >= s) & (times <= e)]
    peak = max([base, _lag_at(curve, e)] + inside.tolist())
    eps = 1e-6 * max(1.0, peak)
    if _lag_at(curve, e) <= base + eps:
        return peak, 0.0
    after = np.nonzero((times >= e) & (values <= base + eps))[0]
    if after.size == 0:
        return peak, None
    return peak, float(times[after[0]] - e)


def _summarize(episodes: list[dict]) -> dict:
    eps = [ep for ep in episodes if ep["episode"] > 0]
    formation = episodes[0]

    def total(key):
        return float(sum(ep[key] or 0.0 for ep in eps))

    def most(key):
        return float(max((ep[key] or 0.0 for ep in eps), default=0.0))

    return {
        "formation_s": formation["rebalance_time_s"],
        "episodes": len(eps),
        "episodes_unsettled": sum(not ep["settled"] for ep in eps),
        "rebalance_time_total_s": total("rebalance_time_s"),
        "rebalance_time_max_s": most("rebalance_time_s"),
        "rounds_total": int(sum(ep["rounds"] for ep in eps)),
        "time_to_detect_max_s": most("time_to_detect_s"),
        "join_barrier_total_s": total("join_barrier_s"),
        "sync_total_s": total("sync_s"),
        "callbacks_total_s": total("callbacks_s"),
        "partitions_revoked_total": int(sum(ep["partitions_revoked"] for ep in eps)),
        "unassigned_partition_s": total("unassigned_partition_s"),
        "unassigned_max_s": most("unassigned_max_s"),
        "unassigned_p99_s": most("unassigned_p99_s"),
        "partitions_touched": int(sum(ep["partitions_touched"] for ep in eps)),
        "throughput_loss_records": total("throughput_loss_records"),
        "peak_lag_records": most("peak_lag_records"),
        "lag_recovery_max_s": most("lag_recovery_s"),
        "stop_the_world_s": total("stop_the_world_s"),
        "double_processing_partition_s": total("double_processing_partition_s"),
        "records_reprocessed": total("records_reprocessed"),
        **{f"records_reprocessed_{c}": total(f"records_reprocessed_{c}") for c in REPROCESS_CAUSES},
        "first_record_max_s": most("first_record_max_s"),
    }
