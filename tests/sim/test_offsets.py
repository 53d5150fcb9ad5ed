"""Committed offsets and records processed twice (issue 12): the coordinator's store, the member's
positions, and the metrics that count re-processing by cause."""

from __future__ import annotations

import math

import pytest

from assignors import Assignment, TopicPartition
from sim.client.classic import Member
from sim.client.handoffs import Handoffs
from sim.config import AssignorCost, ConsumerConfig, GroupConfig
from sim.coordinator.classic.group import ClassicGroup
from sim.coordinator.offsets import OffsetStore
from sim.wire import messages as m

from .helpers import episode, events, intervals, run, scenario
from .test_group_core import fire, form, sends, sync_all

T = [TopicPartition("t", i) for i in range(4)]
RATE = 10.0  # records/s per partition in helpers.scenario
CRASH_AT = 61.5


def test_crash_reprocesses_production_since_the_last_auto_commit():
    """The crashed member's partitions are processed again from its last auto-commit: rate x
    (crash - last commit) per partition (auto.commit.interval.ms = 5 s from its assignment)."""
    r = run(
        scenario(
            [{"action": "crash", "at_s": CRASH_AT, "member": "c001"}],
            strategy=("cooperative-sticky",),
        )
    )
    assigned_at = events(r, "assign", "c001")[0]["t"]
    last_commit = assigned_at + 5.0 * math.floor((CRASH_AT - assigned_at) / 5.0)
    lost = list(intervals(r, "owned", "c001"))
    expected = RATE * len(lost) * (CRASH_AT - last_commit)
    ep = episode(r)
    assert expected > 0
    assert ep["records_reprocessed_crash"] == pytest.approx(expected, rel=1e-6)
    assert ep["records_reprocessed"] == pytest.approx(expected, rel=1e-6)
    assert r.summary["records_reprocessed"] == pytest.approx(expected, rel=1e-6)


def test_shorter_auto_commit_interval_reprocesses_less():
    def sc(ms):
        return scenario(
            [{"action": "crash", "at_s": 63.5, "member": "c001"}],
            strategy=("cooperative-sticky",),
            consumer={"auto_commit_interval_ms": ms},
        )

    assert (
        run(sc(1000)).summary["records_reprocessed"] < run(sc(5000)).summary["records_reprocessed"]
    )


@pytest.mark.parametrize("strategy", [("range",), ("cooperative-sticky",)])
def test_graceful_leave_reprocesses_nothing(strategy):
    """close() commits before LeaveGroup, so the new owners start where the leaver stopped."""
    r = run(scenario([{"action": "remove_members", "at_s": 40.0, "count": 1}], strategy=strategy))
    assert r.summary["records_reprocessed"] == pytest.approx(0.0, abs=1e-6)
    assert r.summary["first_record_max_s"] > 0


def test_new_owner_waits_for_offset_fetch_and_first_fetch():
    """Time to first record: the OffsetFetch round trip, then a fetch, never above
    fetch.max.wait.ms plus the round trip."""
    r = run(scenario([{"action": "add_members", "at_s": 30.0}], strategy=("cooperative-sticky",)))
    firsts = list(events(r, "first_record", after=30.0))
    assert firsts
    for e in firsts:
        after = float(e["detail"].split("after_s=")[1])
        assert 0.0 < after <= 0.5 + 0.1


def _stable_member(name, handoffs, generation=1):
    cfg = ConsumerConfig(partition_assignment_strategy=("range",))
    mb = Member(
        name,
        cfg,
        ("t",),
        lambda: (0, {"t": 4}),
        lambda: 0.001,
        AssignorCost(),
        rates={"t": RATE},
        handoffs=handoffs,
    )
    mb.start(0.0)
    mb.handle(0.1, m.JoinGroupResponse(m.MEMBER_ID_REQUIRED, member_id=f"{name}-1"))
    mb.handle(0.2, m.JoinGroupResponse(m.NONE, generation, "range", "other", f"{name}-1"))
    return mb


def _sent(effects, cls):
    return [e[2] for e in effects if e[0] == "send" and isinstance(e[2], cls)]


def test_rejected_commit_is_reprocessed_by_the_new_owner():
    """An auto-commit rejected with REBALANCE_IN_PROGRESS leaves the previous commit in place;
    the next owner processes again everything from there, attributed to the failed commit."""
    handoffs = Handoffs()
    a = _stable_member("a", handoffs)
    eff = a.handle(1.0, m.SyncGroupResponse(m.NONE, Assignment(T[:2])))
    (fetch,) = _sent(eff, m.OffsetFetchRequest)
    a.handle(1.01, m.OffsetFetchResponse(m.NONE, fetch.partitions, (None, None), fetch.seq))
    store = {}
    a.timers[("commit",)] = 6.0
    (ok,) = _sent(a.on_timer(6.0, ("commit",), 6.0), m.OffsetCommitRequest)
    store.update(dict.fromkeys(ok.offsets, ok.position_s))
    a.handle(6.01, m.OffsetCommitResponse(m.NONE, ok.seq))
    a.timers[("commit",)] = 11.0
    (bad,) = _sent(a.on_timer(11.0, ("commit",), 11.0), m.OffsetCommitRequest)
    a.handle(11.01, m.OffsetCommitResponse(m.REBALANCE_IN_PROGRESS, bad.seq))
    a.crash(12.0)  # gives up both partitions after the rejected commit
    b = _stable_member("b", handoffs)
    eff = b.handle(13.0, m.SyncGroupResponse(m.NONE, Assignment(T[:2])))
    (fetch,) = _sent(eff, m.OffsetFetchRequest)
    eff = b.handle(
        13.01,
        m.OffsetFetchResponse(
            m.NONE, fetch.partitions, tuple(store.get(tp) for tp in fetch.partitions), fetch.seq
        ),
    )
    (ev,) = [e for e in eff if e[0] == "event" and e[1] == "reprocessed"]
    records = float(ev[4].split("records=")[1].split()[0])
    assert records == pytest.approx(2 * RATE * (12.0 - ok.position_s))
    assert "cause=crash" in ev[4]


def test_failed_commit_then_revocation_is_attributed_to_the_failed_commit():
    handoffs = Handoffs()
    a = _stable_member("a", handoffs)
    eff = a.handle(1.0, m.SyncGroupResponse(m.NONE, Assignment(T[:2])))
    (fetch,) = _sent(eff, m.OffsetFetchRequest)
    a.handle(1.01, m.OffsetFetchResponse(m.NONE, fetch.partitions, (None, None), fetch.seq))
    a.hb_in_flight = 1
    eff = a.handle(
        5.0,
        m.HeartbeatResponse(
            m.REBALANCE_IN_PROGRESS, member_id=a.member_id, generation=a.generation
        ),
    )
    at = a.timers[("poll",)]  # the poll thread acts after the batch in hand
    eff = a.on_timer(at, ("poll",), at)
    (prepare,) = _sent(eff, m.OffsetCommitRequest)
    eff = a.handle(5.1, m.OffsetCommitResponse(m.REBALANCE_IN_PROGRESS, prepare.seq))
    assert any(e[0] == "close" and e[1] == "owned" for e in eff)  # EAGER revokes after the commit
    b = _stable_member("b", handoffs)
    eff = b.handle(6.0, m.SyncGroupResponse(m.NONE, Assignment(T[:2])))
    (fetch,) = _sent(eff, m.OffsetFetchRequest)
    eff = b.handle(6.01, m.OffsetFetchResponse(m.NONE, fetch.partitions, (None, None), fetch.seq))
    # no committed offset at all: latest, so nothing is processed twice (what a had is skipped)
    assert not [e for e in eff if e[0] == "event" and e[1] == "reprocessed"]
    eff = b.handle(6.01, m.OffsetFetchResponse(m.NONE, fetch.partitions, (1.0, 1.0), fetch.seq))
    assert not [e for e in eff if e[0] == "event" and e[1] == "reprocessed"]  # answered once only
    c = _stable_member("c", handoffs)
    eff = c.handle(7.0, m.SyncGroupResponse(m.NONE, Assignment(T[:2])))
    (fetch,) = _sent(eff, m.OffsetFetchRequest)
    eff = c.handle(7.01, m.OffsetFetchResponse(m.NONE, fetch.partitions, (1.0, 1.0), fetch.seq))
    (ev,) = [e for e in eff if e[0] == "event" and e[1] == "reprocessed"]
    assert "cause=failed_commit" in ev[4]


def test_zombie_commit_is_rejected_and_not_stored():
    """A commit from a member the group removed (a zombie) fails with UNKNOWN_MEMBER_ID and
    leaves the committed offsets as they were."""
    g = ClassicGroup(GroupConfig(), elide_heartbeats=False)
    ids, _ = form(g)
    sync_all(g, ids)
    good = m.OffsetCommitRequest(ids["a"], g.generation, None, 1, 1, (T[0],), 20.0)
    assert sends(g.handle(20.0, "a", good), "a")[0].error == m.NONE
    fire(g, g.timers[("expire", ids["b"])], ("expire", ids["b"]))
    zombie = m.OffsetCommitRequest(ids["b"], 1, None, 1, 2, (T[0],), 50.0)
    (resp,) = sends(g.handle(60.0, "b", zombie), "b")
    assert resp.error == m.UNKNOWN_MEMBER_ID
    (answer,) = sends(g.handle(61.0, "a", m.OffsetFetchRequest(ids["a"], (T[0], T[1]), 7)), "a")
    assert answer.committed == (20.0, None) and answer.seq == 7


def test_random_heartbeat_phase_changes_eager_stall_and_is_reproducible():
    def sc(phase):
        return scenario(
            [{"action": "add_members", "at_s": 30.0}],
            members=8,
            partitions=16,
            consumer={"heartbeat_phase": phase},
        )

    aligned, drifted = run(sc("aligned")), run(sc("random"))
    assert drifted.summary["unassigned_partition_s"] != aligned.summary["unassigned_partition_s"]
    again = run(sc("random"))
    assert again.events.equals(drifted.events) and again.intervals.equals(drifted.intervals)


@pytest.mark.parametrize("elide", ["true", "false"])
@pytest.mark.parametrize("static", ["true", "false"])
@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_graceful_rolling_deploy_reprocesses_nothing(assignor, static, elide):
    """Every member closes (commit, a revocation callback of 10 ms per partition, then leave
    unless static) and comes back: each new owner
    starts where the previous one stopped, whether idle heartbeats are elided or not. (With
    elision, a quiet member's older auto-commit used to reach the coordinator after its close
    commit: about 100 records per member of a static deploy were processed twice.)"""
    from sim.scenario.builtins import load_scenario

    sc = load_scenario(
        "rolling-deploy",
        {
            "members": "30",
            "static": static,
            "assignor": assignor,
            "elide_heartbeats": elide,
            "consumer.revoke_cost_ms": "10",
        },
    )
    r = run(sc, seed=2)
    assert r.summary["records_reprocessed"] == pytest.approx(0.0, abs=1e-6)
    assert len(events(r, "close")) == 30


def test_a_quiet_member_closing_settles_its_elided_commits_first():
    """Closing while its heartbeats (and so its auto-commits) are elided: the last elided
    auto-commit goes to the coordinator before the close commit is sent, and none follows."""
    a = _stable_member("a", Handoffs())
    eff = a.handle(1.0, m.SyncGroupResponse(m.NONE, Assignment(T[:2])))
    (fetch,) = _sent(eff, m.OffsetFetchRequest)
    a.handle(1.01, m.OffsetFetchResponse(m.NONE, fetch.partitions, (None, None), fetch.seq))
    a.hb_in_flight = 1
    a.handle(
        2.0,
        m.HeartbeatResponse(
            m.NONE, quiet_epoch=0, received_at=1.99, member_id=a.member_id, generation=a.generation
        ),
    )
    assert a.quiet and a.commit_next is not None and a.commit_next < 12.3
    eff = a.close(12.3)
    kinds = [type(e[2]).__name__ for e in eff if e[0] in ("send", "control")]
    assert kinds.index("ElidedCommits") < kinds.index("OffsetCommitRequest")
    (elided,) = [e[2] for e in eff if e[0] == "control" and isinstance(e[2], m.ElidedCommits)]
    (close,) = _sent(eff, m.OffsetCommitRequest)
    assert elided.position_s < close.position_s
    eff = a.handle(12.31, m.OffsetCommitResponse(m.NONE, close.seq))  # close() waits for it
    for key, at in [(k, t) for k, t in a.timers.items() if k[0] == "callback"]:  # a revoke cost
        eff += a.on_timer(at, key, at)
    assert not [e for e in eff if e[0] == "control" and isinstance(e[2], m.ElidedCommits)]
    assert _sent(eff, m.LeaveGroupRequest) and not a.alive


def test_a_lagging_member_never_commits_a_partition_behind_where_it_started_it():
    """Position floors: a member 10 s behind takes a partition whose committed offset is 1 s old.
    Its shared position drops (5.5 s behind), but that partition is committed and handed on at
    its own position, so its next owner processes nothing twice; the member's own partition keeps
    the position it had reached."""
    handoffs = Handoffs()
    a = _stable_member("a", handoffs)
    eff = a.handle(1.0, m.SyncGroupResponse(m.NONE, Assignment(T[:1])))
    (fetch,) = _sent(eff, m.OffsetFetchRequest)
    a.handle(1.01, m.OffsetFetchResponse(m.NONE, fetch.partitions, (None,), fetch.seq))
    a._advance(50.0)
    a.backlog = RATE * 10.0  # 10 s of lag on t-0 at t=50
    a._set_owned(50.0, add=(T[1],))
    (fetch,) = [
        e[2] for e in a._drain() if e[0] == "send" and isinstance(e[2], m.OffsetFetchRequest)
    ]
    a.handle(50.0, m.OffsetFetchResponse(m.NONE, fetch.partitions, (49.0,), fetch.seq))
    shared = a._position_s(50.0)
    assert shared == pytest.approx(50.0 - 5.5)
    req = a._commit_request(50.0)
    assert req.position_s == pytest.approx(shared) and req.ahead == ((T[1], 49.0),)
    a._set_owned(50.0, remove=(T[1],))
    assert handoffs.processed(T[1], 51.0)[0] == 49.0  # handed on where it was, not at 44.5
    store = OffsetStore()
    store.commit(req.offsets, req.position_s, req.ahead)
    assert store.fetch(T[:2]) == (pytest.approx(shared), 49.0)
