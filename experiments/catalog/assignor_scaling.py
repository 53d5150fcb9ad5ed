"""When does the leader's assignment dominate a rebalance? Our assignors timed directly, then a
simulated scale-out with the assignor cost ``measured``, 100..10,000 members.

A declaration for the generic pipeline (``experiments.engine.pipeline``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ..engine.grid import RunSpec, resolve
from ..engine.pipeline import Experiment, Options, Page, Results
from .common import EAGER_VS_COOP_ASSIGNORS, time_assignors

ASSIGNORS = EAGER_VS_COOP_ASSIGNORS
MEMBERS = (100, 1000, 10_000)
PARTITIONS = (1_000, 10_000, 100_000, 1_000_000)


def grid(opts: Options) -> list[RunSpec]:
    """Scale-outs with the measured assignor cost, 20 partitions per member, one seed."""
    sim_sizes = (100, 1000, 3000) if opts.scale != "large" else (100, 1000, 3000, 10_000)
    specs = []
    for members in sim_sizes:
        for assignor in ASSIGNORS:
            partitions = members * 20
            specs.append(
                RunSpec(
                    "scale-out",
                    (
                        f"members={members}",
                        f"partitions={partitions}",
                        f"assignor={assignor}",
                        "assignor_cost=measured",
                        "group.initial_rebalance_delay_ms=0",
                    ),
                    0,
                    (
                        ("scenario", "scale-out"),
                        ("assignor", assignor),
                        ("members", members),
                        ("partitions", partitions),
                    ),
                )
            )
    return resolve(specs, opts.name)


def report(opts: Options, results: Results) -> Page:
    import pandas as pd

    from ..atomic import atomic_write_bytes
    from ..report import plots
    from ..report.html import Figure, Table

    out = Path(opts.out)
    shapes = [(m, p) for m in MEMBERS for p in PARTITIONS if p >= m]
    print(
        f"{opts.name}: timing {len(ASSIGNORS)} assignors on {len(shapes)} group shapes ...",
        file=sys.stderr,
    )
    rows = []
    for shape in shapes:
        t0 = time.monotonic()
        rows += time_assignors(ASSIGNORS, [shape])
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
    sections = [
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
    summary = "leader assignment time (s):\n" + piv[list(ASSIGNORS)].to_string(
        float_format=lambda v: f"{v:.3f}"
    )
    return Page(intro, sections, summary=summary)


def _assign_time_of_runs(results: Results):
    """Simulated time the leader spent computing assignments in each run's rebalance episodes."""
    from ..engine.aggregate import assignment_time

    return assignment_time(results.raw("events"), results.raw("episodes")).toArrow().to_pandas()


EXPERIMENT = Experiment(
    "assignor-scaling",
    "leader assignment time per assignor (100-10,000 members, up to 1,000,000 partitions) and its "
    "share of a simulated rebalance (100-3,000 members; 10,000 with --scale large)",
    title="Assignor scaling",
    grid=grid,
    report=report,
    windows=False,
)
