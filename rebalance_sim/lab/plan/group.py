"""The group file of ``rebalance-sim plan``: the consumer group as it runs today.

A TOML file (``rebalance-sim plan --example`` prints a commented one)::

    name = "orders-consumers"       # a label for the report (default: the file's name)
    members = 800                   # consumers in the group
    broker_version = "4.3"          # the brokers' Kafka version: "4.3" (default) or "4.0"

    [[topics]]                      # every topic the group subscribes to
    name = "orders"
    partitions = 2400
    rate = 100.0                    # records/s produced per partition

    [consumer]                      # what every member runs
    group_protocol = "classic"      # group.protocol: classic | consumer
    partition_assignment_strategy = ["range", "cooperative-sticky"]
    static = false                  # group.instance.id set (KIP-345)
    capacity = 1000.0               # records/s one member processes
    assign_cost_ms = 200.0          # onPartitionsAssigned, per partition
    revoke_cost_ms = 0.0            # onPartitionsRevoked, per partition
    "max.poll.interval.ms" = 300000 # any other client setting, by Kafka's name or ours

    [broker]                        # group coordinator settings that differ from Kafka's defaults
    "group.initial.rebalance.delay.ms" = 3000

    [deploy]                        # how a deploy restarts the group
    batch_size = "10%"              # members restarted at a time (a count or a percentage)
    down_s = 30.0                   # each member is down this long
    gap_s = 20.0                    # between one batch back up and the next stopping
    graceful = true                 # members leave the group when stopped (close())

    [faults]                        # optional: the other faults' parameters
    slow_poll_s = 30.0              # the slow member: one poll batch takes this long
    scale_out = "10%"               # members added by the scale-out

    [plan]                          # optional
    growth = [2, 5]                 # group sizes to try, as multiples of today's

Client settings are the simulator's consumer fields (``sim.config.ConsumerConfig``) under
Kafka's names or ours (``session.timeout.ms`` or ``session_timeout_ms``; a dotted key may be
written bare, TOML then nests it, or quoted); ``group.instance.id``, ``client.rack``,
``enable.auto.commit`` and Kafka's assignor class names are understood too. Broker settings are
the coordinator's ``group.*`` configs (``sim.config.GroupConfig``). Whatever is left out is
Kafka's default; rate, capacity and callback costs, which Kafka does not define, are the
simulator's defaults and the report lists them as assumptions.

Every error is a ``PlanError``: one line naming the file and the field.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

# The brokers' versions a plan knows (Kafka 4.3, the current line, and 4.0).
BROKER_VERSIONS = ("4.3", "4.0")
DEFAULT_BROKER_VERSION = "4.3"
# Growth never goes past this many members (the simulator's largest measured groups).
MAX_PLAN_MEMBERS = 10_000
DEFAULT_GROWTH = (2.0, 5.0)

TOP_KEYS = (
    "name",
    "members",
    "broker_version",
    "topics",
    "consumer",
    "broker",
    "deploy",
    "faults",
    "plan",
)
TOPIC_KEYS = ("name", "partitions", "rate")
DEPLOY_KEYS = ("batch_size", "down_s", "gap_s", "graceful")
FAULT_KEYS = ("slow_poll_s", "scale_out")
PLAN_KEYS = ("growth",)

# Kafka's assignor class names (partition.assignment.strategy, group.consumer.assignors) as the
# simulator names them.
ASSIGNOR_CLASSES = {
    "RangeAssignor": "range",
    "RoundRobinAssignor": "roundrobin",
    "StickyAssignor": "sticky",
    "CooperativeStickyAssignor": "cooperative-sticky",
    "UniformAssignor": "uniform",
}
# Kafka's ConsumerPartitionAssignor.RebalanceProtocol of each classic assignor.
EAGER_ASSIGNORS = ("range", "roundrobin", "sticky")

# What the simulator assumes when the group says nothing (sim.config's defaults), named in the
# report: Kafka defines no production rate, processing capacity or callback cost.
SIM_DEFAULTS = {"rate": 100.0, "capacity": 10000.0, "assign_cost_ms": 0.0, "revoke_cost_ms": 0.0}


class PlanError(ValueError):
    """Input a plan cannot use: one line naming where (file and field) and why."""


@attrs.frozen
class Topic:
    name: str
    partitions: int
    rate: float  # records/s produced per partition


@attrs.frozen
class Deploy:
    """A deploy as a deploy tool runs it (Kafka defines none): every member restarted once,
    ``batch_size`` at a time, each down ``down_s``, ``gap_s`` between batches."""

    batch_size: int | str = "10%"
    down_s: float = 30.0
    gap_s: float = 20.0
    graceful: bool = True


@attrs.frozen
class Faults:
    """The slow member's poll batch (seconds) and how many members the scale-out adds."""

    slow_poll_s: float = 30.0
    scale_out: int | str = "10%"


@attrs.frozen
class Group:
    """What a plan knows about the group: its size, topics, client and broker settings that
    differ from Kafka's defaults (the simulator's field names), the brokers' version, the
    deploy, the faults' parameters and the growth to try. ``assumed`` lists, for the report,
    what was not given and taken from defaults; ``facts`` what a describe output said that the
    simulation does not use (state, lag, hosts)."""

    name: str
    members: int
    topics: tuple[Topic, ...]
    consumer: Mapping[str, Any] = attrs.field(factory=dict)
    broker: Mapping[str, Any] = attrs.field(factory=dict)
    broker_version: str = DEFAULT_BROKER_VERSION
    deploy: Deploy = attrs.field(factory=Deploy)
    faults: Faults = attrs.field(factory=Faults)
    growth: tuple[float, ...] = DEFAULT_GROWTH
    assumed: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    source: str = "<group>"

    @property
    def partitions(self) -> int:
        return sum(t.partitions for t in self.topics)

    @property
    def produce_rate(self) -> float:
        """Records/s the topics produce in all."""
        return sum(t.partitions * t.rate for t in self.topics)

    def consumer_config(self):
        """Today's client settings as the simulator's ``ConsumerConfig`` (Kafka's defaults for
        what the group leaves out)."""
        from sim import ConsumerConfig

        return attrs.evolve(ConsumerConfig(), **dict(self.consumer))

    def broker_config(self):
        from sim import GroupConfig

        return attrs.evolve(GroupConfig(), **dict(self.broker))

    def to_dict(self) -> dict:
        """The group as a group file's table (``to_toml`` writes it back)."""
        data: dict[str, Any] = {
            "name": self.name,
            "members": self.members,
            "broker_version": self.broker_version,
            "topics": [
                {"name": t.name, "partitions": t.partitions, "rate": t.rate} for t in self.topics
            ],
        }
        if self.consumer:
            data["consumer"] = {k: _plain(v) for k, v in self.consumer.items()}
        if self.broker:
            data["broker"] = {k: _plain(v) for k, v in self.broker.items()}
        data["deploy"] = attrs.asdict(self.deploy)
        data["faults"] = attrs.asdict(self.faults)
        data["plan"] = {"growth": [_number(g) for g in self.growth]}
        return data


# The group file's workload fields: not Kafka settings (Kafka knows no rate or capacity).
WORKLOAD = ("capacity", "assign_cost_ms", "revoke_cost_ms")


def settings_changed(group: Group) -> list[str]:
    """The client and broker settings the group sets to other than Kafka's defaults, by Kafka's
    names (``session.timeout.ms = 10000``), the workload fields left out."""
    from sim import ConsumerConfig, GroupConfig

    cons, brok = group.consumer_config(), group.broker_config()
    kafka_cons, kafka_brok = ConsumerConfig(), GroupConfig()
    out = []
    for key, value in group.consumer.items():
        if key in WORKLOAD or getattr(cons, key) == getattr(kafka_cons, key):
            continue
        if key == "static":
            out.append(f"group.instance.id {'set' if value else 'not set'}")
            continue
        name = "client.rack" if key == "rack" else key.replace("_", ".")
        shown = ", ".join(map(str, value)) if isinstance(value, list | tuple) else value
        out.append(f"{name} = {shown}")
    for key, value in group.broker.items():
        if getattr(brok, key) == getattr(kafka_brok, key):
            continue
        shown = ", ".join(map(str, value)) if isinstance(value, list | tuple) else value
        out.append(f"group.{key.replace('_', '.')} = {shown} (broker)")
    return out


def plural(n: int, word: str) -> str:
    """``1 member``, ``800 members``."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def _number(x: float):
    return int(x) if float(x).is_integer() else float(x)


def size_of(group: Group, factor: float) -> tuple[int, dict[str, int]]:
    """Members and partitions per topic at ``factor`` times today's group."""
    members = max(1, round(group.members * factor))
    return members, {t.name: max(1, round(t.partitions * factor)) for t in group.topics}


# Links between members and the coordinator: a lognormal latency, median 2 ms, as in the
# experiments (a model: it is what makes two seeds of one set-up differ).
LATENCY = {"kind": "lognormal", "ms": 2.0}


def scenario_table(
    group: Group,
    consumer: Mapping[str, Any] | None = None,
    broker: Mapping[str, Any] | None = None,
    factor: float = 1.0,
) -> dict:
    """The simulator's scenario table of ``group`` at ``factor`` times its size, its client and
    broker settings changed by ``consumer`` / ``broker``, without a timeline."""
    members, parts = size_of(group, factor)
    cons = {**group.consumer, **(consumer or {})}
    brok = {**group.broker, **(broker or {})}
    data: dict[str, Any] = {
        "name": group.name,
        "members": members,
        "topics": [
            {"name": t.name, "partitions": parts[t.name], "rate": t.rate} for t in group.topics
        ],
        "consumer": {k: _plain(v) for k, v in cons.items()},
        "network": {"latency": dict(LATENCY)},
    }
    if brok:
        data["group"] = {k: _plain(v) for k, v in brok.items()}
    return data


def to_toml(group: Group) -> str:
    """The group as a group file (loads back to the same group, assumptions aside)."""
    from sim.scenario.builtins import to_toml as table_to_toml

    return table_to_toml(group.to_dict())


# ---------------------------------------------------------------------------------------------
# Reading


def load_group(path: str | os.PathLike) -> Group:
    """Parse and check a group file; raises ``PlanError`` naming the file and the field."""
    where = str(path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise PlanError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise PlanError(f"{where}: is a directory, expected a group TOML file") from None
    except UnicodeDecodeError as e:
        raise PlanError(f"{where}: not a text file (byte {e.start}: not UTF-8)") from None
    except tomllib.TOMLDecodeError as e:
        raise PlanError(f"{where}: not valid TOML: {' '.join(str(e).split())}") from None
    except OSError as e:
        raise PlanError(f"{where}: cannot read: {e.strerror or e}") from None
    return group_from_dict(data, where, default_name=Path(where).stem)


def flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML's bare dotted keys arrive as nested tables: ``session.timeout.ms = x`` ->
    ``{"session.timeout.ms": x}``."""
    out: dict[str, Any] = {}
    for k, v in table.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


def _field(key: str) -> str:
    return key.replace(".", "_").replace("-", "_")


def _assignor_name(value: str) -> str:
    """``org.apache.kafka.clients.consumer.CooperativeStickyAssignor`` -> ``cooperative-sticky``
    (other names unchanged: the simulator checks them)."""
    short = value.strip().rsplit(".", 1)[-1]
    return ASSIGNOR_CLASSES.get(short, value.strip())


def _names(value) -> Any:
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    if isinstance(value, list | tuple):
        return [_assignor_name(v) if isinstance(v, str) else v for v in value]
    return value


def consumer_fields(table: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The ``[consumer]`` table as the simulator's consumer fields (Kafka's names understood)."""
    out: dict[str, Any] = {}
    for key, value in flatten(table).items():
        at = f"{where}.{key}"
        if key == "group.instance.id":
            if not isinstance(value, str):
                raise PlanError(f"{at}: {value!r} is not a string")
            out["static"] = bool(value)
        elif key == "enable.auto.commit":
            if value is True:
                out["commit_mode"] = "auto"
            elif value is False:
                raise PlanError(
                    f"{at}: false: say how the application commits instead: "
                    'commit_mode = "sync-per-batch" or "async-per-batch"'
                )
            else:
                raise PlanError(f"{at}: {value!r} is not true or false")
        elif key == "client.rack":
            out["rack"] = value
        elif _field(key) == "partition_assignment_strategy":
            out["partition_assignment_strategy"] = _names(value)
        elif _field(key) in ("group_protocol", "group_remote_assignor"):
            out[_field(key)] = _assignor_name(value).lower() if isinstance(value, str) else value
        else:
            out[_field(key)] = value
    return out


def broker_fields(table: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The ``[broker]`` table as the coordinator's fields: Kafka's ``group.*`` names lose their
    prefix (``group.consumer.session.timeout.ms`` -> ``consumer_session_timeout_ms``)."""
    out: dict[str, Any] = {}
    for key, value in flatten(table).items():
        name = key.removeprefix("group.")
        field = _field(name)
        if field == "consumer_assignors":
            value = _names(value)
        out[field] = value
    return out


def _check_keys(
    table: Any, allowed: tuple[str, ...], where: str, field: str = ""
) -> Mapping[str, Any]:
    """``table`` if it is a table of ``allowed`` keys; ``where``: the file, ``field``: the
    table's own name in it."""
    if not isinstance(table, Mapping):
        raise PlanError(f"{where}: {field or 'the file'}: expected a table, got {table!r}")
    for k in table:
        if k not in allowed:
            raise PlanError(
                f"{where}: {field + '.' if field else ''}{k}: unknown key; allowed: {', '.join(allowed)}"
            )
    return table


def _table(table: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(table, Mapping):
        raise PlanError(f"{where}: expected a table of settings, got {table!r}")
    return table


def _count_or_percent(value, at: str) -> int | str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if isinstance(value, str) and value.endswith("%"):
        try:
            pct = float(value[:-1])
        except ValueError:
            pct = math.nan
        if 0 < pct <= 100:
            return value
    raise PlanError(
        f'{at}: {value!r} is not a number of members >= 1 or a percentage such as "10%"'
    )


def _seconds(value, at: str, positive: bool = False) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
        or (positive and value == 0)
    ):
        raise PlanError(
            f"{at}: {value!r} is not a number of seconds {'> 0' if positive else '>= 0'}"
        )
    return float(value)


def group_from_dict(
    data: Mapping[str, Any],
    where: str = "<group>",
    default_name: str = "group",
    assumed: tuple[str, ...] = (),
    facts: tuple[str, ...] = (),
) -> Group:
    """A checked ``Group`` from a group file's table (see the module docstring)."""
    _check_keys(data, TOP_KEYS, where)

    def fail(field: str, reason: str) -> PlanError:
        return PlanError(f"{where}: {field}: {reason}")

    name = data.get("name", default_name)
    if not isinstance(name, str) or not name.strip():
        raise fail("name", f"{name!r} is not a non-empty string")
    members = data.get("members")
    if members is None:
        raise fail("members", "missing: how many consumers the group has")
    if isinstance(members, bool) or not isinstance(members, int) or members < 1:
        raise fail("members", f"{members!r} is not a number of members >= 1")
    if members > MAX_PLAN_MEMBERS:
        raise fail(
            "members", f"{members:,} is above the {MAX_PLAN_MEMBERS:,} members a plan simulates"
        )
    version = data.get("broker_version", DEFAULT_BROKER_VERSION)
    if isinstance(version, float):
        version = f"{version:.1f}"
    if version not in BROKER_VERSIONS:
        raise fail("broker_version", f"{version!r} is not one of {', '.join(BROKER_VERSIONS)}")

    raw_topics = data.get("topics")
    if not raw_topics:
        raise fail("topics", "missing: give at least one [[topics]] table (name, partitions, rate)")
    if not isinstance(raw_topics, list):
        raise fail("topics", "expected [[topics]] tables")
    topics = []
    rate_given = True
    for i, t in enumerate(raw_topics):
        at = f"topics[{i}]"
        t = _check_keys(t, TOPIC_KEYS, where, at)
        tname = t.get("name")
        if not isinstance(tname, str) or not tname:
            raise fail(f"{at}.name", f"{tname!r} is not a topic name")
        parts = t.get("partitions")
        if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
            raise fail(f"{at}.partitions", f"{parts!r} is not a number of partitions >= 1")
        rate_given = rate_given and "rate" in t
        rate = t.get("rate", SIM_DEFAULTS["rate"])
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not rate >= 0:
            raise fail(f"{at}.rate", f"{rate!r} is not a rate >= 0 (records/s per partition)")
        topics.append(Topic(tname, parts, float(rate)))
    if len({t.name for t in topics}) != len(topics):
        raise fail("topics", "a topic is named twice")

    consumer = consumer_fields(_table(data.get("consumer", {}), f"{where}: consumer"), "consumer")
    broker = broker_fields(_table(data.get("broker", {}), f"{where}: broker"), "broker")
    dep = _check_keys(data.get("deploy", {}), DEPLOY_KEYS, where, "deploy")
    default_deploy, default_faults = Deploy(), Faults()
    deploy = Deploy(
        batch_size=_count_or_percent(
            dep.get("batch_size", default_deploy.batch_size), f"{where}: deploy.batch_size"
        ),
        down_s=_seconds(dep.get("down_s", default_deploy.down_s), f"{where}: deploy.down_s"),
        gap_s=_seconds(dep.get("gap_s", default_deploy.gap_s), f"{where}: deploy.gap_s"),
        graceful=dep.get("graceful", default_deploy.graceful),
    )
    if not isinstance(deploy.graceful, bool):
        raise fail("deploy.graceful", f"{deploy.graceful!r} is not true or false")
    flt = _check_keys(data.get("faults", {}), FAULT_KEYS, where, "faults")
    faults = Faults(
        slow_poll_s=_seconds(
            flt.get("slow_poll_s", default_faults.slow_poll_s),
            f"{where}: faults.slow_poll_s",
            positive=True,
        ),
        scale_out=_count_or_percent(
            flt.get("scale_out", default_faults.scale_out), f"{where}: faults.scale_out"
        ),
    )
    plan = _check_keys(data.get("plan", {}), PLAN_KEYS, where, "plan")
    growth = plan.get("growth", list(DEFAULT_GROWTH))
    if not isinstance(growth, list) or not all(
        isinstance(g, int | float) and not isinstance(g, bool) and g > 1 for g in growth
    ):
        raise fail(
            "plan.growth", f"{growth!r} is not a list of factors > 1 (2 = twice today's group)"
        )

    missing = tuple(
        text
        for text, given in (
            (f"production: {SIM_DEFAULTS['rate']:g} records/s per partition", rate_given),
            (
                f"capacity: {SIM_DEFAULTS['capacity']:,.0f} records/s per member",
                "capacity" in consumer,
            ),
            (
                "onPartitionsAssigned: no work (Kafka's default listener)",
                "assign_cost_ms" in consumer,
            ),
            (
                "onPartitionsRevoked: no work (Kafka's default listener)",
                "revoke_cost_ms" in consumer,
            ),
        )
        if not given
    )
    group = Group(
        name=name.strip(),
        members=members,
        topics=tuple(topics),
        consumer=consumer,
        broker=broker,
        broker_version=version,
        deploy=deploy,
        faults=faults,
        growth=tuple(sorted({float(g) for g in growth})),
        assumed=tuple(assumed) + missing,
        facts=tuple(facts),
        source=where,
    )
    check(group)
    return group


def check(group: Group) -> None:
    """What a group must satisfy to be planned: settings the simulator accepts (checked by
    building today's scenario), and a group that can keep up with its topics."""
    from sim import ConfigError, Scenario

    where = group.source
    try:
        Scenario.from_dict(scenario_table(group))
    except ConfigError as e:
        field = e.field
        if field.startswith("group."):
            field = "broker." + field.removeprefix("group.")
        raise PlanError(
            f"{where}: {field}: {e.reason}" if field else f"{where}: {e.reason}"
        ) from None
    cfg = group.consumer_config()
    capacity = cfg.capacity * group.members
    produced = group.produce_rate
    if capacity <= produced:
        raise PlanError(
            f"{where}: consumer.capacity: the group can never catch up: {plural(group.members, 'member')} x "
            f"{cfg.capacity:,g} records/s = {capacity:,.0f} records/s, and the topics produce "
            f"{produced:,.0f} records/s"
        )
    # range and uniform give a member at most ceil(P / N) partitions of each topic
    busiest = sum(math.ceil(t.partitions / group.members) * t.rate for t in group.topics)
    if busiest >= cfg.capacity:
        raise PlanError(
            f"{where}: consumer.capacity: a member with its share of partitions can never catch up: "
            f"it is produced {busiest:,.0f} records/s and processes {cfg.capacity:,g}"
        )
    if group.faults.slow_poll_s <= cfg.poll_batch_s:
        raise PlanError(
            f"{where}: faults.slow_poll_s: {group.faults.slow_poll_s:g} s is not slower than a "
            f"member's poll batch at its capacity ({cfg.max_poll_records} records at "
            f"{cfg.capacity:,g}/s: {cfg.poll_batch_s:g} s)"
        )
    if group.faults.slow_poll_s >= cfg.max_poll_interval_s:
        raise PlanError(
            f"{where}: faults.slow_poll_s: {group.faults.slow_poll_s:g} s is not below "
            f"max.poll.interval.ms ({cfg.max_poll_interval_ms:g} ms): every poll of the slow "
            "member would time out"
        )
