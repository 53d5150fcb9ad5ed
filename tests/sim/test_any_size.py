"""Scenarios at any group size: built-ins from 2 to thousands of members, targets by role or index,
rolling deploys in batches, and timelines checked against max_duration_s before the run."""

from __future__ import annotations

import collections

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import ConfigError, Scenario, run_scenario
from sim.scenario.actions import batch_count
from sim.scenario.builtins import BUILTINS, load_scenario


def fast(name: str, members: int) -> dict:
    """Overrides that keep a built-in quick at any size: one partition per member, short restarts,
    rolling restarts in two batches (small groups) or one (large groups)."""
    params = BUILTINS[name].params
    out = {"members": str(members), "partitions": str(max(members, 4))}
    if "batch_size" in params:
        out.update(batch_size="50%" if members < 100 else "100%", down_s="2", gap_s="5")
    if "restore_ms" in params:
        out["restore_ms"] = "10"
    if "cost_s" in params:
        out["cost_s"] = "1"
    return out


def run_builtin(name: str, members: int):
    sc = load_scenario(name, fast(name, members))
    result = run_scenario(sc, seed=3, raise_on_violation=False)
    return sc, result


@pytest.mark.parametrize("members", [2, 1001])
@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_every_builtin_runs_clean_at_any_size(name, members):
    """Every built-in runs to a settled end with no invariant violation at 2 and 1001 members
    (1001: member names are four digits wide, c0000 .. c1000)."""
    sc, result = run_builtin(name, members)
    assert result.invariant_violations == []
    assert result.summary["settled_at_end"] and not result.summary["partial"]
    assert any(e["kind"] == "trigger" for e in result.events.to_pylist())  # the timeline was played
    assert sc.config.members == members


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_every_builtin_runs_clean_at_3000(name):
    """The same at 3000 members."""
    _, result = run_builtin(name, 3000)
    assert result.invariant_violations == []
    assert result.summary["settled_at_end"]


def _base(members: int, timeline: list, **extra) -> dict:
    return {
        "members": members,
        "topics": [{"name": "t", "partitions": max(2, members)}],
        "consumer": {"partition_assignment_strategy": ["cooperative-sticky"]},
        "timeline": timeline,
        **extra,
    }


@pytest.mark.parametrize(
    "target,members,expected",
    [
        ("first", 5, "c000"),
        ("middle", 5, "c002"),
        ("last", 5, "c004"),
        (1, 5, "c001"),
        (-1, 5, "c004"),
        ("last", 1001, "c1000"),
        ("middle", 1001, "c0500"),
        (1, 1001, "c0001"),
        ("c0007", 1001, "c0007"),
    ],
)
def test_roles_and_indexes_resolve_to_names(target, members, expected):
    """A role or index names the member it stands for among the members by then, at any width."""
    sc = Scenario.from_dict(_base(members, [{"action": "crash", "at_s": 10, "member": target}]))
    assert sc.resolved_timeline[0].member == expected
    assert sc.timeline[0].member == target  # the scenario as written is kept


def test_roles_follow_membership_changes():
    """'last' after a scale-out is the newest member; after a crash the crashed one is skipped."""
    sc = Scenario.from_dict(
        _base(
            3,
            [
                {"action": "add_members", "at_s": 10, "count": 2},
                {"action": "crash", "at_s": 20, "member": "last"},
                {"action": "pause", "at_s": 30, "member": "last", "duration_s": 5},
            ],
        )
    )
    assert [getattr(a, "member", None) for a in sc.resolved_timeline] == [None, "c004", "c003"]


def test_leader_role_crashes_the_current_leader():
    """member = 'leader' crashes whichever client leads the group at that instant."""
    sc = Scenario.from_dict(_base(4, [{"action": "crash", "at_s": 30, "member": "leader"}]))
    result = run_scenario(sc, seed=1)
    ev = result.events.to_pylist()
    trigger = next(e for e in ev if e["kind"] == "trigger")
    leader_before = [e for e in ev if e["kind"] == "sync_received" and e["t"] < 30]
    assert trigger["member"] is not None and "leader" in trigger["detail"]
    assert any(
        e["kind"] == "member_removed" and e["member"] == trigger["member"] for e in ev
    ) or any(e["kind"] == "session_expired" for e in ev)
    assert leader_before  # the group was formed, so there was a leader to crash


@pytest.mark.parametrize(
    "data,field,words",
    [
        (_base(0, []), "members", "at least 1 member"),
        (
            _base(3, [{"action": "crash", "at_s": 10, "member": 3}]),
            "timeline[0].member",
            "not a member index",
        ),
        (
            _base(3, [{"action": "crash", "at_s": 10, "member": "c1000"}]),
            "timeline[0].member",
            "not a member",
        ),
        (
            _base(3, [{"action": "network_partition", "at_s": 10, "member": "leader"}]),
            "timeline[0].member",
            "only crash and pause",
        ),
        (
            _base(3, [{"action": "rolling_restart", "at_s": 10, "batch_size": 0}]),
            "timeline[0].batch_size",
            ">= 1",
        ),
        (
            _base(3, [{"action": "rolling_restart", "at_s": 10, "batch_size": "150%"}]),
            "timeline[0].batch_size",
            "percentage",
        ),
        (
            _base(
                300,
                [{"action": "rolling_restart", "at_s": 10, "down_s": 10, "gap_s": 20}],
                max_duration_s=3600,
            ),
            "max_duration_s",
            "needs 9,035 s",
        ),
    ],
)
def test_impossible_scenarios_are_input_errors(data, field, words):
    """An empty group, a target that does not exist, a bad batch size, or a timeline longer than
    max_duration_s is a ConfigError naming the field, raised before anything runs."""
    with pytest.raises(ConfigError) as e:
        Scenario.from_dict(data)
    assert e.value.field == field
    assert words in e.value.reason
    assert "\n" not in str(e.value)


def test_too_long_timeline_fails_fast_from_the_cli(capsys):
    """The CLI rejects a too-long rolling bounce at once with exit 2 and one line naming the field
    and the time it needs."""
    from rebalance_sim.cli.main import main

    code = main(
        ["run", "rolling-bounce-dynamic", "--set", "members=300", "--set", "max_duration_s=3600"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and "max_duration_s" in err[0] and "needs" in err[0]


def test_max_duration_grows_with_the_timeline_when_not_given():
    """Left out, max_duration_s is the default or enough for the timeline, whichever is longer."""
    small = load_scenario("rolling-deploy")
    big = load_scenario("rolling-bounce-dynamic", {"members": "1000"})
    assert small.config.max_duration_s == 7200
    assert big.config.max_duration_s >= big.needed_duration_s() > 7200


def _restarts(result) -> collections.Counter:
    return collections.Counter(
        e["member"]
        for e in result.events.to_pylist()
        if e["kind"] == "trigger" and "rolling_restart stop" in (e["detail"] or "")
    )


@pytest.mark.parametrize(
    "static,graceful,batch",
    [(False, True, "10%"), (True, True, "25%"), (False, False, 3), (True, False, 1)],
)
def test_rolling_deploy_restarts_every_member_exactly_once(static, graceful, batch):
    """The deploy stops and starts every member exactly once, in batches of the given size."""
    members = 13
    sc = load_scenario(
        "rolling-deploy",
        {
            "members": str(members),
            "static": str(static).lower(),
            "graceful": str(graceful).lower(),
            "batch_size": str(batch),
            "down_s": "4",
            "gap_s": "6",
        },
    )
    result = run_scenario(sc, seed=2)
    stops = _restarts(result)
    assert stops == collections.Counter({f"c{i:03d}": 1 for i in range(members)})
    starts = [
        e
        for e in result.events.to_pylist()
        if e["kind"] == "trigger" and e["detail"] == "rolling_restart start"
    ]
    assert sorted(e["member"] for e in starts) == sorted(stops)
    size = batch_count(batch, members)
    times = sorted(
        {
            e["t"]
            for e in result.events.to_pylist()
            if e["kind"] == "trigger" and "rolling_restart stop" in (e["detail"] or "")
        }
    )
    assert len(times) == -(-members // size)  # one stop instant per batch
    assert result.invariant_violations == []


@settings(max_examples=25)
@given(
    members=st.integers(1, 20_000),
    batch=st.one_of(st.integers(1, 500), st.integers(1, 100).map(lambda p: f"{p}%")),
    down=st.floats(0, 60),
    gap=st.floats(0, 120),
)
def test_deploy_duration_matches_its_batches(members, batch, down, gap):
    """For any group size and batch: every member is in exactly one batch, batches are at most
    batch_size, and the scenario's needed time covers the last start."""
    from sim.scenario.actions import RollingRestart

    rr = RollingRestart(at_s=10.0, down_s=down, gap_s=gap, batch_size=batch)
    names = [f"c{i:05d}" for i in range(members)]
    batches = rr.batches(names)
    assert [n for b in batches for n in b] == names
    assert max(len(b) for b in batches) == min(batch_count(batch, members), members)
    assert rr.duration_s(members) == pytest.approx((len(batches) - 1) * (down + gap) + down)
    sc = Scenario.from_dict(
        _base(
            members,
            [
                {
                    "action": "rolling_restart",
                    "at_s": 10.0,
                    "down_s": down,
                    "gap_s": gap,
                    "batch_size": batch,
                }
            ],
        )
    )
    assert sc.config.max_duration_s >= sc.needed_duration_s() >= 10.0 + rr.duration_s(members)


@settings(max_examples=30)
@given(
    members=st.integers(1, 10_000),
    target=st.one_of(st.sampled_from(["first", "middle", "last"]), st.integers(-10_000, 10_000)),
)
def test_targets_resolve_or_fail_cleanly_at_any_size(members, target):
    """A role always resolves to a member of the group; an index resolves exactly when it is in
    range, otherwise the error names the field."""
    data = _base(members, [{"action": "crash", "at_s": 10, "member": target}])
    in_range = isinstance(target, str) or -members <= target < members
    if in_range:
        sc = Scenario.from_dict(data)
        name = sc.resolved_timeline[0].member
        width = max(3, len(str(members - 1)))
        assert name.startswith("c") and len(name) == width + 1 and int(name[1:]) < members
        if isinstance(target, int):
            assert int(name[1:]) == target % members
    else:
        with pytest.raises(ConfigError) as e:
            Scenario.from_dict(data)
        assert e.value.field == "timeline[0].member"


@settings(max_examples=8)
@given(
    members=st.integers(2, 24),
    batch=st.one_of(st.integers(1, 6), st.sampled_from(["10%", "50%", "100%"])),
    static=st.booleans(),
    graceful=st.booleans(),
    seed=st.integers(0, 3),
)
def test_deploy_at_random_sizes_restarts_everyone_once_and_settles(
    members, batch, static, graceful, seed
):
    """At any group size, batch and membership type, the deploy restarts each member exactly once
    and the run ends settled with no invariant violation."""
    sc = load_scenario(
        "rolling-deploy",
        {
            "members": str(members),
            "batch_size": str(batch),
            "static": str(static).lower(),
            "graceful": str(graceful).lower(),
            "down_s": "3",
            "gap_s": "4",
        },
    )
    result = run_scenario(sc, seed=seed, raise_on_violation=False)
    assert result.invariant_violations == []
    assert result.summary["settled_at_end"]
    width = max(3, len(str(members - 1)))
    assert _restarts(result) == collections.Counter({f"c{i:0{width}d}": 1 for i in range(members)})
