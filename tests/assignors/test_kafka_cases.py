"""Expected outputs from Apache Kafka's own sticky-assignor test suite (AbstractStickyAssignorTest,
StickyAssignorTest, CooperativeStickyAssignorTest), list order included."""

from __future__ import annotations

import pytest

from assignors import Subscription, get_assignor
from assignors import TopicPartition as TP
from assignors.userdata import encode_sticky_user_data

BOTH = ["sticky", "cooperative-sticky"]


def sub(kind: str, topics, owned=(), generation=1) -> Subscription:
    if kind == "sticky":
        return Subscription(topics, user_data=encode_sticky_user_data(list(owned), generation))
    return Subscription(topics, owned_partitions=owned, generation=generation)


def lists(result):
    return {m: a.partitions for m, a in result.items()}


@pytest.mark.parametrize("kind", BOTH)
def test_two_consumers_two_topics_six_partitions(kind):
    """testTwoConsumersTwoTopicsSixPartitions: a fresh group is dealt round-robin by member id."""
    subs = {c: Subscription(["topic1", "topic2"]) for c in ("consumer1", "consumer2")}
    assert lists(get_assignor(kind).assign({"topic1": 3, "topic2": 3}, subs)) == {
        "consumer1": [TP("topic1", 0), TP("topic1", 2), TP("topic2", 1)],
        "consumer2": [TP("topic1", 1), TP("topic2", 0), TP("topic2", 2)],
    }


@pytest.mark.parametrize("kind", BOTH)
def test_multiple_consumers_mixed_topic_subscriptions(kind):
    """testMultipleConsumersMixedTopicSubscriptions: the general path's exact answer."""
    subs = {
        "consumer1": Subscription(["topic1"]),
        "consumer2": Subscription(["topic1", "topic2"]),
        "consumer3": Subscription(["topic1"]),
    }
    assert lists(get_assignor(kind).assign({"topic1": 3, "topic2": 2}, subs)) == {
        "consumer1": [TP("topic1", 0), TP("topic1", 2)],
        "consumer2": [TP("topic2", 0), TP("topic2", 1)],
        "consumer3": [TP("topic1", 1)],
    }


@pytest.mark.parametrize("kind", BOTH)
def test_two_consumers_one_partition(kind):
    """testTwoConsumersOneTopicOnePartition: the first member by id gets the only partition."""
    subs = {c: Subscription(["topic"]) for c in ("consumer1", "consumer2")}
    assert lists(get_assignor(kind).assign({"topic": 1}, subs)) == {"consumer1": [TP("topic", 0)], "consumer2": []}


@pytest.mark.parametrize("kind", BOTH)
def test_add_remove_consumer_one_topic(kind):
    """testAddRemoveConsumerOneTopic: the owner keeps p0, p1 and p2 transfers to the newcomer
    (withheld by cooperative-sticky); when the owner leaves, the newcomer gets everything."""
    a = get_assignor(kind)
    owned = [TP("topic", 0), TP("topic", 1), TP("topic", 2)]
    subs = {"consumer1": sub(kind, ["topic"], owned), "consumer2": sub(kind, ["topic"])}
    result = lists(a.assign({"topic": 3}, subs))
    assert result["consumer1"] == [TP("topic", 0), TP("topic", 1)]
    assert result["consumer2"] == ([TP("topic", 2)] if kind == "sticky" else [])
    subs = {"consumer2": sub(kind, ["topic"], result["consumer2"], 2)}
    assert sorted(lists(a.assign({"topic": 3}, subs))["consumer2"]) == owned


@pytest.mark.parametrize("kind", BOTH)
def test_partition_claimed_by_two_in_same_generation_unequal_counts(kind):
    """testAllConsumersHaveOwnedPartitionInvalidatedWhenClaimedByMultipleConsumersInSameGeneration
    WithUnequalPartitionsPerConsumer: p0 is invalidated; cooperative withholds it."""
    subs = {
        "consumer1": sub(kind, ["topic"], [TP("topic", 0), TP("topic", 1)]),
        "consumer2": sub(kind, ["topic"], [TP("topic", 0), TP("topic", 2)]),
        "consumer3": sub(kind, ["topic"], []),
    }
    assert lists(get_assignor(kind).assign({"topic": 4}, subs)) == {
        "consumer1": [TP("topic", 1), TP("topic", 3)],
        "consumer2": [TP("topic", 2)],
        "consumer3": [TP("topic", 0)] if kind == "sticky" else [],
    }


@pytest.mark.parametrize("kind", BOTH)
def test_new_member_fills_from_unowned_partitions(kind):
    """A newcomer takes unowned partitions first and nothing transfers (Kafka asserts that
    partitionsTransferringOwnership is empty)."""
    topics = ["topic1", "topic2"]
    subs = {
        "consumer1": sub(kind, topics, [TP("topic1", 0)]),
        "consumer2": sub(kind, topics, [TP("topic1", 1)]),
        "consumer3": sub(kind, topics, []),
    }
    assert lists(get_assignor(kind).assign({"topic1": 2, "topic2": 3}, subs)) == {
        "consumer1": [TP("topic1", 0), TP("topic2", 1)],
        "consumer2": [TP("topic1", 1), TP("topic2", 2)],
        "consumer3": [TP("topic2", 0)],
    }
