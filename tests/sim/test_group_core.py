"""The coordinator's group state machine, driven directly (no trio, no network)."""

from __future__ import annotations

import re

import pytest

from assignors import Assignment, Subscription, TopicPartition
from sim.config import GroupConfig
from sim.coordinator.classic.group import ClassicGroup, IllegalTransition
from sim.coordinator.classic.states import ClassicGroupState
from sim.wire import messages as m

SUB = Subscription(("t",))


def join(member_id="", protocols=(("range", SUB),), instance=None, rebalance_timeout=300.0):
    return m.JoinGroupRequest(member_id, instance, tuple(protocols), 45.0, rebalance_timeout)


def sends(effects, to=None):
    return [e[2] for e in effects if e[0] == "send" and (to is None or e[1] == to)]


def timers(effects):
    return {e[1]: e[2] for e in effects if e[0] == "timer" and e[2] is not None}


def fire(g, now, key):
    return g.on_timer(now, key, g.timers[key])


def form(g, clients=("a", "b"), protocols=(("range", SUB),), instance=False):
    """Join every client (with KIP-394's second round for dynamic members), complete the delay."""
    ids = {}
    for c in clients:
        if instance:
            ids[c] = None
            g.handle(0.0, c, join(protocols=protocols, instance=c))
            ids[c] = g.static_members[c]
        else:
            (r,) = sends(g.handle(0.0, c, join(protocols=protocols)), c)
            assert r.error == m.MEMBER_ID_REQUIRED
            g.handle(0.0, c, join(r.member_id, protocols))
            ids[c] = r.member_id
    effects = []
    while g.state == ClassicGroupState.PREPARING_REBALANCE:
        effects += fire(g, g.timers[("join",)], ("join",))
    return ids, effects


def sync_all(g, ids, now=10.0):
    leader = g.leader
    assignments = tuple(
        (mid, Assignment([TopicPartition("t", i)])) for i, mid in enumerate(ids.values())
    )
    out = []
    for c, mid in ids.items():
        if mid != leader:
            out += g.handle(
                now, c, m.SyncGroupRequest(mid, g.generation, g.members[mid].group_instance_id)
            )
    client = next(c for c, mid in ids.items() if mid == leader)
    out += g.handle(
        now,
        client,
        m.SyncGroupRequest(leader, g.generation, g.members[leader].group_instance_id, assignments),
    )
    return out


def test_first_join_gets_member_id_required():
    """A dynamic member's first JoinGroup is answered MEMBER_ID_REQUIRED with its id (KIP-394)."""
    g = ClassicGroup(GroupConfig())
    (r,) = sends(g.handle(0.0, "a", join()))
    # ClassicGroup.generateMemberId: the Java consumer's default client.id, "-", a random UUID
    assert r.error == m.MEMBER_ID_REQUIRED
    assert re.fullmatch(
        r"consumer-group-1-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
        r.member_id,
    ), r.member_id
    assert g.state == ClassicGroupState.EMPTY and not g.members


def test_initial_delay_extends_while_members_arrive():
    """From Empty the barrier waits group.initial.rebalance.delay.ms and extends once more when
    members joined during the delay."""
    g = ClassicGroup(GroupConfig(initial_rebalance_delay_ms=3000))
    _ids, _ = form(g, ("a",))
    assert g.state == ClassicGroupState.COMPLETING_REBALANCE
    g2 = ClassicGroup(GroupConfig(initial_rebalance_delay_ms=3000))
    (r,) = sends(g2.handle(0.0, "a", join()))
    eff = g2.handle(0.0, "a", join(r.member_id))
    assert timers(eff)[("join",)] == 3.0
    (r2,) = sends(g2.handle(1.0, "b", join()))
    g2.handle(1.0, "b", join(r2.member_id))
    eff = fire(g2, 3.0, ("join",))
    assert g2.state == ClassicGroupState.PREPARING_REBALANCE and timers(eff)[("join",)] == 6.0
    eff = fire(g2, 6.0, ("join",))
    assert g2.state == ClassicGroupState.COMPLETING_REBALANCE and g2.generation == 1
    responses = sends(eff)
    assert {r.member_id for r in responses} == set(g2.members)
    leader_resp = next(r for r in responses if r.member_id == g2.leader)
    assert len(leader_resp.members) == 2
    assert all(not r.members for r in responses if r.member_id != g2.leader)


def test_protocol_vote_and_inconsistent_protocol():
    """The selected assignor is supported by all and gets the most first-choice votes; a joiner
    sharing no assignor with the group gets INCONSISTENT_GROUP_PROTOCOL."""
    g = ClassicGroup(GroupConfig())
    both = (("range", SUB), ("cooperative-sticky", SUB))
    coop_first = (("cooperative-sticky", SUB), ("range", SUB))
    (ra,) = sends(g.handle(0.0, "a", join(protocols=both)))
    g.handle(0.0, "a", join(ra.member_id, both))
    for c in ("b", "c"):
        (r,) = sends(g.handle(0.0, c, join(protocols=coop_first)))
        g.handle(0.0, c, join(r.member_id, coop_first))
    (rx,) = sends(g.handle(0.0, "x", join(protocols=(("roundrobin", SUB),))))
    assert rx.error == m.INCONSISTENT_GROUP_PROTOCOL
    while g.state == ClassicGroupState.PREPARING_REBALANCE:
        fire(g, g.timers[("join",)], ("join",))
    assert g.protocol == "cooperative-sticky"


def test_heartbeat_errors():
    """Heartbeats: REBALANCE_IN_PROGRESS while preparing, ILLEGAL_GENERATION for an old
    generation, UNKNOWN_MEMBER_ID for a stranger, NONE when Stable."""
    g = ClassicGroup(GroupConfig(), elide_heartbeats=False)
    ids, _ = form(g)
    sync_all(g, ids)
    assert g.state == ClassicGroupState.STABLE
    a = ids["a"]
    (r,) = sends(g.handle(11.0, "a", m.HeartbeatRequest(a, g.generation, None)))
    assert r.error == m.NONE
    (r,) = sends(g.handle(11.0, "a", m.HeartbeatRequest(a, g.generation - 1, None)))
    assert r.error == m.ILLEGAL_GENERATION
    (r,) = sends(g.handle(11.0, "z", m.HeartbeatRequest("z-9", g.generation, None)))
    assert r.error == m.UNKNOWN_MEMBER_ID
    g.handle(12.0, "a", join(a))  # the leader's JoinGroup forces a rebalance
    assert g.state == ClassicGroupState.PREPARING_REBALANCE
    (r,) = sends(g.handle(12.0, "b", m.HeartbeatRequest(ids["b"], g.generation, None)), "b")
    assert r.error == m.REBALANCE_IN_PROGRESS


def test_session_expiry_removes_member_and_rebalances():
    """A member silent for session.timeout.ms is removed and the group prepares a rebalance."""
    g = ClassicGroup(GroupConfig(), elide_heartbeats=False)
    ids, _ = form(g)
    sync_all(g, ids)
    g.handle(20.0, "a", m.HeartbeatRequest(ids["a"], g.generation, None))
    eff = fire(g, g.timers[("expire", ids["b"])], ("expire", ids["b"]))
    assert ids["b"] not in g.members and g.state == ClassicGroupState.PREPARING_REBALANCE
    assert any(
        e[0] == "event" and e[1] == "member_removed" and "session_expired" in e[4] for e in eff
    )


def test_static_rejoin_in_stable_keeps_assignment_and_fences_old_id():
    """A known group.instance.id rejoining a Stable group gets the same assignment without a
    rebalance, and its old member id is fenced (KIP-345)."""
    g = ClassicGroup(GroupConfig(), elide_heartbeats=False)
    ids, _ = form(g, instance=True)
    sync_all(g, ids)
    gen = g.generation
    before = g.members[ids["b"]].assignment
    eff = g.handle(30.0, "b", join(instance="b"))
    assert g.state == ClassicGroupState.STABLE and g.generation == gen
    (r,) = sends(eff, "b")
    assert r.error == m.NONE and r.generation == gen
    (s,) = sends(g.handle(30.1, "b", m.SyncGroupRequest(r.member_id, gen, "b")), "b")
    assert s.assignment == before
    (h,) = sends(g.handle(30.2, "b", m.HeartbeatRequest(ids["b"], gen, "b")), "b")
    assert h.error == m.FENCED_INSTANCE_ID


def test_members_that_never_sync_are_removed():
    """Members that do not send SyncGroup within the rebalance timeout are removed and a new
    rebalance starts."""
    g = ClassicGroup(GroupConfig(), elide_heartbeats=False)
    ids, _ = form(g)
    follower = next(c for c, mid in ids.items() if mid != g.leader)
    g.handle(7.0, follower, m.SyncGroupRequest(ids[follower], g.generation, None))
    fire(g, g.timers[("sync",)], ("sync",))
    assert g.leader is not None and ids[follower] in g.members and len(g.members) == 1
    assert g.state == ClassicGroupState.PREPARING_REBALANCE


def test_leave_group_triggers_rebalance():
    """A LeaveGroup removes the member at once and starts a rebalance."""
    g = ClassicGroup(GroupConfig(), elide_heartbeats=False)
    ids, _ = form(g)
    sync_all(g, ids)
    g.handle(20.0, "b", m.LeaveGroupRequest(ids["b"], None))
    assert ids["b"] not in g.members and g.state == ClassicGroupState.PREPARING_REBALANCE


def test_commit_fails_while_completing_rebalance():
    """OffsetCommit answers REBALANCE_IN_PROGRESS in CompletingRebalance, UNKNOWN_MEMBER_ID for a
    removed member."""
    g = ClassicGroup(GroupConfig(), elide_heartbeats=False)
    ids, _ = form(g)
    (r,) = sends(g.handle(7.0, "a", m.OffsetCommitRequest(ids["a"], g.generation, None, 1)))
    assert r.error == m.REBALANCE_IN_PROGRESS
    (r,) = sends(g.handle(7.0, "z", m.OffsetCommitRequest("z-1", g.generation, None, 1)))
    assert r.error == m.UNKNOWN_MEMBER_ID


def test_illegal_transition_raises():
    """Transitions outside GroupMetadata's table are refused."""
    g = ClassicGroup(GroupConfig())
    with pytest.raises(IllegalTransition):
        g._transition(ClassicGroupState.STABLE)


def test_duplicate_assignment_is_a_violation():
    """A leader assigning one partition to two members in one generation is recorded as a
    violation."""
    g = ClassicGroup(GroupConfig(), elide_heartbeats=False)
    ids, _ = form(g)
    tp = TopicPartition("t", 0)
    leader_client = next(c for c, mid in ids.items() if mid == g.leader)
    eff = g.handle(
        7.0,
        leader_client,
        m.SyncGroupRequest(
            g.leader, g.generation, None, tuple((mid, Assignment([tp])) for mid in ids.values())
        ),
    )
    assert any(e[0] == "violation" for e in eff)


def test_leader_whose_join_response_was_lost_gets_the_member_list_again():
    """In CompletingRebalance a leader rejoining with unchanged metadata (its JoinGroup response
    was lost) gets the full member list again, so it can still compute the assignment."""
    g = ClassicGroup(GroupConfig(), elide_heartbeats=False)
    ids, _ = form(g)
    assert g.state == ClassicGroupState.COMPLETING_REBALANCE
    leader_client = next(c for c, mid in ids.items() if mid == g.leader)
    other_client = next(c for c, mid in ids.items() if mid != g.leader)
    (again,) = sends(g.handle(5.0, leader_client, join(ids[leader_client])), leader_client)
    assert again.error == m.NONE and {mid for mid, _ in again.members} == set(ids.values())
    (follower,) = sends(g.handle(5.0, other_client, join(ids[other_client])), other_client)
    assert follower.members == ()
