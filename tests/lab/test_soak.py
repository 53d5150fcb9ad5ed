"""`rebalance-sim soak`: schedules are deterministic, cover the protocols, assignors and
memberships, failures are reported with a replay command that reproduces them, and Spark gives
the same answer as a local loop."""

from __future__ import annotations

import re
import shlex

import pytest

from rebalance_sim.cli.main import main
from sim import Scenario, run_scenario
from sim.scenario.builtins import load_scenario
from sim.testing import schedules, soak


def test_a_schedule_depends_only_on_seed_and_index():
    """Schedule i of seed S is the same every time, and differs across i and S."""
    assert soak.schedule(3, 17) == soak.schedule(3, 17)
    assert soak.schedule(3, 17) != soak.schedule(3, 18)
    assert soak.schedule(3, 17) != soak.schedule(4, 17)


def test_schedules_cover_assignors_memberships_and_faults():
    """Over a few hundred schedules both group protocols, every classic assignor strategy, every
    server-side assignor choice, both memberships, every fault kind, and mixed groups starting
    as either type that migrate both ways appear."""
    seen_strategies, seen_remote, seen_static, seen_actions = set(), set(), set(), set()
    seen_mixed, seen_moves = set(), set()
    for i in range(400):
        data, _ = soak.schedule(0, i)
        consumer = data["consumer"]
        moves = [
            (consumer["group_protocol"], a["group_protocol"])
            for a in data["timeline"]
            if "group_protocol" in a
        ]
        if moves:
            # a mixed group: classic members' assignors, both session timeouts, protocol switches
            seen_mixed.add(consumer["group_protocol"])
            seen_moves.update(moves)
            assert data["group"]["consumer_session_timeout_ms"] == consumer["session_timeout_ms"]
            assert consumer["partition_assignment_strategy"]
        elif consumer.get("group_protocol") == "consumer":
            assert "partition_assignment_strategy" not in consumer
            # the drawn session timeout is the broker's under KIP-848
            assert data["group"]["consumer_session_timeout_ms"] == consumer["session_timeout_ms"]
            seen_remote.add(consumer.get("group_remote_assignor"))
        else:
            seen_strategies.add(tuple(consumer["partition_assignment_strategy"]))
        seen_static.add(consumer["static"])
        seen_actions.update(a["action"] for a in data["timeline"])
    assert seen_strategies == set(schedules.CLASSIC_STRATEGIES)
    assert seen_remote == {None, "uniform", "range"}
    assert seen_static == {False, True}
    assert seen_mixed == {"classic", "consumer"}
    assert {("classic", "consumer"), ("consumer", "classic")} <= seen_moves
    assert seen_actions >= {
        "crash",
        "pause",
        "add_members",
        "remove_members",
        "rolling_restart",
        "network_partition",
        "delay_spike",
        "packet_loss",
        "crash_leader",
    }


def test_soak_reports_the_count(capsys, tmp_path):
    """A small soak prints `N schedules, K violations` and exits 0 when K is 0."""
    assert (
        main(["soak", "--schedules", "12", "--seed", "5", "--quiet", "--out", str(tmp_path)]) == 0
    )
    out = capsys.readouterr().out
    assert re.search(r"^12 schedules, 0 violations", out, re.M), out


def test_a_failure_prints_a_replay_command_that_reproduces_it(capsys, tmp_path, monkeypatch):
    """A failing schedule is written as a scenario file; the printed command runs the very same
    simulation (same events)."""
    real = soak.problems

    def strict(result):  # pretend that any run with a crash is a bug
        found = real(result)
        if "crash" in set(result.events.column("kind").to_pylist()):
            found.append("a crash happened")
        return found

    monkeypatch.setattr(soak, "problems", strict)
    rc = main(["soak", "--schedules", "30", "--seed", "2", "--quiet", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 1
    count = re.search(r"^30 schedules, (\d+) violations", out, re.M)
    fails = re.findall(r"^FAIL schedule (\d+): ", out, re.M)
    replays = re.findall(r"^  replay: rebalance-sim (run .*)$", out, re.M)
    assert count and int(count.group(1)) == len(fails) == len(replays) > 0
    argv = shlex.split(replays[0])
    index = int(fails[0])
    data, sim_seed = soak.schedule(2, index)
    assert argv[0] == "run" and argv[2:] == ["--seed", str(sim_seed)]
    replayed = run_scenario(load_scenario(argv[1]), seed=int(argv[3]), raise_on_violation=False)
    original = run_scenario(Scenario.from_dict(data), seed=sim_seed, raise_on_violation=False)
    assert replayed.run_id == original.run_id
    assert replayed.events.equals(original.events)


def test_bad_arguments_are_one_line(capsys):
    """--schedules 0 or a negative seed: rc 2, one line naming the flag."""
    assert main(["soak", "--schedules", "0"]) == 2
    assert capsys.readouterr().err.strip() == "rebalance-sim soak: --schedules: 0 must be >= 1"
    assert main(["soak", "--seed", "-3"]) == 2
    assert "--seed" in capsys.readouterr().err


@pytest.mark.usefixtures("spark")
def test_spark_fan_out_finds_the_same(capsys, tmp_path, monkeypatch):
    """`--spark` runs the schedules as Spark tasks with the same verdicts as the local loop."""
    args = ["soak", "--schedules", "6", "--seed", "9", "--quiet", "--out", str(tmp_path)]
    assert main(args) == 0
    local = capsys.readouterr().out
    assert main(args + ["--spark"]) == 0
    spark = capsys.readouterr().out
    assert re.search(r"^6 schedules, 0 violations", local, re.M)
    assert re.search(r"^6 schedules, 0 violations", spark, re.M)
