"""The ``run`` and ``timeline`` subcommands.

``rebalance-sim run SCENARIO [--set key=value ...] [--seed N] [--out DIR] [--json]`` runs a
built-in scenario or a TOML file and prints its episodes and metrics.
``rebalance-sim timeline RUN_DIR [--out PNG]`` draws which member owned each partition over time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
import threading

from assignors import AssignorError
from sim import ConfigError, run_scenario

from .kernel_option import add_kernel_option, kernel_error
from .outputs import OutputError, check_output_dir, check_output_file
from .scenarios import BUILTINS, load_scenario

EPISODE_COLUMNS = [
    ("episode", "#"),
    ("start_s", "start s"),
    ("rebalance_time_s", "rebalance s"),
    ("rounds", "rounds"),
    ("time_to_detect_s", "detect s"),
    ("join_barrier_s", "join s"),
    ("sync_s", "sync s"),
    ("callbacks_s", "callbacks s"),
    ("unassigned_partition_s", "unassigned p*s"),
    ("unassigned_max_s", "max gap s"),
    ("partitions_touched", "touched"),
    ("stop_the_world_s", "stop-world s"),
    ("double_processing_partition_s", "double p*s"),
    ("peak_lag_records", "peak lag"),
]


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
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    for r in rows:
        out.append("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
    return "\n".join(out)


def format_result(result, scenario) -> str:
    parts = [f"scenario {scenario.name}: {scenario.description}".rstrip(": "),
             f"run {result.run_id}", ""]
    rows = [[_fmt(ep[k]) for k, _ in EPISODE_COLUMNS] for ep in result.episodes]
    parts.append(format_table(rows, [h for _, h in EPISODE_COLUMNS]))
    parts.append("")
    for ep in result.episodes:
        parts.append(f"  episode {ep['episode']}: {ep['triggers']}"
                     + ("" if ep["settled"] else "  (did not settle)"))
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


@contextlib.contextmanager
def _ctrl_c_stops():
    """While the simulation runs, the first Ctrl-C asks it to stop where it is (like --max-wall:
    the result so far is kept and written); a second Ctrl-C interrupts at once."""
    flag = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def on_sigint(signum, frame):
        if flag.is_set():
            raise KeyboardInterrupt
        flag.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if isinstance(e, ConfigError | AssignorError) else f"{type(e).__name__}: {text}"


def cmd_run(args) -> int:
    """Exit 0: fine; 1: invariant violations; 2: bad input (one line on stderr); 3: stopped by
    --max-wall or --max-events (partial results); 4: an internal error (one line, a bug);
    130: Ctrl-C (the partial result is printed and written, as with --max-wall)."""
    for flag, value in (("--max-wall", args.max_wall), ("--max-events", args.max_events)):
        if value is not None and not value > 0:
            print(f"rebalance-sim run: {flag}: {value} must be > 0", file=sys.stderr)
            return EXIT_BAD_INPUT
    if args.seed < 0:
        print(f"rebalance-sim run: --seed: {args.seed} must be >= 0", file=sys.stderr)
        return EXIT_BAD_INPUT
    if kernel_error("run", args) is not None:
        return EXIT_BAD_INPUT
    try:
        scenario = load_scenario(args.scenario, args.set or [])
    except (ConfigError, AssignorError) as e:
        print(f"rebalance-sim run: {_one_line(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (OSError, ValueError, TypeError, KeyError, RecursionError, MemoryError) as e:
        print(f"rebalance-sim run: {args.scenario}: {_one_line(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.out:
        try:  # before the simulation: a long run must not be lost to an unwritable --out
            check_output_dir(args.out)
        except OutputError as e:
            print(f"rebalance-sim run: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
    try:
        with _ctrl_c_stops() as interrupted:
            result = run_scenario(scenario, seed=args.seed, out_dir=args.out, progress=not args.json,
                                  raise_on_violation=False, max_wall_s=args.max_wall,
                                  max_events=args.max_events, should_stop=interrupted.is_set,
                                  kernel=args.kernel)
    except (ConfigError, AssignorError) as e:
        print(f"rebalance-sim run: {_one_line(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as e:
        print(f"rebalance-sim run: cannot write results: {_one_line(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:  # a simulator bug: still one line, never a traceback
        print(f"rebalance-sim run: internal error (please report with the scenario and seed): "
              f"{_one_line(e)}", file=sys.stderr)
        return EXIT_INTERNAL
    partial = result.summary.get("partial")
    if args.json:
        print(json.dumps({"summary": result.summary, "episodes": result.episodes,
                          "invariant_violations": result.invariant_violations}, indent=2, default=str))
    else:
        print(format_result(result, scenario))
        if args.out:
            print(f"\nwrote {os.path.join(args.out, 'events.parquet')}, intervals.parquet, runs.parquet")
    if interrupted.is_set():
        kept = f" in {args.out}" if args.out else " above"
        print(f"rebalance-sim run: interrupted; kept the partial result{kept} "
              f"({result.summary['partial_reason']})", file=sys.stderr)
        return EXIT_INTERRUPTED
    if partial:
        line = f"PARTIAL: the run stopped early ({result.summary['partial_reason']}); results cover only that much"
        print(line, file=sys.stderr if args.json else sys.stdout)
    if result.invariant_violations:
        return EXIT_VIOLATIONS
    return EXIT_PARTIAL if partial else EXIT_OK


def cmd_timeline(args) -> int:
    path = os.path.join(args.run_dir, "intervals.parquet")
    if not os.path.exists(path):
        print(f"rebalance-sim timeline: {path}: no such file (expected a directory written by "
              "`rebalance-sim run --out DIR`)", file=sys.stderr)
        return 2
    if args.max_partitions < 1:
        print(f"rebalance-sim timeline: --max-partitions: {args.max_partitions} must be >= 1",
              file=sys.stderr)
        return 2
    out = args.out or os.path.join(args.run_dir, "timeline.png")
    try:
        check_output_file(out)
    except OutputError as e:
        print(f"rebalance-sim timeline: {e}", file=sys.stderr)
        return 2
    try:
        n = draw_timeline(args.run_dir, out, max_partitions=args.max_partitions)
    except (OSError, ValueError) as e:
        print(f"rebalance-sim timeline: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out} ({n} partitions)")
    return 0


def draw_timeline(run_dir: str, out: str, max_partitions: int = 200) -> int:
    """Draw partition ownership (one row per partition, one colour per member), unassigned gaps
    (red) and double processing (black outline) from ``run_dir``; returns the partitions drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pyarrow.parquet as pq
    from matplotlib.patches import Patch

    rows = pq.read_table(os.path.join(run_dir, "intervals.parquet")).to_pylist()
    parts = sorted({(r["topic"], r["partition"]) for r in rows if r["partition"] is not None})
    if not parts:
        raise ValueError(f"{run_dir}: no partition intervals to draw")
    parts = parts[:max_partitions]
    index = {tp: i for i, tp in enumerate(parts)}
    members = sorted({r["member"] for r in rows if r["kind"] == "owned"})
    cmap = plt.get_cmap("tab20")
    palette = [cmap(i) for i in range(20) if i not in (6, 7)]  # red is kept for gaps
    colour = {m: palette[i % len(palette)] for i, m in enumerate(members)}
    t_end = max(r["end"] for r in rows)
    fig, ax = plt.subplots(figsize=(14, max(3.0, min(40.0, 0.18 * len(parts) + 1.5))))
    for r in rows:
        tp = (r["topic"], r["partition"])
        if tp not in index:
            continue
        y = index[tp]
        width = r["end"] - r["start"]
        if r["kind"] == "owned":
            ax.broken_barh([(r["start"], width)], (y - 0.4, 0.8), facecolors=colour[r["member"]])
        elif r["kind"] == "unassigned":
            ax.broken_barh([(r["start"], width)], (y - 0.4, 0.8), facecolors="red", alpha=0.6)
        elif r["kind"] == "double_processing":
            ax.broken_barh([(r["start"], width)], (y - 0.45, 0.9), facecolors="none", edgecolors="black",
                           linewidth=1.5)
    for r in rows:
        if r["kind"] == "rebalance":
            ax.axvspan(r["start"], r["end"], color="grey", alpha=0.12, linewidth=0)
    ax.set_yticks(range(len(parts)))
    ax.set_yticklabels([f"{t}-{p}" for t, p in parts], fontsize=6 if len(parts) > 40 else 8)
    ax.set_xlim(0, t_end)
    ax.set_ylim(-1, len(parts))
    ax.invert_yaxis()
    ax.set_xlabel("simulated time (s)")
    ax.set_title(f"partition ownership: {os.path.basename(os.path.abspath(run_dir))}")
    handles = [Patch(color=colour[m], label=m) for m in members[:50]]
    handles += [Patch(color="red", alpha=0.6, label="unassigned"),
                Patch(facecolor="none", edgecolor="black", label="double processing"),
                Patch(color="grey", alpha=0.2, label="rebalance")]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7,
              ncol=1 if len(handles) <= 26 else 2)
    fig.tight_layout()
    import io

    from .atomic import atomic_write_bytes

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(out, buf.getvalue())
    return len(parts)


def register(subparsers) -> None:
    """Add ``run`` and ``timeline`` to the CLI's subparsers."""
    names = ", ".join(BUILTINS)
    p = subparsers.add_parser(
        "run", help="run one scenario and print its rebalance episodes and metrics",
        description=f"Run a built-in scenario ({names}) or a TOML scenario file.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  rebalance-sim run scale-out --set members=12 --set assignor=range\n"
               "  rebalance-sim run crash --set consumer.session_timeout_ms=10000 --json\n"
               "  rebalance-sim run my-scenario.toml --seed 3 --out out/run1\n"
               "  rebalance-sim run crash --set members=2000 --max-wall 60\n\n"
               "exit status: 0 ok, 1 invariant violations, 2 bad input, 3 partial (a bound was hit), "
               "4 internal error, 130 interrupted by Ctrl-C (partial result kept)")
    p.add_argument("scenario", help="built-in name or path to a .toml file")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a parameter (repeatable), e.g. members=12 or consumer.static=true")
    p.add_argument("--seed", type=int, default=0, help="random seed, >= 0 (default 0)")
    p.add_argument("--out", metavar="DIR", help="write events/intervals/runs Parquet files here")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--max-wall", type=float, metavar="SECONDS",
                   help="stop after this much wall time; results are kept and marked partial (exit 3)")
    p.add_argument("--max-events", type=int, metavar="N",
                   help="stop after N simulation inputs (messages, timers); results marked partial (exit 3)")
    add_kernel_option(p)
    p.set_defaults(func=cmd_run)

    t = subparsers.add_parser(
        "timeline", help="draw partition ownership over time from a run directory",
        description="Draw which member owned each partition over time (one row per partition, one "
        "colour per member), with unassigned gaps in red, double processing outlined and "
        "rebalances shaded, from a directory written by `rebalance-sim run --out DIR`.")
    t.add_argument("run_dir", metavar="RUN_DIR", help="a directory written by `run --out`")
    t.add_argument("--out", metavar="PNG", help="output file (default RUN_DIR/timeline.png)")
    t.add_argument("--max-partitions", type=int, default=200, help="draw at most this many partitions, >= 1 (default 200)")
    t.set_defaults(func=cmd_timeline)
