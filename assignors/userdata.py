"""Kafka's binary user-data layouts for the sticky assignors (big-endian, Kafka ``Struct`` types).

Types as Kafka's protocol ``Type`` classes write them: INT16/INT32 big-endian two's complement;
STRING = INT16 length + UTF-8 bytes; ARRAY = INT32 element count + elements.

StickyAssignor (KIP-54; generation added by KIP-341):

    V0  previous_assignment: ARRAY of { topic: STRING, partitions: ARRAY of INT32 }
    V1  previous_assignment (as V0), generation: INT32

A writer always writes V1. A reader tries V1, then V0 (whose bytes lack the trailing generation,
so the V1 read runs out of bytes); bytes that neither layout reads mean "owns nothing, generation
-1" (``StickyAssignor#deserializeTopicPartitionAssignment``). Topics are grouped like Kafka's
``CollectionUtils#groupPartitionsByTopic``: a ``HashMap`` keyed by topic, so topics come in Java
``HashMap`` order and partitions in assignment order; the bytes equal a Java client's.

CooperativeStickyAssignor (KIP-429) sends only its generation: ``{ generation: INT32 }``.

Reads check what Kafka's types check (negative or oversized lengths fail) and decode invalid UTF-8
with replacement characters, as ``java.lang.String`` does. Trailing bytes are ignored, as Kafka's
``Schema#read`` ignores them.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import attrs
import numpy as np

from ._java import hashmap_order
from .types import AssignorError, TopicPartition

DEFAULT_GENERATION = -1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class UserDataError(AssignorError):
    """User-data bytes that the layout cannot read."""


@attrs.frozen(slots=True)
class StickyMemberData:
    """A member's previous assignment as its user data states it.

    ``runs`` holds ``(topic, partitions)`` pairs in wire order (partitions as an int64 array);
    ``generation`` is None when the bytes carry none (V0 or no user data).
    """

    runs: tuple[tuple[str, np.ndarray], ...]
    generation: int | None

    @property
    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t, int(p)) for t, parts in self.runs for p in parts]


NO_MEMBER_DATA = StickyMemberData(runs=(), generation=None)
UNREADABLE_MEMBER_DATA = StickyMemberData(runs=(), generation=DEFAULT_GENERATION)


def _group_by_topic(partitions: Sequence[TopicPartition]) -> list[tuple[str, list[int]]]:
    grouped: dict[str, list[int]] = {}
    for tp in partitions:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return [(t, grouped[t]) for t in hashmap_order(grouped)]


def _check_int32(name: str, value: int) -> None:
    if not -(1 << 31) <= value < (1 << 31):
        raise UserDataError(f"{name}: {value} does not fit in INT32")


def encode_sticky_user_data(partitions: Sequence[TopicPartition], generation: int | None) -> bytes:
    """StickyAssignor user data: V1 when ``generation`` is given, V0 (KIP-54's layout) when None."""
    out = bytearray()
    groups = _group_by_topic(partitions)
    out += _I32.pack(len(groups))
    for topic, parts in groups:
        raw = topic.encode("utf-8")
        if len(raw) > 0x7FFF:
            raise UserDataError(f"topic {topic[:20]!r}...: name longer than a Kafka STRING allows")
        out += _I16.pack(len(raw)) + raw
        out += _I32.pack(len(parts))
        for p in parts:
            _check_int32("partition", p)
        out += np.asarray(parts, dtype=">i4").tobytes()
    if generation is not None:
        _check_int32("generation", generation)
        out += _I32.pack(generation)
    return bytes(out)


class _Reader:
    """Reads Kafka protocol types from a buffer, failing where Kafka's ``Type#read`` fails."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes):
        self.buf = buf
        self.pos = 0

    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def int16(self) -> int:
        if self.remaining() < 2:
            raise UserDataError("truncated: INT16 past the end of the user data")
        (v,) = _I16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return v

    def int32(self) -> int:
        if self.remaining() < 4:
            raise UserDataError("truncated: INT32 past the end of the user data")
        (v,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return v

    def array_size(self) -> int:
        n = self.int32()
        if n < 0:
            raise UserDataError(f"array size {n} cannot be negative")
        if n > self.remaining():
            raise UserDataError(f"array of size {n} but only {self.remaining()} bytes left")
        return n

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise UserDataError(f"string length {n} cannot be negative")
        if n > self.remaining():
            raise UserDataError(f"string of length {n} but only {self.remaining()} bytes left")
        s = self.buf[self.pos:self.pos + n].decode("utf-8", errors="replace")
        self.pos += n
        return s

    def int32_array(self) -> np.ndarray:
        n = self.array_size()
        if 4 * n > self.remaining():
            raise UserDataError(f"truncated: {n} INT32 values but only {self.remaining()} bytes left")
        arr = np.frombuffer(self.buf, dtype=">i4", count=n, offset=self.pos).astype(np.int64)
        self.pos += 4 * n
        return arr


def _read_previous_assignment(r: _Reader) -> tuple[tuple[str, np.ndarray], ...]:
    runs = []
    for _ in range(r.array_size()):
        topic = r.string()
        runs.append((topic, r.int32_array()))
    return tuple(runs)


def decode_sticky_user_data(data: bytes) -> StickyMemberData:
    """Read StickyAssignor user data, V1 first then V0; raises ``UserDataError`` if neither reads."""
    data = bytes(data)
    try:
        r = _Reader(data)
        runs = _read_previous_assignment(r)
        return StickyMemberData(runs=runs, generation=r.int32())
    except UserDataError:
        r = _Reader(data)
        return StickyMemberData(runs=_read_previous_assignment(r), generation=None)


def sticky_member_data(data: bytes | None) -> StickyMemberData:
    """What the leader makes of a member's StickyAssignor user data (never raises).

    No bytes: owns nothing, no generation. Unreadable bytes: owns nothing, generation -1
    (``StickyAssignor#memberData``).
    """
    if not data:
        return NO_MEMBER_DATA
    try:
        return decode_sticky_user_data(data)
    except UserDataError:
        return UNREADABLE_MEMBER_DATA


def encode_cooperative_user_data(generation: int) -> bytes:
    """CooperativeStickyAssignor user data: its generation as INT32."""
    _check_int32("generation", generation)
    return _I32.pack(generation)


def decode_cooperative_user_data(data: bytes) -> int:
    """The generation in CooperativeStickyAssignor user data; raises ``UserDataError`` if short."""
    return _Reader(bytes(data)).int32()


def cooperative_generation(data: bytes | None) -> int | None:
    """What the leader makes of CooperativeStickyAssignor user data (never raises):
    None without bytes, -1 for unreadable bytes (``CooperativeStickyAssignor#memberData``)."""
    if data is None:
        return None
    try:
        return decode_cooperative_user_data(data)
    except UserDataError:
        return DEFAULT_GENERATION
