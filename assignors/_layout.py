"""Partitions as integers: the internal representation of the fast assignors.

Every partition of the metadata gets a global index in (topic, partition) order, topics sorted by
name like Kafka's ``TreeSet``/``Collections.sort`` of topic names. Algorithms work on numpy arrays
of those indices and convert to ``TopicPartition`` only at the edges.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager

import numpy as np

from ._base import member_sort_key
from ._java import java_sort_key
from .types import Subscription, TopicPartition


@contextmanager
def no_gc():
    """Pause the cyclic GC while building millions of small objects (it halves the cost)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class TopicLayout:
    """Global integer index of every partition: ``offsets[topic_rank] + partition``."""

    def __init__(self, partitions_per_topic: Mapping[str, int], topic_order: Sequence[str] | None = None):
        topics = list(topic_order) if topic_order is not None else sorted(partitions_per_topic, key=java_sort_key)
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
        out = []
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
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size == 0:
            return []
        ranks = self.topic_rank_of(indices)
        parts = (indices - self.offsets[ranks]).tolist()
        names = [self.topics[r] for r in ranks.tolist()] if len(self.topics) > 1 else [self.topics[0]] * len(parts)
        with no_gc():
            return list(map(TopicPartition, names, parts))

    def group_by_member(
        self, members: Sequence[str], member_of_slot: np.ndarray, partition_of_slot: np.ndarray
    ) -> dict[str, list[TopicPartition]]:
        """``{member: [partitions...]}`` from parallel arrays, keeping slot order within a member.

        Every member of ``members`` is present, possibly with an empty list.
        """
        member_of_slot = np.asarray(member_of_slot, dtype=np.int64)
        order = np.argsort(member_of_slot, kind="stable")
        tps = self.to_tps(np.asarray(partition_of_slot, dtype=np.int64)[order])
        bounds = np.searchsorted(member_of_slot[order], np.arange(len(members) + 1)).tolist()
        return {m: tps[bounds[i]:bounds[i + 1]] for i, m in enumerate(members)}


def sorted_members(subscriptions: dict[str, Subscription]) -> list[str]:
    """Member ids in Kafka's ``MemberInfo`` order (static by instance id, then dynamic by id)."""
    return sorted(subscriptions, key=lambda m: member_sort_key(m, subscriptions[m]))


def subscribers_per_topic(
    layout: TopicLayout, members: Sequence[str], subscriptions: dict[str, Subscription]
) -> list[np.ndarray]:
    """For each topic of ``layout`` (by rank), the ascending positions in ``members`` of the
    members subscribed to it. Shared by the range and round-robin assignors."""
    # Groups tend to have a handful of distinct subscriptions. Working per distinct topic list
    # rather than per (member, topic) keeps 10,000 members x 100 topics off the Python loop.
    positions_of: dict[tuple[str, ...], list[int]] = {}
    for position, member in enumerate(members):
        positions_of.setdefault(subscriptions[member].topics, []).append(position)
    blocks: list[np.ndarray] = []
    blocks_of_topic: list[list[int]] = [[] for _ in layout.topics]
    rank = layout.rank
    for block, (topics, positions) in enumerate(positions_of.items()):
        blocks.append(np.array(positions, dtype=np.int64))
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
