"""Properties shared by RangeAssignor and RoundRobinAssignor, each checked against a plain
per-partition loop of Kafka's algorithm."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assignors import get_assignor
from assignors.types import Subscription, TopicPartition
from tests.assignors.test_range import reference_range
from tests.assignors.test_roundrobin import reference_roundrobin
from tests.strategies import groups, shuffled

REFERENCES = {"range": reference_range, "roundrobin": reference_roundrobin}
NAMES = list(REFERENCES)


def assign(name, metadata, subscriptions) -> dict[str, list[TopicPartition]]:
    return {m: a.partitions for m, a in get_assignor(name).assign(metadata, subscriptions).items()}


@pytest.mark.parametrize("name", NAMES)
def test_large_heterogeneous_group_matches_reference(name):
    """A seeded group of 300 members with mixed subscriptions matches the reference loop."""
    rng = random.Random(7)
    metadata = {f"topic-{i:02d}": rng.randrange(0, 400) for i in range(30)}
    names = [*metadata, "deleted"]
    subs = {
        f"member-{i:03d}": Subscription(
            rng.sample(names, rng.randrange(1, 8)),
            group_instance_id=f"instance-{rng.randrange(10**6)}" if i % 3 == 0 else None,
        )
        for i in range(300)
    }
    assert assign(name, metadata, subs) == REFERENCES[name](metadata, subs)


@pytest.mark.parametrize("name", NAMES)
@given(group=groups(with_owned=False))
def test_matches_reference(name, group):
    """On any group the fast assignor equals the plain per-partition loop of Kafka's algorithm."""
    metadata, subs = group
    assert assign(name, metadata, subs) == REFERENCES[name](metadata, subs)


@pytest.mark.parametrize("name", NAMES)
@given(group=groups(with_owned=False))
def test_each_subscribed_partition_assigned_once_to_a_subscriber(name, group):
    """Every existing subscribed partition goes to exactly one member that subscribes to it."""
    metadata, subs = group
    result = assign(name, metadata, subs)
    assert set(result) == set(subs)
    handed_out = [p for partitions in result.values() for p in partitions]
    expected = {
        TopicPartition(t, p)
        for t in {t for s in subs.values() for t in s.topics if t in metadata}
        for p in range(metadata[t])
    }
    assert len(handed_out) == len(set(handed_out))
    assert set(handed_out) == expected
    for member, partitions in result.items():
        assert all(p.topic in subs[member].topics for p in partitions)
        # RoundRobin deals from the sorted partition list; Range walks topics in Kafka's HashMap
        # order: either way a topic's partitions are contiguous and ascending in a member's list.
        topics_in_order = list(dict.fromkeys(p.topic for p in partitions))
        assert partitions == sorted(
            partitions, key=lambda p: (topics_in_order.index(p.topic), p.partition)
        )
        if name == "roundrobin":
            assert partitions == sorted(partitions)


@pytest.mark.parametrize("name", NAMES)
@given(group=groups(), data=st.data())
def test_independent_of_dict_order(name, group, data):
    """Shuffling the insertion order of the subscriptions and metadata changes nothing."""
    metadata, subs = group
    sub_order = data.draw(st.permutations(range(len(subs))))
    meta_order = data.draw(st.permutations(range(len(metadata))))
    result = assign(name, shuffled(metadata, meta_order), shuffled(subs, sub_order))
    assert list(result.items()) == list(assign(name, metadata, subs).items())
