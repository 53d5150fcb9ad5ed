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

from bisect import bisect_left, insort
from collections.abc import Mapping

import numpy as np

from .._java import java_sort_key
from ._group import GroupArrays, by_subscription
from .kafka_time import EMPTY, RANGE, ServerWork
from .spec import GroupAssignment, GroupSpec, SubscribedTopicDescriber, SubscriptionType


class RangeAssignor:
    """Kafka's server-side ``RangeAssignor``."""

    name = "range"

    def assign(
        self, group_spec: GroupSpec, topics: SubscribedTopicDescriber | Mapping[str, int]
    ) -> GroupAssignment:
        describer = SubscribedTopicDescriber.of(topics)
        if len(group_spec) == 0:
            empty = GroupAssignment.empty()
            empty.kafka_work = ServerWork(EMPTY)
            return empty
        ids = group_spec.member_ids
        distinct, _ = by_subscription(
            group_spec._member_topics(), group_spec._has_one_subscription()
        )
        order = _SORTED.member_order(group_spec)
        homogeneous = len(distinct) == 1
        if not homogeneous:
            rank_of_member = np.empty(len(ids), dtype=np.int64)
            rank_of_member[order] = np.arange(len(ids))
        all_topics = set().union(*distinct)
        g = GroupArrays(group_spec, describer, all_topics, read_assignment=False)
        # Subscribers of each topic, in sorted-member order.
        per_topic: list[list[np.ndarray]] = [[] for _ in g.topics]
        for topic_set, arr in distinct.items():
            for t in topic_set:
                r = g.rank.get(t)
                if r is not None:
                    per_topic[r].append(arr)
        owner = g.owner  # all -1: the current assignment is not read
        cache: dict[int, np.ndarray] = {}
        ranges = 0
        for r, chunks in enumerate(per_topic):
            n = int(g.counts[r])
            if n == 0 or not chunks:
                continue
            ranges += min(n, sum(len(c) for c in chunks))
            subs = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
            key = id(chunks[0]) if len(chunks) == 1 else None
            ranked = cache.get(key) if key is not None else None
            if ranked is None:
                # one subscription: every member subscribes, in sorted order
                ranked = (
                    order if homogeneous else subs[np.argsort(rank_of_member[subs], kind="stable")]
                )
                if key is not None:
                    cache[key] = ranked
            k = ranked.size
            quota, extra = divmod(n, k)
            lengths = np.full(k, quota, dtype=np.int64)
            lengths[:extra] += 1
            lo = int(g.offsets[r])
            owner[lo : lo + n] = np.repeat(ranked, lengths)
        result = g.result(owner)
        result.kafka_work = ServerWork(
            RANGE,
            homogeneous=group_spec.subscription_type is SubscriptionType.HOMOGENEOUS,
            members=len(ids),
            topics=len(g.topics),
            pairs=sum(
                len(arr) * sum(1 for t in topic_set if t in g.rank)
                for topic_set, arr in distinct.items()
            ),
            ranges=ranges,
        )
        return result

    def __repr__(self) -> str:
        return f"<server assignor {self.name}>"


class _SortedMembers:
    """Kafka's ``sortMemberIds``: static members by instance id first, then the others by member
    id, both in ``String.compareTo`` order; as positions into the spec's ``member_ids``.

    The dynamic members' sorted ids of the last call are kept and brought up to date with the
    members that joined or left since (a coordinator's next epoch differs by a few members), so
    a 10,000-member group is not sorted again at every epoch; the result is the same as a full
    sort's (a sorted list and ``bisect`` under the same key)."""

    # More changes than this since the last call: sort from scratch.
    FEW = 64

    def __init__(self):
        self._sorted: list[str] = []
        self._set: set[str] = set()
        self._key = None  # java_sort_key unless every id is ASCII (then Python's order is Java's)

    def member_order(self, spec: GroupSpec) -> np.ndarray:
        ids = spec.member_ids
        instance_ids = spec._instance_ids()
        n_dynamic = instance_ids.count(None)
        if n_dynamic == len(ids):
            static: list[int] = []
            dynamic_ids = ids
        else:
            static = [i for i, inst in enumerate(instance_ids) if inst is not None]
            # (``or ""``: not None here)
            static.sort(key=lambda i: (java_sort_key(instance_ids[i] or ""), java_sort_key(ids[i])))
            dynamic_ids = tuple(
                m for m, inst in zip(ids, instance_ids, strict=True) if inst is None
            )
        # a plain dict: C-level lookups below
        index = dict(zip(ids, range(len(ids)), strict=True))
        ranked = self._sorted_ids(dynamic_ids)
        out = np.fromiter(map(index.__getitem__, ranked), dtype=np.int64, count=len(ranked))
        return np.concatenate((np.array(static, dtype=np.int64), out)) if static else out

    def _sorted_ids(self, ids) -> list[str]:
        key = None if "".join(ids).isascii() else java_sort_key
        new = set(ids)
        old = self._set
        if key is self._key and len(new) <= len(old) + self.FEW and len(old) <= len(new) + self.FEW:
            added = new - old
            removed = old - new
            if len(added) + len(removed) <= self.FEW:
                out = self._sorted
                for m in removed:
                    del out[bisect_left(out, m if key is None else key(m), key=key)]
                for m in added:
                    insort(out, m, key=key)
                self._set = new
                return out
        self._sorted = sorted(new, key=key)
        self._set = new
        self._key = key
        return self._sorted


_SORTED = _SortedMembers()


def _sorted_member_indices(
    member_ids: tuple[str, ...], instance_ids: list[str | None]
) -> list[int]:
    """Kafka's ``sortMemberIds`` from scratch (the reference ``_SortedMembers`` must agree with)."""
    static = [i for i, inst in enumerate(instance_ids) if inst is not None]
    dynamic = [i for i, inst in enumerate(instance_ids) if inst is None]
    static.sort(
        key=lambda i: (java_sort_key(instance_ids[i] or ""), java_sort_key(member_ids[i]))
    )  # (not None here)
    dynamic.sort(key=lambda i: java_sort_key(member_ids[i]))
    return static + dynamic
