"""Value types shared by every assignor, mirroring Kafka's ConsumerPartitionAssignor API."""

from __future__ import annotations

from collections import namedtuple as _namedtuple
from collections.abc import Sequence

import attrs


class AssignorError(ValueError):
    """Bad input to an assignor (unknown name, malformed metadata or subscription).

    The message is one line and names the offending field, so the CLI can print it as is.
    """


class TopicPartition(_namedtuple("TopicPartition", ("topic", "partition"))):
    """A partition of a topic (org.apache.kafka.common.TopicPartition). Orders by (topic, partition).

    A named tuple, so hashing, equality and ordering run in C: sets and sorts of many of them (an
    assignor's owned partitions, a member's commits and revocations) take a fraction of the time
    they took as an attrs class, whose methods were Python-level calls. It is therefore equal to
    the plain tuple ``(topic, partition)``, with the same hash."""

    __slots__ = ()

    def __str__(self) -> str:
        return f"{self[0]}-{self[1]}"


_TP_TYPES = {TopicPartition}
_STR_TYPES = {str}


class IndexedPartitions(tuple):
    """``Subscription.owned_partitions`` built from an assignor's result list (a ``PartitionList``):
    the same tuple of ``TopicPartition``, which also keeps the global indices it was built from
    (``index_source`` = topic names, their offsets, the indices) so that the next assignment's
    claims pass reads the indices instead of every ``TopicPartition`` object."""

    index_source: tuple


# A Subscription checks its fields when it is built (Java's types do it at compile time), so an
# assignor's input check is one pass over the members, not one per field per member.


def _tp_tuple(value: Sequence[TopicPartition] | None) -> tuple[TopicPartition, ...]:
    if not value:
        return ()
    # Only a PartitionList has this attribute (getattr with a default is cheap on a tuple or list).
    source = getattr(value, "_index_source", None)
    if source is None:
        owned = tuple(value)
        if not set(map(type, owned)) <= _TP_TYPES:
            for tp in owned:
                if not isinstance(tp, TopicPartition):
                    raise AssignorError(
                        f"Subscription.owned_partitions: {tp!r} is not a TopicPartition"
                    )
        return owned
    owned = IndexedPartitions(value)  # an assignor's own result: TopicPartitions by construction
    owned.index_source = source
    return owned


def _str_tuple(value) -> tuple[str, ...]:
    if isinstance(value, str):
        # A bare string would otherwise become a tuple of characters.
        return (value,)
    try:
        topics = tuple(value)
    except TypeError:
        raise AssignorError(
            f"Subscription.topics: expected a list of topic names, got {value!r}"
        ) from None
    if not set(map(type, topics)) <= _STR_TYPES:
        for topic in topics:
            if not isinstance(topic, str):
                raise AssignorError(f"Subscription.topics: {topic!r} is not a string")
    return topics


def _user_data(value):
    if value is None or isinstance(value, bytes | bytearray | memoryview):
        return value
    raise AssignorError(
        f"Subscription.user_data: expected bytes or None, got {type(value).__name__}"
    )


@attrs.frozen(slots=True)
class Subscription:
    """What one member sends in JoinGroup (ConsumerPartitionAssignor.Subscription).

    ``topics`` is the member's subscription; ``user_data`` the bytes its assignor wrote;
    ``owned_partitions`` what it owns now (sent by every client since KIP-429);
    ``generation`` the generation it last synced in (-1 when unknown: ConsumerProtocolSubscription
    v2, KIP-792); ``group_instance_id`` its static id (KIP-345), ``rack_id`` its client.rack.
    """

    topics: tuple[str, ...] = attrs.field(converter=_str_tuple)
    user_data: bytes | None = attrs.field(default=None, converter=_user_data)
    owned_partitions: tuple[TopicPartition, ...] = attrs.field(default=(), converter=_tp_tuple)
    group_instance_id: str | None = None
    generation: int = -1
    rack_id: str | None = None


@attrs.define(slots=True)
class Assignment:
    """What one member receives from SyncGroup (ConsumerPartitionAssignor.Assignment).

    Read-only by convention, as Kafka's is final: it is not frozen because an assignor builds
    one per member (thousands per call) and a frozen instance costs twice as much to fill.
    """

    partitions: Sequence[TopicPartition] = attrs.field(factory=list)  # a list, or a PartitionList
    user_data: bytes | None = None


def assignment_of(partitions) -> Assignment:
    """``Assignment(partitions)`` without user data, minus the cost of calling ``__init__``."""
    a = object.__new__(Assignment)
    a.partitions = partitions
    a.user_data = None
    return a
