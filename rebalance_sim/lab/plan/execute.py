"""A plan, start to end: what it runs within its time budget, the two phases on Spark (today's
size, then growth), the aggregation, the limits read from the runs, the report.

Phase 1 runs every fault under today's set-up and each alternative at today's size. Phase 2 runs
the growth sizes under today's set-up and the alternative that ranks first at today's size (a
light read of phase 1's stall chooses it; a rerun reads the same runs and chooses the same, so
an interrupted plan resumes). Both are ordinary sweeps (``rebalance_sim.lab.engine.sweep``) into one
work directory: resumable, reused while the model is unchanged.

The budget: a mode's wall time on the cores at hand, in the estimates of ``runs.estimated_s``.
Today's size runs first at the mode's fewest seeds; then each growth size in order, with the
best alternative if it fits, else today's set-up alone, else it is left out (the report says
so and what it would take); what is left of the budget adds seeds at today's size, cheapest
faults first, up to the mode's number.
"""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import attrs

from .group import Group, plural, settings_changed, to_toml
from .runs import (
    Block,
    Mode,
    base_dict,
    blocks_for,
    cost_of,
    count_of,
    growth_factors,
    kafka_version_overrides,
    scenario_knows_kafka_version,
    specs_of,
)
from .variants import FAULT_TITLES, FAULTS, set_up, variants

# The engine's RunSpec.cost is in milliseconds of estimated work: below 1 it counts as 1.
COST_UNIT = 1000.0
# Seconds a plan spends besides its runs (Spark's start, two sweeps' commits, the aggregation,
# the limits query, figures), on the machine the budgets were set on; part of the wall target.
OVERHEAD_S = 35.0
# Quick: the two faults people ask about first, the full alternatives but the slowest.
QUICK_FAULTS = ("deploy", "crash")
QUICK_SKIP = ("consumer-range",)


@attrs.frozen
class Options:
    """What the command line asked for."""

    out: Path
    work: str
    mode: Mode
    master: str | None = None
    conf: tuple[str, ...] = ()
    ship: bool = True
    timeout_s: float | None = None
    kernel: str | None = None
    seeds: int | None = None  # --seeds: today's size runs this many, whatever the budget
    command: str = ""
    dry_run: bool = False


@attrs.frozen
class Selection:
    """What a plan runs: today's size (faults x set-ups with their seeds), the growth sizes with
    which set-ups (``"today"`` alone, or ``"today+best"``), what was left out and why, and the
    estimated seconds of one core."""

    today: tuple[Block, ...]
    growth: tuple[tuple[float, str], ...]
    growth_seeds: tuple[int, ...]
    left_out: tuple[str, ...]
    estimate_s: float
    budget_s: float | None


def _in_mode(blocks: list[Block], mode: Mode) -> list[Block]:
    """``blocks`` less what ``mode`` does not run (a quick plan: two faults, fewer set-ups)."""
    if mode.name != "quick":
        return blocks
    return [
        b
        for b in blocks
        if b.fault in QUICK_FAULTS and b.variant.full and b.variant.key not in QUICK_SKIP
    ]


def _phase1(group: Group, mode: Mode, scenario_dir: Path, seeds: int, write: bool) -> list[Block]:
    """Every block at today's size that ``mode`` runs, at ``seeds`` seeds."""
    return _in_mode(blocks_for(group, scenario_dir, 1.0, None, tuple(range(seeds)), write), mode)


def _with_seeds(block: Block, n: int) -> Block:
    return attrs.evolve(block, seeds=tuple(range(n)))


def select(
    group: Group,
    mode: Mode,
    cores: int,
    scenario_dir: Path,
    seeds: int | None = None,
    write: bool = True,
) -> Selection:
    """What the plan runs within ``mode``'s budget on ``cores`` cores (see the module
    docstring). ``seeds`` fixes today's-size seeds."""
    budget = None if mode.wall_s is None else mode.wall_s * max(1, cores)
    floor = seeds or mode.min_seeds
    today = _phase1(group, mode, scenario_dir, floor, write)
    used = cost_of(today)
    growth: list[tuple[float, str]] = []
    left: list[str] = []
    gseeds = tuple(range(mode.growth_seeds))
    full_alts = [v.key for v in variants(group) if v.full and v.key != "today"]
    stop = False
    for f in growth_factors(group):
        blocks = _in_mode(blocks_for(group, scenario_dir, f, None, gseeds, write=False), mode)
        today_cost = cost_of([b for b in blocks if b.variant.key == "today"])
        alt_cost = max(
            (cost_of([b for b in blocks if b.variant.key == k]) for k in full_alts), default=0.0
        )
        members = blocks[0].members if blocks else round(group.members * f)
        if not stop and (budget is None or used + today_cost + alt_cost <= budget):
            growth.append((f, "today+best"))
            used += today_cost + alt_cost
        elif not stop and used + today_cost <= budget:  # type: ignore[operator]
            growth.append((f, "today"))
            used += today_cost
            left.append(
                f"{f:g}x ({members:,} members) under the best alternative: about "
                f"{_minutes(alt_cost / max(1, cores))} more on {cores} core(s); --thorough runs it"
            )
        else:
            stop = True
            left.append(
                f"{f:g}x ({members:,} members): about "
                f"{_minutes((today_cost + alt_cost) / max(1, cores))} more on {cores} core(s); "
                "--thorough runs it"
            )
    if seeds is None:
        # more seeds at today's size, the cheapest faults first, while the budget lasts
        target = mode.seeds
        order = sorted(FAULTS, key=lambda f: cost_of([b for b in today if b.fault == f]))
        for fault in order:
            mine = [b for b in today if b.fault == fault]
            per_seed = cost_of([_with_seeds(b, 1) for b in mine])
            extra = 0
            while floor + extra < target and (
                budget is None or used + per_seed * (extra + 1) <= budget
            ):
                extra += 1
            if extra:
                used += per_seed * extra
                today = [_with_seeds(b, floor + extra) if b.fault == fault else b for b in today]
    return Selection(tuple(today), tuple(growth), gseeds, tuple(left), used, budget)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def growth_blocks(
    group: Group, sel: Selection, best: str | None, scenario_dir: Path, mode: Mode
) -> list[Block]:
    """The growth phase's blocks: today's set-up at each growth size chosen, with ``best``
    where the budget has room for it."""
    out: list[Block] = []
    for f, which in sel.growth:
        keys = ["today"] + ([best] if best and which == "today+best" else [])
        out += _in_mode(blocks_for(group, scenario_dir, f, keys, sel.growth_seeds), mode)
    return out


def seeds_text(blocks: Sequence[Block]) -> str:
    """How many seeds each point ran, as the report says it."""
    by_size: dict[float, dict[int, list[str]]] = {}
    for b in blocks:
        by_size.setdefault(b.factor, {}).setdefault(len(b.seeds), [])
        names = by_size[b.factor][len(b.seeds)]
        if FAULT_TITLES[b.fault] not in names:
            names.append(FAULT_TITLES[b.fault])
    parts = []
    for factor in sorted(by_size):
        where = "today's size" if factor == 1.0 else f"{factor:g}x"
        counts = by_size[factor]
        if len(counts) == 1:
            parts.append(f"{next(iter(counts))} at {where}")
        else:
            parts.append(
                f"at {where} "
                + ", ".join(f"{n} ({', '.join(names)})" for n, names in sorted(counts.items()))
            )
    return "Seeds per point: " + "; ".join(parts) + "."


def _say(text: str) -> None:
    print(f"plan: {text}", file=sys.stderr, flush=True)


def stall_by_point(spark, work, specs) -> dict[tuple[str, str], float]:
    """Median stall per (fault, set-up) of ``specs``' complete runs: the light read that picks
    the growth phase's alternative."""
    import statistics

    from ..engine.store import read_table

    ids = [s.run_id for s in specs]
    runs = read_table(spark, work, "runs", ids).select("run_id", "`summary.unassigned_partition_s`")
    rows = runs.toPandas()
    value = dict(zip(rows["run_id"], rows.iloc[:, 1], strict=True))
    by: dict[tuple[str, str], list[float]] = {}
    for s in specs:
        point = dict(s.point)
        if s.run_id in value:
            by.setdefault((point["fault"], point["variant"]), []).append(float(value[s.run_id]))
    return {k: statistics.median(v) for k, v in by.items()}


def group_file_text(group: Group) -> str:
    """The group as planned, as a group file to edit and plan again, saying where it came from
    and what was assumed."""
    head = [f"# The group as rebalance-sim plan ran it, from {group.source}."]
    head += [f"# Assumed: {a}." for a in group.assumed]
    head += [f"# From the describe output: {f}." for f in group.facts]
    return "\n".join(head) + "\n" + to_toml(group)


def describe_group(group: Group) -> str:
    cfg = group.consumer_config()
    produced = group.produce_rate
    capacity = cfg.capacity * group.members
    topics = len(group.topics)
    return (
        f"{plural(group.members, 'member')}, {plural(group.partitions, 'partition')} in "
        f"{plural(topics, 'topic')} producing {produced:,.0f} records/s "
        f"({produced / capacity:.0%} of the group's {capacity:,.0f} records/s); "
        f"onPartitionsAssigned {cfg.assign_cost_ms:g} ms and onPartitionsRevoked "
        f"{cfg.revoke_cost_ms:g} ms per partition; max.poll.interval.ms "
        f"{cfg.max_poll_interval_ms:,.0f}; Kafka {group.broker_version} brokers."
    )


def fault_text(group: Group) -> dict[str, str]:
    d, f = group.deploy, group.faults
    batch = d.batch_size if isinstance(d.batch_size, str) else f"{d.batch_size} members"
    stop = "each closing gracefully (LeaveGroup)" if d.graceful else "each killed (no LeaveGroup)"
    return {
        "deploy": f"every member restarted once, {batch} at a time, {d.down_s:g} s down, "
        f"{d.gap_s:g} s between batches, {stop}",
        "crash": "one member dies without leaving (noticed when its session expires)",
        "slow-member": f"one member's poll batch takes {f.slow_poll_s:g} s while another joins",
        "scale-out": f"{count_of(f.scale_out, group.members):,} member(s) join at once",
    }


def session_of(group: Group) -> dict[str, tuple[str, float]]:
    """Per set-up: the session timeout that fences its members (Kafka's name, seconds)."""
    from sim import Scenario

    out = {}
    for v in variants(group):
        cfg = Scenario.from_dict(base_dict(group, v)).config
        if cfg.consumer.group_protocol == "consumer":
            out[v.key] = ("group.consumer.session.timeout.ms", cfg.group.consumer_session_timeout_s)
        else:
            out[v.key] = ("session.timeout.ms", cfg.consumer.session_timeout_s)
    return out


def replay_command(out: Path, spec) -> str:
    """The command that reruns one of the plan's runs on its own (same events, same result)."""
    path = Path(spec.scenario)
    try:
        path = path.relative_to(Path.cwd())
    except ValueError:
        pass
    parts = ["rebalance-sim", "run", str(path), "--seed", str(spec.seed)]
    for o in spec.overrides:
        parts += ["--set", o]
    return shlex.join(parts)


def run_plan(group: Group, opts: Options) -> int:
    """Run the plan (the caller holds the output's lock and handles interrupts)."""
    from ..atomic import atomic_write_bytes, atomic_write_text
    from ..engine.aggregate import aggregate
    from ..engine.grid import with_kernel
    from ..engine.spark import current_master, get_spark
    from ..engine.sweep import check_aggregate, report_failures, run_sweep
    from ..provenance import produced_by
    from ..report import plan as page_mod
    from .limits import crossings
    from .tables import best_from_stall, ranking, result_table

    t0 = time.monotonic()
    out = opts.out
    scenarios = out / "scenarios"
    atomic_write_text(out / "group.toml", group_file_text(group))
    overrides = kafka_version_overrides(group.broker_version)
    _say(f"{group.name}: {describe_group(group)}")
    _say(f"starting Spark ({opts.master or 'local[*]'}) ...")
    spark = get_spark(opts.master, conf=opts.conf, ship=opts.ship, timeout_s=opts.timeout_s)
    from ..engine.lock import hold

    hold(opts.work, "--work", spark)
    cores = _cores(spark)
    sel = select(group, opts.mode, cores, scenarios, opts.seeds)
    today = list(sel.today)
    specs1 = with_kernel(specs_of(today, overrides, "plan"), opts.kernel)
    specs1 = [attrs.evolve(s, cost=s.cost * COST_UNIT) for s in specs1]
    growth_est = sel.estimate_s - cost_of(today)
    _say(
        f"{len(specs1)} runs at today's size, growth {', '.join(f'{f:g}x' for f, _ in sel.growth) or 'none'}; "
        f"estimated {_minutes(sel.estimate_s / cores)} of runs on {cores} core(s)"
        + (f" (budget {_minutes(sel.budget_s / cores)})" if sel.budget_s else "")
    )
    for line in sel.left_out:
        _say(f"not run: {line}")
    status1 = run_sweep(
        specs1,
        opts.work,
        master=opts.master,
        label=f"plan {group.name} (today's size)",
        more_cost=growth_est * COST_UNIT,
    )
    failed = report_failures(status1)
    specs2: list = []
    if sel.growth:
        best = best_from_stall(stall_by_point(spark, opts.work, specs1), group)
        g_blocks = growth_blocks(group, sel, best, scenarios, opts.mode)
        specs2 = with_kernel(specs_of(g_blocks, overrides, "plan"), opts.kernel)
        specs2 = [attrs.evolve(s, cost=s.cost * COST_UNIT) for s in specs2]
        status2 = run_sweep(
            specs2, opts.work, master=opts.master, label=f"plan {group.name} (growth)"
        )
        failed += report_failures(status2)
        import pandas as pd

        status1 = pd.concat([status1, status2], ignore_index=True)
        blocks = today + g_blocks
    else:
        blocks = today
    specs = specs1 + specs2
    _say(f"aggregating with Spark ({time.monotonic() - t0:.0f} s) ...")
    arrow = aggregate(
        spark,
        opts.work,
        run_ids=[s.run_id for s in specs],
        collect_windows=False,
        window_tables=False,
    )
    check_aggregate(specs, status1, arrow["runs"])
    points = arrow["points"].to_pandas()
    runs = arrow["runs"].to_pandas()
    limits = crossings(spark, opts.work, [s.run_id for s in specs])
    table = result_table(group, points, runs, limits)
    rank = ranking(table, group)
    replay = {s.run_id: replay_command(out, s) for s in specs}
    runs_out = runs.drop(columns=[c for c in runs.columns if c.startswith("_")]).copy()
    runs_out["scenario_file"] = runs_out["run_id"].map({s.run_id: s.scenario for s in specs})
    runs_out["replay"] = runs_out["run_id"].map(replay)
    runs_out = runs_out.merge(
        limits.pivot(index="run_id", columns="phase").pipe(_flat), on="run_id", how="left"
    )
    atomic_write_bytes(out / "runs.csv", runs_out.to_csv(index=False).encode())
    atomic_write_bytes(out / "points.csv", points.to_csv(index=False).encode())
    elapsed = time.monotonic() - t0
    knows = scenario_knows_kafka_version()
    provenance = [
        f"command: {opts.command}",
        f"{len(specs)} runs ({int((status1['status'] == 'skipped').sum())} reused from "
        f"{opts.work}), {failed} failed; wall time {elapsed:.0f} s including Spark's start "
        f"(estimated {_minutes(sel.estimate_s / cores + OVERHEAD_S)})",
        *produced_by(current_master()),
        f"mode {opts.mode.name}; {seeds_text(blocks)}",
        f"brokers: Kafka {group.broker_version}"
        + (
            ", passed to every run (kafka_version)"
            if knows
            else "; this simulator has no broker-version setting yet, so its one coordinator "
            "(Kafka's 4.0 line) ran every run"
        ),
        f"each run's scenario: {out / 'scenarios'}; each run's seed, scenario file, metrics and "
        f"replay command: {out / 'runs.csv'}; the group as planned: {out / 'group.toml'}",
    ]
    page = page_mod.PlanPage(
        title=f"Capacity plan: {group.name}",
        summary=describe_group(group),
        today=set_up(group).describe(),
        table=table,
        ranking=rank,
        changes={
            v.label: v.change
            for v in variants(group)
            if v.key != "today" and v.key in set(table["variant"])
        },
        fault_text=fault_text(group),
        session=session_of(group),
        deploy_down_s=group.deploy.down_s,
        assumed=group.assumed,
        facts=group.facts,
        left_out=sel.left_out,
        seeds_text=seeds_text(blocks),
        settings=settings_changed(group),
        provenance=provenance,
        replay=(
            "replay any run: "
            + (replay[specs[0].run_id] if specs else "")
            + " (each run's command is in runs.csv)"
        ),
    )
    report, said = page_mod.write(page, out)
    print(page_mod.terminal_text(page, said))
    print(f"\nreport: {report.resolve()}")
    return 1 if failed else 0


def _flat(frame):
    frame.columns = [f"{phase}_{col}" for col, phase in frame.columns]
    return frame.reset_index()


def _cores(spark) -> int:
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:
        import os

        return os.cpu_count() or 2


def dry_run(group: Group, opts: Options) -> int:
    """Say what the plan would run and how long it would take, without running it."""
    import os

    cores = os.cpu_count() or 2
    scenarios = opts.out / "scenarios"
    sel = select(group, opts.mode, cores, scenarios, opts.seeds, write=False)
    print(f"plan {group.name}: {describe_group(group)}")
    print(f"today: {set_up(group).describe()}")
    for v in variants(group)[1:]:
        print(f"alternative {v.key}: {v.change} (under {', '.join(v.faults)})")
    n1 = sum(len(b.seeds) for b in sel.today)
    print(f"{n1} runs at today's size; {seeds_text(sel.today)}")
    for f, which in sel.growth:
        who = (
            "today's set-up and the best alternative" if which == "today+best" else "today's set-up"
        )
        print(f"growth {f:g}x: {who}, {len(sel.growth_seeds)} seeds")
    for line in sel.left_out:
        print(f"not run: {line}")
    total = sel.estimate_s / cores + OVERHEAD_S
    print(f"estimated {_minutes(total)} on {cores} core(s) ({opts.mode.name} mode)")
    print(f"scenario files: {scenarios}")
    return 0
