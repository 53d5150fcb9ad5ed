"""The ``list``, ``sweep`` and ``experiment`` subcommands.

``rebalance-sim sweep GRID.toml --out DIR``  run a grid on Spark, then aggregate it (see sweep.py)
``rebalance-sim experiment NAME``            a packaged study that ends in an HTML report:
    eager-vs-cooperative   range / roundrobin / sticky / cooperative-sticky, static and dynamic
                           members, scale-out / crash / rolling bounce, 10..1000 members, 3 seeds
    assignor-scaling       leader assignment time and its share of the rebalance, per assignor,
                           100..10,000 members and up to 1,000,000 partitions

Raw runs go to a work directory (default ``out/<experiment>/``, resumable: a rerun skips the runs
already complete); the report, PNGs and CSVs go to ``out/<experiment>/report/``, or with
``--update-reference`` to the committed reference results ``results/<experiment>/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from . import ci_regression
from .catalog import EXPERIMENTS
from .catalog.eager_vs_cooperative import to_toml  # noqa: F401  (list_cmd's ``show`` uses it)
from .outputs import OutputError, check_output_dir
from .sweep import GridError, column_name, expand, load_grid, report_failures, run_sweep


def register(subparsers) -> None:
    p = subparsers.add_parser("sweep", help="run a grid of scenarios x assignors x seeds on Spark",
                              description="Run every point of GRID (TOML; format in experiments/sweep.py) "
                              "as Spark tasks, then aggregate. Rerunning skips complete runs.")
    p.add_argument("grid", help="grid TOML file")
    p.add_argument("--out", required=True, help="output directory (runs/ and aggregate/)")
    p.add_argument("--master", help="Spark master URL (default local[*]; sc://... for Spark Connect)")
    p.set_defaults(func=cmd_sweep)

    p = subparsers.add_parser("experiment", help="run a packaged experiment and write its report",
                              description="Run a packaged experiment: " + "; ".join(
                                  f"{e.name}: {e.description}" for e in EXPERIMENTS.values()))
    p.add_argument("name", choices=sorted(EXPERIMENTS), help="which experiment")
    p.add_argument("--scale", choices=("default", "large", "smoke"), default="default",
                   help="large adds bigger groups (takes much longer); smoke: tiny groups, 1 seed")
    p.add_argument("--out", help="report directory (default out/NAME/report)")
    p.add_argument("--update-reference", action="store_true",
                   help="write the report to the committed reference results (results/NAME; "
                   "results/ci for ci-regression) instead of out/")
    p.add_argument("--work", help="directory of the raw runs (default out/NAME; reruns resume)")
    p.add_argument("--master", help="Spark master URL (default local[*]; sc://... for Spark Connect)")
    ci_regression.add_arguments(p, with_out=False)
    p.set_defaults(func=cmd_experiment)


# ---------------------------------------------------------------------------------------------
# ---------------------------------------------------------------------------------------------
# sweep


def _err(cmd: str, message: str) -> int:
    print(f"rebalance-sim {cmd}: {message}", file=sys.stderr)
    return 2


def cmd_sweep(args) -> int:
    from .aggregate import aggregate
    from .atomic import atomic_write_bytes
    from .spark import SparkUnavailable, get_spark

    try:
        grid = load_grid(args.grid)
        specs = expand(grid)
    except GridError as e:
        return _err("sweep", str(e))
    try:
        out = check_output_dir(args.out)
    except OutputError as e:
        return _err("sweep", str(e))
    atomic_write_bytes(out / "grid.toml", Path(args.grid).read_bytes())
    print(f"sweep {grid.name}: {len(specs)} runs ({len(grid.scenarios)} scenario(s) x "
          f"{len(grid.assignors or [None])} assignor(s) x {_points(grid)} point(s) x {len(grid.seeds)} seed(s))",
          file=sys.stderr)
    try:
        status = run_sweep(specs, out, master=args.master, label=f"sweep {grid.name}")
        spark = get_spark(args.master)
    except SparkUnavailable as e:
        return _err("sweep", str(e))
    failed = report_failures(status)
    tables = aggregate(spark, out, run_ids=[s.run_id for s in specs])
    points = tables["points"].to_pandas()
    cols = [c for c in ("scenario", "assignor", *map(column_name, grid.vary)) if c in points.columns]
    show = cols + ["seeds", "rebalance_time_total_s_median", "unassigned_partition_s_median",
                   "unassigned_max_s_max"]
    print(points[show].to_string(index=False))
    print(f"\naggregate tables: {out / 'aggregate'}")
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
    from .pipeline import Options, run_experiment
    from .spark import SparkUnavailable

    # A user's run writes under out/ (ignored by git); the committed reference results under
    # results/ change only when asked (--update-reference), never as a side effect of a run.
    if getattr(args, "out", None) is None:
        args.out = (str(REFERENCE_DIRS.get(args.name, Path("results") / args.name))
                    if getattr(args, "update_reference", False) else f"out/{args.name}/report")
    try:
        check_output_dir(args.out)
        if getattr(args, "work", None):
            check_output_dir(args.work, flag="--work")
        elif args.name != "ci-regression":
            check_output_dir(f"out/{args.name}", flag="work directory")
    except OutputError as e:
        return _err("experiment", str(e))
    exp = EXPERIMENTS[args.name]
    opts = Options(
        name=args.name, scale=getattr(args, "scale", "default"),
        out=Path(args.out),
        work=getattr(args, "work", None) or f"out/{args.name}",
        master=getattr(args, "master", None), conf=tuple(getattr(args, "conf", None) or ()),
        ship=getattr(args, "ship", True), command=_command_line(args), extra=args)
    try:
        return run_experiment(exp, opts)
    except (GridError, SparkUnavailable) as e:
        return _err("experiment", str(e))


def _command_line(args) -> str:
    parts = ["rebalance-sim experiment", args.name]
    if getattr(args, "scale", "default") != "default":
        parts.append(f"--scale {args.scale}")
    if getattr(args, "master", None):
        parts.append(f"--master {args.master}")
    return " ".join(parts)
