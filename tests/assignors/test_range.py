"""Tests for assignors.range (Kafka's RangeAssignor)."""

from __future__ import annotations

import functools

from assignors import EAGER, get_assignor
from assignors._java import hashmap_order
from assignors.range import RangeAssignor
from assignors.types import Subscription, TopicPartition
from tests.assignors.java_model import java_hashmap_keys


def tp(name: str) -> TopicPartition:
    """``"t0p2"`` -> ``TopicPartition("t0", 2)``, the notation of Kafka's javadoc."""
    topic, _, partition = name.rpartition("p")
    return TopicPartition(topic, int(partition))


def tps(*names: str) -> list[TopicPartition]:
    return [tp(n) for n in names]


def assign(metadata, subscriptions) -> dict[str, list[TopicPartition]]:
    return {m: a.partitions for m, a in RangeAssignor().assign(metadata, subscriptions).items()}


def kafka_member_order(members) -> list[str]:
    """Member ids sorted by Kafka's ``MemberInfo#compareTo``, written out as a comparator: static
    members by instance id (member id breaking ties), then dynamic members by member id."""

    def cmp(x: str, y: str) -> int:
        return (x > y) - (x < y)

    def compare(id_a: str, id_b: str) -> int:
        static_a, static_b = members[id_a].group_instance_id, members[id_b].group_instance_id
        if static_a is not None and static_b is not None:
            return cmp(static_a, static_b) or cmp(id_a, id_b)
        if static_a is not None:
            return -1
        if static_b is not None:
            return 1
        return cmp(id_a, id_b)

    return sorted(members, key=functools.cmp_to_key(compare))


def reference_range(metadata, subscriptions) -> dict[str, list[TopicPartition]]:
    """Kafka's RangeAssignor as a plain loop over topics and partitions (no numpy)."""
    assignment: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
    # AbstractPartitionAssignor: a HashSet of subscribed topics (members in HashMap order), then a
    # HashMap partitionsPerTopic filled in that set's order; RangeAssignor walks its entries.
    topic_set = java_hashmap_keys(
        t for m in hashmap_order(subscriptions) for t in subscriptions[m].topics if t in metadata
    )
    for topic in java_hashmap_keys(topic_set):
        consumers = kafka_member_order(
            {m: s for m, s in subscriptions.items() if topic in s.topics}
        )
        n, k = metadata[topic], len(consumers)
        per_consumer, extra = n // k, n % k
        for i, member in enumerate(consumers):
            start = per_consumer * i + min(i, extra)
            length = per_consumer + (1 if i < extra else 0)
            for partition in range(start, start + length):
                assignment[member].append(TopicPartition(topic, partition))
    return assignment


def test_registry():
    """The registry's "range" is this EAGER-only RangeAssignor."""
    a = get_assignor("range")
    assert isinstance(a, RangeAssignor)
    assert a.name == "range"
    assert a.supported_protocols == (EAGER,)


def test_two_members_two_topics():
    """Each topic is cut into ranges separately, the first member taking the extra partition."""
    subs = {"C0": Subscription(["t0", "t1"]), "C1": Subscription(["t0", "t1"])}
    assert assign({"t0": 3, "t1": 3}, subs) == {
        "C0": tps("t0p0", "t0p1", "t1p0", "t1p1"),
        "C1": tps("t0p2", "t1p2"),
    }


def test_uneven_ranges():
    """With n partitions and k members, the first n % k members get n // k + 1 contiguous ones."""
    subs = {m: Subscription(["t0"]) for m in ("C2", "C0", "C1")}
    assert assign({"t0": 8}, subs) == {
        "C0": tps("t0p0", "t0p1", "t0p2"),
        "C1": tps("t0p3", "t0p4", "t0p5"),
        "C2": tps("t0p6", "t0p7"),
    }


def test_more_members_than_partitions():
    """Members beyond the partition count get an empty list but still appear in the result."""
    subs = {m: Subscription(["t0"]) for m in ("C0", "C1", "C2")}
    assert assign({"t0": 2}, subs) == {"C0": tps("t0p0"), "C1": tps("t0p1"), "C2": []}


def test_heterogeneous_subscriptions():
    """A topic is split only among its own subscribers."""
    subs = {
        "C0": Subscription(["t0"]),
        "C1": Subscription(["t0", "t1"]),
        "C2": Subscription(["t1", "t2"]),
    }
    assert assign({"t0": 3, "t1": 3, "t2": 2, "unsubscribed": 4}, subs) == {
        "C0": tps("t0p0", "t0p1"),
        "C1": tps("t0p2", "t1p0", "t1p1"),
        "C2": tps("t1p2", "t2p0", "t2p1"),
    }


def test_co_partitioned_topics_line_up():
    """Topics with equal partition counts and subscribers give each member the same numbers."""
    subs = {f"C{i}": Subscription(["orders", "payments"]) for i in range(3)}
    result = assign({"orders": 7, "payments": 7}, subs)
    for partitions in result.values():
        numbers = {
            t: [p.partition for p in partitions if p.topic == t] for t in ("orders", "payments")
        }
        assert numbers["orders"] == numbers["payments"]


def test_missing_topic_is_skipped():
    """A subscribed topic absent from the metadata assigns nothing and breaks nothing."""
    subs = {"C0": Subscription(["t0", "deleted"]), "C1": Subscription(["deleted"])}
    assert assign({"t0": 2}, subs) == {"C0": tps("t0p0", "t0p1"), "C1": []}


def test_static_members_ordered_by_instance_id():
    """Static members are ordered by group.instance.id, ahead of dynamic members by member id."""
    subs = {
        "a-dynamic": Subscription(["t0"]),
        "z-static": Subscription(["t0"], group_instance_id="i0"),
        "m-static": Subscription(["t0"], group_instance_id="i1"),
    }
    assert assign({"t0": 3}, subs) == {
        "z-static": tps("t0p0"),
        "m-static": tps("t0p1"),
        "a-dynamic": tps("t0p2"),
    }


def test_rolling_bounce_of_static_members_keeps_assignment():
    """New member ids for the same instance ids leave every instance's partitions unchanged."""
    before = {f"C{i}": Subscription(["t0", "t1"], group_instance_id=f"I{i}") for i in range(3)}
    renamed = {"C0": "C5", "C1": "C3", "C2": "C4"}
    after = {renamed[m]: s for m, s in before.items()}
    old, new = assign({"t0": 3, "t1": 3}, before), assign({"t0": 3, "t1": 3}, after)
    assert {before[m].group_instance_id: p for m, p in old.items()} == {
        after[m].group_instance_id: p for m, p in new.items()
    }
