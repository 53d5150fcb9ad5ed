"""Server-side RangeAssignor ("range"), after Kafka's
``org.apache.kafka.coordinator.group.assignor.RangeAssignor`` (rewritten in KAFKA-16944).

Not the client-side ``range`` of ``assignors.range``, though the cut is the same: each topic is
split into contiguous ranges, one per subscriber, independently of the other topics. The
subscribers of a topic are taken in Kafka's order: static members (with a ``group.instance.id``)
first, by instance id, then the others by member id (``String.compareTo``). With ``n`` partitions
and ``k`` subscribers, each gets ``n // k`` and the first ``n % k`` one more, in that order.
Topics with the same partition count and the same subscribers are therefore co-partitioned: a
member gets the same partition ids of each, which joins need.

The assignor does not look at the current assignment. Stickiness comes only from the order:
with static members (instance ids survive restarts) and an unchanged group and metadata, every
member gets the same ranges again; a member id that changes can shuffle everything.

Example: members M0 and M1 subscribe to T1 and T2, three partitions each: M0 gets T1[0,1] T2[0,1]
and M1 gets T1[2] T2[2].

Rack awareness: none (KAFKA-16694 removed it before 4.0). Topics that do not exist are dropped
(Kafka's coordinator never resolves them; its assignor would throw if handed one). Every member
is in the result, with an empty assignment when it gets nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .._java import java_sort_key
from ._group import GroupArrays
from .spec import GroupAssignment, GroupSpec, SubscribedTopicDescriber


class RangeAssignor:
    """Kafka's server-side ``RangeAssignor``."""

    name = "range"

    def assign(
        self, group_spec: GroupSpec, topics: SubscribedTopicDescriber | Mapping[str, int]
    ) -> GroupAssignment:
        describer = SubscribedTopicDescriber.of(topics)
        if len(group_spec) == 0:
            return GroupAssignment.empty()
        ids = group_spec.member_ids
        order = _sorted_member_indices(ids, group_spec._instance_ids())
        rank_of_member = np.empty(len(ids), dtype=np.int64)
        rank_of_member[order] = np.arange(len(ids))
        distinct: dict[frozenset[str], list[int]] = {}
        for i, member_topics in enumerate(group_spec._member_topics()):
            distinct.setdefault(member_topics, []).append(i)
        all_topics = set().union(*distinct)
        g = GroupArrays(group_spec, describer, all_topics, read_assignment=False)
        # Subscribers of each topic, in sorted-member order.
        per_topic: list[list[np.ndarray]] = [[] for _ in g.topics]
        for topic_set, idx in distinct.items():
            arr = np.array(idx, dtype=np.int64)
            for t in topic_set:
                r = g.rank.get(t)
                if r is not None:
                    per_topic[r].append(arr)
        owner = g.owner  # all -1: the current assignment is not read
        cache: dict[int, np.ndarray] = {}
        for r, chunks in enumerate(per_topic):
            n = int(g.counts[r])
            if n == 0 or not chunks:
                continue
            subs = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
            key = id(chunks[0]) if len(chunks) == 1 else None
            ranked = cache.get(key) if key is not None else None
            if ranked is None:
                ranked = subs[np.argsort(rank_of_member[subs], kind="stable")]
                if key is not None:
                    cache[key] = ranked
            k = ranked.size
            quota, extra = divmod(n, k)
            lengths = np.full(k, quota, dtype=np.int64)
            lengths[:extra] += 1
            lo = int(g.offsets[r])
            owner[lo : lo + n] = np.repeat(ranked, lengths)
        return g.result(owner)

    def __repr__(self) -> str:
        return f"<server assignor {self.name}>"


def _sorted_member_indices(
    member_ids: tuple[str, ...], instance_ids: list[str | None]
) -> list[int]:
    """Kafka's ``sortMemberIds``: static members by instance id first, then the others by member
    id, both in ``String.compareTo`` order."""
    static = [i for i, inst in enumerate(instance_ids) if inst is not None]
    dynamic = [i for i, inst in enumerate(instance_ids) if inst is None]
    static.sort(
        key=lambda i: (java_sort_key(instance_ids[i] or ""), java_sort_key(member_ids[i]))
    )  # (not None here)
    ids = [member_ids[i] for i in dynamic]
    joined = "".join(ids)
    if len(ids) > 64 and joined.isascii() and "\x00" not in joined:
        # numpy compares ASCII strings as String.compareTo does, but drops trailing NULs
        # ("a" == "a\x00"), so ids with a NUL take the Python path.
        dynamic = [dynamic[j] for j in np.argsort(np.array(ids, dtype=str), kind="stable").tolist()]
    else:
        dynamic.sort(key=lambda i: java_sort_key(member_ids[i]))
    return static + dynamic
