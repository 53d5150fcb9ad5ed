"""Replay: same scenario and seed give the same bytes; heartbeat elision changes nothing seen."""

from __future__ import annotations

from sim import Scenario, run_scenario

from .helpers import need_assignor


def _scenario(elide=True, latency=None):
    need_assignor("cooperative-sticky")
    return Scenario.from_dict(
        {
            "name": "replay",
            "members": 4,
            "elide_heartbeats": elide,
            "topics": [{"name": "a", "partitions": 8, "rate": 5.0}, {"name": "b", "partitions": 3}],
            "consumer": {"partition_assignment_strategy": ["cooperative-sticky"]},
            "network": {"latency": latency or {"kind": "lognormal", "ms": 2.0, "sigma": 0.8}},
            "timeline": [
                {"action": "add_members", "at_s": 20},
                {"action": "crash", "at_s": 40, "member": "c001"},
                {"action": "pause", "at_s": 120, "member": "c002", "duration_s": 50},
                {"action": "add_partitions", "at_s": 200, "topic": "a", "count": 2},
            ],
        }
    )


def test_same_seed_gives_identical_parquet_bytes(tmp_path):
    """The same scenario and seed write byte-identical events and intervals files."""
    sc = _scenario()
    run_scenario(sc, seed=7, out_dir=tmp_path / "one")
    run_scenario(sc, seed=7, out_dir=tmp_path / "two")
    for name in ("events.parquet", "intervals.parquet"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == [
        "events.parquet",
        "intervals.parquet",
        "runs.parquet",
    ]


def test_other_seed_changes_latencies():
    """A different seed draws different latencies (the seed matters)."""
    a = run_scenario(_scenario(), seed=1)
    b = run_scenario(_scenario(), seed=2)
    assert a.events.column("t").to_pylist() != b.events.column("t").to_pylist()


def _protocol_view(result):
    keep = {
        "join_complete",
        "stable",
        "member_removed",
        "sync_received",
        "revoke",
        "assign",
        "settled",
    }
    ev = [
        (r["t"], r["kind"], r["member"], r["generation"])
        for r in result.events.to_pylist()
        if r["kind"] in keep
    ]
    iv = [
        (r["kind"], r["member"], r["topic"], r["partition"], r["start"], r["end"])
        for r in result.intervals.to_pylist()
    ]
    return ev, iv


def test_heartbeat_elision_is_exact_with_constant_latency():
    """With constant latency, eliding idle heartbeats gives the same ownership, rebalances and
    removals as sending every heartbeat."""
    const = {"kind": "constant", "ms": 1.0}
    elided = run_scenario(_scenario(True, const), seed=3)
    full = run_scenario(_scenario(False, const), seed=3)
    assert _protocol_view(elided) == _protocol_view(full)
    assert elided.summary["messages"] < full.summary["messages"]


def test_a_static_member_back_from_a_bounce_goes_quiet_again():
    """A static member that restarts within the session timeout takes its old membership back
    (KIP-345); the hold its stopped incarnation put on heartbeat elision is the old incarnation's,
    so the new one's idle heartbeats are elided again: a small fraction of the messages (without
    it, every restarted member heartbeated and committed for real until the end of the run). In
    this small group no later latency draw shifts, so events and intervals match sending every
    heartbeat; in general, under random latencies, the draws the elided heartbeats skip do move
    later ones."""
    from sim.scenario.builtins import load_scenario

    def run(elide):
        sc = load_scenario(
            "rolling-bounce-static", {"members": 8, "elide_heartbeats": str(elide).lower()}
        )
        return run_scenario(sc, seed=2)

    elided, full = run(True), run(False)
    assert elided.events.drop(["run_id"]).equals(full.events.drop(["run_id"]))
    assert elided.intervals.drop(["run_id"]).equals(full.intervals.drop(["run_id"]))
    assert elided.summary["messages"] * 10 < full.summary["messages"]
