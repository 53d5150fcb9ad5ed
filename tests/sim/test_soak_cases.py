"""Schedules the soak once failed on, kept as scenario files (the generator's draws change with
the code, so a seed and index would not reproduce them later). Each must now run clean."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim import run_scenario
from sim.scenario.builtins import load_scenario

CASES = Path(__file__).parent / "soak_cases"

# file -> simulation seed the soak ran it with
SEEDS = {
    # a commitSync stuck in retries, then close() (or a callback) while it waited: the member's
    # "stalled" interval was opened twice (soak --seed 5, schedules 148 and 631)
    "commit-sync-stuck-148.toml": 58829,
    "commit-sync-stuck-631.toml": 61694,
    # a downgrade, then an upgrade before the classic rebalance completed: members rebuilt from
    # the downgrade's targets while a member behind the group epoch still owned a partition (it
    # is fenced by the downgrade's generation: a zombie, soak --seed 0, schedule 281)
    "migration-downgrade-then-upgrade-281.toml": 61654,
    # an upgrade by a static member replacing its classic self, while the classic group was
    # rebalancing after a member left: the conversion must bump the epoch (the converted group
    # has no subscription metadata), or the leaver's partition stays without an owner (681)
    "migration-static-upgrade-681.toml": 27441,
    # the last members of a consumer group left, then a classic member joined: Kafka makes a new
    # classic group in place of the empty one, counting generations from the start, which the
    # generations check took for a generation going back (soak --seed 0, schedule 174)
    "migration-new-group-after-empty-174.toml": 26545,
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
