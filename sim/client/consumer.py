"""One consumer under the consumer group protocol (KIP-848) as a sans-I/O core: Kafka's new
consumer (``AsyncKafkaConsumer``) with its ``ConsumerMembershipManager`` and
``ConsumerHeartbeatRequestManager``, beside the classic ``sim.client.classic``.

Theory of operation. The background thread sends ConsumerGroupHeartbeat every heartbeat interval
(the broker's ``group.consumer.heartbeat.interval.ms``, learnt from the responses), one request
in flight at a time, and at once when joining, acknowledging or leaving. A response may carry a
new assignment; the member reconciles toward it, one reconciliation at a time
(AbstractMembershipManager.maybeReconcile):

1. commit the consumed offsets (auto-commit before revocation; the member waits for the answer,
   at most its rebalance timeout),
2. stop fetching the partitions to revoke and run onPartitionsRevoked,
3. take the new assignment and run onPartitionsAssigned (even with nothing added),
4. acknowledge: an immediate heartbeat reporting the partitions it now owns. Only this report
   lets the coordinator give the revoked partitions to their new owners.

Callbacks run on the application thread, inside poll(), so steps 2-3 wait for the member's next
poll exactly as the classic member's callbacks do: the poll-loop model (batches, backlog, when a
flag raised elsewhere is handled) is the consumer client's, shared with the classic member
(``sim.client.base.ConsumerClient``, the base class of both).

Member states: ``ConsumerMemberState`` (``sim.client.states``: Kafka's MemberState with its valid
previous states), checked on every change.

Errors: FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID fence the member (onPartitionsLost at its next
poll, then it rejoins with epoch 0); UNRELEASED_INSTANCE_ID / FENCED_INSTANCE_ID are fatal. A
poll() that does not come within max.poll.interval.ms (a callback or a pause that long) makes the
background thread leave the group (epoch -1, or -2 for a static member) and the member STALE:
it loses its partitions at its next poll and rejoins. close() revokes (commits) everything, then
leaves with epoch -1 (a static member with -2, keeping its assignment on the coordinator for a
restart within the session timeout).

Manual commits (``commit_mode`` other than ``auto``): the consumer client's poll-batch commits,
commitSync() and commitAsync() (``sim.client.base``), with the new consumer's rules: no commit before a
reconciliation (CommitRequestManager.maybeAutoCommitSyncBeforeRevocation commits only with
enable.auto.commit); the listener's commitSync() in onPartitionsRevoked commits the revoked
partitions at the position where their fetching stopped; commits carry the member epoch the
member last heard, and a STALE_MEMBER_EPOCH or UNKNOWN_MEMBER_ID answer is a
CommitFailedException that the application catches (commitSync retries only retriable errors).

Member id: the consumer makes its own once per consumer instance (Kafka 4.0, KIP-1082:
``Uuid.randomUuid()``, drawn by the runner from a seeded stream), sends it from its first
heartbeat on and keeps it: a fenced member rejoins (epoch 0) under the same id. Without one (the
``member_id`` argument left empty) it takes the id the coordinator answers with, and keeps that.

Modelled here, not defined by Kafka: both callbacks of one reconciliation run in the same poll().

Idle heartbeat elision (``elide_heartbeats``; a simulator device, see ``sim.coordinator.consumer.group``).
A STABLE member with nothing in progress whose heartbeat response offers ``quiet_epoch`` takes it
(``Quiet``): it stops its heartbeat timer and remembers when the next heartbeat was due. Its
auto-commits still happen, but are computed instead of sent (they would all succeed), and without
a timer: the member remembers when the next one is due (``commit_due``) and, before any input
while quiet, computes the ones due by then in the order the timer would have run them. When it must heartbeat for real again (a ``Wake``, a metadata change, a network fault,
or it stops: crash, pause, close, poll timeout) it replays the elided schedule up to now with the
same float arithmetic as the timer (each heartbeat ``interval`` after the previous one): the last
elided heartbeat that has arrived gives the coordinator its session start (``Unquiet``), one
still in flight is sent for real with its original send time, and the next one is due where the
timer would have put it. The last commit that has arrived goes as ``ElidedCommits``, one still in
flight is sent. With a constant latency the run is the same with and without elision; otherwise
only the latency draws of the elided messages differ.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import cast

import numpy as np

from sim.client.base import CLOSE_TIMEOUT_S, OFFSET_TIMERS, ConsumerClient, Effect, schedule_through
from sim.client.handoffs import Handoffs
from sim.client.states import IN_GROUP, ConsumerMemberState
from sim.config import AssignorCost, ConsumerConfig
from sim.kernel.rng import LazyGenerator
from sim.observe.events import OwnedReportBeforeCallback, Revoke
from sim.wire import messages as m

CLASSIC_RESPONSES = (
    m.JoinGroupResponse,
    m.SyncGroupResponse,
    m.HeartbeatResponse,
    m.LeaveGroupResponse,
)


class ConsumerMember(ConsumerClient):
    """A consumer client in a consumer-protocol group. See the module docstring; what it shares
    with the classic member is ``sim.client.base.ConsumerClient``'s."""

    INITIAL_STATE = ConsumerMemberState.UNSUBSCRIBED
    protocol = "CONSUMER"

    def __init__(
        self,
        name: str,
        config: ConsumerConfig,
        topics: tuple[str, ...],
        metadata: Callable[[], tuple[int, dict[str, int]]] | None = None,
        sample_latency: Callable[[], float] | None = None,
        assignor_cost: AssignorCost | None = None,
        elide_heartbeats: bool = False,
        *,
        rates: Mapping[str, float] | None = None,
        handoffs: Handoffs | None = None,
        poll_rng: np.random.Generator | LazyGenerator | None = None,
        rank: int = 0,
        heartbeat_interval_s: float = 5.0,
        link_faulty: Callable[[], bool] | None = None,
        member_id: str = "",
    ):
        # ``metadata`` and ``assignor_cost`` are the classic member's (its leader assigns); the
        # coordinator assigns here, so they are accepted for one constructor shape and unused.
        # The consumer's own member id, made once per consumer instance and sent from its first
        # heartbeat on (KIP-1082); "" leaves it to the coordinator, which answers with one.
        super().__init__(
            name,
            config,
            topics,
            sample_latency if sample_latency is not None else (lambda: 0.0),
            elide_heartbeats,
            rates=rates,
            handoffs=handoffs,
            poll_rng=poll_rng,
            rank=rank,
            member_id=member_id,
        )
        # whether a network fault touches our links now (elided messages would not meet it)
        self._link_faulty = link_faulty if link_faulty is not None else (lambda: False)
        self.epoch = 0
        self.epochs_seen: dict[str, int] = {}
        self.interval_s = heartbeat_interval_s  # until the first response says otherwise
        self.target: frozenset | None = None  # the latest assignment the coordinator sent
        self.current_assignment: frozenset = frozenset()  # reported as owned in heartbeats
        self.reconciling: tuple | None = None  # (target, revoked, added) of the one in progress
        self.app_work: tuple | None = None  # callbacks waiting for the next poll()
        self.lost_pending = False
        self.rec_commit: int | None = (
            None  # seq of the commit before a reconciliation; -1: retry due
        )
        self.rec_commit_deadline = 0.0
        self.correlations = 0
        self.hb_correlation: tuple = ()
        self.leave_correlation: tuple = ()
        self.ack_in_flight = False
        self.hb_due = False
        self.leave_in_flight = False  # a leave heartbeat not answered yet
        self.send_full = True
        self.sent_owned: frozenset | None = None
        self.revoking_at: float | None = (
            None  # position where revoked partitions stopped (manual commits)
        )
        # heartbeat elision (see the module docstring)
        self.quiet_next = 0.0  # when the first elided heartbeat was due
        self.quiet_commits: list[tuple] = []  # the last two elided (tick, OffsetCommitRequest)
        self.commit_due: float | None = None  # next auto-commit while quiet (no timer then)

    def _is_fenced(self) -> bool:
        return (
            self.state in (ConsumerMemberState.FENCED, ConsumerMemberState.STALE)
            or self.lost_pending
        )

    # ------------------------------------------------------------------ what the runner reads

    @property
    def generation(self) -> int:  # (read-only here: the member epoch)
        return self.epoch

    @property
    def settled(self) -> bool:
        return (
            self.alive
            and self.state == ConsumerMemberState.STABLE
            and self.reconciling is None
            and self.app_work is None
            and not self.busy
            and not self.closing
            and self.paused_at is None
            and not self.lost_pending
            and not self.fetches
            and not self.first_pending
            and not self._commit_stuck()
        )

    # ------------------------------------------------------------------ lifecycle

    def start(self, now: float) -> list[Effect]:
        self.alive = True
        self.started_at = now
        self._event(
            "start",
            "group.protocol=consumer"
            + (
                f" group.remote.assignor={self.config.group_remote_assignor}"
                if self.config.group_remote_assignor
                else ""
            )
            + (f" group.instance.id={self.instance_id}" if self.instance_id else ""),
        )
        self._join(now)
        if self.config.enable_auto_commit:
            self._timer(("commit",), now + self.auto_commit_interval_s)
        return self._drain()

    def crash(self, now: float) -> list[Effect]:
        if not self.alive:
            return []
        self._event("crash")
        self._wake(now)
        self._release_cause = "crash"
        self._die(now)
        return self._drain()

    def close(self, now: float) -> list[Effect]:
        """KafkaConsumer.close: onPartitionsRevoked for everything (after a commit), then leave."""
        self._close(now)
        return self._drain()

    def _close(self, now: float) -> None:
        if not self.alive or self.closing:
            return
        self._wake(now)
        if self.busy:
            self.close_requested = True
            return
        self.closing = True
        self._event("close")
        self.reconciling = None
        self.app_work = None
        if self.state in IN_GROUP and self.owned:
            self._transition(ConsumerMemberState.PREPARE_LEAVING)
            revoked = tuple(sorted(self.owned))
            position = self._position_s(now)
            self._event("revoke", Revoke(len(revoked), "leaving").encode())
            self._set_owned(now, remove=revoked)
            cost = self.config.revoke_cost_ms / 1000.0 * len(revoked)
            if self.config.enable_auto_commit:
                # AsyncKafkaConsumer.releaseAssignmentAndLeaveGroup: commitSyncAllConsumed waits
                # (up to the close timeout), then the unsubscribe runs the callback and leaves
                self._commit_sync(
                    now,
                    lambda t: self._revoke_callback(t, cost, self._finish_close, revoked, position),
                    revoked,
                    position,
                    "commitSync on close",
                    CLOSE_TIMEOUT_S,
                )
            else:
                self._revoke_callback(now, cost, self._finish_close, revoked, position)
        else:
            self._finish_close(now)

    def _finish_close(self, now: float) -> None:
        if self.member_id and (
            self.state in IN_GROUP or self.state == ConsumerMemberState.PREPARE_LEAVING
        ):
            self._send_leave(now, "the consumer is being closed")
        self._die(now)

    def _die(self, now: float) -> None:
        self.commit_due = None
        if self.owned:
            self._set_owned(now, remove=sorted(self.owned))
        self._end_sync_commit()
        if self.busy:
            self.busy = False
            self._stall_close()
        if self.paused_at is not None:
            self.paused_at = None
            self.out.append(("close", "paused", self.name, None, None))
        for key in list(self.timers):
            self._timer(key, None)
        self.commit_sent.clear()
        self.fetches.clear()
        self.first_pending.clear()
        self.alive = False
        self.hb_enabled = False
        self.state = self.INITIAL_STATE  # not a transition: the process is gone (sim.client.states)

    def pause(self, now: float) -> list[Effect]:
        if not self.alive or self.paused_at is not None:
            return []
        self._wake(now)
        self._enter_pause(now)
        return self._drain()

    def resume(self, now: float) -> list[Effect]:
        if self.paused_at is None:
            return []
        paused_for = self._leave_pause(now)
        if paused_for >= self.max_poll_interval_s and self.state in IN_GROUP:
            self._poll_timeout(now)
        elif ("hb",) in self.timers and self.timers[("hb",)] <= now:
            self._timer(("hb",), now)  # overdue: the background thread sends at once
        self._wake_poll(now)
        return self._drain()

    # ------------------------------------------------------------------ heartbeats

    def _join(self, now: float) -> None:
        """transitionToJoining: epoch 0, a full request at once, under the member id it has."""
        self._transition(ConsumerMemberState.JOINING)
        self.epoch = m.JOIN_GROUP_MEMBER_EPOCH
        self.target = None
        self.current_assignment = frozenset()
        self.send_full = True
        self.hb_enabled = True
        self._heartbeat_now(now)

    def _heartbeat_now(self, now: float) -> None:
        # one ConsumerGroupHeartbeat in flight at a time, a leave included (the rejoin of a member
        # whose poll timer expired waits for its leave's response)
        if self.hb_in_flight or self.leave_in_flight:
            self.hb_due = True
        else:
            self._send_heartbeat(now)

    def _send_heartbeat(self, now: float, sent_at: float | None = None) -> None:
        """Send a heartbeat now (or, replaying an elided one still in flight, as sent at ``sent_at``)."""
        owned = (
            self.current_assignment
        )  # what the last completed reconciliation took (Kafka's currentAssignment)
        full = self.send_full
        req = m.ConsumerGroupHeartbeatRequest(
            self.member_id,
            self.epoch,
            self.instance_id,
            rack_id=self.config.rack if full else None,
            rebalance_timeout_s=self.max_poll_interval_s if full else None,
            subscribed_topics=self.topics if full else None,
            owned_partitions=owned if (full or owned != self.sent_owned) else None,
            server_assignor=self.config.group_remote_assignor if full else None,
            correlation=self._next_correlation(),
        )
        self.hb_correlation = req.correlation
        if req.owned_partitions is not None and self.reconciling is not None:
            self._report_before_callback(owned)
        self.send_full = False
        self.sent_owned = owned
        sent = now if sent_at is None else sent_at
        self.last_hb_sent = sent
        self.hb_in_flight = 1
        self.ack_in_flight = self.state == ConsumerMemberState.ACKNOWLEDGING
        self.hb_due = False
        self._send(req, sent_at)
        wait = self.interval_s
        if self.config.heartbeat_phase == "random" and (
            self.ack_in_flight or self.epoch == m.JOIN_GROUP_MEMBER_EPOCH
        ):
            # As sim.client.classic's: a model choice, not Kafka's. The heartbeat that joins or acknowledges
            # an assignment sets the member's phase (HeartbeatRequestManager resets its timer on
            # each send); long-lived groups drift, so the next one comes anywhere within one interval.
            wait *= float(self._poll_rng.random())
        self._timer(("hb",), sent + wait)
        self._timer(("hb_timeout",), sent + self.request_timeout_s)

    def _report_before_callback(self, owned: frozenset) -> None:
        """Kafka's hazard of issue 34: during a reconciliation the report of owned partitions is
        ``currentAssignment``, which AbstractMembershipManager updates only once the callbacks
        have run, so a heartbeat sent while onPartitionsAssigned runs leaves out the partitions
        the member already fetches. A coordinator that waits for their revocation takes them as
        released and gives them away, while this member processes them until its next
        reconciliation. The event names them for ``sim.observe.invariants``."""
        unreported = self.owned.difference(owned)
        if unreported:
            self._event(
                "owned_report_before_callback",
                OwnedReportBeforeCallback(
                    self.member_id, tuple((tp[0], tp[1]) for tp in sorted(unreported))
                ).encode(),
            )

    def _send_leave(self, now: float, reason: str) -> None:
        epoch = (
            m.LEAVE_GROUP_STATIC_MEMBER_EPOCH if self.instance_id else m.LEAVE_GROUP_MEMBER_EPOCH
        )
        self.leave_correlation = self._next_correlation()
        self._send(
            m.ConsumerGroupHeartbeatRequest(
                self.member_id, epoch, self.instance_id, correlation=self.leave_correlation
            )
        )
        self._event("leave_group", f"member_id={self.member_id} epoch={epoch} {reason}")
        self._timer(("hb",), None)
        self._timer(("hb_timeout",), None)
        self.hb_in_flight = 0
        self.hb_enabled = False
        self.leave_in_flight = True
        self._timer(("leave_timeout",), now + self.request_timeout_s)

    def _leave_answered(self, now: float) -> None:
        self.leave_in_flight = False
        self._timer(("leave_timeout",), None)
        if self.hb_due and self.state in IN_GROUP:
            self._send_heartbeat(now)

    def _next_correlation(self) -> tuple:
        self.correlations += 1
        return (self.started_at, self.correlations)

    def _on_response(self, now: float, r: m.ConsumerGroupHeartbeatResponse) -> None:
        if r.member_epoch in (m.LEAVE_GROUP_MEMBER_EPOCH, m.LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            # a leave's response (the coordinator answers with the epoch it was sent with)
            if self.leave_in_flight and r.correlation == self.leave_correlation:
                self._leave_answered(now)
            return
        if not self.hb_in_flight or r.correlation != self.hb_correlation:
            return  # one that timed out already, or an answer to a crashed predecessor's request
        self.hb_in_flight = 0
        was_ack, self.ack_in_flight = self.ack_in_flight, False
        self._timer(("hb_timeout",), None)
        if self.state not in IN_GROUP:
            return
        if r.error == m.NONE:
            self._on_success(now, r, was_ack)
            if r.quiet_epoch is not None and self.elide:
                self._maybe_go_quiet(now, r, r.quiet_epoch)
        elif r.error in (m.FENCED_MEMBER_EPOCH, m.UNKNOWN_MEMBER_ID):
            self._event("fenced_learned", f"heartbeat: {r.error}")
            self._fenced(now)
            return
        elif r.error in (
            m.UNRELEASED_INSTANCE_ID,
            m.FENCED_INSTANCE_ID,
            m.GROUP_MAX_SIZE_REACHED,
            m.GROUP_ID_NOT_FOUND,
            m.UNKNOWN_SERVER_ERROR,
        ):
            # AbstractHeartbeatRequestManager.onErrorResponse: fatal, these and any error it does
            # not know (GROUP_ID_NOT_FOUND, UNKNOWN_SERVER_ERROR: a classic group that refused an
            # online upgrade, sim.coordinator.migration)
            self._fatal(now, f"heartbeat: {r.error}")
            return
        else:
            self.send_full = True
            self._timer(("hb",), now + self.retry_backoff_s)
            return
        if self.hb_due and self.state in IN_GROUP:
            self._send_heartbeat(now)

    def _on_success(self, now: float, r: m.ConsumerGroupHeartbeatResponse, was_ack: bool) -> None:
        if r.member_id != self.member_id:
            self.member_id = r.member_id
        last = self.epochs_seen.get(r.member_id)
        if last is not None and r.member_epoch < last:
            self.out.append(
                (
                    "violation",
                    f"{self.name}: member {r.member_id} epoch went back from "
                    f"{last} to {r.member_epoch}",
                )
            )
        self.epochs_seen[r.member_id] = max(
            r.member_epoch, last if last is not None else r.member_epoch
        )
        self.interval_s = r.heartbeat_interval_s or self.interval_s
        changed = r.assignment is not None and r.assignment != self.target
        epoch_moved = r.member_epoch != self.epoch
        self.epoch = r.member_epoch
        if r.assignment is not None:
            self.target = r.assignment
        if changed or epoch_moved:
            self._event(
                "assignment_received",
                f"member_id={self.member_id} epoch={self.epoch} "
                f"assigned={len(self.target) if self.target is not None else 0}",
            )
        before = self.state
        if self.state == ConsumerMemberState.ACKNOWLEDGING and was_ack:
            self._transition(
                ConsumerMemberState.RECONCILING
                if (self.target is not None and self.target != frozenset(self.owned))
                else ConsumerMemberState.STABLE
            )
        elif self.state == ConsumerMemberState.JOINING and self.target is not None:
            self._transition(
                ConsumerMemberState.RECONCILING
                if self.target != frozenset(self.owned)
                else ConsumerMemberState.STABLE
            )
        elif (
            self.state == ConsumerMemberState.STABLE
            and changed
            and self.target != frozenset(self.owned)
        ):
            self._transition(ConsumerMemberState.RECONCILING)
        if self.state == ConsumerMemberState.STABLE and before != ConsumerMemberState.STABLE:
            self._event(
                "member_stable",
                f"member_id={self.member_id} epoch={self.epoch} owned={len(self.owned)}",
            )
        self._maybe_reconcile(now)

    # ------------------------------------------------------------------ heartbeat elision

    def _maybe_go_quiet(
        self, now: float, r: m.ConsumerGroupHeartbeatResponse, quiet_epoch: int
    ) -> None:
        """Take the coordinator's offer (``quiet_epoch``) when nothing but the session depends on
        our heartbeats."""
        if (
            quiet_epoch < self.quiet_epoch_seen
            or self.state != ConsumerMemberState.STABLE
            or self.hb_in_flight
            or self.hb_due
            or self.reconciling is not None
            or self.app_work is not None
            or self.lost_pending
            or self.closing
            or self.close_requested
            or self.busy
            or self.paused_at is not None
            or not self.commit_ok
            or self.rec_commit is not None
            or ("hb",) not in self.timers
            or self._link_faulty()
        ):
            return
        self.quiet = True
        self.quiet_next = self.timers[("hb",)]
        self.quiet_arrival = r.received_at
        self.quiet_commits = []
        self._timer(("hb",), None)
        self.commit_due = self.timers.get(("commit",))
        if self.commit_due is not None:
            self._timer(("commit",), None)
        self.out.append(("control", m.COORDINATOR, m.Quiet(self.member_id, quiet_epoch)))

    def _arrival(self, sent_at: float, now: float, trigger_rank: int | None) -> float | None:
        """When a message sent at ``sent_at`` reached the coordinator, or None if it is still in
        flight at ``now``. One arriving at ``now`` itself was handled before the input that woke
        us if that input came from a higher kernel rank (ties are ordered by rank); with
        ``trigger_rank`` None it has arrived (nothing at this instant depends on the order)."""
        arrival = sent_at + self._sample_latency()
        if arrival < now or (arrival == now and (trigger_rank is None or self.rank < trigger_rank)):
            return arrival
        return None

    def _catch_up_commits(self, now: float) -> None:
        """The auto-commits due while quiet, up to this input, as the commit timer would have run
        them: before the input if due earlier, or at the same instant with the timer first in the
        kernel's order (by rank; our own inputs after it)."""
        due = self.commit_due
        if due is None or not self.quiet:
            return
        interval = self.auto_commit_interval_s
        ticks = schedule_through(due, interval, now, 0 <= self.rank <= self.input_rank)
        if ticks:
            self.commit_due = ticks[-1] + interval
        if ticks and self.state in IN_GROUP and self.owned and not self.closing and self.commit_ok:
            # only the last two ticks' requests are kept; the earlier ones are not built, but
            # keep their side effects (a sequence number, the backlog integrated step by step,
            # floors dropped once caught up), so the kept ones come out the same
            early = ticks[:-2]
            self.commit_seq += len(early)
            self._ahead_through(early)
            for tick in ticks[-2:]:
                self._elided_commit(tick)

    def _elided_commit(self, now: float) -> None:
        """An auto-commit while quiet: computed, not sent (it would succeed; module docstring)."""
        self.quiet_commits = self.quiet_commits[-1:] + [(now, self._commit_request(now))]

    def _wake(self, now: float, trigger_rank: int | None = None) -> None:
        """Heartbeat for real again: replay the elided schedule up to ``now`` (module docstring)."""
        if not self.quiet:
            return
        self._catch_up_commits(now)
        self.quiet = False
        if self.commit_due is not None:
            self._timer(("commit",), self.commit_due)
            self.commit_due = None
        interval = self.interval_s
        prev = last = None
        nxt = self.quiet_next
        due = schedule_through(nxt, interval, now, True)  # as the heartbeat timer re-arms
        if due:
            last, nxt = due[-1], due[-1] + interval
            if len(due) > 1:
                prev = due[-2]
        last_arrival, in_flight = self.quiet_arrival, None
        if last is not None:
            arrival = self._arrival(last, now, trigger_rank)
            if arrival is not None:
                last_arrival = arrival
            else:
                in_flight = last
                if prev is not None:  # the one before has arrived (latency < interval)
                    last_arrival = min(prev + self._sample_latency(), now)
        commits, self.quiet_commits = self.quiet_commits, []
        settled = resend = None
        if commits:
            tick, req = commits[-1]
            if self._arrival(tick, now, trigger_rank) is not None:
                settled = req
            else:
                settled, resend = (commits[-2][1] if len(commits) > 1 else None), commits[-1]
        if settled is not None:
            self.out.append(
                (
                    "control",
                    m.COORDINATOR,
                    m.ElidedCommits(
                        self.member_id,
                        settled.generation,
                        settled.offsets,
                        settled.position_s,
                        settled.ahead,
                    ),
                )
            )
        self.out.append(("control", m.COORDINATOR, m.Unquiet(self.member_id, last_arrival)))
        if resend is not None:
            self._send(resend[1], sent_at=resend[0])
        if in_flight is not None:
            self._send_heartbeat(now, sent_at=in_flight)
        else:
            self._timer(("hb",), nxt)

    def _fenced(self, now: float) -> None:
        """transitionToFenced: onPartitionsLost at the next poll, then rejoin."""
        self._transition(ConsumerMemberState.FENCED)
        self.epoch = 0
        self.reconciling = None
        self.app_work = None
        self.rec_commit = None
        self._timer(("rec_commit",), None)
        self._timer(("hb",), None)
        self.lost_pending = True
        self._wake_poll(now)

    def _poll_timeout(self, now: float) -> None:
        """The poll timer expired: leave the group, become STALE, lose the partitions at the next poll."""
        self._wake(now)
        self._event("poll_timeout", f"max.poll.interval.ms={self.config.max_poll_interval_ms:g}")
        if self.member_id:
            self._send_leave(now, "consumer poll timeout has expired")
        self._transition(ConsumerMemberState.STALE)
        self.reconciling = None
        self.app_work = None
        self.rec_commit = None
        self.lost_pending = True

    def _fatal(self, now: float, reason: str) -> None:
        self._event("fatal", reason)
        self.failed = True
        self._die(now)

    # ------------------------------------------------------------------ reconciliation

    def _maybe_reconcile(self, now: float) -> None:
        if (
            self.state != ConsumerMemberState.RECONCILING
            or self.reconciling is not None
            or self.target is None
        ):
            return
        target = self.target
        owned = frozenset(self.owned)
        if target == owned:
            self._reconciled(now)
            return
        revoked = tuple(sorted(owned - target))
        added = tuple(sorted(target - owned))
        self.reconciling = (target, revoked, added)
        self._event(
            "reconcile",
            f"member_id={self.member_id} epoch={self.epoch} revoke={len(revoked)} add={len(added)}",
        )
        if revoked:
            # markPendingRevocationToPauseFetching (AbstractMembershipManager.maybeReconcile):
            # nothing more is fetched from what is revoked, before the commit that covers it
            self._event("revoke", Revoke(len(revoked), "consumer").encode())
            self.revoking_at = self._position_s(now)
            self._set_owned(now, remove=revoked)
        if owned and self.config.enable_auto_commit:
            # auto-commit before the reconciliation (ConsumerMembershipManager.signalReconciliationStarted)
            # CommitRequestManager.maybeAutoCommitSyncBeforeRevocation: retried on a timeout or
            # a retriable error until the rebalance timeout (max.poll.interval.ms) has passed
            self.rec_commit_deadline = now + self.max_poll_interval_s
            self._send_rec_commit(now)
        else:
            self._revoke_and_assign(now)

    def _send_commit(self, now: float, offsets: tuple, position_s: float) -> int:
        self.commit_seq += 1
        self._send(
            m.OffsetCommitRequest(
                self.member_id,
                self.epoch,
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
        """A member that is not in the group has no member id and epoch to commit with."""
        if (
            self.member_id
            and (self.state in IN_GROUP or self.state == ConsumerMemberState.PREPARE_LEAVING)
            and not self.lost_pending
        ):
            return None
        return "CommitFailedException (client side)"

    def _commit_error(self, now: float, sent, error: str) -> None:
        """CommitRequestManager: a failed commit changes nothing in the membership (the heartbeat
        learns about fencing itself)."""

    def _send_rec_commit(self, now: float) -> None:
        revoked = self.reconciling[1] if self.reconciling is not None else ()
        if revoked:
            # allConsumed(): the partitions pending revocation too, where their fetching stopped
            offsets, position = tuple(sorted(self.owned.union(revoked))), self.revoking_at
        else:
            offsets, position = self._owned_tuple(), self._position_s(now)
        # (revoking_at is set whenever partitions are being revoked)
        self.rec_commit = self._send_commit(now, offsets, cast(float, position))
        self._timer(("rec_commit",), min(now + self.request_timeout_s, self.rec_commit_deadline))

    def _rec_commit_failed(self, now: float, error: str, retriable: bool) -> None:
        """The commit before a reconciliation failed: retry it (after retry.backoff.ms) while the
        deadline allows, else reconcile anyway, as Kafka does."""
        if retriable and now + self.retry_backoff_s < self.rec_commit_deadline:
            self.rec_commit = -1  # a retry is due: responses to earlier attempts no longer count
            self._timer(("rec_commit_retry",), now + self.retry_backoff_s)
            return
        self.rec_commit = None
        self._timer(("rec_commit",), None)
        self._event("commit_failed", f"before reconciliation: {error}")
        self._revoke_and_assign(now)

    def _commit(self, now: float) -> None:
        self._send(self._commit_request(now))

    def _commit_request(self, now: float) -> m.OffsetCommitRequest:
        self.commit_seq += 1
        seq = self.commit_seq
        owned = self._owned_tuple()
        position = self._position_s(now)
        return m.OffsetCommitRequest(
            self.member_id,
            self.epoch,
            self.instance_id,
            len(owned),
            seq,
            owned,
            position,
            self._ahead(owned, position),
        )

    def _revoke_and_assign(self, now: float) -> None:
        if self.reconciling is None or self.state != ConsumerMemberState.RECONCILING:
            self.reconciling = None
            return
        _, revoked, added = self.reconciling
        self.app_work = (revoked, added)
        self._wake_poll(now)

    def _run_app_work(self, now: float) -> None:
        assert self.app_work is not None  # (poll() runs it only when there is some)
        revoked, added = self.app_work
        self.app_work = None
        cfg = self.config

        def assign_step(t):
            if self.reconciling is None or self.state != ConsumerMemberState.RECONCILING:
                return
            self._set_owned(t, add=added)
            if added:
                self._event("assign", f"count={len(added)}")
            self._run_callback(
                t, "assign", cfg.assign_cost_ms / 1000.0 * len(added), self._reconciled
            )

        self._revoke_callback(
            now,
            cfg.revoke_cost_ms / 1000.0 * len(revoked),
            assign_step,
            tuple(revoked),
            self.revoking_at,
        )

    def _reconciled(self, now: float) -> None:
        """The reconciliation is complete: acknowledge at once (ACKNOWLEDGING)."""
        if self.state != ConsumerMemberState.RECONCILING:
            self.reconciling = None
            return
        self.current_assignment = frozenset(self.owned)
        self.reconciling = None
        self._transition(ConsumerMemberState.ACKNOWLEDGING)
        self._heartbeat_now(now)

    # ------------------------------------------------------------------ the poll loop

    def _poll(self, now: float) -> None:
        """What poll() does on the application thread: run the callbacks the background thread
        queued (lost, revoked and assigned), rejoin a stale member."""
        self._timer(("poll",), None)
        if not self.processing:
            return
        if self.close_requested:
            self.close_requested = False
            self._close(now)
            return
        if self.lost_pending:
            self.lost_pending = False
            if self.owned:
                lost = sorted(self.owned)
                self._event("partitions_lost", f"count={len(lost)}")
                self._set_owned(now, remove=lost)
            if self.state in (ConsumerMemberState.FENCED, ConsumerMemberState.STALE):
                self._join(now)
            return
        if self.app_work is not None:
            self._run_app_work(now)

    # ------------------------------------------------------------------ inputs

    def on_timer(self, now: float, key: tuple, at: float) -> list[Effect]:
        if self.timers.get(key) != at or not self.alive:
            return []
        if self.commit_due is not None:
            self._catch_up_commits(now)
        if key[0] in OFFSET_TIMERS:
            return self._watch_settled(lambda: self._on_timer(now, key))
        return self._on_timer(now, key)

    def _watch_settled(self, step) -> list[Effect]:
        """Run ``step``; if it changed whether this member is settled without recording anything
        (an offset fetch resolved quietly), say so: the run looks again only after recorded
        changes, so a change it never hears of would leave the run waiting for a settled group
        until its time limit."""
        before = self.settled
        out = step()
        if self.settled != before and not any(
            e[0] not in ("send", "timer", "control") for e in out
        ):
            out.append(("settled_changed",))
        return out

    def _on_timer(self, now: float, key: tuple) -> list[Effect]:
        del self.timers[key]
        kind = key[0]
        if kind == "hb":
            if self.state in IN_GROUP:
                self._heartbeat_now(now)
        elif kind == "leave_timeout":
            self._leave_answered(now)
        elif kind == "hb_timeout":
            self.hb_in_flight = 0
            self.send_full = True
            self._event("heartbeat_failed", "request timed out")
            self._timer(("hb",), now + self.retry_backoff_s)
        elif kind == "callback":
            self._callback_done(now)
        elif kind == "poll_timeout":
            if self.busy and self.state in IN_GROUP:
                self._poll_timeout(now)
        elif kind == "poll":
            self._poll(now)
        elif kind in OFFSET_TIMERS:
            self._offset_timer(now, key)
        elif kind == "batch":
            self._batch_done(now)
        elif kind in ("sync_commit", "sync_commit_retry"):
            self._sync_commit_timer(now, key)
        elif kind == "commit":
            # enable.auto.commit: the new consumer's CommitRequestManager commits every
            # auto.commit.interval.ms while it is in the group.
            if self.state in IN_GROUP and self.owned and not self.closing:
                if self.quiet and self.commit_ok:
                    self._elided_commit(now)
                else:
                    self._wake(now)
                    self._commit(now)
            self._timer(("commit",), now + self.auto_commit_interval_s)
        elif kind == "rec_commit" and self.rec_commit is not None and self.rec_commit >= 0:
            self._rec_commit_failed(now, "request timed out", retriable=True)
        elif (
            kind == "rec_commit_retry"
            and self.rec_commit == -1
            and self.state == ConsumerMemberState.RECONCILING
            and self.reconciling is not None
        ):
            self._send_rec_commit(now)
        return self._drain()

    def on_control(self, now: float, note) -> list[Effect]:
        """Heartbeat elision: a ``Wake`` from the coordinator; a metadata change (the coordinator
        notices it at the next heartbeat, which may be one due right now) or a network fault
        (elided heartbeats would meet it) end the quiet too."""
        if not self.alive:
            return []
        if self.commit_due is not None:
            self._catch_up_commits(now)
        if isinstance(note, m.Wake):
            self.quiet_epoch_seen = max(self.quiet_epoch_seen, note.epoch)
            self._wake(now, note.trigger_rank)
        elif note == "metadata_changed":
            self._wake(now, -1)
        elif note == "link_fault":
            self._wake(now)
        return self._drain()

    def handle(self, now: float, msg) -> list[Effect]:
        if not self.alive:
            return []
        if self.commit_due is not None:
            self._catch_up_commits(now)
            out = self._handle(now, msg)
            if self.quiet and self.commit_due is not None and not self.commit_ok:
                # a commit failed meanwhile: the next auto-commit is sent for real
                self._timer(("commit",), self.commit_due)
                self.commit_due = None
                out = out + self._drain()
            return out
        return self._handle(now, msg)

    def _handle(self, now: float, msg) -> list[Effect]:
        if isinstance(msg, m.ConsumerGroupHeartbeatResponse):
            self._on_response(now, msg)
        elif isinstance(msg, m.OffsetFetchResponse):

            def offsets_fetched() -> list[Effect]:
                self._on_offset_fetch(now, msg)
                return self._drain()

            return self._watch_settled(offsets_fetched)
        elif isinstance(msg, m.OffsetCommitResponse):
            if self.sync_commit is not None and msg.seq == self.sync_commit[0]:
                self._sync_commit_answered(now, msg.error)
                return self._drain()
            self.commit_ok = msg.error == m.NONE
            if self.rec_commit is not None and msg.seq == self.rec_commit:
                if msg.error == m.NONE:
                    self.rec_commit = None
                    self._timer(("rec_commit",), None)
                    self._revoke_and_assign(now)
                else:
                    # a stale member epoch is retried with the current one (isStaleEpochErrorAndValidEpochAvailable)
                    self._timer(("rec_commit",), None)
                    self._rec_commit_failed(
                        now,
                        msg.error,
                        retriable=msg.error == m.STALE_MEMBER_EPOCH and self.epoch > 0,
                    )
            elif msg.error != m.NONE:
                self._event("commit_failed", msg.error)
        elif not isinstance(msg, CLASSIC_RESPONSES):
            # (a classic response answers the classic client this process was before a restart
            # onto the consumer protocol: a new connection never reads it)
            raise TypeError(f"consumer member cannot handle {msg!r}")
        return self._drain()
