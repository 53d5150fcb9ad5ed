"""The consumer's ConsumerCoordinator logic, driven directly (no trio, no network)."""

from __future__ import annotations

import pytest

from assignors import Assignment, TopicPartition
from sim.client.classic import Member, rebalance_protocol
from sim.client.states import ClassicMemberState
from sim.config import AssignorCost, ConsumerConfig
from sim.wire import messages as m

from .helpers import need_assignor

T = [TopicPartition("t", i) for i in range(4)]


def member(strategy=("range",), **cfg):
    for name in strategy:
        need_assignor(name)
    config = ConsumerConfig(partition_assignment_strategy=strategy, **cfg)
    return Member(
        "c0", config, ("t",), lambda: (0, {"t": 4}), lambda: 0.001, AssignorCost(mode="zero")
    )


def sent(effects, cls):
    return [e[2] for e in effects if e[0] == "send" and isinstance(e[2], cls)]


def closed(effects):
    return sorted(
        TopicPartition(e[3], e[4]) for e in effects if e[0] == "close" and e[1] == "owned"
    )


def heartbeat_response(mb, error):
    """The coordinator's answer to the heartbeat ``mb`` has in flight."""
    return m.HeartbeatResponse(error, member_id=mb.member_id, generation=mb.generation)


def stable(mb, parts, generation=1):
    """Bring ``mb`` to Stable owning ``parts`` in ``generation`` (as a follower)."""
    mb.start(0.0)
    mb.handle(0.1, m.JoinGroupResponse(m.MEMBER_ID_REQUIRED, member_id="c0-1"))
    mb.handle(
        0.2,
        m.JoinGroupResponse(
            m.NONE, generation, mb.config.partition_assignment_strategy[-1], "other", "c0-1"
        ),
    )
    return mb.handle(0.3, m.SyncGroupResponse(m.NONE, Assignment(list(parts))))


def test_protocol_is_highest_supported_by_all_assignors():
    """[range, cooperative-sticky] runs EAGER; [cooperative-sticky] alone runs COOPERATIVE."""
    need_assignor("cooperative-sticky")
    assert rebalance_protocol(["range", "cooperative-sticky"]) == "EAGER"
    assert rebalance_protocol(["cooperative-sticky"]) == "COOPERATIVE"


def test_eager_member_revokes_everything_before_joining():
    """EAGER: on REBALANCE_IN_PROGRESS the member stops processing and commits, and only when the
    commit returns revokes every partition and sends JoinGroup with no owned partitions."""
    mb = member()
    stable(mb, T[:2])
    mb.hb_in_flight = 1
    eff = mb.handle(5.0, heartbeat_response(mb, m.REBALANCE_IN_PROGRESS))
    (commit,) = sent(eff, m.OffsetCommitRequest)
    assert closed(eff) == [] and not sent(eff, m.JoinGroupRequest)
    assert mb.busy and not mb.processing
    eff = mb.handle(5.002, m.OffsetCommitResponse(m.NONE, commit.seq))
    assert closed(eff) == T[:2]
    (j,) = sent(eff, m.JoinGroupRequest)
    assert all(sub.owned_partitions == () for _, sub in j.protocols)
    assert mb.state == ClassicMemberState.PREPARING_REBALANCE and mb.processing


def test_cooperative_member_revokes_only_what_it_loses_and_rejoins():
    """COOPERATIVE: onJoinPrepare commits and waits for the commit (still processing), then
    JoinGroup carries owned partitions; SyncGroup with fewer partitions revokes only
    owned-minus-assigned and rejoins at once (after its onJoinPrepare commit again)."""
    mb = member(("cooperative-sticky",))
    stable(mb, T[:3])
    mb.hb_in_flight = 1
    eff = mb.handle(5.0, heartbeat_response(mb, m.REBALANCE_IN_PROGRESS))
    assert closed(eff) == [] and not sent(eff, m.JoinGroupRequest)
    (commit,) = sent(eff, m.OffsetCommitRequest)
    assert set(commit.offsets) == set(T[:3]) and mb.processing
    eff = mb.handle(5.01, m.OffsetCommitResponse(m.NONE, commit.seq))
    (j,) = sent(eff, m.JoinGroupRequest)
    assert set(j.protocols[0][1].owned_partitions) == set(T[:3])
    mb.handle(5.1, m.JoinGroupResponse(m.NONE, 2, "cooperative-sticky", "other", "c0-1"))
    eff = mb.handle(5.2, m.SyncGroupResponse(m.NONE, Assignment(T[:2])))
    assert closed(eff) == [T[2]]
    assert not sent(eff, m.JoinGroupRequest)
    prepare = sent(eff, m.OffsetCommitRequest)[-1]
    eff = mb.handle(5.21, m.OffsetCommitResponse(m.NONE, prepare.seq))
    (j2,) = sent(eff, m.JoinGroupRequest)
    assert set(j2.protocols[0][1].owned_partitions) == set(T[:2])


def test_fenced_member_loses_partitions_without_commit():
    """UNKNOWN_MEMBER_ID from a heartbeat resets the generation; partitions are lost (no commit)
    and the member rejoins without a member id."""
    mb = member()
    stable(mb, T[:2])
    mb.hb_in_flight = 1
    eff = mb.handle(5.0, heartbeat_response(mb, m.UNKNOWN_MEMBER_ID))
    assert closed(eff) == T[:2]
    assert not sent(eff, m.OffsetCommitRequest)
    (j,) = sent(eff, m.JoinGroupRequest)
    assert j.member_id == ""
    assert any(e[0] == "event" and e[1] == "partitions_lost" for e in eff)


def test_commit_fails_client_side_during_rebalance():
    """An auto-commit while the member is rebalancing fails locally with RebalanceInProgress."""
    mb = member(("cooperative-sticky",))
    stable(mb, T[:2])
    mb.hb_in_flight = 1
    (prepare,) = sent(
        mb.handle(5.0, heartbeat_response(mb, m.REBALANCE_IN_PROGRESS)), m.OffsetCommitRequest
    )
    mb.handle(5.01, m.OffsetCommitResponse(m.NONE, prepare.seq))  # onJoinPrepare done: joining
    mb.timers[("commit",)] = 6.0
    eff = mb.on_timer(6.0, ("commit",), 6.0)
    assert any(
        e[0] == "event" and e[1] == "commit_failed" and "RebalanceInProgress" in e[4] for e in eff
    )
    assert not sent(eff, m.OffsetCommitRequest)


def test_long_callback_exceeds_max_poll_interval():
    """A rebalance callback longer than max.poll.interval.ms makes a dynamic member leave."""
    mb = member(assign_cost_ms=120_000.0, max_poll_interval_ms=60_000.0)
    stable(mb, T[:1])
    assert mb.busy
    key = ("poll_timeout",)
    eff = mb.on_timer(mb.timers[key], key, mb.timers[key])
    assert sent(eff, m.LeaveGroupRequest)
    assert mb.generation == -1


def test_static_member_close_sends_no_leave_group():
    """Closing a static member revokes but sends no LeaveGroup (KIP-345); a dynamic one does."""
    for static, leaves in ((True, False), (False, True)):
        mb = member(static=static)
        stable(mb, T[:1])
        eff = mb.close(9.0)
        # ConsumerCoordinator.close: the auto-commit is synchronous, the leave comes after it
        (commit,) = sent(eff, m.OffsetCommitRequest)
        assert not sent(eff, m.LeaveGroupRequest) and mb.alive
        eff = mb.handle(9.01, m.OffsetCommitResponse(m.NONE, commit.seq))
        assert bool(sent(eff, m.LeaveGroupRequest)) is leaves and not mb.alive


def test_close_gives_up_waiting_for_its_commit_at_the_close_timeout():
    """A close() commit that is never answered is retried until the close timeout (30 s), then
    the member leaves anyway."""
    mb = member()
    stable(mb, T[:1])
    mb.close(9.0)
    left = []
    while mb.alive:
        key, at = min(mb.timers.items(), key=lambda kv: kv[1])
        left += sent(mb.on_timer(at, key, at), m.LeaveGroupRequest)
    assert left and 9.0 + 30.0 - 1.0 <= at <= 9.0 + 30.0 + mb.config.request_timeout_s


def test_join_and_sync_states():
    """The member goes UNJOINED -> PREPARING_REBALANCE -> COMPLETING_REBALANCE -> STABLE."""
    mb = member()
    mb.start(0.0)
    assert mb.state == ClassicMemberState.PREPARING_REBALANCE
    mb.handle(0.1, m.JoinGroupResponse(m.MEMBER_ID_REQUIRED, member_id="c0-1"))
    mb.handle(0.2, m.JoinGroupResponse(m.NONE, 1, "range", "other", "c0-1"))
    assert mb.state == ClassicMemberState.COMPLETING_REBALANCE
    mb.handle(0.3, m.SyncGroupResponse(m.NONE, Assignment(T[:1])))
    assert mb.state == ClassicMemberState.STABLE and mb.owned == {T[0]}


@pytest.mark.parametrize("error", [m.INCONSISTENT_GROUP_PROTOCOL, m.FENCED_INSTANCE_ID])
def test_fatal_join_errors_stop_the_member(error):
    """INCONSISTENT_GROUP_PROTOCOL and FENCED_INSTANCE_ID are fatal for the consumer."""
    mb = member()
    mb.start(0.0)
    mb.handle(0.1, m.JoinGroupResponse(error))
    assert not mb.alive and mb.failed


def loaded(strategy=("range",), rate=10000.0, seed=0, **cfg):
    """A member whose partitions each produce ``rate`` records/s (capacity 10,000/s)."""
    import numpy as np

    for name in strategy:
        need_assignor(name)
    config = ConsumerConfig(partition_assignment_strategy=strategy, **cfg)
    return Member(
        "c0",
        config,
        ("t",),
        lambda: (0, {"t": 4}),
        lambda: 0.001,
        AssignorCost(mode="zero"),
        rates={"t": rate},
        poll_rng=np.random.default_rng(seed),
    )


def test_rebalance_flag_waits_for_the_end_of_the_batch():
    """A member processing a backlog acts on REBALANCE_IN_PROGRESS only at its next poll(): after
    a delay drawn from [0, max.poll.records / capacity), the same for the same seed."""
    delays = []
    for seed in (0, 0, 1):
        mb = loaded(seed=seed)
        stable(mb, T[:2])
        mb.hb_in_flight = 1
        eff = mb.handle(5.0, heartbeat_response(mb, m.REBALANCE_IN_PROGRESS))
        assert not sent(eff, m.OffsetCommitRequest) and mb.processing and mb.rejoin_needed
        at = mb.timers[("poll",)]
        assert mb.batch_s(5.0) == pytest.approx(500 / 10000.0)
        assert 5.0 <= at < 5.0 + 500 / 10000.0
        eff = mb.on_timer(at, ("poll",), at)
        assert sent(eff, m.OffsetCommitRequest)  # onJoinPrepare starts now
        delays.append(at - 5.0)
    assert delays[0] == delays[1] != delays[2]


def test_batches_shrink_with_load_and_an_idle_member_reacts_at_once():
    """Keeping up, a batch lasts max.poll.records / capacity scaled by rate / capacity; a member
    with nothing to process polls at once."""
    mb = loaded(rate=1000.0)
    stable(mb, T[:2])
    assert mb.batch_s(60.0) == pytest.approx(500 / 10000.0 * 2000.0 / 10000.0)
    idle = loaded()
    stable(idle, [])
    idle.hb_in_flight = 1
    eff = idle.handle(5.0, heartbeat_response(idle, m.REBALANCE_IN_PROGRESS))
    assert sent(eff, m.JoinGroupRequest) and ("poll",) not in idle.timers


def test_cooperative_assignment_applies_at_the_next_poll():
    """COOPERATIVE: a SyncGroup response reaching a busy member is applied (revocation, new
    partitions, follow-up JoinGroup) at its next poll(), not on arrival."""
    mb = loaded(("cooperative-sticky",))
    stable(mb, T[:3])
    mb.hb_in_flight = 1
    mb.handle(5.0, heartbeat_response(mb, m.REBALANCE_IN_PROGRESS))
    (prepare,) = sent(
        mb.on_timer(mb.timers[("poll",)], ("poll",), mb.timers[("poll",)]), m.OffsetCommitRequest
    )
    mb.handle(5.05, m.OffsetCommitResponse(m.NONE, prepare.seq))
    mb.handle(5.1, m.JoinGroupResponse(m.NONE, 2, "cooperative-sticky", "other", "c0-1"))
    eff = mb.handle(5.2, m.SyncGroupResponse(m.NONE, Assignment(T[:2])))
    assert closed(eff) == [] and mb.pending_assignment is not None and not mb.settled
    at = mb.timers[("poll",)]
    assert 5.2 <= at < 5.25
    eff = mb.on_timer(at, ("poll",), at)
    assert closed(eff) == [T[2]]
    prepare = sent(eff, m.OffsetCommitRequest)[-1]  # the follow-up onJoinPrepare commit
    eff = mb.handle(at + 0.01, m.OffsetCommitResponse(m.NONE, prepare.seq))
    (j,) = sent(eff, m.JoinGroupRequest)
    assert set(j.protocols[0][1].owned_partitions) == set(T[:2])


def test_fenced_zombie_processes_until_its_next_poll():
    """After a heartbeat says UNKNOWN_MEMBER_ID, a busy member keeps its partitions until its next
    poll(), where onPartitionsLost drops them."""
    mb = loaded()
    stable(mb, T[:2])
    mb.hb_in_flight = 1
    eff = mb.handle(5.0, heartbeat_response(mb, m.UNKNOWN_MEMBER_ID))
    assert closed(eff) == [] and mb.owned == set(T[:2])
    at = mb.timers[("poll",)]
    eff = mb.on_timer(at, ("poll",), at)
    assert closed(eff) == T[:2] and any(e[0] == "event" and e[1] == "partitions_lost" for e in eff)


def test_close_during_a_callback_waits_for_it():
    """close() reaching a member inside a rebalance callback takes effect when the callback
    returns: it revokes, commits and sends LeaveGroup then (found by the random fault schedules)."""
    mb = member(assign_cost_ms=300.0)
    stable(mb, T[:1])
    assert mb.busy
    assert mb.close(0.4) == [] and mb.alive
    key = ("callback",)
    eff = mb.on_timer(mb.timers[key], key, mb.timers[key])
    (commit,) = sent(eff, m.OffsetCommitRequest)
    eff = mb.handle(0.51, m.OffsetCommitResponse(m.NONE, commit.seq))
    assert closed(eff) == T[:1] and sent(eff, m.LeaveGroupRequest) and not mb.alive


def test_assignment_outside_the_subscription_is_not_applied_and_the_member_rejoins():
    """ConsumerCoordinator.onJoinComplete: partitions of a topic the member does not subscribe to
    are refused; the member owns nothing and sends a new JoinGroup."""
    mb = member()
    eff = stable(mb, [TopicPartition("other", 0), T[0]])
    assert mb.owned == set()
    (j,) = sent(eff, m.JoinGroupRequest)
    assert j.reason == "received assignment does not match the current subscription"
    assert mb.state == ClassicMemberState.PREPARING_REBALANCE


def test_leader_accepts_a_duplicate_claim_that_one_claimant_keeps():
    """A static member that missed a generation rejoins claiming a partition its successor also
    claims (soak seed 1, schedule 7597). Kafka's validateCooperativeAssignment only rejects a
    partition added to one member while revoked from another; the higher generation keeping it
    is neither."""
    from assignors import Subscription

    mb = member(("cooperative-sticky",))
    mb.start(0.0)
    mb.handle(0.1, m.JoinGroupResponse(m.MEMBER_ID_REQUIRED, member_id="c0-1"))
    subs = (
        ("c1-1", Subscription(["t"], owned_partitions=[T[1], T[2], T[3]], generation=3)),
        ("c0-1", Subscription(["t"], owned_partitions=[T[0], T[1]], generation=2)),
    )
    effects = mb.handle(
        0.2, m.JoinGroupResponse(m.NONE, 4, "cooperative-sticky", "c0-1", "c0-1", subs)
    )
    assert [e for e in effects if e[0] == "violation"] == []
    sync = sent(effects, m.SyncGroupRequest)[0]
    given = dict(sync.assignments)
    assert T[1] in given["c1-1"].partitions and T[1] not in given["c0-1"].partitions


def test_leader_reports_a_partition_moved_in_one_round():
    from assignors import Subscription

    mb = member(("cooperative-sticky",))
    subs = {
        "a": Subscription(["t"], owned_partitions=[T[0]], generation=1),
        "b": Subscription(["t"], owned_partitions=[], generation=1),
    }
    mb._validate_cooperative(subs, {"a": Assignment([]), "b": Assignment([T[0]])})
    violations = [e[1] for e in mb.out if e[0] == "violation"]
    assert len(violations) == 1 and "t-0 owned by a to b" in violations[0]


def _moved_in_one_round(subs, result):
    """The reference: partitions added to one member and revoked from another, by sets."""
    added, revoked = set(), set()
    for mid, a in result.items():
        s = subs.get(mid)
        owned = set(s.owned_partitions) if s is not None else set()
        added |= set(a.partitions) - owned
        revoked |= owned - set(a.partitions)
    return sorted(str(tp) for tp in added & revoked)


@pytest.mark.parametrize("seed", range(6))
def test_cooperative_validation_matches_sets_on_assignor_output(seed):
    """The leader's integer-key check reports exactly the partitions a set-based check finds, on
    a real assignor's output (integer-backed lists) and on plain lists, over two topics."""
    import random

    from assignors import Subscription, get_assignor

    rng = random.Random(seed)
    meta = {"a": 7, "b": 13}
    tps = [TopicPartition(t, p) for t, n in meta.items() for p in range(n)]
    names = [f"m{i}" for i in range(5)]
    subs = {}
    for mid in names:  # random owned partitions, some claimed twice, one of a deleted topic
        owned = rng.sample(tps, rng.randrange(0, 6)) + (
            [TopicPartition("gone", 3)] if rng.random() < 0.3 else []
        )
        subs[mid] = Subscription(["a", "b"], owned_partitions=owned, generation=1)
    fast = get_assignor("range").assign(meta, subs)
    plain = {mid: Assignment(list(a.partitions)) for mid, a in fast.items()}
    for result in (fast, plain):
        mb = member(("cooperative-sticky",))
        mb._validate_cooperative(subs, result)
        found = sorted(
            e[1].split(" owned by")[0].split("gives ")[1] for e in mb.out if e[0] == "violation"
        )
        assert found == _moved_in_one_round(subs, result)
        assert found  # random ownership: range always moves something here (the check has teeth)


def _rebalance(mb, at, generation, parts):
    """A rebalance round of the cooperative follower ``mb``: REBALANCE_IN_PROGRESS, the
    onJoinPrepare commit, JoinGroup, then SyncGroup handing it ``parts``."""
    mb.hb_in_flight = 1
    eff = mb.handle(at, heartbeat_response(mb, m.REBALANCE_IN_PROGRESS))
    (commit,) = sent(eff, m.OffsetCommitRequest)
    mb.handle(at + 0.01, m.OffsetCommitResponse(m.NONE, commit.seq))
    mb.handle(
        at + 0.1, m.JoinGroupResponse(m.NONE, generation, "cooperative-sticky", "other", "c0-1")
    )
    return mb.handle(at + 0.2, m.SyncGroupResponse(m.NONE, Assignment(parts)))


def _sync_detail(effects):
    (detail,) = [e[4] for e in effects if e[0] == "event" and e[1] == "sync_received"]
    return detail


def test_an_unchanged_assignment_is_kept_without_building_its_partitions():
    """A member handed the partitions it owns, as the assignor's integer list, keeps them without
    building a TopicPartition; a list that differs from what it owns (here after it lost one in
    between) is applied partition by partition."""
    import numpy as np

    from assignors._layout import TopicLayout

    layout = TopicLayout({"t": 4})
    mb = member(("cooperative-sticky",))
    mb.start(0.0)
    mb.handle(0.1, m.JoinGroupResponse(m.MEMBER_ID_REQUIRED, member_id="c0-1"))
    mb.handle(0.2, m.JoinGroupResponse(m.NONE, 1, "cooperative-sticky", "other", "c0-1"))
    mb.handle(
        0.3, m.SyncGroupResponse(m.NONE, Assignment(layout.partition_list(np.array([0, 1, 2]))))
    )
    assert mb.owned == set(T[:3])
    same = layout.partition_list(np.array([0, 1, 2]))
    eff = _rebalance(mb, 5.0, 2, same)
    assert "added=0 revoked=0" in _sync_detail(eff) and mb.owned == set(T[:3])
    with pytest.raises(AttributeError):
        same._tps  # noqa: B018  (never built)
    mb._set_owned(
        7.0, remove=[T[1]]
    )  # owned changes outside a SyncGroup: the next list is compared in full
    eff = _rebalance(mb, 8.0, 3, layout.partition_list(np.array([0, 1, 2])))
    assert "added=1 revoked=0" in _sync_detail(eff) and mb.owned == set(T[:3])
