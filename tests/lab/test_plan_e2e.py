"""``rebalance-sim plan`` end to end on a tiny group (local Spark): its sentences agree with its
own table, every run replays byte for byte from what the plan wrote, and a rerun reuses every
run and says the same."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from rebalance_sim.cli.main import main
from rebalance_sim.lab.report.headline import num, same

GROUP = """\
name = "tiny"
members = 4
[[topics]]
name = "orders"
partitions = 8
rate = 20.0
[consumer]
capacity = 500.0
assign_cost_ms = 4000.0
"max.poll.interval.ms" = 30000
[deploy]
batch_size = "50%"
down_s = 5.0
gap_s = 5.0
[faults]
slow_poll_s = 10.0
[plan]
growth = [2]
"""

STALL = "stall partition-s"
QUOTED = r"([0-9.,]+)(?: \[([0-9.,]+)-([0-9.,]+)\])?"


@pytest.fixture(scope="module")
def plan(spark, tmp_path_factory):
    """The plan's output directory and what it printed (run once for the module)."""
    root = tmp_path_factory.mktemp("plan")
    group = root / "tiny.toml"
    group.write_text(GROUP)
    out = root / "out"
    args = ["plan", str(group), "--out", str(out), "--quick", "--seeds", "2"]
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(args) == 0
    return out, buf.getvalue(), args


def _sentences(printed: str) -> list[str]:
    return [line[2:] for line in printed.splitlines() if line.startswith("- ")]


def test_the_sentences_agree_with_the_table(plan):
    """Each fault's sentence names the alternative the table says stalls least outside the
    seeds' bands (or none), quoting that row's and today's medians and their ratio."""
    out, printed, _ = plan
    table = pd.read_csv(out / "answers.csv")
    said = _sentences(printed)
    assert said
    for fault, title in (("deploy", "Deploy"), ("crash", "Crash")):
        t = table[(table["factor"] == 1.0) & (table["fault"] == fault) & table["measured"]]
        today = t[t["variant"] == "today"].iloc[0]
        alts = t[t["variant"] != "today"]
        better = [
            r for _, r in alts.iterrows() if not same(r, today, STALL) and r[STALL] < today[STALL]
        ]
        (sentence,) = [s for s in said if s.startswith(f"{title}: ")]
        if not better:
            assert "no alternative stalls less than today" in sentence
            assert f"today {num(today[STALL])}" in sentence
            continue
        best = min(better, key=lambda r: r[STALL])
        m = re.match(
            rf"{title}: (.+?) (?:cuts the stall about ([0-9.,]+)x|removes the stall) \({QUOTED} vs {QUOTED} ",
            sentence,
        )
        assert m, sentence
        assert m[1] == best["set-up"]
        assert m[3] == num(best[STALL]) and m[6] == num(today[STALL])
        if m[2]:
            expected = today[STALL] / best[STALL]
            assert float(m[2].replace(",", "")) == pytest.approx(expected, rel=0.06)
    # every set-up the table ran at today's size appears in some sentence
    for label in set(table.loc[table["factor"] == 1.0, "set-up"]) - {"today"}:
        assert any(label in s for s in said), label
    report = (out / "report.html").read_text()
    for s in said:
        assert s.replace("'", "&#x27;") in report


def test_the_limit_crossed_is_said_with_its_fix(plan):
    """onPartitionsAssigned costs 4 s a partition and max.poll.interval.ms is 30 s: a member
    assigned 8 partitions at once (under the consumer protocol, the first to join gets them all;
    under the classic one, a member that starts before the others may) outlasts it in the cold
    start. The runs' events say which did, and the sentence names those set-ups and the fix."""
    out, printed, _ = plan
    runs = pd.read_csv(out / "runs.csv")
    crossed = runs["cold_poll_timeouts"] >= 1
    assert (crossed == (runs["cold_max_assigned"] * 4.0 > 30.0)).all()
    consumer = runs[runs["variant"] == "consumer-uniform"]
    assert (consumer["cold_max_assigned"] == 8).all() and crossed[consumer.index].all()
    table = pd.read_csv(out / "answers.csv")
    at_today = table[(table["factor"] == 1.0) & (table["cold poll_timeouts_max"] > 0)]
    (said,) = [s for s in _sentences(printed) if s.startswith("At today's size, a cold start")]
    named = said.split(" under ", 1)[1].split(" crosses a limit")[0]
    named = re.split(r", | and ", named.replace("today's set-up", "today"))
    assert set(named) == set(at_today["set-up"]) and "consumer protocol (uniform)" in named
    assert "onPartitionsAssigned handles up to 8 partitions (32 s)" in said
    assert (
        "past max.poll.interval.ms (30 s)" in said
        and "fix: max.poll.interval.ms above 39 s" in said
    )


def test_growth_was_run_and_said(plan):
    out, printed, _ = plan
    table = pd.read_csv(out / "answers.csv")
    grown = table[table["factor"] == 2.0]
    assert set(grown["variant"]) >= {"today"} and set(grown["members"]) == {8}
    growth = [
        s for s in _sentences(printed) if s.startswith("At 2x the group (8 members), today's")
    ]
    assert len(growth) == 1


def test_every_run_replays_from_the_plans_output(plan, spark):
    """A run's scenario file and seed (runs.csv) give the same run with `rebalance-sim run`:
    the same run id, summary and events, row for row (the events a sweep stores: those its
    metrics, invariants and pages read)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from rebalance_sim.lab.engine.store import read_table
    from rebalance_sim.lab.vocabulary import STORED_EVENT_KINDS
    from sim import run_scenario
    from sim.run import KEPT_FOR_EPISODES
    from sim.scenario.builtins import load_scenario

    out, _, _ = plan
    runs = pd.read_csv(out / "runs.csv")
    assert runs["replay"].str.startswith("rebalance-sim run ").all()
    for _, r in runs.sample(3, random_state=1).iterrows():
        parts = r["replay"].split()
        overrides = [parts[i + 1] for i, p in enumerate(parts) if p == "--set"]
        assert parts[2] == r["scenario_file"] or r["scenario_file"].endswith(parts[2])
        result = run_scenario(load_scenario(r["scenario_file"], overrides), seed=int(r["seed"]))
        assert result.run_id == r["run_id"]
        for metric in ("unassigned_partition_s", "peak_lag_records", "records_reprocessed"):
            assert result.summary[metric] == r[metric]
    stored = read_table(spark, str(out / "work"), "events", [r["run_id"]]).toArrow()
    kinds = KEPT_FOR_EPISODES | set(STORED_EVENT_KINDS)
    replayed = result.events.filter(pc.is_in(result.events["kind"], pa.array(sorted(kinds))))
    assert set(stored["kind"].to_pylist()) <= kinds
    assert 0 < replayed.num_rows < result.events.num_rows
    cols = [c for c in replayed.column_names if c in stored.column_names]
    assert stored.num_rows == replayed.num_rows
    order = [(c, "ascending") for c in ("t", "kind", "member", "detail") if c in cols]
    assert stored.select(cols).sort_by(order).to_pylist() == (
        replayed.select(cols).sort_by(order).to_pylist()
    )


def test_a_rerun_reuses_every_run_and_says_the_same(plan, capsys):
    import contextlib
    import io

    out, printed, args = plan
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(args) == 0
    assert _sentences(buf.getvalue()) == _sentences(printed)
    err = capsys.readouterr().err
    assert "already complete" in err
    assert "1 failed" not in (out / "report.html").read_text()
