"""The generic experiment pipeline: grid -> fan out on Spark -> aggregate -> figures -> report.

An experiment is a declaration (``Experiment``, one module per experiment under
``rebalance_sim/lab/catalog/``): a ``grid`` (which runs) and a ``report`` recipe (what to draw and
tabulate from the aggregated tables). ``run_experiment`` runs any of them the same way, so adding
an experiment adds a declaration, not a code path; the command line (``rebalance_sim.cli.experiment``) only
turns arguments into ``Options``.

Every report ends with a "How this was produced" list built here: the command, the runs
(reused, failed), the wall time, and the model version and digest, date and Spark master
(``rebalance_sim.lab.provenance``).

A run that breaks an invariant (computed now or reused) is listed on stderr and in that list, and
the experiment exits 1 once its report is written, as for a failed run. The one exception is
declared by the grid: a run that may end unsettled at its time limit
(``RunSpec.may_end_unsettled``, a group Kafka keeps from settling, bounded on purpose) and whose
only violation is that it did not settle; that list counts such runs apart.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    import pandas as pd

    from .grid import RunSpec


@attrs.frozen
class Options:
    """What the command line asked for, as the pipeline and the recipes see it."""

    name: str
    scale: str = "default"
    out: Path = Path("results")  # report directory (report.html, PNGs, CSVs)
    work: Path | str = Path("out")  # raw runs: a local path or any Hadoop URI
    master: str | None = None
    conf: tuple[str, ...] = ()  # extra Spark settings, KEY=VALUE
    ship: bool = True  # ship code and dependencies to a non-local master
    timeout_s: float | None = None  # how long a master may take to answer (None: 60 s)
    command: str = ""  # the command line, for the report
    extra: Any = None  # the parsed arguments, for experiment-specific options


@attrs.frozen
class Page:
    """What a report recipe returns: the page's text and items, and a summary for the console."""

    intro: Sequence[str]
    sections: Sequence[tuple[str, Sequence[Any]]]
    meta: Sequence[str] = ()
    summary: str = ""


@attrs.define
class Results:
    """A finished sweep as a recipe sees it: the runs, their status and the aggregated tables
    (pandas), plus access to the raw tables of single runs."""

    specs: list[RunSpec]
    status: pd.DataFrame
    tables: dict[str, pd.DataFrame]
    spark: Any
    work: Path | str
    failed: int
    t_start: float

    def raw(self, name: str):
        """The raw Spark DataFrame ``name`` (events, intervals, episodes, runs, points) of this
        experiment's runs."""
        from .store import read_table

        return read_table(self.spark, self.work, name, [s.run_id for s in self.specs])

    _intervals: dict = attrs.field(factory=dict, init=False, repr=False)

    def intervals(self, run_id: str) -> pd.DataFrame:
        """One run's intervals (pandas), for figures of single runs."""
        if run_id not in self._intervals:
            self.prefetch_intervals([run_id])
        return self._intervals[run_id]

    def prefetch_intervals(self, run_ids) -> None:
        """Read several runs' intervals in one Spark query (one query costs about a second)."""
        from .store import read_table

        run_ids = [r for r in dict.fromkeys(run_ids) if r not in self._intervals]
        if not run_ids:
            return
        table = read_table(self.spark, self.work, "intervals", run_ids).toArrow().to_pandas()
        for run_id in run_ids:
            self._intervals[run_id] = table[table["run_id"] == run_id].reset_index(drop=True)

    def elapsed_s(self) -> float:
        return time.monotonic() - self.t_start


@attrs.frozen
class Experiment:
    """A declared experiment. ``grid`` and ``report`` run in the generic pipeline; ``run``
    replaces the pipeline for an experiment that is not a sweep (the regression suite)."""

    name: str
    description: str
    title: str = ""
    grid: Callable[[Options], list[RunSpec]] | None = None
    report: Callable[[Options, Results], Page] | None = None
    run: Callable[[Any], int] | None = None
    # whether ``report`` reads the per-window table (``Results.tables["windows"]``); it is written
    # under the work directory either way, but only collected to the driver when read
    windows: bool = True


def say(opts: Options, text: str) -> None:
    print(f"{opts.name}: {text}", file=sys.stderr, flush=True)


def run_experiment(exp: Experiment, opts: Options) -> int:
    """Run ``exp``: its grid on Spark (resuming), aggregation, its report recipe, the report."""
    from ..atomic import atomic_write_bytes
    from ..provenance import produced_by
    from ..report.html import write_report
    from .aggregate import aggregate
    from .grid import with_kernel
    from .lock import hold
    from .spark import current_master, get_spark
    from .sweep import (
        check_aggregate,
        judge_violations,
        report_failures,
        run_sweep,
        run_violations,
    )

    if exp.run is not None:
        return exp.run(opts.extra)
    assert exp.grid is not None and exp.report is not None, (
        exp.name
    )  # (an experiment without `run` declares both)
    t_start = time.monotonic()
    specs = with_kernel(exp.grid(opts), getattr(opts.extra, "kernel", None))
    say(opts, f"{len(specs)} runs; raw runs in {opts.work}, report in {opts.out}/")
    say(opts, f"starting Spark ({opts.master or 'local[*]'}) ...")
    spark = get_spark(opts.master, conf=opts.conf, ship=opts.ship, timeout_s=opts.timeout_s)
    hold(opts.work, "--work", spark)  # (a local work directory is held already)
    status = run_sweep(specs, opts.work, master=opts.master, label=opts.name)
    failed = report_failures(status, violations=False)
    say(opts, f"aggregating with Spark ({time.monotonic() - t_start:.0f} s) ...")
    run_ids = [s.run_id for s in specs]
    arrow = aggregate(spark, opts.work, run_ids=run_ids, collect_windows=exp.windows)
    check_aggregate(specs, status, arrow["runs"])
    unsettled, broken = judge_violations(specs, run_violations(spark, opts.work, run_ids))
    for spec, texts in broken:
        print(
            f"  violations: {spec.run_id}: {len(texts)} invariant violation(s); first: {texts[0]}",
            file=sys.stderr,
        )
    tables = {k: v.to_pandas() for k, v in arrow.items()}
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("runs", "points", "window_quantiles"):
        atomic_write_bytes(out / f"{name}.csv", tables[name].to_csv(index=False).encode())
    results = Results(specs, status, tables, spark, opts.work, failed, t_start)
    say(opts, f"figures and report ({time.monotonic() - t_start:.0f} s) ...")
    page = exp.report(opts, results)
    reused = int((status["status"] == "skipped").sum())
    meta = [
        f"command: {opts.command or 'rebalance-sim experiment ' + opts.name}",
        f"{len(specs)} runs ({reused} reused from {opts.work}), {failed} failed; "
        f"wall time {time.monotonic() - t_start:.0f} s including Spark start",
        *violation_lines(unsettled, broken),
        *produced_by(current_master()),
        *page.meta,
    ]
    report = write_report(
        out / "report.html", exp.title or exp.name, page.intro, page.sections, meta
    )
    print(
        f"\n{opts.name}: done in {time.monotonic() - t_start:.0f} s; {len(specs)} runs, {failed} failed"
        + (f", {len(broken)} broke an invariant" if broken else "")
    )
    if page.summary:
        print(page.summary)
    print(f"\nreport: {report.resolve()}")
    return 1 if failed or broken else 0


def violation_lines(
    unsettled: Sequence[RunSpec], broken: Sequence[tuple[RunSpec, Any]]
) -> list[str]:
    """The report's lines on invariant violations: the runs that broke one (the first's text),
    and apart, those that ended unsettled at their time limit where their grid expects it."""
    out = []
    if broken:
        spec, texts = broken[0]
        out.append(f"{len(broken)} run(s) broke an invariant; first: {spec.run_id}: {texts[0]}")
    if unsettled:
        out.append(
            f"{len(unsettled)} run(s) ended unsettled at their time limit, as their grid "
            "expects, with no other violation (a group Kafka keeps from settling; see the page)"
        )
    return out


def scenario_dir(opts: Options) -> Path:
    """A local directory for scenario files an experiment generates: ``WORK/scenarios`` when the
    work directory is local, else a temporary one (the specs carry the files' text anyway)."""
    from .store import local_path

    local = local_path(opts.work)
    if local is not None:
        return local / "scenarios"
    import tempfile

    return Path(tempfile.gettempdir()) / "rebalance-sim-scenarios" / opts.name
