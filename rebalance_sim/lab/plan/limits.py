"""The limits a plan's runs crossed, read from their events (one Spark query over all runs).

Per run and phase (``cold``: the group's start, before the fault; ``fault``: from the fault on):

- ``poll_timeouts``: members whose poll loop was stuck past max.poll.interval.ms, inside a
  rebalance callback (the simulator's ``poll_timeout`` event: the member leaves the group, as
  Kafka's heartbeat thread makes it, ``AbstractCoordinator``'s ``maybeLeaveGroup``);
- ``sessions_expired``: members the coordinator removed because their session expired, the
  crashed member of the crash fault left out (that one is the fault: ``member_removed`` events
  with ``reason=session_expired``);
- ``rebalance_timeouts``: members removed for not joining or syncing within the rebalance
  timeout (max.poll.interval.ms): classic ``not_rejoined`` / ``not_synced``, consumer protocol
  ``rebalance_timeout``, classic members of a consumer group ``join_timeout`` / ``sync_timeout``;
- ``max_assigned`` / ``max_revoked``: the most partitions one onPartitionsAssigned /
  onPartitionsRevoked call handled (``assign`` / ``revoke`` events), so the longest callback is
  that count times the callback's cost per partition.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..vocabulary import LIMIT_EVENTS

REBALANCE_TIMEOUT_REASONS = (
    "not_rejoined",
    "not_synced",
    "rebalance_timeout",
    "join_timeout",
    "sync_timeout",
)
COLUMNS = (
    "poll_timeouts",
    "sessions_expired",
    "rebalance_timeouts",
    "max_assigned",
    "max_revoked",
)


def crossings(spark, work, run_ids: Sequence[str]):
    """One row per (run_id, phase) with the counts above (pandas); phases where nothing
    happened have zeros."""
    import pandas as pd
    from pyspark.sql import functions as F

    from sim.observe.events import COUNT_PATTERN, REMOVAL_REASON_PATTERN

    from ..engine.store import read_table

    run_ids = list(run_ids)
    points = read_table(spark, work, "points", run_ids).select("run_id", "fault_at_s")
    ev = (
        read_table(spark, work, "events", run_ids)
        .where(F.col("kind").isin(*LIMIT_EVENTS))
        .select("run_id", "t", "kind", "member", "detail")
        .join(points, "run_id")
        .withColumn("phase", F.when(F.col("t") >= F.col("fault_at_s"), "fault").otherwise("cold"))
        .withColumn("count", F.regexp_extract("detail", COUNT_PATTERN, 1))
        .withColumn("reason", F.regexp_extract("detail", REMOVAL_REASON_PATTERN, 1))
    )
    crashed = ev.where(F.col("kind") == "crash").select("run_id", "member").distinct()
    expired = (
        ev.where((F.col("kind") == "member_removed") & (F.col("reason") == "session_expired"))
        .join(crashed, ["run_id", "member"], "left_anti")
        .groupBy("run_id", "phase")
        .agg(F.countDistinct("member").alias("sessions_expired"))
    )

    def distinct_members(cond):
        return F.countDistinct(F.when(cond, F.col("member")))

    counted = ev.groupBy("run_id", "phase").agg(
        distinct_members(F.col("kind") == "poll_timeout").alias("poll_timeouts"),
        distinct_members(
            (F.col("kind") == "member_removed") & F.col("reason").isin(*REBALANCE_TIMEOUT_REASONS)
        ).alias("rebalance_timeouts"),
        F.max(F.when(F.col("kind") == "assign", F.col("count").cast("long"))).alias("max_assigned"),
        F.max(F.when(F.col("kind") == "revoke", F.col("count").cast("long"))).alias("max_revoked"),
    )
    table = counted.join(expired, ["run_id", "phase"], "left").toPandas()
    rows = [{"run_id": r, "phase": phase} for r in run_ids for phase in ("cold", "fault")]
    frame = pd.DataFrame(rows).merge(table, on=["run_id", "phase"], how="left")
    for col in COLUMNS:
        frame[col] = frame[col].fillna(0).astype("int64")
    return (
        frame[["run_id", "phase", *COLUMNS]].sort_values(["run_id", "phase"]).reset_index(drop=True)
    )
