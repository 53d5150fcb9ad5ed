"""StickyAssignor and CooperativeStickyAssignor: Kafka's examples, claims, properties, multi-round."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assignors import Subscription, get_assignor
from assignors import TopicPartition as TP
from assignors.userdata import encode_sticky_user_data
from tests.strategies import groups, shuffled


def tps(topic: str, *parts: int) -> list[TP]:
    return [TP(topic, p) for p in parts]


def eager_sub(topics, owned=(), generation=None) -> Subscription:
    """An eager sticky subscription of a current client (ConsumerProtocolSubscription v2+):
    ownership travels in V1 user data (V0 when no generation), the generation also in the
    subscription's own field."""
    return Subscription(
        topics,
        user_data=encode_sticky_user_data(list(owned), generation),
        generation=-1 if generation is None else generation,
    )


def coop_sub(topics, owned=(), generation=-1) -> Subscription:
    return Subscription(topics, owned_partitions=owned, generation=generation)


def as_lists(result) -> dict[str, list[TP]]:
    return {m: sorted(a.partitions) for m, a in result.items()}


def sticky_sub(kind: str, topics, owned, generation):
    if kind == "sticky":
        return eager_sub(topics, owned, generation)
    return coop_sub(topics, owned, generation)


def owned_of(kind: str, sub: Subscription) -> list[TP]:
    from assignors.userdata import sticky_member_data

    if kind == "sticky":
        return sticky_member_data(sub.user_data).partitions
    return list(sub.owned_partitions)


# -- exact examples ------------------------------------------------------------------------------


def test_one_consumer_gets_everything():
    """A single member receives every partition of every topic it subscribes to, and nothing else."""
    result = get_assignor("sticky").assign(
        {"t0": 3, "t1": 2, "other": 4}, {"c": eager_sub(["t0", "t1"])}
    )
    assert as_lists(result) == {"c": tps("t0", 0, 1, 2) + tps("t1", 0, 1)}


def test_added_consumer_takes_the_excess_of_the_owner_eager():
    """Kafka's testAddRemoveConsumerOneTopic: c1 owned all 3 and keeps p0, p1; c2 gets p2."""
    subs = {"c1": eager_sub(["t"], tps("t", 0, 1, 2), 1), "c2": eager_sub(["t"])}
    assert as_lists(get_assignor("sticky").assign({"t": 3}, subs)) == {
        "c1": tps("t", 0, 1),
        "c2": tps("t", 2),
    }


def test_cooperative_withholds_moving_partitions_until_follow_up():
    """The docstring example: partitions changing owner are withheld, then handed over next round."""
    a = get_assignor("cooperative-sticky")
    subs = {
        "c1": coop_sub(["t0"], tps("t0", 0, 1, 2), 3),
        "c2": coop_sub(["t0"], tps("t0", 3, 4, 5), 3),
        "c3": coop_sub(["t0"]),
    }
    first = as_lists(a.assign({"t0": 6}, subs))
    assert first == {"c1": tps("t0", 0, 1), "c2": tps("t0", 3, 4), "c3": []}
    subs = {m: coop_sub(["t0"], first[m], 4) for m in subs}
    second = as_lists(a.assign({"t0": 6}, subs))
    assert second == {"c1": tps("t0", 0, 1), "c2": tps("t0", 3, 4), "c3": tps("t0", 2, 5)}


def test_fresh_constrained_assignment_deals_in_member_id_order():
    """With no claims, partitions in (topic, partition) order are dealt round-robin by member id."""
    subs = {m: coop_sub(["a", "b"]) for m in ("m2", "m0", "m1")}
    result = as_lists(get_assignor("cooperative-sticky").assign({"a": 2, "b": 3}, subs))
    assert result == {
        "m0": [TP("a", 0), TP("b", 1)],
        "m1": [TP("a", 1), TP("b", 2)],
        "m2": [TP("b", 0)],
    }


@pytest.mark.parametrize("kind", ["sticky", "cooperative-sticky"])
def test_same_generation_double_claim_nobody_keeps(kind):
    """Kafka: two members claiming one partition in the same generation both lose it."""
    subs = {
        "c1": sticky_sub(kind, ["t"], tps("t", 0, 1), 1),
        "c2": sticky_sub(kind, ["t"], tps("t", 0, 2), 1),
        "c3": sticky_sub(kind, ["t"], [], 1),
    }
    result = as_lists(get_assignor(kind).assign({"t": 3}, subs))
    assert result["c1"] == tps("t", 1) and result["c2"] == tps("t", 2)
    # Eager: c3 gets p0 now; cooperative: p0 is treated as owned and withheld this round.
    assert result["c3"] == (tps("t", 0) if kind == "sticky" else [])


@pytest.mark.parametrize("kind", ["sticky", "cooperative-sticky"])
def test_higher_generation_claim_wins(kind):
    """KIP-341: of two claims on one partition, the higher generation wins; the stale one loses."""
    subs = {
        "c1": sticky_sub(kind, ["t0", "t1"], [TP("t0", 0), TP("t0", 1), TP("t1", 0)], 5),
        "c2": sticky_sub(kind, ["t0", "t1"], [TP("t0", 0), TP("t0", 2), TP("t1", 1)], 4),
    }
    result = as_lists(get_assignor(kind).assign({"t0": 3, "t1": 3}, subs))
    assert result["c1"] == [TP("t0", 0), TP("t0", 1), TP("t1", 0)]
    assert result["c2"] == [TP("t0", 2), TP("t1", 1), TP("t1", 2)]


def test_v0_user_data_zombie_ties_and_v1_owner_wins():
    """KIP-341's motivation: V0 claims carry no generation, so a zombie's stale claim ties with the
    true owner's and neither keeps the partition (extra movement); with V1 the owner's wins."""
    a = get_assignor("sticky")
    v0 = {
        "b-owner": eager_sub(["t"], tps("t", 0, 1), None),
        "a-zombie": eager_sub(["t"], tps("t", 1), None),
    }
    assert as_lists(a.assign({"t": 4}, v0)) == {
        "b-owner": tps("t", 0, 2),
        "a-zombie": tps("t", 1, 3),
    }
    v1 = {
        "b-owner": eager_sub(["t"], tps("t", 0, 1), 7),
        "a-zombie": eager_sub(["t"], tps("t", 1), 6),
    }
    assert as_lists(a.assign({"t": 4}, v1)) == {
        "b-owner": tps("t", 0, 1),
        "a-zombie": tps("t", 2, 3),
    }


def test_general_path_keeps_owner_of_single_subscriber_topic():
    """General path: partitions of a topic only one member subscribes to stay with that member."""
    subs = {"a": eager_sub(["t0"]), "b": eager_sub(["t0", "t1"])}
    assert as_lists(get_assignor("sticky").assign({"t0": 3, "t1": 4}, subs)) == {
        "a": tps("t0", 0, 1, 2),
        "b": tps("t1", 0, 1, 2, 3),
    }


def test_general_path_moves_partition_to_rebalance():
    """General path: an unbalanced previous assignment is rebalanced by moving as few as needed."""
    subs = {
        "a": eager_sub(["t0", "t1"], tps("t0", 0, 1, 2, 3) + tps("t1", 0, 1), 3),
        "b": eager_sub(["t0"], [], 3),
    }
    result = as_lists(get_assignor("sticky").assign({"t0": 4, "t1": 2}, subs))
    # Kafka moves t0 partitions in order to b until min >= max - 1 (a 6 -> 3, b 0 -> 3).
    assert result == {"a": [TP("t0", 3), TP("t1", 0), TP("t1", 1)], "b": tps("t0", 0, 1, 2)}


def test_deleted_topic_claims_are_dropped():
    """Claims on a deleted topic are ignored; only existing subscribed topics are assigned."""
    subs = {
        "c1": coop_sub(["t", "gone"], tps("gone", 0, 1) + tps("t", 0), 2),
        "c2": coop_sub(["t", "gone"], tps("t", 1), 2),
    }
    result = as_lists(get_assignor("cooperative-sticky").assign({"t": 2}, subs))
    assert result == {"c1": tps("t", 0), "c2": tps("t", 1)}


def test_hashmap_order_decides_who_keeps_the_ceiling():
    """With more over-quota owners than ceiling slots, Java HashMap order picks who keeps the
    extra partition (here: 3 owners of 2, 4 members, 6 partitions, 2 ceiling slots)."""
    from assignors._java import hashmap_order

    owners = ["consumer-1", "consumer-2", "consumer-3"]
    subs = {m: coop_sub(["t"], tps("t", 2 * i, 2 * i + 1), 1) for i, m in enumerate(owners)}
    subs["consumer-4"] = coop_sub(["t"])
    result = as_lists(get_assignor("cooperative-sticky").assign({"t": 6}, subs))
    first_two = [m for m in hashmap_order(subs) if m in owners][:2]
    for m in owners:
        assert len(result[m]) == (2 if m in first_two else 1)


# -- properties ----------------------------------------------------------------------------------


def _valid_owned_by(kind, subs, meta):
    subscribed = {t for s in subs.values() for t in s.topics if t in meta}
    out = {}
    for m, s in subs.items():
        out[m] = [
            tp
            for tp in owned_of(kind, s)
            if tp.topic in subscribed and tp.partition < meta[tp.topic]
        ]
    return out


def _kafka_balanced(meta, subs, result) -> bool:
    """Kafka's isBalanced: no member below its potential could take a partition from a member
    holding at least two more."""
    counts = {m: len(a.partitions) for m, a in result.items()}
    owner = {tp: m for m, a in result.items() for tp in a.partitions}
    for m, s in subs.items():
        topics = {t for t in s.topics if t in meta}
        for t in topics:
            for p in range(meta[t]):
                o = owner.get(TP(t, p))
                if o is not None and o != m and counts[o] > counts[m] + 1:
                    return False
    return True


def _materialise(kind, meta, raw):
    """Turn strategy output (owned_partitions + generation) into the assignor's own input form."""
    if kind == "cooperative-sticky":
        return raw
    return {
        m: Subscription(
            s.topics,
            user_data=encode_sticky_user_data(
                list(s.owned_partitions), s.generation if s.generation >= 0 else None
            ),
            group_instance_id=s.group_instance_id,
        )
        for m, s in raw.items()
    }


@pytest.mark.parametrize("kind", ["sticky", "cooperative-sticky"])
@given(data=groups())
def test_every_partition_at_most_once_and_only_to_subscribers(kind, data):
    """Each existing subscribed partition goes to at most one member, which subscribes to it;
    eager sticky assigns every one of them."""
    meta, raw = data
    subs = _materialise(kind, meta, raw)
    result = get_assignor(kind).assign(meta, subs)
    assert set(result) == set(subs)
    seen = set()
    for m, a in result.items():
        for tp in a.partitions:
            assert tp not in seen
            seen.add(tp)
            assert tp.topic in subs[m].topics and tp.partition < meta[tp.topic]
    subscribed = {t for s in subs.values() for t in s.topics if t in meta}
    everything = {TP(t, p) for t in subscribed for p in range(meta[t])}
    if kind == "sticky":
        assert seen == everything


@pytest.mark.parametrize("kind", ["sticky", "cooperative-sticky"])
@given(data=groups(uniform=True))
def test_constrained_path_fully_balanced_and_sticky(kind, data):
    """Same subscriptions: counts differ by at most one (after the follow-up round for cooperative)
    and each member keeps at least min(its valid uncontested claims, floor quota) partitions."""
    meta, raw = data
    subs = _materialise(kind, meta, raw)
    a = get_assignor(kind)
    result = a.assign(meta, subs)
    counts = [len(x.partitions) for x in result.values()]
    if kind == "sticky":
        assert max(counts) - min(counts) <= 1
    topics = {t for t in next(iter(subs.values())).topics if t in meta}
    total = sum(meta[t] for t in topics)
    floor = total // len(subs)
    claims = _valid_owned_by(kind, subs, meta)
    claimants: dict[TP, int] = {}
    for parts in claims.values():
        for tp in set(parts):
            claimants[tp] = claimants.get(tp, 0) + 1
    for m, parts in claims.items():
        if len(parts) != len(set(parts)):
            continue
        uncontested = [tp for tp in parts if claimants[tp] == 1]
        kept = set(result[m].partitions) & set(parts)
        assert len(kept) >= min(len(uncontested), floor)


@given(data=groups())
def test_cooperative_never_hands_over_an_owned_partition(data):
    """Cooperative: a partition in one member's owned_partitions is never newly assigned to
    another member in the same round (KIP-429's revoke-first rule)."""
    meta, subs = data
    result = get_assignor("cooperative-sticky").assign(meta, subs)
    for m, a in result.items():
        for tp in a.partitions:
            if tp in subs[m].owned_partitions:
                continue
            for other, s in subs.items():
                if other != m:
                    assert tp not in s.owned_partitions


@given(data=groups(), rounds=st.just(5))
def test_cooperative_converges(data, rounds):
    """Cooperative: feeding each result back as ownership (next generation) reaches an assignment
    that withholds nothing and is balanced in Kafka's sense within Kafka's allowance of 4 follow-ups."""
    meta, subs = data
    a = get_assignor("cooperative-sticky")
    subscribed = {t for s in subs.values() for t in s.topics if t in meta}
    total = sum(meta[t] for t in subscribed)
    gen = max(s.generation for s in subs.values()) + 1
    for _ in range(rounds):
        result = a.assign(meta, subs)
        if sum(len(x.partitions) for x in result.values()) == total:
            break
        gen += 1
        subs = {
            m: Subscription(s.topics, owned_partitions=result[m].partitions, generation=gen)
            for m, s in subs.items()
        }
    else:
        pytest.fail("cooperative-sticky did not converge in 4 follow-up rounds")
    assert _kafka_balanced(meta, subs, result)


@pytest.mark.parametrize("kind", ["sticky", "cooperative-sticky"])
@given(data=groups(), perm_seed=st.randoms(use_true_random=False))
def test_output_independent_of_dict_order(kind, data, perm_seed):
    """The same group with members (and topics) listed in another order gets the same assignment."""
    meta, raw = data
    subs = _materialise(kind, meta, raw)
    perm = list(range(len(subs)))
    perm_seed.shuffle(perm)
    mperm = list(range(len(meta)))
    perm_seed.shuffle(mperm)
    a, b = get_assignor(kind), get_assignor(kind)
    r1 = a.assign(meta, subs)
    r2 = b.assign(shuffled(meta, mperm), shuffled(subs, perm))
    assert {m: x.partitions for m, x in r1.items()} == {m: x.partitions for m, x in r2.items()}


@given(data=groups(uniform=False, with_owned=False))
@settings(max_examples=60)
def test_general_path_fresh_assignment_is_balanced(data):
    """General path from scratch: the result is balanced in Kafka's sense."""
    meta, subs = data
    result = get_assignor("sticky").assign(meta, subs)
    assert _kafka_balanced(meta, subs, result)


# -- multi-round scenarios -----------------------------------------------------------------------


def _run_rounds(kind, meta, members_per_round, topics_of=None):
    """Run successive rebalances, each member reporting what it got last time, until settled."""
    a = get_assignor(kind)
    owned: dict[str, list[TP]] = {}
    gen = 0
    history = []
    for members in members_per_round:
        for _ in range(5):
            gen += 1
            subs = {
                m: sticky_sub(
                    kind,
                    (topics_of or {}).get(m, sorted(meta)),
                    owned.get(m, []),
                    gen - 1 if m in owned else -1,
                )
                for m in members
            }
            result = a.assign(meta, subs)
            owned = {m: list(x.partitions) for m, x in result.items()}
            total = sum(meta.values())
            if sum(len(v) for v in owned.values()) == total:
                break
        history.append(owned)
    return history


@pytest.mark.parametrize("kind", ["sticky", "cooperative-sticky"])
def test_members_leave_one_by_one(kind):
    """As members leave one at a time, survivors keep everything they had and the group stays balanced."""
    meta = {"a": 7, "b": 5}
    members = [f"c{i}" for i in range(5)]
    rounds = [members[: len(members) - k] for k in range(len(members))]
    history = _run_rounds(kind, meta, rounds)
    for before, after in itertools.pairwise(history):
        for m, parts in after.items():
            assert set(before[m]) <= set(parts)
        counts = [len(v) for v in after.values()]
        assert max(counts) - min(counts) <= 1


@pytest.mark.parametrize("kind", ["sticky", "cooperative-sticky"])
def test_members_join(kind):
    """A joining member takes only what balance requires: everyone else loses at most what exceeds quota."""
    meta = {"t": 12}
    history = _run_rounds(kind, meta, [["c0", "c1"], ["c0", "c1", "c2"], ["c0", "c1", "c2", "c3"]])
    for before, after in itertools.pairwise(history):
        moved = sum(len(set(before[m]) - set(after[m])) for m in before)
        newcomer = (set(after) - set(before)).pop()
        assert moved == len(after[newcomer])


@pytest.mark.parametrize("kind", ["sticky", "cooperative-sticky"])
def test_topic_added_and_deleted(kind):
    """Adding a topic spreads its partitions without moving existing ones; deleting one drops it."""
    a = get_assignor(kind)
    members = ["c0", "c1", "c2"]
    meta = {"a": 6}
    subs = {m: sticky_sub(kind, ["a", "b"], [], -1) for m in members}
    r1 = as_lists(a.assign(meta, subs))
    meta2 = {"a": 6, "b": 3}
    subs = {m: sticky_sub(kind, ["a", "b"], r1[m], 1) for m in members}
    r2 = as_lists(a.assign(meta2, subs))
    for m in members:
        assert set(r1[m]) <= set(r2[m])
        assert sum(tp.topic == "b" for tp in r2[m]) == 1
    subs = {m: sticky_sub(kind, ["a", "b"], r2[m], 2) for m in members}
    r3 = as_lists(a.assign({"b": 3}, subs))
    assert r3 == {m: [tp for tp in r2[m] if tp.topic == "b"] for m in members}


def test_member_returns_with_stale_generation():
    """A member returning with an old generation loses contested partitions to the current owner
    but keeps uncontested ones."""
    a = get_assignor("cooperative-sticky")
    subs = {
        "current": coop_sub(["t"], tps("t", 0, 1, 2), 9),
        "returning": coop_sub(["t"], tps("t", 2, 3), 4),
    }
    result = as_lists(a.assign({"t": 4}, subs))
    # Quota 2: "current" keeps p0 p1 (its p2 is over quota and moves), "returning" keeps p3.
    assert result["current"] == tps("t", 0, 1)
    assert TP("t", 3) in result["returning"]
    assert TP("t", 2) not in result["returning"]  # still owned by "current": withheld this round


@pytest.mark.parametrize("kind", ["sticky", "cooperative-sticky"])
@given(data=groups(with_owned=False))
@settings(max_examples=60)
def test_settled_group_stays_put(kind, data):
    """Stickiness: once a group has settled, rebalancing it again with the same members and
    topics moves nothing (both the constrained and the general path)."""
    meta, raw = data
    a = get_assignor(kind)
    subs = _materialise(kind, meta, raw)
    result = a.assign(meta, subs)
    for generation in (1, 2):
        subs = {
            m: sticky_sub(kind, s.topics, result[m].partitions, generation) for m, s in raw.items()
        }
        again = a.assign(meta, subs)
        if generation == 1:
            result = again  # cooperative may still be handing over withheld partitions
            continue
        assert {m: sorted(x.partitions) for m, x in again.items()} == {
            m: sorted(x.partitions) for m, x in result.items()
        }


def _owned_quotas_one_by_one(lengths, min_q, max_q, expected):
    """Kafka's assignOwnedPartitions loop, member by member (the reference for owned_quotas)."""
    keep, under, exact, over = [], [], [], 0
    for size in lengths:
        if size < min_q:
            keep.append(size)
            under.append(len(keep) - 1)
        elif size >= max_q and over < expected:
            over += 1
            if over == expected:
                exact.clear()
            keep.append(max_q)
        else:
            keep.append(min_q)
            if over < expected:
                exact.append(len(keep) - 1)
    return keep, under, exact


@given(st.lists(st.integers(0, 6), max_size=30), st.integers(1, 40), st.integers(0, 12))
def test_owned_quotas_equal_kafkas_member_by_member_loop(lengths, n_members_extra, total):
    """The vectorised keep decisions equal Kafka's sequential loop for every claim pattern."""
    from assignors.sticky import owned_quotas

    n = max(len(lengths), 1)
    total += n_members_extra
    min_q, expected = divmod(total, n)
    max_q = min_q + (1 if expected else 0)
    keep, under, exact = owned_quotas(np.array(lengths, dtype=np.int64), min_q, max_q, expected)
    assert (keep.tolist(), under.tolist(), exact.tolist()) == _owned_quotas_one_by_one(
        lengths, min_q, max_q, expected
    )


@given(st.lists(st.lists(st.sampled_from(["a", "b", "c"]), max_size=3), min_size=1, max_size=8))
def test_all_subscriptions_equal_matches_member_by_member(topic_lists):
    """The per-distinct-subscription test equals the member-by-member one (empty lists before and
    after the reference, duplicated topics, reordered topics)."""
    from assignors.sticky import all_subscriptions_equal, all_subscriptions_equal_member_by_member

    subs = {f"m{i}": Subscription(ts) for i, ts in enumerate(topic_lists)}
    order = list(subs)
    assert all_subscriptions_equal(subs, order) == all_subscriptions_equal_member_by_member(
        subs, order
    )
