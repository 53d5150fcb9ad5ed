"""The iteration order of the consumer group's members map (``MembersMapOrder``), which decides
ties in the order the server-side assignor sees the members."""

from __future__ import annotations

from assignors.java import java_string_hash

_FIBONACCI = -7046029254386353131  # BaseHashTable.findSlot's multiplier


_U64 = (1 << 64) - 1


class MembersMapOrder:
    """The order in which ``ConsumerGroup``'s members map (a ``TimelineHashMap``, Kafka's
    ``BaseHashTable``) iterates its member ids, which decides the order of members that share a
    bucket of the ``HashMap`` the assignor iterates (``TargetAssignmentBuilder.build`` fills it
    from this map, then puts the heartbeating member).

    The table starts with 2 slots and doubles before an insertion that would load it past 0.75;
    it never shrinks. A member's slot is the top bits of ``String.hashCode`` times a Fibonacci
    constant. Each slot keeps its members in insertion order (a rehash keeps it too: a slot's
    members all come from one slot of the smaller table), and the iterator reads slots in order,
    each slot's members last-inserted first. So the order is (slot, newest first), and it changes
    for every member when the table grows. A member not in the map yet (the one whose join
    heartbeat is being handled) comes after all of them."""

    __slots__ = ("_seq", "_count", "_bits")

    def __init__(self):
        self._seq: dict[str, int] = {}  # member id -> when it was inserted
        self._count = 0
        self._bits = 1  # log2 of the table size (BaseHashTable.MIN_CAPACITY = 2)

    def add(self, member_id: str) -> bool:
        """Insert a member (it must not be in the map); True when the table grew, which moves
        every member's tie."""
        grew = (len(self._seq) + 1) * 0.75 > (1 << self._bits)
        if grew:
            self._bits += 1
        self._count += 1
        self._seq[member_id] = self._count
        return grew

    def remove(self, member_id: str) -> None:
        self._seq.pop(member_id, None)

    def __contains__(self, member_id: str) -> bool:
        return member_id in self._seq

    def tie(self, member_id: str) -> tuple[int, int, int]:
        """Sort key of the member in the map's iteration order."""
        n = self._seq.get(member_id)
        if n is None:
            return (1, 0, 0)
        slot = ((java_string_hash(member_id) * _FIBONACCI) & _U64) >> (64 - self._bits)
        return (0, slot, -n)
