"""The states of the consumer group protocol's coordinator: a member's as the coordinator sees it
(``MemberState``, Kafka's ``modern.MemberState``) and the group's (``ConsumerGroupState``,
``ConsumerGroup.ConsumerGroupState``).

Neither is entered by a checked transition, in Kafka as here: both are derived. A member's state
is what ``CurrentAssignmentBuilder`` computes from its assignment and target
(``sim.coordinator.consumer.reconcile``), and the group's is what ``maybeUpdateGroupState``
computes from its epochs and members (``ConsumerGroup._update_state``); any state may
follow any other. (The client's own states, with their valid previous states, are
``sim.client.states``'.)
"""

from __future__ import annotations

from enum import StrEnum


class MemberState(StrEnum):
    """Where a member stands in its reconciliation (the value is Kafka's name)."""

    STABLE = "STABLE"
    UNREVOKED_PARTITIONS = "UNREVOKED_PARTITIONS"
    UNRELEASED_PARTITIONS = "UNRELEASED_PARTITIONS"


class ConsumerGroupState(StrEnum):
    """A consumer group's state (the value is Kafka's name, what events record)."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
