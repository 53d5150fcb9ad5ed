"""The consumer's ConsumerCoordinator logic, driven directly (no trio, no network)."""

from __future__ import annotations

import pytest

from assignors import Assignment, TopicPartition
from sim import messages as m
from sim.config import AssignorCost, ConsumerConfig
from sim.member import COMPLETING_REBALANCE, PREPARING_REBALANCE, STABLE, Member, rebalance_protocol

from .helpers import need_assignor

T = [TopicPartition("t", i) for i in range(4)]


def member(strategy=("range",), **cfg):
    for name in strategy:
        need_assignor(name)
    config = ConsumerConfig(partition_assignment_strategy=strategy, **cfg)
    return Member("c0", config, ("t",), lambda: (0, {"t": 4}), lambda: 0.001, AssignorCost())


def sent(effects, cls):
    return [e[2] for e in effects if e[0] == "send" and isinstance(e[2], cls)]


def closed(effects):
    return sorted(TopicPartition(e[3], e[4]) for e in effects if e[0] == "close" and e[1] == "owned")


def stable(mb, parts, generation=1):
    """Bring ``mb`` to Stable owning ``parts`` in ``generation`` (as a follower)."""
    mb.start(0.0)
    mb.handle(0.1, m.JoinGroupResponse(m.MEMBER_ID_REQUIRED, member_id="c0-1"))
    mb.handle(0.2, m.JoinGroupResponse(m.NONE, generation, mb.config.partition_assignment_strategy[-1],
                                       "other", "c0-1"))
    return mb.handle(0.3, m.SyncGroupResponse(m.NONE, Assignment(list(parts))))


def test_protocol_is_highest_supported_by_all_assignors():
    """[range, cooperative-sticky] runs EAGER; [cooperative-sticky] alone runs COOPERATIVE."""
    need_assignor("cooperative-sticky")
    assert rebalance_protocol(["range", "cooperative-sticky"]) == "EAGER"
    assert rebalance_protocol(["cooperative-sticky"]) == "COOPERATIVE"


def test_eager_member_revokes_everything_before_joining():
    """EAGER: on REBALANCE_IN_PROGRESS the member commits, revokes every partition, then sends
    JoinGroup with no owned partitions."""
    mb = member()
    stable(mb, T[:2])
    mb.hb_in_flight = True
    eff = mb.handle(5.0, m.HeartbeatResponse(m.REBALANCE_IN_PROGRESS))
    assert closed(eff) == T[:2]
    assert sent(eff, m.OffsetCommitRequest)
    (j,) = sent(eff, m.JoinGroupRequest)
    assert all(sub.owned_partitions == () for _, sub in j.protocols)
    assert mb.state == PREPARING_REBALANCE


def test_cooperative_member_revokes_only_what_it_loses_and_rejoins():
    """COOPERATIVE: JoinGroup carries owned partitions; SyncGroup with fewer partitions revokes
    only owned-minus-assigned and rejoins at once."""
    mb = member(("cooperative-sticky",))
    stable(mb, T[:3])
    mb.hb_in_flight = True
    eff = mb.handle(5.0, m.HeartbeatResponse(m.REBALANCE_IN_PROGRESS))
    assert closed(eff) == []
    (j,) = sent(eff, m.JoinGroupRequest)
    assert set(j.protocols[0][1].owned_partitions) == set(T[:3])
    mb.handle(5.1, m.JoinGroupResponse(m.NONE, 2, "cooperative-sticky", "other", "c0-1"))
    eff = mb.handle(5.2, m.SyncGroupResponse(m.NONE, Assignment(T[:2])))
    assert closed(eff) == [T[2]]
    (j2,) = sent(eff, m.JoinGroupRequest)
    assert set(j2.protocols[0][1].owned_partitions) == set(T[:2])


def test_fenced_member_loses_partitions_without_commit():
    """UNKNOWN_MEMBER_ID from a heartbeat resets the generation; partitions are lost (no commit)
    and the member rejoins without a member id."""
    mb = member()
    stable(mb, T[:2])
    mb.hb_in_flight = True
    eff = mb.handle(5.0, m.HeartbeatResponse(m.UNKNOWN_MEMBER_ID))
    assert closed(eff) == T[:2]
    assert not sent(eff, m.OffsetCommitRequest)
    (j,) = sent(eff, m.JoinGroupRequest)
    assert j.member_id == ""
    assert any(e[0] == "event" and e[1] == "partitions_lost" for e in eff)


def test_commit_fails_client_side_during_rebalance():
    """An auto-commit while the member is rebalancing fails locally with RebalanceInProgress."""
    mb = member(("cooperative-sticky",))
    stable(mb, T[:2])
    mb.hb_in_flight = True
    mb.handle(5.0, m.HeartbeatResponse(m.REBALANCE_IN_PROGRESS))
    mb.timers[("commit",)] = 6.0
    eff = mb.on_timer(6.0, ("commit",), 6.0)
    assert any(e[0] == "event" and e[1] == "commit_failed" and "RebalanceInProgress" in e[4] for e in eff)
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
        assert bool(sent(eff, m.LeaveGroupRequest)) is leaves


def test_join_and_sync_states():
    """The member goes UNJOINED -> PREPARING_REBALANCE -> COMPLETING_REBALANCE -> STABLE."""
    mb = member()
    mb.start(0.0)
    assert mb.state == PREPARING_REBALANCE
    mb.handle(0.1, m.JoinGroupResponse(m.MEMBER_ID_REQUIRED, member_id="c0-1"))
    mb.handle(0.2, m.JoinGroupResponse(m.NONE, 1, "range", "other", "c0-1"))
    assert mb.state == COMPLETING_REBALANCE
    mb.handle(0.3, m.SyncGroupResponse(m.NONE, Assignment(T[:1])))
    assert mb.state == STABLE and mb.owned == {T[0]}


@pytest.mark.parametrize("error", [m.INCONSISTENT_GROUP_PROTOCOL, m.FENCED_INSTANCE_ID])
def test_fatal_join_errors_stop_the_member(error):
    """INCONSISTENT_GROUP_PROTOCOL and FENCED_INSTANCE_ID are fatal for the consumer."""
    mb = member()
    mb.start(0.0)
    mb.handle(0.1, m.JoinGroupResponse(error))
    assert not mb.alive and mb.failed
