"""A run's timeline as an image: which member owned each partition over time, unassigned gaps
and double processing marked (``rebalance-sim timeline``)."""

from __future__ import annotations

import math
import os
from pathlib import Path

# The image formats a timeline is written in, by file extension (matplotlib's Agg backend).
IMAGE_FORMATS = ("png", "jpg", "jpeg", "svg", "pdf", "webp", "tif", "tiff", "eps")


def image_format(path: str) -> str | None:
    """The image format ``path`` names by its extension (none: PNG), None if not one of
    ``IMAGE_FORMATS``."""
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if not ext:
        return "png"
    return ext if ext in IMAGE_FORMATS else None


LEGEND_MEMBERS = 200  # members named in a timeline's legend


def draw_timeline(run_dir: str, out: str, max_partitions: int = 200, fmt: str = "png") -> int:
    """Draw partition ownership (one row per partition, one colour per member), unassigned gaps
    (red) and double processing (black outline) from ``run_dir`` as a ``fmt`` image; returns the
    partitions drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pyarrow.parquet as pq
    from matplotlib.patches import Patch

    rows = pq.read_table(os.path.join(run_dir, "intervals.parquet")).to_pylist()
    parts = sorted({(r["topic"], r["partition"]) for r in rows if r["partition"] is not None})
    if not parts:
        raise ValueError(f"{run_dir}: no partition intervals to draw")
    parts = parts[:max_partitions]
    index = {tp: i for i, tp in enumerate(parts)}
    members = sorted({r["member"] for r in rows if r["kind"] == "owned"})
    from .plots import member_colours

    colour = member_colours(members)  # red is kept for gaps
    t_end = max(r["end"] for r in rows)
    fig, ax = plt.subplots(figsize=(14, max(3.0, min(40.0, 0.18 * len(parts) + 1.5))))
    for r in rows:
        tp = (r["topic"], r["partition"])
        if tp not in index:
            continue
        y = index[tp]
        width = r["end"] - r["start"]
        if r["kind"] == "owned":
            ax.broken_barh([(r["start"], width)], (y - 0.4, 0.8), facecolors=colour[r["member"]])
        elif r["kind"] == "unassigned":
            ax.broken_barh([(r["start"], width)], (y - 0.4, 0.8), facecolors="red", alpha=0.6)
        elif r["kind"] == "double_processing":
            ax.broken_barh(
                [(r["start"], width)],
                (y - 0.45, 0.9),
                facecolors="none",
                edgecolors="black",
                linewidth=1.5,
            )
    for r in rows:
        if r["kind"] == "rebalance":
            ax.axvspan(r["start"], r["end"], color="grey", alpha=0.12, linewidth=0)
    ax.set_yticks(range(len(parts)))
    ax.set_yticklabels([f"{t}-{p}" for t, p in parts], fontsize=6 if len(parts) > 40 else 8)
    ax.set_xlim(0, t_end)
    ax.set_ylim(-1, len(parts))
    ax.invert_yaxis()
    ax.set_xlabel("simulated time (s)")
    ax.set_title(f"partition ownership: {os.path.basename(os.path.abspath(run_dir))}")
    # every member in the legend, in as many columns as it takes (up to LEGEND_MEMBERS of them)
    shown = members[:LEGEND_MEMBERS]
    handles = [Patch(color=colour[m], label=m) for m in shown]
    if len(members) > len(shown):
        handles.append(Patch(color="white", label=f"... {len(members):,} members in all"))
    handles += [
        Patch(color="red", alpha=0.6, label="unassigned"),
        Patch(facecolor="none", edgecolor="black", label="double processing"),
        Patch(color="grey", alpha=0.2, label="rebalance"),
    ]
    ax.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=6 if len(handles) > 60 else 7,
        ncol=max(1, math.ceil(len(handles) / 40)),
    )
    fig.tight_layout()
    import io

    from ..atomic import atomic_write_bytes

    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110)
    plt.close(fig)
    atomic_write_bytes(Path(out), buf.getvalue())
    return len(parts)
