"""The ``list``, ``sweep`` and ``experiment`` subcommands.

``rebalance-sim sweep GRID.toml --out DIR``  run a grid on Spark, then aggregate it (see sweep.py)
``rebalance-sim experiment NAME``            a packaged study that ends in an HTML report:
    eager-vs-cooperative   range / roundrobin / sticky / cooperative-sticky / the consumer protocol,
                           static and dynamic members, scale-out / crash / rolling deploy,
                           10..1000 members, 20 seeds (6 at 1,000 members)
    assignor-scaling       leader assignment time and its share of the rebalance, per assignor,
                           100..10,000 members and up to 1,000,000 partitions

Raw runs go to a work directory (default ``out/<experiment>/``, resumable: a rerun skips the runs
already complete); the report, PNGs and CSVs go to ``out/<experiment>/report/``, or with
``--update-reference`` to the committed reference results ``results/<experiment>/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..catalog import EXPERIMENTS
from ..catalog.eager_vs_cooperative import to_toml  # noqa: F401  (list_cmd's ``show`` uses it)
from ..engine import regression as ci_regression
from ..engine.sweep import GridError, column_name, expand, load_grid, report_failures, run_sweep
from ..outputs import OutputError, check_output_dir
from .options import add_kernel_option, kernel_error


def register(subparsers) -> None:
    p = subparsers.add_parser("sweep", help="run a grid of scenarios x assignors x seeds on Spark",
                              description="Run every point of GRID (TOML; format in experiments/sweep.py) "
                              "as Spark tasks, then aggregate. Rerunning skips complete runs.")
    p.add_argument("grid", help="grid TOML file")
    p.add_argument("--out", required=True, help="output directory or URI (file://, s3a://, hdfs://, ...): "
                   "the runs' tables and aggregate/")
    p.add_argument("--batch-runs", type=int, default=None, metavar="N",
                   help="runs per committed batch (default: about 1/6 of the sweep's cost, at least 2 "
                   "runs per core); each batch is committed when its runs are done, so a kill loses "
                   "at most the batches in flight (two)")
    _spark_options(p)
    add_kernel_option(p)
    p.set_defaults(func=cmd_sweep)

    p = subparsers.add_parser("experiment", help="run a packaged experiment and write its report",
                              description="Run a packaged experiment: " + "; ".join(
                                  f"{e.name}: {e.description}" for e in EXPERIMENTS.values()))
    p.add_argument("name", choices=sorted(EXPERIMENTS), help="which experiment")
    p.add_argument("--scale", choices=("default", "large", "smoke"), default="default",
                   help="large adds bigger groups (takes much longer); smoke: tiny groups, 2 seeds")
    p.add_argument("--out", help="report directory (default out/NAME/report)")
    p.add_argument("--update-reference", action="store_true",
                   help="write the report to the committed reference results (results/NAME; "
                   "results/ci for ci-regression) instead of out/")
    p.add_argument("--work", help="directory or URI of the raw runs (default out/NAME; reruns resume)")
    _spark_options(p)
    add_kernel_option(p)
    ci_regression.add_arguments(p, with_out=False)
    p.set_defaults(func=cmd_experiment)


# ---------------------------------------------------------------------------------------------
# ---------------------------------------------------------------------------------------------
# sweep


def _err(cmd: str, message: str) -> int:
    print(f"rebalance-sim {cmd}: {message}", file=sys.stderr)
    return 2


def _failed(cmd: str, message: str) -> int:
    """A job that failed while running (not bad input): one line, exit 1."""
    print(f"rebalance-sim {cmd}: {message}", file=sys.stderr)
    return 1


def _spark_err(cmd: str, e: Exception) -> int:
    from ..engine.spark import SparkHung, exit_now

    code = _err(cmd, str(e))
    if isinstance(e, SparkHung):
        exit_now(code)
    return code


def _spark_options(p) -> None:
    """The options every command that starts Spark takes."""
    p.add_argument("--master", help="Spark master URL (default local[*]; spark://HOST:7077, yarn, "
                   "k8s://..., or sc://HOST:15002 for Spark Connect)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting, as in spark-submit (repeatable)")
    p.add_argument("--no-ship", dest="ship", action="store_false",
                   help="do not ship this project and its dependencies to a non-local master "
                   "(its workers have them installed)")
    p.add_argument("--spark-timeout", type=float, default=None, metavar="SECONDS",
                   help="how long a master or Connect server may take to answer (default 60)")


def _check_spark_options(cmd: str, args) -> int | None:
    from ..engine.spark import SparkUnavailable, check_master, parse_conf

    try:
        parse_conf(getattr(args, "conf", None) or [])
        check_master(getattr(args, "master", None))
    except (ValueError, SparkUnavailable) as e:
        return _err(cmd, str(e))
    t = getattr(args, "spark_timeout", None)
    if t is not None and not t > 0:
        return _err(cmd, f"--spark-timeout {t:g}: must be a positive number of seconds")
    return None


def _check_out(flag: str, where: str):
    """A local output directory is created and probed now; a URI is checked by Spark itself
    (``experiments.engine.store``) before any run starts."""
    from ..engine.store import local_path

    local = local_path(where)
    if local is None:
        return where
    check_output_dir(local, flag=flag)
    return where


def _interrupted(cmd: str, message: str) -> int:
    print(f"rebalance-sim {cmd}: {message}", file=sys.stderr, flush=True)
    return 130


class _SigintSeen:
    """Whether a Ctrl-C came while the block ran. A terminal's Ctrl-C reaches Spark's JVM too,
    which may fail the call under way (a broken pipe) before Python raises KeyboardInterrupt:
    that failure is the interrupt, not a Spark error. Python's own handler is kept in effect
    (it raises KeyboardInterrupt); only a command that does not simulate in this process uses
    this (trio protects its own state only under Python's handler)."""

    def __init__(self, active: bool = True):
        self.seen = False
        self.active = active

    def __enter__(self) -> _SigintSeen:
        import signal
        import threading

        self.previous = None
        if (self.active and threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            def on_sigint(signum, frame):
                self.seen = True
                signal.default_int_handler(signum, frame)

            self.previous = signal.signal(signal.SIGINT, on_sigint)
        return self

    def __exit__(self, *exc) -> None:
        import signal

        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def cmd_sweep(args) -> int:
    from ..engine import lock
    from ..engine.spark import SparkUnavailable, is_spark_error, spark_error_line
    from ..engine.store import OutputError as StoreError
    from ..engine.sweep import AggregateIncomplete, SweepInterrupted, with_kernel

    bad = _check_spark_options("sweep", args) or kernel_error("sweep", args)
    if bad is not None:
        return bad
    if getattr(args, "batch_runs", None) is not None and args.batch_runs < 1:
        return _err("sweep", f"--batch-runs {args.batch_runs}: must be at least 1")
    try:
        grid = load_grid(args.grid)
        specs = with_kernel(expand(grid), getattr(args, "kernel", None))
    except GridError as e:
        return _err("sweep", str(e))
    try:
        out = _check_out("--out", args.out)
        lock.hold(out, "--out")  # a local output: before Spark starts
    except (OutputError, lock.LockHeld) as e:
        return _err("sweep", str(e))
    phase = ["starting Spark"]
    with _SigintSeen() as sigint:
        try:
            return _sweep(args, grid, specs, out, phase)
        except (SparkUnavailable, StoreError, lock.LockHeld) as e:
            return _spark_err("sweep", e)
        except SweepInterrupted as e:
            return _interrupted("sweep", str(e))
        except AggregateIncomplete as e:
            return _failed("sweep", str(e))
        except KeyboardInterrupt:
            return _sweep_interrupted(out, phase[0])
        except Exception as e:
            if not is_spark_error(e):
                raise
            if sigint.seen:
                return _sweep_interrupted(out, phase[0])
            return _failed("sweep", spark_error_line(e))
        finally:
            lock.release_all()


def _sweep_interrupted(out, phase: str) -> int:
    from ..engine.spark import interrupt_all

    interrupt_all()
    if phase == "aggregating":
        return _interrupted("sweep", f"interrupted while aggregating; every run is complete in {out} "
                            "(rerun the same command to aggregate)")
    return _interrupted("sweep", f"interrupted while {phase}; the runs complete so far are kept in {out} "
                        "(rerun the same command to resume)")


def _sweep(args, grid, specs, out, phase: list[str]) -> int:
    from ..atomic import atomic_write_bytes
    from ..engine import lock
    from ..engine.aggregate import aggregate
    from ..engine.spark import get_spark
    from ..engine.store import local_path
    from ..engine.sweep import check_aggregate

    if local_path(out) is not None:
        atomic_write_bytes(local_path(out) / "grid.toml", Path(args.grid).read_bytes())
    print(f"sweep {grid.name}: {len(specs)} runs ({len(grid.scenarios)} scenario(s) x "
          f"{len(grid.assignors or [None])} assignor(s) x {_points(grid)} point(s) x {len(grid.seeds)} seed(s))",
          file=sys.stderr)
    master = getattr(args, "master", None)
    spark = get_spark(master, conf=getattr(args, "conf", None) or (),
                      ship=getattr(args, "ship", True), timeout_s=getattr(args, "spark_timeout", None))
    lock.hold(out, "--out", spark)  # a Hadoop URI: once Spark can reach it
    phase[0] = "sweeping"
    status = run_sweep(specs, out, master=master, label=f"sweep {grid.name}",
                       batch_runs=getattr(args, "batch_runs", None))
    failed = report_failures(status)
    phase[0] = "aggregating"
    tables = aggregate(spark, out, run_ids=[s.run_id for s in specs], collect_windows=False)
    check_aggregate(specs, status, tables["runs"])
    points = tables["points"].to_pandas()
    cols = [c for c in ("scenario", "assignor", *map(column_name, grid.vary)) if c in points.columns]
    show = cols + ["seeds", "rebalance_time_total_s_median", "unassigned_partition_s_median",
                   "unassigned_max_s_max"]
    print(points[show].to_string(index=False))
    print(f"\naggregate tables: {str(out).rstrip('/')}/aggregate")
    return 1 if failed else 0


def _points(grid) -> int:
    n = 1
    for v in grid.vary.values():
        n *= len(v)
    return n


# ---------------------------------------------------------------------------------------------
# experiment


# Where --update-reference writes each experiment's committed reference results.
REFERENCE_DIRS = {"ci-regression": Path("results/ci")}


def cmd_experiment(args) -> int:
    from ..engine import lock
    from ..engine.pipeline import Options, run_experiment
    from ..engine.spark import SparkUnavailable, interrupt_all, is_spark_error, spark_error_line
    from ..engine.store import OutputError as StoreError
    from ..engine.sweep import AggregateIncomplete, SweepInterrupted

    # A user's run writes under out/ (ignored by git); the committed reference results under
    # results/ change only when asked (--update-reference), never as a side effect of a run.
    if getattr(args, "out", None) is None:
        args.out = (str(REFERENCE_DIRS.get(args.name, Path("results") / args.name))
                    if getattr(args, "update_reference", False) else f"out/{args.name}/report")
    bad = (_check_spark_options("experiment", args) or _check_applicable(args)
           or kernel_error("experiment", args))
    if bad is not None:
        return bad
    work = getattr(args, "work", None) or f"out/{args.name}"
    try:
        check_output_dir(args.out)
        if args.name != "ci-regression":
            _check_out("--work", work) if getattr(args, "work", None) else check_output_dir(
                work, flag="work directory")
            lock.hold(work, "--work" if getattr(args, "work", None) else "work directory")
    except (OutputError, lock.LockHeld) as e:
        return _err("experiment", str(e))
    exp = EXPERIMENTS[args.name]
    opts = Options(
        name=args.name, scale=getattr(args, "scale", "default"),
        out=Path(args.out),
        work=work,
        master=getattr(args, "master", None), conf=tuple(getattr(args, "conf", None) or ()),
        ship=getattr(args, "ship", True), timeout_s=getattr(args, "spark_timeout", None),
        command=_command_line(args), extra=args)
    with _SigintSeen(active=exp.run is None) as sigint:  # (ci-regression simulates here, in trio)
        try:
            return run_experiment(exp, opts)
        except (GridError, SparkUnavailable, StoreError, lock.LockHeld) as e:
            return _spark_err("experiment", e)
        except SweepInterrupted as e:
            return _interrupted("experiment", str(e))
        except AggregateIncomplete as e:
            return _failed("experiment", str(e))
        except KeyboardInterrupt:
            interrupt_all()
            return _interrupted("experiment", f"interrupted; the runs complete so far are kept in "
                                f"{opts.work} (rerun the same command to resume)")
        except Exception as e:
            if not is_spark_error(e):
                raise
            if sigint.seen:
                interrupt_all()
                return _interrupted("experiment", f"interrupted; the runs complete so far are kept in "
                                    f"{opts.work} (rerun the same command to resume)")
            return _failed("experiment", spark_error_line(e))
        finally:
            lock.release_all()


# Options that only ci-regression reads, and those only the Spark experiments read (with their
# parser defaults): given where they do not apply, they are an error rather than ignored.
CI_ONLY = {"baseline": None, "update_baseline": False, "tolerance": None, "abs_tolerance": None,
           "quiet": False}
SPARK_ONLY = {"scale": "default", "work": None, "master": None, "conf": [], "ship": True,
              "spark_timeout": None}


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
        return _err("experiment", f"{flag.get(name, '--' + name.replace('_', '-'))}: not an option of "
                    f"{args.name} ({where})")
    return None


def _command_line(args) -> str:
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
