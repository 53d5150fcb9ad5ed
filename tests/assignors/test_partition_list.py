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
    assert (
        pl[0] == TP("b", 1)
        and pl[-1] == TP("a", 2)
        and pl[1:] == plain[1:]
        and isinstance(pl[1:], list)
    )
    assert (
        list(pl) == plain
        and list(reversed(pl)) == plain[::-1]
        and TP("a", 2) in pl
        and TP("a", 1) not in pl
    )
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
    result = get_assignor("roundrobin").assign(
        {"t": 5, "u": 1}, {"c1": Subscription(["t", "u"]), "c2": Subscription(["t"])}
    )
    parts = result["c1"].partitions
    assert isinstance(parts, PartitionList)
    ranks = np.searchsorted(parts.offsets, parts.indices, side="right") - 1
    pairs = [
        (parts.topics[r], int(i - parts.offsets[r]))
        for r, i in zip(ranks, parts.indices, strict=True)
    ]
    assert (
        pairs
        == [(tp.topic, tp.partition) for tp in parts]
        == [("t", 0), ("t", 2), ("t", 4), ("u", 0)]
    )


def test_owned_partitions_from_a_result_list_are_the_same_tuple():
    """A Subscription built from an assignor's result list holds the equal tuple of partitions:
    same ==, hash, repr and pickle as one built from the TopicPartition objects."""
    result = get_assignor("roundrobin").assign(
        {"t": 5, "u": 1}, {"c1": Subscription(["t", "u"]), "c2": Subscription(["t"])}
    )
    from_list = Subscription(["t", "u"], owned_partitions=result["c1"].partitions, generation=1)
    from_objects = Subscription(
        ["t", "u"], owned_partitions=list(result["c1"].partitions), generation=1
    )
    assert (
        from_list == from_objects
        and hash(from_list) == hash(from_objects)
        and repr(from_list) == repr(from_objects)
    )
    assert isinstance(from_list.owned_partitions, tuple) and from_list.owned_partitions == (
        TP("t", 0),
        TP("t", 2),
        TP("t", 4),
        TP("u", 0),
    )
    assert pickle.loads(pickle.dumps(from_list)) == from_objects
    assert Subscription(["t"], owned_partitions=result["c2"].partitions[:0]).owned_partitions == ()


def _coop_round(metadata, topics_of, owned_of, as_objects):
    subs = {
        m: Subscription(
            topics_of[m],
            owned_partitions=list(owned_of[m]) if as_objects else owned_of[m],
            generation=1,
        )
        for m in topics_of
    }
    return {
        m: list(a.partitions)
        for m, a in get_assignor("cooperative-sticky").assign(metadata, subs).items()
    }


def test_cooperative_claims_from_result_lists_match_claims_from_objects():
    """Owned partitions handed back as result lists (read as index arrays) give the same
    assignment as the same partitions given as TopicPartition objects, also when the metadata
    changed since (topics deleted, shrunk or added before others) and when the lists come from
    two different assignments."""
    rng = np.random.default_rng(7)
    for trial in range(12):
        names = [f"t{i}" for i in range(6)]
        before = {t: int(rng.integers(1, 9)) for t in names}
        topics_of = {
            f"c{i}": sorted(rng.choice(names, int(rng.integers(1, 6)), replace=False).tolist())
            for i in range(7)
        }
        first = get_assignor("roundrobin" if trial % 2 else "range").assign(
            before, {m: Subscription(ts) for m, ts in topics_of.items()}
        )
        owned_of = {m: a.partitions for m, a in first.items()}
        if trial % 3 == 0:  # some members' lists come from another assignment over other metadata
            other = get_assignor("range").assign(
                {"t1": 3, "t4": 9}, {m: Subscription(["t1", "t4"]) for m in ("c0", "c3")}
            )
            owned_of.update({m: a.partitions for m, a in other.items()})
        after = dict(before)
        del after[names[int(rng.integers(0, 6))]]
        shrunk = names[int(rng.integers(0, 6))]
        if shrunk in after:
            after[shrunk] = max(0, after[shrunk] - 3)
        after["a-new"] = 4  # ranks before every other topic
        for metadata in (before, after):
            assert _coop_round(metadata, topics_of, owned_of, True) == _coop_round(
                metadata, topics_of, owned_of, False
            )
