"""The executor side of a sweep: what one Spark task does with its runs.

``SweepTask`` is the ``mapInPandas`` function: each input row is one task's runs (their
``RunSpec``s as JSON); each run is simulated in memory (``run_one``) and comes out as a status row
with either its tables as Arrow IPC blobs (Spark writes them, ``rebalance_sim.lab.engine.store``) or,
with ``TaskFiles``, nothing more: the task writes its runs' Parquet files itself
(``rebalance_sim.lab.engine.table_sink``). One failed run never sinks the task: it is reported.
"""

from __future__ import annotations

import gc
import json
import os
import time
from collections.abc import Callable, Iterator

import attrs

from .grid import RunSpec, load_run_scenario, one_line
from .store import TABLES


def run_one(spec: RunSpec) -> tuple[str, str, dict]:
    """Run one simulation in memory; returns (status, detail, tables) with the run's tables
    (events, intervals, episodes, runs, points) as pyarrow Tables."""
    import pyarrow as pa

    from sim import run_scenario
    from sim.kernel.stop import MEMORY_SHARE, machine_memory

    from ..vocabulary import STORED_EVENT_KINDS

    scenario = load_run_scenario(spec)
    total = machine_memory()
    result = run_scenario(
        scenario,
        seed=spec.seed,
        raise_on_violation=False,
        kernel=spec.kernel or None,
        # the events the lab reads: the metrics' and invariants', and its pages' (a large
        # group's JoinGroup/SyncGroup traffic, most of its events, is neither held nor stored)
        record="episodes",
        keep_kinds=STORED_EVENT_KINDS,
        # a run that would outgrow the machine stops as a partial run instead of taking the
        # executor down: its share of the machine's memory, each core running a task
        max_memory_bytes=int(total * MEMORY_SHARE / (os.cpu_count() or 1)) if total else None,
    )
    runs = result.runs
    point = {"run_id": spec.run_id, "seed": spec.seed, **dict(spec.point), "spec": spec.to_json()}
    tables = {
        "events": result.events,
        "intervals": result.intervals,
        "episodes": episodes_table(spec.run_id, result.episodes),
        "runs": runs,
        "points": pa.Table.from_pylist([point]),
    }
    violations = list(result.invariant_violations or [])
    if result.summary.get("partial"):
        return "partial", f"stopped early: {result.summary['partial_reason']}", tables
    if violations:
        return (
            "violations",
            f"{len(violations)} invariant violation(s); first: {violations[0]}",
            tables,
        )
    return "ok", "", tables


def episodes_table(run_id: str, episodes: list[dict]):
    """The run's episodes as a table with stable types: every number as float64, except
    ``episode`` and counts (int64), so that Spark reads all runs with one schema."""
    import pyarrow as pa

    keys: list[str] = []
    for ep in episodes:
        keys += [k for k in ep if k not in keys]
    columns = {"run_id": pa.array([run_id] * len(episodes), pa.string())}
    for k in keys:
        values = [ep.get(k) for ep in episodes]
        present = [v for v in values if v is not None]
        if all(isinstance(v, bool) for v in present) and present:
            typ = pa.bool_()
        elif k in (
            "episode",
            "rounds",
            "members_revoking",
            "partitions_revoked",
            "partitions_touched",
        ):
            typ = pa.int64()
        elif all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
            typ = pa.float64()
            values = [None if v is None else float(v) for v in values]
        else:
            typ = pa.string()
            values = [None if v is None else str(v) for v in values]
        columns[k] = pa.array(values, typ)
    return pa.table(columns)


BLOB_SCHEMA = "slot long, run_id string, status string, wall_s double, error string, " + ", ".join(
    f"{t} binary, {t}_schema binary" for t in TABLES
)
# What a task returns when it writes its runs' files itself (rebalance_sim.lab.engine.table_sink): its runs'
# status rows, and on its first row the files it wrote (JSON: [[table, path], ...]).
WRITTEN_SCHEMA = (
    "slot long, run_id string, status string, wall_s double, error string, files string"
)


@attrs.frozen
class TaskFiles:
    """Where a task writes its runs' tables (``rebalance_sim.lab.engine.table_sink.TaskTables``): the local
    output, the batch, and the fixed schemas (serialized Arrow; the others are the union of the
    task's runs)."""

    out_dir: str
    batch: str
    schemas: tuple[tuple[str, bytes | None], ...]


class SweepTask:
    """The mapInPandas function: each input row is one Spark task's runs. Out come, per run, its
    status, and either its tables as Arrow IPC blobs (Spark writes them, see
    ``rebalance_sim.lab.engine.store``) or, with ``files``, nothing more: the task writes them itself."""

    def __init__(
        self,
        model: str,
        runner: Callable[[RunSpec], tuple[str, str, dict]] | None = None,
        files: TaskFiles | None = None,
    ):
        self.model = model  # computed on the driver, from the sources it ships
        self.runner = runner
        self.files = files

    def _runs(self, batches: Iterator) -> Iterator[tuple[dict, dict]]:
        import pyarrow as pa

        runner = self.runner or run_one
        for batch in batches:
            # each input row is one Spark task's runs: [[slot, run_id, spec], ...] as JSON
            for slot, run_id, spec_json in (
                run for task in batch["runs"] for run in json.loads(task)
            ):
                spec = RunSpec.from_json(spec_json, run_id)
                t0 = time.perf_counter()
                tables: dict = {}
                try:
                    status, detail, tables = runner(spec)
                except Exception as e:  # one failed run must not sink the sweep; it is reported
                    status, detail = "failed", f"{type(e).__name__}: {one_line(e)}"
                if "runs" in tables:  # the runs table records the model that produced the run
                    version, _, digest = self.model.partition("+")
                    runs = tables["runs"]
                    runs = runs.append_column(
                        "model_version", pa.array([version] * runs.num_rows, pa.string())
                    )
                    tables["runs"] = runs.append_column(
                        "model_digest", pa.array([digest] * runs.num_rows, pa.string())
                    )
                row = {
                    "slot": int(slot),
                    "run_id": run_id,
                    "status": status,
                    "wall_s": time.perf_counter() - t0,
                    "error": detail,
                }
                yield row, tables

    def __call__(self, batches: Iterator) -> Iterator:
        import pandas as pd

        from rebalance_sim.lab.engine.store import COMPLETE_STATUSES, to_blob

        _freeze_worker_heap()
        if self.files is not None:
            yield from self._write(batches)
            return
        for row, tables in self._runs(batches):
            for t in TABLES:
                table = tables.get(t)
                row[t] = None if table is None else to_blob(table)
                row[f"{t}_schema"] = (
                    None if table is None else table.schema.serialize().to_pybytes()
                )
            if row["status"] not in COMPLETE_STATUSES:
                for t in TABLES:
                    row[t] = row[f"{t}_schema"] = None
            yield pd.DataFrame([row])

    def _write(self, batches: Iterator) -> Iterator:
        import pandas as pd
        import pyarrow as pa
        from pyspark import TaskContext

        from rebalance_sim.lab.engine.store import COMPLETE_STATUSES
        from rebalance_sim.lab.engine.table_sink import TaskTables

        assert self.files is not None  # (tasks that write their own files have them)
        ctx = TaskContext.get()
        schemas = {
            t: None if b is None else pa.ipc.read_schema(pa.py_buffer(b))
            for t, b in self.files.schemas
        }
        out = TaskTables(
            self.files.out_dir,
            self.files.batch,
            schemas,
            ctx.partitionId() if ctx is not None else 0,
            ctx.taskAttemptId() if ctx is not None else 0,
        )
        rows = []
        try:
            for row, tables in self._runs(batches):
                if row["status"] in COMPLETE_STATUSES:
                    out.add(tables)
                rows.append(row)
            files = out.close()
        except BaseException:
            out.abort()
            raise
        if rows:
            frame = pd.DataFrame(rows).assign(files="")
            frame.loc[0, "files"] = json.dumps(files)
            yield frame


_worker_heap_frozen = False


def _freeze_worker_heap() -> None:
    """On a Python worker's first task: move what it has imported (pyspark, pandas, pyarrow,
    numpy, the simulator) out of the cyclic collector's reach. pyspark's daemon runs a full
    ``gc.collect()`` after every task of a reused worker, which traced all of it each time;
    frozen objects are still freed by reference counting, only never traced again."""
    global _worker_heap_frozen
    if _worker_heap_frozen or not os.environ.get("SPARK_REUSE_WORKER"):
        return  # done already, or not a worker that pyspark's daemon reuses (and collects after)
    import sim.run  # noqa: F401  (the simulator, imported now so that it is frozen too)

    gc.collect()
    gc.freeze()
    _worker_heap_frozen = True
