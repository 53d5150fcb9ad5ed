"""The ``sweep`` subcommand: ``rebalance-sim sweep GRID.toml --out DIR`` runs a grid on Spark
(``rebalance_sim.lab.engine.grid`` has the format), then aggregates it."""

from __future__ import annotations

import sys
from pathlib import Path

from ..lab.engine.grid import GridError, column_name, expand, load_grid
from ..lab.engine.sweep import report_failures, run_sweep
from ..lab.outputs import OutputError
from .common import SigintSeen, check_out, err, failed, interrupted, need_lab, spark_err
from .options import add_kernel_option, add_spark_options, check_spark_options, kernel_error


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "sweep",
        help="run a grid of scenarios x assignors x seeds on Spark",
        description="Run every point of GRID (TOML; format in rebalance_sim/lab/engine/grid.py) "
        "as Spark tasks, then aggregate. Rerunning skips complete runs.",
    )
    p.add_argument("grid", help="grid TOML file")
    p.add_argument(
        "--out",
        required=True,
        help="output directory or URI (file://, s3a://, hdfs://, ...): "
        "the runs' tables and aggregate/",
    )
    p.add_argument(
        "--batch-runs",
        type=int,
        default=None,
        metavar="N",
        help="runs per committed batch (default: about 1/6 of the sweep's cost, at least 2 "
        "runs per core); each batch is committed when its runs are done, so a kill loses "
        "at most the batches in flight (two)",
    )
    add_spark_options(p)
    add_kernel_option(p)
    p.set_defaults(func=cmd_sweep)


def cmd_sweep(args) -> int:
    if (rc := need_lab("sweep")) is not None:
        return rc
    from ..lab.engine import lock
    from ..lab.engine.grid import with_kernel
    from ..lab.engine.spark import SparkUnavailable, is_spark_error, spark_error_line
    from ..lab.engine.sweep import AggregateIncomplete, SweepInterrupted

    bad = check_spark_options("sweep", args) or kernel_error("sweep", args)
    if bad is not None:
        return bad
    if getattr(args, "batch_runs", None) is not None and args.batch_runs < 1:
        return err("sweep", f"--batch-runs {args.batch_runs}: must be at least 1")
    try:
        grid = load_grid(args.grid)
        specs = with_kernel(expand(grid), getattr(args, "kernel", None))
    except GridError as e:
        return err("sweep", str(e))
    try:
        out = check_out("--out", args.out)
        lock.hold(out, "--out")  # a local output: before Spark starts
    except (OutputError, lock.LockHeld) as e:
        return err("sweep", str(e))
    phase = ["starting Spark"]
    with SigintSeen() as sigint:
        try:
            return _sweep(args, grid, specs, out, phase)
        except (SparkUnavailable, OutputError, lock.LockHeld) as e:
            return spark_err("sweep", e)
        except SweepInterrupted as e:
            return interrupted("sweep", str(e))
        except AggregateIncomplete as e:
            return failed("sweep", str(e))
        except KeyboardInterrupt:
            return _sweep_interrupted(out, phase[0])
        except Exception as e:
            if not is_spark_error(e):
                raise
            if sigint.seen:
                return _sweep_interrupted(out, phase[0])
            return failed("sweep", spark_error_line(e))
        finally:
            lock.release_all()


def _sweep_interrupted(out, phase: str) -> int:
    from ..lab.engine.spark import interrupt_all

    interrupt_all()
    if phase == "aggregating":
        return interrupted(
            "sweep",
            f"interrupted while aggregating; every run is complete in {out} "
            "(rerun the same command to aggregate)",
        )
    return interrupted(
        "sweep",
        f"interrupted while {phase}; the runs complete so far are kept in {out} "
        "(rerun the same command to resume)",
    )


def _sweep(args, grid, specs, out, phase: list[str]) -> int:
    from ..lab.atomic import atomic_write_bytes
    from ..lab.engine import lock
    from ..lab.engine.aggregate import aggregate
    from ..lab.engine.spark import get_spark
    from ..lab.engine.store import local_path
    from ..lab.engine.sweep import check_aggregate

    local = local_path(out)
    if local is not None:
        atomic_write_bytes(local / "grid.toml", Path(args.grid).read_bytes())
    print(
        f"sweep {grid.name}: {len(specs)} runs ({len(grid.scenarios)} scenario(s) x "
        f"{len(grid.assignors or [None])} assignor(s) x {_points(grid)} point(s) x {len(grid.seeds)} seed(s))",
        file=sys.stderr,
    )
    master = getattr(args, "master", None)
    spark = get_spark(
        master,
        conf=getattr(args, "conf", None) or (),
        ship=getattr(args, "ship", True),
        timeout_s=getattr(args, "spark_timeout", None),
    )
    lock.hold(out, "--out", spark)  # a Hadoop URI: once Spark can reach it
    phase[0] = "sweeping"
    status = run_sweep(
        specs,
        out,
        master=master,
        label=f"sweep {grid.name}",
        batch_runs=getattr(args, "batch_runs", None),
    )
    failed = report_failures(status)
    phase[0] = "aggregating"
    tables = aggregate(spark, out, run_ids=[s.run_id for s in specs], collect_windows=False)
    check_aggregate(specs, status, tables["runs"])
    points = tables["points"].to_pandas()
    cols = [
        c for c in ("scenario", "assignor", *map(column_name, grid.vary)) if c in points.columns
    ]
    show = cols + [
        "seeds",
        "rebalance_time_total_s_median",
        "unassigned_partition_s_median",
        "unassigned_max_s_max",
    ]
    print(points[show].to_string(index=False))
    print(f"\naggregate tables: {str(out).rstrip('/')}/aggregate")
    return 1 if failed else 0


def _points(grid) -> int:
    n = 1
    for v in grid.vary.values():
        n *= len(v)
    return n
