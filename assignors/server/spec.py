"""The server-side assignor API of KIP-848: ``GroupSpec`` in, ``GroupAssignment`` out.

Kafka's group coordinator hands its assignor (``ConsumerGroupPartitionAssignor``) two things: a
``GroupSpec`` (every member's subscription and current target assignment, and whether all members
subscribe to the same topics) and a ``SubscribedTopicDescriber`` (partition counts and replica
racks of the subscribed topics). It gets back a ``GroupAssignment``: the new target assignment,
``member id -> {topic: partitions}``. The names below are Kafka's; we key topics by name where
Kafka keys them by topic id (we have no topic ids; see ``assignors.server`` for what that changes).

``MemberSubscriptionAndAssignment.assigned_partitions`` is the member's current *target*
assignment, as ``TargetAssignmentBuilder`` passes it (a static member that rejoins with a new
member id brings the target of its previous member id), not the partitions the member owns right
now. A target assignment names each partition at most once; a partition claimed by two members is
bad input here. Claims on topics that no longer exist or on partitions beyond a topic's count are
dropped (in Kafka a re-created topic has a new topic id, so old claims never match it).

``GroupAssignment`` is array-based: per topic, the index (into ``member_ids``) of the member that
gets each partition, -1 for none. It is also a read-only mapping ``member id -> MemberAssignment``
(``{topic: (partition, ...)}``, ascending partition ids, built lazily). A member missing from it
gets an empty assignment, as in ``TargetAssignmentBuilder``. A ``MemberAssignment`` handed back
as ``assigned_partitions`` is read from its parent's arrays (the fast path for the next epoch).

A coordinator that assigns at every group epoch keeps its members in a ``GroupMembers`` (``put``
and ``remove`` as members join, leave or change) and builds each epoch's spec with
``GroupSpec.from_members(members, previous_result)``: the member order, subscription type and the
previous target's positions are then kept up to date from the changes, so an epoch's Python work
follows the members that changed and the rest is numpy over the group.
"""

from __future__ import annotations

import enum
from bisect import bisect_left
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from itertools import compress, repeat
from operator import attrgetter, is_, itemgetter
from typing import Any

import attrs
import numpy as np

from .._java import (
    TreeifyWatch,
    hashmap_capacity,
    hashmap_order,
    java_sort_key,
    java_string_hash,
    modelled_hashmap_order,
)
from ..types import AssignorError
from .kafka_time import ServerWork


class SubscriptionType(enum.Enum):
    """Kafka's ``SubscriptionType``: do all members subscribe to the same topics?"""

    HOMOGENEOUS = "Homogeneous"
    HETEROGENEOUS = "Heterogeneous"


def _topic_names(value) -> frozenset[str]:
    if isinstance(value, str):
        # A bare string would otherwise become a set of characters.
        return frozenset((value,))
    return frozenset(value)


def _assigned(value) -> Mapping[str, object]:
    return {} if value is None else value


@attrs.frozen(slots=True)
class MemberSubscriptionAndAssignment:
    """One member in a ``GroupSpec`` (Kafka's ``MemberSubscriptionAndAssignmentImpl``).

    ``subscribed_topic_names``: the topics the member subscribes to (names absent from the
    metadata are ignored, as Kafka's ``TopicIds`` ignores names it cannot resolve).
    ``assigned_partitions``: its current target assignment, ``{topic: partition ids}`` (any
    iterable of ints: tuple, list, set, numpy array). ``instance_id``: ``group.instance.id``
    (KIP-345). ``rack_id``: ``client.rack``; carried for completeness, no built-in server
    assignor reads it (see ``assignors.server``).
    """

    subscribed_topic_names: frozenset[str] = attrs.field(converter=_topic_names)
    assigned_partitions: Mapping[str, object] = attrs.field(factory=dict, converter=_assigned)
    instance_id: str | None = None
    rack_id: str | None = None


_new = object.__new__
_set_topic_names = MemberSubscriptionAndAssignment.__dict__["subscribed_topic_names"].__set__
_set_assigned = MemberSubscriptionAndAssignment.__dict__["assigned_partitions"].__set__
_set_instance_id = MemberSubscriptionAndAssignment.__dict__["instance_id"].__set__
_set_rack_id = MemberSubscriptionAndAssignment.__dict__["rack_id"].__set__


def member_subscription_of(
    topics: frozenset[str],
    assigned: Mapping[str, object],
    instance_id: str | None = None,
    rack_id: str | None = None,
) -> MemberSubscriptionAndAssignment:
    """``MemberSubscriptionAndAssignment(topics, assigned, instance_id, rack_id)`` for a caller
    that already holds the converted values (a frozenset of names, a mapping): a coordinator
    builds one per member at every group epoch."""
    m = _new(MemberSubscriptionAndAssignment)
    _set_topic_names(m, topics)
    _set_assigned(m, assigned)
    _set_instance_id(m, instance_id)
    _set_rack_id(m, rack_id)
    return m


class SubscribedTopicDescriber:
    """Partition counts (and optional replica racks) of the topics (Kafka's
    ``SubscribedTopicDescriberImpl``). ``partition_racks[topic][p]``: racks of partition p's
    replicas; omitted topics have no rack information."""

    __slots__ = ("_counts", "_racks")

    def __init__(
        self,
        partitions_per_topic: Mapping[str, int],
        partition_racks: Mapping[str, Sequence[Iterable[str]]] | None = None,
    ):
        if not isinstance(partitions_per_topic, Mapping):
            raise AssignorError("topics: expected a mapping of topic name to partition count")
        counts: dict[str, int] = {}
        for topic, count in partitions_per_topic.items():
            if not isinstance(topic, str) or not topic:
                raise AssignorError(f"topics: topic name {topic!r} is not a non-empty string")
            if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
                raise AssignorError(
                    f"topics[{topic!r}]: partition count {count!r} is not an integer >= 0"
                )
            counts[topic] = int(count)
        racks: dict[str, tuple[frozenset[str], ...]] = {}
        for topic, per_partition in (partition_racks or {}).items():
            if topic not in counts:
                raise AssignorError(f"partition_racks[{topic!r}]: no such topic")
            racks[topic] = tuple(frozenset(r) for r in per_partition)
            if len(racks[topic]) != counts[topic]:
                raise AssignorError(
                    f"partition_racks[{topic!r}]: {len(racks[topic])} entries for {counts[topic]} partitions"
                )
        self._counts = counts
        self._racks = racks

    def num_partitions(self, topic: str) -> int:
        """Partition count of ``topic``, or -1 if it does not exist."""
        return self._counts.get(topic, -1)

    def racks_for_partition(self, topic: str, partition: int) -> frozenset[str]:
        """Racks of the replicas of a partition; empty when unknown."""
        racks = self._racks.get(topic)
        return (
            racks[partition] if racks is not None and 0 <= partition < len(racks) else frozenset()
        )

    @property
    def partitions_per_topic(self) -> Mapping[str, int]:
        return self._counts

    @classmethod
    def of(cls, topics: SubscribedTopicDescriber | Mapping[str, int]) -> SubscribedTopicDescriber:
        return topics if isinstance(topics, SubscribedTopicDescriber) else cls(topics)


def subscription_type_of(
    members: Mapping[str, MemberSubscriptionAndAssignment],
) -> SubscriptionType:
    """Kafka's ``ModernGroup.subscriptionType``: homogeneous when every subscribed topic name is
    subscribed by every member (an empty group, or one where nobody subscribes, is homogeneous)."""
    distinct = {m.subscribed_topic_names for m in members.values()}
    return SubscriptionType.HOMOGENEOUS if len(distinct) <= 1 else SubscriptionType.HETEROGENEOUS


_get_assigned = attrgetter("assigned_partitions")
_get_topic_names = attrgetter("subscribed_topic_names")
_get_instance_id = attrgetter("instance_id")
_get_parent = attrgetter("_parent")
_get_member_index = attrgetter("_member_index")


class GroupSpec:
    """What the assignor sees of the group (Kafka's ``GroupSpec``/``GroupSpecImpl``).

    ``member_ids`` iterate in the order Kafka's ``GroupSpecImpl.memberIds()`` does: a
    ``java.util.HashMap`` keyed by member id (see ``assignors._java.hashmap_order``), whatever
    the order of ``members``. ``subscription_type`` defaults to what the group computes; pass it
    to model a coordinator that computed it otherwise (Kafka's own tests do).

    ``GroupSpec.from_target`` builds the same spec from a previous ``GroupAssignment`` without a
    per-member object; ``GroupSpec.from_members`` builds it from a ``GroupMembers`` that a
    coordinator keeps between group epochs, at no per-member cost for the members that did not
    change (a coordinator's call at every group epoch).
    """

    __slots__ = (
        "_members",
        "_member_ids",
        "_subscription_type",
        "_bulk",
        "_previous_positions",
        "_one_subscription",
    )

    def __init__(
        self,
        members: Mapping[str, MemberSubscriptionAndAssignment],
        subscription_type: SubscriptionType | None = None,
    ):
        if not isinstance(members, Mapping):
            raise AssignorError(
                "members: expected a mapping of member id to MemberSubscriptionAndAssignment"
            )
        members = dict(members)
        # Whole-group passes of C-level maps first; the loop names the offending member.
        if not (
            set(map(type, members)) <= {str}
            and "" not in members
            and set(map(type, members.values())) <= {MemberSubscriptionAndAssignment}
        ):
            for member_id, member in members.items():
                if not isinstance(member_id, str) or not member_id:
                    raise AssignorError(
                        f"members: member id {member_id!r} is not a non-empty string"
                    )
                if not isinstance(member, MemberSubscriptionAndAssignment):
                    raise AssignorError(
                        f"members[{member_id!r}]: expected a MemberSubscriptionAndAssignment, "
                        f"got {type(member).__name__}"
                    )
        self._members: dict[str, MemberSubscriptionAndAssignment] | None = members
        self._member_ids = tuple(hashmap_order(members))
        # whether every member has the same subscription (None: not known yet)
        self._one_subscription: bool | None = None
        if subscription_type is None:
            self._one_subscription = len({m.subscribed_topic_names for m in members.values()}) <= 1
            subscription_type = (
                SubscriptionType.HOMOGENEOUS
                if self._one_subscription
                else SubscriptionType.HETEROGENEOUS
            )  # subscription_type_of
        self._subscription_type = subscription_type
        self._bulk: _BulkMembers | None = None
        # (the previous target's member ids, our position of each, -1: none), when known
        self._previous_positions: tuple[tuple[str, ...], np.ndarray] | None = None

    @classmethod
    def from_target(
        cls,
        topics: Mapping[str, frozenset[str]],
        target: GroupAssignment,
        take: Container[str],
        assigned: Mapping[str, Mapping[str, object]] | None = None,
        instance_ids: Mapping[str, str] | None = None,
        racks: Mapping[str, str] | None = None,
    ) -> GroupSpec:
        """``GroupSpec({m: MemberSubscriptionAndAssignment(topics[m], a, instance_ids.get(m),
        racks.get(m))})`` where ``a`` is ``target[m]`` for a member in ``take`` and in ``target``,
        else ``assigned.get(m, {})``: the members' current target assignments as views of the
        previous one. Nothing is built per member unless an assignor asks for a member's object;
        the homogeneous builders read the previous target from its arrays."""
        if not isinstance(target, GroupAssignment):
            raise AssignorError("target: expected a GroupAssignment")
        if not isinstance(topics, Mapping):
            raise AssignorError(
                "topics: expected a mapping of member id to a frozenset of topic names"
            )
        spec = object.__new__(cls)
        topics = dict(topics)
        if not (
            set(map(type, topics)) <= {str}
            and "" not in topics
            and set(map(type, topics.values())) <= {frozenset}
        ):
            for member_id, names in topics.items():
                if not isinstance(member_id, str) or not member_id:
                    raise AssignorError(
                        f"members: member id {member_id!r} is not a non-empty string"
                    )
                if not isinstance(names, frozenset) or not set(map(type, names)) <= {str}:
                    raise AssignorError(
                        f"topics[{member_id!r}]: expected a frozenset of topic names"
                    )
        spec._members = None
        spec._member_ids = tuple(hashmap_order(topics))
        spec._one_subscription = len(set(topics.values())) <= 1
        spec._subscription_type = (
            SubscriptionType.HOMOGENEOUS
            if spec._one_subscription
            else SubscriptionType.HETEROGENEOUS
        )
        spec._bulk = _BulkMembers(
            topics, target, take, dict(assigned or {}), dict(instance_ids or {}), dict(racks or {})
        )
        spec._previous_positions = None
        return spec

    @classmethod
    def from_members(
        cls,
        members: GroupMembers,
        target: GroupAssignment | None = None,
        assigned: Mapping[str, Mapping[str, object]] | None = None,
    ) -> GroupSpec:
        """The spec of ``members`` (a ``GroupMembers``) whose current target assignments are:
        ``assigned[m]`` for a member named in ``assigned``, else ``target[m]`` for a member in
        ``target`` (the previous epoch's result, read from its arrays), else nothing.

        Nothing is checked or copied per member here (``GroupMembers.put`` checked each member
        when it changed): the spec reads ``members`` as they are, so it is valid until the next
        ``put`` or ``remove`` (using it after one raises ``AssignorError``)."""
        if not isinstance(members, GroupMembers):
            raise AssignorError("members: expected a GroupMembers")
        if target is None:
            target = GroupAssignment.empty()
        elif not isinstance(target, GroupAssignment):
            raise AssignorError("target: expected a GroupAssignment")
        if assigned is None:
            assigned = {}
        elif not isinstance(assigned, Mapping):
            raise AssignorError(
                "assigned: expected a mapping of member id to {topic: partition ids}"
            )
        spec = object.__new__(cls)
        spec._members = None
        spec._member_ids = members.member_ids
        spec._subscription_type = members.subscription_type
        spec._one_subscription = len(members._distinct) <= 1
        spec._bulk = _BulkMembers(
            members._topics,
            target,
            _Except(assigned),
            assigned,
            members._instance_ids,
            members._racks,
            members,
            members._version,
        )
        spec._previous_positions = None
        return spec

    def _check_live(self) -> None:
        b = self._bulk
        if b is not None and b.source is not None and b.source._version != b.version:
            raise AssignorError(
                "members: changed since this GroupSpec was built (GroupSpec.from_members)"
            )

    def _member_index(self) -> Mapping[str, int] | None:
        """Member id -> position in ``member_ids`` when the spec already has it (else None)."""
        b = self._bulk
        if b is not None and b.source is not None:
            self._check_live()
            return b.source._member_index()
        return None

    def _member_map(self) -> dict[str, MemberSubscriptionAndAssignment]:
        if self._members is None:
            self._check_live()
            b = self._bulk
            assert b is not None  # (a spec holds its members or its bulk form)
            views = b.target.views(self._member_ids)
            self._members = {
                m: member_subscription_of(
                    b.topics[m],
                    v if v is not None and m in b.take else b.assigned.get(m, {}),
                    b.instance_ids.get(m),
                    b.racks.get(m),
                )
                for m, v in zip(self._member_ids, views, strict=True)
            }
        return self._members

    def _claims(self) -> tuple[list[int], list[Mapping[str, Any]], dict[int, tuple]]:
        """The members' current target assignments, for ``_group``: the positions (in
        ``member_ids``) and mappings of those given as plain mappings (non-empty ones), and per
        earlier ``GroupAssignment`` whose views some members hand in: (it, their positions,
        their indices in it, None), or (it, None, None, remap) where ``remap[j]`` is the position
        of its member ``j`` (-1: not handed in; one extra -1 at the end)."""
        b = self._bulk
        if b is not None and b.source is not None and self._members is None:
            return self._member_claims(b)
        if b is not None and self._members is None:
            index = b.target._member_index()
            take, get = b.take, index.get
            theirs_all = [get(m, -1) if m in take else -1 for m in self._member_ids]
            ours = [i for i, j in enumerate(theirs_all) if j >= 0]
            bulk_views: dict[int, tuple] = (
                {id(b.target): (b.target, ours, [theirs_all[i] for i in ours], None)}
                if ours
                else {}
            )
            assigned = b.assigned
            slow_at = [
                i
                for i, (m, j) in enumerate(zip(self._member_ids, theirs_all, strict=True))
                if j < 0 and assigned.get(m)
            ]
            return slow_at, [assigned[self._member_ids[i]] for i in slow_at], bulk_views
        members = self._member_map()
        # C-level passes over the members (map/compress), no Python loop per member.
        assigned_all = list(map(_get_assigned, map(members.__getitem__, self._member_ids)))
        is_view = list(map(is_, map(type, assigned_all), repeat(MemberAssignment)))
        n_views = is_view.count(True)
        views: dict[int, tuple] = {}
        if n_views:
            view_at = (
                list(range(len(assigned_all)))
                if n_views == len(assigned_all)
                else list(compress(range(len(assigned_all)), is_view))
            )
            in_views = (
                assigned_all
                if n_views == len(assigned_all)
                else list(compress(assigned_all, is_view))
            )
            parents = list(map(_get_parent, in_views))
            if all(map(is_, parents, repeat(parents[0]))):
                # (as arrays: ``_group`` indexes with them)
                theirs_arr = np.fromiter(
                    map(_get_member_index, in_views), dtype=np.int64, count=n_views
                )
                ours_arr = (
                    np.arange(n_views, dtype=np.int64)
                    if n_views == len(assigned_all)
                    else np.array(view_at, dtype=np.int64)
                )
                views[id(parents[0])] = (parents[0], ours_arr, theirs_arr, None)
            else:
                theirs = list(map(_get_member_index, in_views))
                for i, parent, j in zip(view_at, parents, theirs, strict=True):
                    entry = views.setdefault(id(parent), (parent, [], [], None))
                    entry[1].append(i)
                    entry[2].append(j)
        # (``type`` first: the truth value of a view would materialize it.)
        slow_at = []
        at = -1
        for _ in range(len(assigned_all) - n_views):  # the few members not handing in a view
            at = is_view.index(False, at + 1)
            if assigned_all[at]:
                slow_at.append(at)
        return slow_at, [assigned_all[i] for i in slow_at], views

    def _member_claims(
        self, b: _BulkMembers
    ) -> tuple[list[int], list[Mapping[str, Any]], dict[int, tuple]]:
        """``_claims`` of a ``from_members`` spec: the previous target's members map to their
        positions in one C-level pass over its member ids; only the members in ``assigned`` are
        visited one by one."""
        self._check_live()
        assert b.source is not None
        index = b.source._member_index()
        target, assigned = b.target, b.assigned
        views: dict[int, tuple] = {}
        old_ids = target.member_ids
        if old_ids:
            old_index = target._member_index()
            remap = index.positions_of(old_index) if isinstance(old_index, _SlotIndex) else None
            if remap is None:
                remap = np.full(len(old_ids) + 1, -1, dtype=np.int64)
                remap[:-1] = np.fromiter(
                    map(index.get, old_ids, repeat(-1)), dtype=np.int64, count=len(old_ids)
                )
            self._previous_positions = (old_ids, remap.copy())
            if assigned:
                for m in assigned:
                    j = old_index.get(m)
                    if j is not None:
                        remap[j] = -1
            if (remap >= 0).any():
                views[id(target)] = (target, None, None, remap)
        slow_at = sorted(index[m] for m, a in assigned.items() if m in index and _truthy(a))
        ids = self._member_ids
        return slow_at, [assigned[ids[i]] for i in slow_at], views

    @property
    def member_ids(self) -> tuple[str, ...]:
        return self._member_ids

    @property
    def subscription_type(self) -> SubscriptionType:
        return self._subscription_type

    def _member_topics(self) -> list[frozenset[str]]:
        """``subscribed_topic_names`` of every member, in ``member_ids`` order."""
        if self._members is None:
            self._check_live()
            assert self._bulk is not None
            return list(map(self._bulk.topics.__getitem__, self._member_ids))
        return list(map(_get_topic_names, map(self._members.__getitem__, self._member_ids)))

    def _has_one_subscription(self) -> bool:
        """Whether every member subscribes to the same topics (known from building the spec, so
        that no pass compares the members' sets)."""
        if self._one_subscription is None:
            self._one_subscription = len(set(self._member_topics())) <= 1
        return self._one_subscription

    def _instance_ids(self) -> list[str | None]:
        """``instance_id`` of every member, in ``member_ids`` order."""
        if self._members is None:
            self._check_live()
            assert self._bulk is not None
            return list(map(self._bulk.instance_ids.get, self._member_ids))
        return list(map(_get_instance_id, map(self._members.__getitem__, self._member_ids)))

    def member_subscription(self, member_id: str) -> MemberSubscriptionAndAssignment:
        try:
            return self._member_map()[member_id]
        except KeyError:
            raise AssignorError(f"member id {member_id!r} not found") from None

    def subscribed_topic_names(self, member_id: str) -> frozenset[str]:
        """``member_subscription(member_id).subscribed_topic_names``."""
        if self._members is None:
            self._check_live()
            assert self._bulk is not None
            names = self._bulk.topics.get(member_id)
            if names is None:
                raise AssignorError(f"member id {member_id!r} not found")
            return names
        return self.member_subscription(member_id).subscribed_topic_names

    def instance_id(self, member_id: str) -> str | None:
        """``member_subscription(member_id).instance_id``."""
        if self._members is None:
            self._check_live()
            assert self._bulk is not None
            if member_id not in self._bulk.topics:
                raise AssignorError(f"member id {member_id!r} not found")
            return self._bulk.instance_ids.get(member_id)
        return self.member_subscription(member_id).instance_id

    def member_assignment(self, member_id: str) -> Mapping[str, object]:
        """The member's current target assignment (empty for an unknown member)."""
        member = self._member_map().get(member_id)
        return member.assigned_partitions if member is not None else {}

    def is_partition_assigned(self, topic: str, partition: int) -> bool:
        return any(
            partition in _as_set(m.assigned_partitions.get(topic, ()))
            for m in self._member_map().values()
        )

    def __len__(self) -> int:
        return len(self._member_ids)

    def __repr__(self) -> str:
        return f"GroupSpec({len(self._member_ids)} members, {self._subscription_type.value})"


@attrs.frozen(slots=True)
class _BulkMembers:
    """The inputs of ``GroupSpec.from_target`` or ``GroupSpec.from_members`` (``source``: the
    ``GroupMembers``, and its ``version`` when the spec was built)."""

    topics: dict[str, frozenset[str]]
    target: GroupAssignment
    take: Container[str]
    assigned: Mapping[str, Mapping[str, object]]
    instance_ids: dict[str, str]
    racks: dict[str, str]
    source: GroupMembers | None = None
    version: int = 0


class _Except(Container[str]):
    """Every member id except those of a mapping."""

    __slots__ = ("_names",)

    def __init__(self, names: Container[str]):
        self._names = names

    def __contains__(self, member_id: object) -> bool:
        return member_id not in self._names


def _truthy(parts) -> bool:
    # (``type`` first: the truth value of a view would materialize it.)
    return type(parts) is MemberAssignment or bool(parts)


class _SlotIndex(Mapping[str, int]):
    """Member id -> position in one epoch's member order of a ``GroupMembers``: the positions
    of its slots, read through the members' slot numbers (no per-epoch dict). Once the members
    renumber their slots, a plain dict is built on first use."""

    __slots__ = ("_source", "_generation", "_ids", "_slots", "_positions", "_dict")

    def __init__(self, source: GroupMembers, ids: tuple[str, ...], slots: np.ndarray):
        self._source = source
        self._generation = source._generation
        self._ids = ids
        self._slots = slots  # slot of each position (never written to once here)
        positions = np.full(len(source._slot_of), -1, dtype=np.int64)
        positions[slots] = np.arange(len(ids), dtype=np.int64)
        self._positions = positions
        self._dict: dict[str, int] | None = None

    def positions_of(self, earlier: _SlotIndex) -> np.ndarray | None:
        """For each member of an earlier epoch's order of the same members, its position here
        (-1: gone), one extra -1 at the end; None when the slots were renumbered in between."""
        if earlier._source is not self._source or earlier._generation != self._generation:
            return None
        out = np.full(len(earlier._ids) + 1, -1, dtype=np.int64)
        known = earlier._slots < len(self._positions)
        out[:-1][known] = self._positions[earlier._slots[known]]
        return out

    def get(self, member_id, default=None):
        if self._dict is None:
            if self._source._generation == self._generation:
                slot = self._source._slot_of.get(member_id)
                if slot is None or slot >= len(self._positions):
                    return default
                p = int(self._positions[slot])
                return p if p >= 0 else default
            self._dict = dict(zip(self._ids, range(len(self._ids)), strict=True))
        return self._dict.get(member_id, default)

    def __getitem__(self, member_id: str) -> int:
        p = self.get(member_id)
        if p is None:
            raise KeyError(member_id)
        return p

    def __contains__(self, member_id: object) -> bool:
        return self.get(member_id) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)


def _with(a: np.ndarray, at: int, value: int) -> np.ndarray:
    """A copy of ``a`` with ``value`` inserted at ``at`` (``np.insert`` without its overhead; the
    arrays are shared with earlier member indexes, so never changed in place)."""
    out = np.empty(a.size + 1, dtype=a.dtype)
    out[:at] = a[:at]
    out[at] = value
    out[at + 1 :] = a[at:]
    return out


def _without(a: np.ndarray, at: int) -> np.ndarray:
    """A copy of ``a`` without its element at ``at``."""
    out = np.empty(a.size - 1, dtype=a.dtype)
    out[:at] = a[:at]
    out[at:] = a[at + 1 :]
    return out


class GroupMembers:
    """A group's members as its assignor sees them, kept by a coordinator between group epochs:
    subscribed topic names, instance id and rack per member id (what Kafka's ``ConsumerGroup``
    keeps in its members map, with ``subscribedTopicNames`` and ``subscriptionType`` maintained as
    members change). ``put`` and ``remove`` cost the member they touch and check it; the member
    order (that of ``GroupSpecImpl.memberIds()``, a ``java.util.HashMap``: see
    ``assignors._java.hashmap_order``) and the subscription type are kept up to date from the
    changes, so ``GroupSpec.from_members`` needs no pass over the unchanged members.

        members = GroupMembers()
        members.put("m1", frozenset({"orders"}))
        members.put("m2", frozenset({"orders"}), instance_id="i-2")
        spec = GroupSpec.from_members(members, previous_target)

    Java iterates a bucket's members in the order they were put into the map (or, for a bucket
    that it turned into a tree, in an order that depends on it), which only the caller knows:
    ``tie(member_id)`` gives a sortable key for that put order (a coordinator's model of it);
    without one the members are put in ``String.compareTo`` order. When the caller's order
    changes, ``retie`` tells the members (one member, or all of them).
    """

    __slots__ = (
        "_topics",
        "_instance_ids",
        "_racks",
        "_distinct",
        "_interned",
        "_topic_names",
        "_keys",
        "_mask",
        "_ids",
        "_index",
        "_version",
        "_slot_of",
        "_order_slots",
        "_generation",
        "_id_list",
        "_put_order",
        "_put_of",
        "_treeify",
        "_tie",
        "_key_of",
    )

    def __init__(self, tie: Callable[[str], object] | None = None):
        self._tie = tie
        self._key_of: dict[str, tuple] = {}  # member id -> its entry in ``_keys``
        self._topics: dict[str, frozenset[str]] = {}
        self._instance_ids: dict[str, str] = {}
        self._racks: dict[str, str] = {}
        self._distinct: dict[frozenset[str], int] = {}  # subscription -> members with it
        self._interned: dict[frozenset[str], frozenset[str]] = {}  # subscription -> its one object
        self._topic_names: dict[str, int] = {}  # topic -> subscribers
        # (HashMap bucket, String order key, member id), sorted, for a table of ``_mask + 1``
        # buckets; None: rebuild
        self._keys: list[tuple[int, str, str]] | None = []
        self._id_list: list[str] = []  # the member ids of ``_keys``, in order
        self._mask = hashmap_capacity(0) - 1
        self._ids: tuple[str, ...] | None = ()  # member ids in HashMap order (None: stale)
        self._index: _SlotIndex | None = None  # member id -> position in ``_ids``
        # Every member id seen since the last renumbering has a slot number for good (a member
        # that leaves and comes back keeps it), so that one epoch's members find their position
        # at the next epoch with numpy: ``_order_slots`` lists the slots in HashMap order.
        self._slot_of: dict[str, int] = {}
        self._order_slots: np.ndarray | None = np.empty(
            0, dtype=np.int64
        )  # None with ``_keys``: rebuild
        self._generation = 0  # bumped when slots are renumbered
        self._version = 0
        # (put order key, member id), sorted: the order the keys are put into the map (``tie``,
        # else ``String.compareTo``), and whether Java would treeify a bucket (or double a small
        # table early) filling a map so
        self._put_order: list[tuple] = []
        self._put_of: dict[str, tuple] = {}  # member id -> its entry in ``_put_order``
        self._treeify = TreeifyWatch()

    def put(
        self,
        member_id: str,
        topics: frozenset[str],
        instance_id: str | None = None,
        rack_id: str | None = None,
    ) -> None:
        """Add the member or replace what is known of it: ``topics``, its subscribed topic names (a
        frozenset, or any iterable of names), ``instance_id`` (``group.instance.id``), ``rack_id``
        (``client.rack``). A bad value raises ``AssignorError`` naming it; nothing changes then."""
        if not isinstance(member_id, str) or not member_id:
            raise AssignorError(f"members: member id {member_id!r} is not a non-empty string")
        if type(topics) is not frozenset:
            if isinstance(topics, str) or not isinstance(topics, Iterable):
                raise AssignorError(f"topics[{member_id!r}]: expected a frozenset of topic names")
            topics = frozenset(topics)
        if not all(type(t) is str for t in topics):
            raise AssignorError(f"topics[{member_id!r}]: expected a frozenset of topic names")
        if instance_id is not None and not isinstance(instance_id, str):
            raise AssignorError(f"instance_ids[{member_id!r}]: expected a string or None")
        if rack_id is not None and not isinstance(rack_id, str):
            raise AssignorError(f"racks[{member_id!r}]: expected a string or None")
        old = self._topics.get(member_id)
        if old is not None:
            if (
                old == topics
                and self._instance_ids.get(member_id) == instance_id
                and self._racks.get(member_id) == rack_id
            ):
                return
            self._unsubscribe(old)
        else:
            self._add_key(member_id)
        self._version += 1
        # one object per distinct subscription: an assignor then groups members by identity
        topics = self._interned.setdefault(topics, topics)
        self._topics[member_id] = topics
        self._distinct[topics] = self._distinct.get(topics, 0) + 1
        names = self._topic_names
        for t in topics:
            names[t] = names.get(t, 0) + 1
        self._set_or_drop(self._instance_ids, member_id, instance_id)
        self._set_or_drop(self._racks, member_id, rack_id)

    def remove(self, member_id: str) -> None:
        """Forget the member (nothing happens for an unknown one)."""
        old = self._topics.pop(member_id, None)
        if old is None:
            return
        self._version += 1
        self._unsubscribe(old)
        self._instance_ids.pop(member_id, None)
        self._racks.pop(member_id, None)
        at = bisect_left(self._put_order, self._put_of.pop(member_id))
        del self._put_order[at]
        self._treeify.delete(at)
        keys = self._keys
        if keys is not None:
            if hashmap_capacity(len(self._topics)) - 1 != self._mask:
                self._keys = self._order_slots = None  # the table would be another size: reorder
            else:
                at = bisect_left(keys, self._key_of.pop(member_id))
                del keys[at]
                del self._id_list[at]
                assert self._order_slots is not None  # (None only with _keys)
                self._order_slots = _without(self._order_slots, at)
        self._ids = self._index = None

    def retie(self, member_id: str | None = None) -> None:
        """The caller's tie order (``tie``) changed for ``member_id``, or for every member (None)."""
        if member_id is None:
            self._put_order = sorted(map(self._put_key, self._topics))
            self._put_of = {e[-1]: e for e in self._put_order}
            self._treeify = TreeifyWatch()
            for at, e in enumerate(self._put_order):
                self._treeify.insert(at, java_string_hash(e[-1]))
            self._keys = self._order_slots = None
            self._version += 1
            self._ids = self._index = None
            return
        if member_id not in self._topics:
            return
        old_put, new_put = self._put_of[member_id], self._put_key(member_id)
        if new_put != old_put:
            was_free = self._treeify.free
            at = bisect_left(self._put_order, old_put)
            del self._put_order[at]
            self._treeify.delete(at)
            at = bisect_left(self._put_order, new_put)
            self._put_order.insert(at, new_put)
            self._treeify.insert(at, java_string_hash(member_id))
            self._put_of[member_id] = new_put
            if not (was_free and self._treeify.free):
                # a tree bucket's order depends on the put order
                self._version += 1
                self._ids = self._index = None
        keys = self._keys
        if keys is None:
            return
        old = self._key_of[member_id]
        new = self._key(member_id)
        if new == old:
            return
        at = bisect_left(keys, old)
        self._key_of[member_id] = new
        if (at == 0 or keys[at - 1] < new) and (at + 1 == len(keys) or new < keys[at + 1]):
            keys[at] = new  # the same place among the others: the bucket order stands
            return
        del keys[at]
        del self._id_list[at]
        assert self._order_slots is not None  # (None only with _keys)
        slot = int(self._order_slots[at])
        order_slots = _without(self._order_slots, at)
        at = bisect_left(keys, new)
        keys.insert(at, new)
        self._id_list.insert(at, member_id)
        self._order_slots = _with(order_slots, at, slot)
        self._version += 1
        self._ids = self._index = None

    @staticmethod
    def _set_or_drop(values: dict[str, str], member_id: str, value: str | None) -> None:
        if value is None:
            values.pop(member_id, None)
        else:
            values[member_id] = value

    def _unsubscribe(self, topics: frozenset[str]) -> None:
        n = self._distinct[topics] - 1
        if n:
            self._distinct[topics] = n
        else:
            del self._distinct[topics]
            del self._interned[topics]
        names = self._topic_names
        for t in topics:
            k = names[t] - 1
            if k:
                names[t] = k
            else:
                del names[t]

    def _put_key(self, member_id: str) -> tuple:
        """Where the member comes in the order the map is filled: ``tie``, else String order."""
        tie = self._tie
        return (java_sort_key(member_id) if tie is None else tie(member_id), member_id)

    def _key(self, member_id: str) -> tuple:
        """Where the member sits in HashMap order: its bucket, then the tie order (``tie``, else
        ``String.compareTo`` order)."""
        h = java_string_hash(member_id) & 0xFFFFFFFF
        tie = self._tie
        return (
            (h ^ (h >> 16)) & self._mask,
            java_sort_key(member_id) if tie is None else tie(member_id),
            member_id,
        )

    def _add_key(self, member_id: str) -> None:
        # called before the member is in ``_topics``
        slot = self._slot_of.get(member_id)
        if slot is None:
            slot = self._slot_of[member_id] = len(self._slot_of)
        entry = self._put_of[member_id] = self._put_key(member_id)
        at = bisect_left(self._put_order, entry)
        self._put_order.insert(at, entry)
        self._treeify.insert(at, java_string_hash(member_id))
        keys = self._keys
        if keys is not None:
            if hashmap_capacity(len(self._topics) + 1) - 1 != self._mask:
                self._keys = self._order_slots = None
            else:
                key = self._key_of[member_id] = self._key(member_id)
                at = bisect_left(keys, key)
                keys.insert(at, key)
                self._id_list.insert(at, member_id)
                assert self._order_slots is not None  # (None only with _keys)
                self._order_slots = _with(self._order_slots, at, slot)
        self._ids = self._index = None

    def _order(self) -> tuple[str, ...]:
        ids = self._ids
        if ids is None:
            if self._keys is None:
                self._mask = hashmap_capacity(len(self._topics)) - 1
                self._keys = sorted(map(self._key, self._topics))
                self._id_list = list(map(itemgetter(2), self._keys))
                self._key_of = dict(zip(self._id_list, self._keys, strict=True))
            ids = self._ids = tuple(self._id_list)
            if len(self._slot_of) > 2 * len(ids) + 1024:
                # many members came and went: renumber (earlier results then look members up
                # by id)
                self._generation += 1
                self._slot_of = dict(zip(ids, range(len(ids)), strict=True))
                self._order_slots = np.arange(len(ids), dtype=np.int64)
            elif self._order_slots is None:
                self._order_slots = np.fromiter(
                    map(self._slot_of.__getitem__, ids), dtype=np.int64, count=len(ids)
                )
            slots = self._order_slots
            if not self._treeify.free:
                # Java treeifies a bucket (or doubles a small table early): the order is the
                # model's; ``_keys`` and ``_order_slots`` stay in bucket order for the next change
                ids = self._ids = tuple(modelled_hashmap_order([e[-1] for e in self._put_order]))
                slots = np.fromiter(
                    map(self._slot_of.__getitem__, ids), dtype=np.int64, count=len(ids)
                )
            self._index = _SlotIndex(self, ids, slots)
        return ids

    def _member_index(self) -> _SlotIndex:
        self._order()
        assert self._index is not None  # (made by _order)
        return self._index

    @property
    def member_ids(self) -> tuple[str, ...]:
        """Member ids in ``java.util.HashMap`` order (``GroupSpecImpl.memberIds()``)."""
        return self._order()

    @property
    def subscription_type(self) -> SubscriptionType:
        """``ModernGroup.subscriptionType``: homogeneous when all members subscribe to the same
        topic names (or there are none)."""
        return (
            SubscriptionType.HOMOGENEOUS
            if len(self._distinct) <= 1
            else SubscriptionType.HETEROGENEOUS
        )

    def subscribed_topic_names(self) -> Mapping[str, int]:
        """Topic name -> number of members subscribed to it (``ConsumerGroup.subscribedTopicNames``;
        read-only)."""
        return self._topic_names

    def topics(self, member_id: str) -> frozenset[str]:
        """The member's subscribed topic names (KeyError for an unknown member)."""
        return self._topics[member_id]

    def __len__(self) -> int:
        return len(self._topics)

    def __contains__(self, member_id: object) -> bool:
        return member_id in self._topics

    def __iter__(self) -> Iterator[str]:
        return iter(self._order())

    def __repr__(self) -> str:
        return f"GroupMembers({len(self._topics)} members)"


def _as_set(parts) -> set[int]:
    return {int(p) for p in (parts.tolist() if isinstance(parts, np.ndarray) else parts)}


class MemberAssignment(Mapping[str, tuple[int, ...]]):
    """One member's part of a ``GroupAssignment`` (Kafka's ``MemberAssignment``): a read-only
    mapping ``topic -> (partition, ...)``, materialized on first use. Passing it back as the
    member's ``assigned_partitions`` in the next ``GroupSpec`` lets the assignor read the whole
    previous target from its arrays instead of member by member."""

    __slots__ = ("_parent", "_member_index", "_data")

    def __init__(self, parent: GroupAssignment, member_index: int):
        self._parent = parent
        self._member_index = member_index
        self._data: dict[str, tuple[int, ...]] | None = None

    def _dict(self) -> dict[str, tuple[int, ...]]:
        if self._data is None:
            self._data = self._parent._member_dict(self._member_index)
        return self._data

    def __getitem__(self, topic: str) -> tuple[int, ...]:
        return self._dict()[topic]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())

    def __repr__(self) -> str:
        return f"MemberAssignment({self._dict()!r})"


# Members of one GroupAssignment read one by one before their runs are built in one sort.
_FEW_READS = 16


class GroupAssignment(Mapping[str, MemberAssignment]):
    """A target assignment (Kafka's ``GroupAssignment``), array-based.

    ``member_ids``: the members in the assignment. ``topics``: the topics it covers (those some
    member subscribes to), in Java ``String`` order. ``owners(topic)``: for each partition of
    ``topic``, the index into ``member_ids`` of its member, or -1. As a mapping:
    ``assignment[member_id]`` is a ``MemberAssignment``, ``{topic: (partition, ...)}`` ascending,
    topics with no partition for that member left out; ``to_dict()`` gives plain dicts.
    ``kafka_work``: what Kafka's assignor did on the input this assignment was computed from, set
    by the assignor that computed it (``assignors.server.kafka_time``; None when not known).
    """

    __slots__ = (
        "kafka_work",
        "_member_ids",
        "_index",
        "_topics",
        "_offsets",
        "_owner",
        "_slices",
        "_reads",
        "_previous_positions",
    )

    def __init__(self, member_ids: Sequence[str], topics: Mapping[str, int], owner: np.ndarray):
        self._member_ids = tuple(member_ids)
        self._index: Mapping[str, int] | None = None
        names = sorted(topics, key=java_sort_key)
        self._topics = tuple(names)
        offsets = np.zeros(len(names) + 1, dtype=np.int64)
        np.cumsum([topics[t] for t in names], out=offsets[1:])
        self._offsets = offsets
        self._owner = np.asarray(owner, dtype=np.int32)
        if self._owner.shape != (int(offsets[-1]),):
            raise ValueError("owner array does not match the topics' partition counts")
        self._slices: tuple | None = None
        self._reads = 0  # members read one by one before ``_member_runs`` is built
        # (an earlier assignment's member ids, our position of each, -1: none), when the
        # assignor's spec had them
        self._previous_positions: tuple[tuple[str, ...], np.ndarray] | None = None
        self.kafka_work: ServerWork | None = None

    @classmethod
    def empty(cls) -> GroupAssignment:
        return cls((), {}, np.empty(0, dtype=np.int32))

    @property
    def member_ids(self) -> tuple[str, ...]:
        return self._member_ids

    @property
    def topics(self) -> tuple[str, ...]:
        return self._topics

    def num_partitions(self, topic: str) -> int:
        r = self._topics.index(topic)
        return int(self._offsets[r + 1] - self._offsets[r])

    def owners(self, topic: str) -> np.ndarray:
        """Member index per partition of ``topic`` (-1: unassigned); a read-only view."""
        r = self._topics.index(topic)
        view = self._owner[self._offsets[r] : self._offsets[r + 1]]
        view.flags.writeable = False
        return view

    def partition_counts(self) -> dict[str, int]:
        """Number of partitions per member."""
        counts = np.bincount(
            self._owner[self._owner >= 0], minlength=len(self._member_ids)
        ).tolist()
        return dict(zip(self._member_ids, counts, strict=True))

    def _member_runs(self) -> tuple[list[int], list[int], list[int], list[int], list[int]]:
        """Runs of (member, topic) over the partitions sorted by member, topic, partition:
        per run its topic rank and [start, end) in the partition list, and per member its first
        run. Built once, on first access."""
        if self._slices is None:
            order = np.argsort(self._owner, kind="stable")
            sorted_owner = self._owner[order]
            skip = int(np.searchsorted(sorted_owner, 0))  # unassigned partitions sort first
            order = order[skip:].astype(np.int64)
            sorted_owner = sorted_owner[skip:]
            ranks = np.searchsorted(self._offsets, order, side="right") - 1
            parts = order - self._offsets[ranks]
            change = np.flatnonzero((np.diff(sorted_owner) != 0) | (np.diff(ranks) != 0)) + 1
            starts = np.concatenate(([0], change)) if order.size else np.empty(0, dtype=np.int64)
            ends = np.append(starts[1:], order.size)
            first_run = np.searchsorted(sorted_owner[starts], np.arange(len(self._member_ids) + 1))
            self._slices = (
                parts.tolist(),
                ranks[starts].tolist(),
                starts.tolist(),
                ends.tolist(),
                first_run.tolist(),
            )
        return self._slices

    def _member_index(self) -> Mapping[str, int]:
        if self._index is None:
            self._index = {m: i for i, m in enumerate(self._member_ids)}
        return self._index

    def same_partitions_as(self, previous: GroupAssignment) -> np.ndarray | None:
        """Per member (in ``member_ids`` order), whether it has exactly the partitions it had in
        ``previous`` (False for a member not in ``previous``); None when the two cover different
        topics or partition counts. One pass over both owner arrays: a coordinator learns which
        members' targets moved without reading them one by one."""
        if previous._topics != self._topics or not np.array_equal(previous._offsets, self._offsets):
            return None
        old_ids = previous._member_ids
        known_positions = self._previous_positions
        if known_positions is not None and known_positions[0] is old_ids:
            remap = known_positions[1]
        else:
            index = self._member_index()
            remap = np.full(len(old_ids) + 1, -1, dtype=np.int64)  # [-1]: unassigned stays -1
            remap[:-1] = np.fromiter(
                map(index.get, old_ids, repeat(-1)), dtype=np.int64, count=len(old_ids)
            )
        mapped = remap[previous._owner]
        moved = mapped != self._owner
        changed = np.zeros(len(self._member_ids) + 1, dtype=bool)  # [-1]: unassigned, ignored
        changed[self._owner[moved]] = True
        changed[mapped[moved]] = True
        known = np.zeros(len(self._member_ids) + 1, dtype=bool)
        known[remap[:-1]] = True  # members that were in ``previous``
        return (known & ~changed)[:-1]

    def __getitem__(self, member_id: str) -> MemberAssignment:
        return MemberAssignment(self, self._member_index()[member_id])

    def views(self, member_ids: Iterable[str]) -> list[MemberAssignment | None]:
        """``self[m]`` for each of ``member_ids``, None for one not in the assignment (in one pass:
        a coordinator hands every member's view back at the next epoch)."""
        index = self._member_index()
        out: list[MemberAssignment | None] = []
        append = out.append
        for i in map(index.get, member_ids):
            if i is None:
                append(None)
            else:
                v = _new(MemberAssignment)
                v._parent = self
                v._member_index = i
                v._data = None
                append(v)
        return out

    def _member_dict(self, i: int) -> dict[str, tuple[int, ...]]:
        if self._slices is None and self._reads < _FEW_READS:
            # A coordinator reads a few members per group epoch: one scan of the owner array each
            # is cheaper than sorting it.
            self._reads += 1
            gids = np.flatnonzero(self._owner == i)
            if not gids.size:
                return {}
            ranks = np.searchsorted(self._offsets, gids, side="right") - 1
            parts = (gids - self._offsets[ranks]).tolist()
            cut = (np.flatnonzero(np.diff(ranks)) + 1).tolist()
            bounds = [0, *cut, len(parts)]
            rank_list = ranks[[0, *cut]].tolist()
            topics = self._topics
            return {
                topics[r]: tuple(parts[bounds[k] : bounds[k + 1]]) for k, r in enumerate(rank_list)
            }
        parts, run_rank, starts, ends, first_run = self._member_runs()
        topics = self._topics
        return {
            topics[run_rank[j]]: tuple(parts[starts[j] : ends[j]])
            for j in range(first_run[i], first_run[i + 1])
        }

    def __iter__(self) -> Iterator[str]:
        return iter(self._member_ids)

    def __len__(self) -> int:
        return len(self._member_ids)

    def __contains__(self, member_id: object) -> bool:
        return member_id in self._member_index()

    def to_dict(self) -> dict[str, dict[str, tuple[int, ...]]]:
        return {m: self._member_dict(i) for i, m in enumerate(self._member_ids)}

    def __repr__(self) -> str:
        return f"GroupAssignment({len(self._member_ids)} members, {len(self._owner)} partitions)"
