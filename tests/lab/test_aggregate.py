"""Aggregation on small hand-made sweep tables whose answers are computed by hand."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rebalance_sim.lab.engine.aggregate import aggregate, sort_like_spark
from rebalance_sim.lab.provenance import model_id

INTERVAL_COLUMNS = ("run_id", "kind", "member", "topic", "partition", "start", "end")


def _summary(rebalance, rounds, ua_s, ua_max, loss, stw):
    return {
        "rebalance_time_total_s": rebalance,
        "rebalance_time_max_s": rebalance,
        "rounds_total": rounds,
        "unassigned_partition_s": ua_s,
        "unassigned_max_s": ua_max,
        "throughput_loss_records": loss,
        "stop_the_world_s": stw,
        "peak_lag_records": 0.0,
        "double_processing_partition_s": 0.0,
        "episodes": 1,
        "formation_s": 5.0,
        "invariant_violations": 0,
        "wall_s": 0.1,
        "messages": 100,
    }


def _write_run(root: Path, run_id, assignor, seed, summary, episodes, intervals):
    """One run in the layout a sweep writes (``rebalance_sim.lab.engine.store``): its own batch, committed."""
    batch = f"b20260101T000000000000-{run_id}"

    def write(table: pa.Table, name: str) -> None:
        d = root / name / f"batch={batch}"
        d.mkdir(parents=True)
        pq.write_table(table, d / "part-00000.parquet")

    write(
        pa.Table.from_pylist(
            [
                {
                    "run_id": run_id,
                    "seed": seed,
                    "scenario": "crash",
                    "assignor": assignor,
                    "members": 3,
                    "spec": "{}",
                }
            ]
        ),
        "points",
    )
    row = {
        "run_id": run_id,
        "scenario": "crash",
        "seed": seed,
        "config.members": 3,
        **{f"summary.{k}": v for k, v in summary.items()},
    }
    write(pa.Table.from_pylist([row]), "runs")
    write(
        pa.Table.from_pylist(
            [
                {"run_id": run_id, "episode": i, "start_s": float(s), "end_s": float(e)}
                for i, (s, e) in enumerate(episodes)
            ]
        ),
        "episodes",
    )
    write(
        pa.Table.from_pylist(
            [
                {
                    "run_id": run_id,
                    "model": model_id(),
                    "status": "ok",
                    "wall_s": 0.1,
                    "error": "",
                    "committed_at": "2026-01-01T00:00:00Z",
                }
            ]
        ),
        "commits",
    )
    rows = [dict(zip(INTERVAL_COLUMNS, (run_id, *r), strict=True)) for r in intervals]
    schema = pa.schema(
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
    write(pa.Table.from_pylist(rows, schema=schema), "intervals")


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    """Five runs: range x seeds 0-2 and cooperative-sticky x seeds 0-1 of one 3-member crash."""
    root = tmp_path_factory.mktemp("sweep")
    # range, seed 0: formation [0, 5] and one episode [100, 110].
    _write_run(
        root,
        "r0",
        "range",
        0,
        _summary(10.0, 2, 16.0, 10.0, 1600.0, 4.0),
        [(0, 5), (100, 110)],
        [
            ("owned", "c0", "t", 0, 5.0, 100.0),
            ("unassigned", None, "t", 0, 0.0, 3.0),  # formation: not counted
            ("unassigned", None, "t", 0, 100.0, 104.0),  # 4 s
            ("unassigned", None, "t", 1, 100.0, 110.0),  # 10 s
            ("unassigned", None, "t", 2, 108.0, 115.0),  # clipped to the episode: 2 s
        ],
    )
    # range, seed 1: the summary claims 5 partition-seconds, the intervals give 4 (mismatch).
    _write_run(
        root,
        "r1",
        "range",
        1,
        _summary(30.0, 4, 5.0, 4.0, 400.0, 0.0),
        [(0, 5), (50, 60)],
        [
            ("unassigned", None, "t", 0, 50.0, 54.0),
        ],
    )
    # range, seed 2: no unassigned window at all.
    _write_run(
        root, "r2", "range", 2, _summary(20.0, 3, 0.0, 0.0, 0.0, 2.0), [(0, 5), (50, 70)], []
    )
    _write_run(
        root,
        "c0",
        "cooperative-sticky",
        0,
        _summary(4.0, 2, 0.5, 0.5, 50.0, 0.0),
        [(0, 5), (100, 101)],
        [("unassigned", None, "t", 0, 100.0, 100.5)],
    )
    _write_run(
        root,
        "c1",
        "cooperative-sticky",
        1,
        _summary(6.0, 2, 0.0, 0.0, 0.0, 0.0),
        [(0, 5), (100, 106)],
        [],
    )
    out = aggregate(spark, root)
    return root, {k: v.to_pylist() for k, v in out.items()}


def _point(rows, assignor):
    return next(r for r in rows if r["assignor"] == assignor)


def test_points_median_p90_max_across_seeds(tables):
    """Median, p90 (linear interpolation) and max across seeds equal the hand-computed values."""
    _, t = tables
    rng = _point(t["points"], "range")
    assert rng["seeds"] == 3
    # sorted 10, 20, 30: median 20; p90 at rank 1.8 = 20 + 0.8 * 10
    assert rng["rebalance_time_total_s_median"] == pytest.approx(20.0)
    assert rng["rebalance_time_total_s_p90"] == pytest.approx(28.0)
    assert rng["rebalance_time_total_s_max"] == pytest.approx(30.0)
    # rounds 2, 3, 4; stop-the-world 0, 2, 4
    assert rng["rounds_total_median"] == pytest.approx(3.0)
    assert rng["rounds_total_p90"] == pytest.approx(3.8)
    assert rng["stop_the_world_s_p90"] == pytest.approx(3.6)
    coop = _point(t["points"], "cooperative-sticky")
    assert coop["seeds"] == 2
    # 4, 6: median 5, p90 at rank 0.9 = 4 + 0.9 * 2
    assert coop["rebalance_time_total_s_median"] == pytest.approx(5.0)
    assert coop["rebalance_time_total_s_p90"] == pytest.approx(5.8)
    assert coop["throughput_loss_records_max"] == pytest.approx(50.0)


def test_windows_are_clipped_to_episodes_without_formation(tables):
    """Unassigned windows are cut to the rebalance episodes and the formation episode is left out."""
    _, t = tables
    got = sorted((w["run_id"], w["partition"], w["window_s"]) for w in t["windows"])
    assert got == [("c0", 0, 0.5), ("r0", 0, 4.0), ("r0", 1, 10.0), ("r0", 2, 2.0), ("r1", 0, 4.0)]


def test_window_quantiles(tables):
    """Window quantiles per point: range has windows 2, 4, 4, 10 from 4 touched partitions."""
    _, t = tables
    rng = _point(t["window_quantiles"], "range")
    assert rng["windows"] == 4
    assert rng["partitions_touched"] == 4
    assert rng["window_p50_s"] == pytest.approx(4.0)
    assert rng["window_p90_s"] == pytest.approx(8.2)
    assert rng["window_p99_s"] == pytest.approx(9.82)
    assert rng["window_max_s"] == pytest.approx(10.0)


def test_runs_recompute_unassigned_metrics_from_intervals(tables):
    """Per run, partition-seconds and the max window recomputed from intervals are checked
    against the simulator's summary, and a disagreement is flagged."""
    _, t = tables
    runs = {r["run_id"]: r for r in t["runs"]}
    assert runs["r0"]["unassigned_partition_s_from_intervals"] == pytest.approx(16.0)
    assert runs["r0"]["unassigned_max_s_from_intervals"] == pytest.approx(10.0)
    assert runs["r0"]["intervals_match"] is True
    assert runs["r2"]["unassigned_partition_s_from_intervals"] == 0.0
    assert runs["r2"]["intervals_match"] is True
    assert runs["r1"]["intervals_match"] is False


def test_outputs_written_as_parquet_and_csv(tables):
    """Every aggregate table is written as Parquet (by the driver, from the tables it collected:
    the output is local), and every small one also as a CSV file."""
    root, t = tables
    out = root / "aggregate"
    for name in ("runs", "points", "window_quantiles"):
        assert (out / name / "_SUCCESS").is_file() and (out / f"{name}.csv").is_file()
    assert (out / "windows" / "_SUCCESS").is_file()
    assert pq.read_table(out / "points").num_rows == 2
    # the windows the driver collected and sorted are the ones on disk, in the same order
    assert pq.read_table(out / "windows").to_pylist() == t["windows"]
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_windows_are_sorted_as_spark_sorts_them(spark):
    """The driver sorts the collected windows in the order Spark's ``orderBy`` gives: nulls
    first, strings by their bytes (non-ASCII and case included), numbers by value."""
    rows = [
        {"scenario": sc, "members": m, "seed": seed, "topic": topic, "window_s": w}
        for sc in ("crash", "Crash", "scale-out", None, "\u00e9t\u00e9", "z\u4e2d")
        for m in (10, None, -3, 1000)
        for seed in (1, 0)
        for topic, w in (("t", 2.5), ("t", -0.0), ("a", 1e-9), ("t", None))
    ]
    table = pa.Table.from_pylist(
        rows,
        schema=pa.schema(
            [
                ("scenario", pa.string()),
                ("members", pa.int64()),
                ("seed", pa.int64()),
                ("topic", pa.string()),
                ("window_s", pa.float64()),
            ]
        ),
    )
    keys = ["scenario", "members", "seed", "topic", "window_s"]
    by_spark = spark.createDataFrame(table.to_pandas()).orderBy(*keys).toArrow()
    assert sort_like_spark(table, keys).to_pylist() == by_spark.to_pylist()


def test_windows_written_by_driver_or_spark_are_the_same(tables, spark, tmp_path, monkeypatch):
    """Not collected, the windows are still written: by the driver while they are few, by
    Spark's sort and write beyond ``DRIVER_WINDOWS_MAX``; both give the same rows in the same
    order as the collected table."""
    import rebalance_sim.lab.engine.aggregate as agg

    root, t = tables
    aggregate(spark, root, tmp_path / "driver", collect_windows=False)
    monkeypatch.setattr(agg, "DRIVER_WINDOWS_MAX", 0)
    got = aggregate(spark, root, tmp_path / "spark", collect_windows=False)
    assert "windows" not in got
    by_driver = pq.read_table(tmp_path / "driver" / "windows")
    by_spark = pq.read_table(tmp_path / "spark" / "windows")
    assert not [p for p in (tmp_path / "driver" / "windows").iterdir() if p.name.endswith(".crc")]
    assert [p for p in (tmp_path / "spark" / "windows").iterdir() if p.name.endswith(".crc")]
    assert by_driver.to_pylist() == by_spark.to_pylist() == t["windows"]
