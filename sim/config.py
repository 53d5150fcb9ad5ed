"""Simulation configuration: attrs classes with Kafka's names and defaults, validated on construction.

Durations keep Kafka's millisecond names (``session_timeout_ms``); the simulator works in seconds
through the ``*_s`` properties. Dotted Kafka names (``"session.timeout.ms"``) are accepted as keys
when building from a dict (a TOML table), and unknown keys are rejected by name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

from assignors import ASSIGNORS
from assignors.server import SERVER_ASSIGNORS


class ConfigError(ValueError):
    """A configuration value that cannot be simulated. One line, naming the field."""

    def __init__(self, field: str, reason: str):
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}" if field else reason)

    def under(self, prefix: str) -> ConfigError:
        """The same error with its field path prefixed (``consumer`` + ``session_timeout_ms``)."""
        return ConfigError(f"{prefix}.{self.field}" if self.field else prefix, self.reason)


def _number(
    field: str,
    value: Any,
    *,
    minimum: float | None = None,
    strict: bool = False,
    integer: bool = False,
) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(field, f"{value!r} is not a number")
    if integer and not isinstance(value, int):
        raise ConfigError(field, f"{value!r} is not an integer")
    if not math.isfinite(value):
        raise ConfigError(field, f"{value!r} is not finite")
    if minimum is not None and (value <= minimum if strict else value < minimum):
        raise ConfigError(field, f"{value!r} must be {'>' if strict else '>='} {minimum}")


def _nonneg(_inst, attribute, value):
    _number(attribute.name, value, minimum=0)


def _positive(_inst, attribute, value):
    _number(attribute.name, value, minimum=0, strict=True)


def _nonneg_int(_inst, attribute, value):
    _number(attribute.name, value, minimum=0, integer=True)


def _positive_int(_inst, attribute, value):
    _number(attribute.name, value, minimum=1, integer=True)


# ---------------------------------------------------------------------------------------------
# Network latency


LATENCY_KINDS = ("constant", "uniform", "lognormal")


@attrs.frozen
class Latency:
    """One-way latency of a link, in milliseconds.

    ``constant``: always ``ms``; ``uniform``: between ``low_ms`` and ``high_ms``; ``lognormal``:
    median ``ms`` with shape ``sigma`` (heavy right tail, as real network latencies have).
    """

    kind: str = "constant"
    ms: float = attrs.field(default=1.0, validator=_nonneg)
    low_ms: float = attrs.field(default=0.5, validator=_nonneg)
    high_ms: float = attrs.field(default=2.0, validator=_nonneg)
    sigma: float = attrs.field(default=0.5, validator=_nonneg)

    def __attrs_post_init__(self):
        if self.kind not in LATENCY_KINDS:
            raise ConfigError("kind", f"{self.kind!r} is not one of {', '.join(LATENCY_KINDS)}")
        if self.kind == "uniform" and self.high_ms < self.low_ms:
            raise ConfigError("high_ms", f"{self.high_ms} is below low_ms ({self.low_ms})")

    def mean_s(self) -> float:
        """The mean one-way latency in seconds."""
        if self.kind == "constant":
            return self.ms / 1000.0
        if self.kind == "uniform":
            return (self.low_ms + self.high_ms) / 2000.0
        return self.ms * math.exp(self.sigma**2 / 2.0) / 1000.0

    def sample_s(self, rng) -> float:
        """One latency draw in seconds from the numpy Generator ``rng``."""
        if self.kind == "constant":
            return self.ms / 1000.0
        if self.kind == "uniform":
            return float(rng.uniform(self.low_ms, self.high_ms)) / 1000.0
        return float(self.ms * math.exp(self.sigma * rng.standard_normal())) / 1000.0


@attrs.frozen
class NetworkConfig:
    """The links between members and the coordinator.

    ``member_latency`` overrides ``latency`` per member name. ``drop_probability`` drops any
    message independently (requests then time out after ``request.timeout.ms``).
    """

    latency: Latency = attrs.field(factory=Latency)
    member_latency: dict[str, Latency] = attrs.field(factory=dict)
    drop_probability: float = attrs.field(default=0.0, validator=_nonneg)

    def __attrs_post_init__(self):
        if self.drop_probability >= 1:
            raise ConfigError("drop_probability", f"{self.drop_probability} must be below 1")

    def latency_of(self, member: str) -> Latency:
        return self.member_latency.get(member, self.latency)


# ---------------------------------------------------------------------------------------------
# Group coordinator (broker side)


# ConsumerGroupMigrationPolicy: its values (case-insensitive) and what each enables.
MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


def _lower(value):
    return value.lower() if isinstance(value, str) else value


@attrs.frozen
class GroupConfig:
    """Broker settings of the group coordinator (Kafka's ``group.*`` broker configs)."""

    initial_rebalance_delay_ms: float = attrs.field(default=3000, validator=_nonneg)
    min_session_timeout_ms: float = attrs.field(default=6000, validator=_nonneg)
    max_session_timeout_ms: float = attrs.field(default=1800000, validator=_nonneg)
    # The consumer group protocol (KIP-848; GroupCoordinatorConfig's group.consumer.* defaults).
    consumer_heartbeat_interval_ms: float = attrs.field(default=5000, validator=_positive)
    consumer_session_timeout_ms: float = attrs.field(default=45000, validator=_positive)
    consumer_min_heartbeat_interval_ms: float = attrs.field(default=5000, validator=_positive)
    consumer_max_heartbeat_interval_ms: float = attrs.field(default=15000, validator=_positive)
    consumer_min_session_timeout_ms: float = attrs.field(default=45000, validator=_positive)
    consumer_max_session_timeout_ms: float = attrs.field(default=60000, validator=_positive)
    consumer_assignors: tuple[str, ...] = attrs.field(
        default=("uniform", "range"), converter=lambda v: names_tuple("consumer_assignors")(v)
    )
    # group.consumer.max.size and group.max.size (GroupCoordinatorConfig: Integer.MAX_VALUE). The
    # consumer group refuses members past its size (GROUP_MAX_SIZE_REACHED) and an upgrade of a
    # larger classic group; group.max.size is read only by the downgrade check (the classic core
    # does not refuse joiners past it: not modelled).
    consumer_max_size: int = attrs.field(default=2**31 - 1, validator=_positive_int)
    max_size: int = attrs.field(default=2**31 - 1, validator=_positive_int)
    # group.consumer.migration.policy (ConsumerGroupMigrationPolicy; default bidirectional): which
    # online conversions between a classic and a consumer group the coordinator makes.
    consumer_migration_policy: str = attrs.field(default="bidirectional", converter=_lower)
    # group.consumer.assignment.interval.ms (KIP-1263, Kafka 4.3; the group-level
    # consumer.assignment.interval.ms overrides it): the least time between two target
    # assignment computations. None: the default of ``kafka_version``'s broker (4.3: 1000 ms;
    # 4.0 has no such config and computes at every group epoch, as 0 does).
    consumer_assignment_interval_ms: float | None = attrs.field(default=None)

    @consumer_assignment_interval_ms.validator
    def _interval(self, attribute, value):
        if value is not None:
            _nonneg(self, attribute, value)

    def __attrs_post_init__(self):
        self._check_consumer_bounds()
        if self.consumer_heartbeat_interval_ms >= self.consumer_session_timeout_ms:
            raise ConfigError(
                "consumer_heartbeat_interval_ms",
                f"{self.consumer_heartbeat_interval_ms:g} must be below consumer_session_timeout_ms "
                f"({self.consumer_session_timeout_ms:g})",
            )
        if self.consumer_migration_policy not in MIGRATION_POLICIES:
            raise ConfigError(
                "consumer_migration_policy",
                f"{self.consumer_migration_policy!r} is not one of {', '.join(MIGRATION_POLICIES)}",
            )
        if not self.consumer_assignors:
            raise ConfigError("consumer_assignors", "needs at least one server-side assignor")
        for name in self.consumer_assignors:
            if name not in SERVER_ASSIGNORS:
                raise ConfigError(
                    "consumer_assignors", f"{name!r} is not one of {', '.join(SERVER_ASSIGNORS)}"
                )
        if self.max_session_timeout_ms < self.min_session_timeout_ms:
            raise ConfigError(
                "max_session_timeout_ms",
                f"{self.max_session_timeout_ms} is below min_session_timeout_ms ({self.min_session_timeout_ms})",
            )

    def _check_consumer_bounds(self) -> None:
        # GroupCoordinatorConfig's constructor checks these in this order; a broker whose
        # group.consumer.* values break one refuses to start (IllegalArgumentException).
        for kind in ("heartbeat_interval", "session_timeout"):
            value = getattr(self, f"consumer_{kind}_ms")
            low = getattr(self, f"consumer_min_{kind}_ms")
            high = getattr(self, f"consumer_max_{kind}_ms")
            kafka = kind.replace("_", ".")
            if high < low:
                raise ConfigError(
                    f"consumer_max_{kind}_ms",
                    f"{high:g} is below consumer_min_{kind}_ms ({low:g}): "
                    f"group.consumer.max.{kafka}.ms must be >= group.consumer.min.{kafka}.ms",
                )
            if value < low:
                raise ConfigError(
                    f"consumer_{kind}_ms",
                    f"{value:g} is below group.consumer.min.{kafka}.ms "
                    f"(consumer_min_{kind}_ms = {low:g})",
                )
            if value > high:
                raise ConfigError(
                    f"consumer_{kind}_ms",
                    f"{value:g} is above group.consumer.max.{kafka}.ms "
                    f"(consumer_max_{kind}_ms = {high:g})",
                )

    @property
    def upgrade_enabled(self) -> bool:
        """ConsumerGroupMigrationPolicy.isUpgradeEnabled."""
        return self.consumer_migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_enabled(self) -> bool:
        """ConsumerGroupMigrationPolicy.isDowngradeEnabled."""
        return self.consumer_migration_policy in ("bidirectional", "downgrade")

    @property
    def initial_rebalance_delay_s(self) -> float:
        return self.initial_rebalance_delay_ms / 1000.0

    @property
    def consumer_heartbeat_interval_s(self) -> float:
        return self.consumer_heartbeat_interval_ms / 1000.0

    @property
    def consumer_session_timeout_s(self) -> float:
        return self.consumer_session_timeout_ms / 1000.0


# ---------------------------------------------------------------------------------------------
# Consumers


# Bounds on sizes, so a typo cannot ask for a run that exhausts memory before it starts.
MAX_MEMBERS = 1_000_000
MAX_PARTITIONS_PER_TOPIC = 10_000_000


def _strategy_list(value) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [s.strip() for s in value.split(",") if s.strip()]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigError(
            "partition_assignment_strategy", f"{value!r} is not a list of assignor names"
        )
    return tuple(value)


def names_tuple(field: str):
    """A converter: one name or a list of names -> tuple of str (errors name ``field``)."""

    def convert(value) -> tuple[str, ...]:
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
            raise ConfigError(field, f"{value!r} is not a name or a list of names")
        return tuple(value)

    return convert


def optional_str(_inst, attribute, value):
    if value is not None and not isinstance(value, str):
        raise ConfigError(attribute.name, f"{value!r} is not a string")


def boolean(_inst, attribute, value):
    if not isinstance(value, bool):
        raise ConfigError(attribute.name, f"{value!r} is not true or false")


def _check_strategy(_inst, attribute, value):
    if not value:
        raise ConfigError(attribute.name, "needs at least one assignor")
    for name in value:
        if name not in ASSIGNORS:
            raise ConfigError(attribute.name, f"{name!r} is not one of {', '.join(ASSIGNORS)}")
    if len(set(value)) != len(value):
        raise ConfigError(attribute.name, f"{list(value)} names an assignor twice")


GROUP_PROTOCOLS = ("classic", "consumer")  # Kafka's group.protocol values
# How the application commits: enable.auto.commit=true, or commitSync() / commitAsync() per batch.
COMMIT_MODES = ("auto", "sync-per-batch", "async-per-batch")


@attrs.frozen
class ConsumerConfig:
    """One member's client settings (Kafka's consumer configs) and its workload.

    ``static``: the member sets ``group.instance.id`` (KIP-345) to its name.
    ``capacity``: records/s it can process; ``max_poll_records``: the most records one poll()
    returns (Kafka's max.poll.records), so a batch takes at most ``max_poll_records / capacity``
    seconds, and the poll loop reacts to a rebalance only between batches (see ``sim.client.classic``).
    ``revoke_cost_ms`` / ``assign_cost_ms``: time its rebalance listener spends per revoked /
    assigned partition (commit, state restore); 0 by default, as Kafka's default
    ``ConsumerRebalanceListener`` does nothing.
    ``topics``: its subscription (empty = every topic of the scenario).
    ``sticky_user_data_version``: 1 = KIP-341 (with generation); 0 = the pre-KIP-341 layout
    that an old client sends (only meaningful for the eager ``sticky`` assignor; such a client's
    subscriptions also carry no generation field).
    ``auto_offset_reset``: where a new owner starts when the group has no committed offset for a
    partition (Kafka's auto.offset.reset: ``latest``, the default, or ``earliest``, the
    partition's creation). ``fetch_max_wait_ms``: fetch.max.wait.ms, the longest a first fetch
    waits (only when the partition has no records to return).
    ``commit_mode``: how the application commits offsets. ``auto``: enable.auto.commit=true (Kafka's
    default), a commit every ``auto_commit_interval_ms`` and before revoking. ``sync-per-batch`` /
    ``async-per-batch``: enable.auto.commit=false; the application calls commitSync() /
    commitAsync() after each poll batch, and commitSync() in onPartitionsRevoked and before
    close() (the usual pattern; nothing is committed when partitions are lost). A commitSync()
    blocks the poll loop for its round trip and retries retriable errors (a timed-out request)
    until ``default_api_timeout_ms`` (default.api.timeout.ms); a commitAsync() is never retried.
    ``heartbeat_phase``: ``aligned`` (Java: every member restarts its heartbeat timer when its
    SyncGroup completes, so a group shares one phase) or ``random`` (a model of long-lived groups
    whose phases drifted: the first heartbeat after a SyncGroup falls anywhere in one interval).
    ``group_protocol``: Kafka's ``group.protocol``: ``classic`` (JoinGroup/SyncGroup, the
    assignors above run on the leader) or ``consumer`` (KIP-848: ConsumerGroupHeartbeat, the
    coordinator assigns with a server-side assignor; ``partition_assignment_strategy``,
    ``session_timeout_ms`` and ``heartbeat_interval_ms`` are then not used: the broker's
    ``group.consumer.*`` settings apply). ``group_remote_assignor``: Kafka's
    ``group.remote.assignor`` (None: the broker's first ``group.consumer.assignors``).
    """

    session_timeout_ms: float = attrs.field(default=45000, validator=_positive)
    heartbeat_interval_ms: float = attrs.field(default=3000, validator=_positive)
    max_poll_interval_ms: float = attrs.field(default=300000, validator=_positive)
    partition_assignment_strategy: tuple[str, ...] = attrs.field(
        default=("range", "cooperative-sticky"), converter=_strategy_list, validator=_check_strategy
    )
    static: bool = False
    capacity: float = attrs.field(default=10000.0, validator=_positive)
    max_poll_records: int = attrs.field(default=500, validator=_positive_int)
    revoke_cost_ms: float = attrs.field(default=0.0, validator=_nonneg)
    assign_cost_ms: float = attrs.field(default=0.0, validator=_nonneg)
    topics: tuple[str, ...] = attrs.field(default=(), converter=names_tuple("topics"))  # type: ignore[misc]  # (mypy's attrs plugin reads only named converters)
    request_timeout_ms: float = attrs.field(default=30000, validator=_positive)
    retry_backoff_ms: float = attrs.field(default=100, validator=_nonneg)
    metadata_max_age_ms: float = attrs.field(default=300000, validator=_positive)
    auto_commit_interval_ms: float = attrs.field(default=5000, validator=_positive)
    sticky_user_data_version: int = attrs.field(default=1)
    rack: str | None = attrs.field(default=None, validator=optional_str)
    auto_offset_reset: str = "latest"
    fetch_max_wait_ms: float = attrs.field(default=500, validator=_nonneg)
    heartbeat_phase: str = "aligned"
    commit_mode: str = "auto"
    default_api_timeout_ms: float = attrs.field(default=60000, validator=_positive)
    group_protocol: str = attrs.field(default="classic")
    group_remote_assignor: str | None = attrs.field(default=None, validator=optional_str)

    def __attrs_post_init__(self):
        if self.heartbeat_phase not in ("aligned", "random"):
            raise ConfigError(
                "heartbeat_phase", f"{self.heartbeat_phase!r} is not aligned or random"
            )
        if self.commit_mode not in COMMIT_MODES:
            raise ConfigError(
                "commit_mode", f"{self.commit_mode!r} is not one of {', '.join(COMMIT_MODES)}"
            )
        if self.auto_offset_reset not in ("latest", "earliest"):
            raise ConfigError(
                "auto_offset_reset", f"{self.auto_offset_reset!r} is not latest or earliest"
            )
        if self.group_protocol not in GROUP_PROTOCOLS:
            raise ConfigError(
                "group_protocol",
                f"{self.group_protocol!r} is not one of {', '.join(GROUP_PROTOCOLS)}",
            )
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError(
                "heartbeat_interval_ms",
                f"{self.heartbeat_interval_ms:g} must be below session_timeout_ms ({self.session_timeout_ms:g})",
            )
        if self.max_poll_records / self.capacity >= self.max_poll_interval_ms / 1000.0:
            raise ConfigError(
                "max_poll_records",
                f"{self.max_poll_records} records at capacity {self.capacity:g}/s take "
                f"{self.max_poll_records / self.capacity:g} s per batch, not below "
                f"max_poll_interval_ms ({self.max_poll_interval_ms:g}): every poll would time out",
            )
        if self.sticky_user_data_version not in (0, 1):
            raise ConfigError(
                "sticky_user_data_version", f"{self.sticky_user_data_version!r} is not 0 or 1"
            )
        if not isinstance(self.static, bool):
            raise ConfigError("static", f"{self.static!r} is not true or false")

    @property
    def session_timeout_s(self) -> float:
        return self.session_timeout_ms / 1000.0

    @property
    def heartbeat_interval_s(self) -> float:
        return self.heartbeat_interval_ms / 1000.0

    @property
    def max_poll_interval_s(self) -> float:
        return self.max_poll_interval_ms / 1000.0

    @property
    def request_timeout_s(self) -> float:
        return self.request_timeout_ms / 1000.0

    @property
    def retry_backoff_s(self) -> float:
        return self.retry_backoff_ms / 1000.0

    @property
    def metadata_max_age_s(self) -> float:
        return self.metadata_max_age_ms / 1000.0

    @property
    def auto_commit_interval_s(self) -> float:
        return self.auto_commit_interval_ms / 1000.0

    @property
    def enable_auto_commit(self) -> bool:
        """Kafka's enable.auto.commit: true only in the ``auto`` commit mode."""
        return self.commit_mode == "auto"

    @property
    def default_api_timeout_s(self) -> float:
        return self.default_api_timeout_ms / 1000.0

    def drain_capacity(self, commit_round_trip_s: float) -> float:
        """Records/s it processes while it has a backlog: its capacity, less the commitSync()
        round trip after every full batch in the ``sync-per-batch`` mode."""
        if self.commit_mode != "sync-per-batch":
            return self.capacity
        return self.max_poll_records / (self.poll_batch_s + commit_round_trip_s)

    @property
    def poll_batch_s(self) -> float:
        """One poll batch of the manual commit modes: ``max_poll_records / capacity`` (see sim.client.classic)."""
        return self.max_poll_records / self.capacity


# ---------------------------------------------------------------------------------------------
# Topics and assignor cost


@attrs.frozen
class TopicConfig:
    """A topic: partition count and production rate per partition (records/s)."""

    name: str
    partitions: int = attrs.field(validator=_nonneg_int)

    @partitions.validator
    def _not_too_many(self, attribute, value):
        if value > MAX_PARTITIONS_PER_TOPIC:
            raise ConfigError(
                attribute.name,
                f"{value} is above the simulator's limit of {MAX_PARTITIONS_PER_TOPIC:,}",
            )

    rate: float = attrs.field(default=100.0, validator=_nonneg)

    def __attrs_post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError("name", f"{self.name!r} is not a non-empty string")


COST_MODES = ("zero", "fixed:SECONDS", "model", "measured", "kafka")


@attrs.frozen
class AssignorCost:
    """Simulated time the leader spends computing an assignment.

    ``zero``; ``fixed:S`` (S seconds); ``model``: ``model_base_s + model_per_partition_s * P +
    model_per_member_s * N`` (deterministic); ``measured``: the real CPU time of our assignor
    times ``measured_factor`` (the only use of wall time in the simulator, so not replayable);
    ``kafka``: the time Kafka's own Java implementation of the assignor takes on this very input
    (warm JVM), from the work it does on it (deterministic). The caller prices the assignment and
    passes it as ``kafka_s``: a classic group's leader ``assignors.kafka_time``'s figure, the
    consumer-protocol coordinator ``assignors.server.kafka_time``'s. ``kafka`` is the default:
    the leader's or the coordinator's time is then what Kafka's own code would take, which decides
    how long a large group stalls (``zero`` was the default before; it is the cost of an instant
    assignor, which no Kafka has).
    """

    mode: str = "kafka"
    model_base_s: float = attrs.field(default=0.001, validator=_nonneg)
    model_per_partition_s: float = attrs.field(default=2e-6, validator=_nonneg)
    model_per_member_s: float = attrs.field(default=2e-5, validator=_nonneg)
    measured_factor: float = attrs.field(default=1.0, validator=_nonneg)

    def __attrs_post_init__(self):
        _ = self.fixed_s  # validates the mode string

    @property
    def fixed_s(self) -> float | None:
        mode = self.mode
        if mode in ("zero", "model", "measured", "kafka"):
            return None
        if isinstance(mode, str) and mode.startswith("fixed:"):
            try:
                value = float(mode.split(":", 1)[1])
            except ValueError:
                value = -1.0
            if value >= 0 and math.isfinite(value):
                return value
            raise ConfigError(
                "mode", f"{mode!r}: fixed needs a number of seconds >= 0, e.g. fixed:2.5"
            )
        raise ConfigError("mode", f"{mode!r} is not one of {', '.join(COST_MODES)}")

    def cost_s(
        self, partitions: int, members: int, measured_s: float, kafka_s: float | None = None
    ) -> float:
        """Seconds for an assignment of ``partitions`` to ``members``; ``measured_s`` is our
        assignor's CPU time (mode ``measured``), ``kafka_s`` Kafka's own time on the input (mode
        ``kafka``; the caller computes it only in that mode)."""
        fixed = self.fixed_s
        if fixed is not None:
            return fixed
        if self.mode == "zero":
            return 0.0
        if self.mode == "kafka":
            if kafka_s is None:
                raise ConfigError("mode", "kafka: this assignor has no model of Kafka's time")
            return kafka_s
        if self.mode == "model":
            return (
                self.model_base_s
                + self.model_per_partition_s * partitions
                + self.model_per_member_s * members
            )
        return measured_s * self.measured_factor


# ---------------------------------------------------------------------------------------------
# The coordinator's release (the switches themselves: sim.coordinator.behaviour)

KAFKA_VERSIONS = ("4.0", "4.3")
DEFAULT_KAFKA_VERSION = "4.3"
# The coordinator's switches a scenario may set apart from its version (``broker_behaviour``);
# the assignment interval is a group setting instead (consumer_assignment_interval_ms).
BROKER_BEHAVIOUR_SWITCHES = (
    "accepts_epoch0_rejoin",
    "assignment_epochs",
    "assignment_epoch_follows_empty_group",
    "upgrade_converts_unassigned_members",
)


def check_kafka_version(value: Any) -> str:
    """The version as a string, or ``ConfigError`` naming ``kafka_version``."""
    text = str(value).strip()
    if text not in KAFKA_VERSIONS:
        raise ConfigError(
            "kafka_version",
            f"{value!r} is not one of {', '.join(KAFKA_VERSIONS)} (the group coordinator "
            "releases the simulator models)",
        )
    return text


def check_behaviour_overrides(overrides: Any) -> None:
    """``ConfigError`` naming the first ``broker_behaviour`` entry that is not a switch or not
    a boolean."""
    if not isinstance(overrides, Mapping):
        raise ConfigError("broker_behaviour", "expected a table of switch -> true/false")
    for name, value in overrides.items():
        if name not in BROKER_BEHAVIOUR_SWITCHES:
            raise ConfigError(
                f"broker_behaviour.{name}",
                f"unknown switch; allowed: {', '.join(BROKER_BEHAVIOUR_SWITCHES)}",
            )
        if not isinstance(value, bool):
            raise ConfigError(f"broker_behaviour.{name}", f"expected true or false, got {value!r}")


def _bool_text(value: Any) -> Any:
    """``true``/``false`` as a command line's ``--set`` spells them, else the value as it is."""
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return value


# ---------------------------------------------------------------------------------------------
# The whole simulation


@attrs.frozen
class SimConfig:
    """Everything one run needs apart from the timeline.

    ``members``: how many members start at t=0 (named ``c000``, ``c001``, ...), all with
    ``consumer``, except names listed in ``member_overrides`` (a dict of consumer fields).
    ``start_spread_s``: the members of a deployment do not start in the same millisecond: each
    initial member starts at an instant drawn per seed, uniformly in ``[0, start_spread_s)``, and
    each member of an ``add_members`` action as long after the action. Their start instants set
    their auto-commit and poll phases (and, under the consumer protocol, their heartbeat phases),
    so a seed samples them as two real runs of one deployment differ. Kafka defines no such thing;
    the default (5 s: one auto-commit interval, one consumer-protocol heartbeat interval) covers a
    whole cycle of each. 0 starts every member at once: a lab set-up whose members share one phase.
    ``elide_heartbeats``: skip idle heartbeats whose effect is computed exactly (needed at scale).
    ``max_duration_s``: hard stop of simulated time.
    """

    topics: tuple[TopicConfig, ...] = attrs.field(converter=tuple)
    members: int = attrs.field(default=3, validator=_nonneg_int)

    @members.validator
    def _not_too_many(self, attribute, value):
        if value > MAX_MEMBERS:
            raise ConfigError(
                attribute.name, f"{value} is above the simulator's limit of {MAX_MEMBERS:,}"
            )

    consumer: ConsumerConfig = attrs.field(factory=ConsumerConfig)
    member_overrides: dict[str, dict] = attrs.field(factory=dict)
    group: GroupConfig = attrs.field(factory=GroupConfig)
    network: NetworkConfig = attrs.field(factory=NetworkConfig)
    assignor_cost: AssignorCost = attrs.field(factory=AssignorCost)
    start_spread_s: float = attrs.field(default=5.0, validator=_nonneg)
    elide_heartbeats: bool = attrs.field(default=True, validator=boolean)
    max_duration_s: float = attrs.field(default=7200.0, validator=_positive)
    # The group coordinator's release (sim.coordinator.behaviour) and the switches a scenario
    # sets apart from it (``broker_behaviour``: switch name -> bool).
    kafka_version: str = attrs.field(default=DEFAULT_KAFKA_VERSION, converter=str)
    broker_behaviour: dict[str, bool] = attrs.field(factory=dict)

    def __attrs_post_init__(self):
        check_kafka_version(self.kafka_version)
        check_behaviour_overrides(self.broker_behaviour)
        if not self.topics:
            raise ConfigError("topics", "needs at least one topic")
        names = [t.name for t in self.topics]
        if len(set(names)) != len(names):
            raise ConfigError("topics", f"topic names repeat: {names}")
        for name, fields in self.member_overrides.items():
            if not isinstance(fields, Mapping):
                raise ConfigError(
                    f"member_overrides.{name}",
                    f"expected a table of consumer fields, got {fields!r}",
                )
            try:
                cfg = self.consumer_for(name)
            except ConfigError as e:
                raise e.under(f"member_overrides.{name}") from None
            self.check_consumer(cfg, f"member_overrides.{name}")
        self.check_consumer(self.consumer, "consumer")

    def check_consumer(self, cfg: ConsumerConfig, where: str) -> None:
        """Checks of a consumer config that need the whole SimConfig (broker limits, topics)."""
        g = self.group
        if cfg.session_timeout_ms < g.min_session_timeout_ms:
            raise ConfigError(
                f"{where}.session_timeout_ms",
                f"{cfg.session_timeout_ms:g} is below group.min.session.timeout.ms ({g.min_session_timeout_ms:g})",
            )
        if cfg.session_timeout_ms > g.max_session_timeout_ms:
            raise ConfigError(
                f"{where}.session_timeout_ms",
                f"{cfg.session_timeout_ms:g} is above group.max.session.timeout.ms ({g.max_session_timeout_ms:g})",
            )
        if (
            cfg.group_remote_assignor is not None
            and cfg.group_remote_assignor not in g.consumer_assignors
        ):
            raise ConfigError(
                f"{where}.group_remote_assignor",
                f"{cfg.group_remote_assignor!r} is not one of group.consumer_assignors "
                f"({', '.join(g.consumer_assignors)})",
            )
        known = {t.name for t in self.topics}
        for t in cfg.topics:
            if t not in known:
                raise ConfigError(
                    f"{where}.topics",
                    f"{t!r} is not a topic of the scenario ({', '.join(sorted(known))})",
                )

    def consumer_for(self, name: str, extra: Mapping[str, Any] | None = None) -> ConsumerConfig:
        """The consumer config of member ``name`` (defaults, its override, then ``extra``)."""
        fields = dict(self.member_overrides.get(name, {}))
        if extra:
            fields.update(extra)
        if not fields:
            return self.consumer
        return _evolve(self.consumer, fields)

    def partitions_per_topic(self) -> dict[str, int]:
        return {t.name: t.partitions for t in self.topics}


# ---------------------------------------------------------------------------------------------
# Building from plain dicts (TOML)


def field_key(k: str) -> str:
    """A scenario key as a file may spell it (dots or dashes, as Kafka's config names) as the
    Python field name (underscores)."""
    return k.replace(".", "_").replace("-", "_")


def _fields_of(cls) -> dict[str, attrs.Attribute]:
    return {a.name: a for a in attrs.fields(cls)}


def _evolve(cfg, changes: Mapping[str, Any]):
    fields = _fields_of(type(cfg))
    clean = {}
    for k, v in changes.items():
        name = field_key(k)
        if name not in fields:
            raise ConfigError(k, f"unknown key; allowed: {', '.join(fields)}")
        clean[name] = v
    try:
        return attrs.evolve(cfg, **clean)
    except ConfigError:
        raise
    except (TypeError, ValueError) as e:
        raise ConfigError("", str(e)) from None


def build(cls, data: Mapping[str, Any] | Any, where: str):
    """An instance of the attrs class ``cls`` from a plain dict, errors prefixed with ``where``."""
    if isinstance(data, cls):
        return data
    if not isinstance(data, Mapping):
        raise ConfigError(where, f"expected a table, got {data!r}")
    fields = _fields_of(cls)
    kwargs = {}
    for k, v in data.items():
        name = field_key(k)
        if name not in fields:
            raise ConfigError(
                f"{where}.{k}" if where else k, f"unknown key; allowed: {', '.join(fields)}"
            )
        kwargs[name] = v
    try:
        return cls(**kwargs)
    except ConfigError as e:
        raise e.under(where) if where else e from None
    except TypeError as e:
        raise ConfigError(where, str(e)) from None


def _latency(data, where: str) -> Latency:
    if isinstance(data, int | float) and not isinstance(data, bool):
        return Latency(kind="constant", ms=float(data))
    return build(Latency, data, where)


def sim_config_from_dict(data: Mapping[str, Any], where: str = "") -> SimConfig:
    """A SimConfig from a dict shaped like the scenario TOML (see ``sim.scenario``)."""

    def at(name: str) -> str:
        return f"{where}.{name}" if where else name

    allowed = _fields_of(SimConfig)
    for k in data:
        if field_key(k) not in allowed:
            raise ConfigError(at(k), f"unknown key; allowed: {', '.join(allowed)}")
    d = {field_key(k): v for k, v in data.items()}
    kwargs: dict[str, Any] = {}
    if "topics" in d:
        topics = d["topics"]
        if not isinstance(topics, list | tuple):
            raise ConfigError(at("topics"), "expected a list of tables")
        kwargs["topics"] = tuple(
            build(TopicConfig, t, at(f"topics[{i}]")) for i, t in enumerate(topics)
        )
    else:
        raise ConfigError(at("topics"), "missing; give at least one [[topics]] table")
    for name in ("members", "start_spread_s", "elide_heartbeats", "max_duration_s"):
        if name in d:
            kwargs[name] = d[name]
    if "kafka_version" in d:
        kwargs["kafka_version"] = check_kafka_version(d["kafka_version"])
    if "broker_behaviour" in d:
        bb = d["broker_behaviour"]
        if not isinstance(bb, Mapping):
            raise ConfigError(at("broker_behaviour"), "expected a table of switch -> true/false")
        bb = {field_key(k): _bool_text(v) for k, v in bb.items()}
        check_behaviour_overrides(bb)
        kwargs["broker_behaviour"] = bb
    if "consumer" in d:
        kwargs["consumer"] = build(ConsumerConfig, d["consumer"], at("consumer"))
    if "group" in d:
        kwargs["group"] = build(GroupConfig, d["group"], at("group"))
    if "assignor_cost" in d:
        cost = d["assignor_cost"]
        if isinstance(cost, str):
            cost = {"mode": cost}
        kwargs["assignor_cost"] = build(AssignorCost, cost, at("assignor_cost"))
    if "network" in d:
        net = d["network"]
        if not isinstance(net, Mapping):
            raise ConfigError(at("network"), "expected a table")
        nallowed = _fields_of(NetworkConfig)
        nkw: dict[str, Any] = {}
        for k, v in net.items():
            name = field_key(k)
            if name not in nallowed:
                raise ConfigError(
                    at(f"network.{k}"), f"unknown key; allowed: {', '.join(nallowed)}"
                )
            if name == "latency":
                nkw[name] = _latency(v, at("network.latency"))
            elif name == "member_latency":
                if not isinstance(v, Mapping):
                    raise ConfigError(
                        at("network.member_latency"), "expected a table of member name -> latency"
                    )
                nkw[name] = {
                    m: _latency(x, at(f"network.member_latency.{m}")) for m, x in v.items()
                }
            else:
                nkw[name] = v
        kwargs["network"] = build(NetworkConfig, nkw, at("network"))
    if "member_overrides" in d:
        mo = d["member_overrides"]
        if not isinstance(mo, Mapping):
            raise ConfigError(
                at("member_overrides"), "expected a table of member name -> consumer fields"
            )
        for k, v in mo.items():
            if not isinstance(v, Mapping):
                raise ConfigError(
                    at(f"member_overrides.{k}"), f"expected a table of consumer fields, got {v!r}"
                )
        kwargs["member_overrides"] = {str(k): dict(v) for k, v in mo.items()}
    try:
        return SimConfig(**kwargs)
    except ConfigError as e:
        raise (e.under(where) if where else e) from None


def to_flat_dict(obj, prefix: str = "") -> dict[str, Any]:
    """Flatten an attrs config into ``{"consumer.session_timeout_ms": 45000, ...}`` (JSON types)."""
    out: dict[str, Any] = {}

    def walk(value, key):
        if attrs.has(type(value)):
            for a in attrs.fields(type(value)):
                walk(getattr(value, a.name), f"{key}.{a.name}" if key else a.name)
        elif isinstance(value, Mapping):
            if not value:
                out[key] = "{}"
            for k, v in value.items():
                walk(v, f"{key}.{k}")
        elif isinstance(value, tuple | list):
            if value and attrs.has(type(value[0])):
                for i, v in enumerate(value):
                    walk(v, f"{key}[{i}]")
            else:
                out[key] = ",".join(map(str, value))
        else:
            out[key] = value

    walk(obj, prefix)
    return out
