"""Timers that fall due while the consumer-protocol coordinator runs its assignor wait for it in
batches (``ConsumerGroup._defer``): one kernel timer per batch instead of one per timer
and busy spell. The batches must fire exactly where the timers would have, one by one."""

from __future__ import annotations

import pytest

import sim.compiled
from sim import run_scenario
from sim.config import AssignorCost, GroupConfig
from sim.coordinator.behaviour import behaviour_for
from sim.coordinator.consumer.group import ConsumerGroup
from sim.scenario.builtins import load_scenario
from sim.wire import messages as m

META = (0, {"t": 4})


def _join(g: ConsumerGroup, now: float, client: str) -> str:
    req = m.ConsumerGroupHeartbeatRequest(
        client, 0, subscribed_topics=("t",), rebalance_timeout_s=300.0, owned_partitions=frozenset()
    )
    g.handle(now, client, req)
    return client


def _timers(effects):
    return [(e[1], e[2]) for e in effects if e[0] == "timer" and e[2] is not None]


def _group_busy_from_60_to_70() -> ConsumerGroup:
    """a and b last heartbeat at 21 and 22 (sessions end at 66 and 67); c's join at 60 keeps the
    coordinator busy with the assignor until 70."""
    g = ConsumerGroup(
        GroupConfig(), lambda: META, AssignorCost(mode="fixed:10"), behaviour=behaviour_for("4.0")
    )  # a target per join
    _join(g, 0.0, "a")  # epoch 1, busy until 10
    g.on_timer(10.0, ("unblock",), 10.0)
    _join(g, 10.5, "b")  # epoch 2, busy until 20.5
    g.on_timer(20.5, ("unblock",), 20.5)
    g.handle(21.0, "a", m.ConsumerGroupHeartbeatRequest("a", 1))
    g.handle(22.0, "b", m.ConsumerGroupHeartbeatRequest("b", 2))
    _join(g, 60.0, "c")
    assert g.busy_until == 70.0
    assert (g.timers[("session", "a")], g.timers[("session", "b")]) == (66.0, 67.0)
    return g


def test_sessions_due_while_busy_wait_in_one_batch_and_expire_when_it_ends():
    g = _group_busy_from_60_to_70()
    first = g.on_timer(66.0, ("session", "a"), 66.0)
    assert _timers(first) == [(("deferred", 1), 70.0)]
    assert g.timers[("session", "a")] == 70.0 and g.session_due[70.0] == {"a": None}
    # the second due timer of the spell joins the batch: no kernel timer of its own
    assert g.on_timer(67.0, ("session", "b"), 67.0) == []
    assert g._deferred[("deferred", 1)] == [("session", "a"), ("session", "b")]
    g.on_timer(70.0, ("unblock",), 70.0)
    out = g.on_timer(70.0, ("deferred", 1), 70.0)
    removed = [e[2] for e in out if e[0] == "event" and e[1] == "member_removed"]
    assert removed == ["a", "b"]  # both sessions ran out while the assignor ran
    assert not g._deferred and ("deferred", 1) not in g.timers
    assert g.on_timer(70.0, ("session", "b"), 70.0) == []  # gone with its member


def test_a_timer_armed_at_the_batch_instant_closes_the_batch():
    """A timer queued at the batch's instant between two deferrals would fire between them: the
    second deferral opens a batch of its own, queued after it."""
    g = _group_busy_from_60_to_70()
    g.on_timer(66.0, ("session", "a"), 66.0)
    g._timer(("probe",), 70.0)
    assert _timers(g._drain()) == [(("probe",), 70.0)]
    second = g.on_timer(67.0, ("session", "b"), 67.0)
    assert _timers(second) == [(("deferred", 2), 70.0)]
    assert g._deferred == {("deferred", 1): [("session", "a")], ("deferred", 2): [("session", "b")]}


@pytest.mark.skipif(
    sim.compiled.status().startswith("compiled"),
    reason="replaces a method of a compiled class (CI runs tests/sim from source too)",
)
def test_batches_give_the_same_run_as_one_kernel_timer_per_deferral(monkeypatch):
    """The same runs with every deferred timer re-armed as a kernel timer of its own (what the
    coordinator did before batching): the same events and intervals, and batching did happen."""
    sc = load_scenario(
        "slow-assignor",
        # 4.0: a computation per join keeps the coordinator busy through sessions' deadlines
        {
            "members": "6",
            "max_duration_s": "200",
            "consumer.group_protocol": "consumer",
            "kafka_version": "4.0",
        },
    )
    deferred = []
    batched = ConsumerGroup._defer

    def counting(self, key, at):
        deferred.append(key)
        batched(self, key, at)

    monkeypatch.setattr(ConsumerGroup, "_defer", counting)
    with_batches = [run_scenario(sc, seed=seed, raise_on_violation=False) for seed in (0, 1)]
    assert len(deferred) >= 4

    def one_timer_each(self, key, at):
        self._timer(key, at)

    monkeypatch.setattr(ConsumerGroup, "_defer", one_timer_each)
    for seed, batched_run in zip((0, 1), with_batches, strict=True):
        plain = run_scenario(sc, seed=seed, raise_on_violation=False)
        assert batched_run.events.equals(plain.events)
        assert batched_run.intervals.equals(plain.intervals)
        assert batched_run.summary["events_delivered"] < plain.summary["events_delivered"]
