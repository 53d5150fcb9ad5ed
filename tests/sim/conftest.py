"""Runs that several simulator tests read: every built-in and a sample of soak schedules, run once
per session on the build this process imports (``tests/sim/golden.py``)."""

from __future__ import annotations

import pytest

from tests.sim import golden


@pytest.fixture(scope="session")
def this_build() -> dict:
    """``golden.build_runs``: digests of every built-in (as ``tests/sim/test_golden.py`` records
    them) and of ``golden.SOAK_SAMPLE``, with what a run leaves to the cyclic collector."""
    return golden.build_runs(golden.SOAK_SAMPLE)
