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
  tells it that it was removed, and until its next poll() after that.

The poll loop. KafkaConsumer.poll() runs the group protocol (ConsumerCoordinator.poll) between
batches of at most max.poll.records. The heartbeat thread and the network callbacks only *flag*
things (rejoin needed, generation reset, SyncGroup done); the poll thread acts on them at its next
poll(): EAGER revocation and JoinGroup (onJoinPrepare), onPartitionsLost after fencing, and
onJoinComplete after SyncGroup (assignment, COOPERATIVE revocation and the follow-up JoinGroup).
Kafka defines this mechanism, not its timing; our model of the timing is:

- a batch takes ``max_poll_records / capacity`` seconds while the member has a backlog (lag it
  inherited with new partitions or built up while stalled or paused, or production above its
  capacity); when it keeps up, batches shrink with the load: ``max_poll_records / capacity *
  rate / capacity`` (continuous at rate = capacity); a member with nothing to process polls at
  once;
- a flag raised while the poll thread is processing is handled after a delay drawn uniformly
  from [0, batch time), from the member's own random stream (a child of its actor's stream, so
  latency draws never shift it);
- EAGER onJoinPrepare marks every partition pending revocation (nothing more is processed) and
  waits for its offset commit before onPartitionsRevoked and JoinGroup (KAFKA-13310).

Manual commits (``commit_mode`` ``sync-per-batch`` / ``async-per-batch``, enable.auto.commit=false).
The loop is ``poll(); process(batch); commitSync()`` (or ``commitAsync()``), with the usual
rebalance listener that calls commitSync() in onPartitionsRevoked, and a commitSync() before
close(); onPartitionsLost commits nothing. Our model of the loop's timing: a batch ends every
``max_poll_records / capacity`` seconds (a full batch at capacity; when the member keeps up, the
time its smaller batch's records take to arrive), and it commits the member's position then. A
commitSync() blocks the poll thread (no processing, flags wait) until its answer, so a member
with a backlog processes ``max_poll_records`` per batch time plus a round trip; a commitAsync()
does not block. Commits are refused on the client while the member is rebalancing
(RebalanceInProgressException) or out of the group (CommitFailedException), as
ConsumerCoordinator.sendOffsetCommitRequest refuses them; the application catches the exception
and carries on, so those records wait for the next commit.

Position floors (our model, not Kafka's). The fluid model gives a member's partitions one shared
lag, so its position drops when it takes on a partition with a backlog. A partition's own position
never goes back, though: each partition keeps a floor (where the member started it, or the shared
position when a new backlog pulled that down), and commits and hand-overs use the higher of the
two. Without floors a lagging member that took over a partition and handed it on before catching
up committed it behind its previous owner, and the next owner counted records as processed twice
that nobody processed twice.

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
from operator import attrgetter

import numpy as np

from assignors import (
    COOPERATIVE,
    EAGER,
    Assignment,
    Subscription,
    TopicPartition,
    assignment_topics,
    get_assignor,
)
from assignors.userdata import encode_sticky_user_data

from . import messages as m
from .config import AssignorCost, ConsumerConfig

UNJOINED = "UNJOINED"
PREPARING_REBALANCE = "PREPARING_REBALANCE"
COMPLETING_REBALANCE = "COMPLETING_REBALANCE"
STABLE = "STABLE"

_TOPIC = attrgetter("topic")
_PARTITION = attrgetter("partition")


OFFSET_TIMERS = ("fetch_timeout", "fetch_retry", "first_record")

# Errors a commitSync() retries (RetriableException): the coordinator moved or the request timed out.
RETRIABLE_COMMIT_ERRORS = (m.COORDINATOR_NOT_AVAILABLE, "request timed out")

# AbstractCoordinator's JoinGroup request timeout: rebalance timeout plus this margin.
JOIN_TIMEOUT_MARGIN_S = 5.0
CLOSE_TIMEOUT_S = 30.0  # KafkaConsumer.close() without a timeout (ConsumerUtils.DEFAULT_CLOSE_TIMEOUT_MS)


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


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """``np.unique(keys)`` by sorting (numpy's hash-based unique is several times slower here)."""
    keys = np.sort(keys)
    if keys.size > 1:
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
    return keys


def _within(keys: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """Which of ``keys`` are in ``sorted_keys`` (sorted, unique)."""
    if sorted_keys.size == 0:
        return np.zeros(keys.size, dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_keys, keys), sorted_keys.size - 1)
    return sorted_keys[pos] == keys


class _RoundKeys:
    """The owned and assigned partitions of one round's members as integer keys
    ``(member * topics + topic) * width + partition`` (see ``Member._validate_cooperative``).

    An assignor's partition lists that carry integer ``indices`` over their own ``topics`` and
    ``offsets`` (the fast assignors' lists) are converted as arrays, without building their
    ``TopicPartition`` objects; any other sequence of partitions one by one."""

    def __init__(self):
        self.topic_ids: dict[str, int] = {}
        self._owned: list[tuple] = []     # (member, topic ids, partitions) chunks
        self._assigned: list[tuple] = []
        self._lists: dict[int, tuple] = {}  # id(topics) -> (topics, offsets, [(member, indices)])
        self._width = 0

    def _topic_id(self, topic: str) -> int:
        tid = self.topic_ids.get(topic)
        if tid is None:
            tid = self.topic_ids[topic] = len(self.topic_ids)
        return tid

    def _add(self, out: list, member: int, tps) -> None:
        if tps:
            topics = list(map(_TOPIC, tps))
            ids = self.topic_ids
            for topic in set(topics).difference(ids):
                self._topic_id(topic)
            out.append((member, list(map(ids.__getitem__, topics)), list(map(_PARTITION, tps))))

    def add_owned(self, member: int, tps) -> None:
        self._add(self._owned, member, tps)

    def add_assigned(self, member: int, tps) -> None:
        indices = getattr(tps, "indices", None)
        if indices is None:
            self._add(self._assigned, member, tps)
        elif len(indices):
            group = self._lists.get(id(tps.topics))
            if group is None:
                group = self._lists[id(tps.topics)] = (tps.topics, tps.offsets, [])
            group[2].append((member, indices))

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(owned keys, assigned keys); call once, after every ``add_*``."""
        owned = self._columns(self._owned)
        assigned = [self._columns(self._assigned)]
        for topics, offsets, lists in self._lists.values():
            indices = np.concatenate([idx for _, idx in lists]).astype(np.int64, copy=False)
            member = np.repeat(np.array([i for i, _ in lists], dtype=np.int64), [len(idx) for _, idx in lists])
            ranks = np.searchsorted(offsets, indices, side="right") - 1
            tids = np.array([self._topic_id(t) for t in topics], dtype=np.int64)
            assigned.append((member, tids[ranks], indices - offsets[ranks]))
        assigned = tuple(np.concatenate(c) for c in zip(*assigned, strict=True))
        self._width = int(max((c[2].max() for c in (owned, assigned) if c[2].size), default=-1)) + 1
        return self._keys(*owned), self._keys(*assigned)

    def _columns(self, chunks: list[tuple]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        member = np.repeat(np.array([c[0] for c in chunks], dtype=np.int64), [len(c[1]) for c in chunks])
        topic = np.fromiter((t for c in chunks for t in c[1]), dtype=np.int64, count=member.size)
        partition = np.fromiter((p for c in chunks for p in c[2]), dtype=np.int64, count=member.size)
        return member, topic, partition

    def per_member(self) -> int:
        return max(1, len(self.topic_ids) * self._width)

    def _keys(self, member, topic, partition) -> np.ndarray:
        return (member * len(self.topic_ids) + topic) * self._width + partition

    def partition(self, key: int) -> TopicPartition:
        """The partition of a key taken modulo ``per_member()``."""
        names = list(self.topic_ids)
        return TopicPartition(names[key // self._width], key % self._width)


class Handoffs:
    """The world's view of each partition, shared by the members of one run (not protocol state):
    when it was last given up, how far its records had been processed by then (the high-water
    mark of every owner's position, in production time) and why the last owner gave it up.

    A new owner uses it to know how much lag it inherits and how many records it processes a
    second time (from the committed position up to the high-water mark). Members of one instant
    run in any order, so a read at ``now`` must not see a release made at that same instant: each
    partition keeps its last two releases.
    """

    def __init__(self, created: Callable[[TopicPartition], float] = lambda tp: 0.0):
        self._created = created
        # tp -> ((t, high_water, cause), (t, high_water, cause)): the two latest releases
        self._released: dict[TopicPartition, tuple[tuple, tuple]] = {}

    def created(self, tp: TopicPartition) -> float:
        return self._created(tp)

    def release(self, tp: TopicPartition, t: float, position_s: float | None = None,
                cause: str = "") -> None:
        prev = self._released.get(tp)
        pos = t if position_s is None else position_s
        if prev is None:
            self._released[tp] = ((self._created(tp), None, ""), (t, pos, cause))
        elif prev[1][0] != t:
            hw = pos if prev[1][1] is None else max(pos, prev[1][1])
            self._released[tp] = (prev[1], (t, hw, cause))
        else:
            hw = pos if prev[1][1] is None else max(pos, prev[1][1])
            self._released[tp] = (prev[0], (t, hw, cause))

    def progress(self, tp: TopicPartition, t: float, position_s: float, cause: str) -> None:
        """The owner stopped processing ``tp`` at ``position_s`` without giving it up (a pause):
        the high-water mark moves, the release time does not."""
        created = self._created(tp)
        prev = self._released.get(tp) or ((created, None, ""), (created, None, ""))
        last = prev[1]
        if last[1] is None or last[1] < position_s:
            self._released[tp] = (prev[0], (last[0], position_s, cause))

    def _seen(self, tp: TopicPartition, now: float) -> tuple | None:
        prev = self._released.get(tp)
        if prev is None:
            return None
        return prev[1] if prev[1][0] < now else prev[0]

    def since(self, tp: TopicPartition, now: float) -> float:
        """Since when nobody has processed ``tp`` (as seen at ``now``)."""
        seen = self._seen(tp, now)
        return self._created(tp) if seen is None else seen[0]

    def processed(self, tp: TopicPartition, now: float) -> tuple[float | None, str]:
        """(production time up to which ``tp``'s records have been processed by anyone, or None;
        why its last owner gave it up), as seen at ``now``."""
        seen = self._seen(tp, now)
        return (None, "") if seen is None else (seen[1], seen[2])


class Member:
    """A consumer client in a group. See the module docstring."""

    def __init__(self, name: str, config: ConsumerConfig, topics: tuple[str, ...],
                 metadata: Callable[[], tuple[int, dict[str, int]]],
                 sample_latency: Callable[[], float], assignor_cost: AssignorCost,
                 elide_heartbeats: bool = True, *, rates: Mapping[str, float] | None = None,
                 handoffs: Handoffs | None = None, poll_rng: np.random.Generator | None = None,
                 rank: int = 0):
        self.name = name
        self.rank = rank                        # the client's rank in the kernel's tie order
        self.config = config
        self.topics = tuple(topics)
        self._topic_set = (self.topics, frozenset(self.topics))  # (topics, as a set) cache
        self._metadata = metadata              # () -> (version, partitions_per_topic)
        self._sample_latency = sample_latency
        self.assignor_cost = assignor_cost
        self.elide = elide_heartbeats
        self.assignors = {n: new_assignor(n) for n in config.partition_assignment_strategy}
        self.protocol = rebalance_protocol(config.partition_assignment_strategy)
        self.instance_id = name if config.static else None
        self._rates = rates or {}               # production rate per partition of each topic
        self._handoffs = handoffs
        self._poll_rng = poll_rng if poll_rng is not None else np.random.default_rng(0)

        self.state = UNJOINED
        self.member_id = ""
        self.generation = -1
        self.group_protocol: str | None = None
        self.is_leader = False
        self.owned: set[TopicPartition] = set()
        # the assignment's list of partitions that ``owned`` holds exactly, while nothing else
        # changed it: the next SyncGroup's list, if equal, moves nothing (compared as the
        # assignor's integer arrays, no TopicPartition built or hashed)
        self._owned_as: Sequence[TopicPartition] | None = None
        self._owned_changes = 0  # calls of _set_owned that changed ``owned``
        self._owned_sorted: tuple[TopicPartition, ...] | None = None  # see _owned_tuple
        self.last_assignment: Sequence[TopicPartition] | None = None
        self.assignment_generation = -1
        self.max_generation_seen = -1
        self.rejoin_needed = False
        self.join_reason = ""
        self.alive = False
        self.failed = False
        self.closing = False
        self.close_requested = False
        self.paused_at: float | None = None
        self.busy = False
        self._after_busy: Callable[[float], None] | None = None
        self.metadata_version_assigned = -1
        self.started_at = 0.0
        # heartbeat thread
        self.hb_enabled = False
        self.hb_in_flight = 0                   # heartbeats sent and not answered (pipelined)
        self.last_hb_sent = 0.0
        self.hb_anchor = 0.0
        self.hb_n = 1
        self.quiet = False
        self.quiet_epoch_seen = 0
        self.quiet_phase = 0.0
        self.quiet_arrival = 0.0
        self.sync_in_flight = False
        # poll thread
        self.rate_owned = 0.0                   # records/s produced into the owned partitions
        self.backlog = 0.0                      # records owned but not yet processed (fluid)
        self._floors: dict[TopicPartition, float] = {}  # partitions' own positions (docstring)
        self._backlog_t = 0.0
        self.pending_assignment: tuple[int, Assignment] | None = None  # SyncGroup done, not polled
        self.commit_seq = 0
        self.prepare_commit: int | None = None  # onJoinPrepare waits for this commit
        self.commit_ok = True                   # the last commit attempt succeeded
        self._release_cause: str | None = None  # why partitions are being given up (crash)
        self.fetch_seq = 0
        self.stalls = 0  # open causes of the ``stalled`` interval (see _stall_open)
        self.fetches: dict[int, tuple[float, tuple[TopicPartition, ...]]] = {}  # OffsetFetch in flight
        self.first_pending: set[int] = set()    # fetches whose first records are on their way
        self.commit_next: float | None = None   # next auto-commit when heartbeats went quiet
        self.sync_commit: list | None = None    # commitSync() blocking the poll thread: [seq, then,
        #                                         deadline, offsets, position_s, label, retries]
        self.commit_sent: dict[int, tuple[int, str]] = {}  # seq -> (generation, member id) sent with
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
        return tuple((tp, f) for tp in offsets if (f := floors.get(tp)) is not None and f > position_s)

    def _ahead_through(self, ticks: Sequence[float]) -> None:
        """What commits at ``ticks`` (ascending) do besides their requests: integrate the backlog
        tick by tick and drop the floors once the shared position passes them. Caught up and
        processing (``_advance`` keeps a backlog of 0 at 0), each position is the tick itself, so
        only the last tick can matter."""
        if not ticks:
            return
        if self.backlog or not self.processing or self.rate_owned > self.config.capacity:
            for tick in ticks:
                self._ahead((), self._position_s(tick))
        else:
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

    def _is_fenced(self) -> bool:
        return self.generation < 0

    def _release_reason(self) -> str:
        """Why partitions given up now may be processed again by their next owner."""
        if self._release_cause is not None:
            return self._release_cause
        if self._is_fenced():
            return "fenced"            # lost (onPartitionsLost: no commit) or a zombie
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
            self.backlog = self.backlog * self.rate_owned / before if before > 0 and self.owned else 0.0
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

    # ------------------------------------------------------------------ offsets

    def _commit_request(self, now: float) -> m.OffsetCommitRequest:
        """An OffsetCommit of every owned partition at the member's current position."""
        self._settle_commits_before(now)
        self.commit_seq += 1
        owned = self._owned_tuple()
        self.commit_sent[self.commit_seq] = (self.generation, self.member_id)
        position = self._position_s(now)
        return m.OffsetCommitRequest(self.member_id, self.generation, self.instance_id, len(owned),
                                     self.commit_seq, owned, position, self._ahead(owned, position))

    def _send_commit(self, now: float, offsets: tuple, position_s: float) -> int:
        self._settle_commits_before(now)
        self.commit_seq += 1
        self.commit_sent[self.commit_seq] = (self.generation, self.member_id)
        self._send(m.OffsetCommitRequest(self.member_id, self.generation, self.instance_id, len(offsets),
                                         self.commit_seq, offsets, position_s, self._ahead(offsets, position_s)))
        return self.commit_seq

    def _commit_refused(self) -> str | None:
        """ConsumerCoordinator.sendOffsetCommitRequest: only a member Stable in a generation sends
        a commit; otherwise the call fails at once, without a request."""
        if self.state == STABLE and self.generation >= 0:
            return None
        if self.state in (PREPARING_REBALANCE, COMPLETING_REBALANCE):
            return "RebalanceInProgressException (client side)"
        return "CommitFailedException (client side)"

    def _commit_error(self, now: float, sent: tuple[int, str] | None, error: str) -> None:
        """ConsumerCoordinator.OffsetCommitResponseHandler, for a commit that is not onJoinPrepare's."""
        if error == m.REBALANCE_IN_PROGRESS:
            # a rejoin is requested, the generation kept (RebalanceInProgressException)
            if self.state == STABLE:
                self._request_rejoin("offset commit failed since group is already rebalancing")
                self._wake_poll(now)
        elif error in (m.UNKNOWN_MEMBER_ID, m.ILLEGAL_GENERATION):
            unchanged = sent == (self.generation, self.member_id)
            if not unchanged and self.state == PREPARING_REBALANCE:
                return  # already in a newer rebalance: RebalanceInProgressException, nothing reset
            if self.generation >= 0 and self.prepare_commit is None:
                # Kafka resets even a newer generation here (a late answer to an old commit).
                self._reset_generation(f"commit failed: {error}", error)
                self._wake_poll(now)

    # ---- manual commits (shared with sim.consumer_member)

    def _commit_sync(self, now: float, then: Callable[[float], None], offsets: tuple | None = None,
                     position_s: float | None = None, label: str = "commitSync",
                     timeout_s: float | None = None) -> None:
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
        seq = self._send_commit(now, offsets, position_s)
        deadline = now + (self.config.default_api_timeout_s if timeout_s is None else timeout_s)
        self.sync_commit = [seq, then, deadline, offsets, position_s, label, 0]
        self._timer(("sync_commit", seq), now + self.config.request_timeout_s)

    def _sync_commit_answered(self, now: float, error: str) -> None:
        sc = self.sync_commit
        seq, then, deadline, _offsets, _pos, label, _retries = sc
        self._timer(("sync_commit", seq), None)
        if error in RETRIABLE_COMMIT_ERRORS and now + self.config.retry_backoff_s < deadline:
            self._event("commit_failed", f"{label}: {error} (retried)")
            if sc[6] == 0:
                # stuck, not a routine round trip: the poll thread counts as stalled from now on
                self._stall_open()
            sc[6] += 1
            self._timer(("sync_commit_retry", seq), now + self.config.retry_backoff_s)
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
        refused = self._commit_refused()            # sync_commit_retry: send again
        if refused is not None:
            self._sync_commit_answered(now, refused)
            return
        sc[0] = self._send_commit(now, sc[3], sc[4])
        self._timer(("sync_commit", sc[0]), now + self.config.request_timeout_s)

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
        if not self.config.enable_auto_commit and self.alive and self.owned and ("batch",) not in self.timers:
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

    def _revoke_callback(self, now: float, cost_s: float, then: Callable[[float], None],
                         offsets: tuple | None = None, position_s: float | None = None) -> None:
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

    def _fetch_offsets(self, now: float, partitions: tuple[TopicPartition, ...]) -> None:
        """ConsumerCoordinator.refreshCommittedOffsetsIfNeeded: new partitions have no position
        until their committed offsets are fetched."""
        self._send_fetch(now, now, partitions)

    def _send_fetch(self, now: float, assigned_at: float, partitions: tuple[TopicPartition, ...]) -> None:
        self.fetch_seq += 1
        self.fetches[self.fetch_seq] = (assigned_at, partitions)
        self._send(m.OffsetFetchRequest(self.member_id, partitions, self.fetch_seq))
        # NetworkClient: a request unanswered within request.timeout.ms fails; the consumer
        # retries the fetch of committed offsets after retry.backoff.ms.
        self._timer(("fetch_timeout", self.fetch_seq), now + self.config.request_timeout_s)

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
                self._event("offset_fetch_dropped", "request timed out; its partitions were revoked"
                            if kind == "fetch_timeout" else "its partitions were revoked")
            elif kind == "fetch_timeout":
                self._event("offset_fetch_failed", "request timed out")
                self.fetches[key[1]] = pending   # keep settled() false during the backoff
                self._timer(("fetch_retry", key[1]), now + self.config.retry_backoff_s)
            else:
                self._send_fetch(now, assigned_at, still)
        elif kind == "first_record":
            _, seq, assigned_at, count = key
            self.first_pending.discard(seq)
            self._event("first_record", f"count={count} after_s={now - assigned_at:.6f}")

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
        again: dict[str, list[float]] = {}
        fetched = 0
        waiting = False
        floors = self._floors
        for tp, committed in zip(r.partitions, r.committed, strict=True):
            if tp not in self.owned:
                continue                      # revoked again before its offsets arrived
            fetched += 1
            rate = rates.get(tp.topic, 0.0)
            waiting = waiting or rate <= 0
            if committed is not None:
                start = committed
            elif earliest:
                start = handoffs.created(tp) if handoffs is not None else 0.0
            else:
                start = assigned_at           # latest: the log end when it was assigned
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
            self._event("reprocessed", f"records={records:.6f} partitions={n} rate={rate:.6f} cause={cause}")
        if fetched:
            # The first fetch returns as soon as records are there (fetch.min.bytes=1): one round
            # trip to the leader, modelled as the coordinator's; fetch.max.wait.ms when none are.
            cap = self.config.fetch_max_wait_ms / 1000.0
            delay = cap if waiting else min(cap, 2.0 * self._sample_latency())
            self.first_pending.add(r.seq)
            self._timer(("first_record", r.seq, assigned_at, fetched), now + delay)
        elif not again:
            self._event("offset_fetch_dropped", "its partitions were revoked before the answer")

    @property
    def processing(self) -> bool:
        """The poll thread processes records: not in a callback, a pause or a commitSync()."""
        return self.alive and not self.busy and self.paused_at is None and self.sync_commit is None

    @property
    def settled(self) -> bool:
        """Stable, nothing pending, processing (used for the episode end). A commitSync() blocks
        processing for a round trip after every batch; only one that had to be retried counts."""
        return (self.alive and self.state == STABLE and not self.rejoin_needed and not self.busy
                and not self.closing and self.paused_at is None and self.pending_assignment is None
                and not self.fetches and not self.first_pending and not self._commit_stuck())

    def _commit_stuck(self) -> bool:
        return self.sync_commit is not None and self.sync_commit[6] > 0

    # ------------------------------------------------------------------ poll loop timing

    def _advance(self, now: float) -> None:
        """Integrate the fluid backlog up to ``now`` (call before anything that changes it)."""
        dt = now - self._backlog_t
        if dt <= 0:
            return
        self._backlog_t = now
        if self.processing:
            if self.backlog > 0 or self.rate_owned > self.config.capacity:
                self.backlog = max(0.0, self.backlog + (self.rate_owned - self.config.capacity) * dt)
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
        self._release_cause = "crash"
        self._die(now)
        return self._drain()

    def close(self, now: float) -> list[tuple]:
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
                self._commit_sync(now, after_commit, label="commitSync on close", timeout_s=CLOSE_TIMEOUT_S)
            else:
                self._revoke_callback(now, cost, self._finish_close)
        else:
            self._finish_close(now)

    def _finish_close(self, now: float) -> None:
        self._stop_heartbeats(now)
        if (self.instance_id is None and self.member_id and self.state != UNJOINED) or (
                self.instance_id is None and self.member_id and self.state == UNJOINED and self.generation >= 0):
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

    def pause(self, now: float) -> list[tuple]:
        """GC or debugger: from now on nothing runs (the actor holds inputs back)."""
        if not self.alive or self.paused_at is not None:
            return []
        self._stop_heartbeats(now)
        self._enter_pause(now)
        return self._drain()

    def _enter_pause(self, now: float) -> None:
        self._record_progress(now)
        self._advance(now)
        self.paused_at = now
        self._event("pause")
        self.out.append(("open", "paused", self.name, None, None))

    def _leave_pause(self, now: float) -> float:
        """Back from a pause; returns how long it lasted."""
        paused_for = now - self.paused_at
        self._advance(now)
        self.paused_at = None
        self.out.append(("close", "paused", self.name, None, None))
        self._event("resume", f"paused_for={paused_for:.3f}s")
        return paused_for

    def resume(self, now: float) -> list[tuple]:
        """The process runs again with its stale state; held inputs are delivered next."""
        if self.paused_at is None:
            return []
        paused_for = self._leave_pause(now)
        if self.elide and self.member_id:
            self.out.append(("control", m.COORDINATOR, m.Unquiet(self.member_id, None, hold=False)))
        if self.hb_enabled and paused_for >= self.config.max_poll_interval_s and self.state != UNJOINED:
            self._poll_timeout(now)
        elif self.hb_enabled:
            self._timer(("hb",), now)  # overdue: the heartbeat thread sends at once
        if self.state == STABLE:
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
            if generation == self.generation and self.state == STABLE:
                self._on_join_complete(now, assignment)
                return  # it polls again itself
            # joinGroupIfNeeded: the heartbeat thread reset the generation before the callback ran
            self._event("sync_discarded", f"generation {generation} reset before onJoinComplete")
            self._request_rejoin("generation reset before the rebalance callback")
        if not self.rejoin_needed or self.prepare_commit is not None:
            return  # nothing to do, or onJoinPrepare still waits for its commit
        if self.state in (UNJOINED, STABLE):
            self._join_prepare(now)

    def _reset_generation(self, reason: str, error: str | None = None) -> None:
        """AbstractCoordinator.resetStateOnResponseError: forget the generation, and the member id
        too unless ``error`` is ILLEGAL_GENERATION (the member id may still be valid, and a rejoin
        with it does not wait for the old id to time out)."""
        self._event("generation_reset", reason)
        if error != m.ILLEGAL_GENERATION:
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
        prepare_commit = self.owned and self.generation >= 0 and self.state == STABLE
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
            self._timer(("prepare_commit",), now + min(self.config.request_timeout_s,
                                                       self.config.max_poll_interval_s))
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
            self._timer(("prepare_commit",), now + min(self.config.request_timeout_s,
                                                       self.config.max_poll_interval_s))
            return
        self._enter_preparing()
        self._join_prepare_revoke(now)

    def _enter_preparing(self) -> None:
        """initiateJoinGroup: PREPARING_REBALANCE, where the heartbeat thread stays disabled."""
        self.state = PREPARING_REBALANCE  # joining; no second onJoinPrepare meanwhile
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
            self._event("revoke", f"count={len(revoked)} eager")
            cost = self.config.revoke_cost_ms / 1000.0 * len(revoked)

            def done(t, revoked=revoked):
                self._set_owned(t, remove=revoked)
                self._send_join(t)
            self._run_callback(now, "revoke", cost, done)
        else:
            _version, meta = self._metadata()
            gone = sorted(tp for tp in self.owned if tp.topic not in meta or tp.partition >= meta[tp.topic])
            if gone:
                self._event("revoke", f"count={len(gone)} topic deleted")
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
                ud = None if self.last_assignment is None else encode_sticky_user_data(self.last_assignment, None)
            else:
                ud = a.subscription_user_data(self.last_assignment, self.assignment_generation)
            out.append((name, Subscription(self.topics, ud, owned, self.instance_id,
                                           -1 if old_client else self.generation, self.config.rack)))
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

    def _run_callback(self, now: float, kind: str, cost_s: float, then: Callable[[float], None]) -> None:
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
        if self.hb_enabled and cost_s > self.config.max_poll_interval_s:
            self._timer(("poll_timeout",), now + self.config.max_poll_interval_s)

    def _callback_done(self, now: float) -> None:
        self._advance(now)
        self.busy = False
        self._stall_close()
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
            # Heartbeat.failHeartbeat: retry after the backoff
            self.hb_in_flight = 0
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
                self._wake_poll(now)
        elif kind == "sync_timeout":
            if self.state == COMPLETING_REBALANCE and self.sync_in_flight:
                self.sync_in_flight = False
                self._event("sync_failed", "request timed out")
                self.state = UNJOINED
                self._request_rejoin("SyncGroup timed out")
                self._wake_poll(now)
        elif kind == "metadata":
            version, _ = self._metadata()
            if self.is_leader and self.state == STABLE and version != self.metadata_version_assigned:
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

    def on_control(self, now: float, note) -> list[tuple]:
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

    def handle(self, now: float, msg) -> list[tuple]:
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
            self._wake_poll(now)
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
        """ConsumerCoordinator.validateCooperativeAssignment: no partition may be added to one member
        while it is revoked from another in the same round. Two members that both claim a partition
        (a static member that missed a generation, KIP-341) are not a violation when one of them
        keeps it: that partition is revoked from the other but added to nobody.

        It runs on every cooperative round, so it compares integer keys with numpy's set operations
        instead of sets of ``TopicPartition`` (at 10,000 members x 100,000 partitions: tens of
        milliseconds instead of most of a second); only a violation's message names partitions."""
        keys = _RoundKeys()
        for i, (mid, a) in enumerate(result.items()):
            s = subs.get(mid)
            if s is not None:
                keys.add_owned(i, s.owned_partitions)
            keys.add_assigned(i, a.partitions)
        owned, assigned = keys.arrays()
        per_member = keys.per_member()
        owned, assigned = _sorted_unique(owned), _sorted_unique(assigned)
        added = _sorted_unique(assigned[~_within(assigned, owned)] % per_member)
        revoked = _sorted_unique(owned[~_within(owned, assigned)] % per_member)
        for tp in sorted(keys.partition(k) for k in added[_within(added, revoked)].tolist()):
            prev = sorted(mid for mid, s in subs.items() if tp in s.owned_partitions and tp not in getattr(result.get(mid), "partitions", ()))
            to = sorted(mid for mid, a in result.items() if tp in a.partitions)
            self.out.append(("violation", f"cooperative assignment gives {tp} owned by {','.join(prev)} to "
                             f"{','.join(to)} in generation {self.generation}"))

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
        self.state = STABLE
        self.pending_assignment = (self.generation, r.assignment or Assignment())
        self._wake_poll(now)

    def _on_join_complete(self, now: float, assignment: Assignment) -> None:
        """ConsumerCoordinator.onJoinComplete."""
        if self.generation < self.max_generation_seen:
            self.out.append(("violation", f"{self.name}: generation went back from "
                             f"{self.max_generation_seen} to {self.generation}"))
        self.max_generation_seen = max(self.max_generation_seen, self.generation)
        self.state = STABLE
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
        self._event("sync_received", f"member_id={self.member_id} assigned={len(assigned)} "
                    f"added={len(added)} revoked={len(revoked)}")
        a = self.assignors.get(self.group_protocol)
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
            self._run_callback(t, "assign", cfg.assign_cost_ms / 1000.0 * len(added), lambda _t: None)

        if revoked and self.protocol == COOPERATIVE:
            self._event("revoke", f"count={len(revoked)} cooperative")
            if cfg.enable_auto_commit:
                self._commit(now, "onPartitionsRevoked")

            def revoke_done(t):
                self._set_owned(t, remove=revoked)
                self._request_rejoin("need to revoke partitions and re-join")
                assign_step(t)
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
        return self.hb_anchor + n * self.config.heartbeat_interval_s

    def _enable_heartbeats(self, now: float) -> None:
        self.hb_enabled = True
        self.hb_in_flight = 0
        self.quiet = False
        self.hb_anchor, self.hb_n = now, 1
        if self.config.heartbeat_phase == "random":
            # A model choice, not Kafka's: long-lived groups drift apart, so the first heartbeat
            # after a SyncGroup comes anywhere within one interval (the member's own stream).
            self.hb_anchor = now - float(self._poll_rng.random()) * self.config.heartbeat_interval_s
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
        self._timer(("hb_timeout",), now + self.config.request_timeout_s)
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
            if (r.quiet_epoch is not None and r.quiet_epoch >= self.quiet_epoch_seen and self.elide
                    and self.state == STABLE and not self.rejoin_needed and self.pending_assignment is None
                    and not self.hb_in_flight):
                self.quiet = True
                self.quiet_phase = self.last_hb_sent  # == self._hb_at(self.hb_n - 1)
                self.quiet_arrival = r.received_at
                self._timer(("hb",), None)
                self.commit_next = self.timers.get(("commit",))
                self._timer(("commit",), None)
            return
        if r.error == m.REBALANCE_IN_PROGRESS:
            if self.state == STABLE:
                self._event("rebalance_learned", "heartbeat: REBALANCE_IN_PROGRESS")
                self._request_rejoin("group is rebalancing")
                self._wake_poll(now)
            return
        if r.error in (m.UNKNOWN_MEMBER_ID, m.ILLEGAL_GENERATION):
            if self.state in (STABLE, COMPLETING_REBALANCE):
                self._event("fenced_learned", f"heartbeat: {r.error}")
                self._reset_generation(f"heartbeat: {r.error}", r.error)
                self._wake_poll(now)
            return
        if r.error == m.FENCED_INSTANCE_ID:
            self._fatal(now, "heartbeat: FENCED_INSTANCE_ID")

    def _elided_k(self, now: float) -> int:
        """How many elided heartbeats were due by ``now`` (the k-th at ``_hb_at(hb_n - 1 + k)``)."""
        base = self.hb_n - 1
        k = max(0, math.floor((now - self.quiet_phase) / self.config.heartbeat_interval_s))
        while self._hb_at(base + k + 1) <= now:
            k += 1
        while k > 0 and self._hb_at(base + k) > now:
            k -= 1
        return k

    def _last_elided(self, now: float, trigger_rank: int | None = None) -> tuple[float, float | None]:
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
            self._send(m.HeartbeatRequest(self.member_id, self.generation, self.instance_id), sent_at=in_flight)
            self._timer(("hb_timeout",), in_flight + self.config.request_timeout_s)
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
                self._send(m.HeartbeatRequest(self.member_id, self.generation, self.instance_id, last=True),
                           sent_at=in_flight)
                self.hb_in_flight = 1
            self.out.append(("control", m.COORDINATOR, m.Unquiet(self.member_id, last_arrival, hold=True)))
        self._timer(("hb",), None)
        self._timer(("commit",), None)

    # ------------------------------------------------------------------ commits

    def _settle_elided_commits(self, now: float) -> float | None:
        """The auto-commits due while quiet (at ``commit_next + k * interval``, up to ``now``)
        happened: hand the coordinator the last one. Returns the next one due, if any."""
        nxt, self.commit_next = self.commit_next, None
        if nxt is None:
            return None
        interval = self.config.auto_commit_interval_s
        if nxt > now:
            return nxt
        k = math.floor((now - nxt) / interval)
        tick = nxt + k * interval
        if self.owned and self.generation >= 0:
            lag_s = self._position_s(now)
            lag_s = now - lag_s
            offsets = self._owned_tuple()
            self.out.append(("control", m.COORDINATOR, m.ElidedCommits(
                self.member_id, self.generation, offsets, tick - lag_s, self._ahead(offsets, tick - lag_s))))
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
            self._timer(("commit",), now + self.config.auto_commit_interval_s)

    def _commit(self, now: float, why: str) -> None:
        """Commit offsets of owned partitions (ConsumerCoordinator.sendOffsetCommitRequest)."""
        if not self.owned:
            return
        if self.state != STABLE or self.generation < 0:
            if self.state in (PREPARING_REBALANCE, COMPLETING_REBALANCE) and why == "auto-commit":
                self._event("commit_failed", "RebalanceInProgress (client side)")
                self.commit_ok = False
            return
        self._send(self._commit_request(now))
