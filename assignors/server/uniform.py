"""UniformAssignor ("uniform"), the default server-side assignor of KIP-848, after Kafka's
``UniformAssignor`` and its two builders.

Kafka picks the algorithm by the group's subscription type.

Homogeneous (every member subscribes to the same topics; ``UniformHomogeneousAssignmentBuilder``).
Balance first, then stickiness. With ``P`` partitions and ``M`` members, every member's quota is
``P // M``, and the first ``P % M`` members *in member order* (Kafka iterates a ``HashMap`` keyed by
member id) get one more. Each member keeps the partitions of its current target assignment up to
its quota, walking them topic by topic and each topic's partitions in the order of the
``HashSet`` they were read into; the rest are revoked. The partitions nobody keeps (never assigned
first, in topic then partition order, then the revoked ones in the order they were revoked) are
dealt out in one pass: each member with room, in member order, takes the next ones until its quota
is met. Counts differ by at most one. Note that a member that holds ``quota + 1`` partitions but is
not among the first ``P % M`` gives one up even when another member is short of ``quota + 1`` only
by the same one: Kafka's quota is positional, not sticky.

Example: members A and B, topics t1 and t2 with 3 partitions each; A holds t1-0, t1-1, t2-0, t2-1
and B holds t1-2, t2-2. Quotas are 3 and 3 (A comes first in member order). A keeps t1-0, t1-1,
t2-0 and gives up t2-1, which goes to B: A = t1[0,1] t2[0], B = t1[2] t2[1,2].

Heterogeneous (``UniformHeterogeneousAssignmentBuilder``, reworked in KAFKA-17710). Members keep
every partition of their current target assignment that they still subscribe to. Topics are then
taken in order of partitions per subscriber (descending), then subscriber count (ascending), then
topic: each topic's unassigned partitions, in ascending order, go to its least loaded subscribers
(by total partition count, then member order), filling level by level. Finally, up to 16 passes
over the topics with at least two subscribers move a topic's partitions from its most loaded
subscribers (their highest partition ids first) to its least loaded ones, until the counts of
each topic's subscribers differ by at most one or a full pass moves nothing. Members whose
subscribers share the same subscription end up balanced to within one; overlapping subscriptions
can leave a larger spread (Kafka's javadoc gives 9, 10, 11).

Where Kafka's answer depends on iteration order we reproduce it, with these documented
differences (see docs/kafka-fidelity.md):
- Member order is that of a ``java.util.HashMap<String, ?>`` filled by ``put`` from empty
  (``assignors._java.hashmap_order``). Java keeps a bucket's insertion order (and with 9 or more
  in one, the table size and the treeified bucket's order depend on it too), which only a
  coordinator knows: a ``GroupMembers`` given a ``tie`` order puts the members in that order (the
  consumer-protocol coordinator gives its members map's order, as Kafka's
  ``TargetAssignmentBuilder`` fills the map), other specs in member id order. A map that shrank
  keeps its larger table in Java (a member removed in the same computation), which we do not
  model.
- Topics: Kafka iterates topic ids in ``HashSet``/``HashMap`` order and breaks ties by
  ``Uuid.compareTo``; both are effectively random per cluster. We use the topic name
  (``String.compareTo``) in both places.
- Within one topic of a member's current assignment (homogeneous revocation), partitions come in
  the order of a ``HashSet<Integer>`` built from a list, as Kafka builds it when it reads the
  target assignment record: bucket ``p ^ (p >>> 16)`` modulo the table size, which is the smallest
  power of two >= max(16, n / 0.75 + 1); partitions sharing a bucket come in ascending order, where
  Java keeps the record's order (a set with 9 or more partitions in one bucket is ordered by the
  model of ``java.util.HashMap``, the partitions put in ascending order).

Rack awareness: none. Kafka removed it from the server-side assignors (KAFKA-16694) before 4.0;
``rack_id`` and partition racks are accepted and ignored.

The homogeneous builder and the heterogeneous fill are numpy passes with no per-partition Python.
The heterogeneous balancing loop moves one partition per step in Python, as Kafka does, on
array-backed state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .._hashmap_model import TREEIFY_THRESHOLD, JavaHashMap
from ..types import AssignorError
from ._group import GroupArrays, by_subscription
from .kafka_time import EMPTY, UNIFORM_HETEROGENEOUS, UNIFORM_HOMOGENEOUS, ServerWork
from .spec import (
    GroupAssignment,
    GroupSpec,
    SubscribedTopicDescriber,
    SubscriptionType,
)

# UniformHeterogeneousAssignmentBuilder.MAX_ITERATION_COUNT
MAX_ITERATION_COUNT = 16


class UniformAssignor:
    """Kafka's ``org.apache.kafka.coordinator.group.assignor.UniformAssignor``."""

    name = "uniform"

    def assign(
        self, group_spec: GroupSpec, topics: SubscribedTopicDescriber | Mapping[str, int]
    ) -> GroupAssignment:
        describer = SubscribedTopicDescriber.of(topics)
        if len(group_spec) == 0:
            result = GroupAssignment.empty()
        elif group_spec.subscription_type is SubscriptionType.HOMOGENEOUS:
            result = _homogeneous(group_spec, describer)
        else:
            result = _heterogeneous(group_spec, describer)
        if result.kafka_work is None:  # (nothing to assign: Kafka returns at once)
            result.kafka_work = ServerWork(EMPTY)
        return result

    def __repr__(self) -> str:
        return f"<server assignor {self.name}>"


def java_hashset_capacity(n: np.ndarray) -> np.ndarray:
    """Table size of ``new HashSet<>(collection)`` holding ``n`` elements:
    ``tableSizeFor(max((int) (n / .75f) + 1, 16))``."""
    want = (n.astype(np.float32) / np.float32(0.75)).astype(np.int64) + 1
    want = np.maximum(want, 16)
    return (1 << np.ceil(np.log2(want)).astype(np.int64)).astype(np.int64)


def _treeified_walks(
    bucket: np.ndarray,
    partition: np.ndarray,
    group: np.ndarray,
    group_size: np.ndarray,
    capacity: np.ndarray,
) -> None:
    """Where 9 or more of one set's partitions share a bucket, Java's ``HashSet`` doubles its
    table (under 64 buckets) or makes the bucket a red-black tree (``HashMap.treeifyBin``), so
    the bucket order above is not its iteration order: for those sets (rare: it takes a member
    holding partitions that are equal modulo the table size), ``bucket`` becomes each partition's
    place in the order the model of ``java.util.HashMap`` gives, puts in ascending order."""
    big = np.flatnonzero(group_size[group] > TREEIFY_THRESHOLD)
    if big.size == 0:
        return
    pair = group[big] * (int(capacity.max()) + 1) + bucket[big]
    _, at, counts = np.unique(pair, return_index=True, return_counts=True)
    for g in np.unique(group[big[at[counts > TREEIFY_THRESHOLD]]]).tolist():
        members = np.flatnonzero(group == g)
        order = np.argsort(partition[members], kind="stable")
        m = JavaHashMap(int, int, int(capacity[members[0]]))
        for p in partition[members][order].tolist():
            m.put(p)
        place = {p: i for i, p in enumerate(m.keys())}
        bucket[members] = [place[p] for p in partition[members].tolist()]


def _homogeneous(spec: GroupSpec, describer: SubscribedTopicDescriber) -> GroupAssignment:
    # The builder takes the topics of the first member in member order.
    # Names that do not exist are dropped: Kafka's coordinator never resolves them to topic ids
    # (its builder would throw if handed one).
    first_topics = spec.subscribed_topic_names(spec.member_ids[0])
    g = GroupArrays(spec, describer, first_topics)
    if not g.topics:
        return GroupAssignment.empty()
    m = len(g.member_ids)
    owner = g.owner
    min_quota, extra = divmod(g.total, m)
    quota = np.full(m, min_quota, dtype=np.int64)
    quota[:extra] += 1
    held_at = np.flatnonzero(owner >= 0)
    entries = member_topic_pairs(owner[held_at], held_at, g.offsets, m)

    # Partitions nobody holds, in topic then partition order.
    unassigned = [np.flatnonzero(owner < 0)]
    held_count = np.bincount(owner + 1, minlength=m + 1)[1:]  # (-1, nobody, counted first)
    room = quota - held_count
    over = room < 0
    if over.any():
        # Only members over their quota give anything up; walk their partitions in Kafka's order:
        # member, topic, HashSet iteration order within the topic.
        mine = np.flatnonzero(np.concatenate(([False], over))[owner + 1])
        holder = owner[mine].astype(np.int64)
        rank = g.topic_of(mine)
        partition = mine - g.offsets[rank]
        n_topics = len(g.topics)
        member_topic = holder * n_topics + rank
        _, inverse, per_member_topic = np.unique(
            member_topic, return_inverse=True, return_counts=True
        )
        capacity = java_hashset_capacity(per_member_topic[inverse])
        bucket = (partition ^ (partition >> 16)) & (capacity - 1)
        _treeified_walks(bucket, partition, inverse, per_member_topic, capacity)
        # ``mine`` is ascending (topic, partition), so a stable sort leaves bucket ties ascending.
        walk = mine[np.lexsort((bucket, rank, holder))]
        walk_holder = owner[walk].astype(np.int64)
        first = np.searchsorted(walk_holder, walk_holder, side="left")
        keep = np.arange(walk.size) - first < quota[walk_holder]
        revoked = walk[~keep]
        owner[revoked] = -1
        unassigned.append(revoked)
        room = np.maximum(room, 0)
    todo = np.concatenate(unassigned)
    takers = np.repeat(np.arange(m, dtype=np.int32), room)
    if takers.size < todo.size:
        raise AssignorError("uniform: partitions were left unassigned")
    takers = takers[: todo.size]
    # Kafka copies the target of a member over its quota (to revoke) and of one with room (to
    # fill): all it held
    copied = int(held_count[over | (room > 0)].sum())
    new_entries = _new_entries(owner, todo, takers, g.offsets, m)
    owner[todo] = takers
    result = g.result(owner)
    result.kafka_work = ServerWork(
        UNIFORM_HOMOGENEOUS,
        members=m,
        topics=len(g.topics),
        held=int(held_at.size),
        entries=entries,
        unassigned=int(todo.size),
        placed=int(todo.size),
        copied=copied,
        new_entries=new_entries,
    )
    return result


# Distinct (member, topic) pairs are counted on a mark array of members x topics up to this size,
# with a sort beyond it.
_MARKS = 50_000_000


def _pair_keys(owners: np.ndarray, gids: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``member * topics + topic rank`` of each partition ``gids`` held by ``owners``."""
    ranks = np.searchsorted(offsets, gids, side="right") - 1
    return owners.astype(np.int64) * (offsets.size - 1) + ranks


def member_topic_pairs(
    owners: np.ndarray, gids: np.ndarray, offsets: np.ndarray, members: int
) -> int:
    """How many distinct (member, topic) pairs the partitions ``gids`` held by ``owners`` (member
    indices below ``members``) make: Kafka's target entries, one partition set each."""
    if not gids.size:
        return 0
    keys = _pair_keys(owners, gids, offsets)
    size = members * (offsets.size - 1)
    if size > _MARKS:
        return int(np.unique(keys).size)
    marks = np.zeros(size, dtype=bool)
    marks[keys] = True
    return int(np.count_nonzero(marks))


def _new_entries(
    owner: np.ndarray, todo: np.ndarray, takers: np.ndarray, offsets: np.ndarray, members: int
) -> int:
    """How many (member, topic) partition sets Kafka creates dealing ``todo`` out to
    ``takers``: the pairs where the taker holds nothing of the topic once revocations are done
    (``owner``, before the deal)."""
    if not todo.size:
        return 0
    dealt = _pair_keys(takers, todo, offsets)
    is_taker = np.zeros(members + 1, dtype=bool)  # [-1]: nobody
    is_taker[takers] = True
    mine = np.flatnonzero(is_taker[owner])
    kept = _pair_keys(owner[mine], mine, offsets)
    size = members * (offsets.size - 1)
    if size > _MARKS:
        return int(np.count_nonzero(~np.isin(np.unique(dealt), kept)))
    marks = np.zeros(size, dtype=bool)
    marks[dealt] = True
    marks[kept] = False
    return int(np.count_nonzero(marks))


def _heterogeneous(spec: GroupSpec, describer: SubscribedTopicDescriber) -> GroupAssignment:
    member_topics = spec._member_topics()
    # Names that do not exist are dropped, as in the homogeneous case.
    subscriptions = by_subscription(member_topics, spec._has_one_subscription())
    distinct = subscriptions[0]
    all_topics = set().union(*distinct) if distinct else set()
    existing = [t for t in all_topics if describer.num_partitions(t) >= 0]
    if not existing:
        return GroupAssignment.empty()
    g = GroupArrays(spec, describer, existing, member_topics, subscriptions=subscriptions)
    held = np.flatnonzero(g.owner >= 0)
    entries = member_topic_pairs(g.owner[held], held, g.offsets, len(g.member_ids))
    subscribers = _subscribers(g, distinct)
    builder = _HeterogeneousBuilder(g, subscribers)
    builder.assign_remaining()
    builder.balance()
    result = g.result(g.owner)
    result.kafka_work = ServerWork(
        UNIFORM_HETEROGENEOUS,
        homogeneous=False,
        members=len(g.member_ids),
        topics=len(g.topics),
        pairs=sum(len(s) for s in subscribers),
        held=int(held.size),
        entries=entries,
        **builder.work,
    )
    return result


def _subscribers(
    g: GroupArrays, distinct: Mapping[frozenset[str], Sequence[int] | np.ndarray]
) -> list[np.ndarray]:
    """Ascending member indices subscribed to each topic (by rank)."""
    parts: list[list[np.ndarray]] = [[] for _ in g.topics]
    for topics, members in distinct.items():
        arr = np.asarray(members, dtype=np.int64)
        for t in topics:
            r = g.rank.get(t)
            if r is not None:
                parts[r].append(arr)
    return [chunks[0] if len(chunks) == 1 else np.sort(np.concatenate(chunks)) for chunks in parts]


class _HeterogeneousBuilder:
    """State of ``UniformHeterogeneousAssignmentBuilder`` after its revocation step."""

    def __init__(self, g: GroupArrays, subscribers: list[np.ndarray]):
        self.g = g
        self.subscribers = subscribers
        self.sizes = np.bincount(g.owner[g.owner >= 0], minlength=len(g.member_ids)).astype(
            np.int64
        )
        self.converged = True  # False when balance() stops at MAX_ITERATION_COUNT passes
        # What Kafka's builder does on the way (``kafka_time.ServerWork`` fields); ``_copied``:
        # the members whose target Kafka has copied (it copies one before changing it).
        self.work = dict.fromkeys(
            (
                "unassigned",
                "placed",
                "copied",
                "new_entries",
                "balancer_inits",
                "sorted_members",
                "imbalanced_partitions",
                "moved",
            ),
            0,
        )
        self._copied = np.zeros(len(g.member_ids), dtype=bool)

    def _first_change(self, members: np.ndarray) -> None:
        """Count the copies Kafka makes of these members' targets (each copied once, with
        what it holds when it first changes)."""
        fresh = members[~self._copied[members]]
        if fresh.size:
            self._copied[fresh] = True
            self.work["copied"] += int(self.sizes[fresh].sum())

    def _sorted_topics(self, ranks: list[int]) -> list[int]:
        """Partitions per subscriber descending, subscriber count ascending, then topic."""
        counts = self.g.counts.tolist()
        subs = [len(s) for s in self.subscribers]
        # Kafka compares the doubles p / s; Python's float division rounds the same way.
        return sorted(ranks, key=lambda r: (-(counts[r] / subs[r]), subs[r], r))

    def assign_remaining(self) -> None:
        g = self.g
        ranks = []
        for r in range(len(g.topics)):
            lo, hi = int(g.offsets[r]), int(g.offsets[r + 1])
            if (g.owner[lo:hi] < 0).any():
                ranks.append(r)
        work = self.work
        for r in self._sorted_topics(ranks):
            lo, hi = int(g.offsets[r]), int(g.offsets[r + 1])
            todo = np.flatnonzero(g.owner[lo:hi] < 0) + lo
            takers = _fill_least_loaded(self.subscribers[r], self.sizes, todo.size)
            who = np.unique(takers)
            self._first_change(who)
            held = g.owner[lo:hi]
            work["new_entries"] += int(who.size - np.count_nonzero(np.isin(who, held[held >= 0])))
            work["balancer_inits"] += 1
            work["sorted_members"] += len(self.subscribers[r])
            work["unassigned"] += int(todo.size)
            work["placed"] += int(todo.size)
            g.owner[todo] = takers
            self.sizes += np.bincount(takers, minlength=self.sizes.size)

    def balance(self) -> None:
        ranks = [r for r in range(len(self.g.topics)) if len(self.subscribers[r]) >= 2]
        if not ranks:
            return
        order = self._sorted_topics(ranks)
        sizes_list = self.sizes.tolist()
        last_rebalanced = -1
        for _ in range(MAX_ITERATION_COUNT):
            for i, r in enumerate(order):
                if i == last_rebalanced:
                    # A full pass since the last move: nothing more to do.
                    return
                moved = self._balance_topic(r, sizes_list)
                if moved > 0 or last_rebalanced == -1:
                    last_rebalanced = i
        self.converged = False

    def _balance_topic(self, r: int, size: list[int]) -> int:
        """Kafka's ``balanceTopic`` with its ``MemberAssignmentBalancer``; ``size`` mirrors
        ``self.sizes`` as a list for the per-step reads."""
        g = self.g
        subs = self.subscribers[r]
        sizes_np = self.sizes
        sub_sizes = sizes_np[subs]
        work = self.work
        work["balancer_inits"] += 1
        work["sorted_members"] += len(subs)
        if int(sub_sizes.max()) - int(sub_sizes.min()) <= 1:
            return 0
        sm = subs[np.argsort(sub_sizes, kind="stable")].tolist()
        n = len(sm)
        lo, hi = int(g.offsets[r]), int(g.offsets[r + 1])
        work["imbalanced_partitions"] += hi - lo
        own = g.owner[lo:hi]
        # The topic's partitions grouped by owner, ascending within an owner; [start, end) per owner.
        parts_order = np.argsort(own, kind="stable")
        partitions = parts_order.tolist()
        sorted_owner = own[parts_order]
        uniq, first, cnt = np.unique(sorted_owner, return_index=True, return_counts=True)
        start: dict[int, int] = dict(zip(uniq.tolist(), first.tolist(), strict=True))
        end: dict[int, int] = dict(zip(uniq.tolist(), (first + cnt).tolist(), strict=True))

        least_end = 0
        least_count = size[sm[0]] - 1
        next_least = 0
        most_start = n
        most_end = n
        most_count = size[sm[n - 1]] + 1
        next_most = n - 1
        moved = 0
        while most_count - least_count > 1:
            # The next member of the most loaded range that still has a partition of this topic.
            while True:
                if next_most < most_start:
                    if most_end <= most_start and most_start > 0:
                        # The range emptied by exclusions: restart it from the next level down.
                        most_count = size[sm[most_start - 1]]
                    else:
                        most_count -= 1
                    while most_start > 0 and size[sm[most_start - 1]] == most_count:
                        most_start -= 1
                    next_most = most_end - 1
                if next_most < 0:
                    giver = -1
                    break
                giver = sm[next_most]
                next_most -= 1
                e = end.get(giver)
                if e is None or e - start[giver] <= 0:
                    # Nothing of this topic to give: swap it out of the range.
                    j = next_most + 1
                    sm[j], sm[most_end - 1] = sm[most_end - 1], sm[j]
                    most_end -= 1
                    continue
                break
            if giver == -1:
                break
            end[giver] -= 1
            partition = partitions[end[giver]]
            # The next member of the least loaded range.
            if next_least >= least_end:
                least_count += 1
                while least_end < n and size[sm[least_end]] == least_count:
                    least_end += 1
                next_least = 0
            taker = sm[next_least]
            next_least += 1
            if most_count - least_count <= 1:
                break
            copied = self._copied
            if not copied[giver] or not copied[taker]:
                self._first_change(np.array((giver, taker)))
            if taker not in end:
                end[taker] = start[taker] = 0  # (nothing of this topic to give)
                work["new_entries"] += 1
            own[partition] = taker
            size[giver] -= 1
            size[taker] += 1
            sizes_np[giver] -= 1
            sizes_np[taker] += 1
            moved += 1
        work["moved"] += moved
        return moved


def _fill_least_loaded(subscribers: np.ndarray, sizes: np.ndarray, count: int) -> np.ndarray:
    """Who gets each of ``count`` partitions when ``MemberAssignmentBalancer.nextLeastLoadedMember``
    is asked ``count`` times: subscribers sorted by (size, index), filled level by level, each
    level in that order."""
    if count == 0:
        return np.empty(0, dtype=np.int64)
    sub_sizes = sizes[subscribers]
    order = np.argsort(sub_sizes, kind="stable")
    sm = subscribers[order]
    ss = sub_sizes[order]
    n = sm.size
    base = int(ss[0])
    # Round k (level base + k) serves every subscriber whose size is <= base + k, in sorted order.
    levels = min(count, int(ss[-1]) - base + 1)
    served = np.searchsorted(ss, base + np.arange(levels), side="right")
    cumulative = np.cumsum(served)
    k = np.arange(count, dtype=np.int64)
    out = np.empty(count, dtype=np.int64)
    in_levels = k < cumulative[-1]
    kl = k[in_levels]
    rnd = np.searchsorted(cumulative, kl, side="right")
    before = np.where(rnd > 0, cumulative[np.maximum(rnd - 1, 0)], 0)
    out[in_levels] = sm[kl - before]
    rest = k[~in_levels]
    if rest.size:
        out[~in_levels] = sm[(rest - cumulative[-1]) % n]
    return out
