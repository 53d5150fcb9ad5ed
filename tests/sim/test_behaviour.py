"""Pinned behaviours of whole runs: small groups, exact expectations (issue 3)."""

from __future__ import annotations

import pytest

from sim import InvariantViolation

from .helpers import episode, events, intervals, owners_at, run, scenario

ADD_AT = 30.0


def _revoke_and_sync_times(result, member):
    revoke = [e["t"] for e in events(result, "revoke", member, after=ADD_AT)]
    sync = [e["t"] for e in events(result, "sync_received", member, after=ADD_AT)]
    return revoke, sync


def test_eager_range_scale_out_stops_the_world():
    """Eager range scale-out: every member revokes everything, one generation, and nobody
    processes from its onJoinPrepare (commit, then revoke) until its SyncGroup completes."""
    r = run(scenario([{"action": "add_members", "at_s": ADD_AT}]))
    ep = episode(r)
    assert ep["rounds"] == 1
    assert len(events(r, "join_complete", after=ADD_AT)) == 1
    prepares = []
    for member in ("c000", "c001", "c002"):
        revoke, sync = _revoke_and_sync_times(r, member)
        (prepare,) = [e["t"] for e in events(r, "join_prepare", member, after=ADD_AT)]
        prepares.append(prepare)
        assert len(revoke) == 1 and len(sync) == 1
        assert "count=2 eager" in events(r, "revoke", member, after=ADD_AT)[0]["detail"]
        assert revoke[0] == pytest.approx(prepare + 0.002)  # waits for its commit's round trip
        for row in intervals(r, "owned", member):
            assert row["end"] <= revoke[0] or row["start"] >= sync[0]
        assert [(row["start"], row["end"]) for row in intervals(r, "stalled", member)] == [
            (prepare, revoke[0])
        ]
    first_sync = min(e["t"] for e in events(r, "sync_received", after=ADD_AT))
    assert ep["stop_the_world_s"] == pytest.approx(first_sync - max(prepares))
    assert ep["stop_the_world_s"] > 0
    assert ep["partitions_touched"] == 6


def test_cooperative_scale_out_moves_only_what_moves():
    """Cooperative-sticky scale-out: two generations, only moving partitions are revoked and
    unowned, and the other members never stop processing."""
    r = run(scenario([{"action": "add_members", "at_s": ADD_AT}], strategy=("cooperative-sticky",)))
    ep = episode(r)
    assert ep["rounds"] == 2
    before = owners_at(r, ADD_AT - 1)
    after = owners_at(r, ep["end_s"] + 0.5)
    moved = {p for p in before if before[p] != after[p]}
    assert moved and len(moved) < 6
    unowned = {row["partition"] for row in intervals(r, "unassigned") if row["start"] >= ADD_AT}
    assert unowned == moved
    assert ep["partitions_revoked"] == len(moved)
    assert ep["stop_the_world_s"] == 0
    for p in set(before) - moved:
        (member,) = before[p]
        spans = [row for row in intervals(r, "owned", member) if row["partition"] == p]
        assert any(row["start"] < ADD_AT and row["end"] > ep["end_s"] for row in spans)
    assert not intervals(r, "stalled")


def test_crash_waits_for_session_timeout():
    """A crash is noticed only session.timeout.ms after the last heartbeat; its partitions stay
    unowned from the crash until reassigned, and time-to-detect is reported."""
    r = run(
        scenario(
            [{"action": "crash", "at_s": ADD_AT, "member": "c001"}],
            strategy=("cooperative-sticky",),
        )
    )
    joined = events(r, "join_received", "c001")[0]["t"]
    k = int((ADD_AT - joined) // 3.0)
    last_heartbeat_arrival = joined + k * 3.0 + 0.001
    removed = events(r, "member_removed", "c001")
    assert len(removed) == 1 and "session_expired" in removed[0]["detail"]
    assert removed[0]["t"] == pytest.approx(last_heartbeat_arrival + 45.0)
    assert not [e for e in events(r, "rebalance_start", after=ADD_AT) if e["t"] < removed[0]["t"]]
    ep = episode(r)
    assert ep["time_to_detect_s"] == pytest.approx(removed[0]["t"] - ADD_AT)
    lost = sorted(row["partition"] for row in intervals(r, "owned", "c001"))
    gaps = [row for row in intervals(r, "unassigned") if row["start"] >= ADD_AT]
    assert sorted(g["partition"] for g in gaps) == lost
    for g in gaps:
        assert g["start"] == ADD_AT
        # the episode ends once the new owners have their first records (OffsetFetch, fetch)
        assert g["end"] <= ep["end_s"]
    last_gap_end = max(g["end"] for g in gaps)
    assert ep["end_s"] <= last_gap_end + ep["first_record_max_s"] + 1e-5


@pytest.mark.parametrize("down_s,rebalances", [(20.0, 0), (60.0, 2)])
def test_static_member_restart(down_s, rebalances):
    """A static member back within session.timeout.ms gets its partitions with no rebalance
    (unowned only while down); back after it, the group rebalances as for a dynamic member."""
    r = run(
        scenario(
            [{"action": "rolling_restart", "at_s": ADD_AT, "members": ["c001"], "down_s": down_s}],
            consumer={"static": True},
        )
    )
    assert len(events(r, "rebalance_start", after=ADD_AT)) == rebalances
    mine_before = sorted(p for p, ms in owners_at(r, ADD_AT - 1).items() if ms == ["c001"])
    if rebalances == 0:
        assert events(r, "static_rejoin", "c001")
        assert events(r, "member_fenced", "c001")
        gaps = [row for row in intervals(r, "unassigned") if row["start"] >= ADD_AT]
        assert sorted(g["partition"] for g in gaps) == mine_before
        back = events(r, "sync_received", "c001", after=ADD_AT)[0]["t"]
        # close() waits for its commit's answer: the partitions stall from the close on
        (stall,) = [s for s in intervals(r, "stalled", "c001") if s["start"] >= ADD_AT]
        assert stall["start"] == ADD_AT and ADD_AT < stall["end"] < ADD_AT + 0.1
        for g in gaps:
            assert g["start"] == ADD_AT and g["end"] == pytest.approx(back)
        assert (
            sorted(p for p, ms in owners_at(r, back + 0.5).items() if ms == ["c001"]) == mine_before
        )
    else:
        removed = events(r, "member_removed", "c001")
        assert removed and "session_expired" in removed[0]["detail"]


def test_two_bounce_upgrade_reaches_cooperative():
    """[range, cooperative-sticky] runs EAGER; a second bounce removing range member by member
    reaches COOPERATIVE with no partition ever owned twice."""
    r = run(
        scenario(
            [
                {
                    "action": "rolling_restart",
                    "at_s": 30,
                    "down_s": 5,
                    "gap_s": 20,
                    "assignors": ["range", "cooperative-sticky"],
                },
                {
                    "action": "rolling_restart",
                    "at_s": 200,
                    "down_s": 5,
                    "gap_s": 20,
                    "assignors": ["cooperative-sticky"],
                },
            ],
            strategy=("range",),
        )
    )
    starts = events(r, "start")
    first_bounce = [e for e in starts if 30 <= e["t"] < 200]
    assert first_bounce and all("protocol=EAGER" in e["detail"] for e in first_bounce)
    second = [e for e in starts if e["t"] >= 200]
    assert len(second) == 3 and all("protocol=COOPERATIVE" in e["detail"] for e in second)
    joins = events(r, "join_complete")
    assert all("protocol=range" in e["detail"] for e in joins if e["t"] < 200)
    assert "protocol=cooperative-sticky" in joins[-1]["detail"]
    assert any("cooperative" in e["detail"] for e in events(r, "revoke", after=200))
    assert r.invariant_violations == []
    for t in sorted({row["start"] for row in intervals(r, "owned")}):
        assert all(len(ms) == 1 for ms in owners_at(r, t).values())


def _zombie(version):
    return run(
        scenario(
            [{"action": "pause", "at_s": ADD_AT, "member": "c001", "duration_s": 60}],
            strategy=("sticky",),
            consumer={"sticky_user_data_version": version},
        )
    )


@pytest.mark.parametrize("version", [0, 1])
def test_kip341_zombie_double_processing(version):
    """A member paused past its session timeout resumes as a zombie and processes partitions that
    now belong to others until its next heartbeat fails and its poll loop finishes the batch in
    hand (onPartitionsLost): recorded as double_processing."""
    r = _zombie(version)
    stolen = sorted(
        row["partition"] for row in intervals(r, "owned", "c001") if row["start"] < ADD_AT
    )
    dp = intervals(r, "double_processing")
    assert sorted(row["partition"] for row in dp) == stolen
    learned = events(r, "fenced_learned", "c001")[0]["t"]
    lost = events(r, "partitions_lost", "c001")[0]["t"]
    batch_s = 500 / 10000.0  # max.poll.records / capacity: it resumes with a backlog
    assert learned < lost < learned + batch_s
    for row in dp:
        assert row["start"] == 90.0 and row["end"] == pytest.approx(lost)
        assert "c001" in row["member"].split(",")
    assert r.summary["double_processing_partition_s"] == pytest.approx(len(stolen) * (lost - 90.0))
    assert r.invariant_violations == []


def test_kip341_stale_claim_v0_ties_and_v1_loses():
    """On the zombie's rejoin, eager sticky V0 user data ties its stale claim with the true
    owner's so neither keeps the partition; with V1 the true owner's newer generation wins."""
    outcome = {}
    for version in (0, 1):
        r = _zombie(version)
        stolen = sorted(
            row["partition"] for row in intervals(r, "owned", "c001") if row["start"] < ADD_AT
        )
        resume_round = events(r, "rebalance_start", after=90.0)[0]["t"]
        true_owner = {
            p: next(m for m in owners_at(r, resume_round - 0.5)[p] if m != "c001") for p in stolen
        }
        final = owners_at(r, r.summary["simulated_s"] - 1e-9)
        outcome[version] = {p: final[p][0] == true_owner[p] for p in stolen}
    assert all(outcome[1].values())  # V1: the true owners keep every contested partition
    assert not any(outcome[0].values())  # V0: tie, neither keeps it


def test_slow_assignor_lengthens_rebalance_by_its_cost():
    """A fixed assignor cost lengthens the scale-out rebalance by exactly that cost."""
    base = run(scenario([{"action": "add_members", "at_s": ADD_AT}]))
    slow = run(scenario([{"action": "add_members", "at_s": ADD_AT}], assignor_cost="fixed:5"))
    assert episode(slow)["rebalance_time_s"] == pytest.approx(
        episode(base)["rebalance_time_s"] + 5.0
    )
    assert episode(slow)["rounds"] == 1


def test_assignor_slower_than_rebalance_timeout_causes_next_rebalance():
    """A leader whose assignment outlasts the rebalance timeout misses max.poll.interval.ms and
    SyncGroup, is removed, and the group starts the next rebalance (as Kafka does)."""
    sc = scenario(
        [], assignor_cost="fixed:90", consumer={"max_poll_interval_ms": 60000}, max_duration_s=150.0
    )
    with pytest.raises(InvariantViolation) as info:
        run(sc)
    r = info.value.result
    first = events(r, "join_complete")[0]
    leader = first["detail"].split("leader=")[1]
    timeout = events(r, "poll_timeout", leader)[0]
    assert timeout["t"] == pytest.approx(events(r, "join_received", leader)[0]["t"] + 60.0)
    removed = events(r, "member_removed", leader)[0]
    assert removed["t"] > timeout["t"]
    assert [e["generation"] for e in events(r, "join_complete")][:2] == [1, 2]
    assert any("did not settle" in v for v in r.invariant_violations)


def test_one_way_partition_makes_a_zombie_until_it_heals():
    """A member whose heartbeats cannot reach the coordinator is removed after the session
    timeout but keeps processing (double processing) until the link heals and it learns."""
    r = run(
        scenario(
            [
                {
                    "action": "network_partition",
                    "at_s": ADD_AT,
                    "member": "c001",
                    "duration_s": 80,
                    "direction": "to_coordinator",
                }
            ],
            strategy=("cooperative-sticky",),
        )
    )
    removed = events(r, "member_removed", "c001")[0]["t"]
    learned = events(r, "generation_reset", "c001")[0]["t"]  # a heartbeat or a commit fails
    assert removed < ADD_AT + 80 <= learned
    dp = intervals(r, "double_processing")
    assert dp and all(removed < row["start"] and row["end"] == pytest.approx(learned) for row in dp)
    assert episode(r)["double_processing_partition_s"] > 0


def test_lossy_network_still_settles():
    """With 5% of messages dropped, requests time out and retry, and the group still settles."""
    r = run(
        scenario(
            [{"action": "add_members", "at_s": ADD_AT}],
            strategy=("cooperative-sticky",),
            network={"drop_probability": 0.05},
        )
    )
    assert r.summary["messages_dropped"] > 0 and r.summary["settled_at_end"]
