"""`rebalance-sim experiment ci-regression`: a small deterministic suite compared with a baseline.

The suite runs a few built-in scenarios x assignors x fixed seeds with the deterministic ``model``
assignor cost, so every metric below is a pure function of the code: any change is a behaviour
change. Each metric of each run is compared with the committed baseline
(``results/baseline/ci-regression.csv`` under the 4.0 group coordinator, the recorded
reference; ``results/baseline/ci-regression-4.3.csv`` under 4.3, chosen with
``--kafka-version``); a move beyond the tolerance (relative, with an absolute
floor for values near zero) in either direction fails the run, naming the metric, the run and
both values. ``--update-baseline`` rewrites the baseline on purpose.

Outputs (``--out``; from ``rebalance-sim experiment ci-regression`` the default is
``out/ci-regression/report``, or the committed ``results/ci`` with ``--update-reference``):
``metrics.csv`` (this commit), ``comparison.csv`` (every metric with baseline, current, change and
verdict), one PNG per metric with the relative change per run and both values, and ``summary.md``.
"""

from __future__ import annotations

import csv
import io
import math
import sys
from pathlib import Path

import attrs

from ..atomic import atomic_write_bytes, atomic_write_text

# The consumer group protocol (KIP-848) with the coordinator's uniform assignor, as an assignor
# name of the suite (the main job's name for it).
CONSUMER_UNIFORM = "consumer-uniform"
# (scenario, assignor); "default" keeps the scenario's own assignor list (the upgrade scenario
# changes it mid-run).
SUITE = [
    *(
        (s, a)
        for s in ("scale-out", "crash", "rolling-bounce-static", "rolling-bounce-dynamic")
        for a in ("range", "sticky", "cooperative-sticky")
    ),
    ("gc-pause-zombie", "sticky"),
    ("eager-to-cooperative-upgrade", "default"),
    ("slow-assignor", "range"),
    # The consumer group protocol (KIP-848) with the coordinator's uniform assignor.
    *(
        (s, CONSUMER_UNIFORM)
        for s in (
            "scale-out",
            "crash",
            "rolling-bounce-static",
            "rolling-bounce-dynamic",
            "gc-pause-zombie",
        )
    ),
    # Manual commit strategies (consumer.commit_mode), written ASSIGNOR/MODE.
    *(
        (s, f"cooperative-sticky/{mode}")
        for s in ("crash", "rolling-bounce-dynamic")
        for mode in ("sync-per-batch", "async-per-batch")
    ),
    ("crash", f"{CONSUMER_UNIFORM}/sync-per-batch"),
]
SEEDS = [1, 2]
PARAMS = {"members": "8", "partitions": "32", "assignor_cost": "kafka"}

# Deterministic per-run metrics compared with the baseline (names of the simulator's summary).
METRICS = [
    "rebalance_time_total_s",
    "rebalance_time_max_s",
    "rounds_total",
    "unassigned_partition_s",
    "unassigned_max_s",
    "stop_the_world_s",
    "double_processing_partition_s",
    "throughput_loss_records",
    "peak_lag_records",
    "records_reprocessed",
    "first_record_max_s",
]
KEY = ["scenario", "assignor", "seed"]
DEFAULT_BASELINE = Path("results/baseline/ci-regression.csv")
# the group coordinator's release the suite runs (sim.coordinator.behaviour) -> its baseline;
# the classic rows are the same under both (the releases differ in the consumer group only)
BASELINES = {"4.0": DEFAULT_BASELINE, "4.3": Path("results/baseline/ci-regression-4.3.csv")}
DEFAULT_KAFKA_VERSION = "4.3"
DEFAULT_OUT = Path("results/ci")


@attrs.frozen
class Finding:
    """One metric of one run compared with the baseline."""

    scenario: str
    assignor: str
    seed: int
    metric: str
    baseline: float | None
    current: float | None
    status: str  # ok | moved | new | missing

    def describe(self) -> str:
        run = f"{self.scenario} / {self.assignor} / seed {self.seed}"
        if self.status == "new":
            return f"{self.metric} of {run}: not in the baseline (current {self.current:g})"
        if self.status == "missing":
            return (
                f"{self.metric} of {run}: in the baseline ({self.baseline:g}) but not produced now"
            )
        change = _relative(self.baseline, self.current)
        pct = "" if change is None else f" ({change:+.1%})"
        return f"{self.metric} of {run}: baseline {self.baseline:g}, now {self.current:g}{pct}"


def _relative(baseline: float | None, current: float | None) -> float | None:
    if baseline is None or current is None or baseline == 0:
        return None
    return (current - baseline) / abs(baseline)


def run_suite(
    progress: bool = True, kernel: str | None = None, kafka_version: str = DEFAULT_KAFKA_VERSION
) -> list[dict]:
    """Run every (scenario, assignor, seed) of the suite (with the simulation ``kernel``, see
    ``sim.kernel``, and the group coordinator of ``kafka_version``); one row of metrics each."""
    from sim import run_scenario
    from sim.scenario.builtins import load_scenario

    rows = []
    plan = [(s, a, seed) for s, a in SUITE for seed in SEEDS]
    for i, (scenario, assignor, seed) in enumerate(plan, 1):
        if progress:
            print(
                f"[{i}/{len(plan)}] {scenario} {assignor} seed {seed}", file=sys.stderr, flush=True
            )
        name, _, mode = assignor.partition("/")
        if name == "default":
            params = dict(PARAMS)
        elif name == CONSUMER_UNIFORM:
            params = {
                **PARAMS,
                "consumer.group_protocol": "consumer",
                "consumer.group_remote_assignor": "uniform",
            }
        else:
            params = {**PARAMS, "assignor": name}
        if mode:
            params["consumer.commit_mode"] = mode
        params["kafka_version"] = kafka_version
        sc = load_scenario(scenario, params)
        summary = run_scenario(sc, seed=seed, kernel=kernel).summary
        rows.append(
            {
                "scenario": scenario,
                "assignor": assignor,
                "seed": seed,
                **{m: float(summary[m]) for m in METRICS},
            }
        )
    return rows


def to_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=KEY + METRICS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})
    return buf.getvalue()


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        rows = []
        for i, r in enumerate(csv.DictReader(f), 2):
            try:
                rows.append(
                    {
                        "scenario": r["scenario"],
                        "assignor": r["assignor"],
                        "seed": int(r["seed"]),
                        **{m: float(r[m]) for m in METRICS if r.get(m) not in (None, "")},
                    }
                )
            except (KeyError, ValueError) as e:
                raise ValueError(f"{path}: line {i}: bad or missing column ({e})") from None
        return rows


def compare(
    baseline: list[dict], current: list[dict], rel_tol: float, abs_tol: float
) -> list[Finding]:
    """Every metric of every run, judged against the baseline."""

    def key(r) -> tuple[str, str, int]:
        return (r["scenario"], r["assignor"], r["seed"])

    base: dict[tuple[str, str, int], dict] = {key(r): r for r in baseline}
    cur = {key(r): r for r in current}
    findings = []
    for k in sorted(set(base) | set(cur)):
        for metric in METRICS:
            b = base.get(k, {}).get(metric)
            c = cur.get(k, {}).get(metric)
            if b is None and c is None:
                continue
            if b is None:
                status = "new"
            elif c is None:
                status = "missing"
            else:
                status = "ok" if math.isclose(b, c, rel_tol=rel_tol, abs_tol=abs_tol) else "moved"
            scenario, assignor, seed = k
            findings.append(Finding(scenario, assignor, seed, metric, b, c, status))
    return findings


def _plot(findings: list[Finding], out: Path, rel_tol: float = 0.02) -> list[Path]:
    """One PNG per metric: on top the relative change of every run against the baseline (a 2%
    move is plain to see, the tolerance band is drawn), below the two values side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    paths = []
    for metric in METRICS:
        rows = [f for f in findings if f.metric == metric]
        if not rows:
            continue
        labels = [f"{f.scenario} {f.assignor} s{f.seed}" for f in rows]
        x = np.arange(len(rows))
        fig, (rel, ax) = plt.subplots(
            2,
            1,
            figsize=(max(8, 0.45 * len(rows)), 7.0),
            sharex=True,
            gridspec_kw={"height_ratios": [1, 1.3]},
        )
        change = [_relative(f.baseline, f.current) for f in rows]
        pct = np.array([100.0 * c if c is not None else np.nan for c in change])
        colors = ["#d62728" if f.status != "ok" else "#3182bd" for f in rows]
        rel.bar(x, np.nan_to_num(pct), 0.6, color=colors)
        rel.axhspan(
            -100 * rel_tol,
            100 * rel_tol,
            color="grey",
            alpha=0.15,
            linewidth=0,
            label=f"tolerance ±{rel_tol:.0%}",
        )
        rel.axhline(0, color="black", linewidth=0.6)
        top = max(2.5 * 100 * rel_tol, float(np.nanmax(np.abs(pct), initial=0.0)) * 1.15)
        rel.set_ylim(-top, top)
        rel.set_ylabel("change vs baseline (%)")
        rel.set_title(
            f"{metric}: this commit vs baseline (ci-regression suite; red = outside tolerance)"
        )
        rel.legend(fontsize=8, loc="upper right")
        rel.grid(True, axis="y", alpha=0.3)
        ax.bar(x - 0.2, [f.baseline or 0 for f in rows], 0.4, label="baseline", color="#9ecae1")
        ax.bar(x + 0.2, [f.current or 0 for f in rows], 0.4, label="this commit", color="#3182bd")
        ax.set_xticks(x, labels, rotation=60, ha="right", fontsize=7)
        unit = "s" if metric.endswith("_s") else ("records" if "records" in metric else "count")
        ax.set_ylabel(f"{metric} ({unit})")
        ax.legend(fontsize=8, loc="upper right")
        fig.tight_layout()
        buf = io.BytesIO()
        # bbox_inches="tight": rotated labels at the edges are kept whole, never clipped
        fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
        plt.close(fig)
        path = out / f"{metric}.png"
        atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    return paths


def _summary_md(findings: list[Finding], rel_tol: float) -> str:
    bad = [f for f in findings if f.status != "ok"]
    lines = [
        "# ci-regression",
        "",
        f"{len(findings)} metric values compared, tolerance {rel_tol:.0%}; {len(bad)} outside it.",
        "",
    ]
    lines += [f"- {f.describe()}" for f in bad]
    lines += ["", "Figures: " + ", ".join(f"`{m}.png`" for m in METRICS)]
    return "\n".join(lines) + "\n"


DEFAULT_TOLERANCE, DEFAULT_ABS_TOLERANCE = 0.02, 1e-3


def run(args) -> int:
    out = Path(args.out or DEFAULT_OUT)
    version = getattr(args, "kafka_version", None) or DEFAULT_KAFKA_VERSION
    baseline_path = Path(args.baseline or BASELINES[version])
    tolerance = DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
    abs_tolerance = DEFAULT_ABS_TOLERANCE if args.abs_tolerance is None else args.abs_tolerance
    rows = run_suite(
        progress=not args.quiet, kernel=getattr(args, "kernel", None), kafka_version=version
    )
    atomic_write_text(out / "metrics.csv", to_csv(rows))
    if args.update_baseline:
        atomic_write_text(baseline_path, to_csv(rows))
        print(f"baseline rewritten: {baseline_path} ({len(rows)} runs)")
        return 0
    if not baseline_path.exists():
        print(
            f"rebalance-sim experiment ci-regression: no baseline at {baseline_path} "
            "(create it with --update-baseline)",
            file=sys.stderr,
        )
        return 2
    try:
        baseline = read_csv(baseline_path)
    except ValueError as e:
        print(f"rebalance-sim experiment ci-regression: {e}", file=sys.stderr)
        return 2
    findings = compare(baseline, rows, tolerance, abs_tolerance)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        ["scenario", "assignor", "seed", "metric", "baseline", "current", "change", "status"]
    )
    for f in findings:
        change = _relative(f.baseline, f.current)
        w.writerow(
            [
                f.scenario,
                f.assignor,
                f.seed,
                f.metric,
                f.baseline,
                f.current,
                "" if change is None else f"{change:.6f}",
                f.status,
            ]
        )
    atomic_write_text(out / "comparison.csv", buf.getvalue())
    _plot(findings, out, tolerance)
    atomic_write_text(out / "summary.md", _summary_md(findings, tolerance))
    bad = [f for f in findings if f.status != "ok"]
    for f in bad:
        print(f"REGRESSION {f.describe()}", file=sys.stderr)
    print(
        f"ci-regression: {len(findings) - len(bad)} of {len(findings)} metric values within "
        f"{tolerance:.0%} of the baseline; figures in {out}/"
    )
    return 1 if bad else 0


def add_arguments(p, with_out: bool = True) -> None:
    """The suite's options (``--out`` too unless the caller's parser already has one)."""
    if with_out:
        p.add_argument(
            "--out", default=str(DEFAULT_OUT), help="where metrics, comparison and plots go"
        )
    # defaults are applied in run(): None says the option was not given (``rebalance_sim.cli.experiment`` refuses
    # these options for the other experiments)
    p.add_argument(
        "--baseline",
        help=f"ci-regression: baseline CSV to compare with (default {DEFAULT_BASELINE})",
    )
    p.add_argument(
        "--update-baseline",
        action="store_true",
        help="ci-regression: rewrite the baseline with this run",
    )
    p.add_argument(
        "--tolerance", type=float, help="ci-regression: relative tolerance (default 0.02 = 2%%)"
    )
    p.add_argument(
        "--abs-tolerance",
        type=float,
        help="ci-regression: absolute tolerance for values near zero (default 0.001)",
    )
    p.add_argument("--quiet", action="store_true", help="ci-regression: no progress lines")
    p.add_argument(
        "--kafka-version",
        choices=sorted(BASELINES),
        help=f"ci-regression: the group coordinator's release the suite runs under, each with "
        f"its baseline (default {DEFAULT_KAFKA_VERSION})",
    )
