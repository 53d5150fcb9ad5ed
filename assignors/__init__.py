"""Kafka's partition assignors, in Python, with Kafka's semantics and user-data wire formats.

Layout:
  types        TopicPartition, Subscription, Assignment (Kafka's ConsumerPartitionAssignor types)
  _base        the Assignor interface and the input checks every assignor shares
  range        RangeAssignor                       "range"
  roundrobin   RoundRobinAssignor                  "roundrobin"
  sticky       StickyAssignor / CooperativeStickyAssignor on one AbstractStickyAssignor core
                                                   "sticky", "cooperative-sticky"
  stream_join  KIP-315 stream-join sticky          "stream-join-sticky"
  userdata     Kafka's Struct encodings of the assignors' user data
  quality      spread, moved and withheld partitions of an assignment
  kafka_time   how long Kafka's own Java implementation of an assignor takes on an input, from the
               work it does there (each assignor's ``last_work``): ``client_kafka_ms``
  server       KIP-848's server-side assignors, with a registry of their own ("uniform",
               "range"): ``from assignors.server import get_server_assignor, GroupSpec, ...``

Everything public of the client-side assignors is re-exported here; the underscore modules are
private.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence

from ._base import COOPERATIVE, EAGER, Assignor
from .types import Assignment, AssignorError, Subscription, TopicPartition

# Kafka protocol name -> "module:Class". Classes load on first use so `import assignors` stays cheap.
_REGISTRY: dict[str, str] = {
    "range": "range:RangeAssignor",
    "roundrobin": "roundrobin:RoundRobinAssignor",
    "sticky": "sticky:StickyAssignor",
    "cooperative-sticky": "sticky:CooperativeStickyAssignor",
    "stream-join-sticky": "stream_join:StreamJoinStickyAssignor",
}


class _Registry(Mapping[str, type[Assignor]]):
    """Read-only mapping of protocol name to assignor class."""

    def __getitem__(self, name: str) -> type[Assignor]:
        module, cls = _REGISTRY[name].split(":")
        return getattr(importlib.import_module(f"{__name__}.{module}"), cls)

    def __iter__(self) -> Iterator[str]:
        return iter(_REGISTRY)

    def __len__(self) -> int:
        return len(_REGISTRY)


ASSIGNORS: Mapping[str, type[Assignor]] = _Registry()


def assignment_topics(partitions: Sequence[TopicPartition]) -> Sequence[str] | None:
    """Topics that hold every partition of an assignor's list, known without building its
    ``TopicPartition`` objects (the fast assignors keep partitions as integers until read): a
    superset of the list's topics, or None when only reading the partitions can tell."""
    if type(partitions) in (list, tuple):
        return None
    from ._layout import PartitionList

    return partitions.topics if isinstance(partitions, PartitionList) else None


def get_assignor(name: str) -> Assignor:
    """A new assignor instance for a Kafka protocol name (e.g. ``"cooperative-sticky"``)."""
    if name not in _REGISTRY:
        known = ", ".join(_REGISTRY)
        raise AssignorError(f"unknown assignor {name!r}; known assignors: {known}")
    return ASSIGNORS[name]()


__all__ = [
    "ASSIGNORS",
    "COOPERATIVE",
    "EAGER",
    "Assignment",
    "Assignor",
    "AssignorError",
    "Subscription",
    "TopicPartition",
    "assignment_topics",
    "get_assignor",
]
