"""A ``GroupSpec`` as arrays: members numbered in Kafka's order, partitions numbered globally.

Topic ``r`` (topics in Java ``String`` order) holds global partition ids ``offsets[r]`` to
``offsets[r + 1] - 1``. The current target assignment becomes ``owner[gid]``: the index (into
``member_ids``) of the member whose target holds that partition, -1 for none.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from .._java import java_sort_key
from ..types import AssignorError
from .spec import GroupAssignment, GroupSpec, SubscribedTopicDescriber


def by_subscription(
    member_topics: list[frozenset[str]],
    one: bool = False,
) -> tuple[dict[frozenset[str], np.ndarray], np.ndarray]:
    """Members grouped by subscription: each distinct set of topics, in the order of its first
    member, to its members' positions (ascending), and per member the index of its set in that
    order. C-level passes (a dict of the distinct sets, one ``fromiter``), no loop per member;
    ``one``: the caller knows every member has the same subscription (no set is compared)."""
    n = len(member_topics)
    if one and n:
        return {member_topics[0]: np.arange(n, dtype=np.int64)}, np.zeros(n, dtype=np.int64)
    codes = {ts: k for k, ts in enumerate(dict.fromkeys(member_topics))}
    if len(codes) <= 1:
        return {ts: np.arange(n, dtype=np.int64) for ts in codes}, np.zeros(n, dtype=np.int64)
    kind = np.fromiter(map(codes.__getitem__, member_topics), dtype=np.int64, count=n)
    order = np.argsort(kind, kind="stable")
    bounds = np.cumsum(np.bincount(kind, minlength=len(codes)))[:-1]
    return dict(zip(codes, np.split(order, bounds), strict=True)), kind


class GroupArrays:
    """Members, topics and the current target assignment of a group, as numpy arrays.

    ``topics``: the given topic names that exist, in Java ``String`` order. Claims on other topics
    are dropped, and with ``member_topics`` also claims on topics outside the member's own
    subscription (the heterogeneous builder's rule). ``read_assignment=False`` leaves ``owner``
    empty (range never reads it).
    """

    def __init__(
        self,
        spec: GroupSpec,
        describer: SubscribedTopicDescriber,
        topics: Collection[str],
        member_topics: list[frozenset[str]] | None = None,
        read_assignment: bool = True,
        subscriptions: tuple[dict[frozenset[str], np.ndarray], np.ndarray] | None = None,
    ):
        self.member_ids = spec.member_ids
        self._member_index = spec._member_index()  # None: not known
        names = sorted((t for t in topics if describer.num_partitions(t) >= 0), key=java_sort_key)
        self.topics: list[str] = names
        self.rank = {t: r for r, t in enumerate(names)}
        self.counts = np.array([describer.num_partitions(t) for t in names], dtype=np.int64)
        self.offsets = np.zeros(len(names) + 1, dtype=np.int64)
        np.cumsum(self.counts, out=self.offsets[1:])
        self.total = int(self.offsets[-1])
        # ``by_subscription(member_topics)``, when the caller has it
        self._subscriptions = subscriptions
        self.owner = (
            self._owners(spec, member_topics)
            if read_assignment
            else np.full(self.total, -1, dtype=np.int32)
        )
        self._previous_positions = spec._previous_positions

    def _owners(self, spec: GroupSpec, member_topics: list[frozenset[str]] | None) -> np.ndarray:
        # One flat list of partition ids plus one (member, topic, length) row per claim: a Python
        # loop over claims with no numpy call inside, then whole-array checks.
        rank = self.rank
        flat: list = []
        extend = flat.extend
        claim_member: list[int] = []
        claim_rank: list[int] = []
        claim_length: list[int] = []
        ndarray = np.ndarray
        get_rank = rank.get
        # Members whose current target is a view of an earlier GroupAssignment are read from
        # that assignment's arrays (below); the others' mappings claim by claim.
        slow_at, slow_assigned, views = spec._claims()
        for i, assigned in zip(slow_at, slow_assigned, strict=True):
            member_id = self.member_ids[i]
            allowed = member_topics[i] if member_topics is not None else None
            for topic, parts in assigned.items():
                r = get_rank(topic)
                if r is None or (allowed is not None and topic not in allowed):
                    continue
                before = len(flat)
                try:
                    extend(parts.tolist() if isinstance(parts, ndarray) else parts)
                except TypeError:
                    raise AssignorError(
                        f"members[{member_id!r}].assigned_partitions[{topic!r}]: expected partition ids (integers)"
                    ) from None
                if len(flat) > before:
                    claim_member.append(i)
                    claim_rank.append(r)
                    claim_length.append(len(flat) - before)
        if not flat and len(views) == 1:
            # Every claim comes from one earlier assignment over the same topics and partition
            # counts: each partition goes to its earlier member's new position (one member per
            # position, so no partition can be claimed twice).
            ((parent, ours, theirs, remap),) = views.values()
            if parent.topics == tuple(self.topics) and np.array_equal(
                parent._offsets, self.offsets
            ):
                if remap is None:
                    assert ours is not None and theirs is not None  # (given when there is no remap)
                    remap = self._remap(parent, ours, theirs)
                owner = remap[parent._owner].astype(np.int32, copy=False)
                if member_topics is not None:
                    # Heterogeneous rule: a claim stays only if the member subscribes to the topic.
                    if self._subscriptions is None:
                        self._subscriptions = by_subscription(member_topics)
                    subs, sub_of = self._subscriptions
                    may = np.array([[t in ts for t in self.topics] for ts in subs], dtype=bool)
                    held = np.flatnonzero(owner >= 0)
                    held_rank = np.repeat(np.arange(len(self.topics)), self.counts)[held]
                    owner[held[~may[sub_of[owner[held]], held_rank]]] = -1
                return owner
        gid_chunks: list[np.ndarray] = []
        member_chunks: list[np.ndarray] = []
        if flat:
            parts = np.array(flat)
            lengths = np.array(claim_length, dtype=np.int64)
            if parts.dtype.kind not in "iu" or parts.ndim != 1:
                self._raise_bad(spec, claim_member, claim_rank, lengths, parts)
            parts = parts.astype(np.int64, copy=False)
            ranks = np.repeat(np.array(claim_rank, dtype=np.int64), lengths)
            claimants = np.repeat(np.array(claim_member, dtype=np.int32), lengths)
            if parts.min() < 0:
                self._raise_bad(spec, claim_member, claim_rank, lengths, parts)
            # Beyond the topic's count: dropped (see spec).
            valid = parts < self.counts[ranks]
            if not valid.all():
                parts, ranks, claimants = parts[valid], ranks[valid], claimants[valid]
            gid_chunks.append(parts + self.offsets[ranks])
            member_chunks.append(claimants)
        for parent, ours, theirs, remap in views.values():
            self._view_claims(parent, ours, theirs, remap, member_topics, gid_chunks, member_chunks)
        owner = np.full(self.total, -1, dtype=np.int32)
        if not gid_chunks:
            return owner
        gids = np.concatenate(gid_chunks)
        claimants = np.concatenate(member_chunks)
        if np.bincount(gids, minlength=self.total).max(initial=0) > 1:
            self._raise_duplicate(gids, claimants)
        owner[gids] = claimants
        return owner

    def _view_claims(
        self,
        parent: GroupAssignment,
        ours: Sequence[int] | None,
        theirs: Sequence[int] | None,
        remap: np.ndarray | None,
        member_topics: list[frozenset[str]] | None,
        gid_chunks: list[np.ndarray],
        member_chunks: list[np.ndarray],
    ) -> None:
        """Claims of the members whose target is a view of ``parent``, from its owner arrays:
        member ``theirs[k]`` of ``parent`` is our ``ours[k]``, or ``remap`` maps them all (a
        ``GroupSpec.from_members`` spec, one member id per position: no duplicates to look for)."""
        if remap is None:
            assert ours is not None and theirs is not None  # (given when there is no remap)
            remap = self._remap(parent, ours, theirs)
        if member_topics is not None:
            # Heterogeneous rule: keep a claim only if the member subscribes to the topic.
            if self._subscriptions is None:
                self._subscriptions = by_subscription(member_topics)
            distinct, kind = self._subscriptions
        for topic in parent.topics:
            r = self.rank.get(topic)
            if r is None:
                continue
            claimed = remap[parent.owners(topic)]
            n = int(self.counts[r])
            if claimed.size > n:
                claimed = claimed[:n]  # beyond the topic's count: dropped (see spec)
            keep = claimed >= 0
            if member_topics is not None:
                subscribed = np.array([topic in ts for ts in distinct], dtype=bool)
                keep &= subscribed[kind[np.maximum(claimed, 0)]]
            at = np.flatnonzero(keep)
            if at.size:
                gid_chunks.append(at + self.offsets[r])
                member_chunks.append(claimed[at])

    def _remap(
        self, parent: GroupAssignment, ours: Sequence[int], theirs: Sequence[int]
    ) -> np.ndarray:
        """Our position of each member of ``parent`` (-1: none; one extra -1 at the end)."""
        remap = np.full(len(parent.member_ids) + 1, -1, dtype=np.int32)  # [-1] stays -1
        theirs_arr = np.asarray(theirs, dtype=np.int64)
        remap[theirs_arr] = ours
        if np.count_nonzero(remap >= 0) < theirs_arr.size:  # fewer distinct than given
            # Two members hand in the same earlier member's target: a duplicate claim.
            seen: dict[int, int] = {}
            for i, j in zip(np.asarray(ours).tolist(), theirs_arr.tolist(), strict=True):
                if j in seen:
                    a, b = self.member_ids[seen[j]], self.member_ids[i]
                    raise AssignorError(f"members: {a!r} and {b!r} have the same target assignment")
                seen[j] = i
        return remap

    def result(self, owner: np.ndarray) -> GroupAssignment:
        """The assignment of ``owner`` over these members and topics (it keeps the spec's member
        index when the spec had one, for the next epoch's claims)."""
        out = GroupAssignment(
            self.member_ids, dict(zip(self.topics, self.counts.tolist(), strict=True)), owner
        )
        if self._member_index is not None:
            out._index = self._member_index
        out._previous_positions = self._previous_positions
        return out

    def _raise_bad(self, spec, claim_member, claim_rank, lengths, parts) -> None:
        """The one-line error for the first claim that is not a list of partition ids >= 0."""
        at = 0
        for i, r, n in zip(claim_member, claim_rank, lengths.tolist(), strict=True):
            chunk = parts[at : at + n] if parts.ndim == 1 else None
            at += n
            ok = chunk is not None and all(
                isinstance(p, int | np.integer) and not isinstance(p, bool) and p >= 0
                for p in chunk.tolist()
            )
            if not ok:
                member_id, topic = self.member_ids[i], self.topics[r]
                raise AssignorError(
                    f"members[{member_id!r}].assigned_partitions[{topic!r}]: expected partition ids (integers >= 0)"
                )
        raise AssignorError(
            "members: assigned_partitions must map topics to partition ids (integers >= 0)"
        )

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
