"""A plain model of ``java.util.HashMap`` iteration (chained buckets, resize with order-keeping
splits), independent of the assignors' own closed-form orderings, for reference loops."""

from __future__ import annotations

from assignors._java import java_string_hash


def _bucket(key: str, capacity: int) -> int:
    h = java_string_hash(key) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)


def java_hashmap_keys(keys, compute_if_absent: bool = False) -> list[str]:
    """Keys of a ``HashMap`` filled in this order by ``put`` (tail insertion, resize after the
    insertion that passes the threshold) or ``computeIfAbsent`` (head insertion, resize before an
    insertion when the size is already past it), in iteration order."""
    capacity, table, size = 16, [[] for _ in range(16)], 0

    def grow():
        nonlocal capacity, table
        capacity *= 2
        new = [[] for _ in range(capacity)]
        for chain in table:
            for k in chain:
                new[_bucket(k, capacity)].append(k)
        table = new

    for key in keys:
        if any(key in chain for chain in table):
            continue
        if compute_if_absent and size > capacity * 3 // 4:
            grow()
        chain = table[_bucket(key, capacity)]
        chain.insert(0, key) if compute_if_absent else chain.append(key)
        size += 1
        if not compute_if_absent and size > capacity * 3 // 4:
            grow()
    return [k for chain in table for k in chain]
