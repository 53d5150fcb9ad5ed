"""Sweeps: a grid of scenario parameters x assignors x seeds, run as Spark tasks, resumable.

Grid file (TOML)::

    # Which simulations to run: every combination of scenarios x assignors x [vary] x seeds.
    name = "my-sweep"                          # optional, used in progress lines
    scenarios = ["crash", "scale-out"]         # built-in names or scenario TOML paths
                                               # (relative paths are relative to this file)
    assignors = ["range", "cooperative-sticky"]   # optional; omitted = each scenario's own
    seeds = 3                                  # N (seeds 0..N-1) or an explicit list [0, 7, 9]

    [set]                                      # overrides applied to every run
    partitions = 60

    [vary]                                     # one list per key; the lists are crossed
    members = [10, 100]
    static = [false, true]

``[set]`` and ``[vary]`` keys are the scenario loader's overrides (``key=value``, see
``rebalance-sim list``); dotted keys (``consumer.session_timeout_ms``) are allowed. Every point
is loaded and validated before anything runs; an error names the file, the field and what is
allowed, in one line.

Output of ``rebalance-sim sweep GRID --out OUT`` (OUT: a local path or any Hadoop URI)::

    OUT/grid.toml                  the grid as given (local OUT only)
    OUT/events/ intervals/ episodes/ runs/ points/ commits/
                                   the runs' rows, written by Spark in committed batches
                                   (``experiments.engine.store``)
    OUT/aggregate/                 see ``experiments.engine.aggregate``

Each task runs one simulation in memory and returns its rows; Spark writes them. A run is
complete when a commit row names it with the current model (``experiments.provenance``): a rerun
skips complete runs, so a killed sweep resumes without losing or duplicating rows, and a change
to the simulator or the assignors recomputes everything.
"""

from __future__ import annotations

import gc
import hashlib
import itertools
import json
import os
import sys
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from experiments.engine.store import TABLES, local_path, new_batch_id, read_table  # noqa: F401

GRID_KEYS = ("name", "scenarios", "assignors", "seeds", "set", "vary")


class GridError(ValueError):
    """A grid file that cannot be run: one line naming the file and the field."""


@attrs.frozen
class RunSpec:
    """One simulation of a sweep: a scenario with overrides and a seed, at one parameter point.

    ``point`` holds the values that identify the parameter point (scenario, assignor and every
    ``[vary]`` key); aggregation groups runs by it across seeds.
    """

    scenario: str
    overrides: tuple[str, ...]
    seed: int
    point: tuple[tuple[str, Any], ...]
    run_id: str = ""
    cost: float = 0.0   # rough relative cost, to start the biggest runs first
    source: str = ""    # the text of a TOML scenario file, read on the driver (executors cannot)
    # the simulation kernel (``--kernel``; "" for the default): how the run is computed, not
    # which run it is (both kernels give the same results), so not part of its identity
    kernel: str = attrs.field(default="", eq=False)

    def to_json(self) -> str:
        d = {"scenario": self.scenario, "overrides": list(self.overrides), "seed": self.seed,
             "point": [list(kv) for kv in self.point], "source": self.source}
        if self.kernel:
            d["kernel"] = self.kernel
        return json.dumps(d, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, run_id: str = "") -> RunSpec:
        d = json.loads(text)
        return cls(d["scenario"], tuple(d["overrides"]), d["seed"],
                   tuple((k, v) for k, v in d["point"]), run_id, source=d.get("source", ""),
                   kernel=d.get("kernel", ""))


def with_kernel(specs: Sequence[RunSpec], kernel: str | None) -> list[RunSpec]:
    """``specs`` to be run with the simulation kernel ``kernel`` (None: the default)."""
    return [attrs.evolve(s, kernel=kernel) for s in specs] if kernel else list(specs)


@attrs.frozen
class Grid:
    """A parsed grid file (see the module docstring)."""

    scenarios: tuple[str, ...]
    seeds: tuple[int, ...]
    assignors: tuple[str, ...] | None = None
    set: Mapping[str, Any] = attrs.field(factory=dict)
    vary: Mapping[str, Sequence[Any]] = attrs.field(factory=dict)
    name: str = "sweep"
    source: str = "<grid>"


# ---------------------------------------------------------------------------------------------
# Grid files


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML dotted keys arrive as nested tables: ``consumer.static = x`` -> ``{"consumer.static": x}``."""
    out = {}
    for k, v in table.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, Mapping):
            out.update(_flatten(v, key))
        else:
            out[key] = v
    return out


def _scalar(value: Any) -> bool:
    return isinstance(value, bool | int | float | str)


def load_grid(path: str | os.PathLike) -> Grid:
    """Parse and check a grid file; raises ``GridError`` naming the file and the field."""
    path = Path(path)
    where = str(path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise GridError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise GridError(f"{where}: is a directory, expected a grid TOML file") from None
    except UnicodeDecodeError as e:
        raise GridError(f"{where}: not a text file (byte {e.start}: not UTF-8); expected a grid "
                        "TOML file") from None
    except tomllib.TOMLDecodeError as e:
        raise GridError(f"{where}: not valid TOML: {' '.join(str(e).split())}") from None
    except OSError as e:
        raise GridError(f"{where}: cannot read: {e.strerror or e}") from None
    return grid_from_dict(data, where, base_dir=path.parent)


def grid_from_dict(data: Mapping[str, Any], where: str = "<grid>", base_dir: Path | None = None) -> Grid:
    """A ``Grid`` from the parsed TOML document (see the module docstring for the fields)."""
    def fail(field: str, reason: str) -> GridError:
        return GridError(f"{where}: {field}: {reason}")

    for k in data:
        if k not in GRID_KEYS:
            raise fail(k, f"unknown key; allowed: {', '.join(GRID_KEYS)}")
    name = data.get("name", Path(where).stem if where != "<grid>" else "sweep")
    if not isinstance(name, str) or not name:
        raise fail("name", f"{name!r} is not a non-empty string")

    scenarios = data.get("scenarios")
    if scenarios is None:
        raise fail("scenarios", "missing; give a list of built-in scenario names or TOML paths")
    if isinstance(scenarios, str):
        scenarios = [scenarios]
    if not isinstance(scenarios, list) or not scenarios or not all(isinstance(s, str) and s for s in scenarios):
        raise fail("scenarios", f"{scenarios!r} is not a non-empty list of scenario names or paths")
    resolved = []
    for s in scenarios:
        if s.endswith(".toml") and base_dir is not None and not os.path.isabs(s):
            s = str((base_dir / s).resolve())
        resolved.append(s)
    if len(set(resolved)) != len(resolved):
        raise fail("scenarios", f"{scenarios!r} names a scenario twice")

    assignors = data.get("assignors")
    if assignors is not None:
        from assignors import ASSIGNORS

        if isinstance(assignors, str):
            assignors = [assignors]
        if not isinstance(assignors, list) or not assignors:
            raise fail("assignors", f"{assignors!r} is not a non-empty list; allowed: {', '.join(ASSIGNORS)}")
        for a in assignors:
            if a not in ASSIGNORS:
                raise fail("assignors", f"{a!r} is not one of {', '.join(ASSIGNORS)}")
        if len(set(assignors)) != len(assignors):
            raise fail("assignors", f"{assignors!r} names an assignor twice")
        assignors = tuple(assignors)

    seeds = data.get("seeds", 1)
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if seeds < 1:
            raise fail("seeds", f"{seeds} must be >= 1 (a count) or a list of seeds")
        seeds = list(range(seeds))
    if (not isinstance(seeds, list) or not seeds
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)):
        raise fail("seeds", f"{seeds!r} is not a count >= 1 or a non-empty list of integers >= 0")
    if len(set(seeds)) != len(seeds):
        raise fail("seeds", f"{seeds!r} repeats a seed")
    from sim.builtin_scenarios import MAX_SEED

    if max(seeds) > MAX_SEED:
        raise fail("seeds", f"{max(seeds)} is above the largest seed, {MAX_SEED}")

    fixed = data.get("set", {})
    if not isinstance(fixed, Mapping):
        raise fail("set", "expected a table of key = value overrides")
    fixed = _flatten(fixed)
    for k, v in fixed.items():
        if not _scalar(v):
            raise fail(f"set.{k}", f"{v!r} is not a string, number or boolean")

    vary = data.get("vary", {})
    if not isinstance(vary, Mapping):
        raise fail("vary", "expected a table of key = [values]")
    vary = _flatten(vary)
    for k, values in vary.items():
        if not isinstance(values, list) or not values:
            raise fail(f"vary.{k}", f"{values!r} is not a non-empty list of values")
        for v in values:
            if not _scalar(v):
                raise fail(f"vary.{k}", f"{v!r} is not a string, number or boolean")
        kinds = {type(v) for v in values}
        if len(kinds) > 1 and kinds != {int, float}:
            raise fail(f"vary.{k}", f"{values!r} mixes types; use one type per key")
        if len(set(values)) != len(values):
            raise fail(f"vary.{k}", f"{values!r} repeats a value")
        if k in fixed:
            raise fail(f"vary.{k}", "is also in [set]; give it in one place")
        if k in ("scenario", "assignor", "seed"):
            raise fail(f"vary.{k}", f"use the top-level '{k}s' list instead")
    if "assignor" in fixed and assignors is not None:
        raise fail("set.assignor", "conflicts with the top-level 'assignors' list")
    return Grid(scenarios=tuple(resolved), seeds=tuple(seeds), assignors=assignors,
                set=fixed, vary={k: tuple(v) for k, v in vary.items()}, name=name, source=where)


def _override(key: str, value: Any) -> str:
    if isinstance(value, bool):
        value = "true" if value else "false"
    return f"{key}={value}"


def column_name(key: str) -> str:
    """A grid key as a column name (no dots: Spark treats dots as struct access)."""
    return key.replace(".", "_").replace("-", "_")


def expand(grid: Grid) -> list[RunSpec]:
    """Every run of ``grid``, loaded and validated, with its ``run_id``; raises ``GridError``."""
    specs = []
    keys = list(grid.vary)
    for scenario in grid.scenarios:
        for assignor in grid.assignors or (None,):
            for values in itertools.product(*(grid.vary[k] for k in keys)):
                overrides = [_override(k, v) for k, v in grid.set.items()]
                overrides += [_override(k, v) for k, v in zip(keys, values, strict=True)]
                if assignor is not None:
                    overrides.append(_override("assignor", assignor))
                point = [("scenario", _scenario_label(scenario)), ("assignor", assignor or "")]
                point += [(column_name(k), v) for k, v in zip(keys, values, strict=True)]
                for seed in grid.seeds:
                    specs.append(RunSpec(scenario, tuple(overrides), seed, tuple(point)))
    return resolve(specs, grid.source)


def _scenario_label(scenario: str) -> str:
    return Path(scenario).stem if scenario.endswith(".toml") else scenario


def resolve(specs: Iterable[RunSpec], where: str = "<grid>") -> list[RunSpec]:
    """Load every spec's scenario on the driver: validates it and fills ``run_id`` and ``cost``."""
    out = []
    seen: dict[str, RunSpec] = {}
    cache: dict[tuple, Any] = {}
    for spec in specs:
        key = (spec.scenario, spec.overrides)
        if key not in cache:
            try:
                cache[key] = load_run_scenario(spec)
            except Exception as e:  # the loader's errors name the field; add the file
                raise GridError(f"{where}: {_describe(spec)}: {_one_line(e)}") from None
        scenario = cache[key]
        if spec.scenario.endswith(".toml") and not spec.source:
            spec = attrs.evolve(spec, source=Path(spec.scenario).read_text(encoding="utf-8"))
        run_id = run_id_of(scenario, spec.seed)
        if run_id in seen:
            raise GridError(f"{where}: {_describe(spec)} and {_describe(seen[run_id])} give the same "
                            f"simulation; remove one")
        resolved = attrs.evolve(spec, run_id=run_id, cost=_cost(scenario))
        seen[run_id] = resolved
        out.append(resolved)
    return out


def _describe(spec: RunSpec) -> str:
    return f"scenario {spec.scenario!r}" + (f" with {', '.join(spec.overrides)}" if spec.overrides else "")


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


# ---------------------------------------------------------------------------------------------
# The simulator, as seen from a sweep (the only place that knows its API)


def load_run_scenario(spec: RunSpec):
    """The scenario object of ``spec`` (built-in name or TOML file, plus overrides). A file's text
    travels in ``spec.source``: on an executor it is loaded from a private copy of the same name
    (the name is the scenario's default name)."""
    from sim.builtin_scenarios import load_scenario

    if not spec.source:
        return load_scenario(spec.scenario, list(spec.overrides))
    import tempfile

    with tempfile.TemporaryDirectory(prefix="rebalance-sim-scenario-") as tmp:
        path = Path(tmp) / Path(spec.scenario).name
        path.write_text(spec.source, encoding="utf-8")
        return load_scenario(str(path), list(spec.overrides))


def run_id_of(scenario, seed: int) -> str:
    """The simulator's run id for (scenario, seed): its name, the seed and a config hash."""
    try:
        from sim.run import run_id_for
    except ImportError:  # pragma: no cover - older simulator: hash the repr
        blob = repr(scenario).encode()
        return f"{getattr(scenario, 'name', 'run')}-s{seed}-{hashlib.sha256(blob).hexdigest()[:10]}"
    return run_id_for(scenario, seed)


def _cost(scenario) -> float:
    """Rough relative cost of a run, used to start the biggest runs first and for the ETA: members
    times the rebalance rounds its timeline causes. A restart wave of dynamic members costs about
    one more round (leave, rejoin), a static wave about a third of one (measured on the main job:
    a 4-wave deploy of 1000 members takes 5x a crash's time dynamic, 2x static). A consumer group
    protocol run costs about 3x the classic one (its members heartbeat and reconcile one by one:
    2.6-3.4x CPU on the main job's crash and deploys at 1000 members)."""
    from sim.scenario import batch_count

    config = getattr(scenario, "config", None)
    try:
        members = config.members
        partitions = sum(t.partitions for t in config.topics)
    except AttributeError:
        return 0.0
    rounds = 1.0
    for action in getattr(scenario, "timeline", ()):
        if getattr(action, "down_s", None) is None:
            continue
        n = len(action.members) if getattr(action, "members", None) else members
        static = action.static if getattr(action, "static", None) is not None else config.consumer.static
        waves = -(-n // max(1, batch_count(getattr(action, "batch_size", 1), n)))
        rounds += waves * (0.3 if static else 1.0)
    protocol = 3.0 if getattr(config.consumer, "group_protocol", "classic") == "consumer" else 1.0
    return (members + partitions / 20) * rounds * protocol


def run_one(spec: RunSpec) -> tuple[str, str, dict]:
    """Run one simulation in memory; returns (status, detail, tables) with the run's tables
    (events, intervals, episodes, runs, points) as pyarrow Tables."""
    import pyarrow as pa

    from sim import run_scenario

    scenario = load_run_scenario(spec)
    result = run_scenario(scenario, seed=spec.seed, raise_on_violation=False, kernel=spec.kernel or None)
    runs = result.runs
    point = {"run_id": spec.run_id, "seed": spec.seed, **dict(spec.point), "spec": spec.to_json()}
    tables = {"events": result.events, "intervals": result.intervals,
              "episodes": episodes_table(spec.run_id, result.episodes), "runs": runs,
              "points": pa.Table.from_pylist([point])}
    violations = list(result.invariant_violations or [])
    if violations:
        return "violations", f"{len(violations)} invariant violation(s); first: {violations[0]}", tables
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
        elif k in ("episode", "rounds", "members_revoking", "partitions_revoked", "partitions_touched"):
            typ = pa.int64()
        elif all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
            typ = pa.float64()
            values = [None if v is None else float(v) for v in values]
        else:
            typ = pa.string()
            values = [None if v is None else str(v) for v in values]
        columns[k] = pa.array(values, typ)
    return pa.table(columns)


# ---------------------------------------------------------------------------------------------
# Running a sweep


BLOB_SCHEMA = ("slot long, run_id string, status string, wall_s double, error string, "
               + ", ".join(f"{t} binary, {t}_schema binary" for t in TABLES))
# What a task returns when it writes its runs' files itself (experiments.engine.table_sink): its runs'
# status rows, and on its first row the files it wrote (JSON: [[table, path], ...]).
WRITTEN_SCHEMA = "slot long, run_id string, status string, wall_s double, error string, files string"


class SweepInterrupted(Exception):
    """Ctrl-C during a sweep: what was kept, in one line."""


@attrs.frozen
class _Files:
    """Where a task writes its runs' tables (``experiments.engine.table_sink.TaskTables``): the local
    output, the batch, and the fixed schemas (serialized Arrow; the others are the union of the
    task's runs)."""

    out_dir: str
    batch: str
    schemas: tuple[tuple[str, bytes | None], ...]


class _Task:
    """The mapInPandas function: each input row is one Spark task's runs. Out come, per run, its
    status, and either its tables as Arrow IPC blobs (Spark writes them, see
    ``experiments.engine.store``) or, with ``files``, nothing more: the task writes them itself."""

    def __init__(self, model: str, runner: Callable[[RunSpec], tuple[str, str, dict]] | None = None,
                 files: _Files | None = None):
        self.model = model     # computed on the driver, from the sources it ships
        self.runner = runner
        self.files = files

    def _runs(self, batches: Iterator) -> Iterator[tuple[dict, dict]]:
        import pyarrow as pa

        runner = self.runner or run_one
        for batch in batches:
            # each input row is one Spark task's runs: [[slot, run_id, spec], ...] as JSON
            for slot, run_id, spec_json in (run for task in batch["runs"] for run in json.loads(task)):
                spec = RunSpec.from_json(spec_json, run_id)
                t0 = time.perf_counter()
                tables: dict = {}
                try:
                    status, detail, tables = runner(spec)
                except Exception as e:  # one failed run must not sink the sweep; it is reported
                    status, detail = "failed", f"{type(e).__name__}: {_one_line(e)}"
                if "runs" in tables:  # the runs table records the model that produced the run
                    version, _, digest = self.model.partition("+")
                    runs = tables["runs"]
                    runs = runs.append_column("model_version", pa.array([version] * runs.num_rows, pa.string()))
                    tables["runs"] = runs.append_column("model_digest", pa.array([digest] * runs.num_rows, pa.string()))
                row = {"slot": int(slot), "run_id": run_id, "status": status,
                       "wall_s": time.perf_counter() - t0, "error": detail}
                yield row, tables

    def __call__(self, batches: Iterator) -> Iterator:
        import pandas as pd

        from experiments.engine.store import COMPLETE_STATUSES, to_blob

        _freeze_worker_heap()
        if self.files is not None:
            yield from self._write(batches)
            return
        for row, tables in self._runs(batches):
            for t in TABLES:
                table = tables.get(t)
                row[t] = None if table is None else to_blob(table)
                row[f"{t}_schema"] = None if table is None else table.schema.serialize().to_pybytes()
            if row["status"] not in COMPLETE_STATUSES:
                for t in TABLES:
                    row[t] = row[f"{t}_schema"] = None
            yield pd.DataFrame([row])

    def _write(self, batches: Iterator) -> Iterator:
        import pandas as pd
        import pyarrow as pa
        from pyspark import TaskContext

        from experiments.engine.store import COMPLETE_STATUSES
        from experiments.engine.table_sink import TaskTables

        ctx = TaskContext.get()
        schemas = {t: None if b is None else pa.ipc.read_schema(pa.py_buffer(b)) for t, b in self.files.schemas}
        out = TaskTables(self.files.out_dir, self.files.batch, schemas,
                         ctx.partitionId() if ctx is not None else 0,
                         ctx.taskAttemptId() if ctx is not None else 0)
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


def _parallelism(spark) -> int:
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # Spark Connect has no SparkContext
        try:
            return max(1, int(spark.conf.get("spark.default.parallelism")))
        except Exception:
            return os.cpu_count() or 2


BATCHES = 6  # batches of a sweep (by estimated cost) when --batch-runs does not fix their size


def _batches(todo: list[RunSpec], parallelism: int, batch_runs: int | None,
             cost: Mapping[str, float] | None = None) -> list[list[RunSpec]]:
    """Runs in batches, in the given order (biggest first). Each batch is one Spark job and one
    commit: small enough that a kill loses little, large enough that every core stays busy and
    that the cost of a commit (a few seconds of Spark jobs, whatever the runs) is paid rarely.
    ``batch_runs`` fixes the number of runs per batch; otherwise batches hold about 1/BATCHES of
    the estimated cost each, at least 2 runs per core (so the many small runs that come last
    share one or two batches)."""
    if batch_runs:
        return [todo[i:i + batch_runs] for i in range(0, len(todo), batch_runs)]
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
    (tenths of a second), which hundreds of sub-second runs used to pay one by one."""
    weight = [cost.get(s.run_id, 1.0) for s in batch]
    return _cost_groups(weight, sum(weight) / (TASKS_PER_CORE * parallelism))


def _eta(elapsed: float, done_cost: float, left_cost: float) -> str:
    return f", ~{elapsed / done_cost * left_cost:.0f} s left" if done_cost and left_cost > 1e-9 else ""


PROGRESS_EVERY_S = 15.0  # at most one progress line this often while batches run
# Batches computing at once: the next batch's runs are queued behind the current one's, so that
# the cores its last runs leave idle go to them, and a batch commits while the next one runs.
IN_FLIGHT = 2
COMMIT_WAIT_S = 120.0  # how long a failed sweep waits for a commit under way
# How long an interrupted or failed sweep waits for its batches' threads: a cancelled job's
# thread returns once Spark has cancelled it, a commit under way lands or fails.
INTERRUPT_WAIT_S = 10.0
COMMIT_POOL = "commit"  # the scheduler pool of the commits' jobs (experiments.engine.spark FAIR mode)


@attrs.define(eq=False)
class _Batch:
    """One batch of runs on its way through the sweep: computed and committed by its own thread
    when its tasks write their files (``experiments.engine.table_sink``); else computed (its rows
    persisted in Spark), then committed (``experiments.engine.store.write_batch``)."""

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
        self.kept = kept          # runs complete: before this sweep, and in committed batches
        self.left_cost = left_cost
        self.every_s = every_s or PROGRESS_EVERY_S
        self.batches: list[_Batch] = []  # computing or computed, not yet counted in ``done``
        self.done_runs, self.done_cost = 0, 0.0
        self.shown = kept         # the count last shown
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
        from experiments.engine.spark import finished_tasks

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
            text = (f"{self.kept}/{self.total} runs complete" if force
                    else f"{runs}/{self.total} runs done, {self.kept} saved")
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


def run_sweep(specs: Sequence[RunSpec], out: str | os.PathLike, *, master: str | None = None,
              label: str = "sweep", stream=None,
              runner: Callable[[RunSpec], tuple[str, str, dict]] | None = None,
              batch_runs: int | None = None):
    """Run every spec not yet complete under ``out`` (for the current model) as Spark tasks, and
    write their rows batch by batch (``experiments.engine.store``).

    A batch counts once committed, and commits as soon as its runs are done: with a local output
    on a local master its tasks write its files and the driver commits them right away
    (``experiments.engine.table_sink``); elsewhere Spark's Parquet writer writes them, in jobs of their
    own scheduler pool while the next batch's runs keep the other cores busy. A killed sweep
    keeps every committed batch and reruns the rest. A committed batch whose files no longer
    match its commit rows is said so in one line and its runs are recomputed.

    Returns a pandas DataFrame (run_id, status, wall_s, error) with one row per spec; complete
    runs are reported as ``skipped``. ``runner`` replaces ``run_one`` (tests). Ctrl-C raises
    ``SweepInterrupted`` saying how many runs are kept.
    """
    import concurrent.futures as cf

    import pandas as pd
    import pyarrow as pa

    from experiments.engine.spark import (
        can_overlap_jobs,
        cancel_group,
        get_spark,
        in_daemon_thread,
        interrupt_all,
        tag_thread,
    )
    from experiments.engine.store import (
        COMPLETE_STATUSES,
        commit_local,
        complete_runs,
        damage_line,
        tasks_write,
        unify,
        write_batch,
    )
    from experiments.provenance import model_id

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
    done = pd.DataFrame({"run_id": [s.run_id for s in specs if s.run_id in complete],
                         "status": "skipped", "wall_s": 0.0, "error": ""})
    if not todo:
        print(f"{label}: all {len(specs)} runs already complete", file=stream)
        return done
    todo.sort(key=lambda s: (-s.cost, s.run_id))
    cost = {s.run_id: max(s.cost, 1.0) for s in specs}
    parallelism = _parallelism(spark)
    batches = [_Batch(b, _tasks(b, parallelism, cost), sum(cost[s.run_id] for s in b))
               for b in _batches(todo, parallelism, batch_runs, cost)]
    kept = len(specs) - len(todo)
    print(f"{label}: {kept}/{len(specs)} runs complete" + (" (resuming)" if kept else "")
          + f"; {len(todo)} to run in {len(batches)} batch(es), model {model}", file=stream, flush=True)
    points_schema = pa.Table.from_pylist(
        [{"run_id": s.run_id, "seed": s.seed, **dict(s.point), "spec": s.to_json()} for s in specs]).schema
    overlap = can_overlap_jobs()
    direct = tasks_write(out)
    fixed = {"events": _recorder_schema("EVENTS_SCHEMA"), "intervals": _recorder_schema("INTERVALS_SCHEMA"),
             "points": points_schema}

    def status_rows(meta):
        return meta[["run_id", "status", "wall_s", "error"]].assign(model=model)

    def compute(batch: _Batch) -> _Batch:
        tag_thread(batch.id)
        pdf = pd.DataFrame({"task": range(len(batch.tasks)), "runs": [
            json.dumps([[i, batch.specs[i].run_id, batch.specs[i].to_json()] for i in task])
            for task in batch.tasks]})
        # one row, so one partition and one task, per group of runs
        df = spark.createDataFrame(pdf).repartitionByRange(len(batch.tasks), "task")
        if direct:
            files = _Files(str(local.resolve()), batch.id, tuple(
                (t, fixed[t].serialize().to_pybytes() if t in fixed else None) for t in TABLES))
            meta = df.mapInPandas(_Task(model, runner, files), WRITTEN_SCHEMA).toArrow().to_pandas()
            landed = [tuple(f) for text in meta["files"] if text for f in json.loads(text)]
            any_complete = bool(meta["status"].isin(COMPLETE_STATUSES).any())
            commit_local(out, batch.id, landed, fixed if any_complete else {}, status_rows(meta))
            batch.meta = meta
            return batch
        batch.blobs = df.mapInPandas(_Task(model, runner), BLOB_SCHEMA).persist()
        try:
            batch.meta = batch.blobs.select("run_id", "status", "wall_s", "error", "runs_schema",
                                            "episodes_schema").toArrow().to_pandas()
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
                schemas = {**fixed, "runs": unify(_schemas(ok["runs_schema"])),
                           "episodes": unify(_schemas(ok["episodes_schema"]))}
            write_batch(spark, out, batch.id, batch.blobs.where(batch.blobs.status.isin(*COMPLETE_STATUSES)),
                        schemas, status_rows(meta), max(1, min(len(ok), parallelism)), tag if overlap else None)
        finally:
            batch.blobs.unpersist()
        return batch

    t0 = time.monotonic()
    progress = _Progress(label, stream, len(specs), kept, t0, sum(b.cost for b in batches))
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
            in_daemon_thread(lambda b=batch: compute(b), f"sweep-{batch.id}",
                             before_start=lambda f, b=batch: computing.__setitem__(f, b))

    def start_committing() -> None:
        if waiting and not committing:
            batch = waiting.pop(0)
            in_daemon_thread(lambda b=batch: commit(b), f"commit-{batch.id}",
                             before_start=lambda f, b=batch: committing.__setitem__(f, b))

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
        except BaseException:  # noqa: BLE001 - a second Ctrl-C, a lost session: keep the count
            kept = progress.kept
        raise SweepInterrupted(f"interrupted; {kept} of {len(specs)} runs are complete in {out} "
                               "(rerun the same command to finish the rest)") from None
    except Exception:
        # a failed batch: stop the batches still running, keep those already computed
        for batch in computing.values():
            cancel_group(batch.id)
        cf.wait(list(committing), timeout=COMMIT_WAIT_S)
        for batch in waiting:  # (in threads of their own, as always: see tag_thread)
            try:
                in_daemon_thread(lambda b=batch: commit(b), f"commit-{batch.id}").result()
            except Exception:  # noqa: BLE001 - the first failure is the one reported
                pass
        cf.wait(list(computing), timeout=INTERRUPT_WAIT_S)
        raise
    finally:
        progress.stop()
    progress.show(force=True)
    return pd.concat(results, ignore_index=True)


def _schemas(blobs) -> list:
    import pyarrow as pa

    return [pa.ipc.read_schema(pa.py_buffer(b)) for b in blobs]


def _recorder_schema(name: str):
    from sim import recorder

    return getattr(recorder, name)


class AggregateIncomplete(RuntimeError):
    """Complete runs missing from the aggregate tables (one line)."""


def check_aggregate(specs: Sequence[RunSpec], status, runs) -> None:
    """Raise ``AggregateIncomplete`` unless the aggregate ``runs`` table (pyarrow) holds every
    run of ``specs`` that ``status`` (``run_sweep``'s) calls complete, once: a run whose rows
    could not be read must not silently leave its point with fewer seeds."""
    from collections import Counter

    from experiments.engine.store import COMPLETE_STATUSES

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
            "their rows could not be read: rerun the same command to check the output")
    raise AggregateIncomplete(f"{len(twice)} run(s) appear twice in the aggregate tables (first: {twice[0]})")


def report_failures(status, stream=None) -> int:
    """Print failed and violating runs; returns the number of failed runs."""
    stream = stream or sys.stderr
    bad = status[status["status"].isin(["failed", "violations"])]
    for row in bad.itertuples():
        print(f"  {row.status}: {row.run_id}: {row.error}", file=stream)
    return int((status["status"] == "failed").sum())
