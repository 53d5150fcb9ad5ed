"""The classic coordinator and the online migration answer as Kafka's ``GroupMetadataManager``
(``ClassicGroup``, ``ConsumerGroup``; Kafka commit 1eb7644) on the shortest sequences where the
simulator once answered otherwise (issue 47), one test per cause. Each drives the coordinator
core directly (no trio, no network); cN is a client."""

from __future__ import annotations

import numpy as np

from assignors import Assignment, Subscription, TopicPartition
from assignors.java import hashmap_insertion_order
from sim.config import GroupConfig
from sim.coordinator.behaviour import behaviour_for
from sim.coordinator.classic.group import NEW_MEMBER_JOIN_TIMEOUT_S, ClassicGroup
from sim.coordinator.classic.states import ClassicGroupState
from sim.coordinator.consumer.classic_members import ConsumerGroupWithClassicMembers
from sim.coordinator.migration import CLASSIC, CONSUMER, MigratingCoordinator
from sim.wire import messages as m

SUB = Subscription(("t",))
COOP = (("cooperative-sticky", SUB),)


def tp(p):
    return TopicPartition("t", p)


def join(member_id="", protocols=COOP, instance=None, session=45.0, rebalance=300.0):
    return m.JoinGroupRequest(member_id, instance, tuple(protocols), session, rebalance)


def sends(effects, to=None, kind=object):
    return [
        e[2]
        for e in effects
        if e[0] == "send" and (to is None or e[1] == to) and isinstance(e[2], kind)
    ]


def events(effects, kind):
    return [e for e in effects if e[0] == "event" and e[1] == kind]


def host(seed=0, **cfg) -> MigratingCoordinator:
    return MigratingCoordinator(
        GroupConfig(**cfg),
        lambda: (0, {"t": 6}),
        group_type=CLASSIC,
        id_rng=np.random.default_rng(seed),
    )


def fire(g, key=("join",)):
    at = g.timers[key]
    return g.on_timer(at, key, at)


def dynamic_join(g, now, client, protocols=COOP):
    """KIP-394's two rounds; returns the member id and the second round's effects."""
    (r,) = sends(g.handle(now, client, join(protocols=protocols)), client)
    assert r.error == m.MEMBER_ID_REQUIRED
    return r.member_id, g.handle(now, client, join(r.member_id, protocols))


def stable(g, clients, now=0.0, protocols=COOP):
    """A Stable classic group of ``clients`` (dynamic), the leader giving partition i to the
    i-th member. Returns {client: member id}."""
    ids = {c: dynamic_join(g, now, c, protocols)[0] for c in clients}
    while g.state == ClassicGroupState.PREPARING_REBALANCE:
        fire(g)
    gen = g.generation
    order = list(ids.values())
    assignments = tuple((mid, Assignment([tp(i)])) for i, mid in enumerate(order))
    for c, mid in ids.items():
        g.handle(
            now + 1, c, m.SyncGroupRequest(mid, gen, None, assignments if mid == g.leader else ())
        )
    assert g.state == ClassicGroupState.STABLE
    return ids


def consumer_join(now, member_id="", instance=None):
    return m.ConsumerGroupHeartbeatRequest(
        member_id,
        0,
        instance,
        rebalance_timeout_s=300.0,
        subscribed_topics=("t",),
        owned_partitions=frozenset(),
    )


def test_1_upgrade_refused_while_the_group_has_selected_no_protocol():
    """c0 (static) joins classic and the group waits out its initial delay; c2 joins with the
    consumer protocol. ConsumerGroup.fromClassicGroup reads each member's subscription under the
    group's protocol, which this group has not selected yet: c2 gets UNKNOWN_SERVER_ERROR (Kafka's
    client: fatal) and the group stays classic, but convertToConsumerGroup had answered c0's
    waiting JoinGroup REBALANCE_IN_PROGRESS first, and that answer stands."""
    h = host()
    h.handle(0.0, "c0", join(instance="c0"))
    assert h.state == ClassicGroupState.PREPARING_REBALANCE
    out = h.handle(1.0, "c2", consumer_join(1.0))
    (hb,) = sends(out, "c2", m.ConsumerGroupHeartbeatResponse)
    assert hb.error == m.UNKNOWN_SERVER_ERROR
    (j,) = sends(out, "c0", m.JoinGroupResponse)
    assert j.error == m.REBALANCE_IN_PROGRESS
    assert h.group_type == CLASSIC and h.state == ClassicGroupState.PREPARING_REBALANCE
    assert "no protocol selected" in events(out, "conversion_refused")[0][4]
    # c0 rejoins and the initial rebalance completes as before
    mid = h.group.static_members["c0"]
    h.handle(1.0, "c0", join(mid, instance="c0"))
    out = fire(h.group)
    assert sends(out, "c0", m.JoinGroupResponse)[0].error == m.NONE
    # once the group has a protocol, the same heartbeat converts it, even before c0 syncs
    out = h.handle(5.0, "c2", consumer_join(5.0))
    assert h.group_type == CONSUMER
    assert sends(out, "c2", m.ConsumerGroupHeartbeatResponse)[0].error == m.NONE


def test_1_members_without_an_assignment_join_the_consumer_group_with_none():
    """KAFKA-17733 (Kafka 4.0): a member that never synced, or every member after a rebalance
    that broke off in CompletingRebalance (resetAndPropagateAssignmentWithError), is converted
    with no partitions instead of failing the upgrade."""
    h = host()
    ids = stable(h.group, ("c1", "c2"))
    dynamic_join(h.group, 10.0, "c3")
    for c in ("c1", "c2"):
        h.handle(11.0, c, join(ids[c]))
    assert h.state == ClassicGroupState.COMPLETING_REBALANCE
    # c1 leaves before the leader syncs: a new rebalance from CompletingRebalance resets them all
    h.handle(12.0, "c1", m.LeaveGroupRequest(ids["c1"], None))
    assert all(not mm.assignment.partitions for mm in h.group.members.values())
    out = h.handle(13.0, "c9", consumer_join(13.0, "C9"))
    assert sends(out, "c9", m.ConsumerGroupHeartbeatResponse)[0].error == m.NONE
    assert h.group_type == CONSUMER
    g = h.group
    assert isinstance(g, ConsumerGroupWithClassicMembers)
    assert all(not mm.assigned for mid, mm in g.members.items() if mid != "C9")


def test_1_before_kafka_17733_a_member_without_an_assignment_fails_the_upgrade():
    """kafka_version 4.0 (commit 1eb7644, switch upgrade_converts_unassigned_members off):
    fromClassicGroup cannot read an empty assignment, so the joiner gets GROUP_ID_NOT_FOUND and
    the group stays classic, here in a group whose rebalance broke off in CompletingRebalance."""
    h = MigratingCoordinator(
        GroupConfig(),
        lambda: (0, {"t": 6}),
        group_type=CLASSIC,
        id_rng=np.random.default_rng(0),
        behaviour=behaviour_for("4.0"),
    )
    ids = stable(h.group, ("c1", "c2"))
    dynamic_join(h.group, 10.0, "c3")
    for c in ("c1", "c2"):
        h.handle(11.0, c, join(ids[c]))
    h.handle(12.0, "c1", m.LeaveGroupRequest(ids["c1"], None))
    assert h.group.members_without_assignment() == 2
    out = h.handle(13.0, "c9", consumer_join(13.0, "C9"))
    assert sends(out, "c9", m.ConsumerGroupHeartbeatResponse)[0].error == m.GROUP_ID_NOT_FOUND
    assert "without an assignment" in events(out, "conversion_refused")[0][4]
    assert h.group_type == CLASSIC


def test_2_a_rebalance_whose_members_have_all_joined_completes_at_once():
    """c2 joins, the initial delay passes, c2 (the leader of a Stable group) sends JoinGroup
    again: prepareRebalance finds every member joined (maybeCompleteJoinElseSchedule) and answers
    it at once, not at the rebalance timeout."""
    g = ClassicGroup(GroupConfig())
    ids = stable(g, ("c2",))
    out = g.handle(20.0, "c2", join(ids["c2"]))
    (r,) = sends(out, "c2", m.JoinGroupResponse)
    assert r.error == m.NONE and r.generation == 2
    assert g.state == ClassicGroupState.COMPLETING_REBALANCE and ("join",) not in g.timers


def _seed_where_hashmap_order_is_not_join_order(n: int) -> int:
    for seed in range(200):
        g = ClassicGroup(GroupConfig(), id_rng=np.random.default_rng(seed))
        ids = [g._new_member_id(None) for _ in range(n)]  # the ids the group will hand out
        if hashmap_insertion_order(ids[1:])[0] != ids[1]:
            return seed
    raise AssertionError("no seed found")


def test_3_the_new_leader_is_the_first_member_of_the_members_hashmap():
    """c1, c3, c2 join; c1 (the leader) expires. ClassicGroup.remove names the first member id of
    the members HashMap, not the oldest member."""
    seed = _seed_where_hashmap_order_is_not_join_order(3)
    g = ClassicGroup(GroupConfig(), id_rng=np.random.default_rng(seed))
    ids = stable(g, ("c1", "c3", "c2"))
    assert g.leader == ids["c1"]
    at = g.timers[("expire", ids["c1"])]
    g.on_timer(at, ("expire", ids["c1"]), at)
    rest = [ids["c3"], ids["c2"]]
    assert g.leader == hashmap_insertion_order(rest)[0] != rest[0]


def test_4_a_protocol_vote_tie_goes_to_the_first_name_of_the_votes_hashmap():
    """c5 votes range, c4 cooperative-sticky: the tie goes to the protocol the votes HashMap
    iterates first (range), whoever leads."""
    for first, second in (("c5", "c4"), ("c4", "c5")):
        g = ClassicGroup(GroupConfig())
        protos = {
            "c5": (("range", SUB), ("cooperative-sticky", SUB)),
            "c4": (("cooperative-sticky", SUB), ("range", SUB)),
        }
        for c in (first, second):
            dynamic_join(g, 0.0, c, protos[c])
        while g.state == ClassicGroupState.PREPARING_REBALANCE:
            fire(g)
        assert hashmap_insertion_order(["cooperative-sticky", "range"])[0] == "range"
        assert g.protocol == "range"


def test_5_a_group_made_in_place_of_an_empty_one_starts_at_epoch_one():
    """c2 joins classic, leaves (the group is empty at generation 2) and comes back with the
    consumer protocol: the empty classic group is deleted and the new consumer group starts from
    epoch 0, so c2's join makes it epoch 1; the same the other way."""
    h = host()
    ids = stable(h.group, ("c2",))
    h.handle(5.0, "c2", m.LeaveGroupRequest(ids["c2"], None))
    assert h.state == ClassicGroupState.EMPTY and h.generation == 2
    out = h.handle(6.0, "c2", consumer_join(6.0))
    (r,) = sends(out, "c2", m.ConsumerGroupHeartbeatResponse)
    assert h.group_type == CONSUMER and r.error == m.NONE and r.member_epoch == 1
    h.handle(7.0, "c2", m.ConsumerGroupHeartbeatRequest(r.member_id, m.LEAVE_GROUP_MEMBER_EPOCH))
    assert not h.members
    h.handle(8.0, "c3", join(instance="c3"))
    assert h.group_type == CLASSIC and h.generation == 0


def test_6_static_rejoin_in_stable_with_other_subscription_bytes_keeps_the_assignment():
    """A static member rejoins a Stable group under a new member id with other subscription
    bytes (here its owned partitions) and the same protocol names: the protocol the group would
    select is unchanged, so it gets the current generation back, no rebalance."""
    g = ClassicGroup(GroupConfig())
    for c in ("c1", "c2"):
        g.handle(0.0, c, join(instance=c))
    while g.state == ClassicGroupState.PREPARING_REBALANCE:
        fire(g)
    gen = g.generation
    a = {mid: Assignment([tp(i)]) for i, mid in enumerate(g.members)}
    for c in ("c1", "c2"):
        mid = g.static_members[c]
        g.handle(
            1.0, c, m.SyncGroupRequest(mid, gen, c, tuple(a.items()) if mid == g.leader else ())
        )
    assert g.state == ClassicGroupState.STABLE
    other = (("cooperative-sticky", Subscription(("t",), owned_partitions=(tp(1),))),)
    out = g.handle(5.0, "c2", join(protocols=other, instance="c2"))
    (r,) = sends(out, "c2", m.JoinGroupResponse)
    assert r.error == m.NONE and r.generation == gen
    assert g.state == ClassicGroupState.STABLE
    # a protocol change that moves the group's selection does rebalance
    changed = (("range", SUB), ("cooperative-sticky", SUB))
    g2 = ClassicGroup(GroupConfig())
    g2.handle(0.0, "c1", join(instance="c1"))
    fire(g2)
    mid = g2.static_members["c1"]
    g2.handle(1.0, "c1", m.SyncGroupRequest(mid, 1, "c1", ((mid, Assignment([tp(0)])),)))
    out = g2.handle(5.0, "c1", join(protocols=changed, instance="c1"))
    assert g2.protocol == "range" and g2.generation == 2  # (a one-member group completes at once)


def test_7_the_last_member_leaving_during_the_initial_delay_keeps_the_group_until_the_timer():
    """The last member leaves while the initial delay runs: maybeCompleteJoinPhase does not end
    an initial rebalance, so the group stays PreparingRebalance and a member that joins meanwhile
    is answered when the delay ends."""
    h = host()
    mid, _ = dynamic_join(h.group, 0.0, "c1")
    h.handle(1.0, "c1", m.LeaveGroupRequest(mid, None))
    assert h.state == ClassicGroupState.PREPARING_REBALANCE and not h.members
    at = h.group.timers[("join",)]
    assert at == 3.0
    mid2, out = dynamic_join(h.group, 2.0, "c2")
    assert not sends(out, "c2", m.JoinGroupResponse)
    out = fire(h.group)  # (c2's arrival extends the delay once, InitialDelayedJoin)
    assert h.state == ClassicGroupState.PREPARING_REBALANCE and h.group.timers[("join",)] == 6.0
    out = fire(h.group)
    (r,) = sends(out, "c2", m.JoinGroupResponse)
    assert r.error == m.NONE and r.generation == 1 and r.member_id == mid2
    # with nobody joining, the delay's end empties it
    h2 = host()
    mid, _ = dynamic_join(h2.group, 0.0, "c1")
    h2.handle(1.0, "c1", m.LeaveGroupRequest(mid, None))
    fire(h2.group)
    assert h2.state == ClassicGroupState.EMPTY and h2.generation == 1


def test_8_a_member_removed_while_its_join_waits_is_answered_unknown_member_id():
    """removeCurrentMemberFromClassicGroup and removeMemberAndUpdateClassicGroup answer the
    waiting JoinGroup UNKNOWN_MEMBER_ID before removing the member. A new member can be expired
    while it waits (ClassicGroupMember.isNew, the new-member join timeout)."""
    g = ClassicGroup(GroupConfig())
    mid, _ = dynamic_join(g, 0.0, "c1")
    out = g.handle(1.0, "c1", m.LeaveGroupRequest(mid, None))
    assert [r.error for r in sends(out, "c1", m.JoinGroupResponse)] == [m.UNKNOWN_MEMBER_ID]
    # expiry of a new member whose join waits on a slow rebalance
    g = ClassicGroup(GroupConfig())
    ids = stable(g, ("c1",))
    mid2, out = dynamic_join(g, 10.0, "c2", protocols=COOP)
    assert g.timers[("expire", mid2)] == 10.0 + NEW_MEMBER_JOIN_TIMEOUT_S
    g.members[ids["c1"]].rebalance_timeout_s = 900.0  # (c1 never rejoins; its timeout is long)
    out = g.on_timer(310.0, ("expire", mid2), 310.0)
    assert [r.error for r in sends(out, "c2", m.JoinGroupResponse)] == [m.UNKNOWN_MEMBER_ID]
    assert mid2 not in g.members


def test_9_an_upgrade_into_a_full_group_fails_whole():
    """group.consumer.max.size = 2 and two classic members: validateOnlineUpgrade lets the group
    through, but the joiner gets GROUP_MAX_SIZE_REACHED (throwIfConsumerGroupIsFull) and the write
    fails whole: the group stays classic."""
    h = host(consumer_max_size=2)
    stable(h.group, ("c1", "c2"))
    out = h.handle(5.0, "c3", consumer_join(5.0))
    (r,) = sends(out, "c3", m.ConsumerGroupHeartbeatResponse)
    assert r.error == m.GROUP_MAX_SIZE_REACHED
    assert h.group_type == CLASSIC and h.state == ClassicGroupState.STABLE
    assert not events(out, "group_converted") and events(out, "conversion_refused")


def test_10_a_classic_static_member_replacing_the_last_consumer_member_downgrades_the_group():
    """validateOnlineDowngradeWithReplacedMemberId: c3's consumer-protocol static member is the
    group's last one; c3 restarts with the classic protocol and the same group.instance.id. The
    group becomes classic at once, Stable (no rebalance), with c3 in the replaced member's place
    and its target assignment."""
    h = host()
    ids = stable(h.group, ("c1", "c2"))
    out = h.handle(5.0, "c3", consumer_join(5.0, "C3", instance="c3"))
    assert h.group_type == CONSUMER
    g = h.group
    assert isinstance(g, ConsumerGroupWithClassicMembers)
    target = g.target["C3"]
    out = h.handle(6.0, "c3", join(instance="c3"))
    assert h.group_type == CLASSIC and h.state == ClassicGroupState.STABLE
    (r,) = sends(out, "c3", m.JoinGroupResponse)
    assert r.error == m.NONE
    new_id = h.group.static_members["c3"]
    assert set(h.members) == {ids["c1"], ids["c2"], new_id}
    assert set(h.group.members[new_id].assignment.partitions) == set(target)
    assert "C3" not in h.members and events(out, "group_converted")


def test_10_syncgroup_with_another_protocol_name_is_inconsistent():
    """throwIfClassicProtocolUnmatched (a classic member of a consumer group) and
    validateSyncGroup (a classic group): a SyncGroup naming another protocol than the one its
    JoinGroup response gave is answered INCONSISTENT_GROUP_PROTOCOL."""
    g = ClassicGroup(GroupConfig())
    ids = stable(g, ("c1",))
    out = g.handle(
        5.0, "c1", m.SyncGroupRequest(ids["c1"], g.generation, None, (), protocol_name="range")
    )
    assert sends(out, "c1", m.SyncGroupResponse)[0].error == m.INCONSISTENT_GROUP_PROTOCOL
    h = host()
    ids = stable(h.group, ("c1",))
    h.handle(5.0, "c9", consumer_join(5.0, "C9"))
    assert h.group_type == CONSUMER
    mm = h.group.members[ids["c1"]]
    out = h.handle(
        6.0, "c1", m.SyncGroupRequest(ids["c1"], mm.epoch, None, (), protocol_name="range")
    )
    assert sends(out, "c1", m.SyncGroupResponse)[0].error == m.INCONSISTENT_GROUP_PROTOCOL
