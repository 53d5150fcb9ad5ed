"""One consumer's group membership as a sans-I/O core (Kafka's ``ConsumerCoordinator`` on top of
``AbstractCoordinator``, with its heartbeat thread and the poll loop's rebalance listener).

Theory of operation. The member reacts to responses, timers and control notes and returns
effects (``sim.messages``). It never reads the clock: ``now`` is passed in.

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
  tells it that it was removed.

Heartbeat elision. In Stable, a heartbeat answered NONE changes nothing, so once the
coordinator grants it (``HeartbeatResponse.quiet_epoch``) the member stops sending them and
remembers its heartbeat phase. When it must heartbeat for real again (a ``Wake`` from the
coordinator, or it stops: crash, pause, network fault) it reconstructs its last heartbeat from
the phase, sends the one that would still be in flight, and tells the coordinator when the last
one arrived (``Unquiet``). Latencies of elided heartbeats are drawn only when needed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from assignors import COOPERATIVE, EAGER, Assignment, Subscription, TopicPartition, get_assignor
from assignors.userdata import encode_sticky_user_data

from . import messages as m
from .config import AssignorCost, ConsumerConfig

UNJOINED = "UNJOINED"
PREPARING_REBALANCE = "PREPARING_REBALANCE"
COMPLETING_REBALANCE = "COMPLETING_REBALANCE"
STABLE = "STABLE"

# AbstractCoordinator's JoinGroup request timeout: rebalance timeout plus this margin.
JOIN_TIMEOUT_MARGIN_S = 5.0


def rebalance_protocol(assignor_names) -> str:
    """ConsumerCoordinator: the highest protocol supported by every configured assignor."""
    common = None
    for name in assignor_names:
        protos = set(get_assignor(name).supported_protocols)
        common = protos if common is None else common & protos
    if not common:
        raise ValueError(f"assignors {list(assignor_names)} share no rebalance protocol")
    return COOPERATIVE if COOPERATIVE in common else EAGER


class Member:
    """A consumer client in a group. See the module docstring."""

    def __init__(self, name: str, config: ConsumerConfig, topics: tuple[str, ...],
                 metadata: Callable[[], tuple[int, dict[str, int]]],
                 sample_latency: Callable[[], float], assignor_cost: AssignorCost,
                 elide_heartbeats: bool = True):
        self.name = name
        self.config = config
        self.topics = tuple(topics)
        self._metadata = metadata              # () -> (version, partitions_per_topic)
        self._sample_latency = sample_latency
        self.assignor_cost = assignor_cost
        self.elide = elide_heartbeats
        self.assignors = {n: get_assignor(n) for n in config.partition_assignment_strategy}
        self.protocol = rebalance_protocol(config.partition_assignment_strategy)
        self.instance_id = name if config.static else None

        self.state = UNJOINED
        self.member_id = ""
        self.generation = -1
        self.group_protocol: str | None = None
        self.is_leader = False
        self.owned: set[TopicPartition] = set()
        self.last_assignment: list[TopicPartition] | None = None
        self.assignment_generation = -1
        self.max_generation_seen = -1
        self.rejoin_needed = False
        self.join_reason = ""
        self.alive = False
        self.failed = False
        self.closing = False
        self.paused_at: float | None = None
        self.busy = False
        self._after_busy: Callable[[float], None] | None = None
        self.metadata_version_assigned = -1
        self.started_at = 0.0
        # heartbeat thread
        self.hb_enabled = False
        self.hb_in_flight = False
        self.last_hb_sent = 0.0
        self.quiet = False
        self.quiet_epoch_seen = 0
        self.quiet_phase = 0.0
        self.quiet_arrival = 0.0
        self.sync_in_flight = False
        self.timers: dict[tuple, float] = {}
        self.out: list[tuple] = []

    # ------------------------------------------------------------------ plumbing

    def _drain(self) -> list[tuple]:
        out, self.out = self.out, []
        return out

    def _send(self, msg, sent_at: float | None = None) -> None:
        if sent_at is None:
            self.out.append(("send", m.COORDINATOR, msg))
        else:
            self.out.append(("send", m.COORDINATOR, msg, sent_at))

    def _event(self, kind: str, detail: str = "") -> None:
        self.out.append(("event", kind, self.name, self.generation, detail))

    def _timer(self, key: tuple, at: float | None) -> None:
        if at is None:
            if self.timers.pop(key, None) is not None:
                self.out.append(("timer", key, None))
        else:
            self.timers[key] = at
            self.out.append(("timer", key, at))

    def _set_owned(self, add=(), remove=()) -> None:
        for tp in remove:
            self.owned.discard(tp)
            self.out.append(("close", "owned", self.name, tp.topic, tp.partition))
        for tp in add:
            self.owned.add(tp)
            self.out.append(("open", "owned", self.name, tp.topic, tp.partition))

    @property
    def processing(self) -> bool:
        return self.alive and not self.busy and self.paused_at is None

    @property
    def settled(self) -> bool:
        """Stable, nothing pending, processing (used for the episode end)."""
        return (self.alive and self.state == STABLE and not self.rejoin_needed and not self.busy
                and self.paused_at is None)

    # ------------------------------------------------------------------ lifecycle (from the director)

    def start(self, now: float) -> list[tuple]:
        self.alive = True
        self.started_at = now
        self._event("start", f"assignors={','.join(self.assignors)} protocol={self.protocol}"
                    + (f" group.instance.id={self.instance_id}" if self.instance_id else ""))
        self._request_rejoin("start")
        self._poll(now)
        return self._drain()

    def crash(self, now: float) -> list[tuple]:
        """The process dies: no LeaveGroup, no callbacks; partitions are simply no longer processed."""
        if not self.alive:
            return []
        self._stop_heartbeats(now)
        self._event("crash")
        self._die(now)
        return self._drain()

    def close(self, now: float) -> list[tuple]:
        """KafkaConsumer.close: revoke (commit) what it owns, then LeaveGroup if dynamic."""
        if not self.alive or self.closing:
            return []
        self.closing = True
        self._event("close")
        if self.generation >= 0 and self.owned:
            self._send(m.OffsetCommitRequest(self.member_id, self.generation, self.instance_id, len(self.owned)))
            cost = self.config.revoke_cost_ms / 1000.0 * len(self.owned)
            self._run_callback(now, "revoke", cost, self._finish_close)
        else:
            self._finish_close(now)
        return self._drain()

    def _finish_close(self, now: float) -> None:
        self._stop_heartbeats(now)
        if self.instance_id is None and self.member_id and self.state != UNJOINED or (
                self.instance_id is None and self.member_id and self.state == UNJOINED and self.generation >= 0):
            self._send(m.LeaveGroupRequest(self.member_id, None, "the consumer is being closed"))
            self._event("leave_group", f"member_id={self.member_id}")
        self._die(now)

    def _die(self, now: float) -> None:
        self._set_owned(remove=sorted(self.owned))
        if self.busy:
            self.busy = False
            self.out.append(("close", "stalled", self.name, None, None))
        if self.paused_at is not None:
            self.paused_at = None
            self.out.append(("close", "paused", self.name, None, None))
        for key in list(self.timers):
            self._timer(key, None)
        self.alive = False
        self.hb_enabled = False

    def pause(self, now: float) -> list[tuple]:
        """GC or debugger: from now on nothing runs (the actor holds inputs back)."""
        if not self.alive or self.paused_at is not None:
            return []
        self._stop_heartbeats(now)
        self.paused_at = now
        self._event("pause")
        self.out.append(("open", "paused", self.name, None, None))
        return self._drain()

    def resume(self, now: float) -> list[tuple]:
        """The process runs again with its stale state; held inputs are delivered next."""
        if self.paused_at is None:
            return []
        paused_for = now - self.paused_at
        self.paused_at = None
        self.out.append(("close", "paused", self.name, None, None))
        self._event("resume", f"paused_for={paused_for:.3f}s")
        if self.elide and self.member_id:
            self.out.append(("control", m.COORDINATOR, m.Unquiet(self.member_id, None, hold=False)))
        if self.hb_enabled and paused_for >= self.config.max_poll_interval_s and self.state != UNJOINED:
            self._poll_timeout(now)
        elif self.hb_enabled and not self.hb_in_flight:
            self._timer(("hb",), now)  # overdue: the heartbeat thread sends at once
        if self.state == STABLE:
            self._arm_commit(now)
        self._poll(now)
        return self._drain()

    def change_assignors(self, names) -> None:
        """A restart with another partition.assignment.strategy (only while not alive)."""
        self.assignors = {n: get_assignor(n) for n in names}
        self.protocol = rebalance_protocol(names)

    # ------------------------------------------------------------------ poll loop

    def _request_rejoin(self, reason: str) -> None:
        if not self.rejoin_needed:
            self.rejoin_needed = True
            self.join_reason = reason

    def _poll(self, now: float) -> None:
        """What KafkaConsumer.poll does when the poll thread is free: (re)join if needed."""
        if not self.processing or not self.rejoin_needed:
            return
        if self.state in (UNJOINED, STABLE):
            self._join_prepare(now)

    def _reset_generation(self, reason: str) -> None:
        """AbstractCoordinator.resetGenerationOnResponseError: forget member id and generation."""
        self._event("generation_reset", reason)
        self.member_id = ""
        self.generation = -1
        self.state = UNJOINED
        self.hb_enabled = False
        self.is_leader = False
        self._timer(("hb",), None)
        self._timer(("commit",), None)
        self._request_rejoin(reason)

    def _join_prepare(self, now: float) -> None:
        """ConsumerCoordinator.onJoinPrepare, then JoinGroup."""
        if self.owned and self.generation >= 0 and self.protocol == EAGER:
            self._commit(now, "onJoinPrepare")  # maybeAutoCommitOffsetsSync, still Stable
        self.state = PREPARING_REBALANCE  # joining; no second onJoinPrepare meanwhile
        self.hb_enabled = False
        self._timer(("hb",), None)
        self._timer(("commit",), None)
        if self.owned and self.generation < 0:
            lost = sorted(self.owned)
            self._event("partitions_lost", f"count={len(lost)}")
            self._set_owned(remove=lost)
            self._send_join(now)
        elif self.owned and self.protocol == EAGER:
            revoked = sorted(self.owned)
            self._event("revoke", f"count={len(revoked)} eager")
            cost = self.config.revoke_cost_ms / 1000.0 * len(revoked)

            def done(t, revoked=revoked):
                self._set_owned(remove=revoked)
                self._send_join(t)
            self._run_callback(now, "revoke", cost, done)
        else:
            version, meta = self._metadata()
            gone = sorted(tp for tp in self.owned if tp.topic not in meta or tp.partition >= meta[tp.topic])
            if gone:
                self._event("revoke", f"count={len(gone)} topic deleted")
                self._set_owned(remove=gone)
            self._send_join(now)

    def _subscriptions(self) -> tuple[tuple[str, Subscription], ...]:
        owned = tuple(sorted(self.owned))
        out = []
        for name, a in self.assignors.items():
            if name == "sticky" and self.config.sticky_user_data_version == 0:
                ud = None if self.last_assignment is None else encode_sticky_user_data(self.last_assignment, None)
            else:
                ud = a.subscription_user_data(self.last_assignment, self.assignment_generation)
            out.append((name, Subscription(self.topics, ud, owned, self.instance_id,
                                           self.generation, self.config.rack)))
        return tuple(out)

    def _send_join(self, now: float) -> None:
        self.state = PREPARING_REBALANCE
        self.rejoin_needed = False
        req = m.JoinGroupRequest(self.member_id, self.instance_id, self._subscriptions(),
                                 self.config.session_timeout_s, self.config.max_poll_interval_s,
                                 self.join_reason)
        self._send(req)
        self._event("join_sent", self.join_reason)
        self._timer(("join_timeout",), now + max(self.config.request_timeout_s,
                                                 self.config.max_poll_interval_s + JOIN_TIMEOUT_MARGIN_S))

    # ------------------------------------------------------------------ callbacks (poll thread)

    def _run_callback(self, now: float, kind: str, cost_s: float, then: Callable[[float], None]) -> None:
        if cost_s <= 0:
            then(now)
            return
        self.busy = True
        self._after_busy = then
        self.out.append(("open", "stalled", self.name, None, None))
        self._timer(("callback",), now + cost_s)
        if self.hb_enabled and cost_s > self.config.max_poll_interval_s:
            self._timer(("poll_timeout",), now + self.config.max_poll_interval_s)

    def _callback_done(self, now: float) -> None:
        self.busy = False
        self.out.append(("close", "stalled", self.name, None, None))
        self._timer(("poll_timeout",), None)
        then, self._after_busy = self._after_busy, None
        if then is not None:
            then(now)
        self._poll(now)

    def _poll_timeout(self, now: float) -> None:
        """Heartbeat thread: the poll thread stalled past max.poll.interval.ms (maybeLeaveGroup)."""
        self._event("poll_timeout", f"max.poll.interval.ms={self.config.max_poll_interval_ms:g}")
        if self.instance_id is None and self.member_id:
            self._send(m.LeaveGroupRequest(self.member_id, None, "consumer poll timeout has expired"))
        self._stop_heartbeats(now)
        self._reset_generation("poll timeout")

    # ------------------------------------------------------------------ inputs

    def on_timer(self, now: float, key: tuple, at: float) -> list[tuple]:
        if self.timers.get(key) != at or not self.alive:
            return []
        del self.timers[key]
        kind = key[0]
        if kind == "hb":
            self._send_heartbeat(now)
        elif kind == "hb_timeout":
            self.hb_in_flight = False
            self._event("heartbeat_failed", "request timed out")
            self._timer(("hb",), now + self.config.retry_backoff_s)
        elif kind == "callback":
            self._callback_done(now)
        elif kind == "poll_timeout":
            if self.busy:
                self._poll_timeout(now)
        elif kind == "commit":
            self._commit(now, "auto-commit")
            self._arm_commit(now)
        elif kind == "join_timeout":
            if self.state == PREPARING_REBALANCE:
                self._event("join_failed", "request timed out")
                self.state = UNJOINED
                self._request_rejoin("JoinGroup timed out")
                self._poll(now)
        elif kind == "sync_timeout":
            if self.state == COMPLETING_REBALANCE and self.sync_in_flight:
                self.sync_in_flight = False
                self._event("sync_failed", "request timed out")
                self.state = UNJOINED
                self._request_rejoin("SyncGroup timed out")
                self._poll(now)
        elif kind == "metadata":
            version, _ = self._metadata()
            if self.is_leader and self.state == STABLE and version != self.metadata_version_assigned:
                self._event("metadata_changed", f"version={version}")
                self._request_rejoin("metadata changed")
                self._poll(now)
        elif kind == "retry":
            self._poll(now)
        return self._drain()

    def on_control(self, now: float, note) -> list[tuple]:
        if not self.alive:
            return []
        if isinstance(note, m.Wake):
            self.quiet_epoch_seen = max(self.quiet_epoch_seen, note.epoch)
            if self.quiet:
                self._unquiet(now)
        elif note == "metadata_changed":
            age = self.config.metadata_max_age_s
            k = math.floor((now - self.started_at) / age) + 1
            self._timer(("metadata",), self.started_at + k * age)
        elif note == "link_fault":
            if self.quiet:
                self._unquiet(now)
        return self._drain()

    def handle(self, now: float, msg) -> list[tuple]:
        if not self.alive:
            return []
        if isinstance(msg, m.HeartbeatResponse):
            self._on_heartbeat_response(now, msg)
        elif isinstance(msg, m.JoinGroupResponse):
            self._on_join_response(now, msg)
        elif isinstance(msg, m.SyncGroupResponse):
            self._on_sync_response(now, msg)
        elif isinstance(msg, m.OffsetCommitResponse):
            if msg.error != m.NONE:
                self._event("commit_failed", msg.error)
                if msg.error in (m.UNKNOWN_MEMBER_ID, m.ILLEGAL_GENERATION) and self.generation >= 0:
                    self._reset_generation(f"commit failed: {msg.error}")
                    self._poll(now)
        elif isinstance(msg, m.LeaveGroupResponse):
            pass
        else:
            raise TypeError(f"member cannot handle {msg!r}")
        return self._drain()

    # ------------------------------------------------------------------ JoinGroup / SyncGroup

    def _on_join_response(self, now: float, r: m.JoinGroupResponse) -> None:
        if self.state != PREPARING_REBALANCE:
            return
        self._timer(("join_timeout",), None)
        if r.error == m.MEMBER_ID_REQUIRED:
            self.member_id = r.member_id
            self._send_join(now)
            return
        if r.error in (m.UNKNOWN_MEMBER_ID, m.ILLEGAL_GENERATION):
            self._reset_generation(f"JoinGroup: {r.error}")
            self._poll(now)
            return
        if r.error in (m.INCONSISTENT_GROUP_PROTOCOL, m.FENCED_INSTANCE_ID):
            self._fatal(now, f"JoinGroup: {r.error}")
            return
        if r.error != m.NONE:
            self.state = UNJOINED
            self._request_rejoin(f"JoinGroup: {r.error}")
            self._timer(("retry",), now + self.config.retry_backoff_s)
            return
        self.member_id = r.member_id
        self.generation = r.generation
        self.group_protocol = r.protocol
        self.is_leader = r.leader == self.member_id
        self.state = COMPLETING_REBALANCE
        self._event("join_received", f"leader={self.is_leader} protocol={r.protocol} members={len(r.members)}")
        self._enable_heartbeats(now)
        if self.is_leader and not r.skip_assignment:
            self._lead(now, r)
        else:
            self._send_sync(now, ())

    def _lead(self, now: float, r: m.JoinGroupResponse) -> None:
        """ConsumerCoordinator.onLeaderElected: run the selected assignor, then SyncGroup."""
        version, meta = self._metadata()
        subs = dict(r.members)
        assignor = self.assignors[r.protocol]
        t0 = time.perf_counter() if self.assignor_cost.mode == "measured" else 0.0
        result = assignor.assign(meta, subs)
        measured = time.perf_counter() - t0 if self.assignor_cost.mode == "measured" else 0.0
        self.metadata_version_assigned = version
        total_partitions = sum(meta.get(t, 0) for t in {t for s in subs.values() for t in s.topics})
        cost = self.assignor_cost.cost_s(total_partitions, len(subs), measured)
        if self.protocol == COOPERATIVE and r.protocol in self.assignors:
            self._validate_cooperative(subs, result)
        self._event("assignment_computed", f"assignor={r.protocol} members={len(subs)} cost={cost:.6f}s")
        assignments = tuple(sorted(result.items()))
        if cost > 0:
            self._run_callback(now, "assign", cost, lambda t: self._send_sync(t, assignments))
        else:
            self._send_sync(now, assignments)

    def _validate_cooperative(self, subs: dict[str, Subscription], result: dict[str, Assignment]) -> None:
        """ConsumerCoordinator.validateCooperativeAssignment: never hand a partition that one member
        owns to another member in the same round."""
        owner = {}
        for mid, s in subs.items():
            for tp in s.owned_partitions:
                owner[tp] = mid
        for mid, a in result.items():
            for tp in a.partitions:
                prev = owner.get(tp)
                if prev is not None and prev != mid:
                    self.out.append(("violation", f"cooperative assignment gives {tp} owned by {prev} to {mid} "
                                     f"in generation {self.generation}"))

    def _send_sync(self, now: float, assignments) -> None:
        if self.state != COMPLETING_REBALANCE:
            return
        self.sync_in_flight = True
        self._send(m.SyncGroupRequest(self.member_id, self.generation, self.instance_id, assignments))
        self._timer(("sync_timeout",), now + self.config.request_timeout_s)

    def _on_sync_response(self, now: float, r: m.SyncGroupResponse) -> None:
        if self.state != COMPLETING_REBALANCE or not self.sync_in_flight:
            return
        self.sync_in_flight = False
        self._timer(("sync_timeout",), None)
        if r.error == m.REBALANCE_IN_PROGRESS:
            self.state = UNJOINED
            self._event("sync_failed", r.error)
            self._request_rejoin("SyncGroup: REBALANCE_IN_PROGRESS")
            self._poll(now)
            return
        if r.error in (m.UNKNOWN_MEMBER_ID, m.ILLEGAL_GENERATION):
            self._reset_generation(f"SyncGroup: {r.error}")
            self._poll(now)
            return
        if r.error != m.NONE:
            self._fatal(now, f"SyncGroup: {r.error}")
            return
        self._on_join_complete(now, r.assignment or Assignment())

    def _on_join_complete(self, now: float, assignment: Assignment) -> None:
        """ConsumerCoordinator.onJoinComplete."""
        if self.generation < self.max_generation_seen:
            self.out.append(("violation", f"{self.name}: generation went back from "
                             f"{self.max_generation_seen} to {self.generation}"))
        self.max_generation_seen = max(self.max_generation_seen, self.generation)
        self.state = STABLE
        assigned = list(assignment.partitions)
        aset = set(assigned)
        revoked = sorted(self.owned - aset)
        added = sorted(aset - self.owned)
        self._event("sync_received", f"member_id={self.member_id} assigned={len(assigned)} "
                    f"added={len(added)} revoked={len(revoked)}")
        a = self.assignors.get(self.group_protocol)
        if a is not None:
            a.on_assignment(assignment, self.generation)
        self.last_assignment = assigned
        self.assignment_generation = self.generation
        cfg = self.config

        def assign_step(t):
            self._set_owned(add=added)
            if added:
                self._event("assign", f"count={len(added)}")
            self._run_callback(t, "assign", cfg.assign_cost_ms / 1000.0 * len(added), lambda _t: None)

        if revoked and self.protocol == COOPERATIVE:
            self._event("revoke", f"count={len(revoked)} cooperative")
            self._commit(now, "onPartitionsRevoked")

            def revoke_done(t):
                self._set_owned(remove=revoked)
                self._request_rejoin("need to revoke partitions and re-join")
                assign_step(t)
            self._run_callback(now, "revoke", cfg.revoke_cost_ms / 1000.0 * len(revoked), revoke_done)
        else:
            if revoked:  # EAGER never owns anything here; defensive
                self._set_owned(remove=revoked)
            assign_step(now)
        self._arm_commit(now)
        self._poll(now)

    def _fatal(self, now: float, reason: str) -> None:
        self._event("fatal", reason)
        self.failed = True
        self._stop_heartbeats(now)
        self._die(now)

    # ------------------------------------------------------------------ heartbeats

    def _enable_heartbeats(self, now: float) -> None:
        self.hb_enabled = True
        self.hb_in_flight = False
        self.quiet = False
        self._timer(("hb",), now + self.config.heartbeat_interval_s)

    def _send_heartbeat(self, now: float) -> None:
        if not self.hb_enabled or self.hb_in_flight or self.quiet:
            return
        self.hb_in_flight = True
        self.last_hb_sent = now
        self._send(m.HeartbeatRequest(self.member_id, self.generation, self.instance_id))
        self._timer(("hb_timeout",), now + self.config.request_timeout_s)
        self._timer(("hb",), now + self.config.heartbeat_interval_s)

    def _on_heartbeat_response(self, now: float, r: m.HeartbeatResponse) -> None:
        if not self.hb_in_flight:
            return
        self.hb_in_flight = False
        self._timer(("hb_timeout",), None)
        if not self.hb_enabled:
            return
        if ("hb",) not in self.timers and self.paused_at is None:
            self._timer(("hb",), max(now, self.last_hb_sent + self.config.heartbeat_interval_s))
        if r.error == m.NONE:
            if (r.quiet_epoch is not None and r.quiet_epoch >= self.quiet_epoch_seen and self.elide
                    and self.state == STABLE and not self.rejoin_needed):
                self.quiet = True
                self.quiet_phase = self.last_hb_sent
                self.quiet_arrival = r.received_at
                self._timer(("hb",), None)
                self._timer(("commit",), None)
            return
        if r.error == m.REBALANCE_IN_PROGRESS:
            if self.state == STABLE:
                self._event("rebalance_learned", "heartbeat: REBALANCE_IN_PROGRESS")
                self._request_rejoin("group is rebalancing")
                self._poll(now)
            return
        if r.error in (m.UNKNOWN_MEMBER_ID, m.ILLEGAL_GENERATION):
            if self.state in (STABLE, COMPLETING_REBALANCE):
                self._event("fenced_learned", f"heartbeat: {r.error}")
                self._reset_generation(f"heartbeat: {r.error}")
                self._poll(now)
            return
        if r.error == m.FENCED_INSTANCE_ID:
            self._fatal(now, "heartbeat: FENCED_INSTANCE_ID")

    def _last_elided(self, now: float) -> tuple[float, float | None]:
        """(arrival of the last elided heartbeat, send time of one still in flight or None)."""
        interval = self.config.heartbeat_interval_s
        k = math.floor((now - self.quiet_phase) / interval)
        if k <= 0:
            return self.quiet_arrival, None
        s_k = self.quiet_phase + k * interval
        arrival = s_k + self._sample_latency()
        if arrival <= now:
            return arrival, None
        if k == 1:
            return self.quiet_arrival, s_k
        return min(s_k - interval + self._sample_latency(), now), s_k

    def _unquiet(self, now: float) -> None:
        """Heartbeat for real again: restore the heartbeat schedule the elision skipped."""
        self.quiet = False
        last_arrival, in_flight = self._last_elided(now)
        interval = self.config.heartbeat_interval_s
        self.out.append(("control", m.COORDINATOR, m.Unquiet(self.member_id, last_arrival)))
        if in_flight is not None:
            self.hb_in_flight = True
            self.last_hb_sent = in_flight
            self._send(m.HeartbeatRequest(self.member_id, self.generation, self.instance_id), sent_at=in_flight)
            self._timer(("hb_timeout",), in_flight + self.config.request_timeout_s)
            self._timer(("hb",), in_flight + interval)
        else:
            k = math.floor((now - self.quiet_phase) / interval)
            self._timer(("hb",), self.quiet_phase + (k + 1) * interval)
        self._arm_commit(now)

    def _stop_heartbeats(self, now: float) -> None:
        """The member stops heartbeating (crash, pause, close): settle elided heartbeats first, and
        make sure no heartbeat still in flight lets the coordinator elide the ones that will not come."""
        if self.elide and self.member_id and not self.quiet:
            self.out.append(("control", m.COORDINATOR, m.Unquiet(self.member_id, None, hold=True)))
        if self.quiet:
            self.quiet = False
            last_arrival, in_flight = self._last_elided(now)
            if in_flight is not None:
                self._send(m.HeartbeatRequest(self.member_id, self.generation, self.instance_id, last=True),
                           sent_at=in_flight)
                self.hb_in_flight = True
            self.out.append(("control", m.COORDINATOR, m.Unquiet(self.member_id, last_arrival, hold=True)))
        self._timer(("hb",), None)
        self._timer(("commit",), None)

    # ------------------------------------------------------------------ commits

    def _arm_commit(self, now: float) -> None:
        if not self.quiet and self.alive:
            self._timer(("commit",), now + self.config.auto_commit_interval_s)

    def _commit(self, now: float, why: str) -> None:
        """Commit offsets of owned partitions (ConsumerCoordinator.sendOffsetCommitRequest)."""
        if not self.owned:
            return
        if self.state != STABLE or self.generation < 0:
            if self.state in (PREPARING_REBALANCE, COMPLETING_REBALANCE) and why == "auto-commit":
                self._event("commit_failed", "RebalanceInProgress (client side)")
            return
        self._send(m.OffsetCommitRequest(self.member_id, self.generation, self.instance_id, len(self.owned)))
