"""Scenarios: a SimConfig plus a timeline of actions at simulated times.

As a dict (or TOML file)::

    name = "scale-out"
    members = 3
    [[topics]]
    name = "orders"
    partitions = 12
    [consumer]
    partition_assignment_strategy = ["cooperative-sticky"]
    [[timeline]]
    at_s = 30
    action = "add_members"
    count = 1

Actions (``action`` = ...): add_members, remove_members, crash, crash_leader, pause,
rolling_restart, add_partitions, create_topic, delete_topic, network_partition, delay_spike,
packet_loss.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from typing import Any

import attrs

from .config import (
    MAX_MEMBERS,
    MAX_PARTITIONS_PER_TOPIC,
    ConfigError,
    SimConfig,
    _key,
    boolean,
    build,
    names_tuple,
    sim_config_from_dict,
)
from .network import DIRECTIONS


def _at(_inst, attribute, value):
    if (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
            or value < 0):
        raise ConfigError(attribute.name, f"{value!r} is not a time >= 0 (seconds)")


def _nonneg(_inst, attribute, value):
    if (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
            or value < 0):
        raise ConfigError(attribute.name, f"{value!r} must be a number >= 0")


def _count(limit: int):
    def check(_inst, attribute, value):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(attribute.name, f"{value!r} must be an integer >= 0")
        if value > limit:
            raise ConfigError(attribute.name, f"{value} is above the simulator's limit of {limit:,}")
    return check


def _names(field: str):
    convert = names_tuple(field)
    return lambda value: None if value is None else convert(value)


def _member(_inst, attribute, value):
    if not isinstance(value, str) or not value:
        raise ConfigError(attribute.name, f"{value!r} is not a member name")


def _topic(_inst, attribute, value):
    if not isinstance(value, str) or not value:
        raise ConfigError(attribute.name, f"{value!r} is not a topic name")


def _table(_inst, attribute, value):
    if not isinstance(value, Mapping):
        raise ConfigError(attribute.name, f"expected a table of consumer fields, got {value!r}")


def _optional_bool(_inst, attribute, value):
    if value is not None and not isinstance(value, bool):
        raise ConfigError(attribute.name, f"{value!r} is not true or false")


@attrs.frozen
class AddMembers:
    """Start ``count`` new members (named after the existing ones), with consumer ``overrides``."""

    at_s: float = attrs.field(validator=_at)
    count: int = attrs.field(default=1, validator=_count(MAX_MEMBERS))
    overrides: dict = attrs.field(factory=dict, validator=_table)


@attrs.frozen
class RemoveMembers:
    """Close ``members`` gracefully (or the ``count`` highest-named live members)."""

    at_s: float = attrs.field(validator=_at)
    members: tuple[str, ...] | None = attrs.field(default=None, converter=_names("members"))
    count: int = attrs.field(default=1, validator=_count(MAX_MEMBERS))


@attrs.frozen
class Crash:
    """Kill ``member`` (no LeaveGroup, no callbacks)."""

    at_s: float = attrs.field(validator=_at)
    member: str = attrs.field(default="c000", validator=_member)


LEADER_PHASES = ("join", "sync", "stable")


@attrs.frozen
class CrashLeader:
    """Kill the group leader's client the first time, at or after ``at_s``, that the group is in
    ``phase`` (``join``: PreparingRebalance; ``sync``: CompletingRebalance, while the leader
    computes and sends the assignment; ``stable``), ``delay_s`` after it got there. If the group
    settles without reaching that phase, nothing is crashed."""

    at_s: float = attrs.field(validator=_at)
    phase: str = "sync"
    delay_s: float = attrs.field(default=0.0, validator=_nonneg)

    def __attrs_post_init__(self):
        if self.phase not in LEADER_PHASES:
            raise ConfigError("phase", f"{self.phase!r} is not one of {', '.join(LEADER_PHASES)}")


@attrs.frozen
class Pause:
    """Freeze ``member`` for ``duration_s`` (GC or debugger), then let it resume with stale state."""

    at_s: float = attrs.field(validator=_at)
    member: str = attrs.field(default="c000", validator=_member)
    duration_s: float = attrs.field(default=60.0, validator=_nonneg)


@attrs.frozen
class RollingRestart:
    """Restart ``members`` (default: every live member, by name) one at a time: member i stops at
    ``at_s + i * (down_s + gap_s)`` (gracefully, or crashing if ``graceful`` is false) and starts
    ``down_s`` later, with ``assignors`` as its new partition.assignment.strategy if given (the
    two-bounce upgrade) and ``static`` switched if given."""

    at_s: float = attrs.field(validator=_at)
    members: tuple[str, ...] | None = attrs.field(default=None, converter=_names("members"))
    down_s: float = attrs.field(default=5.0, validator=_nonneg)
    gap_s: float = attrs.field(default=30.0, validator=_nonneg)
    graceful: bool = attrs.field(default=True, validator=boolean)
    assignors: tuple[str, ...] | None = attrs.field(default=None, converter=_names("assignors"))
    static: bool | None = attrs.field(default=None, validator=_optional_bool)


@attrs.frozen
class AddPartitions:
    """Grow ``topic`` by ``count`` partitions (the leader notices at its next metadata refresh)."""

    at_s: float = attrs.field(validator=_at)
    topic: str = attrs.field(default="", validator=_topic)
    count: int = attrs.field(default=1, validator=_count(MAX_PARTITIONS_PER_TOPIC))


@attrs.frozen
class CreateTopic:
    at_s: float = attrs.field(validator=_at)
    topic: str = attrs.field(default="", validator=_topic)
    partitions: int = attrs.field(default=1, validator=_count(MAX_PARTITIONS_PER_TOPIC))
    rate: float = attrs.field(default=100.0, validator=_nonneg)


@attrs.frozen
class DeleteTopic:
    at_s: float = attrs.field(validator=_at)
    topic: str = attrs.field(default="", validator=_topic)


@attrs.frozen
class NetworkPartition:
    """Cut the link between ``member`` and the coordinator for ``duration_s`` in ``direction``
    (to_coordinator, from_coordinator or both)."""

    at_s: float = attrs.field(validator=_at)
    member: str = attrs.field(default="c000", validator=_member)
    duration_s: float = attrs.field(default=60.0, validator=_nonneg)
    direction: str = "both"

    def __attrs_post_init__(self):
        if self.direction not in DIRECTIONS:
            raise ConfigError("direction", f"{self.direction!r} is not one of {', '.join(DIRECTIONS)}")


@attrs.frozen
class DelaySpike:
    """Add ``extra_ms`` to every message of ``member`` (None: every member) for ``duration_s``."""

    at_s: float = attrs.field(validator=_at)
    duration_s: float = attrs.field(default=10.0, validator=_nonneg)
    extra_ms: float = attrs.field(default=1000.0, validator=_nonneg)
    member: str | None = attrs.field(default=None, validator=attrs.validators.optional(_member))


@attrs.frozen
class PacketLoss:
    """Drop each message of ``member`` (None: every member) with ``probability`` for
    ``duration_s``. Like ``network.drop_probability`` but a fault that ends: a lost message is
    never retransmitted, so the request waits for its timeout (harsher than TCP)."""

    at_s: float = attrs.field(validator=_at)
    duration_s: float = attrs.field(default=10.0, validator=_nonneg)
    probability: float = attrs.field(default=0.1, validator=_nonneg)
    member: str | None = attrs.field(default=None, validator=attrs.validators.optional(_member))

    def __attrs_post_init__(self):
        if not self.probability <= 1:
            raise ConfigError("probability", f"{self.probability!r} is not between 0 and 1")


ACTIONS: dict[str, type] = {
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


def action_from_dict(data: Mapping[str, Any], where: str):
    if not isinstance(data, Mapping):
        raise ConfigError(where, f"expected a table, got {data!r}")
    kind = data.get("action")
    if kind not in ACTIONS:
        raise ConfigError(f"{where}.action", f"{kind!r} is not one of {', '.join(ACTIONS)}")
    rest = {k: v for k, v in data.items() if k != "action"}
    if "at_s" not in {_key(k) for k in rest}:
        raise ConfigError(f"{where}.at_s", "missing (seconds of simulated time)")
    return build(ACTIONS[kind], rest, where)


def action_to_dict(action) -> dict:
    d = {"action": ACTION_NAMES[type(action)]}
    for a in attrs.fields(type(action)):
        v = getattr(action, a.name)
        d[a.name] = list(v) if isinstance(v, tuple) else v
    return d


@attrs.frozen
class Scenario:
    """A named configuration plus its timeline (actions sorted by time)."""

    config: SimConfig
    timeline: tuple = attrs.field(default=(), converter=lambda v: tuple(sorted(v, key=lambda a: a.at_s)))
    name: str = "custom"
    description: str = ""

    def __attrs_post_init__(self):
        """Checks that need the config and the whole timeline: members and topics that actions
        name must exist by then, times within max_duration_s, overrides valid consumer configs.
        (Indexes in messages are positions in the time-sorted timeline.)"""
        cfg = self.config
        topics = {t.name for t in cfg.topics}
        initial, width = member_names(cfg, self.timeline)
        members = set(initial)
        ever = set(initial) | {f"c{i:0{width}d}" for i in range(len(initial), len(initial) + sum(
            a.count for a in self.timeline if isinstance(a, AddMembers)))}
        for where, names in (("member_overrides", cfg.member_overrides),
                             ("network.member_latency", cfg.network.member_latency)):
            for name in names:
                if name not in ever:
                    raise ConfigError(f"{where}.{name}", f"no member is called {name!r} in this scenario "
                                      f"(members: {_span(sorted(ever))})")
        for i, a in enumerate(self.timeline):
            if a.at_s > cfg.max_duration_s:
                raise ConfigError(f"timeline[{i}].at_s", f"{a.at_s:g} is beyond max_duration_s ({cfg.max_duration_s:g})")
            named = ()
            if isinstance(a, Crash | Pause | NetworkPartition) or (isinstance(a, DelaySpike | PacketLoss) and a.member):
                named = (("member", a.member),)
            elif isinstance(a, RemoveMembers | RollingRestart) and a.members is not None:
                named = tuple(("members", name) for name in a.members)
            for field, name in named:
                if name not in members:
                    raise ConfigError(f"timeline[{i}].{field}",
                                      f"{name!r} is not a member at t={a.at_s:g} (members by then: "
                                      f"{_span(sorted(members))})")
            if isinstance(a, AddMembers):
                n = len(members)
                new = [f"c{j:0{width}d}" for j in range(n, n + a.count)]
                for name in new[:1]:  # they all share the overrides
                    try:
                        consumer = cfg.consumer_for(name, a.overrides)
                    except ConfigError as e:
                        raise e.under(f"timeline[{i}].overrides") from None
                    cfg.check_consumer(consumer, f"timeline[{i}].overrides")
                members.update(new)
            if isinstance(a, AddPartitions | DeleteTopic) and a.topic not in topics:
                raise ConfigError(f"timeline[{i}].topic",
                                  f"{a.topic!r} is not a topic at t={a.at_s:g} ({', '.join(sorted(topics)) or 'none'})")
            if isinstance(a, CreateTopic):
                if a.topic in topics:
                    raise ConfigError(f"timeline[{i}].topic", f"{a.topic!r} already exists at t={a.at_s:g}")
                topics.add(a.topic)
            if isinstance(a, DeleteTopic):
                topics.discard(a.topic)
            if isinstance(a, RollingRestart) and a.assignors is not None:
                try:
                    build(type(cfg.consumer), {"partition_assignment_strategy": list(a.assignors)}, "")
                except ConfigError as e:
                    raise ConfigError(f"timeline[{i}].assignors", e.reason) from None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "") -> Scenario:
        if not isinstance(data, Mapping):
            raise ConfigError(where, "expected a table")
        d = dict(data)
        name = d.pop("name", "custom")
        description = d.pop("description", "")
        for key, value in (("name", name), ("description", description)):
            if not isinstance(value, str):
                raise ConfigError(f"{where}.{key}" if where else key, f"{value!r} is not a string")
        timeline = d.pop("timeline", [])
        if not isinstance(timeline, list | tuple):
            raise ConfigError(f"{where}.timeline" if where else "timeline", "expected a list of tables")
        config = sim_config_from_dict(d, where)
        actions = [action_from_dict(a, f"{where + '.' if where else ''}timeline[{i}]")
                   for i, a in enumerate(timeline)]
        return cls(config=config, timeline=actions, name=str(name), description=str(description))

    @classmethod
    def from_toml(cls, path: str) -> Scenario:
        with open(path, "rb") as f:
            try:
                data = tomllib.load(f)
            except tomllib.TOMLDecodeError as e:
                raise ConfigError(str(path), f"not valid TOML: {e}") from None
        try:
            return cls.from_dict(data)
        except ConfigError as e:
            raise ConfigError(f"{path}: {e.field}" if e.field else str(path), e.reason) from None

    def with_config(self, config: SimConfig) -> Scenario:
        return attrs.evolve(self, config=config)

    def end_of_timeline(self) -> float:
        end = 0.0
        for a in self.timeline:
            t = a.at_s
            if isinstance(a, Pause | NetworkPartition | DelaySpike | PacketLoss):
                t += a.duration_s
            if isinstance(a, RollingRestart):
                n = len(a.members) if a.members is not None else self.config.members
                t += n * (a.down_s + a.gap_s)
            end = max(end, t)
        return end


def _span(names: list[str]) -> str:
    if len(names) <= 4:
        return ", ".join(names) or "none"
    return f"{names[0]} .. {names[-1]}"


def member_names(config: SimConfig, timeline) -> tuple[list[str], int]:
    """Names of the initial members and the zero-padded width used for every member name."""
    added = sum(a.count for a in timeline if isinstance(a, AddMembers))
    width = max(3, len(str(config.members + added - 1)))
    return [f"c{i:0{width}d}" for i in range(config.members)], width
