"""The timeline's actions: one frozen class per action (``add_members``, ``crash``,
``rolling_restart``, ``network_partition``, ...), the validators of their fields, and their
conversions from and to a scenario table (``action_from_dict``, ``action_to_dict``).

What each action does in a run is the director's (``sim.world.actors.Director``); the scenario
(``sim.scenario.scenario.Scenario``) checks a timeline against its configuration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

from sim.config import (
    GROUP_PROTOCOLS,
    MAX_MEMBERS,
    MAX_PARTITIONS_PER_TOPIC,
    ConfigError,
    boolean,
    build,
    field_key,
    names_tuple,
)
from sim.wire.faults import DIRECTIONS


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


@attrs.frozen
class AddMembers:
    """Start ``count`` new members (named after the existing ones), with consumer ``overrides``."""

    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    count: int = attrs.field(default=1, validator=_count(MAX_MEMBERS))
    overrides: dict = attrs.field(factory=dict, validator=_table)


@attrs.frozen
class RemoveMembers:
    """Close ``members`` gracefully (or the ``count`` highest-named live members)."""

    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    members: tuple[str | int, ...] | None = attrs.field(default=None, converter=_targets("members"))  # type: ignore[misc]  # (attrs plugin: named converters only)
    count: int = attrs.field(default=1, validator=_count(MAX_MEMBERS))


@attrs.frozen
class Crash:
    """Kill ``member`` (no LeaveGroup, no callbacks)."""

    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    member: str | int = attrs.field(default=0, validator=_member)


LEADER_PHASES = ("join", "sync", "stable")


@attrs.frozen
class CrashLeader:
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


@attrs.frozen
class Pause:
    """Freeze ``member`` for ``duration_s`` (GC or debugger), then let it resume with stale state."""

    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    member: str | int = attrs.field(default=0, validator=_member)
    duration_s: float = attrs.field(default=60.0, validator=_nonneg)


@attrs.frozen
class RollingRestart:
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


@attrs.frozen
class AddPartitions:
    """Grow ``topic`` by ``count`` partitions (the leader notices at its next metadata refresh)."""

    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    topic: str = attrs.field(default="", validator=_topic)
    count: int = attrs.field(default=1, validator=_count(MAX_PARTITIONS_PER_TOPIC))


@attrs.frozen
class CreateTopic:
    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    topic: str = attrs.field(default="", validator=_topic)
    partitions: int = attrs.field(default=1, validator=_count(MAX_PARTITIONS_PER_TOPIC))
    rate: float = attrs.field(default=100.0, validator=_nonneg)


@attrs.frozen
class DeleteTopic:
    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    topic: str = attrs.field(default="", validator=_topic)


@attrs.frozen
class NetworkPartition:
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


@attrs.frozen
class DelaySpike:
    """Add ``extra_ms`` to every message of ``member`` (None: every member) for ``duration_s``."""

    at_s: float = attrs.field(validator=_at)
    jitter_s: float = attrs.field(default=0.0, validator=_nonneg, kw_only=True)
    duration_s: float = attrs.field(default=10.0, validator=_nonneg)
    extra_ms: float = attrs.field(default=1000.0, validator=_nonneg)
    member: str | None = attrs.field(default=None, validator=attrs.validators.optional(_member))


@attrs.frozen
class PacketLoss:
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
    if "at_s" not in {field_key(k) for k in rest}:
        raise ConfigError(f"{where}.at_s", "missing (seconds of simulated time)")
    return build(ACTIONS[kind], rest, where)


# Fields added later are left out at their default, so existing scenarios keep their run ids
# (a digest of this dict) and their recorded trigger details.
_OMIT_AT_DEFAULT = {"batch_size": 1, "jitter_s": 0.0}


def action_to_dict(action) -> dict:
    d: dict[str, Any] = {"action": ACTION_NAMES[type(action)]}
    for a in attrs.fields(type(action)):
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
