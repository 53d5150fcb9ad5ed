"""The page and the terminal summary of ``rebalance-sim plan``: what the plan says, in sentences
computed from its own tables (``rebalance_sim.lab.plan.tables``), then the tables, the limits crossed
with the settings that would fix them, growth, the figures, the assumptions and how it was
produced.

A difference is stated as one only when the two medians' p10-p90 bands across seeds are apart
(``headline.same``); otherwise the set-ups are "about the same". Every number quoted is a cell of
the tables the page shows. Inputs are plain data (``PlanPage``), so this module knows nothing of
how the runs were chosen.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pandas as pd

from .headline import num, quote, same, with_bands

FAULTS = ("deploy", "crash", "slow-member", "scale-out")
STALL = "stall partition-s"
LAG = "peak lag records"
REPROCESSED = "records re-processed"
SETTLE = "settle s"
SHOWN = (STALL, LAG, REPROCESSED, SETTLE)
TITLES = {
    "deploy": "Deploy",
    "crash": "Crash",
    "slow-member": "Slow member",
    "scale-out": "Scale-out",
}


def upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def listing(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def who(label: str) -> str:
    """A set-up as a sentence names it after 'under'."""
    return "today's set-up" if label == "today" else label


@attrs.frozen
class PlanPage:
    """What the page needs: the tables (``rebalance_sim.lab.plan.tables``) and the words around them.

    ``fault_text``: fault -> how it is run (for people); ``session``: variant -> (setting name,
    seconds) of the session timeout that fences its members; ``deploy_down_s``: how long a
    deploy keeps a member down; ``left_out``: growth not run, and why."""

    title: str
    summary: str
    today: str
    table: pd.DataFrame
    ranking: pd.DataFrame
    changes: dict[str, str]
    fault_text: dict[str, str]
    session: dict[str, tuple[str, float]]
    deploy_down_s: float
    assumed: Sequence[str] = ()
    facts: Sequence[str] = ()
    left_out: Sequence[str] = ()
    seeds_text: str = ""
    settings: Sequence[str] = ()
    provenance: Sequence[str] = ()
    replay: str = ""


def ratio(a: float, b: float) -> str:
    """``a / b`` as people say it: ``9.2x``, ``15x``."""
    r = a / b
    return f"{r:,.0f}x" if r >= 10 else f"{r:.1f}x"


def _pct(n: float, members: int) -> str:
    p = 100.0 * n / max(1, members)
    return f"{p:.0f}%" if p >= 1 else f"{p:.1g}%"


def _rows(table: pd.DataFrame, factor: float, fault: str) -> pd.DataFrame:
    t = table[(table["factor"] == factor) & (table["fault"] == fault)]
    return t[t["measured"]].set_index("variant")


def _versus(alt, base) -> str:
    """'cuts the stall about 2.7x' / 'stalls 1.9x more' / 'is about the same', for row ``alt``
    against ``base`` on the stall; bands that overlap are the same."""
    a, b = float(alt[STALL]), float(base[STALL])
    if same(alt, base, STALL):
        return "is about the same"
    if a < b:
        return "removes the stall" if a == 0 else f"cuts the stall about {ratio(b, a)}"
    return f"stalls {ratio(a, b)} more" if b > 0 else "stalls where there was none"


def fault_sentence(table: pd.DataFrame, fault: str, fault_text: dict[str, str]) -> str | None:
    """One sentence for ``fault`` at today's size: the alternative that stalls least, if it
    stalls less than today outside the bands, with its figures; then each other alternative
    against it or against today."""
    t = _rows(table, 1.0, fault)
    if "today" not in t.index:
        return None
    today = t.loc["today"]
    alts = t.drop(index="today")
    head = f"{TITLES.get(fault, fault)}: "
    better = [
        k for k, r in alts.iterrows() if not same(r, today, STALL) and r[STALL] < today[STALL]
    ]
    if not better:
        text = (
            head + f"no alternative stalls less than today outside the seeds' spread (today "
            f"{quote(today, STALL)} unassigned partition-seconds, peak lag "
            f"{quote(today, LAG)} records)"
        )
        others = list(alts.index)
        best = None
    else:
        best = min(better, key=lambda k: (float(alts.loc[k, STALL]), k))
        b = alts.loc[best]
        text = (
            head + f"{b['set-up']} {_versus(b, today)} ({quote(b, STALL)} vs {quote(today, STALL)} "
            f"unassigned partition-seconds; peak lag {quote(b, LAG)} vs {quote(today, LAG)} "
            "records)"
        )
        others = [k for k in alts.index if k != best]
    clauses = []
    for k in others:
        r = alts.loc[k]
        if best is not None and same(r, alts.loc[best], STALL):
            clauses.append(f"{r['set-up']} is about the same as {alts.loc[best, 'set-up']} here")
        elif same(r, today, STALL):
            clauses.append(f"{r['set-up']} is about the same as today")
        elif r[STALL] < today[STALL]:
            clauses.append(f"{r['set-up']} {_versus(r, today)}")
        else:
            clauses.append(f"{r['set-up']} {_versus(r, today)} than today")
    if clauses:
        text += "; " + "; ".join(clauses)
    return text + "."


def ranking_sentence(ranking: pd.DataFrame) -> str | None:
    if ranking.empty or len(ranking) < 2:
        return None
    faults = [f for f in FAULTS if f in ranking.columns]
    names = [f"{int(r['rank'])}. {r['set-up']}" for _, r in ranking.iterrows()]
    return (
        f"Ranked by their stall over one of each fault ({', '.join(TITLES[f].lower() for f in faults)}): "
        + ", ".join(names)
        + "."
    )


def growth_sentences(table: pd.DataFrame) -> list[str]:
    """Per growth size run: today's stall against today's size, per fault, and the other
    set-up run there against today at that size."""
    out = []
    for factor in sorted(f for f in table["factor"].unique() if f > 1.0):
        parts = []
        alt_parts = []
        members = None
        for fault in FAULTS:
            now = _rows(table, 1.0, fault)
            grown = _rows(table, factor, fault)
            if "today" not in grown.index or "today" not in now.index:
                continue
            g, n = grown.loc["today"], now.loc["today"]
            members = int(g["members"])
            name = TITLES[fault].lower()
            if same(g, n, STALL):
                parts.append(
                    f"the {name} stalls about as much as now ({quote(g, STALL)} vs "
                    f"{quote(n, STALL)})"
                )
            elif n[STALL] > 0:
                parts.append(
                    f"the {name} stalls {ratio(g[STALL], n[STALL])} as much as now "
                    f"({quote(g, STALL)} vs {quote(n, STALL)})"
                )
            alt_parts += [
                f"{grown.loc[k, 'set-up']} {_versus(grown.loc[k], g)} in the {name}"
                for k in grown.index
                if k != "today"
            ]
        if not parts:
            continue
        text = f"At {factor:g}x the group ({members:,} members), today's set-up: " + "; ".join(
            parts
        )
        if alt_parts:
            text += "; " + "; ".join(alt_parts)
        out.append(text + " (unassigned partition-seconds).")
    return out


def _callback(row, prefix: str = "") -> tuple[str, float, int]:
    """The callback that outlasted max.poll.interval.ms in this row (name, seconds, partitions)."""
    mpi = float(row["max_poll_interval_s"])
    assign_s, revoke_s = float(row[prefix + "assign_s"]), float(row[prefix + "revoke_s"])
    if assign_s > mpi or assign_s >= revoke_s:
        return "onPartitionsAssigned", assign_s, int(row[prefix + "max_assigned"])
    return "onPartitionsRevoked", revoke_s, int(row[prefix + "max_revoked"])


def limit_sentences(page: PlanPage) -> list[str]:
    """Every limit crossed, by size and set-up, with the setting that would fix it."""
    table = page.table
    out = []
    for (factor, variant), g in table.groupby(["factor", "variant"], sort=False):
        first = g.iloc[0]
        where = (
            f"at {factor:g}x the group ({int(first['members']):,} members)"
            if factor != 1.0
            else "at today's size"
        )
        name_of = who(first["set-up"])
        mpi = float(first["max_poll_interval_s"])
        polls = g[g["poll_timeouts_max"] > 0]
        if len(polls):
            worst = polls.loc[polls["poll_timeouts"].idxmax()]
            name, secs, parts = _callback(worst)
            faults = ", ".join(polls["fault"])
            share = (
                f"for {_pct(worst['poll_timeouts'], int(worst['members']))} of members"
                if worst["poll_timeouts"] > 0
                else f"in {int(worst['runs_crossing'])} of {int(worst['seeds'])} seeds"
            )
            out.append(
                f"{upper_first(where)}, under {name_of}, {name} ({parts:,} partitions, "
                f"{secs:,.0f} s) outlasts max.poll.interval.ms ({mpi:,.0f} s) {share} "
                f"({faults}), and they are removed from the group; fix: max.poll.interval.ms "
                f"above {math.ceil(secs * 1.2):,} s, or less work per partition in {name}."
            )
        expired = g[g["sessions_expired_max"] > 0]
        if len(expired):
            setting, seconds = page.session.get(variant, ("session.timeout.ms", float("nan")))
            worst = expired.loc[expired["sessions_expired"].idxmax()]
            faults = ", ".join(expired["fault"])
            cause = (
                f"a restart keeps a member down {page.deploy_down_s:g} s"
                if "deploy" in set(expired["fault"])
                else "members stopped heartbeating"
            )
            out.append(
                f"{upper_first(where)}, under {name_of}, {int(worst['sessions_expired_max']):,} "
                f"member(s) had their session expire ({faults}): {setting} is {seconds:g} s and "
                f"{cause}, so the coordinator removes them and rebalances; fix: {setting} above "
                f"{math.ceil(page.deploy_down_s + 10):g} s."
            )
        timeouts = g[g["rebalance_timeouts_max"] > 0]
        if len(timeouts):
            worst = timeouts.loc[timeouts["rebalance_timeouts_max"].idxmax()]
            name, secs, _ = _callback(worst)
            out.append(
                f"{upper_first(where)}, under {name_of}, {int(worst['rebalance_timeouts_max']):,} "
                f"member(s) did not rejoin within the rebalance timeout (max.poll.interval.ms, "
                f"{mpi:,.0f} s) and were removed ({', '.join(timeouts['fault'])}): a member busy "
                f"in its rebalance callbacks (the longest, {name}, {secs:,.0f} s) rejoins only "
                f"after them; fix: a longer max.poll.interval.ms, or cheaper callbacks."
            )
    return out


def cold_start_sentences(table: pd.DataFrame) -> list[str]:
    """The cold starts (every member starting at once, before any fault) that crossed a limit,
    one sentence per size and callback, naming the set-ups."""
    out = []
    crossed = table[table["cold poll_timeouts_max"] + table["cold rebalance_timeouts_max"] > 0]
    for factor, g in crossed.groupby("factor", sort=True):
        worst = g.loc[g["cold assign_s"].idxmax()]
        name, secs, parts = _callback(worst, "cold ")
        mpi = float(worst["max_poll_interval_s"])
        names = list(dict.fromkeys(g["set-up"]))
        where = (
            f"at {factor:g}x the group ({int(worst['members']):,} members)"
            if factor != 1.0
            else "at today's size"
        )
        consumer = all(w.startswith("consumer protocol") for w in names)
        why = (
            " (the first member to join is assigned every partition: KIP-848 has no initial "
            "rebalance delay)"
            if consumer
            else ""
        )
        out.append(
            f"{upper_first(where)}, a cold start (every member starting together) under "
            f"{listing([who(w) for w in names])} crosses a limit: {name} handles up to {parts:,} partitions "
            f"({secs:,.0f} s){why}, past max.poll.interval.ms ({mpi:,.0f} s), and members are "
            f"removed while the group forms; fix: max.poll.interval.ms above "
            f"{math.ceil(secs * 1.2):,} s."
        )
    return out


def unmeasured_sentences(table: pd.DataFrame) -> list[str]:
    bad = table[~table["measured"]]
    return [
        f"The {r['fault']} under {who(r['set-up'])} at {int(r['members']):,} members was not measured: "
        "in some seed the group had not formed when the fault came, so the fault fell into its "
        "cold start (excluded from the tables)."
        for _, r in bad.iterrows()
    ]


def sentences(page: PlanPage) -> list[str]:
    """What the plan says, computed from its tables: each fault at today's size, the ranking,
    growth, and the limits crossed."""
    out = [s for f in FAULTS if (s := fault_sentence(page.table, f, page.fault_text))]
    if (r := ranking_sentence(page.ranking)) is not None:
        out.append(r)
    out += growth_sentences(page.table)
    out += limit_sentences(page)
    out += cold_start_sentences(page.table)
    out += unmeasured_sentences(page.table)
    return out


# ---------------------------------------------------------------------------------------------
# Tables for people


def _removed(t: pd.DataFrame) -> list[str]:
    """Members removed by a limit crossed, median across seeds (the most in any seed)."""
    out = []
    for med, top in zip(
        t["poll_timeouts"] + t["sessions_expired"] + t["rebalance_timeouts"],
        t["poll_timeouts_max"] + t["sessions_expired_max"] + t["rebalance_timeouts_max"],
        strict=True,
    ):
        out.append(num(float(med)) + (f" (up to {num(float(top))})" if top > med else ""))
    return out


def answers_table(table: pd.DataFrame, factor: float = 1.0) -> pd.DataFrame:
    """Per fault and set-up at ``factor``: the four answers as ``median (p10-p90)``, the seeds,
    and the limits crossed (members removed, median across seeds)."""
    t = table[table["factor"] == factor]
    cols = ["fault", "set-up", "seeds"]
    for label in SHOWN:
        cols += [label, f"{label} p10", f"{label} p90"]
    out = t[cols].copy()
    out["members removed"] = _removed(t)
    out["measured"] = t["measured"]
    return with_bands(out).reset_index(drop=True)


def growth_table(table: pd.DataFrame) -> pd.DataFrame:
    variants_grown = set(table.loc[table["factor"] > 1.0, "variant"])
    rank = {f: i for i, f in enumerate(FAULTS)}
    t = table[table["variant"].isin(variants_grown)]
    t = t.assign(_f=t["fault"].map(rank)).sort_values(["_f", "variant", "factor"])
    cols = ["fault", "set-up", "factor", "members", "partitions", "seeds"]
    for label in (STALL, LAG):
        cols += [label, f"{label} p10", f"{label} p90"]
    out = t[cols].copy()
    out["members removed"] = _removed(t)
    return with_bands(out).reset_index(drop=True)


def terminal_text(page: PlanPage, said: Sequence[str]) -> str:
    """The plan's answer for the terminal: the sentences, then today's-size answers."""
    lines = [page.title, page.summary, ""]
    lines += [f"- {s}" for s in said]
    lines.append("")
    t = answers_table(page.table)
    short = t[["fault", "set-up", f"{STALL} (p10-p90)", f"{LAG} (p10-p90)", "members removed"]]
    lines.append(short.to_string(index=False))
    if page.left_out:
        lines.append("")
        lines += [f"not run: {x}" for x in page.left_out]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Figures


def _short(v: float) -> str:
    """An axis label: 0, 500, 20k, 1.5M."""
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    if abs(v) >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def stall_figure(table: pd.DataFrame, path: Path) -> str:
    """One panel per fault: each set-up's stall at today's size, median and p10-p90 band."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    from .plots import save

    t = table[(table["factor"] == 1.0) & table["measured"]]
    faults = [f for f in FAULTS if f in set(t["fault"])]
    fig, axes = plt.subplots(1, len(faults), figsize=(4.2 * len(faults), 3.6), squeeze=False)
    for ax, fault in zip(axes[0], faults, strict=True):
        sub = t[t["fault"] == fault]
        y = range(len(sub))
        med = sub[STALL].to_numpy()
        lo = med - sub[f"{STALL} p10"].to_numpy()
        hi = sub[f"{STALL} p90"].to_numpy() - med
        colors = ["#555555" if v == "today" else "#1f77b4" for v in sub["variant"]]
        ax.barh(list(y), med, xerr=[lo, hi], color=colors, capsize=3)
        for yi, m in zip(y, med, strict=True):
            ax.text(m, yi, f" {num(float(m))}", va="center", ha="left", fontsize=7)
        ax.set_xlim(0, max(1.0, float((med + hi).max())) * 1.3)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _short(v)))
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.set_yticks(list(y))
        ax.set_yticklabels(
            [s if len(s) < 34 else s[:31] + "..." for s in sub["set-up"]], fontsize=8
        )
        ax.invert_yaxis()
        ax.set_title(fault, fontsize=10)
        ax.set_xlabel("stall (unassigned partition-s)", fontsize=9)
    fig.tight_layout()
    save(fig, path)
    return (
        "Stall per fault at today's size: partitions nobody processes, summed over time "
        "(median across seeds; whiskers p10-p90); grey is today's set-up."
    )


def growth_figure(table: pd.DataFrame, path: Path) -> str | None:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    from .plots import plain_log_ticks, save

    grown = set(table.loc[table["factor"] > 1.0, "variant"])
    if not grown:
        return None
    t = table[table["variant"].isin(grown) & table["measured"]]
    faults = [f for f in FAULTS if f in set(t["fault"])]
    fig, axes = plt.subplots(1, len(faults), figsize=(4.2 * len(faults), 3.4), squeeze=False)
    for ax, fault in zip(axes[0], faults, strict=True):
        for variant, sub in t[t["fault"] == fault].groupby("variant", sort=False):
            sub = sub.sort_values("members")
            color = "#555555" if variant == "today" else "#1f77b4"
            ax.plot(
                sub["members"],
                sub[STALL],
                marker="o",
                color=color,
                label=sub["set-up"].iloc[0][:30],
            )
            ax.fill_between(
                sub["members"], sub[f"{STALL} p10"], sub[f"{STALL} p90"], color=color, alpha=0.2
            )
        ax.set_xscale("log")
        plain_log_ticks(ax.xaxis)
        ax.set_title(fault, fontsize=10)
        ax.set_xlabel("members", fontsize=9)
        ax.set_ylabel("stall (unassigned partition-s)", fontsize=9)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _short(v)))
        ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, path)
    which = (
        "today's set-up (grey) and the best alternative at today's size (blue)"
        if len(grown) > 1
        else "today's set-up"
    )
    return (
        f"Stall as the group grows (members and partitions together), {which}: median, band "
        "p10-p90."
    )


# ---------------------------------------------------------------------------------------------
# The page


def write(page: PlanPage, out: Path) -> tuple[Path, list[str]]:
    """Write ``out/report.html`` (figures and CSVs beside it); returns it and the sentences."""
    from ..atomic import atomic_write_bytes
    from .html import Figure, Table, write_report

    out.mkdir(parents=True, exist_ok=True)
    said = sentences(page)
    answers = answers_table(page.table)
    atomic_write_bytes(out / "answers.csv", page.table.to_csv(index=False).encode())
    atomic_write_bytes(out / "ranking.csv", page.ranking.to_csv(index=False).encode())
    intro = [
        page.summary,
        f"Today: {page.today}; settings other than Kafka's defaults: "
        + ("; ".join(page.settings) if page.settings else "none")
        + ".",
    ]
    first: list[Any] = [*said]
    first.append(
        Table(
            "Per fault at today's size",
            answers,
            csv="answers.csv",
            note=(
                "Median across seeds, p10-p90 in brackets. Stall: unassigned partition-seconds "
                "(partitions nobody processes, summed over time); peak lag: the most records "
                "waiting; re-processed: records processed twice; settle: seconds from each "
                "trigger until the group is stable again, summed; members removed: by a limit "
                f"crossed (median). {page.seeds_text}"
            ),
        )
    )
    sections: list[tuple[str, Sequence[Any]]] = [("What the plan says", first)]
    if not page.ranking.empty:
        sections.append(
            (
                "Alternatives ranked",
                [
                    Table(
                        "Stall over one of each fault, and per fault against today",
                        page.ranking.drop(columns=["variant"]),
                        csv="ranking.csv",
                        note="less / more: outside the seeds' p10-p90 bands; same: within them.",
                    ),
                    *[f"{k}: {v}." for k, v in page.changes.items()],
                ],
            )
        )
    fig_items: list[Any] = [Figure(out / "stall.png", stall_figure(page.table, out / "stall.png"))]
    growth_caption = growth_figure(page.table, out / "growth.png")
    growth_items: list[Any] = []
    if growth_caption is not None:
        growth_items.append(Figure(out / "growth.png", growth_caption))
        growth_items.append(Table("As the group grows", growth_table(page.table)))
    growth_items += [f"Not run: {x}" for x in page.left_out]
    sections.append(("Stall per fault", fig_items))
    if growth_items:
        sections.append(("Growth", growth_items))
    sections.append(
        (
            "Assumptions",
            [
                *[f"{TITLES.get(k, k)}: {v}." for k, v in page.fault_text.items()],
                *[f"Assumed: {a}." for a in page.assumed],
                *[f"From the describe output: {f}." for f in page.facts],
            ],
        )
    )
    meta = [*page.provenance]
    if page.replay:
        meta.append(page.replay)
    report = write_report(out / "report.html", page.title, intro, sections, meta)
    return report, said
