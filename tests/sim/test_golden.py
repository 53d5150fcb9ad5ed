"""Every built-in, under both group protocols at two sizes, replays today's recorded behaviour
byte for byte (``tests/sim/golden.py``): the events, intervals, episodes, summary and violations
whose digests were taken before the simulator's code was reorganised and before newer defaults
(``golden.PINNED`` keeps a run on the recorded behaviour when a default moves)."""

from __future__ import annotations

import json

from tests.sim import golden


def test_every_builtin_replays_its_recorded_digest(this_build):
    """(The built-ins run once per session, ``conftest.this_build``, for this test and
    ``test_compiled``'s.)"""
    recorded = json.loads(golden.DIGESTS.read_text())
    now = {k: v for k, v in this_build["runs"].items() if not k.startswith("soak ")}
    assert sorted(now) == sorted(recorded)
    differ = {case: (recorded[case], now[case]) for case in now if now[case] != recorded[case]}
    assert not differ, f"{len(differ)} runs moved from their recorded digest: {sorted(differ)[:8]}"
