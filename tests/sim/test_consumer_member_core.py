"""The new consumer's membership logic under the consumer group protocol (KIP-848), driven
directly (no trio, no network). Cases follow ConsumerMembershipManagerTest's reconciliation
scenarios: commit, revoke, assign, acknowledge; fencing; leaving."""

from __future__ import annotations

from assignors import TopicPartition
from sim.client.consumer import ConsumerMember
from sim.client.states import ConsumerMemberState
from sim.config import ConsumerConfig
from sim.wire import messages as m

T = [TopicPartition("t", i) for i in range(4)]


def member(**cfg):
    return ConsumerMember("c0", ConsumerConfig(group_protocol="consumer", **cfg), ("t",))


def sent(effects, cls=m.ConsumerGroupHeartbeatRequest):
    return [e[2] for e in effects if e[0] == "send" and isinstance(e[2], cls)]


def ok(mb, epoch, assignment=None, member_id="c0-1"):
    return m.ConsumerGroupHeartbeatResponse(
        m.NONE, member_id, epoch, 5.0, assignment, correlation=mb.hb_correlation
    )


def run_timers(mb, now, kinds=("poll", "callback")):
    """Fire the member's poll/callback timers due by ``now``, in time order."""
    out = []
    while True:
        due = sorted((at, k) for k, at in mb.timers.items() if k[0] in kinds and at <= now)
        if not due:
            return out
        at, key = due[0]
        out += mb.on_timer(at, key, at)


def beat(mb):
    """The next regular heartbeat goes out (so a response can answer it)."""
    at = mb.timers[("hb",)]
    return mb.on_timer(at, ("hb",), at)


def stable_with(mb, parts, epoch=1):
    mb.start(0.0)
    out = mb.handle(0.1, ok(mb, epoch, frozenset(parts)))
    out += run_timers(mb, 0.2)
    (ack,) = sent(out)
    mb.handle(0.3, ok(mb, epoch))
    assert mb.state == ConsumerMemberState.STABLE and ack.owned_partitions == frozenset(parts)
    return mb


def test_join_is_a_full_heartbeat_with_epoch_zero():
    mb = member()
    (req,) = sent(mb.start(0.0))
    assert (req.member_id, req.member_epoch) == ("", 0)
    assert req.subscribed_topics == ("t",) and req.rebalance_timeout_s == 300.0
    assert req.owned_partitions == frozenset() and mb.state == ConsumerMemberState.JOINING


def test_first_assignment_is_taken_at_the_next_poll_then_acknowledged_at_once():
    """Nothing owned: no commit; onPartitionsAssigned runs in poll() (at once: an idle poll loop
    polls at once), then an immediate heartbeat reports the new partitions (ACKNOWLEDGING),
    answered into STABLE."""
    mb = member(assign_cost_ms=100.0)
    mb.start(0.0)
    out = mb.handle(0.1, ok(mb, 1, frozenset(T[:2])))
    assert (
        mb.state == ConsumerMemberState.RECONCILING
        and mb.busy
        and not sent(out, m.OffsetCommitRequest)
    )
    assert sent(out) == []
    out += run_timers(mb, 0.5)
    (ack,) = sent(out)
    assert (
        ack.member_epoch == 1
        and ack.owned_partitions == frozenset(T[:2])
        and mb.state == ConsumerMemberState.ACKNOWLEDGING
    )
    assert ack.subscribed_topics is None  # only what changed is sent
    mb.handle(0.2, ok(mb, 1))
    assert (
        mb.state == ConsumerMemberState.STABLE and not mb.settled
    )  # still fetching its committed offsets
    (fetch,) = sent(out, m.OffsetFetchRequest)
    mb.handle(0.21, m.OffsetFetchResponse(m.NONE, fetch.partitions, (None, None), fetch.seq))
    out = run_timers(mb, 1.0, kinds=("first_record",))
    assert [e for e in out if e[0] == "event" and e[1] == "first_record"]
    assert mb.settled


def test_revocation_commits_first_then_revokes_then_acknowledges():
    """A smaller assignment: the revoked partition stops being fetched (pending revocation), the
    commit covers every partition, the member waits for it, runs the callbacks, then acknowledges
    with what is left."""
    mb = stable_with(member(revoke_cost_ms=100.0), T[:3])
    beat(mb)
    out = mb.handle(5.4, ok(mb, 1, frozenset(T[:2])))
    (commit,) = sent(out, m.OffsetCommitRequest)
    assert [e for e in out if e[0] == "close" and e[1] == "owned"] == [
        ("close", "owned", "c0", "t", 2)
    ]
    assert sent(out) == [] and mb.owned == set(T[:2]) and commit.offsets == tuple(T[:3])
    out = mb.handle(5.5, m.OffsetCommitResponse(m.NONE, commit.seq))
    out += run_timers(mb, 5.55)
    assert sent(out) == [] and mb.busy  # in onPartitionsRevoked (0.1 s)
    out = run_timers(mb, 5.8)
    (ack,) = sent(out)
    assert ack.owned_partitions == frozenset(T[:2]) and ack.member_epoch == 1


def test_ack_waits_for_the_heartbeat_in_flight():
    """The client keeps one heartbeat in flight: an acknowledgement due meanwhile goes out as soon
    as the answer comes."""
    mb2 = member(assign_cost_ms=10000.0)
    mb2.start(0.0)
    mb2.handle(0.1, ok(mb2, 1, frozenset(T[:1])))
    (regular,) = sent(beat(mb2))  # a regular heartbeat goes out before the reconciliation completes
    assert (
        regular.owned_partitions is None
    )  # still the old assignment (nothing): unchanged, not sent
    out = run_timers(mb2, 11.0)
    assert sent(out) == [] and mb2.hb_due and mb2.state == ConsumerMemberState.ACKNOWLEDGING
    out = mb2.handle(11.0, ok(mb2, 1))
    (ack,) = sent(out)
    assert ack.owned_partitions == frozenset(T[:1])


def test_fenced_member_loses_partitions_at_its_next_poll_and_rejoins_with_epoch_zero():
    mb = stable_with(member(), T[:2])
    beat(mb)
    out = mb.handle(
        5.4,
        m.ConsumerGroupHeartbeatResponse(
            m.FENCED_MEMBER_EPOCH, "c0-1", 1, correlation=mb.hb_correlation
        ),
    )
    out += run_timers(mb, 5.4)
    kinds = [e[1] for e in out if e[0] == "event"]
    assert "partitions_lost" in kinds and not mb.owned
    (join,) = sent(out)
    assert (join.member_id, join.member_epoch) == ("c0-1", 0)  # the id it has, as Kafka's client


def test_own_member_id_is_sent_from_the_first_heartbeat_and_kept():
    """KIP-1082: the consumer makes its member id once and sends it on its first heartbeat, on
    every heartbeat after, and when it rejoins after being fenced."""
    mb = ConsumerMember("c0", ConsumerConfig(group_protocol="consumer"), ("t",), member_id="Zk3x")
    (first,) = sent(mb.start(0.0))
    assert (first.member_id, first.member_epoch) == ("Zk3x", 0)
    mb.handle(0.1, ok(mb, 1, frozenset(T[:2]), member_id="Zk3x"))
    run_timers(mb, 0.2)
    mb.handle(0.3, ok(mb, 1, member_id="Zk3x"))
    (regular,) = sent(beat(mb))
    assert (regular.member_id, regular.member_epoch) == ("Zk3x", 1)
    out = mb.handle(
        5.4,
        m.ConsumerGroupHeartbeatResponse(
            m.UNKNOWN_MEMBER_ID, "Zk3x", 1, correlation=mb.hb_correlation
        ),
    )
    out += run_timers(mb, 5.4)
    (rejoin,) = sent(out)
    assert (rejoin.member_id, rejoin.member_epoch, rejoin.owned_partitions) == (
        "Zk3x",
        0,
        frozenset(),
    )


def test_unreleased_instance_id_is_fatal():
    mb = member(static=True)
    mb.start(0.0)
    mb.handle(
        0.1,
        m.ConsumerGroupHeartbeatResponse(
            m.UNRELEASED_INSTANCE_ID, "", 0, correlation=mb.hb_correlation
        ),
    )
    assert mb.failed and not mb.alive


def test_close_revokes_then_leaves_static_with_minus_two():
    """close(): commitSync of everything consumed, then the callback and the leave (the
    AsyncKafkaConsumer's releaseAssignmentAndLeaveGroup)."""
    mb = stable_with(member(static=True), T[:2])
    out = mb.close(6.0)
    (commit,) = sent(out, m.OffsetCommitRequest)
    assert sent(out) == [] and mb.alive
    (leave,) = sent(mb.handle(6.01, m.OffsetCommitResponse(m.NONE, commit.seq)))
    assert (
        leave.member_epoch == m.LEAVE_GROUP_STATIC_MEMBER_EPOCH and leave.group_instance_id == "c0"
    )


def test_dynamic_close_leaves_with_minus_one():
    mb = stable_with(member(), T[:2])
    (commit,) = sent(mb.close(6.0), m.OffsetCommitRequest)
    (leave,) = sent(mb.handle(6.01, m.OffsetCommitResponse(m.UNKNOWN_MEMBER_ID, commit.seq)))
    assert leave.member_epoch == m.LEAVE_GROUP_MEMBER_EPOCH  # a failed commit does not keep it


def test_pause_past_the_poll_interval_leaves_and_rejoins():
    """Back from a pause past max.poll.interval.ms: it leaves, loses its partitions, and rejoins
    with epoch 0 once the leave is answered (one heartbeat in flight at a time)."""
    mb = stable_with(member(max_poll_interval_ms=30000), T[:2])
    mb.pause(1.0)
    out = mb.resume(40.0)
    out += run_timers(mb, 40.0)
    assert [r.member_epoch for r in sent(out)] == [m.LEAVE_GROUP_MEMBER_EPOCH]
    assert not mb.owned
    out = mb.handle(
        40.002,
        m.ConsumerGroupHeartbeatResponse(
            m.NONE, "c0-1", m.LEAVE_GROUP_MEMBER_EPOCH, correlation=mb.leave_correlation
        ),
    )
    assert [r.member_epoch for r in sent(out)] == [0]


def test_a_static_members_rejoin_is_not_answered_by_its_leaves_response():
    """Soak seed 3, schedule 123: a static member back from a long pause left with epoch -2 and
    rejoined at once; the leave's response (epoch -2) was taken for the join's and its epoch went
    back. The join now waits for that response, which changes neither member id nor epoch."""
    mb = stable_with(member(max_poll_interval_ms=30000, static=True), T[:2], epoch=5)
    mb.pause(1.0)
    out = mb.resume(40.0) + run_timers(mb, 40.0)
    assert [r.member_epoch for r in sent(out)] == [m.LEAVE_GROUP_STATIC_MEMBER_EPOCH]
    out = mb.handle(
        40.002,
        m.ConsumerGroupHeartbeatResponse(
            m.NONE, "c0-1", m.LEAVE_GROUP_STATIC_MEMBER_EPOCH, correlation=mb.leave_correlation
        ),
    )
    (join,) = sent(out)
    assert (join.member_id, join.member_epoch, join.group_instance_id) == ("c0-1", 0, "c0")
    out = mb.handle(
        40.004,
        m.ConsumerGroupHeartbeatResponse(
            m.NONE, "c0-7", 6, 5.0, frozenset(T[:2]), correlation=mb.hb_correlation
        ),
    )
    assert not [e for e in out if e[0] == "violation"]
    assert (mb.member_id, mb.epoch) == ("c0-7", 6)


def test_epoch_going_back_is_a_violation():
    mb = stable_with(member(), T[:1], epoch=3)
    beat(mb)
    out = mb.handle(5.4, ok(mb, 2))
    assert any(e[0] == "violation" for e in out)


def test_commit_before_reconciliation_is_retried_until_the_rebalance_timeout():
    """A lost commit before a reconciliation is sent again after request.timeout.ms (Kafka's
    maybeAutoCommitSyncBeforeRevocation retries until the rebalance timeout), so the reconciliation
    completes soon after the retry succeeds instead of waiting out max.poll.interval.ms."""
    mb = stable_with(member(request_timeout_ms=30000, max_poll_interval_ms=300000), T[:3])
    beat(mb)
    out = mb.handle(5.4, ok(mb, 1, frozenset(T[:2])))
    (first,) = sent(out, m.OffsetCommitRequest)
    at = mb.timers[("rec_commit",)]
    assert at == 5.4 + 30.0
    mb.on_timer(at, ("rec_commit",), at)  # no answer: retry after the backoff
    assert mb.app_work is None
    due = mb.timers[("rec_commit_retry",)]
    out = mb.on_timer(due, ("rec_commit_retry",), due)
    (second,) = sent(out, m.OffsetCommitRequest)
    assert second.seq != first.seq
    mb.handle(due + 0.1, m.OffsetCommitResponse(m.NONE, first.seq))  # the first, late: not it
    assert mb.app_work is None
    out = mb.handle(due + 0.2, m.OffsetCommitResponse(m.NONE, second.seq))
    out += run_timers(mb, due + 0.3)
    (ack,) = sent(out)  # the callbacks ran: acknowledged with what is left
    assert ack.owned_partitions == frozenset(T[:2])


def test_commit_before_reconciliation_gives_up_at_the_rebalance_timeout():
    mb = stable_with(member(request_timeout_ms=30000, max_poll_interval_ms=45000), T[:3])
    beat(mb)
    mb.handle(5.4, ok(mb, 1, frozenset(T[:2])))
    at = mb.timers[("rec_commit",)]
    mb.on_timer(at, ("rec_commit",), at)
    due = mb.timers[("rec_commit_retry",)]
    mb.on_timer(due, ("rec_commit_retry",), due)
    at = mb.timers[("rec_commit",)]
    assert at == 5.4 + 45.0  # the second attempt is cut at the deadline
    out = mb.on_timer(at, ("rec_commit",), at)
    assert any(e[0] == "event" and e[1] == "commit_failed" for e in out)
    out += run_timers(mb, at + 0.1)
    (ack,) = sent(out)  # reconciled anyway
    assert ack.owned_partitions == frozenset(T[:2])


def test_a_restarted_member_ignores_answers_to_its_predecessors_requests():
    """A heartbeat the crashed incarnation sent (delayed on the network) is answered after the
    restart: the new client must not take that member id and epoch (soak seed 2, schedule 7561)."""
    mb = member(static=True)
    mb.start(98.4)
    stale = m.ConsumerGroupHeartbeatResponse(
        m.NONE, "c0-2", 9, 5.0, frozenset(), correlation=(0.0, 40)
    )
    mb.handle(99.0, stale)
    assert mb.state == ConsumerMemberState.JOINING and mb.member_id == "" and mb.hb_in_flight
    mb.handle(99.1, ok(mb, 10, frozenset(T[:1]), member_id="c0-7"))
    assert mb.member_id == "c0-7" and mb.state in (
        ConsumerMemberState.RECONCILING,
        ConsumerMemberState.ACKNOWLEDGING,
    )


def test_a_fetch_whose_partitions_were_revoked_ends_with_an_event():
    """The consumer protocol's run re-checks whether the group settled only when a core records an
    event: an OffsetFetch that times out after its partitions were revoked must say so, or the run
    never sees the member settle (soak seed 2, schedule 5115)."""
    mb = stable_with(member(request_timeout_ms=30000), T[:3])
    ((seq, (_, parts)),) = mb.fetches.items()
    mb._set_owned(1.0, remove=list(parts))
    at = mb.timers[("fetch_timeout", seq)]
    out = mb.on_timer(at, ("fetch_timeout", seq), at)
    assert not mb.fetches
    assert [e for e in out if e[0] == "event" and e[1] == "offset_fetch_dropped"]


def test_issue_34_a_full_heartbeat_during_the_assigned_callback_reports_the_old_assignment():
    """Kafka's hazard (issue 34): the client reports ``currentAssignment``, updated only after the
    callbacks (AbstractMembershipManager), so a full heartbeat sent while onPartitionsAssigned
    runs (here the retry after a timed-out heartbeat) leaves out the partition the member already
    fetches; the member names it in ``owned_report_before_callback``. A heartbeat that reports
    nothing new (no owned partitions sent) names nothing."""
    mb = member(assign_cost_ms=20000.0)
    mb.start(0.0)
    out = mb.handle(0.1, ok(mb, 1, frozenset(T[:1])))
    out += run_timers(mb, 20.2)
    sent(out)  # the acknowledgement
    mb.handle(20.3, ok(mb, 1))
    assert mb.state == ConsumerMemberState.STABLE
    beat(mb)
    out = mb.handle(25.4, ok(mb, 2, frozenset(T[:2])))
    (commit,) = sent(out, m.OffsetCommitRequest)  # the auto-commit before reconciling
    out += mb.handle(25.45, m.OffsetCommitResponse(m.NONE, commit.seq))
    out += run_timers(mb, 25.5)  # the reconciliation goes on: onPartitionsAssigned(t-1) runs 20 s
    assert T[1] in mb.owned and mb.current_assignment == frozenset(T[:1])
    assert not [e for e in out if e[0] == "event" and e[1] == "owned_report_before_callback"]
    regular = beat(mb)
    (req,) = sent(regular)
    assert req.owned_partitions is None
    at = mb.timers[("hb_timeout",)]
    out = mb.on_timer(at, ("hb_timeout",), at)  # no answer: the retry is a full heartbeat
    out += beat(mb)
    (full,) = sent(out)
    assert full.owned_partitions == frozenset(T[:1]) and full.subscribed_topics == ("t",)
    (event,) = [e for e in out if e[0] == "event" and e[1] == "owned_report_before_callback"]
    assert event[4] == "member_id=c0-1 partitions=t-1"
