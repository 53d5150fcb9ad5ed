"""``assignor_cost = "kafka"``: a classic group's leader takes Kafka's own time on its input."""

from __future__ import annotations

import pytest

from assignors import kafka_time

from .helpers import episode, events, run, scenario

ADD_AT = 30.0
PRICE = kafka_time.client_kafka_ms


def _leader_inputs(monkeypatch):
    """Record what the leaders price: (assignor, metadata, subscriptions, milliseconds)."""
    seen = []

    def spy(name, metadata, subscriptions, work=None):
        ms = PRICE(name, metadata, subscriptions, work)
        seen.append((name, dict(metadata), dict(subscriptions), ms))
        return ms

    monkeypatch.setattr(kafka_time, "client_kafka_ms", spy)
    return seen


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_assignment_events_carry_kafkas_time_on_that_input(monkeypatch, strategy):
    seen = _leader_inputs(monkeypatch)
    sc = scenario(
        [{"action": "add_members", "at_s": ADD_AT, "count": 2}],
        members=4,
        partitions=40,
        strategy=(strategy,),
        assignor_cost="kafka",
    )
    result = run(sc)
    computed = events(result, "assignment_computed")
    assert len(computed) == len(seen) >= 2
    for event, (name, metadata, subscriptions, ms) in zip(computed, seen, strict=True):
        assert f"assignor={name} members={len(subscriptions)} " in event["detail"]
        assert event["detail"].endswith(f" cost={ms / 1000:.6f}s")
        # The leader's count is the count of a new assignor on the same input.
        assert PRICE(name, metadata, subscriptions) == ms
        assert ms > 0


def test_kafka_time_lengthens_an_eager_rebalance_by_itself(monkeypatch):
    """One eager round: the scale-out takes exactly the leader's Kafka time longer."""
    timeline = [{"action": "add_members", "at_s": ADD_AT}]
    base = run(scenario(timeline, members=4, partitions=40, assignor_cost="zero"))
    seen = _leader_inputs(monkeypatch)
    priced = run(scenario(timeline, members=4, partitions=40, assignor_cost="kafka"))
    assert episode(priced)["rounds"] == 1
    cost_s = seen[-1][3] / 1000
    assert episode(priced)["rebalance_time_s"] == pytest.approx(
        episode(base)["rebalance_time_s"] + cost_s
    )


def test_kafka_is_a_cost_mode_priced_by_the_caller():
    from sim.config import COST_MODES, AssignorCost, ConfigError, sim_config_from_dict

    assert "kafka" in COST_MODES
    assert AssignorCost().mode == "kafka"  # the default: Kafka's own time
    cost = AssignorCost(mode="kafka")
    assert cost.cost_s(100, 4, measured_s=9.0, kafka_s=0.25) == 0.25
    with pytest.raises(ConfigError) as e:
        cost.cost_s(100, 4, measured_s=9.0)
    assert e.value.field == "mode" and "\n" not in str(e.value)
    config = sim_config_from_dict(
        {"topics": [{"name": "t", "partitions": 1}], "assignor_cost": "kafka"}
    )
    assert config.assignor_cost.mode == "kafka"
