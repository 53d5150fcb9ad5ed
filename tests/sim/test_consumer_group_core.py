"""The consumer group protocol's coordinator (KIP-848), driven directly (no trio, no network).

The reconciliation cases follow the behaviour Kafka's CurrentAssignmentBuilderTest describes; the
group cases follow GroupMetadataManagerTest's consumer-group heartbeat scenarios."""

from __future__ import annotations

import pytest

from assignors import TopicPartition
from sim.config import AssignorCost, GroupConfig
from sim.coordinator.behaviour import behaviour_for
from sim.coordinator.consumer.group import ConsumerGroup
from sim.coordinator.consumer.reconcile import next_member_assignment
from sim.coordinator.consumer.states import ConsumerGroupState, MemberState
from sim.wire import messages as m


def tps(*ps, topic="t"):
    return frozenset(TopicPartition(topic, p) for p in ps)


def free(_tp):
    return -1


def held_by(epoch, *ps):
    owned = tps(*ps)
    return lambda tp: epoch if tp in owned else -1


# ---------------------------------------------------------------- CurrentAssignmentBuilder


def test_stable_to_stable_with_same_partitions_moves_to_target_epoch():
    """A stable member whose target did not change only moves to the new epoch."""
    assert next_member_assignment(
        MemberState.STABLE, 10, tps(1, 2), frozenset(), 11, tps(1, 2), free, tps(1, 2)
    ) == (MemberState.STABLE, 11, tps(1, 2), frozenset())


def test_stable_to_stable_with_new_free_partitions():
    """Free partitions in the target are assigned at once, in the target epoch."""
    assert next_member_assignment(
        MemberState.STABLE, 10, tps(1, 2), frozenset(), 11, tps(1, 2, 3), free, tps(1, 2)
    ) == (MemberState.STABLE, 11, tps(1, 2, 3), frozenset())


def test_stable_to_unrevoked_keeps_epoch_and_revokes_first():
    """Partitions leaving the member must be revoked first: same epoch, assigned = kept, and
    nothing new is handed out meanwhile (even free partitions)."""
    assert next_member_assignment(
        MemberState.STABLE, 10, tps(1, 2, 3), frozenset(), 11, tps(2, 3, 4), free, tps(1, 2, 3)
    ) == (MemberState.UNREVOKED_PARTITIONS, 10, tps(2, 3), tps(1))


def test_stable_to_unreleased_when_new_partitions_are_still_held():
    """A partition still held by another member is not given: UNRELEASED in the target epoch."""
    assert next_member_assignment(
        MemberState.STABLE,
        10,
        tps(1, 2),
        frozenset(),
        11,
        tps(1, 2, 3, 4),
        held_by(10, 4),
        tps(1, 2),
    ) == (MemberState.UNRELEASED_PARTITIONS, 11, tps(1, 2, 3), frozenset())
    assert next_member_assignment(
        MemberState.STABLE, 10, tps(1, 2), frozenset(), 11, tps(1, 2, 4), held_by(10, 4), tps(1, 2)
    ) == (MemberState.UNRELEASED_PARTITIONS, 11, tps(1, 2), frozenset())


def test_revocation_already_done_by_the_client_skips_unrevoked():
    """If the member no longer reports the partitions to revoke, it goes straight to the target."""
    assert next_member_assignment(
        MemberState.STABLE, 10, tps(1, 2), frozenset(), 11, tps(2), free, tps(2)
    ) == (
        MemberState.STABLE,
        11,
        tps(2),
        frozenset(),
    )


@pytest.mark.parametrize("owned", [tps(1, 2), None])
def test_remains_unrevoked_while_it_still_owns_them(owned):
    """Still reporting a partition to revoke (or not reporting at all): no progress."""
    assert next_member_assignment(
        MemberState.UNREVOKED_PARTITIONS, 10, tps(2), tps(1), 11, tps(2, 3), free, owned
    ) == (MemberState.UNREVOKED_PARTITIONS, 10, tps(2), tps(1))


def test_unrevoked_to_stable_once_acknowledged():
    """Revocation acknowledged: the member moves on and takes the free partitions."""
    assert next_member_assignment(
        MemberState.UNREVOKED_PARTITIONS, 10, tps(2), tps(1), 11, tps(2, 3), free, tps(2)
    ) == (MemberState.STABLE, 11, tps(2, 3), frozenset())


def test_unrevoked_to_unrevoked_with_a_newer_target():
    """After acknowledging, a newer target that takes more away: revoke again, at epoch + 1."""
    assert next_member_assignment(
        MemberState.UNREVOKED_PARTITIONS, 10, tps(2, 3), tps(1), 12, tps(3), free, tps(2, 3)
    ) == (MemberState.UNREVOKED_PARTITIONS, 11, tps(3), tps(2))


def test_unrevoked_to_unreleased():
    assert next_member_assignment(
        MemberState.UNREVOKED_PARTITIONS, 10, tps(2), tps(1), 11, tps(2, 3), held_by(10, 3), tps(2)
    ) == (MemberState.UNRELEASED_PARTITIONS, 11, tps(2), frozenset())


def test_unreleased_to_stable_when_released():
    assert next_member_assignment(
        MemberState.UNRELEASED_PARTITIONS, 11, tps(2), frozenset(), 11, tps(2, 3), free, tps(2)
    ) == (MemberState.STABLE, 11, tps(2, 3), frozenset())


def test_unreleased_stays_while_held():
    assert next_member_assignment(
        MemberState.UNRELEASED_PARTITIONS,
        11,
        tps(2),
        frozenset(),
        11,
        tps(2, 3),
        held_by(11, 3),
        tps(2),
    ) == (MemberState.UNRELEASED_PARTITIONS, 11, tps(2), frozenset())


def test_unreleased_to_unrevoked_with_a_newer_target():
    assert next_member_assignment(
        MemberState.UNRELEASED_PARTITIONS,
        11,
        tps(2, 4),
        frozenset(),
        12,
        tps(4, 5),
        held_by(11, 5),
        tps(2, 4),
    ) == (MemberState.UNREVOKED_PARTITIONS, 11, tps(4), tps(2))


# ---------------------------------------------------------------- the group

META = (0, {"t": 4})


def coordinator(cost="zero", **group):
    # these cases follow 1eb7644's tests: the 4.0 coordinator (4.3's switches:
    # tests/sim/test_broker_behaviour.py)
    return ConsumerGroup(
        GroupConfig(**group), lambda: META, AssignorCost(mode=cost), behaviour=behaviour_for("4.0")
    )


def drive(g, now, effects):
    """Fire the coordinator's zero-delay timers (the shared assignor run) due by ``now``."""
    out = list(effects)
    while True:
        due = [k for k, at in g.timers.items() if k[0] in ("assign", "unblock") and at <= now]
        if not due:
            return out
        out += g.on_timer(now, due[0], g.timers[due[0]])


def responses(effects, to=None):
    return [
        e[2]
        for e in effects
        if e[0] == "send"
        and (to is None or e[1] == to)
        and isinstance(e[2], m.ConsumerGroupHeartbeatResponse)
    ]


def hb(g, now, client, member_id="", epoch=0, owned=None, instance=None, full=False, **kw):
    if epoch == 0 or full:
        kw.setdefault("subscribed_topics", ("t",))
        kw.setdefault("rebalance_timeout_s", 300.0)
        owned = frozenset() if owned is None else owned
    req = m.ConsumerGroupHeartbeatRequest(member_id, epoch, instance, owned_partitions=owned, **kw)
    return drive(g, now, g.handle(now, client, req))


def join(g, now, client, instance=None):
    (r,) = responses(hb(g, now, client, instance=instance), client)
    assert r.error == m.NONE
    return r


def test_first_member_gets_everything_at_epoch_one():
    """A join bumps the group epoch; the target is computed for it; the new member, holding
    nothing, moves straight to the target epoch with all free partitions."""
    g = coordinator()
    r = join(g, 0.0, "a")
    assert (r.member_epoch, r.assignment) == (1, tps(0, 1, 2, 3))
    assert g.group_epoch == g.target_epoch == 1 and g.state == ConsumerGroupState.STABLE
    assert r.heartbeat_interval_s == 5.0


def test_second_member_waits_for_revocation_then_gets_the_partitions():
    """The KIP-848 hand-over: a partition reaches its new owner only after the old owner has
    acknowledged the revocation; members move epochs independently."""
    g = coordinator()
    a = join(g, 0.0, "a")
    b = join(g, 1.0, "b")
    assert g.group_epoch == 2
    assert b.member_epoch == 2 and b.assignment == frozenset()  # its partitions are still a's
    assert g.members[b.member_id].state == MemberState.UNRELEASED_PARTITIONS
    assert g.state == ConsumerGroupState.RECONCILING
    (ra,) = responses(hb(g, 2.0, "a", a.member_id, 1), "a")
    assert ra.member_epoch == 1 and len(ra.assignment) == 2  # revoke first, same epoch
    mine = ra.assignment
    assert g.members[a.member_id].state == MemberState.UNREVOKED_PARTITIONS
    (rb,) = responses(hb(g, 2.5, "b", b.member_id, 2), "b")
    assert rb.assignment is None  # nothing changed for b yet
    (ra2,) = responses(hb(g, 3.0, "a", a.member_id, 1, owned=mine), "a")  # the acknowledgement
    assert ra2.member_epoch == 2 and g.members[a.member_id].state == MemberState.STABLE
    (rb2,) = responses(hb(g, 3.5, "b", b.member_id, 2), "b")
    assert rb2.assignment == tps(0, 1, 2, 3) - mine
    assert g.state == ConsumerGroupState.STABLE


def test_joins_at_one_instant_are_handled_one_at_a_time():
    """Kafka handles one heartbeat at a time: each join bumps the group epoch and computes the
    target for it, so the first member of a forming group gets every partition and the others
    wait for their share (UNRELEASED_PARTITIONS, at their own epoch)."""
    g = coordinator()
    effects = []
    for c in "abc":
        effects += g.handle(
            0.0,
            c,
            m.ConsumerGroupHeartbeatRequest(
                "",
                0,
                subscribed_topics=("t",),
                rebalance_timeout_s=300.0,
                owned_partitions=frozenset(),
            ),
        )
    rs = responses(effects)
    assert [(r.member_epoch, r.assignment) for r in rs] == [
        (1, tps(0, 1, 2, 3)),
        (2, frozenset()),
        (3, frozenset()),
    ]
    assert g.assignments_computed == 3 and g.group_epoch == g.target_epoch == 3
    assert [g.members[r.member_id].state for r in rs] == [
        MemberState.STABLE,
        MemberState.UNRELEASED_PARTITIONS,
        MemberState.UNRELEASED_PARTITIONS,
    ]
    assert g.state == ConsumerGroupState.RECONCILING


def test_issue_36_two_joins_at_one_instant_one_partition():
    """Issue 36, item 2: one topic with one partition, c1 and c0 join at the same instant. Kafka:
    c1 gets epoch 1 with t-0, c0 epoch 2 with nothing (UNRELEASED_PARTITIONS), Reconciling. (Member
    ids "c0" and "c1" fall in HashMap buckets 13 and 14: c0 comes first and its quota is the one
    partition.)"""
    meta = (0, {"t": 1})
    g = ConsumerGroup(
        GroupConfig(), lambda: meta, AssignorCost(mode="zero"), behaviour=behaviour_for("4.0")
    )
    out = []
    for c in ("c1", "c0"):
        out += g.handle(
            0.0,
            c,
            m.ConsumerGroupHeartbeatRequest(
                c,
                0,
                subscribed_topics=("t",),
                rebalance_timeout_s=300.0,
                owned_partitions=frozenset(),
            ),
        )
    (r1,) = responses(out, "c1")
    (r0,) = responses(out, "c0")
    assert (r1.error, r1.member_id, r1.member_epoch, r1.assignment) == (m.NONE, "c1", 1, tps(0))
    assert (r0.error, r0.member_id, r0.member_epoch, r0.assignment) == (
        m.NONE,
        "c0",
        2,
        frozenset(),
    )
    assert g.members["c0"].state == MemberState.UNRELEASED_PARTITIONS
    assert g.group_epoch == g.target_epoch == 2 and g.state == ConsumerGroupState.RECONCILING
    assert dict(g.target) == {"c1": frozenset(), "c0": tps(0)}


def test_assignor_cost_delays_the_responses_and_blocks_the_coordinator():
    """A fixed assignor cost: the answers leave when the computation ends; requests that come
    meanwhile wait."""
    g = coordinator(cost="fixed:2")
    effects = drive(
        g,
        0.0,
        g.handle(
            0.0,
            "a",
            m.ConsumerGroupHeartbeatRequest(
                "",
                0,
                subscribed_topics=("t",),
                rebalance_timeout_s=300.0,
                owned_partitions=frozenset(),
            ),
        ),
    )
    (send,) = [e for e in effects if e[0] == "send"]
    assert send[3] == 2.0 and send[2].member_epoch == 1 and g.timers[("unblock",)] == 2.0
    assert g.handle(1.0, "b", m.ConsumerGroupHeartbeatRequest("x", 1)) == [] and g.parked
    out = g.on_timer(2.0, ("unblock",), 2.0)
    assert [r.error for r in responses(out, "b")] == [m.UNKNOWN_MEMBER_ID] and not g.parked


@pytest.mark.parametrize(
    "sent,owned,error",
    [
        (3, tps(0, 1, 2, 3), m.FENCED_MEMBER_EPOCH),  # an epoch the coordinator never gave
        (0, tps(0), m.NONE),  # the previous epoch with a subset: response lost
        (0, tps(0), m.NONE),
    ],
)
def test_member_epoch_checks(sent, owned, error):
    g = coordinator()
    a = join(g, 0.0, "a")
    (r,) = responses(hb(g, 1.0, "a", a.member_id, sent, owned=owned, full=sent == 0), "a")
    if sent == 0:
        # epoch 0 with a member id and the previous epoch 0: accepted as the lost join response
        assert r.error == m.NONE and r.member_epoch == 1
    else:
        assert r.error == error


def test_smaller_epoch_with_partitions_it_does_not_have_is_fenced():
    g = coordinator()
    a = join(g, 0.0, "a")
    b = join(g, 1.0, "b")
    hb(g, 1.1, "b", b.member_id, 2)
    (r,) = responses(hb(g, 2.0, "b", b.member_id, 1, owned=tps(0)), "b")
    assert r.error == m.FENCED_MEMBER_EPOCH
    assert a.member_epoch == 1


def test_issue_36_a_retried_heartbeat_at_an_epoch_before_the_previous_one_is_fenced():
    """Issue 36, item 1. Topics t and u with one partition each; c0 subscribes to u, c2 to both.
    c2's last transition (UNRELEASED_PARTITIONS -> STABLE) kept its epoch 3 and moved its previous
    epoch to 3 (CurrentAssignmentBuilder updates it on every transition), so its retried
    heartbeat at epoch 1, whose response was lost, is fenced as Kafka fences it."""
    meta = (0, {"t": 1, "u": 1})
    g = ConsumerGroup(
        GroupConfig(), lambda: meta, AssignorCost(mode="zero"), behaviour=behaviour_for("4.0")
    )
    t0, u0 = TopicPartition("t", 0), TopicPartition("u", 0)

    def beat(now, mid, epoch, owned=None, topics=None):
        req = m.ConsumerGroupHeartbeatRequest(
            mid,
            epoch,
            subscribed_topics=topics,
            owned_partitions=owned,
            rebalance_timeout_s=300.0 if topics else None,
        )
        (r,) = responses(g.handle(now, mid, req))
        return r

    r = beat(0.0, "c2", 0, frozenset(), ("t", "u"))
    assert (r.member_epoch, r.assignment) == (1, frozenset({t0, u0}))
    r = beat(0.1, "c0", 0, frozenset(), ("u",))
    assert (r.member_epoch, r.assignment) == (2, frozenset())
    r = beat(0.2, "c2", 1, frozenset({t0, u0}))  # told to give up u-0
    assert (r.member_epoch, r.assignment) == (1, frozenset({t0}))
    assert g.members["c2"].state == MemberState.UNREVOKED_PARTITIONS
    beat(0.3, "c0", -1)
    r = beat(0.4, "c2", 1, frozenset({t0}), ("t", "u"))  # full request: revoked
    assert (r.member_epoch, r.assignment) == (3, frozenset({t0}))
    assert (
        g.members["c2"].state == MemberState.UNRELEASED_PARTITIONS
        and g.members["c2"].previous_epoch == 1
    )
    r = beat(0.5, "c2", 3, frozenset({t0}))  # u-0 is free now
    assert (r.member_epoch, r.assignment) == (3, frozenset({t0, u0}))
    assert g.members["c2"].state == MemberState.STABLE and g.members["c2"].previous_epoch == 3
    r = beat(0.6, "c2", 1, frozenset({t0}))  # the 0.4 s request, retried
    assert r.error == m.FENCED_MEMBER_EPOCH
    assert g.members["c2"].epoch == 3  # the member stays; its session runs on from 0.5 s


def test_previous_epoch_moves_on_a_transition_that_keeps_the_epoch():
    """ConsumerGroupMember.Builder.updateMemberEpoch: UNRELEASED_PARTITIONS -> UNRELEASED_PARTITIONS
    with nothing new keeps epoch 2 and makes 2 the previous epoch, so the join (epoch 0) retried
    after that is fenced; before the transition it was still the previous epoch."""
    g = coordinator()
    join(g, 0.0, "a")
    b = join(g, 1.0, "b")
    mb = g.members[b.member_id]
    assert (mb.state, mb.epoch, mb.previous_epoch) == (MemberState.UNRELEASED_PARTITIONS, 2, 0)
    (r,) = responses(hb(g, 1.5, "b", b.member_id, 0), "b")
    assert r.error == m.NONE and r.member_epoch == 2
    hb(g, 2.0, "b", b.member_id, 2)  # a still holds b's partitions
    assert (mb.state, mb.epoch, mb.previous_epoch) == (MemberState.UNRELEASED_PARTITIONS, 2, 2)
    (r,) = responses(hb(g, 2.5, "b", b.member_id, 0), "b")
    assert r.error == m.FENCED_MEMBER_EPOCH


def test_a_heartbeat_that_changes_nothing_keeps_the_previous_epoch():
    """A member reconciled to the target epoch is handed back as it is (maybeReconcile)."""
    g = coordinator()
    a = join(g, 0.0, "a")
    ma = g.members[a.member_id]
    assert (ma.state, ma.epoch, ma.previous_epoch) == (MemberState.STABLE, 1, 0)
    hb(g, 1.0, "a", a.member_id, 1)
    assert (ma.state, ma.epoch, ma.previous_epoch) == (MemberState.STABLE, 1, 0)


def test_issue_36_a_client_generated_member_id_joins_under_that_id():
    """Issue 36, item 4 (KIP-1082): epoch 0 with a member id the group does not know creates the
    member under that id (GroupMetadataManager.consumerGroupHeartbeat makes an id only for an
    empty one); epoch 0 with an id the group knows goes through the epoch check."""
    g = coordinator()
    (r,) = responses(hb(g, 0.0, "a", "Zk3xQ1", 0), "a")
    assert (r.error, r.member_id, r.member_epoch, r.assignment) == (
        m.NONE,
        "Zk3xQ1",
        1,
        tps(0, 1, 2, 3),
    )
    assert list(g.members) == ["Zk3xQ1"]
    # the same join again (its response lost): the member's previous epoch is 0, so accepted
    (r,) = responses(hb(g, 0.1, "a", "Zk3xQ1", 0), "a")
    assert (r.error, r.member_epoch, r.assignment) == (
        m.NONE,
        1,
        tps(0, 1, 2, 3),
    ) and g.group_epoch == 1
    (rb,) = responses(hb(g, 1.0, "b", "b-own", 0), "b")
    assert (rb.error, rb.member_id, rb.member_epoch) == (m.NONE, "b-own", 2)
    hb(g, 2.0, "a", "Zk3xQ1", 1, owned=tps(0, 1, 2, 3))
    hb(g, 3.0, "a", "Zk3xQ1", 1, owned=g.members["Zk3xQ1"].assigned)
    assert (g.members["Zk3xQ1"].epoch, g.members["Zk3xQ1"].previous_epoch) == (2, 1)
    # a fenced client rejoins under its id while the group still has it: fenced again (epoch 0
    # is neither its epoch nor its previous one) until its session ends
    (r,) = responses(hb(g, 4.0, "a", "Zk3xQ1", 0), "a")
    assert r.error == m.FENCED_MEMBER_EPOCH
    at = g.timers[("session", "Zk3xQ1")]
    g.on_timer(at, ("session", "Zk3xQ1"), at)
    assert "Zk3xQ1" not in g.members
    (r,) = responses(hb(g, at + 1.0, "a", "Zk3xQ1", 0), "a")
    assert (r.error, r.member_id) == (m.NONE, "Zk3xQ1") and r.member_epoch == g.group_epoch


def test_an_empty_member_id_at_epoch_zero_gets_one_from_the_coordinator():
    g = coordinator()
    r = join(g, 0.0, "a")
    assert r.member_id and r.member_id in g.members


def test_unknown_member_id():
    g = coordinator()
    (r,) = responses(hb(g, 0.0, "a", "nobody", 3), "a")
    assert r.error == m.UNKNOWN_MEMBER_ID


def test_session_timeout_fences_and_frees_partitions():
    """No heartbeat for group.consumer.session.timeout.ms: removed, epoch bumped, and the other
    member takes the partitions at its next heartbeat."""
    g = coordinator()
    a = join(g, 0.0, "a")
    b = join(g, 1.0, "b")
    ra = responses(hb(g, 2.0, "a", a.member_id, 1), "a")[0]
    hb(g, 3.0, "a", a.member_id, 1, owned=ra.assignment)
    epoch = g.group_epoch
    at = g.timers[("session", b.member_id)]
    assert at == 1.0 + 45.0
    out = g.on_timer(at, ("session", b.member_id), at)
    assert any(
        e[0] == "event" and e[1] == "member_removed" and "session_expired" in e[4] for e in out
    )
    assert (
        b.member_id not in g.members
        and g.group_epoch == epoch + 1
        and g.state == ConsumerGroupState.ASSIGNING
    )
    (r,) = responses(hb(g, 46.5, "a", a.member_id, 2), "a")
    assert r.assignment == tps(0, 1, 2, 3) and r.member_epoch == epoch + 1


def test_rebalance_timeout_fences_a_member_that_does_not_revoke():
    """A member in UNREVOKED_PARTITIONS past its rebalance timeout is fenced."""
    g = coordinator()
    a = join(g, 0.0, "a")
    join(g, 1.0, "b")
    hb(g, 2.0, "a", a.member_id, 1, rebalance_timeout_s=30.0, subscribed_topics=("t",))
    key = ("rebalance", a.member_id, 1)
    assert g.timers[key] == 32.0
    out = g.on_timer(32.0, key, 32.0)
    assert a.member_id not in g.members
    assert any(e[0] == "event" and "rebalance_timeout" in e[4] for e in out)


def test_rebalance_timeout_is_cancelled_by_the_acknowledgement():
    g = coordinator()
    a = join(g, 0.0, "a")
    join(g, 1.0, "b")
    ra = responses(hb(g, 2.0, "a", a.member_id, 1), "a")[0]
    hb(g, 3.0, "a", a.member_id, 1, owned=ra.assignment)
    assert ("rebalance", a.member_id, 1) not in g.timers


def test_dynamic_leave_removes_and_bumps():
    g = coordinator()
    a = join(g, 0.0, "a")
    (r,) = responses(hb(g, 1.0, "a", a.member_id, -1), "a")
    assert (
        r.member_epoch == -1
        and not g.members
        and g.group_epoch == 2
        and g.state == ConsumerGroupState.EMPTY
    )


def test_static_member_temporary_leave_and_rejoin_keeps_its_partitions():
    """Epoch -2 keeps the static member (and its partitions) without a new group epoch; a new
    process with the same instance id takes over under a new member id, with no rebalance."""
    g = coordinator()
    a = join(g, 0.0, "a", instance="i-a")
    b = join(g, 0.0, "b", instance="i-b")
    ra = responses(hb(g, 1.0, "a", a.member_id, 1, instance="i-a"), "a")[0]
    hb(g, 1.5, "a", a.member_id, 1, owned=ra.assignment, instance="i-a")
    rb = responses(hb(g, 2.0, "b", b.member_id, 2, instance="i-b"), "b")[0]
    epoch = g.group_epoch
    held = g.members[a.member_id].assigned
    (r,) = responses(hb(g, 3.0, "a", a.member_id, -2, instance="i-a"), "a")
    assert (
        r.member_epoch == -2 and g.group_epoch == epoch and g.members[a.member_id].assigned == held
    )
    r2 = join(g, 10.0, "a", instance="i-a")
    assert r2.member_id != a.member_id and r2.assignment == held and g.group_epoch == epoch
    assert a.member_id not in g.members and g.static_members["i-a"] == r2.member_id
    assert rb.error == m.NONE


def test_static_join_while_the_instance_is_active_is_rejected():
    g = coordinator()
    join(g, 0.0, "a", instance="i-a")
    (r,) = responses(hb(g, 1.0, "a2", instance="i-a"), "a2")
    assert r.error == m.UNRELEASED_INSTANCE_ID


def test_static_member_that_does_not_come_back_expires():
    g = coordinator()
    a = join(g, 0.0, "a", instance="i-a")
    hb(g, 3.0, "a", a.member_id, -2, instance="i-a")
    at = g.timers[("session", a.member_id)]
    assert at == 45.0  # the leave does not restart the session: it runs from the last heartbeat
    g.on_timer(at, ("session", a.member_id), at)
    assert not g.members and "i-a" not in g.static_members


def test_fenced_instance_id():
    g = coordinator()
    a = join(g, 0.0, "a", instance="i-a")
    hb(g, 1.0, "a", a.member_id, -2, instance="i-a")
    join(g, 2.0, "a2", instance="i-a")
    (r,) = responses(hb(g, 3.0, "a", a.member_id, 1, instance="i-a"), "a")
    assert r.error == m.FENCED_INSTANCE_ID


def test_metadata_change_bumps_the_group_epoch():
    meta = [(0, {"t": 4})]
    g = ConsumerGroup(GroupConfig(), lambda: meta[0])
    a = join(g, 0.0, "a")
    meta[0] = (1, {"t": 6})
    (r,) = responses(hb(g, 5.0, "a", a.member_id, 1), "a")
    assert g.group_epoch == 2 and r.assignment == tps(0, 1, 2, 3, 4, 5)


def test_offset_commit_needs_the_current_member_epoch():
    g = coordinator()
    a = join(g, 0.0, "a")
    ok = g.handle(1.0, "a", m.OffsetCommitRequest(a.member_id, 1, None, 4, 7))
    stale = g.handle(1.0, "a", m.OffsetCommitRequest(a.member_id, 0, None, 4, 8))
    assert [e[2].error for e in ok + stale] == [m.NONE, m.STALE_MEMBER_EPOCH]
