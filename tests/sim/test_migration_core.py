"""Online migration between the classic and the consumer group protocol, driven directly (no trio,
no network): ``sim.coordinator.migration.MigratingCoordinator`` holding the group as either type,
the conversions (constructors of the target type), and the classic members a consumer group
serves (``sim.coordinator.consumer.classic_members``). The cases follow GroupMetadataManagerTest's
online upgrade/downgrade and classic-member scenarios."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from assignors import Assignment, Subscription, TopicPartition
from sim.config import AssignorCost, ConfigError, GroupConfig
from sim.coordinator.classic.group import ClassicGroup
from sim.coordinator.classic.states import ClassicGroupState
from sim.coordinator.consumer.classic_members import ConsumerGroupWithClassicMembers
from sim.coordinator.consumer.states import MemberState
from sim.coordinator.migration import CLASSIC, CONSUMER, GroupCore, MigratingCoordinator
from sim.wire import messages as m

PARTITIONS = 6


def tp(p):
    return TopicPartition("t", p)


def tps(*ps):
    return frozenset(tp(p) for p in ps)


def sub(owned=()):
    return Subscription(("t",), owned_partitions=tuple(owned))


def protocols(owned=(), names=("cooperative-sticky",)):
    return tuple((n, sub(owned)) for n in names)


def join(
    member_id="",
    owned=(),
    names=("cooperative-sticky",),
    session=10.0,
    rebalance=30.0,
    instance=None,
):
    return m.JoinGroupRequest(member_id, instance, protocols(owned, names), session, rebalance)


def sends(effects, to=None):
    return [e[2] for e in effects if e[0] == "send" and (to is None or e[1] == to)]


def events(effects, kind):
    return [e for e in effects if e[0] == "event" and e[1] == kind]


def host(**cfg) -> MigratingCoordinator:
    return MigratingCoordinator(
        GroupConfig(**cfg), lambda: (0, {"t": PARTITIONS}), group_type=CLASSIC
    )


def classic_group(h: MigratingCoordinator, clients=("a", "b", "c"), names=("cooperative-sticky",)):
    """A Stable classic group: each client joins (KIP-394's two rounds), the barrier completes,
    the leader hands out the partitions round robin. Returns {client: member id}."""
    ids = {}
    for c in clients:
        (r,) = sends(h.handle(0.0, c, join(names=names)), c)
        assert r.error == m.MEMBER_ID_REQUIRED
        h.handle(0.0, c, join(r.member_id, names=names))
        ids[c] = r.member_id
    while h.state == ClassicGroupState.PREPARING_REBALANCE:
        h.on_timer(h.group.timers[("join",)], ("join",), h.group.timers[("join",)])
    order = list(ids.values())
    assignments = tuple(
        (mid, Assignment([tp(p) for p in range(PARTITIONS) if p % len(order) == i]))
        for i, mid in enumerate(order)
    )
    for c, mid in ids.items():
        a = assignments if mid == h.leader else ()
        h.handle(5.0, c, m.SyncGroupRequest(mid, h.generation, None, a))
    assert h.state == ClassicGroupState.STABLE and h.group_type == CLASSIC
    return ids


def consumer_join(h, now, client, member_id):
    return h.handle(
        now,
        client,
        m.ConsumerGroupHeartbeatRequest(
            member_id,
            0,
            subscribed_topics=("t",),
            rebalance_timeout_s=30.0,
            owned_partitions=frozenset(),
        ),
    )


def assert_disjoint(g: ConsumerGroupWithClassicMembers):
    """No partition is assigned or pending revocation at two members, and the partition-owner
    map says the same as the members."""
    seen = {}
    for mid, mm in g.members.items():
        for p in mm.assigned | mm.pending_revocation:
            assert p not in seen, f"{p} held by {seen[p]} and {mid}"
            seen[p] = mid
    assert seen == g.partition_owner


def test_policy_default_and_validation():
    """group.consumer.migration.policy: Kafka's default (bidirectional), case-insensitive, and a
    wrong value is refused naming the field."""
    assert GroupConfig().consumer_migration_policy == "bidirectional"
    assert GroupConfig(consumer_migration_policy="Upgrade").upgrade_enabled
    assert not GroupConfig(consumer_migration_policy="upgrade").downgrade_enabled
    with pytest.raises(ConfigError, match="consumer_migration_policy"):
        GroupConfig(consumer_migration_policy="sideways")


def test_upgrade_when_the_first_consumer_member_joins():
    """convertToConsumerGroup: the group becomes a consumer group at epoch = the classic
    generation with every classic member Stable on its last assignment; the joiner bumps the
    epoch; offsets committed in the classic group are still there."""
    h = host()
    ids = classic_group(h)
    gen = h.generation
    a = ids["a"]
    h.handle(
        6.0, "a", m.OffsetCommitRequest(a, gen, None, 2, offsets=(tp(0), tp(3)), position_s=4.5)
    )
    out = consumer_join(h, 7.0, "d", "D")
    assert h.group_type == CONSUMER
    (conv,) = events(out, "group_converted")
    assert "classic->consumer" in conv[4]
    g = h.group
    assert g.group_epoch == gen + 1 and g.members["D"].classic is None
    assert all(g.members[mid].classic is not None for mid in ids.values())
    assert g.members[a].assigned == tps(0, 3) and g.members[a].epoch == gen
    assert_disjoint(g)
    (resp,) = sends(out, "d")
    assert resp.error == m.NONE and resp.member_epoch == gen + 1
    # the first member of the new epoch gets nothing held by the classic members yet
    assert not resp.assignment
    (f,) = sends(h.handle(8.0, "x", m.OffsetFetchRequest("x", (tp(0), tp(1)))))
    assert f.committed == (4.5, None)
    # a classic member learns of the rebalance on its heartbeat
    (hb,) = sends(h.handle(8.0, "a", m.HeartbeatRequest(a, gen, None)))
    assert hb.error == m.REBALANCE_IN_PROGRESS


def test_upgrade_by_a_static_replacement_still_bumps_the_epoch():
    """A static classic member restarting with the consumer protocol converts the group and takes
    its own place (replaceMember keeps the epoch), yet the epoch is bumped: the converted group
    has no subscription metadata, so the heartbeat finds it changed and the assignor runs (here
    giving out the partitions of a member the classic group had removed)."""
    h = host()
    for c in ("a", "b", "c"):
        h.handle(0.0, c, join(instance=c))
    while h.state == ClassicGroupState.PREPARING_REBALANCE:
        h.on_timer(h.group.timers[("join",)], ("join",), h.group.timers[("join",)])
    ids = {c: h.group.static_members[c] for c in "abc"}
    assignments = tuple(
        (ids[c], Assignment([tp(p) for p in range(PARTITIONS) if p % 3 == i]))
        for i, c in enumerate("abc")
    )
    for c in "abc":
        h.handle(
            5.0,
            c,
            m.SyncGroupRequest(ids[c], h.generation, c, assignments if ids[c] == h.leader else ()),
        )
    gen = h.generation
    h.on_timer(
        h.group.timers[("expire", ids["c"])],
        ("expire", ids["c"]),
        h.group.timers[("expire", ids["c"])],
    )
    assert ids["c"] not in h.members and h.state == ClassicGroupState.PREPARING_REBALANCE
    out = h.handle(
        60.0,
        "a",
        m.ConsumerGroupHeartbeatRequest(
            "A",
            0,
            "a",
            subscribed_topics=("t",),
            rebalance_timeout_s=30.0,
            owned_partitions=frozenset(),
        ),
    )
    assert h.group_type == CONSUMER and "A" in h.members and ids["a"] not in h.members
    assert h.group.group_epoch == gen + 1 == h.group.target_epoch
    assert set().union(*h.group.target.values()) == tps(*range(PARTITIONS))
    assert [r.error for r in sends(out, "a")] == [m.NONE]


def test_members_waiting_in_join_or_sync_are_told_to_rejoin():
    """convertToConsumerGroup completes pending JoinGroup and SyncGroup with REBALANCE_IN_PROGRESS."""
    h = host()
    ids = classic_group(h)
    h.handle(6.0, "a", join(ids["a"]))  # a rebalance starts: "a" waits in the barrier
    assert h.state == ClassicGroupState.PREPARING_REBALANCE
    out = consumer_join(h, 7.0, "d", "D")
    assert [r.error for r in sends(out, "a")] == [m.REBALANCE_IN_PROGRESS]
    assert h.group_type == CONSUMER


def test_cooperative_classic_member_revokes_then_gets_its_target():
    """A classic member in a consumer group reconciles through JoinGroup/SyncGroup: it first
    gives up what its target lost (UNREVOKED_PARTITIONS, epoch unchanged, SyncGroup answers the
    kept partitions), then rejoins and moves to the target epoch."""
    h = host()
    ids = classic_group(h)
    consumer_join(h, 7.0, "d", "D")
    g = h.group
    a = ids["a"]
    owned = sorted(g.members[a].assigned)
    target = g.target[a]
    (r,) = sends(h.handle(8.0, "a", join(a, owned)), "a")
    mm = g.members[a]
    assert r.error == m.NONE and r.leader == "" and r.member_id == a
    if target < frozenset(owned):
        assert (
            mm.state == MemberState.UNREVOKED_PARTITIONS
            and r.generation == mm.epoch < g.group_epoch
        )
        (s,) = sends(h.handle(8.1, "a", m.SyncGroupRequest(a, r.generation, None)), "a")
        assert s.error == m.NONE and set(
            s.assignment.partitions
        ) == mm.assigned == target & frozenset(owned)
        (r,) = sends(h.handle(8.2, "a", join(a, s.assignment.partitions)), "a")
    assert r.generation == g.group_epoch and g.members[a].state in (
        "STABLE",
        "UNRELEASED_PARTITIONS",
    )
    (s,) = sends(h.handle(8.3, "a", m.SyncGroupRequest(a, r.generation, None)), "a")
    assert s.error == m.NONE and set(s.assignment.partitions) <= target
    assert_disjoint(g)


def test_eager_classic_member_is_never_held_revoking():
    """An eager member revoked everything before it rejoined: it reports no owned partitions, so
    it goes straight to its target epoch (CurrentAssignmentBuilder sees nothing to revoke)."""
    h = host()
    ids = classic_group(h, names=("range",))
    consumer_join(h, 7.0, "d", "D")
    g = h.group
    for c, mid in ids.items():
        (r,) = sends(h.handle(8.0, c, join(mid, (), names=("range",))), c)
        assert r.error == m.NONE and r.generation == g.group_epoch and r.protocol == "range"
        assert g.members[mid].state != MemberState.UNREVOKED_PARTITIONS
    assert_disjoint(g)


def test_whole_migration_up_then_down_settles_with_every_partition_once():
    """Up: every classic member rejoins until the group is Stable, all partitions assigned once.
    Down: the consumer member leaves; the group is classic again, preparing a rebalance that every
    member joins, at a generation above every epoch the group had."""
    h = host()
    ids = classic_group(h)
    consumer_join(h, 7.0, "d", "D")
    g = h.group
    now = 8.0
    owned = {c: sorted(g.members[mid].assigned) for c, mid in ids.items()}
    for _ in range(6):
        now += 1.0
        for c, mid in ids.items():
            (r,) = sends(h.handle(now, c, join(mid, owned[c])), c)
            (s,) = sends(h.handle(now, c, m.SyncGroupRequest(mid, r.generation, None)), c)
            if s.error == m.NONE:
                owned[c] = sorted(s.assignment.partitions)
        d = g.members["D"]
        sends(
            h.handle(
                now, "d", m.ConsumerGroupHeartbeatRequest("D", d.epoch, owned_partitions=d.assigned)
            )
        )
    assert g.state == "Stable"
    assert_disjoint(g)
    assert len(g.partition_owner) == PARTITIONS
    epoch = g.group_epoch
    targets = {mid: g.target[mid] for mid in ids.values()}
    out = h.handle(now + 1, "d", m.ConsumerGroupHeartbeatRequest("D", m.LEAVE_GROUP_MEMBER_EPOCH))
    assert [r.error for r in sends(out, "d")] == [m.NONE]
    (conv,) = events(out, "group_converted")
    assert "consumer->classic" in conv[4]
    assert h.group_type == CLASSIC and h.state == ClassicGroupState.PREPARING_REBALANCE
    assert set(h.members) == set(ids.values()) and h.generation == epoch
    c = h.group
    # each member's assignment is its target in the consumer group (the leaver's partitions wait
    # for the classic rebalance)
    assert {mid: frozenset(mm.assignment.partitions) for mid, mm in c.members.items()} == targets
    (hb,) = sends(h.handle(now + 2, "a", m.HeartbeatRequest(ids["a"], epoch, None)))
    assert hb.error == m.REBALANCE_IN_PROGRESS
    for cl, mid in ids.items():
        h.handle(now + 3, cl, join(mid, owned[cl]))
    assert h.state == "CompletingRebalance" and h.generation == epoch + 1


def test_requests_waiting_for_the_assignor_go_to_the_classic_group_after_a_downgrade():
    """While the consumer group's assignor runs, requests wait; when one of them (the last
    consumer member's leave) converts the group, the rest are the classic group's."""
    h = MigratingCoordinator(
        GroupConfig(),
        lambda: (0, {"t": PARTITIONS}),
        group_type=CLASSIC,
        assignor_cost=AssignorCost("fixed:1"),
    )
    ids = classic_group(h)
    consumer_join(h, 7.0, "d", "D")  # the assignor runs until 8.0
    assert h.group.busy_until == 8.0
    h.handle(7.5, "d", m.ConsumerGroupHeartbeatRequest("D", m.LEAVE_GROUP_MEMBER_EPOCH))
    a = ids["a"]
    h.handle(7.6, "a", m.HeartbeatRequest(a, h.members[a].epoch, None))
    assert len(h.group.parked) == 2 and h.group_type == CONSUMER
    out = h.on_timer(8.0, ("unblock",), 8.0)
    assert h.group_type == CLASSIC and h.state == ClassicGroupState.PREPARING_REBALANCE
    # the classic group answers: "a" never rejoined after "D" joined, so its generation is behind
    # the classic group's (the consumer group would have said REBALANCE_IN_PROGRESS)
    (hb,) = sends(out, "a")
    assert isinstance(hb, m.HeartbeatResponse) and hb.error == m.ILLEGAL_GENERATION
    assert h.generation == 2


def test_refused_upgrade_answers_group_id_not_found():
    """validateOnlineUpgrade: with upgrades disabled, or a classic group larger than
    group.consumer.max.size, the joining consumer member gets GROUP_ID_NOT_FOUND."""
    for cfg in (
        {"consumer_migration_policy": "downgrade"},
        {"consumer_migration_policy": "disabled"},
        {"consumer_max_size": 2},
    ):
        h = host(**cfg)
        classic_group(h)
        out = consumer_join(h, 7.0, "d", "D")
        assert [r.error for r in sends(out, "d")] == [m.GROUP_ID_NOT_FOUND]
        assert h.group_type == CLASSIC and len(events(out, "conversion_refused")) == 1


def test_empty_groups_change_type_whatever_the_policy():
    """An empty classic group is replaced by a consumer group (and back) even when the policy
    allows no online conversion: offsets stay."""
    h = host(consumer_migration_policy="disabled")
    ids = classic_group(h, ("a",))
    h.handle(
        6.0,
        "a",
        m.OffsetCommitRequest(ids["a"], h.generation, None, 1, offsets=(tp(2),), position_s=3.0),
    )
    h.handle(6.0, "a", m.LeaveGroupRequest(ids["a"], None))
    assert h.state == "Empty"
    out = consumer_join(h, 1.0, "d", "D")
    assert h.group_type == CONSUMER and sends(out, "d")[0].error == m.NONE
    h.handle(2.0, "d", m.ConsumerGroupHeartbeatRequest("D", m.LEAVE_GROUP_MEMBER_EPOCH))
    assert h.group_type == CONSUMER and not h.members
    (r,) = sends(h.handle(3.0, "a", join()), "a")
    assert h.group_type == CLASSIC and r.error == m.MEMBER_ID_REQUIRED
    (f,) = sends(h.handle(4.0, "x", m.OffsetFetchRequest("x", (tp(2),))))
    assert f.committed == (3.0,)


def test_refusals_inside_a_consumer_group():
    """Kafka's errors for classic requests a consumer group refuses: a full group
    (GROUP_MAX_SIZE_REACHED), protocols the classic members do not share
    (INCONSISTENT_GROUP_PROTOCOL), a consumer-protocol member speaking classic (UNKNOWN_MEMBER_ID),
    a wrong generation (ILLEGAL_GENERATION)."""
    h = host(consumer_max_size=4)
    ids = classic_group(h)
    consumer_join(h, 7.0, "d", "D")
    (r,) = sends(h.handle(8.0, "e", join(instance="e")), "e")
    assert r.error == m.GROUP_MAX_SIZE_REACHED
    out = h.handle(
        8.0,
        "f",
        m.ConsumerGroupHeartbeatRequest("F", 0, subscribed_topics=("t",), rebalance_timeout_s=30.0),
    )
    assert [x.error for x in sends(out, "f")] == [m.GROUP_MAX_SIZE_REACHED]
    h2 = host()
    ids = classic_group(h2)
    consumer_join(h2, 7.0, "d", "D")
    (r,) = sends(h2.handle(8.0, "e", join(instance="e", names=("range",))), "e")
    assert r.error == m.INCONSISTENT_GROUP_PROTOCOL
    (r,) = sends(h2.handle(8.0, "d", m.HeartbeatRequest("D", h2.group.group_epoch, None)), "d")
    assert r.error == m.UNKNOWN_MEMBER_ID
    (r,) = sends(h2.handle(8.0, "d", m.LeaveGroupRequest("D", None)), "d")
    assert r.error == m.UNKNOWN_MEMBER_ID
    (r,) = sends(
        h2.handle(8.0, "a", m.HeartbeatRequest(ids["a"], h2.group.group_epoch + 5, None)), "a"
    )
    assert r.error == m.ILLEGAL_GENERATION
    (r,) = sends(h2.handle(8.0, "a", m.OffsetCommitRequest(ids["a"], 999, None, 1)), "a")
    assert r.error == m.ILLEGAL_GENERATION


def test_downgrade_refused_by_policy_keeps_a_consumer_group_of_classic_members():
    """validateOnlineDowngradeWithFencedMember: with downgrades disabled the last consumer member
    is simply removed and the group stays a consumer group."""
    h = host(consumer_migration_policy="upgrade")
    ids = classic_group(h)
    consumer_join(h, 7.0, "d", "D")
    epoch = h.group.group_epoch
    out = h.handle(8.0, "d", m.ConsumerGroupHeartbeatRequest("D", m.LEAVE_GROUP_MEMBER_EPOCH))
    assert h.group_type == CONSUMER and "D" not in h.members and h.group.group_epoch == epoch + 1
    assert len(events(out, "conversion_refused")) == 1
    assert h.group.num_classic == len(h.members) == len(ids)


def test_classic_member_session_and_join_timeouts():
    """A classic member's session is its own session.timeout.ms, not the group's consumer one; a
    member told to rejoin that never does is fenced after its rebalance timeout (join timer). A
    session expiry of the last consumer member downgrades the group."""
    h = host()
    ids = classic_group(h)
    consumer_join(h, 7.0, "d", "D")
    g = h.group
    a, b = ids["a"], ids["b"]
    assert g.timers[("session", a)] == 7.0 + 10.0  # its JoinGroup's 10 s, from the conversion
    (r,) = sends(h.handle(8.0, "b", m.HeartbeatRequest(b, g.members[b].epoch, None)), "b")
    assert r.error == m.REBALANCE_IN_PROGRESS and g.timers[("classic_join", b)] == 8.0 + 30.0
    # "b" keeps heartbeating but never rejoins: fenced at its rebalance timeout
    for t in range(9, 38, 3):
        for c in ("a", "c"):
            h.handle(float(t), c, m.HeartbeatRequest(ids[c], g.members[ids[c]].epoch, None))
        h.handle(float(t), "b", m.HeartbeatRequest(b, g.members[b].epoch, None))
    out = h.on_timer(38.0, ("classic_join", b), 38.0)
    assert b not in g.members and events(out, "member_removed")[0][4].endswith(
        "reason=join_timeout"
    )
    # the consumer member's session (45 s) ends; every other member is classic: downgrade
    at = g.timers[("session", "D")]
    for t in range(39, int(at), 3):
        for c in ("a", "c"):
            h.handle(float(t), c, m.HeartbeatRequest(ids[c], g.members[ids[c]].epoch, None))
    out = h.on_timer(at, ("session", "D"), at)
    assert h.group_type == CLASSIC and set(h.members) == {ids["a"], ids["c"]}
    assert "reason=session_expired" in events(out, "member_removed")[0][4]


def test_a_group_without_classic_members_never_converts():
    """A consumer group whose last member leaves stays a consumer group (nothing to downgrade)."""
    g = MigratingCoordinator(GroupConfig(), lambda: (0, {"t": PARTITIONS}), group_type=CONSUMER)
    consumer_join(g, 0.0, "d", "D")
    g.handle(1.0, "d", m.ConsumerGroupHeartbeatRequest("D", m.LEAVE_GROUP_MEMBER_EPOCH))
    assert g.group_type == CONSUMER and not g.members and g.group.downgrade_to is None
    assert isinstance(MigratingCoordinator(GroupConfig(), lambda: (0, {})).group, ClassicGroup)


def _source(path: str) -> str:
    """A module's source read from its file (a compiled module has no source to inspect)."""
    return (Path(__file__).resolve().parent.parent.parent / path).read_text()


def test_the_router_touches_no_core_from_inside():
    """``MigratingCoordinator`` routes and converts through the cores' public faces: no
    ``__getattr__`` forwarding, no private member of another object read or written, and nothing
    of a group set from outside but the input rank the actor hands it (``GroupCore``): its state
    least of all (a converted group is made in its state by its own constructor)."""
    tree = ast.parse(_source("sim/coordinator/migration.py"))
    wrong = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            wrong.append(f"line {node.lineno}: __getattr__")
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (isinstance(node.value, ast.Name) and node.value.id == "self")
        ):
            wrong.append(f"line {node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            wrong += [
                f"line {node.lineno}: {ast.unparse(t)} set"
                for t in targets
                if isinstance(t, ast.Attribute)
                and not (isinstance(t.value, ast.Name) and t.value.id == "self")
                and t.attr != "input_rank"  # GroupCore's one settable attribute (the actor's)
            ]
    assert not wrong, wrong


def test_a_classic_group_sets_its_state_only_through_the_checked_transition():
    """``ClassicGroup.state`` is set in ``__init__`` (the state a group is made in: Empty, or
    Stable for one converted from a consumer group) and in ``_transition`` only."""
    module = ast.parse(_source("sim/coordinator/classic/group.py"))
    (tree,) = [c for c in module.body if isinstance(c, ast.ClassDef) and c.name == "ClassicGroup"]
    setters = {
        fn.name
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef)
        for node in ast.walk(fn)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Attribute) and t.attr == "state"
    }
    assert setters == {"__init__", "_transition"}


def test_both_group_types_and_the_router_are_group_cores():
    """What the world reads of the group (members with their clients, leader, generation, state)
    is there on either type and on the router, which answers for the group it holds."""
    h = host()
    ids = classic_group(h)
    cores: list[GroupCore] = [h, h.group]
    for core in cores:
        assert core.state == "Stable" and core.generation == h.group.generation
        assert core.leader in ids.values()
        assert {mm.client for mm in core.members.values()} == set(ids)
    consumer_join(h, 7.0, "d", "D")
    assert h.group_type == CONSUMER and isinstance(h.group, ConsumerGroupWithClassicMembers)
    for core in [h, h.group]:
        assert core.state == h.group.state and core.generation == h.group.group_epoch
        assert set(core.members) == {*ids.values(), "D"}
        assert core.members["D"].client == "d"


def test_a_classic_group_made_from_a_consumer_group_starts_stable_then_rebalances():
    """ClassicGroup.from_consumer: Stable at generation = the group epoch with the members but the
    one leaving, their target assignments as assignments, then a rebalance (PreparingRebalance,
    every member to rejoin); the offsets are the same store."""
    h = host()
    ids = classic_group(h)
    consumer_join(h, 7.0, "d", "D")
    g = h.group
    assert isinstance(g, ConsumerGroupWithClassicMembers)
    g.downgrade_to, g.downgrade_reason = "D", "left"
    leaving, out = g.leave_for_downgrade()
    assert leaving == "D" and g.downgrade_to is None
    assert "member_id=D reason=left" in events(out, "member_removed")[0][4]
    c, made = ClassicGroup.from_consumer(
        g, leaving, 9.0, config=GroupConfig(), elide_heartbeats=False, id_rng=None
    )
    assert set(c.members) == set(ids.values()) and c.offsets is g.offsets
    # the leader is the first member the consumer group's members map iterates
    first = min(ids.values(), key=g.map_order.tie)
    assert c.generation == g.group_epoch and c.leader == first
    assert c.state == ClassicGroupState.PREPARING_REBALANCE
    assert [e[4] for e in events(made, "group_converted")] == [
        f"consumer->classic members=3 generation={g.group_epoch} protocol=cooperative-sticky"
    ]
    for mid, mm in c.members.items():
        assert frozenset(mm.assignment.partitions) == g.target[mid]
