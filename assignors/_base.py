"""The assignor interface (Kafka's ConsumerPartitionAssignor) and input checks shared by all."""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, compress, repeat
from operator import attrgetter, is_not
from typing import ClassVar

from .types import Assignment, AssignorError, IndexedPartitions, Subscription, TopicPartition

EAGER = "EAGER"
COOPERATIVE = "COOPERATIVE"


class Assignor(abc.ABC):
    """A partition assignment strategy, named by its Kafka protocol name.

    ``assign`` is a pure function of its inputs. Like Kafka's ``AbstractPartitionAssignor`` it
    only hands out topics that some member subscribes to and that exist in the metadata; a
    subscribed topic missing from ``partitions_per_topic`` is skipped.

    Instances also carry the member-side state that some strategies keep between rebalances
    (``on_assignment``), so each simulated member should own its own instance
    (``get_assignor`` returns a new one on every call).
    """

    name: ClassVar[str]
    supported_protocols: ClassVar[tuple[str, ...]] = (EAGER,)

    def subscription_user_data(
        self, owned: Sequence[TopicPartition] | None, generation: int
    ) -> bytes | None:
        """Bytes this member puts in JoinGroup. ``owned`` is None before its first assignment."""
        return None

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        """Member-side hook after SyncGroup (``ConsumerPartitionAssignor#onAssignment``)."""

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> dict[str, Assignment]:
        """Assign partitions to members: ``{member_id: Assignment}`` with every member present."""
        metadata = _checked_metadata(partitions_per_topic)
        subs, distinct = _checked_subscriptions(subscriptions)
        subscribed: set[str] = set()
        for topics in distinct:
            subscribed.update(topics)
        metadata = {t: n for t, n in metadata.items() if t in subscribed}
        if not subs:
            return {}
        return self._assign(metadata, subs)

    @abc.abstractmethod
    def _assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, Assignment]:
        """Assign with inputs already checked and metadata limited to subscribed topics."""

    def __repr__(self) -> str:
        return f"<assignor {self.name}>"


def _checked_metadata(partitions_per_topic: Mapping[str, int]) -> dict[str, int]:
    if not isinstance(partitions_per_topic, Mapping):
        raise AssignorError("partitions_per_topic: expected a mapping of topic name to partition count")
    out = {}
    for topic, count in partitions_per_topic.items():
        if not isinstance(topic, str) or not topic:
            raise AssignorError(f"partitions_per_topic: topic name {topic!r} is not a non-empty string")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise AssignorError(
                f"partitions_per_topic[{topic!r}]: partition count {count!r} is not an integer >= 0"
            )
        out[topic] = count
    return out


_topics_of = attrgetter("topics")
_owned_of = attrgetter("owned_partitions")
_user_data_of = attrgetter("user_data")
_USER_DATA_TYPES = {type(None), bytes, bytearray, memoryview}


def _unindexed(owned: list[tuple]) -> Iterable[tuple]:
    """The owned-partitions tuples not built from an assignor's result (those were built from its
    index arrays, so they hold nothing but ``TopicPartition``s)."""
    return compress(owned, map(is_not, map(type, owned), repeat(IndexedPartitions)))


def _distinct_topics(subs: Iterable[Subscription]) -> set[tuple[str, ...]]:
    """The members' distinct topics tuples: members usually share a few subscriptions, so
    work per distinct tuple rather than per member."""
    return set(map(_topics_of, subs))


def _checked_subscriptions(
    subscriptions: Mapping[str, Subscription],
) -> tuple[dict[str, Subscription], set[tuple[str, ...]]]:
    """The subscriptions as a dict, checked, and their distinct topics tuples."""
    if not isinstance(subscriptions, Mapping):
        raise AssignorError("subscriptions: expected a mapping of member id to Subscription")
    subs = dict(subscriptions)
    # Fast path: the same checks as the loop below, in whole-group passes of C-level maps; any
    # doubt falls through to the loop, which names the offending field.
    values = subs.values()
    if set(map(type, subs)) <= {str} and "" not in subs and set(map(type, values)) <= {Subscription}:
        distinct = _distinct_topics(values)
        if (
            set(map(type, chain.from_iterable(distinct))) <= {str}
            and (not any(map(_owned_of, values))
                 or set(map(type, chain.from_iterable(_unindexed(list(map(_owned_of, values)))))) <= {TopicPartition})
            and set(map(type, map(_user_data_of, values))) <= _USER_DATA_TYPES
        ):
            return subs, distinct
    checked_topics: set[int] = set()  # ids of topics tuples already checked
    tp_types = {TopicPartition}
    for member, sub in subscriptions.items():
        if type(member) is not str and not isinstance(member, str) or not member:
            raise AssignorError(f"subscriptions: member id {member!r} is not a non-empty string")
        if type(sub) is not Subscription and not isinstance(sub, Subscription):
            raise AssignorError(f"subscriptions[{member!r}]: expected a Subscription, got {type(sub).__name__}")
        if id(sub.topics) not in checked_topics:
            # Members usually share one topics tuple: check each distinct one once.
            for topic in () if set(map(type, sub.topics)) <= {str} else sub.topics:
                if not isinstance(topic, str):
                    raise AssignorError(f"subscriptions[{member!r}].topics: {topic!r} is not a string")
            checked_topics.add(id(sub.topics))
        owned = sub.owned_partitions
        if owned and not set(map(type, owned)) <= tp_types and not all(isinstance(tp, TopicPartition) for tp in owned):
            bad = next(tp for tp in owned if not isinstance(tp, TopicPartition))
            raise AssignorError(f"subscriptions[{member!r}].owned_partitions: {bad!r} is not a TopicPartition")
        if sub.user_data is not None and not isinstance(sub.user_data, bytes | bytearray | memoryview):
            raise AssignorError(f"subscriptions[{member!r}].user_data: expected bytes or None")
    return subs, _distinct_topics(subs.values())


def member_sort_key(member_id: str, sub: Subscription):
    """Kafka's ``MemberInfo#compareTo``: static members by group.instance.id first, then dynamic
    members by member id (used by RangeAssignor and RoundRobinAssignor)."""
    from ._java import java_sort_key

    if sub.group_instance_id is not None:
        return (0, java_sort_key(sub.group_instance_id), java_sort_key(member_id))
    return (1, java_sort_key(member_id), b"")
