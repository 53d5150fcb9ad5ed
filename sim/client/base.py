"""The consumer client both group protocols share, as a sans-I/O core: ``ConsumerClient``.

Kafka's consumer keeps the group protocol apart from the rest of the client: the classic
``ConsumerCoordinator`` extends ``AbstractCoordinator`` and the consumer protocol's
``ConsumerMembershipManager`` extends ``AbstractMembershipManager``, while fetch positions,
committed offsets, the rebalance listener and the poll loop belong to the consumer itself. Here
``ConsumerClient`` is that rest, and its two subclasses are the protocols:

- ``sim.client.classic.Member``: the classic protocol (JoinGroup / SyncGroup / Heartbeat, EAGER or
  COOPERATIVE rebalancing, the leader running the assignor);
- ``sim.client.consumer.ConsumerMember``: the consumer group protocol (KIP-848,
  ConsumerGroupHeartbeat, the coordinator assigning, the member reconciling).

What lives here: the poll loop's timing, the owned partitions with their fluid backlog and
positions, offset fetches for new partitions, manual and synchronous commits, the rebalance
listener's callbacks (a busy poll thread), pauses, and the plumbing that turns all of it into
effects (``sim.wire.messages``). A core never reads the clock: ``now`` is passed in.

What a protocol fills in (declared below as abstract methods): the entry points an actor calls
(``start``, ``crash``, ``close``, ``pause``, ``resume``, ``handle``, ``on_timer``,
``on_control``), ``settled`` (the member's part of an episode's end), ``_poll`` (what poll() does
for the group protocol), and the commit hooks (``_send_commit``, ``_commit_refused``,
``_commit_error``, ``_is_fenced``). Each protocol's member states are an enum of
``sim.client.states`` whose states list the states they may be entered from (as Kafka's
``MemberState`` lists its valid previous states); a client changes state only through
``_transition``, which checks every move on every run (``IllegalTransition`` is a simulator bug).

The poll loop. KafkaConsumer.poll() runs the group protocol between batches of at most
max.poll.records. The heartbeat thread (classic) or the background thread (consumer protocol)
and the network callbacks only *flag* things; the poll thread acts on them at its next poll()
(rebalance callbacks, onPartitionsLost after fencing, the assignment after a rebalance). Kafka
defines this mechanism, not its timing; our model of the timing is:

- a batch takes ``max_poll_records / capacity`` seconds while the member has a backlog (lag it
  inherited with new partitions or built up while stalled or paused, or production above its
  capacity); when it keeps up, batches shrink with the load: ``max_poll_records / capacity *
  rate / capacity`` (continuous at rate = capacity); a member with nothing to process polls at
  once;
- a flag raised while the poll thread is processing is handled after a delay drawn uniformly
  from [0, batch time), from the member's own random stream (a child of its actor's stream, so
  latency draws never shift it).

Rebalance listener callbacks run in the poll thread: while one runs the member processes nothing
(a ``stalled`` interval).

Manual commits (``commit_mode`` ``sync-per-batch`` / ``async-per-batch``, enable.auto.commit=false).
The loop is ``poll(); process(batch); commitSync()`` (or ``commitAsync()``), with the usual
rebalance listener that calls commitSync() in onPartitionsRevoked, and a commitSync() before
close(); onPartitionsLost commits nothing. Our model of the loop's timing: a batch ends every
``max_poll_records / capacity`` seconds (a full batch at capacity; when the member keeps up, the
time its smaller batch's records take to arrive), and it commits the member's position then. A
commitSync() blocks the poll thread (no processing, flags wait) until its answer, so a member
with a backlog processes ``max_poll_records`` per batch time plus a round trip; a commitAsync()
does not block. Each protocol says when a commit is refused on the client (``_commit_refused``);
the application catches the exception and carries on, so those records wait for the next commit.

Position floors (our model, not Kafka's). The fluid model gives a member's partitions one shared
lag, so its position drops when it takes on a partition with a backlog. A partition's own position
never goes back, though: each partition keeps a floor (where the member started it, or the shared
position when a new backlog pulled that down), and commits and hand-overs use the higher of the
two. Without floors a lagging member that took over a partition and handed it on before catching
up committed it behind its previous owner, and the next owner counted records as processed twice
that nobody processed twice.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, cast

import numpy as np

from assignors import TopicPartition
from sim.client.handoffs import Handoffs
from sim.client.states import ClientState
from sim.config import ConsumerConfig
from sim.errors import IllegalTransition
from sim.kernel.rng import LazyGenerator
from sim.observe.events import FirstRecord, Reprocessed
from sim.wire import messages as m

OFFSET_TIMERS = ("fetch_timeout", "fetch_retry", "first_record")

# Errors a commitSync() retries (RetriableException): the coordinator moved or the request timed out.
RETRIABLE_COMMIT_ERRORS = (m.COORDINATOR_NOT_AVAILABLE, "request timed out")

CLOSE_TIMEOUT_S = (
    30.0  # KafkaConsumer.close() without a timeout (ConsumerUtils.DEFAULT_CLOSE_TIMEOUT_MS)
)

# An effect: a plain tuple whose first item says what it is ("send", "timer", "event", "open",
# "close", "control", "violation", "settled_changed"; see sim.kernel.queue.Actor.apply).
Effect = tuple[Any, ...]


# Below this many steps a plain loop is cheaper than numpy's.
_STEPS_IN_PYTHON = 64


def schedule_through(start: float, step: float, limit: float, inclusive: bool) -> Sequence[float]:
    """The instants a timer re-armed ``step`` after each expiry fires at from ``start`` on, up to
    ``limit`` (included with ``inclusive``): each the previous plus ``step``, rounded as those
    additions round (``np.add.accumulate`` adds in order, so a long elided stretch costs one
    numpy pass instead of a Python loop per instant)."""
    out: list[float] = []
    t = start
    while t < limit or (inclusive and t == limit):
        out.append(t)
        if len(out) == _STEPS_IN_PYTHON:
            break
        t = t + step
    else:
        return out
    # many: in numpy, from the last instant taken, with room for rounding in the estimate
    n = int((limit - t) / step) + 3
    while True:
        seq = np.empty(n + 1)
        seq[0] = t
        seq[1:] = step
        np.add.accumulate(seq, out=seq)
        k = int(np.searchsorted(seq, limit, side="right" if inclusive else "left"))
        if k <= n:
            return out + seq[1:k].tolist()
        n *= 2  # (not reached: the estimate leaves room)


class ConsumerClient(abc.ABC):
    """One consumer client's protocol-independent state and behaviour. See the module docstring."""

    # The state a new client starts in (one of its protocol's member states, sim.client.states);
    # set by each protocol.
    INITIAL_STATE: ClassVar[ClientState]
    # The rebalance protocol: EAGER or COOPERATIVE (classic), CONSUMER (KIP-848).
    protocol: str

    def __init__(
        self,
        name: str,
        config: ConsumerConfig,
        topics: tuple[str, ...],
        sample_latency: Callable[[], float],
        elide_heartbeats: bool,
        *,
        rates: Mapping[str, float] | None,
        handoffs: Handoffs | None,
        poll_rng: np.random.Generator | LazyGenerator | None,
        rank: int,
        member_id: str = "",
    ):
        self.name = name
        self.rank = rank  # the client's rank in the kernel's tie order
        self.config = config
        # The config's durations in seconds, read once: they are properties of the config
        # (milliseconds / 1000, the same floats), read at every heartbeat, request and poll.
        self.heartbeat_interval_s = config.heartbeat_interval_s
        self.request_timeout_s = config.request_timeout_s
        self.retry_backoff_s = config.retry_backoff_s
        self.auto_commit_interval_s = config.auto_commit_interval_s
        self.session_timeout_s = config.session_timeout_s
        self.max_poll_interval_s = config.max_poll_interval_s
        self.topics = tuple(topics)
        self.instance_id = name if config.static else None
        self.elide = elide_heartbeats
        self._sample_latency = sample_latency
        self._rates = rates or {}  # production rate per partition of each topic
        self._handoffs = handoffs
        self._poll_rng = poll_rng if poll_rng is not None else np.random.default_rng(0)
        self.input_rank = -1  # kernel rank of the input being handled (set by the actor)

        self.state: ClientState = self.INITIAL_STATE
        self.member_id = member_id
        self.owned: set[TopicPartition] = set()
        # the assignment's list of partitions that ``owned`` holds exactly, while nothing else
        # changed it: the next classic SyncGroup's list, if equal, moves nothing (compared as the
        # assignor's integer arrays, no TopicPartition built or hashed)
        self._owned_as: Sequence[TopicPartition] | None = None
        self._owned_changes = 0  # calls of _set_owned that changed ``owned``
        self._owned_sorted: tuple[TopicPartition, ...] | None = None  # see _owned_tuple
        self.alive = False
        self.failed = False
        self.closing = False
        self.close_requested = False
        self.paused_at: float | None = None
        self.busy = False  # the poll thread is in a callback or a wait
        self._after_busy: Callable[[float], None] | None = None
        self.started_at = 0.0
        # heartbeats (each protocol's own; these are what both read)
        self.hb_enabled = False  # in the group: heartbeats and the poll timer apply
        # heartbeats sent and not answered: the classic heartbeat thread pipelines them, the
        # consumer protocol has one in flight at most
        self.hb_in_flight = 0
        self.last_hb_sent = 0.0
        self.quiet = False  # heartbeats elided (each protocol's docstring)
        self.quiet_epoch_seen = 0
        self.quiet_arrival = 0.0
        # poll thread
        self.rate_owned = 0.0  # records/s produced into the owned partitions
        self.backlog = 0.0  # records owned but not yet processed (fluid)
        self._floors: dict[TopicPartition, float] = {}  # partitions' own positions (docstring)
        self._backlog_t = 0.0
        self.commit_seq = 0
        self.commit_ok = True  # the last commit attempt succeeded
        self._release_cause: str | None = None  # why partitions are being given up (crash)
        self.fetch_seq = 0
        self.stalls = 0  # open causes of the ``stalled`` interval (see _stall_open)
        self.fetches: dict[
            int, tuple[float, tuple[TopicPartition, ...]]
        ] = {}  # OffsetFetch in flight
        self.first_pending: set[int] = set()  # fetches whose first records are on their way
        self.sync_commit: list | None = None  # commitSync() blocking the poll thread: [seq, then,
        #                                         deadline, offsets, position_s, label, retries]
        self.commit_sent: dict[
            int, tuple[int, str]
        ] = {}  # seq -> (generation, member id) sent with
        self.timers: dict[tuple, float] = {}
        self.out: list[Effect] = []

    # ------------------------------------------------------------------ what a protocol fills in

    @property
    @abc.abstractmethod
    def generation(self) -> int:
        """The generation (classic) or member epoch (consumer protocol) the client is in; events
        carry it. (A property, so that a protocol may keep it as another attribute.)"""

    @abc.abstractmethod
    def start(self, now: float) -> list[Effect]:
        """The process starts: subscribe and join."""

    @abc.abstractmethod
    def crash(self, now: float) -> list[Effect]:
        """The process dies: no leave, no callbacks."""

    @abc.abstractmethod
    def close(self, now: float) -> list[Effect]:
        """KafkaConsumer.close(): revoke (commit) what it owns, then leave."""

    @abc.abstractmethod
    def pause(self, now: float) -> list[Effect]:
        """GC or debugger: nothing runs from now on (the actor holds inputs back)."""

    @abc.abstractmethod
    def resume(self, now: float) -> list[Effect]:
        """The process runs again with its stale state."""

    @abc.abstractmethod
    def handle(self, now: float, msg: Any) -> list[Effect]:
        """A response from the coordinator."""

    @abc.abstractmethod
    def on_timer(self, now: float, key: tuple, at: float) -> list[Effect]:
        """A timer set with ``_timer`` expired (stale ones, superseded since, do nothing)."""

    @abc.abstractmethod
    def on_control(self, now: float, note: Any) -> list[Effect]:
        """A note outside the protocol: heartbeat elision's ``Wake``, a metadata change, a
        network fault."""

    @property
    @abc.abstractmethod
    def settled(self) -> bool:
        """In the group, nothing in progress, processing: this member's part of an episode's end."""

    @abc.abstractmethod
    def _poll(self, now: float) -> None:
        """What poll() does for the group protocol when the poll thread gets to it."""

    @abc.abstractmethod
    def _is_fenced(self) -> bool:
        """Whether the group no longer counts this member as the owner of what it holds."""

    @abc.abstractmethod
    def _send_commit(self, now: float, offsets: tuple, position_s: float) -> int:
        """Send an OffsetCommit of ``offsets`` at ``position_s``; returns its sequence number."""

    @abc.abstractmethod
    def _commit_refused(self) -> str | None:
        """Why a commit would fail on the client now, without a request (None: it may be sent)."""

    @abc.abstractmethod
    def _commit_error(self, now: float, sent: tuple[int, str] | None, error: str) -> None:
        """A commit (not the protocol's own before a rebalance) failed with ``error``."""

    # ------------------------------------------------------------------ member state

    def _transition(self, new: ClientState) -> None:
        """Enter state ``new``, checked against its valid previous states on every run."""
        if self.state not in new.valid_previous_states():
            raise IllegalTransition(f"{self.name}: member cannot go from {self.state} to {new}")
        self.state = new

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

    # ------------------------------------------------------------------ owned partitions and positions

    def _position_s(self, now: float) -> float:
        """Production time up to which the owned partitions are processed: they share the
        member's lag (its fluid backlog over their production rate)."""
        self._advance(now)
        return now - self.backlog / self.rate_owned if self.rate_owned > 0 else now

    def _floor(self, tp: TopicPartition, position_s: float) -> float:
        """``tp``'s own position when the shared one is ``position_s`` (module docstring)."""
        f = self._floors.get(tp)
        return position_s if f is None or f <= position_s else f

    def _ahead(self, offsets, position_s: float) -> tuple:
        """The partitions of a commit at ``position_s`` whose own position is further."""
        floors = self._floors
        if not floors:
            return ()
        if max(floors.values()) <= position_s:
            floors.clear()  # the shared position has caught up with every floor
            return ()
        return tuple(
            (tp, f) for tp in offsets if (f := floors.get(tp)) is not None and f > position_s
        )

    def _ahead_through(self, ticks: Sequence[float]) -> None:
        """What commits at ``ticks`` (ascending) do besides their requests: integrate the backlog
        tick by tick and drop the floors once the shared position passes them. Caught up and
        processing (``_advance`` keeps a backlog of 0 at 0), each position is the tick itself, so
        only the last tick can matter."""
        if not ticks:
            return
        cap = self.config.capacity
        for tick in ticks:
            if not self.backlog and self.processing and self.rate_owned <= cap:
                break  # caught up from here on: the last tick decides (above)
            self._ahead((), self._position_s(tick))
        else:
            return
        self._ahead((), ticks[-1])

    def _raise_floors(self, now: float) -> None:
        """New partitions (and the backlog their committed offsets bring) will pull the shared
        position down: the partitions already owned keep the position they have reached."""
        if not self.backlog:
            return  # caught up: the shared position is ``now`` and only rises
        position = self._position_s(now)
        floors = self._floors
        for tp in self.owned:
            if tp not in floors or floors[tp] < position:
                floors[tp] = position

    def _record_progress(self, now: float) -> None:
        """Pausing: what it processed so far is visible to an owner that takes over meanwhile
        (it is fenced by then), which re-processes from the committed offset up to here."""
        if self._handoffs is not None and self.owned:
            position = self._position_s(now)
            for tp in self.owned:
                self._handoffs.progress(tp, now, self._floor(tp, position), "zombie")

    def _release_reason(self) -> str:
        """Why partitions given up now may be processed again by their next owner."""
        if self._release_cause is not None:
            return self._release_cause
        if self._is_fenced():
            return "fenced"  # lost (onPartitionsLost: no commit) or a zombie
        return "uncommitted" if self.commit_ok else "failed_commit"

    def _owned_tuple(self) -> tuple[TopicPartition, ...]:
        """``owned`` in TopicPartition order, sorted once per change of ``owned`` (commits and
        JoinGroups send it again and again)."""
        t = self._owned_sorted
        if t is None:
            t = self._owned_sorted = tuple(sorted(self.owned))
        return t

    def _set_owned(self, now: float, add=(), remove=()) -> None:
        self._advance(now)
        if add or remove:
            self._owned_as = self._owned_sorted = None
            self._owned_changes += 1
        rates = self._rates
        before = self.rate_owned
        if remove and self._handoffs is not None:
            position, cause = self._position_s(now), self._release_reason()
        floors = self._floors
        for tp in remove:
            self.owned.discard(tp)
            self.rate_owned -= rates.get(tp.topic, 0.0)
            self.out.append(("close", "owned", self.name, tp.topic, tp.partition))
            if self._handoffs is not None:
                self._handoffs.release(tp, now, self._floor(tp, position), cause)
        if remove:
            if not self.owned:
                self.rate_owned = 0.0
            # the backlog leaves with its partitions, in proportion to their production
            self.backlog = (
                self.backlog * self.rate_owned / before if before > 0 and self.owned else 0.0
            )
        if add and self.owned:
            self._raise_floors(now)
        for tp in add:
            if floors:
                floors.pop(tp, None)  # a new start: its floor comes with its committed offset
            self.owned.add(tp)
            self.rate_owned += rates.get(tp.topic, 0.0)
            self.out.append(("open", "owned", self.name, tp.topic, tp.partition))
        if add:
            self._fetch_offsets(now, tuple(add))
            self._arm_batch(now)

    # ------------------------------------------------------------------ commits (manual and synchronous)

    def _commit_sync(
        self,
        now: float,
        then: Callable[[float], None],
        offsets: tuple | None = None,
        position_s: float | None = None,
        label: str = "commitSync",
        timeout_s: float | None = None,
    ) -> None:
        """commitSync(): the poll thread waits for the answer, retrying retriable errors until
        ``timeout_s`` (default.api.timeout.ms unless given); ``then(t)`` runs afterwards, whatever
        the outcome (the application catches CommitFailedException / RebalanceInProgressException)."""
        if offsets is None:
            offsets = self._owned_tuple()
            position_s = self._position_s(now) if offsets else now
        if not offsets:
            then(now)
            return
        refused = self._commit_refused()
        if refused is not None:
            self._event("commit_failed", f"{label}: {refused}")
            self.commit_ok = False
            then(now)
            return
        self._advance(now)
        if self.sync_commit is not None:
            # close() while a commitSync was still retrying: that one is given up (its stall ends)
            self._timer(("sync_commit", self.sync_commit[0]), None)
            self._timer(("sync_commit_retry", self.sync_commit[0]), None)
            self._end_sync_commit()
        seq = self._send_commit(now, offsets, cast(float, position_s))  # (given with ``offsets``)
        deadline = now + (self.config.default_api_timeout_s if timeout_s is None else timeout_s)
        self.sync_commit = [seq, then, deadline, offsets, position_s, label, 0]
        self._timer(("sync_commit", seq), now + self.request_timeout_s)

    def _sync_commit_answered(self, now: float, error: str) -> None:
        sc = self.sync_commit
        assert sc is not None  # (answered or timed out: one is waiting)
        seq, then, deadline, _offsets, _pos, label, _retries = sc
        self._timer(("sync_commit", seq), None)
        if error in RETRIABLE_COMMIT_ERRORS and now + self.retry_backoff_s < deadline:
            self._event("commit_failed", f"{label}: {error} (retried)")
            if sc[6] == 0:
                # stuck, not a routine round trip: the poll thread counts as stalled from now on
                self._stall_open()
            sc[6] += 1
            self._timer(("sync_commit_retry", seq), now + self.retry_backoff_s)
            return
        self._advance(now)
        self._end_sync_commit()
        self.commit_ok = error == m.NONE
        sent = self.commit_sent.pop(seq, None)
        if error != m.NONE:
            self._event("commit_failed", f"{label}: {error}")
            self._commit_error(now, sent, error)
        then(now)

    def _end_sync_commit(self) -> None:
        sc, self.sync_commit = self.sync_commit, None
        if sc is not None and sc[6] > 0:
            self._stall_close()

    def _sync_commit_timer(self, now: float, key: tuple) -> None:
        sc = self.sync_commit
        if sc is None or sc[0] != key[1]:
            return
        if key[0] == "sync_commit":
            self._sync_commit_answered(now, "request timed out")
            return
        refused = self._commit_refused()  # sync_commit_retry: send again
        if refused is not None:
            self._sync_commit_answered(now, refused)
            return
        sc[0] = self._send_commit(now, sc[3], sc[4])
        self._timer(("sync_commit", sc[0]), now + self.request_timeout_s)

    def _commit_async(self, now: float) -> None:
        """commitAsync(): sent and never retried; a failure only shows in its callback."""
        if not self.owned:
            return
        refused = self._commit_refused()
        if refused is not None:
            self._event("commit_failed", f"commitAsync: {refused}")
            self.commit_ok = False
            return
        self._send_commit(now, self._owned_tuple(), self._position_s(now))

    def _arm_batch(self, now: float) -> None:
        """The manual commit modes: the end of the next poll batch."""
        if (
            not self.config.enable_auto_commit
            and self.alive
            and self.owned
            and ("batch",) not in self.timers
        ):
            self._timer(("batch",), now + self.config.poll_batch_s)

    def _batch_done(self, now: float) -> None:
        """A poll batch is processed: commitSync() or commitAsync(), then the next poll()."""
        if not self.owned:
            return
        if not self.processing:  # in a callback or paused: the loop goes on after it
            self._arm_batch(now)
            return
        if self.config.commit_mode == "sync-per-batch":
            self._commit_sync(now, self._after_batch_commit)
        else:
            self._commit_async(now)
            self._arm_batch(now)

    def _after_batch_commit(self, now: float) -> None:
        self._poll(now)
        self._arm_batch(now)

    def _revoke_callback(
        self,
        now: float,
        cost_s: float,
        then: Callable[[float], None],
        offsets: tuple | None = None,
        position_s: float | None = None,
    ) -> None:
        """onPartitionsRevoked: in the manual commit modes the listener first calls commitSync()
        (the poll thread is in the callback meanwhile), then spends its own cost."""
        if offsets is None:
            offsets = self._owned_tuple()
            position_s = self._position_s(now)
        if self.config.enable_auto_commit or not offsets:
            self._run_callback(now, "revoke", cost_s, then)
            return
        self._advance(now)
        self.busy = True
        self._after_busy = None
        self._stall_open()

        def rest(t: float) -> None:
            self._after_busy = then
            self._timer(("callback",), t + cost_s)

        self._commit_sync(now, rest, offsets, position_s, "commitSync in onPartitionsRevoked")

    def _commit_stuck(self) -> bool:
        return self.sync_commit is not None and self.sync_commit[6] > 0

    # ------------------------------------------------------------------ committed offsets of new partitions

    def _fetch_offsets(self, now: float, partitions: tuple[TopicPartition, ...]) -> None:
        """ConsumerCoordinator.refreshCommittedOffsetsIfNeeded: new partitions have no position
        until their committed offsets are fetched."""
        self._send_fetch(now, now, partitions)

    def _send_fetch(
        self, now: float, assigned_at: float, partitions: tuple[TopicPartition, ...]
    ) -> None:
        self.fetch_seq += 1
        self.fetches[self.fetch_seq] = (assigned_at, partitions)
        self._send(m.OffsetFetchRequest(self.member_id, partitions, self.fetch_seq))
        # NetworkClient: a request unanswered within request.timeout.ms fails; the consumer
        # retries the fetch of committed offsets after retry.backoff.ms.
        self._timer(("fetch_timeout", self.fetch_seq), now + self.request_timeout_s)

    def _offset_timer(self, now: float, key: tuple) -> None:
        """The OffsetFetch timeout and retry, and the first records of new partitions."""
        kind = key[0]
        if kind in ("fetch_timeout", "fetch_retry"):
            pending = self.fetches.pop(key[1], None)
            if pending is None:
                return
            assigned_at, partitions = pending
            still = tuple(tp for tp in partitions if tp in self.owned)
            if not still:
                # settled() may turn true here: say so (the consumer protocol's run re-checks
                # whether the group settled only when a core records an event)
                self._event(
                    "offset_fetch_dropped",
                    "request timed out; its partitions were revoked"
                    if kind == "fetch_timeout"
                    else "its partitions were revoked",
                )
            elif kind == "fetch_timeout":
                self._event("offset_fetch_failed", "request timed out")
                self.fetches[key[1]] = pending  # keep settled() false during the backoff
                self._timer(("fetch_retry", key[1]), now + self.retry_backoff_s)
            else:
                self._send_fetch(now, assigned_at, still)
        elif kind == "first_record":
            _, seq, assigned_at, count = key
            self.first_pending.discard(seq)
            self._event("first_record", FirstRecord(count, now - assigned_at).encode())

    def _on_offset_fetch(self, now: float, r: m.OffsetFetchResponse) -> None:
        """Positions from the committed offsets (auto.offset.reset where there is none); the lag
        inherited and the records this member will process a second time, by cause."""
        pending = self.fetches.pop(r.seq, None)
        if pending is None:
            return
        self._timer(("fetch_timeout", r.seq), None)
        assigned_at, _ = pending
        self._advance(now)
        rates = self._rates
        handoffs = self._handoffs
        earliest = self.config.auto_offset_reset == "earliest"
        again: dict[str, list] = {}  # cause -> [records, partitions (an int), rate]
        fetched = 0
        waiting = False
        floors = self._floors
        for tp, committed in zip(r.partitions, r.committed, strict=True):
            if tp not in self.owned:
                continue  # revoked again before its offsets arrived
            fetched += 1
            rate = rates.get(tp.topic, 0.0)
            waiting = waiting or rate <= 0
            if committed is not None:
                start = committed
            elif earliest:
                start = handoffs.created(tp) if handoffs is not None else 0.0
            else:
                start = assigned_at  # latest: the log end when it was assigned
            # The fluid model processes the partition from its assignment on; what lies before
            # that (from the start position) is the backlog it inherits.
            self.backlog += rate * max(0.0, assigned_at - start)
            floors[tp] = start
            if handoffs is not None:
                high_water, cause = handoffs.processed(tp, now)
                if high_water is not None and high_water > start and rate > 0:
                    agg = again.setdefault(cause or "uncommitted", [0.0, 0, 0.0])
                    agg[0] += rate * (high_water - start)
                    agg[1] += 1
                    agg[2] += rate
        for cause in sorted(again):
            records, n, rate = again[cause]
            self._event("reprocessed", Reprocessed(records, n, rate, cause).encode())
        if fetched:
            # The first fetch returns as soon as records are there (fetch.min.bytes=1): one round
            # trip to the leader, modelled as the coordinator's; fetch.max.wait.ms when none are.
            cap = self.config.fetch_max_wait_ms / 1000.0
            delay = cap if waiting else min(cap, 2.0 * self._sample_latency())
            self.first_pending.add(r.seq)
            self._timer(("first_record", r.seq, assigned_at, fetched), now + delay)
        elif not again:
            self._event("offset_fetch_dropped", "its partitions were revoked before the answer")

    # ------------------------------------------------------------------ the poll loop

    @property
    def processing(self) -> bool:
        """The poll thread processes records: not in a callback, a pause or a commitSync()."""
        return self.alive and not self.busy and self.paused_at is None and self.sync_commit is None

    def _advance(self, now: float) -> None:
        """Integrate the fluid backlog up to ``now`` (call before anything that changes it)."""
        dt = now - self._backlog_t
        if dt <= 0:
            return
        self._backlog_t = now
        if self.processing:
            if self.backlog > 0 or self.rate_owned > self.config.capacity:
                self.backlog = max(
                    0.0, self.backlog + (self.rate_owned - self.config.capacity) * dt
                )
        else:
            self.backlog += self.rate_owned * dt

    def batch_s(self, now: float) -> float:
        """How long the batch being processed at ``now`` takes (see the module docstring)."""
        self._advance(now)
        if not self.owned:
            return 0.0
        cap = self.config.capacity
        full = self.config.max_poll_records / cap
        if self.backlog > 0 or self.rate_owned >= cap:
            return full
        return full * self.rate_owned / cap

    def _wake_poll(self, now: float) -> None:
        """Something the poll thread handles in poll() was flagged by another thread: it acts at
        the end of the current batch (a draw from [0, batch time)), at once if it is idle, or when
        its running callback returns."""
        if not self.processing or ("poll",) in self.timers:
            return
        batch = self.batch_s(now)
        if batch <= 0:
            self._poll(now)
        else:
            self._timer(("poll",), now + batch * float(self._poll_rng.random()))

    # ------------------------------------------------------------------ callbacks (poll thread)

    def _stall_open(self) -> None:
        """The poll thread stops processing (a callback, a commit it waits for). Causes overlap (a
        commitSync stuck in retries, then a callback): one ``stalled`` interval covers them all."""
        if self.stalls == 0:
            self.out.append(("open", "stalled", self.name, None, None))
        self.stalls += 1

    def _stall_close(self) -> None:
        self.stalls -= 1
        if self.stalls == 0:
            self.out.append(("close", "stalled", self.name, None, None))

    def _run_callback(
        self, now: float, kind: str, cost_s: float, then: Callable[[float], None]
    ) -> None:
        if self.busy:
            # The poll thread is in a callback already (close()'s onPartitionsRevoked when a
            # JoinGroup answer makes this member the leader): this one runs after it, as on one
            # thread. Replacing it lost the first one's continuation: a static member closed
            # mid-rebalance never finished closing, and its group never settled.
            first = self._after_busy

            def after(t: float) -> None:
                if first is not None:
                    first(t)
                if self.alive:
                    self._run_callback(t, kind, cost_s, then)

            self._after_busy = after
            return
        if cost_s <= 0:
            then(now)
            return
        self._advance(now)
        self.busy = True
        self._after_busy = then
        self._stall_open()
        self._timer(("callback",), now + cost_s)
        if self.hb_enabled and cost_s > self.max_poll_interval_s:
            self._timer(("poll_timeout",), now + self.max_poll_interval_s)

    def _callback_done(self, now: float) -> None:
        self._advance(now)
        self.busy = False
        self._stall_close()
        self._timer(("poll_timeout",), None)
        then, self._after_busy = self._after_busy, None
        if then is not None:
            then(now)
        self._poll(now)

    # ------------------------------------------------------------------ pauses

    def _enter_pause(self, now: float) -> None:
        self._record_progress(now)
        self._advance(now)
        self.paused_at = now
        self._event("pause")
        self.out.append(("open", "paused", self.name, None, None))

    def _leave_pause(self, now: float) -> float:
        """Back from a pause; returns how long it lasted."""
        assert self.paused_at is not None
        paused_for = now - self.paused_at
        self._advance(now)
        self.paused_at = None
        self.out.append(("close", "paused", self.name, None, None))
        self._event("resume", f"paused_for={paused_for:.3f}s")
        return paused_for
