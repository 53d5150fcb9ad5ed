"""`experiment protocols`: runs end to end at the smoke scale, and its answer sentences are the
numbers of its own table."""

from __future__ import annotations

import argparse
import html as htmllib

import pandas as pd
import pytest

from rebalance_sim.lab.catalog.protocols import SCALES
from rebalance_sim.lab.report.headline import num, quote
from rebalance_sim.lab.report.protocols import answer_sentences, costs_more, costs_more_sentence
from rebalance_sim.lab.vocabulary import (
    CONSUMER,
    COOPERATIVE,
    EAGER,
    MIGRATION,
    MIGRATION_FROM,
)
from rebalance_sim.lab.vocabulary import PROTOCOLS_SCENARIOS as SCENARIOS


@pytest.fixture(scope="module")
def protocols_report(spark, tmp_path_factory):
    """`experiment protocols --scale smoke` into a temporary directory."""
    from rebalance_sim.cli.experiment import cmd_experiment

    tmp = tmp_path_factory.mktemp("protocols")
    args = argparse.Namespace(
        name="protocols",
        scale="smoke",
        out=str(tmp / "results"),
        work=str(tmp / "work"),
        master=None,
    )
    code = cmd_experiment(args)
    out = tmp / "results"
    return code, out, htmllib.unescape((out / "report.html").read_text())


def test_grid_runs_every_protocol_on_every_scenario(protocols_report):
    """Exit 0; every scenario x size x protocol ran, plus the consumer protocol's extra heartbeat
    intervals, and Spark's recomputation from the intervals matches every run."""
    code, out, _ = protocols_report
    assert code == 0
    scale = SCALES["smoke"]
    every = pd.read_csv(out / "runs.csv")
    main = len(SCENARIOS) * len(scale.points()) * 3 * len(scale.seeds)
    extra = 2 * len(scale.heartbeat_ms) * len(scale.seeds)
    migration = len(scale.sizes) * len(MIGRATION_FROM) * len(scale.seeds)
    versions = len(scale.versions) * 2 * scale.versions_seeds
    assert len(every) == main + extra + migration + versions
    runs = every[every["grid"] == "main"]
    assert len(runs) == main + extra + migration
    assert set(runs["assignor"]) == {EAGER, COOPERATIVE, CONSUMER}
    assert set(runs["scenario"]) == {*SCENARIOS, MIGRATION}
    assert set(runs["kafka_version"].astype(str)) == {"4.3"}
    assert every["intervals_match"].all()
    # every fault came after the group had formed, so an episode measured it
    assert (runs["episodes"] >= 1).all()
    # the 4.0-vs-4.3 grid: each (scenario, size) under both releases, the consumer protocol
    grid = every[every["grid"] == "versions"]
    assert set(grid["assignor"]) == {CONSUMER}
    versions = grid["kafka_version"].astype(str)
    assert set(zip(grid["scenario"], grid["members"], versions, strict=True)) == {
        (label, members, version) for label, members in scale.versions for version in ("4.0", "4.3")
    }
    assert pd.read_csv(out / "protocols.csv")["fault counted"].all()


def test_the_bounded_cell_shows_40s_loop_and_43_settling(protocols_report):
    """The smoke grid's slow-assignor cell is bounded: under Kafka 4.0 its group is still
    unsettled at the bound (its members fenced again and again) and the experiment still exits
    0, counting that run apart; under 4.3 the group settles. The page says how long 4.0's ran
    and how far it went, in versions.csv's numbers."""
    code, out, html = protocols_report
    assert code == 0
    ((label, members, bound_s),) = SCALES["smoke"].versions_bounded
    versions = pd.read_csv(out / "versions.csv")
    cell = versions[(versions["scenario"] == label) & (versions["members"] == members)]
    old, new = (cell[cell["Kafka"].astype(str) == v].iloc[0] for v in ("4.0", "4.3"))
    assert old["settled"] == 0 and new["settled"] == new["seeds"]
    assert old["time limit s"] == new["time limit s"] == bound_s
    assert old["fenced heartbeats"] > 0 and old["group epochs"] > members
    assert pd.isna(old["formation s"]) and new["formation s"] < bound_s
    assert (
        f"under Kafka 4.0's group coordinator the group did not settle in {num(bound_s)} s" in html
    )
    start = html.index(f"{label} at {members:,} members under the consumer protocol")
    sentence = html[start : html.index("</p>", start)]
    assert f"{num(old['fenced heartbeats'])} heartbeats" in sentence
    assert f"{num(old['group epochs'])} group epochs" in sentence
    assert f"forms in {num(new['formation s'])} s" in sentence
    assert "1 run(s) ended unsettled at their time limit, as their grid expects" in html
    assert "broke an invariant" not in html


def test_first_screen_answers_with_the_tables_numbers(protocols_report):
    """Before any table, one sentence per scenario quotes the consumer protocol's, classic
    cooperative's and classic eager's unassigned partition-seconds and time to settle at the
    largest size, exactly as protocols.csv has them, with the right direction word."""
    _, out, html = protocols_report
    table = pd.read_csv(out / "protocols.csv")
    first_table = html.index("<table>")
    size = table["members"].max()
    label = "unassigned partition-s"

    def quote(t, p):
        m, lo, hi = (float(t.loc[p, f"{label}{s}"]) for s in ("", " p10", " p90"))
        return num(m) if lo == hi else f"{num(m)} [{num(lo)}-{num(hi)}]"

    for scenario in SCENARIOS:
        t = table[(table["scenario"] == scenario) & (table["members"] == size)].set_index(
            "protocol"
        )
        quoted = (
            " vs ".join(quote(t, p) for p in (CONSUMER, COOPERATIVE, EAGER))
            + " unassigned partition-seconds"
        )
        start = html.index(f"{scenario} ({size:,} members")
        assert start < first_table, scenario
        sentence = html[start : html.index("</p>", start)]
        assert quoted in sentence, (scenario, quoted, sentence)
        # vs classic cooperative: "about the same" when the p10-p90 bands overlap or the medians
        # are within 5%, else the direction
        c, k = t.loc[CONSUMER], t.loc[COOPERATIVE]
        overlap = c[f"{label} p10"] <= k[f"{label} p90"] and k[f"{label} p10"] <= c[f"{label} p90"]
        word = (
            "about the same"
            if overlap or abs(c[label] - k[label]) <= 0.05 * k[label]
            else "less"
            if c[label] < k[label]
            else "more"
        )
        assert f"{word} stall" in sentence.split(" and ")[0], sentence
        settle = float(t.loc[CONSUMER, "rebalance s"])
        assert f"settles in {settle:.1f} s" in sentence
    assert "Where it costs more" in html[:first_table]


def test_the_consumer_protocol_does_not_wait_for_a_slow_member(protocols_report):
    """No group-wide barrier (KIP-848): while one member's poll loop is slow, a scale-out under
    the consumer protocol leaves fewer partition-seconds unassigned than either classic protocol,
    whose JoinGroup barrier waits for that member."""
    _, out, _ = protocols_report
    table = pd.read_csv(out / "protocols.csv")
    slow = table[table["scenario"] == "slow-member"]
    for members, g in slow.groupby("members"):
        g = g.set_index("protocol")["unassigned partition-s"]
        assert g[CONSUMER] < g[COOPERATIVE] and g[CONSUMER] < g[EAGER], (members, g.to_dict())


def test_a_shorter_heartbeat_settles_the_consumer_protocol_sooner(protocols_report):
    """The heartbeat interval paces reconciliation: the consumer protocol's scale-out settles
    sooner with a 1 s heartbeat than with the default 5 s, and the report says so in numbers."""
    _, out, html = protocols_report
    points = pd.read_csv(out / "points.csv")
    p = points[
        (points["assignor"] == CONSUMER)
        & (points["scenario"] == "scale-out")
        & (points["members"] == SCALES["smoke"].heartbeat_size)
        & (points["grid"] == "main")
    ].set_index("heartbeat_ms")
    fast, default = (float(p.loc[h, "rebalance_time_total_s_median"]) for h in (1000, 5000))
    assert fast < default
    assert f"{fast:.1f} s at 1 s, {default:.1f} s at 5 s" in html


def _row(scenario, protocol, stall, settle, reprocessed=0.0):
    return {
        "scenario": scenario,
        "members": 100,
        "partitions": 200,
        "protocol": protocol,
        "unassigned partition-s": stall,
        "records delayed": stall * 100,
        "records processed twice": reprocessed,
        "longest gap s": 1.0,
        "stop-the-world s": 0.0,
        "rebalance s": settle,
        "assignment s": 0.01,
        "assignments": 1.0,
    }


def test_sentence_states_ratios_and_where_it_costs_more():
    """The sentence gives the consumer protocol's ratio against each classic protocol; the
    cost line names the metric and the point where it is worse than the better classic one."""
    table = pd.DataFrame(
        [
            _row("crash", EAGER, 400.0, 50.0),
            _row("crash", COOPERATIVE, 100.0, 45.0),
            _row("crash", CONSUMER, 200.0, 90.0, reprocessed=30.0),
        ]
    )
    (line,) = answer_sentences(table)
    assert line.startswith(
        "crash (100 members, 200 partitions): the consumer protocol has 2.0x more "
        "stall than classic cooperative and 2.0x less stall than classic eager "
        "(200 vs 100 vs 400 unassigned partition-seconds"
    )
    assert "settles in 90.0 s vs 45.0 s (cooperative) and 50.0 s (eager), 2.0x slower" in line
    more = costs_more(table)
    assert {(r[0], r[3]) for r in more} == {
        ("crash", "unassigned partition-s"),
        ("crash", "records processed twice"),
        ("crash", "rebalance s"),
    }
    assert (
        "unassigned partition-s in 1 of 1 points (crash; worst: crash at 100 members x 200 "
        "partitions, 200 vs 100)"
    ) in costs_more_sentence(more, 1)
    # below the floor (a third of a record) is no cost
    table.loc[table["protocol"] == CONSUMER, "records processed twice"] = 0.3
    assert "records processed twice" not in {r[3] for r in costs_more(table)}


def test_migration_sentence_quotes_the_table(protocols_report):
    """The online migration runs from classic eager and cooperative at every size, and its
    sentence quotes protocols.csv's unassigned partition-seconds at the largest size."""
    _, out, html = protocols_report
    table = pd.read_csv(out / "protocols.csv")
    mig = table[table["scenario"] == MIGRATION]
    assert set(mig["protocol"]) == set(MIGRATION_FROM)
    size = mig["members"].max()
    start = html.index("Migrating onto the consumer protocol")
    sentence = html[start : html.index("</p>", start)]
    for protocol, name in ((COOPERATIVE, "cooperative"), (EAGER, "eager")):
        row = mig[(mig["members"] == size) & (mig["protocol"] == protocol)].iloc[0]
        assert f"from classic {name} {quote(row, 'unassigned partition-s')} unassigned" in sentence


def test_the_large_scale_runs_the_consumer_protocol_at_10000_members_under_43(tmp_path):
    """Under Kafka 4.3's coordinator the consumer protocol runs at every size of the large scale,
    10,000 members included (the migration too); the 4.0-vs-4.3 grid runs formation at 1,000 and
    10,000 members, a rolling deploy and slow-assignor under both releases, with Kafka's own
    assignment time but for slow-assignor's fixed 20 s."""
    from rebalance_sim.lab.catalog.protocols import protocol_specs

    scale = SCALES["large"]
    assert scale.consumer_up_to is None
    specs = protocol_specs(scale, tmp_path)
    by_size: dict[int, set] = {}
    for spec in specs:
        point = dict(spec.point)
        if point["grid"] == "main":
            by_size.setdefault(point["members"], set()).add((point["scenario"], point["assignor"]))
    assert max(by_size) == 10_000
    for ran in by_size.values():
        assert {assignor for _, assignor in ran} == {EAGER, COOPERATIVE, CONSUMER}
        assert any(scenario == MIGRATION for scenario, _ in ran)
    grid = [dict(s.point) | {"overrides": s.overrides} for s in specs]
    grid = [p for p in grid if p["grid"] == "versions"]
    assert {(p["scenario"], p["members"]) for p in grid} >= {
        ("scale-out", 1000),
        ("scale-out", 10_000),
        ("rolling-deploy", 1000),
        ("slow-assignor", 1000),
    }
    for p in grid:
        assert f"kafka_version={p['kafka_version']}" in p["overrides"]
        kafka_cost = "assignor_cost=kafka" in p["overrides"]
        assert kafka_cost == (p["scenario"] != "slow-assignor")


@pytest.mark.parametrize("name", ["default", "large", "smoke"])
def test_only_the_bounded_cells_4_0_runs_may_end_unsettled(tmp_path, name):
    """A bounded cell of the 4.0-vs-4.3 grid runs to its bound under both releases, and only its
    4.0 runs are declared as possibly ending unsettled; every other run of every grid keeps the
    scenario's own time limit and must settle."""
    from rebalance_sim.lab.catalog.protocols import protocol_specs

    scale = SCALES[name]
    bounds = {(label, members): bound_s for label, members, bound_s in scale.versions_bounded}
    assert set(bounds) <= set(scale.versions)
    if name == "default":
        assert bounds == {("slow-assignor", 20): 600.0}
    specs = protocol_specs(scale, tmp_path)
    for spec in specs:
        point = dict(spec.point)
        cell = (point["scenario"], point["members"])
        limits = [o for o in spec.overrides if o.startswith("max_duration_s=")]
        if point["grid"] == "versions" and cell in bounds:
            bound_s = bounds[cell]
            assert limits == ([] if bound_s is None else [f"max_duration_s={bound_s:.1f}"])
            assert spec.may_end_unsettled == (point["kafka_version"] == "4.0")
        else:
            assert not limits and not spec.may_end_unsettled, point


def test_versions_sentences_quote_the_table():
    """Each (scenario, size) with both releases gets one sentence with the table's numbers; a
    release whose group had not formed when the action came is said so."""
    from rebalance_sim.lab.report.protocols import versions_sentences

    table = pd.DataFrame(
        {
            "scenario": ["scale-out", "scale-out", "slow-assignor", "slow-assignor"],
            "members": [1000, 1000, 1000, 1000],
            "Kafka": ["4.0", "4.3", "4.0", "4.3"],
            "formation s": [120.0, 30.5, 3000.0, 50.0],
            "rebalance s": [9.0, 6.0, 0.0, 27.5],
            "unassigned partition-s": [50.0, 20.0, 0.0, 20.0],
            "assignments": [1.0, 1.0, 0.0, 1.0],
        }
    )
    first, second = versions_sentences(table)
    assert "30.5 s under Kafka 4.3" in first and "120 s under 4.0" in first
    assert "settles in 6 s against 9 s" in first
    assert "3,000 s under 4.0" in second or "3000 s under 4.0" in second
    assert "under 4.0 the group had not formed" in second


def test_versions_sentence_of_a_group_that_never_settled():
    """A release under which no seed settled is said so with its time limit and how far its group
    went; the other release's formation and settling are quoted from the same table."""
    from rebalance_sim.lab.report.protocols import versions_sentences

    nan = float("nan")
    table = pd.DataFrame(
        {
            "scenario": ["slow-assignor", "slow-assignor"],
            "members": [20, 20],
            "Kafka": ["4.0", "4.3"],
            "seeds": [3, 3],
            "settled": [0, 3],
            "time limit s": [600.0, 600.0],
            "formation s": [nan, 47.4],
            "rebalance s": [nan, 29.7],
            "unassigned partition-s": [nan, 10.2],
            "assignments": [nan, 1.0],
            "group epochs": [48.0, 22.0],
            "target computations": [29.0, 3.0],
            "fenced heartbeats": [110566.0, 0.0],
        }
    )
    (line,) = versions_sentences(table)
    assert line.startswith(
        "slow-assignor at 20 members under the consumer protocol: under Kafka 4.0's group "
        "coordinator the group did not settle in 600 s (none of 3 seeds; a median run went "
        "through 48 group epochs and 29 target computations, and the coordinator fenced "
        "110,566 heartbeats)"
    )
    assert "the group forms in 47.4 s and slow-assignor settles in 29.7 s, with 3 target" in line
