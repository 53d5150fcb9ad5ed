"""Value types shared by every assignor, mirroring Kafka's ConsumerPartitionAssignor API."""

from __future__ import annotations

from collections.abc import Sequence

import attrs


class AssignorError(ValueError):
    """Bad input to an assignor (unknown name, malformed metadata or subscription).

    The message is one line and names the offending field, so the CLI can print it as is.
    """


@attrs.frozen(order=True, slots=True, cache_hash=True)
class TopicPartition:
    """A partition of a topic (org.apache.kafka.common.TopicPartition). Orders by (topic, partition)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class IndexedPartitions(tuple):
    """``Subscription.owned_partitions`` built from an assignor's result list (a ``PartitionList``):
    the same tuple of ``TopicPartition``, which also keeps the global indices it was built from
    (``index_source`` = topic names, their offsets, the indices) so that the next assignment's
    claims pass reads the indices instead of every ``TopicPartition`` object."""

    index_source: tuple


def _tp_tuple(value: Sequence[TopicPartition] | None) -> tuple[TopicPartition, ...]:
    if not value:
        return ()
    # Only a PartitionList has this attribute (getattr with a default is cheap on a tuple or list).
    source = getattr(value, "_index_source", None)
    if source is None:
        return tuple(value)
    owned = IndexedPartitions(value)
    owned.index_source = source
    return owned


def _str_tuple(value) -> tuple[str, ...]:
    if isinstance(value, str):
        # A bare string would otherwise become a tuple of characters.
        return (value,)
    return tuple(value)


@attrs.frozen(slots=True)
class Subscription:
    """What one member sends in JoinGroup (ConsumerPartitionAssignor.Subscription).

    ``topics`` is the member's subscription; ``user_data`` the bytes its assignor wrote;
    ``owned_partitions`` what it owns now (sent by every client since KIP-429);
    ``generation`` the generation it last synced in (-1 when unknown: ConsumerProtocolSubscription
    v2, KIP-792); ``group_instance_id`` its static id (KIP-345), ``rack_id`` its client.rack.
    """

    topics: tuple[str, ...] = attrs.field(converter=_str_tuple)
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = attrs.field(default=(), converter=_tp_tuple)
    group_instance_id: str | None = None
    generation: int = -1
    rack_id: str | None = None


@attrs.frozen(slots=True)
class Assignment:
    """What one member receives from SyncGroup (ConsumerPartitionAssignor.Assignment)."""

    partitions: list[TopicPartition] = attrs.field(factory=list)
    user_data: bytes | None = None


_set_partitions = Assignment.__dict__["partitions"].__set__
_set_user_data = Assignment.__dict__["user_data"].__set__


def assignment_of(partitions) -> Assignment:
    """``Assignment(partitions)`` without user data, built the way attrs' ``__init__`` builds it
    minus the per-call setup (an assignor builds one per member: thousands per call)."""
    a = object.__new__(Assignment)
    _set_partitions(a, partitions)
    _set_user_data(a, None)
    return a
