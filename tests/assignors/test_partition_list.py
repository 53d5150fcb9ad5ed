"""PartitionList: the assignors' lazily built list of partitions behaves like the list it stands for."""

from __future__ import annotations

import pickle

import numpy as np

from assignors import Assignment, Subscription, get_assignor
from assignors import TopicPartition as TP
from assignors._layout import PartitionList, TopicLayout


def test_partition_list_is_its_list():
    """Length, indexing, slicing, iteration, membership, repr, + and == match the plain list."""
    layout = TopicLayout({"a": 3, "b": 2})
    pl = layout.partition_list(np.array([4, 0, 2]))
    plain = [TP("b", 1), TP("a", 0), TP("a", 2)]
    assert len(pl) == 3 and pl == plain and plain == pl and pl != plain[:2]
    assert pl[0] == TP("b", 1) and pl[-1] == TP("a", 2) and pl[1:] == plain[1:] and isinstance(pl[1:], list)
    assert list(pl) == plain and list(reversed(pl)) == plain[::-1] and TP("a", 2) in pl and TP("a", 1) not in pl
    assert repr(pl) == repr(plain) and pl + [TP("a", 1)] == plain + [TP("a", 1)]
    assert pl.index(TP("a", 0)) == 1 and pl.count(TP("b", 1)) == 1
    assert pickle.loads(pickle.dumps(pl)) == plain
    assert Assignment(pl) == Assignment(plain)


def test_partition_lists_compare_by_partitions():
    """Two lists over different layouts are equal when they hold the same partitions in order."""
    one = TopicLayout({"a": 3, "b": 2}).partition_list(np.array([3, 4]))
    other = TopicLayout({"b": 2}).partition_list(np.array([0, 1]))
    assert one == other
    assert one != TopicLayout({"b": 2}).partition_list(np.array([1, 0]))


def test_assignors_hand_out_indices_without_building_partitions():
    """An array caller reads a member's partitions as (topic, number) arrays, and the result
    equals the TopicPartition list."""
    result = get_assignor("roundrobin").assign({"t": 5, "u": 1}, {"c1": Subscription(["t", "u"]), "c2": Subscription(["t"])})
    parts = result["c1"].partitions
    assert isinstance(parts, PartitionList)
    ranks = np.searchsorted(parts.offsets, parts.indices, side="right") - 1
    pairs = [(parts.topics[r], int(i - parts.offsets[r])) for r, i in zip(ranks, parts.indices, strict=True)]
    assert pairs == [(tp.topic, tp.partition) for tp in parts] == [("t", 0), ("t", 2), ("t", 4), ("u", 0)]
