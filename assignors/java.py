"""Java's orderings that code outside the assignors reproduces too: the group coordinator's
members map iterates by ``String.hashCode`` (``java_string_hash``) and its target assignment sorts
member ids by ``String.compareTo`` (``java_sort_key``); the classic group's members map and its
protocol votes are ``java.util.HashMap``s whose iteration order decides its leader and its protocol
(``JavaHashMap``, ``hashmap_insertion_order``). The public face of ``assignors._java`` and
``assignors._hashmap_model``, which hold them with the rest of the assignors' Java orderings.
"""

from __future__ import annotations

from ._hashmap_model import JavaHashMap
from ._java import hashmap_insertion_order, java_sort_key, java_string_hash

__all__ = ["JavaHashMap", "hashmap_insertion_order", "java_sort_key", "java_string_hash"]
