"""Resource bounds of run_scenario: a run stopped by max_events or max_wall_s is clean and
marked partial (issue 5)."""

from __future__ import annotations

import pytest

from sim import ConfigError, run_scenario

from .helpers import scenario


def test_max_events_gives_a_clean_partial_run():
    """A run stopped by max_events reports partial, checks no end-of-run invariant, and its
    results are a prefix of the full run's."""
    sc = scenario(
        [{"action": "crash", "at_s": 30, "member": "c001"}], strategy=("cooperative-sticky",)
    )
    full = run_scenario(sc, seed=2)
    part = run_scenario(sc, seed=2, max_events=40)
    assert not full.summary["partial"] and full.summary["partial_reason"] == ""
    assert part.summary["partial"] and "max_events=40" in part.summary["partial_reason"]
    assert 40 <= part.summary["events_delivered"] < full.summary["events_delivered"]
    assert part.invariant_violations == []
    assert part.runs.column("partial").to_pylist() == [True]
    n = part.events.num_rows
    assert (
        part.events.drop(["run_id"]).to_pylist()
        == full.events.drop(["run_id"]).slice(0, n).to_pylist()
    )


def test_unbounded_and_generous_bounds_agree():
    """Bounds that are not hit change nothing in the results."""
    sc = scenario([{"action": "add_members", "at_s": 30}])
    a = run_scenario(sc, seed=3)
    b = run_scenario(sc, seed=3, max_events=10**9, max_wall_s=3600)
    assert (
        a.events.equals(b.events) and a.intervals.equals(b.intervals) and not b.summary["partial"]
    )


@pytest.mark.parametrize(
    "kw", [{"max_events": 0}, {"max_events": 2.5}, {"max_wall_s": -1}, {"max_wall_s": "1"}]
)
def test_bad_bounds_are_config_errors(kw):
    """Non-positive or non-numeric bounds are rejected as ConfigError naming the bound."""
    with pytest.raises(ConfigError) as info:
        run_scenario(scenario([]), **kw)
    assert info.value.field == next(iter(kw))
