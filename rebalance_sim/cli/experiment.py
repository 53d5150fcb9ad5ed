"""The ``experiment`` subcommand: ``rebalance-sim experiment NAME`` runs a packaged study (a
declaration under ``rebalance_sim/lab/catalog/``, listed by ``rebalance-sim list``) through the generic
pipeline (``rebalance_sim.lab.engine.pipeline``); it ends in an HTML report.

Raw runs go to a work directory (default ``out/<experiment>/``, resumable: a rerun skips the runs
already complete); the report, PNGs and CSVs go to ``out/<experiment>/report/``, or with
``--update-reference`` to the committed reference results ``results/<experiment>/``.
"""

from __future__ import annotations

from pathlib import Path

from ..lab.engine import regression as ci_regression
from ..lab.engine.grid import GridError
from ..lab.outputs import OutputError, check_output_dir
from .common import (
    SigintSeen,
    check_out,
    err,
    failed,
    interrupted,
    lab_missing,
    need_lab,
    spark_err,
)
from .options import add_kernel_option, add_spark_options, check_spark_options, kernel_error


def _experiments() -> dict:
    """The catalog, or none without the lab (its declarations name their report recipes, which
    need the lab's table library); ``cmd_experiment`` then says how to install it."""
    if lab_missing() is not None:
        return {}
    from ..lab.catalog import EXPERIMENTS

    return EXPERIMENTS


def register(subparsers) -> None:
    experiments = _experiments()
    p = subparsers.add_parser(
        "experiment",
        help="run a packaged experiment and write its report",
        description="Run a packaged experiment: "
        + "; ".join(f"{e.name}: {e.description}" for e in experiments.values()),
    )
    p.add_argument("name", choices=sorted(experiments) or None, help="which experiment")
    p.add_argument(
        "--scale",
        choices=("default", "large", "smoke"),
        default="default",
        help="large adds bigger groups (takes much longer); smoke: tiny groups, 2 seeds",
    )
    p.add_argument("--out", help="report directory (default out/NAME/report)")
    p.add_argument(
        "--update-reference",
        action="store_true",
        help="write the report to the committed reference results (results/NAME; "
        "results/ci for ci-regression) instead of out/",
    )
    p.add_argument(
        "--work", help="directory or URI of the raw runs (default out/NAME; reruns resume)"
    )
    add_spark_options(p)
    add_kernel_option(p)
    ci_regression.add_arguments(p, with_out=False)
    p.set_defaults(func=cmd_experiment)


# Where --update-reference writes each experiment's committed reference results.
REFERENCE_DIRS = {"ci-regression": Path("results/ci")}


def cmd_experiment(args) -> int:
    if (rc := need_lab("experiment")) is not None:
        return rc
    from ..lab.catalog import EXPERIMENTS
    from ..lab.engine import lock
    from ..lab.engine.pipeline import Options, run_experiment
    from ..lab.engine.spark import SparkUnavailable, interrupt_all, is_spark_error, spark_error_line
    from ..lab.engine.sweep import AggregateIncomplete, SweepInterrupted

    # A user's run writes under out/ (ignored by git); the committed reference results under
    # results/ change only when asked (--update-reference), never as a side effect of a run.
    if getattr(args, "out", None) is None:
        args.out = (
            str(REFERENCE_DIRS.get(args.name, Path("results") / args.name))
            if getattr(args, "update_reference", False)
            else f"out/{args.name}/report"
        )
    bad = (
        check_spark_options("experiment", args)
        or _check_applicable(args)
        or kernel_error("experiment", args)
    )
    if bad is not None:
        return bad
    work = getattr(args, "work", None) or f"out/{args.name}"
    try:
        check_output_dir(args.out)
        if args.name != "ci-regression":
            check_out("--work", work) if getattr(args, "work", None) else check_output_dir(
                work, flag="work directory"
            )
            lock.hold(work, "--work" if getattr(args, "work", None) else "work directory")
    except (OutputError, lock.LockHeld) as e:
        return err("experiment", str(e))
    exp = EXPERIMENTS[args.name]
    opts = Options(
        name=args.name,
        scale=getattr(args, "scale", "default"),
        out=Path(args.out),
        work=work,
        master=getattr(args, "master", None),
        conf=tuple(getattr(args, "conf", None) or ()),
        ship=getattr(args, "ship", True),
        timeout_s=getattr(args, "spark_timeout", None),
        command=command_line(args),
        extra=args,
    )
    with SigintSeen(active=exp.run is None) as sigint:  # (ci-regression simulates here, in trio)
        try:
            return run_experiment(exp, opts)
        except (GridError, SparkUnavailable, OutputError, lock.LockHeld) as e:
            return spark_err("experiment", e)
        except SweepInterrupted as e:
            return interrupted("experiment", str(e))
        except AggregateIncomplete as e:
            return failed("experiment", str(e))
        except KeyboardInterrupt:
            interrupt_all()
            return interrupted(
                "experiment",
                f"interrupted; the runs complete so far are kept in "
                f"{opts.work} (rerun the same command to resume)",
            )
        except Exception as e:
            if not is_spark_error(e):
                raise
            if sigint.seen:
                interrupt_all()
                return interrupted(
                    "experiment",
                    f"interrupted; the runs complete so far are kept in "
                    f"{opts.work} (rerun the same command to resume)",
                )
            return failed("experiment", spark_error_line(e))
        finally:
            lock.release_all()


# Options that only ci-regression reads, and those only the Spark experiments read (with their
# parser defaults): given where they do not apply, they are an error rather than ignored.
CI_ONLY = {
    "baseline": None,
    "update_baseline": False,
    "tolerance": None,
    "abs_tolerance": None,
    "quiet": False,
    "kafka_version": None,
}
SPARK_ONLY: dict[str, object] = {
    "scale": "default",
    "work": None,
    "master": None,
    "conf": [],
    "ship": True,
    "spark_timeout": None,
}


def _check_applicable(args) -> int | None:
    def given(name, default):
        value = getattr(args, name, default)
        return value is not None and value != default

    flag = {"ship": "--no-ship"}
    if args.name == "ci-regression":
        wrong = [n for n, d in SPARK_ONLY.items() if given(n, d)]
        where = "ci-regression runs without Spark, on this machine"
    else:
        wrong = [n for n, d in CI_ONLY.items() if given(n, d)]
        where = "it applies only to ci-regression"
    if wrong:
        name = wrong[0]
        return err(
            "experiment",
            f"{flag.get(name, '--' + name.replace('_', '-'))}: not an option of "
            f"{args.name} ({where})",
        )
    return None


def command_line(args) -> str:
    parts = ["rebalance-sim experiment", args.name]
    if getattr(args, "scale", "default") != "default":
        parts.append(f"--scale {args.scale}")
    if getattr(args, "master", None):
        parts.append(f"--master {args.master}")
    if getattr(args, "update_reference", False):
        parts.append("--update-reference")
    if getattr(args, "kernel", None):
        parts.append(f"--kernel {args.kernel}")
    return " ".join(parts)
