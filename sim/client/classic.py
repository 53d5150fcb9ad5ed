"""One consumer's group membership as a sans-I/O core (Kafka's ``ConsumerCoordinator`` on top of
``AbstractCoordinator``, with its heartbeat thread and the poll loop's rebalance listener).

Theory of operation. The member reacts to responses, timers and control notes and returns
effects (``sim.wire.messages``). It never reads the clock: ``now`` is passed in. It is one of the two
subclasses of ``sim.client.base.ConsumerClient`` (the other: ``sim.client.consumer.ConsumerMember``).

- Protocol: the highest rebalance protocol that *every* configured assignor supports
  (COOPERATIVE > EAGER), so the default ``[range, cooperative-sticky]`` runs EAGER.
- EAGER (onJoinPrepare): commit, revoke every owned partition, then JoinGroup.
- COOPERATIVE: JoinGroup carries the owned partitions; after SyncGroup the member revokes only
  owned-minus-assigned and, if it revoked anything, rejoins at once (KIP-429).
- Generation reset (UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION from a heartbeat, commit, join or
  sync): the partitions are *lost* (onPartitionsLost, no commit) at the next join.
- Rebalance listener callbacks run in the poll thread: while one runs the member processes
  nothing (a ``stalled`` interval). If it runs past max.poll.interval.ms the heartbeat thread
  leaves the group (LeaveGroup for dynamic members only, KIP-345) and the member rejoins later.
- Offset commits fail locally with RebalanceInProgress while the member is rebalancing, and
  remotely with REBALANCE_IN_PROGRESS / UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION.
- Pause (GC, debugger): the actor withholds every input until resume; the member then carries
  on with stale state: the KIP-341 zombie, which keeps processing until a heartbeat or commit
  tells it that it was removed, and until its next poll() after that.

The poll loop, positions, offsets, manual commits, callbacks and pauses are the consumer
client's, shared with the consumer protocol (``sim.client.base.ConsumerClient``, which describes their
model). What the classic protocol adds: the heartbeat thread and the network callbacks flag
things (rejoin needed, generation reset, SyncGroup done) for the poll thread's next poll(): EAGER
revocation and JoinGroup (onJoinPrepare), onPartitionsLost after fencing, and onJoinComplete
after SyncGroup (assignment, COOPERATIVE revocation and the follow-up JoinGroup). EAGER
onJoinPrepare marks every partition pending revocation (nothing more is processed) and waits for
its offset commit before onPartitionsRevoked and JoinGroup (KAFKA-13310). Commits are refused on
the client while the member is rebalancing (RebalanceInProgressException) or out of the group
(CommitFailedException), as ConsumerCoordinator.sendOffsetCommitRequest refuses them.

Member states: ``ClassicMemberState`` (``sim.client.states``: AbstractCoordinator.MemberState),
checked on every change.

Heartbeat elision. In Stable, a heartbeat answered NONE changes nothing, so once the
coordinator grants it (``HeartbeatResponse.quiet_epoch``) the member stops sending them and
remembers its heartbeat phase. When it must heartbeat for real again (a ``Wake`` from the
coordinator, or it stops: crash, pause, network fault) it reconstructs its last heartbeat from
the phase, sends the one that would still be in flight, and tells the coordinator when the last
one arrived (``Unquiet``). Latencies of elided heartbeats are drawn only when needed.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from assignors import (
    COOPERATIVE,
    EAGER,
    Assignment,
    Subscription,
    TopicPartition,
    assignment_topics,
    get_assignor,
    kafka_time,
)
from assignors.userdata import encode_sticky_user_data
from sim.client.base import CLOSE_TIMEOUT_S, OFFSET_TIMERS, ConsumerClient, Effect
from sim.client.cooperative import cooperative_conflicts
from sim.client.handoffs import Handoffs
from sim.client.states import ClassicMemberState
from sim.config import AssignorCost, ConsumerConfig
from sim.kernel.rng import LazyGenerator
from sim.observe.events import AssignmentComputed, Revoke
from sim.wire import messages as m

# AbstractCoordinator's JoinGroup request timeout: rebalance timeout plus this margin.
JOIN_TIMEOUT_MARGIN_S = 5.0


def rebalance_protocol(assignor_names) -> str:
    """ConsumerCoordinator: the highest protocol supported by every configured assignor."""
    return _rebalance_protocol(tuple(assignor_names))


@functools.cache
def _rebalance_protocol(assignor_names: tuple[str, ...]) -> str:
    common = None
    for name in assignor_names:
        protos = set(get_assignor(name).supported_protocols)
        common = protos if common is None else common & protos
    if not common:
        raise ValueError(f"assignors {list(assignor_names)} share no rebalance protocol")
    return COOPERATIVE if COOPERATIVE in common else EAGER


_ASSIGNOR_CLASSES: dict[str, type] = {}


def new_assignor(name: str):
    """``get_assignor(name)``: a new instance (each client keeps its own assignor state), without
    looking the class up again (every member of a 10,000-member group makes its own)."""
    cls = _ASSIGNOR_CLASSES.get(name)
    if cls is None:
        assignor = get_assignor(name)
        _ASSIGNOR_CLASSES[name] = type(assignor)
        return assignor
    return cls()


class Member(ConsumerClient):
    """A consumer client in a classic group (``ConsumerCoordinator`` on ``AbstractCoordinator``).
    See the module docstring; what it shares with the consumer protocol's member is
    ``sim.client.base.ConsumerClient``'s."""

    INITIAL_STATE = ClassicMemberState.UNJOINED
    generation: int = -1  # a plain attribute here (ConsumerClient.generation)

    def __init__(
        self,
        name: str,
        config: ConsumerConfig,
        topics: tuple[str, ...],
        metadata: Callable[[], tuple[int, dict[str, int]]],
        sample_latency: Callable[[], float],
        assignor_cost: AssignorCost,
        elide_heartbeats: bool = True,
        *,
        rates: Mapping[str, float] | None = None,
        handoffs: Handoffs | None = None,
        poll_rng: np.random.Generator | LazyGenerator | None = None,
        rank: int = 0,
    ):
        super().__init__(
            name,
            config,
            topics,
            sample_latency,
            elide_heartbeats,
            rates=rates,
            handoffs=handoffs,
            poll_rng=poll_rng,
            rank=rank,
        )
        self._topic_set = (self.topics, frozenset(self.topics))  # (topics, as a set) cache
        self._metadata = metadata  # () -> (version, partitions_per_topic)
        self.assignor_cost = assignor_cost
        self.assignors = {n: new_assignor(n) for n in config.partition_assignment_strategy}
        self.protocol = rebalance_protocol(config.partition_assignment_strategy)

        self.generation = -1
        self.group_protocol: str | None = None
        self.is_leader = False
        self.last_assignment: Sequence[TopicPartition] | None = None
        self.assignment_generation = -1
        self.max_generation_seen = -1
        self.rejoin_needed = False
        self.join_reason = ""
        self.metadata_version_assigned = -1
        # heartbeat thread
        self.hb_anchor = 0.0
        self.hb_n = 1
        self.quiet_phase = 0.0
        self.sync_in_flight = False
        self.pending_assignment: tuple[int, Assignment] | None = None  # SyncGroup done, not polled
        self.prepare_commit: int | None = None  # onJoinPrepare waits for this commit
        self.commit_next: float | None = None  # next auto-commit when heartbeats went quiet

    # ------------------------------------------------------------------ the hooks of ConsumerClient

    def _is_fenced(self) -> bool:
        return self.generation < 0

    def _commit_request(self, now: float) -> m.OffsetCommitRequest:
        """An OffsetCommit of every owned partition at the member's current position."""
        self._settle_commits_before(now)
        self.commit_seq += 1
        owned = self._owned_tuple()
        self.commit_sent[self.commit_seq] = (self.generation, self.member_id)
        position = self._position_s(now)
        return m.OffsetCommitRequest(
            self.member_id,
            self.generation,
            self.instance_id,
            len(owned),
            self.commit_seq,
            owned,
            position,
            self._ahead(owned, position),
        )

    def _send_commit(self, now: float, offsets: tuple, position_s: float) -> int:
        self._settle_commits_before(now)
        self.commit_seq += 1
        self.commit_sent[self.commit_seq] = (self.generation, self.member_id)
        self._send(
            m.OffsetCommitRequest(
                self.member_id,
                self.generation,
                self.instance_id,
                len(offsets),
                self.commit_seq,
                offsets,
                position_s,
                self._ahead(offsets, position_s),
            )
        )
        return self.commit_seq

    def _commit_refused(self) -> str | None:
        """ConsumerCoordinator.sendOffsetCommitRequest: only a member Stable in a generation sends
        a commit; otherwise the call fails at once, without a request."""
        if self.state == ClassicMemberState.STABLE and self.generation >= 0:
            return None
        if self.state in (
            ClassicMemberState.PREPARING_REBALANCE,
            ClassicMemberState.COMPLETING_REBALANCE,
        ):
            return "RebalanceInProgressException (client side)"
        return "CommitFailedException (client side)"

    def _commit_error(self, now: float, sent: tuple[int, str] | None, error: str) -> None:
        """ConsumerCoordinator.OffsetCommitResponseHandler, for a commit that is not onJoinPrepare's."""
        if error == m.REBALANCE_IN_PROGRESS:
            # a rejoin is requested, the generation kept (RebalanceInProgressException)
            if self.state == ClassicMemberState.STABLE:
                self._request_rejoin("offset commit failed since group is already rebalancing")
                self._wake_poll(now)
        elif error in (m.UNKNOWN_MEMBER_ID, m.ILLEGAL_GENERATION):
            unchanged = sent == (self.generation, self.member_id)
            if not unchanged and self.state == ClassicMemberState.PREPARING_REBALANCE:
                return  # already in a newer rebalance: RebalanceInProgressException, nothing reset
            if self.generation >= 0 and self.prepare_commit is None:
                # Kafka resets even a newer generation here (a late answer to an old commit).
                self._reset_generation(f"commit failed: {error}", error)
                self._wake_poll(now)

    @property
    def settled(self) -> bool:
        """Stable, nothing pending, processing (used for the episode end). A commitSync() blocks
        processing for a round trip after every batch; only one that had to be retried counts."""
        return (
            self.alive
            and self.state == ClassicMemberState.STABLE
            and not self.rejoin_needed
            and not self.busy
            and not self.closing
            and self.paused_at is None
            and self.pending_assignment is None
            and not self.fetches
            and not self.first_pending
            and not self._commit_stuck()
        )

    # ------------------------------------------------------------------ lifecycle (from the director)

    def start(self, now: float) -> list[Effect]:
        self.alive = True
        self.started_at = now
        self._event(
            "start",
            f"assignors={','.join(self.assignors)} protocol={self.protocol}"
            + (f" group.instance.id={self.instance_id}" if self.instance_id else ""),
        )
        self._request_rejoin("start")
        self._poll(now)
        return self._drain()

    def crash(self, now: float) -> list[Effect]:
        """The process dies: no LeaveGroup, no callbacks; partitions are simply no longer processed."""
        if not self.alive:
            return []
        self._stop_heartbeats(now)
        self._event("crash")
        self._release_cause = "crash"
        self._die(now)
        return self._drain()

    def close(self, now: float) -> list[Effect]:
        """KafkaConsumer.close: revoke (commit) what it owns, then LeaveGroup if dynamic. The
        application calls it from the poll thread, so never in the middle of a callback."""
        self._close(now)
        return self._drain()

    def _close(self, now: float) -> None:
        if not self.alive or self.closing:
            return
        if self.busy:
            self.close_requested = True
            return
        self.closing = True
        self._event("close")
        # auto-commits happen inside poll(), and close() polls no more: the last ones made while
        # quiet reach the coordinator now, and none follows the close commit
        self._settle_commits_before(now)
        self.commit_next = None
        self._timer(("commit",), None)
        if self.generation >= 0 and self.owned:
            cost = self.config.revoke_cost_ms / 1000.0 * len(self.owned)
            if self.config.enable_auto_commit:
                # ConsumerCoordinator.close: maybeAutoCommitOffsetsSync waits for the answer (up
                # to the close timeout) before onLeavePrepare's callback and the LeaveGroup
                self._stall_open()  # the partitions wait, still owned, for the commit's answer

                def after_commit(t: float) -> None:
                    self._revoke_callback(t, cost, self._finish_close)
                    if self.stalls:
                        self._stall_close()

                self._commit_sync(
                    now, after_commit, label="commitSync on close", timeout_s=CLOSE_TIMEOUT_S
                )
            else:
                self._revoke_callback(now, cost, self._finish_close)
        else:
            self._finish_close(now)

    def _finish_close(self, now: float) -> None:
        self._stop_heartbeats(now)
        if (
            self.instance_id is None
            and self.member_id
            and self.state != ClassicMemberState.UNJOINED
        ) or (
            self.instance_id is None
            and self.member_id
            and self.state == ClassicMemberState.UNJOINED
            and self.generation >= 0
        ):
            self._send(m.LeaveGroupRequest(self.member_id, None, "the consumer is being closed"))
            self._event("leave_group", f"member_id={self.member_id}")
        self._die(now)

    def _die(self, now: float) -> None:
        self._set_owned(now, remove=self._owned_tuple())
        self.pending_assignment = None
        self.prepare_commit = None
        self._end_sync_commit()
        self.commit_sent.clear()
        self.fetches.clear()
        self.first_pending.clear()
        if self.busy:
            self.busy = False
            self._stall_close()
        if self.paused_at is not None:
            self.paused_at = None
            self.out.append(("close", "paused", self.name, None, None))
        if self.stalls:  # a member that is gone stalls nothing (a close waiting for its commit)
            self.stalls = 1
            self._stall_close()
        for key in list(self.timers):
            self._timer(key, None)
        self.alive = False
        self.hb_enabled = False

    def pause(self, now: float) -> list[Effect]:
        """GC or debugger: from now on nothing runs (the actor holds inputs back)."""
        if not self.alive or self.paused_at is not None:
            return []
        self._stop_heartbeats(now)
        self._enter_pause(now)
        return self._drain()

    def resume(self, now: float) -> list[Effect]:
        """The process runs again with its stale state; held inputs are delivered next."""
        if self.paused_at is None:
            return []
        paused_for = self._leave_pause(now)
        if self.elide and self.member_id:
            self.out.append(("control", m.COORDINATOR, m.Unquiet(self.member_id, None, hold=False)))
        if (
            self.hb_enabled
            and paused_for >= self.max_poll_interval_s
            and self.state != ClassicMemberState.UNJOINED
        ):
            self._poll_timeout(now)
        elif self.hb_enabled:
            self._timer(("hb",), now)  # overdue: the heartbeat thread sends at once
        if self.state == ClassicMemberState.STABLE:
            self._arm_commit(now)
        self._wake_poll(now)
        return self._drain()

    def change_assignors(self, names) -> None:
        """A restart with another partition.assignment.strategy (only while not alive)."""
        self.assignors = {n: new_assignor(n) for n in names}
        self.protocol = rebalance_protocol(names)

    # ------------------------------------------------------------------ poll loop

    def _request_rejoin(self, reason: str) -> None:
        if not self.rejoin_needed:
            self.rejoin_needed = True
            self.join_reason = reason

    def _poll(self, now: float) -> None:
        """What KafkaConsumer.poll does when the poll thread gets to it (ConsumerCoordinator.poll):
        complete a finished SyncGroup (onJoinComplete), then (re)join if needed."""
        self._timer(("poll",), None)
        if not self.processing:
            return
        if self.close_requested:
            self.close_requested = False
            self._close(now)
            return
        if self.pending_assignment is not None:
            generation, assignment = self.pending_assignment
            self.pending_assignment = None
            if generation == self.generation and self.state == ClassicMemberState.STABLE:
                self._on_join_complete(now, assignment)
                return  # it polls again itself
            # joinGroupIfNeeded: the heartbeat thread reset the generation before the callback ran
            self._event("sync_discarded", f"generation {generation} reset before onJoinComplete")
            self._request_rejoin("generation reset before the rebalance callback")
        if not self.rejoin_needed or self.prepare_commit is not None:
            return  # nothing to do, or onJoinPrepare still waits for its commit
        if self.state in (ClassicMemberState.UNJOINED, ClassicMemberState.STABLE):
            self._join_prepare(now)

    def _reset_generation(self, reason: str, error: str | None = None) -> None:
        """AbstractCoordinator.resetStateOnResponseError: forget the generation, and the member id
        too unless ``error`` is ILLEGAL_GENERATION (the member id may still be valid, and a rejoin
        with it does not wait for the old id to time out)."""
        self._event("generation_reset", reason)
        if error != m.ILLEGAL_GENERATION:
            self.member_id = ""
        self.generation = -1
        self._transition(ClassicMemberState.UNJOINED)
        self.hb_enabled = False
        self.is_leader = False
        self._timer(("hb",), None)
        self._timer(("commit",), None)
        self._request_rejoin(reason)

    def _join_prepare(self, now: float) -> None:
        """ConsumerCoordinator.onJoinPrepare, then JoinGroup."""
        prepare_commit = (
            self.owned and self.generation >= 0 and self.state == ClassicMemberState.STABLE
        )
        if not self.config.enable_auto_commit and self.protocol != EAGER:
            # enable.auto.commit=false: onJoinPrepare commits nothing; the listener's commitSync
            # runs when partitions are revoked after the SyncGroup.
            prepare_commit = False
        # (EAGER with manual commits: the listener's commitSync in onPartitionsRevoked, modelled
        # by the same wait as the auto-commit's, before the partitions are revoked.)
        self._event("join_prepare", f"{self.join_reason} owned={len(self.owned)}")
        self._timer(("commit",), None)
        if prepare_commit and self.protocol != EAGER:
            # onJoinPrepare commits under every protocol and waits for the commit before it
            # rejoins; only EAGER marks partitions pending revocation, so a COOPERATIVE member
            # keeps processing meanwhile.
            req = self._commit_request(now)
            self.prepare_commit = req.seq
            self._send(req)
            self._timer(
                ("prepare_commit",),
                now + min(self.request_timeout_s, self.max_poll_interval_s),
            )
            return
        if prepare_commit:
            # KAFKA-13310: mark every partition pending revocation (no more records), commit, and
            # wait for the commit (bounded by the rebalance timeout) before revoking. The member
            # is still Stable meanwhile, so its heartbeat thread keeps going.
            req = self._commit_request(now)
            self.prepare_commit = req.seq
            self._send(req)
            self.busy = True
            self._after_busy = None
            self._stall_open()
            self._timer(
                ("prepare_commit",),
                now + min(self.request_timeout_s, self.max_poll_interval_s),
            )
            return
        self._enter_preparing()
        self._join_prepare_revoke(now)

    def _enter_preparing(self) -> None:
        """initiateJoinGroup: PREPARING_REBALANCE, where the heartbeat thread stays disabled."""
        self._transition(
            ClassicMemberState.PREPARING_REBALANCE
        )  # joining; no second onJoinPrepare meanwhile
        self.hb_enabled = False
        self._timer(("hb",), None)
        self._timer(("hb_timeout",), None)

    def _prepare_commit_done(self, now: float, error: str | None) -> None:
        """The onJoinPrepare commit returned (or timed out): revoke, or lose if fenced meanwhile."""
        self.prepare_commit = None
        self._timer(("prepare_commit",), None)
        if error is not None:
            self._event("commit_failed", f"onJoinPrepare: {error}")
            if error in (m.UNKNOWN_MEMBER_ID, m.ILLEGAL_GENERATION) and self.generation >= 0:
                self._reset_generation(f"commit failed: {error}", error)
        if self.busy:  # EAGER: stalled while its partitions were pending revocation
            self._advance(now)
            self.busy = False
            self._stall_close()
        self._enter_preparing()
        self._join_prepare_revoke(now)

    def _join_prepare_revoke(self, now: float) -> None:
        if self.owned and self.generation < 0:
            lost = self._owned_tuple()
            self._event("partitions_lost", f"count={len(lost)}")
            self._set_owned(now, remove=lost)
            self._send_join(now)
        elif self.owned and self.protocol == EAGER:
            revoked = self._owned_tuple()
            self._event("revoke", Revoke(len(revoked), "eager").encode())
            cost = self.config.revoke_cost_ms / 1000.0 * len(revoked)

            def done(t, revoked=revoked):
                self._set_owned(t, remove=revoked)
                self._send_join(t)

            self._run_callback(now, "revoke", cost, done)
        else:
            _version, meta = self._metadata()
            gone = sorted(
                tp for tp in self.owned if tp.topic not in meta or tp.partition >= meta[tp.topic]
            )
            if gone:
                self._event("revoke", Revoke(len(gone), "topic deleted").encode())
                self._set_owned(now, remove=gone)
            self._send_join(now)

    def _subscriptions(self) -> tuple[tuple[str, Subscription], ...]:
        owned = self._owned_tuple()
        # A client old enough to write V0 sticky user data (before KIP-341) also predates
        # ConsumerProtocolSubscription v2, so its subscriptions carry no generation field (-1).
        old_client = self.config.sticky_user_data_version == 0
        out = []
        for name, a in self.assignors.items():
            if name == "sticky" and old_client:
                ud = (
                    None
                    if self.last_assignment is None
                    else encode_sticky_user_data(self.last_assignment, None)
                )
            else:
                ud = a.subscription_user_data(self.last_assignment, self.assignment_generation)
            out.append(
                (
                    name,
                    Subscription(
                        self.topics,
                        ud,
                        owned,
                        self.instance_id,
                        -1 if old_client else self.generation,
                        self.config.rack,
                    ),
                )
            )
        return tuple(out)

    def _send_join(self, now: float) -> None:
        self._transition(ClassicMemberState.PREPARING_REBALANCE)
        self.rejoin_needed = False
        req = m.JoinGroupRequest(
            self.member_id,
            self.instance_id,
            self._subscriptions(),
            self.session_timeout_s,
            self.max_poll_interval_s,
            self.join_reason,
        )
        self._send(req)
        self._event("join_sent", self.join_reason)
        self._timer(
            ("join_timeout",),
            now
            + max(
                self.request_timeout_s,
                self.max_poll_interval_s + JOIN_TIMEOUT_MARGIN_S,
            ),
        )

    def _poll_timeout(self, now: float) -> None:
        """Heartbeat thread: the poll thread stalled past max.poll.interval.ms (maybeLeaveGroup)."""
        self._event("poll_timeout", f"max.poll.interval.ms={self.config.max_poll_interval_ms:g}")
        if self.instance_id is None and self.member_id:
            self._send(
                m.LeaveGroupRequest(self.member_id, None, "consumer poll timeout has expired")
            )
        self._stop_heartbeats(now)
        self._reset_generation("poll timeout")

    # ------------------------------------------------------------------ inputs

    def on_timer(self, now: float, key: tuple, at: float) -> list[Effect]:
        if self.timers.get(key) != at or not self.alive:
            return []
        del self.timers[key]
        kind = key[0]
        if kind == "hb":
            self._send_heartbeat(now)
        elif kind == "hb_timeout":
            # Heartbeat.failHeartbeat: retry after the backoff
            self.hb_in_flight = 0
            self._event("heartbeat_failed", "request timed out")
            self._timer(("hb",), now + self.retry_backoff_s)
        elif kind == "callback":
            self._callback_done(now)
        elif kind == "poll_timeout":
            if self.busy:
                self._poll_timeout(now)
        elif kind == "commit":
            self._commit(now, "auto-commit")
            self._arm_commit(now)
        elif kind == "join_timeout":
            if self.state == ClassicMemberState.PREPARING_REBALANCE:
                self._event("join_failed", "request timed out")
                self._transition(ClassicMemberState.UNJOINED)
                self._request_rejoin("JoinGroup timed out")
                self._wake_poll(now)
        elif kind == "sync_timeout":
            if self.state == ClassicMemberState.COMPLETING_REBALANCE and self.sync_in_flight:
                self.sync_in_flight = False
                self._event("sync_failed", "request timed out")
                self._transition(ClassicMemberState.UNJOINED)
                self._request_rejoin("SyncGroup timed out")
                self._wake_poll(now)
        elif kind == "metadata":
            version, _ = self._metadata()
            if (
                self.is_leader
                and self.state == ClassicMemberState.STABLE
                and version != self.metadata_version_assigned
            ):
                self._event("metadata_changed", f"version={version}")
                self._request_rejoin("metadata changed")
                self._wake_poll(now)
        elif kind == "retry":
            self._wake_poll(now)
        elif kind in OFFSET_TIMERS:
            self._offset_timer(now, key)
        elif kind == "batch":
            self._batch_done(now)
        elif kind in ("sync_commit", "sync_commit_retry"):
            self._sync_commit_timer(now, key)
        elif kind == "poll":
            self._poll(now)
        elif kind == "prepare_commit" and self.prepare_commit is not None:
            self._prepare_commit_done(now, "request timed out")
        return self._drain()

    def on_control(self, now: float, note) -> list[Effect]:
        if not self.alive:
            return []
        if isinstance(note, m.Wake):
            self.quiet_epoch_seen = max(self.quiet_epoch_seen, note.epoch)
            if self.quiet:
                self._unquiet(now, note.trigger_rank)
        elif note == "metadata_changed":
            age = self.config.metadata_max_age_s
            k = math.floor((now - self.started_at) / age) + 1
            self._timer(("metadata",), self.started_at + k * age)
        elif note == "link_fault" and self.quiet:
            self._unquiet(now)
        return self._drain()

    def handle(self, now: float, msg) -> list[Effect]:
        if not self.alive:
            return []
        if isinstance(msg, m.HeartbeatResponse):
            self._on_heartbeat_response(now, msg)
        elif isinstance(msg, m.JoinGroupResponse):
            self._on_join_response(now, msg)
        elif isinstance(msg, m.SyncGroupResponse):
            self._on_sync_response(now, msg)
        elif isinstance(msg, m.OffsetFetchResponse):
            self._on_offset_fetch(now, msg)
        elif isinstance(msg, m.OffsetCommitResponse):
            if self.sync_commit is not None and msg.seq == self.sync_commit[0]:
                self._sync_commit_answered(now, msg.error)
                return self._drain()
            sent = self.commit_sent.pop(msg.seq, None)
            self.commit_ok = msg.error == m.NONE
            if self.prepare_commit is not None and msg.seq == self.prepare_commit:
                self._prepare_commit_done(now, None if msg.error == m.NONE else msg.error)
            elif msg.error != m.NONE:
                self._event("commit_failed", msg.error)
                self._commit_error(now, sent, msg.error)
        elif isinstance(msg, m.LeaveGroupResponse | m.ConsumerGroupHeartbeatResponse):
            pass  # (the latter answers the consumer-protocol client this process was before a restart)
        else:
            raise TypeError(f"member cannot handle {msg!r}")
        return self._drain()

    # ------------------------------------------------------------------ JoinGroup / SyncGroup

    def _on_join_response(self, now: float, r: m.JoinGroupResponse) -> None:
        if self.state != ClassicMemberState.PREPARING_REBALANCE:
            return
        self._timer(("join_timeout",), None)
        if r.error == m.MEMBER_ID_REQUIRED:
            self.member_id = r.member_id
            self._send_join(now)
            return
        if r.error in (m.UNKNOWN_MEMBER_ID, m.ILLEGAL_GENERATION):
            self._reset_generation(f"JoinGroup: {r.error}")
            self._wake_poll(now)
            return
        if r.error == m.REBALANCE_IN_PROGRESS:
            # AbstractCoordinator.joinGroupIfNeeded: rejoin at once, without the retry backoff
            # (a group converted while this JoinGroup waited, sim.coordinator.migration)
            self._transition(ClassicMemberState.UNJOINED)
            self._request_rejoin("JoinGroup: REBALANCE_IN_PROGRESS")
            self._wake_poll(now)
            return
        if r.error in (
            m.INCONSISTENT_GROUP_PROTOCOL,
            m.FENCED_INSTANCE_ID,
            m.GROUP_MAX_SIZE_REACHED,
        ):
            self._fatal(now, f"JoinGroup: {r.error}")
            return
        if r.error != m.NONE:
            self._transition(ClassicMemberState.UNJOINED)
            self._request_rejoin(f"JoinGroup: {r.error}")
            self._timer(("retry",), now + self.retry_backoff_s)
            return
        self.member_id = r.member_id
        self.generation = r.generation
        self.group_protocol = r.protocol
        self.is_leader = r.leader == self.member_id
        self._transition(ClassicMemberState.COMPLETING_REBALANCE)
        self._event(
            "join_received",
            f"leader={self.is_leader} protocol={r.protocol} members={len(r.members)}",
        )
        self._enable_heartbeats(now)
        if self.is_leader and not r.skip_assignment:
            self._lead(now, r)
        else:
            self._send_sync(now, ())

    def _lead(self, now: float, r: m.JoinGroupResponse) -> None:
        """ConsumerCoordinator.onLeaderElected: run the selected assignor, then SyncGroup."""
        version, meta = self._metadata()
        subs = dict(r.members)
        assert r.protocol is not None  # (the coordinator selects one for every successful join)
        assignor = self.assignors[r.protocol]
        mode = self.assignor_cost.mode
        t0 = time.perf_counter() if mode == "measured" else 0.0
        result = assignor.assign(meta, subs)
        measured = time.perf_counter() - t0 if mode == "measured" else 0.0
        # Kafka's own time on this input, from the work the assignor just counted.
        kafka_s = (
            kafka_time.client_kafka_ms(r.protocol, meta, subs, assignor.last_work) / 1000
            if mode == "kafka"
            else None
        )
        assignor.last_work = None  # it holds the assignment's arrays until read: let them go
        self.metadata_version_assigned = version
        total_partitions = sum(meta.get(t, 0) for t in {t for s in subs.values() for t in s.topics})
        cost = self.assignor_cost.cost_s(total_partitions, len(subs), measured, kafka_s=kafka_s)
        if self.protocol == COOPERATIVE and r.protocol in self.assignors:
            self._validate_cooperative(subs, result)
        self._event(
            "assignment_computed", AssignmentComputed(r.protocol, len(subs), None, cost).encode()
        )
        assignments = tuple(sorted(result.items()))
        if cost > 0:
            self._run_callback(now, "assign", cost, lambda t: self._send_sync(t, assignments))
        else:
            self._send_sync(now, assignments)

    def _validate_cooperative(
        self, subs: dict[str, Subscription], result: dict[str, Assignment]
    ) -> None:
        """ConsumerCoordinator.validateCooperativeAssignment: no partition may be added to one member
        while it is revoked from another in the same round (``sim.client.cooperative``)."""
        for tp, prev, to in cooperative_conflicts(subs, result):
            self.out.append(
                (
                    "violation",
                    f"cooperative assignment gives {tp} owned by {','.join(prev)} to "
                    f"{','.join(to)} in generation {self.generation}",
                )
            )

    def _send_sync(self, now: float, assignments) -> None:
        if self.state != ClassicMemberState.COMPLETING_REBALANCE:
            return
        self.sync_in_flight = True
        self._send(
            m.SyncGroupRequest(
                self.member_id,
                self.generation,
                self.instance_id,
                assignments,
                protocol_name=self.group_protocol,
            )
        )
        self._timer(("sync_timeout",), now + self.request_timeout_s)

    def _on_sync_response(self, now: float, r: m.SyncGroupResponse) -> None:
        if self.state != ClassicMemberState.COMPLETING_REBALANCE or not self.sync_in_flight:
            return
        self.sync_in_flight = False
        self._timer(("sync_timeout",), None)
        if r.error == m.REBALANCE_IN_PROGRESS:
            self._transition(ClassicMemberState.UNJOINED)
            self._event("sync_failed", r.error)
            self._request_rejoin("SyncGroup: REBALANCE_IN_PROGRESS")
            self._wake_poll(now)
            return
        if r.error in (m.UNKNOWN_MEMBER_ID, m.ILLEGAL_GENERATION):
            self._reset_generation(f"SyncGroup: {r.error}", r.error)
            self._wake_poll(now)
            return
        if r.error != m.NONE:
            self._fatal(now, f"SyncGroup: {r.error}")
            return
        # SyncGroupResponseHandler: the member is Stable; onJoinComplete runs at its next poll().
        self._transition(ClassicMemberState.STABLE)
        self.pending_assignment = (self.generation, r.assignment or Assignment())
        self._wake_poll(now)

    def _on_join_complete(self, now: float, assignment: Assignment) -> None:
        """ConsumerCoordinator.onJoinComplete."""
        if self.generation < self.max_generation_seen:
            self.out.append(
                (
                    "violation",
                    f"{self.name}: generation went back from "
                    f"{self.max_generation_seen} to {self.generation}",
                )
            )
        self.max_generation_seen = max(self.max_generation_seen, self.generation)
        self._transition(ClassicMemberState.STABLE)
        parts = assignment.partitions
        if self._outside_subscription(parts):
            # ConsumerCoordinator.onJoinComplete: an assignment outside the subscription (Kafka's
            # sticky assignors hand one to a member with an empty subscription) is not applied;
            # the member rejoins with its current subscription.
            self._event("assignment_mismatch", f"assigned={len(parts)}")
            self._request_rejoin("received assignment does not match the current subscription")
            self._poll(now)
            return
        changes = self._owned_changes
        if self._owned_as is not None and parts == self._owned_as:
            assigned, aset, revoked, added = parts, None, [], []  # what it owns already
        else:
            assigned = list(parts)
            aset = set(assigned)
            revoked = sorted(self.owned - aset)
            added = sorted(aset - self.owned)
        self._event(
            "sync_received",
            f"member_id={self.member_id} assigned={len(assigned)} "
            f"added={len(added)} revoked={len(revoked)}",
        )
        a = self.assignors.get(self.group_protocol) if self.group_protocol is not None else None
        if a is not None:
            a.on_assignment(assignment, self.generation)
        self.last_assignment = assigned
        self.assignment_generation = self.generation
        cfg = self.config

        def assign_step(t):
            self._set_owned(t, add=added)
            if aset is not None and self._owned_changes == changes + bool(revoked) + bool(added):
                # only this assignment's revocation and addition changed it: it is ``aset`` now
                self._owned_as = parts
            if added:
                self._event("assign", f"count={len(added)}")
            self._run_callback(
                t, "assign", cfg.assign_cost_ms / 1000.0 * len(added), lambda _t: None
            )

        if revoked and self.protocol == COOPERATIVE:
            self._event("revoke", Revoke(len(revoked), "cooperative").encode())
            if cfg.enable_auto_commit:
                self._commit(now, "onPartitionsRevoked")

            # (a partial, not a closure naming assign_step: compiled, that would make a
            # reference cycle of this call's variables, the member among them)
            revoke_done = functools.partial(_revoke_then_assign, self, revoked, assign_step)
            self._revoke_callback(now, cfg.revoke_cost_ms / 1000.0 * len(revoked), revoke_done)
        else:
            if revoked:  # EAGER never owns anything here; defensive
                self._set_owned(now, remove=revoked)
            assign_step(now)
        self._arm_commit(now)
        self._poll(now)

    def _outside_subscription(self, partitions: Sequence[TopicPartition]) -> bool:
        """Whether an assigned partition's topic is not subscribed (read from the assignor's
        topics when they are all subscribed, without building the partitions)."""
        subscribed = self._topic_set
        if subscribed[0] is not self.topics:
            subscribed = self._topic_set = (self.topics, frozenset(self.topics))
        topics = assignment_topics(partitions)
        if topics is not None and subscribed[1].issuperset(topics):
            return False
        return any(tp.topic not in subscribed[1] for tp in partitions)

    def _fatal(self, now: float, reason: str) -> None:
        self._event("fatal", reason)
        self.failed = True
        self._stop_heartbeats(now)
        self._die(now)

    # ------------------------------------------------------------------ heartbeats

    # The regular heartbeat schedule is ``hb_anchor + n * interval`` (n = 1, 2, ...), computed the
    # same way whether heartbeats are sent or elided, so both give bit-identical times; anything
    # irregular (a retry, a late response, a resume) starts a new anchor.

    def _hb_at(self, n: int) -> float:
        return self.hb_anchor + n * self.heartbeat_interval_s

    def _enable_heartbeats(self, now: float) -> None:
        self.hb_enabled = True
        self.hb_in_flight = 0
        self.quiet = False
        self.hb_anchor, self.hb_n = now, 1
        if self.config.heartbeat_phase == "random":
            # A model choice, not Kafka's: long-lived groups drift apart, so the first heartbeat
            # after a SyncGroup comes anywhere within one interval (the member's own stream).
            self.hb_anchor = now - float(self._poll_rng.random()) * self.heartbeat_interval_s
        self._timer(("hb",), self._hb_at(1))

    def _send_heartbeat(self, now: float) -> None:
        """HeartbeatThread: send whenever the heartbeat timer expires, whether or not the previous
        heartbeat was answered (Heartbeat.shouldHeartbeat looks only at the timer)."""
        if not self.hb_enabled or self.quiet:
            return
        if now != self._hb_at(self.hb_n):
            self.hb_anchor, self.hb_n = now, 0
        self.hb_n += 1
        self.hb_in_flight += 1
        self.last_hb_sent = now
        self._send(m.HeartbeatRequest(self.member_id, self.generation, self.instance_id))
        self._timer(("hb_timeout",), now + self.request_timeout_s)
        self._timer(("hb",), self._hb_at(self.hb_n))

    def _on_heartbeat_response(self, now: float, r: m.HeartbeatResponse) -> None:
        if not self.hb_in_flight:
            return
        self.hb_in_flight -= 1
        if not self.hb_in_flight:
            self._timer(("hb_timeout",), None)
        if not self.hb_enabled:
            return
        if r.member_id != self.member_id or r.generation != self.generation:
            return  # HeartbeatResponseHandler: the generation changed since it was sent
        if ("hb",) not in self.timers and self.paused_at is None:
            self._timer(("hb",), max(now, self._hb_at(self.hb_n)))
        if r.error == m.NONE:
            if (
                r.quiet_epoch is not None
                and r.quiet_epoch >= self.quiet_epoch_seen
                and self.elide
                and self.state == ClassicMemberState.STABLE
                and not self.rejoin_needed
                and self.pending_assignment is None
                and not self.hb_in_flight
            ):
                self.quiet = True
                self.quiet_phase = self.last_hb_sent  # == self._hb_at(self.hb_n - 1)
                self.quiet_arrival = r.received_at
                self._timer(("hb",), None)
                self.commit_next = self.timers.get(("commit",))
                self._timer(("commit",), None)
            return
        if r.error == m.REBALANCE_IN_PROGRESS:
            if self.state == ClassicMemberState.STABLE:
                self._event("rebalance_learned", "heartbeat: REBALANCE_IN_PROGRESS")
                self._request_rejoin("group is rebalancing")
                self._wake_poll(now)
            return
        if r.error in (m.UNKNOWN_MEMBER_ID, m.ILLEGAL_GENERATION):
            if self.state in (ClassicMemberState.STABLE, ClassicMemberState.COMPLETING_REBALANCE):
                self._event("fenced_learned", f"heartbeat: {r.error}")
                self._reset_generation(f"heartbeat: {r.error}", r.error)
                self._wake_poll(now)
            return
        if r.error == m.FENCED_INSTANCE_ID:
            self._fatal(now, "heartbeat: FENCED_INSTANCE_ID")

    def _elided_k(self, now: float) -> int:
        """How many elided heartbeats were due by ``now`` (the k-th at ``_hb_at(hb_n - 1 + k)``)."""
        base = self.hb_n - 1
        k = max(0, math.floor((now - self.quiet_phase) / self.heartbeat_interval_s))
        while self._hb_at(base + k + 1) <= now:
            k += 1
        while k > 0 and self._hb_at(base + k) > now:
            k -= 1
        return k

    def _last_elided(
        self, now: float, trigger_rank: int | None = None
    ) -> tuple[float, float | None]:
        """(arrival of the last elided heartbeat, send time of one still in flight or None).

        A heartbeat arriving exactly at ``now`` counts as arrived unless the input that woke us
        (``trigger_rank``) would have been handled first (the kernel orders ties by sender rank).
        """
        k = self._elided_k(now)
        if k <= 0:
            return self.quiet_arrival, None
        base = self.hb_n - 1
        s_k = self._hb_at(base + k)
        arrival = s_k + self._sample_latency()
        if arrival < now or (arrival == now and (trigger_rank is None or self.rank < trigger_rank)):
            return arrival, None
        if k == 1:
            return self.quiet_arrival, s_k
        return min(self._hb_at(base + k - 1) + self._sample_latency(), now), s_k

    def _unquiet(self, now: float, trigger_rank: int | None = None) -> None:
        """Heartbeat for real again: restore the heartbeat schedule the elision skipped."""
        self.quiet = False
        k = self._elided_k(now)
        last_arrival, in_flight = self._last_elided(now, trigger_rank)
        self.out.append(("control", m.COORDINATOR, m.Unquiet(self.member_id, last_arrival)))
        self.hb_n += k  # the schedule carries on from the last elided heartbeat that was due
        if in_flight is not None:
            self.hb_in_flight = 1
            self.last_hb_sent = in_flight
            self._send(
                m.HeartbeatRequest(self.member_id, self.generation, self.instance_id),
                sent_at=in_flight,
            )
            self._timer(("hb_timeout",), in_flight + self.request_timeout_s)
        self._timer(("hb",), self._hb_at(self.hb_n))
        nxt = self._settle_elided_commits(now)
        if nxt is None:
            self._arm_commit(now)
        elif self.alive:
            self._timer(("commit",), nxt)

    def _stop_heartbeats(self, now: float) -> None:
        """The member stops heartbeating (crash, pause, close): settle elided heartbeats first, and
        make sure no heartbeat still in flight lets the coordinator elide the ones that will not come."""
        if self.elide and self.member_id and not self.quiet:
            self.out.append(("control", m.COORDINATOR, m.Unquiet(self.member_id, None, hold=True)))
        if self.quiet:
            self.quiet = False
            self._settle_elided_commits(now)
            last_arrival, in_flight = self._last_elided(now)
            if in_flight is not None:
                self._send(
                    m.HeartbeatRequest(
                        self.member_id, self.generation, self.instance_id, last=True
                    ),
                    sent_at=in_flight,
                )
                self.hb_in_flight = 1
            self.out.append(
                ("control", m.COORDINATOR, m.Unquiet(self.member_id, last_arrival, hold=True))
            )
        self._timer(("hb",), None)
        self._timer(("commit",), None)

    # ------------------------------------------------------------------ commits

    def _settle_elided_commits(self, now: float) -> float | None:
        """The auto-commits due while quiet (at ``commit_next + k * interval``, up to ``now``)
        happened: hand the coordinator the last one. Returns the next one due, if any."""
        nxt, self.commit_next = self.commit_next, None
        if nxt is None:
            return None
        interval = self.auto_commit_interval_s
        if nxt > now:
            return nxt
        k = math.floor((now - nxt) / interval)
        tick = nxt + k * interval
        if self.owned and self.generation >= 0:
            lag_s = self._position_s(now)
            lag_s = now - lag_s
            offsets = self._owned_tuple()
            self.out.append(
                (
                    "control",
                    m.COORDINATOR,
                    m.ElidedCommits(
                        self.member_id,
                        self.generation,
                        offsets,
                        tick - lag_s,
                        self._ahead(offsets, tick - lag_s),
                    ),
                )
            )
            self.commit_ok = True
        return tick + interval

    def _settle_commits_before(self, now: float) -> None:
        """A real commit is about to leave a quiet member: the auto-commits it made while quiet
        reach the coordinator first, as they would have in order (a close() commit overtaken by
        an older elided one re-processed a deploy's records at the new owner)."""
        if self.quiet and self.commit_next is not None and self.commit_next <= now:
            self.commit_next = self._settle_elided_commits(now)

    def _arm_commit(self, now: float) -> None:
        if not self.quiet and self.alive and self.config.enable_auto_commit:
            self._timer(("commit",), now + self.auto_commit_interval_s)

    def _commit(self, now: float, why: str) -> None:
        """Commit offsets of owned partitions (ConsumerCoordinator.sendOffsetCommitRequest)."""
        if not self.owned:
            return
        if self.state != ClassicMemberState.STABLE or self.generation < 0:
            if (
                self.state
                in (ClassicMemberState.PREPARING_REBALANCE, ClassicMemberState.COMPLETING_REBALANCE)
                and why == "auto-commit"
            ):
                self._event("commit_failed", "RebalanceInProgress (client side)")
                self.commit_ok = False
            return
        self._send(self._commit_request(now))


def _revoke_then_assign(
    member: Member, revoked: list[TopicPartition], assign_step: Callable, t: float
) -> None:
    """What ``Member._on_join_complete`` does once a cooperative revocation's callback is done."""
    member._set_owned(t, remove=revoked)
    member._request_rejoin("need to revoke partitions and re-join")
    assign_step(t)
