"""``Handoffs``: the world's view of each partition's hand-overs, shared by the clients of one run."""

from __future__ import annotations

from collections.abc import Callable

from assignors import TopicPartition


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

    def release(
        self, tp: TopicPartition, t: float, position_s: float | None = None, cause: str = ""
    ) -> None:
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
