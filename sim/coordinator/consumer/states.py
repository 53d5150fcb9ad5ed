"""The states of the consumer group protocol's coordinator: a member's (Kafka's
``modern.MemberState``) and the group's (``ConsumerGroup.ConsumerGroupState``)."""

from __future__ import annotations

# MemberState (group-coordinator modern.consumer)
STABLE = "STABLE"
UNREVOKED_PARTITIONS = "UNREVOKED_PARTITIONS"
UNRELEASED_PARTITIONS = "UNRELEASED_PARTITIONS"

# ConsumerGroup.ConsumerGroupState
EMPTY = "Empty"
ASSIGNING = "Assigning"
RECONCILING = "Reconciling"
GROUP_STABLE = "Stable"
