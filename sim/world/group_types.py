"""The two group protocols as records, chosen once when a run is built: ``PROTOCOLS``.

A ``GroupProtocol`` is everything a run needs to know about one of Kafka's ``group.protocol``
values: how to build its coordinator core, how to build a member core for a client, what makes
its group settled (the end of an episode), and which coordinator states are the phases a
``crash_leader`` action waits for. ``sim.run`` looks the record up from the run's configuration
and never branches on the protocol itself.

- ``CLASSIC``: ``sim.coordinator.classic.group.ClassicGroup`` and ``sim.client.classic.Member`` (JoinGroup / SyncGroup).
- ``CONSUMER``: ``sim.coordinator.consumer.group.ConsumerGroup`` and
  ``sim.client.consumer.ConsumerMember`` (KIP-848).

Member cores come from ``core_factory``, which picks the protocol from each client's own
``ConsumerConfig.group_protocol`` at every start. The group (``new_group``) is a
``sim.coordinator.migration.MigratingCoordinator``: it starts as the type of the base consumer config's
protocol and converts between the two as members of the other protocol join and leave (KIP-848's
online migration); the run reads the record of its current type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import cast

import attrs

from sim.client.base import ConsumerClient
from sim.client.classic import Member
from sim.client.consumer import ConsumerMember
from sim.client.handoffs import Handoffs
from sim.config import ConsumerConfig, SimConfig
from sim.coordinator import behaviour
from sim.coordinator.classic.group import ClassicGroup
from sim.coordinator.classic.states import ClassicGroupState
from sim.coordinator.consumer.group import ConsumerGroup
from sim.coordinator.consumer.states import ConsumerGroupState
from sim.coordinator.migration import GroupCore, MigratingCoordinator
from sim.kernel.queue import Kernel
from sim.wire.ids import kafka_uuid
from sim.world.actors import CoreFactory, MemberActor
from sim.world.network import Network

# Streams of sim.kernel.queue.Kernel.rng_for beside each actor's own: a client's poll loop, and the
# member ids an actor makes (the classic coordinator's; a consumer-protocol client's own).
POLL_STREAM = 1
ID_STREAM = 3
COORDINATOR_RANK = 0  # the first actor registered


@attrs.define(eq=False)
class RunWiring:
    """What the cores of one run are built from: its kernel, network and configuration, the
    topics' partition counts over time, production rates and the shared ``Handoffs``."""

    kernel: Kernel
    network: Network
    config: SimConfig
    metadata: Callable[[], tuple[int, dict[str, int]]]  # the partition counts now
    rates: Mapping[str, float]
    handoffs: Handoffs
    elide: bool  # heartbeat elision on for this run


@attrs.frozen
class GroupProtocol:
    """One ``group.protocol``: its member core, settled check and phases (its coordinator core
    is the group's when it is of this type, ``new_group``).

    The settled check is split the way the run's scan uses it (``sim.run``): ``group_empty``
    (nobody is or is becoming a member), ``group_stable`` (the coordinator has nothing in
    progress at ``t``), ``in_group`` (a settled client is a current member), ``rebalancing``
    (a shortcut: the coordinator is mid-rebalance, so the group cannot be settled) and
    ``signature`` (what of the coordinator a settled group's quick re-check compares; None: no
    quick re-check, every check scans)."""

    name: str
    new_member: Callable[[RunWiring, MemberActor, ConsumerConfig, tuple[str, ...]], ConsumerClient]
    # (each is asked only of a group of its type: the run reads the record of the group's type)
    group_empty: Callable[[GroupCore], bool]
    group_stable: Callable[[GroupCore, float], bool]
    in_group: Callable[[GroupCore, ConsumerClient], bool]
    rebalancing: Callable[[GroupCore], bool]
    signature: Callable[[GroupCore], tuple | None]
    # coordinator state -> crash_leader phase
    phases: Mapping[str, str]
    # whether the run re-checks for the settled state after every input that sends a message,
    # or only after recorded changes (sim.kernel.queue.Kernel.dirty_on_io)
    dirty_on_io: bool


def new_group(w: RunWiring) -> MigratingCoordinator:
    """The run's group, as the type of the base consumer config's ``group.protocol`` (a classic
    group's member ids, and classic members' ids in a consumer group, come from one stream)."""
    return MigratingCoordinator(
        w.config.group,
        w.metadata,
        group_type=w.config.consumer.group_protocol,
        assignor_cost=w.config.assignor_cost,
        elide_heartbeats=w.elide,
        id_rng=w.kernel.rng_for(COORDINATOR_RANK, stream=ID_STREAM),
        behaviour=behaviour.of_config(w.config),
    )


# ---- the classic protocol


def _classic_member(
    w: RunWiring, actor: MemberActor, cfg: ConsumerConfig, topics: tuple[str, ...]
) -> Member:
    rng = actor.rng
    lat = w.config.network.latency_of(actor.name)
    return Member(
        actor.name,
        cfg,
        topics,
        w.metadata,
        lambda: lat.sample_s(rng),
        w.config.assignor_cost,
        w.elide,
        rates=w.rates,
        handoffs=w.handoffs,
        poll_rng=actor.poll_rng,
        rank=actor.rank,
    )


def _classic_empty(group: GroupCore) -> bool:
    c = cast(ClassicGroup, group)
    return c.state == ClassicGroupState.EMPTY and not c.members and not c.pending_members


def _classic_stable(group: GroupCore, t: float) -> bool:
    c = cast(ClassicGroup, group)
    return c.state == ClassicGroupState.STABLE and not c.pending_sync and not c.pending_members


def _classic_in_group(group: GroupCore, core: ConsumerClient) -> bool:
    c = cast(ClassicGroup, group)
    return core.member_id in c.members and core.generation == c.generation


def _classic_rebalancing(group: GroupCore) -> bool:
    c = cast(ClassicGroup, group)
    state = c.state
    return (
        state == ClassicGroupState.PREPARING_REBALANCE
        or state == ClassicGroupState.COMPLETING_REBALANCE
    )


def _classic_signature(group: GroupCore) -> tuple:
    c = cast(ClassicGroup, group)
    # membership is left out: the runner's settled check follows it through the members that had
    # inputs (sim.run: _settled_since)
    return (c.state, c.generation, len(c.pending_sync), len(c.pending_members))


CLASSIC = GroupProtocol(
    name="classic",
    new_member=_classic_member,
    group_empty=_classic_empty,
    group_stable=_classic_stable,
    in_group=_classic_in_group,
    rebalancing=_classic_rebalancing,
    signature=_classic_signature,
    phases={
        ClassicGroupState.PREPARING_REBALANCE: "join",
        ClassicGroupState.COMPLETING_REBALANCE: "sync",
        ClassicGroupState.STABLE: "stable",
    },
    dirty_on_io=True,
)


# ---- the consumer group protocol (KIP-848)


def _consumer_member(
    w: RunWiring, actor: MemberActor, cfg: ConsumerConfig, topics: tuple[str, ...]
) -> ConsumerMember:
    rng = actor.rng
    lat = w.config.network.latency_of(actor.name)
    name, network, kernel = actor.name, w.network, w.kernel
    if actor.id_rng is None:  # one stream per client, kept across restarts
        actor.id_rng = kernel.lazy_rng(actor.rank, stream=ID_STREAM)
    # a consumer instance makes its member id once (KIP-1082): a restart is a new one
    return ConsumerMember(
        actor.name,
        cfg,
        topics,
        sample_latency=lambda: lat.sample_s(rng),
        link_faulty=lambda: network.link_fault_active(name, kernel.now),
        elide_heartbeats=w.elide,
        rates=w.rates,
        handoffs=w.handoffs,
        poll_rng=actor.poll_rng,
        rank=actor.rank,
        heartbeat_interval_s=w.config.group.consumer_heartbeat_interval_s,
        member_id=kafka_uuid(actor.id_rng),
    )


def _consumer_empty(group: GroupCore) -> bool:
    c = cast(ConsumerGroup, group)
    return not c.members


def _consumer_stable(group: GroupCore, t: float) -> bool:
    c = cast(ConsumerGroup, group)
    return (
        c.state == ConsumerGroupState.STABLE
        and not c.parked
        and not c.assign_pending
        and c.busy_until <= t
    )


def _consumer_in_group(group: GroupCore, core: ConsumerClient) -> bool:
    c = cast(ConsumerGroup, group)
    mm = c.members.get(core.member_id)
    return mm is not None and core.generation == mm.epoch


def _never(group: GroupCore) -> bool:
    return False


def _consumer_signature(group: GroupCore) -> tuple:
    c = cast(ConsumerGroup, group)
    # The group's state is left out too: it is derived from its members' (Reconciling while one
    # is not at the target epoch, as when a static member comes back at epoch 0), and a member's
    # epoch moves only with its own heartbeats; the settled check reads the state itself.
    return (c.group_epoch, c.target_epoch, len(c.parked), c.busy_until)


CONSUMER = GroupProtocol(
    name="consumer",
    new_member=_consumer_member,
    group_empty=_consumer_empty,
    group_stable=_consumer_stable,
    in_group=_consumer_in_group,
    rebalancing=_never,
    signature=_consumer_signature,
    # the consumer group has no leader: the member that joined first stands in for crash_leader
    # (ConsumerGroup.leader)
    phases={
        ConsumerGroupState.RECONCILING: "join",
        ConsumerGroupState.ASSIGNING: "sync",
        ConsumerGroupState.STABLE: "stable",
    },
    dirty_on_io=False,
)

PROTOCOLS: dict[str, GroupProtocol] = {p.name: p for p in (CLASSIC, CONSUMER)}


def core_factory(wiring: RunWiring) -> CoreFactory:
    """The member core factory of one run: the protocol is each client's own
    (``ConsumerConfig.group_protocol``), looked up at every start."""

    def new_core(
        actor: MemberActor, cfg: ConsumerConfig, topics: tuple[str, ...]
    ) -> ConsumerClient:
        if actor.poll_rng is None:  # one stream per client, kept across restarts
            actor.poll_rng = wiring.kernel.lazy_rng(actor.rank, stream=POLL_STREAM)
        return PROTOCOLS[cfg.group_protocol].new_member(wiring, actor, cfg, topics)

    return new_core
