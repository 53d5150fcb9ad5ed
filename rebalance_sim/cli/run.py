"""The ``run`` subcommand.

``rebalance-sim run SCENARIO [--set key=value ...] [--seed N] [--out DIR] [--json]`` runs a
built-in scenario or a TOML file and prints its episodes and metrics.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from assignors import AssignorError
from sim import ConfigError, run_scenario
from sim.observe.metrics import metrics_of
from sim.run import FINISH_GRACE_S, RECORD_LEVELS
from sim.scenario.builtins import BUILTINS, load_scenario

from ..lab.atomic import staging_directory
from ..lab.outputs import OutputError, check_output_dir
from ..lab.report.timeline import IMAGE_FORMATS
from .options import add_kernel_option, add_memory_option, kernel_error, max_memory_bytes

# (episode metric, header) of the episode table, from the simulator's one list of metrics
EPISODE_COLUMNS = [(m.name, m.header) for m in metrics_of("episode") if m.header is not None]


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if math.isinf(v):
            return "inf"
        return f"{v:,.3f}" if abs(v) < 1e6 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def format_table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    line = "  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def format_result(result, scenario) -> str:
    parts = [
        f"scenario {scenario.name}: {scenario.description}".rstrip(": "),
        f"run {result.run_id}",
        "",
    ]
    rows = [[_fmt(ep[k]) for k, _ in EPISODE_COLUMNS] for ep in result.episodes]
    parts.append(format_table(rows, [h for _, h in EPISODE_COLUMNS]))
    parts.append("")
    parts += [
        f"  episode {ep['episode']}: {ep['triggers']}"
        + ("" if ep["settled"] else "  (did not settle)")
        for ep in result.episodes
    ]
    parts.append("")
    width = max(len(k) for k in result.summary)
    for k, v in result.summary.items():
        parts.append(f"{k.ljust(width)}  {_fmt(v)}")
    if result.invariant_violations:
        parts.append("")
        parts.append("INVARIANT VIOLATIONS:")
        parts.extend(f"  {v}" for v in result.invariant_violations)
    return "\n".join(parts)


EXIT_OK, EXIT_VIOLATIONS, EXIT_BAD_INPUT, EXIT_PARTIAL, EXIT_INTERNAL = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C


ESCALATE_S = 1.0  # how long a stop asked of a running simulation may take before it is forced


class _StopNow(Exception):
    """A stop that could not wait for the simulation (nothing simulated yet, or one step of it
    outlasting ``ESCALATE_S``): the run ends without a result."""

    def __init__(self, why: str, interrupted: bool):
        super().__init__(why)
        self.interrupted = interrupted


class _Stopper:
    """Ctrl-C and ``--max-wall`` for one run, acted on within about a second whatever the run's
    size. The wall time counts from the command's start (``started_at``: when ``rebalance-sim``'s
    ``main`` was entered, the parsing included). While the simulation runs, a stop ends it before
    its next input (the run's ``sim.kernel.stop.StopToken``), and the result so far is kept; before it runs (loading, building the group) there is nothing to keep, and the stop is immediate;
    if one step of the simulation outlasts ``ESCALATE_S`` after the stop, it is forced. Once the
    simulation is over, its result is built in phases that look at the token between them: Ctrl-C
    cuts them at once, ``--max-wall`` ``FINISH_GRACE_S`` after its time (what was built is kept,
    marked partial). A second Ctrl-C interrupts at once."""

    def __init__(self, max_wall: float | None, started_at: float | None = None):
        self.max_wall = max_wall
        self.interrupted = False
        self.stopping: str | None = None  # the stop asked of the running simulation
        self.active = threading.current_thread() is threading.main_thread()
        self.started_at = time.monotonic() if started_at is None else started_at
        # set by the command once the scenario is loaded: run_scenario builds the group next
        self.building = False
        self.before_start: _StopNow | None = None  # a stop that came while it was built

    def __enter__(self) -> _Stopper:
        from sim.kernel.stop import StopToken

        self.token = StopToken()  # the run's: handed to run_scenario
        if self.max_wall is not None:
            self.token.finish_by(
                self.started_at + self.max_wall + FINISH_GRACE_S,
                f"max_wall_s={self.max_wall:g} reached",
            )
        if self.active:
            self.previous = (
                signal.signal(signal.SIGINT, self._on_sigint),
                signal.signal(signal.SIGALRM, self._on_alarm),
            )
            if self.max_wall is not None:
                signal.setitimer(
                    signal.ITIMER_REAL,
                    max(1e-3, self.max_wall - (time.monotonic() - self.started_at)),
                )
        return self

    def __exit__(self, *exc) -> None:
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGINT, self.previous[0])
            signal.signal(signal.SIGALRM, self.previous[1])

    def _stop(self, why: str, interrupted: bool) -> None:
        if self.token.running:
            self.stopping = why
            self.token.request(why)
            signal.setitimer(signal.ITIMER_REAL, ESCALATE_S)
        elif not self.token.started:
            stop = _StopNow(
                f"{why} before the simulation started (loading the scenario, building the group)",
                interrupted,
            )
            if not self.building:
                raise stop
            # Building the group runs compiled code, which must not see an exception raised by a
            # signal handler (the process aborts): the kernel stops before its first input and
            # the command says so as soon as run_scenario returns.
            self.before_start = stop
            self.stopping = why
            self.token.request(why)
        else:  # the simulation is over: its result is being built, in phases that look at
            self.stopping = why
            self.token.cut(why)

    def _on_sigint(self, signum, frame) -> None:
        if self.interrupted:
            raise KeyboardInterrupt
        self.interrupted = True
        self._stop("interrupted", True)

    def _on_alarm(self, signum, frame) -> None:
        if self.stopping is None:
            self._stop(f"max_wall_s={self.max_wall:g} reached", False)
        elif self.token.running:  # one step of the simulation outlasted the stop
            raise _StopNow(
                f"{self.stopping}; one step of the simulation went on for more than "
                f"{ESCALATE_S:g} s after that, so it was cut short without a result",
                self.interrupted,
            )


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if isinstance(e, ConfigError | AssignorError) else f"{type(e).__name__}: {text}"


RUN_FILES = ("events.parquet", "intervals.parquet", "runs.parquet")


def check_run_dir(out: str) -> bool:
    """Check ``--out`` before the run: a directory that is new, empty, or holds only a previous
    run's files (which this run replaces, whole); returns whether it existed. Raises
    ``OutputError``."""
    p = Path(out)
    existed = p.exists()
    if existed and p.is_dir():
        here = Path.cwd().resolve()
        if here == p.resolve() or p.resolve() in here.parents:
            raise OutputError(
                f"--out {out}: is the current directory or holds it; give a "
                "directory for this run's files"
            )
        # what else a run's directory may hold: timelines drawn from it
        drawn = tuple(f".{ext}" for ext in IMAGE_FORMATS)
        foreign = sorted(
            f.name
            for f in p.iterdir()
            if not f.name.startswith(".")
            and f.name not in RUN_FILES
            and not f.name.lower().endswith(drawn)
        )
        if foreign:
            raise OutputError(
                f"--out {out}: holds {foreign[0]!r}, which no run wrote (a run "
                "replaces its directory whole); give a new or empty directory"
            )
    check_output_dir(out)
    return existed


def write_run_dir(out: str, result, bare: bool = False, stage: Path | None = None) -> None:
    """The run's three files (``bare``: only ``runs.parquet``), written into a directory built
    beside ``out`` and swapped in whole: ``out`` holds either the previous run's files or this
    run's, never a mix. ``stage``: that directory, made before the run, which holds the events
    file the run wrote as it went."""
    from sim.observe.recorder import write_parquet_atomic

    from ..lab.atomic import atomic_directory, swap_in

    def write(tmp: Path) -> None:
        for name, table in zip(
            RUN_FILES, (result.events, result.intervals, result.runs), strict=True
        ):
            if name == "events.parquet" and stage is not None:
                continue  # written as the run went
            if name == "runs.parquet" or not bare:
                write_parquet_atomic(table, str(tmp / name))

    if stage is None:
        with atomic_directory(Path(out)) as tmp:
            write(tmp)
    else:
        write(stage)
        swap_in(stage, Path(out))


def cmd_run(args) -> int:
    """Exit 0: fine; 1: invariant violations; 2: bad input, or the results cannot be written
    (one line on stderr); 3: stopped by --max-wall or --max-events (partial results); 4: an
    internal error (one line, a bug); 130: Ctrl-C (the partial result is printed and written,
    as with --max-wall)."""
    from sim.scenario.builtins import MAX_SEED

    for flag, value in (("--max-wall", args.max_wall), ("--max-events", args.max_events)):
        if value is not None and not value > 0:
            print(f"rebalance-sim run: {flag}: {value} must be > 0", file=sys.stderr)
            return EXIT_BAD_INPUT
    if args.seed < 0:
        print(f"rebalance-sim run: --seed: {args.seed} must be >= 0", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.seed > MAX_SEED:
        print(
            f"rebalance-sim run: --seed: {args.seed} is above the largest seed, {MAX_SEED}",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    if kernel_error("run", args) is not None:
        return EXIT_BAD_INPUT
    try:
        memory = max_memory_bytes(args)
    except ValueError as e:
        print(f"rebalance-sim run: --max-memory: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    # what the command needs: the files it writes, or only the metrics it prints
    record = args.record or ("all" if args.out else "none")
    existed = True
    if args.out:
        try:  # before the simulation: a long run must not be lost to an unwritable --out
            existed = check_run_dir(args.out)
        except OutputError as e:
            print(f"rebalance-sim run: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
    stage = None
    if args.out and record == "all":
        # every event goes to its file as the run goes, in the directory that then takes the
        # place of --out (so the run's memory does not grow with its events)
        try:
            stage = staging_directory(Path(args.out))
        except OSError as e:
            print(f"rebalance-sim run: --out {args.out}: {_one_line(e)}", file=sys.stderr)
            return EXIT_BAD_INPUT
    try:
        return _simulate(args, record, memory, existed, stage)
    finally:
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)  # gone already if it became --out


def _simulate(args, record: str, memory: int | None, existed: bool, stage: Path | None) -> int:
    """``cmd_run`` once its options are checked: simulate, print, write."""
    try:
        with _Stopper(args.max_wall, getattr(args, "started_at", None)) as stopper:
            try:
                scenario = load_scenario(args.scenario, args.set or [])
            except (ConfigError, AssignorError) as e:
                print(f"rebalance-sim run: {_one_line(e)}", file=sys.stderr)
                return EXIT_BAD_INPUT
            except (OSError, ValueError, TypeError, KeyError, RecursionError, MemoryError) as e:
                print(f"rebalance-sim run: {args.scenario}: {_one_line(e)}", file=sys.stderr)
                return EXIT_BAD_INPUT
            stopper.building = True
            result = run_scenario(
                scenario,
                seed=args.seed,
                progress=not args.json,
                raise_on_violation=False,
                max_events=args.max_events,
                stop=stopper.token,
                kernel=args.kernel,
                record=record,
                max_memory_bytes=memory,
                events_path=None if stage is None else stage / "events.parquet",
            )
            if stopper.before_start is not None:
                raise stopper.before_start
    except _StopNow as e:
        print(f"rebalance-sim run: {e}", file=sys.stderr)
        return EXIT_INTERRUPTED if e.interrupted else EXIT_PARTIAL
    except (ConfigError, AssignorError) as e:
        print(f"rebalance-sim run: {_one_line(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:  # a simulator bug: still one line, never a traceback
        print(
            f"rebalance-sim run: internal error (please report with the scenario and seed): "
            f"{_one_line(e)}",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    finally:
        if args.out and not existed:
            with contextlib.suppress(OSError):
                os.rmdir(args.out)  # created by the check and left empty: nothing was written
    partial = result.summary.get("partial")
    if args.json:
        print(
            json.dumps(
                {
                    "summary": result.summary,
                    "episodes": result.episodes,
                    "invariant_violations": result.invariant_violations,
                },
                indent=2,
                default=str,
            )
        )
    else:
        print(format_result(result, scenario))
    sys.stdout.flush()  # the result is out before its files are written (or fail to be)
    if args.out:
        try:
            write_run_dir(args.out, result, bare=record == "none", stage=stage)
        except OSError as e:
            why = os.strerror(e.errno) if e.errno else _one_line(e)
            print(
                f"rebalance-sim run: cannot write the results to {args.out} ({why}); "
                f"{'its previous contents are unchanged' if existed else 'nothing was written'}",
                file=sys.stderr,
            )
            if not existed:
                with contextlib.suppress(OSError):
                    os.rmdir(args.out)
            return EXIT_BAD_INPUT
        if not args.json:
            wrote = (
                os.path.join(args.out, "runs.parquet")
                if record == "none"
                else f"{os.path.join(args.out, 'events.parquet')}, intervals.parquet, runs.parquet"
            )
            print(f"\nwrote {wrote}")
    if stopper.interrupted:
        kept = f" in {args.out}" if args.out else " above"
        print(
            f"rebalance-sim run: interrupted; kept the partial result{kept} "
            f"({result.summary['partial_reason']})",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if partial:
        line = f"PARTIAL: the run stopped early ({result.summary['partial_reason']}); results cover only that much"
        print(line, file=sys.stderr if args.json else sys.stdout)
    if result.invariant_violations:
        return EXIT_VIOLATIONS
    return EXIT_PARTIAL if partial else EXIT_OK


def register(subparsers) -> None:
    """Add ``run`` to the CLI's subparsers."""
    names = ", ".join(BUILTINS)
    p = subparsers.add_parser(
        "run",
        help="run one scenario and print its rebalance episodes and metrics",
        description=f"Run a built-in scenario ({names}) or a TOML scenario file.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  rebalance-sim run scale-out --set members=12 --set assignor=range\n"
        "  rebalance-sim run crash --set consumer.session_timeout_ms=10000 --json\n"
        "  rebalance-sim run my-scenario.toml --seed 3 --out out/run1\n"
        "  rebalance-sim run crash --set members=2000 --max-wall 60\n"
        "  rebalance-sim run rolling-bounce-dynamic --set members=2000 --max-memory 2G\n\n"
        "exit status: 0 ok, 1 invariant violations, 2 bad input, 3 partial (a bound was hit), "
        "4 internal error, 130 interrupted by Ctrl-C (partial result kept)",
    )
    p.add_argument("scenario", help="built-in name or path to a .toml file")
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a parameter (repeatable), e.g. members=12 or consumer.static=true",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed, >= 0 (default 0)")
    p.add_argument("--out", metavar="DIR", help="write events/intervals/runs Parquet files here")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument(
        "--max-wall",
        type=float,
        metavar="SECONDS",
        help="stop after this much wall time; results are kept and marked partial (exit 3)",
    )
    p.add_argument(
        "--max-events",
        type=int,
        metavar="N",
        help="stop after N simulation inputs (messages, timers); results marked partial (exit 3)",
    )
    add_memory_option(p)
    p.add_argument(
        "--record",
        choices=RECORD_LEVELS,
        default=None,
        help="what the run keeps: 'all' events and intervals; 'episodes', only the rows its "
        "metrics read (a large group's JoinGroup/SyncGroup traffic is not held); 'none', no "
        "tables (with --out, only runs.parquet). The metrics are the same (default: all with "
        "--out, else none)",
    )
    add_kernel_option(p)
    p.set_defaults(func=cmd_run)
