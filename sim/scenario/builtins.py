"""Built-in named scenarios and scenario loading (a name or a TOML file, plus ``key=value``
overrides).

Each built-in has a one-line description and parameters with defaults (members, partitions,
assignor, at_s, ...). An override ``key=value`` sets a parameter of the built-in, or, with a dotted
key, any field of the scenario table (``consumer.session_timeout_ms=10000``,
``group.initial_rebalance_delay_ms=0``, ``network.latency.ms=5``, ``assignor_cost=fixed:2``).
A TOML file is read by ``Scenario.from_toml``, the one loader; ``to_toml`` writes a scenario
table back as a file that loads to the same scenario.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from sim.config import ConfigError
from sim.scenario.actions import batch_count
from sim.scenario.scenario import Scenario, set_field


@attrs.frozen
class Builtin:
    name: str
    description: str
    params: dict[str, Any]
    build: Callable[[dict[str, Any]], dict]


def _base(p: dict, **consumer) -> dict:
    cons = {"partition_assignment_strategy": p["assignor"]}
    cons.update(consumer)
    return {
        "members": p["members"],
        "topics": [{"name": "events", "partitions": p["partitions"], "rate": p["rate"]}],
        "consumer": cons,
    }


def _when(p) -> dict:
    """An action's instant: at_s, jittered per seed over jitter_s."""
    return {"at_s": p["at_s"], "jitter_s": p["jitter_s"]}


def _scale_out(p):
    return {**_base(p), "timeline": [{"action": "add_members", **_when(p), "count": p["count"]}]}


def _scale_in(p):
    return {**_base(p), "timeline": [{"action": "remove_members", **_when(p), "count": p["count"]}]}


def _crash(p):
    return {**_base(p), "timeline": [{"action": "crash", **_when(p), "member": p["member"]}]}


def _restart(p, **extra) -> dict:
    """A rolling_restart action from a built-in's parameters."""
    return {
        "action": "rolling_restart",
        **_when(p),
        "down_s": p["down_s"],
        "gap_s": p["gap_s"],
        "batch_size": p["batch_size"],
        **extra,
    }


def _bounce(static: bool):
    def build(p):
        return {**_base(p, static=static), "timeline": [_restart(p)]}

    return build


def _deploy(p):
    return {**_base(p, static=p["static"]), "timeline": [_restart(p, graceful=p["graceful"])]}


def _gc_pause(p):
    return {
        **_base(p),
        "timeline": [
            {"action": "pause", **_when(p), "member": p["member"], "duration_s": p["duration_s"]}
        ],
    }


def _upgrade(p):
    first = _restart(p, assignors=["range", "cooperative-sticky"])
    # the second bounce starts at least one gap after the first has restarted every member (at
    # the latest instant the first can start, unjittered itself: the gap varies with the first's draw)
    waves = math.ceil(p["members"] / batch_count(p["batch_size"], p["members"]))
    second = _restart(
        {
            **p,
            "at_s": p["at_s"] + p["jitter_s"] + waves * (p["down_s"] + p["gap_s"]) + p["gap_s"],
            "jitter_s": 0.0,
        },
        assignors=["cooperative-sticky"],
    )
    return {**_base(p), "timeline": [first, second]}


def _migration(p):
    """Online migration (KIP-848): the group restarts batch by batch onto ``to``'s group.protocol."""
    to = p["to"]
    if to not in ("consumer", "classic"):
        raise ConfigError("to", f"{to!r} is not one of consumer, classic")
    start = "classic" if to == "consumer" else "consumer"
    return {**_base(p, group_protocol=start), "timeline": [_restart(p, group_protocol=to)]}


def _stream_join(p):
    d = _base(p, assign_cost_ms=p["restore_ms"])
    d["topics"] = [
        {"name": "left", "partitions": p["partitions"], "rate": p["rate"]},
        {"name": "right", "partitions": p["partitions"], "rate": p["rate"]},
    ]
    d["timeline"] = [{"action": "add_members", **_when(p), "count": p["count"]}]
    return d


def _slow_assignor(p):
    return {**_scale_out(p), "assignor_cost": f"fixed:{p['cost_s']}"}


# The largest seed: a run's seed is stored as a 64-bit signed integer (its runs row, a sweep's
# tables).
MAX_SEED = 2**63 - 1

# The fault (or deploy) comes at at_s plus a draw from [0, jitter_s) per seed: 15 s is a whole
# number of classic heartbeat intervals (3 s), consumer-protocol heartbeat intervals (5 s) and
# auto-commit intervals (5 s), so over seeds the fault falls uniformly in each of those cycles.
PARTITIONS_PER_MEMBER = 4  # the default partition count is this many per initial member
_COMMON = {
    "members": 6,
    "partitions": 24,
    "rate": 100.0,
    "assignor": ["cooperative-sticky"],
    "at_s": 60.0,
    "jitter_s": 15.0,
}
# Targets by role or index, never by name, so every built-in holds at any group size (names widen
# past 1000 members). Index 1, the second member by name, is rarely the group's leader.
_TARGET = {"member": 1}
_BOUNCE = {"down_s": 10.0, "gap_s": 20.0, "batch_size": 1}
# Parameters that take a number or a string (a role, a percentage).
_NUMBER_OR_TEXT = ("member", "batch_size")

BUILTINS: dict[str, Builtin] = {
    b.name: b
    for b in [
        Builtin(
            "scale-out", "one member joins a stable group", {**_COMMON, "count": 1}, _scale_out
        ),
        Builtin(
            "scale-in",
            "one member leaves gracefully (LeaveGroup)",
            {**_COMMON, "count": 1},
            _scale_in,
        ),
        Builtin(
            "crash",
            "one member dies without LeaveGroup; noticed after session.timeout.ms "
            "(member: a name, an index, or first / middle / last / leader)",
            {**_COMMON, **_TARGET},
            _crash,
        ),
        Builtin(
            "rolling-bounce-dynamic",
            "every member restarts in turn, dynamic membership",
            {**_COMMON, **_BOUNCE},
            _bounce(False),
        ),
        Builtin(
            "rolling-bounce-static",
            "every member restarts in turn within session.timeout.ms, static membership (KIP-345)",
            {**_COMMON, **_BOUNCE},
            _bounce(True),
        ),
        Builtin(
            "rolling-deploy",
            "a deploy: the whole group restarts in batches (batch_size, default 10% "
            "of the group), graceful or not, dynamic or static; max_duration_s grows with the group",
            {**_COMMON, **_BOUNCE, "batch_size": "10%", "graceful": True, "static": False},
            _deploy,
        ),
        Builtin(
            "gc-pause-zombie",
            "a member pauses past its session timeout and resumes as a zombie (KIP-341)",
            {**_COMMON, "assignor": ["sticky"], **_TARGET, "duration_s": 60.0},
            _gc_pause,
        ),
        Builtin(
            "eager-to-cooperative-upgrade",
            "two rolling bounces: range -> [range, cooperative-sticky] -> cooperative-sticky",
            {**_COMMON, "assignor": ["range"], **_BOUNCE, "down_s": 5.0},
            _upgrade,
        ),
        Builtin(
            "protocol-migration",
            "an online migration: the group restarts in batches (batch_size, default "
            "10%) onto the consumer protocol, or back to the classic one with to=classic; the coordinator "
            "converts the group when the first member of the new protocol joins (KIP-848)",
            {**_COMMON, **_BOUNCE, "batch_size": "10%", "to": "consumer"},
            _migration,
        ),
        Builtin(
            "stream-join-restore",
            "co-partitioned topics with the stream-join sticky assignor (KIP-315); "
            "a new member restores state",
            {**_COMMON, "assignor": ["stream-join-sticky"], "count": 1, "restore_ms": 2000.0},
            _stream_join,
        ),
        Builtin(
            "slow-assignor",
            "scale-out with a leader whose assignment takes cost_s seconds",
            {**_COMMON, "assignor": ["range"], "count": 1, "cost_s": 20.0},
            _slow_assignor,
        ),
    ]
}


def parse_value(text: str) -> Any:
    """``"3"`` -> 3, ``"2.5"`` -> 2.5, ``"true"`` -> True, anything else stays a string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parse_overrides(items: Iterable[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set {item}", "expected key=value")
        key, value = item.split("=", 1)
        key = key.strip()
        if not key:
            raise ConfigError(f"--set {item}", "empty key")
        out[key] = value
    return out


# How a parameter's type is named in an error ("'abc' is not an integer").
_TYPE_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def builtin_dict(name: str, overrides: Mapping[str, str] | None = None) -> dict:
    """The scenario table of built-in ``name`` with ``overrides`` applied."""
    b = BUILTINS[name]
    params = dict(b.params)
    dotted = {}
    for key, raw in (overrides or {}).items():
        if key in params:
            value = parse_value(raw) if isinstance(raw, str) else raw
            if key == "assignor":
                value = (
                    [v.strip() for v in str(raw).split(",") if v.strip()]
                    if isinstance(raw, str)
                    else list(raw)
                )
            elif isinstance(params[key], float) and isinstance(value, int):
                value = float(value)
            elif (
                key in _NUMBER_OR_TEXT
                and isinstance(value, int | str)
                and not isinstance(value, bool)
            ):
                pass  # checked where the scenario is built, with the field's own message
            elif type(params[key]) is not type(value) and not isinstance(params[key], list):
                kind = _TYPE_NAMES.get(type(params[key]), f"a {type(params[key]).__name__}")
                raise ConfigError(
                    key, f"{raw!r} is not {kind} (parameters of {name}: {', '.join(params)})"
                )
            params[key] = value
        elif "." in key or key in (
            "assignor_cost",
            "start_spread_s",
            "elide_heartbeats",
            "max_duration_s",
            "kafka_version",
        ):
            dotted[key] = raw
        else:
            raise ConfigError(
                key,
                f"unknown parameter of {name}; allowed: {', '.join(params)}, "
                "or a dotted field such as consumer.session_timeout_ms",
            )
    members = params.get("members")
    if (
        "partitions" in params
        and "partitions" not in (overrides or {})
        and isinstance(members, int)
        and members > 0
    ):
        # the default grows with the group (24 at the default 6 members), so a large group is
        # not mostly idle members
        params["partitions"] = PARTITIONS_PER_MEMBER * params["members"]
    data = b.build(params)
    data["name"] = name
    data["description"] = b.description
    for key, raw in dotted.items():
        set_field(data, key, parse_value(raw) if isinstance(raw, str) else raw)
    return data


def load_scenario(
    name_or_path: str, overrides: Mapping[str, str] | Iterable[str] | None = None
) -> Scenario:
    """A built-in by name, or a TOML scenario file, with ``key=value`` overrides.

    Errors are ``ConfigError`` naming the file (if any), the field and the allowed values.
    """
    if overrides is None:
        overrides = {}
    elif not isinstance(overrides, Mapping):
        overrides = parse_overrides(overrides)
    if name_or_path in BUILTINS:
        return Scenario.from_dict(builtin_dict(name_or_path, overrides))
    if (
        name_or_path.endswith(".toml")
        or os.path.sep in name_or_path
        or os.path.exists(name_or_path)
    ):
        fields = {}
        for key, raw in overrides.items():
            if key == "assignor":  # as for built-ins (and sweeps' assignors = [...])
                key = "consumer.partition_assignment_strategy"
            fields[key] = parse_value(raw) if isinstance(raw, str) else raw
        return Scenario.from_toml(name_or_path, fields)
    raise ConfigError(
        "scenario",
        f"{name_or_path!r} is neither a TOML file nor a built-in ({', '.join(BUILTINS)})",
    )


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")


def to_toml(data: dict) -> str:
    """A scenario dict (scalars, lists, tables, lists of tables) as TOML text."""
    lines: list[str] = []

    def table(d: dict, prefix: str) -> None:
        scalars = {
            k: v
            for k, v in d.items()
            if not isinstance(v, dict)
            and not (isinstance(v, list) and v and isinstance(v[0], dict))
        }
        for k, v in scalars.items():
            lines.append(f"{k} = {_toml_value(v)}")
        for k, v in d.items():
            name = f"{prefix}.{k}" if prefix else k
            if isinstance(v, dict):
                lines.append(f"\n[{name}]")
                table(v, name)
            elif isinstance(v, list) and v and isinstance(v[0], dict):
                for item in v:
                    lines.append(f"\n[[{name}]]")
                    table(item, name)

    table(data, "")
    return "\n".join(lines) + "\n"
