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
        return [(t, self.numbers[bounds[i] : bounds[i + 1]]) for i, t in enumerate(self.topics)]

    @property
    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t, int(p)) for t, parts in self.runs for p in parts]


_EMPTY = np.empty(0, dtype=np.int64)
NO_MEMBER_DATA = StickyMemberData(topics=(), counts=_EMPTY, numbers=_EMPTY, generation=None)
UNREADABLE_MEMBER_DATA = StickyMemberData(
    topics=(), counts=_EMPTY, numbers=_EMPTY, generation=DEFAULT_GENERATION
)


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
        raise UserDataError(
            f"truncated: {kind} {value} needs {need} bytes but only {left} are left"
        )


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
        raw = buf[pos : pos + length]
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
    first = np.repeat(
        np.asarray(starts, dtype=np.int64) - 4 * (np.cumsum(counts_a) - counts_a), counts_a
    )
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

    Member ``i``'s runs are ``run_topic_codes[run_bounds[i]:run_bounds[i + 1]]`` (indices into
    ``topic_names``) with as many partitions as ``run_counts`` says; ``numbers`` holds every
    member's partition numbers, member after member, in wire order; ``generations[i]`` is None
    where the bytes carry none.
    """

    topic_names: list[str]
    run_topic_codes: np.ndarray
    run_counts: np.ndarray
    run_bounds: np.ndarray
    numbers: np.ndarray
    generations: list[int | None]

    @property
    def run_topics(self) -> list[str]:
        """Every run's topic name."""
        names = self.topic_names
        return [names[c] for c in self.run_topic_codes.tolist()]


_NO_GENERATION = 1 << 40  # outside INT32: "the bytes carry no generation"
# Masks keeping the first k bytes of a little-endian uint64, k = 0..8.
_BYTE_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)


def _overlapping(blob: bytes, dtype: str) -> np.ndarray:
    """Element ``k`` is the value whose bytes start at ``blob[k]`` (a read-only strided view)."""
    width = np.dtype(dtype).itemsize
    return np.ndarray(shape=(len(blob) - width + 1,), dtype=dtype, buffer=blob, strides=(1,))


def _topic_codes(
    blob: bytes, name_at: np.ndarray, name_len: np.ndarray
) -> tuple[np.ndarray, list[str]]:
    """Distinct topic names of the runs whose STRING bytes are ``blob[name_at:name_at + name_len]``:
    each run's code (index into the names) and the decoded names. Runs are grouped by their raw
    bytes (length prefix included) through a 64-bit hash of 8-byte words, checked word by word;
    on a hash collision, or for very long names, by a dict of the bytes."""
    if not name_at.size:
        return _EMPTY, []
    width = int(name_len.max()) + 2
    if width <= 64:
        words = _overlapping(blob, "<u8")
        first_byte = name_at - 2  # the INT16 length prefix keeps names of different lengths apart
        cols = []
        for c in range(0, width, 8):
            keep = np.clip(name_len + 2 - c, 0, 8)
            cols.append(words[np.minimum(first_byte + c, len(words) - 1)] & _BYTE_MASKS[keep])
        h = cols[0].copy()
        for col in cols[1:]:
            h = h * np.uint64(0x100000001B3) ^ col
        _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        rep = first[inverse]
        if all(np.array_equal(col, col[rep]) for col in cols):
            names = [
                blob[s : s + n].decode("utf-8", errors="replace")
                for s, n in zip(name_at[first].tolist(), name_len[first].tolist(), strict=True)
            ]
            return inverse.astype(np.int64), names
    code_of: dict[bytes, int] = {}
    names = []
    codes = []
    for s, n in zip(name_at.tolist(), name_len.tolist(), strict=True):
        raw = blob[s : s + n]
        code = code_of.get(raw)
        if code is None:
            code = code_of[raw] = len(names)
            names.append(raw.decode("utf-8", errors="replace"))
        codes.append(code)
    return np.asarray(codes, dtype=np.int64), names


def sticky_member_data_batch(
    datas: Sequence[bytes | None], scalar_below: int = 8
) -> StickyMemberDataBatch:
    """What the leader makes of every member's StickyAssignor user data (never raises): the same
    reading as ``sticky_member_data`` member by member, vectorised across members.

    All members' bytes are read side by side, one topic run per step, with the checks of
    ``_read_previous_assignment`` (a member failing one owns nothing, generation -1). Once fewer
    than ``scalar_below`` members have runs left, those are read one by one instead: a lone member
    with thousands of topics would otherwise cost a whole step per topic.
    """
    n = len(datas)
    bufs = [bytes(d) if d else b"" for d in datas]
    lens = np.fromiter(map(len, bufs), dtype=np.int64, count=n)
    # Eight spare bytes: reads just past a member's bytes (rejected later) stay inside the array.
    blob = b"".join(bufs) + bytes(8)
    cap = len(blob) - 8
    be32 = _overlapping(blob, ">i4")
    be16 = _overlapping(blob, ">i2")
    ends = np.cumsum(lens)
    starts = ends - lens
    generation = np.full(n, _NO_GENERATION, dtype=np.int64)
    failed = np.zeros(n, dtype=bool)

    def i32(at: np.ndarray) -> np.ndarray:
        return be32[np.clip(at, 0, cap)].astype(np.int64)

    def i16(at: np.ndarray) -> np.ndarray:
        return be16[np.clip(at, 0, cap)].astype(np.int64)

    # previous_assignment's INT32 element count, checked against the bytes left (Kafka's ArrayOf).
    live = np.flatnonzero(lens > 0)
    short = lens[live] < 4
    failed[live[short]] = True
    live = live[~short]
    pos = starts[live] + 4
    end = ends[live]
    remaining = i32(pos - 4)
    bad = (remaining < 0) | (remaining > end - pos)
    failed[live[bad]] = True
    live, pos, end, remaining = live[~bad], pos[~bad], end[~bad], remaining[~bad]

    steps: list[
        tuple[np.ndarray, ...]
    ] = []  # per step: member, name at, name length, run at, count
    scalar: list[int] = []
    while live.size:
        done = remaining == 0
        if done.any():
            # V1 when the generation's INT32 follows the array; otherwise V0 (no generation).
            d_pos, d_end, d_live = pos[done], end[done], live[done]
            has_gen = d_end - d_pos >= 4
            generation[d_live[has_gen]] = i32(d_pos[has_gen])
            keep = ~done
            live, pos, end, remaining = live[keep], pos[keep], end[keep], remaining[keep]
            if not live.size:
                break
        if live.size < scalar_below:
            scalar = live.tolist()
            break
        # STRING topic: INT16 length and the bytes; then ARRAY of INT32 partition numbers.
        bad = end - pos < 2
        length = i16(pos)
        pos = pos + 2
        bad |= (length < 0) | (length > end - pos)
        name_at = pos
        pos = pos + length
        bad |= end - pos < 4
        count = i32(pos)
        pos = pos + 4
        bad |= (count < 0) | (4 * count > end - pos)
        if bad.any():
            failed[live[bad]] = True
            ok = ~bad
            live, pos, end, remaining = live[ok], pos[ok], end[ok], remaining[ok]
            name_at, length, count = name_at[ok], length[ok], count[ok]
        steps.append((live, name_at, length, pos, count))
        pos = pos + 4 * count
        remaining = remaining - 1

    drop = failed.copy()
    drop[scalar] = True  # read again below, from their first byte
    if steps:
        member, name_at, name_len, run_at, counts = (
            np.concatenate(col) for col in zip(*steps, strict=True)
        )
        # Steps hold one run of each member; a stable sort by member restores wire order.
        keep = np.argsort(member, kind="stable")
        keep = keep[~drop[member[keep]]]
        member, name_at, name_len, run_at, counts = (
            member[keep],
            name_at[keep],
            name_len[keep],
            run_at[keep],
            counts[keep],
        )
        codes, names = _topic_codes(blob, name_at, name_len)
    else:
        member = run_at = counts = codes = _EMPTY
        names = []

    if scalar:
        more_member: list[int] = []
        more_codes: list[int] = []
        more_at: list[int] = []
        more_counts: list[int] = []
        code_of = {t: c for c, t in enumerate(names)}
        for i in scalar:
            buf = bufs[i]
            try:
                topics, run_starts, run_counts, at = _read_previous_assignment(buf)
            except UserDataError:
                failed[i] = True
                continue
            generation[i] = _I32.unpack_from(buf, at)[0] if len(buf) - at >= 4 else _NO_GENERATION
            for t in topics:
                c = code_of.get(t)
                if c is None:
                    c = code_of[t] = len(names)
                    names.append(t)
                more_codes.append(c)
            base = int(starts[i])
            more_member.extend([i] * len(topics))
            more_at.extend(base + s for s in run_starts)
            more_counts.extend(run_counts)
        member = np.concatenate((member, np.asarray(more_member, dtype=np.int64)))
        codes = np.concatenate((codes, np.asarray(more_codes, dtype=np.int64)))
        run_at = np.concatenate((run_at, np.asarray(more_at, dtype=np.int64)))
        counts = np.concatenate((counts, np.asarray(more_counts, dtype=np.int64)))
        srt = np.argsort(member, kind="stable")
        member, codes, run_at, counts = member[srt], codes[srt], run_at[srt], counts[srt]

    generation[failed] = DEFAULT_GENERATION
    gens: list = generation.tolist()  # ints, or None where there is no generation
    if (generation == _NO_GENERATION).any():
        gens = [None if g == _NO_GENERATION else g for g in gens]
    total = int(counts.sum()) if counts.size else 0
    if total:
        # Every run's INT32s: run r's k-th number starts 4k bytes after run_at[r].
        first = np.repeat(run_at - 4 * (np.cumsum(counts) - counts), counts)
        numbers = be32[first + 4 * np.arange(total, dtype=np.int64)].astype(np.int64)
    else:
        numbers = _EMPTY
    return StickyMemberDataBatch(
        topic_names=names,
        run_topic_codes=np.asarray(codes, dtype=np.int64),
        run_counts=np.asarray(counts, dtype=np.int64),
        run_bounds=np.searchsorted(member, np.arange(n + 1)),
        numbers=numbers,
        generations=gens,
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
