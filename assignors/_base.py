"""The assignor interface (Kafka's ConsumerPartitionAssignor) and input checks shared by all."""

from __future__ import annotations

import abc
import gc
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager
from operator import attrgetter
from typing import TYPE_CHECKING, ClassVar

from .types import Assignment, AssignorError, Subscription, TopicPartition

if TYPE_CHECKING:
    from ._kafka_work import KafkaWork

EAGER = "EAGER"
COOPERATIVE = "COOPERATIVE"


@contextmanager
def no_gc():
    """Pause the cyclic GC while building millions of small objects (it halves the cost).

    On the way out, what the block built moves straight to the oldest generation (``freeze`` then
    ``unfreeze``, both O(1)) instead of waiting in the youngest: re-enabling the collector would
    otherwise scan every object of the result at the next allocation (a fifth of a 2,100-member
    round-robin assignment), although none of it is garbage. Garbage cycles made meanwhile are
    still found, by the next full collection. When the host has frozen objects of its own
    (``gc.freeze()``, as forking servers do), that step is skipped: ``unfreeze`` would hand the
    host's objects back to the collector too."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


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
    # What Kafka's own implementation of this assignor does on the input of the last ``assign``
    # call (``assignors.kafka_time`` prices it); None before the first call.
    last_work: KafkaWork | None = None

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
        self.last_work = None
        if not subs:
            return {}
        with no_gc():  # thousands of result objects and no cycle among them
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
        raise AssignorError(
            "partitions_per_topic: expected a mapping of topic name to partition count"
        )
    out = {}
    for topic, count in partitions_per_topic.items():
        if not isinstance(topic, str) or not topic:
            raise AssignorError(
                f"partitions_per_topic: topic name {topic!r} is not a non-empty string"
            )
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise AssignorError(
                f"partitions_per_topic[{topic!r}]: partition count {count!r} is not an integer >= 0"
            )
        out[topic] = count
    return out


_topics_of = attrgetter("topics")


def _distinct_topics(subs: Iterable[Subscription]) -> set[tuple[str, ...]]:
    """The members' distinct topics tuples: members usually share a few subscriptions, so
    work per distinct tuple rather than per member."""
    return set(map(_topics_of, subs))


def _checked_subscriptions(
    subscriptions: Mapping[str, Subscription],
) -> tuple[dict[str, Subscription], set[tuple[str, ...]]]:
    """The subscriptions as a dict, checked, and their distinct topics tuples. A ``Subscription``
    checked its own fields when it was built (``assignors.types``), so only the member ids and
    the types of the values are left to check."""
    if not isinstance(subscriptions, Mapping):
        raise AssignorError("subscriptions: expected a mapping of member id to Subscription")
    subs = dict(subscriptions)
    # Fast path: whole-group passes of C-level maps; any doubt falls through to the loop, which
    # names the offending member.
    if not (
        set(map(type, subs)) <= {str}
        and "" not in subs
        and set(map(type, subs.values())) <= {Subscription}
    ):
        for member, sub in subs.items():
            if not isinstance(member, str) or not member:
                raise AssignorError(
                    f"subscriptions: member id {member!r} is not a non-empty string"
                )
            if not isinstance(sub, Subscription):
                raise AssignorError(
                    f"subscriptions[{member!r}]: expected a Subscription, got {type(sub).__name__}"
                )
    return subs, _distinct_topics(subs.values())


def member_sort_key(member_id: str, sub: Subscription):
    """Kafka's ``MemberInfo#compareTo``: static members by group.instance.id first, then dynamic
    members by member id (used by RangeAssignor and RoundRobinAssignor)."""
    from ._java import java_sort_key

    if sub.group_instance_id is not None:
        return (0, java_sort_key(sub.group_instance_id), java_sort_key(member_id))
    return (1, java_sort_key(member_id), b"")
