"""The experiment report: produced end to end (smoke scale), self-contained, every figure present."""

from __future__ import annotations

import argparse
import base64
import re

import pandas as pd
import pytest

from rebalance_sim.cli.experiment import cmd_experiment
from rebalance_sim.lab.report.html import Figure, Table, referenced_files, write_report

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def smoke_report(spark, tmp_path_factory):
    """`experiment eager-vs-cooperative --scale smoke` into a temporary directory."""
    tmp = tmp_path_factory.mktemp("report")
    args = argparse.Namespace(
        name="eager-vs-cooperative",
        scale="smoke",
        out=str(tmp / "results"),
        work=str(tmp / "work"),
        master=None,
    )
    code = cmd_experiment(args)
    return code, tmp / "results"


def test_experiment_succeeds_and_writes_report(smoke_report):
    """The experiment exits 0 and writes report.html with its CSV tables beside it."""
    code, out = smoke_report
    assert code == 0
    assert (out / "report.html").is_file()
    for name in (
        "points.csv",
        "runs.csv",
        "window_quantiles.csv",
        "headline.csv",
        "assignor_timing.csv",
    ):
        assert (out / name).is_file(), name
    # scenarios x memberships x sizes x (4 classic assignors + the consumer group protocol) x seeds
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 3 * 2 * 2 * 5 * 2
    assert (runs["assignor"] == "consumer-uniform").sum() == 3 * 2 * 2 * 2
    # a seed samples the fault's instant, the start instants and the member ids: two seeds of one
    # point differ
    crash = runs[(runs["scenario"] == "crash") & (runs["assignor"] == "range")]
    assert crash.groupby(["membership", "members"])["records_reprocessed"].nunique().min() == 2


def test_every_referenced_figure_exists_and_is_embedded(smoke_report):
    """Every figure the report names exists beside it as a PNG, and the page embeds the same bytes."""
    _, out = smoke_report
    html = (out / "report.html").read_text()
    names = referenced_files(out / "report.html")
    assert {
        "ownership_timeline.png",
        "unassigned_cdf.png",
        "rebalance_time_vs_size.png",
        "unassigned_vs_size.png",
        "throughput.png",
        "assignment_time.png",
    } <= set(names)
    for name in names:
        data = (out / name).read_bytes()
        assert data.startswith(PNG), name
        assert base64.b64encode(data).decode() in html, name
    assert not re.search(r'src="(?!data:)', html), "the report must not link external files"


def test_runs_match_simulator_summaries(smoke_report):
    """In the report's per-run table, the Spark recomputation from intervals matches every run."""
    _, out = smoke_report
    runs = pd.read_csv(out / "runs.csv")
    assert runs["intervals_match"].all()


def test_write_report_embeds_figures_and_tables(tmp_path):
    """write_report produces one HTML file with the figure inline, its caption and the table."""
    png = tmp_path / "a.png"
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    fig.savefig(png)
    plt.close(fig)
    path = write_report(
        tmp_path / "r.html",
        "T",
        ["intro"],
        [("S", [Figure(png, "a caption"), Table("tab", pd.DataFrame({"x": [1.5]}))])],
    )
    text = path.read_text()
    assert referenced_files(path) == ["a.png"]
    assert "a caption" in text and "<table>" in text and "1.50" in text


def test_report_leads_with_the_stall_and_says_how_it_was_produced(smoke_report):
    """The headline puts the stall first (unassigned partition-s, stop-the-world, records
    delayed), then duration and whole rounds; one sentence per scenario and membership gives the
    eager/cooperative answer; no percentile over a handful of windows; provenance at the end."""
    _, out = smoke_report
    head = pd.read_csv(out / "headline.csv")
    labels = [
        "unassigned partition-s",
        "stop-the-world s",
        "records delayed",
        "records processed twice",
        "longest gap s",
        "rebalance s",
        "rounds",
    ]
    assert list(head.columns)[5:12] == labels
    assert list(head.columns)[12:] == [
        f"{label} {stat}" for label in labels for stat in ("p10", "p90")
    ]
    assert (head["unassigned partition-s p10"] <= head["unassigned partition-s"]).all()
    assert (head["unassigned partition-s"] <= head["unassigned partition-s p90"]).all()
    assert head["rounds"].dtype.kind == "i"
    html = (out / "report.html").read_text()
    for scenario in ("scale-out", "crash", "rolling-deploy"):
        for membership in ("dynamic", "static"):
            assert f"{scenario}, {membership} members: cooperative-sticky" in html
    assert "window_p99_s" not in html and "p99 s" in html
    produced = html[html.index("How this was produced") :]
    assert (
        "model digest" in produced and "Spark master: local[" in produced and "machine:" in produced
    )
    assert 'class="table-wrap"' in html


def _point(assignor, stall, rounds, band=0.0):
    """A points row with every statistic the headline reads; the stall's p10-p90 band is
    ``stall`` -/+ ``band``."""
    row = {
        "scenario": "scale-out",
        "membership": "dynamic",
        "members": 10,
        "assignor": assignor,
        "seeds": 20,
    }
    for metric, value in (
        ("unassigned_partition_s", stall),
        ("stop_the_world_s", 0.1),
        ("throughput_loss_records", stall * 100),
        ("records_reprocessed", 4.0),
        ("unassigned_max_s", 1.0),
        ("rebalance_time_total_s", 2.0),
        ("rounds_total", rounds),
    ):
        spread = band if metric == "unassigned_partition_s" else 0.0
        row.update(
            {
                f"{metric}_median": value,
                f"{metric}_p10": value - spread,
                f"{metric}_p90": value + spread,
            }
        )
    return row


def test_headline_sentence_states_the_ratio():
    """The sentence compares cooperative-sticky with the eager assignor that stalls least, quoting
    medians with their p10-p90 bands."""
    from rebalance_sim.lab.report.headline import headline_table, sentences

    points = pd.DataFrame(
        [
            _point("range", 700.0, 1.0, band=20.0),
            _point("sticky", 600.0, 1.0, band=20.0),
            _point("cooperative-sticky", 3.0, 2.5, band=1.0),
        ]
    )
    table = headline_table(points, 10)
    assert table["rounds"].tolist() == [1, 1, 2]  # counted things stay whole (2.5 rounds to even)
    (line,) = sentences(table)
    assert line.startswith(
        "scale-out, dynamic members: cooperative-sticky stalls 200x less than "
        "the best eager assignor (sticky): 3 [2-4] vs 600 [580-620] unassigned "
        "partition-seconds"
    )


def test_headline_calls_overlapping_bands_about_the_same():
    """Two figures whose p10-p90 bands overlap are about the same, however far apart their medians;
    eager assignors whose bands overlap are named together, not as "the best"."""
    from rebalance_sim.lab.report.headline import headline_table, sentences

    points = pd.DataFrame(
        [
            _point("range", 700.0, 1.0, band=300.0),
            _point("sticky", 600.0, 1.0, band=300.0),
            _point("cooperative-sticky", 450.0, 1.0, band=200.0),
        ]
    )
    (line,) = sentences(headline_table(points, 10))
    assert "stall about the same" in line and "eager (sticky, range alike)" in line
    assert "less than" not in line


@pytest.mark.parametrize(
    "flags, expected", [([], "out/ci-regression/report"), (["--update-reference"], "results/ci")]
)
def test_experiments_write_to_out_unless_asked(tmp_path, monkeypatch, flags, expected):
    """A run never rewrites the committed results/ unless --update-reference is given."""
    from rebalance_sim.cli.main import main
    from rebalance_sim.lab import catalog

    seen = {}
    monkeypatch.chdir(tmp_path)
    from rebalance_sim.lab.engine.pipeline import Experiment

    monkeypatch.setitem(
        catalog.EXPERIMENTS,
        "ci-regression",
        Experiment(
            "ci-regression", "", run=lambda args: 0 if seen.setdefault("out", args.out) else 1
        ),
    )
    assert main(["experiment", "ci-regression", *flags]) == 0
    assert seen["out"] == expected


def test_report_puts_the_three_protocols_side_by_side(smoke_report):
    """Before the headline, one sentence per scenario and membership puts the consumer group
    protocol beside classic cooperative and the best classic eager assignor, quoting the
    per-point medians (points.csv) at the largest size the consumer protocol ran."""
    import html as htmllib

    from rebalance_sim.lab.report.headline import num

    _, out = smoke_report
    page = htmllib.unescape((out / "report.html").read_text())
    section = page[page.index("Three protocols side by side") : page.index("<h2>Headline")]
    points = pd.read_csv(out / "points.csv")
    size = points.loc[points["assignor"] == "consumer-uniform", "members"].max()

    def quoted(p, assignor):
        m, lo, hi = (
            p.loc[assignor, f"unassigned_partition_s_{s}"] for s in ("median", "p10", "p90")
        )
        return num(m) if lo == hi else f"{num(m)} [{num(lo)}-{num(hi)}]"

    for scenario in ("scale-out", "crash", "rolling-deploy"):
        for membership in ("dynamic", "static"):
            p = points[
                (points["scenario"] == scenario)
                & (points["membership"] == membership)
                & (points["members"] == size)
            ].set_index("assignor")
            eager = p["unassigned_partition_s_median"][["range", "roundrobin", "sticky"]].idxmin()
            start = section.index(f"{scenario}, {membership} members: the consumer protocol has")
            sentence = section[start : section.index("</p>", start)]
            assert (
                f"{quoted(p, 'consumer-uniform')} vs {quoted(p, 'cooperative-sticky')} vs "
                f"{quoted(p, eager)} unassigned partition-seconds"
            ) in sentence, sentence
            assert f"the best classic eager assignor ({eager})" in sentence or (
                "classic eager (" in sentence and "alike)" in sentence
            ), sentence
            settle = p.loc["consumer-uniform", "rebalance_time_total_s_median"]
            assert f"settles in {settle:.1f} s" in sentence


def test_main_job_runs_the_consumer_protocol_at_every_size_after_it_formed(tmp_path):
    """The default grid runs the consumer protocol at every group size; every assignor of a point
    runs the same scenario file, whose first fault comes after the consumer protocol can have
    formed the group (partitions x (assign + revoke cost)), a whole number of 15 s periods after
    the built-ins' 60 s."""
    import tomllib
    from pathlib import Path

    from rebalance_sim.lab.catalog.eager_vs_cooperative import SCALES, eager_vs_coop_specs
    from rebalance_sim.lab.vocabulary import CONSUMER as CONSUMER_PROTOCOL
    from rebalance_sim.lab.vocabulary import CONSUMER_PROFILE

    scale = SCALES["default"]
    specs = eager_vs_coop_specs(scale, tmp_path)
    by_size: dict[int, set] = {}
    files: dict[tuple, set] = {}
    for s in specs:
        p = dict(s.point)
        by_size.setdefault(p["members"], set()).add(p["assignor"])
        files.setdefault((p["scenario"], p["membership"], p["members"]), set()).add(s.scenario)
    assert all(CONSUMER_PROTOCOL in a for a in by_size.values()) and set(by_size) == set(
        scale.sizes
    )
    per_partition_s = (
        CONSUMER_PROFILE["assign_cost_ms"] + CONSUMER_PROFILE["revoke_cost_ms"]
    ) / 1000
    for (_, _, members), paths in files.items():
        assert len(paths) == 1
        first = min(
            a["at_s"] for a in tomllib.loads(Path(next(iter(paths))).read_text())["timeline"]
        )
        assert first >= 60.0 and (first - 60.0) % 15 == 0
        assert first > members * scale.partitions_per_member * per_partition_s


def test_member_colours_are_distinct_and_never_red():
    """A timeline's members each get their own colour (300 of them), and none is red, which marks
    unassigned partitions."""
    import colorsys

    from rebalance_sim.lab.report.plots import member_colours

    colours = member_colours([f"c{i:03d}" for i in range(300)])
    assert len(set(colours.values())) == 300
    for r, g, b, _ in colours.values():
        h, _l, s = colorsys.rgb_to_hls(r, g, b)
        assert not (s > 0.25 and (h < 0.04 or h > 0.95)), (r, g, b)
