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


def test_max_memory_stops_the_run_and_says_what_it_held():
    """A run past its memory bound stops as a partial run whose reason names the bound, the
    resident memory and the rows it held, with its metrics computed on what it simulated."""
    from sim.scenario.builtins import load_scenario

    sc = load_scenario("rolling-bounce-dynamic", {"members": "6"})  # thousands of batches
    part = run_scenario(sc, seed=3, max_memory_bytes=1)
    reason = part.summary["partial_reason"]
    assert part.summary["partial"] and reason.startswith("max_memory=1 reached (")
    assert "resident" in reason and "events and" in reason and "intervals" in reason
    assert part.episodes and part.events.num_rows > 0
    with pytest.raises(ConfigError) as info:
        run_scenario(sc, max_memory_bytes=0)
    assert info.value.field == "max_memory_bytes"


def test_a_deadline_past_the_kernel_cuts_the_result_where_it_is():
    """Once the kernel is over, the phases that build the result stop at a deadline: the result is
    partial, says which phase was cut, and has no metrics (``StopToken.finish_by``)."""
    from sim.kernel.stop import StopToken

    sc = scenario([{"action": "add_members", "at_s": 30}])
    stop = StopToken()
    stop.finish_by(0.0, "max_wall_s=1 reached")
    cut = run_scenario(sc, seed=3, stop=stop, raise_on_violation=False)
    assert cut.summary["partial"]
    assert cut.summary["partial_reason"] == (
        "max_wall_s=1 reached while closing the intervals: the result has no metrics"
    )
    assert cut.episodes == [] and "rebalance_time_total_s" not in cut.summary
    full = run_scenario(sc, seed=3)
    assert cut.summary["events_delivered"] == full.summary["events_delivered"]
