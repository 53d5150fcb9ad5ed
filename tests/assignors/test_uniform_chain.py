"""A ``UniformChain`` stepped from one group epoch to the next gives, at every epoch, exactly what
``UniformAssignor.assign`` gives from the previous epoch's target: the same members in the same
order, the same partitions each (the coordinator's targets, ``sim.coordinator.consumer.target``)."""

from __future__ import annotations

import pytest
from hypothesis import given

from assignors.server import GroupAssignment, GroupMembers, GroupSpec, get_server_assignor
from sim.coordinator.consumer.target import TargetAssignment, compute_target
from tests.strategies import membership_changes


def _reference(members, previous, dropped, meta):
    """``UniformAssignor.assign`` on the members, each holding its previous target (a dropped
    one holding nothing)."""
    assigned = {mid: {} for mid in dropped if mid in members}
    spec = GroupSpec.from_members(members, previous, assigned)
    counts = {t: meta.get(t, 0) for t in members.subscribed_topic_names()}
    return get_server_assignor("uniform").assign(spec, counts), counts


def _sets(result: GroupAssignment) -> dict:
    from assignors import TopicPartition

    return {
        m: frozenset(TopicPartition(t, p) for t, ps in result[m].items() for p in ps)
        for m in result
    }


@given(membership_changes())
def test_chain_steps_give_the_assignors_targets(case):
    meta, subscription, epochs = case
    ties: dict[str, int] = {}
    members = GroupMembers(tie=lambda mid: ties.get(mid, 0))
    subscribed: dict[str, frozenset] = {}
    reference = GroupAssignment.empty()
    target = TargetAssignment()
    kept = []  # (an earlier target, what it held): read again after later epochs

    last_subscriptions = None

    def drop(mid):
        target.pop(mid)
        if kept:
            kept[-1][1].pop(mid, None)

    for changes in epochs:
        changed, dropped = [], set()
        for change in changes:
            kind, mid = change[0], change[1]
            if kind == "join" and mid not in subscribed:
                subscribed[mid] = subscription
                members.put(mid, subscription)
            elif kind == "leave" and mid in subscribed:
                del subscribed[mid]
                members.remove(mid)
                drop(mid)
                dropped.add(mid)  # should it join again before the next epoch, it holds nothing
            elif kind == "rejoin" and mid in subscribed:
                drop(mid)
                dropped.add(mid)
            elif kind == "subscribe" and mid in subscribed:
                subscribed[mid] = change[2]
                members.put(mid, change[2])
            elif kind == "tie" and mid in subscribed:
                ties[mid] = change[2]
                members.retie(mid)
            else:
                continue
            changed.append(mid)
        if not len(members):
            continue
        reference, counts = _reference(members, reference, dropped, meta)
        target = compute_target("uniform", counts, members, target, changed)
        now = set(subscribed.values())
        if len(now) == 1 and now == last_subscriptions:
            assert target._chain is not None  # homogeneous on the same topics again: a chain step
        last_subscriptions = now
        got = target._result
        assert got.member_ids == reference.member_ids
        assert got.to_dict() == reference.to_dict()
        # Kafka's work on the input, whichever path computed the target (assignor_cost=kafka)
        assert target.kafka_work == reference.kafka_work
        want = _sets(reference)
        assert {m: target[m] for m in target} == want
        kept.append((target, want))
        for earlier, held in kept[-3:]:
            assert {m: earlier[m] for m in earlier} == held


def test_a_group_forming_one_member_at_a_time_is_stepped():
    """200 members join one at a time over 997 partitions of two topics, some leave and come back:
    every epoch but the first is a chain step, and each equals the assignor's own result."""
    members = GroupMembers()
    reference = GroupAssignment.empty()
    target = TargetAssignment()
    meta = {"t": 600, "u": 397}
    steps = 0
    for i in range(200):
        changed, dropped = [f"m{i:03d}"], set()
        members.put(f"m{i:03d}", frozenset(meta))
        if i % 17 == 16:
            gone = f"m{i - 10:03d}"
            members.remove(gone)
            target.pop(gone)
            changed.append(gone)
        reference, counts = _reference(members, reference, dropped, meta)
        target = compute_target("uniform", counts, members, target, changed)
        steps += target._chain is not None
        assert target._result.to_dict() == reference.to_dict()
    assert steps == 199


def test_the_chain_follows_the_members_renumbering_their_slots():
    """Past 1024 member ids more than twice the members, ``GroupMembers`` renumbers its slots:
    the chain moves its state to the new numbers and goes on."""
    members = GroupMembers()
    reference = GroupAssignment.empty()
    target = TargetAssignment()
    meta = {"t": 50}
    generation = members._generation
    for i in range(1200):
        mid, changed = f"x{i:05d}", [f"x{i:05d}"]
        members.put(mid, frozenset(meta))
        if i >= 3:
            gone = f"x{i - 3:05d}"
            members.remove(gone)
            target.pop(gone)
            changed.append(gone)
        reference, counts = _reference(members, reference, set(), meta)
        target = compute_target("uniform", counts, members, target, changed)
        assert target._result.to_dict() == reference.to_dict()
    assert members._generation > generation and target._chain is not None


@pytest.mark.parametrize("partitions,joins,cap", [(750, 60, 32), (5000, 40, 512)])
def test_members_holding_a_hashset_bucket_of_nine_give_up_in_javas_tree_order(
    monkeypatch, partitions, joins, cap
):
    """Members join one at a time: a newcomer collects the partitions others give up, the tails of
    their walks (the last buckets of their sets), so it comes to hold 9 or more that share a
    bucket of its set, where Java's HashSet makes the bucket a tree (or, under 64 buckets, doubles
    its table). Every step still equals the assignor's own result, which orders such sets by the
    model of HashMap (750 partitions: from the 35th member on a plain bucket order gives another
    answer, in sets of 32 buckets; 5,000: from the 18th, in sets of 512)."""
    import assignors.server.uniform_chain as chain_module

    trees = []
    real = chain_module._hashset_order
    monkeypatch.setattr(
        chain_module, "_hashset_order", lambda parts, c: trees.append(c) or real(parts, c)
    )
    members = GroupMembers()
    reference = GroupAssignment.empty()
    target = TargetAssignment()
    meta = {"t": partitions}
    for i in range(joins):
        mid = f"m{i:03d}"
        members.put(mid, frozenset(meta))
        reference, counts = _reference(members, reference, set(), meta)
        target = compute_target("uniform", counts, members, target, [mid])
        assert target._result.to_dict() == reference.to_dict()
    assert cap in trees
