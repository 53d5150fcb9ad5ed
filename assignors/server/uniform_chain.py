"""Kafka's ``UniformAssignor`` on a homogeneous group, stepped from one group epoch to the next.

A consumer-protocol coordinator computes a target assignment at every group epoch, each from the
previous one (``TargetAssignmentBuilder`` hands the assignor every member's current target), and
a group that forms or grows one member at a time bumps its epoch once per member: a 10,000-member
group computes 10,000 targets in a row. Each of them moves few partitions, but
``UniformAssignor.assign`` costs passes over every partition of the group.

``UniformChain`` keeps the last result as per-member partition lists and does what the
homogeneous builder does (``uniform._homogeneous``) on the members that move: members over their
new quota give up the tail of their partitions in Kafka's walk order (topic, then ``HashSet``
order within the topic, for a set of that member's size, tree buckets included), and the
partitions nobody holds (in partition order) then the given-up ones go to the members with room,
in member order. A step
costs numpy passes over the members plus Python work per partition that moves; its result is the
one ``UniformAssignor.assign`` gives for the same members, order and previous target
(``tests/assignors/test_uniform_chain.py`` checks that on random chains).

A chain follows one ``GroupMembers`` (positions in its ``HashMap`` order, its slot numbers) over
fixed topics and partition counts; ``add``/``remove`` tell it who joined and left since the
last step (a member added comes with an empty current target).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from assignors._hashmap_model import MIN_TREEIFY_CAPACITY, TREEIFY_THRESHOLD, JavaHashMap
from assignors.types import TopicPartition

from .kafka_time import EMPTY, UNIFORM_HOMOGENEOUS, ServerWork
from .spec import GroupAssignment, GroupMembers

_SMALL = 256  # shorter lists are put in walk order in Python, longer ones with numpy


@lru_cache(maxsize=4096)
def hashset_capacity(n: int) -> int:
    """Table size of ``new HashSet<>(collection)`` holding ``n`` elements (as
    ``uniform.java_hashset_capacity``): ``tableSizeFor(max((int) (n / .75f) + 1, 16))``."""
    want = max(int(np.float32(n) / np.float32(0.75)) + 1, 16)
    return 1 << (want - 1).bit_length()


def _walk_sort(parts: list[int], capacity: int) -> int:
    """Sort a member's partitions of one topic in place in ``HashSet`` iteration order for a
    table of ``capacity`` buckets, as ``uniform._homogeneous`` orders them: bucket
    ``p ^ (p >>> 16)``, a bucket's partitions ascending; but a bucket of 9 or more is a red-black
    tree in Java, in the order of the model of ``java.util.HashMap`` filled in ascending order.

    Returns how the order holds as partitions leave the end of the list: ``capacity`` (plain
    buckets: any subset keeps this order), ``-capacity`` (tree buckets in a table of 64 or more:
    a bucket's order depends only on its own partitions, so only the last bucket, if partly left,
    needs ordering again, ``_reorder_last_bucket``), or 0 (a table under 64 buckets, which Java
    doubles instead: the whole order depends on the set)."""
    mask = capacity - 1
    n = len(parts)
    if n <= TREEIFY_THRESHOLD:
        parts.sort(key=lambda p: (((p ^ (p >> 16)) & mask) << 32) | p)
        return capacity
    if n < _SMALL:
        keys = [(((p ^ (p >> 16)) & mask) << 32) | p for p in parts]
        seen: dict[int, int] = {}
        for k in keys:
            b = k >> 32
            seen[b] = seen.get(b, 0) + 1
        if max(seen.values()) <= TREEIFY_THRESHOLD:
            keys.sort()
            parts[:] = [k & 0xFFFFFFFF for k in keys]
            return capacity
    arr = np.array(parts, dtype=np.int64)
    buckets = (arr ^ (arr >> 16)) & mask
    counts = np.bincount(buckets)
    crowded = np.flatnonzero(counts > TREEIFY_THRESHOLD)
    if crowded.size and capacity < MIN_TREEIFY_CAPACITY:
        parts[:] = _hashset_order(sorted(parts), capacity)
        return 0
    order = np.argsort((buckets << 32) | arr)
    parts[:] = arr[order].tolist()
    if not crowded.size:
        return capacity
    starts = np.concatenate(([0], np.cumsum(counts)))
    for b in crowded.tolist():
        lo, hi = int(starts[b]), int(starts[b + 1])
        parts[lo:hi] = _hashset_order(parts[lo:hi], capacity)
    return -capacity


def _reorder_last_bucket(parts: list[int], capacity: int) -> None:
    """After partitions left the end of a list in tree order (``_walk_sort`` gave
    ``-capacity``): the last bucket's remaining partitions in the order Java gives them."""
    if not parts:
        return
    mask = capacity - 1
    last = parts[-1]
    b = (last ^ (last >> 16)) & mask
    lo = len(parts) - 1
    while lo > 0 and (((q := parts[lo - 1]) ^ (q >> 16)) & mask) == b:
        lo -= 1
    keys = sorted(parts[lo:])
    parts[lo:] = _hashset_order(keys, capacity) if len(keys) > TREEIFY_THRESHOLD else keys


def _after_give_up(parts: list[int], marks: list[int], r: int, capacity: int) -> None:
    """Keep the walk order of what a member still holds in topic ``r`` (see ``_walk_sort``)."""
    mark = marks[r]
    if mark == 0:
        return
    if hashset_capacity(len(parts)) != capacity:
        marks[r] = 0  # another table size: walked afresh next time
    elif mark < 0:
        _reorder_last_bucket(parts, capacity)


def _hashset_order(ascending: list[int], capacity: int) -> list[int]:
    """The iteration order of a ``HashSet<Integer>`` of ``capacity`` buckets filled in ascending
    order (the model of ``java.util.HashMap``, tree buckets included)."""
    java = JavaHashMap(int, int, capacity)
    for p in ascending:
        java.put(p)
    return list(java.keys())


class UniformChain:
    """The homogeneous uniform assignment of a group, kept between group epochs. See the module
    docstring."""

    def __init__(self, members: GroupMembers, topics: Sequence[str], counts: Sequence[int]):
        self.members = members
        self.topics = tuple(topics)
        self.counts = tuple(int(c) for c in counts)
        offsets = [0]
        for c in self.counts:
            offsets.append(offsets[-1] + c)
        self.offsets = offsets
        self.total = offsets[-1]
        self.generation = members._generation
        self.slot_of: dict[str, int] = {}  # member id -> slot (the GroupMembers' slot)
        self.owner = np.full(self.total, -1, dtype=np.int32)  # slot holding each partition
        self.count = np.zeros(0, dtype=np.int64)  # partitions per slot
        # per slot: per topic, its partition ids (topic-local), in walk order for a table of
        # ``sorted_for[slot][rank]`` buckets (0: not in order)
        self.parts: list[list[list[int]] | None] = []
        self.sorted_for: list[list[int] | None] = []
        self.free: list[int] = []  # partitions nobody holds (global ids), ascending once sorted
        self.changed: set[int] = set()  # slots whose partitions the last step changed
        self.sets: dict[
            int, frozenset
        ] = {}  # slot -> its partitions as TopicPartitions, once built
        self._tps: list[list[TopicPartition]] | None = None
        self.step_count = 0
        self.dead = False  # set by a caller that gave up on it mid-way
        self.entries = 0  # (slot, topic) lists holding partitions: Kafka's target entries
        self.work: ServerWork | None = None  # what Kafka's builder did at the last step

    # ------------------------------------------------------------------ building

    @classmethod
    def from_assignment(cls, members: GroupMembers, result: GroupAssignment) -> UniformChain | None:
        """A chain holding ``result`` (an assignment of ``members``'s member ids over its
        topics), or None when a member of ``result`` has no slot in ``members`` any more."""
        topics = result.topics
        chain = cls(members, topics, [result.num_partitions(t) for t in topics])
        slot_of = members._slot_of
        ids = result.member_ids
        if any(m not in slot_of for m in ids):
            return None
        slots = np.fromiter(map(slot_of.__getitem__, ids), dtype=np.int64, count=len(ids))
        owner_pos = result._owner
        held = owner_pos >= 0
        owner = np.full(chain.total, -1, dtype=np.int32)
        owner[held] = slots[owner_pos[held]]
        chain.owner = owner
        chain._grow(int(slots.max()) + 1 if slots.size else 0)
        for m, s in zip(ids, slots.tolist(), strict=True):
            chain._new_slot(m, s)
        gids = np.flatnonzero(held)
        order = np.argsort(owner[gids], kind="stable")
        gids = gids[order]
        by_slot = owner[gids]
        cuts = np.flatnonzero(np.diff(by_slot)) + 1
        starts = [0, *cuts.tolist()]
        ends = [*cuts.tolist(), gids.size]
        offsets = np.array(chain.offsets, dtype=np.int64)
        for a, b in zip(starts, ends, strict=True):
            if a == b:
                continue
            s = int(by_slot[a])
            chunk = gids[a:b]
            ranks = np.searchsorted(offsets, chunk, side="right") - 1
            lists = chain.parts[s]
            assert lists is not None  # (None: the slot of a member that left)
            for r in np.unique(ranks).tolist():
                lists[r] = (chunk[ranks == r] - offsets[r]).tolist()
                chain.entries += 1
            chain.count[s] = b - a
        chain.free = np.flatnonzero(~held).tolist()
        return chain

    def _grow(self, slots: int) -> None:
        if slots > self.count.size:
            size = max(slots, 2 * self.count.size, 16)
            count = np.zeros(size, dtype=np.int64)
            count[: self.count.size] = self.count
            self.count = count
            self.parts.extend([None] * (size - len(self.parts)))
            self.sorted_for.extend([None] * (size - len(self.sorted_for)))

    def _new_slot(self, member_id: str, slot: int) -> None:
        self.slot_of[member_id] = slot
        self.parts[slot] = [[] for _ in self.topics]
        self.sorted_for[slot] = [0] * len(self.topics)
        self.count[slot] = 0

    # ------------------------------------------------------------------ membership

    def matches(self, members: GroupMembers, topics: Sequence[str], counts: Sequence[int]) -> bool:
        """Whether this chain can step ``members`` over these topics and partition counts."""
        return (
            members is self.members
            and tuple(topics) == self.topics
            and tuple(counts) == self.counts
        )

    def __contains__(self, member_id: str) -> bool:
        return member_id in self.slot_of

    def __len__(self) -> int:
        return len(self.slot_of)

    def remove(self, member_id: str) -> None:
        """The member left (or its target was dropped): its partitions are free."""
        slot = self.slot_of.pop(member_id)
        lists = self.parts[slot]
        assert lists is not None  # (None: the slot of a member that left)
        offsets = self.offsets
        freed: list[int] = []
        for r, parts in enumerate(lists):
            if parts:
                off = offsets[r]
                freed += parts if off == 0 else [off + p for p in parts]
                self.entries -= 1
        if freed:
            self.owner[np.array(freed, dtype=np.int64)] = -1
            self.free += freed
        self.parts[slot] = None
        self.sorted_for[slot] = None
        self.count[slot] = 0
        self.sets.pop(slot, None)

    def add(self, member_id: str) -> None:
        """The member joined, with an empty current target (its slot comes from the members)."""
        members = self.members
        if members._generation != self.generation:
            self._renumber()
        slot = members._slot_of[member_id]
        self._grow(slot + 1)
        self._new_slot(member_id, slot)

    # ------------------------------------------------------------------ a step

    def step(self) -> None:
        """Compute the next target of the members (``uniform._homogeneous`` on this state)."""
        members = self.members
        index = members._member_index()  # may renumber the members' slots
        if members._generation != self.generation:
            self._renumber()
        order = index._slots  # slot of each position, in HashMap order
        m = order.size
        changed = self.changed = set()
        self.step_count += 1
        if m == 0:
            self.work = ServerWork(EMPTY)
            return
        min_quota, extra = divmod(self.total, m)
        held = self.count[order]
        quota = np.full(m, min_quota, dtype=np.int64)
        quota[:extra] += 1
        # what Kafka's homogeneous builder goes through on this input (uniform._homogeneous)
        work = {
            "members": m,
            "topics": len(self.topics),
            "held": self.total - len(self.free),
            "entries": self.entries,
            # a member over its quota, or with room, has its whole target copied
            "copied": int(held[held != quota].sum()),
        }
        new_entries = 0
        revoked: list[int] = []
        over = np.flatnonzero(held > quota)
        if over.size:
            over_slots = order[over]
            excesses = (held[over] - quota[over]).tolist()
            if len(self.topics) == 1:
                # one topic: each member gives up the tail of one list (most often one partition)
                parts, sorted_for = self.parts, self.sorted_for
                for slot, excess in zip(over_slots.tolist(), excesses, strict=True):
                    mine = parts[slot][0]
                    cap = hashset_capacity(len(mine))
                    marks = sorted_for[slot]
                    if marks[0] != cap and marks[0] != -cap:
                        marks[0] = _walk_sort(mine, cap)
                    if excess == 1:
                        revoked.append(mine.pop())
                    else:
                        cut = len(mine) - excess
                        revoked += mine[cut:]
                        del mine[cut:]
                    if not mine:
                        self.entries -= 1
                    _after_give_up(mine, marks, 0, cap)
            else:
                for slot, excess in zip(over_slots.tolist(), excesses, strict=True):
                    revoked += self._give_up(slot, excess)
            self.count[over_slots] = quota[over]
            changed.update(over_slots.tolist())
        free = self.free
        if len(free) > 1:
            free.sort()
        todo = free + revoked if revoked else free
        self.free = []
        if not todo:
            self._record(work, 0, 0)
            return
        room = quota - np.minimum(held, quota)
        takers = np.flatnonzero(room > 0)
        rooms = room[takers].tolist()
        if sum(rooms) != len(todo):
            raise AssertionError("uniform chain: quotas do not add up to the partitions")
        offsets, n_topics = self.offsets, len(self.topics)
        count, parts, sorted_for = self.count, self.parts, self.sorted_for
        at = 0
        for slot, r in zip(order[takers].tolist(), rooms, strict=True):
            chunk = todo[at : at + r]
            at += r
            lists = parts[slot]
            if n_topics == 1:
                if not lists[0]:
                    new_entries += 1
                lists[0].extend(chunk)
                sorted_for[slot][0] = 0
            else:
                marks = sorted_for[slot]
                for gid in chunk:
                    t = bisect_right(offsets, gid) - 1
                    mine = lists[t]
                    if not mine:
                        new_entries += 1
                    mine.append(gid - offsets[t])
                    marks[t] = 0
            count[slot] += r
            changed.add(slot)
        self.entries += new_entries
        self._record(work, len(todo), new_entries)
        self.owner[np.array(todo, dtype=np.int64)] = np.repeat(order[takers], rooms).astype(
            np.int32
        )
        sets = self.sets
        if sets:
            for slot in changed:
                sets.pop(slot, None)

    def _record(self, work: dict, dealt: int, new_entries: int) -> None:
        self.work = ServerWork(
            UNIFORM_HOMOGENEOUS,
            unassigned=dealt,
            placed=dealt,
            new_entries=new_entries,
            **work,
        )

    def _give_up(self, slot: int, excess: int) -> list[int]:
        """The last ``excess`` partitions of the member's walk (topics in order, each topic's
        partitions in HashSet order for the member's count in that topic), in walk order."""
        lists = self.parts[slot]
        marks = self.sorted_for[slot]
        assert lists is not None and marks is not None  # (None: the slot of a member that left)
        offsets = self.offsets
        tails: list[list[int]] = []
        need = excess
        for r in range(len(lists) - 1, -1, -1):
            parts = lists[r]
            if not parts:
                continue
            cap = hashset_capacity(len(parts))
            if marks[r] != cap and marks[r] != -cap:
                marks[r] = _walk_sort(parts, cap)
            take = min(need, len(parts))
            cut = len(parts) - take
            tail = parts[cut:]
            del parts[cut:]
            if not parts:
                self.entries -= 1
            _after_give_up(parts, marks, r, cap)
            off = offsets[r]
            tails.append(tail if off == 0 else [off + p for p in tail])
            need -= take
            if not need:
                break
        out: list[int] = []
        for tail in reversed(tails):
            out += tail
        return out

    def _renumber(self) -> None:
        """The members renumbered their slots: move this chain's state to the new numbers."""
        new_of = self.members._slot_of
        size = len(self.parts)
        remap = np.full(size + 1, -1, dtype=np.int64)
        moves = [(old, new_of[m]) for m, old in self.slot_of.items()]
        for old, new in moves:
            remap[old] = new
        self.owner = remap[self.owner].astype(np.int32)  # -1 reads remap[-1] == -1
        parts, marks, count = self.parts, self.sorted_for, self.count
        self.parts, self.sorted_for, self.count = [], [], np.zeros(0, dtype=np.int64)
        self._grow(max((new for _, new in moves), default=-1) + 1)
        for old, new in moves:
            self.parts[new] = parts[old]
            self.sorted_for[new] = marks[old]
            self.count[new] = count[old]
        self.slot_of = {m: new_of[m] for m in self.slot_of}
        self.generation = self.members._generation
        self.changed = set()
        self.sets = {}

    # ------------------------------------------------------------------ reading

    def partitions(self, member_id: str) -> frozenset:
        """The member's partitions now, as TopicPartitions (the same set until they change)."""
        slot = self.slot_of[member_id]
        s = self.sets.get(slot)
        if s is None:
            tps = self._tps
            if tps is None:  # one TopicPartition per partition, shared by the sets built
                tps = self._tps = [
                    [TopicPartition(t, p) for p in range(n)]
                    for t, n in zip(self.topics, self.counts, strict=True)
                ]
            lists = self.parts[slot]
            assert lists is not None  # (None: the slot of a member that left)
            if len(lists) == 1:
                s = frozenset(map(tps[0].__getitem__, lists[0]))
            else:
                s = frozenset(tps[r][p] for r, parts in enumerate(lists) for p in parts)
            self.sets[slot] = s
        return s
