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

Every action takes ``jitter_s`` (default 0): each seed plays it at ``at_s`` plus an instant drawn
uniformly from ``[0, jitter_s)``, because a real fault or deploy does not fall at one chosen
millisecond of the group's heartbeat, auto-commit and poll cycles (``Scenario.timeline_for_seed``).
The draws come from their own seeded stream, one per action in timeline order. Roles and indexes
are resolved in the order of ``at_s``.

Member targets (``member``, and the entries of ``members``) are a name (``"c007"``), a role, or an
index, so one scenario holds at every group size (names widen with the group: ``c0007`` past 1000
members). Roles and indexes are resolved against the members in the group by then, by name (the
initial members, plus those added, minus those removed or crashed by earlier actions):
``"first"``, ``"middle"`` (index n // 2), ``"last"``, or an integer (``1`` is the second member,
``-1`` the last). ``"leader"`` (``crash`` and ``pause`` only) is whichever client leads the group
at that instant, resolved during the run. These roles are the simulator's, not Kafka's.

A timeline must fit in ``max_duration_s``: a scenario whose last step (plus the session timeout,
to detect a crash after it) ends later is rejected before the run, naming the time it needs. When
``max_duration_s`` is not given it grows with the timeline (see ``Scenario.from_dict``).
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from sim.config import ConfigError, SimConfig, field_key, sim_config_from_dict
from sim.scenario.actions import (
    ACTION_NAMES,
    Action,
    TimelineContext,
    action_from_dict,
    name_span,
)

# The seed-sequence spawn key of the timeline's jitter draws: apart from every actor's stream
# (the kernel's keys are (rank,) and (rank, stream), ranks counting actors from 0).
JITTER_STREAM = 0xFFFF_FFFF
_UNBOUNDED_S = 1e15  # a max_duration_s no timeline reaches (to find the duration one needs)


@attrs.frozen
class Scenario:
    """A named configuration plus its timeline (actions sorted by time).

    ``resolved_timeline`` is the timeline with member roles and indexes replaced by names
    (``"leader"`` stays: it is resolved during the run); the simulator plays that one.
    """

    config: SimConfig
    timeline: tuple[Action, ...] = attrs.field(
        default=(), converter=lambda v: tuple(sorted(v, key=lambda a: a.at_s))
    )
    name: str = "custom"
    description: str = ""
    resolved_timeline: tuple[Action, ...] = attrs.field(
        init=False, default=(), eq=False, repr=False
    )
    _ends: tuple = attrs.field(init=False, default=(), eq=False, repr=False)

    def __attrs_post_init__(self):
        """Checks that need the config and the whole timeline: members and topics that actions
        name must exist by then, the group must not start empty, the timeline must fit in
        max_duration_s, overrides must be valid consumer configs.
        (Indexes in messages are positions in the time-sorted timeline.)"""
        cfg = self.config
        if cfg.members == 0 and not any(a.members_added() for a in self.timeline):
            raise ConfigError(
                "members",
                "0: the group needs at least 1 member (or an add_members action that starts some)",
            )
        initial, width = member_names(cfg, self.timeline)
        ever = set(initial) | {
            f"c{i:0{width}d}"
            for i in range(
                len(initial),
                len(initial) + sum(a.members_added() for a in self.timeline),
            )
        }
        for where, names in (
            ("member_overrides", cfg.member_overrides),
            ("network.member_latency", cfg.network.member_latency),
        ):
            for name in names:
                if name not in ever:
                    raise ConfigError(
                        f"{where}.{name}",
                        f"no member is called {name!r} in this scenario "
                        f"(members: {name_span(sorted(ever))})",
                    )
        ctx = TimelineContext(cfg, initial, width)
        resolved = []
        ends = []
        for i, a in enumerate(self.timeline):
            if a.at_s + a.jitter_s > cfg.max_duration_s:
                raise ConfigError(
                    f"timeline[{i}].at_s",
                    f"{a.at_s:g}{f' + {a.jitter_s:g} (jitter_s)' if a.jitter_s else ''}"
                    f" is beyond max_duration_s ({cfg.max_duration_s:g})",
                )
            a = a.validate(ctx, f"timeline[{i}]")
            ends.append(a.latest_end(ctx))
            resolved.append(a)
        object.__setattr__(self, "resolved_timeline", tuple(resolved))
        object.__setattr__(self, "_ends", tuple(ends))
        needed = self.needed_duration_s()
        if needed > cfg.max_duration_s:
            last = max(range(len(ends)), key=lambda j: ends[j])
            raise ConfigError(
                "max_duration_s",
                f"{cfg.max_duration_s:g} s is too short for this timeline: it "
                f"needs {needed:,.0f} s (timeline[{last}] {ACTION_NAMES[type(self.timeline[last])]} "
                f"ends at t={ends[last]:,.1f} s, plus session.timeout.ms to settle); set "
                f"max_duration_s >= {math.ceil(needed)} or leave it out (it then grows with the "
                "timeline)",
            )

    def end_of_timeline(self) -> float:
        """When the last action's last step happens (a rolling restart's last start, a pause's end)."""
        return max(self._ends, default=0.0)

    def needed_duration_s(self) -> float:
        """The simulated time this timeline needs at least: its end plus the longest session
        timeout (a crash or a lost member at the end is only noticed that much later)."""
        if not self._ends:
            return 0.0
        cfg = self.config
        if not self.uses_protocol("classic"):
            # KIP-848: the broker's group.consumer.session.timeout.ms fences members; the
            # client's session.timeout.ms is not used
            session_s = cfg.group.consumer_session_timeout_s
        else:
            session_s = max(
                [cfg.consumer.session_timeout_s]
                + [cfg.consumer_for(n).session_timeout_s for n in cfg.member_overrides]
            )
            if self.uses_protocol("consumer"):
                session_s = max(session_s, cfg.group.consumer_session_timeout_s)
        return self.end_of_timeline() + session_s

    def uses_protocol(self, protocol: str) -> bool:
        """Whether some member runs ``group.protocol`` = ``protocol`` at some point (the base
        consumer config, a member override, or a rolling restart onto it)."""
        cfg = self.config
        return (
            cfg.consumer.group_protocol == protocol
            or any(cfg.consumer_for(n).group_protocol == protocol for n in cfg.member_overrides)
            or any(a.protocol_after() == protocol for a in self.timeline)
        )

    def timeline_for_seed(self, seed: int) -> tuple:
        """The resolved timeline as seed ``seed`` plays it: each action at ``at_s`` plus a draw
        from ``[0, jitter_s)``, sorted by the instants drawn (ties keep timeline order)."""
        timeline = self.resolved_timeline
        if not any(a.jitter_s for a in timeline):
            return timeline
        rng = np.random.Generator(
            np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(JITTER_STREAM,)))
        )
        draws = rng.random(len(timeline))
        moved = [
            a.moved(a.at_s + float(u) * a.jitter_s) if a.jitter_s else a
            for a, u in zip(timeline, draws, strict=True)
        ]
        return tuple(sorted(moved, key=lambda a: a.at_s))

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
            raise ConfigError(
                f"{where}.timeline" if where else "timeline", "expected a list of tables"
            )
        config = sim_config_from_dict(d, where)
        actions = [
            action_from_dict(a, f"{where + '.' if where else ''}timeline[{i}]")
            for i, a in enumerate(timeline)
        ]
        if "max_duration_s" in {field_key(k) for k in d}:
            return cls(
                config=config, timeline=actions, name=str(name), description=str(description)
            )
        # Not given: the default (SimConfig's), or longer if the timeline needs it, with room for
        # one more rebalance after it (the rebalance timeout, max.poll.interval.ms).
        free = cls(
            config=attrs.evolve(config, max_duration_s=_UNBOUNDED_S),
            timeline=actions,
            name=str(name),
            description=str(description),
        )
        needed = free.needed_duration_s()
        if needed + config.consumer.max_poll_interval_s <= config.max_duration_s:
            return attrs.evolve(free, config=config)
        grown = float(math.ceil(needed + config.consumer.max_poll_interval_s))
        return attrs.evolve(free, config=attrs.evolve(config, max_duration_s=grown))

    @classmethod
    def from_toml(cls, path: str, fields: Mapping[str, Any] | None = None) -> Scenario:
        """The scenario of a TOML file, with ``fields`` (dotted keys, see ``set_field``) set
        first; its name defaults to the file's. Errors are ``ConfigError`` naming the file and
        the field."""
        path = str(path)
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except FileNotFoundError:
            raise ConfigError(path, "no such scenario file") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(path, f"not valid TOML: {' '.join(str(e).split())}") from None
        except OSError as e:
            raise ConfigError(path, f"cannot read: {e.strerror or e}") from None
        data.setdefault("name", os.path.splitext(os.path.basename(path))[0])
        try:
            for key, value in (fields or {}).items():
                set_field(data, key, value)
            return cls.from_dict(data)
        except ConfigError as e:
            raise ConfigError(f"{path}: {e.field}" if e.field else path, e.reason) from None

    def with_config(self, config: SimConfig) -> Scenario:
        return attrs.evolve(self, config=config)


def member_names(config: SimConfig, timeline) -> tuple[list[str], int]:
    """Names of the initial members and the zero-padded width used for every member name."""
    added = sum(a.members_added() for a in timeline)
    width = max(3, len(str(config.members + added - 1)))
    return [f"c{i:0{width}d}" for i in range(config.members)], width


def set_field(data: dict, key: str, value: Any) -> None:
    """Set the dotted ``key`` of a scenario table: tables by name, arrays of tables by index
    (``timeline.0.at_s``, ``topics.1.partitions``; negative indexes count from the end)."""
    parts = key.split(".")
    cur: Any = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(cur, list):
            where = ".".join(parts[:i])
            try:
                index = int(part)
                cur[index]  # the bounds check
            except (ValueError, IndexError):
                raise ConfigError(
                    key,
                    f"{part!r} is not an index of {where} (it has {len(cur)} "
                    f"entr{'y' if len(cur) == 1 else 'ies'}: 0 to {len(cur) - 1})",
                ) from None
            if last:
                cur[index] = value
                return
            if not isinstance(cur[index], dict):
                raise ConfigError(key, f"{where}.{part} is not a table")
            cur = cur[index]
            continue
        if last:
            break
        nxt = cur.get(part)
        if nxt is None:
            nxt = cur[part] = {}
        if not isinstance(nxt, dict | list):
            raise ConfigError(key, f"{part!r} is not a table")
        cur = nxt
    name = parts[-1]
    if name in ("partition_assignment_strategy", "partition.assignment.strategy") and isinstance(
        value, str
    ):
        value = [v.strip() for v in value.split(",") if v.strip()]
    cur[name] = value
