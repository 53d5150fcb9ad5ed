"""``rebalance-sim soak``: deterministic simulation testing, in the manner of FoundationDB's
simulator and TigerBeetle's VOPR.

``rebalance-sim soak --schedules N --seed S`` draws N random scenarios with fault schedules
(``sim.testing.schedules``: crashes, pauses, partitions, drops, delays, joins and leaves, leader
crashes mid-rebalance; every assignor, eager and cooperative, static and dynamic members), runs
each one, and checks it: the simulator's invariants (checked inside every run), liveness (the
group settles once the faults are over, within the scenario's time limit) and that every
subscribed partition ends with exactly one owner. It prints ``N schedules, K violations``.

Schedule ``i`` of seed ``S`` depends on nothing else (its own ``random.Random``), so each failure
is written as a scenario file and printed with the one command that replays it::

    FAIL schedule 4711: settled_at_end is false (the group never settled)
      replay: rebalance-sim run out/soak/soak-0-4711.toml --seed 28114

``--spark`` fans the schedules out as Spark tasks (``--master`` as for sweeps); the answer is the
same either way.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from sim.testing.soak import MAX_FAULTS, check, schedule

from ..lab.engine.soak import write_replay


def _report_failure(out: Path, args, index: int, found: list[str]) -> None:
    """Print a failing schedule with its replay command as soon as it is known."""
    path = write_replay(out, args.seed, index, args.max_faults)
    _, sim_seed = schedule(args.seed, index, args.max_faults)
    print(
        f"FAIL schedule {index}: {found[0]}"
        + (f" (and {len(found) - 1} more)" if len(found) > 1 else ""),
        flush=True,
    )
    print(f"  replay: rebalance-sim run {path} --seed {sim_seed}", flush=True)


def cmd_soak(args) -> int:
    from ..lab.outputs import OutputError, check_output_dir
    from .common import need_lab
    from .options import kernel_error

    for flag, value, low in (
        ("--schedules", args.schedules, 1),
        ("--seed", args.seed, 0),
        ("--first", args.first, 0),
        ("--max-faults", args.max_faults, 0),
    ):
        if value < low:
            print(f"rebalance-sim soak: {flag}: {value} must be >= {low}", file=sys.stderr)
            return 2
    if args.master is not None and not args.spark:
        print("rebalance-sim soak: --master: applies only with --spark", file=sys.stderr)
        return 2
    if args.spark and (rc := need_lab("soak --spark")) is not None:
        return rc
    if args.master is not None:
        from ..lab.engine.spark import SparkUnavailable, check_master

        try:
            check_master(args.master)
        except SparkUnavailable as e:
            print(f"rebalance-sim soak: {e}", file=sys.stderr)
            return 2
    if kernel_error("soak", args) is not None:
        return 2
    try:
        out = check_output_dir(args.out)
    except OutputError as e:
        print(f"rebalance-sim soak: {e}", file=sys.stderr)
        return 2
    indices = (
        [args.only]
        if args.only is not None
        else list(range(args.first, args.first + args.schedules))
    )
    total = len(indices)
    t0 = time.monotonic()
    failures: dict[int, list[str]] = {}
    done = 0
    interrupted = False
    if args.spark:
        from ..lab.engine.soak import run_on_spark
        from ..lab.engine.spark import SparkUnavailable

        print(
            f"soak: {total} schedules (seed {args.seed}) as Spark tasks "
            f"({args.master or 'local[*]'}) ...",
            file=sys.stderr,
            flush=True,
        )
        try:
            failures = run_on_spark(args.master, args.seed, args.max_faults, args.kernel, indices)
        except SparkUnavailable as e:
            print(f"rebalance-sim soak: {e}", file=sys.stderr)
            return 2
        done = total
    else:
        last = t0
        try:
            for index in indices:
                _sim_seed, found = check(args.seed, index, args.max_faults, args.kernel)
                if found:
                    failures[index] = found
                    _report_failure(out, args, index, found)
                done += 1
                now = time.monotonic()
                if not args.quiet and (now - last > 10.0 or done == total) and total > 1:
                    last = now
                    left = (now - t0) / done * (total - done)
                    print(
                        f"soak: {done}/{total} schedules, {len(failures)} violations "
                        f"({now - t0:.0f} s, ~{left:.0f} s left)",
                        file=sys.stderr,
                        flush=True,
                    )
        except KeyboardInterrupt:
            interrupted = True
    if args.spark:
        for index in sorted(failures):
            _report_failure(out, args, index, failures[index])
    print(
        f"{done} schedules, {len(failures)} violations (seed {args.seed}, "
        f"{time.monotonic() - t0:.0f} s)"
    )
    if interrupted:
        print(
            f"rebalance-sim soak: interrupted after {done} of {total} schedules; "
            "the figures above cover those",
            file=sys.stderr,
        )
        return 130
    return 1 if failures else 0


def register(subparsers) -> None:
    from .options import add_kernel_option

    p = subparsers.add_parser(
        "soak",
        help="run many random fault schedules and check every invariant and liveness",
        description=__doc__.split("\n\n")[1].replace("``", "`"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  rebalance-sim soak --schedules 200 --seed 1\n"
        "  rebalance-sim soak --schedules 10000 --seed 7 --spark\n"
        "  rebalance-sim soak --seed 7 --only 4711      # one schedule again\n\n"
        "exit status: 0 no violations, 1 violations (each with its replay command), "
        "2 bad input, 130 interrupted",
    )
    p.add_argument("--schedules", type=int, default=200, help="how many schedules (default 200)")
    p.add_argument("--seed", type=int, default=0, help="soak seed, >= 0 (default 0)")
    p.add_argument(
        "--first",
        type=int,
        default=0,
        metavar="INDEX",
        help="start at schedule INDEX (default 0): split a long soak across machines",
    )
    p.add_argument("--only", type=int, metavar="INDEX", help="run only schedule INDEX of this seed")
    p.add_argument(
        "--max-faults",
        type=int,
        default=MAX_FAULTS,
        help=f"at most this many faults per schedule (default {MAX_FAULTS})",
    )
    p.add_argument(
        "--out",
        default="out/soak",
        help="where failing schedules are written as scenario files (default out/soak)",
    )
    p.add_argument("--spark", action="store_true", help="run the schedules as Spark tasks")
    p.add_argument("--master", help="Spark master URL with --spark (default local[*])")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    add_kernel_option(p)
    p.set_defaults(func=cmd_soak)
