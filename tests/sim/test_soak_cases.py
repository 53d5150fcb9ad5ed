"""Schedules the soak once failed on, kept as scenario files (the generator's draws change with
the code, so a seed and index would not reproduce them later). Each must now run clean."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim import run_scenario
from sim.builtin_scenarios import load_scenario

CASES = Path(__file__).parent / "soak_cases"

# file -> simulation seed the soak ran it with
SEEDS = {
    # a commitSync stuck in retries, then close() (or a callback) while it waited: the member's
    # "stalled" interval was opened twice (soak --seed 5, schedules 148 and 631)
    "commit-sync-stuck-148.toml": 58829,
    "commit-sync-stuck-631.toml": 61694,
}


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_soak_case_runs_clean(name):
    result = run_scenario(
        load_scenario(str(CASES / name)), seed=SEEDS[name], raise_on_violation=False
    )
    assert result.summary["invariant_violations"] == 0, (
        result.violations if hasattr(result, "violations") else ""
    )
    assert result.summary["settled_at_end"]
