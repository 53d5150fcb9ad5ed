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

A member's list follows Kafka's topic order, then partition number: topics in the iteration order
of ``AbstractPartitionAssignor``'s ``partitionsPerTopic`` (a ``HashMap`` filled from a ``HashSet`` of
the subscribed topics, each in first-seen order over the members in ``HashMap`` order). Every
member appears in the result, with an empty list when it gets nothing.

Kafka 3.5 added rack-aware range assignment (KIP-881). It needs the replica racks of every
partition, which our metadata does not carry; without them Kafka falls back to exactly the ranges
above, so ``Subscription.rack_id`` is ignored here.

The work is per topic with numpy, never per partition in Python: a group of 10,000 members and a
million partitions spends most of its time building the ``TopicPartition`` objects of the answer.
"""

from __future__ import annotations

import numpy as np

from ._base import EAGER, Assignor
from ._java import hashmap_insertion_order, hashmap_order
from ._kafka_work import KafkaWork, range_work
from ._layout import TopicLayout, sorted_members, subscribers_per_topic
from .types import Assignment, Subscription


class RangeAssignor(Assignor):
    """Kafka's ``org.apache.kafka.clients.consumer.RangeAssignor`` (without rack awareness)."""

    name = "range"
    supported_protocols = (EAGER,)

    def _assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, Assignment]:
        # Kafka's work is a function of the input alone: counted when first read.
        self.last_work = KafkaWork.of(
            self.name, lambda: range_work(partitions_per_topic, subscriptions)
        )
        members = sorted_members(subscriptions)
        layout = TopicLayout(
            partitions_per_topic,
            topic_order=_kafka_topic_order(partitions_per_topic, subscriptions),
        )
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
        return layout.assignments(members, member_of_slot, np.arange(layout.total))


def _kafka_topic_order(
    partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
) -> list[str]:
    """Iteration order of Kafka's ``partitionsPerTopic``: topics put into a ``HashSet`` as the
    members (in ``HashMap`` order) list them, then into a ``HashMap`` in that set's order."""
    first_seen = dict.fromkeys(subscriptions[m].topics for m in hashmap_order(subscriptions))
    topic_set = hashmap_insertion_order(
        t for topics in first_seen for t in topics if t in partitions_per_topic
    )
    return hashmap_insertion_order(topic_set)
