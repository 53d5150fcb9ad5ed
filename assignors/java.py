"""Java's orderings that code outside the assignors reproduces too: the group coordinator's
members map iterates by ``String.hashCode`` (``java_string_hash``) and its target assignment sorts
member ids by ``String.compareTo`` (``java_sort_key``). The public face of ``assignors._java``,
which holds them with the rest of the assignors' Java orderings.
"""

from __future__ import annotations

from ._java import java_sort_key, java_string_hash

__all__ = ["java_sort_key", "java_string_hash"]
