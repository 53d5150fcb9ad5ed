"""Each switch of the coordinator's release (``sim.coordinator.behaviour``) on a minimal
sequence, under the release that sets it and the one that does not: what Kafka 4.3's group
coordinator does that 1eb7644 (the 4.0 line) does not."""

from __future__ import annotations

import pytest

from assignors import TopicPartition
from sim.config import AssignorCost, ConfigError, GroupConfig
from sim.coordinator.behaviour import BROKER_BEHAVIOUR_SWITCHES, BrokerBehaviour, behaviour_for
from sim.coordinator.consumer.group import ConsumerGroup
from sim.coordinator.consumer.states import ConsumerGroupState
from sim.scenario.builtins import load_scenario
from sim.wire import messages as m

META = (0, {"t": 4})


def tps(*ps):
    return frozenset(TopicPartition("t", p) for p in ps)


def coordinator(version, **switches):
    behaviour = behaviour_for(
        version,
        {k: v for k, v in switches.items() if k != "interval_ms"},
        switches.get("interval_ms"),
    )
    return ConsumerGroup(
        GroupConfig(), lambda: META, AssignorCost(mode="zero"), None, False, behaviour
    )


def hb(g, now, client, member_id="", epoch=0, owned=None):
    kw = {}
    if epoch == 0:
        kw = {"subscribed_topics": ("t",), "rebalance_timeout_s": 300.0}
        owned = frozenset() if owned is None else owned
    req = m.ConsumerGroupHeartbeatRequest(member_id, epoch, None, owned_partitions=owned, **kw)
    out = g.handle(now, client, req)
    (r,) = [e[2] for e in out if e[0] == "send" and e[1] == client]
    return r


def events(g_out, kind):
    return [e for e in g_out if e[0] == "event" and e[1] == kind]


def test_the_releases_set_their_switches_and_a_scenario_overrides_one():
    old, new = behaviour_for("4.0"), behaviour_for("4.3")
    assert BrokerBehaviour() == new
    for switch in BROKER_BEHAVIOUR_SWITCHES:
        assert getattr(old, switch) is False and getattr(new, switch) is True
    assert (old.assignment_interval_ms, new.assignment_interval_ms) == (0.0, 1000.0)
    s = load_scenario(
        "scale-out",
        {
            "kafka_version": "4.0",
            "broker_behaviour.accepts_epoch0_rejoin": "true",
            "group.consumer_assignment_interval_ms": "250",
        },
    )
    b = behaviour_for(
        s.config.kafka_version,
        s.config.broker_behaviour,
        s.config.group.consumer_assignment_interval_ms,
    )
    assert (b.kafka_version, b.accepts_epoch0_rejoin, b.assignment_epochs) == ("4.0", True, False)
    assert b.assignment_interval_ms == 250.0
    assert load_scenario("scale-out").config.kafka_version == "4.3"


@pytest.mark.parametrize(
    "overrides,field",
    [
        ({"kafka_version": "3.9"}, "kafka_version"),
        ({"broker_behaviour.offload": "true"}, "broker_behaviour.offload"),
        ({"broker_behaviour.assignment_epochs": "3"}, "broker_behaviour.assignment_epochs"),
        ({"group.consumer_assignment_interval_ms": "-1"}, "consumer_assignment_interval_ms"),
    ],
)
def test_bad_settings_name_their_field(overrides, field):
    with pytest.raises(ConfigError) as e:
        load_scenario("scale-out", overrides)
    assert field in e.value.field


# ---------------------------------------------------------------- KAFKA-19233


@pytest.mark.parametrize("version", ["4.0", "4.3"])
def test_kafka_19233_a_fenced_member_rejoins_with_epoch_zero_under_its_own_id(version):
    """apache/kafka PR 21305: "This fix allows members to rejoin a consumer group with
    memberEpoch=0 after being fenced". a is at epoch 2 (previous epoch 1) when it rejoins with
    epoch 0 and nothing owned: 1eb7644 fences it again (until its session ends); 4.3 takes it
    back and answers with its assignment."""
    g = coordinator(version)
    a = hb(g, 0.0, "a", "A")
    hb(g, 1.0, "b", "B")  # group epoch 2: a revokes half
    r = hb(g, 2.0, "a", "A", a.member_epoch)
    hb(g, 3.0, "a", "A", 1, owned=r.assignment)  # the acknowledgement: a at epoch 2
    assert g.members["A"].epoch == 2 and g.members["A"].previous_epoch == 1
    rejoin = hb(g, 4.0, "a", "A", 0)
    if version == "4.0":
        assert rejoin.error == m.FENCED_MEMBER_EPOCH and "A" in g.members
    else:
        assert rejoin.error == m.NONE
        assert (rejoin.member_id, rejoin.member_epoch) == ("A", 2)
        assert rejoin.assignment == g.members["A"].assigned and len(rejoin.assignment) == 2


# ---------------------------------------------------------------- KIP-1263


@pytest.mark.parametrize("version", ["4.0", "4.3"])
def test_kip_1263_one_target_per_assignment_interval(version):
    """KAFKA-20291 (apache/kafka PR 21720): "Delay computing the next assignment for consumer
    groups until their assignment interval has elapsed since their last assignment computation
    finished." b and c join 0.2 s and 0.4 s after a: under 4.3 they reconcile towards a's
    target (nothing for them) until a heartbeat 1 s after the first computation computes one
    target for both; under 4.0 every join computes its own."""
    g = coordinator(version)
    hb(g, 0.0, "a", "A")
    b = hb(g, 0.2, "b", "B")
    c = hb(g, 0.4, "c", "C")
    assert g.group_epoch == 3
    if version == "4.0":
        assert g.assignments_computed == 3 and g.target_epoch == 3
        return
    assert g.assignments_computed == 1 and g.target_epoch == 1
    assert (b.member_epoch, b.assignment, c.member_epoch) == (1, frozenset(), 1)
    assert g.state == ConsumerGroupState.ASSIGNING
    hb(g, 0.9, "b", "B", 1)  # still within the interval
    assert g.assignments_computed == 1
    hb(g, 1.0, "c", "C", 1)  # the interval has passed: one target for epoch 3
    assert g.assignments_computed == 2 and g.target_epoch == 3
    assert {mid: len(t) for mid, t in g.target.items()} == {"A": 2, "B": 1, "C": 1}


def test_kip_1263_the_interval_is_a_group_setting():
    """group.consumer.assignment.interval.ms = 0 restores 4.0's computation at every epoch."""
    g = coordinator("4.3", interval_ms=0)
    hb(g, 0.0, "a", "A")
    hb(g, 0.2, "b", "B")
    assert g.assignments_computed == 2 and g.target_epoch == 2


# ---------------------------------------------------------------- KIP-1251


@pytest.mark.parametrize("version", ["4.0", "4.3"])
def test_kip_1251_a_commit_with_an_older_epoch_keeps_the_partitions_held_since(version):
    """KIP-1251 (KAFKA-20066): a commit is accepted when assignmentEpoch <= clientEpoch <=
    brokerEpoch for the partition. a got all four partitions at epoch 1 and moved to epoch 2
    keeping two; a commit of those two sent with epoch 1 (it raced the heartbeat) is refused
    by 1eb7644 (STALE_MEMBER_EPOCH) and accepted by 4.3. A partition a no longer has is
    refused under both."""
    g = coordinator(version, interval_ms=0)
    hb(g, 0.0, "a", "A")
    hb(g, 1.0, "b", "B")
    r = hb(g, 2.0, "a", "A", 1)
    kept = r.assignment
    hb(g, 3.0, "a", "A", 1, owned=kept)
    assert g.members["A"].epoch == 2
    gone = tps(0, 1, 2, 3) - kept

    def commit(parts, seq):
        req = m.OffsetCommitRequest("A", 1, None, len(parts), seq, tuple(sorted(parts)), 5.0)
        (resp,) = [e[2] for e in g.handle(4.0, "a", req) if e[0] == "send"]
        return resp.error

    assert commit(kept, 1) == (m.STALE_MEMBER_EPOCH if version == "4.0" else m.NONE)
    stored = g.offsets.fetch(sorted(kept))
    assert stored == ((None, None) if version == "4.0" else (5.0, 5.0))
    assert commit(gone, 2) == m.STALE_MEMBER_EPOCH
    assert g.offsets.fetch(sorted(gone)) == (None, None)


def test_kip_1251_a_partition_assigned_after_the_commit_epoch_is_refused():
    """assignmentEpoch <= clientEpoch: b received its partitions at epoch 2, so a commit of
    them sent with epoch 1 is refused and one with epoch 2 accepted; a's partitions carry the
    epoch it was given them at (1), not the epoch it moved to."""
    g = coordinator("4.3", interval_ms=0)
    hb(g, 0.0, "a", "A")
    a = g.members["A"]
    hb(g, 1.0, "b", "B")
    r = hb(g, 2.0, "a", "A", 1)
    hb(g, 3.0, "a", "A", 1, owned=r.assignment)
    rb = hb(g, 4.0, "b", "B", 2)
    assert rb.assignment and a.assigned_at == dict.fromkeys(a.assigned, 1)
    b = g.members["B"]
    assert b.assigned_at == dict.fromkeys(b.assigned, 2)
    parts = tuple(sorted(b.assigned))
    old = g.handle(5.0, "b", m.OffsetCommitRequest("B", 1, None, len(parts), 1, parts, 5.0))
    new = g.handle(5.0, "b", m.OffsetCommitRequest("B", 2, None, len(parts), 2, parts, 6.0))
    assert [e[2].error for e in old + new if e[0] == "send"] == [m.STALE_MEMBER_EPOCH, m.NONE]


# ---------------------------------------------------------------- KAFKA-20442


@pytest.mark.parametrize("version", ["4.0", "4.3"])
def test_kafka_20442_the_assignment_epoch_catches_up_when_the_last_member_leaves(version):
    """apache/kafka PR 22045: "When all members of a consumer group are fenced, the group epoch
    is bumped but the assignment epoch is not updated ... the assignment epoch catches up to the
    group epoch." Under 1eb7644 the empty group keeps group epoch 2 > assignment epoch 1."""
    g = coordinator(version)
    a = hb(g, 0.0, "a", "A")
    hb(g, 1.0, "a", "A", m.LEAVE_GROUP_MEMBER_EPOCH)
    assert a.member_epoch == 1 and not g.members and g.group_epoch == 2
    assert g.state == ConsumerGroupState.EMPTY
    assert g.target_epoch == (1 if version == "4.0" else 2)
