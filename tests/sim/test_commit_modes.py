"""Manual commit modes (issue 12): commitSync() / commitAsync() after each poll batch, the
listener's commitSync() in onPartitionsRevoked and before close(), under both group protocols;
what each leaves to be processed twice, and what a commitSync() costs the poll loop."""

from __future__ import annotations

import pytest

from assignors import Assignment, TopicPartition
from sim.client.classic import Member
from sim.client.consumer import ConsumerMember
from sim.client.handoffs import Handoffs
from sim.config import AssignorCost, ConfigError, ConsumerConfig, GroupConfig
from sim.coordinator.classic.group import ClassicGroup
from sim.wire import messages as m

from .helpers import episode, events, intervals, run, scenario
from .test_group_core import form, sends

T = [TopicPartition("t", i) for i in range(4)]
RATE = 10.0  # records/s per partition in helpers.scenario
BATCH_S = 500 / 10000.0  # max_poll_records / capacity (the defaults)
LATENCY_S = 0.001  # the default constant one-way latency
CRASH_AT = 61.5
PROTOCOLS = {"classic": {}, "consumer": {"group_protocol": "consumer"}}


def _crash_run(mode, protocol="classic", **consumer):
    # members start together (the lab set-up): the crash falls 0.49 s after the last auto-commit
    return run(
        scenario(
            [{"action": "crash", "at_s": CRASH_AT, "member": "c001"}],
            strategy=("cooperative-sticky",),
            start_spread_s=0.0,
            consumer={"commit_mode": mode, **PROTOCOLS[protocol], **consumer},
        )
    )


def _owned_rate(r, member="c001"):
    return RATE * len({(i["topic"], i["partition"]) for i in intervals(r, "owned", member)})


# ---------------------------------------------------------------- end to end


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_sync_per_batch_crash_reprocesses_at_most_one_batch(protocol):
    """A crash re-processes only what the crashed member processed since its last commitSync:
    at most one poll batch and its commit's round trip; auto-commit loses up to 5 s."""
    sync = _crash_run("sync-per-batch", protocol)
    auto = _crash_run("auto", protocol)
    one_batch = _owned_rate(sync) * (BATCH_S + 2 * LATENCY_S)
    assert 0.0 < sync.summary["records_reprocessed"] <= one_batch + 1e-9
    assert sync.summary["records_reprocessed_crash"] == sync.summary["records_reprocessed"]
    assert auto.summary["records_reprocessed"] > 5 * one_batch  # 0.49 s since its last auto-commit


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_async_per_batch_crash_reprocesses_at_most_one_batch_when_commits_succeed(protocol):
    r = _crash_run("async-per-batch", protocol)
    assert 0.0 < r.summary["records_reprocessed"] <= _owned_rate(r) * BATCH_S + 1e-9


def _cut_then_crash(mode):
    """The link to the coordinator is cut at 40 s (commits are lost on the way), the member
    crashes at 44 s."""
    return run(
        scenario(
            [
                {
                    "action": "network_partition",
                    "at_s": 40.0,
                    "member": "c001",
                    "duration_s": 30.0,
                    "direction": "to_coordinator",
                },
                {"action": "crash", "at_s": 44.0, "member": "c001"},
            ],
            strategy=("cooperative-sticky",),
            consumer={"commit_mode": mode},
        )
    )


def test_async_commits_lost_in_flight_leave_their_records_to_the_new_owner():
    """commitAsync() does not wait: the member processes on while its commits are dropped, and
    the new owners process again everything since the cut. commitSync() blocks on the first lost
    commit, so the member stops processing and only one batch is processed twice."""
    lost, blocked = _cut_then_crash("async-per-batch"), _cut_then_crash("sync-per-batch")
    rate = _owned_rate(lost)
    assert lost.summary["records_reprocessed"] == pytest.approx(rate * 4.0, abs=rate * BATCH_S)
    assert blocked.summary["records_reprocessed"] <= rate * (BATCH_S + 2 * LATENCY_S) + 1e-9
    assert blocked.summary["records_reprocessed"] > 0.0


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
@pytest.mark.parametrize("mode", ["sync-per-batch", "async-per-batch"])
@pytest.mark.parametrize("strategy", [("range",), ("cooperative-sticky",)])
def test_manual_modes_hand_over_without_reprocessing(protocol, mode, strategy):
    """The listener's commitSync() in onPartitionsRevoked (scale-out) and before close()
    (scale-in) commits what was processed: the new owners process nothing twice."""
    if protocol == "consumer" and strategy == ("range",):
        pytest.skip("the consumer protocol has no client-side assignor")
    r = run(
        scenario(
            [{"action": "add_members", "at_s": 30.0}, {"action": "remove_members", "at_s": 60.0}],
            strategy=strategy,
            consumer={"commit_mode": mode, **PROTOCOLS[protocol]},
        )
    )
    assert r.summary["episodes"] == 2
    assert r.summary["records_reprocessed"] == pytest.approx(0.0, abs=1e-6)
    assert r.summary["partitions_touched"] > 0
    # what may fail meanwhile: classic cooperative members process on during the rebalance with
    # their batch commits refused on the client; under the consumer protocol a commit in flight
    # when the member's epoch moves gets STALE_MEMBER_EPOCH (a commitSync retries it with the new
    # epoch, the next commitAsync succeeds)
    assert all(
        "RebalanceInProgress" in e["detail"]
        or (protocol == "consumer" and e["detail"].endswith(m.STALE_MEMBER_EPOCH))
        for e in events(r, "commit_failed")
    )


def test_sync_commit_round_trip_slows_the_drain_of_a_backlog():
    """A commitSync() per batch costs a round trip per full batch: the lag after a crash drains
    more slowly than with commitAsync() (same run otherwise)."""
    slow = {"network": {"latency": {"kind": "constant", "ms": 20.0}}}
    sync = run(
        scenario(
            [{"action": "crash", "at_s": CRASH_AT, "member": "c001"}],
            strategy=("cooperative-sticky",),
            consumer={"commit_mode": "sync-per-batch", "capacity": 40.0, "max_poll_records": 20},
            **slow,
        )
    )
    asyn = run(
        scenario(
            [{"action": "crash", "at_s": CRASH_AT, "member": "c001"}],
            strategy=("cooperative-sticky",),
            consumer={"commit_mode": "async-per-batch", "capacity": 40.0, "max_poll_records": 20},
            **slow,
        )
    )
    assert sync.summary["lag_recovery_max_s"] > 1.05 * asyn.summary["lag_recovery_max_s"] > 0.0


def test_manual_mode_is_reproducible():
    a, b = _crash_run("async-per-batch"), _crash_run("async-per-batch")
    assert a.events.equals(b.events) and a.intervals.equals(b.intervals)


def test_commit_mode_is_validated():
    with pytest.raises(ConfigError, match="commit_mode"):
        ConsumerConfig(commit_mode="sometimes")


# ---------------------------------------------------------------- the classic member, sans I/O


def _member(mode, handoffs=None, name="a", strategy=("cooperative-sticky",), generation=1):
    cfg = ConsumerConfig(partition_assignment_strategy=strategy, commit_mode=mode)
    mb = Member(
        name,
        cfg,
        ("t",),
        lambda: (0, {"t": 4}),
        lambda: LATENCY_S,
        AssignorCost(),
        rates={"t": RATE},
        handoffs=handoffs,
    )
    mb.start(0.0)
    mb.handle(0.1, m.JoinGroupResponse(m.MEMBER_ID_REQUIRED, member_id=f"{name}-1"))
    mb.handle(0.2, m.JoinGroupResponse(m.NONE, generation, strategy[0], "other", f"{name}-1"))
    return mb


def _sent(effects, cls):
    return [e[2] for e in effects if e[0] == "send" and isinstance(e[2], cls)]


def _owning(mb, parts, at=1.0, committed=None):
    eff = mb.handle(at, m.SyncGroupResponse(m.NONE, Assignment(parts)))
    (fetch,) = _sent(eff, m.OffsetFetchRequest)
    mb.handle(
        at + 0.01,
        m.OffsetFetchResponse(m.NONE, fetch.partitions, (committed,) * len(parts), fetch.seq),
    )
    return mb


def _batch_end(mb):
    at = mb.timers[("batch",)]
    return at, mb.on_timer(at, ("batch",), at)


def _reprocessed(effects):
    evs = [e for e in effects if e[0] == "event" and e[1] == "reprocessed"]
    return sum(float(e[4].split("records=")[1].split()[0]) for e in evs), " ".join(
        e[4] for e in evs
    )


def test_commit_sync_blocks_the_poll_loop_for_its_round_trip():
    """While a commitSync() waits, the member processes nothing (its backlog grows at the
    production rate) and a rebalance flagged meanwhile waits for the answer."""
    mb = _owning(_member("sync-per-batch"), T[:2])
    at, eff = _batch_end(mb)
    (req,) = _sent(eff, m.OffsetCommitRequest)
    assert req.position_s == pytest.approx(at) and not mb.processing and ("batch",) not in mb.timers
    mb.hb_in_flight = 1
    eff = mb.handle(
        at + 0.001,
        m.HeartbeatResponse(
            m.REBALANCE_IN_PROGRESS, member_id=mb.member_id, generation=mb.generation
        ),
    )
    assert ("poll",) not in mb.timers and not _sent(eff, m.JoinGroupRequest)
    answered = at + 0.002
    eff = mb.handle(answered, m.OffsetCommitResponse(m.NONE, req.seq))
    assert mb.backlog == pytest.approx(2 * RATE * 0.002)
    (_join,) = _sent(eff, m.JoinGroupRequest)  # the poll after the commit rejoins
    assert mb.timers[("batch",)] == pytest.approx(answered + BATCH_S)


def test_commit_async_does_not_block():
    mb = _owning(_member("async-per-batch"), T[:2])
    at, eff = _batch_end(mb)
    (_req,) = _sent(eff, m.OffsetCommitRequest)
    assert mb.processing and mb.timers[("batch",)] == pytest.approx(at + BATCH_S)


def test_commits_are_refused_on_the_client_while_rebalancing():
    """ConsumerCoordinator.sendOffsetCommitRequest: a cooperative member that has sent its
    JoinGroup keeps processing, but its per-batch commits fail at once (RebalanceInProgress)."""
    mb = _owning(_member("async-per-batch"), T[:2])
    mb._request_rejoin("test")
    eff = mb._drain()
    mb._poll(2.0)
    assert _sent(mb._drain(), m.JoinGroupRequest) and mb.processing
    _at, eff = _batch_end(mb)
    assert not _sent(eff, m.OffsetCommitRequest)
    assert [
        e
        for e in eff
        if e[0] == "event" and e[1] == "commit_failed" and "RebalanceInProgress" in e[4]
    ]


def test_async_commit_rejected_after_the_group_moved_on_is_reprocessed_by_the_new_owner():
    """An async commit answered ILLEGAL_GENERATION (the group rebalanced without this member)
    fails; the member resets its generation and loses its partitions (no commit), and the new
    owner processes again everything from the last commit that succeeded, including what the
    rejected commit covered."""
    handoffs = Handoffs()
    a = _owning(_member("async-per-batch", handoffs), T[:2])
    store = {}
    at, eff = _batch_end(a)
    (good,) = _sent(eff, m.OffsetCommitRequest)
    a.handle(at + 0.002, m.OffsetCommitResponse(m.NONE, good.seq))
    store.update(dict.fromkeys(good.offsets, good.position_s))
    for _ in range(20):
        at, eff = _batch_end(a)
    (bad,) = _sent(eff, m.OffsetCommitRequest)
    eff = a.handle(at + 0.002, m.OffsetCommitResponse(m.ILLEGAL_GENERATION, bad.seq))
    assert a.generation == -1 and a.owned  # lost at the next poll, not yet
    poll_at = a.timers.get(("poll",), at + 0.002)
    eff = a.on_timer(poll_at, ("poll",), poll_at) if ("poll",) in a.timers else a._drain()
    assert not a.owned and not _sent(eff, m.OffsetCommitRequest)  # onPartitionsLost commits nothing
    b = _member("async-per-batch", handoffs, name="b")
    eff = b.handle(poll_at + 2.0, m.SyncGroupResponse(m.NONE, Assignment(T[:2])))
    (fetch,) = _sent(eff, m.OffsetFetchRequest)
    eff = b.handle(
        poll_at + 2.01,
        m.OffsetFetchResponse(
            m.NONE, fetch.partitions, tuple(store[tp] for tp in fetch.partitions), fetch.seq
        ),
    )
    records, detail = _reprocessed(eff)
    assert bad.position_s > good.position_s + 0.5
    assert records == pytest.approx(2 * RATE * (poll_at - good.position_s))
    assert "cause=fenced" in detail


def test_rejected_sync_commit_in_on_partitions_revoked_is_reprocessed_by_the_new_owner():
    """Cooperative: the listener's commitSync() for the revoked partitions is rejected; the
    revocation goes on (the application catches CommitFailedException) and the new owner
    processes again from the last successful commit. UNKNOWN_MEMBER_ID also resets the member's
    generation (it was removed), so the cause is ``fenced``."""
    handoffs = Handoffs()
    a = _owning(_member("sync-per-batch", handoffs), T[:2])
    at, eff = _batch_end(a)
    (good,) = _sent(eff, m.OffsetCommitRequest)
    a.handle(at + 0.002, m.OffsetCommitResponse(m.NONE, good.seq))
    a.timers.pop(("batch",))
    # a rebalance: T[1] moves away (generation 2)
    a._request_rejoin("test")
    a._poll(5.0)
    a._drain()
    a.handle(5.1, m.JoinGroupResponse(m.NONE, 2, "cooperative-sticky", "other", a.member_id))
    eff = a.handle(5.2, m.SyncGroupResponse(m.NONE, Assignment(T[:1])))
    revoked_at = a.timers.get(("poll",), 5.2)  # onJoinComplete runs at the next poll
    eff += a.on_timer(revoked_at, ("poll",), revoked_at) if ("poll",) in a.timers else []
    (rev,) = _sent(eff, m.OffsetCommitRequest)
    assert rev.generation == 2 and a.busy and T[1] in a.owned
    eff = a.handle(5.3, m.OffsetCommitResponse(m.UNKNOWN_MEMBER_ID, rev.seq))
    assert [
        e
        for e in eff
        if e[0] == "event" and e[1] == "commit_failed" and "onPartitionsRevoked" in e[4]
    ]
    eff += a.on_timer(5.3, ("callback",), a.timers[("callback",)])
    assert T[1] not in a.owned
    b = _member("sync-per-batch", handoffs, name="b")
    eff = b.handle(7.0, m.SyncGroupResponse(m.NONE, Assignment(T[1:2])))
    (fetch,) = _sent(eff, m.OffsetFetchRequest)
    eff = b.handle(
        7.01, m.OffsetFetchResponse(m.NONE, fetch.partitions, (good.position_s,), fetch.seq)
    )
    records, detail = _reprocessed(eff)
    assert records == pytest.approx(RATE * (revoked_at - good.position_s), rel=1e-6)
    assert "cause=fenced" in detail and a.generation == -1


def test_coordinator_rejects_old_generation_commits_with_illegal_generation_while_completing():
    """ClassicGroup.validateOffsetCommit checks the generation before the state: during
    CompletingRebalance a commit of the new generation gets REBALANCE_IN_PROGRESS, one of the old
    generation (an async commit in flight across the rebalance) ILLEGAL_GENERATION."""
    g = ClassicGroup(GroupConfig(), elide_heartbeats=False)
    ids, _ = form(g)
    (r,) = sends(
        g.handle(7.0, "a", m.OffsetCommitRequest(ids["a"], g.generation, None, 1, 1, (T[0],), 6.0))
    )
    assert r.error == m.REBALANCE_IN_PROGRESS
    (r,) = sends(
        g.handle(
            7.0, "a", m.OffsetCommitRequest(ids["a"], g.generation - 1, None, 1, 2, (T[0],), 6.0)
        )
    )
    assert r.error == m.ILLEGAL_GENERATION
    assert g.offsets.fetch((T[0],)) == (None,)


# ---------------------------------------------------------------- the consumer protocol's member


def _consumer(mode, handoffs, parts):
    mb = ConsumerMember(
        "c0",
        ConsumerConfig(group_protocol="consumer", commit_mode=mode),
        ("t",),
        rates={"t": RATE},
        handoffs=handoffs,
    )
    mb.start(0.0)
    eff = mb.handle(
        0.1,
        m.ConsumerGroupHeartbeatResponse(
            m.NONE, "c0-1", 1, 5.0, frozenset(parts), correlation=mb.hb_correlation
        ),
    )
    for key in sorted(k for k in mb.timers if k[0] in ("poll", "callback")):
        eff += mb.on_timer(mb.timers[key], key, mb.timers[key])
    mb.handle(
        0.3, m.ConsumerGroupHeartbeatResponse(m.NONE, "c0-1", 1, 5.0, correlation=mb.hb_correlation)
    )
    (fetch,) = _sent(eff, m.OffsetFetchRequest)
    mb.handle(
        0.31, m.OffsetFetchResponse(m.NONE, fetch.partitions, (None,) * len(parts), fetch.seq)
    )
    return mb


def test_consumer_protocol_manual_revocation_commits_in_the_listener_with_the_member_epoch():
    """No commit before the reconciliation (enable.auto.commit=false); the listener's
    commitSync() commits the revoked partition where its fetching stopped, with the member epoch;
    a STALE_MEMBER_EPOCH answer fails it and the new owner processes those records again."""
    handoffs = Handoffs()
    mb = _consumer("sync-per-batch", handoffs, T[:2])
    mb.timers.pop(("batch",))
    mb.hb_in_flight = True
    eff = mb.handle(
        10.0,
        m.ConsumerGroupHeartbeatResponse(
            m.NONE, "c0-1", 1, 5.0, frozenset(T[:1]), correlation=mb.hb_correlation
        ),
    )
    assert not _sent(eff, m.OffsetCommitRequest)  # reconciliation starts without a commit
    assert T[1] not in mb.owned  # pending revocation: not fetched any more
    poll_at = mb.timers[("poll",)]
    eff = mb.on_timer(poll_at, ("poll",), poll_at)
    (rev,) = _sent(eff, m.OffsetCommitRequest)
    assert rev.offsets == (T[1],) and rev.generation == 1 and rev.position_s == pytest.approx(10.0)
    eff = mb.handle(poll_at + 0.01, m.OffsetCommitResponse(m.STALE_MEMBER_EPOCH, rev.seq))
    assert [
        e
        for e in eff
        if e[0] == "event" and e[1] == "commit_failed" and "STALE_MEMBER_EPOCH" in e[4]
    ]
    b = _member("sync-per-batch", handoffs, name="b")
    eff = b.handle(20.0, m.SyncGroupResponse(m.NONE, Assignment(T[1:2])))
    (fetch,) = _sent(eff, m.OffsetFetchRequest)
    eff = b.handle(20.01, m.OffsetFetchResponse(m.NONE, fetch.partitions, (2.0,), fetch.seq))
    records, _ = _reprocessed(eff)
    assert records == pytest.approx(RATE * (10.0 - 2.0), rel=1e-6)


def test_episode_metrics_in_a_manual_mode_run():
    r = _crash_run("sync-per-batch")
    ep = episode(r)
    assert ep["records_reprocessed"] == r.summary["records_reprocessed"] > 0
    assert ep["first_record_max_s"] > 0
