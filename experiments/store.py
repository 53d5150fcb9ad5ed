"""Where a sweep's rows live: tables written by Spark under ``--out`` (any Hadoop URI), in
batches, each made visible by one commit record.

Layout of ``OUT`` (``file://``, a plain path, ``s3a://``, ``hdfs://``, ``abfss://``, ...)::

    OUT/events/batch=B/part-*.parquet      the simulator's tables, one directory per batch
    OUT/intervals/batch=B/...
    OUT/episodes/batch=B/...
    OUT/runs/batch=B/...                   one row per run, with model_version and model_digest
    OUT/points/batch=B/...                 run_id, seed and the run's parameter point
    OUT/commits/batch=B/part-*.parquet     one row per run of batch B: run_id, model, status, ...

A batch's table directories are written first; its ``commits`` directory last. Spark's file
committer moves a job's files into place only when the job succeeds (for a local output on a
local master the writer is ``experiments.table_sink``, whose job commit does the same and then
writes the commit rows), so a batch whose ``commits`` rows are readable has every table
complete, and a batch without them (a sweep killed at any instant) is ignored by every reader
and recomputed by the next run: nothing is lost,
nothing is counted twice. A run is *complete* for the current model when a commit row names it
with the current ``model`` (``experiments.provenance.model_id``) and status ``ok`` or
``violations``; when several batches hold it (two sweeps into one OUT), readers take the newest.
Writers never delete: stale batches stay on disk, invisible.
"""

from __future__ import annotations

import datetime as _dt
import os
import uuid
import weakref
from collections.abc import Sequence
from pathlib import Path

TABLES = ("events", "intervals", "episodes", "runs", "points")
COMPLETE_STATUSES = ("ok", "violations")
COMMIT_SCHEMA = ("run_id string, model string, status string, wall_s double, error string, "
                 "committed_at string, batch string")
# Fixed read schemas (the simulator's recorder tables); the others merge the batches' schemas.
READ_SCHEMAS = {
    "events": "run_id string, t double, kind string, member string, generation long, detail string",
    "intervals": "run_id string, kind string, member string, topic string, partition long, "
                 "start double, `end` double",
}


class OutputError(RuntimeError):
    """The output location cannot be used (a one-line reason naming it)."""


def local_path(uri: str | os.PathLike) -> Path | None:
    """The local path of ``uri`` (a plain path or ``file:``), or None for a remote URI."""
    text = os.fspath(uri)
    if text.startswith("file:"):
        from urllib.parse import unquote, urlparse

        return Path(unquote(urlparse(text).path))
    if "://" in text:
        return None
    return Path(text)


def uri(out: str | os.PathLike) -> str:
    """``out`` as Spark should see it: local paths absolute (a Spark Connect server or an executor
    has another working directory), URIs unchanged."""
    text = os.fspath(out)
    if "://" in text or text.startswith("file:"):
        return text.rstrip("/")
    return Path(text).resolve().as_uri()


def new_batch_id() -> str:
    """A batch id that sorts by creation time and is never a number (so Spark's partition
    discovery keeps it a string)."""
    now = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S%f")
    return f"b{now}-{uuid.uuid4().hex[:8]}"


def table_path(out: str, name: str, batch: str | None = None) -> str:
    base = f"{uri(out)}/{name}"
    return f"{base}/batch={batch}" if batch else base


def _missing(e: Exception) -> bool:
    text = str(e)
    return any(s in text for s in ("PATH_NOT_FOUND", "Path does not exist", "UNABLE_TO_INFER_SCHEMA",
                                   "Unable to infer schema"))


def _commits_signature(out) -> tuple | None:
    """What a local ``OUT/commits`` holds, file by file (name, size, mtime; no entries when it
    does not exist yet), or None (remote, or it cannot be listed). A batch becomes visible only by
    adding files there, so an unchanged signature means unchanged commit rows."""
    local = local_path(out)
    if local is None:
        return None
    root = local / "commits"
    try:
        batches = list(os.scandir(root))
    except FileNotFoundError:
        return (str(root), ())
    except OSError:
        return None
    try:
        entries = []
        for batch in batches:
            if batch.is_dir():
                for f in os.scandir(batch.path):
                    st = f.stat()
                    entries.append((batch.name, f.name, st.st_size, st.st_mtime_ns))
    except OSError:
        return None
    return (str(root), tuple(sorted(entries)))


def _holds_data_files(signature: tuple) -> bool:
    """Whether a batch directory of the signature holds a data file (Spark skips names starting
    with ``_`` or ``.``: ``_SUCCESS``, ``_temporary/``, checksums)."""
    return any(not name.startswith(("_", ".")) for _, name, _, _ in signature[1])


# The commit rows last read from a local OUT, with the signature they were read at: an
# experiment reads them once per table it reads (a Spark job each: 4.2 s for the first read of
# the main job's output), and they change only when a batch commits.
_commits_cache: dict[str, tuple[tuple, pd.DataFrame]] = {}  # noqa: F821


def _no_commits_frame() -> pd.DataFrame:  # noqa: F821
    import pandas as pd

    return pd.DataFrame({c.split()[0]: pd.Series(dtype=object) for c in COMMIT_SCHEMA.split(", ")})


def commits(spark, out) -> pd.DataFrame:  # noqa: F821
    """Every commit row under ``OUT/commits`` (pandas); empty if none. Raises ``OutputError``
    if the location cannot be read at all (unknown scheme, no access)."""
    signature = _commits_signature(out)
    if signature is not None and not _holds_data_files(signature):
        # A fresh local output: nothing to ask Spark (whose first read of a missing path took
        # 1.8 s of the main job's start on a cold JVM, to say the same).
        return _no_commits_frame()
    cached = _commits_cache.get(uri(out))
    if signature is not None and cached is not None and cached[0] == signature:
        return cached[1].copy()
    try:
        rows = (spark.read.schema(COMMIT_SCHEMA).parquet(table_path(out, "commits"))
                .toArrow().to_pandas())
        if signature is not None and signature == _commits_signature(out):  # nothing moved meanwhile
            _commits_cache[uri(out)] = (signature, rows.copy())
        return rows
    except Exception as e:  # pyspark raises several classes (classic, Connect) for the same thing
        if _missing(e):
            return _no_commits_frame()
        raise OutputError(f"cannot read {table_path(out, 'commits')}: {_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    for line in str(e).splitlines():
        line = line.strip()
        if line:
            return line[:300]
    return type(e).__name__


def complete_runs(spark, out, model: str) -> dict[str, str]:
    """run_id -> the newest batch holding it complete for ``model``."""
    c = commits(spark, out)
    if c.empty:
        return {}
    c = c[(c["model"] == model) & (c["status"].isin(COMPLETE_STATUSES))]
    newest = c.sort_values("batch").groupby("run_id")["batch"].last()
    return dict(newest.items())


def read_table(spark, out, name: str, run_ids: Sequence[str] | None = None, model: str | None = None):
    """The raw table ``name`` of the runs complete for ``model`` (default: the current one), as
    a Spark DataFrame without the ``batch`` column; only ``run_ids`` if given."""
    from pyspark.sql import functions as F

    from .provenance import model_id

    chosen = complete_runs(spark, out, model or model_id())
    if run_ids is not None:
        wanted = set(run_ids)
        chosen = {r: b for r, b in chosen.items() if r in wanted}
    if not chosen:
        if name in READ_SCHEMAS:
            return spark.createDataFrame([], READ_SCHEMAS[name])
        raise OutputError(f"{uri(out)}: no complete runs to read")
    # Only the chosen batches' directories are listed and read: stale or uncommitted batches are
    # never opened (so their schemas and leftovers cannot matter).
    batches = sorted(set(chosen.values()))
    reader = spark.read.option("basePath", table_path(out, name))
    if name in READ_SCHEMAS:
        reader = reader.schema(READ_SCHEMAS[name] + ", batch string")
    else:
        reader = reader.option("mergeSchema", "true")
    df = reader.parquet(*[table_path(out, name, b) for b in batches])
    # A run held by two chosen batches (two sweeps into one OUT) is read from its newest only.
    import pandas as pd

    keys = spark.createDataFrame(pd.DataFrame({"run_id": list(chosen), "batch": list(chosen.values())}),
                                 "run_id string, batch string")
    df = df.join(F.broadcast(keys), ["run_id", "batch"], "left_semi")
    return df.drop("batch")


# ---------------------------------------------------------------------------------------------
# Writing a batch (the rows travel from the tasks as Arrow IPC blobs, one per run and table)


def to_blob(table) -> bytes:
    """A pyarrow Table as compressed Arrow IPC stream bytes."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema,
                           options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def unify(schemas) -> pa.Schema:  # noqa: F821
    """One schema for the rows of many runs: all-null columns dropped (another batch may type
    them), numbers widened where runs differ."""
    import pyarrow as pa

    kept = [pa.schema([f for f in s if not pa.types.is_null(f.type)]) for s in schemas]
    return pa.unify_schemas(kept, promote_options="permissive")


def conform(table, schema):
    """``table`` with exactly ``schema``'s columns (missing ones null), cast to its types."""
    import pyarrow as pa

    cols = []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            cols.append(col if col.type == f.type else col.cast(f.type))
        else:
            cols.append(pa.nulls(table.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=schema)


class _Decode:
    """mapInArrow: each input row holds one run's table as a blob; out come its rows."""

    def __init__(self, schema_bytes: bytes):
        self.schema_bytes = schema_bytes

    def __call__(self, batches):
        import pyarrow as pa

        schema = pa.ipc.read_schema(pa.py_buffer(self.schema_bytes))
        for rb in batches:
            for blob in rb.column(0).to_pylist():
                if not blob:
                    continue
                table = conform(pa.ipc.open_stream(blob).read_all(), schema)
                yield from table.to_batches(max_chunksize=65_536)


def write_batch(spark, out, batch: str, blobs, schemas: dict, commit_rows, partitions: int,
                tag=None) -> None:
    """Write one batch: every table from ``blobs`` (a DataFrame with one binary column per
    table), then its commit rows (pandas: run_id, model, status, wall_s, error), last. Through
    ``experiments.table_sink`` where it can (``_sink_usable``): one job; else Spark's Parquet
    writer: a job per table, then one for the commit rows.

    ``tag``: when given, the tables are written at once, one thread each, every thread calling
    ``tag()`` first (to put its Spark jobs in the caller's job group and scheduler pool): a
    commit's jobs then queue together and take the cores as they free up."""
    from pyspark.sql.pandas.types import from_arrow_schema

    if _sink_usable(out):
        _write_with_sink(spark, out, batch, blobs, schemas, _stamped(commit_rows), partitions)
        return

    def write(name: str) -> None:
        if tag is not None:
            tag()
        schema = schemas[name]
        # coalesce first: the decoding runs once per output partition, not per run's task
        rows = blobs.select(name).coalesce(partitions).mapInArrow(_Decode(schema.serialize().to_pybytes()),
                                                                  from_arrow_schema(schema))
        rows.write.mode("overwrite").parquet(table_path(out, name, batch))

    if len(schemas):
        if tag is None:
            for name in TABLES:
                write(name)
        else:
            from .spark import in_daemon_thread

            for f in [in_daemon_thread(lambda n=name: write(n), f"write-{name}") for name in TABLES]:
                f.result()  # the first failure is raised; the commit rows are not written
    schema = COMMIT_SCHEMA.rsplit(", batch string", 1)[0]
    (spark.createDataFrame(_stamped(commit_rows), schema)
     .coalesce(1).write.mode("overwrite").parquet(table_path(out, "commits", batch)))


def _stamped(commit_rows):
    """The commit rows (pandas) with ``committed_at``, in COMMIT_SCHEMA's order (no ``batch``:
    the directory names it)."""
    rows = commit_rows.assign(committed_at=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return rows[[c.split()[0] for c in COMMIT_SCHEMA.split(", ")[:-1]]]


# The Arrow types of COMMIT_SCHEMA's Spark types (the commit rows the sink writes).
_ARROW_TYPES = {"string": "string", "double": "float64"}


def _commit_arrow_schema():
    import pyarrow as pa

    return pa.schema([(name, getattr(pa, _ARROW_TYPES[kind])())
                      for name, kind in (c.split() for c in COMMIT_SCHEMA.split(", ")[:-1])])


def _sink_usable(out) -> bool:
    """Whether ``experiments.table_sink`` may write this batch: a local output, a classic session
    on a local master (the tasks and the driver's commit see the same files and run this
    interpreter)."""
    from .spark import can_overlap_jobs, current_master, is_local

    return local_path(out) is not None and can_overlap_jobs() and is_local(current_master())


_sink_sessions = weakref.WeakSet()  # the sessions the sink is registered with


def _write_with_sink(spark, out, batch: str, blobs, schemas: dict, commit_rows, partitions: int) -> None:
    """One Spark job writes every table of the batch, and its commit the commit rows (see
    ``experiments.table_sink``)."""
    import pyarrow as pa

    from . import table_sink

    if spark not in _sink_sessions:
        spark.dataSource.register(table_sink.TablesSink)
        _sink_sessions.add(spark)
    # Spark finds a Python data source in the calling JVM thread's active session, which pyspark
    # sets in some calls only (createDataFrame): set it in this thread.
    spark._jvm.SparkSession.setActiveSession(spark._jsparkSession)
    rows = pa.Table.from_pandas(commit_rows, schema=_commit_arrow_schema(), preserve_index=False)
    opts = table_sink.options(str(local_path(out).resolve()), batch, dict(schemas), rows)
    (blobs.select(*(schemas or TABLES)).coalesce(partitions)
     .write.format(table_sink.NAME).options(**opts).mode("append").save())
