"""Figures of an experiment (matplotlib, Agg backend): each function writes one PNG and returns
its one-line caption.

Inputs are small pandas DataFrames from ``rebalance_sim.lab.engine.aggregate`` (``points``, ``windows``) and
single runs' ``intervals`` tables (ownership timeline, throughput). Units are in every axis label.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from ..atomic import atomic_write_bytes

if TYPE_CHECKING:
    # the tables are the lab's; `timeline` draws with this module without them
    import pandas as pd
    from matplotlib.artist import Artist

# One colour per assignor, the same in every figure: eager ones warm, cooperative cool.
ASSIGNOR_COLORS = {
    "range": "#d62728",
    "roundrobin": "#ff7f0e",
    "sticky": "#9467bd",
    "cooperative-sticky": "#1f77b4",
    "stream-join-sticky": "#2ca02c",
    "consumer-uniform": "#111111",  # the consumer group protocol (KIP-848)
}
# Eager assignors often give identical curves: distinct dashes and widths keep each one visible.
ASSIGNOR_LINES = {
    "range": ("-", 3.2),
    "roundrobin": ("--", 2.2),
    "sticky": (":", 1.8),
    "cooperative-sticky": ("-", 1.4),
    "stream-join-sticky": ("-.", 1.4),
    "consumer-uniform": ("-", 2.0),
}
DPI = 110


def plain_log_ticks(axis) -> None:
    """Label a log axis the same way everywhere: plain numbers (0.5, 1, 2, 5, 10, 20, ...) at 1, 2
    and 5 times each power of ten, no labels on the minor ticks (matplotlib's default mixes
    "100" with "2x10^2" and prints minor labels on top of each other)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,g}"))
    axis.set_minor_formatter(NullFormatter())


def color(assignor: str) -> str:
    return ASSIGNOR_COLORS.get(assignor, "#555555")


def member_colours(members: Sequence[str]) -> dict[str, tuple]:
    """One colour per member, none of them red (red marks unassigned partitions): the qualitative
    tab20/tab20b/tab20c colours first (54 of them), then hues spaced by the golden angle at three
    lightnesses, so that no two of a few hundred members share a colour and neighbours by name
    differ."""
    import colorsys

    qualitative = []
    for name in ("tab20", "tab20b", "tab20c"):
        cmap = plt.get_cmap(name)
        for i in range(20):
            r, g, b, _ = cmap(i)
            h, _l, sat = colorsys.rgb_to_hls(r, g, b)
            if sat > 0.25 and (h < 0.04 or h > 0.95):  # a red
                continue
            qualitative.append((r, g, b, 1.0))
    out = {}
    for i, m in enumerate(members):
        if i < len(qualitative):
            out[m] = qualitative[i]
            continue
        k = i - len(qualitative)
        hue = 0.06 + ((k * 0.618033988749895) % 1.0) * 0.86  # skip the reds at both ends
        r, g, b = colorsys.hls_to_rgb(hue, (0.35, 0.55, 0.72)[k % 3], 0.65)
        out[m] = (r, g, b, 1.0)
    return out


def save(fig, path: Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    atomic_write_bytes(Path(path), buf.getvalue())
    return Path(path)


# ---------------------------------------------------------------------------------------------
# Ownership timeline


def ownership_timeline(
    runs: Sequence[tuple[str, pd.DataFrame]],
    path: Path,
    window: tuple[float, float],
    trigger_s: float | None = None,
) -> str:
    """Side-by-side panels, one per (title, intervals) run: partition on y, time on x, a bar per
    owner (coloured by member) and red where the partition is unassigned."""
    fig, axes = plt.subplots(
        1, len(runs), figsize=(6.2 * len(runs), 4.6), sharey=True, squeeze=False
    )
    lo, hi = window
    members = sorted(
        {m for _, iv in runs for m in iv.loc[iv["kind"] == "owned", "member"].dropna()}
    )
    member_color = member_colours(members)
    joiners = []  # members that own nothing when the window opens: the ones the story is about
    for _, iv in runs:
        owned = iv[iv["kind"] == "owned"]
        first = owned.groupby("member")["start"].min()
        joiners += [m for m, t in first.items() if t > lo and m not in joiners]
    for ax, (title, iv) in zip(axes[0], runs, strict=True):
        # A run stops one second after its group settles; from then on nothing changes, so the
        # final ownership is drawn on to the end of the shared time axis (and said so).
        run_end = float(iv["end"].max())
        iv = iv.copy()
        iv.loc[(iv["end"] >= run_end) & (iv["kind"] == "owned"), "end"] = hi
        iv = iv[(iv["end"] > lo) & (iv["start"] < hi) & iv["topic"].notna()]
        parts = sorted({(t, int(p)) for t, p in zip(iv["topic"], iv["partition"], strict=True)})
        row = {tp: i for i, tp in enumerate(parts)}
        for kind, alpha in (("owned", 0.9), ("unassigned", 1.0)):
            sub = iv[iv["kind"] == kind]
            for r in sub.itertuples():
                y = row.get((r.topic, int(r.partition)))
                if y is None:
                    continue
                s, e = max(r.start, lo), min(r.end, hi)
                c = "#e41a1c" if kind == "unassigned" else member_color[r.member]
                h = 0.8 if kind == "owned" else 0.5
                ax.broken_barh([(s, e - s)], (y - h / 2, h), facecolors=c, alpha=alpha, linewidth=0)
        if trigger_s is not None:
            ax.axvline(trigger_s, color="black", linestyle=":", linewidth=1)
        ua = iv[iv["kind"] == "unassigned"]
        lengths = (ua["end"].clip(upper=hi) - ua["start"].clip(lower=lo)).clip(lower=0)
        # the figures go under the axis, where they cannot cover a partition's row
        ax.set_title(title, fontsize=10)
        ax.set_xlim(lo, hi)
        ax.set_xlabel(
            f"simulated time (s)\nunassigned: {lengths.sum():,.2f} partition-s, longest "
            f"{lengths.max() if len(lengths) else 0:.2f} s",
            fontsize=9,
        )
        if run_end < hi:
            ax.axvline(run_end, color="grey", linewidth=0.8, linestyle="--")
        ax.set_ylim(-0.7, max(len(parts), 1) - 0.3)
        if ax is axes[0][0]:
            step = max(1, len(parts) // 12)
            ax.set_yticks(range(0, len(parts), step))
            ax.set_yticklabels([f"{t}-{p}" for t, p in parts][::step], fontsize=7)
            ax.set_ylabel("partition")
    handles: list[Artist] = [plt.Rectangle((0, 0), 1, 1, color="#e41a1c")]
    labels = ["unassigned"]
    shown = joiners + [m for m in members if m not in joiners][: max(0, 8 - len(joiners))]
    for m in sorted(shown, key=lambda m: (m not in joiners, m)):
        handles.append(plt.Rectangle((0, 0), 1, 1, color=member_color[m]))
        labels.append(f"owned by {m}" + (" (joins)" if m in joiners else ""))
    if len(members) > len(shown):
        handles.append(plt.Rectangle((0, 0), 1, 1, color="white"))
        labels.append(f"... {len(members)} members in all")
    if trigger_s is not None:
        handles.append(plt.Line2D([0], [0], color="black", linestyle=":"))
        labels.append("trigger")
    fig.legend(
        handles,
        labels,
        loc="upper center",
        ncol=min(len(labels), 6),
        fontsize=8,
        bbox_to_anchor=(0.5, 1.08),
        frameon=False,
    )
    save(fig, path)
    return (
        "Ownership of each partition over time (colour = owning member, red = no member "
        "processing it), eager vs cooperative, same group and trigger. A run stops 1 s after "
        "its group settles (dashed line); its final ownership is drawn on from there."
    )


# ---------------------------------------------------------------------------------------------
# Unassigned windows


def window_cdf(
    windows: pd.DataFrame,
    path: Path,
    facet: str = "scenario",
    line: str = "assignor",
    where: str = "",
) -> str:
    """Empirical CDF of per-partition unassigned windows, one panel per ``facet`` value."""
    facets = sorted(windows[facet].unique()) if len(windows) else []
    fig, axes = plt.subplots(
        1, max(1, len(facets)), figsize=(4.6 * max(1, len(facets)), 3.8), sharey=True, squeeze=False
    )
    for ax, f in zip(axes[0], facets, strict=False):
        sub = windows[windows[facet] == f]
        for name in sorted(sub[line].unique(), key=_assignor_order):
            x = np.sort(sub.loc[sub[line] == name, "window_s"].to_numpy())
            if x.size == 0:
                continue
            y = np.arange(1, x.size + 1) / x.size
            ls, lw = ASSIGNOR_LINES.get(name, ("-", 1.4))
            ax.step(
                x,
                y,
                where="post",
                color=color(name),
                linestyle=ls,
                linewidth=lw,
                label=f"{name} (n={x.size:,})",
            )
        values = sub["window_s"].to_numpy(dtype=float)
        values = values[values > 0]
        if values.size and values.max() / values.min() >= 10:
            ax.set_xscale("log")
            plain_log_ticks(ax.xaxis)
            ax.set_xlabel("unassigned window (s, log scale)")
        else:
            # all windows within one decade (e.g. 10.10-10.12 s): a log axis would print its
            # minor labels on top of each other; a linear axis reads plainly
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(5))
            ax.set_xlabel("unassigned window (s)")
        ax.set_title(str(f), fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    axes[0][0].set_ylabel("fraction of windows ≤ x")
    save(fig, path)
    return (
        f"CDF of per-partition unassigned windows inside rebalance episodes{where}: how long "
        "a partition waits for a new owner."
    )


def _assignor_order(name: str) -> int:
    order = list(ASSIGNOR_COLORS)
    return order.index(name) if name in order else len(order)


# ---------------------------------------------------------------------------------------------
# Metrics vs group size


ASSIGNOR_MARKERS = {
    "range": ("o", 9),
    "roundrobin": ("s", 7),
    "sticky": ("^", 6),
    "cooperative-sticky": ("D", 5),
    "stream-join-sticky": ("v", 5),
}


def metric_vs_size(
    points: pd.DataFrame,
    metric: str,
    ylabel: str,
    path: Path,
    facet: str = "scenario",
    size: str = "members",
    logy: bool = True,
    caption: str = "",
    row_suffix: str = " members",
) -> str:
    """Median across seeds (line) with the p10-p90 band, per assignor, vs group size; one
    column per ``facet`` value and one row per ``membership`` value (dynamic / static) if present,
    titled with ``row_suffix`` after it."""
    from matplotlib.ticker import NullFormatter, NullLocator

    facets = sorted(points[facet].unique())
    rows = sorted(points["membership"].unique()) if "membership" in points.columns else [None]
    fig, axes = plt.subplots(
        len(rows),
        len(facets),
        figsize=(4.4 * len(facets), 3.2 * len(rows)),
        squeeze=False,
        sharex=True,
    )
    for i, membership in enumerate(rows):
        for j, f in enumerate(facets):
            ax = axes[i][j]
            sub = points[points[facet] == f]
            if membership is not None:
                sub = sub[sub["membership"] == membership]
            for assignor in sorted(sub["assignor"].unique(), key=_assignor_order):
                g = sub[sub["assignor"] == assignor].sort_values(size)
                med = g[f"{metric}_median"].to_numpy(dtype=float)
                p10 = g[f"{metric}_p10"].to_numpy(dtype=float)
                p90 = g[f"{metric}_p90"].to_numpy(dtype=float)
                x = g[size].to_numpy(dtype=float)
                marker, ms = ASSIGNOR_MARKERS.get(assignor, ("o", 5))
                ax.plot(
                    x,
                    med,
                    "-",
                    marker=marker,
                    markersize=ms,
                    color=color(assignor),
                    label=assignor,
                    markerfacecolor="none" if ms >= 7 else color(assignor),
                    linewidth=1.3,
                    alpha=0.9,
                )
                ax.fill_between(x, p10, p90, color=color(assignor), alpha=0.12, linewidth=0)
            ax.set_xscale("log")
            sizes = sorted(points[size].unique())
            ax.set_xticks(sizes, [f"{int(v):,}" for v in sizes])  # the sizes run, nothing else
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.xaxis.set_minor_locator(NullLocator())
            if logy:
                ax.set_yscale("log")
                plain_log_ticks(ax.yaxis)
                values = sub[[f"{metric}_median", f"{metric}_p10", f"{metric}_p90"]].to_numpy(
                    dtype=float
                )
                values = values[values > 0]
                if values.size and values.max() / values.min() < 10:
                    # nearly flat: show one decade around it, not a magnified wiggle
                    mid = np.sqrt(values.max() * values.min())
                    ax.set_ylim(mid / np.sqrt(10), mid * np.sqrt(10))
            else:
                top = np.nanmax(
                    sub[[f"{metric}_median", f"{metric}_p90"]].to_numpy(dtype=float), initial=0.0
                )
                ax.set_ylim(0, top * 1.15 if top > 0 else 1.0)
            title = f"{f}" + (f", {membership}{row_suffix}" if membership else "")
            ax.set_title(title, fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
            if i == len(rows) - 1:
                ax.set_xlabel("group size (members, log scale)")
            if j == 0:
                ax.set_ylabel(ylabel)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="upper center",
        ncol=len(labels),
        fontsize=9,
        frameon=False,
        bbox_to_anchor=(0.5, 1.04),
    )
    fig.tight_layout()
    save(fig, path)
    return (
        caption or f"{ylabel} vs group size: median across seeds, shaded from the p10 to the p90."
    )


def deploy_stall(points: pd.DataFrame, path: Path, caption: str = "") -> str:
    """A full rolling deploy per group size: how long each partition went unprocessed on average
    (unassigned partition-seconds / partitions), one bar per assignor with its p10-p90 range;
    dynamic and static members side by side."""
    rows = sorted(points["membership"].unique()) if "membership" in points.columns else [None]
    fig, axes = plt.subplots(
        1, len(rows), figsize=(6.2 * len(rows), 3.6), squeeze=False, sharey=True
    )
    sizes = sorted(points["members"].unique())
    for ax, membership in zip(axes[0], rows, strict=True):
        sub = points if membership is None else points[points["membership"] == membership]
        assignors = sorted(sub["assignor"].unique(), key=_assignor_order)
        width = 0.8 / max(1, len(assignors))
        bars: dict[str, list] = {a: [] for a in assignors}  # (x, median, p10, p90) per assignor
        for i, size in enumerate(sizes):
            here = sub[sub["members"] == size].set_index("assignor")
            present = [a for a in assignors if a in here.index]
            for k, a in enumerate(present):  # the bars of one size stay together, centred
                r = here.loc[a]
                per = float(r["partitions"])
                bars[a].append(
                    (
                        i + width * (k - (len(present) - 1) / 2),
                        *(
                            float(r[f"unassigned_partition_s_{s}"]) / per
                            for s in ("median", "p10", "p90")
                        ),
                    )
                )
        for a in assignors:
            if not bars[a]:
                continue
            xs, med, lo, hi = (np.array(v) for v in zip(*bars[a], strict=True))
            ax.bar(xs, med, width * 0.92, color=color(a), label=a, alpha=0.85)
            ax.errorbar(
                xs,
                med,
                yerr=[med - lo, hi - med],
                fmt="none",
                ecolor="#333333",
                elinewidth=1,
                capsize=2,
            )
        ax.set_xticks(range(len(sizes)), [f"{int(s):,}" for s in sizes])
        ax.set_xlabel("group size (members)")
        ax.set_title(f"{membership} members" if membership else "", fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].set_ylabel("seconds unprocessed per partition")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="upper center",
        ncol=len(labels),
        fontsize=9,
        frameon=False,
        bbox_to_anchor=(0.5, 1.06),
    )
    fig.tight_layout()
    save(fig, path)
    return caption or (
        "A full rolling deploy: seconds each partition went unprocessed on average "
        "(unassigned partition-seconds / partitions), median across seeds, whiskers "
        "from the p10 to the p90."
    )


def _first(key):
    return key[0] if isinstance(key, tuple) else key


# ---------------------------------------------------------------------------------------------
# Throughput around a rebalance


def throughput_curve(
    intervals: pd.DataFrame, rate_per_partition: float, partitions: int, lo: float, hi: float
) -> tuple[np.ndarray, np.ndarray]:
    """Records/s being processed, as an exact step function (value from each time on): the
    production rate of every partition that some live member is processing (the catch-up of the
    backlog afterwards is not included)."""
    ua = intervals[intervals["kind"] == "unassigned"]
    times = np.concatenate([ua["start"].to_numpy(float), ua["end"].to_numpy(float)])
    delta = np.concatenate([np.ones(len(ua)), -np.ones(len(ua))])
    order = np.argsort(times, kind="stable")
    times, count = times[order], np.cumsum(delta[order])
    before = count[times < lo]
    t = np.concatenate([[lo], times[(times >= lo) & (times <= hi)], [hi]])
    c = np.concatenate([[before[-1] if before.size else 0.0], count[(times >= lo) & (times <= hi)]])
    c = np.concatenate([c, [c[-1]]])
    return t, rate_per_partition * (partitions - c)


def throughput(
    curves: Sequence[tuple[str, np.ndarray, np.ndarray]],
    path: Path,
    total_rate: float,
    trigger_s: float | None,
    title: str,
) -> str:
    """Left: the whole window; right: zoomed on the rebalance itself (after detection)."""
    fig, (ax, zoom) = plt.subplots(1, 2, figsize=(12, 3.9), gridspec_kw={"width_ratios": [3, 2]})
    changes = [t[1:-1][np.abs(np.diff(y))[: len(t) - 2] > 0] for _, t, y in curves]
    after = np.concatenate([c[c > (trigger_s or -np.inf) + 1.0] for c in changes] or [np.zeros(0)])
    for name, t, y in curves:
        ls, lw = ASSIGNOR_LINES.get(name, ("-", 1.4))
        for a in (ax, zoom):
            a.step(
                t,
                y / 1000.0,
                where="post",
                color=color(name),
                label=name,
                linewidth=lw,
                linestyle=ls,
            )
    for a in (ax, zoom):
        a.axhline(
            total_rate / 1000.0, color="grey", linewidth=0.8, linestyle=":", label="production rate"
        )
        if trigger_s is not None:
            a.axvline(trigger_s, color="black", linestyle=":", linewidth=1, label="trigger")
        a.set_xlabel("simulated time (s)")
        a.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("records processed (thousand/s)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="lower left")
    if after.size:
        zlo, zhi = after.min() - 0.5, after.max() + 0.5
        zoom.set_xlim(zlo, zhi)
        ys = [y[(t >= zlo) & (t <= zhi)] for _, t, y in curves]
        ymin = min((v.min() for v in ys if v.size), default=0.0) / 1000.0
        zoom.set_ylim(ymin - 0.05 * (total_rate / 1000.0 - ymin + 1e-9), total_rate / 1000.0 * 1.01)
        ax.axvspan(zlo, zhi, color="grey", alpha=0.12)
    zoom.set_title("zoom on the rebalance (shaded on the left)", fontsize=10)
    fig.tight_layout()
    save(fig, path)
    return (
        "Group throughput around one rebalance: records/s of the partitions being processed "
        "(catch-up of the backlog afterwards not drawn); right: zoomed on the rebalance."
    )


# ---------------------------------------------------------------------------------------------
# Leader assignment time


def assignment_time(
    timings: pd.DataFrame,
    path: Path,
    x: str = "partitions",
    facet: str = "members",
    title_fmt: str = "{} members",
) -> str:
    """Wall time of one leader assignment vs partitions, per assignor, one panel per group size."""
    facets = sorted(timings[facet].unique())
    fig, axes = plt.subplots(
        1, len(facets), figsize=(4.4 * len(facets), 3.8), sharey=True, squeeze=False
    )
    for ax, f in zip(axes[0], facets, strict=True):
        sub = timings[timings[facet] == f]
        for name in sorted(sub["assignor"].unique(), key=_assignor_order):
            g = sub[sub["assignor"] == name].sort_values(x)
            ax.plot(g[x], g["assign_s"], marker="o", markersize=3.5, color=color(name), label=name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(title_fmt.format(f"{f:,}"), fontsize=10)
        ax.set_xlabel("partitions (log scale)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    axes[0][0].set_ylabel("leader assignment time (s, log scale)")
    save(fig, path)
    return (
        "Wall time of one leader assignment (rebalance after one member left) vs partitions, "
        "per assignor, measured by calling our assignors directly."
    )


def share_of_rebalance(df: pd.DataFrame, path: Path) -> str:
    """Share of the rebalance spent in the leader's assignment, vs group size, per assignor."""
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for name in sorted(df["assignor"].unique(), key=_assignor_order):
        g = df[df["assignor"] == name].sort_values("members")
        ax.plot(g["members"], 100.0 * g["assign_share"], marker="o", color=color(name), label=name)
    ax.set_xscale("log")
    ax.set_xlabel("group size (members, log scale)")
    ax.set_ylabel("assignment share of rebalance (%)")
    ax.set_ylim(0, 100)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, path)
    return (
        "Share of the end-to-end rebalance time spent computing the assignment on the leader "
        "(simulated with the measured assignor cost)."
    )
