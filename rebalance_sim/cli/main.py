"""The `rebalance-sim` command line: one module per subcommand in this package, each
registering its own parser (``register``) and the function that runs it."""

from __future__ import annotations

import argparse
import os
import sys
import time

from . import assign, bench, experiment, listing, plan, run, show, soak, sweep, timeline

# The subcommands, in the order `rebalance-sim --help` lists them.
COMMANDS = (run, timeline, listing, show, sweep, experiment, plan, soak, assign, bench)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rebalance-sim",
        description="Simulate Apache Kafka consumer-group rebalancing: assignors, protocol, experiments.",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def _version() -> str:
    from sim import compiled

    from ..lab.provenance import model_digest, version

    return (
        f"rebalance-sim {version()} (model digest {model_digest()}; simulator {compiled.status()})"
    )


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    rc = _main(argv, time.monotonic())
    spark = sys.modules.get("rebalance_sim.lab.engine.spark")
    if argv is None and spark is not None and spark.threads_busy():  # (the process's own command)
        # A thread still in a Spark call would abort the interpreter's finalization (see
        # rebalance_sim.lab.engine.spark.threads_busy): leave without it, output flushed.
        spark.exit_now(rc)
    return rc


def _main(argv: list[str] | None, started_at: float) -> int:
    try:
        parser = build_parser()  # Ctrl-C can land here too
        args = parser.parse_args(argv)
        args.started_at = started_at  # where ``run --max-wall`` counts from
        if not getattr(args, "func", None):
            return _usage(parser)
        rc = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return rc
    except KeyboardInterrupt:
        print("rebalance-sim: interrupted", file=sys.stderr)
        return 130
    except BaseExceptionGroup as group:  # trio wraps what escapes its tasks
        if (
            group.subgroup(KeyboardInterrupt) is not None
            and group.split(KeyboardInterrupt)[1] is None
        ):
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
