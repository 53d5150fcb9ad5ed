"""Partitions as integers: the internal representation of the fast assignors.

Every partition of the metadata gets a global index in (topic, partition) order, topics sorted by
name like Kafka's ``TreeSet``/``Collections.sort`` of topic names. Algorithms work on numpy arrays
of those indices and convert to ``TopicPartition`` only at the edges.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import count, pairwise
from operator import attrgetter

import numpy as np

from ._base import member_sort_key, no_gc
from ._java import java_sort_key
from .types import Assignment, Subscription, TopicPartition


class PartitionList(Sequence[TopicPartition]):
    """An assignor's list of partitions for one member, kept as global indices of a layout.

    It behaves like the ``list[TopicPartition]`` it stands for (length, indexing, iteration,
    equality with a list, ``repr``), but builds the ``TopicPartition`` objects only when something
    first asks for one, once: at a million partitions, building them dominates an assignment, and
    callers that count or index partitions need none of them. ``topics``, ``offsets`` and
    ``indices`` expose the arrays (partition ``i`` is ``topics[r]``'s number
    ``indices[i] - offsets[r]`` for the rank ``r`` with ``offsets[r] <= indices[i] < offsets[r + 1]``).
    Immutable, like every assignor output; slicing gives a plain list.
    """

    # _src = (topics, offsets, base) is shared by every list of one assignment; the indices are
    # base[_lo:_hi]. The caches _idx and _tps stay unset until first read (setting them per list
    # would cost as much as the rest of building it, thousands of lists per assignment).
    __slots__ = ("_src", "_lo", "_hi", "_idx", "_tps")
    _src: tuple[Sequence[str], np.ndarray, np.ndarray]
    _lo: int
    _hi: int
    _idx: np.ndarray
    _tps: list[TopicPartition]

    def __init__(self, topics: Sequence[str], offsets: np.ndarray, indices: np.ndarray):
        self._src = (topics, offsets, indices)
        self._lo = 0
        self._hi = len(indices)

    @property
    def topics(self) -> Sequence[str]:
        return self._src[0]

    @property
    def offsets(self) -> np.ndarray:
        return self._src[1]

    @property
    def indices(self) -> np.ndarray:
        try:
            return self._idx
        except AttributeError:
            idx = self._idx = self._src[2][self._lo : self._hi]
            return idx

    @property
    def _index_source(self) -> tuple[Sequence[str], np.ndarray, np.ndarray]:
        """(topics, offsets, indices): what ``Subscription`` keeps beside the owned partitions it
        builds from this list (the arrays are never written, like the list itself)."""
        return self._src[0], self._src[1], self.indices

    def _list(self) -> list[TopicPartition]:
        try:
            return self._tps
        except AttributeError:
            tps = self._tps = _to_tps(self._src[0], self._src[1], self.indices)
            return tps

    def __len__(self) -> int:
        return self._hi - self._lo

    def __getitem__(self, i):
        return self._list()[i]

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(self._list())

    def __reversed__(self) -> Iterator[TopicPartition]:
        return reversed(self._list())

    def __contains__(self, tp: object) -> bool:
        return tp in self._list()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PartitionList):
            if other.topics is self.topics or (
                list(other.topics) == list(self.topics)
                and np.array_equal(other.offsets, self.offsets)
            ):
                a, b = self.indices, other.indices
                if a.dtype == b.dtype:  # the same bytes (a member comparing its assignment with
                    return a.tobytes() == b.tobytes()  # the last one: array_equal costs 5x more)
                return bool(np.array_equal(a, b))
            return self._list() == other._list()
        if isinstance(other, list):
            return self._list() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # like list

    def __add__(self, other):
        return self._list() + list(other)

    def __radd__(self, other):
        return list(other) + self._list()

    def __repr__(self) -> str:
        return repr(self._list())

    def __reduce__(self):
        return PartitionList, (list(self.topics), self.offsets, self.indices)


def partition_lists(
    topics: Sequence[str], offsets: np.ndarray, base: np.ndarray, bounds: Sequence[int]
) -> list[PartitionList]:
    """``PartitionList(topics, offsets, base[bounds[i]:bounds[i + 1]])`` for every ``i``, without
    slicing ``base`` until a list's indices are read (thousands of members per assignment)."""
    new = object.__new__
    src = (topics, offsets, base)
    out: list[PartitionList] = []
    append = out.append
    for lo, hi in pairwise(bounds):
        pl = new(PartitionList)
        pl._src = src
        pl._lo = lo
        pl._hi = hi
        append(pl)
    return out


def assignments_by_member(
    members: Sequence[str],
    topics: Sequence[str],
    offsets: np.ndarray,
    base: np.ndarray,
    bounds: Sequence[int],
) -> dict[str, Assignment]:
    """``{members[i]: Assignment(partition_lists(...)[i])}`` in one pass (thousands of members)."""
    if len(members) != len(bounds) - 1:
        raise ValueError("assignments_by_member: one member per pair of bounds")
    new = object.__new__
    src = (topics, offsets, base)
    out = {}
    for member, lo, hi in zip(members, bounds, bounds[1:]):  # noqa: B905 (checked above)
        pl = new(PartitionList)
        pl._src = src
        pl._lo = lo
        pl._hi = hi
        a = new(Assignment)
        a.partitions = pl
        a.user_data = None
        out[member] = a
    return out


def assignments_of(
    members: Iterable[str], lists: Iterable[Sequence[TopicPartition]]
) -> dict[str, Assignment]:
    """``{member: Assignment(partitions)}`` for parallel iterables, without ``Assignment.__init__``
    (thousands of members per assignment)."""
    new = object.__new__
    out = {}
    for member, partitions in zip(members, lists, strict=True):
        a = new(Assignment)
        a.partitions = partitions
        a.user_data = None
        out[member] = a
    return out


def concatenated_indices(lists: Sequence[PartitionList]) -> tuple[np.ndarray, list[int]]:
    """Every list's global indices back to back, and each list's length. Lists built together
    (consecutive slices of one array, as ``partition_lists`` makes them) cost one slice."""
    lengths = list(map(len, lists))
    if not lists:
        return np.empty(0, dtype=np.int64), lengths
    src = lists[0]._src
    if all(pl._src is src for pl in lists):
        los = list(map(_lo_of, lists))
        his = list(map(_hi_of, lists))
        if his[:-1] == los[1:]:
            return src[2][los[0] : his[-1]], lengths
    return np.concatenate([pl.indices for pl in lists]).astype(np.int64, copy=False), lengths


_lo_of = attrgetter("_lo")
_hi_of = attrgetter("_hi")


def _to_tps(
    topics: Sequence[str], offsets: np.ndarray, indices: np.ndarray
) -> list[TopicPartition]:
    """``TopicPartition`` objects for global indices, in the given order."""
    indices = np.asarray(indices, dtype=np.int64)
    if indices.size == 0:
        return []
    if len(topics) == 1:
        names = [topics[0]] * indices.size
        parts = indices.tolist()
    else:
        ranks = np.searchsorted(offsets, indices, side="right") - 1
        parts = (indices - offsets[ranks]).tolist()
        names = [topics[r] for r in ranks.tolist()]
    with no_gc():
        return list(map(TopicPartition, names, parts))


class TopicLayout:
    """Global integer index of every partition: ``offsets[topic_rank] + partition``."""

    def __init__(
        self, partitions_per_topic: Mapping[str, int], topic_order: Sequence[str] | None = None
    ):
        topics = (
            list(topic_order)
            if topic_order is not None
            else sorted(partitions_per_topic, key=java_sort_key)
        )
        self.topics: list[str] = topics
        self.rank: dict[str, int] = {t: i for i, t in enumerate(topics)}
        self.counts = np.array([partitions_per_topic[t] for t in topics], dtype=np.int64)
        self.offsets = np.zeros(len(topics) + 1, dtype=np.int64)
        np.cumsum(self.counts, out=self.offsets[1:])
        self.total = int(self.offsets[-1])

    def index_of(self, tps: Iterable[TopicPartition]) -> np.ndarray:
        """Global indices of ``tps``; -1 for a topic not in the layout or a partition out of range."""
        rank = self.rank
        offsets = self.offsets.tolist()
        counts = self.counts.tolist()
        out: list[int] = []
        append = out.append
        for tp in tps:
            r = rank.get(tp.topic)
            if r is None or not 0 <= tp.partition < counts[r]:
                append(-1)
            else:
                append(offsets[r] + tp.partition)
        return np.array(out, dtype=np.int64)

    def topic_rank_of(self, indices: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.offsets, indices, side="right") - 1

    def to_tps(self, indices: np.ndarray) -> list[TopicPartition]:
        """``TopicPartition`` objects for global indices, in the given order."""
        return _to_tps(self.topics, self.offsets, indices)

    def partition_list(self, indices: np.ndarray) -> PartitionList:
        """The partitions at global ``indices`` (in that order), built lazily."""
        return PartitionList(self.topics, self.offsets, np.asarray(indices, dtype=np.int64))

    def _grouped(
        self, n_members: int, member_of_slot: np.ndarray, partition_of_slot: np.ndarray
    ) -> tuple[np.ndarray, list[int]]:
        member_of_slot = np.asarray(member_of_slot, dtype=np.int64)
        order = stable_argsort(member_of_slot, n_members)
        parts = np.asarray(partition_of_slot, dtype=np.int64)[order]
        parts.flags.writeable = False  # shared by the members' lists
        return parts, np.searchsorted(member_of_slot[order], np.arange(n_members + 1)).tolist()

    def group_by_member(
        self, members: Sequence[str], member_of_slot: np.ndarray, partition_of_slot: np.ndarray
    ) -> dict[str, PartitionList]:
        """``{member: [partitions...]}`` from parallel arrays, keeping slot order within a member.

        Every member of ``members`` is present, possibly with an empty list. The lists are
        ``PartitionList``s: no ``TopicPartition`` is built until a caller reads one.
        """
        parts, bounds = self._grouped(len(members), member_of_slot, partition_of_slot)
        return dict(
            zip(members, partition_lists(self.topics, self.offsets, parts, bounds), strict=True)
        )

    def assignments(
        self, members: Sequence[str], member_of_slot: np.ndarray, partition_of_slot: np.ndarray
    ) -> dict[str, Assignment]:
        """``{member: Assignment(partitions)}`` with ``group_by_member``'s lists."""
        parts, bounds = self._grouped(len(members), member_of_slot, partition_of_slot)
        return assignments_by_member(members, self.topics, self.offsets, parts, bounds)


def stable_argsort(values: np.ndarray, bound: int) -> np.ndarray:
    """``np.argsort(values, kind="stable")`` for integers in ``[0, bound)``: numpy radix-sorts
    16-bit integers in linear time, several times faster than its merge sort of int64."""
    if bound <= 1 << 16:
        return np.argsort(values.astype(np.uint16), kind="stable")
    return np.argsort(values, kind="stable")


_instance_id_of = attrgetter("group_instance_id")
_topics_of = attrgetter("topics")


def sorted_members(subscriptions: dict[str, Subscription]) -> list[str]:
    """Member ids in Kafka's ``MemberInfo`` order (static by instance id, then dynamic by id)."""
    if set(map(_instance_id_of, subscriptions.values())) <= {None}:
        # Dynamic members only: by member id (ASCII ids sort the same without the key).
        if "".join(subscriptions).isascii():
            return sorted(subscriptions)
        return sorted(subscriptions, key=java_sort_key)
    return sorted(subscriptions, key=lambda m: member_sort_key(m, subscriptions[m]))


def subscribers_per_topic(
    layout: TopicLayout, members: Sequence[str], subscriptions: dict[str, Subscription]
) -> list[np.ndarray]:
    """For each topic of ``layout`` (by rank), the ascending positions in ``members`` of the
    members subscribed to it. Shared by the range and round-robin assignors."""
    # Groups tend to have a handful of distinct subscriptions. Working per distinct topic list
    # rather than per (member, topic) keeps 10,000 members x 100 topics off the Python loop.
    # Members with equal topics form a block: each member's block is named by the position of
    # the first member with its topics (dict.setdefault in a C-level map, no Python loop).
    topics_of = list(map(_topics_of, map(subscriptions.__getitem__, members)))
    first_of: dict[tuple[str, ...], int] = {}
    if topics_of and topics_of.count(topics_of[0]) == len(topics_of):
        # One subscription for everyone (list.count compares by identity first: one C pass)
        first_of[topics_of[0]] = 0
    else:
        firsts = list(map(first_of.setdefault, topics_of, count()))
    if len(first_of) == 1:
        blocks = [np.arange(len(members), dtype=np.int64)]
    else:
        firsts_a = np.array(firsts, dtype=np.int64)
        order = np.argsort(firsts_a, kind="stable")  # positions ascend within a block
        cuts = np.flatnonzero(np.diff(firsts_a[order])) + 1
        by_first = {int(p[0]): p for p in np.split(order, cuts)}
        blocks = [by_first[f] for f in first_of.values()]
    blocks_of_topic: list[list[int]] = [[] for _ in layout.topics]
    rank = layout.rank
    for block, topics in enumerate(first_of):
        for r in {rank[t] for t in topics if t in rank}:
            blocks_of_topic[r].append(block)
    # Topics with the same subscribers share one array.
    cache: dict[tuple[int, ...], np.ndarray] = {}
    out = []
    for block_ids in blocks_of_topic:
        key = tuple(block_ids)
        subscribers = cache.get(key)
        if subscribers is None:
            if len(block_ids) == 1:
                subscribers = blocks[block_ids[0]]
            elif block_ids:
                subscribers = np.sort(np.concatenate([blocks[b] for b in block_ids]))
            else:
                subscribers = np.empty(0, dtype=np.int64)
            cache[key] = subscribers
        out.append(subscribers)
    return out
