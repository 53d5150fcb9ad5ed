"""Online migration between the classic and the consumer group protocol: the group coordinator's
one group, held as a classic group (``sim.coordinator.classic.group.ClassicGroup``) or as a consumer group
(``sim.coordinator.consumer.classic_members.ConsumerGroupWithClassicMembers``), converted from one to the other as Kafka's
``GroupMetadataManager`` converts it. Sans-I/O like the cores it holds: ``handle``, ``on_timer``
and ``on_control`` return effects.

- Upgrade (``getOrMaybeCreateConsumerGroup``): a ConsumerGroupHeartbeat that joins (member epoch
  0) a classic group. An empty classic group is dropped and a consumer group made in its place,
  whatever the policy. Otherwise ``validateOnlineUpgrade``: ``group.consumer.migration.policy``
  must allow upgrades and the group must not have more members than ``group.consumer.max.size``;
  else the heartbeat is answered GROUP_ID_NOT_FOUND (as is any other ConsumerGroupHeartbeat to a
  classic group). ``convertToConsumerGroup``: members waiting in JoinGroup or SyncGroup are
  answered REBALANCE_IN_PROGRESS; every member becomes a classic member of a consumer group at
  group epoch = target epoch = the classic generation, Stable, with its last assignment as both
  its assigned partitions and its target (``ConsumerGroup.fromClassicGroup``), and a session
  timer of its own session timeout from now; then the heartbeat is handled by the consumer group.
- Downgrade (``convertToClassicGroup``): the consumer group marks ``downgrade_to`` when fencing
  its last consumer-protocol member leaves only classic members (``sim.coordinator.consumer.classic_members``). The
  classic group (``ClassicGroup.fromConsumerGroup``) is Stable at generation = the group epoch,
  with every other member, its target assignment as its assignment, the protocol the members
  vote for, and fresh sessions; then it prepares a rebalance, so every member rejoins.
- A classic JoinGroup to an empty consumer group drops it and makes a classic group
  (``maybeDeleteEmptyConsumerGroup``).

Committed offsets belong to the group, not to its type: the store moves to the new core.
Every conversion is recorded as a ``group_converted`` event (``classic->consumer`` or
``consumer->classic`` in its detail); a refused one as ``conversion_refused``.

Modelled here, not defined by Kafka: members whose idle heartbeats the classic group elided
(``quiet``) are woken at an upgrade (they heartbeat for real in a consumer group).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from assignors import Assignment
from sim.config import AssignorCost, GroupConfig
from sim.coordinator.classic.group import ClassicGroup, MemberMeta
from sim.coordinator.classic.states import ClassicGroupState
from sim.coordinator.consumer.classic_members import ConsumerGroupWithClassicMembers
from sim.coordinator.consumer.member import ClassicMemberMeta, ConsumerGroupMember
from sim.coordinator.consumer.states import MemberState
from sim.wire import messages as m

CLASSIC = "classic"
CONSUMER = "consumer"


class MigratingCoordinator:
    """The group, of either type, and its conversions. Attributes it does not define (members,
    state, generation, leader, ...) are the current core's."""

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
    ):
        self._config = config
        self._metadata = metadata
        self._assignor_cost = assignor_cost
        self._elide = elide_heartbeats
        self._id_rng = id_rng if id_rng is not None else np.random.default_rng(0)
        self._default_assignor = default_assignor
        self.group: ClassicGroup | ConsumerGroupWithClassicMembers = (
            self._new_classic() if group_type == CLASSIC else self._new_consumer()
        )

    def __getattr__(self, name):
        if name == "group":
            raise AttributeError(name)
        return getattr(self.group, name)

    @property
    def group_type(self) -> str:
        return CLASSIC if isinstance(self.group, ClassicGroup) else CONSUMER

    @property
    def input_rank(self) -> int:
        return self.group.input_rank

    @input_rank.setter
    def input_rank(self, rank: int) -> None:
        self.group.input_rank = rank

    def _new_classic(self) -> ClassicGroup:
        return ClassicGroup(self._config, self._elide, id_rng=self._id_rng)

    def _new_consumer(self) -> ConsumerGroupWithClassicMembers:
        return ConsumerGroupWithClassicMembers(
            self._config,
            self._metadata,
            self._assignor_cost,
            default_assignor=self._default_assignor,
            elide_heartbeats=self._elide,
            id_rng=self._id_rng,
        )

    # ------------------------------------------------------------------ entry points

    def handle(self, now: float, sender: str, msg) -> list[tuple]:
        g = self.group
        if isinstance(g, ClassicGroup):
            if isinstance(msg, m.ConsumerGroupHeartbeatRequest):
                return self._consumer_heartbeat_to_classic(now, sender, msg)
        elif (
            isinstance(msg, m.JoinGroupRequest)
            and not g.members
            and not g.parked
            and now >= g.busy_until
        ):
            return self._replace_empty(now, CLASSIC, g) + self.group.handle(now, sender, msg)
        return self._after(now, g.handle(now, sender, msg))

    def on_timer(self, now: float, key: tuple, at: float) -> list[tuple]:
        g = self.group
        return self._after(now, g.on_timer(now, key, at))

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

    def _consumer_heartbeat_to_classic(self, now: float, sender: str, req) -> list[tuple]:
        c = self.group
        assert isinstance(c, ClassicGroup)
        if req.member_epoch == m.JOIN_GROUP_MEMBER_EPOCH:
            if not c.members and c.state == ClassicGroupState.EMPTY:
                return self._replace_empty(now, CONSUMER, c) + self.group.handle(now, sender, req)
            refusal = self._upgrade_refusal(c)
            if refusal is None:
                return self._to_consumer(now, c) + self.group.handle(now, sender, req)
            c._event("conversion_refused", sender, f"classic->consumer: {refusal}")
        out = c._drain()
        out.append(
            (
                "send",
                sender,
                m.ConsumerGroupHeartbeatResponse(
                    m.GROUP_ID_NOT_FOUND,
                    req.member_id,
                    req.member_epoch,
                    correlation=req.correlation,
                ),
            )
        )
        return out

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

    def _replace_empty(self, now: float, to: str, old) -> list[tuple]:
        """An empty group of the other type is deleted and a new one made (its offsets stay)."""
        out = old._drain()
        new: ClassicGroup | ConsumerGroupWithClassicMembers
        if to == CONSUMER:
            g = self._new_consumer()
            g.group_epoch = g.target_epoch = old.generation
            new = g
        else:
            c = self._new_classic()
            c.generation = old.group_epoch
            new = c
        new.offsets = old.offsets
        new.input_rank = old.input_rank
        self.group = new
        frm = CONSUMER if to == CLASSIC else CLASSIC
        new._event("group_converted", None, f"{frm}->{to} empty")
        return out + new._drain()

    def _to_consumer(self, now: float, c: ClassicGroup) -> list[tuple]:
        """convertToConsumerGroup (ConsumerGroup.fromClassicGroup)."""
        for mm in c.members.values():
            # completeAllJoinFutures / completeAllSyncFutures(REBALANCE_IN_PROGRESS)
            if mm.awaiting_join:
                mm.awaiting_join = False
                c._reply(mm, m.JoinGroupResponse(m.REBALANCE_IN_PROGRESS, member_id=mm.member_id))
            if mm.awaiting_sync:
                mm.awaiting_sync = False
                c._reply(mm, m.SyncGroupResponse(m.REBALANCE_IN_PROGRESS))
        out = c._drain()
        g = self._new_consumer()
        g.offsets = c.offsets
        g.input_rank = c.input_rank
        gen = c.generation
        g.group_epoch = g.target_epoch = gen
        g._max_member_epoch = gen
        g.quiet_epoch = c.quiet_epoch + 1
        g._rebalance_open = c._rebalance_open
        wake = m.Wake(g.quiet_epoch, c.input_rank)
        for mm in c.members.values():
            sub = _subscription(mm, c.protocol)
            cm = ConsumerGroupMember(
                mm.member_id,
                mm.client,
                mm.group_instance_id,
                sub.rack_id,
                tuple(sub.topics),
                mm.rebalance_timeout_s,
                epoch=gen,
                previous_epoch=gen,
                state=MemberState.STABLE,
                last_heartbeat=now,
            )
            g.members[cm.member_id] = cm
            g._changed[cm.member_id] = None
            if cm.instance_id is not None:
                g.static_members[cm.instance_id] = cm.member_id
            g._subscribe(cm.topics, +1)
            g.set_classic(cm, ClassicMemberMeta(mm.session_timeout_s, mm.protocols))
            assigned = frozenset(mm.assignment.partitions)
            g._set_holdings(now, cm, assigned, frozenset())
            g.target[cm.member_id] = assigned
            if g.map_order.add(cm.member_id):
                g.assignor_members.retie()
            g._touch(cm)
            g._timer(("session", cm.member_id), now + mm.session_timeout_s)
            if mm.quiet:
                g.woken[cm.member_id] = None
                g.out.append(("control", mm.client, wake))
        # the converted group has no subscription metadata yet (createConsumerGroupRecords writes
        # none): the heartbeat that converted it finds it changed and bumps the group epoch, so
        # the assignor runs even when that member only replaces a static one
        g.subscribed_partitions = {}
        g._meta_version = -1
        g._update_state(now)
        g._event(
            "group_converted",
            None,
            f"classic->consumer members={len(g.members)} generation={gen} state_was={c.state}",
        )
        self.group = g
        return out + g._drain()

    # ------------------------------------------------------------------ downgrade

    def _to_classic(self, now: float, g: ConsumerGroupWithClassicMembers) -> list[tuple]:
        """convertToClassicGroup (ClassicGroup.fromConsumerGroup), then prepareRebalance."""
        assert g.downgrade_to is not None
        leaving = g.members[g.downgrade_to]
        reason = g.downgrade_reason
        g.downgrade_to = None
        g._event("member_removed", leaving.client, f"member_id={leaving.member_id} reason={reason}")
        out = g._drain()
        c = self._new_classic()
        c.offsets = g.offsets
        c.input_rank = g.input_rank
        c.generation = g.group_epoch
        c.quiet_epoch = g.quiet_epoch + 1
        c.state = ClassicGroupState.STABLE
        c._rebalance_open = g._rebalance_open
        for mid, mm in g.members.items():
            if mid == leaving.member_id:
                continue
            classic = mm.classic
            assert classic is not None  # every other member is classic (the downgrade check)
            meta = MemberMeta(
                mid,
                mm.client,
                mm.instance_id,
                classic.protocols,
                classic.session_timeout_s,
                mm.rebalance_timeout_s,
                assignment=Assignment(sorted(g.target.get(mid, frozenset()))),
                last_heartbeat=now,
            )
            c.members[mid] = meta
            for name in meta.names():
                c.protocol_counts[name] = c.protocol_counts.get(name, 0) + 1
            if meta.group_instance_id is not None:
                c.static_members[meta.group_instance_id] = mid
            if c.leader is None:
                c.leader = mid
        c.members_version += 1
        c.protocol = c._select_protocol()
        c.last_assigned_generation = c.generation
        for meta in c.members.values():
            c._schedule_expiry(meta)
        c._event(
            "group_converted",
            None,
            f"consumer->classic members={len(c.members)} "
            f"generation={c.generation} protocol={c.protocol}",
        )
        c._prepare_rebalance(now, "downgrade of the group from consumer to classic")
        self.group = c
        out += c._drain()
        # requests that waited for the consumer group's assignor are the classic group's now
        for client, req in g.parked:
            out += self.handle(now, client, req)
        g.parked = []
        return out


def _subscription(mm: MemberMeta, protocol: str | None):
    """The member's subscription for the group's protocol (its first when none was selected)."""
    for name, sub in mm.protocols:
        if name == protocol:
            return sub
    return mm.protocols[0][1]
