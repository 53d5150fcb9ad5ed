"""Properties of the server-side assignors over random groups: validity, balance, stickiness,
determinism, and co-partitioning for range."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from assignors.server import (
    GroupSpec,
    MemberSubscriptionAndAssignment,
    SubscriptionType,
    get_server_assignor,
)
from assignors.server._group import GroupArrays
from assignors.server.spec import SubscribedTopicDescriber
from assignors.server.uniform import _HeterogeneousBuilder, _subscribers
from tests.strategies import server_groups, shuffled

SETTINGS = settings(max_examples=100, deadline=None)


def existing_subscriptions(meta, members):
    return {m: {t for t in s.subscribed_topic_names if t in meta} for m, s in members.items()}


def check_valid(meta, members, target):
    """Every partition of a subscribed topic goes to exactly one subscriber; nothing else is
    assigned."""
    subs = existing_subscriptions(meta, members)
    wanted = {(t, p) for ts in subs.values() for t in ts for p in range(meta[t])}
    got = [(t, p) for m in target for t, ps in target[m].items() for p in ps]
    assert len(got) == len(set(got))
    assert set(got) == wanted
    for m in target:
        assert set(target[m]) <= subs[m]
        assert all(len(ps) for ps in target[m].values())


def counts(target):
    return {m: sum(len(ps) for ps in target[m].values()) for m in target}


def held(meta, members, m, topics):
    """Partitions of ``m``'s current target that are still valid for it."""
    a = members[m].assigned_partitions
    return {(t, p) for t, ps in a.items() if t in topics and t in meta for p in ps if p < meta[t]}


@SETTINGS
@given(server_groups(homogeneous=True))
def test_uniform_homogeneous_is_valid_balanced_and_keeps_up_to_its_quota(group):
    """Homogeneous: counts differ by at most one, and each member keeps exactly
    min(what it held, its quota), the quota being P // M plus one for the first P % M members
    in member order."""
    meta, members = group
    spec = GroupSpec(members)
    assert spec.subscription_type is SubscriptionType.HOMOGENEOUS
    target = get_server_assignor("uniform").assign(spec, meta)
    topics = {t for t in next(iter(members.values())).subscribed_topic_names if t in meta}
    if not topics:
        assert len(target) == 0
        return
    check_valid(meta, members, target)
    c = counts(target)
    assert max(c.values()) - min(c.values()) <= 1
    total = sum(meta[t] for t in topics)
    q, extra = divmod(total, len(members))
    for pos, m in enumerate(spec.member_ids):
        quota = q + (pos < extra)
        assert c[m] == quota
        mine = {(t, p) for t, ps in target[m].items() for p in ps}
        had = held(meta, members, m, topics)
        assert len(mine & had) == min(len(had), quota)


@SETTINGS
@given(server_groups(bucketed=True))
def test_uniform_heterogeneous_balances_each_subscription_group(group):
    """When every subscriber of a topic has the same subscription, the members of each
    subscription group end within one partition of each other (Kafka's javadoc)."""
    meta, members = group
    target = get_server_assignor("uniform").assign(GroupSpec(members), meta)
    if len(target) == 0:
        return
    check_valid(meta, members, target)
    c = counts(target)
    by_subscription: dict[frozenset, list[int]] = {}
    for m, s in members.items():
        by_subscription.setdefault(s.subscribed_topic_names, []).append(c[m])
    for sizes in by_subscription.values():
        assert max(sizes) - min(sizes) <= 1


@SETTINGS
@given(server_groups(homogeneous=False))
def test_uniform_heterogeneous_converged_means_no_topic_can_improve(group):
    """Heterogeneous, any subscriptions: valid; members keep every partition they still
    subscribe to unless balancing moves it; and once the balancing loop converges (it stops
    after 16 passes otherwise), no subscriber holding a partition of a topic has two or more
    partitions more than another subscriber of that topic."""
    meta, members = group
    spec = GroupSpec(members, SubscriptionType.HETEROGENEOUS)
    target = get_server_assignor("uniform").assign(spec, meta)
    if len(target) == 0:
        return
    check_valid(meta, members, target)
    # Re-run the builder to see whether it converged.
    describer = SubscribedTopicDescriber(meta)
    member_topics = [spec.member_subscription(m).subscribed_topic_names for m in spec.member_ids]
    distinct: dict = {}
    for i, ts in enumerate(member_topics):
        distinct.setdefault(ts, []).append(i)
    g = GroupArrays(spec, describer, set().union(*distinct), member_topics)
    builder = _HeterogeneousBuilder(g, _subscribers(g, distinct))
    builder.assign_remaining()
    builder.balance()
    assert np.array_equal(g.owner, np.concatenate([target.owners(t) for t in target.topics]))
    if not builder.converged:
        return
    c = counts(target)
    for t in target.topics:
        subs = [m for m in members if t in members[m].subscribed_topic_names]
        if len(subs) < 2:
            continue
        holders = [m for m in subs if t in target[m]]
        if holders:
            assert max(c[m] for m in holders) - min(c[m] for m in subs) <= 1


@SETTINGS
@given(server_groups(), st.sampled_from(["uniform", "range"]))
def test_a_target_is_a_fixed_point(group, name):
    """Assigning again from the target just computed moves nothing (uniform: when the balancing
    converged, which it always does for homogeneous groups)."""
    meta, members = group
    spec = GroupSpec(members)
    a = get_server_assignor(name)
    first = a.assign(spec, meta)
    again_members = {
        m: MemberSubscriptionAndAssignment(
            s.subscribed_topic_names, first.get(m, {}), s.instance_id
        )
        for m, s in members.items()
    }
    second = a.assign(GroupSpec(again_members), meta)
    if name == "uniform" and spec.subscription_type is SubscriptionType.HETEROGENEOUS:
        c = counts(first)
        if c and max(c.values()) - min(c.values()) > 1:
            return  # possibly not converged; covered by the convergence property above
    assert second.to_dict() == first.to_dict()


@SETTINGS
@given(server_groups(), st.sampled_from(["uniform", "range"]), st.randoms(use_true_random=False))
def test_deterministic_whatever_the_mapping_order(group, name, rnd):
    """The same group given in another dict order (members, topics, partitions) gives the same
    target."""
    meta, members = group
    perm = list(range(len(members)))
    rnd.shuffle(perm)
    reordered = {
        m: MemberSubscriptionAndAssignment(
            s.subscribed_topic_names,
            {
                t: tuple(sorted(ps, reverse=True))
                for t, ps in reversed(list(s.assigned_partitions.items()))
            },
            s.instance_id,
        )
        for m, s in shuffled(members, perm).items()
    }
    meta2 = dict(reversed(list(meta.items())))
    a = get_server_assignor(name)
    assert (
        a.assign(GroupSpec(members), meta).to_dict()
        == a.assign(GroupSpec(reordered), meta2).to_dict()
    )


@SETTINGS
@given(server_groups())
def test_range_is_valid_per_topic_balanced_and_co_partitioned(group):
    """Range: per topic, contiguous ranges whose sizes differ by at most one, in Kafka's member
    order; topics with equal partition counts and equal subscribers are co-partitioned."""
    meta, members = group
    target = get_server_assignor("range").assign(GroupSpec(members), meta)
    check_valid(meta, members, target)
    order = sorted(
        members,
        key=lambda m: (
            (0, members[m].instance_id, m) if members[m].instance_id is not None else (1, m, "")
        ),
    )
    subscribers = {t: [m for m in order if t in members[m].subscribed_topic_names] for t in meta}
    for t, subs in subscribers.items():
        if not subs:
            continue
        ranges = [sorted(target[m].get(t, ())) for m in subs]
        flat = [p for r in ranges for p in r]
        assert flat == list(range(meta[t]))  # contiguous, in member order
        sizes = [len(r) for r in ranges]
        assert max(sizes) - min(sizes) <= 1
    for t in meta:
        for u in meta:
            if t < u and meta[t] == meta[u] and subscribers[t] == subscribers[u] and subscribers[t]:
                for m in subscribers[t]:
                    assert target[m].get(t, ()) == target[m].get(u, ())


@SETTINGS
@given(server_groups(), st.sampled_from(["uniform", "range"]), st.data())
def test_views_of_a_previous_target_read_like_plain_dicts(group, name, data):
    """Handing back a previous GroupAssignment's MemberAssignment views (read from its arrays)
    gives the same target as handing back plain dicts: also when members left, a new member id
    carries a departed member's target (a static member rejoining), partition counts grew, a
    topic was deleted, or subscriptions changed."""
    meta, members = group
    a = get_server_assignor(name)
    first = a.assign(GroupSpec(members), meta)
    if len(first) == 0:
        return
    ids = list(members)
    leaver = data.draw(st.sampled_from(ids))
    grown = {t: n + data.draw(st.integers(0, 2)) for t, n in meta.items()}
    if len(grown) > 1 and data.draw(st.booleans()):
        grown.pop(data.draw(st.sampled_from(sorted(grown))))
    as_view, as_dict = {}, {}
    for m in ids:
        if m == leaver:
            continue
        topics = members[m].subscribed_topic_names
        if data.draw(st.booleans()):
            topics = frozenset(data.draw(st.lists(st.sampled_from(sorted(meta)), unique=True)))
        view = first[m]
        plain = data.draw(st.booleans())
        as_view[m] = MemberSubscriptionAndAssignment(
            topics, dict(view) if plain else view, members[m].instance_id
        )
        as_dict[m] = MemberSubscriptionAndAssignment(topics, dict(view), members[m].instance_id)
    as_view["rejoined"] = MemberSubscriptionAndAssignment(
        members[leaver].subscribed_topic_names, first[leaver]
    )
    as_dict["rejoined"] = MemberSubscriptionAndAssignment(
        members[leaver].subscribed_topic_names, dict(first[leaver])
    )
    assert (
        a.assign(GroupSpec(as_view), grown).to_dict()
        == a.assign(GroupSpec(as_dict), grown).to_dict()
    )


def test_the_same_view_twice_is_a_duplicate_claim():
    """Two members handing in one earlier member's target claim its partitions twice."""
    import pytest

    from assignors import AssignorError

    members = {
        "a": MemberSubscriptionAndAssignment({"t"}),
        "b": MemberSubscriptionAndAssignment({"t"}),
    }
    first = get_server_assignor("uniform").assign(GroupSpec(members), {"t": 4})
    twice = {m: MemberSubscriptionAndAssignment({"t"}, first["a"]) for m in ("a", "b")}
    with pytest.raises(AssignorError, match="same target assignment"):
        get_server_assignor("uniform").assign(GroupSpec(twice), {"t": 4})


_IDS = st.text(
    alphabet=st.sampled_from(["a", "b", "z", "\x00", "é", "\uffff", "\U0001f600"]),
    min_size=1,
    max_size=4,
)


@SETTINGS
@given(
    st.lists(
        st.lists(
            st.tuples(_IDS, st.sampled_from([None, None, "i1", "i2", "\U0001f600"])),
            max_size=90,
            unique_by=lambda x: x[0],
        ),
        min_size=1,
        max_size=6,
    )
)
def test_range_member_order_kept_between_calls_equals_a_full_sort(groups):
    """Server range's member order, kept from one call to the next and updated by the members
    that joined or left (few or many), is Kafka's ``sortMemberIds`` computed from scratch."""
    from assignors.server.range import _sorted_member_indices, _SortedMembers

    kept = _SortedMembers()
    for members in groups:
        spec = GroupSpec(
            {m: MemberSubscriptionAndAssignment({"t"}, instance_id=inst) for m, inst in members}
        )
        want = _sorted_member_indices(spec.member_ids, spec._instance_ids())
        assert kept.member_order(spec).tolist() == want


@SETTINGS
@given(
    st.lists(_IDS, min_size=1, max_size=150, unique=True),
    st.lists(st.lists(st.integers(0, 149), max_size=4), min_size=1, max_size=8),
)
def test_range_member_order_after_a_few_joins_and_leaves(pool, steps):
    """The same with a few members joining or leaving at each call (the kept order updated in
    place), as a coordinator's epochs go."""
    from assignors.server.range import _sorted_member_indices, _SortedMembers

    kept = _SortedMembers()
    present = set(pool[: len(pool) // 2 + 1])
    for toggles in [[], *steps]:
        for k in toggles:
            present ^= {pool[k % len(pool)]}
        spec = GroupSpec({m: MemberSubscriptionAndAssignment({"t"}) for m in present})
        want = _sorted_member_indices(spec.member_ids, spec._instance_ids())
        assert kept.member_order(spec).tolist() == want
