"""The classic coordinator and the online upgrade's decision against a reference model of Kafka's
own (``classic_model``: GroupMetadataManager, ClassicGroup at Kafka commit 1eb7644), request by
request on random sequences of classic clients (dynamic and static, eager and cooperative
assignor lists, some of them tied) and consumer-protocol joins: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, restarts (a new member id; a static member replacing itself), protocol changes,
time passing to the next timer (initial delay, rebalance and sync timeouts, sessions, the new
member join timeout), a group max size for the upgrade. Every response (error, generation,
protocol, leader, member id, the leader's member list, skip-assignment; a SyncGroup's
assignment) and, after every step, the group (state, generation, protocol, leader, members, who
waits in JoinGroup) must be the model's. A consumer-protocol join must be refused, converted or
fail as the model says; the sequence ends at a conversion (what follows is the consumer group's,
``test_consumer_group_differential``)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from assignors import Assignment, Subscription, TopicPartition
from sim.config import GroupConfig
from sim.coordinator.behaviour import behaviour_for
from sim.coordinator.classic.states import ClassicGroupState
from sim.coordinator.migration import CLASSIC, MigratingCoordinator
from sim.wire import messages as m
from sim.wire.ids import classic_member_id, default_client_id

from .classic_model import KafkaClassicGroup

PROTOCOL_LISTS = (
    ("cooperative-sticky",),
    ("range",),
    ("range", "cooperative-sticky"),
    ("cooperative-sticky", "range"),
)
ACTIONS = (
    *("join", "sync", "heartbeat", "leave", "restart", "protocols", "tick", "time") * 3,
    *("all_join", "all_sync") * 4,
    "consumer",
)


def _protocols(names, owned):
    sub = Subscription(("t",), owned_partitions=tuple(owned))
    return tuple((n, sub) for n in names)


class _Client:
    def __init__(self, name, static, names, session_s, rebalance_s):
        self.name = name
        self.instance = name if static else None
        self.names = names
        self.session_s = session_s
        self.rebalance_s = rebalance_s
        self.member_id = ""
        self.generation = -1
        self.protocol = None
        self.members: tuple = ()
        self.owned: tuple = ()


@st.composite
def classic_sequences(draw):
    n = draw(st.integers(1, 5))
    clients = [
        (
            f"c{i}",
            draw(st.integers(0, 2)) == 0,
            draw(st.sampled_from(PROTOCOL_LISTS)),
            draw(st.sampled_from([10.0, 45.0])),
            draw(st.sampled_from([20.0, 300.0, 400.0])),
        )
        for i in range(n)
    ]
    steps = [
        (draw(st.sampled_from(ACTIONS)), draw(st.integers(0, n - 1)), draw(st.integers(0, 3)))
        for _ in range(draw(st.integers(1, 50)))
    ]
    return {
        "clients": clients,
        "seed": draw(st.integers(0, 2**32 - 1)),
        "consumer_max_size": draw(st.sampled_from([1, 2, 3, 2**31 - 1])),
        "kafka_version": draw(st.sampled_from(["4.0", "4.3"])),
        "steps": steps,
    }


def _sim_view(effects):
    """The core's responses as the model's (client, kind, fields) tuples."""
    out = []
    for e in effects:
        if e[0] != "send":
            continue
        client, r = e[1], e[2]
        if isinstance(r, m.JoinGroupResponse):
            if r.error == m.NONE:
                members = tuple(sorted(mid for mid, _ in r.members))
                fields = (
                    r.error,
                    r.generation,
                    r.protocol,
                    r.leader,
                    r.member_id,
                    members,
                    r.skip_assignment,
                )
            elif r.error == m.MEMBER_ID_REQUIRED:
                fields = (r.error, r.member_id)
            else:
                fields = (r.error,)
            out.append((client, "join", fields))
        elif isinstance(r, m.SyncGroupResponse):
            parts = tuple(r.assignment.partitions) if r.assignment is not None else None
            out.append((client, "sync", (r.error, parts if r.error == m.NONE else None)))
        elif isinstance(r, m.HeartbeatResponse):
            out.append((client, "heartbeat", (r.error,)))
        elif isinstance(r, m.LeaveGroupResponse):
            out.append((client, "leave", (r.error,)))
    return out


class _Run:
    def __init__(self, case):
        rng_sim = np.random.default_rng(case["seed"])
        rng_model = np.random.default_rng(case["seed"])
        self.core = MigratingCoordinator(
            GroupConfig(consumer_max_size=case["consumer_max_size"]),
            lambda: (0, {"t": 4}),
            group_type=CLASSIC,
            id_rng=rng_sim,
            behaviour=behaviour_for(case["kafka_version"]),
        )
        self.model = KafkaClassicGroup(
            consumer_max_size=case["consumer_max_size"],
            converts_unassigned=case["kafka_version"] != "4.0",
            new_id=lambda iid: classic_member_id(default_client_id(iid), iid, rng_model),
        )
        self.clients = [_Client(*c) for c in case["clients"]]
        self.now = 0.0
        self.done = False

    @property
    def g(self):
        return self.core.group

    def compare(self, effects, what):
        got = _sim_view(effects)
        want = self.model.out
        self.model.out = []
        assert sorted(got, key=repr) == sorted(want, key=repr), (what, got, want)
        for client, kind, fields in got:
            self.learn(client, kind, fields)
        g, k = self.g, self.model
        assert (g.state.value, g.generation, g.protocol, g.leader) == (
            k.state,
            k.generation,
            k.protocol,
            k.leader,
        ), what
        assert set(g.members) == set(k.members), what
        assert {mid for mid, mm in g.members.items() if mm.awaiting_join} == {
            mid for mid, mm in k.members.items() if mm.awaiting_join
        }, what

    def learn(self, client_name, kind, fields):
        c = next(c for c in self.clients if c.name == client_name)
        if kind == "join":
            if fields[0] == m.MEMBER_ID_REQUIRED:
                c.member_id = fields[1]
            elif fields[0] == m.NONE:
                _, c.generation, c.protocol, _leader, c.member_id, c.members, _ = fields
            elif fields[0] == m.UNKNOWN_MEMBER_ID:
                c.member_id, c.generation = "", -1
        elif kind == "sync" and fields[0] == m.NONE:
            c.owned = fields[1]

    def join(self, c):
        req = m.JoinGroupRequest(
            c.member_id, c.instance, _protocols(c.names, c.owned), c.session_s, c.rebalance_s
        )
        self.model.join(
            self.now,
            c.name,
            c.member_id,
            c.instance,
            tuple((n, ("t", c.owned)) for n in c.names),
            c.session_s,
            c.rebalance_s,
        )
        self.compare(self.core.handle(self.now, c.name, req), ("join", c.name))

    def sync(self, c):
        assignments = ()
        if c.members:
            assignments = tuple(
                (mid, Assignment([TopicPartition("t", i)])) for i, mid in enumerate(c.members)
            )
        self.model.sync(
            self.now,
            c.name,
            c.member_id,
            c.instance,
            c.generation,
            tuple((mid, tuple(a.partitions)) for mid, a in assignments),
            c.protocol,
        )
        req = m.SyncGroupRequest(
            c.member_id, c.generation, c.instance, assignments, protocol_name=c.protocol
        )
        self.compare(self.core.handle(self.now, c.name, req), ("sync", c.name))

    def step(self, action, c, k):
        if action == "join":
            self.join(c)
        elif action == "sync":
            if c.member_id:
                self.sync(c)
        elif action == "heartbeat":
            if c.member_id:
                self.model.heartbeat(self.now, c.name, c.member_id, c.instance, c.generation)
                req = m.HeartbeatRequest(c.member_id, c.generation, c.instance)
                self.compare(self.core.handle(self.now, c.name, req), ("heartbeat", c.name))
        elif action == "leave":
            if c.member_id:
                self.model.leave(self.now, c.name, c.member_id, c.instance)
                req = m.LeaveGroupRequest(c.member_id, c.instance)
                self.compare(self.core.handle(self.now, c.name, req), ("leave", c.name))
                c.member_id, c.generation, c.members = "", -1, ()
        elif action == "restart":
            c.member_id, c.generation, c.members, c.owned = "", -1, (), ()
            self.join(c)
        elif action == "protocols":
            c.names = PROTOCOL_LISTS[k]
            self.join(c)
        elif action == "tick":
            self.now += 0.25 + k
        elif action == "time":
            self.fire_next()
            self.fire_due()
        elif action == "consumer":
            self.consumer(c, k)
        elif action == "all_join":
            for other in self.clients:
                self.now += 0.01
                self.fire_due()
                self.join(other)
        elif action == "all_sync":
            for other in sorted(self.clients, key=lambda o: bool(o.members) == (k % 2 == 0)):
                if other.member_id:
                    self.now += 0.01
                    self.fire_due()
                    self.sync(other)

    def fire_next(self):
        """Time runs to the model's next deadline (``fire_due`` then fires it)."""
        if self.model.timers:
            self.now = max(self.now, min(at for at, _ in self.model.timers.values()))

    def fire_due(self):
        """Every timer due by now fires, on each side in one order (the earliest first; at one
        instant join, sync, then sessions by member id); the responses and the group after all
        of them must agree."""
        rank = {"join": 0, "sync": 1, "hb": 2, "expire": 2, "pending": 2}

        def order(key, at):
            return (at, rank[key[0]], key[1:])

        while True:
            due = [(k, at) for k, (at, _) in self.model.timers.items() if at <= self.now]
            if not due:
                break
            key, at = min(due, key=lambda d: order(*d))
            self.model.fire(at, key)
        effects = []
        while True:
            due = [(k, at) for k, at in self.g.timers.items() if at <= self.now]
            if not due:
                break
            key, at = min(due, key=lambda d: order(*d))
            effects += self.core.on_timer(at, key, at)
        self.compare(effects, ("timers", self.now))

    def consumer(self, c, k):
        mid = f"{c.name}-consumer-{k}"
        want = self.model.consumer_join(self.now, c.name, mid)
        req = m.ConsumerGroupHeartbeatRequest(
            mid,
            0,
            None,
            rebalance_timeout_s=300.0,
            subscribed_topics=("t",),
            owned_partitions=frozenset(),
        )
        effects = self.core.handle(self.now, c.name, req)
        (r,) = [
            e[2]
            for e in effects
            if e[0] == "send" and isinstance(e[2], m.ConsumerGroupHeartbeatResponse)
        ]
        if want in ("deleted", "converted"):
            assert self.core.group_type != CLASSIC and r.error == m.NONE, (want, r.error)
            self.done = True
            return
        assert self.core.group_type == CLASSIC and r.error == want, (want, r.error)
        rest = [e for e in effects if not isinstance(e[2], m.ConsumerGroupHeartbeatResponse)]
        self.compare(rest, ("consumer", c.name))


@given(classic_sequences())
def test_classic_coordinator_answers_as_kafka(case):
    run = _Run(case)
    for action, i, k in case["steps"]:
        run.now += 0.01  # distinct instants, so that no two deadlines tie across steps
        run.fire_due()
        run.step(action, run.clients[i], k)
        if run.done:
            break
        assert run.g.state != ClassicGroupState.DEAD
