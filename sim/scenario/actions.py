"""The timeline's actions: one frozen class per action (``add_members``, ``crash``,
``rolling_restart``, ``network_partition``, ...), the validators of their fields, and their
conversions from and to a scenario table (``action_from_dict``, ``action_to_dict``).

Everything an action means lives in its class (``Action``): ``validate`` checks it against the
timeline before it (the members and topics by then, ``TimelineContext``) and resolves its member
targets, ``latest_end`` says how late its last step can fall, ``play`` does it in a run on the
``Stage`` the director provides (``sim.world.actors.Director``), and ``link_fault`` and
``change_metadata`` give the network and the topic metadata what a run knows of it beforehand. A
new action is one class here, listed in ``ACTIONS``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol, cast

import attrs

from sim.config import (
    GROUP_PROTOCOLS,
    MAX_MEMBERS,
    MAX_PARTITIONS_PER_TOPIC,
    ConfigError,
    SimConfig,
    boolean,
    build,
    field_key,
    names_tuple,
)
from sim.wire.faults import BOTH, DIRECTIONS, LinkFault


def _at(_inst, attribute, value):
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ConfigError(attribute.name, f"{value!r} is not a time >= 0 (seconds)")


def _nonneg(_inst, attribute, value):
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ConfigError(attribute.name, f"{value!r} must be a number >= 0")


def _count(limit: int):
    def check(_inst, attribute, value):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(attribute.name, f"{value!r} must be an integer >= 0")
        if value > limit:
            raise ConfigError(
                attribute.name, f"{value} is above the simulator's limit of {limit:,}"
            )

    return check


def _names(field: str):
    convert = names_tuple(field)
    return lambda value: None if value is None else convert(value)


ROLES = ("first", "middle", "last", "leader")


def _target(value) -> bool:
    return (isinstance(value, str) and bool(value)) or (
        isinstance(value, int) and not isinstance(value, bool)
    )


def _member(_inst, attribute, value):
    if not _target(value):
        raise ConfigError(
            attribute.name, f"{value!r} is not a member name, role ({', '.join(ROLES)}) or index"
        )


def _targets(field: str):
    """A converter: one target or a list of targets (names, roles, indexes) -> tuple."""

    def convert(value):
        if value is None:
            return None
        if _target(value):
            return (value,)
        if not isinstance(value, list | tuple) or not all(_target(v) for v in value):
            raise ConfigError(
                field, f"{value!r} is not a member name, role, index, or a list of them"
            )
        return tuple(value)

    return convert


def _batch_size(_inst, attribute, value):
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ConfigError(attribute.name, f"{value!r} must be >= 1 (members per batch)")
        return
    if isinstance(value, str) and value.endswith("%"):
        try:
            pct = float(value[:-1])
        except ValueError:
            pct = math.nan
        if 0 < pct <= 100:
            return
    raise ConfigError(
        attribute.name,
        f"{value!r} is not a number of members >= 1 or a percentage "
        'such as "10%" of the members restarted',
    )


def batch_count(batch_size: int | str, n: int) -> int:
    """Members per batch of a rolling restart of ``n`` members (``"10%"``: a tenth, rounded up)."""
    if isinstance(batch_size, str):
        return max(1, math.ceil(n * float(batch_size[:-1]) / 100 - 1e-9))
    return batch_size


def _topic(_inst, attribute, value):
    if not isinstance(value, str) or not value:
        raise ConfigError(attribute.name, f"{value!r} is not a topic name")


def _table(_inst, attribute, value):
    if not isinstance(value, Mapping):
        raise ConfigError(attribute.name, f"expected a table of consumer fields, got {value!r}")


def _optional_protocol(_inst, attribute, value):
    if value is not None and value not in GROUP_PROTOCOLS:
        raise ConfigError(attribute.name, f"{value!r} is not one of {', '.join(GROUP_PROTOCOLS)}")


def _optional_bool(_inst, attribute, value):
    if value is not None and not isinstance(value, bool):
        raise ConfigError(attribute.name, f"{value!r} is not true or false")


def name_span(names: list[str]) -> str:
    """A list of member names for a message: all of them, or the first and the last."""
    if len(names) <= 4:
        return ", ".join(names) or "none"
    return f"{names[0]} .. {names[-1]}"


class TimelineContext:
    """What checking a timeline in time order knows by each action: every member started by then
    (``members``: a literal name must be one of them), the members in the group by then, by name
    (``in_group``: started, not yet removed or crashed; roles and indexes resolve here), the
    topics, and the index of the next member an ``add_members`` starts."""

    def __init__(self, config: SimConfig, initial: list[str], width: int):
        self.config = config
        self.members = set(initial)
        self.in_group = list(initial)
        self.next_index = len(initial)
        self.width = width
        self.topics = {t.name for t in config.topics}

    def resolve(self, target: str | int, action: Action, field: str, leader_ok: bool) -> str:
        """The member name ``target`` (a name, a role or an index) stands for at ``action``."""
        in_group = self.in_group
        at = f"t={action.at_s:g}"
        if isinstance(target, int):
            if -len(in_group) <= target < len(in_group):
                return in_group[target]
            raise ConfigError(
                field,
                f"{target} is not a member index at {at} ({len(in_group):,} member(s) by then"
                f"{': ' + name_span(in_group) if in_group else ''})",
            )
        if target in ROLES:
            if target == "leader":
                if leader_ok:
                    return target
                raise ConfigError(
                    field, "'leader' is resolved during the run; only crash and pause accept it"
                )
            if not in_group:
                raise ConfigError(field, f"{target!r}: no member is in the group at {at}")
            return in_group[{"first": 0, "middle": len(in_group) // 2, "last": -1}[target]]
        if target not in self.members:
            raise ConfigError(
                field,
                f"{target!r} is not a member at {at} (members by then: "
                f"{name_span(sorted(self.members))}; or use a role: first, middle, last, leader, "
                "or an index)",
            )
        return target


class Stage(Protocol):
    """What an action may do when it is played (the director, ``sim.world.actors.Director``,
    provides it): record a trigger, hand a member's client a control note, play a later step
    (the director's own timer), and ask the world about its members."""

    def trigger(self, now: float, member: str | None, detail: str) -> None: ...

    def note(self, member: str, note: Any) -> None: ...

    def later(self, at: float, what: tuple) -> None: ...

    def leader_client(self) -> str | None: ...

    def alive_members(self) -> list[str]: ...

    def next_member_name(self) -> str: ...

    def start_member(self, name: str, extra: dict, spread: bool = False) -> None: ...

    def watch(self, action: CrashLeader) -> None: ...


class Action:
    """The base of the actions. Each action is a frozen attrs class with ``at_s`` and
    ``jitter_s`` and fields of its own; these methods are what the scenario, the runner and the
    director ask of any action, so that none of them switches on an action's type."""

    __slots__ = ()
    at_s: float
    jitter_s: float

    def validate(self, ctx: TimelineContext, where: str) -> Action:
        """This action checked against the timeline before it (``ctx``, which it then updates
        with what it changes: members gone or added, topics), with its member targets resolved
        to names (``"leader"`` stays: it is resolved during the run). Raises ``ConfigError``
        naming a field under ``where``."""
        return self

    def latest_end(self, ctx: TimelineContext) -> float:
        """The latest instant a seed can put this action's last step at (after ``validate``)."""
        return self.at_s + self.jitter_s

    def play(self, stage: Stage, now: float) -> None:
        """Do the action at ``now`` (it was validated, and its member targets resolved)."""
        raise NotImplementedError

    def describe(self) -> str:
        """The action as its trigger events record it: its fields as ``key=value``, those left
        empty left out."""
        return " ".join(
            f"{k}={v}"
            for k, v in action_to_dict(self).items()
            if k != "at_s" and v not in (None, {}, [])
        )

    def moved(self, at_s: float) -> Action:
        """This action at ``at_s`` (a seed's instant for it within ``jitter_s``)."""
        return attrs.evolve(cast(Any, self), at_s=at_s)

    def link_fault(self) -> LinkFault | None:
        """The window the network applies, for an action that is one."""
        return None

    def change_metadata(
        self,
        partitions: dict[str, int],
        created: dict[tuple[str, int], float],
        deleted: dict[tuple[str, int], float],
        rates: dict[str, float],
    ) -> bool:
        """For an action that changes the topics: apply it to the partition counts, the
        partitions' creation and deletion instants, and the topics' rates; whether it did."""
        return False

    def members_added(self) -> int:
        """How many members this action starts that were never in the group."""
        return 0

    def protocol_after(self) -> str | None:
        """The ``group.protocol`` this action restarts members with, if it switches it."""
        return None


def _member_now(stage: Stage, now: float, member: str | int, desc: str) -> tuple[str, str] | None:
    """A crash's or a pause's member now, with its trigger's detail: ``"leader"`` is whichever
    client leads the group now (recorded as such when none does: then None)."""
    if member == "leader":
        client = stage.leader_client()
        if client is None:
            stage.trigger(now, None, f"{desc}: no leader")
            return None
        return client, f"{desc} ({client})"
    return resolved_name(member), desc


def _members_now(stage: Stage, members: tuple[str | int, ...] | None) -> list[str]:
    """An action's resolved ``members``, or every member alive now when it names none."""
    if members is None:
        return stage.alive_members()
    return [resolved_name(n) for n in members]


def _resolve_members(
    action: RemoveMembers | RollingRestart, ctx: TimelineContext, where: str
) -> tuple[str, ...] | None:
    if action.members is None:
        return None
    return tuple(
        ctx.resolve(t, action, f"{where}.members", leader_ok=False) for t in action.members
    )


def _topic_known(action: AddPartitions | DeleteTopic, ctx: TimelineContext, where: str) -> None:
    if action.topic not in ctx.topics:
        raise ConfigError(
            f"{where}.topic",
            f"{action.topic!r} is not a topic at t={action.at_s:g} "
            f"({', '.join(sorted(ctx.topics)) or 'none'})",
        )


def _metadata_changed(stage: Stage, now: float, desc: str) -> None:
    stage.trigger(now, None, desc)
    for name in stage.alive_members():
        stage.note(name, "metadata_changed")


def _link_fault_played(stage: Stage, now: float, action, desc: str) -> None:
    member = action.member
    stage.trigger(now, None if member is None else resolved_name(member), desc)
    stage.later(now, ("link_fault", member))
    stage.later(now + action.duration_s, ("link_fault", member))


@attrs.frozen
class AddMembers(Action):
    """Start ``count`` new members (named after the existing ones), with consumer ``overrides``."""

    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    count: int = attrs.field(default=1, validator=_count(MAX_MEMBERS))
    overrides: dict = attrs.field(factory=dict, validator=_table)

    def validate(self, ctx: TimelineContext, where: str) -> AddMembers:
        new = [f"c{j:0{ctx.width}d}" for j in range(ctx.next_index, ctx.next_index + self.count)]
        ctx.next_index += self.count
        for name in new[:1]:  # they all share the overrides
            try:
                consumer = ctx.config.consumer_for(name, self.overrides)
            except ConfigError as e:
                raise e.under(f"{where}.overrides") from None
            ctx.config.check_consumer(consumer, f"{where}.overrides")
        ctx.members.update(new)
        ctx.in_group.extend(new)
        return self

    def play(self, stage: Stage, now: float) -> None:
        desc = self.describe()
        for _ in range(self.count):
            name = stage.next_member_name()
            stage.trigger(now, name, desc)
            stage.start_member(name, self.overrides, spread=True)

    def members_added(self) -> int:
        return self.count


@attrs.frozen
class RemoveMembers(Action):
    """Close ``members`` gracefully (or the ``count`` highest-named live members)."""

    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    members: tuple[str | int, ...] | None = attrs.field(default=None, converter=_targets("members"))  # type: ignore[misc]  # (attrs plugin: named converters only)
    count: int = attrs.field(default=1, validator=_count(MAX_MEMBERS))

    def validate(self, ctx: TimelineContext, where: str) -> RemoveMembers:
        a = (
            self
            if self.members is None
            else attrs.evolve(self, members=_resolve_members(self, ctx, where))
        )
        in_group = ctx.in_group
        gone = set(
            a.members if a.members is not None else (in_group[-a.count :] if a.count else [])
        )
        ctx.in_group = [n for n in in_group if n not in gone]
        return a

    def play(self, stage: Stage, now: float) -> None:
        desc = self.describe()
        if self.members is not None:
            names = [resolved_name(n) for n in self.members]
        else:
            alive = stage.alive_members()
            names = alive[-self.count :] if self.count else []
        for name in names:
            stage.trigger(now, name, desc)
            stage.note(name, ("close",))


@attrs.frozen
class Crash(Action):
    """Kill ``member`` (no LeaveGroup, no callbacks)."""

    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    member: str | int = attrs.field(default=0, validator=_member)

    def validate(self, ctx: TimelineContext, where: str) -> Crash:
        name = ctx.resolve(self.member, self, f"{where}.member", leader_ok=True)
        if name in ctx.in_group:
            ctx.in_group.remove(name)
        return attrs.evolve(self, member=name)

    def play(self, stage: Stage, now: float) -> None:
        target = _member_now(stage, now, self.member, self.describe())
        if target is not None:
            member, desc = target
            stage.trigger(now, member, desc)
            stage.note(member, ("crash",))


LEADER_PHASES = ("join", "sync", "stable")


@attrs.frozen
class CrashLeader(Action):
    """Kill the group leader's client the first time, at or after ``at_s``, that the group is in
    ``phase`` (``join``: PreparingRebalance; ``sync``: CompletingRebalance, while the leader
    computes and sends the assignment; ``stable``), ``delay_s`` after it got there. If the group
    settles without reaching that phase, nothing is crashed."""

    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    phase: str = "sync"
    delay_s: float = attrs.field(default=0.0, validator=_nonneg)

    def __attrs_post_init__(self):
        if self.phase not in LEADER_PHASES:
            raise ConfigError("phase", f"{self.phase!r} is not one of {', '.join(LEADER_PHASES)}")

    def play(self, stage: Stage, now: float) -> None:
        stage.watch(self)  # the world crashes the leader when the group reaches the phase


@attrs.frozen
class Pause(Action):
    """Freeze ``member`` for ``duration_s`` (GC or debugger), then let it resume with stale state."""

    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    member: str | int = attrs.field(default=0, validator=_member)
    duration_s: float = attrs.field(default=60.0, validator=_nonneg)

    def validate(self, ctx: TimelineContext, where: str) -> Pause:
        return attrs.evolve(
            self, member=ctx.resolve(self.member, self, f"{where}.member", leader_ok=True)
        )

    def latest_end(self, ctx: TimelineContext) -> float:
        return self.at_s + self.jitter_s + self.duration_s

    def play(self, stage: Stage, now: float) -> None:
        target = _member_now(stage, now, self.member, self.describe())
        if target is not None:
            member, desc = target
            stage.trigger(now, member, desc)
            stage.note(member, ("pause",))
            stage.later(now + self.duration_s, ("resume", member))


@attrs.frozen
class RollingRestart(Action):
    """Restart ``members`` (default: every member in the group by then, by name) in batches of
    ``batch_size`` members (a number, or a percentage such as ``"10%"`` of the members restarted,
    rounded up): batch j stops at ``at_s + j * (down_s + gap_s)`` (gracefully, or crashing if
    ``graceful`` is false) and starts ``down_s`` later, with ``assignors`` as its new
    partition.assignment.strategy if given (the two-bounce upgrade) and ``static`` switched if
    given. ``group_protocol`` restarts each member with that ``group.protocol``: a fleet moved
    batch by batch onto the consumer protocol (KIP-848's online migration: the coordinator
    converts the group when the first consumer-protocol member joins, ``sim.coordinator.migration``) or back
    to the classic one. Kafka defines no deploy; this is how a deploy tool (Kubernetes' rolling
    update with ``maxUnavailable``, say) restarts a consumer fleet."""

    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    members: tuple[str | int, ...] | None = attrs.field(default=None, converter=_targets("members"))  # type: ignore[misc]  # (attrs plugin: named converters only)
    down_s: float = attrs.field(default=5.0, validator=_nonneg)
    gap_s: float = attrs.field(default=30.0, validator=_nonneg)
    graceful: bool = attrs.field(default=True, validator=boolean)
    assignors: tuple[str, ...] | None = attrs.field(default=None, converter=_names("assignors"))  # type: ignore[misc]  # (attrs plugin: named converters only)
    static: bool | None = attrs.field(default=None, validator=_optional_bool)
    batch_size: int | str = attrs.field(default=1, validator=_batch_size)
    group_protocol: str | None = attrs.field(default=None, validator=_optional_protocol)

    def batches(self, names: list[str]) -> list[list[str]]:
        """``names`` cut into the batches that restart together, in order."""
        size = batch_count(self.batch_size, len(names))
        return [names[i : i + size] for i in range(0, len(names), size)]

    def duration_s(self, n: int) -> float:
        """From ``at_s`` until the last batch of ``n`` members is started again."""
        if n == 0:
            return 0.0
        waves = math.ceil(n / batch_count(self.batch_size, n))
        return (waves - 1) * (self.down_s + self.gap_s) + self.down_s

    def validate(self, ctx: TimelineContext, where: str) -> RollingRestart:
        a = (
            self
            if self.members is None
            else attrs.evolve(self, members=_resolve_members(self, ctx, where))
        )
        if a.assignors is not None:
            try:
                build(
                    type(ctx.config.consumer),
                    {"partition_assignment_strategy": list(a.assignors)},
                    "",
                )
            except ConfigError as e:
                raise ConfigError(f"{where}.assignors", e.reason) from None
        return a

    def latest_end(self, ctx: TimelineContext) -> float:
        n = len(self.members) if self.members is not None else len(ctx.in_group)
        return self.at_s + self.jitter_s + self.duration_s(n)

    def play(self, stage: Stage, now: float) -> None:
        names = _members_now(stage, self.members)
        extra: dict[str, Any] = {}
        if self.assignors is not None:
            extra["partition_assignment_strategy"] = list(self.assignors)
        if self.static is not None:
            extra["static"] = self.static
        if self.group_protocol is not None:
            extra["group_protocol"] = self.group_protocol
        stage.trigger(now, None, self.describe())
        for i, batch in enumerate(self.batches(names)):
            t_stop = now + i * (self.down_s + self.gap_s)
            for name in batch:
                stage.later(t_stop, ("stop", name, self.graceful))
                stage.later(t_stop + self.down_s, ("start", name, extra))

    def protocol_after(self) -> str | None:
        return self.group_protocol


@attrs.frozen
class AddPartitions(Action):
    """Grow ``topic`` by ``count`` partitions (the leader notices at its next metadata refresh)."""

    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    topic: str = attrs.field(default="", validator=_topic)
    count: int = attrs.field(default=1, validator=_count(MAX_PARTITIONS_PER_TOPIC))

    def validate(self, ctx: TimelineContext, where: str) -> AddPartitions:
        _topic_known(self, ctx, where)
        return self

    def play(self, stage: Stage, now: float) -> None:
        _metadata_changed(stage, now, self.describe())

    def change_metadata(self, partitions, created, deleted, rates) -> bool:
        old = partitions.get(self.topic, 0)
        partitions[self.topic] = old + self.count
        for p in range(old, old + self.count):
            created[(self.topic, p)] = self.at_s
        return True


@attrs.frozen
class CreateTopic(Action):
    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    topic: str = attrs.field(default="", validator=_topic)
    partitions: int = attrs.field(default=1, validator=_count(MAX_PARTITIONS_PER_TOPIC))
    rate: float = attrs.field(default=100.0, validator=_nonneg)

    def validate(self, ctx: TimelineContext, where: str) -> CreateTopic:
        if self.topic in ctx.topics:
            raise ConfigError(f"{where}.topic", f"{self.topic!r} already exists at t={self.at_s:g}")
        ctx.topics.add(self.topic)
        return self

    def play(self, stage: Stage, now: float) -> None:
        _metadata_changed(stage, now, self.describe())

    def change_metadata(self, partitions, created, deleted, rates) -> bool:
        partitions[self.topic] = self.partitions
        rates[self.topic] = self.rate
        for p in range(self.partitions):
            created[(self.topic, p)] = self.at_s
        return True


@attrs.frozen
class DeleteTopic(Action):
    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    topic: str = attrs.field(default="", validator=_topic)

    def validate(self, ctx: TimelineContext, where: str) -> DeleteTopic:
        _topic_known(self, ctx, where)
        ctx.topics.discard(self.topic)
        return self

    def play(self, stage: Stage, now: float) -> None:
        _metadata_changed(stage, now, self.describe())

    def change_metadata(self, partitions, created, deleted, rates) -> bool:
        for p in range(partitions.pop(self.topic, 0)):
            deleted[(self.topic, p)] = self.at_s
        return True


@attrs.frozen
class NetworkPartition(Action):
    """Cut the link between ``member`` and the coordinator for ``duration_s`` in ``direction``
    (to_coordinator, from_coordinator or both)."""

    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    member: str | int = attrs.field(default=0, validator=_member)
    duration_s: float = attrs.field(default=60.0, validator=_nonneg)
    direction: str = "both"

    def __attrs_post_init__(self):
        if self.direction not in DIRECTIONS:
            raise ConfigError(
                "direction", f"{self.direction!r} is not one of {', '.join(DIRECTIONS)}"
            )

    def validate(self, ctx: TimelineContext, where: str) -> NetworkPartition:
        return attrs.evolve(
            self, member=ctx.resolve(self.member, self, f"{where}.member", leader_ok=False)
        )

    def latest_end(self, ctx: TimelineContext) -> float:
        return self.at_s + self.jitter_s + self.duration_s

    def play(self, stage: Stage, now: float) -> None:
        _link_fault_played(stage, now, self, self.describe())

    def link_fault(self) -> LinkFault:
        return LinkFault(
            self.at_s, self.at_s + self.duration_s, resolved_name(self.member), self.direction
        )


@attrs.frozen
class DelaySpike(Action):
    """Add ``extra_ms`` to every message of ``member`` (None: every member) for ``duration_s``."""

    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    duration_s: float = attrs.field(default=10.0, validator=_nonneg)
    extra_ms: float = attrs.field(default=1000.0, validator=_nonneg)
    member: str | None = attrs.field(default=None, validator=attrs.validators.optional(_member))

    def validate(self, ctx: TimelineContext, where: str) -> DelaySpike:
        if self.member is None:
            return self
        return attrs.evolve(
            self, member=ctx.resolve(self.member, self, f"{where}.member", leader_ok=False)
        )

    def latest_end(self, ctx: TimelineContext) -> float:
        return self.at_s + self.jitter_s + self.duration_s

    def play(self, stage: Stage, now: float) -> None:
        _link_fault_played(stage, now, self, self.describe())

    def link_fault(self) -> LinkFault:
        return LinkFault(
            self.at_s, self.at_s + self.duration_s, self.member, BOTH, self.extra_ms / 1000.0
        )


@attrs.frozen
class PacketLoss(Action):
    """Drop each message of ``member`` (None: every member) with ``probability`` for
    ``duration_s``. Like ``network.drop_probability`` but a fault that ends: a lost message is
    never retransmitted, so the request waits for its timeout (harsher than TCP)."""

    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    duration_s: float = attrs.field(default=10.0, validator=_nonneg)
    probability: float = attrs.field(default=0.1, validator=_nonneg)
    member: str | None = attrs.field(default=None, validator=attrs.validators.optional(_member))

    def __attrs_post_init__(self):
        if not self.probability <= 1:
            raise ConfigError("probability", f"{self.probability!r} is not between 0 and 1")

    def validate(self, ctx: TimelineContext, where: str) -> PacketLoss:
        if self.member is None:
            return self
        return attrs.evolve(
            self, member=ctx.resolve(self.member, self, f"{where}.member", leader_ok=False)
        )

    def latest_end(self, ctx: TimelineContext) -> float:
        return self.at_s + self.jitter_s + self.duration_s

    def play(self, stage: Stage, now: float) -> None:
        _link_fault_played(stage, now, self, self.describe())

    def link_fault(self) -> LinkFault:
        return LinkFault(
            self.at_s, self.at_s + self.duration_s, self.member, BOTH, loss=self.probability
        )


ACTIONS: dict[str, type[Action]] = {
    "add_members": AddMembers,
    "remove_members": RemoveMembers,
    "crash": Crash,
    "crash_leader": CrashLeader,
    "pause": Pause,
    "rolling_restart": RollingRestart,
    "add_partitions": AddPartitions,
    "create_topic": CreateTopic,
    "delete_topic": DeleteTopic,
    "network_partition": NetworkPartition,
    "delay_spike": DelaySpike,
    "packet_loss": PacketLoss,
}


ACTION_NAMES = {cls: name for name, cls in ACTIONS.items()}


def action_from_dict(data: Mapping[str, Any], where: str) -> Action:
    if not isinstance(data, Mapping):
        raise ConfigError(where, f"expected a table, got {data!r}")
    kind = data.get("action")
    if kind not in ACTIONS:
        raise ConfigError(f"{where}.action", f"{kind!r} is not one of {', '.join(ACTIONS)}")
    rest = {k: v for k, v in data.items() if k != "action"}
    if "at_s" not in {field_key(k) for k in rest}:
        raise ConfigError(f"{where}.at_s", "missing (seconds of simulated time)")
    return build(ACTIONS[kind], rest, where)


# Fields added later are left out at their default, so existing scenarios keep their run ids
# (a digest of this dict) and their recorded trigger details.
_OMIT_AT_DEFAULT = {"batch_size": 1, "jitter_s": 0.0}


def action_to_dict(action: Action) -> dict:
    d: dict[str, Any] = {"action": ACTION_NAMES[type(action)]}
    for a in attrs.fields(cast(Any, type(action))):
        v = getattr(action, a.name)
        if a.name in _OMIT_AT_DEFAULT and v == _OMIT_AT_DEFAULT[a.name]:
            continue
        d[a.name] = list(v) if isinstance(v, tuple) else v
    return d


def resolved_name(target: str | int) -> str:
    """A member of a resolved timeline's action: a name (``Scenario.resolved_timeline`` turns
    indexes and roles into names; ``leader`` is looked up when the action runs)."""
    assert isinstance(target, str), target
    return target
