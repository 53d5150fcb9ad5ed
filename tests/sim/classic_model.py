"""A reference model of Kafka's classic group coordinator and of the online upgrade's decision
(``GroupMetadataManager``, ``ClassicGroup``, ``ClassicGroupMember``, ``ConsumerGroup
.fromClassicGroup``; Kafka commit 1eb7644), for differential tests of
``sim.coordinator.classic.group`` and ``sim.coordinator.migration``: written from Kafka's rules,
one request at a time, with its own data structures; nothing is shared with the simulator's core
but the model of Java's ``HashMap`` (``assignors.java.JavaHashMap``).

What it models: classicGroupJoinToClassicGroup (new dynamic members through MEMBER_ID_REQUIRED,
new and replacing static members, existing members in each state), classicGroupSyncToClassicGroup
(validateSyncGroup, the leader's assignment), classicGroupHeartbeatToClassicGroup,
classicGroupLeaveToClassicGroup, the join, sync and heartbeat timers (the initial delay, the new
member join timeout) and what follows a removal; and a ConsumerGroupHeartbeat that joins the
classic group: getOrMaybeCreateConsumerGroup, validateOnlineUpgrade, convertToConsumerGroup (the
waiting JoinGroup and SyncGroup requests answered first, then fromClassicGroup: at 1eb7644 a
member without an assignment fails it; from Kafka 4.0.0 (KAFKA-17733, ``converts_unassigned``)
an empty assignment reads as no partitions and a group without a selected protocol fails it)
and throwIfConsumerGroupIsFull, each a write that succeeds or fails whole. What the consumer group does after a conversion is ``kip848_model``'s.

Timers are deadlines the caller fires (``timers``, ``fire``). Responses are collected in ``out``
as (client, kind, fields) tuples.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from assignors.java import JavaHashMap, java_sort_key, java_string_hash

EMPTY, PREPARING, COMPLETING, STABLE = (
    "Empty",
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
)
NEW_MEMBER_JOIN_TIMEOUT_S = 300.0  # GroupCoordinatorConfig.CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS


def _hashmap() -> JavaHashMap:
    return JavaHashMap(java_string_hash, java_sort_key)


@dataclass
class Member:
    """ClassicGroupMember."""

    member_id: str
    client: str
    instance_id: str | None
    protocols: tuple  # ((name, metadata), ...): metadata compared by equality
    session_s: float
    rebalance_s: float
    awaiting_join: bool = False
    awaiting_sync: bool = False
    assignment: tuple | None = None  # None: the empty byte array (no assignment)
    is_new: bool = False

    def names(self):
        return [n for n, _ in self.protocols]


@dataclass
class KafkaClassicGroup:
    initial_delay_s: float = 3.0
    consumer_max_size: int = 2**31 - 1
    converts_unassigned: bool = True  # KAFKA-17733 (Kafka 4.0.0); False: commit 1eb7644
    new_id: object = None  # callable(instance_id) -> member id, in Kafka's draw order
    state: str = EMPTY
    previous_state: str = "Dead"
    generation: int = 0
    protocol: str | None = None
    leader: str | None = None
    members: dict = field(default_factory=dict)
    order: JavaHashMap = field(default_factory=_hashmap)
    static: dict = field(default_factory=dict)
    pending: set = field(default_factory=set)
    pending_sync: set = field(default_factory=set)
    supported: dict = field(default_factory=dict)
    new_member_added: bool = False
    timers: dict = field(default_factory=dict)  # key -> (deadline, payload)
    out: list = field(default_factory=list)

    # ---------------------------------------------------------------- ClassicGroup

    def _transition(self, state):
        self.previous_state, self.state = self.state, state

    def _all_joined(self):
        return not self.pending and all(mm.awaiting_join for mm in self.members.values())

    def _rebalance_s(self):
        return max((mm.rebalance_s for mm in self.members.values()), default=0.0)

    def _supports(self, names) -> bool:
        if self.state == EMPTY:
            return bool(names)
        return any(self.supported.get(n, 0) == len(self.members) for n in names)

    def _count(self, mm, d):
        for n in mm.names():
            self.supported[n] = self.supported.get(n, 0) + d

    def _add(self, mm):
        if mm.instance_id is not None:
            self.static[mm.instance_id] = mm.member_id
        if self.leader is None:
            self.leader = mm.member_id
        self.members[mm.member_id] = mm
        self.order.put(mm.member_id)
        self._count(mm, +1)
        self.pending.discard(mm.member_id)

    def _remove(self, mid):
        mm = self.members.pop(mid, None)
        if mm is not None:
            self.order.remove(mid)
            self._count(mm, -1)
            if mm.instance_id is not None:
                self.static.pop(mm.instance_id, None)
        if self.leader == mid:
            self.leader = next(iter(self.order), None)
        self.pending.discard(mid)
        self.pending_sync.discard(mid)

    def _select_protocol(self):
        candidates = {n for n, c in self.supported.items() if c == len(self.members)}
        votes = _hashmap()
        count: dict = {}
        for mid in self.order:
            vote = next(n for n in self.members[mid].names() if n in candidates)
            votes.put(vote)
            count[vote] = count.get(vote, 0) + 1
        best = None
        for name in votes:  # Stream.max keeps the first of equals
            if best is None or count[name] > count[best]:
                best = name
        return best

    def _validate_member(self, mid, iid):
        if iid is not None:
            holder = self.static.get(iid)
            if holder is None:
                return "UNKNOWN_MEMBER_ID"
            if holder != mid:
                return "FENCED_INSTANCE_ID"
        if mid not in self.members:
            return "UNKNOWN_MEMBER_ID"
        return None

    def _join_future(self, mm, fields):
        if mm.awaiting_join:
            mm.awaiting_join = False
            self.out.append((mm.client, "join", fields))

    def _sync_future(self, mm, fields):
        if mm.awaiting_sync:
            mm.awaiting_sync = False
            self.out.append((mm.client, "sync", fields))
            return True
        return False

    def _resched(self, mm, now, delay=None):
        self.timers[("hb", mm.member_id)] = (now + (mm.session_s if delay is None else delay), None)

    def _members_list(self):
        return tuple(sorted(self.members))

    def _group_fields(self, mid, members=(), skip=False, error="NONE"):
        return (error, self.generation, self.protocol, self.leader, mid, members, skip)

    # ---------------------------------------------------------------- the rebalance

    def _prepare(self, now):
        if self.state == COMPLETING:
            for mm in self.members.values():
                mm.assignment = None
            for mm in self.members.values():
                if self._sync_future(mm, ("REBALANCE_IN_PROGRESS", None)):
                    self._resched(mm, now)
        self.timers.pop(("sync",), None)
        initial = self.state == EMPTY
        if initial:
            remaining = max(self._rebalance_s() - self.initial_delay_s, 0.0)
            self.timers[("join",)] = (
                now + self.initial_delay_s,
                ("initial", self.initial_delay_s, remaining),
            )
        self._transition(PREPARING)
        if not initial:
            if self._all_joined():
                self._complete_join(now)
            else:
                self.timers[("join",)] = (now + self._rebalance_s(), ("normal",))

    def _maybe_prepare_or_complete(self, now):
        if self.state in (STABLE, COMPLETING, EMPTY):
            self._prepare(now)
        else:
            self._maybe_complete_join_phase(now)

    def _maybe_complete_join_phase(self, now):
        if self.state == PREPARING and self.previous_state != EMPTY and self._all_joined():
            self._complete_join(now)

    def _complete_join(self, now):
        self.timers.pop(("join",), None)
        for mm in [mm for mm in self.members.values() if not mm.awaiting_join]:
            if mm.instance_id is None:
                self._remove(mm.member_id)
                self.timers.pop(("hb", mm.member_id), None)
        if self.leader is not None and not self.members[self.leader].awaiting_join:
            joined = next((mid for mid in self.order if self.members[mid].awaiting_join), None)
            if joined is None:
                self.timers[("join",)] = (now + self._rebalance_s(), ("normal",))
                return
            self.leader = joined
        self.generation += 1
        if not self.members:
            self.protocol = None
            self._transition(EMPTY)
            return
        self.protocol = self._select_protocol()
        self._transition(COMPLETING)
        for mm in self.members.values():
            members = self._members_list() if mm.member_id == self.leader else ()
            self._join_future(mm, self._group_fields(mm.member_id, members))
            self._resched(mm, now)
            mm.is_new = False
            self.pending_sync.add(mm.member_id)
        self.timers[("sync",)] = (now + self._rebalance_s(), self.generation)

    # ---------------------------------------------------------------- JoinGroup

    def join(self, now, client, member_id, iid, protocols, session_s, rebalance_s):
        names = [n for n, _ in protocols]
        if member_id == "":
            if not self._supports(names):
                self.out.append((client, "join", ("INCONSISTENT_GROUP_PROTOCOL",)))
                return
            new_id = self.new_id(iid)
            if iid is not None:
                old = self.static.get(iid)
                if old is not None:
                    self._replace_static(
                        now, client, iid, old, new_id, protocols, session_s, rebalance_s
                    )
                else:
                    self._add_new(now, client, new_id, iid, protocols, session_s, rebalance_s)
            else:
                self.pending.add(new_id)
                self.timers[("hb", new_id)] = (now + session_s, None)
                self.out.append((client, "join", ("MEMBER_ID_REQUIRED", new_id)))
            return
        if not self._supports(names):
            self.out.append((client, "join", ("INCONSISTENT_GROUP_PROTOCOL",)))
            return
        if member_id in self.pending:
            self._add_new(now, client, member_id, None, protocols, session_s, rebalance_s)
            return
        err = self._validate_member(member_id, iid)
        if err is not None:
            self.out.append((client, "join", (err,)))
            return
        mm = self.members[member_id]
        mm.client = client
        if self.state == PREPARING:
            self._update(mm, protocols, session_s, rebalance_s)
            self._maybe_prepare_or_complete(now)
        elif self.state == COMPLETING:
            if mm.protocols == tuple(protocols):
                members = self._members_list() if member_id == self.leader else ()
                self.out.append((client, "join", self._group_fields(member_id, members)))
            else:
                self._update(mm, protocols, session_s, rebalance_s)
                self._maybe_prepare_or_complete(now)
        elif self.state == STABLE:
            if member_id == self.leader or mm.protocols != tuple(protocols):
                self._update(mm, protocols, session_s, rebalance_s)
                self._maybe_prepare_or_complete(now)
            else:
                self.out.append((client, "join", self._group_fields(member_id)))
        else:
            self.out.append((client, "join", ("UNKNOWN_MEMBER_ID",)))

    def _update(self, mm, protocols, session_s, rebalance_s):
        self._count(mm, -1)
        mm.protocols = tuple(protocols)
        mm.session_s, mm.rebalance_s = session_s, rebalance_s
        self._count(mm, +1)
        mm.awaiting_join = True

    def _add_new(self, now, client, mid, iid, protocols, session_s, rebalance_s):
        mm = Member(mid, client, iid, tuple(protocols), session_s, rebalance_s, is_new=True)
        if self.state == PREPARING and self.previous_state == EMPTY:
            self.new_member_added = True
        self._add(mm)
        mm.awaiting_join = True
        self._resched(mm, now, NEW_MEMBER_JOIN_TIMEOUT_S)
        self._maybe_prepare_or_complete(now)

    def _replace_static(self, now, client, iid, old_id, new_id, protocols, session_s, rebalance_s):
        old = self.members.pop(old_id)
        self.order.remove(old_id)
        self._join_future(old, ("FENCED_INSTANCE_ID",))
        self._sync_future(old, ("FENCED_INSTANCE_ID", None))
        new = Member(new_id, client, iid, old.protocols, old.session_s, old.rebalance_s)
        new.assignment = old.assignment
        self.members[new_id] = new
        self.order.put(new_id)
        if self.leader == old_id:
            self.leader = new_id
        self.static[iid] = new_id
        self.timers.pop(("hb", old_id), None)
        self._resched(new, now)
        self._update(new, protocols, session_s, rebalance_s)
        if self.state == STABLE:
            if self.protocol == self._select_protocol():
                is_leader = new_id == self.leader
                new.awaiting_join = False
                members = self._members_list() if is_leader else ()
                self.out.append((client, "join", self._group_fields(new_id, members, is_leader)))
            else:
                self._maybe_prepare_or_complete(now)
        elif self.state == COMPLETING:
            self._prepare(now)
        else:
            self._maybe_complete_join_phase(now)

    # ---------------------------------------------------------------- SyncGroup

    def sync(self, now, client, mid, iid, generation, assignments, protocol_name):
        err = self._validate_member(mid, iid)
        if err is None and generation != self.generation:
            err = "ILLEGAL_GENERATION"
        if err is None and protocol_name is not None and protocol_name != self.protocol:
            err = "INCONSISTENT_GROUP_PROTOCOL"
        if err is not None:
            self.out.append((client, "sync", (err, None)))
            return
        mm = self.members[mid]
        if self.state == PREPARING:
            self.out.append((client, "sync", ("REBALANCE_IN_PROGRESS", None)))
        elif self.state == COMPLETING:
            mm.client = client
            mm.awaiting_sync = True
            self.pending_sync.discard(mid)
            if not self.pending_sync:
                self.timers.pop(("sync",), None)
            if mid == self.leader:
                given = dict(assignments)
                for m2 in self.members.values():
                    m2.assignment = given.get(m2.member_id, ())
                for m2 in self.members.values():
                    if self._sync_future(m2, ("NONE", m2.assignment)):
                        self._resched(m2, now)
                self._transition(STABLE)
        elif self.state == STABLE:
            self.pending_sync.discard(mid)
            if not self.pending_sync:
                self.timers.pop(("sync",), None)
            self.out.append((client, "sync", ("NONE", mm.assignment or ())))

    # ---------------------------------------------------------------- Heartbeat, LeaveGroup

    def heartbeat(self, now, client, mid, iid, generation):
        err = self._validate_member(mid, iid)
        if err is None and generation != self.generation:
            err = "ILLEGAL_GENERATION"
        if err is None:
            if self.state == EMPTY:
                err = "UNKNOWN_MEMBER_ID"
            else:
                self._resched(self.members[mid], now)
                err = "REBALANCE_IN_PROGRESS" if self.state == PREPARING else "NONE"
        self.out.append((client, "heartbeat", (err,)))

    def leave(self, now, client, mid, iid):
        if mid in self.pending:
            self._remove(mid)
            self.timers.pop(("hb", mid), None)
            self.out.append((client, "leave", ("NONE",)))
            if self.state == PREPARING:
                self._maybe_complete_join_phase(now)
            return
        err = self._validate_member(mid, iid)
        if err is not None:
            self.out.append((client, "leave", (err,)))
            return
        mm = self.members[mid]
        self.timers.pop(("hb", mid), None)
        self._join_future(mm, ("UNKNOWN_MEMBER_ID",))
        self._remove(mid)
        self.out.append((client, "leave", ("NONE",)))
        if self.state in (STABLE, COMPLETING):
            self._maybe_prepare_or_complete(now)
        elif self.state == PREPARING:
            self._maybe_complete_join_phase(now)

    # ---------------------------------------------------------------- timers

    def fire(self, now, key):
        _, payload = self.timers.pop(key)
        if key[0] == "join":
            if payload[0] == "initial":
                _, delay, remaining = payload
                if self.new_member_added and remaining != 0:
                    self.new_member_added = False
                    step = min(self.initial_delay_s, remaining)
                    rest = max(remaining - delay, 0.0)
                    self.timers[("join",)] = (now + step, ("initial", step, rest))
                    return
            self._complete_join(now)
        elif key[0] == "sync":
            if self.state in (COMPLETING, STABLE) and payload == self.generation:
                for mid in [mid for mid in self.order if mid in self.pending_sync]:
                    self._remove(mid)
                    self.timers.pop(("hb", mid), None)
                self.pending_sync.clear()
                self._maybe_prepare_or_complete(now)
        else:
            mid = key[1]
            if mid in self.pending:
                self._remove(mid)
                if self.state == PREPARING and self._all_joined():
                    self._complete_join(now)
                return
            mm = self.members.get(mid)
            if mm is None:
                return
            if not mm.is_new and (mm.awaiting_join or mm.awaiting_sync):
                return  # hasSatisfiedHeartbeat
            self._join_future(mm, ("UNKNOWN_MEMBER_ID",))
            self._remove(mid)
            if self.state in (STABLE, COMPLETING):
                self._maybe_prepare_or_complete(now)
            elif self.state == PREPARING and self._all_joined():
                self._complete_join(now)

    # ---------------------------------------------------------------- the online upgrade

    def consumer_join(self, now, client, member_id) -> str:
        """A ConsumerGroupHeartbeat at member epoch 0: "deleted" (the empty group is dropped and a
        consumer group made), "converted", or the error the heartbeat gets (the group stays)."""
        if self.state == EMPTY:
            return "deleted"
        if len(self.members) > self.consumer_max_size:
            return "GROUP_ID_NOT_FOUND"
        for mm in self.members.values():
            self._join_future(mm, ("REBALANCE_IN_PROGRESS",))
        for mm in self.members.values():
            self._sync_future(mm, ("REBALANCE_IN_PROGRESS", None))
        if not self.converts_unassigned and any(
            mm.assignment is None for mm in self.members.values()
        ):
            return "GROUP_ID_NOT_FOUND"  # fromClassicGroup at 1eb7644: SchemaException
        if self.protocol is None:
            # fromClassicGroup: members' metadata under protocolName().get(), none selected yet
            # (an empty assignment is read as no partitions, KAFKA-17733)
            return "UNKNOWN_SERVER_ERROR"
        if len(self.members) >= self.consumer_max_size and member_id not in self.members:
            return "GROUP_MAX_SIZE_REACHED"
        return "converted"
