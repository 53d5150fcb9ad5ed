"""The `rebalance-sim` command line: one subcommand per module, each registering its own parser."""

from __future__ import annotations

import argparse
import importlib
import sys

# Modules that add top-level subcommands, and those that add `bench` targets.
COMMAND_MODULES = ["experiments.run_cmd", "experiments.experiment_cmd", "experiments.assign_cmd"]
BENCH_MODULES = ["experiments.bench_assignors", "experiments.bench_sim"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rebalance-sim",
        description="Simulate Apache Kafka consumer-group rebalancing: assignors, protocol, experiments.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    bench = sub.add_parser("bench", help="benchmarks that print numbers (assignors, simulator)")
    bench_sub = bench.add_subparsers(dest="target", metavar="TARGET")
    for name in BENCH_MODULES:
        importlib.import_module(name).register(bench_sub)
    bench.set_defaults(func=lambda args: _usage(bench))
    return parser


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        return _usage(parser)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("rebalance-sim: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
