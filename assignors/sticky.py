"""StickyAssignor ("sticky", KIP-54/KIP-341) and CooperativeStickyAssignor ("cooperative-sticky",
KIP-429) on one core that follows Kafka's ``AbstractStickyAssignor``.

Algorithm, in three parts:

1. Claims. Each member states what it owned: eager sticky in its user data (previous assignment
   plus generation, KIP-341), cooperative-sticky in ``Subscription.owned_partitions`` with its
   generation. Claims of topics that no longer exist or that nobody subscribes to are dropped.
   When two members claim one partition, the higher generation wins; equal generations: neither
   keeps it (a zombie of the same generation, or V0 user data without a generation).
2. Constrained path, when every member subscribes to the same topics (the linear algorithm that
   replaced the 2.5-minute general path for 2100 x 2100): with P partitions and N members each gets
   ``floor(P/N)`` or ``ceil(P/N)``, and exactly ``P % N`` members get the ceiling. Members keep
   their claimed partitions up to that quota (in ``(partition, topic)`` order, the first members in
   Java ``HashMap`` order keep a ceiling's worth while ceiling slots remain); the remaining
   partitions, in ``(topic, partition)`` order, are dealt round-robin to the members below the floor
   (sorted by member id), then one each to members at the floor until the ceiling slots are used.
   Always fully balanced.
3. General path, for differing subscriptions: keep valid claims, give each unassigned partition to
   the least-loaded subscribed member (ties by member id), then move partitions one at a time from a
   member to another that holds at least two fewer, preferring to hand a partition back to its
   previous-generation owner and to undo an earlier move of the same topic between the same pair;
   if the result is not more balanced than before (sum of pairwise count differences), revert.

Cooperative (KIP-429): a partition that would go from its current owner to another member is left
out of this round's assignment; its owner revokes it, rejoins, and the follow-up round hands it over.

Worked example (constrained, cooperative): t0 with 6 partitions; c1 owns p0 p1 p2, c2 owns p3 p4 p5,
c3 joins. Quota 2 each. c1 keeps p0 p1, c2 keeps p3 p4; p2 and p5 go to c3 but are withheld because
c1 and c2 still own them. Round two (c1 owns p0 p1, c2 p3 p4): c3 gets p2 and p5.

Not modelled: rack-aware assignment (KIP-881) needs replica racks, which our metadata lacks.
Deviations, each for an input on which Kafka itself fails or is ill-defined: a claimed partition
number outside the topic's range is dropped; a previous-generation owner that no longer
subscribes to the topic is not handed the partition back.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain, repeat
from operator import attrgetter

import attrs
import numpy as np

from ._base import COOPERATIVE, EAGER, Assignor
from ._java import hash_bucket, hashmap_capacity, hashmap_order, java_sort_key, topic_partition_hash
from ._layout import PartitionList, TopicLayout, no_gc, stable_argsort
from .types import Assignment, Subscription, TopicPartition
from .userdata import (
    DEFAULT_GENERATION,
    cooperative_generation,
    encode_cooperative_user_data,
    encode_sticky_user_data,
    sticky_member_data_batch,
)


@attrs.frozen(slots=True)
class _Claims:
    """Every member's claim, members in ``HashMap`` order: global partition indices (-1 =
    invalid) member after member, each member's in claim order; ``lengths[i]`` claims of member
    ``i``; ``generations[i]`` its generation (None when its user data carries none)."""

    flat: np.ndarray
    lengths: np.ndarray
    generations: list[int | None]


@attrs.define(slots=True)
class StickyResult:
    """Raw result of the sticky core, before cooperative adjustment.

    ``assignment`` maps member -> list of TopicPartition in Kafka's list order; ``transferring``
    marks (by global index) the partitions that change owner (constrained path) or is None
    (general path: computed later from the subscriptions, as ``CooperativeStickyAssignor`` does).
    """

    assignment: dict[str, Sequence[TopicPartition]]
    transferring: np.ndarray | None
    constrained: bool


# ---------------------------------------------------------------------------------------------
# Claims
# ---------------------------------------------------------------------------------------------


def _global_indices(layout: TopicLayout, value_rank: np.ndarray, nums: np.ndarray) -> np.ndarray:
    """Global indices of (topic rank, partition number) pairs; -1 for rank -1 or a number out of
    the topic's range."""
    if not nums.size:
        return np.empty(0, dtype=np.int64)
    safe_rank = np.maximum(value_rank, 0)
    ok = (value_rank >= 0) & (nums >= 0) & (nums < layout.counts[safe_rank] if layout.counts.size else False)
    return np.where(ok, nums + (layout.offsets[safe_rank] if layout.offsets.size > 1 else 0), -1)


def _claims_from_user_data(layout: TopicLayout, subs: Sequence[Subscription]) -> _Claims:
    """Claims in eager sticky user data (KIP-341), all members decoded in one batch."""
    batch = sticky_member_data_batch([sub.user_data for sub in subs])
    rank_of = layout.rank
    rank = np.array([rank_of.get(t, -1) for t in batch.run_topics], dtype=np.int64)
    flat = _global_indices(layout, np.repeat(rank, batch.run_counts), batch.numbers)
    ends = np.concatenate(([0], np.cumsum(batch.run_counts)))
    lengths = ends[batch.run_bounds[1:]] - ends[batch.run_bounds[:-1]]
    return _Claims(flat, lengths, batch.generations)


def _claims_from_owned(layout: TopicLayout, subs: Sequence[Subscription], generations: list[int | None]) -> _Claims:
    """Claims in ``Subscription.owned_partitions``, all members at once."""
    owned = [sub.owned_partitions for sub in subs]
    lengths = np.fromiter(map(len, owned), dtype=np.int64, count=len(owned))
    tps = list(chain.from_iterable(owned))
    nums = list(map(_partition_of, tps))
    if set(map(type, nums)) <= {int}:
        try:
            nums_a = np.array(nums, dtype=np.int64)
        except OverflowError:
            nums_a = None
        if nums_a is not None:
            rank_of = layout.rank.get
            rank = np.fromiter(map(rank_of, map(_topic_of, tps), repeat(-1)), dtype=np.int64, count=len(tps))
            return _Claims(_global_indices(layout, rank, nums_a), lengths, generations)
    flat = np.concatenate([layout.index_of(o) for o in owned]) if owned else np.empty(0, np.int64)
    return _Claims(flat.astype(np.int64), lengths, generations)


_topic_of = attrgetter("topic")
_partition_of = attrgetter("partition")


def _resolve_claims(
    layout: TopicLayout,
    order: list[str],
    data: _Claims,
    subscription_generations: Sequence[int],
) -> tuple[list[np.ndarray], np.ndarray]:
    """Kafka's ``allSubscriptionsEqual`` ownership pass, vectorised.

    Returns, per member in ``order``, the indices it still owns (claim order), and a mask of
    partitions claimed by several members of one generation (``partitionsWithMultiplePreviousOwners``).

    A contested claim compares the claimant's generation from its member data with the *recorded*
    claimant's ``Subscription.generationId`` field (``subscription_generations``, -1 below
    ConsumerProtocolSubscription v2), exactly as Kafka does. With v2+ subscriptions both are the
    same number; with older clients the field is -1, so the later claimant in ``HashMap`` order
    wins unless its own generation is -1 too, and a member that lists a partition twice keeps it.
    """
    n_members = len(order)
    gens = np.array([DEFAULT_GENERATION if g is None else g for g in data.generations], dtype=np.int64)
    lengths = data.lengths
    flat = data.flat
    owner = np.repeat(np.arange(n_members, dtype=np.int64), lengths)
    valid = flat >= 0
    flat_v, owner_v = flat[valid], owner[valid]
    keep_v = np.ones(flat_v.shape, dtype=bool)
    multi = np.zeros(layout.total, dtype=bool)

    counts = np.bincount(flat_v, minlength=layout.total) if layout.total else np.zeros(0, np.int64)
    contested = np.flatnonzero(counts > 1)
    if contested.size:
        # Rare: replay Kafka's sequential rule on the partitions claimed more than once.
        pos = np.flatnonzero(np.isin(flat_v, contested))
        by_part: dict[int, list[int]] = {}
        for i in pos.tolist():
            by_part.setdefault(int(flat_v[i]), []).append(i)
        gens_l = gens.tolist()
        sub_gens_l = list(subscription_generations)
        owner_l = owner_v.tolist()
        for part, claim_positions in by_part.items():
            keep_v[claim_positions] = False
            holders: list[int] = []  # claim positions currently listed as owned
            mapped = None  # member recorded in allPreviousPartitionsToOwner
            for ci in claim_positions:
                m = owner_l[ci]
                if mapped is None:
                    holders.append(ci)
                    mapped = m
                    continue
                g, og = gens_l[m], sub_gens_l[mapped]
                if g == og:
                    multi[part] = True
                    _remove_first_of(holders, owner_l, mapped)
                    mapped = m
                elif g > og:
                    holders.append(ci)
                    _remove_first_of(holders, owner_l, mapped)
                    mapped = m
            keep_v[holders] = True

    kept = flat_v[keep_v]
    kept_owner = owner_v[keep_v]
    bounds = np.searchsorted(kept_owner, np.arange(n_members + 1))
    return [kept[bounds[i]:bounds[i + 1]] for i in range(n_members)], multi


def _all_subscriptions_equal(subscriptions: dict[str, Subscription], order: list[str]) -> bool:
    """Kafka's ``allSubscriptionsEqual`` test, quirk included.

    Kafka takes the first *non-empty* topic list (in ``HashMap`` order) as the reference, so members
    with an empty subscription that come before it do not break equality: ``a: [], b: [t]`` goes
    down the constrained path, which then deals partitions of ``t`` to ``a`` too. A real member
    that receives partitions it does not subscribe to rejoins (``ConsumerCoordinator``), which the
    simulator reproduces.
    """
    reference: set[str] = set()
    verdict: dict[int, bool] = {}  # by id of a topics tuple: members usually share a handful
    for m in order:
        topics = subscriptions[m].topics
        if not reference:
            reference = set(topics)
            continue
        ok = verdict.get(id(topics))
        if ok is None:
            ok = verdict[id(topics)] = len(topics) == len(reference) and reference.issuperset(topics)
        if not ok:
            return False
    return True


def _remove_first_of(holders: list[int], owner_l: list[int], member: int) -> None:
    for k, ci in enumerate(holders):
        if owner_l[ci] == member:
            del holders[k]
            return


# ---------------------------------------------------------------------------------------------
# Constrained path
# ---------------------------------------------------------------------------------------------


def _constrained(
    layout: TopicLayout, order: list[str], owned: list[np.ndarray], multi: np.ndarray
) -> tuple[dict[str, PartitionList], np.ndarray]:
    """``AbstractStickyAssignor.ConstrainedAssignmentBuilder`` in linear passes over int arrays.

    Returns each member's partitions and a mask (by global index) of those changing owner."""
    n = len(order)
    total = layout.total
    min_q, expected = divmod(total, n)
    max_q = min_q + (1 if expected else 0)
    n_topics = max(len(layout.topics), 1)

    # Claims of every member, each member's sorted by (partition, topic) as Kafka sorts them.
    lengths = np.array([len(o) for o in owned], dtype=np.int64)
    flat = np.concatenate(owned) if n else np.empty(0, dtype=np.int64)
    member = np.repeat(np.arange(n, dtype=np.int64), lengths)
    if multi.any() and flat.size:
        ok = ~multi[flat]
        flat, member = flat[ok], member[ok]
    if flat.size:
        rank = layout.topic_rank_of(flat)
        key = (flat - layout.offsets[rank]) * n_topics + rank
        srt = np.lexsort((key, member))
        flat, member = flat[srt], member[srt]
    lengths = np.bincount(member, minlength=n) if flat.size else np.zeros(n, dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])) if n else np.zeros(0, np.int64)

    # assignOwnedPartitions: decide how many claims each member keeps, in HashMap order.
    keep = np.zeros(n, dtype=np.int64)
    under: list[int] = []
    exact: list[int] = []
    over = 0
    for i, size in enumerate(lengths.tolist()):
        if size < min_q:
            keep[i] = size
            under.append(i)
        elif size >= max_q and over < expected:
            over += 1
            if over == expected:
                exact.clear()
            keep[i] = max_q
        else:
            keep[i] = min_q
            if over < expected:
                exact.append(i)

    pos_in_member = np.arange(flat.size, dtype=np.int64) - np.repeat(starts, lengths)
    kept_mask = pos_in_member < keep[member] if flat.size else np.zeros(0, dtype=bool)
    kept_parts, kept_member = flat[kept_mask], member[kept_mask]
    revoked = np.zeros(total, dtype=bool)
    revoked[flat[~kept_mask]] = True
    assigned = np.zeros(total, dtype=bool)
    assigned[kept_parts] = True
    unassigned = np.flatnonzero(~assigned)

    # assignRoundRobin: passes over the members below the floor (sorted by id), each pass giving
    # one partition to every member still below it; members reaching the floor queue up behind the
    # floor members (sorted by id) for the ceiling slots, in the order they reached it.
    by_id = lambda i: java_sort_key(order[i])  # noqa: E731
    under.sort(key=by_id)
    exact.sort(key=by_id)
    deficit = np.array([min_q - keep[i] for i in under], dtype=np.int64)
    d_total = int(deficit.sum())
    u = len(under)
    if d_total:
        who = np.repeat(np.arange(u, dtype=np.int64), deficit)
        pass_no = np.arange(d_total, dtype=np.int64) - np.repeat(np.cumsum(deficit) - deficit, deficit)
        # `who` ascends, so a stable sort by pass gives (pass, who) order.
        seq = np.asarray(under, dtype=np.int64)[who[stable_argsort(pass_no, int(deficit.max()))]]
    else:
        seq = np.empty(0, dtype=np.int64)
    reach_floor = [under[k] for k in np.lexsort((np.arange(u), deficit)).tolist()]
    rest = unassigned.size - d_total
    ceiling_queue = exact + reach_floor
    if rest < 0 or rest > len(ceiling_queue):
        raise AssertionError("constrained sticky assignment: partition count does not match quotas")
    new_member = np.concatenate((seq, np.asarray(ceiling_queue[:rest], dtype=np.int64)))

    transferring = np.zeros(total, dtype=bool)
    transferring[unassigned] = revoked[unassigned] | multi[unassigned]

    slot_member = np.concatenate((kept_member, new_member))
    slot_part = np.concatenate((kept_parts, unassigned))
    return layout.group_by_member(order, slot_member, slot_part), transferring


# ---------------------------------------------------------------------------------------------
# General path
# ---------------------------------------------------------------------------------------------


class _JavaHashSetOrder:
    """Which element ``HashSet<TopicPartition>#iterator().next()`` returns.

    Java iterates buckets in index order and a bucket's chain in insertion order; the table starts
    at 16 slots and doubles past a 0.75 load factor (it never shrinks).
    """

    __slots__ = ("seq", "cap", "counter")

    def __init__(self) -> None:
        self.seq: dict[TopicPartition, int] = {}
        self.cap = 16
        self.counter = 0

    def add(self, tp: TopicPartition) -> None:
        if tp not in self.seq:
            self.seq[tp] = self.counter
            self.counter += 1
            self.cap = max(self.cap, hashmap_capacity(len(self.seq)))

    def remove(self, tp: TopicPartition) -> None:
        self.seq.pop(tp, None)

    def __len__(self) -> int:
        return len(self.seq)

    def first(self) -> TopicPartition:
        cap = self.cap
        return min(
            self.seq,
            key=lambda tp: (hash_bucket(topic_partition_hash(tp.topic, tp.partition), cap), self.seq[tp]),
        )


class _PartitionMovements:
    """Kafka's ``PartitionMovements``: records moves so a later move can undo an earlier one."""

    def __init__(self) -> None:
        self.by_topic: dict[str, dict[tuple[str, str], _JavaHashSetOrder]] = {}
        self.moves: dict[TopicPartition, tuple[str, str]] = {}

    def _remove_record(self, tp: TopicPartition) -> tuple[str, str]:
        pair = self.moves.pop(tp)
        topic_moves = self.by_topic[tp.topic]
        topic_moves[pair].remove(tp)
        if not len(topic_moves[pair]):
            del topic_moves[pair]
        if not topic_moves:
            del self.by_topic[tp.topic]
        return pair

    def _add_record(self, tp: TopicPartition, pair: tuple[str, str]) -> None:
        self.moves[tp] = pair
        self.by_topic.setdefault(tp.topic, {}).setdefault(pair, _JavaHashSetOrder()).add(tp)

    def move(self, tp: TopicPartition, old: str, new: str) -> None:
        if tp in self.moves:
            src, _dst = self._remove_record(tp)
            if src != new:
                self._add_record(tp, (src, new))
        else:
            self._add_record(tp, (old, new))

    def actual_partition_to_move(self, tp: TopicPartition, old: str, new: str) -> TopicPartition:
        topic_moves = self.by_topic.get(tp.topic)
        if topic_moves is None:
            return tp
        if tp in self.moves:
            old = self.moves[tp][0]
        reverse = topic_moves.get((new, old))
        return tp if reverse is None else reverse.first()


def _balance_score(sizes: Sequence[int]) -> int:
    """Sum over member pairs of |size difference| (``getBalanceScore``), in O(n log n)."""
    s = np.sort(np.asarray(sizes, dtype=np.int64))
    n = s.size
    return int((s * (2 * np.arange(n) - n + 1)).sum())


class _GeneralBuilder:
    """``AbstractStickyAssignor.GeneralAssignmentBuilder`` with indexed data structures.

    Kafka scans a ``TreeSet`` of members sorted by (assignment size, member id) for the first
    member subscribed to a topic; we keep sizes in a numpy array indexed by member rank (member id
    order) and take the first minimum over the topic's subscribers, which is the same member.
    """

    def __init__(
        self,
        partitions_per_topic: dict[str, int],
        subscriptions: dict[str, Subscription],
        owned: dict[str, list[TopicPartition]],
        prev_owner: dict[TopicPartition, str],
    ):
        self.ppt = partitions_per_topic
        self.members = sorted(subscriptions, key=java_sort_key)
        self.rank = {m: i for i, m in enumerate(self.members)}
        self.topics_of = {m: [t for t in subscriptions[m].topics if t in partitions_per_topic] for m in self.members}
        self.subs_set = {m: set(ts) for m, ts in self.topics_of.items()}
        consumers_of: dict[str, list[int]] = {t: [] for t in partitions_per_topic}
        for m in self.members:
            for t in self.topics_of[m]:
                consumers_of[t].append(self.rank[m])
        self.consumers_of = {t: np.array(sorted(set(c)), dtype=np.int64) for t, c in consumers_of.items()}
        self.max_size = {m: sum(partitions_per_topic[t] for t in set(self.topics_of[m])) for m in self.members}
        self.max_size_arr = np.array([self.max_size[m] for m in self.members], dtype=np.int64)
        # Members with the same subscription share isBalanced's per-topic bound.
        groups: dict[tuple[str, ...], int] = {}
        self.group_of = np.array(
            [groups.setdefault(tuple(self.topics_of[m]), len(groups)) for m in self.members], dtype=np.int64
        )
        self.group_topics = list(groups)
        self.current = {m: list(owned.get(m, [])) for m in self.members}
        self.owner: dict[TopicPartition, str] = {}
        for m in self.members:
            for tp in self.current[m]:
                self.owner[tp] = m
        self.prev_owner = prev_owner
        self.sizes = np.zeros(len(self.members), dtype=np.int64)
        self.active = np.ones(len(self.members), dtype=bool)
        self.movements = _PartitionMovements()
        self.revocation_required = False
        n_cons = {t: len(c) for t, c in self.consumers_of.items()}
        self.sorted_topics = sorted(partitions_per_topic, key=lambda t: (n_cons[t], java_sort_key(t)))
        self.topic_order = {t: i for i, t in enumerate(self.sorted_topics)}
        self._balanced_cache: bool | None = None
        # topic -> member -> partitions of that topic the member holds (for isBalanced)
        self.held: dict[str, dict[str, int]] = {}
        # (member, topic) that proved the assignment unbalanced last time; usually still does
        self._witness: tuple[str, str] | None = None

    # -- helpers ---------------------------------------------------------------------------
    def _size(self, m: str) -> int:
        return int(self.sizes[self.rank[m]])

    def _first_subscribed(self, topic: str) -> str:
        """First member of the (size, id)-sorted set that subscribes to ``topic``."""
        cand = self.consumers_of[topic]
        cand = cand[self.active[cand]]
        return self.members[int(cand[np.argmin(self.sizes[cand])])]

    def _min_size(self, topic: str) -> int:
        cand = self.consumers_of[topic]
        return int(self.sizes[cand].min())

    def _give(self, tp: TopicPartition, m: str) -> None:
        self.current[m].append(tp)
        self.owner[tp] = m
        self.sizes[self.rank[m]] += 1
        holders = self.held.setdefault(tp.topic, {})
        holders[m] = holders.get(m, 0) + 1
        self._balanced_cache = None

    def _take(self, tp: TopicPartition, m: str) -> None:
        self.current[m].remove(tp)
        self.sizes[self.rank[m]] -= 1
        holders = self.held[tp.topic]
        holders[m] -= 1
        if not holders[m]:
            del holders[m]
        self._balanced_cache = None

    def _rebuild_held(self) -> None:
        self.held = {}
        for m in self.members:
            for tp in self.current[m]:
                holders = self.held.setdefault(tp.topic, {})
                holders[m] = holders.get(m, 0) + 1

    # -- Kafka's steps ---------------------------------------------------------------------
    def build(self) -> dict[str, list[TopicPartition]]:
        assigned: set[TopicPartition] = set()
        for m in self.members:
            kept = []
            for tp in self.current[m]:
                if tp.topic not in self.ppt:
                    self.owner.pop(tp, None)
                elif tp.topic not in self.subs_set[m]:
                    self.revocation_required = True
                else:
                    kept.append(tp)
                    assigned.add(tp)
            self.current[m] = kept
            self.sizes[self.rank[m]] = len(kept)
        self._rebuild_held()
        all_sorted = [TopicPartition(t, p) for t in self.sorted_topics for p in range(self.ppt[t])]
        unassigned = [tp for tp in all_sorted if tp not in assigned]
        self._balance(all_sorted, unassigned)
        return self.current

    def _balance(self, all_sorted: list[TopicPartition], unassigned: list[TopicPartition]) -> None:
        initializing = int(self.sizes.max()) == 0
        for tp in unassigned:
            if self.consumers_of[tp.topic].size:
                self._give(tp, self._first_subscribed(tp.topic))

        fixed_topics = {t for t, c in self.consumers_of.items() if c.size < 2}
        if fixed_topics:
            all_sorted = [tp for tp in all_sorted if tp.topic not in fixed_topics]
            unassigned = [tp for tp in unassigned if tp.topic not in fixed_topics]
        for m in self.members:
            if not self._can_participate(m, fixed_topics):
                self.active[self.rank[m]] = False
        self._balanced_cache = None

        pre_balance = {m: list(self.current[m]) for m in self.members if self.active[self.rank[m]]}
        pre_owner = dict(self.owner)
        pre_sizes = self.sizes.copy()

        if not self.revocation_required:
            self._perform_reassignments(unassigned)
        performed = self._perform_reassignments(all_sorted)

        if not initializing and performed:
            act = self.active
            if _balance_score(self.sizes[act]) >= _balance_score(pre_sizes[act]):
                for m, parts in pre_balance.items():
                    self.current[m] = parts
                self.owner = pre_owner
                self.sizes = pre_sizes
                self._rebuild_held()

    def _can_participate(self, m: str, fixed_topics: set[str]) -> bool:
        size = self._size(m)
        if size < self.max_size[m]:
            return True
        return any(tp.topic not in fixed_topics for tp in self.current[m])

    def _is_balanced(self) -> bool:
        """Kafka's ``isBalanced``: counts differ by at most one, or no member below its maximum
        could take a partition of its topics from a member holding at least two more.

        Kafka rescans every partition on each call; we cache the answer until the next move,
        and recheck the last (member, topic) that proved imbalance before a full scan.
        """
        if self._balanced_cache is None:
            self._balanced_cache = self._compute_balanced()
        return self._balanced_cache

    def _topic_max(self, topic: str) -> int:
        """Largest assignment among the active holders of ``topic``'s partitions (-1: none)."""
        sizes, rank, active = self.sizes, self.rank, self.active
        best = -1
        for m in self.held.get(topic, ()):
            r = rank[m]
            if active[r] and sizes[r] > best:
                best = int(sizes[r])
        return best

    def _violates(self, m: str, topic: str, topic_max: int | None = None) -> bool:
        r = self.rank[m]
        s = int(self.sizes[r])
        if not self.active[r] or s == self.max_size[m]:
            return False
        return (self._topic_max(topic) if topic_max is None else topic_max) > s + 1

    def _compute_balanced(self) -> bool:
        act = self.active
        if not act.any():
            return True
        active_sizes = self.sizes[act]
        if int(active_sizes.min()) >= int(active_sizes.max()) - 1:
            return True
        if self._witness is not None and self._violates(*self._witness):
            return False
        topic_max = {t: self._topic_max(t) for t in self.held}
        group_max = np.array(
            [max((topic_max.get(t, -1) for t in topics), default=-1) for topics in self.group_topics],
            dtype=np.int64,
        )
        sizes = self.sizes
        violating = act & (sizes != self.max_size_arr) & (group_max[self.group_of] > sizes + 1)
        if not violating.any():
            self._witness = None
            return True
        m = self.members[int(np.argmax(violating))]
        s = int(sizes[self.rank[m]])
        self._witness = (m, next(t for t in self.topics_of[m] if topic_max.get(t, -1) > s + 1))
        return False

    def _perform_reassignments(self, partitions: list[TopicPartition]) -> bool:
        performed = False
        while True:
            modified = False
            for tp in partitions:
                if self._is_balanced():
                    break
                consumer = self.owner.get(tp)
                if consumer is None:
                    continue
                size = self._size(consumer)
                prev = self.prev_owner.get(tp)
                if (
                    prev is not None
                    and self.active[self.rank[prev]]
                    and tp.topic in self.subs_set[prev]
                    and size > self._size(prev) + 1
                ):
                    self._reassign(tp, prev)
                    performed = modified = True
                    continue
                if size > self._min_size(tp.topic) + 1:
                    self._reassign(tp, self._first_subscribed(tp.topic))
                    performed = modified = True
            if not modified:
                return performed

    def _reassign(self, tp: TopicPartition, new: str) -> None:
        old = self.owner[tp]
        actual = self.movements.actual_partition_to_move(tp, old, new)
        old = self.owner[actual]
        self.movements.move(actual, old, new)
        self._take(actual, old)
        self._give(actual, new)


# ---------------------------------------------------------------------------------------------
# The assignors
# ---------------------------------------------------------------------------------------------


class _AbstractStickyAssignor(Assignor):
    """Shared machinery of Kafka's ``AbstractStickyAssignor``."""

    def _claims(self, layout: TopicLayout, subs: Sequence[Subscription]) -> _Claims:
        """Every member's claim (``subs`` in ``HashMap`` order of their members)."""
        raise NotImplementedError

    def _raw_owned(self, sub: Subscription) -> Sequence[TopicPartition]:
        """Partitions the member states it owns, as the claims pass reads them."""
        raise NotImplementedError

    def sticky_assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> StickyResult:
        layout = TopicLayout(partitions_per_topic)
        order = hashmap_order(subscriptions)
        subs = [subscriptions[m] for m in order]
        data = self._claims(layout, subs)
        sub_gens = [sub.generation for sub in subs]
        owned, multi = _resolve_claims(layout, order, data, sub_gens)
        if _all_subscriptions_equal(subscriptions, order):
            assignment, transferring = _constrained(layout, order, owned, multi)
            return StickyResult(assignment, transferring, constrained=True)

        owned_tps = {m: layout.to_tps(o) for m, o in zip(order, owned, strict=True)}
        max_gen = max(
            (DEFAULT_GENERATION if g is None else g for g in data.generations),
            default=DEFAULT_GENERATION,
        )
        prev_owner = self._previous_owners(layout, order, data, max_gen)
        builder = _GeneralBuilder(partitions_per_topic, subscriptions, owned_tps, prev_owner)
        return StickyResult(builder.build(), None, constrained=False)

    @staticmethod
    def _previous_owners(
        layout: TopicLayout, order: list[str], data: _Claims, max_gen: int
    ) -> dict[TopicPartition, str]:
        """``prepopulateCurrentAssignments``: owners from older generations, newest wins."""
        best: dict[int, tuple[int, str]] = {}
        bounds = np.concatenate(([0], np.cumsum(data.lengths))).tolist()
        for i, (m, g) in enumerate(zip(order, data.generations, strict=True)):
            if g is not None and g < max_gen:
                gen = g
            elif g is None and max_gen > DEFAULT_GENERATION:
                gen = DEFAULT_GENERATION
            else:
                continue
            claims = data.flat[bounds[i]:bounds[i + 1]]
            for idx in claims[claims >= 0].tolist():
                cur = best.get(idx)
                if cur is None or gen > cur[0]:
                    best[idx] = (gen, m)
        if not best:
            return {}
        keys = list(best)
        tps = layout.to_tps(np.array(keys, dtype=np.int64))
        return {tp: best[k][1] for tp, k in zip(tps, keys, strict=True)}

    def _assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, Assignment]:
        with no_gc():
            result = self.sticky_assign(partitions_per_topic, subscriptions)
            return self._finish(result, subscriptions)

    def _finish(self, result: StickyResult, subscriptions: dict[str, Subscription]) -> dict[str, Assignment]:
        return {m: Assignment(result.assignment.get(m, [])) for m in subscriptions}


class StickyAssignor(_AbstractStickyAssignor):
    """Kafka's ``StickyAssignor`` (eager). Ownership and generation come only from user data:
    the eager protocol revokes everything before JoinGroup, so ``owned_partitions`` is empty.

    Member side: remembers its last assignment and generation (``on_assignment``) and sends them
    as V1 user data (KIP-341); before its first assignment it sends none.
    """

    name = "sticky"
    supported_protocols = (EAGER,)

    def __init__(self) -> None:
        self._assignment: list[TopicPartition] | None = None
        self._generation = DEFAULT_GENERATION

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self._assignment = list(assignment.partitions)
        self._generation = generation

    def subscription_user_data(
        self, owned: Sequence[TopicPartition] | None = None, generation: int | None = None
    ) -> bytes | None:
        partitions = self._assignment if owned is None else list(owned)
        if partitions is None:
            return None
        gen = self._generation if generation is None else generation
        return encode_sticky_user_data(partitions, gen)

    def _claims(self, layout: TopicLayout, subs: Sequence[Subscription]) -> _Claims:
        return _claims_from_user_data(layout, subs)


class CooperativeStickyAssignor(_AbstractStickyAssignor):
    """Kafka's ``CooperativeStickyAssignor`` (KIP-429): COOPERATIVE and EAGER.

    Ownership comes from ``Subscription.owned_partitions``; the generation from
    ``Subscription.generation`` when known (>= 0, ConsumerProtocolSubscription v2), else from the
    INT32 in its user data. Partitions changing owner are withheld until the follow-up round.
    """

    name = "cooperative-sticky"
    supported_protocols = (COOPERATIVE, EAGER)

    def __init__(self) -> None:
        self._generation = DEFAULT_GENERATION

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self._generation = generation

    def subscription_user_data(
        self, owned: Sequence[TopicPartition] | None = None, generation: int | None = None
    ) -> bytes | None:
        return encode_cooperative_user_data(self._generation if generation is None else generation)

    def _claims(self, layout: TopicLayout, subs: Sequence[Subscription]) -> _Claims:
        gens = [sub.generation if sub.generation >= 0 else cooperative_generation(sub.user_data) for sub in subs]
        return _claims_from_owned(layout, subs, gens)

    def _finish(self, result: StickyResult, subscriptions: dict[str, Subscription]) -> dict[str, Assignment]:
        if result.transferring is not None:
            mask = result.transferring
            out = {}
            for m in subscriptions:
                parts = result.assignment.get(m, [])
                if isinstance(parts, PartitionList) and parts.indices.size and mask[parts.indices].any():
                    parts = PartitionList(parts.topics, parts.offsets, parts.indices[~mask[parts.indices]])
                out[m] = Assignment(parts)
            return out
        transferring = _partitions_transferring(subscriptions, result.assignment)
        out = {}
        for m in subscriptions:
            parts = result.assignment.get(m, [])
            if transferring:
                parts = [tp for tp in parts if tp not in transferring]
            out[m] = Assignment(parts)
        return out


def _partitions_transferring(
    subscriptions: dict[str, Subscription], assignment: dict[str, list[TopicPartition]]
) -> set[TopicPartition]:
    """Partitions added to one member that another member must revoke first
    (``CooperativeStickyAssignor#computePartitionsTransferringOwnership``)."""
    added: set[TopicPartition] = set()
    revoked: set[TopicPartition] = set()
    for m, parts in assignment.items():
        owned = set(subscriptions[m].owned_partitions)
        assigned = set(parts)
        added.update(tp for tp in parts if tp not in owned)
        revoked.update(tp for tp in owned if tp not in assigned)
    return added & revoked
