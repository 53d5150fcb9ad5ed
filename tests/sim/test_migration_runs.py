"""Whole runs of an online migration between the protocols (``protocol-migration``, mixed groups):
they settle with every invariant holding, the conversions show as events, and a refused upgrade
reaches the client as Kafka's error."""

from __future__ import annotations

import pytest

from sim import run_scenario
from sim.scenario.builtins import load_scenario


def _events(result, kind):
    return [e for e in result.events.to_pylist() if e["kind"] == kind]


def _clients_by_protocol(result):
    """Each client's protocol at its last start (from its ``start`` event: EAGER/COOPERATIVE for
    a classic client, CONSUMER for a consumer-protocol one)."""
    last = {}
    for e in result.events.to_pylist():
        if e["kind"] == "start":
            last[e["member"]] = e["detail"]
    return last


@pytest.mark.parametrize("assignor", ["cooperative-sticky", "range"])
def test_upgrade_settles_as_a_consumer_group(assignor):
    """A classic group (cooperative or eager) restarted batch by batch onto the consumer protocol
    converts once, when the first consumer-protocol member joins, and ends settled with no
    violation; offsets carry over (no record is processed twice)."""
    r = run_scenario(
        load_scenario("protocol-migration", {"members": "10", "assignor": assignor}), seed=1
    )
    assert r.summary["settled_at_end"] and not r.invariant_violations
    conv = _events(r, "group_converted")
    assert [e["detail"].split()[0] for e in conv] == ["classic->consumer"]
    first_consumer_start = min(
        e["t"] for e in _events(r, "trigger") if "rolling_restart start" in e["detail"]
    )
    assert conv[0]["t"] >= first_consumer_start
    assert r.summary["records_reprocessed"] == 0
    # every episode of the migration is measured like any rebalance
    assert r.summary["episodes"] == 20 and r.summary["episodes_unsettled"] == 0
    # the classic members were served inside the consumer group
    assert _events(r, "classic_join")


def test_downgrade_returns_to_a_classic_group():
    """to=classic: the consumer group is converted back when its last consumer-protocol member
    leaves, and the classic group completes a generation above every epoch it had."""
    r = run_scenario(
        load_scenario("protocol-migration", {"members": "10", "to": "classic"}), seed=2
    )
    assert r.summary["settled_at_end"] and not r.invariant_violations
    conv = _events(r, "group_converted")
    assert [e["detail"].split()[0] for e in conv] == ["consumer->classic"]
    joins = [e for e in _events(r, "join_complete") if e["t"] > conv[0]["t"]]
    assert joins and joins[0]["generation"] == conv[0]["generation"] + 1


def test_refused_upgrade_is_fatal_for_the_client():
    """group.consumer.migration.policy=disabled: a consumer-protocol member joining the classic
    group gets GROUP_ID_NOT_FOUND, a fatal error; the classic group carries on without it."""
    r = run_scenario(
        load_scenario(
            "protocol-migration",
            {"members": "4", "batch_size": "1", "group.consumer_migration_policy": "disabled"},
        ),
        seed=0,
        raise_on_violation=False,
    )
    assert not r.invariant_violations
    fatal = [e for e in _events(r, "fatal") if "GROUP_ID_NOT_FOUND" in e["detail"]]
    refused = _events(r, "conversion_refused")
    assert len(fatal) >= 3 and len(refused) >= 3
    assert not [
        e
        for e in _events(r, "group_converted")
        if e["detail"].startswith("classic->consumer members")
    ]


def test_mixed_group_from_the_start_is_deterministic():
    """Members of both protocols from the start (member_overrides): the group takes the type of
    the first member to join; the consumer-protocol members that come during its first
    rebalance find no protocol selected yet, so the upgrade fails (ConsumerGroup.fromClassicGroup,
    UNKNOWN_SERVER_ERROR) and Kafka's client takes the error as fatal; same seed, same events."""
    data = {
        "members": "6",
        "member_overrides.c001.group_protocol": "consumer",
        "member_overrides.c004.group_protocol": "consumer",
    }
    a = run_scenario(load_scenario("crash", data), seed=4)
    b = run_scenario(load_scenario("crash", data), seed=4)
    assert a.summary["settled_at_end"] and not a.invariant_violations
    assert a.events.equals(b.events) and a.intervals.equals(b.intervals)
    refused = _events(a, "conversion_refused")
    assert {e["member"] for e in refused} == {"c001", "c004"}
    assert all("no protocol selected" in e["detail"] for e in refused)
    assert {e["member"] for e in _events(a, "fatal")} == {"c001", "c004"}
    assert not _events(a, "group_converted")
