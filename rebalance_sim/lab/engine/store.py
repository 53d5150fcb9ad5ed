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
local master the batch's own tasks write its files and the driver moves them into place,
``rebalance_sim.lab.engine.table_sink``), so a batch whose ``commits`` rows are readable has every table
complete, and a batch without them (a sweep killed at any instant) is ignored by every reader
and recomputed by the next run: nothing is lost, nothing is counted twice. A run is *complete*
for the current model when a commit row names it with the current ``model``
(``rebalance_sim.lab.provenance.model_id``) and status ``ok`` or ``violations``, and its batch is
intact; when several batches hold it, readers take the newest intact one.

The commit rows list every file of their batch with its size (``files``, JSON): before a batch
is reused, its files are checked against that list (present, of that size, no other data file
beside them, and, for a local output, Parquet's magic number at both ends). A damaged batch
(a file deleted, truncated or overwritten) is left out, so its runs are recomputed
(``damaged_batches`` says which and why). Writers never delete: stale batches stay on disk,
invisible. One writer at a time (``rebalance_sim.lab.engine.lock``).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import uuid
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ..outputs import OutputError

if TYPE_CHECKING:  # imported where used: reading a store needs neither at import time
    import pandas as pd
    import pyarrow as pa

TABLES = ("events", "intervals", "episodes", "runs", "points")
# a partial run (stopped by its memory bound) is complete: rerunning it on the same machine
# would stop again; it is reported with the failures
COMPLETE_STATUSES = ("ok", "violations", "partial")
COMMIT_SCHEMA = (
    "run_id string, model string, status string, wall_s double, error string, "
    "committed_at string, files string, batch string"
)
# Fixed read schemas (the simulator's recorder tables); the others merge the batches' schemas.
READ_SCHEMAS = {
    "events": "run_id string, t double, kind string, member string, generation long, detail string",
    "intervals": "run_id string, kind string, member string, topic string, partition long, "
    "start double, `end` double",
}


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


def is_missing(e: Exception) -> bool:
    """Whether Spark's or Hadoop's error ``e`` says that the path it read does not exist."""
    text = str(e)
    return any(
        s in text
        for s in (
            "PATH_NOT_FOUND",
            "Path does not exist",
            "UNABLE_TO_INFER_SCHEMA",
            "Unable to infer schema",
            "FileNotFoundException",
        )
    )


def _hidden(name: str) -> bool:
    """Names every Parquet reader skips (Spark's and pyarrow's): ``_SUCCESS``, ``_temporary/``,
    checksums, the atomic writes' temporary directories."""
    return name.startswith(("_", "."))


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
            if batch.is_dir() and not _hidden(batch.name):
                for f in os.scandir(batch.path):
                    st = f.stat()
                    entries.append((batch.name, f.name, st.st_size, st.st_mtime_ns))
    except OSError:
        return None
    return (str(root), tuple(sorted(entries)))


# The commit rows last read from a local OUT, with the signature they were read at (and the
# commit files that could not be read): an experiment reads them once per table it reads, and
# they change only when a batch commits.
_commits_cache: dict[str, tuple[tuple, pd.DataFrame, dict[str, str]]] = {}


def _columns() -> list[str]:
    return [c.split()[0] for c in COMMIT_SCHEMA.split(", ")]


def _no_commits_frame() -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame({c: pd.Series(dtype=object) for c in _columns()})


def _read_local_commits(out, signature: tuple) -> tuple[pd.DataFrame, dict[str, str]]:
    """The commit rows of a local OUT, read with pyarrow (no Spark: they are a few files, and an
    interrupted sweep reads them after its JVM may have gone), and the commit files that cannot
    be read (batch -> why)."""
    import pandas as pd
    import pyarrow.parquet as pq

    local = local_path(out)
    assert local is not None, out  # (the caller reads a local output only)
    root = local / "commits"
    frames, unreadable = [], {}
    by_batch: dict[str, list[str]] = {}
    for batch_dir, name, _size, _mtime in signature[1]:
        if batch_dir.startswith("batch=") and not _hidden(name):
            by_batch.setdefault(batch_dir[len("batch=") :], []).append(name)
    for batch, names in sorted(by_batch.items()):
        for name in sorted(names):
            try:
                rows = pq.read_table(root / f"batch={batch}" / name).to_pandas()
            except Exception as e:  # a damaged commit file: that batch is not committed
                unreadable[batch] = (
                    f"commits/batch={batch}/{name}: unreadable ({_first_line(e)[:120]})"
                )
                continue
            for c in _columns():
                if c not in rows.columns:
                    rows[c] = None
            rows["batch"] = batch
            frames.append(rows[_columns()])
    if not frames:
        return _no_commits_frame(), unreadable
    return pd.concat(frames, ignore_index=True), unreadable


def _commits_and_problems(spark, out) -> tuple[pd.DataFrame, dict[str, str]]:
    signature = _commits_signature(out)
    if signature is not None:
        cached = _commits_cache.get(uri(out))
        if cached is not None and cached[0] == signature:
            return cached[1].copy(), dict(cached[2])
        rows, unreadable = _read_local_commits(out, signature)
        if signature == _commits_signature(out):  # nothing moved meanwhile
            _commits_cache[uri(out)] = (signature, rows.copy(), dict(unreadable))
        return rows, unreadable
    try:
        rows = (
            spark.read.schema(COMMIT_SCHEMA)
            .parquet(table_path(out, "commits"))
            .toArrow()
            .to_pandas()
        )
        return rows, {}
    except Exception as e:  # pyspark raises several classes (classic, Connect) for the same thing
        if is_missing(e):
            return _no_commits_frame(), {}
        raise OutputError(f"cannot read {table_path(out, 'commits')}: {_first_line(e)}") from None


def commits(spark, out) -> pd.DataFrame:
    """Every readable commit row under ``OUT/commits`` (pandas); empty if none. A local output's
    are read without Spark. Raises ``OutputError`` if the location cannot be read at all
    (unknown scheme, no access)."""
    return _commits_and_problems(spark, out)[0]


def _first_line(e: BaseException) -> str:
    for line in str(e).splitlines():
        line = line.strip()
        if line:
            return line[:300]
    return type(e).__name__


# ---------------------------------------------------------------------------------------------
# Checking a committed batch's files before they are reused

PARQUET_MAGIC = b"PAR1"
# Problems found in a remote output's batches (listing one costs a Spark job under Connect);
# a local output's are checked afresh on every read (a stat and 8 bytes per file).
_remote_checks: dict[tuple[str, str, str], str | None] = {}


def _batch_dirs(batch: str, expected: dict[str, int]) -> list[str]:
    """The table directories of a batch (relative to OUT) that its listing names, and every
    table's directory (a table with no listed file must have none)."""
    tables = {rel.split("/", 1)[0] for rel in expected} | set(TABLES)
    return sorted(f"{t}/batch={batch}" for t in tables)


def _size(n: int) -> str:
    return f"{n:,} bytes"


def _check_local(root: Path, batch: str, expected: dict[str, int]) -> str | None:
    for rel, size in sorted(expected.items()):
        path = root / rel
        try:
            actual = path.stat().st_size
        except FileNotFoundError:
            return f"{rel}: missing"
        except OSError as e:
            return f"{rel}: cannot be read ({e.strerror or e})"
        if actual != size:
            return f"{rel}: {_size(actual)}, {_size(size)} when committed"
        try:
            with open(path, "rb") as f:
                head = f.read(4)
                f.seek(max(0, size - 4))
                tail = f.read(4)
        except OSError as e:
            return f"{rel}: cannot be read ({e.strerror or e})"
        if head != PARQUET_MAGIC or tail != PARQUET_MAGIC:
            return f"{rel}: not a Parquet file any more (overwritten)"
    for d in _batch_dirs(batch, expected):
        try:
            names = [e.name for e in os.scandir(root / d) if e.is_file() and not _hidden(e.name)]
        except FileNotFoundError:
            continue
        except OSError as e:
            return f"{d}: cannot be listed ({e.strerror or e})"
        for name in sorted(names):
            if f"{d}/{name}" not in expected:
                return f"{d}/{name}: a file the batch did not write"
    return None


def list_files(spark, out, dirs: Sequence[str]) -> dict[str, int]:
    """Every data file (relative path -> size) in the directories ``dirs`` of OUT (relative to
    it); a directory that does not exist holds none. Local outputs are listed directly, remote
    ones through Hadoop's FileSystem (a classic session) or as Spark lists files (Connect)."""
    found: dict[str, int] = {}
    local = local_path(out)
    if local is not None:
        for d in dirs:
            try:
                for e in os.scandir(local / d):
                    if e.is_file() and not _hidden(e.name):
                        found[f"{d}/{e.name}"] = e.stat().st_size
            except FileNotFoundError:
                continue
        return found
    from .spark import can_overlap_jobs

    if can_overlap_jobs():
        jvm = spark._jvm
        conf = spark._jsc.hadoopConfiguration()
        for d in dirs:
            path = jvm.org.apache.hadoop.fs.Path(f"{uri(out)}/{d}")
            fs = path.getFileSystem(conf)
            if not fs.exists(path):
                continue
            for st in fs.listStatus(path):
                name = st.getPath().getName()
                if st.isFile() and not _hidden(name):
                    found[f"{d}/{name}"] = int(st.getLen())
        return found

    # Spark Connect: no filesystem on this side; Spark lists the files (all directories in one
    # job, one by one when one of them does not exist)
    def listed(paths: list[str]) -> list:
        return (
            spark.read.format("binaryFile")
            .load([f"{uri(out)}/{d}" for d in paths])
            .select("path", "length")
            .collect()
        )

    try:
        rows = listed(list(dirs))
    except Exception as e:
        if not is_missing(e):
            raise
        rows = []
        for d in dirs:
            try:
                rows += listed([d])
            except Exception as e2:
                if not is_missing(e2):
                    raise
    wanted = set(dirs)
    for r in rows:
        parts = r["path"].rstrip("/").rsplit("/", 3)[-3:]  # table, batch=B, file
        d, name = "/".join(parts[:2]), parts[2]
        if d in wanted and not _hidden(name):
            found[f"{d}/{name}"] = int(r["length"])
    return found


def _compare(batch: str, expected: dict[str, int], actual: dict[str, int]) -> str | None:
    """What differs between a remote batch's listed files and those found (its directories')."""
    for rel, size in sorted(expected.items()):
        if rel not in actual:
            return f"{rel}: missing"
        if actual[rel] != size:
            return f"{rel}: {_size(actual[rel])}, {_size(size)} when committed"
    extra = sorted(set(actual) - set(expected))
    return f"{extra[0]}: a file the batch did not write" if extra else None


def _check_remote(spark, out, wanted: dict[str, dict[str, int]]) -> dict[str, str]:
    """batch -> problem for the remote batches ``wanted`` (batch -> listed files): their
    directories listed at once (one Spark job under Connect), each batch's result kept."""
    keys = {b: (uri(out), b, json.dumps(e, sort_keys=True)) for b, e in wanted.items()}
    todo = {b: e for b, e in wanted.items() if keys[b] not in _remote_checks}
    if todo:
        dirs = sorted({d for b, e in todo.items() for d in _batch_dirs(b, e)})
        actual = list_files(spark, out, dirs)
        for b, e in todo.items():
            mine = {rel: n for rel, n in actual.items() if rel.split("/", 2)[1] == f"batch={b}"}
            _remote_checks[keys[b]] = _compare(b, e, mine)
    return {b: problem for b in wanted if (problem := _remote_checks[keys[b]]) is not None}


def check_batches(spark, out, listings: dict[str, str | None]) -> dict[str, str]:
    """batch -> what is wrong with it, for the batches of ``listings`` (batch -> its commit rows'
    ``files`` JSON) whose files no longer match what was committed. Batches committed before
    commits listed their files (``None``) cannot be checked and count as intact."""
    problems: dict[str, str] = {}
    local = local_path(out)
    remote: dict[str, dict[str, int]] = {}
    for batch, listing in sorted(listings.items()):
        if not isinstance(listing, str) or not listing:
            continue
        try:
            expected = {str(k): int(v) for k, v in json.loads(listing).items()}
        except (ValueError, AttributeError, TypeError):
            problems[batch] = f"commits/batch={batch}: its file list is unreadable"
            continue
        if local is None:
            remote[batch] = expected
            continue
        problem = _check_local(local, batch, expected)
        if problem:
            problems[batch] = problem
    if remote:
        problems.update(_check_remote(spark, out, remote))
    return problems


def complete_runs(spark, out, model: str, damaged: dict | None = None) -> dict[str, str]:
    """run_id -> the newest intact batch holding it complete for ``model``. Batches whose files
    do not match their commit rows are left out (their runs count as not complete); with
    ``damaged`` (a dict), it is filled with batch -> (what is wrong, its runs of ``model``),
    unreadable commit files included."""
    c, unreadable = _commits_and_problems(spark, out)
    if damaged is not None:
        damaged.update({b: (why, []) for b, why in unreadable.items()})
    if c.empty:
        return {}
    c = c[(c["model"] == model) & (c["status"].isin(COMPLETE_STATUSES))]
    listings = c.groupby("batch")["files"].first().to_dict()
    bad: dict[str, str] = {}
    while True:  # the newest batch of a run may be damaged and an older one intact
        intact = c[~c["batch"].isin(bad)]
        newest = intact.sort_values("batch").groupby("run_id")["batch"].last()
        chosen = {b: listings.get(b) for b in set(newest) if b not in bad}
        found = check_batches(spark, out, chosen)
        if not found:
            break
        bad.update(found)
    if damaged is not None:
        for b, why in bad.items():
            damaged[b] = (why, sorted(c.loc[c["batch"] == b, "run_id"]))
    return dict(newest.items())


def damage_line(damaged: dict, wanted: set[str] | None = None) -> str | None:
    """One line saying which committed batches are damaged and how many of their runs (of
    ``wanted``, if given) are recomputed; None if none is."""
    if not damaged:
        return None
    runs = sorted({r for _, rs in damaged.values() for r in rs if wanted is None or r in wanted})
    first = damaged[sorted(damaged)[0]][0]
    more = f"; and {len(damaged) - 1} more" if len(damaged) > 1 else ""
    return f"{len(damaged)} committed batch(es) damaged ({first}{more}); " + (
        f"their {len(runs)} run(s) are recomputed" if runs else "none of their runs is in this grid"
    )


def read_table(
    spark, out, name: str, run_ids: Sequence[str] | None = None, model: str | None = None
):
    """The raw table ``name`` of the runs complete for ``model`` (default: the current one), as
    a Spark DataFrame without the ``batch`` column; only ``run_ids`` if given."""
    from pyspark.sql import functions as F

    from ..provenance import model_id

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
    # A run held by two chosen batches is read from its newest only.
    import pandas as pd

    keys = spark.createDataFrame(
        pd.DataFrame({"run_id": list(chosen), "batch": list(chosen.values())}),
        "run_id string, batch string",
    )
    df = df.join(F.broadcast(keys), ["run_id", "batch"], "left_semi")
    return df.drop("batch")


# ---------------------------------------------------------------------------------------------
# Writing a batch (the rows travel from the tasks as Arrow IPC blobs, one per run and table)


def to_blob(table) -> bytes:
    """A pyarrow Table as compressed Arrow IPC stream bytes."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(
        sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")
    ) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def unify(schemas) -> pa.Schema:
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


def write_batch(
    spark, out, batch: str, blobs, schemas: dict, commit_rows, partitions: int, tag=None
) -> None:
    """Write one batch with Spark's Parquet writer: every table from ``blobs`` (a DataFrame with
    one binary column per table), a job per table, then its commit rows (pandas: run_id, model,
    status, wall_s, error) with the list of the files written, last.

    ``tag``: when given, the tables are written at once, one thread each, every thread calling
    ``tag()`` first (to put its Spark jobs in the caller's job group and scheduler pool): a
    commit's jobs then queue together and take the cores as they free up."""
    from pyspark.sql.pandas.types import from_arrow_schema

    def write(name: str) -> None:
        if tag is not None:
            tag()
        schema = schemas[name]
        # coalesce first: the decoding runs once per output partition, not per run's task
        rows = (
            blobs.select(name)
            .coalesce(partitions)
            .mapInArrow(_Decode(schema.serialize().to_pybytes()), from_arrow_schema(schema))
        )
        rows.write.mode("overwrite").parquet(table_path(out, name, batch))

    files: dict[str, int] = {}
    if len(schemas):
        if tag is None:
            for name in TABLES:
                write(name)
        else:
            from .spark import in_daemon_thread

            for f in [in_daemon_thread(partial(write, name), f"write-{name}") for name in TABLES]:
                f.result()  # the first failure is raised; the commit rows are not written
        files = list_files(spark, out, [f"{t}/batch={batch}" for t in TABLES])
    schema = COMMIT_SCHEMA.rsplit(", batch string", 1)[0]
    rows = stamped_commit_rows(commit_rows).assign(files=json.dumps(files, sort_keys=True))
    (
        spark.createDataFrame(rows[_columns()[:-1]], schema)
        .coalesce(1)
        .write.mode("overwrite")
        .parquet(table_path(out, "commits", batch))
    )


def stamped_commit_rows(commit_rows):
    """The commit rows (pandas) with ``committed_at``, in COMMIT_SCHEMA's order, without
    ``files`` and ``batch`` (the directory names it)."""
    rows = commit_rows.assign(committed_at=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return rows[[c for c in _columns() if c not in ("files", "batch")]]


# The Arrow types of COMMIT_SCHEMA's Spark types (the commit rows the driver writes).
_ARROW_TYPES = {"string": "string", "double": "float64"}


def commit_arrow_schema():
    """The commit rows' Arrow schema, without ``files`` and ``batch``."""
    import pyarrow as pa

    return pa.schema(
        [
            (name, getattr(pa, _ARROW_TYPES[kind])())
            for name, kind in (c.split() for c in COMMIT_SCHEMA.split(", "))
            if name not in ("files", "batch")
        ]
    )


def tasks_write(out) -> bool:
    """Whether a batch's tasks write its files themselves and the driver commits them
    (``rebalance_sim.lab.engine.table_sink``): a local output on a classic session with a local master (the
    tasks and the driver see the same files and run this interpreter)."""
    from .spark import can_overlap_jobs, current_master, is_local

    return local_path(out) is not None and can_overlap_jobs() and is_local(current_master())
