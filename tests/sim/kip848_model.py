"""A reference model of Kafka's consumer-group coordinator (``GroupMetadataManager``, Kafka commit
1eb7644, and with ``kafka_version="4.3"`` the 4.1-4.3 changes: KAFKA-19233's epoch-0 rejoin,
KIP-1263's assignment interval, KIP-1251's assignment epochs for commits, KAFKA-20442's
assignment epoch of an empty group) for differential tests of ``sim.coordinator.consumer.group``: written from Kafka's rules, one request
at a time, with its own data structures and nothing shared with the simulator's core but the
server-side assignor.

What it models: ``consumerGroupHeartbeat`` (member lookup and creation, the epoch checks, the
group epoch, the target assignment computed inside the heartbeat that needs it, the
reconciliation of ``CurrentAssignmentBuilder``, the response), the leave and static-leave paths,
and the session and rebalance timeouts (``consumerGroupFenceMember``). Java's iteration orders are
modelled as the tables they are: the group's members map is a ``BaseHashTable`` (slots found by
Fibonacci hashing, each slot's entries in insertion order, iterated last entry first), and the
assignor's member map is a ``java.util.HashMap`` filled from it, then from the heartbeating member
(``assignors._hashmap_model``, tree buckets included).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from assignors import TopicPartition
from assignors._hashmap_model import JavaHashMap
from assignors._java import java_sort_key, java_string_hash
from assignors.server import GroupSpec, MemberSubscriptionAndAssignment, get_server_assignor
from sim.wire import messages as m

STABLE, UNREVOKED, UNRELEASED = "STABLE", "UNREVOKED_PARTITIONS", "UNRELEASED_PARTITIONS"


# ---------------------------------------------------------------- Java's tables


class JavaBaseHashTable:
    """``org.apache.kafka.timeline.BaseHashTable`` holding keys: 2 slots to start, doubled before
    an insertion that would load it past 0.75; a slot is the top bits of hashCode times
    -7046029254386353131; a slot's entries stay in insertion order (a rehash walks the old slots
    in order); the current iterator reads slots in order, each slot's entries from the last."""

    def __init__(self):
        self.slots: list[list[str]] = [[], []]
        self.size = 0

    def _slot(self, key: str, n: int) -> int:
        bits = n.bit_length() - 1
        return ((java_string_hash(key) * -7046029254386353131) & ((1 << 64) - 1)) >> (64 - bits)

    def add(self, key: str) -> None:
        if (self.size + 1) * 0.75 > len(self.slots):
            old, self.slots = self.slots, [[] for _ in range(2 * len(self.slots))]
            for entries in old:
                for k in entries:
                    self.slots[self._slot(k, len(self.slots))].append(k)
        self.slots[self._slot(key, len(self.slots))].append(key)
        self.size += 1

    def remove(self, key: str) -> None:
        self.slots[self._slot(key, len(self.slots))].remove(key)
        self.size -= 1

    def __iter__(self):
        for entries in self.slots:
            yield from reversed(entries)


# ---------------------------------------------------------------- members


@dataclass(frozen=True)
class Member:
    """``ConsumerGroupMember`` (the fields the consumer protocol uses)."""

    member_id: str
    instance_id: str | None = None
    rack: str | None = None
    rebalance_timeout_s: float = -1.0
    topics: tuple[str, ...] = ()
    epoch: int = 0
    previous_epoch: int = -1
    state: str = STABLE
    assigned: frozenset = frozenset()
    pending: frozenset = frozenset()


def reconcile(member: Member, target_epoch: int, target: frozenset, held: dict, owned) -> Member:
    """``CurrentAssignmentBuilder.build``: the member given back unchanged, or a new one whose
    previous epoch is the epoch it had (``updateMemberEpoch``)."""

    def owns(partitions):
        return owned is None or any(tp in partitions for tp in owned)

    def next_member(epoch: int) -> Member:
        keep = member.assigned & target
        give_up = member.assigned - keep
        wanted = target - keep
        free = frozenset(tp for tp in wanted if tp not in held)
        waiting = len(free) < len(wanted)
        if give_up and owns(give_up):
            return replace(
                member,
                state=UNREVOKED,
                epoch=epoch,
                previous_epoch=member.epoch,
                assigned=keep,
                pending=give_up,
            )
        state = UNRELEASED if waiting else STABLE
        return replace(
            member,
            state=state,
            epoch=target_epoch,
            previous_epoch=member.epoch,
            assigned=keep | free,
            pending=frozenset(),
        )

    if member.state == STABLE:
        return member if member.epoch == target_epoch else next_member(member.epoch)
    if member.state == UNREVOKED:
        return member if owns(member.pending) else next_member(member.epoch + 1)
    return next_member(member.epoch)


# ---------------------------------------------------------------- the coordinator


class KafkaConsumerGroup:
    """One consumer group under GroupMetadataManager's rules. ``metadata()`` gives the partition
    count of every topic. Timers are deadlines the caller fires (``due``, ``fire``)."""

    def __init__(
        self,
        metadata,
        session_s: float = 45.0,
        interval_s: float = 5.0,
        assignor: str = "uniform",
        kafka_version: str = "4.0",
        assignment_interval_s: float | None = None,
    ):
        self.metadata = metadata
        self.later = kafka_version != "4.0"  # 4.3's rules
        # group.consumer.assignment.interval.ms (KIP-1263): 1 s in 4.3, none before
        self.assignment_interval_s = (
            assignment_interval_s
            if assignment_interval_s is not None
            else (1.0 if self.later else 0.0)
        )
        self.last_assignment: float | None = None  # when the last target was computed
        self.assigned_at: dict[str, dict] = {}  # KIP-1251: member -> partition -> epoch
        self.session_s = session_s
        self.interval_s = interval_s
        self.assignor = assignor
        self.members: dict[str, Member] = {}
        self.table = JavaBaseHashTable()  # the members map's iteration order
        self.static: dict[str, str] = {}  # instance id -> member id
        self.group_epoch = 0
        self.target_epoch = 0
        self.target: dict[str, frozenset] = {}
        self.subscription: dict[str, int] = {}
        self.sessions: dict[str, float] = {}  # member id -> deadline
        self.rebalances: dict[str, tuple[float, int]] = {}  # member id -> (deadline, epoch)

    # ---- reading

    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.target_epoch:
            return "Assigning"
        if any(
            not (x.state == STABLE and x.epoch == self.target_epoch) for x in self.members.values()
        ):
            return "Reconciling"
        return "Stable"

    def held(self) -> dict:
        """``ConsumerGroup.currentPartitionEpoch``: every assigned or revoking partition."""
        out = {}
        for x in self.members.values():
            for tp in x.assigned | x.pending:
                out[tp] = x.epoch
        return out

    def _subscription_now(self, members) -> dict[str, int]:
        counts = self.metadata()
        return {t: counts.get(t, 0) for x in members for t in x.topics}

    # ---- requests

    def heartbeat(self, now: float, req: m.ConsumerGroupHeartbeatRequest) -> tuple:
        """The response as (error, member id, member epoch, assignment or None)."""
        if req.member_epoch in (m.LEAVE_GROUP_MEMBER_EPOCH, m.LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(req)
        mid, epoch, iid = req.member_id, req.member_epoch, req.group_instance_id
        replaced = None
        if iid is None:
            member = self.members.get(mid)
            if member is None:
                if epoch != 0:
                    return (m.UNKNOWN_MEMBER_ID, None, None, None)
                member = Member(mid)
            elif not self._epoch_ok(member, req):
                return (m.FENCED_MEMBER_EPOCH, None, None, None)
        else:
            holder = self.members.get(self.static.get(iid, ""))
            if epoch == 0:
                if holder is None:
                    member = self.members.get(mid) or Member(mid)
                elif holder.epoch != m.LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    return (m.UNRELEASED_INSTANCE_ID, None, None, None)
                else:
                    member = replace(holder, member_id=mid, epoch=0, previous_epoch=0)
                    replaced = holder
            elif holder is None:
                return (m.UNKNOWN_MEMBER_ID, None, None, None)
            elif holder.member_id != mid:
                return (m.FENCED_INSTANCE_ID, None, None, None)
            elif not self._epoch_ok(holder, req):
                return (m.FENCED_MEMBER_EPOCH, None, None, None)
            else:
                member = holder
        updated = replace(
            member,
            instance_id=iid if iid is not None else member.instance_id,
            rack=req.rack_id if req.rack_id is not None else member.rack,
            rebalance_timeout_s=(
                req.rebalance_timeout_s
                if req.rebalance_timeout_s is not None
                else member.rebalance_timeout_s
            ),
            topics=tuple(req.subscribed_topics)
            if req.subscribed_topics is not None
            else member.topics,
        )
        bump = updated.topics != member.topics
        others = [
            x
            for x in self.members.values()
            if x.member_id != updated.member_id
            and (replaced is None or x.member_id != replaced.member_id)
        ]
        subscription = self._subscription_now([*others, updated])
        if subscription != self.subscription:
            bump = True
            self.subscription = subscription
        if bump:
            self.group_epoch += 1
        delayed = (
            self.last_assignment is not None
            and now < self.last_assignment + self.assignment_interval_s
        )
        if self.group_epoch > self.target_epoch and not delayed:
            self.last_assignment = now
            target = self._compute_target(updated, replaced)
        elif iid is not None and self.static.get(iid) is not None:
            target = self.target.get(self.static[iid], frozenset())
        else:
            target = self.target.get(updated.member_id, frozenset())
        # the records of this heartbeat, replayed: the member (its replacement) and its reconciliation
        if replaced is not None:
            kept = self.assigned_at.get(replaced.member_id, {})
            self._remove(replaced.member_id)
            self.target[updated.member_id] = target
            self.assigned_at[updated.member_id] = dict(kept)
        reconciled = updated
        if not (updated.state == STABLE and updated.epoch == self.target_epoch):
            reconciled = reconcile(
                updated,
                self.target_epoch,
                target,
                self.held_without(updated, replaced),
                req.owned_partitions,
            )
        if reconciled != updated:
            if reconciled.state == UNREVOKED:
                self.rebalances[reconciled.member_id] = (
                    now + reconciled.rebalance_timeout_s,
                    reconciled.epoch,
                )
            else:
                self.rebalances.pop(reconciled.member_id, None)
        at = self.assigned_at.setdefault(reconciled.member_id, {})
        for tp in set(at) - reconciled.assigned:
            del at[tp]
        for tp in reconciled.assigned - set(at):
            at[tp] = reconciled.epoch
        if reconciled.member_id not in self.members:
            self.table.add(reconciled.member_id)
        self.members[reconciled.member_id] = reconciled
        if iid is not None:
            self.static[iid] = reconciled.member_id
        self.sessions[reconciled.member_id] = now + self.session_s
        full = epoch == 0 or (
            req.rebalance_timeout_s is not None
            and req.subscribed_topics is not None
            and req.owned_partitions is not None
        )
        changed = reconciled.assigned != member.assigned
        return (
            m.NONE,
            reconciled.member_id,
            reconciled.epoch,
            reconciled.assigned if (full or changed) else None,
        )

    def held_without(self, updated: Member, replaced: Member | None) -> dict:
        held = self.held()
        if replaced is not None:  # the replacement holds what the old member held
            for tp in replaced.assigned | replaced.pending:
                held[tp] = updated.epoch
        return held

    def _epoch_ok(self, member: Member, req) -> bool:
        """throwIfConsumerGroupMemberEpochIsInvalid (4.3: epoch 0 returns early, KAFKA-19233)."""
        e = req.member_epoch
        if e == 0 and self.later:
            return True
        if e > member.epoch:
            return False
        if e < member.epoch:
            owned = req.owned_partitions
            return e == member.previous_epoch and owned is not None and owned <= member.assigned
        return True

    def _compute_target(self, updated: Member, replaced: Member | None) -> frozenset:
        """TargetAssignmentBuilder: the assignor's member map is the group's members, in the members
        map's order, then the heartbeating member (a replaced static member taken out)."""
        order = JavaHashMap(
            java_string_hash, java_sort_key
        )  # String keys: trees by hash, compareTo
        specs = {}
        for mid in self.table:
            order.put(mid)
            specs[mid] = self.members[mid]
        order.put(updated.member_id)
        specs[updated.member_id] = updated
        if replaced is not None and replaced.member_id != updated.member_id:
            order.remove(replaced.member_id)
            del specs[replaced.member_id]
        counts = self._subscription_now(specs.values())

        def current(mid):
            if replaced is not None and mid == updated.member_id:
                mid = replaced.member_id
            by_topic: dict[str, list[int]] = {}
            for tp in self.target.get(mid, ()):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            return {t: tuple(sorted(ps)) for t, ps in by_topic.items()}

        spec = GroupSpec(
            {
                mid: MemberSubscriptionAndAssignment(
                    frozenset(x.topics), current(mid), x.instance_id, x.rack
                )
                for mid, x in specs.items()
            }
        )
        spec._member_ids = tuple(order.keys())  # Java's order
        result = get_server_assignor(self.assignor).assign(spec, counts)
        self.target = {
            mid: frozenset(TopicPartition(t, p) for t, ps in result[mid].items() for p in ps)
            if mid in result
            else frozenset()
            for mid in specs
        }
        self.target_epoch = self.group_epoch
        return self.target[updated.member_id]

    def _leave(self, req) -> tuple:
        mid, iid = req.member_id, req.group_instance_id
        if iid is None:
            member = self.members.get(mid)
            if member is None:
                return (m.UNKNOWN_MEMBER_ID, None, None, None)
        else:
            member = self.members.get(self.static.get(iid, ""))
            if member is None:
                return (m.UNKNOWN_MEMBER_ID, None, None, None)
            if member.member_id != mid:
                return (m.FENCED_INSTANCE_ID, None, None, None)
            if req.member_epoch == m.LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                self.members[mid] = replace(
                    member, epoch=m.LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending=frozenset()
                )
                return (m.NONE, mid, m.LEAVE_GROUP_STATIC_MEMBER_EPOCH, None)
        self.fence(mid)
        return (m.NONE, mid, req.member_epoch, None)

    # ---- removal and timers

    def _remove(self, mid: str) -> None:
        member = self.members.pop(mid)
        self.table.remove(mid)
        self.target.pop(mid, None)
        self.assigned_at.pop(mid, None)
        if member.instance_id is not None and self.static.get(member.instance_id) == mid:
            del self.static[member.instance_id]
        self.sessions.pop(mid, None)
        self.rebalances.pop(mid, None)

    def fence(self, mid: str) -> None:
        """consumerGroupFenceMember: removed, the subscription recomputed, the group epoch bumped."""
        self._remove(mid)
        self.subscription = self._subscription_now(self.members.values())
        self.group_epoch += 1
        if not self.members and self.later:
            self.target_epoch = self.group_epoch  # KAFKA-20442

    def commit(self, member_id: str, epoch: int, partitions) -> str:
        """ConsumerGroup.validateOffsetCommit's error for a commit of ``partitions`` at member
        epoch ``epoch`` (4.3, KIP-1251: an older epoch passes for a partition assigned at or
        before it)."""
        member = self.members.get(member_id)
        if member is None:
            return m.UNKNOWN_MEMBER_ID
        if epoch == member.epoch:
            return m.NONE
        if self.later and 0 <= epoch < member.epoch:
            at = self.assigned_at.get(member_id, {})
            if all(tp in at and at[tp] <= epoch for tp in partitions):
                return m.NONE
        return m.STALE_MEMBER_EPOCH

    def due(self, now: float) -> list[tuple[float, str, str]]:
        """(deadline, kind, member id) of the timers due by ``now``, in the order they fire."""
        out = [(at, "session", mid) for mid, at in self.sessions.items() if at <= now]
        out += [(at, "rebalance", mid) for mid, (at, _e) in self.rebalances.items() if at <= now]
        return sorted(out)

    def fire(self, kind: str, mid: str) -> None:
        if kind == "session" and mid in self.sessions:
            self.fence(mid)
        elif kind == "rebalance" and mid in self.rebalances:
            _at, epoch = self.rebalances.pop(mid)
            if self.members[mid].epoch == epoch:
                self.fence(mid)
