"""`rebalance-sim assign` prints the time Kafka's own assignor would take on the input."""

from __future__ import annotations

import json

import pytest

from assignors import Subscription, TopicPartition
from assignors.kafka_time import client_kafka_ms
from rebalance_sim.cli.main import main

GROUP = {
    "topics": {"orders": 60, "payments": 30},
    "members": {
        "c1": {
            "topics": ["orders", "payments"],
            "owned": ["orders-0", "orders-1"],
            "generation": 3,
        },
        "c2": {"topics": ["orders"], "generation": 3},
        "c3": {"topics": ["payments"]},
    },
}


def _run(tmp_path, capsys, *extra):
    path = tmp_path / "group.json"
    path.write_text(json.dumps(GROUP))
    code = main(["assign", str(path), *extra])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("name", ["range", "roundrobin", "cooperative-sticky"])
def test_json_and_text_carry_kafkas_time(tmp_path, capsys, name):
    code, out = _run(tmp_path, capsys, "--assignor", name, "--json")
    assert code == 0
    kafka_ms = json.loads(out)["kafka_ms"]
    subs = {
        "c1": Subscription(
            ["orders", "payments"],
            owned_partitions=[TopicPartition("orders", 0), TopicPartition("orders", 1)],
            generation=3,
        ),
        "c2": Subscription(["orders"], generation=3),
        "c3": Subscription(["payments"]),
    }
    expected = client_kafka_ms(name, GROUP["topics"], subs)
    assert kafka_ms == round(expected, 3) > 0
    code, out = _run(tmp_path, capsys, "--assignor", name)
    assert code == 0
    assert f"Kafka's own {name} would take {expected:,.1f} ms on this input" in out
