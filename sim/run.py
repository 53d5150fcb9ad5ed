"""``run_scenario``: build the actors for a scenario, run them in virtual time, record, measure."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import time
from collections.abc import Iterable
from importlib import metadata as importlib_metadata
from typing import Any

import attrs
import pyarrow as pa
import trio
import trio.testing

from sim.config import ConfigError, to_flat_dict
from sim.errors import InvariantViolation
from sim.kernel.stop import RunCut, StopToken
from sim.kernel.tasks import DEFAULT_KERNEL, KERNELS
from sim.observe.invariants import INVARIANT_EVENT_KINDS, check_run_with_hazards
from sim.observe.metrics import METRIC_EVENT_KINDS, compute_metrics
from sim.observe.recorder import (
    EVENTS_SCHEMA,
    INTERVALS_SCHEMA,
    EventStream,
    write_parquet_atomic,
)
from sim.scenario.actions import action_to_dict
from sim.scenario.scenario import Scenario
from sim.world.runner import Runner, release_world

# What a run keeps (``run_scenario``'s ``record``): every event and interval; the rows its metrics
# and invariants read (the intervals, and the events of ``KEPT_FOR_EPISODES``); or those rows
# while it runs, but no tables in its result.
RECORD_LEVELS = ("all", "episodes", "none")
KEPT_FOR_EPISODES = frozenset(METRIC_EVENT_KINDS + INVARIANT_EVENT_KINDS)


@attrs.frozen
class RunResult:
    """The outcome of one run.

    ``summary``: flat JSON-serializable dict of run metrics; ``episodes``: one flat dict per
    rebalance episode; ``events`` / ``intervals`` / ``runs``: the pyarrow tables also written as
    Parquet; ``invariant_violations``: list of strings (empty for a healthy run).
    """

    run_id: str
    summary: dict
    episodes: list
    events: pa.Table
    intervals: pa.Table
    runs: pa.Table
    invariant_violations: list


def run_id_for(scenario: Scenario, seed: int) -> str:
    blob = json.dumps(
        {
            "config": to_flat_dict(scenario.config),
            "seed": seed,
            "name": scenario.name,
            "timeline": [action_to_dict(a) for a in scenario.resolved_timeline],
        },
        sort_keys=True,
        default=str,
    )
    return f"{scenario.name}-s{seed}-{hashlib.sha256(blob.encode()).hexdigest()[:10]}"


def _version(dist: str) -> str:
    try:
        return importlib_metadata.version(dist)
    except importlib_metadata.PackageNotFoundError:
        return "unknown"


@contextlib.contextmanager
def _without_cyclic_gc():
    """Run the block without the cyclic garbage collector.

    The world (actors, members' state, assignments) and then its rows form a large object graph
    that lives as long as the run; every collection rescanned it for nothing (a tenth of a
    10,000-member run's CPU). A run makes next to no cyclic garbage (a few hundred objects, at
    100 members as at 10,000): reference counting frees the rest, and ``release_world`` lets it free
    the world itself at the end, so the collector finds only the results when it resumes."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# How long the phases after the kernel (tables, invariants, metrics) may go on past a run's wall
# time before they are cut.
FINISH_GRACE_S = 5.0


@attrs.define
class _Built:
    """What the phases after the kernel made of a run; ``cut``: why they stopped short, if they did
    (what they had not made yet is empty)."""

    events: pa.Table = attrs.field(factory=EVENTS_SCHEMA.empty_table)
    intervals: pa.Table = attrs.field(factory=INTERVALS_SCHEMA.empty_table)
    violations: list = attrs.field(factory=list)
    hazards: dict = attrs.field(factory=dict)
    episodes: list = attrs.field(factory=list)
    summary: dict = attrs.field(factory=dict)
    cut: str | None = None


def _build(runner: Runner, scenario: Scenario, run_id: str, end: float, settled: bool, stop):
    """The run's tables, invariants and metrics, in phases that look at ``stop`` between them (and
    between episodes): a cut phase leaves a partial result that says where it stopped."""
    built = _Built()
    rec = runner.recorder
    rates = runner.world.rates
    cooperative = any(
        a.core is not None and a.core.protocol == "COOPERATIVE" for a in runner.members.values()
    )
    try:
        stop.check("closing the intervals")
        rec.finish(end, runner.partitions_alive(end))
        stop.check("building the events table")
        built.events = rec.events_table(run_id)
        stop.check("building the intervals table")
        built.intervals = rec.intervals_table(run_id)
        built.violations = [f"t={t:.6f}: {text}" for t, text in sorted(rec.violations)]
        stop.check("checking the invariants")
        found, built.hazards = check_run_with_hazards(
            built.events,
            built.intervals,
            settled=settled,
            cooperative=cooperative,
            rates=rates,
            zombies=rec.zombies,
        )
        built.violations += found
        stop.check("computing the metrics")
        built.episodes, built.summary = compute_metrics(
            built.events,
            built.intervals,
            scenario.config,
            rates,
            rec.processing_union,
            check=lambda: stop.check("computing the metrics"),
        )
    except RunCut as cut:
        built.cut = f"{cut}: the result has no metrics"
        built.episodes = []
    return built


def run_scenario(
    scenario: Scenario,
    seed: int = 0,
    out_dir: str | os.PathLike | None = None,
    progress: bool = False,
    *,
    raise_on_violation: bool = True,
    max_wall_s: float | None = None,
    max_events: int | None = None,
    stop: StopToken | None = None,
    kernel: str | None = None,
    check_settled: bool = False,
    record: str = "all",
    max_memory_bytes: int | None = None,
    events_path: str | os.PathLike | None = None,
    keep_kinds: Iterable[str] = (),
) -> RunResult:
    """Run ``scenario`` with ``seed`` in virtual time and measure it.

    Returns a ``RunResult`` (``summary``, ``episodes``, ``events``, ``intervals``, ``runs``,
    ``invariant_violations``). With ``out_dir``, writes ``events.parquet``,
    ``intervals.parquet`` and ``runs.parquet`` there, each atomically (temp file, then
    ``os.replace``). The same scenario and seed give byte-identical events and intervals files
    (unless the assignor cost mode is ``measured``). ``progress`` prints simulated time to stderr.
    If an invariant is broken the files are still written, then ``InvariantViolation`` is raised
    (``raise_on_violation=False`` returns the result instead).

    Resource bounds: a run that delivers ``max_events`` simulation inputs (messages, timers,
    notes), or runs longer than ``max_wall_s`` seconds of wall time, stops cleanly where it is;
    its results and files are complete up to that instant and marked ``partial`` (summary keys
    ``partial`` and ``partial_reason``, and the runs row). Invariants that need the run's end
    (every partition eventually owned) are not checked for a partial run. ``stop``, a
    ``sim.kernel.stop.StopToken`` for this run (its bounds are set from ``max_wall_s`` and
    ``max_events``), lets the caller stop the run the same way from outside it (``request``: the
    CLI's Ctrl-C), and tells it whether the simulation is running.

    ``kernel`` picks how the actors are run (``sim.kernel.tasks.KERNELS``): ``"tasks"``, each actor a
    trio task of its own, or ``"inline"``, the same actors called in the same order from the
    kernel's one task; None is ``sim.kernel.tasks.DEFAULT_KERNEL``. Both give the same results, so the
    kernel is not part of the run id; the runs table records which one ran.

    ``max_memory_bytes`` bounds the process's resident memory the same way (read with the wall
    clock; the partial reason says how many rows the run held). Once the kernel is over, the
    result is built in phases (tables, invariants, metrics) that stop where they are
    ``FINISH_GRACE_S`` past ``max_wall_s`` (or when ``stop.cut`` is asked): the result is then
    partial, says which phase was cut, and has no metrics.

    ``check_settled`` runs the full scan of every member beside the incremental check of when
    the group is settled (an episode's end) and records a violation where they differ (the soak
    and the tests turn it on; it costs a scan of the group per input).
    """
    kernel = DEFAULT_KERNEL if kernel is None else kernel
    if record not in RECORD_LEVELS:
        raise ConfigError("record", f"{record!r} is not one of {', '.join(RECORD_LEVELS)}")
    if events_path is not None and record != "all":
        raise ConfigError("events_path", f"writes every event: record={record!r} keeps fewer")
    if kernel not in KERNELS:
        raise ConfigError("kernel", f"{kernel!r} is not one of {', '.join(sorted(KERNELS))}")
    if max_events is not None and (
        isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 1
    ):
        raise ConfigError("max_events", f"{max_events!r} is not a positive integer")
    if max_memory_bytes is not None and (
        isinstance(max_memory_bytes, bool)
        or not isinstance(max_memory_bytes, int)
        or max_memory_bytes < 1
    ):
        raise ConfigError("max_memory_bytes", f"{max_memory_bytes!r} is not a positive integer")
    if max_wall_s is not None and (
        isinstance(max_wall_s, bool)
        or not isinstance(max_wall_s, int | float)
        or not max_wall_s > 0
    ):
        raise ConfigError("max_wall_s", f"{max_wall_s!r} is not a positive number of seconds")
    wall0 = time.perf_counter()
    with _without_cyclic_gc():
        if stop is None:
            stop = StopToken()
        stop.max_wall_s, stop.max_events = max_wall_s, max_events
        if max_memory_bytes is not None:
            stop.max_memory_bytes = max_memory_bytes
        run_id = run_id_for(scenario, seed)
        stream = None if events_path is None else EventStream(os.fspath(events_path), run_id)
        try:
            runner = Runner(
                scenario,
                seed,
                progress,
                stop,
                kernel,
                None if record == "all" and stream is None else KEPT_FOR_EPISODES | set(keep_kinds),
                stream,
            )
            runner.check_settled = check_settled
            end, settled = runner.run()
            if stream is not None:
                runner.recorder.write_streamed()
                stream.close()
        except BaseException:
            if stream is not None:
                stream.abort()
            raise
        wall = time.perf_counter() - wall0
        messages, dropped, delivered = (
            runner.network.sent,
            runner.network.dropped,
            runner.kernel.delivered,
        )
        partial_reason = runner.partial_reason
        rec = runner.recorder
        if partial_reason is not None and partial_reason.startswith("max_memory"):
            partial_reason += (
                f"; the run held {len(rec.events):,} events and "
                f"{len(rec.intervals) + len(rec.open_intervals()):,} intervals"
            )
        stop.finish_within(FINISH_GRACE_S)
        built = _build(runner, scenario, run_id, end, settled or bool(partial_reason), stop)
        if built.cut is not None:
            partial_reason = "; ".join(filter(None, [partial_reason, built.cut]))
        partial = bool(partial_reason)
        release_world(runner)
    events, intervals, violations, episodes, hazards = (
        built.events,
        built.intervals,
        built.violations,
        built.episodes,
        built.hazards,
    )
    summary = {
        "run_id": run_id,
        "scenario": scenario.name,
        "seed": seed,
        "simulated_s": end,
        "settled_at_end": settled,
        "messages": messages,
        "messages_dropped": dropped,
        "wall_s": round(wall, 3),
        "messages_per_wall_s": round(messages / wall, 1) if wall > 0 else None,
        "invariant_violations": len(violations),
        **built.summary,
        **hazards,
        "partial": partial,
        "partial_reason": partial_reason,
        "events_delivered": delivered,
    }
    row: dict[str, Any] = {
        "run_id": run_id,
        "scenario": scenario.name,
        "seed": seed,
        "partial": partial,
        "kernel": kernel,
        "record": record,
        "version_rebalance_sim": _version("rebalance-sim"),
        "version_trio": trio.__version__,
        "version_pyarrow": pa.__version__,
        "timeline": json.dumps([action_to_dict(a) for a in scenario.timeline], default=str),
    }
    row.update(
        {
            f"config.{k}": (v if isinstance(v, bool | int | float) or v is None else str(v))
            for k, v in to_flat_dict(scenario.config).items()
        }
    )
    row.update({f"summary.{k}": v for k, v in summary.items()})
    row["violations"] = json.dumps(violations)
    runs = pa.Table.from_pylist([row])
    if record == "none":
        events, intervals = EVENTS_SCHEMA.empty_table(), INTERVALS_SCHEMA.empty_table()
    result = RunResult(run_id, summary, episodes, events, intervals, runs, violations)
    if out_dir is not None:
        out = os.fspath(out_dir)
        if record != "none":
            if events_path is None:  # else the events are in that file
                write_parquet_atomic(events, os.path.join(out, "events.parquet"))
            write_parquet_atomic(intervals, os.path.join(out, "intervals.parquet"))
        write_parquet_atomic(runs, os.path.join(out, "runs.parquet"))
    if violations and raise_on_violation:
        raise InvariantViolation(result)
    return result
