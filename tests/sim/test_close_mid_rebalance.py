"""A member closed in the middle of a rebalance (sim.client.classic)."""

from __future__ import annotations

from sim import run_scenario


def test_a_static_member_closed_while_its_join_is_answered_finishes_closing():
    """A static member closed mid-rebalance, whose JoinGroup answer makes it the leader while
    close()'s onPartitionsRevoked runs: the assignment waits for the callback (one poll thread),
    the member finishes closing, its session expires and the group settles (soak seed 35,
    schedule 562: it never did)."""
    from sim import Scenario

    data = {
        "name": "close-mid-join",
        "members": 2,
        "max_duration_s": 4000.0,
        "assignor_cost": "fixed:0.5",
        "topics": [
            {"name": "t", "partitions": 8, "rate": 200.0},
            {"name": "u", "partitions": 3, "rate": 10.0},
        ],
        "consumer": {
            "partition_assignment_strategy": ["cooperative-sticky"],
            "static": True,
            "session_timeout_ms": 45000,
            "max_poll_interval_ms": 30000,
            "capacity": 10000.0,
            "max_poll_records": 100,
            "revoke_cost_ms": 50.0,
            "assign_cost_ms": 300.0,
        },
        "network": {"latency": {"kind": "constant", "ms": 1.0}},
        "timeline": [
            {
                "action": "network_partition",
                "at_s": 113.576,
                "member": "c000",
                "duration_s": 50.0,
                "direction": "both",
            },
            {"action": "delay_spike", "at_s": 146.614, "duration_s": 8.0, "extra_ms": 50.0},
            {"action": "remove_members", "at_s": 167.814, "members": ["c001"]},
        ],
    }
    r = run_scenario(Scenario.from_dict(data), seed=11677, raise_on_violation=False)
    assert r.invariant_violations == [] and r.summary["settled_at_end"]
    owners = r.intervals.to_pandas()
    final = owners[(owners["kind"] == "owned") & (owners["end"] >= owners["end"].max())]
    assert set(final["member"]) == {"c000"} and len(final) == 11
