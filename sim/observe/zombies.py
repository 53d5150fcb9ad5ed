"""Who was a zombie when: the invariants' question, answered from the events as they happen.

A zombie holds a stale generation without knowing it (KIP-341): the coordinator removed or fenced
the member id it last synced with (after that id last joined: under the consumer protocol a
client rejoins under its own id), or the group completed a generation that the client never
joined (a static member that missed the join barrier stays in the group but is left out of the
new generation). The second rule is the classic protocol's: it applies to a client whose last
assignment came from SyncGroup (a group that migrates between the protocols has consumer-protocol
clients, which never join a classic generation). A conversion into a classic group counts as a
completed generation (``sim.coordinator.migration``).

``ZombieTracker`` is fed the events of these kinds one instant at a time, in table order (time,
then the recording actor's rank and sequence), and keeps, per client, only the instants at which
its zombie status changed. A one-at-a-time restart of N members has about N^2 events of these
kinds (every member syncs in every generation), but only a few changes of status per restart, so
what it holds grows with the group and its restarts, not with the generations times the members.
``zombie(client, t)`` is the status after every event at or before ``t``.
"""

from __future__ import annotations

import bisect
from collections import defaultdict

from sim.observe.events import DOWNGRADE, GroupConverted, member_id_of

# the events the tracker reads
ZOMBIE_KINDS = (
    "sync_received",
    "assignment_received",
    "member_added",
    "member_removed",
    "member_fenced",
    "join_received",
    "join_complete",
    "group_converted",
)

_NEVER = (float("-inf"), -1)


class ZombieTracker:
    """Zombie status per client, from ``ZOMBIE_KINDS`` events fed an instant at a time."""

    def __init__(self) -> None:
        self._index = 0  # events fed so far: orders the events of one instant
        # client -> (member id, from SyncGroup, (t, index)) of its last sync
        self._sync: dict[str, tuple[str, bool, tuple[float, int]]] = {}
        self._synced_with: dict[str, set[str]] = defaultdict(set)  # member id -> clients
        self._classic: set[str] = set()  # clients whose last sync came from SyncGroup
        self._added: dict[str, list[tuple[float, int]]] = defaultdict(list)
        self._removed: dict[str, list[tuple[float, int]]] = defaultdict(list)
        self._joined: dict[str, int] = {}  # client -> generation it last joined
        self._completed: int | None = None  # the last completed generation
        self._status: dict[str, bool] = {}
        # client -> (instants, statuses): its status from each instant on
        self._changes: dict[str, tuple[list[float], list[bool]]] = {}

    def feed(self, t: float, events) -> None:
        """The events ``(kind, member, generation, detail)`` of instant ``t``, in table order;
        instants come in increasing order."""
        touched: set[str] = set()
        completed = self._completed
        for kind, member, gen, detail in events:
            i = self._index
            self._index += 1
            if kind in ("sync_received", "assignment_received"):
                member_id = member_id_of(detail) if member else None
                if member_id is None:
                    continue
                old = self._sync.get(member)
                if old is not None:
                    self._synced_with[old[0]].discard(member)
                classic = kind == "sync_received"
                self._sync[member] = (member_id, classic, (t, i))
                self._synced_with[member_id].add(member)
                if classic:
                    self._classic.add(member)
                else:
                    self._classic.discard(member)
                touched.add(member)
            elif kind in ("member_removed", "member_fenced", "member_added"):
                member_id = member_id_of(detail)
                if member_id is None:
                    continue
                (self._added if kind == "member_added" else self._removed)[member_id].append((t, i))
                touched.update(self._synced_with.get(member_id, ()))
            elif kind == "join_received":
                if member:
                    self._joined[member] = gen
                    touched.add(member)
            elif kind == "join_complete" or (
                kind == "group_converted" and GroupConverted.decode(detail).direction == DOWNGRADE
            ):
                # a downgrade makes a classic generation (the group epoch) that no member joined:
                # a classic member behind it gets ILLEGAL_GENERATION from now on
                self._completed = gen
        if self._completed != completed:
            touched.update(self._classic)
        for client in touched:
            status = self._zombie_now(client)
            if status != self._status.get(client, False):
                self._status[client] = status
                times, statuses = self._changes.setdefault(client, ([], []))
                times.append(t)
                statuses.append(status)

    def _zombie_now(self, client: str) -> bool:
        sync = self._sync.get(client)
        if sync is None:
            return False
        member_id, classic, at = sync
        # the removals of that member id since it last joined before the sync (every removal
        # fed so far is at or before now)
        adds = self._added.get(member_id, ())
        k = bisect.bisect_left(adds, at) - 1
        since = adds[k] if k >= 0 else _NEVER
        removals = self._removed.get(member_id, ())
        if bisect.bisect_right(removals, since) < len(removals):
            return True
        if not classic or self._completed is None:
            return False
        joined = self._joined.get(client)
        return joined is None or joined < self._completed

    def zombie(self, client: str, t: float) -> bool:
        """Whether ``client`` was a zombie at ``t`` (after the events of instant ``t``)."""
        changes = self._changes.get(client)
        if changes is None:
            return False
        times, statuses = changes
        i = bisect.bisect_right(times, t) - 1
        return i >= 0 and statuses[i]


def tracker_from_rows(rows) -> ZombieTracker:
    """A tracker fed ``rows`` ``(t, kind, member, generation, detail)`` in table order (other kinds
    are skipped)."""
    tracker = ZombieTracker()
    kinds = set(ZOMBIE_KINDS)
    batch: list[tuple] = []
    at = 0.0
    for t, kind, member, gen, detail in rows:
        if kind not in kinds:
            continue
        if batch and t != at:
            tracker.feed(at, batch)
            batch = []
        at = t
        batch.append((kind, member, gen, detail))
    if batch:
        tracker.feed(at, batch)
    return tracker
