"""Idle heartbeat elision under the consumer group protocol: the member and coordinator cores
driven directly (no trio), then whole runs compared with and without elision."""

from __future__ import annotations

import copy

import pytest

from assignors import TopicPartition
from sim import Scenario, run_scenario
from sim.client.consumer import ConsumerMember
from sim.client.states import ConsumerMemberState
from sim.config import AssignorCost, ConsumerConfig, GroupConfig
from sim.coordinator.consumer.group import ConsumerGroup
from sim.scenario.builtins import load_scenario
from sim.testing import soak
from sim.wire import messages as m

T = [TopicPartition("t", i) for i in range(4)]
LATENCY_S = 0.001


def quiet_member(**cfg):
    """A STABLE member owning T[0:2] at epoch 1 whose acknowledgement (sent at 0.1, counted by the
    coordinator at 0.25) was answered with a quiet offer; its next heartbeat was due at 5.1."""
    mb = ConsumerMember(
        "c0",
        ConsumerConfig(group_protocol="consumer", **cfg),
        ("t",),
        sample_latency=lambda: LATENCY_S,
        elide_heartbeats=True,
    )
    mb.start(0.0)
    mb.handle(
        0.1,
        m.ConsumerGroupHeartbeatResponse(
            m.NONE, "c0-1", 1, 5.0, frozenset(T[:2]), correlation=mb.hb_correlation
        ),
    )
    while due := [k for k in mb.timers if k[0] in ("poll", "callback")]:
        mb.on_timer(mb.timers[due[0]], due[0], mb.timers[due[0]])
    mb.handle(0.2, m.OffsetFetchResponse(m.NONE, tuple(T[:2]), (None, None), 1))
    assert mb.state == "ACKNOWLEDGING"
    out = mb.handle(
        0.3,
        m.ConsumerGroupHeartbeatResponse(
            m.NONE,
            "c0-1",
            1,
            5.0,
            None,
            quiet_epoch=0,
            received_at=0.25,
            correlation=mb.hb_correlation,
        ),
    )
    assert mb.state == ConsumerMemberState.STABLE
    return mb, out


def notes(effects, cls):
    return [e[2] for e in effects if e[0] == "control" and isinstance(e[2], cls)]


def sends(effects, cls):
    return [e for e in effects if e[0] == "send" and isinstance(e[2], cls)]


def test_a_stable_member_takes_the_offer_and_stops_its_heartbeat_timer():
    """Offered quiet while STABLE with nothing in progress: it says so and sends no more idle
    heartbeats (its heartbeat timer is gone)."""
    mb, out = quiet_member()
    assert mb.quiet and notes(out, m.Quiet) == [m.Quiet("c0-1", 0)]
    assert ("hb",) not in mb.timers and mb.quiet_next == 0.1 + 5.0


def test_a_reconciling_member_declines_the_offer():
    """A member with a reconciliation in progress keeps heartbeating."""
    mb = ConsumerMember(
        "c0", ConsumerConfig(group_protocol="consumer"), ("t",), elide_heartbeats=True
    )
    mb.start(0.0)
    out = mb.handle(
        0.1,
        m.ConsumerGroupHeartbeatResponse(
            m.NONE, "c0-1", 1, 5.0, frozenset(T[:2]), quiet_epoch=0, correlation=mb.hb_correlation
        ),
    )
    assert not mb.quiet and not notes(out, m.Quiet) and ("hb",) in mb.timers


def test_auto_commits_while_quiet_are_computed_not_sent():
    """While quiet no commit timer runs: the auto-commits due by the next input are computed
    then (the timer's own arithmetic), kept, not sent."""
    mb, _ = quiet_member()
    assert ("commit",) not in mb.timers and mb.commit_due is not None
    due = mb.commit_due
    out = mb.on_control(due + 5.0 + 0.5, "nothing")  # an input after two ticks
    assert not sends(out, m.OffsetCommitRequest) and [t for t, _ in mb.quiet_commits] == [
        due,
        due + 5.0,
    ]
    assert mb.quiet_commits[-1][1].offsets == tuple(T[:2])
    assert mb.commit_due == due + 5.0 + 5.0


def test_a_wake_puts_the_commit_timer_back_where_it_would_be():
    mb, _ = quiet_member()
    due = mb.commit_due
    mb.on_control(due + 1.0, m.Wake(1, trigger_rank=7))
    assert not mb.quiet and mb.timers[("commit",)] == due + 5.0 and mb.commit_due is None


def test_wake_replays_the_schedule_with_the_timers_own_arithmetic():
    """Woken at t: the last elided heartbeat that arrived gives the session start, and the next
    heartbeat is due exactly where the timer (each one interval after the previous) would be."""
    mb, _ = quiet_member()
    first = mb.quiet_next
    expected = [first]
    while expected[-1] + 5.0 <= 23.0:
        expected.append(expected[-1] + 5.0)
    out = mb.on_control(23.0, m.Wake(1, trigger_rank=7))
    (unquiet,) = notes(out, m.Unquiet)
    assert unquiet.last_arrival == expected[-1] + LATENCY_S
    assert mb.timers[("hb",)] == expected[-1] + 5.0 and not mb.quiet
    assert not sends(out, m.ConsumerGroupHeartbeatRequest)


def test_a_heartbeat_in_flight_at_the_wake_is_sent_with_its_send_time():
    """Woken while an elided heartbeat is still on its way: that one is sent for real, as sent at
    its own time (it arrives when it would have), and the session start is the one before."""
    mb, _ = quiet_member()
    due = mb.quiet_next + 5.0 + 5.0  # the third elided heartbeat
    out = mb.on_control(due + LATENCY_S / 2, m.Wake(1))
    (unquiet,) = notes(out, m.Unquiet)
    assert unquiet.last_arrival == mb.quiet_next + 5.0 + LATENCY_S
    (send,) = sends(out, m.ConsumerGroupHeartbeatRequest)
    assert send[3] == due and send[2].member_epoch == 1 and send[2].owned_partitions is None
    assert mb.hb_in_flight and mb.timers[("hb",)] == due + 5.0


def test_a_tie_at_the_wake_instant_follows_the_kernel_rank_order():
    """An elided heartbeat arriving at the very instant of the wake was handled before the input
    that woke the member only if that input came from a higher rank."""
    mb, _ = quiet_member()
    twin, _ = quiet_member()  # the same member (a compiled core cannot be deep-copied)
    arrival = mb.quiet_next + LATENCY_S
    assert twin.quiet_next + LATENCY_S == arrival
    mb.rank = twin.rank = 5
    before = notes(twin.on_control(arrival, m.Wake(1, trigger_rank=9)), m.Unquiet)[0]
    after_out = mb.on_control(arrival, m.Wake(1, trigger_rank=2))
    assert before.last_arrival == arrival
    assert notes(after_out, m.Unquiet)[0].last_arrival == 0.25
    assert sends(after_out, m.ConsumerGroupHeartbeatRequest)


def test_a_crash_while_quiet_hands_over_the_session_and_the_last_commit():
    """A crash ends the quiet: the coordinator learns when the last heartbeat arrived and gets
    the last auto-commit that reached it."""
    mb, _ = quiet_member()
    out = mb.crash(mb.commit_due + 1.0)
    (commit,) = notes(out, m.ElidedCommits)
    assert commit.offsets == tuple(T[:2]) and commit.generation == 1
    assert notes(out, m.Unquiet)


# ---------------------------------------------------------------- coordinator


def coordinator():
    return ConsumerGroup(
        GroupConfig(), lambda: (0, {"t": 4}), AssignorCost(mode="zero"), elide_heartbeats=True
    )


def beat(g, now, client, member_id="", epoch=0, owned=None):
    full = epoch == 0
    req = m.ConsumerGroupHeartbeatRequest(
        member_id,
        epoch,
        None,
        owned_partitions=frozenset() if full else owned,
        subscribed_topics=("t",) if full else None,
        rebalance_timeout_s=300.0 if full else None,
    )
    out = g.handle(now, client, req)
    while ("assign",) in g.timers:
        out += g.on_timer(now, ("assign",), g.timers[("assign",)])
    return next(e[2] for e in out if e[0] == "send" and e[1] == client), out


def test_the_coordinator_offers_quiet_only_to_a_reconciled_member():
    """The join response (the member still has to reconcile) offers nothing; the acknowledging
    heartbeat of a member at the target epoch does, stamped with its arrival."""
    g = coordinator()
    r, _ = beat(g, 0.0, "a")
    assert r.quiet_epoch is None or g.members[r.member_id].epoch == g.target_epoch
    r2, _ = beat(g, 1.0, "a", r.member_id, r.member_epoch, owned=r.assignment)
    assert r2.quiet_epoch == g.quiet_epoch and r2.received_at == 1.0


def test_quiet_cancels_the_session_timer_and_unquiet_restarts_it_from_the_last_arrival():
    """While quiet the member has no session timer; its Unquiet restarts the session from the
    last elided heartbeat's arrival, and one already over expires the member at once."""
    g = coordinator()
    r, _ = beat(g, 0.0, "a")
    r, _ = beat(g, 1.0, "a", r.member_id, r.member_epoch, owned=r.assignment)
    g.on_control(1.001, "a", m.Quiet(r.member_id, r.quiet_epoch))
    assert ("session", r.member_id) not in g.timers
    g.on_control(30.0, "a", m.Unquiet(r.member_id, 26.001))
    assert g.timers[("session", r.member_id)] == 26.001 + 45.0


def test_an_epoch_bump_wakes_quiet_members_and_a_late_quiet_is_refused():
    """A join bumps the group epoch: every quiet member gets a Wake. A Quiet taken on an older
    offer is answered with a Wake too."""
    g = coordinator()
    a, _ = beat(g, 0.0, "a")
    a, _ = beat(g, 1.0, "a", a.member_id, a.member_epoch, owned=a.assignment)
    g.on_control(1.001, "a", m.Quiet(a.member_id, a.quiet_epoch))
    _, out = beat(g, 2.0, "b")
    assert [e[1] for e in out if e[0] == "control" and isinstance(e[2], m.Wake)] == ["a"]
    late = g.on_control(2.5, "a", m.Quiet(a.member_id, a.quiet_epoch))
    assert [e[1] for e in late if e[0] == "control" and isinstance(e[2], m.Wake)] == ["a"]


def test_a_quiet_taken_after_the_member_was_fenced_is_answered_with_a_wake():
    """A paused member reads the answer to its last heartbeat only on resume, after its session
    expired: its Quiet names a member the coordinator no longer has. The coordinator wakes it, so
    its next heartbeat learns it was fenced (CI found a group that never settled)."""
    g = coordinator()
    a, _ = beat(g, 0.0, "a")
    a, _ = beat(g, 1.0, "a", a.member_id, a.member_epoch, owned=a.assignment)
    g.on_timer(46.0, ("session", a.member_id), 46.0)
    assert a.member_id not in g.members
    late = g.on_control(50.0, "a", m.Quiet(a.member_id, a.quiet_epoch))
    assert [e[1] for e in late if e[0] == "control" and isinstance(e[2], m.Wake)] == ["a"]


def test_a_member_waiting_for_unreleased_partitions_goes_quiet_until_they_are_released():
    """b joins a group where a owns every partition: b's target is held by a, so b waits
    (UNRELEASED_PARTITIONS) and its heartbeats change nothing; it is offered quiet. a's
    acknowledged revocation frees b's partitions: b, and only b, gets a Wake, and its next
    heartbeat takes them."""
    g = coordinator()
    a, _ = beat(g, 0.0, "a")
    a, _ = beat(g, 1.0, "a", a.member_id, a.member_epoch, owned=a.assignment)
    b, _ = beat(g, 2.0, "b")
    a2, _ = beat(g, 2.5, "a", a.member_id, a.member_epoch, owned=a.assignment)  # told to revoke
    assert g.members[a.member_id].state == "UNREVOKED_PARTITIONS" and a2.quiet_epoch is None
    b, _ = beat(g, 3.0, "b", b.member_id, b.member_epoch, owned=frozenset())
    mb = g.members[b.member_id]
    assert mb.state == "UNRELEASED_PARTITIONS" and not mb.assigned
    assert b.quiet_epoch == g.quiet_epoch
    g.on_control(3.001, "b", m.Quiet(b.member_id, b.quiet_epoch))
    assert b.member_id in g.quiet and ("session", b.member_id) not in g.timers
    # a still owns them at its next heartbeat: nothing for b
    _, out = beat(g, 4.0, "a", a.member_id, a.member_epoch, owned=a.assignment)
    assert not notes(out, m.Wake)
    # a acknowledges the revocation: b's partitions are free, b is woken
    kept = g.members[a.member_id].assigned
    _, out = beat(g, 5.0, "a", a.member_id, a.member_epoch, owned=kept)
    assert [e[1] for e in out if e[0] == "control" and isinstance(e[2], m.Wake)] == ["b"]
    assert b.member_id not in g.quiet and ("session", b.member_id) in g.timers
    g.on_control(5.0, "b", m.Unquiet(b.member_id, 3.0))
    b2, _ = beat(g, 8.0, "b", b.member_id, b.member_epoch, owned=frozenset())
    assert b2.assignment and g.members[b.member_id].state == "STABLE"


def test_a_quiet_offer_to_a_waiting_member_is_refused_once_its_partitions_are_free():
    """The partitions are released while b's Quiet is on its way: the coordinator answers it
    with a Wake (b's next heartbeat would take them)."""
    g = coordinator()
    a, _ = beat(g, 0.0, "a")
    a, _ = beat(g, 1.0, "a", a.member_id, a.member_epoch, owned=a.assignment)
    b, _ = beat(g, 2.0, "b")
    beat(g, 2.5, "a", a.member_id, a.member_epoch, owned=a.assignment)
    b, _ = beat(g, 3.0, "b", b.member_id, b.member_epoch, owned=frozenset())
    assert b.quiet_epoch is not None
    beat(g, 3.0005, "a", a.member_id, a.member_epoch, owned=g.members[a.member_id].assigned)
    late = g.on_control(3.001, "b", m.Quiet(b.member_id, b.quiet_epoch))
    assert [e[1] for e in late if e[0] == "control" and isinstance(e[2], m.Wake)] == ["b"]
    assert b.member_id not in g.quiet


def test_sessions_ending_at_one_instant_end_in_client_order():
    """Two members whose sessions end at the same instant are removed in client order, whichever
    timer was armed first."""
    g = coordinator()
    ids = {}
    for client in ("b", "a"):
        r, _ = beat(g, 0.0, client)
        ids[client] = r.member_id
    for client in ("b", "a"):  # b's timer armed first, as an Unquiet would arm it
        g.members[ids[client]].last_heartbeat = 5.0
        g._timer(("session", ids[client]), 50.0)
    out = g.on_timer(50.0, ("session", ids["b"]), 50.0)
    removed = [e[2] for e in out if e[0] == "event" and e[1] == "member_removed"]
    assert removed == ["a", "b"]


# ---------------------------------------------------------------- whole runs


CONSTANT = {"consumer.group_protocol": "consumer", "network.latency.kind": "constant"}


def _view(result):
    ev = [dict(r, run_id=None) for r in result.events.to_pylist()]
    iv = [dict(r, run_id=None) for r in result.intervals.to_pylist()]
    return ev, iv


@pytest.mark.parametrize("name", ["scale-out", "crash", "gc-pause-zombie", "rolling-bounce-static"])
def test_elision_changes_nothing_with_a_constant_latency(name):
    """Every event and interval is the same with and without elision; fewer messages are sent."""
    runs = {
        elide: run_scenario(
            load_scenario(name, {**CONSTANT, "elide_heartbeats": str(elide).lower()}), seed=3
        )
        for elide in (True, False)
    }
    assert _view(runs[True]) == _view(runs[False])
    assert runs[True].summary["messages"] < runs[False].summary["messages"] / 2


# Fault schedules of `rebalance-sim soak --seed 3` under the consumer protocol that exercise the
# wake paths: crashes and pauses of quiet members, partitions and delay spikes, joins and leaves
# at one instant, and two sessions ending at one instant. (1524 replaced 502, which the generator
# has drawn as a mixed group since it draws those: a dynamic group, two crashes, a pause, joins and
# leaves at one instant.)
SOAK_SCHEDULES = (59, 79, 112, 1524)


@pytest.mark.parametrize("index", SOAK_SCHEDULES)
def test_elision_changes_nothing_under_faults(index):
    """Random fault schedules (loss-free, constant latency): same events and intervals."""
    data, sim_seed = soak.schedule(3, index)
    assert data["consumer"]["group_protocol"] == "consumer"
    data["network"] = {"latency": {"kind": "constant", "ms": 1.0}}
    data["timeline"] = [a for a in data["timeline"] if a["action"] != "packet_loss"]
    views = []
    for elide in (True, False):
        d = copy.deepcopy(data)
        d["elide_heartbeats"] = elide
        views.append(
            _view(run_scenario(Scenario.from_dict(d), seed=sim_seed, raise_on_violation=False))
        )
    assert views[0] == views[1]
