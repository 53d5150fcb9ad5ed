"""The classic group's states (Kafka's ``ClassicGroupState``), each with the states it may be
entered from (``ClassicGroupState.validPreviousStates``), checked on every transition
(``sim.coordinator.classic.group``)."""

from __future__ import annotations

from enum import StrEnum


class ClassicGroupState(StrEnum):
    """A classic group's state; the value is Kafka's name for it (what events record)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def valid_previous_states(self) -> frozenset[ClassicGroupState]:
        """The states a group may be in to enter this one."""
        return _VALID_PREVIOUS[self]


# ClassicGroupState's static block, as data.
_VALID_PREVIOUS: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    ClassicGroupState.EMPTY: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.PREPARING_REBALANCE: frozenset(
        {
            ClassicGroupState.STABLE,
            ClassicGroupState.COMPLETING_REBALANCE,
            ClassicGroupState.EMPTY,
        }
    ),
    ClassicGroupState.COMPLETING_REBALANCE: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.STABLE: frozenset({ClassicGroupState.COMPLETING_REBALANCE}),
    ClassicGroupState.DEAD: frozenset(ClassicGroupState),
}
