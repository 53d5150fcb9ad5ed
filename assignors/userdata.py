"""Kafka's binary user-data layouts for the sticky assignors (big-endian, Kafka ``Struct`` types).

Types as Kafka's protocol ``Type`` classes write them: INT16/INT32 big-endian two's complement;
STRING = INT16 length + UTF-8 bytes; ARRAY = INT32 element count + elements.

StickyAssignor (KIP-54; generation added by KIP-341):

    V0  previous_assignment: ARRAY of { topic: STRING, partitions: ARRAY of INT32 }
    V1  previous_assignment (as V0), generation: INT32

A writer always writes V1. A reader tries V1, then V0 (whose bytes lack the trailing generation,
so the V1 read runs out of bytes); bytes that neither layout reads mean "owns nothing, generation
-1" (``StickyAssignor#deserializeTopicPartitionAssignment``). Topics are grouped like Kafka's
``CollectionUtils#groupPartitionsByTopic``: a ``HashMap`` filled with ``computeIfAbsent``, so topics
come in that map's iteration order (bucket order; within a bucket, reverse order of first
appearance) and partitions in assignment order; the bytes equal a Java client's.

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

from ._java import computed_hashmap_order
from .types import AssignorError, TopicPartition

DEFAULT_GENERATION = -1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class UserDataError(AssignorError):
    """User-data bytes that the layout cannot read."""


@attrs.frozen(slots=True)
class StickyMemberData:
    """A member's previous assignment as its user data states it.

    ``topics[i]`` holds ``counts[i]`` partitions; ``numbers`` is every partition number in wire
    order (int64), so ``runs`` splits it by topic. ``generation`` is None when the bytes carry
    none (V0 or no user data).
    """

    topics: tuple[str, ...]
    counts: np.ndarray
    numbers: np.ndarray
    generation: int | None

    @property
    def runs(self) -> list[tuple[str, np.ndarray]]:
        bounds = np.concatenate(([0], np.cumsum(self.counts))).tolist()
        return [(t, self.numbers[bounds[i]:bounds[i + 1]]) for i, t in enumerate(self.topics)]

    @property
    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t, int(p)) for t, parts in self.runs for p in parts]


_EMPTY = np.empty(0, dtype=np.int64)
NO_MEMBER_DATA = StickyMemberData(topics=(), counts=_EMPTY, numbers=_EMPTY, generation=None)
UNREADABLE_MEMBER_DATA = StickyMemberData(topics=(), counts=_EMPTY, numbers=_EMPTY, generation=DEFAULT_GENERATION)


def _group_by_topic(partitions: Sequence[TopicPartition]) -> list[tuple[str, list[int]]]:
    grouped: dict[str, list[int]] = {}
    for tp in partitions:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    # groupPartitionsByTopic fills its HashMap with computeIfAbsent, in the partitions' order.
    return [(t, grouped[t]) for t in computed_hashmap_order(grouped)]


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


def _int32_at(buf: bytes, pos: int) -> int:
    """The INT32 at ``pos``, failing where Kafka's ``Type.INT32#read`` runs out of bytes."""
    if len(buf) - pos < 4:
        raise UserDataError("truncated: INT32 past the end of the user data")
    return _I32.unpack_from(buf, pos)[0]


def _check_length(kind: str, value: int, need: int, left: int) -> None:
    """Kafka's checks on an ARRAY size or STRING length: not negative, not past the end."""
    if value < 0:
        raise UserDataError(f"{kind} {value} cannot be negative")
    if need > left:
        raise UserDataError(f"truncated: {kind} {value} needs {need} bytes but only {left} are left")


def _read_previous_assignment(buf: bytes) -> tuple[tuple[str, ...], list[int], list[int], int]:
    """Scan ``previous_assignment``: topics, where each topic's INT32 partitions start, their
    counts, and the position after the array. Partition values are gathered later in one step."""
    n = len(buf)
    size = _int32_at(buf, 0)
    pos = 4
    # Kafka's ArrayOf compares the element count with the bytes left.
    _check_length("array size", size, size, n - pos)
    names: dict[bytes, str] = {}
    topics, starts, counts = [], [], []
    unpack16, unpack32 = _I16.unpack_from, _I32.unpack_from
    for _ in range(size):
        if n - pos < 2:
            raise UserDataError("truncated: INT16 past the end of the user data")
        (length,) = unpack16(buf, pos)
        pos += 2
        # The checks of _check_length, inlined: this loop runs once per topic of every member.
        if length < 0 or length > n - pos:
            _check_length("string length", length, length, n - pos)
        raw = buf[pos:pos + length]
        topic = names.get(raw)
        if topic is None:
            # Invalid UTF-8 becomes U+FFFD, as java.lang.String decodes it.
            topic = names[raw] = raw.decode("utf-8", errors="replace")
        pos += length
        if n - pos < 4:
            raise UserDataError("truncated: INT32 past the end of the user data")
        (count,) = unpack32(buf, pos)
        pos += 4
        if count < 0 or 4 * count > n - pos:
            _check_length("array size", count, 4 * count, n - pos)
        topics.append(topic)
        starts.append(pos)
        counts.append(count)
        pos += 4 * count
    return tuple(topics), starts, counts, pos


def _gather_int32(buf: bytes, starts: list[int], counts: list[int]) -> np.ndarray:
    """All big-endian INT32 values of the runs, concatenated, in one vectorised gather."""
    counts_a = np.asarray(counts, dtype=np.int64)
    total = int(counts_a.sum())
    if total == 0:
        return _EMPTY
    first = np.repeat(np.asarray(starts, dtype=np.int64) - 4 * (np.cumsum(counts_a) - counts_a), counts_a)
    pos = first + 4 * np.arange(total, dtype=np.int64)
    b = np.frombuffer(buf, dtype=np.uint8)
    words = (
        (b[pos].astype(np.uint32) << 24)
        | (b[pos + 1].astype(np.uint32) << 16)
        | (b[pos + 2].astype(np.uint32) << 8)
        | b[pos + 3].astype(np.uint32)
    )
    return words.view(np.int32).astype(np.int64)


def _member_data(buf: bytes, with_generation: bool) -> StickyMemberData:
    topics, starts, counts, pos = _read_previous_assignment(buf)
    generation = _int32_at(buf, pos) if with_generation else None
    return StickyMemberData(
        topics=topics,
        counts=np.asarray(counts, dtype=np.int64),
        numbers=_gather_int32(buf, starts, counts),
        generation=generation,
    )


def decode_sticky_user_data(data: bytes) -> StickyMemberData:
    """Read StickyAssignor user data, V1 first then V0; raises ``UserDataError`` if neither reads."""
    data = bytes(data)
    try:
        return _member_data(data, with_generation=True)
    except UserDataError:
        return _member_data(data, with_generation=False)


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


@attrs.frozen(slots=True)
class StickyMemberDataBatch:
    """``sticky_member_data`` of many members at once, as flat arrays.

    Member ``i``'s runs are ``run_topics[run_bounds[i]:run_bounds[i + 1]]`` with as many
    partitions as ``run_counts`` says; ``numbers`` holds every member's partition numbers, member
    after member, in wire order; ``generations[i]`` is None where the bytes carry none.
    """

    run_topics: list[str]
    run_counts: np.ndarray
    run_bounds: np.ndarray
    numbers: np.ndarray
    generations: list[int | None]


def sticky_member_data_batch(datas: Sequence[bytes | None]) -> StickyMemberDataBatch:
    """What the leader makes of every member's StickyAssignor user data (never raises): the same
    reading as ``sticky_member_data`` member by member, with one vectorised gather of all the
    partition numbers instead of one per member."""
    run_topics: list[str] = []
    run_counts: list[int] = []
    run_bounds = [0]
    generations: list[int | None] = []
    chunks: list[bytes] = []  # every run's INT32 partition numbers, back to back
    for data in datas:
        if not data:
            generations.append(None)
            run_bounds.append(len(run_topics))
            continue
        buf = bytes(data)
        try:
            topics, starts, counts, pos = _read_previous_assignment(buf)
        except UserDataError:
            # Neither V1 nor V0 reads: owns nothing, generation -1.
            generations.append(DEFAULT_GENERATION)
            run_bounds.append(len(run_topics))
            continue
        # V1 when the generation's INT32 follows the array; otherwise V0 (no generation).
        generations.append(_I32.unpack_from(buf, pos)[0] if len(buf) - pos >= 4 else None)
        if topics:
            run_topics.extend(topics)
            run_counts.extend(counts)
            chunks.extend([buf[st:st + 4 * c] for st, c in zip(starts, counts, strict=True)])
        run_bounds.append(len(run_topics))
    return StickyMemberDataBatch(
        run_topics=run_topics,
        run_counts=np.asarray(run_counts, dtype=np.int64),
        run_bounds=np.asarray(run_bounds, dtype=np.int64),
        numbers=np.frombuffer(b"".join(chunks), dtype=">i4").astype(np.int64),
        generations=generations,
    )


def encode_cooperative_user_data(generation: int) -> bytes:
    """CooperativeStickyAssignor user data: its generation as INT32."""
    _check_int32("generation", generation)
    return _I32.pack(generation)


def decode_cooperative_user_data(data: bytes) -> int:
    """The generation in CooperativeStickyAssignor user data; raises ``UserDataError`` if short."""
    return _int32_at(bytes(data), 0)


def cooperative_generation(data: bytes | None) -> int | None:
    """What the leader makes of CooperativeStickyAssignor user data (never raises):
    None without bytes, -1 for unreadable bytes (``CooperativeStickyAssignor#memberData``)."""
    if data is None:
        return None
    try:
        return decode_cooperative_user_data(data)
    except UserDataError:
        return DEFAULT_GENERATION
