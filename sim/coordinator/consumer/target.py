"""The coordinator's target assignment (KIP-848): one call of a server-side assignor for a group
epoch, behind the one small interface the consumer-protocol coordinator needs.

``compute_target(name, partitions_per_topic, members, current)`` returns a ``TargetAssignment``:
for each member id, the frozenset of TopicPartitions it should own at the new epoch. ``members``
is a ``GroupMembers`` that the coordinator keeps between epochs (``put``/``remove`` as members
join, leave or change subscription or rack), or a mapping of member id to ``MemberSpec``
(subscribed topics, rack, instance id); ``current`` is the previous target assignment (what
Kafka's ``TargetAssignmentBuilder`` hands the assignor as each member's current assignment, so
the assignor can be sticky).

The assignors themselves are Kafka's ``UniformAssignor`` and ``RangeAssignor`` of the
group-coordinator module, in ``assignors.server``; this module only adapts their call, at the
cost of the members that the epoch touches rather than of the whole group:

- the members, their Java ``HashMap`` order and the group's subscription type are kept in the
  ``GroupMembers`` from one epoch to the next (``GroupSpec.from_members``), so an epoch costs
  Python work for the members that changed, plus numpy passes over the group;
- the previous target goes back to the assignor as its result arrays, each member found at its
  new position in one C-level pass; only members whose target was set or dropped explicitly (a
  static member's new member id, a member removed) are handed in one by one;
- a member's frozenset is built when the coordinator first asks for it (its next heartbeat), and a
  member whose partitions did not change keeps the very set it had, so an epoch that moves a few
  partitions in a 10,000-member group builds a few sets;
- while the group stays homogeneous over the same topics and partition counts under ``uniform``,
  the epochs step one ``UniformChain`` (``assignors.server.uniform_chain``): the same result, at
  the cost of the members and partitions that move, not of the group's partitions (a group that
  forms or grows one member at a time computes one target per member). The target of a step
  reads the chain while it is the latest; once a later step moved the chain on, it reads a copy
  of its owners kept at its step.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Literal

import attrs
import numpy as np

from assignors import TopicPartition
from assignors.java import java_sort_key
from assignors.server import (
    GroupAssignment,
    GroupMembers,
    GroupSpec,
    get_server_assignor,
)
from assignors.server.kafka_time import ServerWork
from assignors.server.spec import SubscriptionType
from assignors.server.uniform_chain import UniformChain

_EMPTY: frozenset = frozenset()


@attrs.frozen(slots=True)
class MemberSpec:
    """What a server-side assignor learns of one member (Kafka's MemberSubscriptionAndAssignment)."""

    topics: tuple[str, ...]
    rack: str | None = None
    instance_id: str | None = None
    topic_set: frozenset[str] = attrs.field(
        init=False,
        eq=False,
        repr=False,
        default=attrs.Factory(lambda s: frozenset(s.topics), takes_self=True),
    )


class TargetAssignment(Mapping[str, frozenset]):
    """Member id -> frozenset of TopicPartitions, read lazily from one assignor result.

    ``pop`` and item assignment serve the coordinator's bookkeeping between epochs (a member
    removed; a static member's target moved to its new member id)."""

    __slots__ = (
        "_res",
        "_base",
        "_sets",
        "_previous",
        "_detached",
        "_same",
        "_chain",
        "_step",
        "_snapshot",
        "_work",
    )

    def __init__(
        self,
        result: GroupAssignment | None = None,
        members=(),
        previous: TargetAssignment | None = None,
    ):
        self._res = result if result is not None else GroupAssignment.empty()
        # the members read from ``_result`` (a mapping whose keys are they), less ``_detached``
        self._base: Mapping[str, object] = (
            members if isinstance(members, Mapping) else dict.fromkeys(members)
        )
        self._sets: dict[str, frozenset] = {}  # built, or set explicitly
        self._previous = previous
        self._detached: dict[str, None] = {}  # set explicitly or popped: not read from ``_result``
        self._same: np.ndarray | Literal[False] | None = (
            None  # per member of ``_result``: same partitions as in the previous result
        )
        self._chain: UniformChain | None = None  # the chain this target is a step of
        self._step = -1
        self._snapshot: tuple | None = None  # (member ids, positions, owner slot per partition)
        self._work: ServerWork | None = result.kafka_work if result is not None else None

    @classmethod
    def _of_chain(cls, chain: UniformChain, members: GroupMembers) -> TargetAssignment:
        """The target a chain step computed: read from the chain while it is at this step."""
        t = cls.__new__(cls)
        index = members._member_index()
        t._res = None  # type: ignore[assignment]  # (read from the chain until detached)
        t._base = index
        t._sets = {}
        t._previous = None
        t._detached = {}
        t._same = None
        t._chain = chain
        t._step = chain.step_count
        t._snapshot = (members.member_ids, index, chain.owner.copy())
        t._work = chain.work
        return t

    @property
    def kafka_work(self) -> ServerWork | None:
        """What Kafka's assignor did computing this target (``assignors.server.kafka_time``),
        the same whether the full assignor or a chain step computed it; None for a target not
        computed by an assignor."""
        return self._work

    def _live_chain(self) -> UniformChain | None:
        chain = self._chain
        return (
            chain
            if chain is not None and chain.step_count == self._step and not chain.dead
            else None
        )

    @property
    def _result(self) -> GroupAssignment:
        """The assignor's result this target reads (for a chain step, built on first use)."""
        res = self._res
        if res is None:
            ids, index, owner = self._snapshot
            chain = self._chain
            positions = index._positions  # slot -> position at this step
            held = owner >= 0
            by_position = np.full(owner.size, -1, dtype=np.int32)
            by_position[held] = positions[owner[held]]
            res = GroupAssignment(
                ids, dict(zip(chain.topics, chain.counts, strict=True)), by_position
            )
            res._index = index
            self._res = res
        return res

    def _in_base(self, member_id: object) -> bool:
        return member_id in self._base and member_id not in self._detached

    def __getitem__(self, member_id: str) -> frozenset:
        s = self._sets.get(member_id)
        if s is None:
            if not self._in_base(member_id):
                raise KeyError(member_id)
            s = self._sets[member_id] = self._build(member_id)
        return s

    def _view(self, member_id: str) -> Mapping[str, tuple[int, ...]]:
        # a member the assignor left out gets nothing (TargetAssignmentBuilder)
        return self._result.get(member_id, {})

    def _build(self, member_id: str) -> frozenset:
        chain = self._live_chain()
        if chain is not None:
            return chain.partitions(member_id)
        prev = self._previous
        if prev is not None and prev._in_base(member_id):
            # unchanged since the previous epoch: the same set (no new TopicPartitions)
            old = prev._sets.get(member_id)
            if old is not None:
                same = self._same_as_previous(member_id, prev)
                if same is None:
                    same = dict(prev._view(member_id)) == dict(self._view(member_id))
                if same:
                    return old
        parts = self._view(member_id)
        return frozenset(TopicPartition(t, p) for t, ps in parts.items() for p in ps)

    def _same_as_previous(self, member_id: str, prev: TargetAssignment) -> bool | None:
        """Whether both results give the member the same partitions, from one comparison of the
        two results made on the first call (None: not known that way)."""
        same = self._same
        if same is None:
            same = self._same = self._result.same_partitions_as(prev._result)
            if same is None:
                same = self._same = False  # different topics: compare member by member
        if same is False or member_id not in self._result or member_id not in prev._result:
            return None
        return bool(same[self._result._member_index()[member_id]])

    def __iter__(self) -> Iterator[str]:
        for mid in self._base:
            if mid not in self._detached:
                yield mid
        for mid in self._sets:
            if not self._in_base(mid):
                yield mid

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, member_id: object) -> bool:
        return self._in_base(member_id) or member_id in self._sets

    def __setitem__(self, member_id: str, partitions: frozenset) -> None:
        self._detached[member_id] = None
        self._sets[member_id] = frozenset(partitions)

    def pop(self, member_id: str, default=None):
        if member_id not in self:
            return default
        value = self[member_id]
        self._detached[member_id] = None
        del self._sets[member_id]
        return value

    def current_for(self, member_id: str) -> Mapping[str, object]:
        """The member's target as the next assignor call wants it: a view into the result arrays
        when it came from them, else ``{topic: [partition, ...]}``."""
        if self._in_base(member_id):
            return self._view(member_id)
        s = self._sets.get(member_id)
        if not s:
            return {}
        by_topic: dict[str, list[int]] = {}
        for tp in s:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return by_topic


def compute_target(
    name: str,
    partitions_per_topic: Mapping[str, int],
    members: GroupMembers | Mapping[str, MemberSpec],
    current: Mapping[str, frozenset],
    changed: Iterable[str] | None = None,
) -> TargetAssignment:
    """The target assignment of ``members`` (see the module docstring). ``changed``: the member
    ids that may have joined or left since ``current`` was computed (None: unknown, compare all)."""
    if not isinstance(members, GroupMembers):
        members = group_members_of(members)
    if not isinstance(current, TargetAssignment):
        current = _from_sets(current)
    stepped = _step_chain(name, partitions_per_topic, members, current, changed)
    if stepped is not None:
        return stepped
    # TargetAssignmentBuilder: a member's current target is the last result's, unless it was set
    # or dropped since (then it is what was set, or nothing)
    assigned = {mid: current.current_for(mid) for mid in current._detached if mid in members}
    spec = GroupSpec.from_members(members, current._result, assigned)
    result = get_server_assignor(name).assign(spec, dict(partitions_per_topic))
    current._previous = None  # keep one epoch back, not the whole history
    # the members as of this epoch: their positions in its order (the GroupMembers' snapshot)
    return TargetAssignment(result, members._member_index(), current)


def _step_chain(
    name: str,
    partitions_per_topic: Mapping[str, int],
    members: GroupMembers,
    current: TargetAssignment,
    changed: Iterable[str] | None,
) -> TargetAssignment | None:
    """The next target as a step of a ``UniformChain``, or None when one does not apply (another
    assignor, a heterogeneous or empty group, other topics or partition counts, a member handed
    an explicit target)."""
    if (
        name != "uniform"
        or not len(members)
        or members.subscription_type is not SubscriptionType.HOMOGENEOUS
    ):
        return None
    (subscribed,) = members._distinct  # homogeneous: one subscription
    topics = sorted((t for t in subscribed if t in partitions_per_topic), key=java_sort_key)
    if not topics:
        return None
    counts = [int(partitions_per_topic[t]) for t in topics]
    detached = current._detached
    sets = current._sets
    if any(sets.get(mid) for mid in detached if mid in members):
        return None
    chain = current._live_chain()
    if chain is None or not chain.matches(members, topics, counts):
        res = current._result
        if res.topics != tuple(topics) or [res.num_partitions(t) for t in topics] != counts:
            return None
        chain = UniformChain.from_assignment(members, res)
        if chain is None:
            return None
        changed = None  # the result's members against the members now
    if changed is None:
        gone = [mid for mid in chain.slot_of if mid not in members or mid in detached]
        new = [mid for mid in members.member_ids if mid not in chain.slot_of or mid in detached]
    else:
        candidates = dict.fromkeys(changed)
        candidates.update(detached)
        gone = [
            mid for mid in candidates if mid in chain and (mid not in members or mid in detached)
        ]
        new = [
            mid for mid in candidates if mid in members and (mid not in chain or mid in detached)
        ]
    for mid in gone:
        chain.remove(mid)
    for mid in new:
        chain.add(mid)
    if len(chain) != len(members):
        chain.dead = True  # not the group's members (a caller's ``changed`` missed one)
        return None
    chain.step()
    return TargetAssignment._of_chain(chain, members)


def group_members_of(specs: Mapping[str, MemberSpec]) -> GroupMembers:
    """A ``GroupMembers`` holding ``specs`` (member id -> ``MemberSpec``), built from scratch."""
    out = GroupMembers()
    for mid, s in specs.items():
        out.put(mid, s.topic_set, s.instance_id, s.rack)
    return out


def _from_sets(sets: Mapping[str, frozenset]) -> TargetAssignment:
    target = TargetAssignment()
    for mid, s in sets.items():
        target[mid] = s
    return target
