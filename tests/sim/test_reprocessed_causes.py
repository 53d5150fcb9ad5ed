"""Records processed twice, by cause (sim.observe.metrics)."""

from __future__ import annotations

import pytest

from sim import run_scenario
from sim.scenario.builtins import load_scenario


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_gc_pause_files_the_paused_members_work_as_fenced_and_only_double_processing_as_zombie(
    protocol,
):
    """gc-pause-zombie: the new owners process again what the paused member processed after its
    last commit (taken from it: ``fenced``); ``zombie`` is only what the zombie processes beside
    them, its double-processing partition-seconds at the topic's 100 records/s."""
    s = run_scenario(
        load_scenario("gc-pause-zombie", {"consumer.group_protocol": protocol}), seed=0
    ).summary
    assert s["records_reprocessed_zombie"] == pytest.approx(
        100.0 * s["double_processing_partition_s"]
    )
    assert s["records_reprocessed_fenced"] > 10 * max(1.0, s["records_reprocessed_zombie"])
    parts = sum(
        s[f"records_reprocessed_{c}"]
        for c in ("crash", "failed_commit", "fenced", "zombie", "uncommitted")
    )
    assert parts == pytest.approx(s["records_reprocessed"])
