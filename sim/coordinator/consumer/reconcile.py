"""A member's reconciliation towards its target assignment, as a pure function: Kafka's
``CurrentAssignmentBuilder`` (``next_member_assignment``, and ``builds_new_member``: whether it
makes a new member record). The coordinator (``sim.coordinator.consumer.group``) calls it for
each member on its own; there is no group-wide barrier.
"""

from __future__ import annotations

from collections.abc import Callable

from sim.coordinator.consumer.states import MemberState

_EMPTY: frozenset = frozenset()


def next_member_assignment(
    state: MemberState,
    member_epoch: int,
    assigned: frozenset,
    pending_revocation: frozenset,
    target_epoch: int,
    target: frozenset,
    partition_epoch: Callable[[object], int] | dict,
    owned: frozenset | None,
) -> tuple[MemberState, int, frozenset, frozenset]:
    """Kafka's ``CurrentAssignmentBuilder.build``: one member's next (state, epoch, assigned
    partitions, partitions pending revocation) given its target assignment at ``target_epoch``.

    ``partition_epoch(tp)`` is the epoch of the member currently holding ``tp`` (assigned or
    pending revocation), -1 when it is free; or a dict of the held partitions to that epoch.
    ``owned`` is what the member reported in this heartbeat, None when it did not send its owned
    partitions (then it cannot have revoked).
    """
    if state == MemberState.STABLE:
        if member_epoch == target_epoch:
            return state, member_epoch, assigned, pending_revocation
        return _compute_next(member_epoch, assigned, target_epoch, target, partition_epoch, owned)
    if state == MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, pending_revocation):
            return state, member_epoch, assigned, pending_revocation
        return _compute_next(
            member_epoch + 1, assigned, target_epoch, target, partition_epoch, owned
        )
    if state == MemberState.UNRELEASED_PARTITIONS:
        return _compute_next(member_epoch, assigned, target_epoch, target, partition_epoch, owned)
    raise ValueError(f"unknown member state {state!r}")


def builds_new_member(
    state: MemberState,
    member_epoch: int,
    pending_revocation: frozenset,
    target_epoch: int,
    owned: frozenset | None,
) -> bool:
    """Whether ``CurrentAssignmentBuilder.build`` makes a new member (``computeNextAssignment``)
    rather than return the one it was given. A new member's previous epoch is the epoch it had
    (``ConsumerGroupMember.Builder.updateMemberEpoch``), even when its epoch stays the same."""
    if state == MemberState.STABLE:
        return member_epoch != target_epoch
    if state == MemberState.UNREVOKED_PARTITIONS:
        return not _owns_any(owned, pending_revocation)
    return True


def _owns_any(owned: frozenset | None, partitions: frozenset) -> bool:
    """CurrentAssignmentBuilder.ownsRevokedPartitions (no report: assume it still owns them)."""
    if owned is None:
        return True
    return not owned.isdisjoint(partitions)


def _compute_next(member_epoch, assigned, target_epoch, target, partition_epoch, owned):
    """CurrentAssignmentBuilder.computeNextAssignment."""
    kept = assigned & target
    revoke = assigned - kept
    pending_assignment = target - kept
    if isinstance(partition_epoch, dict):
        free = pending_assignment.difference(partition_epoch)
    else:
        free = frozenset(tp for tp in pending_assignment if partition_epoch(tp) == -1)
    unreleased = len(free) != len(pending_assignment)
    if revoke and _owns_any(owned, revoke):
        # revoke first, in the current epoch
        return MemberState.UNREVOKED_PARTITIONS, member_epoch, kept, revoke
    if free:
        return (
            (MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE),
            target_epoch,
            kept | free,
            _EMPTY,
        )
    if unreleased:
        return MemberState.UNRELEASED_PARTITIONS, target_epoch, kept, _EMPTY
    return MemberState.STABLE, target_epoch, kept, _EMPTY
