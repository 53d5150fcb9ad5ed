"""The assignor-scaling page (``rebalance_sim.lab.catalog.assignor_scaling`` declares its grid): our
assignors timed directly, and the leader's assignment time as a share of simulated scale-outs.
The declaration passes its assignors and group shapes as data."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..engine.pipeline import Options, Page, Results
from .assignor_timing import time_assignors


def report(
    opts: Options,
    results: Results,
    assignors: tuple[str, ...],
    members: tuple[int, ...],
    partitions: tuple[int, ...],
) -> Page:
    """The page: ``assignors`` timed on every (``members``, ``partitions``) shape with at least as
    many partitions as members, then their share of the simulated scale-outs."""
    import pandas as pd

    from ..atomic import atomic_write_bytes
    from . import plots
    from .html import Figure, Table

    out = Path(opts.out)
    shapes = [(m, p) for m in members for p in partitions if p >= m]
    print(
        f"{opts.name}: timing {len(assignors)} assignors on {len(shapes)} group shapes ...",
        file=sys.stderr,
    )
    rows = []
    for shape in shapes:
        t0 = time.monotonic()
        rows += time_assignors(assignors, [shape])
        print(
            f"  {shape[0]:>6,} members x {shape[1]:>9,} partitions: {time.monotonic() - t0:5.1f} s",
            file=sys.stderr,
        )
    timings = pd.DataFrame(rows)
    atomic_write_bytes(out / "assignor_timing.csv", timings.to_csv(index=False).encode())

    runs = results.tables["runs"]
    assign_s = _assign_time_of_runs(results)
    runs = runs.merge(assign_s, on="run_id", how="left").fillna({"leader_assign_s": 0.0})
    runs["assign_share"] = runs["leader_assign_s"] / runs["rebalance_time_total_s"]
    share = runs.groupby(["assignor", "members", "partitions"], as_index=False)[
        ["leader_assign_s", "rebalance_time_total_s", "assign_share"]
    ].median()
    atomic_write_bytes(out / "assignment_share.csv", share.to_csv(index=False).encode())
    figs = [
        Figure(
            out / "assignment_time.png", plots.assignment_time(timings, out / "assignment_time.png")
        ),
        Figure(
            out / "assignment_share.png",
            plots.share_of_rebalance(share, out / "assignment_share.png"),
        ),
    ]
    intro = [
        "When does the leader's assignment itself dominate a rebalance? Our assignors are timed "
        "directly (median of 3 calls, 1 at 1,000,000 partitions; one reassignment after one "
        "member left, each survivor reporting what it owned the way its assignor's member side "
        "does), then a scale-out is simulated with the assignor cost 'measured' (the leader's "
        "simulated assignment takes the real CPU time of our Python assignor).",
        "Python assignors are slower than Kafka's Java ones, so absolute times are an upper "
        "bound; the growth with members and partitions is the point.",
    ]
    sections: list[tuple[str, Sequence[Any]]] = [
        ("Figures", figs),
        ("Timings", [Table("Leader assignment time (s)", timings, csv="assignor_timing.csv")]),
        (
            "Share of the rebalance",
            [
                Table(
                    "Scale-out with measured assignor cost (20 partitions per member)",
                    share,
                    csv="assignment_share.csv",
                )
            ],
        ),
    ]
    piv = timings.pivot_table(
        index=["members", "partitions"], columns="assignor", values="assign_s"
    )
    summary = "leader assignment time (s):\n" + piv[list(assignors)].to_string(
        float_format=lambda v: f"{v:.3f}"
    )
    return Page(intro, sections, summary=summary)


def _assign_time_of_runs(results: Results):
    """Simulated time the leader spent computing assignments in each run's rebalance episodes."""
    from ..engine.aggregate import assignment_time

    return assignment_time(results.raw("events"), results.raw("episodes")).toArrow().to_pandas()
