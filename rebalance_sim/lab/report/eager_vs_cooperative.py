"""The main job's page (``rebalance_sim.lab.catalog.eager_vs_cooperative`` declares its grid): the
deploy's stall, the three protocols side by side, the headline at the largest size, figures and
the per-point and per-run tables.

The declaration passes its scales as data (``report(opts, results, scales)``), so this module
imports no declaration.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..engine.pipeline import Options, Page, Results
from ..vocabulary import (
    BUILTIN_FAULT_S,
    BUILTIN_JITTER_S,
    CLASSIC_ASSIGNORS,
    CONSUMER_PROFILE,
    MAIN_JOB_SCENARIOS,
    MAIN_JOB_VARIANTS,
)
from ..vocabulary import CONSUMER as CONSUMER_PROTOCOL
from .assignor_timing import time_assignors
from .headline import (
    HUMAN,
    best_eager,
    consumer_vs_classic,
    headline_table,
    human_columns,
    quote,
    rows_by_assignor,
    sentences,
    with_bands,
)

if TYPE_CHECKING:
    from ..engine.grid import RunSpec


def report(opts: Options, results: Results, scales) -> Page:
    """The page at ``opts.scale``; ``scales`` maps each scale's name to the declaration's ``Scale``
    (sizes, partitions_per_member, deploy_batch, all_eager_up_to, consumer_sizes, timing_shapes,
    ``seeds_text()`` and ``fault_at_s(members)``)."""
    import pandas as pd

    from ..atomic import atomic_write_bytes
    from . import plots
    from .html import Figure, Table

    scale = scales[opts.scale]
    out = Path(opts.out)
    specs = results.specs
    runs, points = results.tables["runs"], results.tables["points"]
    wq, windows = results.tables["window_quantiles"], results.tables["windows"]
    figures = _eager_vs_coop_figures(out, results, specs, points, windows, scale)
    timings = pd.DataFrame(time_assignors(CLASSIC_ASSIGNORS, scale.timing_shapes))
    atomic_write_bytes(out / "assignor_timing.csv", timings.to_csv(index=False).encode())
    figures.append(
        Figure(
            out / "assignment_time.png", plots.assignment_time(timings, out / "assignment_time.png")
        )
    )

    deploy = _deploy_table(points)
    atomic_write_bytes(out / "deploy.csv", deploy.to_csv(index=False).encode())
    deploy_lines = _deploy_statements(deploy)
    deploy_points = points[points["scenario"] == "rolling-deploy"]
    deploy_figures = [
        Figure(
            out / "deploy_stall.png", plots.deploy_stall(deploy_points, out / "deploy_stall.png")
        )
    ]
    headline = headline_table(points, max(scale.sizes))
    answers = sentences(headline)
    cp_size, cp_lines = three_protocols(points)
    atomic_write_bytes(out / "headline.csv", headline.to_csv(index=False).encode())
    matched = int(runs["intervals_match"].sum())
    intro = [
        "How long does a consumer group stall when it rebalances, and how much do the group "
        "protocol, the assignor and the membership type matter? Each run simulates one Kafka "
        "consumer group in virtual time, under Kafka's classic group protocol (client defaults: "
        "session.timeout.ms 45 s, heartbeat 3 s) with an eager or cooperative assignor, or under "
        f"the consumer group protocol (KIP-848, shown as {CONSUMER_PROTOCOL}: the coordinator "
        "assigns with its uniform assignor and reconciles each member on its own; broker defaults: "
        "heartbeat 5 s, session 45 s).",
        f"Grid: scenarios {', '.join(MAIN_JOB_SCENARIOS)} (rolling deploy = every member restarts once, "
        f"{scale.deploy_batch} of the group at a time, 10 s down, 20 s between batches); dynamic and static "
        f"(KIP-345) members; group sizes {', '.join(map(str, scale.sizes))} with "
        f"{scale.partitions_per_member} partitions per member (one topic, 100 records/s per partition); "
        f"assignors {', '.join(MAIN_JOB_VARIANTS)}"
        + (
            f" (roundrobin and sticky up to {scale.all_eager_up_to:,} members)"
            if scale.all_eager_up_to
            else ""
        )
        + f"; {scale.seeds_text()}. Each member processes up to "
        f"{CONSUMER_PROFILE['capacity']:.0f} records/s in poll batches of 500 records and reacts to a "
        "rebalance between batches; its rebalance listener costs "
        f"{CONSUMER_PROFILE['revoke_cost_ms']:.0f} ms per revoked and "
        f"{CONSUMER_PROFILE['assign_cost_ms']:.0f} ms per assigned partition.",
        "Rebalance time is the sum over the run's rebalance episodes of trigger-to-settled time "
        "(every partition owned by a live processing member, no rebalance pending). Unassigned "
        "partition-seconds sum, over partitions, the time no live member processed them. "
        "Stop-the-world is time during which the whole group processed nothing.",
        f"The consumer group protocol runs at group sizes "
        f"{', '.join(map(str, scale.consumer_sizes or scale.sizes))}"
        + ("" if scale.consumer_sizes is None else " of this grid")
        + (
            '; the section "Three protocols side by side" compares it with both classic protocols '
            f"at {cp_size:,} members, and `rebalance-sim experiment protocols` asks what moving to it "
            "buys across group sizes, partition counts and a slow member."
            if cp_size
            else "."
        ),
        "What a seed samples, as two real runs of one deployment differ: the members' start "
        "instants (spread over 5 s, so each member has its own auto-commit and poll phase), their "
        "member ids (random in Kafka; the range assignors order members by id), the link "
        "latencies (lognormal, median 2 ms) and the fault's instant, drawn within 15 s (a whole "
        "number of heartbeat and auto-commit intervals). Every figure is a median across seeds "
        "with its p10-p90 band; two figures whose bands overlap are called about the same.",
        f"The fault comes {BUILTIN_JITTER_S:g} s or less after {BUILTIN_FAULT_S:g} s, or after the "
        "consumer protocol has formed the group if that takes longer (its first member is "
        "assigned every partition, runs the assign callback for all of them, then revokes all but "
        "its share: about partitions x 60 ms); the same under every protocol. "
        + _fault_times(scale)
        + ".",
        "Caveats: after a SyncGroup the members of a classic group share their heartbeat phase "
        "(Kafka restarts the heartbeat timer on sync), so they learn of a rebalance at nearly the "
        f"same instant; the deploy restarts {scale.deploy_batch} of the group at a time (a "
        "one-at-a-time deploy of 1,000 members takes hours of simulated time and is not in the "
        "grid: run rolling-deploy with batch_size=1).",
    ]
    cols_runs = [
        "scenario",
        "membership",
        "members",
        "assignor",
        "seed",
        "rebalance_time_total_s",
        "rounds_total",
        "unassigned_partition_s",
        "unassigned_max_s",
        "stop_the_world_s",
        "throughput_loss_records",
        "records_reprocessed",
        "intervals_match",
    ]
    sections = [
        (
            "How long does the group stall during a full deploy?",
            [
                *deploy_figures,
                *deploy_lines,
                Table(
                    f"Rolling deploy of the whole group ({scale.deploy_batch} at a time): median across "
                    "seeds (p10-p90)",
                    with_bands(deploy),
                    csv="deploy.csv",
                ),
            ],
        ),
        *(
            [
                (
                    f"Three protocols side by side ({cp_size:,} members, median across seeds)",
                    [
                        "What does moving from the classic protocol to the consumer group protocol (KIP-848) "
                        "change? Each sentence puts the consumer protocol beside classic cooperative "
                        "(cooperative-sticky) and the classic eager assignor that stalls least.",
                        *cp_lines,
                    ],
                )
            ]
            if cp_lines
            else []
        ),
        (
            "Headline",
            [
                *answers,
                Table(
                    f"Median across seeds (p10-p90) at {max(scale.sizes):,} members: stall "
                    "first, then duration",
                    with_bands(headline),
                    csv="headline.csv",
                    note="unassigned partition-s: partitions x seconds with no member "
                    "processing them; stop-the-world s: time the whole group processed "
                    "nothing; records delayed: records produced meanwhile that waited; "
                    "records processed twice: processed again by a new owner after the "
                    "committed offset (auto-commit every 5 s; a crash loses up to that); "
                    "longest gap s: the longest single partition's wait; rebalance s: "
                    "trigger to settled, summed over the run's episodes.",
                ),
            ],
        ),
        ("Figures", figures),
        (
            "Per parameter point",
            [
                Table("Median (p10-p90) across seeds", _points_view(points), csv="points.csv"),
                Table(
                    "Unassigned windows per point (every seed)",
                    _windows_view(wq),
                    csv="window_quantiles.csv",
                    note="Percentiles are shown only over at least 100 windows; "
                    "with fewer, only the median and the max are meaningful.",
                ),
            ],
        ),
        (
            "Per run",
            [
                Table(
                    "Every run (first 40 rows)",
                    human_columns(runs[cols_runs].head(40)),
                    csv="runs.csv",
                    note=f"{matched} of {len(runs)} runs: unassigned partition-seconds and max "
                    "window recomputed by Spark from the intervals equal the simulator's summary.",
                )
            ],
        ),
    ]
    summary = (
        f"{matched}/{len(runs)} runs match the simulator's summaries\n"
        f"\nA full rolling deploy ({scale.deploy_batch} of the group at a time), median across seeds:\n"
        + "".join(f"  {line}\n" for line in deploy_lines)
        + f"\nAt {max(scale.sizes):,} members (median across seeds):\n"
        + "".join(f"- {line}\n" for line in answers)
        + (
            f"\nThree protocols at {cp_size:,} members (median across seeds):\n"
            + "".join(f"- {line}\n" for line in cp_lines)
            if cp_lines
            else ""
        )
        + "\n"
        + _text_table(headline)
    )
    return Page(intro, sections, summary=summary)


def _fault_times(scale) -> str:
    """When the fault comes, per group size."""
    times = [f"{scale.fault_at_s(m):g} s at {m:,} members" for m in scale.sizes]
    return "Fault from " + ", ".join(times)


def _deploy_table(points):
    """Per group size, membership and assignor: how long a full rolling deploy stalls the group
    (medians across seeds, with ``"<label> p10"`` / ``"<label> p90"`` bands)."""
    p, out = rows_by_assignor(
        points[points["scenario"] == "rolling-deploy"],
        ["members", "membership"],
        MAIN_JOB_VARIANTS,
        {"members": "members", "membership": "membership"},
    )
    for metric in DEPLOY_METRICS:
        label = HUMAN[metric]
        out[label] = p[f"{metric}_median"].astype(float)
        out[f"{label} p10"] = p[f"{metric}_p10"].astype(float)
        out[f"{label} p90"] = p[f"{metric}_p90"].astype(float)
    out[HUMAN["rounds_total"]] = p["rounds_total_median"].round().astype("Int64")
    return out.reset_index(drop=True)


DEPLOY_METRICS = (
    "unassigned_partition_s",
    "stop_the_world_s",
    "unassigned_max_s",
    "rebalance_time_total_s",
)


def _deploy_statements(deploy) -> list[str]:
    """One sentence per group size and membership: eager (range) vs cooperative
    (cooperative-sticky) and the consumer protocol, in the deploy's own numbers (medians with their
    p10-p90 bands)."""
    stall, stw, gap = (
        HUMAN["unassigned_partition_s"],
        HUMAN["stop_the_world_s"],
        HUMAN["unassigned_max_s"],
    )
    rebalance, rounds = HUMAN["rebalance_time_total_s"], HUMAN["rounds_total"]

    def cell(size, membership, assignor):
        row = deploy[
            (deploy["members"] == size)
            & (deploy["membership"] == membership)
            & (deploy["assignor"] == assignor)
        ]
        if row.empty:
            return None
        r = row.iloc[0]
        text = (
            f"{quote(r, stall)} unassigned partition-s, {quote(r, stw)} s with the whole group "
            f"stopped, longest partition gap {quote(r, gap)} s"
        )
        if r[rounds] == 0:
            return text + " (no rebalance round: members keep their partitions across the restart)"
        return text + f", {quote(r, rebalance)} s in rebalance episodes"

    lines = []
    for size in sorted(deploy["members"].unique()):
        for membership in ("dynamic", "static"):
            cells = [
                (name, cell(size, membership, a))
                for name, a in (
                    ("eager range", "range"),
                    ("cooperative-sticky", "cooperative-sticky"),
                    ("consumer protocol", CONSUMER_PROTOCOL),
                )
            ]
            lines.append(
                f"{size:,} {membership} members: "
                + "; ".join(f"{name} {c}" for name, c in cells if c is not None)
                + "."
            )
    return lines


def three_protocols(points) -> tuple[int | None, list[str]]:
    """At the largest group size the consumer group protocol ran: one sentence per scenario and
    membership, the consumer protocol against classic cooperative (cooperative-sticky) and the
    classic eager assignor that stalls least (medians across seeds)."""
    sizes = points.loc[points["assignor"] == CONSUMER_PROTOCOL, "members"]
    if sizes.empty:
        return None, []
    size = int(sizes.max())
    table = headline_table(points, size, order=(*CLASSIC_ASSIGNORS, CONSUMER_PROTOCOL))
    lines = []
    for (scenario, membership), g in table.groupby(["scenario", "members"], sort=False):
        g = g.set_index("assignor")
        eager = g[g.index.isin(CLASSIC_ASSIGNORS[:-1])]
        if CONSUMER_PROTOCOL not in g.index or "cooperative-sticky" not in g.index or eager.empty:
            continue
        best, name = best_eager(eager.reset_index())
        lines.append(
            f"{scenario}, {membership} members: "
            + consumer_vs_classic(
                g.loc[CONSUMER_PROTOCOL],
                g.loc["cooperative-sticky"],
                best,
                eager_name=name.replace("the best eager", "the best classic eager").replace(
                    "eager (", "classic eager ("
                ),
            )
        )
    return size, lines


def _points_view(points):
    """Per point, each metric as ``median (p10-p90)`` (points.csv has the max too)."""
    keep = ["scenario", "membership", "members", "assignor", "seeds"]
    metrics = (
        "unassigned_partition_s",
        "stop_the_world_s",
        "throughput_loss_records",
        "records_reprocessed",
        "unassigned_max_s",
        "rebalance_time_total_s",
        "rounds_total",
    )
    for m in metrics:
        keep += [f"{m}_median", f"{m}_p10", f"{m}_p90"]
    order = {a: i for i, a in enumerate(MAIN_JOB_VARIANTS)}
    view = points[keep].assign(_o=points["assignor"].map(order))
    view = view.sort_values(["scenario", "membership", "members", "_o"]).drop(columns="_o")
    view = view.rename(columns={f"{m}_median": HUMAN[m] for m in metrics})
    view = view.rename(
        columns={f"{m}_{s}": f"{HUMAN[m]} {s}" for m in metrics for s in ("p10", "p90")}
    )
    return with_bands(view.reset_index(drop=True))


def _windows_view(wq):
    """Window quantiles with the percentiles blanked where there are too few windows for them
    (a p99 over 2 windows is just the max)."""
    view = wq.copy()
    few = view["windows"] < 100
    for col in ("window_p90_s", "window_p99_s"):
        view[col] = view[col].astype(float).mask(few)
    return view.rename(
        columns={
            "window_p50_s": "median s",
            "window_p90_s": "p90 s",
            "window_p99_s": "p99 s",
            "window_max_s": "max s",
            "partitions_touched": "partitions touched",
        }
    )


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
    lines = [
        "  ".join(
            h.ljust(w) if t else h.rjust(w) for h, w, t in zip(headers, widths, text, strict=True)
        )
    ]
    lines += [
        "  ".join(c.ljust(w) if t else c.rjust(w) for c, w, t in zip(r, widths, text, strict=True))
        for r in rows
    ]
    return "\n".join(lines)


def _eager_vs_coop_figures(out, results, specs, points, windows, scale):
    from ..engine.grid import load_run_scenario
    from . import plots
    from .html import Figure

    figs = []
    small = min(scale.sizes)
    mid = sorted(scale.sizes)[len(scale.sizes) // 2]
    eager = _pick(
        specs, scenario="scale-out", assignor="range", membership="dynamic", members=small
    )
    coop = _pick(
        specs,
        scenario="scale-out",
        assignor="cooperative-sticky",
        membership="dynamic",
        members=small,
    )
    crashes = [
        _pick(specs, scenario="crash", assignor=a, membership="dynamic", members=mid)
        for a in MAIN_JOB_VARIANTS
    ]
    results.prefetch_intervals(s.run_id for s in (eager, coop, *crashes) if s is not None)
    if eager and coop:
        # the fault's instant in this seed's run (the same seed draws the same instant for both)
        trigger = load_run_scenario(eager).timeline_for_seed(eager.seed)[0].at_s
        ivs = [
            (f"eager: range, {small} members + 1 joining", results.intervals(eager.run_id)),
            (
                f"cooperative: cooperative-sticky, {small} members + 1 joining",
                results.intervals(coop.run_id),
            ),
        ]
        hi = max(float(iv["end"].max()) for _, iv in ivs)  # a run stops once the group settles
        figs.append(
            Figure(
                out / "ownership_timeline.png",
                plots.ownership_timeline(
                    ivs, out / "ownership_timeline.png", (trigger - 0.5, hi), trigger
                ),
            )
        )
    dyn = windows[windows["membership"] == "dynamic"]
    figs.append(
        Figure(
            out / "unassigned_cdf.png",
            plots.window_cdf(
                dyn, out / "unassigned_cdf.png", where=" (dynamic members, all sizes and seeds)"
            ),
        )
    )
    static = windows[windows["membership"] == "static"]
    if len(static):
        figs.append(
            Figure(
                out / "unassigned_cdf_static.png",
                plots.window_cdf(
                    static,
                    out / "unassigned_cdf_static.png",
                    where=" (static members, all sizes and seeds)",
                ),
            )
        )
    figs.append(
        Figure(
            out / "rebalance_time_vs_size.png",
            plots.metric_vs_size(
                points,
                "rebalance_time_total_s",
                "rebalance time (s)",
                out / "rebalance_time_vs_size.png",
                logy=False,
                caption="End-to-end rebalance time (sum over the run's episodes) vs group size: median across "
                "seeds, band up to the p90; where an assignor's line is hidden it coincides with another.",
            ),
        )
    )
    figs.append(
        Figure(
            out / "unassigned_vs_size.png",
            plots.metric_vs_size(
                points,
                "unassigned_partition_s",
                "unassigned partition-s (log)",
                out / "unassigned_vs_size.png",
                caption="Unassigned partition-seconds (partitions x seconds without a processing member) vs "
                "group size: median across seeds, band up to the p90; log axes.",
            ),
        )
    )
    curves = []
    first = None
    for assignor, s in zip(MAIN_JOB_VARIANTS, crashes, strict=True):
        if s is None:
            continue
        sc = load_run_scenario(s)
        first = first or sc
        rate = sc.config.topics[0].rate
        parts = sum(t.partitions for t in sc.config.topics)
        trig = sc.timeline_for_seed(s.seed)[0].at_s
        rb = points[
            (points["scenario"] == "crash")
            & (points["members"] == mid)
            & (points["membership"] == "dynamic")
        ]["rebalance_time_total_s_max"].max()
        t, y = plots.throughput_curve(
            results.intervals(s.run_id), rate, parts, trig - 5, trig + float(rb) + 10
        )
        curves.append((assignor, t, y))
    if curves:
        total = first.config.topics[0].rate * sum(t.partitions for t in first.config.topics)
        figs.append(
            Figure(
                out / "throughput.png",
                plots.throughput(
                    curves,
                    out / "throughput.png",
                    total,
                    first.timeline_for_seed(0)[0].at_s,
                    f"one member of {mid} crashes (dynamic members, seed 0)",
                ),
            )
        )
    return figs


def _pick(specs: list[RunSpec], **point) -> RunSpec | None:
    for s in specs:
        p = dict(s.point)
        if s.seed == point.get("seed", 0) and all(
            p.get(k) == v for k, v in point.items() if k != "seed"
        ):
            return s
    return None
