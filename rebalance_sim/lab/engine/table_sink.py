"""A sweep batch's tables written by its own Spark tasks, committed by the driver (local outputs).

``rebalance_sim.lab.engine.store`` writes a batch's tables through Spark's Parquet writer: a second Spark job
after the batch's runs, which needs free executor cores and, on a busy local machine, waited
behind the next batches' runs (a sweep could finish every run before its first commit landed).
Where the driver and every task see the same local filesystem (a local master and a local
output), the tasks that run the simulations write their runs' tables themselves, with pyarrow,
and the driver commits the batch as soon as its job returns, without Spark:

- each task writes one Parquet file per table (``TaskTables``) under
  ``OUT/<table>/batch=B/_temporary/attempt-<task attempt>/`` (a directory no reader looks in)
  and returns the files' names with its runs' status rows;
- the driver (``commit``) builds each ``OUT/<table>/batch=B/`` aside from the files of the task
  attempts whose results Spark returned and swaps it in whole
  (``rebalance_sim.lab.atomic.atomic_directory``), then does the same with the batch's commit rows
  (``OUT/commits/batch=B/``), which list every file of the batch with its size: the batch
  becomes visible to readers exactly then (the protocol of ``rebalance_sim.lab.engine.store``).

A killed task, job or driver leaves files only under ``_temporary/`` or in ``.``-prefixed
directories, which every reader skips.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: executors import this module before they write
    import pyarrow as pa
    import pyarrow.parquet as pq

ROW_GROUP_ROWS = 1 << 18  # rows buffered per table before a row group is written (~25 MB of events)
TEMPORARY = "_temporary"
COMMITS = "commits"


def part_name(part: int) -> str:
    return f"part-{part:05d}-{uuid.uuid4().hex}.snappy.parquet"


def batch_dir(out_dir: str | os.PathLike, table: str, batch: str) -> Path:
    return Path(out_dir) / table / f"batch={batch}"


class TaskTables:
    """One Spark task's share of a batch: its runs' tables appended table by table (a row group
    per ``ROW_GROUP_ROWS`` rows), each table's rows in one file under the batch's temporary
    directory. ``schemas``: every table's Arrow schema, or None for a table whose schema is the
    union of its runs' (``rebalance_sim.lab.engine.store.unify``: the simulator's runs and episodes)."""

    def __init__(
        self,
        out_dir: str,
        batch: str,
        schemas: Mapping[str, object | None],
        part: int,
        attempt: int,
    ):
        self.out_dir, self.batch, self.part, self.attempt = out_dir, batch, part, attempt
        self.schemas = dict(schemas)
        self.pending: dict[str, list] = {t: [] for t in self.schemas}
        self.rows = dict.fromkeys(self.schemas, 0)
        self.writers: dict[str, pq.ParquetWriter] = {}
        self.files: list[tuple[str, str]] = []  # (table, path)

    def add(self, tables: Mapping[str, pa.Table]) -> None:
        """One run's tables (pyarrow Tables by name)."""
        from .store import conform

        for name, table in tables.items():
            if name not in self.pending or table is None:
                continue
            schema = self.schemas[name]
            if schema is not None:
                table = conform(table, schema)
            self.pending[name].append(table)
            self.rows[name] += table.num_rows
            if self.rows[name] >= ROW_GROUP_ROWS and schema is not None:
                self._flush(name)

    def _flush(self, name: str) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from .store import conform, unify

        tables = self.pending[name]
        if not tables:
            return
        writer = self.writers.get(name)
        if writer is None:
            schema = self.schemas[name]
            if schema is None:  # the union of this task's runs (all-null columns dropped)
                schema = self.schemas[name] = unify([t.schema for t in tables])
            tmp = batch_dir(self.out_dir, name, self.batch) / TEMPORARY / f"attempt-{self.attempt}"
            tmp.mkdir(parents=True, exist_ok=True)
            path = tmp / part_name(self.part)
            writer = self.writers[name] = pq.ParquetWriter(str(path), schema, compression="snappy")
            self.files.append((name, str(path)))
        data = pa.concat_tables([conform(t, writer.schema) for t in tables])
        writer.write_table(data, row_group_size=max(1, data.num_rows))
        self.pending[name], self.rows[name] = [], 0

    def close(self) -> list[tuple[str, str]]:
        """Write what is buffered, close the files; returns (table, path) per file written."""
        try:
            for name in self.pending:
                self._flush(name)
        finally:
            for w in self.writers.values():
                w.close()
        return self.files

    def abort(self) -> None:
        for w in self.writers.values():
            try:
                w.close()
            except Exception:  # removing what it wrote is all that matters
                pass
        for _, path in self.files:
            try:
                os.remove(path)
            except OSError:
                pass


def commit(
    out_dir: str | os.PathLike,
    batch: str,
    landed: Iterable[tuple[str, str]],
    empty_schemas: Mapping[str, pa.Schema],
    commit_rows,
) -> dict[str, int]:
    """Make batch ``batch`` visible: every table's files (``landed``: (table, temporary path)
    pairs, from the task attempts Spark returned) moved into ``OUT/<table>/batch=B/``, built
    aside and swapped in whole; a table no task wrote gets an empty file of its schema in
    ``empty_schemas`` (a readable table). Last, the commit rows (a pyarrow Table without the
    ``files`` column), with ``files`` listing every file of the batch and its size (JSON, the
    same in every row). Returns that listing."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..atomic import atomic_directory

    out_root = Path(out_dir)
    by_table: dict[str, list[str]] = {t: [] for t in empty_schemas}
    for table, path in landed:
        by_table.setdefault(table, []).append(path)
    files: dict[str, int] = {}
    for table, paths in by_table.items():
        final = batch_dir(out_root, table, batch)
        with atomic_directory(final) as tmp:
            for path in paths:
                os.replace(path, tmp / os.path.basename(path))
            if not paths:
                schema = empty_schemas[table]
                pq.write_table(schema.empty_table(), tmp / part_name(0), compression="snappy")
            for f in sorted(tmp.iterdir()):
                files[f"{table}/batch={batch}/{f.name}"] = f.stat().st_size
            (tmp / "_SUCCESS").touch()
    listing = json.dumps(files, sort_keys=True)
    rows = commit_rows.append_column(
        "files", pa.array([listing] * commit_rows.num_rows, pa.string())
    )
    with atomic_directory(batch_dir(out_root, COMMITS, batch)) as tmp:
        commit_file = tmp / part_name(0)
        pq.write_table(rows, commit_file, compression="snappy")
        with open(commit_file, "rb+") as fh:  # the commit is what a kill must not lose
            os.fsync(fh.fileno())
        (tmp / "_SUCCESS").touch()
    return files


def commit_local(out, batch: str, landed, empty_schemas: dict, commit_rows) -> dict[str, int]:
    """Commit a batch its tasks wrote (``commit``) under the output ``out`` (a local path or
    ``file:`` URI); ``commit_rows``: pandas run_id, model, status, wall_s, error. Returns the
    batch's files and sizes."""
    import pyarrow as pa

    from .store import commit_arrow_schema, local_path, stamped_commit_rows

    rows = pa.Table.from_pandas(
        stamped_commit_rows(commit_rows), schema=commit_arrow_schema(), preserve_index=False
    )
    local = local_path(out)
    assert local is not None, out  # (the caller commits a local output only)
    return commit(str(local.resolve()), batch, landed, empty_schemas, rows)
