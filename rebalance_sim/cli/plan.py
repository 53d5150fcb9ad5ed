"""The ``plan`` subcommand: ``rebalance-sim plan GROUP.toml [--out DIR]``, a capacity plan for
the user's own group (``rebalance_sim.lab.plan``): a deploy, a crash, a slow member and a scale-out,
today and under each alternative that applies, at today's size and as the group grows, on the
sweep engine; the answer on the terminal and in ``DIR/report.html``.

``plan --example`` prints a commented group file; ``plan --describe FILE`` starts from what
``kafka-consumer-groups.sh --describe`` printed instead of a group file.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path

from .common import SigintSeen, err, failed, interrupted, need_lab, spark_err
from .options import add_kernel_option, add_spark_options, check_spark_options, kernel_error

DESCRIBE_ONLY = ("rate", "capacity", "assign_cost_ms", "revoke_cost_ms", "group")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "plan",
        help="a capacity plan for your own group: faults, alternatives, growth",
        description="Put the group of GROUP (a TOML file; --example prints a commented one) "
        "through a deploy, a crash, a slow member and a scale-out, today and under each "
        "alternative that applies (cooperative-sticky, the consumer protocol, static membership, "
        "session timeouts), at today's size and as it grows, on Spark; answer with medians and "
        "p10-p90 bands, the alternatives ranked, and the limits crossed. Rerunning resumes.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  rebalance-sim plan --example > group.toml\n"
        "  rebalance-sim plan group.toml --dry-run          # what it runs, and how long\n"
        "  rebalance-sim plan group.toml --out out/my-plan\n"
        "  kafka-consumer-groups.sh --describe --group G --members --verbose > members.txt\n"
        "  rebalance-sim plan --describe members.txt --rate 50 --capacity 800 --quick\n\n"
        "exit status: 0 ok, 1 some run failed, 2 bad input, 130 interrupted (complete runs kept)",
    )
    p.add_argument("group_file", nargs="?", metavar="GROUP", help="the group file (TOML)")
    p.add_argument("--example", action="store_true", help="print a commented group file and exit")
    p.add_argument(
        "--describe",
        action="append",
        metavar="FILE",
        help="instead of GROUP: the text kafka-consumer-groups.sh --describe printed (the "
        "--members --verbose view; the offsets and --state views too, if you have them; "
        "repeatable, or all in one file)",
    )
    p.add_argument(
        "--group", metavar="NAME", help="with --describe: which group, if it shows several"
    )
    p.add_argument(
        "--rate",
        type=float,
        metavar="RECORDS_PER_S",
        help="with --describe: records/s produced per partition (default 100)",
    )
    p.add_argument(
        "--capacity",
        type=float,
        metavar="RECORDS_PER_S",
        help="with --describe: records/s one member processes (default 10,000)",
    )
    p.add_argument(
        "--assign-cost-ms",
        dest="assign_cost_ms",
        type=float,
        metavar="MS",
        help="with --describe: onPartitionsAssigned time per partition (default 0)",
    )
    p.add_argument(
        "--revoke-cost-ms",
        dest="revoke_cost_ms",
        type=float,
        metavar="MS",
        help="with --describe: onPartitionsRevoked time per partition (default 0)",
    )
    p.add_argument(
        "--broker-version",
        dest="broker_version",
        metavar="4.3|4.0",
        help="with --describe: the brokers' Kafka version (default 4.3)",
    )
    p.add_argument("--out", metavar="DIR", help="output directory (default out/plan-NAME)")
    p.add_argument(
        "--work",
        metavar="DIR_OR_URI",
        help="where the runs' tables go (default OUT/work; on a cluster, a URI every executor "
        "reaches)",
    )
    speed = p.add_mutually_exclusive_group()
    speed.add_argument(
        "--quick",
        action="store_true",
        help="a first look: deploy and crash, 2-3 seeds (1-2 minutes at 1,000 members on 2 cores)",
    )
    speed.add_argument(
        "--thorough",
        action="store_true",
        help="5-10 seeds and every growth size, however long it takes",
    )
    p.add_argument(
        "--seeds",
        type=int,
        metavar="N",
        help="seeds per point at today's size, whatever the time budget",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="say what the plan would run and how long it would take, and stop",
    )
    add_spark_options(p)
    add_kernel_option(p)
    p.set_defaults(func=cmd_plan)


def _load(args):
    """The group to plan, from GROUP or --describe; raises PlanError."""
    from ..lab.plan.describe import group_of, read_describe
    from ..lab.plan.group import PlanError, group_from_dict, load_group

    if args.describe:
        if args.group_file:
            raise PlanError(f"{args.group_file}: give a group file or --describe, not both")
        given = {
            k: getattr(args, k, None)
            for k in ("rate", "capacity", "assign_cost_ms", "revoke_cost_ms", "broker_version")
        }
        for flag, value in given.items():
            if value is not None and flag != "broker_version" and not value >= 0:
                raise PlanError(f"--{flag.replace('_', '-')}: {value:g} must be >= 0")
        data, assumed, facts = group_of(read_describe(args.describe), args.group, given)
        return group_from_dict(
            data,
            f"--describe {', '.join(args.describe)}",
            assumed=assumed,
            facts=facts,
        )
    for key in (*DESCRIBE_ONLY, "broker_version"):
        if getattr(args, key, None) is not None:
            flag = "--" + key.replace("_", "-")
            raise PlanError(f"{flag}: applies only with --describe (a group file says it)")
    if not args.group_file:
        raise PlanError("GROUP: give a group file (plan --example prints one) or --describe FILE")
    return load_group(args.group_file)


def command_line(args) -> str:
    parts = ["rebalance-sim", "plan"]
    if args.group_file:
        parts.append(args.group_file)
    for f in args.describe or ():
        parts += ["--describe", f]
    for key in ("group", "rate", "capacity", "assign_cost_ms", "revoke_cost_ms", "broker_version"):
        value = getattr(args, key, None)
        if value is not None:
            parts += [
                "--" + key.replace("_", "-"),
                f"{value:g}" if isinstance(value, float) else str(value),
            ]
    for flag in ("quick", "thorough"):
        if getattr(args, flag, False):
            parts.append(f"--{flag}")
    if args.seeds is not None:
        parts += ["--seeds", str(args.seeds)]
    if args.out:
        parts += ["--out", args.out]
    if getattr(args, "master", None):
        parts += ["--master", args.master]
    return shlex.join(parts)


def cmd_plan(args) -> int:
    if (rc := need_lab("plan")) is not None:
        return rc
    from ..lab.outputs import OutputError, check_output_dir
    from ..lab.plan.example import EXAMPLE
    from ..lab.plan.execute import Options, dry_run, run_plan
    from ..lab.plan.group import PlanError
    from ..lab.plan.runs import MODES

    if args.example:
        if args.group_file or args.describe:
            return err("plan", "--example: prints the example and takes no group")
        sys.stdout.write(EXAMPLE)
        return 0
    bad = check_spark_options("plan", args) or kernel_error("plan", args)
    if bad is not None:
        return bad
    if args.seeds is not None and args.seeds < 1:
        return err("plan", f"--seeds {args.seeds}: must be at least 1")
    try:
        group = _load(args)
    except PlanError as e:
        return err("plan", str(e))
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", group.name).strip("-") or "group"
    out = Path(args.out or f"out/plan-{slug}")
    work = args.work or str(out / "work")
    mode = MODES["quick" if args.quick else "thorough" if args.thorough else "default"]
    opts = Options(
        out=out,
        work=work,
        mode=mode,
        master=getattr(args, "master", None),
        conf=tuple(getattr(args, "conf", None) or ()),
        ship=getattr(args, "ship", True),
        timeout_s=getattr(args, "spark_timeout", None),
        kernel=getattr(args, "kernel", None),
        seeds=args.seeds,
        command=command_line(args),
        dry_run=args.dry_run,
    )
    if args.dry_run:
        return dry_run(group, opts)
    from ..lab.engine import lock
    from ..lab.engine.grid import GridError
    from ..lab.engine.spark import SparkUnavailable, interrupt_all, is_spark_error, spark_error_line
    from ..lab.engine.sweep import AggregateIncomplete, SweepInterrupted
    from .common import check_out

    try:
        check_output_dir(out)
        check_out("--work", work)
        lock.hold(work, "--work")  # a local work directory: before Spark starts
    except (OutputError, lock.LockHeld) as e:
        return err("plan", str(e))

    def stopped() -> int:
        interrupt_all()
        return interrupted(
            "plan",
            f"interrupted; the runs complete so far are kept in {work} "
            "(rerun the same command to resume)",
        )

    with SigintSeen() as sigint:
        try:
            return run_plan(group, opts)
        except (SparkUnavailable, OutputError, lock.LockHeld) as e:
            return spark_err("plan", e)
        except SweepInterrupted as e:
            return interrupted("plan", str(e))
        except (AggregateIncomplete, GridError) as e:  # (a scenario the group check let through)
            return failed("plan", str(e))
        except PlanError as e:
            return err("plan", str(e))
        except KeyboardInterrupt:
            return stopped()
        except Exception as e:
            if not is_spark_error(e):
                raise
            if sigint.seen:
                return stopped()
            return failed("plan", spark_error_line(e))
        finally:
            lock.release_all()
