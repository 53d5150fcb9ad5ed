"""Configuration: Kafka's defaults, validation with one-line errors naming the field."""

from __future__ import annotations

import pytest

from sim import ConfigError, ConsumerConfig, GroupConfig, Scenario, SimConfig, TopicConfig
from sim.config import sim_config_from_dict


def test_kafka_defaults():
    """Defaults are Kafka's: 45 s session, 3 s heartbeat, 5 min poll interval, [range,
    cooperative-sticky], 3 s initial delay, 6 s / 30 min session bounds."""
    c, g = ConsumerConfig(), GroupConfig()
    assert (c.session_timeout_ms, c.heartbeat_interval_ms, c.max_poll_interval_ms) == (
        45000,
        3000,
        300000,
    )
    assert c.partition_assignment_strategy == ("range", "cooperative-sticky")
    assert (g.initial_rebalance_delay_ms, g.min_session_timeout_ms, g.max_session_timeout_ms) == (
        3000,
        6000,
        1800000,
    )


def test_session_timeout_below_broker_minimum_names_the_field():
    """A session timeout under group.min.session.timeout.ms is rejected, naming the field."""
    with pytest.raises(ConfigError) as e:
        SimConfig(
            topics=[TopicConfig("t", 1)],
            consumer=ConsumerConfig(session_timeout_ms=1000, heartbeat_interval_ms=500),
        )
    assert (
        str(e.value)
        == "consumer.session_timeout_ms: 1000 is below group.min.session.timeout.ms (6000)"
    )


def test_heartbeat_must_be_below_session_timeout():
    """heartbeat.interval.ms must be below session.timeout.ms."""
    with pytest.raises(ConfigError, match="heartbeat_interval_ms"):
        ConsumerConfig(heartbeat_interval_ms=45000)


@pytest.mark.parametrize(
    "data,field",
    [
        (
            {"topics": [{"name": "t", "partitions": 1}], "consumer": {"sesion_timeout_ms": 1}},
            "consumer.sesion_timeout_ms",
        ),
        ({"topics": [{"name": "t", "partitions": -1}]}, "topics[0].partitions"),
        (
            {
                "topics": [{"name": "t", "partitions": 1}],
                "consumer": {"partition.assignment.strategy": ["nope"]},
            },
            "consumer.partition_assignment_strategy",
        ),
        (
            {"topics": [{"name": "t", "partitions": 1}], "network": {"latency": {"kind": "gamma"}}},
            "network.latency.kind",
        ),
        (
            {"topics": [{"name": "t", "partitions": 1}], "assignor_cost": "fixed:abc"},
            "assignor_cost.mode",
        ),
        ({"topics": [{"name": "t", "partitions": 1}], "bogus": 1}, "bogus"),
    ],
)
def test_bad_values_name_their_field(data, field):
    """Unknown keys and invalid values are rejected with the field path in the message."""
    with pytest.raises(ConfigError) as e:
        sim_config_from_dict(data)
    assert e.value.field == field
    assert "\n" not in str(e.value)


def test_dotted_kafka_names_accepted():
    """Kafka's dotted names work as keys ("session.timeout.ms")."""
    cfg = sim_config_from_dict(
        {"topics": [{"name": "t", "partitions": 1}], "consumer": {"session.timeout.ms": 10000}}
    )
    assert cfg.consumer.session_timeout_s == 10.0


def test_timeline_action_errors_name_position():
    """A bad timeline action names its index and field."""
    with pytest.raises(ConfigError) as e:
        Scenario.from_dict(
            {
                "topics": [{"name": "t", "partitions": 1}],
                "timeline": [{"action": "explode", "at_s": 1}],
            }
        )
    assert e.value.field == "timeline[0].action"


def test_consumer_protocol_bounds_are_kafkas_defaults():
    """group.consumer.{min,max}.heartbeat.interval.ms 5 s / 15 s and
    group.consumer.{min,max}.session.timeout.ms 45 s / 60 s (GroupCoordinatorConfig)."""
    g = GroupConfig()
    assert (g.consumer_min_heartbeat_interval_ms, g.consumer_max_heartbeat_interval_ms) == (
        5000,
        15000,
    )
    assert (g.consumer_min_session_timeout_ms, g.consumer_max_session_timeout_ms) == (45000, 60000)


@pytest.mark.parametrize(
    "group,field,text",
    [
        (
            {"consumer_session_timeout_ms": 10000},
            "group.consumer_session_timeout_ms",
            "10000 is below group.consumer.min.session.timeout.ms (consumer_min_session_timeout_ms = 45000)",
        ),
        (
            {"consumer_session_timeout_ms": 90000},
            "group.consumer_session_timeout_ms",
            "90000 is above group.consumer.max.session.timeout.ms (consumer_max_session_timeout_ms = 60000)",
        ),
        (
            {"consumer_heartbeat_interval_ms": 1000},
            "group.consumer_heartbeat_interval_ms",
            "1000 is below group.consumer.min.heartbeat.interval.ms (consumer_min_heartbeat_interval_ms = 5000)",
        ),
        (
            {"consumer_heartbeat_interval_ms": 20000},
            "group.consumer_heartbeat_interval_ms",
            "20000 is above group.consumer.max.heartbeat.interval.ms (consumer_max_heartbeat_interval_ms = 15000)",
        ),
        (
            {"consumer_min_session_timeout_ms": 50000, "consumer_max_session_timeout_ms": 40000},
            "group.consumer_max_session_timeout_ms",
            "40000 is below consumer_min_session_timeout_ms (50000)",
        ),
        (
            {
                "consumer_min_heartbeat_interval_ms": 3000,
                "consumer_max_heartbeat_interval_ms": 2000,
            },
            "group.consumer_max_heartbeat_interval_ms",
            "2000 is below consumer_min_heartbeat_interval_ms (3000)",
        ),
    ],
)
def test_consumer_protocol_timings_outside_the_broker_bounds_name_the_field(group, field, text):
    """GroupCoordinatorConfig refuses to start a broker whose group.consumer.heartbeat.interval.ms
    or session.timeout.ms is outside its min/max (or whose max is below its min): an input error
    naming the setting."""
    with pytest.raises(ConfigError) as e:
        sim_config_from_dict({"topics": [{"name": "t", "partitions": 1}], "group": group})
    assert e.value.field == field
    assert text in str(e.value) and "\n" not in str(e.value)


def test_lowered_bounds_admit_shorter_consumer_protocol_timings():
    """An operator who lowers the bounds may use a 10 s session and a 1 s heartbeat."""
    cfg = sim_config_from_dict(
        {
            "topics": [{"name": "t", "partitions": 1}],
            "group": {
                "consumer_session_timeout_ms": 10000,
                "consumer_min_session_timeout_ms": 10000,
                "consumer_heartbeat_interval_ms": 1000,
                "consumer_min_heartbeat_interval_ms": 1000,
            },
        }
    )
    assert (cfg.group.consumer_session_timeout_s, cfg.group.consumer_heartbeat_interval_s) == (
        10.0,
        1.0,
    )


def _crash_at_100_in_150(protocol: str) -> dict:
    return {
        "topics": [{"name": "t", "partitions": 3}],
        "members": 3,
        "max_duration_s": 150,
        "consumer": {"group_protocol": protocol, "session_timeout_ms": 45000},
        "group": {"consumer_session_timeout_ms": 120000, "consumer_max_session_timeout_ms": 120000},
        "timeline": [{"action": "crash", "at_s": 100, "member": 1}],
    }


def test_consumer_protocol_timeline_must_fit_the_brokers_session_timeout():
    """Under the consumer protocol a crash is noticed after the broker's
    group.consumer.session.timeout.ms (120 s here), not the client's 45 s: a crash at 100 s needs
    220 s, so 150 s is an input error naming max_duration_s."""
    with pytest.raises(ConfigError) as e:
        Scenario.from_dict(_crash_at_100_in_150("consumer"))
    assert e.value.field == "max_duration_s"
    assert "needs 220 s" in str(e.value) and "\n" not in str(e.value)
    # the classic protocol uses the client's 45 s: 145 s fits
    assert Scenario.from_dict(_crash_at_100_in_150("classic")).needed_duration_s() == 145.0
    # left out, max_duration_s grows to hold the broker's timeout
    data = _crash_at_100_in_150("consumer")
    del data["max_duration_s"]
    assert Scenario.from_dict(data).config.max_duration_s >= 220.0
