"""RangeAssignor ("range"): contiguous ranges of each topic, after Kafka's ``RangeAssignor``.

Algorithm. Topics are assigned one at a time and independently. For a topic with ``n``
partitions, take the members subscribed to it in Kafka's member order (``MemberInfo#compareTo``:
static members by ``group.instance.id`` first, then dynamic members by member id) and call their
number ``k``. Each gets ``n // k`` partitions and the first ``n % k`` of them one more; member
``i`` of that list gets the contiguous range that starts at ``(n // k) * i + min(i, n % k)``.
Because every topic is cut the same way, topics with equal partition counts and equal subscribers
are co-partitioned: one member gets the same partition numbers of each of them, which is what
joins on keys need. The price is imbalance: the first ``n % k`` members get the extra partition of
every topic, so with many topics they carry more than the rest.

Example: members C0 and C1 both subscribe to t0 and t1, three partitions each. Per topic,
``3 // 2 = 1`` and ``3 % 2 = 1``, so C0 gets partitions 0-1 and C1 gets partition 2::

    C0: [t0p0, t0p1, t1p0, t1p1]
    C1: [t0p2, t1p2]

A member's list is ordered by topic name (Java ``String`` order), then partition number. Every
member appears in the result, with an empty list when it gets nothing.

Kafka 3.5 added rack-aware range assignment (KIP-881). It needs the replica racks of every
partition, which our metadata does not carry; without them Kafka falls back to exactly the ranges
above, so ``Subscription.rack_id`` is ignored here.

The work is per topic with numpy, never per partition in Python: a group of 10,000 members and a
million partitions spends most of its time building the ``TopicPartition`` objects of the answer.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._base import EAGER, Assignor, member_sort_key
from ._layout import TopicLayout
from .types import Assignment, Subscription


class RangeAssignor(Assignor):
    """Kafka's ``org.apache.kafka.clients.consumer.RangeAssignor`` (without rack awareness)."""

    name = "range"
    supported_protocols = (EAGER,)

    def _assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, Assignment]:
        members = sorted_members(subscriptions)
        layout = TopicLayout(partitions_per_topic)
        counts = layout.counts.tolist()
        chunks = []
        for rank, subscribers in enumerate(subscribers_per_topic(layout, members, subscriptions)):
            # k >= 1: Assignor.assign keeps only topics that some member subscribes to.
            n, k = counts[rank], len(subscribers)
            if n == 0:
                continue
            per_member, extra = divmod(n, k)
            lengths = np.full(k, per_member, dtype=np.int64)
            lengths[:extra] += 1
            # The ranges are contiguous and in member order, so repeating each subscriber's
            # position by its range length labels partitions 0..n-1 in order.
            chunks.append(np.repeat(subscribers, lengths))
        member_of_slot = np.concatenate(chunks) if chunks else np.empty(0, dtype=np.int64)
        # Slots are every partition of every topic, in global index order.
        owned = layout.group_by_member(members, member_of_slot, np.arange(layout.total))
        return {m: Assignment(tps) for m, tps in owned.items()}


def sorted_members(subscriptions: dict[str, Subscription]) -> list[str]:
    """Member ids in Kafka's ``MemberInfo`` order (static by instance id, then dynamic by id)."""
    return sorted(subscriptions, key=lambda m: member_sort_key(m, subscriptions[m]))


def subscribers_per_topic(
    layout: TopicLayout, members: Sequence[str], subscriptions: dict[str, Subscription]
) -> list[np.ndarray]:
    """For each topic of ``layout`` (by rank), the ascending positions in ``members`` of the
    members subscribed to it. Shared with the round-robin assignor."""
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
