"""Tests for assignors.roundrobin (Kafka's RoundRobinAssignor)."""

from __future__ import annotations

from hypothesis import given

from assignors import EAGER, get_assignor
from assignors.roundrobin import RoundRobinAssignor
from assignors.types import Subscription, TopicPartition
from tests.assignors.test_range import kafka_member_order, tps
from tests.strategies import groups


def assign(metadata, subscriptions) -> dict[str, list[TopicPartition]]:
    return {
        m: a.partitions for m, a in RoundRobinAssignor().assign(metadata, subscriptions).items()
    }


def reference_roundrobin(metadata, subscriptions) -> dict[str, list[TopicPartition]]:
    """Kafka's RoundRobinAssignor as a plain loop: one circular iterator, one partition at a time."""
    members = kafka_member_order(subscriptions)
    assignment: dict[str, list[TopicPartition]] = {m: [] for m in members}
    topics = sorted({t for sub in subscriptions.values() for t in sub.topics if t in metadata})
    cursor = 0
    for topic in topics:
        for partition in range(metadata[topic]):
            while topic not in subscriptions[members[cursor]].topics:
                cursor = (cursor + 1) % len(members)
            assignment[members[cursor]].append(TopicPartition(topic, partition))
            cursor = (cursor + 1) % len(members)
    return assignment


def test_registry():
    """The registry's "roundrobin" is this EAGER-only RoundRobinAssignor."""
    a = get_assignor("roundrobin")
    assert isinstance(a, RoundRobinAssignor)
    assert a.name == "roundrobin"
    assert a.supported_protocols == (EAGER,)


def test_javadoc_identical_subscriptions():
    """Kafka's first javadoc example: two members share t0 and t1 (3 partitions each) by turns."""
    subs = {"C0": Subscription(["t0", "t1"]), "C1": Subscription(["t0", "t1"])}
    assert assign({"t0": 3, "t1": 3}, subs) == {
        "C0": tps("t0p0", "t0p2", "t1p1"),
        "C1": tps("t0p1", "t1p0", "t1p2"),
    }


def test_javadoc_different_subscriptions():
    """Kafka's second javadoc example: members not subscribed to a topic are skipped."""
    subs = {
        "C0": Subscription(["t0"]),
        "C1": Subscription(["t0", "t1"]),
        "C2": Subscription(["t0", "t1", "t2"]),
    }
    assert assign({"t0": 1, "t1": 2, "t2": 3}, subs) == {
        "C0": tps("t0p0"),
        "C1": tps("t1p0"),
        "C2": tps("t1p1", "t2p0", "t2p1", "t2p2"),
    }


def test_cursor_carries_across_topics():
    """The iterator continues from where the previous topic left it instead of restarting."""
    subs = {m: Subscription(["t0", "t1", "t2"]) for m in ("C0", "C1", "C2")}
    assert assign({"t0": 2, "t1": 0, "t2": 2}, subs) == {
        "C0": tps("t0p0", "t2p1"),
        "C1": tps("t0p1"),
        "C2": tps("t2p0"),
    }


def test_missing_topic_is_skipped():
    """A subscribed topic absent from the metadata assigns nothing and breaks nothing."""
    subs = {"C0": Subscription(["deleted"]), "C1": Subscription(["t0", "deleted"])}
    assert assign({"t0": 2}, subs) == {"C0": [], "C1": tps("t0p0", "t0p1")}


def test_static_members_ordered_by_instance_id():
    """Static members are ordered by group.instance.id, ahead of dynamic members by member id."""
    subs = {
        "a-dynamic": Subscription(["t0"]),
        "z-static": Subscription(["t0"], group_instance_id="I0"),
        "m-static": Subscription(["t0"], group_instance_id="I1"),
    }
    assert assign({"t0": 4}, subs) == {
        "z-static": tps("t0p0", "t0p3"),
        "m-static": tps("t0p1"),
        "a-dynamic": tps("t0p2"),
    }


def test_javadoc_rolling_bounce_of_static_members():
    """Kafka's static-membership example: new member ids after a bounce reshuffle nothing."""
    before = {f"C{i}": Subscription(["t0", "t1"], group_instance_id=f"I{i}") for i in range(3)}
    renamed = {"C0": "C5", "C1": "C3", "C2": "C4"}
    after = {renamed[m]: s for m, s in before.items()}
    expected = {
        "I0": tps("t0p0", "t1p0"),
        "I1": tps("t0p1", "t1p1"),
        "I2": tps("t0p2", "t1p2"),
    }
    for subs in (before, after):
        result = assign({"t0": 3, "t1": 3}, subs)
        assert {subs[m].group_instance_id: p for m, p in result.items()} == expected


def test_rolling_bounce_of_dynamic_members_reshuffles():
    """Kafka's counter-example: dynamic members are ordered by member id, so new ids reshuffle."""
    subs = {m: Subscription(["t0", "t1"]) for m in ("C3", "C4", "C5")}
    assert assign({"t0": 3, "t1": 3}, subs) == {
        "C3": tps("t0p0", "t1p0"),
        "C4": tps("t0p1", "t1p1"),
        "C5": tps("t0p2", "t1p2"),
    }


@given(groups(uniform=True, with_owned=False))
def test_identical_subscriptions_are_balanced(group):
    """When every member subscribes to the same topics, partition counts differ by at most one."""
    metadata, subs = group
    counts = [len(p) for p in assign(metadata, subs).values()]
    assert max(counts) - min(counts) <= 1
