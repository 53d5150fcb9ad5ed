"""The sweep driver: run a grid's specs as Spark jobs, batch by batch, resumable.

Output of ``rebalance-sim sweep GRID --out OUT`` (OUT: a local path or any Hadoop URI)::

    OUT/grid.toml                  the grid as given (local OUT only)
    OUT/events/ intervals/ episodes/ runs/ points/ commits/
                                   the runs' rows, written by Spark in committed batches
                                   (``rebalance_sim.lab.engine.store``)
    OUT/aggregate/                 see ``rebalance_sim.lab.engine.aggregate``

Each task runs one simulation in memory and returns its rows; Spark writes them. A run is
complete when a commit row names it with the current model (``rebalance_sim.lab.provenance``): a rerun
skips complete runs, so a killed sweep resumes without losing or duplicating rows, and a change
to the simulator or the assignors recomputes everything.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import attrs

from .grid import RunSpec
from .store import TABLES, local_path, new_batch_id
from .task import BLOB_SCHEMA, WRITTEN_SCHEMA, SweepTask, TaskFiles


class SweepInterrupted(Exception):
    """Ctrl-C during a sweep: what was kept, in one line."""


def _parallelism(spark) -> int:
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # Spark Connect has no SparkContext
        try:
            return max(1, int(spark.conf.get("spark.default.parallelism")))
        except Exception:
            return os.cpu_count() or 2


BATCHES = 6  # batches of a sweep (by estimated cost) when --batch-runs does not fix their size


def batches_of(
    todo: list[RunSpec],
    parallelism: int,
    batch_runs: int | None,
    cost: Mapping[str, float] | None = None,
) -> list[list[RunSpec]]:
    """Runs in batches, in the given order (biggest first). Each batch is one Spark job and one
    commit: small enough that a kill loses little, large enough that every core stays busy and
    that the cost of a commit (a few seconds of Spark jobs, whatever the runs) is paid rarely.
    ``batch_runs`` fixes the number of runs per batch; otherwise batches hold about 1/BATCHES of
    the estimated cost each, at least 2 runs per core (so the many small runs that come last
    share one or two batches)."""
    if batch_runs:
        return [todo[i : i + batch_runs] for i in range(0, len(todo), batch_runs)]
    weight = [max(cost.get(s.run_id, 1.0), 1.0) if cost else 1.0 for s in todo]
    groups = _cost_groups(weight, sum(weight) / BATCHES, least=2 * parallelism)
    return [[todo[i] for i in group] for group in groups]


def _cost_groups(weight: Sequence[float], share: float, least: int = 1) -> list[list[int]]:
    """Consecutive positions of ``weight`` in groups that each reach ``share`` of the weight and
    hold at least ``least`` positions; a short tail joins the group before it."""
    out: list[list[int]] = []
    current: list[int] = []
    current_cost = 0.0
    for i, w in enumerate(weight):
        current.append(i)
        current_cost += w
        if current_cost >= share and len(current) >= least:
            out.append(current)
            current, current_cost = [], 0.0
    if current:
        if out and len(current) < least:
            out[-1].extend(current)
        else:
            out.append(current)
    return out


TASKS_PER_CORE = 4  # Spark tasks per core in a batch (more runs than that share tasks)


def _tasks(batch: list[RunSpec], parallelism: int, cost: Mapping[str, float]) -> list[list[int]]:
    """The batch's runs (positions, in order: biggest first) grouped into Spark tasks of about
    ``1 / (TASKS_PER_CORE * parallelism)`` of the batch's cost each: a big run is a task of its
    own, many small runs share one. A task costs a Python worker round trip whatever it runs
    (tenths of a second), which hundreds of sub-second runs would otherwise pay one by one."""
    weight = [cost.get(s.run_id, 1.0) for s in batch]
    return _cost_groups(weight, sum(weight) / (TASKS_PER_CORE * parallelism))


def _eta(elapsed: float, done_cost: float, left_cost: float) -> str:
    return (
        f", ~{elapsed / done_cost * left_cost:.0f} s left" if done_cost and left_cost > 1e-9 else ""
    )


PROGRESS_EVERY_S = 15.0  # at most one progress line this often while batches run
# Batches computing at once: the next batch's runs are queued behind the current one's, so that
# the cores its last runs leave idle go to them, and a batch commits while the next one runs.
IN_FLIGHT = 2
COMMIT_WAIT_S = 120.0  # how long a failed sweep waits for a commit under way
# How long an interrupted or failed sweep waits for its batches' threads: a cancelled job's
# thread returns once Spark has cancelled it, a commit under way lands or fails.
INTERRUPT_WAIT_S = 10.0
COMMIT_POOL = (
    "commit"  # the scheduler pool of the commits' jobs (rebalance_sim.lab.engine.spark FAIR mode)
)


@attrs.define(eq=False)
class _Batch:
    """One batch of runs on its way through the sweep: computed and committed by its own thread
    when its tasks write their files (``rebalance_sim.lab.engine.table_sink``); else computed (its rows
    persisted in Spark), then committed (``rebalance_sim.lab.engine.store.write_batch``)."""

    specs: list[RunSpec]
    tasks: list[list[int]]  # positions of ``specs`` per Spark task
    cost: float
    id: str = attrs.field(factory=new_batch_id)
    blobs: Any = None  # the persisted DataFrame of the runs' rows, once computed
    meta: Any = None  # pandas: run_id, status, wall_s, error, runs_schema, episodes_schema


class _Progress:
    """Plain progress lines while batches run: every ``every_s`` seconds, the runs finished so
    far (computed batches, plus the finished Spark tasks of the computing ones: a long first
    batch does not look stuck), only when the count moved; nothing more on Spark Connect (no
    status tracker)."""

    def __init__(self, label, stream, total, kept, t0, left_cost, every_s: float | None = None):
        import threading

        self.label, self.stream, self.total, self.t0 = label, stream, total, t0
        self.kept = kept  # runs complete: before this sweep, and in committed batches
        self.left_cost = left_cost
        self.every_s = every_s or PROGRESS_EVERY_S
        self.batches: list[_Batch] = []  # computing or computed, not yet counted in ``done``
        self.done_runs, self.done_cost = 0, 0.0
        self.shown = kept  # the count last shown
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sweep-progress", daemon=True)
        self._thread.start()

    def add(self, batch: _Batch) -> None:
        with self._lock:
            self.batches.append(batch)

    def finished(self, batch: _Batch) -> None:
        """``batch`` is computed: count it whole."""
        with self._lock:
            self.batches.remove(batch)
            self.done_runs += len(batch.specs)
            self.done_cost += batch.cost
        self.show()

    def committed(self, batch: _Batch, complete: int) -> None:
        """``batch`` is committed, ``complete`` of its runs complete (the others failed)."""
        with self._lock:
            self.kept += complete
            self.done_runs -= len(batch.specs)

    def _count(self) -> tuple[int, float]:
        from rebalance_sim.lab.engine.spark import finished_tasks

        with self._lock:
            runs, cost, batches = self.kept + self.done_runs, self.done_cost, list(self.batches)
        for b in batches:
            done = finished_tasks(len(b.tasks), b.id)
            if done:
                done = min(done, len(b.tasks))
                # tasks are of similar cost (see _tasks): count them as equal shares of the runs
                runs += len(b.specs) * done // len(b.tasks)
                cost += b.cost * done / len(b.tasks)
        return runs, cost

    def show(self, force: bool = False) -> None:
        runs, cost = self._count()
        with self._lock:
            if not force and (runs <= self.shown or runs >= self.total):
                return  # nothing new, or all done: the sweep's last line says that
            self.shown = max(self.shown, runs)
            elapsed = time.monotonic() - self.t0
            eta = _eta(elapsed, cost, self.left_cost - cost)
            # "done": finished running; "saved": committed, what a kill keeps
            text = (
                f"{self.kept}/{self.total} runs complete"
                if force
                else f"{runs}/{self.total} runs done, {self.kept} saved"
            )
            try:
                print(f"{self.label}: {text} ({elapsed:.0f} s{eta})", file=self.stream, flush=True)
            except (OSError, ValueError):  # a closed stream: the main thread reports that
                self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.show()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)


def run_sweep(
    specs: Sequence[RunSpec],
    out: str | os.PathLike,
    *,
    master: str | None = None,
    label: str = "sweep",
    stream=None,
    runner: Callable[[RunSpec], tuple[str, str, dict]] | None = None,
    batch_runs: int | None = None,
    more_cost: float = 0.0,
):
    """Run every spec not yet complete under ``out`` (for the current model) as Spark tasks, and
    write their rows batch by batch (``rebalance_sim.lab.engine.store``).

    A batch counts once committed, and commits as soon as its runs are done: with a local output
    on a local master its tasks write its files and the driver commits them right away
    (``rebalance_sim.lab.engine.table_sink``); elsewhere Spark's Parquet writer writes them, in jobs of their
    own scheduler pool while the next batch's runs keep the other cores busy. A killed sweep
    keeps every committed batch and reruns the rest. A committed batch whose files no longer
    match its commit rows is said so in one line and its runs are recomputed.

    Returns a pandas DataFrame (run_id, status, wall_s, error) with one row per spec; complete
    runs are reported as ``skipped``. ``runner`` replaces ``run_one`` (tests). Ctrl-C raises
    ``SweepInterrupted`` saying how many runs are kept. ``more_cost``: the estimated cost (in
    the units of ``RunSpec.cost``) of runs a later sweep of the same job will make, counted in
    the ETA the progress lines show, so that they give the time left for the whole job.
    """
    import concurrent.futures as cf

    import pandas as pd
    import pyarrow as pa

    from rebalance_sim.lab.engine.spark import (
        can_overlap_jobs,
        cancel_group,
        get_spark,
        in_daemon_thread,
        interrupt_all,
        tag_thread,
    )
    from rebalance_sim.lab.engine.store import (
        COMPLETE_STATUSES,
        complete_runs,
        damage_line,
        tasks_write,
        unify,
        write_batch,
    )
    from rebalance_sim.lab.provenance import model_id

    from .table_sink import commit_local

    stream = stream or sys.stderr
    spark = get_spark(master)
    model = model_id()
    local = local_path(out)
    if local is not None:
        local.mkdir(parents=True, exist_ok=True)
    wanted = {s.run_id for s in specs}
    damaged: dict = {}
    complete = set(complete_runs(spark, out, model, damaged))
    line = damage_line(damaged, wanted)
    if line:
        print(f"{label}: {line}", file=stream, flush=True)
    todo = [s for s in specs if s.run_id not in complete]
    done = pd.DataFrame(
        {
            "run_id": [s.run_id for s in specs if s.run_id in complete],
            "status": "skipped",
            "wall_s": 0.0,
            "error": "",
        }
    )
    if not todo:
        print(f"{label}: all {len(specs)} runs already complete", file=stream)
        return done
    todo.sort(key=lambda s: (-s.cost, s.run_id))
    cost = {s.run_id: max(s.cost, 1.0) for s in specs}
    parallelism = _parallelism(spark)
    batches = [
        _Batch(b, _tasks(b, parallelism, cost), sum(cost[s.run_id] for s in b))
        for b in batches_of(todo, parallelism, batch_runs, cost)
    ]
    kept = len(specs) - len(todo)
    print(
        f"{label}: {kept}/{len(specs)} runs complete"
        + (" (resuming)" if kept else "")
        + f"; {len(todo)} to run in {len(batches)} batch(es), model {model}",
        file=stream,
        flush=True,
    )
    points_schema = pa.Table.from_pylist(
        [{"run_id": s.run_id, "seed": s.seed, **dict(s.point), "spec": s.to_json()} for s in specs]
    ).schema
    overlap = can_overlap_jobs()
    direct = tasks_write(out)
    fixed = {
        "events": _recorder_schema("EVENTS_SCHEMA"),
        "intervals": _recorder_schema("INTERVALS_SCHEMA"),
        "points": points_schema,
    }

    def status_rows(meta):
        return meta[["run_id", "status", "wall_s", "error"]].assign(model=model)

    def compute(batch: _Batch) -> _Batch:
        tag_thread(batch.id)
        pdf = pd.DataFrame(
            {
                "task": range(len(batch.tasks)),
                "runs": [
                    json.dumps([[i, batch.specs[i].run_id, batch.specs[i].to_json()] for i in task])
                    for task in batch.tasks
                ],
            }
        )
        # one row, so one partition and one task, per group of runs
        df = spark.createDataFrame(pdf).repartitionByRange(len(batch.tasks), "task")
        if direct:
            assert local is not None  # (tasks write only to a local output)
            files = TaskFiles(
                str(local.resolve()),
                batch.id,
                tuple(
                    (t, fixed[t].serialize().to_pybytes() if t in fixed else None) for t in TABLES
                ),
            )
            meta = (
                df.mapInPandas(SweepTask(model, runner, files), WRITTEN_SCHEMA)
                .toArrow()
                .to_pandas()
            )
            landed = [tuple(f) for text in meta["files"] if text for f in json.loads(text)]
            any_complete = bool(meta["status"].isin(COMPLETE_STATUSES).any())
            commit_local(out, batch.id, landed, fixed if any_complete else {}, status_rows(meta))
            batch.meta = meta
            return batch
        batch.blobs = df.mapInPandas(SweepTask(model, runner), BLOB_SCHEMA).persist()
        try:
            batch.meta = (
                batch.blobs.select(
                    "run_id", "status", "wall_s", "error", "runs_schema", "episodes_schema"
                )
                .toArrow()
                .to_pandas()
            )
        except BaseException:
            batch.blobs.unpersist()
            raise
        return batch

    def commit(batch: _Batch) -> _Batch:
        def tag() -> None:
            tag_thread(f"{batch.id}-commit", COMMIT_POOL)

        tag()
        try:
            meta = batch.meta
            ok = meta[meta["status"].isin(COMPLETE_STATUSES)]
            schemas = {}
            if len(ok):
                schemas = {
                    **fixed,
                    "runs": unify(_schemas(ok["runs_schema"])),
                    "episodes": unify(_schemas(ok["episodes_schema"])),
                }
            write_batch(
                spark,
                out,
                batch.id,
                batch.blobs.where(batch.blobs.status.isin(*COMPLETE_STATUSES)),
                schemas,
                status_rows(meta),
                max(1, min(len(ok), parallelism)),
                tag if overlap else None,
            )
        finally:
            batch.blobs.unpersist()
        return batch

    t0 = time.monotonic()
    progress = _Progress(
        label, stream, len(specs), kept, t0, sum(b.cost for b in batches) + max(0.0, more_cost)
    )
    results = [done]
    queue = list(batches)
    computing: dict[cf.Future, _Batch] = {}
    committing: dict[cf.Future, _Batch] = {}
    waiting: list[_Batch] = []  # computed, to commit in order, one at a time (Spark's writer)

    def start_computing() -> None:
        # without overlap (Spark Connect): one batch at a time, computed then committed
        limit = IN_FLIGHT if overlap else (0 if committing or waiting else 1)
        while queue and len(computing) < limit:
            batch = queue.pop(0)
            progress.add(batch)
            # registered before the thread starts, so that a Ctrl-C waits for it (see below)
            in_daemon_thread(
                partial(compute, batch),
                f"sweep-{batch.id}",
                before_start=partial(_register, computing, batch),
            )

    def start_committing() -> None:
        if waiting and not committing:
            batch = waiting.pop(0)
            in_daemon_thread(
                partial(commit, batch),
                f"commit-{batch.id}",
                before_start=partial(_register, committing, batch),
            )

    def committed(batch: _Batch) -> None:
        results.append(batch.meta[["run_id", "status", "wall_s", "error"]])
        progress.committed(batch, int(batch.meta["status"].isin(COMPLETE_STATUSES).sum()))

    try:
        start_computing()
        while computing or committing:
            finished, _ = cf.wait([*computing, *committing], return_when=cf.FIRST_COMPLETED)
            for future in finished:
                if future in computing:
                    batch = computing.pop(future)
                    future.result()  # a failed Spark job raises here
                    if direct:  # committed already: counted as saved in the line finished() shows
                        committed(batch)
                    else:
                        waiting.append(batch)
                    progress.finished(batch)
                else:
                    batch = committing.pop(future)
                    future.result()
                    committed(batch)
            start_committing()
            start_computing()
    except KeyboardInterrupt:
        progress.stop()
        interrupt_all()
        # Every batch thread is waited for: a commit under way lands or fails before the runs
        # kept are counted, and no thread is left reading a cancelled job's answer from the JVM
        # while the interpreter exits (pyarrow reads it, and a thread woken inside pyarrow
        # during the interpreter's finalization aborts the process).
        cf.wait([*computing, *committing], timeout=INTERRUPT_WAIT_S)
        try:
            kept = len(wanted & set(complete_runs(spark, out, model)))
        except BaseException:  # a second Ctrl-C, a lost session: keep the count
            kept = progress.kept
        raise SweepInterrupted(
            f"interrupted; {kept} of {len(specs)} runs are complete in {out} "
            "(rerun the same command to finish the rest)"
        ) from None
    except Exception:
        # a failed batch: stop the batches still running, keep those already computed
        for batch in computing.values():
            cancel_group(batch.id)
        cf.wait(list(committing), timeout=COMMIT_WAIT_S)
        for batch in waiting:  # (in threads of their own, as always: see tag_thread)
            try:
                in_daemon_thread(partial(commit, batch), f"commit-{batch.id}").result()
            except Exception:  # the first failure is the one reported
                pass
        cf.wait(list(computing), timeout=INTERRUPT_WAIT_S)
        raise
    finally:
        progress.stop()
    progress.show(force=True)
    return pd.concat(results, ignore_index=True)


def _register(registry: dict, batch, future) -> None:
    """Record ``future`` as the thread working on ``batch`` (before the thread starts)."""
    registry[future] = batch


def _schemas(blobs) -> list:
    import pyarrow as pa

    return [pa.ipc.read_schema(pa.py_buffer(b)) for b in blobs]


def _recorder_schema(name: str):
    from sim.observe import recorder

    return getattr(recorder, name)


class AggregateIncomplete(RuntimeError):
    """Complete runs missing from the aggregate tables (one line)."""


def check_aggregate(specs: Sequence[RunSpec], status, runs) -> None:
    """Raise ``AggregateIncomplete`` unless the aggregate ``runs`` table (pyarrow) holds every
    run of ``specs`` that ``status`` (``run_sweep``'s) calls complete, once: a run whose rows
    could not be read must not silently leave its point with fewer seeds."""
    from collections import Counter

    from rebalance_sim.lab.engine.store import COMPLETE_STATUSES

    complete = set(status.loc[status["status"].isin([*COMPLETE_STATUSES, "skipped"]), "run_id"])
    held = Counter(runs.column("run_id").to_pylist())
    missing = [s for s in specs if s.run_id in complete and s.run_id not in held]
    twice = sorted(r for r, n in held.items() if n > 1)
    if not missing and not twice:
        return
    if missing:
        points = {s.point for s in missing}
        first = missing[0]
        where = ", ".join(f"{k}={v}" for k, v in first.point if v != "")
        raise AggregateIncomplete(
            f"{len(missing)} of {len(complete)} complete runs are missing from the aggregate tables "
            f"({len(points)} point(s) with fewer seeds than the grid; first: {first.run_id}, {where}); "
            "their rows could not be read: rerun the same command to check the output"
        )
    raise AggregateIncomplete(
        f"{len(twice)} run(s) appear twice in the aggregate tables (first: {twice[0]})"
    )


def report_failures(status, stream=None, violations: bool = True) -> int:
    """Print failed and partial runs, and violating ones unless ``violations`` is false (the
    caller judges them, ``judge_violations``); returns the number of failed runs."""
    stream = stream or sys.stderr
    shown = ["failed", "partial", "violations"] if violations else ["failed", "partial"]
    bad = status[status["status"].isin(shown)]
    for row in bad.itertuples():
        print(f"  {row.status}: {row.run_id}: {row.error}", file=stream)
    return int((status["status"] == "failed").sum())


def run_violations(spark, work, run_ids: Sequence[str]) -> dict[str, list[str]]:
    """The invariant violations of every complete run of ``run_ids`` that has any (computed now
    or reused), from the runs table: run id -> the simulator's texts."""
    from pyspark.sql import functions as F

    from .store import read_table

    rows = (
        read_table(spark, work, "runs", run_ids)
        .where(F.col("`summary.invariant_violations`") > 0)
        .select("run_id", "violations")
        .collect()
    )
    return {r["run_id"]: json.loads(r["violations"]) for r in rows}


def judge_violations(
    specs: Sequence[RunSpec], violations: dict[str, list[str]]
) -> tuple[list[RunSpec], list[tuple[RunSpec, list[str]]]]:
    """(unsettled as expected, broken): the runs whose only violation is ending unsettled where
    their spec expects it (``RunSpec.may_end_unsettled``), and every other run with violations,
    with its texts. A run that is expected not to settle but breaks another invariant is
    broken."""
    from sim.observe.invariants import NOT_SETTLED

    expected: list[RunSpec] = []
    broken: list[tuple[RunSpec, list[str]]] = []
    for spec in specs:
        texts = violations.get(spec.run_id)
        if not texts:
            continue
        if spec.may_end_unsettled and all(t.startswith(NOT_SETTLED) for t in texts):
            expected.append(spec)
        else:
            broken.append((spec, texts))
    return expected, broken
