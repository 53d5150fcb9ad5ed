"""What the consumer group's coordinator knows of one member (Kafka's ``ConsumerGroupMember``),
and of a member that speaks the classic protocol inside it (``ClassicMemberMeta``)."""

from __future__ import annotations

import attrs

from assignors import Subscription
from sim.coordinator.consumer.states import MemberState
from sim.coordinator.consumer.target import MemberSpec

_EMPTY: frozenset = frozenset()


@attrs.define(slots=True, eq=False)
class ClassicMemberMeta:
    """ConsumerGroupMemberMetadataValue.ClassicMemberMetadata: what a classic member's JoinGroup
    said beyond its subscription (``sim.coordinator.consumer.classic_members``)."""

    session_timeout_s: float
    protocols: tuple[tuple[str, Subscription], ...]

    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.protocols)


@attrs.define(slots=True, eq=False)
class ConsumerGroupMember:
    """What the coordinator knows of one member (Kafka's ConsumerGroupMember)."""

    member_id: str
    client: str
    instance_id: str | None
    rack: str | None
    topics: tuple[str, ...]
    rebalance_timeout_s: float
    epoch: int = 0
    previous_epoch: int = -1  # ConsumerGroupMember.Builder's default
    state: MemberState = MemberState.STABLE
    assigned: frozenset = _EMPTY
    pending_revocation: frozenset = _EMPTY
    last_heartbeat: float = 0.0
    rebalance_deadline_epoch: int | None = None
    server_assignor: str | None = None
    # a member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) inside
    # this group: its session timeout and protocols (ConsumerGroupMember.classicMemberMetadata,
    # ``sim.coordinator.consumer.classic_members``); None for a consumer-protocol member
    classic: ClassicMemberMeta | None = None
    # KIP-1251: the member epoch at which each assigned partition was assigned to it (kept only
    # when the coordinator validates commits by assignment epochs)
    assigned_at: dict = attrs.field(factory=dict)
    _spec: MemberSpec | None = None

    def reconciled_to(self, target_epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.epoch == target_epoch

    def drop_spec(self) -> None:
        """Its topics, rack or instance id changed: the assignor's view of it is made anew."""
        self._spec = None

    def spec(self) -> MemberSpec:
        """What the assignor learns of this member (kept until its subscription or rack changes,
        which drops it: the coordinator hands it over at every group epoch)."""
        s = self._spec
        if s is None:
            s = self._spec = MemberSpec(self.topics, self.rack, self.instance_id)
        return s
