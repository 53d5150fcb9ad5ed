"""Java's orderings, where Kafka's result depends on them.

Kafka's assignors iterate ``HashMap``s keyed by member id and sort member ids with
``String.compareTo``. Where the iteration order changes the answer (which over-quota members of the
constrained sticky path keep their extra partition, for example), we reproduce it:

* ``java_string_hash``: ``String.hashCode`` over UTF-16 code units, as a signed 32-bit int.
* ``hashmap_order``: the iteration order of a ``java.util.HashMap`` filled by ``put`` from empty
  (table of 16 doubling past a 0.75 load factor; bucket ``(h ^ (h >>> 16)) & (n - 1)``). Keys
  sharing a bucket iterate in insertion order in Java; we take the keys as put in
  ``String.compareTo`` order, so that our result never depends on the caller's dict order (a
  documented deviation). A bucket that a ``put`` makes 9 long (``HashMap.TREEIFY_THRESHOLD``)
  makes Java double a table of fewer than 64 buckets, or turn the bucket into a red-black tree,
  which reorders it; ``treeify_free`` tells when that happens, and then the order comes from
  ``assignors._hashmap_model``, which replays Java's structure.
* ``java_sort_key``: ``String.compareTo`` order (UTF-16 code units), equal to Python's order for
  every string without characters outside the Basic Multilingual Plane.
* ``java_string_hashes``: ``String.hashCode`` of many strings at once (numpy).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np

from ._hashmap_model import TREEIFY_THRESHOLD, JavaHashMap


@lru_cache(maxsize=1 << 16)
def java_string_hash(s: str) -> int:
    """``java.lang.String#hashCode`` as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_sort_key(s: str) -> str:
    """Key that sorts like ``String.compareTo``: the string itself, or for a string with
    characters outside the Basic Multilingual Plane, the string of its UTF-16 code units (so that
    keys of both kinds compare with each other)."""
    if s.isascii() or max(s) <= "\uffff":
        return s
    units = s.encode("utf-16-be", "surrogatepass")
    return "".join(chr((units[i] << 8) | units[i + 1]) for i in range(0, len(units), 2))


def _spread(h: int) -> int:
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


def hashmap_capacity(n: int) -> int:
    """Table size of a ``new HashMap<>()`` after ``n`` puts."""
    cap = 16
    while n > cap * 3 // 4:
        cap *= 2
    return cap


def java_string_hashes(keys: Sequence[str]) -> np.ndarray:
    """``String#hashCode`` of many strings at once, as uint32 (the same bits as the signed int).

    Horner's rule over a padded array of code points; strings outside the Basic Multilingual
    Plane (UTF-16 surrogate pairs) go through ``java_string_hash``.
    """
    n = len(keys)
    if n == 0:
        return np.zeros(0, dtype=np.uint32)
    codes = np.array(keys, dtype=str)
    width = codes.dtype.itemsize // 4
    h = np.zeros(n, dtype=np.uint32)
    if width:
        points = codes.view(np.uint32).reshape(n, width)
        lengths = np.fromiter(map(len, keys), dtype=np.int64, count=n)
        for col in range(width):
            live = lengths > col
            h[live] = h[live] * np.uint32(31) + points[live, col]
        wide = np.flatnonzero((points > 0xFFFF).any(axis=1))
        for i in wide.tolist():
            h[i] = java_string_hash(keys[i]) & 0xFFFFFFFF
    return h


# String#hashCode of the keys hashmap_order has seen: a coordinator orders the same member ids
# at every group epoch (bounded: cleared when it grows past _HASH_CACHE_MAX)
_hash_cache: dict[str, int] = {}
_HASH_CACHE_MAX = 1 << 20


def _cached_string_hashes(keys: list[str]) -> np.ndarray:
    cache = _hash_cache
    missing = [k for k in keys if k not in cache]
    if missing:
        if len(cache) + len(missing) > _HASH_CACHE_MAX:
            cache.clear()
            missing = list(dict.fromkeys(keys))
        if len(missing) < 64:  # numpy's setup costs more than a few strings' loops
            cache.update((k, java_string_hash(k) & 0xFFFFFFFF) for k in missing)
        else:
            cache.update(zip(missing, java_string_hashes(missing).tolist(), strict=True))
    return np.fromiter(map(cache.__getitem__, keys), dtype=np.uint32, count=len(keys))


def treeify_free(
    hashes: Sequence[int] | np.ndarray, capacity: int = 16, chain: int = TREEIFY_THRESHOLD + 1
) -> bool:
    """Whether filling an empty ``java.util.HashMap`` of ``capacity`` buckets with keys of these
    ``hashCode``s, in this order, never makes a bucket ``chain`` long (9 for ``put``, 8 for
    ``computeIfAbsent``). Then Java neither treeifies a bucket nor doubles a table of fewer than 64
    buckets early (``HashMap.treeifyBin``): every bucket is a chain in insertion order and the
    table grows by the load factor alone, which is what the closed-form orders here assume.

    While the table has ``c`` buckets it holds the first ``0.75 c + 1`` keys at most (by ``put``
    and by ``computeIfAbsent`` alike), so a bucket that grows that long shows in the bucket counts
    of that prefix; a bucket of the next table is part of one of this table's.
    """
    n = len(hashes)
    if n < chain:
        return True
    cap = capacity
    if n < 64:
        spread = [_spread(h) for h in hashes]
        while True:
            threshold = cap * 3 // 4
            counts: dict[int, int] = {}
            for s in spread[: threshold + 1]:
                b = s & (cap - 1)
                c = counts[b] = counts.get(b, 0) + 1
                if c >= chain:
                    return False
            if n <= threshold + 1:
                return True
            cap *= 2
    h = np.asarray(hashes)
    if h.dtype != np.uint32:
        h = (h.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32)
    spread = h ^ (h >> np.uint32(16))
    while True:
        threshold = cap * 3 // 4
        end = min(n, threshold + 1)
        if end >= chain and np.bincount(spread[:end] & np.uint32(cap - 1)).max() >= chain:
            return False
        if n <= threshold + 1:
            return True
        cap *= 2


class TreeifyWatch:
    """``treeify_free`` of a key list kept up to date as keys are inserted and deleted at given
    positions (the put order), at a cost per change of one step per table size.

    For each table size ``c`` the map passes through (16, 32, ... up to the one that takes the
    last key) it keeps the bucket counts of the keys that table holds at most, the first
    ``0.75 c + 1`` of the list (all of them for the last table), and how many of those buckets
    hold 9 or more. An insertion or deletion inside a prefix moves one key across its end.
    """

    __slots__ = ("_spreads", "_counts", "_crowded", "_chain")

    def __init__(self, chain: int = TREEIFY_THRESHOLD + 1):
        self._spreads: list[int] = []  # spread hash of each key, in put order
        self._counts: list[list[int]] = []  # per table size (16 << k): keys per bucket
        self._crowded: list[int] = []  # per table size: buckets with ``chain`` or more
        self._chain = chain

    @property
    def free(self) -> bool:
        return not any(self._crowded)

    def __len__(self) -> int:
        return len(self._spreads)

    def _bump(self, k: int, spread: int, delta: int) -> None:
        counts = self._counts[k]
        b = spread & (len(counts) - 1)
        before = counts[b]
        counts[b] = before + delta
        if (before >= self._chain) != (before + delta >= self._chain):
            self._crowded[k] += delta

    def _end(self, k: int) -> int:
        return (16 << k) * 3 // 4 + 1

    def insert(self, at: int, hash_code: int) -> None:
        spreads = self._spreads
        n = len(spreads)
        s = _spread(hash_code)
        for k in range(len(self._counts)):
            end = self._end(k)
            if n < end:
                self._bump(k, s, 1)
            elif at < end:
                self._bump(k, s, 1)
                self._bump(k, spreads[end - 1], -1)
        spreads.insert(at, s)
        if not self._counts or n + 1 > self._end(len(self._counts) - 1):
            self._add_table()

    def delete(self, at: int) -> None:
        spreads = self._spreads
        n = len(spreads)
        s = spreads[at]
        for k in range(len(self._counts)):
            end = self._end(k)
            if n <= end:
                self._bump(k, s, -1)
            elif at < end:
                self._bump(k, s, -1)
                self._bump(k, spreads[end], 1)
        del spreads[at]
        k = len(self._counts) - 1
        if k >= 0 and (n - 1 == 0 or (k > 0 and n - 1 <= self._end(k - 1))):
            del self._counts[k]
            del self._crowded[k]

    def _add_table(self) -> None:
        k = len(self._counts)
        cap = 16 << k
        counts = [0] * cap
        for s in self._spreads[: self._end(k)]:
            counts[s & (cap - 1)] += 1
        self._counts.append(counts)
        self._crowded.append(sum(1 for c in counts if c >= self._chain))


def modelled_hashmap_order(
    keys_in_put_order: Iterable[str], compute_if_absent: bool = False
) -> list[str]:
    """Keys of a ``HashMap<String, ?>`` filled in this order by ``put`` (or ``computeIfAbsent``),
    in iteration order, from the structural model (exact, one Python object per key)."""
    m = JavaHashMap(java_string_hash, java_sort_key)
    add = m.compute_if_absent if compute_if_absent else m.put
    for k in keys_in_put_order:
        add(k)
    return list(m.keys())


def hashmap_order(keys: Iterable[str]) -> list[str]:
    """Keys in the order a ``java.util.HashMap<String, ?>`` iterates them when built by ``put``
    in ``String.compareTo`` order (see the module's docstring)."""
    keys = list(keys)
    n = len(keys)
    mask = hashmap_capacity(n) - 1
    if n < 64:
        spreads = [_spread(java_string_hash(k)) for k in keys]
        # Only 9 keys in one bucket of the first table can make 9 in a bucket of any table (each
        # later bucket is part of one of its), so most sets skip the check in put order.
        if n > TREEIFY_THRESHOLD:
            first_table = bytes([s & 15 for s in spreads])
            if max(map(first_table.count, range(16))) > TREEIFY_THRESHOLD:
                ordered = sorted(keys, key=java_sort_key)
                if not treeify_free([java_string_hash(k) for k in ordered]):
                    return modelled_hashmap_order(ordered)
        buckets = [s & mask for s in spreads]
        return [k for _, _, k in sorted(zip(buckets, map(java_sort_key, keys), keys, strict=True))]
    # Keys in String.compareTo order, then a stable sort by bucket: a bucket's keys stay in key
    # order (Python's str order is Java's for text without surrogate pairs)
    joined = "".join(keys)
    ordered = sorted(keys) if joined.isascii() else sorted(keys, key=java_sort_key)
    h = _cached_string_hashes(ordered)
    if not treeify_free(h):
        return modelled_hashmap_order(ordered)
    bucket = (h ^ (h >> np.uint32(16))) & np.uint32(mask)
    order = np.argsort(bucket, kind="stable")
    return [ordered[i] for i in order.tolist()]


def hashmap_insertion_order(keys_in_insertion_order: Iterable[str]) -> list[str]:
    """Distinct keys in the order a ``HashMap``/``HashSet`` filled by ``put`` in the given order
    iterates them: bucket order, a bucket's keys in insertion order (or Java's tree-bin order,
    see ``treeify_free``)."""
    keys = list(dict.fromkeys(keys_in_insertion_order))
    if len(keys) > TREEIFY_THRESHOLD and not treeify_free([java_string_hash(k) for k in keys]):
        return modelled_hashmap_order(keys)
    mask = hashmap_capacity(len(keys)) - 1
    return [
        k
        for _, k in sorted(
            ((_spread(java_string_hash(k)) & mask, i), k) for i, k in enumerate(keys)
        )
    ]


def computed_hashmap_order(keys_in_first_use: Iterable[str]) -> list[str]:
    """Keys in the order a ``HashMap<String, ?>`` filled by ``computeIfAbsent`` iterates them.

    ``keys_in_first_use`` lists distinct keys in the order they were first computed. Unlike
    ``put``, ``computeIfAbsent`` links a new key at the *head* of its bucket, and resizes before an
    insertion (when the size already exceeds the threshold) rather than after, so a bucket iterates
    in reverse order of first use and the table can be one size smaller. A bucket that reaches 8
    keys this way is treeified (or the table doubled) as ``treeify_free`` says; its order then
    comes from ``assignors._hashmap_model``.
    """
    keys = list(keys_in_first_use)
    if len(keys) >= TREEIFY_THRESHOLD and not treeify_free(
        [java_string_hash(k) for k in keys], chain=TREEIFY_THRESHOLD
    ):
        return modelled_hashmap_order(keys, compute_if_absent=True)
    cap = 16
    while len(keys) - 1 > cap * 3 // 4:
        cap *= 2
    mask = cap - 1
    return [
        k
        for _, k in sorted(
            ((_spread(java_string_hash(k)) & mask, -i), k) for i, k in enumerate(keys)
        )
    ]


def topic_partition_hash(topic: str, partition: int) -> int:
    """``TopicPartition#hashCode``: ``31 * (31 + partition) + topic.hashCode()`` as int32."""
    h = (31 * (31 + partition) + java_string_hash(topic)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def hash_bucket(h: int, capacity: int) -> int:
    """Bucket of hash ``h`` in a Java hash table of ``capacity`` slots."""
    return _spread(h) & (capacity - 1)
