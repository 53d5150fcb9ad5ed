"""End-to-end runs under the consumer group protocol (KIP-848, ``group.protocol=consumer``):
every built-in scenario, and the behaviours that set the protocol apart from the classic one."""

from __future__ import annotations

import pytest

from sim import ConfigError, Scenario, run_scenario
from sim.scenario.builtins import BUILTINS, load_scenario

from .helpers import events, intervals

CONSUMER = {"consumer.group_protocol": "consumer"}


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_every_builtin_runs_under_the_consumer_protocol(name):
    """Each built-in scenario settles under the consumer protocol with every invariant kept."""
    result = run_scenario(load_scenario(name, CONSUMER), seed=3, raise_on_violation=False)
    assert result.invariant_violations == []
    assert result.summary["settled_at_end"]
    starts = events(result, "start")
    assert starts and all("group.protocol=consumer" in e["detail"] for e in starts)


def test_scale_out_moves_only_what_moves_and_never_stops_the_world():
    """A member joins: only the partitions it takes are ever unowned; the others keep processing."""
    result = run_scenario(load_scenario("scale-out", CONSUMER), seed=1)
    ep = result.episodes[1]
    assert ep["stop_the_world_s"] == 0.0
    # 24 partitions over 7 members: the newcomer gets 3 (24 // 7), each taken from an owner
    assert ep["partitions_touched"] == 3 and ep["partitions_revoked"] == 3
    assert ep["rounds"] == 1
    # paced by heartbeats: the owners learn at their next heartbeat (<= 5 s), revoke, acknowledge,
    # and the newcomer learns at its next heartbeat after that (<= 5 s more)
    assert 0 < ep["rebalance_time_s"] <= 10.5


def test_heartbeat_interval_paces_the_hand_over():
    """A shorter group.consumer.heartbeat.interval.ms ends the same scale-out sooner."""

    def time_with(interval_ms):
        sc = load_scenario(
            "scale-out",
            {
                **CONSUMER,
                "group.consumer_heartbeat_interval_ms": interval_ms,
                "group.consumer_min_heartbeat_interval_ms": 1000,
            },
        )
        return run_scenario(sc, seed=1).episodes[1]["rebalance_time_s"]

    assert time_with(1000) < time_with(5000)


def test_crash_is_noticed_after_the_brokers_session_timeout():
    """The session timeout is the broker's group.consumer.session.timeout.ms, not the client's."""
    sc = load_scenario(
        "crash",
        {
            **CONSUMER,
            "group.consumer_session_timeout_ms": 10000,
            "group.consumer_min_session_timeout_ms": 10000,
            "consumer.session_timeout_ms": 45000,
        },
    )
    result = run_scenario(sc, seed=1)
    removed = [e for e in events(result, "member_removed") if "session_expired" in e["detail"]]
    (crash,) = [e for e in events(result, "trigger") if "crash" in e["detail"]]
    assert len(removed) == 1
    assert crash["t"] + 5.0 <= removed[0]["t"] <= crash["t"] + 10.0 + 0.01


def test_static_restart_within_the_session_keeps_partitions_without_a_new_epoch():
    """A static member that leaves with epoch -2 and comes back in time gets its partitions back
    under a new member id; the group epoch never moves."""
    sc = load_scenario("rolling-bounce-static", CONSUMER)
    result = run_scenario(sc, seed=1)
    assert result.summary["rounds_total"] == 0
    assert events(result, "static_leave")
    formed = result.episodes[0]["end_s"]  # the first member to join held everything until then
    for name in ("c000", "c003"):
        owned = {(r["partition"]) for r in intervals(result, "owned", name) if r["end"] > formed}
        assert len(owned) == 4  # the same 4 partitions, before and after its restart


def test_gc_pause_past_the_session_makes_a_zombie_that_learns_it_was_fenced():
    """A member paused past the session timeout is fenced; on resume it processes its old
    partitions until it learns (double processing, allowed only for a zombie), then rejoins."""
    sc = load_scenario(
        "gc-pause-zombie",
        {
            **CONSUMER,
            "duration_s": 60.0,
            "group.consumer_session_timeout_ms": 10000,
            "group.consumer_min_session_timeout_ms": 10000,
        },
    )
    result = run_scenario(sc, seed=1)
    assert events(result, "partitions_lost", "c001") or events(result, "poll_timeout", "c001")
    assert result.invariant_violations == []


def test_slow_server_assignor_delays_the_reconciliation():
    """The assignor cost is spent on the coordinator: the first assignment of the new epoch
    reaches members only after it."""
    fast = run_scenario(load_scenario("scale-out", CONSUMER), seed=1).episodes[1][
        "rebalance_time_s"
    ]
    slow = run_scenario(
        load_scenario("slow-assignor", {**CONSUMER, "cost_s": 8.0}), seed=1
    ).episodes[1]
    assert slow["rebalance_time_s"] >= fast + 8.0 - 0.5


def test_same_seed_same_events():
    sc = load_scenario("rolling-bounce-dynamic", CONSUMER)
    a = run_scenario(sc, seed=5)
    b = run_scenario(sc, seed=5)
    assert a.events.equals(b.events) and a.intervals.equals(b.intervals)


def test_group_protocol_is_validated():
    with pytest.raises(ConfigError, match="group_protocol"):
        Scenario.from_dict(
            {"topics": [{"name": "t", "partitions": 1}], "consumer": {"group_protocol": "modern"}}
        )
    with pytest.raises(ConfigError, match=r"member_overrides\.c001\.group_protocol"):
        Scenario.from_dict(
            {
                "topics": [{"name": "t", "partitions": 1}],
                "consumer": {"group_protocol": "consumer"},
                "member_overrides": {"c001": {"group_protocol": "old"}},
            }
        )
    # a mixed group is allowed (online migration, sim.coordinator.migration)
    Scenario.from_dict(
        {
            "topics": [{"name": "t", "partitions": 1}],
            "consumer": {"group_protocol": "consumer"},
            "member_overrides": {"c001": {"group_protocol": "classic"}},
        }
    )
    with pytest.raises(ConfigError, match="group_remote_assignor"):
        Scenario.from_dict(
            {
                "topics": [{"name": "t", "partitions": 1}],
                "consumer": {"group_protocol": "consumer", "group_remote_assignor": "sticky"},
            }
        )
    with pytest.raises(ConfigError, match="consumer_assignors"):
        Scenario.from_dict(
            {"topics": [{"name": "t", "partitions": 1}], "group": {"consumer_assignors": ["nope"]}}
        )


def test_range_remote_assignor_is_used_when_asked():
    sc = load_scenario("scale-out", {**CONSUMER, "consumer.group_remote_assignor": "range"})
    result = run_scenario(sc, seed=1)
    assert all("assignor=range" in e["detail"] for e in events(result, "target_assignment"))


def test_a_run_settles_when_a_quiet_offset_fetch_settles_the_last_member():
    """Soak seed 4, schedule 583: the last unsettled member became settled when an OffsetFetch
    for a partition it no longer owned resolved, which recorded nothing, so the run never looked
    again and ran to its time limit. Now it ends settled."""
    from sim.testing import soak

    data, sim_seed = soak.schedule(4, 583)
    assert data["consumer"]["group_protocol"] == "consumer"
    result = run_scenario(Scenario.from_dict(data), seed=sim_seed, raise_on_violation=False)
    assert result.invariant_violations == []
    assert result.summary["settled_at_end"] and result.summary["simulated_s"] < 300


def test_assignor_cost_kafka_charges_kafkas_time_for_each_target(monkeypatch):
    """``assignor_cost=kafka``: each target assignment costs the coordinator the time Kafka's own
    assignor takes on that input (``assignors.server.kafka_time``), whichever path computed it."""
    import sim.coordinator.consumer.group as cg
    from assignors.server.kafka_time import UNIFORM_HOMOGENEOUS, server_kafka_ms

    works = []
    compute = cg.compute_target

    def recording(*args, **kw):
        target = compute(*args, **kw)
        works.append(target.kafka_work)
        return target

    monkeypatch.setattr(cg, "compute_target", recording)
    sc = load_scenario("scale-out", {**CONSUMER, "assignor_cost": "kafka"})
    result = run_scenario(sc, seed=1)
    costs = [e["detail"].rsplit("cost=", 1)[1] for e in events(result, "target_assignment")]
    assert len(costs) == len(works) >= 2
    for cost, work in zip(costs, works, strict=True):
        assert work.builder == UNIFORM_HOMOGENEOUS
        assert cost == f"{server_kafka_ms(work) / 1000:.6f}s"
        # a few members and 24 partitions: about Kafka's fixed cost of a call, 0.2 ms
        assert 0.0001 < float(cost[:-1]) < 0.001
    # the group forms, then a member joins: the last target deals the newcomer its partitions
    assert works[-1].members == 7 and works[-1].held == 24 and works[-1].placed == 3
