"""Online migration between the classic and the consumer group protocol: the group coordinator's
one group, held as a classic group (``sim.coordinator.classic.group.ClassicGroup``) or as a
consumer group (``sim.coordinator.consumer.classic_members.ConsumerGroupWithClassicMembers``),
converted from one to the other as Kafka's ``GroupMetadataManager`` converts it.
``MigratingCoordinator`` is a router: it hands each input to the group it holds (a ``GroupCore``)
and, where Kafka converts the group, makes the new one with a constructor of the target type
(``ConsumerGroupWithClassicMembers.from_classic``, ``ClassicGroup.from_consumer``, as Kafka's
``ConsumerGroup.fromClassicGroup`` and ``ClassicGroup.fromConsumerGroup``). Sans-I/O like the
cores it holds: ``handle``, ``on_timer`` and ``on_control`` return effects.

- Upgrade (``getOrMaybeCreateConsumerGroup``): a ConsumerGroupHeartbeat that joins (member epoch
  0) a classic group. An empty classic group is dropped and a new consumer group (epoch 0) made
  in its place, whatever the policy. Otherwise ``validateOnlineUpgrade``:
  ``group.consumer.migration.policy`` must allow upgrades and the group must not have more
  members than ``group.consumer.max.size``; else the heartbeat is answered GROUP_ID_NOT_FOUND (as
  is any other ConsumerGroupHeartbeat to a classic group). ``convertToConsumerGroup``: members
  waiting in JoinGroup or SyncGroup are answered REBALANCE_IN_PROGRESS; every member becomes a
  classic member of a consumer group at group epoch = target epoch = the classic generation,
  Stable, with its last assignment as both its assigned partitions and its target
  (``ConsumerGroup.fromClassicGroup``), and a session timer of its own session timeout from now;
  then the heartbeat is handled by the consumer group; a member without an assignment (it never
  synced) joins it with no partitions (KAFKA-17733, in every release from 4.0.0; switch
  ``upgrade_converts_unassigned_members``, off for 1eb7644's behaviour: the upgrade fails,
  GROUP_ID_NOT_FOUND). The conversion
  and the heartbeat are one write: a group that has not selected a protocol yet (its first
  rebalance: ``fromClassicGroup`` reads the members' subscriptions under it, UNKNOWN_SERVER_ERROR)
  or a heartbeat the consumer group refuses (GROUP_MAX_SIZE_REACHED) leaves the group classic;
  only the REBALANCE_IN_PROGRESS answers already sent stand. Kafka's client takes both errors as
  fatal (``AbstractHeartbeatRequestManager.onErrorResponse``), so a consumer-protocol member
  that reaches a classic group in its first rebalance stops.
- Downgrade (``convertToClassicGroup``): the consumer group marks ``downgrade_to`` when fencing
  its last consumer-protocol member leaves only classic members, or when a classic static member
  replaces it (``sim.coordinator.consumer.classic_members``). The classic group
  (``ClassicGroup.fromConsumerGroup``) is Stable at generation = the group epoch, with every
  other member (and the replacing one, with the replaced member's target), its target assignment
  as its assignment, the protocol the members vote for, and fresh sessions; after a fencing it
  then prepares a rebalance, so every member rejoins.
- A classic JoinGroup to an empty consumer group drops it and makes a new classic group
  (generation 0; ``maybeDeleteEmptyConsumerGroup``).

Committed offsets belong to the group, not to its type: the store moves to the new core.
Every conversion is recorded as a ``group_converted`` event (``classic->consumer`` or
``consumer->classic`` in its detail); a refused one as ``conversion_refused``.

Modelled here, not defined by Kafka: members whose idle heartbeats the classic group elided
(``quiet``) are woken at an upgrade (they heartbeat for real in a consumer group).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

import numpy as np

from sim.config import AssignorCost, GroupConfig
from sim.coordinator.behaviour import BrokerBehaviour
from sim.coordinator.classic.group import ClassicGroup
from sim.coordinator.classic.states import ClassicGroupState
from sim.coordinator.consumer.classic_members import ConsumerGroupWithClassicMembers
from sim.wire import messages as m

CLASSIC = "classic"
CONSUMER = "consumer"


class GroupMember(Protocol):
    """What anyone outside a group reads of one of its members."""

    @property
    def member_id(self) -> str: ...

    @property
    def client(self) -> str: ...


class GroupCore(Protocol):
    """A group of either type, as the coordinator's actor and the world see it: its entry points
    (each returns the effects of one input) and what a run reads of it."""

    input_rank: int  # kernel rank of the input being handled (set by the actor)

    @property
    def members(self) -> Mapping[str, GroupMember]: ...

    @property
    def leader(self) -> str | None: ...

    @property
    def generation(self) -> int: ...

    @property
    def state(self) -> str: ...

    def handle(self, now: float, sender: str, msg) -> list[tuple]: ...

    def on_timer(self, now: float, key: tuple, at: float) -> list[tuple]: ...

    def on_control(self, now: float, sender: str, note) -> list[tuple]: ...


class MigratingCoordinator:
    """The group, of either type (``group``), and its conversions. A ``GroupCore`` itself: what
    it is asked (members, leader, generation, state) is the current group's."""

    def __init__(
        self,
        config: GroupConfig,
        metadata: Callable[[], tuple[int, dict[str, int]]],
        *,
        group_type: str = CLASSIC,
        assignor_cost: AssignorCost | None = None,
        elide_heartbeats: bool = False,
        id_rng: np.random.Generator | None = None,
        default_assignor: str | None = None,
        behaviour: BrokerBehaviour | None = None,
    ):
        self._behaviour = behaviour
        self._config = config
        self._metadata = metadata
        self._assignor_cost = assignor_cost
        self._elide = elide_heartbeats
        self._id_rng = id_rng if id_rng is not None else np.random.default_rng(0)
        self._default_assignor = default_assignor
        self.group: ClassicGroup | ConsumerGroupWithClassicMembers = (
            ClassicGroup(config, elide_heartbeats, id_rng=self._id_rng)
            if group_type == CLASSIC
            else ConsumerGroupWithClassicMembers(
                config,
                metadata,
                assignor_cost,
                default_assignor=default_assignor,
                elide_heartbeats=elide_heartbeats,
                id_rng=self._id_rng,
                behaviour=behaviour,
            )
        )

    @property
    def group_type(self) -> str:
        return CLASSIC if isinstance(self.group, ClassicGroup) else CONSUMER

    @property
    def input_rank(self) -> int:
        return self.group.input_rank

    @input_rank.setter
    def input_rank(self, rank: int) -> None:
        self.group.input_rank = rank

    @property
    def members(self) -> Mapping[str, GroupMember]:
        return self.group.members

    @property
    def leader(self) -> str | None:
        return self.group.leader

    @property
    def generation(self) -> int:
        return self.group.generation

    @property
    def state(self) -> str:
        return self.group.state

    # ------------------------------------------------------------------ entry points

    def handle(self, now: float, sender: str, msg) -> list[tuple]:
        g = self.group
        if isinstance(g, ClassicGroup):
            if isinstance(msg, m.ConsumerGroupHeartbeatRequest):
                return self._consumer_heartbeat_to_classic(now, sender, msg, g)
        elif (
            isinstance(msg, m.JoinGroupRequest)
            and not g.members
            and not g.parked
            and now >= g.busy_until
        ):
            # maybeDeleteEmptyConsumerGroup: a classic group takes the empty one's place
            c, out = ClassicGroup.in_place_of_empty(
                g, config=self._config, elide_heartbeats=self._elide, id_rng=self._id_rng
            )
            self.group = c
            return out + c.handle(now, sender, msg)
        return self._after(now, g.handle(now, sender, msg))

    def on_timer(self, now: float, key: tuple, at: float) -> list[tuple]:
        return self._after(now, self.group.on_timer(now, key, at))

    def superseded(self, key: tuple, at: float) -> bool:
        """Whether the timer ``key`` due ``at`` was re-armed or cancelled since, so that
        ``on_timer`` would return no effects (most of the coordinator's timers: a member's session
        expiry is re-armed at each heartbeat). A consumer group's deferred batches and a
        conversion under way are left to ``on_timer``."""
        g = self.group
        if g.timers.get(key) == at or key[0] == "deferred":
            return False
        return not (isinstance(g, ConsumerGroupWithClassicMembers) and g.downgrade_to is not None)

    def on_control(self, now: float, sender: str, note) -> list[tuple]:
        g = self.group
        if isinstance(g, ClassicGroup) and isinstance(note, m.Quiet):
            return []  # a consumer-protocol member's note to a consumer group that is gone
        return self._after(now, g.on_control(now, sender, note))

    def _after(self, now: float, out: list[tuple]) -> list[tuple]:
        g = self.group
        if isinstance(g, ConsumerGroupWithClassicMembers) and g.downgrade_to is not None:
            out = out + self._to_classic(now, g)
        return out

    # ------------------------------------------------------------------ upgrade

    def _consumer_heartbeat_to_classic(
        self, now: float, sender: str, req: m.ConsumerGroupHeartbeatRequest, c: ClassicGroup
    ) -> list[tuple]:
        """GroupMetadataManager.getOrMaybeCreateConsumerGroup for a classic group."""
        refusal = None
        if req.member_epoch == m.JOIN_GROUP_MEMBER_EPOCH:
            if not c.members and c.state == ClassicGroupState.EMPTY:
                g, out = ConsumerGroupWithClassicMembers.in_place_of_empty(
                    c, **self._consumer_settings()
                )
                self.group = g
                return out + g.handle(now, sender, req)
            refusal = self._upgrade_refusal(c)
            if refusal is None:
                return self._to_consumer(now, sender, req, c)
        return c.answer_consumer_heartbeat(sender, req, refusal)

    def _upgrade_refusal(self, c: ClassicGroup) -> str | None:
        """GroupMetadataManager.validateOnlineUpgrade: why not, or None."""
        cfg = self._config
        if not cfg.upgrade_enabled:
            return f"group.consumer.migration.policy={cfg.consumer_migration_policy}"
        if len(c.members) > cfg.consumer_max_size:
            return (
                f"{len(c.members)} members exceed group.consumer.max.size={cfg.consumer_max_size}"
            )
        return None

    def _consumer_settings(self) -> dict:
        return {
            "config": self._config,
            "metadata": self._metadata,
            "assignor_cost": self._assignor_cost,
            "default_assignor": self._default_assignor,
            "elide_heartbeats": self._elide,
            "id_rng": self._id_rng,
            "behaviour": self._behaviour,
        }

    def _to_consumer(
        self, now: float, sender: str, req: m.ConsumerGroupHeartbeatRequest, c: ClassicGroup
    ) -> list[tuple]:
        """convertToConsumerGroup, then the heartbeat in the consumer group, as one write that
        succeeds or fails whole. Members waiting in JoinGroup or SyncGroup are answered
        REBALANCE_IN_PROGRESS first, and stay answered whatever follows (those answers are not
        records). A member without an assignment (it joined after the last SyncGroup, or the last
        rebalance broke off in CompletingRebalance) joins the consumer group with no partitions
        (KAFKA-17733, switch ``upgrade_converts_unassigned_members``; without it the heartbeat is
        answered GROUP_ID_NOT_FOUND and the group stays classic). A group that has not selected a protocol yet (its first
        rebalance, or its first since it was empty) makes ConsumerGroup.fromClassicGroup fail:
        the heartbeat is answered UNKNOWN_SERVER_ERROR and the group stays classic. A heartbeat
        the consumer group refuses (GROUP_MAX_SIZE_REACHED in a group already full) fails the
        write as well: the answer is the refusal, and the group stays classic."""
        out = c.complete_pending_requests(m.REBALANCE_IN_PROGRESS)
        behaviour = self._behaviour or BrokerBehaviour()
        missing = c.members_without_assignment()
        if missing and not behaviour.upgrade_converts_unassigned_members:
            # before KAFKA-17733 fromClassicGroup cannot read an empty assignment
            return out + c.answer_consumer_heartbeat(
                sender,
                req,
                f"{missing} members without an assignment (ConsumerGroup.fromClassicGroup)",
            )
        if c.protocol is None:
            # fromClassicGroup reads each member's subscription under the group's protocol, which
            # a group in its first rebalance (or its first since it was empty) has not selected:
            # an unexpected exception, answered UNKNOWN_SERVER_ERROR
            return out + c.answer_consumer_heartbeat(
                sender,
                req,
                "no protocol selected yet (ConsumerGroup.fromClassicGroup)",
                m.UNKNOWN_SERVER_ERROR,
            )
        g, made = ConsumerGroupWithClassicMembers.from_classic(c, now, **self._consumer_settings())
        answer = g.handle(now, sender, req)
        refused = next(
            (
                e[2].error
                for e in answer
                if e[0] == "send"
                and e[1] == sender
                and isinstance(e[2], m.ConsumerGroupHeartbeatResponse)
                and e[2].error != m.NONE
            ),
            None,
        )
        if refused is not None:
            # the write fails whole: only the refusal leaves, the classic group stays
            return (
                out
                + [e for e in answer if e[0] == "send" and e[1] == sender]
                + c.upgrade_failed(sender, refused)
            )
        self.group = g
        return out + made + answer

    # ------------------------------------------------------------------ downgrade

    def _to_classic(self, now: float, g: ConsumerGroupWithClassicMembers) -> list[tuple]:
        """convertToClassicGroup: the member whose leave converts the group leaves it, and the
        classic group is made from the consumer group (it then prepares a rebalance)."""
        replaced = g.downgrade_replaced_by is not None
        leaving, out = g.leave_for_downgrade()
        c, made = ClassicGroup.from_consumer(
            g,
            leaving,
            now,
            config=self._config,
            elide_heartbeats=self._elide,
            id_rng=self._id_rng,
            rebalance=not replaced,
        )
        self.group = c
        out += made
        # requests that waited for the consumer group's assignor are the classic group's now
        for client, req in g.parked:
            out += self.handle(now, client, req)
        return out
