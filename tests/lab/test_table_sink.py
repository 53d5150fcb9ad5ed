"""A batch's tables written by its own tasks and committed by the driver (rebalance_sim.lab.engine.table_sink):
the same tables as Spark's Parquet writer, and nothing visible before the driver commits."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from rebalance_sim.lab.engine import store
from rebalance_sim.lab.engine.grid import expand, load_grid
from rebalance_sim.lab.engine.store import TABLES, commit_arrow_schema, read_table
from rebalance_sim.lab.engine.sweep import run_sweep
from rebalance_sim.lab.engine.table_sink import TaskTables, commit
from rebalance_sim.lab.provenance import model_id
from sim.observe.recorder import EVENTS_SCHEMA

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
    return t.sort_by(
        [(c, "ascending") for c in t.column_names if not pa.types.is_nested(t.schema.field(c).type)]
    )


def test_the_sink_writes_what_sparks_parquet_writer_writes(spark, tmp_path, monkeypatch):
    """A sweep written by the sink and one written by Spark's Parquet writer read back as the same
    rows with the same Spark schema; the files say which writer wrote them."""
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    specs = expand(load_grid(grid))
    run_sweep(specs, tmp_path / "sink", batch_runs=5)
    monkeypatch.setattr(store, "tasks_write", lambda out: False)
    run_sweep(specs, tmp_path / "spark", batch_runs=5)
    for name in TABLES:
        a = read_table(spark, tmp_path / "sink", name)
        b = read_table(spark, tmp_path / "spark", name)
        assert a.schema == b.schema, name
        assert _sorted(a).equals(_sorted(b)), name
    assert sorted(store.complete_runs(spark, tmp_path / "sink", model_id())) == sorted(
        s.run_id for s in specs
    )
    writers = {
        root: {
            pq.ParquetFile(f).metadata.created_by.split()[0]
            for f in _files(tmp_path / root / "events")
        }
        for root in ("sink", "spark")
    }
    assert writers == {"sink": {"parquet-cpp-arrow"}, "spark": {"parquet-mr"}}


def _task(tmp_path: Path, part: int = 0, attempt: int = 0) -> TaskTables:
    return TaskTables(str(tmp_path), "bX", {"events": EVENTS_SCHEMA}, part, attempt)


def _rows(*run_ids: str) -> pa.Table:
    n = len(run_ids)
    return pa.table(
        {
            "run_id": list(run_ids),
            "model": ["m"] * n,
            "status": ["ok"] * n,
            "wall_s": [0.1] * n,
            "error": [""] * n,
            "committed_at": ["now"] * n,
        },
        schema=commit_arrow_schema(),
    )


def _events(n: int, run_id: str = "r1") -> pa.Table:
    return pa.table(
        {
            "run_id": [run_id] * n,
            "t": [float(i) for i in range(n)],
            "kind": ["join"] * n,
            "member": ["c1"] * n,
            "generation": list(range(n)),
            "detail": [""] * n,
        },
        schema=EVENTS_SCHEMA,
    )


def _visible(path: Path) -> int:
    """Rows a Parquet reader finds under ``path`` (it skips ``_``- and ``.``-prefixed names)."""
    if not path.exists():
        return 0
    return ds.dataset(path, format="parquet").count_rows()


def _commit(tmp_path: Path, *tasks: TaskTables, rows: pa.Table | None = None) -> dict:
    landed = [f for t in tasks for f in t.close()]
    return commit(tmp_path, "bX", landed, {"events": EVENTS_SCHEMA}, rows or _rows("r1"))


def test_nothing_is_visible_before_the_commit_and_the_commit_rows_come_last(tmp_path):
    """Tasks write aside; the commit moves their files in, replaces what the batch's directory
    held, and writes the commit rows, which list every file of the batch with its size."""
    old = tmp_path / "events" / "batch=bX" / "part-old.parquet"
    old.parent.mkdir(parents=True)
    pq.write_table(_events(1, "stale"), old)
    a, b = _task(tmp_path, 0), _task(tmp_path, 1)
    a.add({"events": _events(3)})
    b.add({"events": _events(2, "r2")})
    a.close(), b.close()
    assert _visible(tmp_path / "events") == 1  # only the old file
    assert not (tmp_path / "commits").exists()
    files = commit(
        tmp_path, "bX", [*a.files, *b.files], {"events": EVENTS_SCHEMA}, _rows("r1", "r2")
    )
    events = pq.read_table(tmp_path / "events" / "batch=bX").sort_by(
        [("run_id", "ascending"), ("t", "ascending")]
    )
    assert events.column("run_id").to_pylist() == ["r1"] * 3 + ["r2"] * 2
    assert events.schema.equals(EVENTS_SCHEMA)
    names = sorted(p.name for p in (tmp_path / "events" / "batch=bX").iterdir())
    assert names[0] == "_SUCCESS" and len(names) == 3  # two parts, no _temporary, no old file
    commits = pq.read_table(tmp_path / "commits" / "batch=bX")
    assert commits.column("run_id").to_pylist() == ["r1", "r2"]
    listed = {json.dumps(files, sort_keys=True)} == set(commits.column("files").to_pylist())
    assert listed and files == {
        f"events/batch=bX/{n}": (tmp_path / "events" / "batch=bX" / n).stat().st_size
        for n in names[1:]
    }


def test_a_commit_without_rows_leaves_a_readable_empty_table(tmp_path):
    """A batch whose tasks wrote no rows still gets a table directory that reads as its schema."""
    _commit(tmp_path, _task(tmp_path))
    t = pq.read_table(tmp_path / "events" / "batch=bX")
    assert t.num_rows == 0 and t.schema.equals(EVENTS_SCHEMA)


def test_an_aborted_task_leaves_no_files(tmp_path):
    t = _task(tmp_path)
    t.add({"events": _events(4)})
    t._flush("events")
    assert list((tmp_path / "events").rglob("*.parquet"))
    t.abort()
    assert not list((tmp_path / "events").rglob("*.parquet"))
    assert not (tmp_path / "commits").exists()


def test_a_task_writes_big_tables_in_several_row_groups(tmp_path, monkeypatch):
    """A task's rows are written as they come, a row group per ROW_GROUP_ROWS, not held whole."""
    monkeypatch.setattr("rebalance_sim.lab.engine.table_sink.ROW_GROUP_ROWS", 5)
    t = _task(tmp_path)
    for run in (_events(3), _events(3, "r2"), _events(4, "r3")):
        t.add({"events": run})
    _commit(tmp_path, t)
    (part,) = (tmp_path / "events" / "batch=bX").glob("*.parquet")
    meta = pq.ParquetFile(part).metadata
    assert meta.num_rows == 10 and meta.num_row_groups == 2


def test_a_table_without_a_fixed_schema_takes_the_union_of_its_runs(tmp_path):
    """The simulator's runs and episodes tables differ between runs (all-null columns, ints
    where another run has floats): a task writes the union of its runs' columns."""
    t = TaskTables(str(tmp_path), "bX", {"runs": None}, 0, 0)
    t.add({"runs": pa.table({"run_id": ["a"], "x": pa.array([1], pa.int64()), "y": pa.nulls(1)})})
    t.add({"runs": pa.table({"run_id": ["b"], "x": pa.array([2.5]), "y": ["s"]})})
    commit(tmp_path, "bX", t.close(), {}, _rows("a", "b"))
    runs = pq.read_table(tmp_path / "runs" / "batch=bX")
    assert (
        runs.schema.field("x").type == pa.float64() and runs.schema.field("y").type == pa.string()
    )
    assert runs.column("x").to_pylist() == [1.0, 2.5] and runs.column("y").to_pylist() == [
        None,
        "s",
    ]


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_sink_files_keep_the_umask(tmp_path, mask):
    old = os.umask(mask)
    try:
        t = _task(tmp_path)
        t.add({"events": _events(2)})
        _commit(tmp_path, t)
    finally:
        os.umask(old)
    for p in [*(tmp_path / "events").rglob("*"), *(tmp_path / "commits").rglob("*")]:
        want = (0o777 if p.is_dir() else 0o666) & ~mask
        assert p.stat().st_mode & 0o777 == want, p
