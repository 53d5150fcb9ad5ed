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

Actions (``action`` = ...): add_members, remove_members, crash, pause, rolling_restart,
add_partitions, create_topic, delete_topic, network_partition, delay_spike.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from typing import Any

import attrs

from .config import ConfigError, SimConfig, _key, build, sim_config_from_dict
from .network import DIRECTIONS


def _at(_inst, attribute, value):
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(attribute.name, f"{value!r} is not a time >= 0 (seconds)")


def _nonneg(_inst, attribute, value):
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(attribute.name, f"{value!r} must be a number >= 0")


def _names(value):
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    return tuple(value)


@attrs.frozen
class AddMembers:
    """Start ``count`` new members (named after the existing ones), with consumer ``overrides``."""

    at_s: float = attrs.field(validator=_at)
    count: int = attrs.field(default=1, validator=_nonneg)
    overrides: dict = attrs.field(factory=dict)


@attrs.frozen
class RemoveMembers:
    """Close ``members`` gracefully (or the ``count`` highest-named live members)."""

    at_s: float = attrs.field(validator=_at)
    members: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    count: int = attrs.field(default=1, validator=_nonneg)


@attrs.frozen
class Crash:
    """Kill ``member`` (no LeaveGroup, no callbacks)."""

    at_s: float = attrs.field(validator=_at)
    member: str = "c000"


@attrs.frozen
class Pause:
    """Freeze ``member`` for ``duration_s`` (GC or debugger), then let it resume with stale state."""

    at_s: float = attrs.field(validator=_at)
    member: str = "c000"
    duration_s: float = attrs.field(default=60.0, validator=_nonneg)


@attrs.frozen
class RollingRestart:
    """Restart ``members`` (default: every live member, by name) one at a time: member i stops at
    ``at_s + i * (down_s + gap_s)`` (gracefully, or crashing if ``graceful`` is false) and starts
    ``down_s`` later, with ``assignors`` as its new partition.assignment.strategy if given (the
    two-bounce upgrade) and ``static`` switched if given."""

    at_s: float = attrs.field(validator=_at)
    members: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    down_s: float = attrs.field(default=5.0, validator=_nonneg)
    gap_s: float = attrs.field(default=30.0, validator=_nonneg)
    graceful: bool = True
    assignors: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    static: bool | None = None


@attrs.frozen
class AddPartitions:
    """Grow ``topic`` by ``count`` partitions (the leader notices at its next metadata refresh)."""

    at_s: float = attrs.field(validator=_at)
    topic: str = ""
    count: int = attrs.field(default=1, validator=_nonneg)


@attrs.frozen
class CreateTopic:
    at_s: float = attrs.field(validator=_at)
    topic: str = ""
    partitions: int = attrs.field(default=1, validator=_nonneg)
    rate: float = attrs.field(default=100.0, validator=_nonneg)


@attrs.frozen
class DeleteTopic:
    at_s: float = attrs.field(validator=_at)
    topic: str = ""


@attrs.frozen
class NetworkPartition:
    """Cut the link between ``member`` and the coordinator for ``duration_s`` in ``direction``
    (to_coordinator, from_coordinator or both)."""

    at_s: float = attrs.field(validator=_at)
    member: str = "c000"
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
    member: str | None = None


ACTIONS: dict[str, type] = {
    "add_members": AddMembers,
    "remove_members": RemoveMembers,
    "crash": Crash,
    "pause": Pause,
    "rolling_restart": RollingRestart,
    "add_partitions": AddPartitions,
    "create_topic": CreateTopic,
    "delete_topic": DeleteTopic,
    "network_partition": NetworkPartition,
    "delay_spike": DelaySpike,
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
        topics = {t.name for t in self.config.topics}
        for i, a in enumerate(self.timeline):
            if isinstance(a, AddPartitions | DeleteTopic) and a.topic not in topics:
                created = {b.topic for b in self.timeline if isinstance(b, CreateTopic) and b.at_s <= a.at_s}
                if a.topic not in created:
                    raise ConfigError(f"timeline[{i}].topic",
                                      f"{a.topic!r} is not a topic ({', '.join(sorted(topics))})")
            if isinstance(a, RollingRestart) and a.assignors is not None:
                try:
                    build(type(self.config.consumer), {"partition_assignment_strategy": list(a.assignors)}, "")
                except ConfigError as e:
                    raise ConfigError(f"timeline[{i}].assignors", e.reason) from None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "") -> Scenario:
        if not isinstance(data, Mapping):
            raise ConfigError(where, "expected a table")
        d = dict(data)
        name = d.pop("name", "custom")
        description = d.pop("description", "")
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
            if isinstance(a, Pause | NetworkPartition | DelaySpike):
                t += a.duration_s
            if isinstance(a, RollingRestart):
                n = len(a.members) if a.members is not None else self.config.members
                t += n * (a.down_s + a.gap_s)
            end = max(end, t)
        return end


def member_names(config: SimConfig, timeline) -> tuple[list[str], int]:
    """Names of the initial members and the zero-padded width used for every member name."""
    added = sum(a.count for a in timeline if isinstance(a, AddMembers))
    width = max(3, len(str(config.members + added - 1)))
    return [f"c{i:0{width}d}" for i in range(config.members)], width
