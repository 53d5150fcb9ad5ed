"""A ``GroupSpec`` as arrays: members numbered in Kafka's order, partitions numbered globally.

Topic ``r`` (topics in Java ``String`` order) holds global partition ids ``offsets[r]`` to
``offsets[r + 1] - 1``. The current target assignment becomes ``owner[gid]``: the index (into
``member_ids``) of the member whose target holds that partition, -1 for none.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from .._java import java_sort_key
from ..types import AssignorError
from .spec import GroupSpec, SubscribedTopicDescriber


class GroupArrays:
    """Members, topics and the current target assignment of a group, as numpy arrays.

    ``topics``: the given topic names that exist, in Java ``String`` order. Only claims for which
    ``keep_claim(member_index, topic)`` holds enter ``owner``; the others are dropped (the
    builders decide: homogeneous keeps claims on the group's topics, heterogeneous on the member's
    own subscription).
    """

    def __init__(self, spec: GroupSpec, describer: SubscribedTopicDescriber, topics: Collection[str],
                 member_topics: list[frozenset[str]] | None = None):
        self.member_ids = spec.member_ids
        self.index = {m: i for i, m in enumerate(self.member_ids)}
        names = sorted((t for t in topics if describer.num_partitions(t) >= 0), key=java_sort_key)
        self.topics: list[str] = names
        self.rank = {t: r for r, t in enumerate(names)}
        self.counts = np.array([describer.num_partitions(t) for t in names], dtype=np.int64)
        self.offsets = np.zeros(len(names) + 1, dtype=np.int64)
        np.cumsum(self.counts, out=self.offsets[1:])
        self.total = int(self.offsets[-1])
        self.owner = self._owners(spec, member_topics)

    def _owners(self, spec: GroupSpec, member_topics: list[frozenset[str]] | None) -> np.ndarray:
        rank = self.rank
        counts = self.counts.tolist()
        offsets = self.offsets.tolist()
        chunks: list[np.ndarray] = []
        chunk_member: list[int] = []
        for i, member_id in enumerate(self.member_ids):
            assigned = spec.member_subscription(member_id).assigned_partitions
            if not assigned:
                continue
            allowed = member_topics[i] if member_topics is not None else None
            for topic, parts in assigned.items():
                r = rank.get(topic)
                if r is None or (allowed is not None and topic not in allowed):
                    continue
                arr = _int_array(parts, member_id, topic)
                if arr.size == 0:
                    continue
                if arr.min() < 0:
                    raise AssignorError(f"members[{member_id!r}].assigned_partitions[{topic!r}]: negative partition id")
                if arr.max() >= counts[r]:
                    arr = arr[arr < counts[r]]  # beyond the topic's count: dropped (see spec)
                chunks.append(arr + offsets[r])
                chunk_member.append(i)
        owner = np.full(self.total, -1, dtype=np.int32)
        if not chunks:
            return owner
        gids = np.concatenate(chunks)
        members = np.repeat(np.array(chunk_member, dtype=np.int32), [c.size for c in chunks])
        if np.bincount(gids, minlength=self.total).max(initial=0) > 1:
            self._raise_duplicate(gids, members)
        owner[gids] = members
        return owner

    def _raise_duplicate(self, gids: np.ndarray, members: np.ndarray) -> None:
        order = np.argsort(gids, kind="stable")
        g = gids[order]
        at = int(np.flatnonzero(g[1:] == g[:-1])[0])
        gid = int(g[at])
        r = int(np.searchsorted(self.offsets, gid, side="right") - 1)
        a, b = (self.member_ids[int(members[order[at + k]])] for k in (0, 1))
        raise AssignorError(
            f"members: partition {self.topics[r]}-{gid - int(self.offsets[r])} is in the target assignment "
            f"of both {a!r} and {b!r}"
        )

    def topic_of(self, gids: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.offsets, gids, side="right") - 1


def _int_array(parts, member_id: str, topic: str) -> np.ndarray:
    if isinstance(parts, np.ndarray):
        arr = parts
    elif isinstance(parts, set | frozenset):
        arr = np.fromiter(parts, dtype=np.int64, count=len(parts))
    else:
        try:
            arr = np.asarray(parts)
        except (TypeError, ValueError):
            arr = np.empty(0, dtype=object)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise AssignorError(f"members[{member_id!r}].assigned_partitions[{topic!r}]: expected partition ids (integers)")
    return arr.astype(np.int64, copy=False)
