"""What the group coordinator does differently from one Kafka release to the next: a frozen
``BrokerBehaviour`` of named switches, chosen by ``kafka_version`` (``"4.3"``, the default, or
``"4.0"``), which a scenario may override one by one.

The coordinator asks a switch where Kafka's code asks a feature level or carries a fix
(``behaviour.accepts_epoch0_rejoin``, as Kafka asks ``GroupVersion``); it never compares version
strings. A switch is named after what Kafka changed, and its docstring names the KIP, issue or
pull request. The reference of ``"4.0"`` is Kafka commit 1eb7644 (October 2024, the 4.0 line),
which every regression baseline of this project was recorded under; ``"4.3"`` adds what 4.1 to
4.3 changed in the consumer group's rebalance timing (docs/kafka-fidelity.md lists what else
changed and what is not modelled).

Modelled here, not defined by Kafka: the version as one setting of the run. A real cluster
reaches a behaviour through its software version and, for some, a feature level
(``group.version``); a run has one broker, so one setting stands for both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from sim.config import (  # the config validates the version and the switches a scenario sets
    BROKER_BEHAVIOUR_SWITCHES,
    DEFAULT_KAFKA_VERSION,
    KAFKA_VERSIONS,
    SimConfig,
    check_behaviour_overrides,
    check_kafka_version,
)

__all__ = [
    "BROKER_BEHAVIOUR_SWITCHES",
    "KAFKA_VERSIONS",
    "BrokerBehaviour",
    "behaviour_for",
    "of_config",
]


@attrs.frozen
class BrokerBehaviour:
    """The coordinator's version-dependent switches (see the module docstring).

    ``accepts_epoch0_rejoin``: a member the group still has that heartbeats with member epoch 0
    under its own member id is taken back (KAFKA-19233, apache/kafka PR 21305: an early return for
    epoch 0 in ``throwIfConsumerGroupMemberEpochIsInvalid``). Without it such a member is answered
    FENCED_MEMBER_EPOCH again and again until its session or rebalance timeout removes it.

    ``assignment_interval_ms``: ``group.consumer.assignment.interval.ms`` (KIP-1263, KAFKA-20300
    PR 21730, batching in KAFKA-20291 PR 21720): a heartbeat computes a new target assignment only
    once this long has passed since the last computation ended; until then members reconcile
    towards the last target. 4.3's broker default is 1000 ms; before it the interval was 0.

    ``assignment_epochs``: KIP-1251 (KAFKA-20066): an OffsetCommit from a consumer-protocol member
    is accepted for a partition when the epoch at which the member was assigned the partition
    <= the commit's member epoch <= the member's epoch, instead of only when the commit's epoch is
    the member's epoch.

    ``assignment_epoch_follows_empty_group``: KAFKA-20442 (PR 22045): when fencing leaves the
    group empty, the target assignment epoch is moved to the group epoch with it (an empty group
    is then Empty at matching epochs, not waiting for an assignment nobody will compute).

    ``upgrade_converts_unassigned_members``: KAFKA-17733 (apache/kafka PR 17853, November 2024,
    in every release from 4.0.0): an online upgrade converts a classic member that has no
    assignment yet (it never synced) with no partitions. Before it (1eb7644) such a member fails
    ``ConsumerGroup.fromClassicGroup`` and the upgrade (GROUP_ID_NOT_FOUND); with it, only a
    group that has selected no protocol yet fails it (UNKNOWN_SERVER_ERROR).

    Not a switch: ``group.consumer.assignor.offload.enable`` (KIP-1263's other half, the assignor
    on a background thread) was removed from 4.3 before its release (KAFKA-20339); it is left for
    a later Kafka (docs/kafka-fidelity.md).
    """

    kafka_version: str = DEFAULT_KAFKA_VERSION
    accepts_epoch0_rejoin: bool = True
    assignment_interval_ms: float = 1000.0
    assignment_epochs: bool = True
    assignment_epoch_follows_empty_group: bool = True
    upgrade_converts_unassigned_members: bool = True

    @property
    def assignment_interval_s(self) -> float:
        return self.assignment_interval_ms / 1000.0


# The switches each release sets (overrides then apply on top).
_RELEASES: dict[str, dict[str, Any]] = {
    "4.0": {
        "accepts_epoch0_rejoin": False,
        "assignment_interval_ms": 0.0,
        "assignment_epochs": False,
        "assignment_epoch_follows_empty_group": False,
        "upgrade_converts_unassigned_members": False,
    },
    "4.3": {
        "accepts_epoch0_rejoin": True,
        "assignment_interval_ms": 1000.0,
        "assignment_epochs": True,
        "assignment_epoch_follows_empty_group": True,
        "upgrade_converts_unassigned_members": True,
    },
}


def behaviour_for(
    kafka_version: str,
    overrides: Mapping[str, Any] | None = None,
    assignment_interval_ms: float | None = None,
) -> BrokerBehaviour:
    """The behaviour of ``kafka_version``'s coordinator with ``overrides`` (switch -> bool) and
    the group's ``consumer.assignment.interval.ms`` (None: the release's default) applied."""
    fields: dict[str, Any] = dict(_RELEASES[check_kafka_version(kafka_version)])
    if overrides:
        check_behaviour_overrides(overrides)
        fields.update(overrides)
    if assignment_interval_ms is not None:
        fields["assignment_interval_ms"] = float(assignment_interval_ms)
    return BrokerBehaviour(kafka_version=kafka_version, **fields)


def of_config(cfg: SimConfig) -> BrokerBehaviour:
    """The behaviour a run's configuration asks for (its version, switches and interval)."""
    return behaviour_for(
        cfg.kafka_version, cfg.broker_behaviour, cfg.group.consumer_assignment_interval_ms
    )
