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

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import attrs

from . import ci_regression
from .headline import headline_table, human_columns, sentences
from .provenance import produced_by
from .outputs import OutputError, check_output_dir
from .sweep import (
    GridError,
    RunSpec,
    column_name,
    expand,
    load_grid,
    report_failures,
    resolve,
    run_sweep,
)


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
# experiments (``rebalance-sim list`` shows them; see list_cmd.py)


@attrs.frozen
class Experiment:
    name: str
    description: str
    run: Callable[[argparse.Namespace], int]


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
# experiment eager-vs-cooperative


EAGER_VS_COOP_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")


@attrs.frozen
class Scale:
    sizes: tuple[int, ...]
    partitions_per_member: int
    bounce_members: int        # how many members the rolling bounce restarts (a deploy wave)
    seeds: tuple[int, ...] = (0, 1, 2)
    timing_shapes: tuple[tuple[int, int], ...] = tuple((m, p) for m in (100, 1000)
                                                       for p in (1_000, 10_000, 100_000))


SCALES = {
    "default": Scale(sizes=(10, 100, 1000), partitions_per_member=2, bounce_members=2),
    "large": Scale(sizes=(10, 100, 1000, 3000), partitions_per_member=2, bounce_members=5),
    # A quick look (and the tests): tiny groups, one seed.
    "smoke": Scale(sizes=(4, 8), partitions_per_member=2, bounce_members=2, seeds=(0,),
                   timing_shapes=((10, 100), (10, 1000))),
}
SCENARIO_LABELS = ("scale-out", "crash", "rolling-bounce")
# Seeds only matter if something is random: a lognormal link latency (median 2 ms).
COMMON_OVERRIDES = {"network.latency.kind": "lognormal", "network.latency.ms": 2.0}
# A plain (stateless) consumer doing real work per record: 500 records/s per member, so a
# 500-record poll batch takes up to 1 s (members react to a rebalance between batches), plus
# rebalance-listener costs per partition: flush and commit on revoke, re-open state on assign.
CONSUMER_PROFILE = {"capacity": 500.0, "revoke_cost_ms": 10.0, "assign_cost_ms": 50.0}


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")


def to_toml(data: dict) -> str:
    """A scenario dict (scalars, lists, tables, lists of tables) as TOML text."""
    lines: list[str] = []

    def table(d: dict, prefix: str) -> None:
        scalars = {k: v for k, v in d.items()
                   if not isinstance(v, dict) and not (isinstance(v, list) and v and isinstance(v[0], dict))}
        for k, v in scalars.items():
            lines.append(f"{k} = {_toml_value(v)}")
        for k, v in d.items():
            name = f"{prefix}.{k}" if prefix else k
            if isinstance(v, dict):
                lines.append(f"\n[{name}]")
                table(v, name)
            elif isinstance(v, list) and v and isinstance(v[0], dict):
                for item in v:
                    lines.append(f"\n[[{name}]]")
                    table(item, name)

    table(data, "")
    return "\n".join(lines) + "\n"


def _scenario_dict(label: str, membership: str, members: int, partitions: int, bounce: int) -> dict:
    from .scenarios import builtin_dict

    overrides = {"members": str(members), "partitions": str(partitions)}
    width = max(3, len(str(members - 1)))  # member names: c000, c001, ... (wider past 1000)
    if label == "rolling-bounce":
        data = builtin_dict(f"rolling-bounce-{membership}", overrides)
        data["timeline"][0]["members"] = [f"c{i:0{width}d}" for i in range(min(bounce, members))]
    elif label == "crash":
        data = builtin_dict(label, {**overrides, "member": f"c{1:0{width}d}"})
        data["consumer"]["static"] = membership == "static"
    else:
        data = builtin_dict(label, overrides)
        data["consumer"]["static"] = membership == "static"
    data["name"] = label
    data["description"] = f"{label}, {membership} members (eager-vs-cooperative experiment)"
    data["consumer"].update(CONSUMER_PROFILE)
    net = data.setdefault("network", {})
    net["latency"] = {"kind": COMMON_OVERRIDES["network.latency.kind"], "ms": COMMON_OVERRIDES["network.latency.ms"]}
    return data


def eager_vs_coop_specs(scale: Scale, work: Path) -> list[RunSpec]:
    """Every run of the experiment; scenario files are written under ``work/scenarios``."""
    from .atomic import atomic_write_text

    specs = []
    for label in SCENARIO_LABELS:
        for membership in ("dynamic", "static"):
            for members in scale.sizes:
                partitions = members * scale.partitions_per_member
                data = _scenario_dict(label, membership, members, partitions, scale.bounce_members)
                path = work / "scenarios" / f"{label}-{membership}-{members}.toml"
                text = to_toml(data)
                if not path.exists() or path.read_text() != text:
                    atomic_write_text(path, text)
                for assignor in EAGER_VS_COOP_ASSIGNORS:
                    point = (("scenario", label), ("assignor", assignor), ("membership", membership),
                             ("members", members), ("partitions", partitions))
                    for seed in scale.seeds:
                        specs.append(RunSpec(str(path.resolve()),
                                             (f"consumer.partition_assignment_strategy={assignor}",),
                                             seed, point))
    return resolve(specs, "eager-vs-cooperative")


def _time_assignors(assignors, shapes) -> list[dict]:
    """Wall time of one reassignment (after one member left) per assignor and (members, partitions)."""
    from assignors import get_assignor

    from .bench_assignors import Case, _fresh_subscriptions, _group, _next_round

    rows = []
    for members, partitions in shapes:
        topics = max(1, partitions // 10_000)
        case = Case(f"{members}x{partitions}", members, topics, partitions // topics)
        metadata, topics_of = _group(case)
        for name in assignors:
            a = get_assignor(name)
            fresh = a.assign(metadata, _fresh_subscriptions(topics_of))
            subs = _next_round(name, topics_of, fresh, 1, next(iter(topics_of)))
            times = []
            for _ in range(3 if partitions <= 100_000 else 1):
                gc.collect()
                t0 = time.perf_counter()
                get_assignor(name).assign(metadata, subs)
                times.append(time.perf_counter() - t0)
            rows.append({"assignor": name, "members": members, "partitions": case.partitions,
                         "assign_s": statistics.median(times)})
    return rows


def _intervals(work: Path, run_id: str):
    import pyarrow.parquet as pq

    return pq.read_table(work / "runs" / run_id / "intervals.parquet").to_pandas()


def _pick(specs: list[RunSpec], **point) -> RunSpec | None:
    for s in specs:
        p = dict(s.point)
        if s.seed == point.get("seed", 0) and all(p.get(k) == v for k, v in point.items() if k != "seed"):
            return s
    return None


def run_eager_vs_cooperative(args) -> int:
    import pandas as pd

    from . import plots
    from .aggregate import aggregate
    from .atomic import atomic_write_bytes
    from .report import Figure, Table, write_report
    from .spark import get_spark

    t_start = time.monotonic()
    scale = SCALES[args.scale]
    name = "eager-vs-cooperative"
    out = Path(args.out or f"out/{name}/report")
    work = Path(args.work or f"out/{name}")
    specs = eager_vs_coop_specs(scale, work)
    print(f"{name}: {len(specs)} runs = {len(SCENARIO_LABELS)} scenarios x 2 memberships x "
          f"{len(scale.sizes)} group sizes {list(scale.sizes)} x {len(EAGER_VS_COOP_ASSIGNORS)} assignors "
          f"x {len(scale.seeds)} seeds; runs in {work}/runs, report in {out}/", file=sys.stderr)
    print(f"{name}: starting Spark ({args.master or 'local[*]'}) ...", file=sys.stderr)
    spark = get_spark(args.master)
    status = run_sweep(specs, work, master=args.master, label=name)
    failed = report_failures(status)
    print(f"{name}: runs done; aggregating with Spark ({time.monotonic() - t_start:.0f} s) ...",
          file=sys.stderr)
    tables = aggregate(spark, work, run_ids=[s.run_id for s in specs])
    runs = tables["runs"].to_pandas()
    points = tables["points"].to_pandas()
    wq = tables["window_quantiles"].to_pandas()
    windows = tables["windows"].to_pandas()

    print(f"{name}: timing the assignors and drawing ({time.monotonic() - t_start:.0f} s) ...",
          file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    for t in ("runs", "points", "window_quantiles"):
        atomic_write_bytes(out / f"{t}.csv", (work / "aggregate" / f"{t}.csv").read_bytes())
    figures = _eager_vs_coop_figures(out, work, specs, points, windows, scale)
    timings = pd.DataFrame(_time_assignors(EAGER_VS_COOP_ASSIGNORS, scale.timing_shapes))
    atomic_write_bytes(out / "assignor_timing.csv", timings.to_csv(index=False).encode())
    figures.append(Figure(out / "assignment_time.png",
                          plots.assignment_time(timings, out / "assignment_time.png")))

    print(f"{name}: writing the report ({time.monotonic() - t_start:.0f} s) ...", file=sys.stderr)
    headline = headline_table(points, max(scale.sizes))
    answers = sentences(headline)
    atomic_write_bytes(out / "headline.csv", headline.to_csv(index=False).encode())
    matched = int(runs["intervals_match"].sum())
    elapsed = time.monotonic() - t_start
    intro = [
        "How long does a consumer group stall when it rebalances, and how much does the assignor "
        "and membership type matter? Each run simulates one Kafka consumer group (Kafka's classic "
        "group protocol, client defaults: session.timeout.ms 45 s, heartbeat 3 s) in virtual time.",
        f"Grid: scenarios {', '.join(SCENARIO_LABELS)} (rolling bounce = the first "
        f"{scale.bounce_members} members restart in turn, 10 s down, 20 s apart); dynamic and static "
        f"(KIP-345) members; group sizes {', '.join(map(str, scale.sizes))} with "
        f"{scale.partitions_per_member} partitions per member (one topic, 100 records/s per partition); "
        f"assignors {', '.join(EAGER_VS_COOP_ASSIGNORS)}; seeds {', '.join(map(str, scale.seeds))} "
        "(lognormal link latency, median 2 ms). Each member processes up to "
        f"{CONSUMER_PROFILE['capacity']:.0f} records/s in poll batches of 500 records and reacts to a "
        "rebalance between batches; its rebalance listener costs "
        f"{CONSUMER_PROFILE['revoke_cost_ms']:.0f} ms per revoked and "
        f"{CONSUMER_PROFILE['assign_cost_ms']:.0f} ms per assigned partition.",
        "Rebalance time is the sum over the run's rebalance episodes of trigger-to-settled time "
        "(every partition owned by a live processing member, no rebalance pending). Unassigned "
        "partition-seconds sum, over partitions, the time no live member processed them. "
        "Stop-the-world is time during which the whole group processed nothing.",
        "Caveats: members of a group share their heartbeat phase (as after a real SyncGroup), so "
        "they learn of a rebalance at nearly the same instant; the rolling "
        f"bounce restarts only {scale.bounce_members} members (each further restart repeats the "
        "same episodes), to keep the default run under 10 minutes on 2 cores.",
    ]
    cols_runs = ["scenario", "membership", "members", "assignor", "seed", "rebalance_time_total_s",
                 "rounds_total", "unassigned_partition_s", "unassigned_max_s", "stop_the_world_s",
                 "throughput_loss_records", "intervals_match"]
    sections = [
        ("Headline", [*answers,
                      Table(f"Median across seeds at {max(scale.sizes):,} members: stall first, then "
                            "duration", headline, csv="headline.csv",
                            note="unassigned partition-s: partitions x seconds with no member "
                            "processing them; stop-the-world s: time the whole group processed "
                            "nothing; records delayed: records produced meanwhile that waited; "
                            "longest gap s: the longest single partition's wait; rebalance s: "
                            "trigger to settled, summed over the run's episodes.")]),
        ("Figures", figures),
        ("Per parameter point", [Table("Median / p90 / max across seeds", _points_view(points),
                                       csv="points.csv"),
                                 Table("Unassigned windows per point (every seed)", _windows_view(wq),
                                       csv="window_quantiles.csv",
                                       note="Percentiles are shown only over at least 100 windows; "
                                       "with fewer, only the median and the max are meaningful.")]),
        ("Per run", [Table("Every run (first 40 rows)", human_columns(runs[cols_runs].head(40)), csv="runs.csv",
                           note=f"{matched} of {len(runs)} runs: unassigned partition-seconds and max "
                           "window recomputed by Spark from the intervals equal the simulator's summary.")]),
    ]
    meta = [f"command: rebalance-sim experiment {name}" + (f" --scale {args.scale}" if args.scale != "default" else ""),
            f"{len(specs)} runs ({int((status['status'] == 'skipped').sum())} reused from {work}), "
            f"{failed} failed; wall time {elapsed:.0f} s including Spark start",
            f"raw runs (Parquet): {work}/runs",
            *produced_by(args.master or "local[*]")]
    report = write_report(out / "report.html", "Eager vs cooperative rebalancing", intro, sections, meta)
    elapsed = time.monotonic() - t_start
    print(f"\n{name}: done in {elapsed:.0f} s; {len(specs)} runs, {failed} failed; "
          f"{matched}/{len(runs)} runs match the simulator's summaries")
    print(f"\nAt {max(scale.sizes):,} members (median across seeds):")
    for line in answers:
        print(f"- {line}")
    print()
    print(_text_table(headline))
    print(f"\nreport: {report.resolve()}")
    return 1 if failed else 0


def _points_view(points):
    keep = ["scenario", "membership", "members", "assignor", "seeds"]
    for m in ("rebalance_time_total_s", "rounds_total", "unassigned_partition_s", "unassigned_max_s",
              "throughput_loss_records", "stop_the_world_s"):
        keep += [f"{m}_median", f"{m}_p90", f"{m}_max"]
    order = {a: i for i, a in enumerate(EAGER_VS_COOP_ASSIGNORS)}
    view = points[keep].assign(_o=points["assignor"].map(order))
    view = view.sort_values(["scenario", "membership", "members", "_o"]).drop(columns="_o")
    for col in [c for c in view.columns if c.startswith("rounds_total_")]:
        view[col] = view[col].round().astype("Int64")
    return human_columns(view)


def _windows_view(wq):
    """Window quantiles with the percentiles blanked where there are too few windows for them
    (a p99 over 2 windows is just the max)."""
    view = wq.copy()
    few = view["windows"] < 100
    for col in ("window_p90_s", "window_p99_s"):
        view[col] = view[col].astype(float).mask(few)
    return view.rename(columns={"window_p50_s": "median s", "window_p90_s": "p90 s",
                                "window_p99_s": "p99 s", "window_max_s": "max s",
                                "partitions_touched": "partitions touched"})


def _text_table(df) -> str:
    def fmt(v):
        if isinstance(v, float):
            if v != v:
                return "-"
            return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.2f}"
        return str(v)

    rows = [[fmt(v) for v in r] for r in df.itertuples(index=False)]
    headers = list(df.columns)
    text = [df[c].dtype == object for c in headers]  # text columns left, numbers right
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) if t else h.rjust(w) for h, w, t in zip(headers, widths, text, strict=True))]
    for r in rows:
        lines.append("  ".join(c.ljust(w) if t else c.rjust(w) for c, w, t in zip(r, widths, text, strict=True)))
    return "\n".join(lines)


def _eager_vs_coop_figures(out, work, specs, points, windows, scale):
    from . import plots
    from .report import Figure
    from .sweep import load_run_scenario

    figs = []
    small = min(scale.sizes)
    eager = _pick(specs, scenario="scale-out", assignor="range", membership="dynamic", members=small)
    coop = _pick(specs, scenario="scale-out", assignor="cooperative-sticky", membership="dynamic", members=small)
    if eager and coop:
        trigger = load_run_scenario(eager).timeline[0].at_s
        ivs = [(f"eager: range, {small} members + 1 joining", _intervals(work, eager.run_id)),
               (f"cooperative: cooperative-sticky, {small} members + 1 joining", _intervals(work, coop.run_id))]
        hi = max(float(iv["end"].max()) for _, iv in ivs)  # a run stops once the group settles
        figs.append(Figure(out / "ownership_timeline.png",
                           plots.ownership_timeline(ivs, out / "ownership_timeline.png",
                                                    (trigger - 0.5, hi), trigger)))
    dyn = windows[windows["membership"] == "dynamic"]
    figs.append(Figure(out / "unassigned_cdf.png",
                       plots.window_cdf(dyn, out / "unassigned_cdf.png",
                                        where=" (dynamic members, all sizes and seeds)")))
    static = windows[windows["membership"] == "static"]
    if len(static):
        figs.append(Figure(out / "unassigned_cdf_static.png",
                           plots.window_cdf(static, out / "unassigned_cdf_static.png",
                                            where=" (static members, all sizes and seeds)")))
    figs.append(Figure(out / "rebalance_time_vs_size.png", plots.metric_vs_size(
        points, "rebalance_time_total_s", "rebalance time (s)", out / "rebalance_time_vs_size.png",
        logy=False,
        caption="End-to-end rebalance time (sum over the run's episodes) vs group size: median across "
                "seeds, band up to the p90; where an assignor's line is hidden it coincides with another.")))
    figs.append(Figure(out / "unassigned_vs_size.png", plots.metric_vs_size(
        points, "unassigned_partition_s", "unassigned partition-s (log)",
        out / "unassigned_vs_size.png",
        caption="Unassigned partition-seconds (partitions x seconds without a processing member) vs "
                "group size: median across seeds, band up to the p90; log axes.")))
    mid = sorted(scale.sizes)[len(scale.sizes) // 2]
    curves = []
    first = None
    for assignor in EAGER_VS_COOP_ASSIGNORS:
        s = _pick(specs, scenario="crash", assignor=assignor, membership="dynamic", members=mid)
        if s is None:
            continue
        sc = load_run_scenario(s)
        first = first or sc
        rate = sc.config.topics[0].rate
        parts = sum(t.partitions for t in sc.config.topics)
        trig = sc.timeline[0].at_s
        rb = points[(points["scenario"] == "crash") & (points["members"] == mid)
                    & (points["membership"] == "dynamic")]["rebalance_time_total_s_max"].max()
        t, y = plots.throughput_curve(_intervals(work, s.run_id), rate, parts, trig - 5, trig + float(rb) + 10)
        curves.append((assignor, t, y))
    if curves:
        total = first.config.topics[0].rate * sum(t.partitions for t in first.config.topics)
        figs.append(Figure(out / "throughput.png", plots.throughput(
            curves, out / "throughput.png", total, first.timeline[0].at_s,
            f"one member of {mid} crashes (dynamic members, seed 0)")))
    return figs


# ---------------------------------------------------------------------------------------------
# experiment assignor-scaling


def run_assignor_scaling(args) -> int:
    import pandas as pd

    from . import plots
    from .aggregate import aggregate
    from .atomic import atomic_write_bytes
    from .report import Figure, Table, write_report
    from .spark import get_spark

    t_start = time.monotonic()
    name = "assignor-scaling"
    out = Path(args.out or f"out/{name}/report")
    work = Path(args.work or f"out/{name}")
    large = args.scale == "large"
    assignors = EAGER_VS_COOP_ASSIGNORS
    members_list = (100, 1000, 10_000)
    partitions_list = (1_000, 10_000, 100_000, 1_000_000)
    shapes = [(m, p) for m in members_list for p in partitions_list if p >= m]
    print(f"{name}: timing {len(assignors)} assignors on {len(shapes)} group shapes ...", file=sys.stderr)
    rows = []
    for shape in shapes:
        t0 = time.monotonic()
        rows += _time_assignors(assignors, [shape])
        print(f"  {shape[0]:>6,} members x {shape[1]:>9,} partitions: {time.monotonic() - t0:5.1f} s",
              file=sys.stderr)
    timings = pd.DataFrame(rows)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "assignor_timing.csv", timings.to_csv(index=False).encode())

    # Simulated rebalances with the measured assignor cost: its share of the rebalance.
    sim_sizes = (100, 1000, 3000) if not large else (100, 1000, 3000, 10_000)
    specs = []
    for members in sim_sizes:
        for assignor in assignors:
            for seed in (0,):
                partitions = members * 20
                specs.append(RunSpec("scale-out", (f"members={members}", f"partitions={partitions}",
                                                   f"assignor={assignor}", "assignor_cost=measured",
                                                   "group.initial_rebalance_delay_ms=0"),
                                     seed, (("scenario", "scale-out"), ("assignor", assignor),
                                            ("members", members), ("partitions", partitions))))
    specs = resolve(specs, name)
    spark = get_spark(args.master)
    status = run_sweep(specs, work, master=args.master, label=name)
    failed = report_failures(status)
    tables = aggregate(spark, work, run_ids=[s.run_id for s in specs])
    runs = tables["runs"].to_pandas()
    assign_s = _assign_time_of_runs(spark, work)
    runs = runs.merge(assign_s, on="run_id", how="left").fillna({"leader_assign_s": 0.0})
    runs["assign_share"] = runs["leader_assign_s"] / runs["rebalance_time_total_s"]
    share = runs.groupby(["assignor", "members", "partitions"], as_index=False)[
        ["leader_assign_s", "rebalance_time_total_s", "assign_share"]].median()
    atomic_write_bytes(out / "assignment_share.csv", share.to_csv(index=False).encode())
    figs = [Figure(out / "assignment_time.png", plots.assignment_time(timings, out / "assignment_time.png")),
            Figure(out / "assignment_share.png", plots.share_of_rebalance(share, out / "assignment_share.png"))]
    elapsed = time.monotonic() - t_start
    intro = ["When does the leader's assignment itself dominate a rebalance? Our assignors are timed "
             "directly (median of 3 calls, 1 at 1,000,000 partitions; one reassignment after one "
             "member left, each survivor reporting what it owned the way its assignor's member side "
             "does), then a scale-out is simulated with the assignor cost 'measured' (the leader's "
             "simulated assignment takes the real CPU time of our Python assignor).",
             "Python assignors are slower than Kafka's Java ones, so absolute times are an upper "
             "bound; the growth with members and partitions is the point."]
    sections = [("Figures", figs),
                ("Timings", [Table("Leader assignment time (s)", timings, csv="assignor_timing.csv")]),
                ("Share of the rebalance", [Table("Scale-out with measured assignor cost (20 partitions per member)",
                                                  share, csv="assignment_share.csv")])]
    meta = [f"command: rebalance-sim experiment {name}", f"wall time {elapsed:.0f} s", f"raw runs: {work}/runs",
            *produced_by(args.master or "local[*]")]
    report = write_report(out / "report.html", "Assignor scaling", intro, sections, meta)
    print(f"\n{name}: done in {elapsed:.0f} s, {failed} failed runs")
    piv = timings.pivot_table(index=["members", "partitions"], columns="assignor", values="assign_s")
    print("\nleader assignment time (s):")
    print(piv[list(assignors)].to_string(float_format=lambda v: f"{v:.3f}"))
    print(f"\nreport: {report.resolve()}")
    return 1 if failed else 0


def _assign_time_of_runs(spark, work: Path):
    """Simulated time the leader spent computing assignments in each run's rebalance episodes
    (the ``cost=...s`` of its ``assignment_computed`` events), with Spark."""
    from pyspark.sql import functions as F

    root = str(work.resolve() / "runs" / "*")
    ev = (spark.read.schema("run_id string, t double, kind string, member string, generation long, "
                            "detail string").parquet(root + "/events.parquet")
          .where(F.col("kind") == "assignment_computed")
          .select("run_id", "t", F.regexp_extract("detail", r"cost=([0-9.eE+-]+)s", 1)
                  .cast("double").alias("cost_s")))
    ep = (spark.read.schema("run_id string, episode long, start_s double, end_s double")
          .parquet(root + "/episodes.parquet").where(F.col("episode") > 0))
    joined = ev.join(ep, (ev.run_id == ep.run_id) & (ev.t >= ep.start_s) & (ev.t <= ep.end_s))
    return (joined.groupBy(ev.run_id).agg(F.sum("cost_s").alias("leader_assign_s"))
            .toArrow().to_pandas())


EXPERIMENTS = {e.name: e for e in [
    Experiment("eager-vs-cooperative", "range vs roundrobin vs sticky vs cooperative-sticky, static "
               "and dynamic members, scale-out / crash / rolling bounce, 10-1000 members, 3 seeds "
               "(the main job, under 10 minutes on 2 cores)", run_eager_vs_cooperative),
    Experiment("assignor-scaling", "leader assignment time per assignor (100-10,000 members, up to "
               "1,000,000 partitions) and its share of a simulated rebalance (100-3,000 members; "
               "10,000 with --scale large)", run_assignor_scaling),
    Experiment("ci-regression", "a small deterministic suite compared metric by metric with "
               "results/baseline/ (exit 1 on a move beyond tolerance; --update-baseline)",
               ci_regression.run),
]}


# Where --update-reference writes each experiment's committed reference results.
REFERENCE_DIRS = {"ci-regression": Path("results/ci")}


def cmd_experiment(args) -> int:
    from .spark import SparkUnavailable

    # A user's run writes under out/ (ignored by git); the committed reference results under
    # results/ change only when asked (--update-reference), never as a side effect of a run.
    if args.out is None:
        args.out = (str(REFERENCE_DIRS.get(args.name, Path("results") / args.name)) if args.update_reference
                    else f"out/{args.name}/report")
    try:
        check_output_dir(args.out)
        if getattr(args, "work", None):
            check_output_dir(args.work, flag="--work")
        elif args.name != "ci-regression":
            check_output_dir(f"out/{args.name}", flag="work directory")
    except OutputError as e:
        return _err("experiment", str(e))
    try:
        return EXPERIMENTS[args.name].run(args)
    except (GridError, SparkUnavailable) as e:
        return _err("experiment", str(e))
