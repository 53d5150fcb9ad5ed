"""The group coordinator of the consumer group protocol (KIP-848) as a sans-I/O core, beside the
classic one in ``sim.coordinator.classic.group``.

Theory of operation. Everything that changes a consumer group lives here (Kafka's
``GroupMetadataManager.consumerGroupHeartbeat`` and its helpers, ``modern.consumer.ConsumerGroup``,
``CurrentAssignmentBuilder``); nothing here knows about trio, the network or the clock. The actor
calls ``handle(now, sender, message)`` and ``on_timer(now, key, at)`` and carries out the returned
effects (``sim.wire.messages``).

- One RPC, ConsumerGroupHeartbeat, handled one request at a time, each to its response before
  the next. Member epoch 0 joins under the member id the client sends (its own, KIP-1082), or under
  one the coordinator makes when it sends none; an id the group still has goes through the epoch
  check instead. -1 leaves, -2 is a static member leaving for a while (it keeps its assignment and
  its instance id until the session timeout; a new process with the same ``group.instance.id``
  that joins with epoch 0 takes its place and its partitions; while the old member is still
  active the joiner gets UNRELEASED_INSTANCE_ID).
- The group epoch is bumped when a member joins, leaves or is fenced, when a subscription changes,
  and when the partition count of a subscribed topic changes. The target assignment (one call of
  the server-side assignor, ``sim.coordinator.consumer.target``) is computed for the group epoch
  by the next heartbeat, inside that heartbeat, as Kafka does: members joining one after the
  other each get a computation (the first member of a forming group gets every partition, the
  next ones wait for theirs). The assignor's member order is Kafka's: the HashMap that
  ``TargetAssignmentBuilder`` fills from the group's members map (``members_order``) and then
  the heartbeating member.
- Each member is then reconciled on its own (``reconcile.next_member_assignment``, Kafka's
  ``CurrentAssignmentBuilder``): it keeps target ∩ current, must first revoke current - target
  (state UNREVOKED_PARTITIONS, epoch unchanged), and receives a partition only when no other
  member holds it any more (UNRELEASED_PARTITIONS until then). Its epoch moves to the target
  epoch once nothing is left to revoke; there is no group-wide barrier.
- Fencing: a member that sends no heartbeat for ``group.consumer.session.timeout.ms``, or stays
  in UNREVOKED_PARTITIONS for its rebalance timeout (the client's max.poll.interval.ms), is
  removed; the group epoch is bumped and its partitions are free at once. Epoch checks answer
  FENCED_MEMBER_EPOCH (a member coming with its previous epoch and a subset of its assignment is
  accepted: its response was lost; every transition moves the previous epoch, also one that keeps
  the epoch), UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID.

Modelled here, not defined by Kafka:
- Assignor cost. Computing a target assignment takes simulated time (``AssignorCost``, as the
  classic leader's): the coordinator handles nothing else meanwhile (Kafka runs it inline in the
  coordinator's event loop). The heartbeat that computed it is answered when it ends; requests
  that arrive meanwhile wait and are then handled in arrival order.
- Member ids the coordinator makes (for a join without one) are ``<client>-<n>``, not Kafka's
  random ``Uuid``.

Idle heartbeat elision (``elide_heartbeats``, a simulator device, not Kafka's). A heartbeat of a
member that is reconciled to the target epoch, while the target is current, changes nothing but
the member's session; neither does one of a member at the target epoch that waits for partitions
their previous owners still hold (UNRELEASED_PARTITIONS; a group forming or scaling out has
thousands of those for as long as one member's callbacks run). Its response offers
``quiet_epoch``, and a member that takes the offer says so (``Quiet``) and stops sending idle
heartbeats (``sim.client.consumer``). The coordinator then keeps no session timer for it.
Anything that makes its heartbeats matter again bumps the group epoch, and every quiet member gets
a ``Wake``; a partition a quiet member waits for becoming free wakes that member; a member that
stops (crash, pause, close, network fault) or must heartbeat for another reason wakes itself.
Either way it answers ``Unquiet`` with
the arrival time of its last elided heartbeat, so its session runs from exactly where real
heartbeats would have left it, and the auto-commits it computed meanwhile arrive as
``ElidedCommits``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from assignors.server.kafka_time import server_kafka_ms
from sim.config import AssignorCost, GroupConfig
from sim.coordinator.behaviour import BrokerBehaviour
from sim.coordinator.consumer.member import ConsumerGroupMember
from sim.coordinator.consumer.members_order import MembersMapOrder
from sim.coordinator.consumer.reconcile import builds_new_member, next_member_assignment
from sim.coordinator.consumer.states import ConsumerGroupState, MemberState
from sim.coordinator.consumer.target import (
    GroupMembers,
    TargetAssignment,
    compute_target,
)
from sim.coordinator.offsets import OffsetStore
from sim.observe.events import AssignmentComputed
from sim.wire import messages as m

_EMPTY: frozenset = frozenset()


class ConsumerGroup:
    """One consumer group under the consumer group protocol. See the module docstring."""

    protocol = "consumer"

    def __init__(
        self,
        config: GroupConfig,
        metadata: Callable[[], tuple[int, dict[str, int]]],
        assignor_cost: AssignorCost | None = None,
        default_assignor: str | None = None,
        elide_heartbeats: bool = False,
        behaviour: BrokerBehaviour | None = None,
    ):
        self.config = config
        # what this Kafka release's coordinator does (sim.coordinator.behaviour; default 4.3's)
        self.behaviour = behaviour or BrokerBehaviour()
        # when the last target computation ended (KIP-1263: the next waits for the interval);
        # None before the first
        self.assignment_ended_at: float | None = None
        self.elide = elide_heartbeats
        self.quiet_epoch = 0  # bumped with the group epoch
        self.quiet: dict[str, None] = {}  # member ids eliding idle heartbeats
        self.woken: dict[str, None] = {}  # woken, their Unquiet not yet here
        self.awaited: dict = {}  # TopicPartition -> quiet member waiting for it
        self.waiting: dict[str, frozenset] = {}  # quiet UNRELEASED member -> what it waits for
        self._metadata = metadata
        self.offsets = OffsetStore()
        self.assignor_cost = assignor_cost or AssignorCost()
        self.assignor = default_assignor or config.consumer_assignors[0]
        self.group_epoch = 0
        self.target_epoch = 0
        self.target = TargetAssignment()
        self.members: dict[str, ConsumerGroupMember] = {}  # insertion order = join order
        self.members_version = (
            0  # bumped whenever a member id is added or removed (cheap change test)
        )
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.partition_epoch: dict = {}  # TopicPartition -> epoch of its holder
        self.partition_owner: dict = {}  # TopicPartition -> member id
        self.reconciled: set[str] = set()  # members reconciled to the target epoch
        # The assignor's inputs, kept between group epochs (TargetAssignmentBuilder's member
        # specs, ConsumerGroup's subscription type): members whose topics, rack or assignor
        # changed since the last computation are in ``_changed`` until it folds them in. Members
        # sharing a bucket of the assignor's HashMap come in the members map's order.
        self.map_order = MembersMapOrder()
        self.assignor_members = GroupMembers(tie=self.map_order.tie)
        self._changed: dict[str, None] = {}
        self._votes: dict[str, int] = {}  # server assignor name -> members asking for it
        self._voted: dict[str, str] = {}  # member id -> the assignor counted for it
        self._max_member_epoch = 0  # no member epoch has been above this
        self.state = ConsumerGroupState.EMPTY
        self.timers: dict[tuple, float] = {}
        self.session_due: dict[float, dict[str, None]] = {}  # session deadline -> member ids
        self.parked: list[tuple] = []  # (client, request) that came while the assignor ran
        self.busy_until = 0.0
        # Timers that fell due while the assignor ran wait for its end (``_defer``): in batches,
        # each one kernel timer ``("deferred", n)`` at that instant holding their keys in order.
        self._deferred: dict[tuple, list[tuple]] = {}
        self._deferring: list[tuple] | None = None  # the batch new deferrals join, if any
        self._deferring_at = -1.0  # its instant
        self._batches = 0
        self.subscribed_partitions: dict[str, int] = {}
        self.topic_subscribers: dict[str, int] = {}
        self._meta_version = -1
        self._next_id = 0
        self._rebalance_open = False
        self.out: list[tuple] = []
        self.input_rank = -1
        self.assignments_computed = 0
        # set when fencing the last consumer-protocol member of a group of classic members
        # converts the group (the member id that leaves; ``sim.coordinator.migration`` makes the classic group)
        self.downgrade_to: str | None = None

    # ------------------------------------------------------------------ plumbing

    @property
    def unreconciled(self) -> set[str]:
        """The members not reconciled to the target epoch."""
        return set(self.members).difference(self.reconciled)

    @property
    def assign_pending(self) -> bool:
        """Never: each heartbeat that finds the target stale computes it before it is answered."""
        return False

    @property
    def rebalance_open(self) -> bool:
        """Whether a rebalance interval is open (it closes when the group is Stable or Empty)."""
        return self._rebalance_open

    @property
    def generation(self) -> int:
        """The group epoch (the classic core's name, for code that reports either)."""
        return self.group_epoch

    @property
    def leader(self) -> str | None:
        """There is no leader under this protocol; the member that joined first stands in for one
        where a scenario asks for it (``crash_leader``)."""
        return next(iter(self.members), None)

    def _event(self, kind: str, member: str | None = None, detail: str = "") -> None:
        self.out.append(("event", kind, member, self.group_epoch, detail))

    def _timer(self, key: tuple, at: float | None) -> None:
        if key[0] == "session":
            self._index_session(key[1], self.timers.get(key), at)
        if at is None:
            if self.timers.pop(key, None) is not None:
                self.out.append(("timer", key, None))
        else:
            if at == self._deferring_at:
                # queued behind the open batch: deferrals after it must come after it too
                self._deferring = None
            self.timers[key] = at
            self.out.append(("timer", key, at))

    def _defer(self, key: tuple, at: float) -> None:
        """Re-arm the due timer ``key`` at ``at`` (the assignor's end), as one kernel timer of
        its own would be, and in the same order: it joins the open batch of deferred timers,
        which fires at the position of its first member's re-arm; a batch is closed by any other
        timer armed at its instant, since those would come between. A run defers every due
        session timer of a coordinator busy for long spells back to back once per spell, so this
        spares the kernel a queue entry per timer and spell."""
        if key[0] == "session":
            self._index_session(key[1], None, at)
        self.timers[key] = at
        batch = self._deferring
        if batch is None or at != self._deferring_at:
            self._batches += 1
            name = ("deferred", self._batches)
            batch = self._deferring = self._deferred[name] = []
            self._deferring_at = at
            self.timers[name] = at
            self.out.append(("timer", name, at))
        batch.append(key)

    def _drain(self) -> list[tuple]:
        out, self.out = self.out, []
        return out

    def _reply(self, client: str, msg, at: float | None = None) -> None:
        if at is None:
            self.out.append(("send", client, msg))
        else:
            self.out.append(("send", client, msg, at))

    def _blocked(self, now: float) -> bool:
        return now < self.busy_until

    # ------------------------------------------------------------------ entry points

    def handle(self, now: float, sender: str, msg) -> list[tuple]:
        if now < self.busy_until or self.parked:
            # the coordinator handles one request at a time, in arrival order
            self.parked.append((sender, msg))
        elif isinstance(msg, m.ConsumerGroupHeartbeatRequest):
            self._on_heartbeat(now, sender, msg)
        elif isinstance(msg, m.OffsetCommitRequest):
            self._on_commit(now, sender, msg)
        elif isinstance(msg, m.OffsetFetchRequest):
            self._on_offset_fetch(sender, msg)
        else:
            raise TypeError(f"consumer group coordinator cannot handle {msg!r}")
        return self._drain()

    def _index_session(self, member_id: str, old: float | None, new: float | None) -> None:
        if old is not None:
            due = self.session_due[old]
            del due[member_id]
            if not due:
                del self.session_due[old]
        if new is not None:
            self.session_due.setdefault(new, {})[member_id] = None

    def on_timer(self, now: float, key: tuple, at: float) -> list[tuple]:
        if key[0] == "deferred":
            batch = self._deferred.pop(key, None)
            if batch is None or self.timers.get(key) != at:
                return []
            del self.timers[key]
            if batch is self._deferring:
                self._deferring = None
            for k in batch:  # each as its own kernel timer would have fired, in order
                if self.downgrade_to is not None:
                    break  # the rest go to the classic group (``sim.coordinator.migration``), stale there
                self._fire(now, k, at)
        else:
            self._fire(now, key, at)
        return self._drain()

    def _fire(self, now: float, key: tuple, at: float) -> None:
        if self.timers.get(key) != at:
            return
        kind = key[0]
        if kind == "session":
            self._index_session(key[1], at, None)
        del self.timers[key]
        if kind == "unblock":
            self._unpark(now)
        elif now < self.busy_until:
            # the coordinator is busy with the assignor: its timers run when it is free again
            self._defer(key, self.busy_until)
        elif kind == "session":
            # Sessions ending at one instant end in client order, however their timers came to be
            # armed (with elided heartbeats, later than the heartbeats themselves).
            mids = [key[1], *self.session_due.get(at, ())]
            for mid in sorted(
                mids, key=lambda mid: self.members[mid].client if mid in self.members else ""
            ):
                mm = self.members.get(mid)
                if mm is None or (mid != key[1] and self.timers.get(("session", mid)) != at):
                    continue
                if self.downgrade_to is not None:
                    break  # the group is a classic group now: its members' sessions start afresh
                if mm.last_heartbeat + self._session_s(mm) <= now:
                    self._fence(now, mm, "session_expired")
                elif mid == key[1]:
                    self._timer(key, mm.last_heartbeat + self._session_s(mm))
        elif kind == "rebalance":
            mm = self.members.get(key[1])
            if mm is not None and mm.epoch == key[2]:
                self._fence(now, mm, "rebalance_timeout")
        else:
            self._on_other_timer(now, key)
        self._update_state(now)

    def on_control(self, now: float, sender: str, note) -> list[tuple]:
        """Heartbeat elision notes from members (see the module docstring)."""
        mm = self.members.get(note.member_id)
        if mm is None:
            if isinstance(note, m.Quiet):
                # a grant that reached the member after we fenced it (a paused process reads the
                # answer to its last heartbeat on resume): it must heartbeat to learn it is fenced
                self.out.append(("control", sender, m.Wake(self.quiet_epoch, self.input_rank)))
                return self._drain()
            return []
        mid = mm.member_id
        if isinstance(note, m.Quiet):
            if (
                self.elide
                and note.quiet_epoch == self.quiet_epoch
                and self._idle(now, mm)
                and mid not in self.woken
            ):
                self.quiet[mid] = None
                self._timer(("session", mid), None)
                if mm.state == MemberState.UNRELEASED_PARTITIONS:
                    awaited = self.target.get(mid, _EMPTY) - mm.assigned
                    self.waiting[mid] = awaited
                    for tp in awaited:
                        self.awaited[tp] = mid
            else:
                # the group moved since the offer: the member's heartbeats matter again
                self.out.append(("control", mm.client, m.Wake(self.quiet_epoch, self.input_rank)))
        elif isinstance(note, m.Unquiet):
            self._stop_waiting(mid)
            if self.quiet.pop(mid, 0) is None or self.woken.pop(mid, 0) is None:
                if note.last_arrival is not None:
                    mm.last_heartbeat = min(note.last_arrival, now)
                expiry = mm.last_heartbeat + self._session_s(mm)
                if expiry <= now:
                    self._fence(now, mm, "session_expired")
                    self._update_state(now)
                else:
                    self._timer(("session", mid), expiry)
        elif isinstance(note, m.ElidedCommits) and note.generation == mm.epoch:
            self.offsets.commit(note.offsets, note.position_s, note.ahead)
        return self._drain()

    def _idle(self, now: float, mm: ConsumerGroupMember) -> bool:
        """Whether a heartbeat of ``mm`` would change nothing but its session: it is reconciled to
        the current target, or it is at the target epoch waiting for partitions that their
        previous owners have not released yet (UNRELEASED_PARTITIONS, none of them free: its next
        heartbeat would leave it as it is, CurrentAssignmentBuilder.computeNextAssignment). Such a
        heartbeat would still make its epoch its previous epoch, which no epoch check can tell: a
        member that took the offer knows that epoch and never sends an older one."""
        if (
            self.group_epoch != self.target_epoch
            or mm.epoch != self.target_epoch
            or self._blocked(now)
        ):
            return False
        if mm.state == MemberState.STABLE:
            return True
        if mm.state != MemberState.UNRELEASED_PARTITIONS:
            return False
        return self.partition_epoch.keys() >= self.target.get(mm.member_id, _EMPTY) - mm.assigned

    def _wake_quiet(self, now: float) -> None:
        """The group epoch moved: every quiet member heartbeats for real again."""
        self.quiet_epoch += 1
        if self.quiet:
            self._wake(now, list(self.quiet))

    def _wake(self, now: float, member_ids) -> None:
        expiry = now + self.config.consumer_session_timeout_s
        wake = m.Wake(self.quiet_epoch, self.input_rank)
        for mid in member_ids:
            del self.quiet[mid]
            self._stop_waiting(mid)
            self.woken[mid] = None
            self._timer(("session", mid), expiry)  # refined by the Unquiet that follows at once
            self.out.append(("control", self.members[mid].client, wake))

    def _stop_waiting(self, member_id: str) -> None:
        awaited = self.waiting.pop(member_id, None)
        if awaited:
            for tp in awaited:
                if self.awaited.get(tp) == member_id:
                    del self.awaited[tp]

    def _released(self, now: float, partitions) -> None:
        """Partitions became free: a quiet member waiting for one of them heartbeats for real again
        (its next heartbeat takes it)."""
        waiting = {self.awaited[tp]: None for tp in partitions if tp in self.awaited}
        if waiting:
            self._wake(now, waiting)

    # ------------------------------------------------------------------ membership

    def _new_member_id(self, client: str) -> str:
        self._next_id += 1
        return f"{client}-{self._next_id:06d}"

    def _set_holdings(
        self, now: float, mm: ConsumerGroupMember, assigned: frozenset, pending: frozenset
    ) -> None:
        """Move the member's partitions in the group's partition-epoch map (ConsumerGroup
        .maybeUpdatePartitionEpoch)."""
        pe, po = self.partition_epoch, self.partition_owner
        old = mm.assigned | mm.pending_revocation
        new = assigned | pending
        freed = []
        for tp in old - new:
            if po.get(tp) == mm.member_id:
                del pe[tp]
                del po[tp]
                freed.append(tp)
        if freed and self.awaited:
            self._released(now, freed)
        if self.behaviour.assignment_epochs and assigned is not mm.assigned:
            # KIP-1251: a partition's assignment epoch is the member epoch it was assigned at
            at = mm.assigned_at
            for tp in mm.assigned - assigned:
                del at[tp]
            for tp in assigned - mm.assigned:
                at[tp] = mm.epoch
        for tp in new:
            holder = po.get(tp)
            if holder is not None and holder != mm.member_id:
                self.out.append(
                    (
                        "violation",
                        f"group epoch {self.group_epoch}: {tp} given to "
                        f"{mm.member_id} while {holder} still holds it",
                    )
                )
            pe[tp] = mm.epoch
            po[tp] = mm.member_id
        mm.assigned = assigned
        mm.pending_revocation = pending

    def _bump(self, now: float, reason: str) -> None:
        self.group_epoch += 1
        self._wake_quiet(now)
        self._event("rebalance_start", None, f"group epoch {self.group_epoch}: {reason}")
        if not self.members and self.behaviour.assignment_epoch_follows_empty_group:
            # KAFKA-20442 (apache/kafka PR 22045): the last member gone, the target assignment
            # epoch moves with the group epoch (an empty group at matching epochs)
            self.target_epoch = self.group_epoch
            self._event("target_epoch", None, f"epoch={self.target_epoch} group empty")
        if not self._rebalance_open:
            self._rebalance_open = True
            self.out.append(("open", "rebalance", None, None, None))

    def _remove(self, now: float, mm: ConsumerGroupMember, replaced: bool = False) -> None:
        if mm.classic is not None:
            self._forget_classic(mm)
        if not replaced:
            # consumerGroupFenceMember recomputes the subscription without the member (a
            # replacement keeps it: the new member subscribes to the same topics)
            self._subscribe(mm.topics, -1)
        self._set_holdings(now, mm, _EMPTY, _EMPTY)
        del self.members[mm.member_id]
        self.members_version += 1
        self._changed[mm.member_id] = None
        self.quiet.pop(mm.member_id, None)
        self._stop_waiting(mm.member_id)
        self.woken.pop(mm.member_id, None)
        self.target.pop(mm.member_id, None)
        self.reconciled.discard(mm.member_id)
        self.map_order.remove(mm.member_id)
        if mm.instance_id is not None and self.static_members.get(mm.instance_id) == mm.member_id:
            del self.static_members[mm.instance_id]
        self._timer(("session", mm.member_id), None)
        self._timer(("rebalance", mm.member_id, mm.rebalance_deadline_epoch), None)

    def _fence(self, now: float, mm: ConsumerGroupMember, reason: str) -> None:
        """consumerGroupFenceMember: remove the member, bump the group epoch (or, when it is the
        last consumer-protocol member of a group of classic members, convert the group)."""
        if self._downgrade(now, mm, reason):
            return
        self._remove(now, mm)
        self._event("member_removed", mm.client, f"member_id={mm.member_id} reason={reason}")
        self._bump(now, f"member {mm.client} {reason}")

    def _touch(self, mm: ConsumerGroupMember) -> None:
        if mm.reconciled_to(self.target_epoch):
            self.reconciled.add(mm.member_id)
        else:
            self.reconciled.discard(mm.member_id)

    def _update_state(self, now: float) -> None:
        """ConsumerGroup.maybeUpdateGroupState, plus the ``rebalance`` interval and events."""
        if not self.members:
            new = ConsumerGroupState.EMPTY
        elif self.group_epoch > self.target_epoch:
            new = ConsumerGroupState.ASSIGNING
        elif len(self.reconciled) < len(self.members):
            new = ConsumerGroupState.RECONCILING
        else:
            new = ConsumerGroupState.STABLE
        if (
            new in (ConsumerGroupState.STABLE, ConsumerGroupState.EMPTY)
            and self._rebalance_open
            and not self.parked
            and not self._blocked(now)
        ):
            self._rebalance_open = False
            self.out.append(("close", "rebalance", None, None, None))
            self._event("stable", None, f"members={len(self.members)} epoch={self.target_epoch}")
        self.state = new

    def _refresh_metadata(self) -> bool:
        """Whether the partition counts of subscribed topics changed since the last look (Kafka
        refreshes a group's subscription metadata when a new metadata image touches its topics)."""
        version, meta = self._metadata()
        if version == self._meta_version:
            return False
        self._meta_version = version
        counts = {t: meta.get(t, 0) for t in sorted(self.topic_subscribers)}
        changed = counts != self.subscribed_partitions
        self.subscribed_partitions = counts
        return changed

    def _subscribe(self, topics, delta: int) -> None:
        """Count the members subscribed to each topic (ConsumerGroup.subscribedTopicNames)."""
        counts = self.topic_subscribers
        new_topic = False
        for t in topics:
            n = counts.get(t, 0) + delta
            if n:
                new_topic |= t not in counts
                counts[t] = n
            else:
                del counts[t]
        if new_topic or delta < 0:
            _, meta = self._metadata()
            self.subscribed_partitions = {t: meta.get(t, 0) for t in sorted(counts)}

    # ------------------------------------------------------------------ ConsumerGroupHeartbeat

    def _error(self, client: str, req, error: str) -> None:
        self._reply(
            client,
            m.ConsumerGroupHeartbeatResponse(
                error, req.member_id, req.member_epoch, correlation=req.correlation
            ),
        )

    def _on_heartbeat(self, now: float, client: str, req: m.ConsumerGroupHeartbeatRequest) -> None:
        """GroupMetadataManager.consumerGroupHeartbeat: one heartbeat, handled to its response
        before the next (a join's target is computed for its own group epoch)."""
        if req.member_epoch in (m.LEAVE_GROUP_MEMBER_EPOCH, m.LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            self._on_leave(now, client, req)
            self._update_state(now)
            return
        if len(self.members) >= self.config.consumer_max_size and req.member_id not in self.members:
            # throwIfConsumerGroupIsFull (an empty member id is never in the group)
            self._error(client, req, m.GROUP_MAX_SIZE_REACHED)
            self._event("join_rejected", client, f"GROUP_MAX_SIZE_REACHED size={len(self.members)}")
            return
        mm, bump = self._member_for(now, client, req)
        if mm is None:
            return
        if mm.classic is not None:
            # the member speaks the consumer protocol now (setClassicMemberMetadata(null))
            self._forget_classic(mm)
        if mm.member_id in self.quiet:
            self.out.append(
                ("violation", f"heartbeat from {mm.member_id} while its heartbeats are elided")
            )
            del self.quiet[mm.member_id]
            self._stop_waiting(mm.member_id)
        mm.client = client
        mm.last_heartbeat = now
        if req.rebalance_timeout_s is not None:
            mm.rebalance_timeout_s = req.rebalance_timeout_s
        if req.rack_id is not None and req.rack_id != mm.rack:
            mm.rack = req.rack_id
            mm.drop_spec()
            self._changed[mm.member_id] = None
        if req.server_assignor is not None and req.server_assignor != mm.server_assignor:
            mm.server_assignor = req.server_assignor
            self._changed[mm.member_id] = None
            bump = bump or f"member {client} changed its assignor"
        if req.subscribed_topics is not None and tuple(req.subscribed_topics) != mm.topics:
            self._subscribe(mm.topics, -1)
            mm.topics = tuple(req.subscribed_topics)
            mm.drop_spec()
            self._changed[mm.member_id] = None
            self._subscribe(mm.topics, +1)
            bump = bump or f"member {client} changed its subscription"
        if self._refresh_metadata() and bump is None:
            bump = "partition metadata changed"
        if bump is not None:
            self._bump(now, bump)
        self._timer(("session", mm.member_id), now + self.config.consumer_session_timeout_s)
        if self.group_epoch > self.target_epoch:
            if self._assignment_due(now):
                self._compute_target(now)
            else:
                self._event(
                    "assignment_delayed",
                    client,
                    f"target epoch {self.target_epoch} kept until "
                    f"{self._assignment_next_at():.3f}s",
                )
        if mm.member_id not in self.map_order:
            # the new member enters the group's members map once its heartbeat is handled
            if self.map_order.add(mm.member_id):
                self.assignor_members.retie()
            else:
                self.assignor_members.retie(mm.member_id)
        self._reconcile_and_reply(now, mm, req)
        self._update_state(now)

    def _member_for(
        self, now: float, client: str, req
    ) -> tuple[ConsumerGroupMember | None, str | None]:
        """The member a heartbeat is for (GroupMetadataManager.getOrMaybeSubscribeDynamicConsumerGroupMember
        and getOrMaybeSubscribeStaticConsumerGroupMember), and why the group epoch moves (a join);
        (None, None) once an error is answered. Epoch 0 creates the member under the id it sends
        (the client's own, KIP-1082), or under a new one when it sends none; a member the group
        still has goes through the epoch check like any other heartbeat."""
        iid = req.group_instance_id
        join = req.member_epoch == m.JOIN_GROUP_MEMBER_EPOCH
        mid = req.member_id
        if join and not mid:
            mid = self._new_member_id(client)
        if iid is None:
            mm = self.members.get(mid)
            if mm is None:
                if join:
                    return self._add_member(now, client, mid, None, req)
                self._error(client, req, m.UNKNOWN_MEMBER_ID)
                return None, None
            return (mm if self._epoch_valid(client, req, mm) else None), None
        holder = self.static_members.get(iid)
        if join:
            if holder is None:
                mm = self.members.get(mid)
                if mm is None:
                    return self._add_member(now, client, mid, iid, req)
                # ConsumerGroup.getOrMaybeCreateMember hands back the member as it is
                mm.instance_id = iid
                mm.drop_spec()
                self._changed[mid] = None
                self.static_members[iid] = mid
                return mm, None
            old = self.members[holder]
            if old.classic is None and old.epoch != m.LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # (a classic member's instance is taken over at once)
                # throwIfInstanceIdIsUnreleased
                self._error(client, req, m.UNRELEASED_INSTANCE_ID)
                self._event("join_rejected", client, f"UNRELEASED_INSTANCE_ID instance={iid}")
                return None, None
            return self._replace_static(now, client, old, mid), None
        if holder is None:
            # throwIfStaticMemberIsUnknown
            self._error(client, req, m.UNKNOWN_MEMBER_ID)
            return None, None
        if holder != mid:
            # throwIfInstanceIdIsFenced
            self._error(client, req, m.FENCED_INSTANCE_ID)
            return None, None
        mm = self.members[holder]
        return (mm if self._epoch_valid(client, req, mm) else None), None

    def _add_member(
        self, now: float, client: str, member_id: str, iid: str | None, req
    ) -> tuple[ConsumerGroupMember, str]:
        topics = tuple(req.subscribed_topics or ())
        timeout = req.rebalance_timeout_s if req.rebalance_timeout_s is not None else 300.0
        mm = ConsumerGroupMember(
            member_id, client, iid, req.rack_id, topics, timeout, last_heartbeat=now
        )
        return self._register_member(mm, f"member_id={member_id}")

    def _register_member(
        self, mm: ConsumerGroupMember, detail: str
    ) -> tuple[ConsumerGroupMember, str]:
        """Put a new member in the group (either protocol's): its subscription counts, its
        static id, its session; the event ``member_added`` with ``detail``."""
        self.members[mm.member_id] = mm
        self.members_version += 1
        self._changed[mm.member_id] = None
        if mm.instance_id is not None:
            self.static_members[mm.instance_id] = mm.member_id
        self._subscribe(mm.topics, +1)
        self._touch(mm)
        self._event("member_added", mm.client, detail)
        return mm, f"member {mm.client} joined"

    def _replace_static(
        self, now: float, client: str, old: ConsumerGroupMember, member_id: str
    ) -> ConsumerGroupMember:
        """A static member comes back (epoch 0 while its instance id is released): a copy of the
        old member under the new member id, at epoch 0 (previous epoch 0), with its partitions and
        its target (GroupMetadataManager.replaceMember); the group epoch stays."""
        iid = old.instance_id
        assert iid is not None  # (a static member)
        new = ConsumerGroupMember(
            member_id,
            client,
            iid,
            old.rack,
            old.topics,
            old.rebalance_timeout_s,
            previous_epoch=0,
            state=old.state,
            last_heartbeat=now,
            server_assignor=old.server_assignor,
        )
        assigned = old.assigned
        assigned_at = dict(old.assigned_at)  # KIP-1251: its partitions keep their epochs
        target = self.target.get(old.member_id)
        self._remove(now, old, replaced=True)
        self._event(
            "member_fenced", old.client, f"member_id={old.member_id} replaced_by={member_id}"
        )
        self.members[member_id] = new
        self.members_version += 1
        self._changed[member_id] = None
        self.static_members[iid] = member_id
        self._set_holdings(now, new, assigned, _EMPTY)
        if self.behaviour.assignment_epochs:
            new.assigned_at = assigned_at
        if target is not None:
            self.target[member_id] = target
        self._touch(new)
        self._event("member_added", client, f"member_id={member_id} static_rejoin instance={iid}")
        return new

    def _epoch_valid(self, client: str, req, mm: ConsumerGroupMember) -> bool:
        """GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid: an epoch above the
        member's, or below it unless it is the member's previous epoch sent with a subset of its
        partitions (the response that moved it on was lost), is fenced."""
        e = req.member_epoch
        if e == m.JOIN_GROUP_MEMBER_EPOCH and self.behaviour.accepts_epoch0_rejoin:
            # KAFKA-19233 (apache/kafka PR 21305): a member the group still has may rejoin with
            # epoch 0 under its own id (after FENCED_MEMBER_EPOCH it released everything); it is
            # then reconciled from what it reports owning. Before, it was fenced again and again.
            self._event("member_rejoined", client, f"member_id={mm.member_id} known={mm.epoch}")
            return True
        if e > mm.epoch or (
            e < mm.epoch
            and (
                e != mm.previous_epoch
                or req.owned_partitions is None
                or not req.owned_partitions <= mm.assigned
            )
        ):
            self._error(client, req, m.FENCED_MEMBER_EPOCH)
            self._event(
                "fenced_epoch", client, f"member_id={mm.member_id} sent={e} known={mm.epoch}"
            )
            return False
        return True

    def _on_leave(self, now: float, client: str, req) -> None:
        iid = req.group_instance_id
        mm = self.members.get(
            self.static_members.get(iid, "") if iid is not None else req.member_id
        )
        if mm is None or mm.member_id != req.member_id:
            self._error(client, req, m.UNKNOWN_MEMBER_ID if mm is None else m.FENCED_INSTANCE_ID)
            return
        self._reply(
            client,
            m.ConsumerGroupHeartbeatResponse(
                m.NONE, mm.member_id, req.member_epoch, correlation=req.correlation
            ),
        )
        if req.member_epoch == m.LEAVE_GROUP_STATIC_MEMBER_EPOCH and iid is not None:
            # consumerGroupStaticMemberGroupLeave: epoch -2, nothing pending revocation; it keeps
            # its assignment, state and previous epoch, and its session timer runs on
            mm.epoch = m.LEAVE_GROUP_STATIC_MEMBER_EPOCH
            self._set_holdings(now, mm, mm.assigned, _EMPTY)
            self._timer(("rebalance", mm.member_id, mm.rebalance_deadline_epoch), None)
            mm.rebalance_deadline_epoch = None
            self._touch(mm)
            self._event("static_leave", client, f"member_id={mm.member_id} instance={iid}")
            return
        if self._downgrade(now, mm, "left"):
            return
        self._remove(now, mm)
        self._event("member_removed", client, f"member_id={mm.member_id} reason=left")
        self._bump(now, f"member {client} left")

    # ------------------------------------------------------------------ hooks for classic members

    # A core with no classic members; ``sim.coordinator.consumer.classic_members.ConsumerGroupWithClassicMembers`` fills these
    # in.

    def _session_s(self, mm: ConsumerGroupMember) -> float:
        return self.config.consumer_session_timeout_s

    def _on_other_timer(self, now: float, key: tuple) -> None:
        pass

    def _downgrade(self, now: float, mm: ConsumerGroupMember, reason: str) -> bool:
        """Whether fencing ``mm`` converts the group into a classic group instead."""
        return False

    def _forget_classic(self, mm: ConsumerGroupMember) -> None:
        mm.classic = None

    # ------------------------------------------------------------------ assignment and reconciliation

    def _assignment_next_at(self) -> float:
        """The instant from which a heartbeat may compute a new target (KIP-1263)."""
        ended = self.assignment_ended_at
        return -1.0 if ended is None else ended + self.behaviour.assignment_interval_s

    def _assignment_due(self, now: float) -> bool:
        """Whether a heartbeat that finds the target behind the group epoch computes it now.
        KIP-1263 (KAFKA-20291, apache/kafka PR 21720): a group computes a new target only once
        ``group.consumer.assignment.interval.ms`` has passed since its last computation ended
        (the first computation is never delayed); until then its members reconcile towards the
        last target. 4.0 computes at every heartbeat that finds it behind (an interval of 0)."""
        return now >= self._assignment_next_at()

    def _compute_target(self, now: float) -> None:
        """GroupMetadataManager.updateTargetAssignment (TargetAssignmentBuilder): one call of the
        server-side assignor for the group epoch, inside the heartbeat that needs it. With an
        assignor cost the coordinator is busy until it ends (that heartbeat's response leaves
        then; requests meanwhile wait, ``handle``)."""
        _, meta = self._metadata()
        changed = self._fold_changes()
        members = self.assignor_members
        counts = {t: meta.get(t, 0) for t in members.subscribed_topic_names()}
        mode = self.assignor_cost.mode
        t0 = time.perf_counter() if mode == "measured" else 0.0
        name = self._preferred_assignor()
        self.target = compute_target(name, counts, members, self.target, changed)
        measured = time.perf_counter() - t0 if mode == "measured" else 0.0
        # assignor_cost=kafka: what Kafka's assignor takes on this input, whichever of our paths
        # computed the target (assignors.server.kafka_time)
        kafka_s = server_kafka_ms(self.target.kafka_work) / 1000 if mode == "kafka" else None
        cost = self.assignor_cost.cost_s(
            sum(counts.values()), len(members), measured, kafka_s=kafka_s
        )
        self.target_epoch = self.group_epoch
        self.assignments_computed += 1
        epoch = self.target_epoch
        if epoch > self._max_member_epoch:
            # no member can be at the new epoch yet: none is reconciled to it
            self.reconciled = set()
        else:
            self.reconciled = {mid for mid, mm in self.members.items() if mm.reconciled_to(epoch)}
        self._event(
            "target_assignment",
            None,
            AssignmentComputed(name, len(members), self.target_epoch, cost).encode(),
        )
        self.assignment_ended_at = now + cost
        if cost > 0:
            self.busy_until = now + cost
            self._timer(("unblock",), self.busy_until)

    def _fold_changes(self) -> list[str]:
        """Bring the assignor's inputs up to date with the members that changed since the last
        computation (joined, left, new subscription, rack or assignor); returns their ids."""
        members, votes, voted = self.assignor_members, self._votes, self._voted
        for mid in self._changed:
            old = voted.pop(mid, None)
            if old is not None:
                if votes[old] == 1:
                    del votes[old]
                else:
                    votes[old] -= 1
            mm = self.members.get(mid)
            if mm is None:
                members.remove(mid)
                continue
            members.put(mid, mm.spec().topic_set, mm.instance_id, mm.rack)
            members.retie(mid)  # it may have left the members map and come back since
            if mm.server_assignor is not None:
                voted[mid] = mm.server_assignor
                votes[mm.server_assignor] = votes.get(mm.server_assignor, 0) + 1
        changed = list(self._changed)
        self._changed.clear()
        return changed

    def _preferred_assignor(self) -> str:
        """ConsumerGroup.computePreferredServerAssignor: the assignor most members ask for (ties:
        the first name in order), else the broker's default (first of group.consumer.assignors).
        The votes are counted as members change (``_fold_changes``)."""
        votes = self._votes
        if not votes:
            return self.assignor
        best = max(votes.values())
        return min(name for name, v in votes.items() if v == best)

    def _unpark(self, now: float) -> None:
        """Handle what came while the assignor ran, in arrival order, one request at a time: one
        that computes a new target makes the rest wait again."""
        waiting, self.parked = self.parked, []
        for i, (client, req) in enumerate(waiting):
            if self._blocked(now) or self.downgrade_to is not None:
                # (after a downgrade the rest go to the classic group, sim.coordinator.migration)
                self.parked = waiting[i:]
                break
            self.handle_now(now, client, req)
        self._update_state(now)

    def handle_now(self, now: float, client: str, msg) -> None:
        if isinstance(msg, m.ConsumerGroupHeartbeatRequest):
            self._on_heartbeat(now, client, msg)
        elif isinstance(msg, m.OffsetFetchRequest):
            self._on_offset_fetch(client, msg)
        else:
            self._on_commit(now, client, msg)

    def _on_offset_fetch(self, client: str, req: m.OffsetFetchRequest) -> None:
        """OffsetFetch answers what is stored (``sim.coordinator.offsets``)."""
        self._reply(
            client,
            m.OffsetFetchResponse(
                m.NONE, req.partitions, self.offsets.fetch(req.partitions), req.seq
            ),
        )

    def _reconcile_and_reply(self, now: float, mm: ConsumerGroupMember, req) -> None:
        """GroupMetadataManager.maybeReconcile, then the heartbeat response."""
        before = mm.assigned
        self._reconcile(now, mm, req.owned_partitions)
        full = req.member_epoch == 0 or (
            req.rebalance_timeout_s is not None
            and req.subscribed_topics is not None
            and req.owned_partitions is not None
        )
        quiet = self.quiet_epoch if self.elide and self._idle(now, mm) else None
        self._reply(
            mm.client,
            m.ConsumerGroupHeartbeatResponse(
                m.NONE,
                mm.member_id,
                mm.epoch,
                self.config.consumer_heartbeat_interval_s,
                mm.assigned if (full or mm.assigned != before) else None,
                quiet,
                mm.last_heartbeat,
                req.correlation,
            ),
            self._send_at(now),
        )

    def _reconcile(self, now: float, mm: ConsumerGroupMember, owned: frozenset | None) -> None:
        """GroupMetadataManager.maybeReconcile: move the member towards its target (``owned``:
        what it reported owning, None when it did not say)."""
        if not mm.reconciled_to(self.target_epoch):
            target = self.target.get(mm.member_id, _EMPTY)
            state, epoch, assigned, pending = next_member_assignment(
                mm.state,
                mm.epoch,
                mm.assigned,
                mm.pending_revocation,
                self.target_epoch,
                target,
                self.partition_epoch,
                owned,
            )
            if builds_new_member(
                mm.state, mm.epoch, mm.pending_revocation, self.target_epoch, owned
            ):
                # every transition moves the previous epoch, also one that keeps the epoch: only
                # the epoch just before is tolerated from a member whose response was lost
                mm.previous_epoch = mm.epoch
            if (state, epoch, assigned, pending) != (
                mm.state,
                mm.epoch,
                mm.assigned,
                mm.pending_revocation,
            ):
                if epoch != mm.epoch:
                    if epoch < mm.epoch:
                        self.out.append(
                            (
                                "violation",
                                f"member {mm.member_id} epoch went from {mm.epoch} to {epoch}",
                            )
                        )
                    mm.epoch = epoch
                    if epoch > self._max_member_epoch:
                        self._max_member_epoch = epoch
                self._set_holdings(now, mm, assigned, pending)
                mm.state = state
                self._event(
                    "member_reconciled",
                    mm.client,
                    f"member_id={mm.member_id} state={state} epoch={epoch} assigned={len(assigned)} "
                    f"revoking={len(pending)}",
                )
                if mm.classic is not None:
                    pass  # a classic member has a join and a sync timer instead (sim.coordinator.consumer.classic_members)
                elif state == MemberState.UNREVOKED_PARTITIONS:
                    self._timer(("rebalance", mm.member_id, mm.rebalance_deadline_epoch), None)
                    mm.rebalance_deadline_epoch = epoch
                    self._timer(("rebalance", mm.member_id, epoch), now + mm.rebalance_timeout_s)
                elif mm.rebalance_deadline_epoch is not None:
                    self._timer(("rebalance", mm.member_id, mm.rebalance_deadline_epoch), None)
                    mm.rebalance_deadline_epoch = None
                self._touch(mm)

    def _send_at(self, now: float) -> float | None:
        return self.busy_until if now < self.busy_until else None

    # ------------------------------------------------------------------ offset commits

    def _on_commit(self, now: float, client: str, req: m.OffsetCommitRequest) -> None:
        """ConsumerGroup.validateOffsetCommit: the member epoch must be the member's current one
        (4.0); with assignment epochs (KIP-1251, KAFKA-20066) a consumer-protocol member's older
        epoch is accepted for each partition it was assigned at or before that epoch.

        Kafka answers a commit per partition; here the partitions that pass are committed and
        the response carries STALE_MEMBER_EPOCH if any did not (the client fails the commit on
        any partition's error, as Kafka's OffsetCommit handlers do)."""
        mm = self.members.get(req.member_id)
        if mm is None:
            err = m.UNKNOWN_MEMBER_ID
        elif req.generation != mm.epoch:
            # ConsumerGroup.validateMemberEpoch: a classic member's is a generation
            if mm.classic is not None:
                err = m.ILLEGAL_GENERATION
            elif self.behaviour.assignment_epochs and 0 <= req.generation < mm.epoch:
                self._commit_by_assignment_epoch(mm, req, client)
                return
            else:
                err = m.STALE_MEMBER_EPOCH
        else:
            err = m.NONE
        if err == m.NONE:
            self.offsets.commit(req.offsets, req.position_s, req.ahead)
        self._reply(client, m.OffsetCommitResponse(err, req.seq))

    def _commit_by_assignment_epoch(
        self, mm: ConsumerGroupMember, req: m.OffsetCommitRequest, client: str
    ) -> None:
        """KIP-1251: commit each partition whose assignment epoch <= the commit's epoch (the
        member still has it, so the commit's epoch <= its epoch holds too)."""
        at, epoch = mm.assigned_at, req.generation

        def passes(tp) -> bool:  # a partition the member no longer has is refused
            assigned = at.get(tp)
            return assigned is not None and assigned <= epoch

        ok = [tp for tp in req.offsets if passes(tp)]
        ahead = [(tp, pos) for tp, pos in req.ahead if passes(tp)]
        refused = len(ok) < len(req.offsets) or len(ahead) < len(req.ahead)
        if ok or ahead:
            self.offsets.commit(ok, req.position_s, ahead)
        self._event(
            "commit_by_assignment_epoch",
            client,
            f"member_id={mm.member_id} sent={epoch} known={mm.epoch} "
            f"accepted={len(ok)} refused={len(req.offsets) - len(ok)}",
        )
        err = m.STALE_MEMBER_EPOCH if refused else m.NONE
        self._reply(client, m.OffsetCommitResponse(err, req.seq))
