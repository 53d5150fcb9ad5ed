"""The event vocabulary: every recorded kind is an ``EventKind``, and each typed detail decodes
what its ``encode`` writes and what the runs record."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim import run_scenario
from sim.observe.events import (
    MEMBER_ID_KINDS,
    AssignmentComputed,
    EventKind,
    FirstRecord,
    Reprocessed,
    Revoke,
    Trigger,
    member_id_of,
)
from sim.observe.metrics import compute_metrics, metrics_of
from sim.scenario.builtins import load_scenario

_finite = st.floats(min_value=0, max_value=1e9, allow_nan=False)
_word = st.text("abcdefghijklmnopqrstuvwxyz_-", min_size=1, max_size=12)


@given(st.integers(0, 10**6), _finite, st.integers(0, 10**6), _finite, _word)
def test_details_decode_what_they_encode(n, records, partitions, rate, cause):
    assert Revoke.decode(Revoke(n, "topic deleted").encode()) == Revoke(n, "topic deleted")
    rp = Reprocessed.decode(Reprocessed(records, partitions, rate, cause).encode())
    assert rp is not None and (rp.partitions, rp.cause) == (partitions, cause)
    assert rp.records == pytest.approx(records, abs=1e-6) and rp.rate == pytest.approx(
        rate, abs=1e-6
    )
    fr = FirstRecord.decode(FirstRecord(n, rate).encode())
    assert fr is not None and fr.partitions == n and fr.after_s == pytest.approx(rate, abs=1e-6)
    for epoch in (None, partitions):
        ac = AssignmentComputed.decode(AssignmentComputed(cause, n, epoch, rate).encode())
        assert ac is not None and (ac.assignor, ac.members, ac.epoch) == (cause, n, epoch)


def test_a_detail_without_the_fields_decodes_to_none():
    assert Revoke.decode("") is None and Reprocessed.decode("count=3") is None
    assert FirstRecord.decode(None) is None and AssignmentComputed.decode("cost=xs") is None
    assert Trigger.decode("action=crash member=c001").duration_s is None
    assert member_id_of("reason=left") is None


@pytest.mark.parametrize("name", ["rolling-bounce-static", "protocol-migration", "crash"])
def test_every_recorded_kind_is_named_and_its_detail_decodes(name):
    result = run_scenario(load_scenario(name, ["members=4"]), seed=1)
    events = result.events.select(["kind", "detail"]).to_pylist()
    kinds = {e["kind"] for e in events}
    assert kinds <= {k.value for k in EventKind}, kinds - {k.value for k in EventKind}
    decoders = {
        "revoke": Revoke.decode,
        "reprocessed": Reprocessed.decode,
        "first_record": FirstRecord.decode,
        "assignment_computed": AssignmentComputed.decode,
        "target_assignment": AssignmentComputed.decode,
    }
    seen = 0
    for e in events:
        decode = decoders.get(e["kind"])
        if decode is not None:
            typed = decode(e["detail"])
            assert typed is not None and typed.encode() == e["detail"]
            seen += 1
        elif e["kind"] in MEMBER_ID_KINDS:
            assert member_id_of(e["detail"])
    assert seen > 0


def test_the_metrics_registry_is_what_compute_metrics_returns():
    """Every metric compute_metrics returns has its row in ``METRICS`` (and no row is left
    without a metric): the episode table, the summary and the sweep read that list."""
    scenario = load_scenario("crash", ["members=4"])
    result = run_scenario(scenario, seed=2)
    rates = {t.name: t.rate for t in scenario.config.topics}
    episodes, summary = compute_metrics(result.events, result.intervals, scenario.config, rates)
    assert len(episodes) > 1
    episode_names = [m.name for m in metrics_of("episode")]
    for episode in episodes:
        assert sorted(episode) == sorted(episode_names)
    run_names = {m.name for m in metrics_of("run")}
    assert set(summary) <= run_names and run_names <= set(result.summary)
    assert len(run_names) == len(metrics_of("run"))  # one row per run metric


def test_the_spark_patterns_read_what_the_runs_write():
    """``COUNT_PATTERN`` and ``REMOVAL_REASON_PATTERN`` (the capacity plan reads details with them
    in Spark) find the partition count and the removal reason in the details a run records."""
    import re

    from sim.observe.events import COUNT_PATTERN, REMOVAL_REASON_PATTERN

    result = run_scenario(load_scenario("crash", {"members": "6"}), seed=1)
    rows = result.events.to_pylist()
    counted = [r for r in rows if r["kind"] in ("assign", "revoke")]
    removed = [r for r in rows if r["kind"] == "member_removed"]
    assert counted and removed
    for r in counted:
        match = re.search(COUNT_PATTERN, r["detail"])
        assert match is not None and int(match.group(1)) > 0
        if r["kind"] == "revoke":
            decoded = Revoke.decode(r["detail"])
            assert decoded is not None and decoded.partitions == int(match.group(1))
    for r in removed:
        match = re.search(REMOVAL_REASON_PATTERN, r["detail"])
        assert match is not None and match.group(1) == "session_expired"
