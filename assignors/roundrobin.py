"""RoundRobinAssignor ("roundrobin"): partitions dealt one by one, after Kafka's
``RoundRobinAssignor``.

Algorithm. Lay out every partition of every subscribed topic that exists: topics sorted by name
(Java ``String`` order), partitions 0..n-1 within a topic. Sort the members in Kafka's member
order (``MemberInfo#compareTo``: static members by ``group.instance.id`` first, then dynamic
members by member id) and keep one circular cursor over them for the whole layout. For each
partition in turn, move the cursor past members that do not subscribe to its topic, give the
partition to the member under the cursor, then move the cursor one step. With identical
subscriptions the counts differ by at most one; with different subscriptions members are skipped
and the result can be lopsided.

Example (Kafka's own): C0 subscribes to t0; C1 to t0, t1; C2 to t0, t1, t2; the topics have 1, 2
and 3 partitions. t0p0 goes to C0 and the cursor moves to C1; t1p0 goes to C1, t1p1 to C2 and
the cursor wraps to C0; C0 and C1 do not subscribe to t2, so all of t2 goes to C2::

    C0: [t0p0]
    C1: [t1p0]
    C2: [t1p1, t2p0, t2p1, t2p2]

Static members are ordered by instance id, so a rolling bounce that hands out new member ids
does not reshuffle the group (as long as its membership and subscriptions stay the same).

How we compute it without a per-partition loop: within one topic the cursor only stops at that
topic's subscribers, so with ``S`` its subscribers' positions (ascending) the topic's partitions
go through ``S`` cyclically, starting at the first position at or after the cursor (wrapping to
``S[0]``). The cursor then rests just after the member that took the last partition. That is a
``searchsorted`` and a modular index per topic.
"""

from __future__ import annotations

import numpy as np

from ._base import EAGER, Assignor
from ._kafka_work import KafkaWork, roundrobin_work
from ._layout import TopicLayout, sorted_members, subscribers_per_topic
from .types import Assignment, Subscription


class RoundRobinAssignor(Assignor):
    """Kafka's ``org.apache.kafka.clients.consumer.RoundRobinAssignor``."""

    name = "roundrobin"
    supported_protocols = (EAGER,)

    def _assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, Assignment]:
        # Kafka's work is a function of the input alone: counted when first read.
        self.last_work = KafkaWork.of(
            self.name, lambda: roundrobin_work(partitions_per_topic, subscriptions)
        )
        members = sorted_members(subscriptions)
        layout = TopicLayout(partitions_per_topic)
        counts = layout.counts.tolist()
        cursor = 0  # position in `members` of the member the circular iterator points at
        chunks = []
        for rank, subscribers in enumerate(subscribers_per_topic(layout, members, subscriptions)):
            # k >= 1: Assignor.assign keeps only topics that some member subscribes to.
            n, k = counts[rank], len(subscribers)
            if n == 0:
                continue  # no partition, so the cursor does not move
            first = int(np.searchsorted(subscribers, cursor)) % k
            takers = subscribers[np.arange(first, first + n, dtype=np.int64) % k]
            chunks.append(takers)
            cursor = (int(takers[-1]) + 1) % len(members)
        member_of_slot = np.concatenate(chunks) if chunks else np.empty(0, dtype=np.int64)
        # Slots are every partition in layout order, which is also the order Kafka hands them out,
        # so each member's list comes out in (topic, partition) order.
        return layout.assignments(members, member_of_slot, np.arange(layout.total))
