"""ConsumerCoordinator.validateCooperativeAssignment as arrays: which partitions one cooperative
round adds to one member while it revokes them from another.

It runs on every cooperative round, so it compares integer keys with numpy's set operations
instead of sets of ``TopicPartition`` (at 10,000 members x 100,000 partitions: tens of
milliseconds instead of most of a second); only a conflict's report names partitions.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter

import numpy as np

from assignors import Assignment, Subscription, TopicPartition

_TOPIC = attrgetter("topic")
_PARTITION = attrgetter("partition")


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """``np.unique(keys)`` by sorting (numpy's hash-based unique is several times slower here)."""
    keys = np.sort(keys)
    if keys.size > 1:
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
    return keys


def _within(keys: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """Which of ``keys`` are in ``sorted_keys`` (sorted, unique)."""
    if sorted_keys.size == 0:
        return np.zeros(keys.size, dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_keys, keys), sorted_keys.size - 1)
    return sorted_keys[pos] == keys


class _RoundKeys:
    """The owned and assigned partitions of one round's members as integer keys
    ``(member * topics + topic) * width + partition`` (see ``cooperative_conflicts``).

    An assignor's partition lists that carry integer ``indices`` over their own ``topics`` and
    ``offsets`` (the fast assignors' lists) are converted as arrays, without building their
    ``TopicPartition`` objects; any other sequence of partitions one by one."""

    def __init__(self):
        self.topic_ids: dict[str, int] = {}
        self._owned: list[tuple] = []  # (member, topic ids, partitions) chunks
        self._assigned: list[tuple] = []
        self._lists: dict[int, tuple] = {}  # id(topics) -> (topics, offsets, [(member, indices)])
        self._width = 0

    def _topic_id(self, topic: str) -> int:
        tid = self.topic_ids.get(topic)
        if tid is None:
            tid = self.topic_ids[topic] = len(self.topic_ids)
        return tid

    def _add(self, out: list, member: int, tps) -> None:
        if tps:
            topics = list(map(_TOPIC, tps))
            ids = self.topic_ids
            for topic in set(topics).difference(ids):
                self._topic_id(topic)
            out.append((member, list(map(ids.__getitem__, topics)), list(map(_PARTITION, tps))))

    def add_owned(self, member: int, tps) -> None:
        self._add(self._owned, member, tps)

    def add_assigned(self, member: int, tps) -> None:
        indices = getattr(tps, "indices", None)
        if indices is None:
            self._add(self._assigned, member, tps)
        elif len(indices):
            group = self._lists.get(id(tps.topics))
            if group is None:
                group = self._lists[id(tps.topics)] = (tps.topics, tps.offsets, [])
            group[2].append((member, indices))

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(owned keys, assigned keys); call once, after every ``add_*``."""
        owned = self._columns(self._owned)
        assigned = [self._columns(self._assigned)]
        for topics, offsets, lists in self._lists.values():
            indices = np.concatenate([idx for _, idx in lists]).astype(np.int64, copy=False)
            member = np.repeat(
                np.array([i for i, _ in lists], dtype=np.int64), [len(idx) for _, idx in lists]
            )
            ranks = np.searchsorted(offsets, indices, side="right") - 1
            tids = np.array([self._topic_id(t) for t in topics], dtype=np.int64)
            assigned.append((member, tids[ranks], indices - offsets[ranks]))
        assigned_columns = tuple(np.concatenate(c) for c in zip(*assigned, strict=True))
        self._width = (
            int(max((c[2].max() for c in (owned, assigned_columns) if c[2].size), default=-1)) + 1
        )
        return self._keys(*owned), self._keys(*assigned_columns)

    def _columns(self, chunks: list[tuple]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        member = np.repeat(
            np.array([c[0] for c in chunks], dtype=np.int64), [len(c[1]) for c in chunks]
        )
        topic = np.fromiter((t for c in chunks for t in c[1]), dtype=np.int64, count=member.size)
        partition = np.fromiter(
            (p for c in chunks for p in c[2]), dtype=np.int64, count=member.size
        )
        return member, topic, partition

    def per_member(self) -> int:
        return max(1, len(self.topic_ids) * self._width)

    def _keys(self, member, topic, partition) -> np.ndarray:
        return (member * len(self.topic_ids) + topic) * self._width + partition

    def partition(self, key: int) -> TopicPartition:
        """The partition of a key taken modulo ``per_member()``."""
        names = list(self.topic_ids)
        return TopicPartition(names[key // self._width], key % self._width)


def cooperative_conflicts(
    subs: Mapping[str, Subscription], result: Mapping[str, Assignment]
) -> list[tuple[TopicPartition, list[str], list[str]]]:
    """The partitions ``result`` adds to a member while revoking them from another, each with the
    members it is revoked from and the members it goes to (sorted). Two members that both claim a
    partition (a static member that missed a generation, KIP-341) are no conflict when one of
    them keeps it: that partition is revoked from the other but added to nobody."""
    keys = _RoundKeys()
    for i, (mid, a) in enumerate(result.items()):
        s = subs.get(mid)
        if s is not None:
            keys.add_owned(i, s.owned_partitions)
        keys.add_assigned(i, a.partitions)
    owned, assigned = keys.arrays()
    per_member = keys.per_member()
    owned, assigned = _sorted_unique(owned), _sorted_unique(assigned)
    added = _sorted_unique(assigned[~_within(assigned, owned)] % per_member)
    revoked = _sorted_unique(owned[~_within(owned, assigned)] % per_member)
    out = []
    for tp in sorted(keys.partition(k) for k in added[_within(added, revoked)].tolist()):
        prev = sorted(
            mid
            for mid, s in subs.items()
            if tp in s.owned_partitions and tp not in getattr(result.get(mid), "partitions", ())
        )
        to = sorted(mid for mid, a in result.items() if tp in a.partitions)
        out.append((tp, prev, to))
    return out
