"""The consumer-protocol coordinator core against a reference model of Kafka's own coordinator
(``kip848_model``: GroupMetadataManager and CurrentAssignmentBuilder at Kafka commit 1eb7644),
request by request on random heartbeat sequences: joins, acknowledging and lagging heartbeats,
full requests, leaves, session and rebalance timeouts, partition growth, retried and zombie
heartbeats, several members at one instant, one or two topics, static members. Every response
(error, member id, member epoch, assignment) and, after every request, the group (epochs, state,
target) and every member (epoch, previous epoch, state, partitions) must be the model's. The
core's own invariants are checked on the way: no partition held by two members, a member's epoch
never goes back, the target covers every subscribed partition once."""

from __future__ import annotations

import pytest
from hypothesis import given

from sim.config import AssignorCost, GroupConfig
from sim.coordinator.behaviour import behaviour_for
from sim.coordinator.consumer.group import ConsumerGroup
from sim.coordinator.consumer.states import MemberState
from sim.wire import messages as m
from tests.strategies import heartbeat_sequences

from .kip848_model import KafkaConsumerGroup


class _Client:
    def __init__(self, member_id: str, topics: tuple[str, ...], static: bool):
        self.member_id = member_id
        self.topics = topics
        self.instance_id = member_id + "-i" if static else None
        self.active = False
        self.epoch = 0
        self.assigned: frozenset = frozenset()  # the latest assignment it heard
        self.owned: frozenset = frozenset()  # what it reports owning
        self.sent: list = []  # its requests, oldest first


class _Run:
    """One sequence driven into the core and the model side by side."""

    def __init__(self, case: dict, kafka_version: str = "4.0"):
        self.topics = dict(case["topics"])
        self.version = 0
        self.timeout = case["rebalance_timeout_s"]
        meta = lambda: (self.version, dict(self.topics))  # noqa: E731
        self.core = ConsumerGroup(
            GroupConfig(), meta, AssignorCost(mode="zero"), behaviour=behaviour_for(kafka_version)
        )
        self.model = KafkaConsumerGroup(lambda: dict(self.topics), kafka_version=kafka_version)
        self.commits = 0
        self.clients = {
            c: _Client(f"{c}-{case['salt']}", topics, static)
            for c, (topics, static) in case["clients"].items()
        }
        self.now = 0.0
        self.epochs: dict[str, int] = {}

    # ---- requests

    def request(self, name: str, kind: str) -> m.ConsumerGroupHeartbeatRequest | None:
        c = self.clients[name]
        if kind in ("ack", "lag", "full") and not c.active:
            kind = "join"
        if kind == "join":
            c.owned = frozenset()
            return m.ConsumerGroupHeartbeatRequest(
                c.member_id,
                0,
                c.instance_id,
                rebalance_timeout_s=self.timeout,
                subscribed_topics=c.topics,
                owned_partitions=frozenset(),
            )
        if not c.active:
            return None
        if kind == "leave":
            epoch = (
                m.LEAVE_GROUP_STATIC_MEMBER_EPOCH if c.instance_id else m.LEAVE_GROUP_MEMBER_EPOCH
            )
            return m.ConsumerGroupHeartbeatRequest(c.member_id, epoch, c.instance_id)
        if kind == "ack":
            c.owned = c.assigned
            return m.ConsumerGroupHeartbeatRequest(
                c.member_id, c.epoch, c.instance_id, owned_partitions=c.owned
            )
        if kind == "lag":
            return m.ConsumerGroupHeartbeatRequest(
                c.member_id, c.epoch, c.instance_id, owned_partitions=c.owned
            )
        return m.ConsumerGroupHeartbeatRequest(
            c.member_id,
            c.epoch,
            c.instance_id,
            rebalance_timeout_s=self.timeout,
            subscribed_topics=c.topics,
            owned_partitions=c.owned,
        )

    def send(self, name: str, req: m.ConsumerGroupHeartbeatRequest) -> None:
        c = self.clients[name]
        out = self.core.handle(self.now, name, req)
        got = [
            e[2]
            for e in out
            if e[0] == "send" and isinstance(e[2], m.ConsumerGroupHeartbeatResponse)
        ]
        assert len(got) == 1 and not [e for e in out if e[0] == "violation"], out
        r = got[0]
        want = self.model.heartbeat(self.now, req)
        if want[0] != m.NONE:
            assert r.error == want[0], (req, r, want)
        else:
            assert (r.error, r.member_id, r.member_epoch, r.assignment) == want, (req, r, want)
        c.sent.append(req)
        if req.member_epoch < 0:
            if r.error == m.NONE:
                c.active = False
            return
        if r.error == m.NONE:
            c.active = True
            c.epoch = r.member_epoch
            if r.assignment is not None:
                c.assigned = r.assignment
            last = self.epochs.get(r.member_id, -1)
            assert r.member_epoch >= last, (r, last)  # a member's epoch never goes back
            self.epochs[r.member_id] = r.member_epoch
        elif req is c.sent[-1]:
            c.active = False  # fenced or unknown: it loses its partitions and must join again

    # ---- time

    def expire(self, name: str) -> None:
        deadline = self.model.sessions.get(self.clients[name].member_id)
        if deadline is not None:
            self.now = max(self.now, deadline)
        for _at, kind, mid in self.model.due(self.now):
            self.model.fire(kind, mid)
        due = sorted(
            (at, key[0], key[1], key)
            for key, at in self.core.timers.items()
            if key[0] in ("session", "rebalance") and at <= self.now
        )
        for at, _kind, _mid, key in due:
            assert not [e for e in self.core.on_timer(at, key, at) if e[0] == "violation"]

    # ---- checks

    def check(self) -> None:
        g, k = self.core, self.model
        assert (g.group_epoch, g.target_epoch, g.state) == (
            k.group_epoch,
            k.target_epoch,
            k.state(),
        )
        assert set(g.members) == set(k.members)
        for mid, x in k.members.items():
            mm = g.members[mid]
            assert (mm.epoch, mm.previous_epoch, mm.state, mm.assigned, mm.pending_revocation) == (
                x.epoch,
                x.previous_epoch,
                x.state,
                x.assigned,
                x.pending,
            ), mid
        assert {mid: g.target.get(mid, frozenset()) for mid in g.members} == {
            mid: k.target.get(mid, frozenset()) for mid in k.members
        }
        assert g.static_members == k.static
        # commits at the member's epoch and the one before, of what it reports owning and of
        # what it was last assigned (KIP-1251 under 4.3)
        for c in self.clients.values():
            if not c.active or c.member_id not in g.members:
                continue
            for epoch in (c.epoch - 1, c.epoch):
                for parts in (c.owned, c.assigned):
                    self.commits += 1
                    req = m.OffsetCommitRequest(
                        c.member_id, epoch, None, len(parts), self.commits, tuple(sorted(parts))
                    )
                    (resp,) = [e[2] for e in g.handle(self.now, "x", req) if e[0] == "send"]
                    assert resp.error == k.commit(c.member_id, epoch, parts), (c.member_id, epoch)
        # the core's own invariants
        held = [tp for mm in g.members.values() for tp in mm.assigned | mm.pending_revocation]
        assert len(held) == len(set(held))
        assert g.partition_epoch.keys() == set(held)
        if g.members and g.group_epoch == g.target_epoch:
            # the partition counts it last saw (a change bumps the group epoch at the next heartbeat)
            targets = [tp for mid in g.members for tp in g.target.get(mid, ())]
            assert len(targets) == len(set(targets))
            assert set(targets) == {
                (t, p) for t, n in g.subscribed_partitions.items() for p in range(n)
            }
        reconciled = [
            mm
            for mm in g.members.values()
            if mm.state == MemberState.STABLE and mm.epoch == g.target_epoch
        ]
        assert (g.state == "Stable") == (
            bool(g.members)
            and g.group_epoch == g.target_epoch
            and len(reconciled) == len(g.members)
        )


def _play(case: dict, kafka_version: str = "4.0") -> _Run:
    run = _Run(case, kafka_version)
    for kind, name, same_instant, topic in case["steps"]:
        if not same_instant:
            run.now += 0.25
        if kind == "expire":
            run.expire(name)
        elif kind == "grow":
            run.topics[topic] += 1
            run.version += 1
        elif kind == "retry":
            c = run.clients[name]
            if c.sent and c.sent[-1].member_epoch >= 0:
                run.send(name, c.sent[-1])
        elif kind == "zombie":
            c = run.clients[name]
            old = [r for r in c.sent[:-1] if r.member_epoch > 0]
            if old:
                run.send(name, old[-1])
        else:
            req = run.request(name, kind)
            if req is not None:
                run.send(name, req)
        run.check()
    return run


@pytest.mark.parametrize("kafka_version", ["4.0", "4.3"])
@given(case=heartbeat_sequences())
def test_the_core_answers_every_heartbeat_as_kafka_does(kafka_version, case):
    _play(case, kafka_version)


def test_issue_36_sequences_answer_as_kafka_does():
    """The issue's three sequences through the same driver: a retried heartbeat at the epoch
    before the previous one (item 1), two joins at one instant (item 2), and a four-member group
    whose topic grows (item 3: the member order Kafka's builders see)."""
    _play(
        {
            "topics": {"t": 1, "u": 1},
            "salt": 0,
            "rebalance_timeout_s": 300.0,
            "clients": {"c0": (("u",), False), "c2": (("t", "u"), False)},
            "steps": [
                ("join", "c2", False, "t"),
                ("join", "c0", False, "t"),
                ("ack", "c2", False, "t"),
                ("leave", "c0", False, "t"),
                ("full", "c2", False, "t"),
                ("lag", "c2", False, "t"),
                ("zombie", "c2", False, "t"),
            ],
        }
    )
    _play(
        {
            "topics": {"t": 1},
            "salt": 0,
            "rebalance_timeout_s": 300.0,
            "clients": {"c0": (("t",), False), "c1": (("t",), False)},
            "steps": [("join", "c1", False, "t"), ("join", "c0", True, "t")],
        }
    )
    run = _play(
        {
            "topics": {"t": 1},
            "salt": 10,
            "rebalance_timeout_s": 300.0,
            "clients": dict.fromkeys(("c1", "c3", "c6", "c7"), (("t",), False)),
            "steps": [
                ("join", "c6", False, "t"),
                ("join", "c3", False, "t"),
                ("join", "c1", False, "t"),
                ("join", "c7", False, "t"),
                ("grow", "c7", False, "t"),
                ("ack", "c7", False, "t"),
            ],
        }
    )
    # c1-10 and c7-10 share a HashMap bucket; the members map gives c7 first though c1 joined
    # first (String order would give c1)
    assert run.core.target_epoch == 5
    assert run.core.assignor_members.member_ids == ("c7-10", "c1-10", "c6-10", "c3-10")


def test_many_members_joining_at_one_instant_answer_as_kafka_does():
    """300 members join at one instant (one target per join, stepped by the uniform chain), then
    all heartbeat at another, then the same again: every response is the model's, which computes
    each target from scratch."""
    clients = {f"c{i:03d}": (("t",), False) for i in range(300)}
    steps = [("join", c, i > 0, "t") for i, c in enumerate(clients)]
    steps += [("ack", c, i > 0, "t") for i, c in enumerate(clients)]
    steps += [("ack", c, i > 0, "t") for i, c in enumerate(clients)]
    run = _play(
        {
            "topics": {"t": 1000},
            "salt": 3,
            "rebalance_timeout_s": 300.0,
            "clients": clients,
            "steps": steps,
        }
    )
    assert run.core.target_epoch == 300 and run.core.assignments_computed == 300
    assert run.core.target._chain is not None
