"""Expected outputs from Apache Kafka's own sticky-assignor test suite (AbstractStickyAssignorTest,
StickyAssignorTest, CooperativeStickyAssignorTest), list order included."""

from __future__ import annotations

import pytest

from assignors import Subscription, get_assignor
from assignors import TopicPartition as TP
from assignors.userdata import encode_sticky_user_data

BOTH = ["sticky", "cooperative-sticky"]


def sub(kind: str, topics, owned=(), generation=1) -> Subscription:
    """Kafka's ``buildSubscriptionV2Above``: the generation travels in the subscription's own
    field as well as (eager sticky) in the user data."""
    if kind == "sticky":
        return Subscription(
            topics,
            user_data=encode_sticky_user_data(list(owned), generation),
            generation=generation,
        )
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
    assert lists(get_assignor(kind).assign({"topic": 1}, subs)) == {
        "consumer1": [TP("topic", 0)],
        "consumer2": [],
    }


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


# --- Older clients (ConsumerProtocolSubscription below v2: no generation field) ---------------


def v1_sticky_sub(topics, owned, generation):
    """An eager sticky member of an older client: generation only inside its V1 user data."""
    return Subscription(topics, user_data=encode_sticky_user_data(list(owned), generation))


def test_contested_claim_below_v2_goes_to_the_later_member():
    """Kafka compares the claimant's user-data generation with the other claimant's subscription
    field, -1 below v2: the later member in HashMap order (b) keeps t-0 although a is newer."""
    subs = {
        "a": v1_sticky_sub(["t"], [TP("t", 0)], 13),
        "b": v1_sticky_sub(["t"], [TP("t", 0)], 10),
    }
    assert lists(get_assignor("sticky").assign({"t": 2}, subs)) == {
        "a": [TP("t", 1)],
        "b": [TP("t", 0)],
    }


def test_contested_claim_v2_goes_to_the_higher_generation():
    subs = {
        "a": sub("sticky", ["t"], [TP("t", 0)], 13),
        "b": sub("sticky", ["t"], [TP("t", 0)], 10),
    }
    assert lists(get_assignor("sticky").assign({"t": 2}, subs)) == {
        "a": [TP("t", 0)],
        "b": [TP("t", 1)],
    }


def test_contested_claim_below_v2_without_generation_is_lost_by_both():
    """b's own generation is -1 (V0 user data), equal to a's missing field: nobody keeps t-0, and
    it is dealt afresh (to a, the first member by id below quota)."""
    subs = {
        "a": v1_sticky_sub(["t"], [TP("t", 0)], 13),
        "b": v1_sticky_sub(["t"], [TP("t", 0)], None),
    }
    result = lists(get_assignor("sticky").assign({"t": 2}, subs))
    assert result == {"a": [TP("t", 0)], "b": [TP("t", 1)]}


@pytest.mark.parametrize(("field", "keeps"), [(-1, True), (4, False)])
def test_partition_listed_twice(field, keeps):
    """Below v2 a member that lists t-0 twice keeps it (its generation beats its own missing
    field); with v2 the two claims are of one generation and t-0 is invalidated."""
    ud = encode_sticky_user_data([TP("t", 0), TP("t", 0)], 4)
    subs = {
        "z": Subscription(["t"], user_data=ud, generation=field),
        "a": Subscription(["t"]),
        "b": Subscription(["t"]),
    }
    result = lists(get_assignor("sticky").assign({"t": 3}, subs))
    # Kept: z holds t-0 and a, b get the rest; invalidated: all three are dealt by member id.
    assert result["z"] == ([TP("t", 0)] if keeps else [TP("t", 2)])


# --- A member with an empty subscription first in HashMap order ------------------------------


def test_empty_subscription_first_takes_the_constrained_path():
    """``a: [], b: [t]``: Kafka's allSubscriptionsEqual skips empty lists until the first non-empty
    one, so the constrained path deals t-0 to a, which does not subscribe to t."""
    subs = {"a": Subscription([]), "b": Subscription(["t"])}
    for kind in ("sticky", "cooperative-sticky"):
        assert lists(get_assignor(kind).assign({"t": 1}, subs)) == {"a": [TP("t", 0)], "b": []}


def test_empty_subscription_first_withholds_under_cooperative():
    """b owns both partitions; the constrained quota gives one to a, so cooperative-sticky
    withholds it from this round."""
    subs = {
        "a": Subscription([]),
        "b": sub("cooperative-sticky", ["t"], [TP("t", 0), TP("t", 1)], 3),
    }
    assert lists(get_assignor("cooperative-sticky").assign({"t": 2}, subs)) == {
        "a": [],
        "b": [TP("t", 0)],
    }


def test_empty_subscription_later_takes_the_general_path():
    subs = {"a": Subscription(["t"]), "b": Subscription([])}
    assert lists(get_assignor("sticky").assign({"t": 2}, subs)) == {
        "a": [TP("t", 0), TP("t", 1)],
        "b": [],
    }
