"""Aggregation of a sweep with PySpark DataFrames: per-run metrics, percentiles across seeds,
and the distribution of per-partition unassigned windows.

Inputs (the tables a sweep wrote through Spark, see ``rebalance_sim.lab.engine.store``; only runs complete
for the current model): the simulator's ``runs`` (its ``summary.*`` columns are the run's
metrics, defined once in ``sim.observe.metrics``), its ``intervals``, and the sweep's ``episodes`` and
``points``.

Outputs (Parquet under ``OUT/aggregate/<name>/``, and CSV: one file ``<name>.csv`` per table
when OUT is local, a Spark CSV directory otherwise; for a local OUT the driver writes the tables
it collected, Spark writes the others):

``runs``     one row per run: the parameter point, seed, the summary metrics, and the unassigned
             partition-seconds and max window recomputed here from ``intervals`` (the
             ``*_from_intervals`` columns; ``intervals_match`` says they agree with the summary).
``points``   one row per parameter point: ``<metric>_median``, ``_p10``, ``_p90``, ``_max`` across seeds
             (exact percentiles, linear interpolation between order statistics, as numpy's
             default) and ``seeds``.
``windows``  one row per unassigned window inside a rebalance episode (formation excluded):
             point, seed, topic, partition, episode, ``window_s``. Parquet only (it can be large);
             for a local OUT the driver sorts and writes it when it collects it anyway or it has
             at most ``DRIVER_WINDOWS_MAX`` rows, Spark otherwise.
``window_quantiles``  per point: count, partitions touched, p50 / p90 / p99 / max of ``window_s``.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.csv as pacsv

from sim.observe.metrics import metrics_of

from ..atomic import atomic_write_bytes
from ..vocabulary import ASSIGNMENT_EVENTS

# The per-run metrics summarised across seeds: (summary column, Spark type), from the
# simulator's one list of metrics.
METRICS: tuple[tuple[str, str], ...] = tuple(
    (m.name, m.type) for m in metrics_of("run") if m.across_seeds
)
# Extra per-run columns kept in the runs table (not summarised).
EXTRA: tuple[tuple[str, str], ...] = (
    ("formation_s", "double"),
    ("invariant_violations", "long"),
    ("wall_s", "double"),
    ("messages", "long"),
)
STATS = (("median", 0.5), ("p10", 0.1), ("p90", 0.9))
NOT_POINT = {"run_id", "seed", "spec"}
# The most windows the driver sorts and writes itself for a local output when the caller does not
# collect them (about 100 MB as Arrow); beyond that Spark sorts and writes them.
DRIVER_WINDOWS_MAX = 2_000_000
# Tolerance of the intervals-vs-summary check: both sides sum the same floats, in other orders.
MATCH_TOL = 1e-6


def load_runs(spark, sweep_dir, run_ids: Sequence[str] | None = None):
    """The points joined with the simulator's summary metrics: one row per run (only ``run_ids``
    if given: an output may also hold runs of other grids)."""
    from pyspark.sql import functions as F

    from .store import read_table

    points = read_table(spark, sweep_dir, "points", run_ids)
    runs = read_table(spark, sweep_dir, "runs", run_ids)
    have = set(runs.columns)
    wanted = METRICS + EXTRA
    runs = runs.select(
        "run_id",
        *[
            (F.col(f"`summary.{m}`") if f"summary.{m}" in have else F.lit(None)).cast(t).alias(m)
            for m, t in wanted
        ],
    )
    return points.drop("spec").join(runs, "run_id", "inner")


def point_columns(runs_df) -> list[str]:
    """The columns that identify a parameter point (everything the sweep put in point.parquet)."""
    known = {m for m, _ in METRICS + EXTRA} | NOT_POINT
    return [c for c in runs_df.columns if c not in known]


def unassigned_windows(spark, sweep_dir, runs_df, run_ids: Sequence[str] | None = None):
    """Unassigned intervals clipped to each rebalance episode (formation excluded), with points."""
    from pyspark.sql import functions as F

    from .store import read_table

    run_ids = None if run_ids is None else list(run_ids)
    intervals = (
        read_table(spark, sweep_dir, "intervals", run_ids)
        .where(F.col("kind") == "unassigned")
        .select("run_id", "topic", "partition", "start", "end")
    )
    episodes = (
        read_table(spark, sweep_dir, "episodes", run_ids)
        .select(
            "run_id",
            F.col("episode").cast("long"),
            F.col("start_s").cast("double"),
            F.col("end_s").cast("double"),
        )
        .where(F.col("episode") > 0)
    )
    i, e = intervals.alias("i"), episodes.alias("e")
    clipped = (
        i.join(
            e,
            (F.col("i.run_id") == F.col("e.run_id"))
            & (F.col("i.end") > F.col("e.start_s"))
            & (F.col("i.start") < F.col("e.end_s")),
        )
        .select(
            F.col("i.run_id").alias("run_id"),
            "topic",
            "partition",
            "episode",
            (
                F.least(F.col("i.end"), F.col("e.end_s"))
                - F.greatest(F.col("i.start"), F.col("e.start_s"))
            ).alias("window_s"),
        )
        .where(F.col("window_s") > 0)
    )
    cols = point_columns(runs_df)
    return clipped.join(runs_df.select("run_id", "seed", *cols), "run_id", "inner")


def per_run(runs_df, windows_df):
    """Runs with the unassigned metrics recomputed from intervals, and whether they match."""
    from pyspark.sql import functions as F

    # Per episode first: the summary's max window is the largest of the episodes' maxima.
    # The sum in sorted order: the same floats give the same bits however Spark partitioned them.
    ordered_sum = F.aggregate(
        F.array_sort(F.collect_list("window_s")), F.lit(0.0), lambda acc, x: acc + x
    )
    recomputed = windows_df.groupBy("run_id").agg(
        ordered_sum.alias("unassigned_partition_s_from_intervals"),
        F.max("window_s").alias("unassigned_max_s_from_intervals"),
    )
    out = runs_df.join(recomputed, "run_id", "left").fillna(
        0.0, ["unassigned_partition_s_from_intervals", "unassigned_max_s_from_intervals"]
    )

    def close(a, b):
        return F.abs(F.col(a) - F.col(b)) <= F.lit(MATCH_TOL) * F.greatest(
            F.lit(1.0), F.abs(F.col(b))
        )

    return out.withColumn(
        "intervals_match",
        close("unassigned_partition_s_from_intervals", "unassigned_partition_s")
        & close("unassigned_max_s_from_intervals", "unassigned_max_s"),
    )


# The events that carry one assignment computation's simulated cost (``cost=...s``): the classic
# leader's (``sim.client.classic``) and the consumer protocol coordinator's target assignment
# (``sim.coordinator.consumer.group``).


def assignment_time(events_df, episodes_df):
    """Per run: simulated time spent computing assignments inside its rebalance episodes
    (formation excluded) and how many computations that was (``leader_assign_s``,
    ``assignments``): the classic group leader's assignor, or the coordinator's server-side
    assignor under the consumer group protocol."""
    from pyspark.sql import functions as F

    from sim.observe.events import ASSIGNMENT_COST_PATTERN

    ev = events_df.where(F.col("kind").isin(*ASSIGNMENT_EVENTS)).select(
        "run_id",
        "t",
        F.regexp_extract("detail", ASSIGNMENT_COST_PATTERN, 1).cast("double").alias("cost_s"),
    )
    ep = episodes_df.select("run_id", "episode", "start_s", "end_s").where(F.col("episode") > 0)
    joined = ev.join(ep, (ev.run_id == ep.run_id) & (ev.t >= ep.start_s) & (ev.t <= ep.end_s))
    return joined.groupBy(ev.run_id).agg(
        F.sum("cost_s").alias("leader_assign_s"), F.count(F.lit(1)).alias("assignments")
    )


def per_point(runs_df, metrics: Sequence[str] | None = None):
    """Median, p10, p90 and max across seeds of every metric, per parameter point."""
    from pyspark.sql import functions as F

    metrics = list(metrics or [m for m, _ in METRICS])
    aggs = [F.count("seed").alias("seeds")]
    out: list = []  # Columns and column names, as select takes them
    for m in metrics:
        x = F.col(m).cast("double")
        # one exact percentile aggregate per metric for all its quantiles (one buffer of values)
        aggs.append(F.percentile(x, F.array(*(F.lit(q) for _, q in STATS))).alias(f"_{m}_q"))
        aggs.append(F.max(x).alias(f"{m}_max"))
        out += [F.col(f"_{m}_q")[i].alias(f"{m}_{name}") for i, (name, _) in enumerate(STATS)]
        out.append(f"{m}_max")
    cols = point_columns(runs_df)
    return runs_df.groupBy(*cols).agg(*aggs).select(*cols, "seeds", *out).orderBy(*cols)


def window_quantiles(windows_df, runs_df):
    """Per point: how many windows, partitions touched (per run, summed), and window quantiles."""
    from pyspark.sql import functions as F

    cols = point_columns(runs_df)
    w = F.col("window_s")
    touched = (
        windows_df.select(*cols, "run_id", "episode", "topic", "partition")
        .distinct()
        .groupBy(*cols)
        .agg(F.count(F.lit(1)).alias("partitions_touched"))
    )
    names = ("window_p50_s", "window_p90_s", "window_p99_s")
    q = (
        windows_df.groupBy(*cols)
        .agg(
            F.count(F.lit(1)).alias("windows"),
            # one exact percentile aggregate for the three (one buffer of values, not three)
            F.percentile(w, F.array(F.lit(0.5), F.lit(0.9), F.lit(0.99))).alias("_q"),
            F.max(w).alias("window_max_s"),
        )
        .select(
            *cols,
            "windows",
            *(F.col("_q")[i].alias(n) for i, n in enumerate(names)),
            "window_max_s",
        )
    )
    return q.join(touched, cols, "inner").orderBy(*cols)


def _write(spark, df, table: pa.Table | None, out_dir: str, name: str, csv: bool = True) -> None:
    """``df`` (already collected as ``table``) written as Parquet, the CSV beside it: for a local
    ``out_dir`` by the driver from ``table`` (a one-task Spark job per table cost 0.3-0.8 s on
    the main job's cold JVM), else by Spark."""
    from .store import local_path

    local = local_path(out_dir)
    if local is not None and table is not None:
        _write_local_parquet(table, local / name)
    else:
        df.coalesce(1).write.mode("overwrite").parquet(f"{out_dir}/{name}")
    if not csv:
        return
    if local is not None:
        buf = io.BytesIO()
        pacsv.write_csv(table, buf)
        atomic_write_bytes(local / f"{name}.csv", buf.getvalue())
    else:
        df.coalesce(1).write.mode("overwrite").option("header", "true").csv(f"{out_dir}/{name}.csv")


def aggregate(
    spark,
    sweep_dir,
    out_dir=None,
    run_ids: Sequence[str] | None = None,
    collect_windows: bool = True,
    window_tables: bool = True,
) -> dict[str, pa.Table]:
    """Aggregate the complete runs under ``sweep_dir`` (all, or only ``run_ids``); write the
    tables to ``out_dir`` (default ``sweep_dir/aggregate``). Returns them as pyarrow Tables,
    sorted deterministically; ``windows`` only with ``collect_windows`` (a sweep of 10,000-member
    groups has millions of windows: more than the driver should hold when nobody reads them).
    Without ``window_tables``: only ``runs`` (without the ``*_from_intervals`` check) and ``points``,
    for a caller that reads the summary metrics only: cutting every unassigned interval at its
    episodes is most of the aggregation's time when the groups are large."""
    from .store import uri

    out_dir = uri(out_dir) if out_dir is not None else f"{uri(sweep_dir)}/aggregate"
    runs_df = load_runs(spark, sweep_dir, run_ids).cache()
    cols = point_columns(runs_df)
    windows_df = (
        unassigned_windows(spark, sweep_dir, runs_df, run_ids).cache() if window_tables else None
    )
    if windows_df is None:
        frames = {"runs": runs_df.orderBy(*cols, "seed"), "points": per_point(runs_df)}
    else:
        frames = {
            "runs": per_run(runs_df, windows_df).orderBy(*cols, "seed"),
            "points": per_point(runs_df),
            "window_quantiles": window_quantiles(windows_df, runs_df),
        }
    local = _local_dir(out_dir)
    if local is not None:
        local.mkdir(parents=True, exist_ok=True)
    tables = {}
    for name, df in frames.items():
        if local is None:
            df = df.persist()  # computed once, for the driver and for Spark's write
        tables[name] = df.toArrow()
        _write(spark, df, tables[name], out_dir, name)
        if local is None:
            df.unpersist()
    if windows_df is None:
        runs_df.unpersist()
        return tables
    windows = windows_df.select(
        *cols, "seed", "run_id", "episode", "topic", "partition", "window_s"
    )
    order = [*cols, "seed", "episode", "topic", "partition", "window_s"]
    if local is not None and (collect_windows or windows_df.count() <= DRIVER_WINDOWS_MAX):
        # Collected as Spark computed them and sorted here: Spark's global sort (a sampling job,
        # then the sort) and one task writing its result cost a large share of the aggregation,
        # for a table the driver holds anyway (or could: up to DRIVER_WINDOWS_MAX rows). Written
        # from that table, as the CSVs.
        table = sort_like_spark(windows.toArrow(), order)
        _write_local_parquet(table, local / "windows")
        if collect_windows:
            tables["windows"] = table
    else:
        windows = windows.orderBy(*order)
        if collect_windows:
            windows = windows.persist()  # computed once, for the driver and for the write
            tables["windows"] = windows.toArrow()
        _write(spark, windows, None, out_dir, "windows", csv=False)
        windows.unpersist()  # (nothing to release when not persisted)
    windows_df.unpersist()
    runs_df.unpersist()
    return tables


def sort_like_spark(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """``table`` sorted by ``keys`` ascending as Spark's ``orderBy`` sorts them (nulls first;
    strings by their UTF-8 bytes, as both compare them)."""
    if (
        int(pa.__version__.split(".")[0]) >= 25
    ):  # null placement per key (the global one is deprecated)
        return table.sort_by([(k, "ascending", "at_start") for k in keys])
    return table.sort_by([(k, "ascending") for k in keys], null_placement="at_start")


def _write_local_parquet(table: pa.Table, path) -> None:
    """``table`` as a Parquet directory at the local ``path`` (one part file and ``_SUCCESS``, as
    Spark leaves one), replacing it whole."""
    import pyarrow.parquet as pq

    from ..atomic import atomic_directory

    with atomic_directory(path) as tmp:
        part = tmp / "part-00000.snappy.parquet"
        pq.write_table(table, part, compression="snappy")  # created under the user's umask
        (tmp / "_SUCCESS").touch()


def _local_dir(out_dir: str):
    from .store import local_path

    return local_path(out_dir)
