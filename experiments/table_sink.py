"""A Spark data source that writes a sweep batch's tables as Parquet with pyarrow (local outputs).

``experiments.store`` writes a batch's tables through Spark. For a local output on a local
master it writes them through this sink instead of Spark's Parquet writer: a Python data source
(``pyspark.sql.datasource``, Spark 4), so the rows still travel as Spark tasks of one Spark job
and land through that job's commit, but each task hands its runs' Arrow blobs to pyarrow, which
writes them without turning them into JVM rows. Writing the main job's 2.7 million event rows
(alone, in a benchmark) took 0.5-0.8 s of JVM and 3-4.5 s of Python CPU instead of 12-16 s of JVM
and 3-5.5 s of Python (the JVM runs C1 only on a local master, see
``experiments.spark.LOCAL_JIT``).

One job writes every table of a batch. Each task writes one file per table under
``OUT/<table>/batch=B/_temporary/`` (a directory every Parquet reader skips); the job's commit,
on the driver, builds each ``OUT/<table>/batch=B/`` aside from them with ``_SUCCESS`` and swaps
it in whole (``experiments.atomic.atomic_directory``), and then does the same with the batch's
commit rows (``OUT/commits/batch=B/``): a batch is visible to readers exactly when its job
commits (the protocol of ``experiments.store``). A failed job removes its temporary files; a
killed one leaves them where no reader looks (``_temporary/``, ``.``-prefixed directories).

Used only where the driver and every task see the same local filesystem and the driver's Python
can run the commit (local master, classic session); elsewhere Spark's own Parquet writer writes.
"""

from __future__ import annotations

import base64
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

NAME = "rebalancesim"
ROW_GROUP_ROWS = 1 << 18  # rows buffered per table before a row group is written (~25 MB of events)
TEMPORARY = "_temporary"
COMMITS = "commits"


def _encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _decode(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"))


def options(out_dir: str, batch: str, schemas: dict, commit_rows) -> dict[str, str]:
    """The sink's options: where (a local directory), which batch, the tables' Arrow schemas
    (the DataFrame's binary columns of those names hold one run's table each, as Arrow IPC
    blobs) and the batch's commit rows (a pyarrow Table)."""
    from .store import to_blob

    opts = {"out": out_dir, "batch": batch, "tables": ",".join(schemas),
            "commit_rows": _encode(to_blob(commit_rows))}
    for name, schema in schemas.items():
        opts[f"schema.{name}"] = _encode(schema.serialize().to_pybytes())
    return opts


class TablesSink(DataSource):
    """``df.write.format(NAME).options(**options(...)).mode("append").save()``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def writer(self, schema, overwrite: bool) -> TablesWriter:
        o = self.options
        tables = [t for t in o["tables"].split(",") if t]
        return TablesWriter(o["out"], o["batch"], {t: _decode(o[f"schema.{t}"]) for t in tables},
                            _decode(o["commit_rows"]))


class Written(WriterCommitMessage):
    """What one task wrote: (table, temporary file) pairs."""

    def __init__(self, files: list[tuple[str, str]]):
        self.files = files


class TablesWriter(DataSourceArrowWriter):
    def __init__(self, out_dir: str, batch: str, schemas: dict[str, bytes], commit_rows: bytes):
        self.out_dir = out_dir
        self.batch = batch
        self.schemas = schemas      # table -> serialized Arrow schema
        self.commit_rows = commit_rows  # Arrow IPC blob

    def _dir(self, table: str) -> str:
        return os.path.join(self.out_dir, table, f"batch={self.batch}")

    def write(self, batches: Iterator) -> Written:
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark import TaskContext

        from .store import conform

        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx is not None else 0
        attempt = ctx.taskAttemptId() if ctx is not None else 0
        schemas = {t: pa.ipc.read_schema(pa.py_buffer(b)) for t, b in self.schemas.items()}
        writers: dict[str, pq.ParquetWriter] = {}
        pending: dict[str, list] = {t: [] for t in schemas}
        rows = dict.fromkeys(schemas, 0)
        files: list[tuple[str, str]] = []

        def flush(table: str) -> None:
            if not pending[table]:
                return
            w = writers.get(table)
            if w is None:
                tmp = os.path.join(self._dir(table), TEMPORARY, f"attempt-{attempt}")
                os.makedirs(tmp, exist_ok=True)
                path = os.path.join(tmp, _part_name(part))
                w = writers[table] = pq.ParquetWriter(path, schemas[table], compression="snappy")
                files.append((table, path))
            data = pa.concat_tables(pending[table])
            w.write_table(data, row_group_size=max(1, data.num_rows))
            pending[table], rows[table] = [], 0

        try:
            for rb in batches:
                for table in schemas:
                    for blob in rb.column(table):
                        if not blob.is_valid:
                            continue
                        data = conform(pa.ipc.open_stream(blob.as_buffer()).read_all(), schemas[table])
                        pending[table].append(data)
                        rows[table] += data.num_rows
                        if rows[table] >= ROW_GROUP_ROWS:
                            flush(table)
            for table in schemas:
                flush(table)
        finally:
            for w in writers.values():
                w.close()
        return Written(files)

    def commit(self, messages: list) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from .atomic import atomic_directory

        landed: dict[str, list[str]] = {t: [] for t in self.schemas}
        for m in messages:
            for table, path in (m.files if m is not None else ()):
                landed[table].append(path)
        # each directory is built aside and replaces the batch's whole (its _temporary/ with it)
        for table, paths in landed.items():
            with atomic_directory(Path(self._dir(table))) as tmp:
                for path in paths:
                    os.replace(path, tmp / os.path.basename(path))
                if not paths:  # no task had rows: an empty file keeps the directory a readable table
                    schema = pa.ipc.read_schema(pa.py_buffer(self.schemas[table]))
                    pq.write_table(schema.empty_table(), tmp / _part_name(0), compression="snappy")
                (tmp / "_SUCCESS").touch()
        # last: the commit rows, which make the batch visible
        with atomic_directory(Path(self._dir(COMMITS))) as tmp:
            rows = pa.ipc.open_stream(self.commit_rows).read_all()
            pq.write_table(rows, tmp / _part_name(0), compression="snappy")
            (tmp / "_SUCCESS").touch()

    def abort(self, messages: list) -> None:
        for m in messages:
            for _table, path in (m.files if m is not None else ()):
                try:
                    os.remove(path)
                except OSError:
                    pass
        for table in self.schemas:
            shutil.rmtree(os.path.join(self._dir(table), TEMPORARY), ignore_errors=True)


def _part_name(part: int) -> str:
    return f"part-{part:05d}-{uuid.uuid4().hex}.snappy.parquet"
