"""The consumer group protocol's coordinator (KIP-848), driven directly (no trio, no network).

The reconciliation cases follow the behaviour Kafka's CurrentAssignmentBuilderTest describes; the
group cases follow GroupMetadataManagerTest's consumer-group heartbeat scenarios."""

from __future__ import annotations

import pytest

from assignors import TopicPartition
from sim import messages as m
from sim.config import AssignorCost, GroupConfig
from sim.consumer_group import (
    ASSIGNING,
    EMPTY,
    GROUP_STABLE,
    RECONCILING,
    STABLE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    ConsumerGroupCoordinator,
    next_member_assignment,
)


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
    assert next_member_assignment(STABLE, 10, tps(1, 2), frozenset(), 11, tps(1, 2), free, tps(1, 2)) == \
        (STABLE, 11, tps(1, 2), frozenset())


def test_stable_to_stable_with_new_free_partitions():
    """Free partitions in the target are assigned at once, in the target epoch."""
    assert next_member_assignment(STABLE, 10, tps(1, 2), frozenset(), 11, tps(1, 2, 3), free, tps(1, 2)) == \
        (STABLE, 11, tps(1, 2, 3), frozenset())


def test_stable_to_unrevoked_keeps_epoch_and_revokes_first():
    """Partitions leaving the member must be revoked first: same epoch, assigned = kept, and
    nothing new is handed out meanwhile (even free partitions)."""
    assert next_member_assignment(STABLE, 10, tps(1, 2, 3), frozenset(), 11, tps(2, 3, 4), free, tps(1, 2, 3)) == \
        (UNREVOKED_PARTITIONS, 10, tps(2, 3), tps(1))


def test_stable_to_unreleased_when_new_partitions_are_still_held():
    """A partition still held by another member is not given: UNRELEASED in the target epoch."""
    assert next_member_assignment(STABLE, 10, tps(1, 2), frozenset(), 11, tps(1, 2, 3, 4), held_by(10, 4),
                                  tps(1, 2)) == (UNRELEASED_PARTITIONS, 11, tps(1, 2, 3), frozenset())
    assert next_member_assignment(STABLE, 10, tps(1, 2), frozenset(), 11, tps(1, 2, 4), held_by(10, 4),
                                  tps(1, 2)) == (UNRELEASED_PARTITIONS, 11, tps(1, 2), frozenset())


def test_revocation_already_done_by_the_client_skips_unrevoked():
    """If the member no longer reports the partitions to revoke, it goes straight to the target."""
    assert next_member_assignment(STABLE, 10, tps(1, 2), frozenset(), 11, tps(2), free, tps(2)) == \
        (STABLE, 11, tps(2), frozenset())


@pytest.mark.parametrize("owned", [tps(1, 2), None])
def test_remains_unrevoked_while_it_still_owns_them(owned):
    """Still reporting a partition to revoke (or not reporting at all): no progress."""
    assert next_member_assignment(UNREVOKED_PARTITIONS, 10, tps(2), tps(1), 11, tps(2, 3), free, owned) == \
        (UNREVOKED_PARTITIONS, 10, tps(2), tps(1))


def test_unrevoked_to_stable_once_acknowledged():
    """Revocation acknowledged: the member moves on and takes the free partitions."""
    assert next_member_assignment(UNREVOKED_PARTITIONS, 10, tps(2), tps(1), 11, tps(2, 3), free, tps(2)) == \
        (STABLE, 11, tps(2, 3), frozenset())


def test_unrevoked_to_unrevoked_with_a_newer_target():
    """After acknowledging, a newer target that takes more away: revoke again, at epoch + 1."""
    assert next_member_assignment(UNREVOKED_PARTITIONS, 10, tps(2, 3), tps(1), 12, tps(3), free, tps(2, 3)) == \
        (UNREVOKED_PARTITIONS, 11, tps(3), tps(2))


def test_unrevoked_to_unreleased():
    assert next_member_assignment(UNREVOKED_PARTITIONS, 10, tps(2), tps(1), 11, tps(2, 3), held_by(10, 3),
                                  tps(2)) == (UNRELEASED_PARTITIONS, 11, tps(2), frozenset())


def test_unreleased_to_stable_when_released():
    assert next_member_assignment(UNRELEASED_PARTITIONS, 11, tps(2), frozenset(), 11, tps(2, 3), free, tps(2)) == \
        (STABLE, 11, tps(2, 3), frozenset())


def test_unreleased_stays_while_held():
    assert next_member_assignment(UNRELEASED_PARTITIONS, 11, tps(2), frozenset(), 11, tps(2, 3), held_by(11, 3),
                                  tps(2)) == (UNRELEASED_PARTITIONS, 11, tps(2), frozenset())


def test_unreleased_to_unrevoked_with_a_newer_target():
    assert next_member_assignment(UNRELEASED_PARTITIONS, 11, tps(2, 4), frozenset(), 12, tps(4, 5), held_by(11, 5),
                                  tps(2, 4)) == (UNREVOKED_PARTITIONS, 11, tps(4), tps(2))


# ---------------------------------------------------------------- the group

META = (0, {"t": 4})


def coordinator(cost="zero", **group):
    return ConsumerGroupCoordinator(GroupConfig(**group), lambda: META, AssignorCost(mode=cost))


def drive(g, now, effects):
    """Fire the coordinator's zero-delay timers (the shared assignor run) due by ``now``."""
    out = list(effects)
    while True:
        due = [k for k, at in g.timers.items() if k[0] in ("assign", "unblock") and at <= now]
        if not due:
            return out
        out += g.on_timer(now, due[0], g.timers[due[0]])


def responses(effects, to=None):
    return [e[2] for e in effects if e[0] == "send" and (to is None or e[1] == to)
            and isinstance(e[2], m.ConsumerGroupHeartbeatResponse)]


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
    assert g.group_epoch == g.target_epoch == 1 and g.state == GROUP_STABLE
    assert r.heartbeat_interval_s == 5.0


def test_second_member_waits_for_revocation_then_gets_the_partitions():
    """The KIP-848 hand-over: a partition reaches its new owner only after the old owner has
    acknowledged the revocation; members move epochs independently."""
    g = coordinator()
    a = join(g, 0.0, "a")
    b = join(g, 1.0, "b")
    assert g.group_epoch == 2
    assert b.member_epoch == 2 and b.assignment == frozenset()          # its partitions are still a's
    assert g.members[b.member_id].state == UNRELEASED_PARTITIONS
    assert g.state == RECONCILING
    (ra,) = responses(hb(g, 2.0, "a", a.member_id, 1), "a")
    assert ra.member_epoch == 1 and len(ra.assignment) == 2             # revoke first, same epoch
    mine = ra.assignment
    assert g.members[a.member_id].state == UNREVOKED_PARTITIONS
    (rb,) = responses(hb(g, 2.5, "b", b.member_id, 2), "b")
    assert rb.assignment is None                                        # nothing changed for b yet
    (ra2,) = responses(hb(g, 3.0, "a", a.member_id, 1, owned=mine), "a")  # the acknowledgement
    assert ra2.member_epoch == 2 and g.members[a.member_id].state == STABLE
    (rb2,) = responses(hb(g, 3.5, "b", b.member_id, 2), "b")
    assert rb2.assignment == tps(0, 1, 2, 3) - mine
    assert g.state == GROUP_STABLE


def test_joins_at_one_instant_share_one_assignment():
    """Heartbeats that need a new target at the same instant wait for one assignor run."""
    g = coordinator()
    effects = []
    for c in "abc":
        effects += g.handle(0.0, c, m.ConsumerGroupHeartbeatRequest("", 0, subscribed_topics=("t",),
                                                                    rebalance_timeout_s=300.0,
                                                                    owned_partitions=frozenset()))
    assert responses(effects) == [] and g.state == ASSIGNING
    out = drive(g, 0.0, effects)
    rs = responses(out)
    assert len(rs) == 3 and g.assignments_computed == 1 and g.group_epoch == 3
    assert sorted(len(r.assignment) for r in rs) == [1, 1, 2]


def test_assignor_cost_delays_the_responses_and_blocks_the_coordinator():
    """A fixed assignor cost: the answers leave when the computation ends; requests that come
    meanwhile wait."""
    g = coordinator(cost="fixed:2")
    effects = drive(g, 0.0, g.handle(0.0, "a", m.ConsumerGroupHeartbeatRequest(
        "", 0, subscribed_topics=("t",), rebalance_timeout_s=300.0, owned_partitions=frozenset())))
    assert responses(effects) == [] and g.timers[("unblock",)] == 2.0
    assert g.handle(1.0, "b", m.ConsumerGroupHeartbeatRequest("x", 1)) == [] and g.parked
    out = g.on_timer(2.0, ("unblock",), 2.0)
    assert [r.error for r in responses(out, "a")] == [m.NONE]
    assert [r.error for r in responses(out, "b")] == [m.UNKNOWN_MEMBER_ID]


@pytest.mark.parametrize("sent,owned,error", [
    (3, tps(0, 1, 2, 3), m.FENCED_MEMBER_EPOCH),   # an epoch the coordinator never gave
    (0, tps(0), m.NONE),                           # the previous epoch with a subset: response lost
    (0, tps(0), m.NONE),
])
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
    assert any(e[0] == "event" and e[1] == "member_removed" and "session_expired" in e[4] for e in out)
    assert b.member_id not in g.members and g.group_epoch == epoch + 1 and g.state == ASSIGNING
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
    assert r.member_epoch == -1 and not g.members and g.group_epoch == 2 and g.state == EMPTY


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
    assert r.member_epoch == -2 and g.group_epoch == epoch and g.members[a.member_id].assigned == held
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
    g = ConsumerGroupCoordinator(GroupConfig(), lambda: meta[0])
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
