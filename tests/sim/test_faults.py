"""Randomized fault schedules (Hypothesis): whatever is thrown at the group, the simulator keeps
its invariants, the group recovers, and nothing escapes as an exception (issue 5)."""

from __future__ import annotations

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from sim import Scenario, run_scenario
from sim.testing.soak import problems

from ..strategies import faulty_scenarios


def _check(data: dict, seed: int) -> None:
    result = run_scenario(Scenario.from_dict(data), seed=seed, raise_on_violation=False)
    s = result.summary
    # the soak's verdict: invariants, liveness, exactly one owner per partition at the end
    assert problems(result) == []
    kinds = set(result.events.column("kind").to_pylist())
    event(f"double processing (zombies): {s['double_processing_partition_s'] > 0}")
    event(
        f"leader crashed by crash_leader: {any('crash_leader' in (d or '') for d in result.events.column('detail').to_pylist())}"
    )
    event(f"messages dropped: {s['messages_dropped'] > 0}")
    for kind in ("poll_timeout", "partitions_lost", "sync_failed", "join_failed", "sync_discarded"):
        if kind in kinds:
            event(f"saw {kind}")


# Found by the slow run: a static eager member whose onJoinPrepare commit is lost misses the join
# barrier; the group hands its partitions on while it still holds them with a stale generation.
STATIC_LEFT_OUT = {
    "name": "faults",
    "members": 2,
    "topics": [{"name": "t", "partitions": 2, "rate": 10.0}],
    "max_duration_s": 4000.0,
    "consumer": {
        "partition_assignment_strategy": ["range"],
        "static": True,
        "session_timeout_ms": 10000,
        "max_poll_interval_ms": 30000,
    },
    "network": {"latency": {"kind": "constant", "ms": 1.0}, "drop_probability": 0.05},
    "timeline": [],
}


@settings(max_examples=100, deadline=None)
@given(data=faulty_scenarios(), seed=st.integers(0, 2**16))
@example(data=STATIC_LEFT_OUT, seed=217)
def test_random_fault_schedules_keep_invariants(data, seed):
    """Under random crashes, pauses, partitions, drops, delays, simultaneous joins and leaves and
    leader crashes inside a rebalance, every run keeps its invariants, ends with every partition
    owned once, and raises nothing."""
    _check(data, seed)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None)
@given(data=faulty_scenarios(max_faults=8), seed=st.integers(0, 2**16))
def test_many_random_fault_schedules_keep_invariants(data, seed):
    """The same property over a thousand schedules (run with ``pytest -m slow``)."""
    _check(data, seed)


def _consumer_protocol(data: dict) -> dict:
    """The schedule under the consumer protocol; the drawn session timeout becomes the broker's
    group.consumer.session.timeout.ms (the client's is not used by that protocol)."""
    consumer = {**data.get("consumer", {}), "group_protocol": "consumer"}
    session_ms = consumer.get("session_timeout_ms", 45000)
    group = {
        **data.get("group", {}),
        "consumer_session_timeout_ms": session_ms,
        "consumer_min_session_timeout_ms": min(session_ms, 45000),
    }
    return {**data, "consumer": consumer, "group": group}


# Found by CI: paused past its session timeout while its last heartbeat's answer was in flight,
# the member took that answer's quiet grant on resume and never heartbeat again.
PAUSED_PAST_SESSION = {
    "name": "faults",
    "members": 2,
    "topics": [{"name": "t", "partitions": 1, "rate": 10.0}],
    "max_duration_s": 4000.0,
    "assignor_cost": "zero",
    "consumer": {
        "partition_assignment_strategy": ["range"],
        "static": False,
        "session_timeout_ms": 10000,
        "max_poll_interval_ms": 30000,
    },
    "network": {"latency": {"kind": "constant", "ms": 1.0}, "drop_probability": 0.0},
    "timeline": [{"action": "pause", "at_s": 10.0, "member": "c000", "duration_s": 12.0}],
}


@settings(max_examples=60, deadline=None)
@given(data=faulty_scenarios(), seed=st.integers(0, 2**16))
@example(data=PAUSED_PAST_SESSION, seed=0)
def test_random_fault_schedules_keep_invariants_consumer_protocol(data, seed):
    """The same schedules under the consumer group protocol (KIP-848): invariants hold, every
    partition ends with one owner, nothing raises."""
    _check(_consumer_protocol(data), seed)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None)
@given(data=faulty_scenarios(max_faults=8), seed=st.integers(0, 2**16))
def test_many_random_fault_schedules_keep_invariants_consumer_protocol(data, seed):
    """The consumer-protocol property over a thousand schedules (``pytest -m slow``)."""
    _check(_consumer_protocol(data), seed)
