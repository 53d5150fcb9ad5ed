"""The consumer clients' member states, one enum per group protocol, each state with the states it
may be entered from (one convention on both sides of the wire, as Kafka's
``ClassicGroupState.validPreviousStates`` and the client's ``MemberState.previousValidStates``).
A client enters a state only through ``ConsumerClient._transition``, which checks it on every run
(``IllegalTransition`` is a simulator bug). A process that stops (crash, close, fatal error) is
not a transition: the client resets its state, and a restart is a new core.
"""

from __future__ import annotations

from enum import StrEnum


class ClassicMemberState(StrEnum):
    """A classic client's state (``AbstractCoordinator.MemberState``)."""

    UNJOINED = "UNJOINED"
    PREPARING_REBALANCE = "PREPARING_REBALANCE"
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"
    STABLE = "STABLE"

    def valid_previous_states(self) -> frozenset[ClassicMemberState]:
        """The states a client may be in to enter this one."""
        return _CLASSIC_PREVIOUS[self]


# Kafka's classic client does not check its transitions; these are the ones AbstractCoordinator
# makes: initiateJoinGroup (PREPARING_REBALANCE, again after MEMBER_ID_REQUIRED), the JoinGroup
# response (COMPLETING_REBALANCE), the SyncGroup response (STABLE, and onJoinComplete keeps it),
# resetStateAndGeneration and a failed JoinGroup / SyncGroup (UNJOINED, from any state).
_CLASSIC_PREVIOUS: dict[ClassicMemberState, frozenset[ClassicMemberState]] = {
    ClassicMemberState.UNJOINED: frozenset(ClassicMemberState),
    ClassicMemberState.PREPARING_REBALANCE: frozenset(
        {
            ClassicMemberState.UNJOINED,
            ClassicMemberState.PREPARING_REBALANCE,
            ClassicMemberState.STABLE,
        }
    ),
    ClassicMemberState.COMPLETING_REBALANCE: frozenset({ClassicMemberState.PREPARING_REBALANCE}),
    ClassicMemberState.STABLE: frozenset(
        {ClassicMemberState.COMPLETING_REBALANCE, ClassicMemberState.STABLE}
    ),
}


class ConsumerMemberState(StrEnum):
    """A consumer-protocol client's state (the clients' ``consumer.internals.MemberState``)."""

    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    RECONCILING = "RECONCILING"
    ACKNOWLEDGING = "ACKNOWLEDGING"
    STABLE = "STABLE"
    FENCED = "FENCED"
    PREPARE_LEAVING = "PREPARE_LEAVING"
    LEAVING = "LEAVING"
    STALE = "STALE"
    FATAL = "FATAL"

    def valid_previous_states(self) -> frozenset[ConsumerMemberState]:
        """The states a client may be in to enter this one."""
        return _CONSUMER_PREVIOUS[self]


# The states of a client that is a member of the group.
IN_GROUP = frozenset(
    {
        ConsumerMemberState.JOINING,
        ConsumerMemberState.RECONCILING,
        ConsumerMemberState.ACKNOWLEDGING,
        ConsumerMemberState.STABLE,
    }
)

# MemberState.previousValidStates, except where the model is coarser than Kafka's client: the
# leave heartbeat is sent without a LEAVING state of its own (Kafka: PREPARE_LEAVING -> LEAVING ->
# UNSUBSCRIBED on close, and LEAVING -> STALE on a poll timeout), so STALE is entered from the
# states in the group; and FATAL is not modelled as a state (a fatal error stops the client: its
# ``failed`` flag), so no state leads to it.
_CONSUMER_PREVIOUS: dict[ConsumerMemberState, frozenset[ConsumerMemberState]] = {
    ConsumerMemberState.STABLE: frozenset(
        {
            ConsumerMemberState.JOINING,
            ConsumerMemberState.ACKNOWLEDGING,
            ConsumerMemberState.RECONCILING,
        }
    ),
    ConsumerMemberState.RECONCILING: frozenset(
        {
            ConsumerMemberState.STABLE,
            ConsumerMemberState.JOINING,
            ConsumerMemberState.ACKNOWLEDGING,
            ConsumerMemberState.RECONCILING,
        }
    ),
    ConsumerMemberState.ACKNOWLEDGING: frozenset({ConsumerMemberState.RECONCILING}),
    ConsumerMemberState.FENCED: frozenset(
        {
            ConsumerMemberState.JOINING,
            ConsumerMemberState.STABLE,
            ConsumerMemberState.RECONCILING,
            ConsumerMemberState.ACKNOWLEDGING,
            ConsumerMemberState.PREPARE_LEAVING,
            ConsumerMemberState.LEAVING,
        }
    ),
    ConsumerMemberState.JOINING: frozenset(
        {
            ConsumerMemberState.FENCED,
            ConsumerMemberState.UNSUBSCRIBED,
            ConsumerMemberState.STALE,
        }
    ),
    ConsumerMemberState.PREPARE_LEAVING: frozenset(
        {
            ConsumerMemberState.JOINING,
            ConsumerMemberState.STABLE,
            ConsumerMemberState.RECONCILING,
            ConsumerMemberState.ACKNOWLEDGING,
            ConsumerMemberState.UNSUBSCRIBED,
        }
    ),
    ConsumerMemberState.LEAVING: frozenset({ConsumerMemberState.PREPARE_LEAVING}),
    ConsumerMemberState.UNSUBSCRIBED: frozenset(
        {
            ConsumerMemberState.PREPARE_LEAVING,
            ConsumerMemberState.LEAVING,
            ConsumerMemberState.FENCED,
        }
    ),
    ConsumerMemberState.STALE: frozenset({ConsumerMemberState.LEAVING, *IN_GROUP}),
    ConsumerMemberState.FATAL: frozenset(),
}

# Either protocol's member state: what ``ConsumerClient.state`` holds (named apart from the
# coordinator's view of a member, ``sim.coordinator.consumer.states.MemberState``).
ClientState = ClassicMemberState | ConsumerMemberState
