"""Invariants hold on small random fault schedules (Hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim import Scenario, run_scenario

from .helpers import need_assignor

STRATEGIES = [
    ["range"],
    ["roundrobin"],
    ["cooperative-sticky"],
    ["range", "cooperative-sticky"],
    ["sticky"],
]


@st.composite
def fault_schedules(draw, members: int):
    """A few faults on members c000..c{members-1} between t=10 and t=200."""
    names = [f"c{i:03d}" for i in range(members)]
    actions = []
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.floats(10, 200).map(lambda x: round(x, 2)))
        kind = draw(
            st.sampled_from(
                [
                    "crash",
                    "pause",
                    "add_members",
                    "remove_members",
                    "rolling_restart",
                    "network_partition",
                    "delay_spike",
                ]
            )
        )
        member = draw(st.sampled_from(names))
        if kind == "crash":
            actions.append({"action": "crash", "at_s": at, "member": member})
        elif kind == "pause":
            actions.append(
                {
                    "action": "pause",
                    "at_s": at,
                    "member": member,
                    "duration_s": draw(st.sampled_from([5.0, 30.0, 60.0])),
                }
            )
        elif kind == "add_members":
            actions.append({"action": "add_members", "at_s": at})
        elif kind == "remove_members":
            actions.append({"action": "remove_members", "at_s": at, "members": [member]})
        elif kind == "rolling_restart":
            actions.append(
                {
                    "action": "rolling_restart",
                    "at_s": at,
                    "members": [member],
                    "down_s": draw(st.sampled_from([2.0, 50.0])),
                }
            )
        elif kind == "network_partition":
            actions.append(
                {
                    "action": "network_partition",
                    "at_s": at,
                    "member": member,
                    "duration_s": draw(st.sampled_from([5.0, 60.0])),
                    "direction": draw(
                        st.sampled_from(["both", "to_coordinator", "from_coordinator"])
                    ),
                }
            )
        else:
            actions.append(
                {"action": "delay_spike", "at_s": at, "duration_s": 5.0, "extra_ms": 2000.0}
            )
    return actions


@st.composite
def runs(draw):
    members = draw(st.integers(2, 4))
    return {
        "name": "prop",
        "members": members,
        "topics": [{"name": "t", "partitions": draw(st.integers(1, 8)), "rate": 10.0}],
        "consumer": {
            "partition_assignment_strategy": draw(st.sampled_from(STRATEGIES)),
            "static": draw(st.booleans()),
            "revoke_cost_ms": draw(st.sampled_from([0.0, 50.0])),
            "assign_cost_ms": draw(st.sampled_from([0.0, 200.0])),
        },
        "network": {
            "latency": draw(
                st.sampled_from(
                    [
                        {"kind": "constant", "ms": 1.0},
                        {"kind": "lognormal", "ms": 2.0, "sigma": 1.0},
                    ]
                )
            )
        },
        "max_duration_s": 3000.0,
        "timeline": draw(fault_schedules(members)),
    }


@settings(max_examples=40, deadline=None)
@given(data=runs(), seed=st.integers(0, 3))
def test_invariants_hold_under_random_faults(data, seed):
    """Whatever the faults, no partition is owned twice (except by a zombie), double processing
    involves a zombie, generations increase, and the group settles after the last fault."""
    for name in data["consumer"]["partition_assignment_strategy"]:
        need_assignor(name)
    result = run_scenario(Scenario.from_dict(data), seed=seed, raise_on_violation=False)
    assert result.invariant_violations == []
