"""The consumer-protocol coordinator keeps its assignor's inputs between group epochs (members,
their HashMap order, a bucket's members in the order of the group's members map, subscriptions,
racks, instance ids, assignor votes): after random joins, leaves, static leaves and rejoins, and
changes of subscription, rack and assignor, every target it computes is the one a from-scratch
spec of its members gives."""

from __future__ import annotations

import numpy as np
import pytest

import sim.coordinator.consumer.group as cg
from assignors._java import modelled_hashmap_order
from assignors.server import GroupSpec, get_server_assignor
from sim.config import AssignorCost, GroupConfig
from sim.coordinator.behaviour import behaviour_for
from sim.wire import messages as m

META = (0, {"t": 6, "u": 4, "v": 3})
SUBSCRIPTIONS = [("t",), ("t", "u"), ("u", "v"), ("t", "u", "v")]


def _reference(g: cg.ConsumerGroup, counts, current):
    """The target as the coordinator computed it before it kept its inputs between epochs: a spec
    built from every member at this epoch."""
    votes: dict[str, int] = {}
    for mm in g.members.values():
        if mm.server_assignor is not None:
            votes[mm.server_assignor] = votes.get(mm.server_assignor, 0) + 1
    best = max(votes.values(), default=0)
    name = min((n for n, v in votes.items() if v == best), default=g.assignor)
    take = {mid for mid in current._base if mid not in current._detached}
    spec = GroupSpec.from_target(
        {mid: frozenset(mm.topics) for mid, mm in g.members.items()},
        current._result,
        take,
        assigned={mid: current.current_for(mid) for mid in g.members if mid not in take},
        instance_ids={
            mid: mm.instance_id for mid, mm in g.members.items() if mm.instance_id is not None
        },
        racks={mid: mm.rack for mid, mm in g.members.items() if mm.rack is not None},
    )
    # Kafka's member order, from scratch: a HashMap filled in the order of the group's members map
    # (the joining member last), replayed by the model of java.util.HashMap
    spec._member_ids = tuple(modelled_hashmap_order(sorted(g.members, key=g.map_order.tie)))
    expected_counts = {t: META[1].get(t, 0) for mm in g.members.values() for t in mm.topics}
    return name, expected_counts, get_server_assignor(name).assign(spec, expected_counts)


@pytest.mark.parametrize("seed", range(10))
def test_kept_inputs_give_the_from_scratch_target(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    g = cg.ConsumerGroup(
        GroupConfig(), lambda: META, AssignorCost(mode="zero"), behaviour=behaviour_for("4.0")
    )  # a target per join (4.3 batches joins: tests/sim/test_broker_behaviour.py)
    checked = []
    real = cg.compute_target

    def checking(name, counts, members, current, changed=None):
        want_name, want_counts, want = _reference(g, counts, current)
        got = real(name, counts, members, current, changed)
        assert name == want_name and counts == want_counts
        assert got._result.member_ids == want.member_ids
        assert got._result.to_dict() == want.to_dict()
        checked.append(len(members))
        return got

    monkeypatch.setattr(cg, "compute_target", checking)

    def drive(now, effects):
        while True:
            due = [k for k, at in g.timers.items() if k[0] in ("assign", "unblock") and at <= now]
            if not due:
                return
            g.on_timer(now, due[0], g.timers[due[0]])

    def send(now, client, req):
        drive(now, g.handle(now, client, req))

    clients: dict[str, str | None] = {}  # client -> static instance id or None
    now = 0.0
    for step in range(160):
        now += 0.01
        action = rng.random()
        live = [mm for mm in g.members.values() if mm.epoch >= 0]
        if action < 0.3 or not live:
            client = f"c{step:03d}"
            iid = f"i-{client}" if rng.random() < 0.3 else None
            clients[client] = iid
            topics = (
                SUBSCRIPTIONS[int(rng.integers(0, len(SUBSCRIPTIONS)))] if seed % 2 else ("t", "u")
            )
            send(
                now,
                client,
                m.ConsumerGroupHeartbeatRequest(
                    "",
                    0,
                    iid,
                    rack_id=str(rng.choice(["r1", "r2"])) if rng.random() < 0.3 else None,
                    rebalance_timeout_s=300.0,
                    subscribed_topics=topics,
                    owned_partitions=frozenset(),
                    server_assignor=str(rng.choice(["uniform", "range"]))
                    if rng.random() < 0.2
                    else None,
                ),
            )
            continue
        mm = live[int(rng.integers(0, len(live)))]
        if action < 0.4:
            send(now, mm.client, m.ConsumerGroupHeartbeatRequest(mm.member_id, -1, mm.instance_id))
        elif action < 0.47 and mm.instance_id is not None:
            send(now, mm.client, m.ConsumerGroupHeartbeatRequest(mm.member_id, -2, mm.instance_id))
            # the static member comes back soon under a new member id
            send(
                now + 0.001,
                mm.client,
                m.ConsumerGroupHeartbeatRequest(
                    "",
                    0,
                    mm.instance_id,
                    rebalance_timeout_s=300.0,
                    subscribed_topics=mm.topics,
                    owned_partitions=frozenset(),
                ),
            )
        else:
            change = {}
            if rng.random() < 0.15:
                change["subscribed_topics"] = SUBSCRIPTIONS[
                    int(rng.integers(0, len(SUBSCRIPTIONS)))
                ]
            if rng.random() < 0.1:
                change["rack_id"] = str(rng.choice(["r1", "r2", "r3"]))
            if rng.random() < 0.1:
                change["server_assignor"] = str(rng.choice(["uniform", "range"]))
            send(
                now,
                mm.client,
                m.ConsumerGroupHeartbeatRequest(
                    mm.member_id,
                    mm.epoch,
                    mm.instance_id,
                    rebalance_timeout_s=300.0,
                    owned_partitions=mm.assigned,
                    **change,
                ),
            )
        # the set of unreconciled members stays what a pass over the members says
        assert g.unreconciled == {
            mid for mid, x in g.members.items() if not x.reconciled_to(g.target_epoch)
        }
    assert len(checked) > 40 and max(checked) >= 8
