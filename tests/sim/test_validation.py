"""Scenario and config validation at the edge: every bad input is a one-line ConfigError that
names the field (issue 5)."""

from __future__ import annotations

import pytest

from sim import ConfigError, Scenario


def _base(**top):
    return {"members": 3, "topics": [{"name": "t", "partitions": 4}], **top}


def _timeline(*actions, **top):
    return _base(timeline=list(actions), **top)


CASES = [
    # unknown keys
    ("unknown top-level key", _base(colour="blue"), "colour", "unknown key"),
    (
        "unknown consumer key",
        _base(consumer={"sesion_timeout_ms": 1}),
        "consumer.sesion_timeout_ms",
        "unknown key",
    ),
    (
        "unknown action key",
        _timeline({"action": "crash", "at_s": 1, "who": "c000"}),
        "timeline[0].who",
        "unknown key",
    ),
    (
        "unknown action",
        _timeline({"action": "explode", "at_s": 1}),
        "timeline[0].action",
        "not one of",
    ),
    # wrong types
    ("members not a number", _base(members="3"), "members", "not a number"),
    (
        "strategy not a list",
        _base(consumer={"partition_assignment_strategy": 5}),
        "consumer.partition_assignment_strategy",
        "not a list",
    ),
    ("rack not a string", _base(consumer={"rack": 5}), "consumer.rack", "not a string"),
    ("elide not a bool", _base(elide_heartbeats="yes"), "elide_heartbeats", "true or false"),
    (
        "override not a table",
        _base(member_overrides={"c000": 5}),
        "member_overrides.c000",
        "expected a table",
    ),
    (
        "count not an integer",
        _timeline({"action": "add_members", "at_s": 1, "count": 1.5}),
        "timeline[0].count",
        "integer",
    ),
    (
        "graceful not a bool",
        _timeline({"action": "rolling_restart", "at_s": 1, "graceful": "no"}),
        "timeline[0].graceful",
        "true or false",
    ),
    (
        "members not names",
        _timeline({"action": "rolling_restart", "at_s": 1, "members": [1.5]}),
        "timeline[0].members",
        "not a member name",
    ),
    (
        "member index out of range",
        _timeline({"action": "rolling_restart", "at_s": 1, "members": 5}),
        "timeline[0].members",
        "not a member index",
    ),
    ("name not a string", _base(name=[1]), "name", "not a string"),
    # negative or impossible values
    (
        "negative partitions",
        {"topics": [{"name": "t", "partitions": -1}]},
        "topics[0].partitions",
        ">= 0",
    ),
    ("zero capacity", _base(consumer={"capacity": 0}), "consumer.capacity", "> 0"),
    (
        "negative pause",
        _timeline({"action": "pause", "at_s": 1, "duration_s": -1}),
        "timeline[0].duration_s",
        ">= 0",
    ),
    (
        "nan time",
        _timeline({"action": "crash", "at_s": float("nan")}),
        "timeline[0].at_s",
        "time >= 0",
    ),
    (
        "drop everything",
        _base(network={"drop_probability": 1.0}),
        "network.drop_probability",
        "below 1",
    ),
    ("absurd group size", _base(members=10**12), "members", "limit"),
    (
        "batch longer than max.poll.interval",
        _base(consumer={"capacity": 1, "max_poll_records": 500}),
        "consumer.max_poll_records",
        "max_poll_interval_ms",
    ),
    (
        "zero max.poll.records",
        _base(consumer={"max_poll_records": 0}),
        "consumer.max_poll_records",
        ">= 1",
    ),
    # Kafka's own limits
    (
        "session below broker minimum",
        _base(consumer={"session_timeout_ms": 1000, "heartbeat_interval_ms": 500}),
        "consumer.session_timeout_ms",
        "group.min.session.timeout.ms",
    ),
    (
        "session above broker maximum",
        _base(consumer={"session_timeout_ms": 2_000_000}),
        "consumer.session_timeout_ms",
        "group.max.session.timeout.ms",
    ),
    (
        "override session out of bounds",
        _base(member_overrides={"c001": {"session_timeout_ms": 1_000_000_000}}),
        "member_overrides.c001.session_timeout_ms",
        "group.max.session.timeout.ms",
    ),
    (
        "heartbeat not below session",
        _base(consumer={"heartbeat_interval_ms": 45000}),
        "consumer.heartbeat_interval_ms",
        "below session_timeout_ms",
    ),
    (
        "new members' heartbeat not below session",
        _timeline(
            {"action": "add_members", "at_s": 1, "overrides": {"heartbeat_interval_ms": 50000}}
        ),
        "timeline[0].overrides.heartbeat_interval_ms",
        "below session_timeout_ms",
    ),
    # actions naming unknown members or topics
    (
        "crash of an unknown member",
        _timeline({"action": "crash", "at_s": 1, "member": "c009"}),
        "timeline[0].member",
        "not a member",
    ),
    (
        "crash before the member joins",
        _timeline(
            {"action": "crash", "at_s": 1, "member": "c003"}, {"action": "add_members", "at_s": 5}
        ),
        "timeline[0].member",
        "not a member at t=1",
    ),
    (
        "pause of an unknown member",
        _timeline({"action": "pause", "at_s": 1, "member": "zz"}),
        "timeline[0].member",
        "not a member",
    ),
    (
        "restart of an unknown member",
        _timeline({"action": "rolling_restart", "at_s": 1, "members": ["zz"]}),
        "timeline[0].members",
        "not a member",
    ),
    (
        "partition of an unknown member",
        _timeline({"action": "network_partition", "at_s": 1, "member": "zz"}),
        "timeline[0].member",
        "not a member",
    ),
    (
        "override of an unknown member",
        _base(member_overrides={"c999": {"capacity": 5}}),
        "member_overrides.c999",
        "no member",
    ),
    (
        "latency of an unknown member",
        _base(network={"member_latency": {"zz": 5}}),
        "network.member_latency.zz",
        "no member",
    ),
    (
        "partitions for an unknown topic",
        _timeline({"action": "add_partitions", "at_s": 1, "topic": "zz"}),
        "timeline[0].topic",
        "not a topic",
    ),
    (
        "partitions for a deleted topic",
        _timeline(
            {"action": "delete_topic", "at_s": 1, "topic": "t"},
            {"action": "add_partitions", "at_s": 2, "topic": "t"},
        ),
        "timeline[1].topic",
        "not a topic at t=2",
    ),
    (
        "topic created twice",
        _timeline({"action": "create_topic", "at_s": 1, "topic": "t"}),
        "timeline[0].topic",
        "already exists",
    ),
    (
        "subscription to an unknown topic",
        _base(consumer={"topics": ["zz"]}),
        "consumer.topics",
        "not a topic",
    ),
    # times beyond max_duration_s
    (
        "action after the end",
        _timeline({"action": "crash", "at_s": 200}, max_duration_s=100),
        "timeline[0].at_s",
        "beyond max_duration_s",
    ),
    (
        "leader crash in an unknown phase",
        _timeline({"action": "crash_leader", "at_s": 1, "phase": "lunch"}),
        "timeline[0].phase",
        "not one of",
    ),
]


@pytest.mark.parametrize("data,field,needle", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_scenario_is_one_line_naming_the_field(data, field, needle):
    """Each invalid scenario raises ConfigError whose field is the offending one, on one line."""
    with pytest.raises(ConfigError) as info:
        Scenario.from_dict(data)
    assert info.value.field == field
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_valid_edge_cases_are_accepted():
    """Actions on members added earlier, topics created earlier, and a topic given as one name
    are accepted."""
    sc = Scenario.from_dict(
        _timeline(
            {"action": "add_members", "at_s": 1, "count": 2},
            {"action": "crash", "at_s": 1, "member": "c004"},
            {"action": "create_topic", "at_s": 2, "topic": "u"},
            {"action": "add_partitions", "at_s": 3, "topic": "u"},
            consumer={"topics": "t"},
        )
    )
    assert sc.config.consumer.topics == ("t",) and len(sc.timeline) == 4
