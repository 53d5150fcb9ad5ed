"""Stream-join sticky assignor ("stream-join-sticky"), after KIP-315 (never merged into Kafka).

A stream-to-stream join needs partition ``k`` of every joined topic on one consumer. KIP-315
therefore assigns partition *numbers* ("units"), stickily, and turns them into TopicPartitions
only at the end. The KIP leaves details open; the choices below are ours and are marked (choice).

Algorithm (the KIP's steps, in order):

1. Units. ``n_units`` is the smallest partition count among the topics the group subscribes to
   that exist in the metadata. Partitions numbered ``>= n_units`` stay unassigned: the KIP
   assumes the counts are equal again after a partition increase has reached every topic.
2. Previous ownership comes from each member's subscription user data only: the partition numbers
   it was given last time and the epoch of that assignment. Only numbers ``< n_units`` count.
   When several members claim one number, the highest epoch wins, so a zombie that slept through
   a rebalance (an older epoch) loses to the true owner. When the highest epoch is shared, nobody
   keeps the number (choice: as Kafka's sticky assignors treat two claims in one generation;
   it only happens with corrupt state, since one rebalance hands each number to one member).
   Missing or unreadable user data means "owns nothing, epoch -1": a bad member never fails the
   group.
3. Unowned units are those nobody (still) claims.
4. Members take units, fairly. Only members subscribed to at least one existing topic take part
   (choice: a member that could receive no TopicPartition must not hold units, or their
   partitions would go unassigned). With ``E`` such members each gets ``n_units // E`` units, and
   ``n_units % E`` of them one more: those that previously owned the most (ties by member id),
   so counts differ by at most 1 and as few units as possible move. Then, as in the KIP:
   rule 1, a member keeps its previously owned units up to its quota (the lowest numbers, choice);
   rule 2, it fills the rest from the unowned units (ascending); rule 3, then it steals the units
   that over-quota members must give up, beginning with the member with the longest previous
   list. Members that previously owned something pick before new members, each group in member
   id order (Java ``String`` order, whatever the dict order). The KIP describes picking one unit
   at a time; we hand each member its whole remaining quota as one block of that pick order,
   which gives the same counts and makes a fresh assignment the contiguous ranges that the KIP's
   example shows.
5. Each member receives partition ``k`` of each existing topic it subscribes to, for each unit
   ``k`` it holds. If members subscribe to different topics, partitions of a topic whose unit
   went to a non-subscriber stay unassigned (the KIP uses this to trial a new topic on one
   member without flooding it).
6. The next epoch is the largest epoch in the subscriptions plus one (at most INT32 max), and
7. goes into every member's ``Assignment.user_data``.

Example (KIP-315's). Topics ``impressions`` and ``clicks``, 10 partitions each, fresh members
A, B, C, D: 10 units over 4 members gives quotas 3, 3, 2, 2 and, from the unowned units in
order, A 0-2, B 3-5, C 6-7, D 8-9 of both topics, epoch 0. D leaves: A, B, C claim their units
with epoch 0; quotas are 4, 3, 3 (A and B owned 3, A comes first by id); A and C keep everything
and take the unowned 8 and 9, A first: A 0,1,2,8, B 3,4,5, C 6,7,9, epoch 1. Only D's units moved.

Member side. ``on_assignment`` stores the partition numbers received and the epoch read from the
assignment user data (-1 if absent or unreadable). ``subscription_user_data`` sends the numbers of
``owned`` if given, else those stored, with the stored epoch; None before any assignment and with
nothing owned. The consumer generation is not used: the epoch is the assignor's own.

User data (big-endian, Kafka ``Struct`` types: INT16/INT32 two's complement, ARRAY = INT32
element count + elements)::

    Subscription, version 0:  version: INT16 | epoch: INT32 | partitions: ARRAY of INT32
    Assignment,   version 0:  version: INT16 | epoch: INT32

Writers write version 0 with the partition numbers ascending and without duplicates. Readers
accept any version >= 0 and ignore trailing bytes (as Kafka's ``Schema#read`` does, so a later
version may append fields); a negative version, array size or partition number, or bytes that
end early, raise ``UserDataError``.

The leader's work is numpy over arrays of units; Python loops only over members (decoding their
user data) and topics, so 10,000 members x 10,000 units x 2 topics takes a fraction of a second.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from ._base import EAGER, Assignor
from ._java import hashmap_order, java_sort_key
from ._kafka_work import KafkaWork, timsort_compares
from ._layout import TopicLayout
from .types import Assignment, Subscription, TopicPartition
from .userdata import UserDataError

log = logging.getLogger(__name__)

VERSION = 0
NO_EPOCH = -1
_INT32_MAX = (1 << 31) - 1
_SUBSCRIPTION_HEADER = struct.Struct(">hii")  # version, epoch, partitions array size
_ASSIGNMENT = struct.Struct(">hi")  # version, epoch


class StreamJoinUserData(NamedTuple):
    """A member's subscription user data: its previous partition numbers and their epoch."""

    partitions: tuple[int, ...]
    epoch: int


def _check_int32(name: str, value: int) -> None:
    if not -(1 << 31) <= value <= _INT32_MAX:
        raise UserDataError(f"{name}: {value} does not fit in INT32")


def encode_subscription_user_data(partitions: Iterable[int], epoch: int) -> bytes:
    """Subscription user data v0: INT16 version, INT32 epoch, ARRAY of INT32 partition numbers
    (written ascending, duplicates dropped)."""
    _check_int32("epoch", epoch)
    numbers = np.unique(np.fromiter((int(p) for p in partitions), dtype=np.int64))
    if numbers.size and (numbers[0] < 0 or numbers[-1] > _INT32_MAX):
        bad = int(numbers[0] if numbers[0] < 0 else numbers[-1])
        raise UserDataError(f"partition number {bad} is not an INT32 >= 0")
    return _SUBSCRIPTION_HEADER.pack(VERSION, epoch, numbers.size) + numbers.astype(">i4").tobytes()


def _read_subscription(data: bytes) -> tuple[np.ndarray, int]:
    """Partition numbers (int64 array, wire order) and epoch; raises ``UserDataError``."""
    data = bytes(data)
    if len(data) < _SUBSCRIPTION_HEADER.size:
        raise UserDataError(
            f"truncated: {len(data)} bytes, a subscription header needs {_SUBSCRIPTION_HEADER.size}"
        )
    version, epoch, size = _SUBSCRIPTION_HEADER.unpack_from(data)
    if version < 0:
        raise UserDataError(f"version {version} cannot be negative")
    if size < 0:
        raise UserDataError(f"array size {size} cannot be negative")
    left = len(data) - _SUBSCRIPTION_HEADER.size
    if 4 * size > left:
        raise UserDataError(f"truncated: {size} INT32 partitions but only {left} bytes left")
    numbers = np.frombuffer(data, dtype=">i4", count=size, offset=_SUBSCRIPTION_HEADER.size)
    numbers = numbers.astype(np.int64)
    if size and numbers.min() < 0:
        raise UserDataError(f"partition number {int(numbers.min())} cannot be negative")
    return numbers, epoch


def decode_subscription_user_data(data: bytes) -> StreamJoinUserData:
    """Read subscription user data; raises ``UserDataError`` (an ``AssignorError``) if unreadable."""
    numbers, epoch = _read_subscription(data)
    return StreamJoinUserData(tuple(numbers.tolist()), epoch)


def encode_assignment_user_data(epoch: int) -> bytes:
    """Assignment user data v0: INT16 version, INT32 epoch."""
    _check_int32("epoch", epoch)
    return _ASSIGNMENT.pack(VERSION, epoch)


def decode_assignment_user_data(data: bytes) -> int:
    """The epoch in assignment user data; raises ``UserDataError`` if unreadable."""
    data = bytes(data)
    if len(data) < _ASSIGNMENT.size:
        raise UserDataError(
            f"truncated: {len(data)} bytes, assignment user data needs {_ASSIGNMENT.size}"
        )
    version, epoch = _ASSIGNMENT.unpack_from(data)
    if version < 0:
        raise UserDataError(f"version {version} cannot be negative")
    return epoch


class StreamJoinStickyAssignor(Assignor):
    """KIP-315's StickyStreamJoinAssignor: sticky, fair, partition number k of every subscribed
    topic on one member, zombie claims fenced by an epoch in the user data."""

    name = "stream-join-sticky"
    supported_protocols = (EAGER,)

    def __init__(self) -> None:
        self._owned_numbers: frozenset[int] | None = None  # None: never had an assignment
        self._epoch = NO_EPOCH

    # -- member side ---------------------------------------------------------------------------

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        """Remember the partition numbers received and the epoch the leader wrote."""
        self._owned_numbers = frozenset(tp.partition for tp in assignment.partitions)
        self._epoch = NO_EPOCH
        if assignment.user_data is not None:
            try:
                self._epoch = decode_assignment_user_data(assignment.user_data)
            except UserDataError as exc:
                # An epoch of -1 loses every contested claim: the safe side for a confused member.
                log.warning("stream-join-sticky: unreadable assignment user data (%s)", exc)

    def subscription_user_data(
        self, owned: Sequence[TopicPartition] | None, generation: int
    ) -> bytes | None:
        """Previously owned partition numbers (of ``owned`` if given) and the stored epoch."""
        if owned is not None:
            numbers: Iterable[int] = {tp.partition for tp in owned}
        elif self._owned_numbers is not None:
            numbers = self._owned_numbers
        else:
            return None
        if self._owned_numbers is None and not numbers:
            return None
        return encode_subscription_user_data(numbers, self._epoch)

    # -- leader side ---------------------------------------------------------------------------

    def _assign(
        self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, Assignment]:
        members = sorted(subscriptions, key=java_sort_key)
        layout = TopicLayout(partitions_per_topic)
        n_units = int(layout.counts.min()) if layout.topics else 0

        subscribes = np.zeros((len(members), len(layout.topics)), dtype=bool)
        rows, cols = [], []
        for i, member in enumerate(members):
            for topic in subscriptions[member].topics:
                rank = layout.rank.get(topic)
                if rank is not None:
                    rows.append(i)
                    cols.append(rank)
        subscribes[rows, cols] = True

        epochs, claim_member, claim_unit = _claims(members, subscriptions, n_units)
        next_epoch = min(int(epochs.max()) + 1, _INT32_MAX)
        previous_owner = _resolve_claims(n_units, epochs, claim_member, claim_unit)
        unit_owner = _assign_units(previous_owner, np.asarray(subscribes.any(axis=1)))

        # Step 5: slot (member, partition k of topic) for every unit k and subscribed topic.
        units = np.flatnonzero(unit_owner >= 0)
        owners = unit_owner[units]
        slot_member, slot_index = [], []
        for rank in range(len(layout.topics)):
            wanted = subscribes[owners, rank]
            slot_member.append(owners[wanted])
            slot_index.append(layout.offsets[rank] + units[wanted])
        empty = np.empty(0, dtype=np.int64)
        slots = np.concatenate(slot_member) if slot_member else empty
        owned = layout.group_by_member(
            members, slots, np.concatenate(slot_index) if slot_index else empty
        )
        self.last_work = _work(members, subscriptions, claim_unit.size, n_units, slots.size)
        user_data = encode_assignment_user_data(next_epoch)
        return {m: Assignment(tps, user_data) for m, tps in owned.items()}


def _work(
    members: Sequence[str],
    subscriptions: dict[str, Subscription],
    claims: int,
    n_units: int,
    assigned: int,
) -> KafkaWork:
    """What a Java implementation of the steps above would do, in the sticky assignors' terms
    (``assignors.kafka_time`` prices it with their costs; no Kafka class exists to calibrate
    against): sort the members, decode each one's user data, map every claimed unit to its
    claimant (a ``HashMap`` lookup and put), deal the units, and build one ``TopicPartition``
    per (unit, subscribed topic)."""
    work = KafkaWork("stream-join-sticky")
    work.add("calls", 1)
    work.add("members", len(members))

    def per_member() -> dict[str, float]:
        ranks = {m: i for i, m in enumerate(members)}
        in_map = np.array([ranks[m] for m in hashmap_order(members)], dtype=np.int64)
        return {
            "subscriptions": sum(len(subscriptions[m].topics) for m in members),
            "member_compares": timsort_compares(in_map),
        }

    work.defer(per_member)
    work.add("claims", claims)
    work.add("user_data_partitions", claims)
    work.add("tp_hash_ops", 2 * claims)
    work.add("partitions", n_units + assigned)
    return work


def _claims(
    members: Sequence[str], subscriptions: dict[str, Subscription], n_units: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each member's epoch, and its claims ``(member index, unit)`` of units below ``n_units``."""
    epochs = np.full(len(members), NO_EPOCH, dtype=np.int64)
    claim_member, claim_unit = [], []
    for i, member in enumerate(members):
        data = subscriptions[member].user_data
        if data is None:
            continue
        try:
            numbers, epochs[i] = _read_subscription(data)
        except UserDataError as exc:
            log.warning(
                "stream-join-sticky: member %s sent unreadable user data (%s); "
                "treating it as owning nothing",
                member,
                exc,
            )
            continue
        numbers = numbers[numbers < n_units]
        if numbers.size:
            claim_unit.append(numbers)
            claim_member.append(np.full(numbers.size, i, dtype=np.int64))
    if not claim_unit:
        return epochs, np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    return epochs, np.concatenate(claim_member), np.concatenate(claim_unit)


def _resolve_claims(
    n_units: int, epochs: np.ndarray, claim_member: np.ndarray, claim_unit: np.ndarray
) -> np.ndarray:
    """Previous owner (member index, or -1) of each unit: the one claim with the highest epoch;
    nobody if that epoch is shared."""
    owner = np.full(n_units, -1, dtype=np.int64)
    if claim_unit.size == 0:
        return owner
    # A member repeating a number in its user data claims it once.
    key = np.unique(claim_unit * len(epochs) + claim_member)
    unit, member = np.divmod(key, len(epochs))
    epoch = epochs[member]
    best = np.full(n_units, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(best, unit, epoch)
    top = epoch == best[unit]
    claimants = np.bincount(unit[top], minlength=n_units)
    sole = top & (claimants[unit] == 1)
    owner[unit[sole]] = member[sole]
    return owner


def _assign_units(previous_owner: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """New owner (member index) of each unit; -1 only when no member is eligible."""
    n_units, n_members = previous_owner.size, eligible.size
    unit_owner = np.full(n_units, -1, dtype=np.int64)
    candidates = np.flatnonzero(eligible)
    if n_units == 0 or candidates.size == 0:
        return unit_owner
    owned_mask = previous_owner >= 0
    previous_count = np.bincount(previous_owner[owned_mask], minlength=n_members)

    # Quotas: floor for everyone, the extra units to those that owned the most (then by id).
    per_member, extra = divmod(n_units, candidates.size)
    quota = np.zeros(n_members, dtype=np.int64)
    quota[candidates] = per_member
    by_ownership = candidates[np.lexsort((candidates, -previous_count[candidates]))]
    quota[by_ownership[:extra]] += 1

    # Rule 1: keep previously owned units, lowest numbers first, up to the quota.
    owned_units = np.flatnonzero(owned_mask)  # ascending
    by_owner = np.argsort(previous_owner[owned_units], kind="stable")
    owned_units = owned_units[by_owner]
    owners = previous_owner[owned_units]
    rank_in_owner = np.arange(owners.size) - np.searchsorted(owners, owners, side="left")
    keep = rank_in_owner < quota[owners]
    unit_owner[owned_units[keep]] = owners[keep]
    kept = np.bincount(owners[keep], minlength=n_members)

    # Rules 2 and 3: unowned units first, then units stolen from over-quota members, the member
    # with the longest previous list first. The pool holds exactly the units still needed.
    given_up, giver = owned_units[~keep], owners[~keep]
    steal_order = np.lexsort((given_up, giver, -previous_count[giver]))
    pool = np.concatenate([np.flatnonzero(~owned_mask), given_up[steal_order]])
    need = quota - kept
    # Members that owned something pick first, then the others; member order within each.
    pickers = np.lexsort((np.arange(n_members), previous_count == 0))
    pickers = pickers[need[pickers] > 0]
    unit_owner[pool] = np.repeat(pickers, need[pickers])
    return unit_owner
