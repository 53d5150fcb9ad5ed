"""Java's orderings, where Kafka's result depends on them.

Kafka's assignors iterate ``HashMap``s keyed by member id and sort member ids with
``String.compareTo``. Where the iteration order changes the answer (which over-quota members of the
constrained sticky path keep their extra partition, for example), we reproduce it:

* ``java_string_hash``: ``String.hashCode`` over UTF-16 code units, as a signed 32-bit int.
* ``hashmap_order``: the iteration order of a ``java.util.HashMap`` filled by ``put`` from empty
  (table of 16 doubling past a 0.75 load factor; bucket ``(h ^ (h >>> 16)) & (n - 1)``). Keys
  sharing a bucket iterate in insertion order in Java; we break those ties by ``String.compareTo``
  so that our result never depends on the caller's dict order (a documented deviation).
* ``java_sort_key``: ``String.compareTo`` order (UTF-16 code units), equal to Python's order for
  every string without characters outside the Basic Multilingual Plane.
* ``java_string_hashes``: ``String.hashCode`` of many strings at once (numpy).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np


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


def hashmap_order(keys: Iterable[str]) -> list[str]:
    """Keys in the order a ``java.util.HashMap<String, ?>`` built by ``put`` iterates them."""
    keys = list(keys)
    mask = hashmap_capacity(len(keys)) - 1
    if len(keys) < 64:
        return sorted(keys, key=lambda k: (_spread(java_string_hash(k)) & mask, java_sort_key(k)))
    # Keys in String.compareTo order, then a stable sort by bucket: a bucket's keys stay in key
    # order (Python's str order is Java's for text without surrogate pairs)
    joined = "".join(keys)
    ordered = sorted(keys) if joined.isascii() else sorted(keys, key=java_sort_key)
    h = _cached_string_hashes(ordered)
    bucket = (h ^ (h >> np.uint32(16))) & np.uint32(mask)
    order = np.argsort(bucket, kind="stable")
    return [ordered[i] for i in order.tolist()]


def hashmap_insertion_order(keys_in_insertion_order: Iterable[str]) -> list[str]:
    """Distinct keys in the order a ``HashMap``/``HashSet`` filled by ``put`` in the given order
    iterates them: bucket order, a bucket's keys in insertion order (exact below 8 per bucket)."""
    keys = list(dict.fromkeys(keys_in_insertion_order))
    mask = hashmap_capacity(len(keys)) - 1
    return [k for _, k in sorted(((_spread(java_string_hash(k)) & mask, i), k) for i, k in enumerate(keys))]


def computed_hashmap_order(keys_in_first_use: Iterable[str]) -> list[str]:
    """Keys in the order a ``HashMap<String, ?>`` filled by ``computeIfAbsent`` iterates them.

    ``keys_in_first_use`` lists distinct keys in the order they were first computed. Unlike
    ``put``, ``computeIfAbsent`` links a new key at the *head* of its bucket, and resizes before an
    insertion (when the size already exceeds the threshold) rather than after, so a bucket iterates
    in reverse order of first use and the table can be one size smaller. Exact for every key set
    whose buckets hold fewer than 8 keys (Java turns larger buckets into trees).
    """
    keys = list(keys_in_first_use)
    cap = 16
    while len(keys) - 1 > cap * 3 // 4:
        cap *= 2
    mask = cap - 1
    return [k for _, k in sorted(
        ((_spread(java_string_hash(k)) & mask, -i), k) for i, k in enumerate(keys)
    )]


def topic_partition_hash(topic: str, partition: int) -> int:
    """``TopicPartition#hashCode``: ``31 * (31 + partition) + topic.hashCode()`` as int32."""
    h = (31 * (31 + partition) + java_string_hash(topic)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def hash_bucket(h: int, capacity: int) -> int:
    """Bucket of hash ``h`` in a Java hash table of ``capacity`` slots."""
    return _spread(h) & (capacity - 1)
