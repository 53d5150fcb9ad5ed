"""What a seed samples: the members' start instants, their member ids and a fault's instant, as two
real runs of one deployment differ; and what that gives over many seeds (a crash's records
processed twice average rate x owned partitions x auto-commit interval / 2 under both protocols)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from sim.run import run_scenario
from sim.scenario.builtins import load_scenario
from sim.scenario.scenario import Scenario

from .helpers import events, run, scenario

CONSUMER = {"consumer.group_protocol": "consumer"}
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"


def _starts(result) -> dict[str, float]:
    return {e["member"]: e["t"] for e in events(result, "start")}


def test_members_start_within_the_spread_at_instants_each_seed_draws():
    """Each initial member starts at its own instant in [0, start_spread_s), drawn per seed; the
    same seed draws the same instants; 0 starts every member at once (the lab set-up)."""
    sc = scenario(members=6, start_spread_s=5.0)
    a, b, again = _starts(run(sc, seed=1)), _starts(run(sc, seed=2)), _starts(run(sc, seed=1))
    assert set(a) == {f"c00{i}" for i in range(6)}
    assert all(0.0 <= t < 5.0 for t in a.values()) and len(set(a.values())) == 6
    assert a == again and a != b
    assert set(_starts(run(scenario(members=6, start_spread_s=0.0), seed=1)).values()) == {0.0}


def test_added_members_start_within_the_spread_after_the_action():
    """The members an add_members action starts come up within start_spread_s after its instant."""
    r = run(
        scenario(
            [{"action": "add_members", "at_s": 30.0, "count": 3}], members=2, start_spread_s=4.0
        )
    )
    added = {m: t for m, t in _starts(r).items() if m not in ("c000", "c001")}
    assert len(added) == 3 and all(30.0 <= t < 34.0 for t in added.values())


def test_a_jittered_action_falls_anywhere_in_its_window_per_seed():
    """An action with jitter_s is played at at_s plus a per-seed draw from [0, jitter_s); without
    jitter it stays at at_s."""
    sc = scenario(
        [
            {"action": "crash", "at_s": 30.0, "jitter_s": 6.0, "member": "c001"},
            {"action": "add_members", "at_s": 35.0},
        ],
        members=3,
    )
    crashes = [sc.timeline_for_seed(s)[0].at_s for s in range(200)]
    assert all(30.0 <= t < 36.0 for t in crashes)
    assert np.histogram(crashes, bins=3, range=(30.0, 36.0))[0].min() > 40  # spread over the window
    assert sc.timeline_for_seed(7) == sc.timeline_for_seed(7)
    assert all(
        next(a for a in sc.timeline_for_seed(s) if a.jitter_s == 0).at_s == 35.0 for s in range(20)
    )
    r = run(sc, seed=3)
    (trigger,) = [e for e in events(r, "trigger") if "crash" in e["detail"]]
    assert trigger["t"] == pytest.approx(sc.timeline_for_seed(3)[0].at_s)


def test_jitter_counts_towards_the_time_the_timeline_needs():
    """The latest instant a seed can draw must fit in max_duration_s."""
    from sim.config import ConfigError

    with pytest.raises(ConfigError, match="max_duration_s"):
        scenario(
            [{"action": "crash", "at_s": 100.0, "jitter_s": 20.0, "member": "c001"}],
            max_duration_s=160.0,
        )
    scenario([{"action": "crash", "at_s": 100.0, "member": "c001"}], max_duration_s=160.0)


def test_classic_member_ids_take_kafkas_form_and_a_restart_gets_a_new_one():
    """ClassicGroup.generateMemberId: dynamic members' ids are the default client.id and a random
    UUID, static members' their group.instance.id and a UUID; a restarted dynamic member gets a
    new id; other seeds, other ids."""
    sc = scenario(
        [{"action": "rolling_restart", "at_s": 30.0, "members": ["c001"], "down_s": 1.0}], members=3
    )
    r = run(sc, seed=1)
    ids = {e["detail"].split("member_id=")[1] for e in events(r, "member_added")}
    assert len(ids) == 4 and all(re.fullmatch(f"consumer-group-1-{UUID}", i) for i in ids)
    other = {e["detail"].split("member_id=")[1] for e in events(run(sc, seed=2), "member_added")}
    assert not ids & other
    static = run(scenario(members=2, consumer={"static": True}), seed=1)
    assert {e["detail"].split("member_id=")[1][:5] for e in events(static, "member_added")} == {
        "c000-",
        "c001-",
    }
    assert all(
        re.fullmatch(f"c00[01]-{UUID}", e["detail"].split("member_id=")[1])
        for e in events(static, "member_added")
    )


def test_random_heartbeat_phase_works_under_the_consumer_protocol():
    """heartbeat_phase=random moves the consumer protocol's heartbeats too (the run differs from
    the aligned one with everything else equal)."""

    def stall(phase):
        sc = load_scenario(
            "scale-in",
            {
                **CONSUMER,
                "members": "8",
                "consumer.heartbeat_phase": phase,
                "start_spread_s": "0",
                "jitter_s": "0",
            },
        )
        return run_scenario(sc, seed=0).summary["unassigned_partition_s"]

    assert stall("aligned") != stall("random")


@pytest.mark.parametrize("overrides", [{}, CONSUMER], ids=["classic", "consumer"])
def test_a_crash_reprocesses_half_an_auto_commit_interval_on_average(overrides):
    """Over crash instants, the crashed member's records processed twice are those since its last
    auto-commit: uniform between 0 and rate x owned partitions x auto.commit.interval.ms, so their
    mean is half of that (1,000 records for the built-in crash: 100 records/s x 4 partitions x
    5 s / 2) under either protocol, and their p10 and p90 near a tenth and nine tenths of it."""
    sc: Scenario = load_scenario("crash", overrides)
    top = 100.0 * 4 * 5.0
    values = np.array([run_scenario(sc, seed=s).summary["records_reprocessed"] for s in range(240)])
    se = top / np.sqrt(12 * len(values))  # the standard error of a uniform sample's mean
    assert abs(values.mean() - top / 2) < 4 * se, values.mean()
    assert values.min() >= 0 and values.max() <= top * 1.01
    p10, p90 = np.percentile(values, [10, 90])
    assert abs(p10 - 0.1 * top) < 0.08 * top and abs(p90 - 0.9 * top) < 0.08 * top, (p10, p90)
