"""The group coordinator as a sans-I/O state machine (Kafka's classic ``GroupCoordinator`` and
``GroupMetadata``).

Theory of operation. Everything that changes the group's state lives here, and nothing here knows
about trio, the network or the clock: the actor calls ``handle(now, sender, message)``,
``on_timer(now, key, at)`` or ``on_control(now, sender, note)`` and gets back a list of effects
(see ``sim.wire.messages``): messages to send, timers to arm, events and intervals to record.

States (``ClassicGroupState``, in ``states``): Empty -> PreparingRebalance -> CompletingRebalance
-> Stable, and Dead; ``_transition`` enters one only from its valid previous states.

- PreparingRebalance is the JoinGroup barrier. It completes when every member has rejoined and
  no MEMBER_ID_REQUIRED member is pending (checked as the rebalance starts, too:
  maybeCompleteJoinElseSchedule), or when the rebalance timeout (the largest
  max.poll.interval.ms of the members) expires; dynamic members that did not rejoin are removed,
  and a leader that did not rejoin is replaced by the first joined member of the members map.
  From Empty the barrier first waits group.initial.rebalance.delay.ms, extended while new
  members keep arriving (``InitialDelayedJoin``); a LeaveGroup does not end that delay (the
  group stays PreparingRebalance, even with no member left, until it ends), a session expiry
  does when every member left has joined.
- Kafka's members map is a ``java.util.HashMap``: its iteration order (``members_map``, the model
  of ``assignors.java.JavaHashMap``) names the new leader when the leader leaves and decides a
  tie in the protocol vote (the votes are a ``HashMap`` of protocol names too).
- A member removed while its JoinGroup waits (LeaveGroup, expiry) is answered UNKNOWN_MEMBER_ID.
  A new member can be expired while it waits, after the new member join timeout (5 minutes).
- A member's assignment is what the last completed SyncGroup gave it; a new member has none, and
  a rebalance that starts in CompletingRebalance resets every member's
  (resetAndPropagateAssignmentWithError). An online upgrade carries these over
  (``sim.coordinator.migration``).
- CompletingRebalance waits for the leader's SyncGroup. Members that have not sent SyncGroup
  within the rebalance timeout are removed and a new rebalance starts (KAFKA-13213).
- Heartbeats answer REBALANCE_IN_PROGRESS while preparing, UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION
  / FENCED_INSTANCE_ID for stale callers; a member whose session expires is removed.
- Static members (KIP-345): a known group.instance.id rejoining with a new member id replaces the
  old one (fenced); in Stable it gets its previous assignment without a rebalance when the
  protocol the group would select is unchanged, whatever else changed in its subscription.
  Static members are removed only by session expiry (they never send LeaveGroup in this
  simulator).

Idle heartbeat elision: a member whose heartbeat would only answer NONE in a Stable group is
marked ``quiet`` (granted in a heartbeat response) and is considered alive without heartbeats.
When the group leaves Stable the coordinator sends every quiet member a ``Wake`` note; a member
that stops (crash, pause, network fault) sends ``Unquiet`` with the arrival time of its last
heartbeat, so the session expiry is exactly what real heartbeats would have produced.
"""

from __future__ import annotations

from typing import Protocol

import attrs
import numpy as np

from assignors import Assignment, Subscription
from assignors.java import JavaHashMap, hashmap_insertion_order, java_sort_key, java_string_hash
from sim.config import GroupConfig
from sim.coordinator.classic.states import ClassicGroupState
from sim.coordinator.offsets import OffsetStore
from sim.errors import IllegalTransition
from sim.wire import messages as m
from sim.wire.ids import classic_member_id, default_client_id


@attrs.define(slots=True, eq=False)
class MemberMeta:
    """What the coordinator knows of one member (GroupMetadata's MemberMetadata)."""

    member_id: str
    client: str  # network address of the member's client
    group_instance_id: str | None
    protocols: tuple[tuple[str, Subscription], ...]
    session_timeout_s: float
    rebalance_timeout_s: float
    awaiting_join: bool = False
    awaiting_sync: bool = False
    assignment: Assignment = attrs.field(factory=Assignment)
    # ClassicGroupMember.hasAssignment: set by a completed SyncGroup (even without partitions);
    # a new member, or every member after a rebalance that broke off in CompletingRebalance
    # (resetAndPropagateAssignmentWithError), has none
    has_assignment: bool = False
    # ClassicGroupMember.isNew: added by this rebalance, not yet answered its JoinGroup; it can
    # be expired while it waits (hasSatisfiedHeartbeat)
    is_new: bool = False
    last_heartbeat: float = 0.0
    quiet: bool = False
    hold_quiet: bool = False

    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.protocols)


def _disjoint_by_indices(lists) -> bool:
    """True when every list carries integer ``indices`` over one shared layout (the fast
    assignors' results: ``topics`` and ``offsets`` objects in common) and no index repeats.
    False means "not known": the caller then checks ``TopicPartition`` by ``TopicPartition``
    (hashing 100,000 of them per round was most of a SyncGroup at 10,000 members)."""
    topics = offsets = None
    chunks = []
    for tps in lists:
        indices = getattr(tps, "indices", None)
        if indices is None:
            return False
        if topics is None:
            topics, offsets = tps.topics, tps.offsets
        elif tps.topics is not topics or tps.offsets is not offsets:
            return False
        if len(indices):
            chunks.append(indices)
    if len(chunks) < 2:
        return True
    keys = np.sort(np.concatenate(chunks))
    return not bool((keys[1:] == keys[:-1]).any())


# GroupCoordinatorConfig.CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS: how long a new member's JoinGroup
# may wait before the member is expired (addMemberThenRebalanceOrCompleteJoin)
NEW_MEMBER_JOIN_TIMEOUT_S = 300.0


def _members_map() -> JavaHashMap:
    """The iteration order of ``ClassicGroup.members`` (a ``java.util.HashMap`` of member ids), which
    names the leader after the leader leaves and the first member to vote."""
    return JavaHashMap(java_string_hash, java_sort_key)


class ConsumerGroupSource(Protocol):
    """What a classic group made from a consumer group reads of it (``ClassicGroup.from_consumer``,
    ``ClassicGroup.in_place_of_empty``): its epochs, offsets, whether a rebalance is open, and
    its members as classic members (the consumer group builds those: it knows its members)."""

    offsets: OffsetStore
    input_rank: int
    group_epoch: int
    quiet_epoch: int

    @property
    def rebalance_open(self) -> bool: ...

    def classic_members_except(self, member_id: str, now: float) -> list[MemberMeta]: ...


class ClassicGroup:
    """Kafka's classic group state machine for one group. Sans-I/O: see the module docstring.

    A new group is Empty; one converted from a consumer group is made by ``from_consumer``
    (Stable, as Kafka's ``ClassicGroup.fromConsumerGroup`` makes it)."""

    def __init__(
        self,
        config: GroupConfig,
        elide_heartbeats: bool = True,
        id_rng: np.random.Generator | None = None,
        *,
        initial_state: ClassicGroupState = ClassicGroupState.EMPTY,
    ):
        self.config = config
        # member ids' random part (ClassicGroup.generateMemberId): a seeded stream of the run's
        self._id_rng = id_rng if id_rng is not None else np.random.default_rng(0)
        self.elide = elide_heartbeats
        self.state = initial_state
        self.generation = 0
        self.protocol: str | None = None
        self.leader: str | None = None
        self.members: dict[str, MemberMeta] = {}  # insertion order = join order
        self.members_map = _members_map()  # Kafka's iteration order of the same member ids
        self.members_version = (
            0  # bumped whenever a member id is added or removed (cheap change test)
        )
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: set[str] = set()  # KIP-394: told MEMBER_ID_REQUIRED
        self.pending_sync: set[str] = set()
        self.n_awaiting = 0  # members whose JoinGroup waits in the barrier
        self.protocol_counts: dict[str, int] = {}
        self.timers: dict[tuple, float] = {}
        self.quiet_epoch = 0
        self._new_member_added = False
        self._initial_remaining_s = 0.0
        self._rebalance_open = False
        self.out: list[tuple] = []
        self.last_assigned_generation = 0
        self.offsets = OffsetStore()
        self.input_rank = -1  # kernel rank of the input being handled (set by the actor)

    # ------------------------------------------------------------------ conversions (online migration)

    @classmethod
    def from_consumer(
        cls,
        consumer: ConsumerGroupSource,
        leaving_member_id: str,
        now: float,
        *,
        config: GroupConfig,
        elide_heartbeats: bool,
        id_rng: np.random.Generator | None,
        rebalance: bool = True,
    ) -> tuple[ClassicGroup, list[tuple]]:
        """ClassicGroup.fromConsumerGroup, then prepareRebalance (GroupMetadataManager
        .convertToClassicGroup): a Stable group at generation = the consumer group's epoch, with
        every member but the one whose leave converts it, each with its target assignment as its
        assignment and a fresh session, the protocol the members vote for; then a rebalance, so
        that every member rejoins. Without ``rebalance`` (the conversion a classic static member
        makes by replacing the last consumer-protocol one) it stays Stable. Returns the group and
        the effects of making it."""
        c = cls(config, elide_heartbeats, id_rng, initial_state=ClassicGroupState.STABLE)
        c.offsets = consumer.offsets  # committed offsets belong to the group, not to its type
        c.input_rank = consumer.input_rank
        c.generation = consumer.group_epoch
        c.quiet_epoch = consumer.quiet_epoch + 1
        c._rebalance_open = consumer.rebalance_open
        for meta in consumer.classic_members_except(leaving_member_id, now):
            c.members[meta.member_id] = meta
            c.members_map.put(meta.member_id)
            for name in meta.names():
                c.protocol_counts[name] = c.protocol_counts.get(name, 0) + 1
            if meta.group_instance_id is not None:
                c.static_members[meta.group_instance_id] = meta.member_id
            if c.leader is None:
                c.leader = meta.member_id
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
        if rebalance:
            c._prepare_rebalance(now, "downgrade of the group from consumer to classic")
        return c, c._drain()

    @classmethod
    def in_place_of_empty(
        cls,
        consumer: ConsumerGroupSource,
        *,
        config: GroupConfig,
        elide_heartbeats: bool,
        id_rng: np.random.Generator | None,
    ) -> tuple[ClassicGroup, list[tuple]]:
        """A new classic group in the place of an empty consumer group, which is deleted (a
        classic JoinGroup to it, GroupMetadataManager.maybeDeleteEmptyConsumerGroup): its offsets
        stay (they are not the group's records), and it starts at generation 0 as any new group
        (getOrMaybeCreateClassicGroup). Returns the group and the effects of making it."""
        c = cls(config, elide_heartbeats, id_rng)
        c.offsets = consumer.offsets
        c.input_rank = consumer.input_rank
        c._event("group_converted", None, "consumer->classic empty")
        return c, c._drain()

    @property
    def rebalance_open(self) -> bool:
        """Whether a rebalance interval is open (it closes when the group is Stable or Empty)."""
        return self._rebalance_open

    def upgrade_failed(self, sender: str, error: str) -> list[tuple]:
        """The heartbeat that was converting this group was refused by the consumer group made
        from it (``error``), so the conversion did not happen. Returns the effects."""
        self._event("conversion_refused", sender, f"classic->consumer: the heartbeat got {error}")
        return self._drain()

    def members_without_assignment(self) -> int:
        """How many members have no assignment (``MemberMeta.has_assignment``)."""
        return sum(1 for mm in self.members.values() if not mm.has_assignment)

    def complete_pending_requests(self, error: str) -> list[tuple]:
        """completeAllJoinFutures and completeAllSyncFutures: every member waiting for its
        JoinGroup or SyncGroup response gets ``error`` (the group is about to be converted).
        Returns the effects."""
        for mm in self.members.values():
            if mm.awaiting_join:
                mm.awaiting_join = False
                self.n_awaiting -= 1
                self._reply(mm, m.JoinGroupResponse(error, member_id=mm.member_id))
            if mm.awaiting_sync:
                mm.awaiting_sync = False
                self._reply(mm, m.SyncGroupResponse(error))
        return self._drain()

    def answer_consumer_heartbeat(
        self,
        sender: str,
        req: m.ConsumerGroupHeartbeatRequest,
        refusal: str | None,
        error: str = m.GROUP_ID_NOT_FOUND,
    ) -> list[tuple]:
        """A ConsumerGroupHeartbeat the classic group does not take (the group is not converted):
        GROUP_ID_NOT_FOUND, as Kafka answers one for a group of the other type, or ``error``;
        ``refusal`` is why a join did not convert the group (``conversion_refused``), None for any
        other heartbeat. Returns the effects."""
        if refusal is not None:
            self._event("conversion_refused", sender, f"classic->consumer: {refusal}")
        self._reply(
            sender,
            m.ConsumerGroupHeartbeatResponse(
                error, req.member_id, req.member_epoch, correlation=req.correlation
            ),
        )
        return self._drain()

    # ------------------------------------------------------------------ plumbing

    def _emit(self, *effect) -> None:
        self.out.append(effect)

    def _event(self, kind: str, member: str | None = None, detail: str = "") -> None:
        self.out.append(("event", kind, member, self.generation, detail))

    def _timer(self, key: tuple, at: float | None) -> None:
        if at is None:
            self.timers.pop(key, None)
        else:
            self.timers[key] = at
        self.out.append(("timer", key, at))

    def _drain(self) -> list[tuple]:
        out, self.out = self.out, []
        return out

    def _transition(self, new: ClassicGroupState) -> None:
        if self.state not in new.valid_previous_states():
            raise IllegalTransition(f"group cannot go from {self.state} to {new}")
        self.state = new

    def _reply(self, meta_or_client, msg) -> None:
        client = meta_or_client.client if isinstance(meta_or_client, MemberMeta) else meta_or_client
        self._emit("send", client, msg)

    @property
    def rebalance_timeout_s(self) -> float:
        return max((mm.rebalance_timeout_s for mm in self.members.values()), default=0.0)

    # ------------------------------------------------------------------ entry points

    def handle(self, now: float, sender: str, msg) -> list[tuple]:
        """React to a request from the member client ``sender``."""
        if isinstance(msg, m.HeartbeatRequest):
            self._on_heartbeat(now, sender, msg)
        elif isinstance(msg, m.JoinGroupRequest):
            self._on_join(now, sender, msg)
        elif isinstance(msg, m.SyncGroupRequest):
            self._on_sync(now, sender, msg)
        elif isinstance(msg, m.LeaveGroupRequest):
            self._on_leave(now, sender, msg)
        elif isinstance(msg, m.OffsetCommitRequest):
            self._on_commit(now, sender, msg)
        elif isinstance(msg, m.OffsetFetchRequest):
            # OffsetFetch needs no membership in the classic protocol; it answers what is stored.
            self._reply(
                sender,
                m.OffsetFetchResponse(
                    m.NONE, msg.partitions, self.offsets.fetch(msg.partitions), msg.seq
                ),
            )
        else:
            raise TypeError(f"coordinator cannot handle {msg!r}")
        return self._drain()

    def on_timer(self, now: float, key: tuple, at: float) -> list[tuple]:
        if self.timers.get(key) != at:
            return []  # re-armed or cancelled since
        del self.timers[key]
        kind = key[0]
        if kind == "expire":
            self._on_session_expiry(now, key[1])
        elif kind == "join":
            self._on_join_timer(now)
        elif kind == "sync":
            self._on_sync_expiry(now)
        elif kind == "pending" and key[1] in self.pending_members:
            self.pending_members.discard(key[1])
            self._event("member_removed", None, f"member_id={key[1]} reason=pending_expired")
            # removePendingMemberAndUpdateClassicGroup: even during the initial delay
            if self.state == ClassicGroupState.PREPARING_REBALANCE and self._all_joined():
                self._complete_join(now)
        return self._drain()

    def on_control(self, now: float, sender: str, note) -> list[tuple]:
        if isinstance(note, m.ElidedCommits):
            meta = self.members.get(note.member_id)
            if meta is not None and note.generation == self.generation:
                self.offsets.commit(note.offsets, note.position_s, note.ahead)
            return self._drain()
        if isinstance(note, m.Unquiet):
            meta = self.members.get(note.member_id)
            if meta is not None and note.hold is not None:
                meta.hold_quiet = note.hold
            if meta is not None and meta.quiet and (note.last_arrival is not None or note.hold):
                # a member that stopped before our quiet grant reached it: its last heartbeat
                # was the one we granted on
                meta.quiet = False
                if note.last_arrival is not None:
                    meta.last_heartbeat = min(note.last_arrival, now)
                self._schedule_expiry(meta)
                if meta.last_heartbeat + meta.session_timeout_s <= now:
                    self._on_session_expiry(now, meta.member_id)
        return self._drain()

    # ------------------------------------------------------------------ membership helpers

    def _new_member_id(self, instance_id: str | None) -> str:
        """ClassicGroup.generateMemberId: ``group.instance.id`` or ``client.id``, "-", a random
        UUID. Every client here runs with the Java consumer's default client.id, which is the same
        for every dynamic member of a group, so dynamic members sort by their UUIDs alone."""
        return classic_member_id(default_client_id(instance_id), instance_id, self._id_rng)

    def _kafka_order(self):
        """The member ids in the order Kafka's members ``HashMap`` iterates them."""
        return self.members_map.keys()

    def _await(self, meta: MemberMeta) -> None:
        """The member's JoinGroup now waits in the barrier (counted, so the check stays O(1))."""
        if not meta.awaiting_join:
            meta.awaiting_join = True
            self.n_awaiting += 1

    def _add_member(self, now: float, meta: MemberMeta) -> None:
        self.members[meta.member_id] = meta
        self.members_map.put(meta.member_id)
        self.members_version += 1
        if meta.awaiting_join:
            self.n_awaiting += 1
        for name in meta.names():
            self.protocol_counts[name] = self.protocol_counts.get(name, 0) + 1
        if meta.group_instance_id is not None:
            self.static_members[meta.group_instance_id] = meta.member_id
        if self.leader is None:
            self.leader = meta.member_id
        meta.last_heartbeat = now
        self._event("member_added", meta.client, f"member_id={meta.member_id}")

    def _update_member(self, meta: MemberMeta, req: m.JoinGroupRequest) -> None:
        """ClassicGroup.updateMember: the protocols and both timeouts of the member's JoinGroup."""
        meta.session_timeout_s = req.session_timeout_s
        meta.rebalance_timeout_s = req.rebalance_timeout_s
        for name in meta.names():
            self.protocol_counts[name] -= 1
        meta.protocols = req.protocols
        for name in meta.names():
            self.protocol_counts[name] = self.protocol_counts.get(name, 0) + 1

    def _remove_member(self, now: float, member_id: str, reason: str) -> MemberMeta:
        meta = self.members.pop(member_id)
        self.members_map.remove(member_id)
        self.members_version += 1
        if meta.awaiting_join:
            # removeMemberAndUpdateClassicGroup, removeCurrentMemberFromClassicGroup: a JoinGroup
            # that waits is answered before the member goes, so that a live client rejoins
            meta.awaiting_join = False
            self.n_awaiting -= 1
            self._reply(meta, m.JoinGroupResponse(m.UNKNOWN_MEMBER_ID))
        for name in meta.names():
            self.protocol_counts[name] -= 1
            if not self.protocol_counts[name]:
                del self.protocol_counts[name]
        if (
            meta.group_instance_id is not None
            and self.static_members.get(meta.group_instance_id) == member_id
        ):
            del self.static_members[meta.group_instance_id]
        self.pending_sync.discard(member_id)
        self.timers.pop(("expire", member_id), None)
        if self.leader == member_id:
            # ClassicGroup.remove: the first member id of the members HashMap
            self.leader = next(self._kafka_order(), None)
        self._event("member_removed", meta.client, f"member_id={member_id} reason={reason}")
        return meta

    def _supports(self, names: tuple[str, ...]) -> bool:
        """ClassicGroup.supportsProtocols: one of the joiner's protocols must be supported by every
        member, the joiner's own entry included when it is a member already (so a member cannot
        move the group to a protocol it alone supports); an Empty group takes any."""
        if not names:
            return False
        if self.state == ClassicGroupState.EMPTY:
            return True
        n = len(self.members)
        return any(self.protocol_counts.get(name, 0) == n for name in names)

    def _schedule_expiry(self, meta: MemberMeta) -> None:
        self._timer(("expire", meta.member_id), meta.last_heartbeat + meta.session_timeout_s)

    def _wake_quiet_members(self, now: float) -> None:
        """Idle heartbeats stop being idle: every quiet member heartbeats for real again."""
        if not self.elide:
            return
        woken = [mm for mm in self.members.values() if mm.quiet]
        if not woken:
            return
        self.quiet_epoch += 1
        for mm in woken:
            mm.quiet = False
            mm.last_heartbeat = now  # refined by the member's Unquiet note
            self._schedule_expiry(mm)
            self._emit("control", mm.client, m.Wake(self.quiet_epoch, self.input_rank))

    # ------------------------------------------------------------------ rebalance

    def _prepare_rebalance(self, now: float, reason: str) -> None:
        """GroupCoordinator.prepareRebalance."""
        if self.state == ClassicGroupState.COMPLETING_REBALANCE:
            # resetAndPropagateAssignmentWithError: every member's assignment is reset, and
            # members waiting in SyncGroup learn it now.
            for mm in self.members.values():
                mm.assignment = Assignment()
                mm.has_assignment = False
                if mm.awaiting_sync:
                    mm.awaiting_sync = False
                    self._reply(mm, m.SyncGroupResponse(m.REBALANCE_IN_PROGRESS))
        self.pending_sync.clear()
        self._timer(("sync",), None)
        was_empty = self.state == ClassicGroupState.EMPTY
        self._transition(ClassicGroupState.PREPARING_REBALANCE)
        self._wake_quiet_members(now)
        if not self._rebalance_open:
            self._rebalance_open = True
            self._emit("open", "rebalance", None, None, None)
        self._event("rebalance_start", None, reason)
        if was_empty:
            delay = self.config.initial_rebalance_delay_s
            self._initial_remaining_s = max(self.rebalance_timeout_s - delay, 0.0)
            self._new_member_added = False
            self._join_mode = "initial"
            self._timer(
                ("join",),
                now + min(delay, self.rebalance_timeout_s)
                if self.rebalance_timeout_s
                else now + delay,
            )
        else:
            self._join_mode = "normal"
            if self._all_joined():
                # maybeCompleteJoinElseSchedule: every member has joined already (the one whose
                # JoinGroup started this rebalance was the last, or none is left)
                self._complete_join(now)
            else:
                self._timer(("join",), now + self.rebalance_timeout_s)

    def _maybe_prepare_rebalance(self, now: float, reason: str) -> None:
        if self.state in (
            ClassicGroupState.STABLE,
            ClassicGroupState.COMPLETING_REBALANCE,
            ClassicGroupState.EMPTY,
        ):
            self._prepare_rebalance(now, reason)

    def _all_joined(self) -> bool:
        return not self.pending_members and self.n_awaiting == len(self.members)

    def _maybe_complete_join(self, now: float) -> None:
        """DelayedJoin.tryComplete (the initial delay never completes early)."""
        if (
            self.state == ClassicGroupState.PREPARING_REBALANCE
            and self._join_mode == "normal"
            and self._all_joined()
        ):
            self._complete_join(now)

    def _on_join_timer(self, now: float) -> None:
        if self.state != ClassicGroupState.PREPARING_REBALANCE:
            return
        if self._join_mode == "initial":
            # InitialDelayedJoin: extend while new members arrive, within the rebalance timeout.
            delay = self.config.initial_rebalance_delay_s
            if self._new_member_added and self._initial_remaining_s > 0:
                step = min(delay, self._initial_remaining_s)
                self._initial_remaining_s = max(self._initial_remaining_s - delay, 0.0)
                self._new_member_added = False
                self._timer(("join",), now + step)
                return
        self._complete_join(now)

    def _complete_join(self, now: float) -> None:
        """GroupCoordinator.onCompleteJoin."""
        self._timer(("join",), None)
        for mm in list(self.members.values()):
            if not mm.awaiting_join and mm.group_instance_id is None:
                self._remove_member(now, mm.member_id, "not_rejoined")
        if not self.members:
            # initNextGeneration with no members: the group is empty
            self.generation += 1
            self.protocol = None
            self._transition(ClassicGroupState.EMPTY)
            self._close_rebalance()
            self._event("empty")
            return
        assert self.leader is not None  # (a group with members has a leader)
        if not self.members[self.leader].awaiting_join:
            # maybeElectNewJoinedLeader: the first member of the members map that has joined
            joined = next(
                (mid for mid in self._kafka_order() if self.members[mid].awaiting_join), None
            )
            if joined is None:
                # Only static members are left and none rejoined: the join phase is scheduled
                # again until their sessions remove them (completeClassicGroupJoin).
                self._timer(("join",), now + self.rebalance_timeout_s)
                return
            self.leader = joined
        self.generation += 1
        self.protocol = self._select_protocol()
        self._transition(ClassicGroupState.COMPLETING_REBALANCE)
        self._event(
            "join_complete",
            None,
            f"members={len(self.members)} protocol={self.protocol} leader={self.members[self.leader].client}",
        )
        all_members = tuple(
            (mm.member_id, self._subscription_of(mm)) for mm in self.members.values()
        )
        for mm in self.members.values():
            self.pending_sync.add(mm.member_id)
            mm.is_new = False
            # completeClassicGroupJoin restarts every member's session, joined or not
            mm.last_heartbeat = now
            self._schedule_expiry(mm)
            if not mm.awaiting_join:
                continue
            mm.awaiting_join = False
            self.n_awaiting -= 1
            is_leader = mm.member_id == self.leader
            self._reply(
                mm,
                m.JoinGroupResponse(
                    m.NONE,
                    self.generation,
                    self.protocol,
                    self.leader,
                    mm.member_id,
                    all_members if is_leader else (),
                ),
            )
        self._timer(("sync",), now + self.rebalance_timeout_s)

    def _subscription_of(self, mm: MemberMeta) -> Subscription:
        for name, sub in mm.protocols:
            if name == self.protocol:
                return sub
        raise AssertionError("selected protocol not supported by a member")

    def _select_protocol(self) -> str:
        """ClassicGroup.selectProtocol: the candidates are the protocols every member supports;
        each member votes for its favourite candidate. The votes are a ``HashMap`` and the winner
        is the first protocol with the most votes in its iteration order (``Stream.max`` keeps the
        first of equals), so a tie goes to the protocol name that iterates first, not to anyone's
        preference."""
        n = len(self.members)
        candidates = {name for name, c in self.protocol_counts.items() if c == n}
        votes: dict[str, int] = {}
        for mid in self._kafka_order():
            for name in self.members[mid].names():
                if name in candidates:
                    votes[name] = votes.get(name, 0) + 1
                    break
        best = max(votes.values())
        return next(name for name in hashmap_insertion_order(votes) if votes[name] == best)

    def _close_rebalance(self) -> None:
        if self._rebalance_open:
            self._rebalance_open = False
            self._emit("close", "rebalance", None, None, None)

    # ------------------------------------------------------------------ JoinGroup

    def _on_join(self, now: float, client: str, req: m.JoinGroupRequest) -> None:
        if self.state == ClassicGroupState.DEAD:
            self._reply(client, m.JoinGroupResponse(m.COORDINATOR_NOT_AVAILABLE))
            return
        names = tuple(n for n, _ in req.protocols)
        existing = self.members.get(req.member_id)
        if not self._supports(names):
            self._reply(
                client, m.JoinGroupResponse(m.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id)
            )
            self._event("join_rejected", client, "INCONSISTENT_GROUP_PROTOCOL")
            return
        if req.member_id == "":
            if req.group_instance_id is not None:
                self._static_join(now, client, req)
                return
            # KIP-394: a dynamic member first gets its id, then rejoins with it.
            member_id = self._new_member_id(None)
            self.pending_members.add(member_id)
            self._timer(("pending", member_id), now + req.session_timeout_s)
            self._reply(client, m.JoinGroupResponse(m.MEMBER_ID_REQUIRED, member_id=member_id))
            return
        if req.member_id in self.pending_members:
            self.pending_members.discard(req.member_id)
            self._timer(("pending", req.member_id), None)
            self._add_and_rebalance(now, client, req, req.member_id, "new member joined")
            return
        err = self._validate_member(req.member_id, req.group_instance_id)
        if err is not None:
            self._reply(client, m.JoinGroupResponse(err, member_id=req.member_id))
            return
        assert existing is not None  # (validated)
        existing.client = client
        if self.state == ClassicGroupState.PREPARING_REBALANCE:
            self._update_member(existing, req)
            self._await(existing)
            self._maybe_complete_join(now)
        elif self.state == ClassicGroupState.COMPLETING_REBALANCE:
            if existing.protocols == req.protocols:
                # Lost JoinGroup response: return the current generation again; the leader gets
                # the member list again, since it still has to compute the assignment
                # (GroupCoordinator.doJoinGroup, CompletingRebalance with unchanged metadata).
                members: tuple[tuple[str, Subscription], ...] = ()
                assert self.leader is not None  # (a generation has its leader)
                if existing.member_id == self.leader:
                    members = tuple(
                        (mm.member_id, self._subscription_of(mm)) for mm in self.members.values()
                    )
                self._reply(
                    existing,
                    m.JoinGroupResponse(
                        m.NONE,
                        self.generation,
                        self.protocol,
                        self.leader,
                        existing.member_id,
                        members,
                    ),
                )
            else:
                self._update_member(existing, req)
                self._await(existing)
                self._prepare_rebalance(now, f"member {client} changed its metadata")
        elif self.state == ClassicGroupState.STABLE:
            if existing.member_id == self.leader or existing.protocols != req.protocols:
                # The leader's JoinGroup always forces a rebalance (metadata changes it noticed).
                self._update_member(existing, req)
                self._await(existing)
                self._prepare_rebalance(
                    now, f"member {client} rejoined ({req.reason or 'metadata changed'})"
                )
            else:
                self._reply(existing, self._join_response_for(existing))
        else:  # EMPTY with a known member cannot happen: members are removed on the way to Empty.
            self._reply(client, m.JoinGroupResponse(m.UNKNOWN_MEMBER_ID, member_id=req.member_id))

    def _join_response_for(self, mm: MemberMeta, members: bool = False) -> m.JoinGroupResponse:
        """The current generation, for a member that needs no rebalance; with ``members``, a
        leader gets the member list as well (a static leader's rejoin, which skips the assignment,
        KIP-814)."""
        is_leader = mm.member_id == self.leader
        return m.JoinGroupResponse(
            m.NONE,
            self.generation,
            self.protocol,
            self.leader or "",
            mm.member_id,
            self._member_list() if members and is_leader else (),
            skip_assignment=is_leader,
        )

    def _member_list(self) -> tuple[tuple[str, Subscription], ...]:
        return tuple((mm.member_id, self._subscription_of(mm)) for mm in self.members.values())

    def _add_and_rebalance(
        self, now: float, client: str, req: m.JoinGroupRequest, member_id: str, reason: str
    ) -> None:
        meta = MemberMeta(
            member_id,
            client,
            req.group_instance_id,
            req.protocols,
            req.session_timeout_s,
            req.rebalance_timeout_s,
            awaiting_join=True,
        )
        meta.is_new = True
        self._add_member(now, meta)
        # addMemberThenRebalanceOrCompleteJoin: a new member's JoinGroup may wait this long
        self._timer(("expire", member_id), now + NEW_MEMBER_JOIN_TIMEOUT_S)
        self._new_member_added = True
        if self.state == ClassicGroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(now)
        else:
            self._prepare_rebalance(now, f"{reason}: {client}")

    def _static_join(self, now: float, client: str, req: m.JoinGroupRequest) -> None:
        """doStaticNewMemberJoin / updateStaticMemberAndRebalance (KIP-345)."""
        iid = req.group_instance_id
        assert iid is not None  # (called for static members only)
        old_id = self.static_members.get(iid)
        new_id = self._new_member_id(iid)
        if old_id is None:
            self._add_and_rebalance(now, client, req, new_id, "static member joined")
            return
        old = self.members.pop(old_id)
        self.pending_sync.discard(old_id)
        self.timers.pop(("expire", old_id), None)
        if old.awaiting_join:
            self._reply(old.client, m.JoinGroupResponse(m.FENCED_INSTANCE_ID, member_id=old_id))
        if old.awaiting_sync:
            self._reply(old.client, m.SyncGroupResponse(m.FENCED_INSTANCE_ID))
        self._event("member_fenced", old.client, f"member_id={old_id} replaced_by={new_id}")
        old.member_id = new_id
        old.client = client
        old.awaiting_sync = False
        old.quiet = False
        # the hold was the stopped incarnation's (its last heartbeats in flight); the new one's
        # idle heartbeats may be elided again, or a static rolling bounce would keep every
        # restarted member heartbeating for real until the end of the run
        old.hold_quiet = False
        old.last_heartbeat = now
        old.is_new = False  # (replaceStaticMember makes a member that is not new)
        self.members[new_id] = old
        self.members_map.remove(old_id)
        self.members_map.put(new_id)
        self.members_version += 1
        self.static_members[iid] = new_id
        if self.leader == old_id:
            self.leader = new_id
        self._schedule_expiry(old)
        self._update_member(old, req)
        if self.state == ClassicGroupState.STABLE and self._select_protocol() == self.protocol:
            # updateStaticMemberThenRebalanceOrCompleteJoin: the protocol the group would select
            # next is the one it has, so no rebalance, whatever else changed in the member's
            # subscription; the member syncs and gets its assignment back.
            self._reply(old, self._join_response_for(old, members=True))
            self._event("static_rejoin", client, f"member_id={new_id}")
            return
        self._await(old)
        if self.state == ClassicGroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(now)
        else:
            self._prepare_rebalance(now, f"static member {client} rejoined")

    # ------------------------------------------------------------------ SyncGroup

    def _validate_member(self, mid: str, instance_id: str | None) -> str | None:
        """ClassicGroup.validateMember: a static member's instance id first (unknown, or held by
        another member id: fenced), then the member id."""
        if instance_id is not None:
            holder = self.static_members.get(instance_id)
            if holder is None:
                return m.UNKNOWN_MEMBER_ID
            if holder != mid:
                return m.FENCED_INSTANCE_ID
        if mid not in self.members:
            return m.UNKNOWN_MEMBER_ID
        return None

    def _check_member(self, mid: str, instance_id: str | None, generation: int) -> str | None:
        err = self._validate_member(mid, instance_id)
        if err is None and generation != self.generation:
            return m.ILLEGAL_GENERATION
        return err

    def _on_sync(self, now: float, client: str, req: m.SyncGroupRequest) -> None:
        err = self._check_member(req.member_id, req.group_instance_id, req.generation)
        if err is None and req.protocol_name is not None and req.protocol_name != self.protocol:
            err = m.INCONSISTENT_GROUP_PROTOCOL  # validateSyncGroup's isProtocolInconsistent
        if err is not None:
            self._reply(client, m.SyncGroupResponse(err))
            return
        mm = self.members[req.member_id]
        mm.client = client
        if self.state == ClassicGroupState.PREPARING_REBALANCE:
            self._reply(mm, m.SyncGroupResponse(m.REBALANCE_IN_PROGRESS))
            return
        self.pending_sync.discard(mm.member_id)
        if not self.pending_sync:
            self._timer(("sync",), None)
        if self.state == ClassicGroupState.STABLE:
            self._reply(mm, m.SyncGroupResponse(m.NONE, mm.assignment))
            return
        # CompletingRebalance
        mm.awaiting_sync = True
        if mm.member_id != self.leader:
            return
        assignments = dict(req.assignments)
        if not _disjoint_by_indices([a.partitions for a in assignments.values()]):
            seen: dict = {}
            for mid, a in assignments.items():
                for tp in a.partitions:
                    if tp in seen:
                        self._emit(
                            "violation",
                            f"generation {self.generation}: {tp} assigned to both "
                            f"{seen[tp]} and {mid}",
                        )
                    seen[tp] = mid
        for mid, mmx in self.members.items():
            # setAndPropagateAssignment: a member the leader left out gets an empty assignment
            mmx.assignment = assignments.get(mid, Assignment())
            mmx.has_assignment = True
        self.last_assigned_generation = self.generation
        for mmx in self.members.values():
            if mmx.awaiting_sync:
                mmx.awaiting_sync = False
                self._reply(mmx, m.SyncGroupResponse(m.NONE, mmx.assignment))
                # propagateAssignment: the session restarts once the assignment is sent
                mmx.last_heartbeat = now
                self._schedule_expiry(mmx)
        self._transition(ClassicGroupState.STABLE)
        self._close_rebalance()
        self._event("stable", None, f"members={len(self.members)}")

    def _on_sync_expiry(self, now: float) -> None:
        """KAFKA-13213: members that never sent SyncGroup are removed, then a new rebalance."""
        if (
            self.state not in (ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.STABLE)
            or not self.pending_sync
        ):
            return
        for mid in sorted(self.pending_sync, key=list(self.members).index):
            self._remove_member(now, mid, "not_synced")
        self.pending_sync.clear()
        if self.members:
            self._prepare_rebalance(now, "members failed to sync within the rebalance timeout")
        else:
            self._transition(ClassicGroupState.PREPARING_REBALANCE)
            self._complete_join(now)

    # ------------------------------------------------------------------ heartbeats, leave, commit

    def _on_heartbeat(self, now: float, client: str, req: m.HeartbeatRequest) -> None:
        """classicGroupHeartbeatToClassicGroup: validateClassicGroupHeartbeat (the member, then
        the generation) refuses without touching the member's session; otherwise the session
        restarts and the answer is REBALANCE_IN_PROGRESS while preparing a rebalance."""
        err = self._check_member(req.member_id, req.group_instance_id, req.generation)
        if err is not None:
            self._reply(
                client,
                m.HeartbeatResponse(
                    err, received_at=now, member_id=req.member_id, generation=req.generation
                ),
            )
            return
        mm = self.members[req.member_id]
        mm.client = client
        mm.last_heartbeat = now
        err = (
            m.REBALANCE_IN_PROGRESS
            if self.state == ClassicGroupState.PREPARING_REBALANCE
            else m.NONE
        )
        quiet = None
        if (
            err == m.NONE
            and self.elide
            and self.state == ClassicGroupState.STABLE
            and not req.last
            and not mm.hold_quiet
            and mm.member_id not in self.pending_sync
        ):
            mm.quiet = True
            quiet = self.quiet_epoch
            self._timer(("expire", mm.member_id), None)
        else:
            self._schedule_expiry(mm)
        self._reply(
            mm,
            m.HeartbeatResponse(
                err, quiet, received_at=now, member_id=req.member_id, generation=req.generation
            ),
        )

    def _on_session_expiry(self, now: float, member_id: str) -> None:
        """expireClassicGroupMemberHeartbeat. ClassicGroupMember.hasSatisfiedHeartbeat: a new
        member is expired even while its JoinGroup waits; any other member waiting in JoinGroup
        or SyncGroup is kept."""
        mm = self.members.get(member_id)
        if mm is None or mm.quiet:
            return
        if not mm.is_new:
            if mm.awaiting_join or mm.awaiting_sync:
                return
            if mm.last_heartbeat + mm.session_timeout_s > now:
                self._schedule_expiry(mm)
                return
        self._remove_member(now, member_id, "session_expired")
        self._after_removal(now, f"member {mm.client} session expired", expired=True)

    def _after_removal(self, now: float, reason: str, expired: bool = False) -> None:
        """What follows a member's removal: removeMemberAndUpdateClassicGroup (``expired``) or
        classicGroupLeaveToClassicGroup. Stable or CompletingRebalance: a rebalance, complete at
        once when every member left has joined (none left: the group empties). PreparingRebalance:
        the join phase completes if every member has joined, except that a leave does not end the
        initial delay (maybeCompleteJoinPhase) while an expiry does."""
        if self.state in (ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now, reason)
        elif self.state == ClassicGroupState.PREPARING_REBALANCE:
            if expired:
                if self._all_joined():
                    self._complete_join(now)
            else:
                self._maybe_complete_join(now)

    def _on_leave(self, now: float, client: str, req: m.LeaveGroupRequest) -> None:
        if req.member_id in self.pending_members:
            self.pending_members.discard(req.member_id)
            self._reply(client, m.LeaveGroupResponse(m.NONE))
            self._maybe_complete_join(now)
            return
        err = self._validate_member(req.member_id, req.group_instance_id)
        if err is not None:
            self._reply(client, m.LeaveGroupResponse(err))
            return
        self._remove_member(now, req.member_id, "left")
        self._reply(client, m.LeaveGroupResponse(m.NONE))
        self._after_removal(now, f"member {client} left ({req.reason})")

    def _on_commit(self, now: float, client: str, req: m.OffsetCommitRequest) -> None:
        """ClassicGroup.validateOffsetCommit: the member, then its generation, then the state (a
        commit of the current generation while CompletingRebalance: REBALANCE_IN_PROGRESS; one of
        an older generation: ILLEGAL_GENERATION). Then store (``sim.coordinator.offsets``)."""
        err = self._check_member(req.member_id, req.group_instance_id, req.generation)
        if err is None:
            err = (
                m.REBALANCE_IN_PROGRESS
                if self.state == ClassicGroupState.COMPLETING_REBALANCE
                else m.NONE
            )
        if err == m.NONE:
            self.offsets.commit(req.offsets, req.position_s, req.ahead)
        self._reply(client, m.OffsetCommitResponse(err, req.seq))
