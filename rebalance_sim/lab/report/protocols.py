"""The protocols experiment's page (``rebalance_sim.lab.catalog.protocols`` declares its grid): what
moving a group to the consumer group protocol (KIP-848) buys and where it costs more, in sentences
whose numbers are those of its own table, then the mechanisms (migration, heartbeat interval,
assignment work, cold start), figures and tables.

The declaration passes its scales as data (``report(opts, results, scales)``), so this module
imports no declaration.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..engine.pipeline import Options, Page, Results
from ..vocabulary import (
    CLASSIC_HEARTBEAT_MS,
    CONSUMER,
    CONSUMER_HEARTBEAT_MS,
    CONSUMER_PROFILE,
    COOPERATIVE,
    DEPLOY_BATCH,
    EAGER,
    LOOP_EVENTS,
    MIGRATION,
    MIGRATION_FROM,
    PROTOCOLS,
    SLOW_POLL_S,
)
from ..vocabulary import PROTOCOLS_SCENARIOS as SCENARIOS
from .headline import HUMAN, consumer_vs_classic, human_columns, num, quote, same, with_bands

# (label, points column): the metrics a sentence quotes, stall first.
STALL = "unassigned_partition_s_median"
DELAYED = "throughput_loss_records_median"
REPROCESSED = "records_reprocessed_median"
SETTLE = "rebalance_time_total_s_median"
GAP = "unassigned_max_s_median"
STW = "stop_the_world_s_median"
ASSIGN = "leader_assign_s_median"
BANDED = (STALL, REPROCESSED, SETTLE)
HAZARD = "kafka_hazard_double_ownership_partition_s_median"
HAZARD_LABEL = "double-owned partition-s (Kafka hazard)"


# The point columns of every run: the main grids' and the 4.0-vs-4.3 grid's (``grid``).
KEYS = ["scenario", "assignor", "members", "partitions", "heartbeat_ms", "kafka_version", "grid"]


def main_grid(frame):
    """The rows of the protocol comparison (4.3's coordinator), without the 4.0-vs-4.3 grid."""
    return frame[frame["grid"] == "main"] if "grid" in frame.columns else frame


def comparison_table(points, assign=None):
    """One row per (scenario, members, partitions, protocol) at each protocol's default heartbeat
    interval, with the metrics the answer quotes (medians across seeds)."""
    import pandas as pd

    points = main_grid(points)
    p = points[
        points["heartbeat_ms"]
        == points["assignor"].map(
            lambda a: CONSUMER_HEARTBEAT_MS if a == CONSUMER else CLASSIC_HEARTBEAT_MS
        )
    ].copy()
    if assign is not None:
        p = p.merge(assign, on=[k for k in KEYS if k in p.columns], how="left")
    else:
        for col in (ASSIGN, "assignments_median", "formation_s_median"):
            p[col] = float("nan")
        p["episodes_min"] = 1
    rank = {a: i for i, a in enumerate(PROTOCOLS)}
    srank = {s: i for i, s in enumerate((*SCENARIOS, MIGRATION))}
    p = p.assign(_s=p["scenario"].map(srank), _o=p["assignor"].map(rank))
    p = p.sort_values(["_s", "members", "partitions", "_o"])
    table = pd.DataFrame(
        {
            "scenario": p["scenario"],
            "members": p["members"],
            "partitions": p["partitions"],
            "protocol": p["assignor"],
            "seeds": p["seeds"],
            HUMAN["unassigned_partition_s"]: p[STALL].astype(float),
            HUMAN["throughput_loss_records"]: p[DELAYED].astype(float),
            HUMAN["records_reprocessed"]: p[REPROCESSED].astype(float),
            HUMAN["unassigned_max_s"]: p[GAP].astype(float),
            HUMAN["stop_the_world_s"]: p[STW].astype(float),
            HUMAN["rebalance_time_total_s"]: p[SETTLE].astype(float),
            "assignment s": p[ASSIGN].astype(float),
            "assignments": p["assignments_median"].astype(float),
            "formation s": p["formation_s_median"].astype(float),
            "fault counted": p["episodes_min"].fillna(0).astype(int) >= 1,
        }
    )
    # the p10-p90 band across seeds of the metrics the sentences compare (headline.same)
    for col in BANDED:
        metric = col.removesuffix("_median")
        for stat in ("p10", "p90"):
            table[f"{HUMAN[metric]} {stat}"] = p[f"{metric}_{stat}"].astype(float)
    return table.reset_index(drop=True)


def answer_sentences(table) -> list[str]:
    """One sentence per scenario, at the largest group size and the most partitions run: the
    consumer protocol against classic cooperative and classic eager, stall first (unassigned
    partition-seconds, records delayed and reprocessed), then time to settle."""
    out = []
    for scenario in SCENARIOS:
        t = table[table["scenario"] == scenario]
        if t.empty:
            continue
        members = t["members"].max()
        t = t[t["members"] == members]
        partitions = t["partitions"].max()
        t = t[t["partitions"] == partitions].set_index("protocol")
        if not set(PROTOCOLS) <= set(t.index):
            continue
        out.append(
            f"{scenario} ({members:,} members, {partitions:,} partitions): "
            + consumer_vs_classic(t.loc[CONSUMER], t.loc[COOPERATIVE], t.loc[EAGER])
        )
    return out


def migration_sentence(table) -> str | None:
    """The online migration at the largest size run: its stall from each classic protocol beside
    the same rolling deploy without the protocol change, and under the consumer protocol."""
    t = table[table["scenario"].isin((MIGRATION, "rolling-deploy"))]
    mig = t[t["scenario"] == MIGRATION]
    if mig.empty:
        return None
    members = mig["members"].max()
    partitions = mig[mig["members"] == members]["partitions"].min()
    t = t[(t["members"] == members) & (t["partitions"] == partitions)]
    deploy = t[t["scenario"] == "rolling-deploy"].set_index("protocol")
    mig = t[t["scenario"] == MIGRATION].set_index("protocol")
    if not (set(MIGRATION_FROM) <= set(mig.index) and set(PROTOCOLS) <= set(deploy.index)):
        return None
    label, settle = HUMAN["unassigned_partition_s"], HUMAN["rebalance_time_total_s"]

    def q(row):
        return f"{quote(row, label)} unassigned partition-seconds, {quote(row, settle)} s to settle"

    def against(m, d):
        # Only a difference outside the seeds' p10-p90 bands is stated as one.
        if same(m, d, label):
            return "about the same stall as that deploy without the change"
        r = float(m[label]) / float(d[label]) if float(d[label]) else float("inf")
        return f"{r:.1f}x {'more' if r > 1 else 'less'} stall than that deploy without the change"

    moves = "; ".join(
        f"from classic {name} {q(mig.loc[p])} ({against(mig.loc[p], deploy.loc[p])})"
        for name, p in (("cooperative", COOPERATIVE), ("eager", EAGER))
    )
    return (
        f"Migrating onto the consumer protocol ({members:,} members, {partitions:,} partitions, "
        "medians with their p10-p90 band across seeds: the rolling deploy whose members come back "
        "with group.protocol=consumer; the coordinator converts the group when the first of them "
        f"joins and serves the rest as classic members): {moves}. The same deploy without the "
        f"change: classic cooperative {q(deploy.loc[COOPERATIVE])}, classic eager "
        f"{q(deploy.loc[EAGER])}, consumer protocol {q(deploy.loc[CONSUMER])}."
    )


# The metrics on which "costs more" is judged, with the smallest difference that counts (a third
# of a record reprocessed is not a cost).
COST_FLOORS = (
    ("unassigned_partition_s", 1.0),
    ("records_reprocessed", 1.0),
    ("rebalance_time_total_s", 0.1),
)


def costs_more(table) -> list[tuple]:
    """Where the consumer protocol is worse than the better classic protocol (by more than 5% and
    the metric's floor, and outside that protocol's p10-p90 band), at every size and partition
    count run: (scenario, members, partitions, metric label, consumer, best classic)."""
    rows = []
    for (scenario, members, partitions), g in table.groupby(
        ["scenario", "members", "partitions"], sort=False
    ):
        g = g.set_index("protocol")
        if not set(PROTOCOLS) <= set(g.index):
            continue
        for metric, floor in COST_FLOORS:
            label = HUMAN[metric]
            c = float(g.loc[CONSUMER, label])
            other = min((EAGER, COOPERATIVE), key=lambda p: float(g.loc[p, label]))
            best = float(g.loc[other, label])
            if (
                c > best * 1.05
                and c - best >= floor
                and not same(g.loc[CONSUMER], g.loc[other], label)
            ):
                rows.append((scenario, int(members), int(partitions), label, c, best))
    return rows


def costs_more_sentence(rows, points_run: int) -> str:
    """``rows`` from ``costs_more`` in one sentence: per metric, how many of the ``points_run``
    (scenario, size, partitions) points, which scenarios, and the worst case."""
    if not rows:
        return (
            "Where it costs more: nowhere in this grid; the consumer protocol is never more than 5% "
            "worse than the better classic protocol on unassigned partition-seconds, records "
            "reprocessed or time to settle."
        )
    by_metric: dict[str, list] = {}
    for scenario, members, partitions, label, c, best in rows:
        by_metric.setdefault(label, []).append((scenario, members, partitions, c, best))
    parts = []
    for label, items in by_metric.items():
        worst = max(items, key=lambda r: (r[4] > 0, r[3] / r[4] if r[4] > 0 else r[3] - r[4]))
        scen = sorted({r[0] for r in items}, key=SCENARIOS.index)
        parts.append(
            f"{label} in {len(items)} of {points_run} points ({', '.join(scen)}; worst: "
            f"{worst[0]} at {worst[1]:,} members x {worst[2]:,} partitions, {num(worst[3])} vs "
            f"{num(worst[4])})"
        )
    return (
        "Where it costs more than the better classic protocol (by more than 5%): "
        + "; ".join(parts)
        + "."
    )


def heartbeat_sentence(points) -> str | None:
    """How the consumer protocol's time to settle moves with its heartbeat interval."""
    p = points[(points["assignor"] == CONSUMER)]
    hb = p.groupby(["scenario", "members", "partitions"])["heartbeat_ms"].nunique()
    keys = hb[hb > 1].index
    if len(keys) == 0:
        return None
    parts = []
    for scenario, members, partitions in keys:
        g = p[
            (p["scenario"] == scenario)
            & (p["members"] == members)
            & (p["partitions"] == partitions)
        ].sort_values("heartbeat_ms")
        values = ", ".join(
            f"{r[SETTLE]:.1f} s at {r['heartbeat_ms'] / 1000:g} s" for _, r in g.iterrows()
        )
        parts.append(f"{scenario} at {members:,} members settles in {values}")
    return (
        "The heartbeat interval paces reconciliation: a member learns its new target, and the "
        "coordinator its revocations, only at heartbeats (acknowledgements are sent at once). "
        "Under the consumer protocol, "
        + "; ".join(parts)
        + " (group.consumer.heartbeat.interval.ms; "
        "the default is 5 s)."
    )


def assignment_sentence(table) -> str | None:
    """Where the server-side assignment runs and how often, at the largest group."""
    t = table[table["assignments"].notna()]
    if t.empty:
        return None
    members = t["members"].max()
    t = t[(t["members"] == members) & (t["scenario"] == "rolling-deploy")]
    if t.empty:
        return None
    partitions = t["partitions"].max()
    t = t[t["partitions"] == partitions].set_index("protocol")
    if not set(PROTOCOLS) <= set(t.index):
        return None
    c, k, e = t.loc[CONSUMER], t.loc[COOPERATIVE], t.loc[EAGER]
    return (
        f"Assignment work: in a rolling deploy of {members:,} members x {partitions:,} partitions the "
        f"coordinator computes a target assignment {c['assignments']:.0f} times "
        f"({c['assignment s']:.2f} s of simulated assignor time; every join or leave bumps the group "
        f"epoch) where the classic leader assigns {k['assignments']:.0f} times under cooperative "
        f"({k['assignment s']:.2f} s) and {e['assignments']:.0f} under eager ({e['assignment s']:.2f} s). "
        "Each computation costs what Kafka's own assignor takes on that input (assignor_cost=kafka: "
        "the work Kafka's code does on it, priced per operation as Kafka's classes take it on a "
        "2-vCPU VM with JDK 17, warm); under the consumer protocol the coordinator answers no "
        "heartbeat of the group while it computes."
    )


def formation_sentence(table) -> str | None:
    """Forming the group from nothing at the largest size and most partitions (the simulator's
    ``formation_s``): the consumer protocol has no initial rebalance delay."""
    t = table[table["formation s"].notna()]
    if t.empty:
        return None
    t = t[t["members"] == t["members"].max()]
    t = t[(t["partitions"] == t["partitions"].max()) & (t["scenario"] == t["scenario"].iloc[0])]
    t = t.set_index("protocol")
    if not set(PROTOCOLS) <= set(t.index):
        return None
    c, k, e = (float(t.loc[p, "formation s"]) for p in (CONSUMER, COOPERATIVE, EAGER))
    members, partitions = int(t["members"].iloc[0]), int(t["partitions"].iloc[0])
    return (
        f"Cold start: forming a group of {members:,} members x {partitions:,} partitions takes "
        f"{c:.1f} s under the consumer protocol vs {k:.1f} s (cooperative) and {e:.1f} s (eager). "
        "Under the consumer protocol the first member to join is assigned every partition at once "
        "(there is no group.initial.rebalance.delay.ms) and must finish onPartitionsAssigned for "
        f"all of them ({CONSUMER_PROFILE['assign_cost_ms']:.0f} ms each here) before it can hand any "
        "over, unless the callback outlasts max.poll.interval.ms (300 s): then the member leaves the "
        "group, the others take its partitions, and it rejoins when the callback returns; the "
        "classic coordinator waits 3 s for more members before the first assignment."
    )


def report(opts: Options, results: Results, scales) -> Page:
    """The page at ``opts.scale``; ``scales`` maps each scale's name to the declaration's ``Scale``
    (sizes, partitions_per_member, more_partitions_up_to, consumer_up_to, heartbeat_size,
    heartbeat_ms and ``seeds_text()``)."""
    from ..atomic import atomic_write_bytes
    from ..engine.aggregate import assignment_time
    from . import plots
    from .html import Figure, Table

    scale = scales[opts.scale]
    out = Path(opts.out)
    points, runs = results.tables["points"], results.tables["runs"]
    assign_runs = (
        assignment_time(results.raw("events"), results.raw("episodes")).toArrow().to_pandas()
    )
    keys = [k for k in KEYS if k in runs.columns]
    per_run = (
        runs[["run_id", *keys, "formation_s", "episodes"]]
        .merge(assign_runs, on="run_id", how="left")
        .fillna({"leader_assign_s": 0.0, "assignments": 0})
    )
    assign = per_run.groupby(keys, as_index=False).agg(
        leader_assign_s_median=("leader_assign_s", "median"),
        assignments_median=("assignments", "median"),
        formation_s_median=("formation_s", "median"),
        episodes_min=("episodes", "min"),
    )
    full = comparison_table(points, assign)
    atomic_write_bytes(out / "protocols.csv", full.to_csv(index=False).encode())
    # A fault that came before the group had formed joins the formation, which no metric counts:
    # such points would read "no stall". They are left out of every sentence, and said so.
    table = full[full["fault counted"]]
    lost = full[~full["fault counted"]]
    answers = answer_sentences(table)
    more = costs_more(table)
    points_run = len(table.groupby(["scenario", "members", "partitions"]))
    mechanisms = [
        s
        for s in (
            migration_sentence(table),
            heartbeat_sentence(main_grid(points)),
            assignment_sentence(table),
            formation_sentence(full),
            hazard_sentence(points),
        )
        if s
    ]
    if len(lost):
        mechanisms.insert(
            0,
            "Left out: "
            + "; ".join(
                f"{r.scenario} / {r.protocol} at {r.members:,} members x {r.partitions:,} partitions"
                for r in lost.itertuples()
            )
            + ": the fault came before the group had formed (formation "
            f"took up to {lost['formation s'].max():.0f} s), so no episode measures it.",
        )
    biggest = full[(full["members"] == full["members"].max())]
    biggest = biggest[biggest["partitions"] == biggest["partitions"].max()]

    versions_ids = (
        runs.loc[runs["grid"] == "versions", "run_id"].tolist() if "grid" in runs.columns else []
    )
    ends = run_ends(results, versions_ids).merge(per_run, on="run_id", how="left")
    versions = versions_table(points, ends)
    upgrade = versions_sentences(versions)
    if len(versions):
        atomic_write_bytes(out / "versions.csv", versions.to_csv(index=False).encode())
    figs = []
    points = main_grid(points)
    main = points[
        points["heartbeat_ms"]
        == points["assignor"].map(
            lambda a: CONSUMER_HEARTBEAT_MS if a == CONSUMER else CLASSIC_HEARTBEAT_MS
        )
    ].copy()
    main["membership"] = main["partitions"] // main["members"]
    main["membership"] = main["membership"].map(lambda v: f"{v} partitions per member")
    for metric, label, logy, name in (
        ("unassigned_partition_s", "unassigned partition-s (log)", True, "unassigned_vs_size.png"),
        ("rebalance_time_total_s", "time to settle (s)", False, "settle_vs_size.png"),
        ("records_reprocessed", "records reprocessed", False, "reprocessed_vs_size.png"),
    ):
        figs.append(
            Figure(
                out / name,
                plots.metric_vs_size(
                    main,
                    metric,
                    label,
                    out / name,
                    logy=logy,
                    row_suffix="",
                    caption=f"{HUMAN[metric].capitalize()} vs group size per protocol: median across seeds, band "
                    "from the p10 to the p90; rows: partitions per member. range = classic eager, "
                    f"cooperative-sticky = classic cooperative, {CONSUMER} = consumer protocol.",
                ),
            )
        )

    intro = [
        "What does moving a consumer group from Kafka's classic group protocol to the consumer group "
        "protocol (KIP-848, group.protocol=consumer) buy, and where does it cost more? Each run "
        "simulates one group in virtual time under classic eager (range), classic cooperative "
        "(cooperative-sticky) or the consumer protocol (the coordinator's uniform assignor, "
        f"shown as {CONSUMER}).",
        *answers,
        costs_more_sentence(more, points_run),
        *mechanisms,
        *upgrade,
    ]
    grid_text = (
        f"Grid: scenarios {', '.join(SCENARIOS)} with dynamic members, and {MIGRATION} (the rolling deploy "
        "onto the consumer protocol, from classic eager and classic cooperative, at the first partition "
        "count); group sizes "
        f"{', '.join(f'{s:,}' for s in scale.sizes)}; "
        f"{' and '.join(map(str, scale.partitions_per_member))} partitions per member"
        + (
            ""
            if scale.more_partitions_up_to is None
            or scale.more_partitions_up_to >= max(scale.sizes)
            else f" ({scale.partitions_per_member[0]} only above {scale.more_partitions_up_to:,} members)"
        )
        + " (one topic, 100 records/s per partition)"
        + (
            ""
            if scale.consumer_up_to is None or scale.consumer_up_to >= max(scale.sizes)
            else f"; the consumer protocol, and {MIGRATION}, up to {scale.consumer_up_to:,} members "
            "(above, every joining member's heartbeat computes a target assignment at the model "
            "cost, joins come faster than the coordinator computes them, and the group does not "
            "form within the run)"
        )
        + f"; {scale.seeds_text()}: a seed samples "
        "the members' start instants (spread over 5 s), their member ids, the link latencies "
        "(lognormal, median 2 ms) and the fault's instant (within 15 s); figures are medians "
        "across seeds with their p10-p90 bands, and bands that overlap are called about the same. "
        "Every member processes up to 500 records/s in poll batches of 500 records and reacts to a "
        "rebalance between batches; its rebalance listener costs 10 ms per revoked and 50 ms per "
        "assigned partition (the main job's consumer). The rolling deploy restarts "
        f"{DEPLOY_BATCH} of the group at a time, 10 s down, 20 s between batches. slow-member: one "
        f"member joins while the second member's poll loop takes {SLOW_POLL_S:g} s per batch "
        "(max.poll.interval.ms stays 300 s), so it acts on a rebalance up to that late. Each fault "
        "comes within 15 s after 60 s, or after the consumer protocol has formed the group if that "
        "takes longer (about partitions x 60 ms, see Cold start), later by a multiple of 15 s; every "
        "protocol's group has formed first. Client "
        f"defaults under the classic protocol (heartbeat {CLASSIC_HEARTBEAT_MS / 1000:g} s, session 45 s), "
        f"broker defaults under the consumer protocol (heartbeat {CONSUMER_HEARTBEAT_MS / 1000:g} s, "
        "session 45 s); the consumer protocol also runs with a heartbeat of "
        f"{', '.join(f'{h / 1000:g}' for h in scale.heartbeat_ms)} s at {scale.heartbeat_size:,} members "
        "(scale-out and rolling deploy). Assignment time: Kafka's own assignors' time on each input "
        "(assignor_cost=kafka; a warm JVM, as measured on a 2-vCPU VM with JDK 17)."
    )
    defs = (
        "Unassigned partition-s: partitions x seconds with no live member processing them. "
        "Records delayed: records produced meanwhile (they wait). Records processed twice: records a new "
        "owner processes again because the previous owner's progress was not committed. Longest gap: "
        "the longest single partition's wait. Stop-the-world: time the whole group processed "
        "nothing. Time to settle (rebalance s): trigger to settled (every partition owned by a live "
        "processing member, nothing pending), summed over the run's episodes. Assignment s / "
        "assignments: simulated time and number of assignment computations inside the episodes. "
        "Formation s: from the start until the new group first settled. Fault counted: every "
        "seed's fault came after formation (else the point is left out of the sentences)."
    )
    sections: list[tuple[str, Sequence[Any]]] = [
        (
            "The answer at the largest size",
            [
                Table(
                    f"{biggest['members'].max():,} members x {biggest['partitions'].max():,} partitions, "
                    "median across seeds (p10-p90)",
                    with_bands(biggest.reset_index(drop=True)),
                    csv="protocols.csv",
                    note=defs,
                )
            ],
        ),
        ("How this was set up", [grid_text]),
        ("Figures", figs),
        (
            "Every size and partition count",
            [
                Table(
                    "Median across seeds (p10-p90), each protocol at its default heartbeat",
                    with_bands(full),
                    csv="protocols.csv",
                )
            ],
        ),
        (
            "Upgrading the brokers: Kafka 4.0's group coordinator against 4.3's",
            [
                "Every run above is under Kafka 4.3's group coordinator (kafka_version=4.3, the "
                "default). These runs put the consumer protocol under both releases where they "
                "differ: 4.3 computes a group's target at most once per "
                "group.consumer.assignment.interval.ms (1 s, KIP-1263), takes back a fenced "
                "member that rejoins with epoch 0 (KAFKA-19233), accepts commits by assignment "
                "epoch (KIP-1251). slow-assignor takes 20 s per target. Formation: from the start until "
                "the group first settled. " + bounded_text(scale.versions_bounded),
                *upgrade,
                Table(
                    "Consumer protocol under Kafka 4.0 and 4.3 (median across seeds)",
                    versions,
                    csv="versions.csv",
                ),
            ]
            if len(versions)
            else ["(no 4.0-vs-4.3 runs at this scale)"],
        ),
        (
            "Consumer protocol: heartbeat interval",
            [
                Table(
                    "Consumer protocol runs by heartbeat interval (median across seeds)",
                    _heartbeat_view(points),
                    csv="points.csv",
                )
            ],
        ),
    ]
    matched = int(runs["intervals_match"].sum())
    meta = [
        f"{matched} of {len(runs)} runs: unassigned partition-seconds and max window recomputed by "
        "Spark from the intervals equal the simulator's summary"
    ]
    summary = "\n".join(
        f"- {line}"
        for line in (*answers, costs_more_sentence(more, points_run), *mechanisms, *upgrade)
    )
    return Page(intro, sections, meta=meta, summary=summary)


def run_ends(results: Results, run_ids: Sequence[str]):
    """Per run of ``run_ids`` (pandas): whether it ended settled (``settled``), its time limit
    (``time_limit_s``, the scenario's max_duration_s), and over the whole run, formation included:
    the highest group epoch its events name (``group_epochs``), the target assignments the
    coordinator computed (``targets``) and the heartbeats it fenced for a stale member epoch
    (``fenced``)."""
    import pandas as pd
    from pyspark.sql import functions as F

    from sim.observe.events import EventKind

    columns = ["run_id", "settled", "time_limit_s", "group_epochs", "targets", "fenced"]
    if not len(run_ids):
        return pd.DataFrame(columns=columns)
    ids = list(run_ids)
    ends = (
        results.raw("runs")
        .where(F.col("run_id").isin(ids))
        .select(
            "run_id",
            F.col("`summary.settled_at_end`").cast("boolean").alias("settled"),
            F.col("`config.max_duration_s`").cast("double").alias("time_limit_s"),
        )
    )

    def count(kind: str):
        return F.sum((F.col("kind") == str(kind)).cast("long"))

    loops = (
        results.raw("events")
        .where(F.col("run_id").isin(ids) & F.col("kind").isin(*LOOP_EVENTS))
        .groupBy("run_id")
        .agg(
            F.max("generation").cast("double").alias("group_epochs"),
            count(EventKind.TARGET_ASSIGNMENT).alias("targets"),
            count(EventKind.FENCED_EPOCH).alias("fenced"),
        )
    )
    return ends.join(loops, "run_id", "left").toPandas()[columns]


def versions_table(points, ends):
    """The 4.0-vs-4.3 grid: one row per (scenario, members, partitions, release), medians across
    seeds; ``ends`` holds its runs (``run_ends`` with their point, formation and assignments).
    Where no seed settled, the formation and the episodes' metrics are left empty: the group
    never formed, so nothing measures them (the sentence says how far it went)."""
    import pandas as pd

    if "grid" not in points.columns or ends.empty:
        return pd.DataFrame()
    keys = [k for k in KEYS if k in points.columns]
    runs = ends.assign(settled=ends["settled"].astype(bool))
    by_point = runs.groupby(keys, as_index=False).agg(
        settled=("settled", "sum"),
        time_limit_s=("time_limit_s", "max"),
        group_epochs=("group_epochs", "median"),
        targets=("targets", "median"),
        fenced=("fenced", "median"),
    )
    # the formation of the runs whose group formed
    formed = (
        runs[runs["settled"]]
        .groupby(keys, as_index=False)
        .agg(
            formation_s_median=("formation_s", "median"),
            assignments_median=("assignments", "median"),
            leader_assign_s_median=("leader_assign_s", "median"),
        )
    )
    p = (
        points[points["grid"] == "versions"]
        .merge(by_point, on=keys, how="left")
        .merge(formed, on=keys, how="left")
    )
    p = p.sort_values(["scenario", "members", "kafka_version"])
    none = p["settled"].fillna(0) == 0

    def measured(col):
        values = p[col].astype(float)
        return values.where(~none)

    def count(col):
        # a median of counts, across an odd number of seeds in every scale: a count
        return p[col].astype(float).round().astype("Int64")

    return pd.DataFrame(
        {
            "scenario": p["scenario"],
            "members": p["members"],
            "partitions": p["partitions"],
            "Kafka": p["kafka_version"],
            "seeds": p["seeds"],
            "settled": p["settled"].fillna(0).astype(int),
            "time limit s": p["time_limit_s"].astype(float),
            "formation s": p["formation_s_median"].astype(float),
            HUMAN["rebalance_time_total_s"]: measured(SETTLE),
            HUMAN["unassigned_partition_s"]: measured(STALL),
            HUMAN["records_reprocessed"]: measured(REPROCESSED),
            "assignments": p["assignments_median"].astype(float),
            "assignment s": p["leader_assign_s_median"].astype(float),
            "group epochs": count("group_epochs"),
            "target computations": count("targets"),
            "fenced heartbeats": count("fenced"),
            HAZARD_LABEL: p[HAZARD].astype(float),
        }
    ).reset_index(drop=True)


def bounded_text(bounded) -> str:
    """The versions section's words on its bounded cells (``Scale.versions_bounded``)."""
    if not bounded:
        return "Every run of this grid must settle."
    cells = "; ".join(
        f"{label} at {members:,} members"
        + (f", run to {bound_s:g} s" if bound_s is not None else ", run to its own time limit")
        for label, members, bound_s in bounded
    )
    return (
        f"Bounded cells ({cells}): Kafka 4.0's coordinator keeps that group from settling, so "
        "both releases run it to a bound of simulated time; a 4.0 run that ends there unsettled "
        "is the expected outcome (counted apart under How this was produced, where any other "
        "invariant violation would be listed), and a 4.3 run must settle like every other run. "
        "settled: the seeds whose group had settled at the end; group epochs, target "
        "computations and fenced heartbeats count the whole run, formation included."
    )


def hazard_sentence(points) -> str | None:
    """Where Kafka's double-ownership hazard of issue 34 happened (a member's full heartbeat
    during onPartitionsAssigned reports the partitions it owned before the callback; the
    coordinator gives the others away while it processes them), from the points' maxima."""
    col = "kafka_hazard_double_ownership_partition_s_max"
    if col not in points.columns:
        return None
    hit = points[points[col] > 0]
    if hit.empty:
        return (
            "Kafka's double-ownership hazard (a full heartbeat sent while onPartitionsAssigned "
            "runs reports the partitions owned before the callback, and the coordinator gives "
            "the new ones away) happened in no run."
        )
    where = "; ".join(
        f"{r.scenario} / {r.assignor} at {r.members:,} members under Kafka {r.kafka_version}: "
        f"up to {num(r[col])} partition-s, "
        f"{num(r.kafka_hazard_records_processed_twice_max)} records processed by two members"
        for _, r in hit.iterrows()
    )
    return (
        "Kafka's double-ownership hazard (a full heartbeat sent while onPartitionsAssigned runs "
        "reports the partitions owned before the callback, since the client updates its "
        "assignment only after the callbacks; the coordinator gives them away while the member "
        f"processes them until its next reconciliation): {where}. It is Kafka's behaviour, "
        "counted apart from the simulator's invariants."
    )


def versions_sentences(table) -> list[str]:
    """What upgrading the brokers from 4.0 to 4.3 buys, per scenario and size of the grid, in
    the numbers of its table."""
    out: list[str] = []
    if table.empty:
        return out
    settle, stall = HUMAN["rebalance_time_total_s"], HUMAN["unassigned_partition_s"]
    for (scenario, members), rows in table.groupby(["scenario", "members"], sort=False):
        by = {r["Kafka"]: r for _, r in rows.iterrows()}
        if set(by) != {"4.0", "4.3"}:
            continue
        old, new = by["4.0"], by["4.3"]
        if "settled" in rows.columns and (old["settled"] == 0 or new["settled"] == 0):
            out.append(_unsettled_sentence(scenario, members, old, new))
            continue
        text = (
            f"{scenario} at {members:,} members under the consumer protocol: the group forms in "
            f"{num(new['formation s'])} s under Kafka 4.3's group coordinator against "
            f"{num(old['formation s'])} s under 4.0's"
        )
        if old["assignments"] > 0 and new["assignments"] > 0:
            text += (
                f"; then {scenario} settles in {num(new[settle])} s against {num(old[settle])} s, "
                f"with {num(new[stall])} against {num(old[stall])} unassigned partition-s and "
                f"{num(new['assignments'])} against {num(old['assignments'])} target computations."
            )
        else:
            late = "4.0" if old["assignments"] == 0 else "4.3"
            text += (
                f"; under {late} the group had not formed when {scenario}'s timeline action came, so no "
                "episode measures it (the formation holds the difference)."
            )
        out.append(text)
    return out


def _unsettled_sentence(scenario: str, members: int, old, new) -> str:
    """A (scenario, size) where a release's group never settled within the run: how far it went
    (group epochs, target computations, fenced heartbeats), against the other release."""

    def went(row) -> str:
        return (
            f"did not settle in {num(row['time limit s'])} s (none of {int(row['seeds'])} "
            f"seeds; a median run went through {num(row['group epochs'])} group epochs and "
            f"{num(row['target computations'])} target computations, and the coordinator fenced "
            f"{num(row['fenced heartbeats'])} heartbeats)"
        )

    def settled(row) -> str:
        some = (
            ""
            if row["settled"] == row["seeds"]
            else f" in {int(row['settled'])} of {int(row['seeds'])} seeds"
        )
        return (
            f"the group forms in {num(row['formation s'])} s and {scenario} settles in "
            f"{num(row[HUMAN['rebalance_time_total_s']])} s{some}, with "
            f"{num(row['target computations'])} target computations"
        )

    text = f"{scenario} at {members:,} members under the consumer protocol: "
    if old["settled"] == 0 and new["settled"] == 0:
        return (
            text
            + f"under Kafka 4.0's group coordinator it {went(old)}; under 4.3's it {went(new)}."
        )
    if old["settled"] == 0:
        return (
            text + f"under Kafka 4.0's group coordinator the group {went(old)}: a member "
            "fenced for a stale epoch rejoins with epoch 0 and is fenced again, while every "
            f"join waits behind a target computation. Under 4.3's (KAFKA-19233 takes the "
            f"rejoining member back, KIP-1263 batches the joins) {settled(new)}."
        )
    return (
        text
        + f"under Kafka 4.0's group coordinator {settled(old)}; under 4.3's the group {went(new)}."
    )


def _heartbeat_view(points):
    points = main_grid(points)
    p = points[points["assignor"] == CONSUMER]
    hb = p.groupby(["scenario", "members", "partitions"])["heartbeat_ms"].transform("nunique")
    p = p[hb > 1].sort_values(["scenario", "members", "partitions", "heartbeat_ms"])
    cols = [
        "scenario",
        "members",
        "partitions",
        "heartbeat_ms",
        "seeds",
        "rebalance_time_total_s_median",
        "unassigned_partition_s_median",
        "unassigned_max_s_median",
        "records_reprocessed_median",
    ]
    return human_columns(p[cols].reset_index(drop=True))
