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

import bisect
import math
from collections.abc import Sequence
from functools import partial
from itertools import chain, count, repeat
from operator import attrgetter, itemgetter

import attrs
import numpy as np

from ._base import COOPERATIVE, EAGER, Assignor
from ._java import hash_bucket, hashmap_capacity, hashmap_order, java_sort_key, java_string_hash
from ._kafka_work import (
    KafkaWork,
    grouped_timsort_compares,
    same_hash,
    subset_fill_same,
    timsort_compares,
)
from ._layout import (
    PartitionList,
    TopicLayout,
    assignments_of,
    concatenated_indices,
    no_gc,
    partition_lists,
    stable_argsort,
)
from .types import Assignment, IndexedPartitions, Subscription, TopicPartition, assignment_of
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

    assignment: dict[str, PartitionList]
    transferring: np.ndarray | None
    constrained: bool
    order: list[str]
    claims: _Claims
    total: int
    layout_topics: Sequence[str] = ()
    layout_counts: Sequence[int] = ()


# ---------------------------------------------------------------------------------------------
# Claims
# ---------------------------------------------------------------------------------------------


def _global_indices(layout: TopicLayout, value_rank: np.ndarray, nums: np.ndarray) -> np.ndarray:
    """Global indices of (topic rank, partition number) pairs; -1 for rank -1 or a number out of
    the topic's range."""
    if not nums.size:
        return np.empty(0, dtype=np.int64)
    safe_rank = np.maximum(value_rank, 0)
    ok = (
        (value_rank >= 0)
        & (nums >= 0)
        & (nums < layout.counts[safe_rank] if layout.counts.size else False)
    )
    return np.where(ok, nums + (layout.offsets[safe_rank] if layout.offsets.size > 1 else 0), -1)


def _claims_from_user_data(layout: TopicLayout, subs: Sequence[Subscription]) -> _Claims:
    """Claims in eager sticky user data (KIP-341), all members decoded in one batch."""
    batch = sticky_member_data_batch([sub.user_data for sub in subs])
    rank_of = layout.rank
    name_rank = np.array([rank_of.get(t, -1) for t in batch.topic_names], dtype=np.int64)
    rank = name_rank[batch.run_topic_codes] if name_rank.size else batch.run_topic_codes
    flat = _global_indices(layout, np.repeat(rank, batch.run_counts), batch.numbers)
    ends = np.concatenate(([0], np.cumsum(batch.run_counts)))
    lengths = ends[batch.run_bounds[1:]] - ends[batch.run_bounds[:-1]]
    return _Claims(flat, lengths, batch.generations)


def _claims_from_owned(
    layout: TopicLayout, subs: Sequence[Subscription], generations: list[int | None]
) -> _Claims:
    """Claims in ``Subscription.owned_partitions``, all members at once."""
    owned = [sub.owned_partitions for sub in subs]
    lengths = np.fromiter(map(len, owned), dtype=np.int64, count=len(owned))
    flat = _owned_indices(layout, owned)
    if flat is not None:
        return _Claims(flat, lengths, generations)
    tps = list(chain.from_iterable(owned))
    nums = list(map(_partition_of, tps))
    if set(map(type, nums)) <= {int}:
        try:
            nums_a = np.array(nums, dtype=np.int64)
        except OverflowError:
            nums_a = None
        if nums_a is not None:
            rank_of = layout.rank.get
            rank = np.fromiter(
                map(rank_of, map(_topic_of, tps), repeat(-1)), dtype=np.int64, count=len(tps)
            )
            return _Claims(_global_indices(layout, rank, nums_a), lengths, generations)
    flat = np.concatenate([layout.index_of(o) for o in owned]) if owned else np.empty(0, np.int64)
    return _Claims(flat.astype(np.int64), lengths, generations)


def _owned_indices(
    layout: TopicLayout, owned: list[tuple[TopicPartition, ...]]
) -> np.ndarray | None:
    """Every member's owned partitions as global indices of ``layout`` (-1 = unknown topic or
    number out of range), back to back, read from the index arrays they were built from (owned
    partitions handed back from an assignor's result keep them); None when some member's came as
    ``TopicPartition`` objects only."""
    nonempty = list(filter(None, owned))
    if not nonempty:
        return np.empty(0, dtype=np.int64)
    if set(map(type, nonempty)) != {IndexedPartitions}:
        return None
    sources = list(map(_index_source_of, nonempty))
    flat = np.concatenate(list(map(_third, sources)))
    layouts: dict[tuple[int, int], int] = {}
    codes = list(
        map(
            layouts.setdefault,
            zip(map(id, map(_first, sources)), map(id, map(_second, sources)), strict=True),
            count(),
        )
    )
    if len(layouts) == 1:
        return _in_layout(layout, sources[0][0], sources[0][1], flat)
    # Lists of several assignments (rare): translate each source layout's indices on their own.
    code_of = np.repeat(np.array(codes, dtype=np.int64), list(map(len, nonempty)))
    out = np.empty(flat.size, dtype=np.int64)
    for code in set(codes):
        src = sources[codes.index(code)]
        at = code_of == code
        part = _in_layout(layout, src[0], src[1], flat[at])
        if part is None:
            return None
        out[at] = part
    return out


def _in_layout(
    layout: TopicLayout, topics: Sequence[str], offsets: np.ndarray, indices: np.ndarray
) -> np.ndarray | None:
    """Global indices of another layout (``topics``, ``offsets``) as indices of ``layout``; None
    when an index lies outside the other layout."""
    if not indices.size:
        return np.empty(0, dtype=np.int64)
    if int(indices.min()) < 0 or int(indices.max()) >= int(offsets[-1]):
        return None
    if list(topics) == layout.topics and np.array_equal(offsets, layout.offsets):
        return np.asarray(indices, dtype=np.int64)
    old_rank = np.searchsorted(offsets, indices, side="right") - 1
    new_rank = np.array([layout.rank.get(t, -1) for t in topics], dtype=np.int64)
    return _global_indices(layout, new_rank[old_rank], indices - offsets[old_rank])


_index_source_of = attrgetter("index_source")
_first, _second, _third = itemgetter(0), itemgetter(1), itemgetter(2)
_topic_of = attrgetter("topic")
_topics_of_sub = attrgetter("topics")
_partition_of = attrgetter("partition")


def _resolve_claims(
    layout: TopicLayout,
    order: list[str],
    data: _Claims,
    subscription_generations: Sequence[int],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kafka's ``allSubscriptionsEqual`` ownership pass, vectorised.

    Returns the indices the members still own, member after member in ``order`` (each in claim
    order), with ``bounds`` (member ``i``'s are ``kept[bounds[i]:bounds[i + 1]]``), and a mask of
    partitions claimed by several members of one generation (``partitionsWithMultiplePreviousOwners``).

    A contested claim compares the claimant's generation from its member data with the *recorded*
    claimant's ``Subscription.generationId`` field (``subscription_generations``, -1 below
    ConsumerProtocolSubscription v2), exactly as Kafka does. With v2+ subscriptions both are the
    same number; with older clients the field is -1, so the later claimant in ``HashMap`` order
    wins unless its own generation is -1 too, and a member that lists a partition twice keeps it.
    """
    n_members = len(order)
    gens = np.array(
        [DEFAULT_GENERATION if g is None else g for g in data.generations], dtype=np.int64
    )
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
    return kept, np.searchsorted(kept_owner, np.arange(n_members + 1)), multi


def all_subscriptions_equal(subscriptions: dict[str, Subscription], order: list[str]) -> bool:
    """Kafka's ``allSubscriptionsEqual`` test, quirk included.

    Kafka takes the first *non-empty* topic list (in ``HashMap`` order) as the reference, so members
    with an empty subscription that come before it do not break equality: ``a: [], b: [t]`` goes
    down the constrained path, which then deals partitions of ``t`` to ``a`` too. A real member
    that receives partitions it does not subscribe to rejoins (``ConsumerCoordinator``), which the
    simulator reproduces.
    """
    distinct = set(map(_topics_of_sub, subscriptions.values()))
    if len(distinct) <= 1:
        # A list naming a topic twice fails the length test, except for the reference member.
        return (
            not distinct
            or len(set(*distinct)) == len(*distinct)
            or (all_subscriptions_equal_member_by_member(subscriptions, order))
        )
    # The reference: the first non-empty topic list in HashMap order.
    first = next((i for i, m in enumerate(order) if subscriptions[m].topics), None)
    if first is None:
        return True
    topics = subscriptions[order[first]].topics
    reference = set(topics)
    if len(reference) != len(topics):
        return all_subscriptions_equal_member_by_member(subscriptions, order)
    if any(ts and not (len(ts) == len(reference) and reference.issuperset(ts)) for ts in distinct):
        return False
    # Empty lists are harmless only before the reference.
    return () not in distinct or not any(not subscriptions[m].topics for m in order[first + 1 :])


def all_subscriptions_equal_member_by_member(
    subscriptions: dict[str, Subscription], order: list[str]
) -> bool:
    """``all_subscriptions_equal``, one member at a time."""
    reference: set[str] = set()
    verdict: dict[tuple[str, ...], bool] = {}
    for m in order:
        topics = subscriptions[m].topics
        if not reference:
            reference = set(topics)
            continue
        ok = verdict.get(topics)
        if ok is None:
            ok = verdict[topics] = len(topics) == len(reference) and reference.issuperset(topics)
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


def _id_ranks(members: list[str]) -> np.ndarray:
    """Each member's place when sorted by member id (``String.compareTo``)."""
    n = len(members)
    ranks = np.empty(n, dtype=np.int64)
    joined = "".join(members)
    if joined.isascii() and "\x00" not in joined:
        # numpy compares ASCII strings as String.compareTo does (but ignores trailing NULs).
        by_id = (
            np.argsort(np.array(members, dtype=str), kind="stable")
            if n
            else np.empty(0, dtype=np.int64)
        )
    else:
        by_id = np.array(sorted(range(n), key=lambda i: java_sort_key(members[i])), dtype=np.int64)
    ranks[by_id] = np.arange(n, dtype=np.int64)
    return ranks


def owned_quotas(
    lengths: np.ndarray, min_q: int, max_q: int, expected: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``assignOwnedPartitions``' decisions for members (in ``HashMap`` order) claiming
    ``lengths`` partitions: how many each keeps, the members below the floor, and the members at
    the floor that queue for the ceiling slots (both in ``HashMap`` order).

    Members below the floor keep all; the first ``expected`` members at or above the ceiling keep
    a ceiling's worth; everyone else keeps the floor. Members at the floor queue for the ceiling
    slots only if there are fewer than ``expected`` ceiling members: Kafka empties that queue when
    it finds the last of them.
    """
    n = lengths.size
    keep = np.full(n, min_q, dtype=np.int64)
    below = lengths < min_q
    keep[below] = lengths[below]
    ceiling = np.flatnonzero(lengths >= max_q) if expected else np.empty(0, dtype=np.int64)
    keep[ceiling[:expected]] = max_q
    if expected and ceiling.size < expected:
        exact = np.flatnonzero(~below & (lengths < max_q))
    else:
        exact = np.empty(0, dtype=np.int64)
    return keep, np.flatnonzero(below), exact


def _constrained(
    layout: TopicLayout,
    order: list[str],
    kept_claims: np.ndarray,
    claim_bounds: np.ndarray,
    multi: np.ndarray,
    work: KafkaWork,
) -> tuple[dict[str, PartitionList], np.ndarray]:
    """``AbstractStickyAssignor.ConstrainedAssignmentBuilder`` in linear passes over int arrays.

    Returns each member's partitions and a mask (by global index) of those changing owner.
    Records in ``work`` what Kafka's builder does on the way (``assignors._kafka_work``)."""
    n = len(order)
    total = layout.total
    min_q, expected = divmod(total, n)
    max_q = min_q + (1 if expected else 0)
    n_topics = max(len(layout.topics), 1)

    # Claims of every member, each member's sorted by (partition, topic) as Kafka sorts them.
    lengths = np.diff(claim_bounds).astype(np.int64)
    flat = kept_claims
    member = np.repeat(np.arange(n, dtype=np.int64), lengths)
    n_multi = int(np.count_nonzero(multi))
    if n_multi and flat.size:
        # assignOwnedPartitions asks every member's list about every doubly claimed partition.
        work.add("tp_compares", float(flat.size) * n_multi)
        ok = ~multi[flat]
        flat, member = flat[ok], member[ok]
    if flat.size:
        rank = layout.topic_rank_of(flat)
        key = (flat - layout.offsets[rank]) * n_topics + rank
        # Each member's owned list, sorted by (partition, topic) in its claim order.
        owners_of_claims = member
        work.defer(
            lambda: {
                "tp_sort_compares": grouped_timsort_compares(
                    key, np.searchsorted(owners_of_claims, np.arange(n + 1))
                )
            }
        )
        srt = np.lexsort((key, member))
        flat, member = flat[srt], member[srt]
    lengths = np.bincount(member, minlength=n) if flat.size else np.zeros(n, dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])) if n else np.zeros(0, np.int64)

    keep, under_a, exact_a = owned_quotas(lengths, min_q, max_q, expected)

    pos_in_member = np.arange(flat.size, dtype=np.int64) - np.repeat(starts, lengths)
    kept_mask = pos_in_member < keep[member] if flat.size else np.zeros(0, dtype=bool)
    kept_parts, kept_member = flat[kept_mask], member[kept_mask]
    revoked = np.zeros(total, dtype=bool)
    revoked[flat[~kept_mask]] = True
    assigned = np.zeros(total, dtype=bool)
    assigned[kept_parts] = True
    unassigned = np.flatnonzero(~assigned)
    n_revoked = int(flat.size - kept_parts.size)
    work.add("tp_hash_ops", n_revoked)  # maybeRevokedPartitions.put
    work.defer(
        lambda: {
            "tp_same_hash": subset_fill_same(
                same_hash(layout.topics, layout.counts)[1], n_revoked, total
            )
        }
    )
    # getUnassignedPartitions: sorts the kept partitions by (topic, partition) (member after
    # member in HashMap order, each in the order it was kept) and walks every partition.
    work.add("partitions", total)
    if kept_parts.size:
        work.defer(lambda: {"tp_sort_compares": timsort_compares(kept_parts)})

    # assignRoundRobin: passes over the members below the floor (sorted by id), each pass giving
    # one partition to every member still below it; members reaching the floor queue up behind the
    # floor members (sorted by id) for the ceiling slots, in the order they reached it.
    id_rank = _id_ranks(order)
    work.defer(
        lambda: {
            "member_compares": timsort_compares(id_rank[under_a])
            + timsort_compares(id_rank[exact_a])
        }
    )
    under = under_a[np.argsort(id_rank[under_a], kind="stable")].tolist()
    exact = exact_a[np.argsort(id_rank[exact_a], kind="stable")].tolist()
    deficit = np.array([min_q - keep[i] for i in under], dtype=np.int64)
    d_total = int(deficit.sum())
    u = len(under)
    if d_total:
        who = np.repeat(np.arange(u, dtype=np.int64), deficit)
        pass_no = np.arange(d_total, dtype=np.int64) - np.repeat(
            np.cumsum(deficit) - deficit, deficit
        )
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
    # assignRoundRobin: assignNewPartition per partition, which looks the partition up in
    # maybeRevokedPartitions (twice when there) and partitionsWithMultiplePreviousOwners (maps
    # that are never filled cost next to nothing), and records the transfers.
    n_new = int(unassigned.size)
    work.add("partitions", n_new)
    lookups = (n_new if n_revoked else 0) + (n_new if n_multi else 0)
    work.add("tp_hash_ops", lookups)
    work.defer(
        lambda: {
            "tp_hash_ops": int(np.count_nonzero(revoked[unassigned]))
            + int(np.count_nonzero(transferring))
        }
    )
    if rest > 0:
        # The member that takes the last ceiling slot makes Kafka check, with
        # unassignedPartitions.indexOf, that it was handed the last partition.
        work.add("tp_compares", n_new)

    slot_member = np.concatenate((kept_member, new_member))
    slot_part = np.concatenate((kept_parts, unassigned))
    return layout.group_by_member(order, slot_member, slot_part), transferring


# ---------------------------------------------------------------------------------------------
# General path
# ---------------------------------------------------------------------------------------------


class _JavaHashSetOrder:
    """Which element ``HashSet<TopicPartition>#iterator().next()`` returns.

    Java iterates buckets in index order and a bucket's chain in insertion order; the table starts
    at 16 slots and doubles past a 0.75 load factor (it never shrinks). Elements are global
    partition indices; ``tp_hash`` gives an element's ``TopicPartition#hashCode``.
    """

    __slots__ = ("seq", "cap", "counter")

    def __init__(self) -> None:
        self.seq: dict[int, int] = {}
        self.cap = 16
        self.counter = 0

    def add(self, p: int) -> None:
        if p not in self.seq:
            self.seq[p] = self.counter
            self.counter += 1
            self.cap = max(self.cap, hashmap_capacity(len(self.seq)))

    def remove(self, p: int) -> None:
        self.seq.pop(p, None)

    def __len__(self) -> int:
        return len(self.seq)

    def first(self, tp_hash) -> int:
        cap, seq = self.cap, self.seq
        return min(seq, key=lambda p: (hash_bucket(tp_hash(p), cap), seq[p]))


class _PartitionMovements:
    """Kafka's ``PartitionMovements``: records moves so a later move can undo an earlier one.
    Partitions are global indices, members ranks, topics topic ranks."""

    def __init__(self, topic_of: list[int], tp_hash) -> None:
        self.topic_of = topic_of
        self.tp_hash = tp_hash
        self.by_topic: dict[int, dict[tuple[int, int], _JavaHashSetOrder]] = {}
        self.moves: dict[int, tuple[int, int]] = {}

    def _remove_record(self, p: int) -> tuple[int, int]:
        pair = self.moves.pop(p)
        t = self.topic_of[p]
        topic_moves = self.by_topic[t]
        topic_moves[pair].remove(p)
        if not len(topic_moves[pair]):
            del topic_moves[pair]
        if not topic_moves:
            del self.by_topic[t]
        return pair

    def _add_record(self, p: int, pair: tuple[int, int]) -> None:
        self.moves[p] = pair
        self.by_topic.setdefault(self.topic_of[p], {}).setdefault(pair, _JavaHashSetOrder()).add(p)

    def move(self, p: int, old: int, new: int) -> None:
        if p in self.moves:
            src, _dst = self._remove_record(p)
            if src != new:
                self._add_record(p, (src, new))
        else:
            self._add_record(p, (old, new))

    def actual_partition_to_move(self, p: int, old: int, new: int) -> int:
        topic_moves = self.by_topic.get(self.topic_of[p])
        if topic_moves is None:
            return p
        if p in self.moves:
            old = self.moves[p][0]
        reverse = topic_moves.get((new, old))
        return p if reverse is None else reverse.first(self.tp_hash)


def _balance_score(sizes: Sequence[int] | np.ndarray) -> int:
    """Sum over member pairs of |size difference| (``getBalanceScore``), in O(n log n)."""
    s = np.sort(np.asarray(sizes, dtype=np.int64))
    n = s.size
    return int((s * (2 * np.arange(n) - n + 1)).sum())


class _GeneralBuilder:
    """``AbstractStickyAssignor.GeneralAssignmentBuilder`` with indexed data structures.

    Partitions are global indices of ``layout``, members their rank in member id order, topics
    their rank in ``layout``. Kafka scans a ``TreeSet`` of members sorted by (assignment size,
    member id) for the first member subscribed to a topic; we keep sizes in a numpy array indexed
    by member rank and take the first minimum over the topic's subscribers, which is the same member.
    """

    def __init__(
        self,
        layout: TopicLayout,
        subscriptions: dict[str, Subscription],
        claims: tuple[list[str], np.ndarray, np.ndarray],
        prev_owner: dict[int, str],
        work: KafkaWork,
    ):
        """``claims``: (members in some order, their valid claims back to back, bounds), as
        ``_resolve_claims`` returns them. Records in ``work`` what Kafka's builder does."""
        self.layout = layout
        self.work = work
        n_topics = len(layout.topics)
        counts = layout.counts.tolist()
        self.counts = counts
        self.offsets = layout.offsets.tolist()
        self.topic_arr = np.repeat(np.arange(n_topics, dtype=np.int64), layout.counts)
        self.topic_of: list[int] = self.topic_arr.tolist()
        if "".join(subscriptions).isascii():
            self.members = sorted(subscriptions)  # ASCII ids: Python's order is String.compareTo's
        else:
            self.members = sorted(subscriptions, key=java_sort_key)
        n = len(self.members)
        self.rank = rank = {m: i for i, m in enumerate(self.members)}
        topic_rank = layout.rank
        # Members with equal topics tuples share a group and its derived data. Groups are found
        # by dict.setdefault in a C-level map (a group is named by its first member's position);
        # with heterogeneous subscriptions there are as many groups as members.
        raw_topics = list(map(_topics_of_sub, map(subscriptions.__getitem__, self.members)))
        first_of: dict[tuple[str, ...], int] = {}
        firsts = np.fromiter(map(first_of.setdefault, raw_topics, count()), dtype=np.int64, count=n)
        group_number = np.zeros(n, dtype=np.int64)
        group_number[list(first_of.values())] = np.arange(len(first_of), dtype=np.int64)
        self.group_of = group_number[firsts] if n else firsts
        self.group_tuples = list(first_of)
        self._group_sets: list[frozenset[int] | None] = [None] * len(first_of)
        self._group_of_l: list[int] = self.group_of.tolist()
        # subscribed[r, t]: member r subscribes to topic t (existing topics only).
        group_lengths = list(map(len, self.group_tuples))
        names = list(chain.from_iterable(self.group_tuples))
        ranks = np.fromiter(
            map(topic_rank.get, names, repeat(-1)), dtype=np.int64, count=len(names)
        )
        rows = np.repeat(np.arange(len(first_of), dtype=np.int64), group_lengths)
        exists = ranks >= 0
        group_matrix = np.zeros((len(first_of), n_topics), dtype=bool)
        group_matrix[rows[exists], ranks[exists]] = True
        self.group_matrix = group_matrix
        self.subscribed = group_matrix[self.group_of] if n else np.zeros((0, n_topics), dtype=bool)
        self.consumers_of = [np.flatnonzero(self.subscribed[:, t]) for t in range(n_topics)]
        group_max = (
            group_matrix.astype(np.int64) @ layout.counts
            if n_topics
            else np.zeros(len(first_of), np.int64)
        )
        self.max_size_arr = group_max[self.group_of] if n else np.zeros(0, dtype=np.int64)
        self.max_size: list[int] = self.max_size_arr.tolist()
        # Each member's claims as a list (lists grow and shrink as partitions move).
        claim_order, claim_flat, claim_bounds = claims
        place = {m: i for i, m in enumerate(claim_order)}
        src = np.fromiter(map(place.__getitem__, self.members), dtype=np.int64, count=n)
        owned_lengths_a = np.diff(claim_bounds)[src] if n else np.zeros(0, dtype=np.int64)
        total_owned = int(owned_lengths_a.sum())
        # Claims regrouped in rank order: member r's run starts at claim_bounds[src[r]].
        rank_starts = np.cumsum(owned_lengths_a) - owned_lengths_a
        gather = np.repeat(claim_bounds[:-1][src] - rank_starts, owned_lengths_a) + np.arange(
            total_owned
        )
        flat = claim_flat[gather]
        owned_lengths = owned_lengths_a.tolist()
        owned_flat = flat.tolist()
        bounds = np.concatenate(([0], np.cumsum(owned_lengths_a))).tolist()
        self.current: list[list[int]] = list(
            map(owned_flat.__getitem__, map(slice, bounds, bounds[1:]))
        )
        owner_arr = np.full(layout.total, -1, dtype=np.int64)
        if n:
            if flat.size and np.bincount(flat).max() > 1:
                # Rare (a member listing a partition twice): the last holder in rank order wins.
                for r, parts in enumerate(self.current):
                    owner_arr[parts] = r
            else:
                owner_arr[flat] = np.repeat(np.arange(n, dtype=np.int64), owned_lengths)
        self.owner: list[int] = owner_arr.tolist()
        self.prev_owner = {p: rank[m] for p, m in prev_owner.items()}
        self.sizes = np.zeros(n, dtype=np.int64)
        self.active = np.ones(n, dtype=bool)
        topics = layout.topics
        topic_hash = [java_string_hash(t) for t in topics]
        offsets = self.offsets
        topic_of = self.topic_of

        def tp_hash(p: int) -> int:
            t = topic_of[p]
            h = (31 * (31 + p - offsets[t]) + topic_hash[t]) & 0xFFFFFFFF
            return h - (1 << 32) if h & 0x80000000 else h

        self.movements = _PartitionMovements(topic_of, tp_hash)
        self.revocation_required = False
        n_cons = [len(c) for c in self.consumers_of]
        # Topics by (number of consumers, name); layout ranks already follow names.
        self.sorted_topics = sorted(range(n_topics), key=lambda t: (n_cons[t], t))
        self._balanced_cache: bool | None = None
        # topic -> member -> partitions of that topic the member holds (for isBalanced); built
        # on first use: a group that is balanced after the unassigned partitions never needs it.
        self.held: list[dict[int, int]] | None = None
        # (member, topic) that proved the assignment unbalanced last time; usually still does
        self._witness: tuple[int, int] | None = None
        # Kafka's work ("Kafka's work" below): the members in HashMap order (Kafka's maps of
        # members iterate so), and logs of the course the balancing takes, replayed when the
        # counts are read. src[r]: place in HashMap order of the member of rank r; its inverse
        # lists the ranks.
        self.hm_ranks = np.argsort(src, kind="stable") if n else np.zeros(0, np.int64)
        # isBalanced's states: where each begins in the move log, and how often Kafka calls it
        # there (each call rescans); the TreeSet walks: the members handed partitions, in order.
        self._state_starts: list[int] = []
        self._state_calls: list[int] = []
        self._moves: list[tuple[int, int, int]] = []
        self._owner0: np.ndarray | None = None
        self._hm_consumers: dict[int, np.ndarray] = {}
        self._tree_sizes0: np.ndarray | None = None
        self._tree_given: list[int] = []
        self._tree_topics: list[int] = []
        self._tree_events: list[tuple[int, int, int, bool]] = []
        self._tree_left: list[int] = []
        work.add("subscriptions", sum(map(len, raw_topics)))
        work.add("tp_hash_ops", total_owned)  # currentPartitionConsumer.put
        self._defer_fill(total_owned)
        work.add("partitions", layout.total)  # getAllTopicPartitions

    # -- helpers ---------------------------------------------------------------------------
    def _subscribed_set(self, r: int) -> frozenset[int]:
        """Topic ranks member ``r`` subscribes to (built per group on first use)."""
        g = self._group_of_l[r]
        topics = self._group_sets[g]
        if topics is None:
            topics = self._group_sets[g] = frozenset(np.flatnonzero(self.group_matrix[g]).tolist())
        return topics

    def _first_subscribed(self, topic: int) -> int:
        """First member of the (size, id)-sorted set that subscribes to ``topic``."""
        cand = self.consumers_of[topic]
        cand = cand[self.active[cand]]
        return int(cand[np.argmin(self.sizes[cand])])

    def _min_size(self, topic: int) -> int:
        cand = self.consumers_of[topic]
        return int(self.sizes[cand].min())

    def _give(self, p: int, r: int) -> None:
        self.current[r].append(p)
        self.owner[p] = r
        self.sizes[r] += 1
        if self.held is not None:
            holders = self.held[self.topic_of[p]]
            holders[r] = holders.get(r, 0) + 1
        self._balanced_cache = None

    def _take(self, p: int, r: int) -> int:
        """Take ``p`` from ``r``; returns where it was in ``r``'s list (what Kafka's
        ``List#remove`` scans)."""
        parts = self.current[r]
        at = parts.index(p)
        del parts[at]
        self.sizes[r] -= 1
        if self.held is not None:
            holders = self.held[self.topic_of[p]]
            holders[r] -= 1
            if not holders[r]:
                del holders[r]
        self._balanced_cache = None
        return at

    def _held(self) -> list[dict[int, int]]:
        held = self.held
        if held is None:
            held = self._rebuild_held()
        return held

    def _rebuild_held(self) -> list[dict[int, int]]:
        held: list[dict[int, int]] = [{} for _ in self.consumers_of]
        self.held = held
        topic_of = self.topic_of
        for r, parts in enumerate(self.current):
            for p in parts:
                holders = held[topic_of[p]]
                holders[r] = holders.get(r, 0) + 1
        return held

    # -- Kafka's work ----------------------------------------------------------------------
    def _count_owned_pass(self, flat: np.ndarray, member: np.ndarray, ok: np.ndarray) -> None:
        """``assignOwnedPartitions`` checks each claim against the member's subscription with
        ``topics().contains`` (the raw list, as sent); ``getUnassignedPartitions`` sorts the kept
        claims (``PartitionComparator``: topics by how many members subscribe, then name,
        then partition; members in ``HashMap`` order) and walks every partition."""
        work = self.work
        work.add("partitions", self.layout.total)
        if not flat.size:
            return
        group_of, groups = self._group_of_l, self.group_tuples
        names, offsets = self.layout.topics, self.layout.offsets
        topic_arr = self.topic_arr

        def scans() -> dict[str, float]:
            where: dict[int, dict[str, int]] = {}
            total = 0
            for r, t in zip(member.tolist(), topic_arr[flat].tolist(), strict=True):
                g = group_of[r]
                found = where.get(g)
                if found is None:
                    found = where[g] = {}
                    for i, name in enumerate(reversed(groups[g])):
                        found[name] = len(groups[g]) - i
                total += found.get(names[t], len(groups[g]))
            return {"topic_scans": total}

        work.defer(scans)
        kept, kept_member = flat[ok], member[ok]
        if not kept.size:
            return
        place = np.empty(len(self.sorted_topics), dtype=np.int64)
        place[self.sorted_topics] = np.arange(len(self.sorted_topics), dtype=np.int64)
        hm_place = np.empty(self.hm_ranks.size, dtype=np.int64)
        hm_place[self.hm_ranks] = np.arange(self.hm_ranks.size, dtype=np.int64)
        width = int(max(self.counts)) + 1

        def sort_compares() -> dict[str, float]:
            in_list = kept[np.argsort(hm_place[kept_member], kind="stable")]
            rank = topic_arr[in_list]
            keys = place[rank] * width + (in_list - offsets[rank])
            return {"tp_sort_compares": timsort_compares(keys)}

        work.defer(sort_compares)

    def _same(self) -> tuple[np.ndarray, float]:
        """Equal-hash counts of the layout's partitions (``assignors._kafka_work.same_hash``)."""
        return same_hash(self.layout.topics, self.layout.counts)

    def _mean_same(self, lookups: int) -> dict[str, float]:
        """Equal-hash keys met by ``lookups`` lookups in a map of every partition."""
        return {"tp_same_hash": lookups * float(self._same()[0].mean())}

    def _defer_fill(self, after: int, before: int = 0) -> None:
        """Equal-hash keys met putting partitions into a map of ``before`` until it holds
        ``after`` (a uniform subset of the layout's partitions)."""
        total = self.layout.total

        def met() -> dict[str, float]:
            fill = self._same()[1]
            return {
                "tp_same_hash": subset_fill_same(fill, after, total)
                - subset_fill_same(fill, before, total)
            }

        self.work.defer(met)

    def _replay_balance(
        self,
        owner0: np.ndarray,
        sizes0: np.ndarray,
        active: np.ndarray,
        lists0: dict[int, list[int]],
        moves: list[tuple[int, int, int]],
        states: list[tuple[int, int]],
    ) -> dict[str, float]:
        """What Kafka's ``isBalanced`` calls cost: every state the balancing loops went through
        (owners and the members' lists after ``moves[:start]``), times the calls made in it."""
        owner, sizes = owner0.copy(), sizes0.copy()
        lists = {r: list(parts) for r, parts in lists0.items()}
        totals: dict[str, float] = {}
        applied = 0
        for start, calls in states:
            while applied < start:
                p, old, new = moves[applied]
                owner[p] = new
                sizes[old] -= 1
                sizes[new] += 1
                lists[old].remove(p)
                lists[new].append(p)
                applied += 1
            for term, count_ in self._balance_cost(owner, sizes, active, lists).items():
                totals[term] = totals.get(term, 0.0) + count_ * calls
        return totals

    def _balance_cost(
        self,
        owner: np.ndarray,
        sizes: np.ndarray,
        active: np.ndarray,
        lists: dict[int, list[int]],
    ) -> dict[str, float]:
        """What one call of Kafka's ``isBalanced`` does with these owners and sizes.

        It compares the smallest and largest assignment (the TreeSet's ends); when they differ
        by two or more it fills a HashMap of every assigned partition (``containsKey`` and
        ``put`` each), then takes the members in (size, id) order, skips those holding all they
        can, and scans each one's topics partition by partition: builds the ``TopicPartition``,
        asks the member's list ``contains`` (a scan of the list) and, when it is not there, looks
        its owner up, until a partition whose owner holds two more than the member: then it
        returns false. Members scanned to the end cost a closed form; the member that ends the
        scan is scanned on the owner array up to that partition."""
        cost = {"tree_steps": 2.0}
        if not active.any():
            return cost
        active_sizes = sizes[active]
        if int(active_sizes.min()) >= int(active_sizes.max()) - 1:
            return cost
        same, fill = self._same()
        held = float(active_sizes.sum())
        cost["tp_hash_ops"] = 2 * held
        cost["tp_same_hash"] = 2 * subset_fill_same(fill, int(held), self.layout.total)
        eligible = active & (sizes != self.max_size_arr)
        n = len(self.members)
        key = sizes * n + np.arange(n, dtype=np.int64)
        remaining = eligible.copy()
        big = np.iinfo(np.int64).max
        while remaining.any():
            c = int(np.argmin(np.where(remaining, key, big)))
            found, scan = self._scan_member(c, owner, sizes, same, lists[c])
            for term, value in scan.items():
                cost[term] = cost.get(term, 0.0) + value
            if found:
                cost["tree_steps"] += float(np.count_nonzero(active & (key <= key[c])))
                return cost
            remaining[c] = False
            if not found and not remaining.any():
                break
            # The members left are scanned to the end too when none of them finds a partition
            # to take: check that in one pass and cost them in closed form.
            if not self._any_violation(owner, sizes, remaining):
                self._add_full_scans(cost, np.flatnonzero(remaining), owner, sizes, same)
                break
        cost["tree_steps"] += float(np.count_nonzero(active))
        return cost

    def _any_violation(self, owner: np.ndarray, sizes: np.ndarray, members: np.ndarray) -> bool:
        """Whether some of ``members`` could take a partition of its topics from a member
        holding at least two more (isBalanced's test, all at once)."""
        mine = owner >= 0
        holder_size = np.full(owner.size, -1, dtype=np.int64)
        holder_size[mine] = sizes[owner[mine]]
        topic_max = np.full(len(self.counts), -1, dtype=np.int64)
        np.maximum.at(topic_max, self.topic_arr, holder_size)
        group_max = np.where(self.group_matrix, topic_max, -1).max(axis=1, initial=-1)
        return bool((members & (group_max[self.group_of] > sizes + 1)).any())

    def _add_full_scans(
        self,
        cost: dict[str, float],
        idx: np.ndarray,
        owner: np.ndarray,
        sizes: np.ndarray,
        same: np.ndarray,
    ) -> None:
        """Closed form of scanning members ``idx`` to the end: each of the S partitions of its
        topics built and looked for in its list of L (L compares when absent, its place when
        present), and the S - L it does not hold looked up in the HashMap."""
        if not idx.size:
            return
        s_ = self.max_size_arr[idx].astype(np.float64)
        l_ = sizes[idx].astype(np.float64)
        mine = owner >= 0
        owned_same = np.bincount(
            owner[mine], weights=same[mine].astype(np.float64), minlength=len(self.members)
        )
        topic_same = np.bincount(
            self.topic_arr, weights=same.astype(np.float64), minlength=len(self.counts)
        )
        group_same = self.group_matrix.astype(np.float64) @ topic_same
        subscribed_same = group_same[self.group_of[idx]]
        cost["balance_scan_partitions"] = cost.get("balance_scan_partitions", 0.0) + s_.sum()
        cost["tp_compares"] = cost.get("tp_compares", 0.0) + float(
            ((s_ - l_) * l_ + l_ * (l_ + 1) / 2).sum()
        )
        cost["tp_hash_ops"] = cost.get("tp_hash_ops", 0.0) + float((s_ - l_).sum())
        cost["tp_same_hash"] = cost.get("tp_same_hash", 0.0) + float(
            (subscribed_same - owned_same[idx]).sum()
        )

    def _scan_member(
        self, c: int, owner: np.ndarray, sizes: np.ndarray, same: np.ndarray, mine_list: list[int]
    ) -> tuple[bool, dict[str, float]]:
        """isBalanced's scan of member ``c``'s topics (subscription order) up to the first
        partition whose owner holds at least two more than ``c``: (found one, its cost)."""
        size = int(sizes[c])
        rank = self.layout.rank
        topics = [rank[t] for t in self.group_tuples[self._group_of_l[c]] if t in rank]
        offsets, counts = self.offsets, self.counts
        scanned = held = at_sum = 0
        mine_at: dict[int, int] | None = None
        same_met = 0.0
        found = False
        for t in topics:
            lo = offsets[t]
            owners = owner[lo : lo + counts[t]]
            hit = (owners >= 0) & (owners != c) & (sizes[np.maximum(owners, 0)] > size + 1)
            if hit.any():
                owners = owners[: int(np.argmax(hit)) + 1]
                found = True
            mine = owners == c
            n_mine = int(np.count_nonzero(mine))
            if n_mine:
                # List#contains finds a held partition at its place in the member's list.
                if mine_at is None:
                    mine_at = {p: i for i, p in enumerate(mine_list)}
                at_sum += sum(mine_at[lo + j] + 1 for j in np.flatnonzero(mine).tolist())
            scanned += int(owners.size)
            held += n_mine
            same_met += float(same[lo : lo + owners.size][~mine].sum())
            if found:
                break
        return found, {
            "balance_scan_partitions": float(scanned),
            "tp_compares": float((scanned - held) * size + at_sum),
            "tp_hash_ops": float(scanned - held),
            "tp_same_hash": same_met,
        }

    def _replay_tree(
        self,
        sizes0: np.ndarray,
        given: list[int],
        given_topics: list[int],
        left: list[int],
        events: list[tuple[int, int, int, bool]],
    ) -> dict[str, float]:
        """Kafka's walks of ``sortedCurrentSubscriptions`` (members by (size, id)) for the first
        member subscribed to a topic, in ``maybeAssignPartition`` and ``reassignPartition``: the
        members walked past (each a ``consumer2AllPotentialTopics`` lookup and a scan of its
        topic list, the mean list length of the topic's non-subscribers) and the chosen one
        (a scan to the topic). Replayed on a sorted list of (size, id) keys."""
        n = len(self.members)
        rank = self.layout.rank
        lists = [[rank[t] for t in g if t in rank] for g in self.group_tuples]
        list_len = np.array([len(lists[g]) for g in self._group_of_l], dtype=np.float64)
        subscribers_len = self.subscribed.T.astype(np.float64) @ list_len
        k = self.subscribed.sum(axis=0)
        others = np.maximum(n - k, 1)
        mean_other = (list_len.sum() - subscribers_len) / others
        place: list[dict[int, int]] = []
        for topics in lists:
            found: dict[int, int] = {}
            for i in range(len(topics) - 1, -1, -1):
                found[topics[i]] = i + 1
            place.append(found)
        group_of = self._group_of_l
        size = sizes0.tolist()
        keys = sorted(size[r] * n + r for r in range(n))
        walked = 0
        scans = 0.0

        def step(r: int, delta: int) -> None:
            at = bisect.bisect_left(keys, size[r] * n + r)
            del keys[at]
            size[r] += delta
            bisect.insort(keys, size[r] * n + r)

        for r, t in zip(given, given_topics, strict=True):
            at = bisect.bisect_left(keys, size[r] * n + r)
            walked += at + 1
            scans += at * mean_other[t] + place[group_of[r]][t]
            step(r, 1)
        for r in left:
            del keys[bisect.bisect_left(keys, size[r] * n + r)]
        for t, old, new, by_tree in events:
            if by_tree:
                at = bisect.bisect_left(keys, size[new] * n + new)
                walked += at + 1
                scans += at * mean_other[t] + place[group_of[new]][t]
            step(old, -1)
            step(new, 1)
        return {"tree_steps": float(walked), "topic_scans": scans}

    # -- Kafka's steps ---------------------------------------------------------------------
    def build(self) -> dict[str, PartitionList]:
        # Claims are of existing topics only (the claims pass drops the others); a member keeps
        # those of topics it still subscribes to.
        assigned = np.zeros(self.layout.total, dtype=bool)
        lengths = [len(c) for c in self.current]
        flat = np.fromiter(chain.from_iterable(self.current), dtype=np.int64, count=sum(lengths))
        member = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        ok = self.subscribed[member, self.topic_arr[flat]] if flat.size else np.ones(0, dtype=bool)
        self._count_owned_pass(flat, member, ok)
        if not ok.all():
            self.revocation_required = True
            topic_of = self.topic_of
            for r in np.unique(member[~ok]).tolist():
                ss = self._subscribed_set(r)
                self.current[r] = [p for p in self.current[r] if topic_of[p] in ss]
        assigned[flat[ok]] = True
        self.sizes[:] = np.bincount(member[ok], minlength=len(lengths)) if flat.size else 0
        offsets = self.offsets
        order = [np.arange(offsets[t], offsets[t + 1], dtype=np.int64) for t in self.sorted_topics]
        all_sorted = np.concatenate(order) if order else np.empty(0, dtype=np.int64)
        unassigned = all_sorted[~assigned[all_sorted]]
        self._balance(all_sorted, unassigned)
        work = self.work
        if self._owner0 is not None and self._state_calls:
            states = list(zip(self._state_starts, self._state_calls, strict=True))
            work.defer(
                partial(
                    self._replay_balance,
                    self._owner0,
                    self._sizes0,
                    self._active0,
                    self._lists0,
                    self._moves,
                    states,
                )
            )
        if self._tree_sizes0 is not None:
            work.defer(
                partial(
                    self._replay_tree,
                    self._tree_sizes0,
                    self._tree_given,
                    self._tree_topics,
                    self._tree_left,
                    self._tree_events,
                )
            )
        topics, offs = self.layout.topics, self.layout.offsets
        lengths = [len(c) for c in self.current]
        flat = np.fromiter(chain.from_iterable(self.current), dtype=np.int64, count=sum(lengths))
        flat.flags.writeable = False
        bounds = np.concatenate(([0], np.cumsum(lengths, dtype=np.int64))).tolist()
        return dict(zip(self.members, partition_lists(topics, offs, flat, bounds), strict=True))

    def _balance(self, all_sorted: np.ndarray, unassigned: np.ndarray) -> None:
        initializing = int(self.sizes.max()) == 0
        topic_of = self.topic_of
        consumers_of = self.consumers_of
        work = self.work
        n = len(self.members)
        log_n = math.log2(max(n, 2))
        work.add("tree_steps", n * log_n)  # sortedCurrentSubscriptions.addAll
        self._tree_sizes0 = self.sizes.copy()
        given, given_topics = self._tree_given, self._tree_topics
        for p in unassigned.tolist():
            t = topic_of[p]
            if consumers_of[t].size:
                r = self._first_subscribed(t)
                self._give(p, r)
                given.append(r)
                given_topics.append(t)
        # maybeAssignPartition: the TreeSet walk is replayed later; here its remove and add of
        # the chosen member, and currentPartitionConsumer.put.
        owned_before = int(self._tree_sizes0.sum())
        work.add("tree_steps", 2 * log_n * len(given))
        work.add("partitions", len(given))
        work.add("tp_hash_ops", len(given))
        self._defer_fill(owned_before + len(given), owned_before)

        fixed = np.array([c.size < 2 for c in consumers_of], dtype=bool)
        n_all, n_unassigned = int(all_sorted.size), int(unassigned.size)
        if fixed.any():
            topic_arr = np.asarray(topic_of, dtype=np.int64)
            all_sorted = all_sorted[~fixed[topic_arr[all_sorted]]]
            unassigned = unassigned[~fixed[topic_arr[unassigned]]]
            # fixedPartitions filled, then both lists' removeAll probe it once per element.
            fixed_count = int(np.asarray(self.counts, dtype=np.int64)[fixed].sum())
            work.add("tp_hash_ops", fixed_count + n_all + n_unassigned)
        else:
            work.add("partitions", n_all + n_unassigned)  # removeAll of an empty set
        fixed_topics = set(np.flatnonzero(fixed).tolist())
        # Below its maximum a member always participates (canParticipateInReassignment).
        work.add("tree_steps", n)
        for r in np.flatnonzero(self.sizes >= self.max_size_arr).tolist():
            if not self._can_participate(r, fixed_topics):
                self.active[r] = False
                self._tree_left.append(r)
        self._balanced_cache = None
        # The deep copies taken before balancing: currentAssignment's lists, and
        # currentPartitionConsumer (a HashMap of every assigned partition).
        held_total = int(self.sizes.sum())
        work.add("partitions", int(self.sizes[self.active].sum()))
        work.add("tp_hash_ops", held_total)
        self._defer_fill(held_total)
        self._owner0 = np.array(self.owner, dtype=np.int64)
        self._sizes0 = self.sizes.copy()
        self._active0 = self.active.copy()

        act = self.active
        active_ranks = np.flatnonzero(act).tolist()
        pre_balance = dict(
            zip(active_ranks, map(list, map(self.current.__getitem__, active_ranks)), strict=True)
        )
        pre_owner = list(self.owner)
        pre_sizes = self.sizes.copy()
        self._lists0 = pre_balance  # the members' lists as balancing starts (copies)

        if not self.revocation_required:
            self._perform_reassignments(unassigned.tolist())
        performed = self._perform_reassignments(all_sorted.tolist())

        if not initializing and performed:
            act = self.active
            n_act = int(np.count_nonzero(act))
            work.add("tree_steps", n_act * (n_act - 1) + 2 * n_act)  # getBalanceScore, twice
            if _balance_score(self.sizes[act]) >= _balance_score(pre_sizes[act]):
                for r, parts in pre_balance.items():
                    self.current[r] = parts
                self.owner = pre_owner
                self.sizes = pre_sizes
                self.held = None  # rebuilt on next use
                work.add("partitions", int(pre_sizes[act].sum()))
                work.add("tp_hash_ops", held_total)
        work.add("tree_steps", len(self._tree_left) * log_n)  # the fixed members come back

    def _can_participate(self, r: int, fixed_topics: set[int]) -> bool:
        if int(self.sizes[r]) < self.max_size[r]:
            return True
        topic_of = self.topic_of
        return any(topic_of[p] not in fixed_topics for p in self.current[r])

    def _is_balanced(self) -> bool:
        """Kafka's ``isBalanced``: counts differ by at most one, or no member below its maximum
        could take a partition of its topics from a member holding at least two more.

        Kafka rescans every partition on each call; we cache the answer until the next move,
        and recheck the last (member, topic) that proved imbalance before a full scan.
        """
        if self._balanced_cache is None:
            self._balanced_cache = self._compute_balanced()
            self._state_starts.append(len(self._moves))
            self._state_calls.append(0)
        self._state_calls[-1] += 1
        return self._balanced_cache

    def _topic_max(self, topic: int) -> int:
        """Largest assignment among the active holders of ``topic``'s partitions (-1: none)."""
        sizes, active = self.sizes, self.active
        best = -1
        for r in self._held()[topic]:
            if active[r] and sizes[r] > best:
                best = int(sizes[r])
        return best

    def _violates(self, r: int, topic: int, topic_max: int | None = None) -> bool:
        s = int(self.sizes[r])
        if not self.active[r] or s == self.max_size[r]:
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
        topic_max = [self._topic_max(t) if h else -1 for t, h in enumerate(self._held())]
        # Largest topic_max over each group's topics (-1 for a group without topics).
        group_max = np.where(self.group_matrix, np.asarray(topic_max, dtype=np.int64), -1).max(
            axis=1, initial=-1
        )
        sizes = self.sizes
        violating = act & (sizes != self.max_size_arr) & (group_max[self.group_of] > sizes + 1)
        if not violating.any():
            self._witness = None
            return True
        r = int(np.argmax(violating))
        s = int(sizes[r])
        group_of_r = int(self.group_of[r])
        rank = self.layout.rank
        topics = [rank[t] for t in self.group_tuples[group_of_r] if t in rank]  # subscription order
        self._witness = (r, next(t for t in topics if topic_max[t] > s + 1))
        return False

    def _perform_reassignments(self, partitions: list[int]) -> bool:
        performed = False
        prev_owner, topic_of = self.prev_owner, self.topic_of
        consumers_of = self.consumers_of
        # Per iteration Kafka looks the partition up in currentPartitionConsumer and (when it
        # holds anything) prevAssignment, then walks the topic's potential consumers for one
        # that holds at least two fewer partitions: all of them when there is none.
        lookups = 2 if prev_owner else 1
        iterations = walked = prev_gets = 0
        while True:
            modified = False
            for p in partitions:
                if self._is_balanced():
                    break
                iterations += 1
                consumer = self.owner[p]
                if consumer < 0:
                    continue
                size = int(self.sizes[consumer])
                prev = prev_owner.get(p)
                t = topic_of[p]
                if prev is not None:
                    prev_gets += 1
                if (
                    prev is not None
                    and self.active[prev]
                    and t in self._subscribed_set(prev)
                    and size > int(self.sizes[prev]) + 1
                ):
                    prev_gets += 1
                    self._reassign(p, prev, False)
                    performed = modified = True
                    continue
                if size > self._min_size(t) + 1:
                    walked += self._walk_to_taker(t, size)
                    self._reassign(p, self._first_subscribed(t), True)
                    performed = modified = True
                else:
                    walked += int(consumers_of[t].size)
            if not modified:
                work = self.work
                work.add("tp_hash_ops", lookups * iterations + prev_gets)
                work.add("tree_steps", walked)
                # currentPartitionConsumer.get of each: the partition's equal-hash keys
                work.defer(partial(self._mean_same, iterations))
                return performed

    def _walk_to_taker(self, topic: int, size: int) -> int:
        """How many of ``topic``'s potential consumers (in Kafka's order: the subscriptions'
        ``HashMap`` order) ``performReassignments`` checks before one holds fewer than
        ``size - 1`` partitions."""
        cand = self._hm_consumers.get(topic)
        if cand is None:
            hm = self.hm_ranks
            cand = self._hm_consumers[topic] = hm[self.subscribed[hm, topic]]
        return int(np.argmax(self.sizes[cand] + 1 < size)) + 1

    def _reassign(self, p: int, new: int, by_tree: bool) -> None:
        """Kafka's ``reassignPartition``: ``by_tree`` when the new owner was found by walking the
        TreeSet of members (``reassignPartition(partition)``), not named by ``prevAssignment``."""
        old = self.owner[p]
        actual = self.movements.actual_partition_to_move(p, old, new)
        old = self.owner[actual]
        self.movements.move(actual, old, new)
        at = self._take(actual, old)
        self._give(actual, new)
        # processPartitionMovement: two TreeSet removes and adds, the movement records, the
        # old owner's List#remove and currentPartitionConsumer.put.
        work = self.work
        work.add("tree_steps", 4 * math.log2(max(len(self.members), 2)))
        work.add("tp_hash_ops", 5)
        work.add("tp_compares", at + 1)
        self._tree_events.append((self.topic_of[actual], old, new, by_tree))
        self._moves.append((actual, old, new))


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
        kept, bounds, multi = _resolve_claims(layout, order, data, sub_gens)
        work = self.last_work = KafkaWork(self.name)
        self._count_common(work, layout, subs, data)
        if all_subscriptions_equal(subscriptions, order):
            work.path = "constrained"
            assignment, transferring = _constrained(layout, order, kept, bounds, multi, work)
            return StickyResult(
                assignment,
                transferring,
                constrained=True,
                order=order,
                claims=data,
                total=layout.total,
            )

        max_gen = max(
            (DEFAULT_GENERATION if g is None else g for g in data.generations),
            default=DEFAULT_GENERATION,
        )
        work.path = "general"
        prev_owner = self._previous_owners(layout, order, data, max_gen, work)
        if self.name == "sticky":
            # prepopulateCurrentAssignments reads every member's user data a second time.
            work.add("user_data_partitions", int(data.lengths.sum()))
        builder = _GeneralBuilder(layout, subscriptions, (order, kept, bounds), prev_owner, work)
        return StickyResult(
            builder.build(),
            None,
            constrained=False,
            order=order,
            claims=data,
            total=layout.total,
            layout_topics=layout.topics,
            layout_counts=layout.counts.tolist(),
        )

    def _count_common(
        self, work: KafkaWork, layout: TopicLayout, subs: Sequence[Subscription], data: _Claims
    ) -> None:
        """What both of Kafka's paths do first: ``partitionInfosWithoutRacks`` and ``RackInfo``
        (a pass over every partition each), then ``allSubscriptionsEqual``, which compares each
        member's topics with the first's, reads its member data and puts every claim of an
        existing topic into ``allPreviousPartitionsToOwner`` (a ``get`` and a ``put``)."""
        work.add("calls", 1)
        work.add("members", len(subs))
        work.add("partitions", 2 * layout.total)
        claims = int(data.lengths.sum())
        work.add("claims", claims)
        if self.name == "sticky":
            work.add("user_data_partitions", claims)

        def lookups() -> dict[str, float]:
            valid = int(np.count_nonzero(data.flat >= 0))
            fill = same_hash(layout.topics, layout.counts)[1]
            return {
                "subscriptions": sum(map(len, map(_topics_of_sub, subs))),
                "tp_hash_ops": 2 * valid,
                "tp_same_hash": 2 * subset_fill_same(fill, valid, layout.total),
            }

        work.defer(lookups)

    @staticmethod
    def _previous_owners(
        layout: TopicLayout, order: list[str], data: _Claims, max_gen: int, work: KafkaWork
    ) -> dict[int, str]:
        """``prepopulateCurrentAssignments``: owners from older generations, newest wins (by
        global partition index). Kafka looks each of their claims up in ``prevAssignment`` and
        puts it there (``updatePrevAssignment``)."""
        best: dict[int, tuple[int, str]] = {}
        bounds = np.concatenate(([0], np.cumsum(data.lengths))).tolist()
        considered = 0
        for i, (m, g) in enumerate(zip(order, data.generations, strict=True)):
            if g is not None and g < max_gen:
                gen = g
            elif g is None and max_gen > DEFAULT_GENERATION:
                gen = DEFAULT_GENERATION
            else:
                continue
            claims = data.flat[bounds[i] : bounds[i + 1]]
            considered += int(claims.size)
            for idx in claims[claims >= 0].tolist():
                cur = best.get(idx)
                if cur is None or gen > cur[0]:
                    best[idx] = (gen, m)
        if considered:
            work.add("tp_hash_ops", 2 * considered)
            work.defer(
                lambda: {
                    "tp_same_hash": 2
                    * subset_fill_same(
                        same_hash(layout.topics, layout.counts)[1], considered, layout.total
                    )
                }
            )
        return {k: v[1] for k, v in best.items()}

    def _assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, Assignment]:
        with no_gc():
            result = self.sticky_assign(partitions_per_topic, subscriptions)
            return self._finish(result, subscriptions)

    def _finish(
        self, result: StickyResult, subscriptions: dict[str, Subscription]
    ) -> dict[str, Assignment]:
        assignment = result.assignment
        if len(assignment) == len(subscriptions) and all(
            map(assignment.__contains__, subscriptions)
        ):
            return assignments_of(subscriptions, map(assignment.__getitem__, subscriptions))
        return {m: assignment_of(assignment.get(m, [])) for m in subscriptions}


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
        gens = [
            sub.generation if sub.generation >= 0 else cooperative_generation(sub.user_data)
            for sub in subs
        ]
        return _claims_from_owned(layout, subs, gens)

    def _finish(
        self, result: StickyResult, subscriptions: dict[str, Subscription]
    ) -> dict[str, Assignment]:
        mask = result.transferring
        work = self.last_work
        if mask is None:
            mask = _partitions_transferring(result, work)
        if not mask.any():
            return assignments_of(subscriptions, map(result.assignment.__getitem__, subscriptions))
        # Only the lists holding a withheld partition are rebuilt (found in one pass).
        members = list(result.assignment)
        lists = list(result.assignment.values())
        flat, lengths = concatenated_indices(lists)
        holder = np.repeat(np.arange(len(members), dtype=np.int64), lengths)
        touched = set(np.unique(holder[mask[flat]]).tolist())
        changed = {}
        # adjustAssignment: List#remove of each withheld partition from its assignee's list.
        scanned = 0
        for i in touched:
            parts = lists[i]
            withheld = mask[parts.indices]
            scanned += int(np.flatnonzero(withheld).sum()) + int(np.count_nonzero(withheld))
            kept = parts.indices[~withheld]
            kept.flags.writeable = False  # like every result array
            changed[members[i]] = PartitionList(parts.topics, parts.offsets, kept)
        if work is not None:
            work.add("tp_compares", scanned)
        merged = {**result.assignment, **changed}
        return assignments_of(subscriptions, map(merged.__getitem__, subscriptions))


def _partitions_transferring(result: StickyResult, work: KafkaWork | None = None) -> np.ndarray:
    """Mask (by global index) of the partitions added to one member that another member must
    revoke first (``CooperativeStickyAssignor#computePartitionsTransferringOwnership``): a
    partition some member gets without owning it, that some member owns without getting it.
    Owned partitions of unknown topics or out of range can be neither, so the claims' valid
    entries stand for ``owned_partitions``.

    Kafka builds a ``HashSet`` of each member's owned and of its assigned partitions, probes
    each with the other list, collects the added partitions in a map and the revoked in a set,
    and keeps the added ones the revoked set contains (``retainAll``): recorded in ``work``."""
    mask, assigned, added, revoked = _transferring_mask(result)
    if work is not None:
        owned = int(result.claims.lengths.sum())
        work.add("tp_hash_ops", 2 * owned + 2 * assigned + 2 * added + revoked)
        topics, counts, total = result.layout_topics, result.layout_counts, result.total
        work.defer(
            lambda: {"tp_same_hash": subset_fill_same(same_hash(topics, counts)[1], added, total)}
        )
    return mask


def _transferring_mask(result: StickyResult) -> tuple[np.ndarray, int, int, int]:
    """The mask, and how many (partition, member) pairs were assigned, added (assigned to a
    member that did not own it) and revoked (owned by a member that does not get it)."""
    order, claims = result.order, result.claims
    n = max(len(order), 1)
    owned_member = np.repeat(np.arange(len(order), dtype=np.int64), claims.lengths)
    valid = claims.flat >= 0
    owned_part = claims.flat[valid]
    owned_keys = owned_part * n + owned_member[valid]
    # The assignment's lists in its own member order, members numbered by their place in `order`.
    position = {m: i for i, m in enumerate(order)}
    got_part, lengths = concatenated_indices(list(result.assignment.values()))
    got_member = np.repeat(
        np.fromiter(
            map(position.__getitem__, result.assignment),
            dtype=np.int64,
            count=len(result.assignment),
        ),
        lengths,
    )
    added = np.zeros(result.total, dtype=bool)
    revoked = np.zeros(result.total, dtype=bool)
    total = result.total
    if (not owned_part.size or np.bincount(owned_part, minlength=total).max() <= 1) and (
        not got_part.size or np.bincount(got_part, minlength=total).max() <= 1
    ):
        # Each partition owned and assigned at most once (the usual case): compare owners.
        owned_by = np.full(total, -1, dtype=np.int64)
        owned_by[owned_part] = owned_member[valid]
        got_by = np.full(total, -1, dtype=np.int64)
        got_by[got_part] = got_member
        new = got_part[owned_by[got_part] != got_member]
        gone = owned_part[got_by[owned_part] != owned_member[valid]]
    else:
        got_keys = got_part * n + got_member
        new = got_part[~np.isin(got_keys, owned_keys)]
        gone = owned_part[~np.isin(owned_keys, got_keys)]
    added[new] = True
    revoked[gone] = True
    return added & revoked, int(got_part.size), int(new.size), int(gone.size)
