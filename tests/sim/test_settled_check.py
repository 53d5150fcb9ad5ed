"""The runner's incremental settled check (an episode ends when it says so) against the full scan
of every member, on the built-ins whose membership changes while the coordinator's state and
generation do not (static restarts, crashes, pauses), under both protocols."""

from __future__ import annotations

import pytest

from sim import run_scenario
from sim.scenario.builtins import load_scenario

from .helpers import need_assignor

CASES = [
    ("rolling-bounce-static", {}),
    ("rolling-deploy", {"static": "true", "graceful": "false"}),
    ("gc-pause-zombie", {}),
    ("crash", {"member": "leader"}),
    ("scale-in", {}),
    ("protocol-migration", {}),
]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
@pytest.mark.parametrize(("name", "params"), CASES, ids=[c[0] for c in CASES])
def test_the_incremental_settled_check_agrees_with_a_full_scan(name, params, protocol):
    need_assignor("cooperative-sticky")
    sc = load_scenario(name, {"members": "9", "consumer.group_protocol": protocol, **params})
    for seed in (0, 1):
        checked = run_scenario(sc, seed=seed, raise_on_violation=False, check_settled=True)
        assert not [v for v in checked.invariant_violations if "settled check" in v]
        plain = run_scenario(sc, seed=seed, raise_on_violation=False)
        assert checked.events.equals(plain.events)
        assert checked.intervals.equals(plain.intervals)


def test_a_disagreement_is_recorded_as_a_violation(monkeypatch):
    """The cross-check can fail: an incremental check that always says "settled" is caught."""
    from sim import run as run_module

    need_assignor("cooperative-sticky")
    monkeypatch.setattr(run_module.Runner, "_settled_since", lambda self, t: True)
    sc = load_scenario("rolling-bounce-static", {"members": "4"})
    r = run_scenario(sc, seed=0, raise_on_violation=False, check_settled=True)
    assert any("settled check" in v for v in r.invariant_violations)


def test_a_timer_schedule_is_the_repeated_additions_of_its_step():
    """``schedule_through`` (how elided heartbeats and auto-commits are replayed) gives exactly
    the instants a timer re-armed ``step`` after each expiry fires at, also past the length where
    it hands over to numpy, with the limit included or not."""
    import random

    from sim.client.base import schedule_through

    def loop(start, step, limit, inclusive):
        out, t = [], start
        while t < limit or (inclusive and t == limit):
            out.append(t)
            t = t + step
        return out

    rng = random.Random(3)
    for _ in range(500):
        start, step = rng.uniform(0, 1e4), rng.choice([5.0, 3.0, 0.1, 1 / 3, rng.uniform(0.01, 9)])
        limit = start + rng.choice([0.0, step, 40 * step, rng.uniform(0, 5e4)])
        if rng.random() < 0.3:  # exactly on an instant of the schedule
            on = loop(start, step, limit + 3 * step, True)
            limit = on[len(on) // 2]
        for inclusive in (True, False):
            got = schedule_through(start, step, limit, inclusive)
            assert got == loop(start, step, limit, inclusive)
            assert all(type(t) is float for t in got)
