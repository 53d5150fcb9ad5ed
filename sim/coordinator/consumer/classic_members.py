"""Classic members inside a consumer group: the consumer group coordinator serving JoinGroup,
SyncGroup, Heartbeat and LeaveGroup on top of the consumer group protocol (KIP-848's online
migration), as a sans-I/O core beside ``sim.coordinator.consumer.group``.

Theory of operation (Kafka's ``GroupMetadataManager.classicGroupJoinToConsumerGroup``,
``classicGroupSyncToConsumerGroup``, ``classicGroupHeartbeatToConsumerGroup``,
``classicGroupLeaveToConsumerGroup`` and ``ConsumerGroup``'s classic-member helpers). A classic
member is a ``ConsumerGroupMember`` like any other, with ``classic`` metadata: its session timeout
and its protocols (assignor names with their subscriptions). The client is unchanged (``sim.client.classic``).

- JoinGroup: a dynamic member without an id gets MEMBER_ID_REQUIRED and a new id (a Kafka
  ``Uuid``); a group already at ``group.consumer.max.size`` refuses a new member
  (GROUP_MAX_SIZE_REACHED); protocols that not every classic member supports are refused
  (INCONSISTENT_GROUP_PROTOCOL). The subscription of its first protocol is its subscription;
  its owned partitions feed the reconciliation (``CurrentAssignmentBuilder``, as for a heartbeat):
  an eager member has revoked everything before it rejoins, so it reports nothing and is never
  held in UNREVOKED_PARTITIONS; a cooperative one is, until it rejoins without the partitions
  it gave up. A new member or a new subscription bumps the group epoch and the server-side
  assignor computes the target. The response carries the member's epoch as the generation,
  its first protocol, and no leader: every classic member just sends SyncGroup.
- SyncGroup answers the member's assigned partitions (what reconciliation gave it so far); a
  member behind the group epoch and not revoking is told REBALANCE_IN_PROGRESS.
- Heartbeat answers REBALANCE_IN_PROGRESS while the member must rejoin: its epoch is below the
  group epoch, it has partitions to revoke, or partitions it waits for were released.
- LeaveGroup removes the member and bumps the group epoch.
- Timers: the member's session runs for its own session.timeout.ms (not the group's
  ``group.consumer.session.timeout.ms``); a member told to rejoin has its rebalance timeout to
  send JoinGroup (join timer, armed if absent), and one that joined the same time to send
  SyncGroup (sync timer); either expiry fences it. A classic member has no consumer-protocol
  rebalance timer.
- Offset commits of a classic member must carry its epoch as generation (ILLEGAL_GENERATION).
- SyncGroup's protocol name must be the member's first protocol, the one its JoinGroup response
  named (throwIfClassicProtocolUnmatched: INCONSISTENT_GROUP_PROTOCOL).
- The downgrade checks: fencing (leave, session or rebalance timeout) the last consumer-protocol
  member of a group of at least two members whose others are all classic
  (``validateOnlineDowngradeWithFencedMember``), or a classic static member replacing it
  (``validateOnlineDowngradeWithReplacedMemberId``), converts the group into a classic group when
  ``group.consumer.migration.policy`` allows a downgrade and the members fit in
  ``group.max.size``. The core marks ``downgrade_to`` (and ``downgrade_replaced_by``);
  ``sim.coordinator.migration`` makes the classic group.

Modelled here, not defined by Kafka: idle heartbeats of classic members are never elided while
they are in a consumer group (every heartbeat is sent and answered). Not modelled: the protocol
type checks of JoinGroup and SyncGroup (every client here uses the ``consumer`` protocol type).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from assignors import Assignment, Subscription
from sim.config import AssignorCost, GroupConfig
from sim.coordinator.behaviour import BrokerBehaviour
from sim.coordinator.classic.group import ClassicGroup, MemberMeta
from sim.coordinator.consumer.group import ConsumerGroup
from sim.coordinator.consumer.member import ClassicMemberMeta, ConsumerGroupMember
from sim.coordinator.consumer.states import MemberState
from sim.wire import messages as m
from sim.wire.ids import kafka_uuid

_EMPTY: frozenset = frozenset()
_CLASSIC_REQUESTS = (
    m.JoinGroupRequest,
    m.SyncGroupRequest,
    m.HeartbeatRequest,
    m.LeaveGroupRequest,
)


class ConsumerGroupWithClassicMembers(ConsumerGroup):
    """The consumer group coordinator that also serves classic members. See the module docstring."""

    def __init__(
        self,
        config: GroupConfig,
        metadata,
        assignor_cost: AssignorCost | None = None,
        default_assignor: str | None = None,
        elide_heartbeats: bool = False,
        id_rng: np.random.Generator | None = None,
        behaviour: BrokerBehaviour | None = None,
    ):
        super().__init__(
            config, metadata, assignor_cost, default_assignor, elide_heartbeats, behaviour
        )
        self._id_rng = id_rng if id_rng is not None else np.random.default_rng(0)
        self.num_classic = 0  # ConsumerGroup.numClassicProtocolMembers
        self.classic_protocols: dict[str, int] = {}  # classicProtocolMembersSupportedProtocols
        self.downgrade_reason = ""
        # the classic static member whose join replaced ``downgrade_to`` and converts the group
        # (validateOnlineDowngradeWithReplacedMemberId); None for a downgrade by fencing
        self.downgrade_replaced_by: str | None = None

    # ------------------------------------------------------------------ conversions (online migration)

    @classmethod
    def from_classic(
        cls,
        classic: ClassicGroup,
        now: float,
        *,
        config: GroupConfig,
        metadata: Callable[[], tuple[int, dict[str, int]]],
        assignor_cost: AssignorCost | None,
        default_assignor: str | None,
        elide_heartbeats: bool,
        id_rng: np.random.Generator | None,
        behaviour: BrokerBehaviour | None = None,
    ) -> tuple[ConsumerGroupWithClassicMembers, list[tuple]]:
        """ConsumerGroup.fromClassicGroup (GroupMetadataManager.convertToConsumerGroup, once the
        classic group has answered its waiting JoinGroup and SyncGroup requests): every member
        becomes a classic member at group epoch = target epoch = the classic generation, Stable,
        with its last assignment as both its assigned partitions and its target, and a session
        timer of its own session timeout from now. Returns the group and the effects of making
        it."""
        g = cls(
            config, metadata, assignor_cost, default_assignor, elide_heartbeats, id_rng, behaviour
        )
        g.offsets = classic.offsets  # committed offsets belong to the group, not to its type
        g.input_rank = classic.input_rank
        gen = classic.generation
        g.group_epoch = g.target_epoch = gen
        g._max_member_epoch = gen
        g.quiet_epoch = classic.quiet_epoch + 1
        g._rebalance_open = classic.rebalance_open
        wake = m.Wake(g.quiet_epoch, classic.input_rank)
        for mm in classic.members.values():
            sub = _subscription(mm, classic.protocol)
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
                # (idle heartbeats elided in the classic group: they are sent for real here)
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
            f"classic->consumer members={len(g.members)} generation={gen} "
            f"state_was={classic.state}",
        )
        return g, g._drain()

    @classmethod
    def in_place_of_empty(
        cls,
        classic: ClassicGroup,
        *,
        config: GroupConfig,
        metadata: Callable[[], tuple[int, dict[str, int]]],
        assignor_cost: AssignorCost | None,
        default_assignor: str | None,
        elide_heartbeats: bool,
        id_rng: np.random.Generator | None,
        behaviour: BrokerBehaviour | None = None,
    ) -> tuple[ConsumerGroupWithClassicMembers, list[tuple]]:
        """A new consumer group in the place of an empty classic group, which is deleted (a
        ConsumerGroupHeartbeat that joins it, whatever the migration policy,
        GroupMetadataManager.getOrMaybeCreateConsumerGroup): its offsets stay (they are not the
        group's records), and it starts at group epoch 0 as any new consumer group. Returns the
        group and the effects of making it."""
        g = cls(
            config, metadata, assignor_cost, default_assignor, elide_heartbeats, id_rng, behaviour
        )
        g.offsets = classic.offsets
        g.input_rank = classic.input_rank
        g._event("group_converted", None, "classic->consumer empty")
        return g, g._drain()

    def classic_members_except(self, member_id: str, now: float) -> list[MemberMeta]:
        """Every member but ``member_id`` as a classic group's member (ClassicGroup
        .fromConsumerGroup): its classic protocols and session timeout, its target assignment as
        its assignment, a session from ``now``. Every one of them is a classic member (the
        downgrade check)."""
        out = []
        for mid, mm in self.members.items():
            if mid == member_id:
                continue
            classic = mm.classic
            assert classic is not None  # every other member is classic (the downgrade check)
            out.append(
                MemberMeta(
                    mid,
                    mm.client,
                    mm.instance_id,
                    classic.protocols,
                    classic.session_timeout_s,
                    mm.rebalance_timeout_s,
                    assignment=Assignment(sorted(self.target.get(mid, frozenset()))),
                    has_assignment=True,
                    last_heartbeat=now,
                )
            )
        # in the order the consumer group's members map iterates them, which is the order
        # fromConsumerGroup adds them (its first is the classic group's leader)
        out.sort(key=lambda mm: self.map_order.tie(mm.member_id))
        return out

    def leave_for_downgrade(self) -> tuple[str, list[tuple]]:
        """The member whose leave (or fencing) converts the group into a classic group
        (``downgrade_to``) leaves it: its removal is recorded, and the group is left to be
        converted (``ClassicGroup.from_consumer``). Returns its member id and the effects. (A
        member replaced by a classic static member is gone already.)"""
        leaving = self.downgrade_to
        assert leaving is not None
        self.downgrade_to = None
        if self.downgrade_replaced_by is not None:
            return leaving, self._drain()
        mm = self.members[leaving]
        self._event(
            "member_removed", mm.client, f"member_id={leaving} reason={self.downgrade_reason}"
        )
        return leaving, self._drain()

    # ------------------------------------------------------------------ entry points

    def handle(self, now: float, sender: str, msg) -> list[tuple]:
        if isinstance(msg, _CLASSIC_REQUESTS):
            if now < self.busy_until or self.parked:
                self.parked.append((sender, msg))
            else:
                self.handle_now(now, sender, msg)
                self._update_state(now)
            return self._drain()
        return super().handle(now, sender, msg)

    def handle_now(self, now: float, client: str, msg) -> None:
        if isinstance(msg, m.HeartbeatRequest):
            self._on_classic_heartbeat(now, client, msg)
        elif isinstance(msg, m.JoinGroupRequest):
            self._on_classic_join(now, client, msg)
        elif isinstance(msg, m.SyncGroupRequest):
            self._on_classic_sync(now, client, msg)
        elif isinstance(msg, m.LeaveGroupRequest):
            self._on_classic_leave(now, client, msg)
        else:
            super().handle_now(now, client, msg)

    # ------------------------------------------------------------------ classic metadata

    def set_classic(self, mm: ConsumerGroupMember, meta: ClassicMemberMeta) -> None:
        """The member speaks the classic protocol with ``meta`` (ConsumerGroup.updateMember's
        classic counters)."""
        if mm.classic is not None:
            self._uncount(mm.classic)
        mm.classic = meta
        self.num_classic += 1
        for name in meta.names():
            self.classic_protocols[name] = self.classic_protocols.get(name, 0) + 1

    def _uncount(self, meta: ClassicMemberMeta) -> None:
        self.num_classic -= 1
        for name in meta.names():
            n = self.classic_protocols[name] - 1
            if n:
                self.classic_protocols[name] = n
            else:
                del self.classic_protocols[name]

    def _forget_classic(self, mm: ConsumerGroupMember) -> None:
        if mm.classic is not None:
            self._uncount(mm.classic)
        mm.classic = None
        self._timer(("classic_join", mm.member_id), None)
        self._timer(("classic_sync", mm.member_id), None)

    def _session_s(self, mm: ConsumerGroupMember) -> float:
        meta = mm.classic
        return (
            meta.session_timeout_s if meta is not None else self.config.consumer_session_timeout_s
        )

    def supports_classic_protocols(self, names) -> bool:
        """ConsumerGroup.supportsClassicProtocols (for the consumer protocol type)."""
        if not self.members:
            return bool(names)
        return any(self.classic_protocols.get(n, 0) == self.num_classic for n in names)

    def all_classic_except(self, member_id: str) -> bool:
        """ConsumerGroup.allMembersUseClassicProtocolExcept."""
        mm = self.members.get(member_id)
        return mm is not None and mm.classic is None and self.num_classic == len(self.members) - 1

    def waiting_on_unreleased(self, mm: ConsumerGroupMember) -> bool:
        """ConsumerGroup.waitingOnUnreleasedPartition: a partition of its target that it does not
        have is still held by another member."""
        if mm.state != MemberState.UNRELEASED_PARTITIONS:
            return False
        held = self.partition_epoch
        return any(tp in held for tp in self.target.get(mm.member_id, _EMPTY) - mm.assigned)

    # ------------------------------------------------------------------ conversion back

    def _downgrade(self, now: float, mm: ConsumerGroupMember, reason: str) -> bool:
        """validateOnlineDowngradeWithFencedMember: True marks the group for conversion."""
        if not self.all_classic_except(mm.member_id) or len(self.members) <= 1:
            return False
        if not self.config.downgrade_enabled:
            self._event(
                "conversion_refused",
                mm.client,
                f"consumer->classic: group.consumer.migration.policy="
                f"{self.config.consumer_migration_policy} member_id={mm.member_id}",
            )
            return False
        if len(self.members) - 1 > self.config.max_size:
            self._event(
                "conversion_refused",
                mm.client,
                f"consumer->classic: {len(self.members) - 1} members exceed group.max.size "
                f"member_id={mm.member_id}",
            )
            return False
        self.downgrade_to = mm.member_id
        self.downgrade_reason = reason
        return True

    def _downgrade_on_replace(self, client: str, replaced: str) -> bool:
        """validateOnlineDowngradeWithReplacedMemberId: a classic static member that replaces the
        group's last consumer-protocol member converts the group when the policy allows a
        downgrade and the group fits in ``group.max.size``; the classic group stays Stable (no
        rebalance) with the joiner in the replaced member's place."""
        if not self.config.downgrade_enabled:
            self._event(
                "conversion_refused",
                client,
                f"consumer->classic: group.consumer.migration.policy="
                f"{self.config.consumer_migration_policy} member_id={replaced}",
            )
            return False
        if len(self.members) > self.config.max_size:
            self._event(
                "conversion_refused",
                client,
                f"consumer->classic: {len(self.members)} members exceed group.max.size "
                f"member_id={replaced}",
            )
            return False
        return True

    # ------------------------------------------------------------------ timers

    def _on_other_timer(self, now: float, key: tuple) -> None:
        kind = key[0]
        if kind not in ("classic_join", "classic_sync"):
            return
        mm = self.members.get(key[1])
        if mm is not None and mm.classic is not None:
            self._fence(now, mm, "join_timeout" if kind == "classic_join" else "sync_timeout")

    def _join_timer_if_absent(self, now: float, mm: ConsumerGroupMember) -> None:
        """scheduleConsumerGroupJoinTimeoutIfAbsent."""
        key = ("classic_join", mm.member_id)
        if key not in self.timers:
            self._timer(key, now + mm.rebalance_timeout_s)

    def _keep_alive(self, now: float, mm: ConsumerGroupMember, client: str) -> None:
        mm.client = client
        mm.last_heartbeat = now
        self._timer(("session", mm.member_id), now + self._session_s(mm))

    # ------------------------------------------------------------------ JoinGroup

    def _join_error(self, client: str, error: str, member_id: str = "") -> None:
        self._reply(client, m.JoinGroupResponse(error, member_id=member_id))

    def _on_classic_join(self, now: float, client: str, req: m.JoinGroupRequest) -> None:
        """classicGroupJoinToConsumerGroup."""
        iid = req.group_instance_id
        unknown = not req.member_id
        mid = kafka_uuid(self._id_rng) if unknown else req.member_id
        if len(self.members) >= self.config.consumer_max_size and mid not in self.members:
            # throwIfConsumerGroupIsFull
            self._join_error(client, m.GROUP_MAX_SIZE_REACHED, req.member_id)
            self._event("join_rejected", client, f"GROUP_MAX_SIZE_REACHED size={len(self.members)}")
            return
        names = tuple(n for n, _ in req.protocols)
        if not self.supports_classic_protocols(names):
            # throwIfClassicProtocolIsNotSupported
            self._join_error(client, m.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
            self._event(
                "join_rejected", client, f"INCONSISTENT_GROUP_PROTOCOL protocols={','.join(names)}"
            )
            return
        if unknown and iid is None:
            # JoinGroupRequest.requiresKnownMemberId (KIP-394)
            self._join_error(client, m.MEMBER_ID_REQUIRED, mid)
            return
        sub = req.protocols[0][1]
        bump = None
        replaces_last = None
        if iid is None:
            mm = self.members.get(mid)
            if mm is None:
                mm, bump = self._new_classic_member(now, client, mid, None, sub, req)
        else:
            holder = self.static_members.get(iid)
            if unknown:
                if holder is None:
                    mm, bump = self._new_classic_member(now, client, mid, iid, sub, req)
                else:
                    # validateOnlineDowngradeWithReplacedMemberId reads the group before the
                    # replacement: the one it replaces is its last consumer-protocol member
                    if self.all_classic_except(holder):
                        replaces_last = holder
                    # a new instance takes the static member's place (and its partitions)
                    mm = self._replace_static(now, client, self.members[holder], mid)
            elif holder is None:
                self._join_error(
                    client, m.UNKNOWN_MEMBER_ID, req.member_id
                )  # throwIfStaticMemberIsUnknown
                return
            elif holder != mid:
                self._join_error(
                    client, m.FENCED_INSTANCE_ID, req.member_id
                )  # throwIfInstanceIdIsFenced
                return
            else:
                mm = self.members[holder]
        self.set_classic(mm, ClassicMemberMeta(req.session_timeout_s, req.protocols))
        mm.rebalance_timeout_s = req.rebalance_timeout_s
        if sub.rack_id is not None and sub.rack_id != mm.rack:
            mm.rack = sub.rack_id
            mm.drop_spec()
            self._changed[mm.member_id] = None
        if tuple(sub.topics) != mm.topics:
            self._subscribe(mm.topics, -1)
            mm.topics = tuple(sub.topics)
            mm.drop_spec()
            self._changed[mm.member_id] = None
            self._subscribe(mm.topics, +1)
            bump = bump or f"member {client} changed its subscription"
        if self._refresh_metadata() and bump is None:
            bump = "partition metadata changed"
        if bump is not None:
            self._bump(now, bump)
        if self.group_epoch > self.target_epoch:
            self._compute_target(now)
        if mm.member_id not in self.map_order:
            if self.map_order.add(mm.member_id):
                self.assignor_members.retie()
            else:
                self.assignor_members.retie(mm.member_id)
        self._reconcile(now, mm, frozenset(sub.owned_partitions))
        # cancelConsumerGroupJoinTimeout, then the session and the sync timers (none when the
        # join converts the group: the classic group arms its own)
        self._timer(("classic_join", mm.member_id), None)
        if replaces_last is not None and self._downgrade_on_replace(client, replaces_last):
            self.downgrade_to = replaces_last
            self.downgrade_reason = "replaced"
            self.downgrade_replaced_by = mm.member_id
        else:
            self._keep_alive(now, mm, client)
            self._timer(("classic_sync", mm.member_id), now + req.rebalance_timeout_s)
        self._event(
            "classic_join",
            client,
            f"member_id={mm.member_id} epoch={mm.epoch} state={mm.state} "
            f"assigned={len(mm.assigned)} revoking={len(mm.pending_revocation)}",
        )
        self._reply(
            client,
            m.JoinGroupResponse(m.NONE, mm.epoch, names[0], "", mm.member_id),
            self._send_at(now),
        )

    def _new_classic_member(
        self,
        now: float,
        client: str,
        member_id: str,
        iid: str | None,
        sub: Subscription,
        req: m.JoinGroupRequest,
    ) -> tuple[ConsumerGroupMember, str]:
        mm = ConsumerGroupMember(
            member_id,
            client,
            iid,
            sub.rack_id,
            tuple(sub.topics),
            req.rebalance_timeout_s,
            last_heartbeat=now,
        )
        return self._register_member(mm, f"member_id={member_id} protocol=classic")

    # ------------------------------------------------------------------ SyncGroup, Heartbeat, LeaveGroup

    def _classic_member(
        self, member_id: str, iid: str | None
    ) -> tuple[ConsumerGroupMember | None, str]:
        """validateConsumerGroupMember, then throwIfMemberDoesNotUseClassicProtocol."""
        if iid is None:
            mm = self.members.get(member_id)
            if mm is None:
                return None, m.UNKNOWN_MEMBER_ID
        else:
            mm = self.members.get(self.static_members.get(iid, ""))
            if mm is None:
                return None, m.UNKNOWN_MEMBER_ID
            if mm.member_id != member_id:
                return None, m.FENCED_INSTANCE_ID
        if mm.classic is None:
            return None, m.UNKNOWN_MEMBER_ID
        return mm, m.NONE

    def _on_classic_sync(self, now: float, client: str, req: m.SyncGroupRequest) -> None:
        """classicGroupSyncToConsumerGroup."""
        mm, err = self._classic_member(req.member_id, req.group_instance_id)
        if mm is not None and req.generation != mm.epoch:
            err = m.ILLEGAL_GENERATION  # throwIfGenerationIdUnmatched
        elif (
            mm is not None
            and mm.classic is not None
            and req.protocol_name is not None
            and req.protocol_name != mm.classic.names()[0]
        ):
            # throwIfClassicProtocolUnmatched: the name its JoinGroup response gave, which is its
            # first protocol (a member that joined the classic group before the upgrade may hold
            # the name the classic group selected)
            err = m.INCONSISTENT_GROUP_PROTOCOL
        elif (
            mm is not None
            and self.group_epoch > mm.epoch
            and mm.state != MemberState.UNREVOKED_PARTITIONS
        ):
            # throwIfRebalanceInProgress
            self._join_timer_if_absent(now, mm)
            err = m.REBALANCE_IN_PROGRESS
        if mm is None or err != m.NONE:
            self._reply(client, m.SyncGroupResponse(err))
            return
        self._timer(("classic_sync", mm.member_id), None)
        self._keep_alive(now, mm, client)
        self._reply(client, m.SyncGroupResponse(m.NONE, Assignment(sorted(mm.assigned))))

    def _on_classic_heartbeat(self, now: float, client: str, req: m.HeartbeatRequest) -> None:
        """classicGroupHeartbeatToConsumerGroup."""
        mm, err = self._classic_member(req.member_id, req.group_instance_id)
        if mm is not None and req.generation != mm.epoch:
            err = m.ILLEGAL_GENERATION
        if mm is not None and err == m.NONE:
            self._keep_alive(now, mm, client)
            if (
                mm.epoch < self.group_epoch
                or mm.state == MemberState.UNREVOKED_PARTITIONS
                or (
                    mm.state == MemberState.UNRELEASED_PARTITIONS
                    and not self.waiting_on_unreleased(mm)
                )
            ):
                err = m.REBALANCE_IN_PROGRESS
                self._join_timer_if_absent(now, mm)
        self._reply(
            client,
            m.HeartbeatResponse(
                err, None, received_at=now, member_id=req.member_id, generation=req.generation
            ),
        )

    def _on_classic_leave(self, now: float, client: str, req: m.LeaveGroupRequest) -> None:
        """classicGroupLeaveToConsumerGroup (one member per request here)."""
        iid = req.group_instance_id
        if iid is None:
            mm = self.members.get(req.member_id)
            err = m.NONE if mm is not None else m.UNKNOWN_MEMBER_ID
        else:
            mm = self.members.get(self.static_members.get(iid, ""))
            if mm is None:
                err = m.UNKNOWN_MEMBER_ID
            elif req.member_id and mm.member_id != req.member_id:
                err = m.FENCED_INSTANCE_ID
            else:
                err = m.NONE
        if mm is not None and err == m.NONE and mm.classic is None:
            err = m.UNKNOWN_MEMBER_ID
        self._reply(client, m.LeaveGroupResponse(err))
        if mm is None or err != m.NONE:
            return
        self._remove(now, mm)
        self._event("member_removed", client, f"member_id={mm.member_id} reason=left")
        self._bump(now, f"member {client} left")


def _subscription(mm: MemberMeta, protocol: str | None) -> Subscription:
    """A classic member's subscription for the group's protocol (its first when none was selected)."""
    for name, sub in mm.protocols:
        if name == protocol:
            return sub
    return mm.protocols[0][1]
