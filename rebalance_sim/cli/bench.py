"""The ``bench`` subcommand: benchmarks that print numbers.

``rebalance-sim bench assignors``  times every assignor (``rebalance_sim.lab.bench.assignors``)
``rebalance-sim bench sim``        the simulator's speed and memory (``rebalance_sim.lab.bench.sim``)
"""

from __future__ import annotations

import argparse
import sys

from ..lab.bench import assignors, sim


def register(subparsers) -> None:
    bench = subparsers.add_parser(
        "bench",
        help="benchmarks that print numbers (assignors, simulator)",
        description="Benchmarks that print numbers: `bench assignors` times every "
        "assignor, `bench sim` measures the simulator's speed and memory.",
    )
    targets = bench.add_subparsers(dest="target", metavar="TARGET")
    _add_assignors(targets)
    _add_sim(targets)
    bench.set_defaults(func=lambda args: _usage(bench))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _add_assignors(targets) -> None:
    p = targets.add_parser(
        "assignors",
        help="time every assignor (client and KIP-848 server side)",
        description=assignors.__doc__,
    )
    p.add_argument(
        "--assignor",
        action="append",
        help="only this assignor (repeatable); server-side ones as server:uniform, server:range",
    )
    p.add_argument("--quick", action="store_true", help="small cases only (seconds)")
    p.add_argument(
        "--targets",
        action="store_true",
        help="only the rows with a Java reference figure (java_ms): the speed targets",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="timed runs per measurement, at least (median; fast cases run until 0.5 s is timed)",
    )
    p.add_argument("--no-memory", action="store_true", help="skip the tracemalloc run")
    p.add_argument("--json", action="store_true", help="print JSON rows instead of the table")
    p.add_argument("--out", default=None, help="also write the table (markdown) to this file")
    p.set_defaults(func=assignors.run)


def _add_sim(targets) -> None:
    p = targets.add_parser(
        "sim",
        help="simulator speed and memory on large groups",
        description="Measure the simulator on large groups (up to 10,000 members x 100,000 "
        "partitions): wall time, simulated messages per second and peak memory (RSS), under both "
        "kernels (the default first, whose time is judged against the targets; the other with its "
        "time as a ratio of the default's). Each case runs in its own process, so its peak memory "
        "is its own. With --repeat, wall and CPU time are medians over fresh processes, the "
        "kernels interleaved.",
    )
    p.add_argument("--quick", action="store_true", help="a smaller set of cases (seconds)")
    p.add_argument("--json", action="store_true", help="print JSON rows")
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run each case N times, each in a fresh process; report the median wall and "
        "CPU time and their range (this machine's run-to-run noise)",
    )
    p.add_argument(
        "--only",
        action="append",
        metavar="TEXT",
        help="only the cases whose label contains TEXT (case-insensitive; repeatable)",
    )
    p.add_argument(
        "--kernel", metavar="tasks|inline", help="measure only this kernel (default: both)"
    )
    p.add_argument(
        "--profile",
        metavar="DIR",
        help="run each chosen case once under cProfile (the default kernel, or --kernel) "
        "and write DIR/<case>.prof and DIR/<case>.txt (top functions) instead of timing",
    )
    p.set_defaults(func=sim.cmd_bench_sim)
