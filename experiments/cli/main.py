"""The `rebalance-sim` command line: one subcommand per module, each registering its own parser."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

# Modules that add top-level subcommands, and those that add `bench` targets.
COMMAND_MODULES = ["experiments.cli.run", "experiments.cli.listing", "experiments.cli.experiment", "experiments.cli.soak",
                   "experiments.cli.assign"]
BENCH_MODULES = ["experiments.bench.assignors", "experiments.bench.sim"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rebalance-sim",
        description="Simulate Apache Kafka consumer-group rebalancing: assignors, protocol, experiments.",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    bench = sub.add_parser("bench", help="benchmarks that print numbers (assignors, simulator)",
                           description="Benchmarks that print numbers: `bench assignors` times every "
                           "assignor, `bench sim` measures the simulator's speed and memory.")
    bench_sub = bench.add_subparsers(dest="target", metavar="TARGET")
    for name in BENCH_MODULES:
        importlib.import_module(name).register(bench_sub)
    bench.set_defaults(func=lambda args: _usage(bench))
    return parser


def _version() -> str:
    from ..provenance import model_digest, version

    return f"rebalance-sim {version()} (model digest {model_digest()})"


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


_started_at: float | None = None


def started_at() -> float | None:
    """When ``main`` was entered (``time.monotonic()``), None outside it: where ``run
    --max-wall`` counts from."""
    return _started_at


def main(argv: list[str] | None = None) -> int:
    global _started_at
    _started_at = time.monotonic()
    try:
        rc = _main(argv)
    finally:
        _started_at = None
    spark = sys.modules.get("experiments.engine.spark")
    if argv is None and spark is not None and spark.threads_busy():  # (the process's own command)
        # A thread still in a Spark call would abort the interpreter's finalization (see
        # experiments.engine.spark.threads_busy): leave without it, output flushed.
        spark.exit_now(rc)
    return rc


def _main(argv: list[str] | None) -> int:
    try:
        parser = build_parser()  # imports every command module: Ctrl-C can land here too
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            return _usage(parser)
        rc = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return rc
    except KeyboardInterrupt:
        print("rebalance-sim: interrupted", file=sys.stderr)
        return 130
    except BaseExceptionGroup as group:  # trio wraps what escapes its tasks
        if group.subgroup(KeyboardInterrupt) is not None and group.split(KeyboardInterrupt)[1] is None:
            print("rebalance-sim: interrupted", file=sys.stderr)
            return 130
        if group.subgroup(BrokenPipeError) is not None and group.split(BrokenPipeError)[1] is None:
            return _closed_pipe()
        raise
    except BrokenPipeError:
        return _closed_pipe()


# 128 + SIGPIPE: what a shell reports for a Unix tool killed by writing to a closed pipe.
EXIT_CLOSED_PIPE = 141


def _closed_pipe() -> int:
    """The reader went away (``rebalance-sim list | head -1``): stop quietly, as Unix tools do.

    Python would otherwise print a traceback, then another complaint when it flushes stdout at
    exit; pointing stdout at /dev/null keeps that final flush silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return EXIT_CLOSED_PIPE


if __name__ == "__main__":
    sys.exit(main())
