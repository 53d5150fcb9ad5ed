"""``rebalance-sim plan``'s group file, its alternatives and what it chooses to run: bad input in
one line (exit 2), Kafka's names understood, the faults after every set-up's cold start, the
time budget kept. No Spark here."""

from __future__ import annotations

from pathlib import Path

import pytest

from rebalance_sim.cli.main import main
from rebalance_sim.lab.plan.example import EXAMPLE
from rebalance_sim.lab.plan.execute import select
from rebalance_sim.lab.plan.group import PlanError, group_from_dict, load_group
from rebalance_sim.lab.plan.runs import (
    MODES,
    blocks_for,
    fault_at_s,
    growth_factors,
    kafka_version_overrides,
    scenario_dict,
    scenario_knows_kafka_version,
)
from rebalance_sim.lab.plan.variants import set_up, variants
from sim import Scenario

EXAMPLE_FILE = Path(__file__).parent.parent.parent / "examples" / "plan.toml"


def _group(**over):
    data = {
        "name": "g",
        "members": 10,
        "topics": [{"name": "t", "partitions": 30, "rate": 10.0}],
        "consumer": {"capacity": 1000.0},
    }
    data.update(over)
    return group_from_dict(data, "g.toml")


def test_example_is_the_file_in_examples_and_plan_prints_it(capsys):
    assert EXAMPLE_FILE.read_text() == EXAMPLE
    assert main(["plan", "--example"]) == 0
    assert capsys.readouterr().out == EXAMPLE
    g = load_group(EXAMPLE_FILE)
    assert g.members == 800 and g.partitions == 2400
    assert g.consumer_config().assign_cost_ms == 200.0
    assert set_up(g).eager and set_up(g).assignor == "range"
    assert g.assumed == ()  # rate, capacity and both callbacks are given


def test_kafka_names_are_understood(tmp_path):
    path = tmp_path / "g.toml"
    path.write_text(
        'members = 4\n[[topics]]\nname = "t"\npartitions = 8\n'
        "[consumer]\n"
        "session.timeout.ms = 20000\n"  # bare dotted key: TOML nests it
        '"max.poll.interval.ms" = 600000\n'
        '"group.instance.id" = "app"\n'
        '"partition.assignment.strategy" = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"\n'
        "[broker]\n"
        '"group.initial.rebalance.delay.ms" = 0\n'
    )
    g = load_group(path)
    cfg = g.consumer_config()
    assert cfg.session_timeout_ms == 20000 and cfg.max_poll_interval_ms == 600000
    assert cfg.static and cfg.partition_assignment_strategy == ("cooperative-sticky",)
    assert g.broker_config().initial_rebalance_delay_ms == 0
    assert g.name == "g"
    assert any(a.startswith("production: 100") for a in g.assumed)


@pytest.mark.parametrize(
    "over, message",
    [
        ({"member": 3}, "g.toml: member: unknown key; allowed: name, members"),
        ({"members": 0}, "members: 0 is not a number of members >= 1"),
        ({"broker_version": "3.9"}, "broker_version: '3.9' is not one of 4.3, 4.0"),
        ({"deploy": {"batch": 1}}, "deploy.batch: unknown key; allowed: batch_size"),
        ({"deploy": {"down_s": -1}}, "deploy.down_s: -1 is not a number of seconds >= 0"),
        ({"consumer": {"capcity": 5.0}}, "consumer.capcity: unknown key; allowed:"),
        (
            {"consumer": {"session.timeout.ms": 1000}},
            "consumer.heartbeat_interval_ms: 3000 must be below session_timeout_ms (1000)",
        ),
        (
            {"broker": {"group.min.session.timeout.ms": 50000}},
            "consumer.session_timeout_ms: 45000 is below group.min.session.timeout.ms",
        ),
        (
            {"consumer": {"capacity": 25.0}},
            "consumer.capacity: the group can never catch up: 10 members x 25 records/s = 250 "
            "records/s, and the topics produce 300 records/s",
        ),
        (
            {"faults": {"slow_poll_s": 400.0}},
            "faults.slow_poll_s: 400 s is not below max.poll.interval.ms",
        ),
        ({"plan": {"growth": [0.5]}}, "plan.growth: [0.5] is not a list of factors > 1"),
        (
            {"faults": {"slow_poll_s": 0.1}},
            "faults.slow_poll_s: 0.1 s is not slower than a member's poll batch at its capacity "
            "(500 records at 1,000/s: 0.5 s)",
        ),
    ],
)
def test_bad_group_says_which_field(over, message):
    with pytest.raises(PlanError) as e:
        _group(**over)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_bad_group_file_exits_2_in_one_line(tmp_path, capsys):
    path = tmp_path / "g.toml"
    path.write_text('members = 10\n[[topics]]\nname = "t"\npartitions = 30\nrate = 1e6\n')
    assert main(["plan", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "can never catch up" in err
    assert main(["plan", str(tmp_path / "missing.toml")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["plan", str(path), "--rate", "5"]) == 2
    assert "--rate: applies only with --describe" in capsys.readouterr().err


def test_output_location_is_checked_before_any_work(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert main(["plan", str(EXAMPLE_FILE), "--out", str(tmp_path / "file")]) == 2
    assert "--out" in capsys.readouterr().err


def test_alternatives_of_an_eager_dynamic_classic_group():
    g = load_group(EXAMPLE_FILE)
    keys = [v.key for v in variants(g)]
    assert keys == [
        "today",
        "cooperative-sticky",
        "consumer-uniform",
        "consumer-range",
        "static",
        "short-session",
    ]
    short = variants(g)[-1]
    assert short.faults == ("crash",) and not short.full
    assert short.consumer == {"session_timeout_ms": 10000}


def test_alternatives_of_a_static_consumer_protocol_group():
    g = _group(
        consumer={"capacity": 1000.0, "group.protocol": "consumer", "static": True},
        deploy={"down_s": 50.0},
    )
    by_key = {v.key: v for v in variants(g)}
    # already on the consumer protocol with uniform, already static: the other assignor, a
    # shorter broker session timeout, and one that covers the 50 s restart
    assert list(by_key) == ["today", "consumer-range", "short-session", "static-long-session"]
    assert by_key["short-session"].broker["consumer_session_timeout_ms"] == 15000
    cover = by_key["static-long-session"]
    assert cover.broker["consumer_session_timeout_ms"] == 60000  # 50 s + two 5 s heartbeats
    assert cover.faults == ("deploy",)


def test_faults_come_after_every_set_ups_cold_start():
    """Under the consumer protocol the first member to join runs onPartitionsAssigned for every
    partition: 2,400 x 200 ms. The fault waits for that, for every set-up alike."""
    g = load_group(EXAMPLE_FILE)
    at = fault_at_s(g, 1.0)
    assert at >= 2400 * 0.2 and (at - 60) % 15 == 0
    assert fault_at_s(_group(), 1.0) == 60.0
    for v in variants(g):
        data = scenario_dict(g, v, "deploy", 1.0, at)
        assert data["timeline"][0]["at_s"] == at


def test_every_scenario_loads_and_slow_member_is_the_second(tmp_path):
    g = _group(members=12, topics=[{"name": "t", "partitions": 36, "rate": 10.0}])
    blocks = blocks_for(g, tmp_path, 1.0, None, (0,))
    assert {b.fault for b in blocks} == {"deploy", "crash", "slow-member", "scale-out"}
    for b in blocks:
        sc = Scenario.from_toml(str(b.path))
        assert sc.config.members == 12
        if b.fault == "slow-member":
            (name,) = sc.config.member_overrides
            assert name == "c001"
            assert sc.config.consumer_for(name).poll_batch_s == pytest.approx(30.0)


def test_growth_stops_at_ten_thousand_members():
    g = _group(members=3000, topics=[{"name": "t", "partitions": 3000, "rate": 1.0}])
    assert growth_factors(g) == [2.0, 3.33]  # 5x would pass 10,000 members: as far as that
    assert growth_factors(_group()) == [2.0, 5.0]


def test_selection_keeps_the_budget_and_says_what_it_left_out(tmp_path):
    g = load_group(EXAMPLE_FILE)
    sel = select(g, MODES["default"], 2, tmp_path, write=False)
    assert sel.budget_s is not None and sel.estimate_s <= sel.budget_s
    assert all(len(b.seeds) >= MODES["default"].min_seeds for b in sel.today)
    assert any("5x (4,000 members)" in x and "--thorough" in x for x in sel.left_out)
    thorough = select(g, MODES["thorough"], 2, tmp_path, write=False)
    assert [f for f, _ in thorough.growth] == [2.0, 5.0] and not thorough.left_out
    assert all(len(b.seeds) == 10 for b in thorough.today)
    quick = select(g, MODES["quick"], 2, tmp_path, write=False)
    assert {b.fault for b in quick.today} == {"deploy", "crash"}
    fixed = select(g, MODES["default"], 2, tmp_path, seeds=7, write=False)
    assert all(len(b.seeds) == 7 for b in fixed.today)
    assert not list(tmp_path.iterdir())  # estimates write no scenario file


def test_broker_version_reaches_the_runs_only_when_the_simulator_knows_it(monkeypatch):
    """Today's scenario format has no kafka_version: the override is left out (and the report
    says so). When the format gains it, the group file's version is passed unchanged; a format
    that knows the key but refuses the value stops the plan in one line."""
    import rebalance_sim.lab.plan.runs as runs
    from sim import ConfigError

    knows = scenario_knows_kafka_version()
    assert kafka_version_overrides("4.0") == (("kafka_version=4.0",) if knows else ())
    monkeypatch.setattr(runs, "try_override", lambda override: None)
    assert kafka_version_overrides("4.0") == ("kafka_version=4.0",)

    def refuses(override):
        raise ConfigError("kafka_version", "4.0 is not a string")

    monkeypatch.setattr(runs, "try_override", refuses)
    with pytest.raises(
        PlanError, match=r"broker_version: the simulator refuses kafka_version=4\.0"
    ):
        kafka_version_overrides("4.0")


def test_dry_run_says_what_it_would_run(capsys):
    assert main(["plan", str(EXAMPLE_FILE), "--dry-run", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "today: classic protocol, range (eager), dynamic members" in out
    assert "alternative cooperative-sticky" in out and "estimated" in out


@pytest.mark.parametrize("stop", ["ctrl-c", "sweep"])
def test_an_interrupted_plan_exits_130_in_one_line(tmp_path, monkeypatch, capsys, stop):
    """Ctrl-C (or the sweep's interrupt, which says how many runs it kept) ends the plan with
    exit 130 and one line saying the complete runs are kept; no traceback."""
    import rebalance_sim.lab.plan.execute as execute
    from rebalance_sim.lab.engine.sweep import SweepInterrupted

    def interrupted(group, opts):
        if stop == "ctrl-c":
            raise KeyboardInterrupt
        raise SweepInterrupted("interrupted; 7 of 20 runs are complete in W (rerun ...)")

    monkeypatch.setattr(execute, "run_plan", interrupted)
    out = tmp_path / "out"
    assert main(["plan", str(EXAMPLE_FILE), "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "complete" in err and "Traceback" not in err
    assert out.is_dir()  # checked (and created) before the plan started


def test_the_report_lists_only_the_settings_that_differ_from_kafkas():
    from rebalance_sim.lab.plan.group import settings_changed

    assert settings_changed(load_group(EXAMPLE_FILE)) == []  # it spells out Kafka's defaults
    g = _group(
        consumer={"capacity": 1000.0, "session.timeout.ms": 20000, "static": True},
        broker={"group.initial.rebalance.delay.ms": 0},
    )
    assert settings_changed(g) == [
        "session.timeout.ms = 20000",
        "group.instance.id set",
        "group.initial.rebalance.delay.ms = 0 (broker)",
    ]
