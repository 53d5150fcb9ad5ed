"""The sink that writes a sweep batch's tables with pyarrow (experiments.table_sink): the same
tables as Spark's Parquet writer, and nothing visible before its job commits."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from experiments import store
from experiments.provenance import model_id
from experiments.store import TABLES, read_table, to_blob
from experiments.sweep import expand, load_grid, run_sweep
from experiments.table_sink import TablesWriter
from sim.recorder import EVENTS_SCHEMA

GRID = textwrap.dedent("""
    name = "sink"
    scenarios = ["crash", "scale-out"]
    assignors = ["range", "cooperative-sticky"]
    seeds = 2

    [set]
    partitions = 8
    at_s = 30.0

    [vary]
    members = [3, 5]
""")


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.parquet"))


def _sorted(df) -> pa.Table:
    t = df.toArrow()
    t = t.drop_columns([c for c in t.column_names if "wall" in c])
    return t.sort_by([(c, "ascending") for c in t.column_names
                      if not pa.types.is_nested(t.schema.field(c).type)])


def test_the_sink_writes_what_sparks_parquet_writer_writes(spark, tmp_path, monkeypatch):
    """A sweep written by the sink and one written by Spark's Parquet writer read back as the same
    rows with the same Spark schema; the files say which writer wrote them."""
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    specs = expand(load_grid(grid))
    run_sweep(specs, tmp_path / "sink", batch_runs=5)
    monkeypatch.setattr(store, "_sink_usable", lambda out: False)
    run_sweep(specs, tmp_path / "spark", batch_runs=5)
    for name in TABLES:
        a = read_table(spark, tmp_path / "sink", name)
        b = read_table(spark, tmp_path / "spark", name)
        assert a.schema == b.schema, name
        assert _sorted(a).equals(_sorted(b)), name
    assert sorted(store.complete_runs(spark, tmp_path / "sink", model_id())) == sorted(s.run_id for s in specs)
    writers = {root: {pq.ParquetFile(f).metadata.created_by.split()[0] for f in _files(tmp_path / root / "events")}
               for root in ("sink", "spark")}
    assert writers == {"sink": {"parquet-cpp-arrow"}, "spark": {"parquet-mr"}}


def _writer(tmp_path: Path, commit_rows: pa.Table | None = None) -> TablesWriter:
    rows = commit_rows or pa.table({"run_id": ["r1"], "status": ["ok"]})
    return TablesWriter(str(tmp_path), "bX", {"events": EVENTS_SCHEMA.serialize().to_pybytes()}, to_blob(rows))


def _events(n: int, run_id: str = "r1") -> pa.Table:
    return pa.table({"run_id": [run_id] * n, "t": [float(i) for i in range(n)], "kind": ["join"] * n,
                     "member": ["c1"] * n, "generation": list(range(n)), "detail": [""] * n},
                    schema=EVENTS_SCHEMA)


def _blobs(*tables) -> pa.RecordBatch:
    return pa.record_batch({"events": pa.array([None if t is None else to_blob(t) for t in tables],
                                               pa.binary())})


def _visible(path: Path) -> int:
    """Rows a Parquet reader finds under ``path`` (it skips ``_``- and ``.``-prefixed names)."""
    if not path.exists():
        return 0
    return ds.dataset(path, format="parquet").count_rows()


def test_nothing_is_visible_before_the_commit_and_the_commit_rows_come_last(tmp_path):
    """Tasks write aside; the commit moves their files in, replaces what the batch's directory
    held, and writes the commit rows."""
    w = _writer(tmp_path)
    old = tmp_path / "events" / "batch=bX" / "part-old.parquet"
    old.parent.mkdir(parents=True)
    pq.write_table(_events(1, "stale"), old)
    msgs = [w.write(iter([_blobs(_events(3), None)])), w.write(iter([_blobs(_events(2, "r2"))])), None]
    assert _visible(tmp_path / "events") == 1  # only the old file
    assert not (tmp_path / "commits").exists()
    w.commit(msgs)
    events = pq.read_table(tmp_path / "events" / "batch=bX").sort_by([("run_id", "ascending"), ("t", "ascending")])
    assert events.column("run_id").to_pylist() == ["r1"] * 3 + ["r2"] * 2
    assert events.schema.equals(EVENTS_SCHEMA)
    names = sorted(p.name for p in (tmp_path / "events" / "batch=bX").iterdir())
    assert names[0] == "_SUCCESS" and len(names) == 3  # two parts, no _temporary, no old file
    assert pq.read_table(tmp_path / "commits" / "batch=bX").column("run_id").to_pylist() == ["r1"]


def test_a_commit_without_rows_leaves_a_readable_empty_table(tmp_path):
    """A batch whose tasks wrote no rows still gets a table directory that reads as its schema."""
    w = _writer(tmp_path)
    w.commit([w.write(iter([_blobs(None)]))])
    t = pq.read_table(tmp_path / "events" / "batch=bX")
    assert t.num_rows == 0 and t.schema.equals(EVENTS_SCHEMA)


def test_an_aborted_job_leaves_no_files(tmp_path):
    w = _writer(tmp_path)
    msgs = [w.write(iter([_blobs(_events(4))]))]
    assert list((tmp_path / "events").rglob("*.parquet"))
    w.abort(msgs + [None])
    assert not list((tmp_path / "events").rglob("*.parquet"))
    assert not (tmp_path / "commits").exists()


def test_a_task_writes_big_tables_in_several_row_groups(tmp_path, monkeypatch):
    """A task's rows are written as they come, a row group per ROW_GROUP_ROWS, not held whole."""
    monkeypatch.setattr("experiments.table_sink.ROW_GROUP_ROWS", 5)
    w = _writer(tmp_path)
    w.commit([w.write(iter([_blobs(_events(3), _events(3, "r2")), _blobs(_events(4, "r3"))]))])
    (part,) = (tmp_path / "events" / "batch=bX").glob("*.parquet")
    meta = pq.ParquetFile(part).metadata
    assert meta.num_rows == 10 and meta.num_row_groups == 2


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_sink_files_keep_the_umask(tmp_path, mask):
    old = os.umask(mask)
    try:
        w = _writer(tmp_path)
        w.commit([w.write(iter([_blobs(_events(2))]))])
    finally:
        os.umask(old)
    for p in [*(tmp_path / "events").rglob("*"), *(tmp_path / "commits").rglob("*")]:
        want = (0o777 if p.is_dir() else 0o666) & ~mask
        assert p.stat().st_mode & 0o777 == want, p
