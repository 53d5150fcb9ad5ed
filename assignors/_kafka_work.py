"""How much work Apache Kafka's own client assignors do on an input: operation counts that
``assignors.kafka_time`` turns into milliseconds.

Each count is an operation Kafka's code really performs, counted on the input (and, for the
sticky assignors, on the course the algorithm takes), not on what our faster Python does:
``String.equals`` calls while ``List.contains`` scans a subscription's topic list, ``HashMap``
operations keyed by ``TopicPartition`` and the keys of equal ``hashCode`` they walk past, element
comparisons of ``List.contains`` on lists of partitions, comparisons made by ``Collections.sort``,
and so on (the terms are listed in ``TERMS``). Where Kafka repeats a scan that we cache, the count
is what Kafka's repetitions cost, computed in closed form per call.

Counting must not slow the assignors down: what needs more than a few array operations is kept
as a closure over arrays the assignor built anyway and evaluated only when the counts are read
(``KafkaWork.totals``), and the counts never depend on the order of a dict.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache

import numpy as np

from ._java import hashmap_order, java_sort_key, java_string_hashes
from .types import Subscription

# Operation counts, in Kafka's words. Every assignor reports the ones its Kafka class incurs.
TERMS = {
    "calls": "one call of the assignor (fixed costs: setup, stream pipelines, result maps)",
    "members": "group members (per-member maps, lists and MemberInfo objects)",
    "partitions": "partitions of subscribed topics (PartitionInfo and TopicPartition objects, "
    "their lists and per-partition passes)",
    "subscriptions": "(member, subscribed topic) pairs (topic maps and subscription lists)",
    "member_compares": "comparisons sorting members (MemberInfo#compareTo, String#compareTo)",
    "stream_iterations": "RangeAssignor: per-consumer stream pipelines over a topic's partitions",
    "iterator_steps": "RoundRobinAssignor: members the circular iterator peeks at",
    "topic_scans": "String#equals calls of List#contains scanning a member's topic list",
    "tp_compares": "TopicPartition#equals calls of List#contains/indexOf/remove on partition lists",
    "tp_sort_compares": "comparator calls sorting TopicPartitions",
    "tp_hash_ops": "HashMap/HashSet operations keyed by TopicPartition",
    "tp_same_hash": "keys with an equal TopicPartition#hashCode met by those operations",
    "claims": "previously owned partitions the sticky assignors read (memberData)",
    "user_data_partitions": "partitions decoded from eager sticky's KIP-341 user data",
    "balance_scan_partitions": "TopicPartitions built and checked by isBalanced scans",
    "tree_steps": "TreeSet steps and comparisons, and per-member size checks of the balancing loops",
}


class KafkaWork:
    """The counts of one assignor call (``Assignor.last_work``), by term of ``TERMS``.

    ``add`` records a count; ``defer`` records a closure returning counts, evaluated once, the
    first time ``totals`` is read (so that an assignment nobody prices costs no counting)."""

    __slots__ = ("assignor", "path", "_counts", "_deferred")

    def __init__(self, assignor: str, path: str = ""):
        self.assignor = assignor
        self.path = path  # which of the assignor's algorithms ran ("constrained", "general")
        self._counts: dict[str, float] = {}
        self._deferred: list[Callable[[], Mapping[str, float]]] = []

    @classmethod
    def of(cls, assignor: str, counts: Callable[[], KafkaWork]) -> KafkaWork:
        """Work whose counts come from ``counts()`` (another record) when first read."""
        work = cls(assignor)
        work.defer(lambda: counts().totals())
        return work

    def add(self, term: str, count: float) -> None:
        if term not in TERMS:
            raise KeyError(f"unknown work term {term!r}")
        self._counts[term] = self._counts.get(term, 0.0) + float(count)

    def defer(self, counts: Callable[[], Mapping[str, float]]) -> None:
        self._deferred.append(counts)

    def totals(self) -> dict[str, float]:
        """Every count, deferred ones included, as ``{term: count}`` in ``TERMS`` order."""
        deferred, self._deferred = self._deferred, []
        for fn in deferred:
            for term, count in fn().items():
                self.add(term, count)
        return {t: self._counts[t] for t in TERMS if t in self._counts}

    def __repr__(self) -> str:
        inner = ", ".join(f"{t}={c:g}" for t, c in self.totals().items())
        return f"KafkaWork({self.assignor}{'/' + self.path if self.path else ''}: {inner})"


# ---------------------------------------------------------------------------------------------
# Closed forms shared by the assignors


def timsort_compares(keys: np.ndarray) -> float:
    """Comparisons ``Collections.sort`` (Java's TimSort) makes sorting ``keys`` (in list order,
    distinct), estimated from the list's ascending runs and how often neighbours in sorted order
    come from different runs: a merge costs one comparison per switch of run, galloping makes
    long blocks from one run cheap, and there are log2(runs) levels of merges. Exact for a
    sorted list; within a factor of about two of Java's count on hash orders, interleaved and
    shuffled lists (checked against JDK 17)."""
    n = int(keys.size)
    if n < 2:
        return 0.0
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] < keys[:-1])))
    runs = int(starts.size)
    if runs == 1:
        return float(n - 1)
    run_of = np.repeat(np.arange(runs, dtype=np.int64), np.diff(np.append(starts, n)))
    in_order = run_of[np.argsort(keys, kind="stable")]
    switches = int(np.count_nonzero(in_order[1:] != in_order[:-1]))
    return float(n - 1) + math.log2(runs) * min(n, 0.5 * switches + 4 * runs)


def grouped_timsort_compares(keys: np.ndarray, bounds: np.ndarray) -> float:
    """``timsort_compares`` summed over the lists ``keys[bounds[i]:bounds[i + 1]]`` (many small
    lists at once: the per-member sorts of owned partitions)."""
    lengths = np.diff(bounds)
    n_lists = int(lengths.size)
    if not n_lists or not keys.size:
        return 0.0
    list_of = np.repeat(np.arange(n_lists, dtype=np.int64), lengths)
    first = np.zeros(keys.size, dtype=bool)
    first[bounds[:-1][lengths > 0]] = True
    new_run = first.copy()
    new_run[1:] |= keys[1:] < keys[:-1]
    run_id = np.cumsum(new_run) - 1
    runs = np.bincount(list_of[new_run], minlength=n_lists)
    # Neighbours in sorted order (within a list) from different runs.
    order = np.lexsort((keys, list_of))
    same_list = list_of[order][1:] == list_of[order][:-1]
    switch = same_list & (run_id[order][1:] != run_id[order][:-1])
    switches = np.bincount(list_of[order][1:][switch], minlength=n_lists)
    levels = np.log2(np.maximum(runs, 1))
    merges = levels * np.minimum(lengths, 0.5 * switches + 4 * runs)
    return float(np.maximum(lengths - 1, 0).sum() + merges.sum())


def java_member_ranks(
    members: Sequence[str], subscriptions: Mapping[str, Subscription]
) -> dict[str, int]:
    """Each member's place in Kafka's member order (``MemberInfo#compareTo``: static members by
    ``group.instance.id`` first, then the others by member id)."""

    def key(m: str):
        instance = subscriptions[m].group_instance_id
        if instance is not None:
            return (0, java_sort_key(instance), java_sort_key(m))
        return (1, java_sort_key(m), "")

    return {m: i for i, m in enumerate(sorted(members, key=key))}


@lru_cache(maxsize=8)
def _same_hash(topics: tuple[str, ...], counts: tuple[int, ...]) -> tuple[np.ndarray, float]:
    hashes = tp_hashes(topics, counts)
    _, inverse, multiplicity = np.unique(hashes, return_inverse=True, return_counts=True)
    per_partition = multiplicity[inverse].astype(np.int64)
    fill = float((multiplicity * (multiplicity - 1) // 2).sum())
    per_partition.flags.writeable = False
    return per_partition, fill


def tp_hashes(topics: Sequence[str], counts: Sequence[int] | np.ndarray) -> np.ndarray:
    """``TopicPartition#hashCode`` of every partition (topics in order, partitions 0..n-1), as
    int64 values of the signed int32: ``31 * (31 + partition) + topic.hashCode()``."""
    topic_hash = java_string_hashes(list(topics)).astype(np.int64)
    lengths = np.asarray(counts, dtype=np.int64)
    total = int(lengths.sum())
    starts = np.cumsum(lengths) - lengths
    number = np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)
    h = (31 * (31 + number) + np.repeat(topic_hash, lengths)) & 0xFFFFFFFF
    return np.where(h >= 1 << 31, h - (1 << 32), h)


def same_hash(
    topics: Sequence[str], counts: Sequence[int] | np.ndarray
) -> tuple[np.ndarray, float]:
    """For the partitions of ``topics`` (global index order): how many partitions share each
    one's ``TopicPartition#hashCode`` (itself included), and how many equal-hash keys filling a
    ``HashMap`` with all of them meets (sum over hash values of c(c-1)/2). Topics named
    ``t0``, ``t1``, ... collide often: their hashCodes differ by small steps that the
    partition number's ``31 * p`` bridges."""
    return _same_hash(tuple(topics), tuple(int(c) for c in counts))


def subset_fill_same(fill_all: float, subset: int, total: int) -> float:
    """Equal-hash keys met filling a map with ``subset`` of ``total`` partitions whose full fill
    meets ``fill_all``: pairs of keys sharing a hash survive in proportion to the subset squared."""
    if total <= 0:
        return 0.0
    return fill_all * (subset / total) ** 2


# ---------------------------------------------------------------------------------------------
# RangeAssignor and RoundRobinAssignor: pure functions of the input


def _kafka_view(partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]):
    """Members in ``HashMap`` order, their ranks in Kafka's member order, and the subscribed
    topics that exist with their partition counts (``AbstractPartitionAssignor`` drops the rest)."""
    order = hashmap_order(subscriptions)
    subscribed = {t for sub in subscriptions.values() for t in sub.topics}
    topics = sorted(t for t in partitions_per_topic if t in subscribed)
    ranks = java_member_ranks(order, subscriptions)
    return order, ranks, topics


def _subscriber_matrix(order, subscriptions, topics) -> np.ndarray:
    """``m[i, r]``: member ``order[i]`` lists topic ``topics[r]`` (existing topics only)."""
    rank = {t: r for r, t in enumerate(topics)}
    groups: dict[tuple[str, ...], int] = {}
    group_of = np.fromiter(
        (groups.setdefault(subscriptions[m].topics, len(groups)) for m in order),
        dtype=np.int64,
        count=len(order),
    )
    g = np.zeros((len(groups), len(topics)), dtype=bool)
    for topic_list, i in groups.items():
        cols = [rank[t] for t in topic_list if t in rank]
        g[i, cols] = True
    return g[group_of]


def range_work(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> KafkaWork:
    """``RangeAssignor#assignPartitions`` (without racks): per topic, sort its subscribers'
    ``MemberInfo``s, then one stream pipeline per consumer until the topic's partitions run out;
    the consumer that takes the last ones empties ``unassignedPartitions`` with ``removeAll``,
    which (the set being no larger than the list) scans the list for every element of the set."""
    work = KafkaWork("range")
    order, ranks, topics = _kafka_view(partitions_per_topic, subscriptions)
    work.add("calls", 1)
    work.add("members", len(order))
    work.add("subscriptions", sum(len(subscriptions[m].topics) for m in order))
    if not order or not topics:
        return work
    matrix = _subscriber_matrix(order, subscriptions, topics)
    member_rank = np.array([ranks[m] for m in order], dtype=np.int64)
    counts = np.array([partitions_per_topic[t] for t in topics], dtype=np.int64)
    subscribers = matrix.sum(axis=0)
    live = counts > 0  # topics without partitions are filtered out before any work
    work.add("partitions", int(counts[live].sum()))
    k, n = subscribers[live], counts[live]
    work.add("stream_iterations", int(np.minimum(k, n).sum()))
    last = np.where(k >= n, 1, n // np.maximum(k, 1))
    work.add("tp_compares", float((last * (last + 1) // 2).sum()))
    sort_cache: dict[bytes, float] = {}
    compares = 0.0
    for r in np.flatnonzero(live).tolist():
        column = matrix[:, r]
        key = column.tobytes()
        if key not in sort_cache:
            sort_cache[key] = timsort_compares(member_rank[column])
        compares += sort_cache[key]
    work.add("member_compares", compares)
    return work


def roundrobin_work(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> KafkaWork:
    """``RoundRobinAssignor#assign``: topics in name order, and for every partition a circular
    iterator over the sorted members that peeks at each member in turn and checks
    ``subscription.topics().contains(topic)`` (a scan of the member's topic list) until one
    subscribes. Per topic in closed form: the members the iterator passes over, whole laps of
    the group and the part lap before and after them."""
    work = KafkaWork("roundrobin")
    order, ranks, topics = _kafka_view(partitions_per_topic, subscriptions)
    n_members = len(order)
    work.add("calls", 1)
    work.add("members", n_members)
    work.add("subscriptions", sum(len(subscriptions[m].topics) for m in order))
    if not order or not topics:
        return work
    member_rank = np.array([ranks[m] for m in order], dtype=np.int64)
    work.add("member_compares", timsort_compares(member_rank))
    counts = np.array([partitions_per_topic[t] for t in topics], dtype=np.int64)
    work.add("partitions", int(counts.sum()))
    # Members in iterator order (Kafka's member order) and their topic lists.
    by_rank = sorted(order, key=ranks.__getitem__)
    lists = [subscriptions[m].topics for m in by_rank]
    lengths = np.fromiter(map(len, lists), dtype=np.int64, count=n_members)
    rank = {t: r for r, t in enumerate(topics)}
    # position[i, r]: 1 + index of topic r in member i's list (first occurrence), 0 if absent;
    # worked out once per distinct list.
    groups: dict[tuple[str, ...], int] = {}
    group_of = np.fromiter(
        (groups.setdefault(ts, len(groups)) for ts in lists), dtype=np.int64, count=n_members
    )
    by_group = np.zeros((len(groups), len(topics)), dtype=np.int64)
    for topic_list, g in groups.items():
        for j in range(len(topic_list) - 1, -1, -1):
            r = rank.get(topic_list[j])
            if r is not None:
                by_group[g, r] = j + 1
    position = by_group[group_of]
    # Cost of peeking at member i for topic r: its list scanned to the topic, or all of it.
    cost = np.where(position > 0, position, lengths[:, None])
    prefix = np.zeros((n_members + 1, len(topics)), dtype=np.int64)
    np.cumsum(cost, axis=0, out=prefix[1:])
    cursor = 0
    steps = 0
    scans = 0
    for r, n in enumerate(counts.tolist()):
        if n == 0:
            continue
        subs = np.flatnonzero(position[:, r])
        k = int(subs.size)
        first = int(np.searchsorted(subs, cursor))
        lap = 0
        if first == k:
            first, lap = 0, 1
        j = first + n - 1
        last = int(subs[j % k]) + n_members * (lap + j // k)
        # Peeks at absolute positions cursor..last of the unrolled ring.
        lap_cost = int(prefix[-1, r])
        end, begin = last + 1, cursor
        steps += end - begin
        scans += (end // n_members) * lap_cost + int(prefix[end % n_members, r])
        scans -= (begin // n_members) * lap_cost + int(prefix[begin % n_members, r])
        cursor = end % n_members
    work.add("iterator_steps", steps)
    work.add("topic_scans", scans)
    return work
