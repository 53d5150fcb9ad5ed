"""Protocol messages between members and the coordinator (Kafka's classic group protocol), the
simulator's own control notes, and the effects that the sans-I/O cores return.

Messages are small frozen classes; fields keep Kafka's names. Error codes are Kafka's ``Errors``
names as strings. Control notes are not protocol messages: they let the simulator skip idle
heartbeats without changing what either side observes (see ``sim.client.classic`` on elision).
"""

from __future__ import annotations

import attrs

from assignors import Assignment, Subscription, TopicPartition

# Kafka's Errors (the subset the classic group protocol uses).
NONE = "NONE"
MEMBER_ID_REQUIRED = "MEMBER_ID_REQUIRED"
UNKNOWN_MEMBER_ID = "UNKNOWN_MEMBER_ID"
ILLEGAL_GENERATION = "ILLEGAL_GENERATION"
REBALANCE_IN_PROGRESS = "REBALANCE_IN_PROGRESS"
INCONSISTENT_GROUP_PROTOCOL = "INCONSISTENT_GROUP_PROTOCOL"
FENCED_INSTANCE_ID = "FENCED_INSTANCE_ID"
COORDINATOR_NOT_AVAILABLE = "COORDINATOR_NOT_AVAILABLE"
# refusals around online migration between the protocols (sim.coordinator.consumer.classic_members, sim.coordinator.migration)
GROUP_MAX_SIZE_REACHED = "GROUP_MAX_SIZE_REACHED"
GROUP_ID_NOT_FOUND = "GROUP_ID_NOT_FOUND"
UNKNOWN_SERVER_ERROR = "UNKNOWN_SERVER_ERROR"

COORDINATOR = "coordinator"  # the coordinator's address on the simulated network


@attrs.frozen(slots=True)
class JoinGroupRequest:
    """JoinGroup v5+: ``protocols`` is the member's assignor list in preference order, each with
    the Subscription (ConsumerProtocol metadata) it sends for that assignor."""

    member_id: str
    group_instance_id: str | None
    protocols: tuple[tuple[str, Subscription], ...]
    session_timeout_s: float
    rebalance_timeout_s: float
    reason: str = ""


@attrs.frozen(slots=True)
class JoinGroupResponse:
    """``members`` is filled for the leader only (its input to the assignor).
    ``skip_assignment``: a static leader that rejoined a Stable group must not reassign (KIP-814)."""

    error: str
    generation: int = -1
    protocol: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[tuple[str, Subscription], ...] = ()
    skip_assignment: bool = False


@attrs.frozen(slots=True)
class SyncGroupRequest:
    """``protocol_name``: the protocol the member's JoinGroup response named (SyncGroup v5+;
    None: not sent, nothing to check)."""

    member_id: str
    generation: int
    group_instance_id: str | None
    assignments: tuple[tuple[str, Assignment], ...] = ()
    protocol_name: str | None = None


@attrs.frozen(slots=True)
class SyncGroupResponse:
    error: str
    assignment: Assignment | None = None


@attrs.frozen(slots=True)
class HeartbeatRequest:
    """``last`` (simulator only): the sender stopped right after sending it, so the coordinator
    must not let it elide further heartbeats."""

    member_id: str
    generation: int
    group_instance_id: str | None
    last: bool = False


@attrs.frozen(slots=True)
class HeartbeatResponse:
    """``quiet_epoch`` (simulator only): set when the coordinator lets the member elide its idle
    heartbeats from now on; the member accepts only if no Wake with a newer epoch reached it."""

    error: str
    quiet_epoch: int | None = None
    received_at: float = 0.0
    member_id: str = ""  # echoed from the request: a response to an older generation is ignored
    generation: int = -1


@attrs.frozen(slots=True)
class LeaveGroupRequest:
    member_id: str
    group_instance_id: str | None
    reason: str = ""


@attrs.frozen(slots=True)
class LeaveGroupResponse:
    error: str


@attrs.frozen(slots=True)
class OffsetCommitRequest:
    """``seq`` (simulator only): echoed in the response, so the member knows which commit it
    answers (Kafka matches them by correlation id)."""

    member_id: str
    generation: int
    group_instance_id: str | None
    partitions: int
    seq: int = 0
    # The partitions committed and the position committed for them, as the production time up to
    # which records were processed (the fluid model's offset; a member's partitions share it).
    offsets: tuple[TopicPartition, ...] = ()
    position_s: float = 0.0
    # Partitions committed further than ``position_s`` (see ``sim.client.classic``, position floors).
    ahead: tuple[tuple[TopicPartition, float], ...] = ()


@attrs.frozen(slots=True)
class OffsetCommitResponse:
    error: str
    seq: int = 0


@attrs.frozen(slots=True)
class OffsetFetchRequest:
    """What a new owner asks before it fetches records (ConsumerCoordinator.fetchCommittedOffsets)."""

    member_id: str
    partitions: tuple[TopicPartition, ...]
    seq: int = 0


@attrs.frozen(slots=True)
class OffsetFetchResponse:
    """``committed[i]``: the committed position of ``partitions[i]`` (production time), or None
    when the group has no committed offset for it."""

    error: str
    partitions: tuple[TopicPartition, ...]
    committed: tuple[float | None, ...]
    seq: int = 0


# ---- simulator control notes (zero delay, never dropped; not part of Kafka's protocol) ----


@attrs.frozen(slots=True)
class Wake:
    """Coordinator -> member: its heartbeats are no longer idle (the group left Stable).
    ``trigger_rank``: the kernel rank of the input that made the coordinator send it (ties at
    one instant are ordered by rank; -1 when unknown)."""

    epoch: int
    trigger_rank: int = -1


@attrs.frozen(slots=True)
class Unquiet:
    """Member -> coordinator: it heartbeats for real again (or stopped); ``last_arrival`` is when
    its last elided heartbeat reached the coordinator."""

    member_id: str
    last_arrival: float | None
    hold: bool | None = None  # True: the member stopped (grant nothing more); False: it runs again


@attrs.frozen(slots=True)
class Quiet:
    """Member -> coordinator (consumer group protocol): it took the ``quiet_epoch`` grant of a
    heartbeat response and elides its idle heartbeats from now on. The coordinator counts the
    member as quiet only from this note, so both sides always agree on it."""

    member_id: str
    quiet_epoch: int


@attrs.frozen(slots=True)
class ElidedCommits:
    """Member -> coordinator: the last auto-commit it made while its heartbeats were elided (a
    quiet member computes its commits instead of sending them; they all succeed, since nothing
    happens to the group meanwhile). Only the last one matters: it supersedes the others."""

    member_id: str
    generation: int
    offsets: tuple[TopicPartition, ...]
    position_s: float
    ahead: tuple[tuple[TopicPartition, float], ...] = ()


# ---- effects returned by the cores ----
# Plain tuples, for speed at scale:
#   ("send", to, message)                      put a message on the network
#   ("control", to, note)                      deliver a control note now
#   ("timer", key, at)                         (re)arm timer ``key`` at time ``at``; None cancels
#   ("event", kind, member, generation, detail)  an ``events`` row
#   ("open", kind, member, topic, partition)   start an interval
#   ("close", kind, member, topic, partition)  end it
#   ("violation", text)                        a broken invariant
#   ("settled_changed",)                       nothing recorded, but the run should look again
#                                              at whether it settled


# ---- the consumer group protocol (KIP-848): one RPC, ConsumerGroupHeartbeat ----

# Kafka's Errors used by ConsumerGroupHeartbeat and by offset commits of consumer-protocol members.
FENCED_MEMBER_EPOCH = "FENCED_MEMBER_EPOCH"
UNRELEASED_INSTANCE_ID = "UNRELEASED_INSTANCE_ID"
STALE_MEMBER_EPOCH = "STALE_MEMBER_EPOCH"

# ConsumerGroupHeartbeatRequest's member epochs with a meaning of their own.
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


@attrs.frozen(slots=True)
class ConsumerGroupHeartbeatRequest:
    """ConsumerGroupHeartbeat (KIP-848). ``member_epoch`` 0 joins, -1 leaves, -2 a static member
    leaves for a while. Fields the client sends only when they changed (subscribed topics,
    rebalance timeout, owned partitions) are None when not sent, as in Kafka.
    ``member_id`` is "" on a first join: the coordinator gives the member its id."""

    member_id: str
    member_epoch: int
    group_instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_s: float | None = None
    subscribed_topics: tuple[str, ...] | None = None
    owned_partitions: frozenset | None = None
    server_assignor: str | None = None  # group.remote.assignor
    # the client's correlation id (Kafka's request header): a response answers the request with
    # the same one; (incarnation start time, n), so a restarted client never takes a response to
    # a request its crashed predecessor sent
    correlation: tuple = ()


@attrs.frozen(slots=True)
class ConsumerGroupHeartbeatResponse:
    """``assignment`` is None when it did not change since the member was last told (Kafka sends
    it on a full request and whenever the member's assigned partitions change)."""

    error: str
    member_id: str = ""
    member_epoch: int = -1
    heartbeat_interval_s: float = 0.0
    assignment: frozenset | None = None
    # simulator only: the member may elide its idle heartbeats (see sim.client.consumer), and
    # when the coordinator counted this heartbeat (the member's session runs from there)
    quiet_epoch: int | None = None
    received_at: float = 0.0
    correlation: tuple = ()  # the request's
