"""User-data wire formats: byte-exact encodings, V0/V1 compatibility, corrupt bytes handled."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assignors import Subscription, get_assignor
from assignors import TopicPartition as TP
from assignors._java import (
    computed_hashmap_order,
    hashmap_order,
    java_string_hash,
    java_string_hashes,
)
from assignors.userdata import (
    UserDataError,
    cooperative_generation,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
    sticky_member_data,
    sticky_member_data_batch,
)
from tests.assignors.java_model import java_hashmap_keys


def test_java_string_hash_matches_known_values():
    """String.hashCode: known Java values, including int32 overflow and non-BMP characters."""
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("t0") == 3644
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648  # a famous Integer.MIN_VALUE hash
    assert java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00  # surrogate pair


def test_java_string_hashes_count_trailing_nuls():
    """The numpy hashes read each string's own length: numpy's string arrays drop trailing NULs,
    but "a\x00" hashes as 31 * 97 in Java, not as "a"."""
    keys = ["a", "a\x00", "a\x00\x00", "\x00", "b\x00c"] + [f"k{i}" for i in range(70)]
    assert java_string_hashes(keys).tolist() == [java_string_hash(k) & 0xFFFFFFFF for k in keys]
    assert java_string_hash("a\x00") == 31 * 97


def test_hashmap_order_is_bucket_order():
    """HashMap iteration follows buckets, not insertion or alphabetical order ("bb" -> 0, "a" -> 1)."""
    assert hashmap_order(["a", "bb"]) == ["bb", "a"]


def test_sticky_v1_bytes_exact():
    """V1 layout: ARRAY[topic STRING, ARRAY[INT32]] then INT32 generation, big-endian."""
    data = encode_sticky_user_data([TP("t0", 0), TP("t0", 1)], 5)
    assert data == bytes.fromhex("000000010002743000000002000000000000000100000005")


def test_sticky_topics_grouped_in_java_hashmap_order():
    """Topics are grouped as Kafka's groupPartitionsByTopic (a HashMap) iterates them."""
    data = encode_sticky_user_data([TP("a", 3), TP("bb", 1), TP("a", 0)], None)
    assert data == bytes.fromhex("00000002000262620000000100000001000161000000020000000300000000")


def test_sticky_topics_of_one_bucket_in_reverse_first_appearance():
    """computeIfAbsent links a new key at the head of its bucket: with ``logs`` and ``t1`` in one
    bucket, a Java client writes ``t1`` first although ``logs`` came first (KIP-341 V1 bytes)."""
    md = decode_sticky_user_data(encode_sticky_user_data([TP("logs", 30), TP("t1", 41)], 0))
    assert md.topics == ("t1", "logs")


@given(st.lists(st.text(alphabet="abcdefghij0123456789-_", min_size=1, max_size=6), max_size=60))
def test_computed_hashmap_order_matches_a_java_model(keys):
    distinct = list(dict.fromkeys(keys))
    assert computed_hashmap_order(distinct) == java_hashmap_keys(keys, compute_if_absent=True)


def test_v0_bytes_decode_without_generation():
    """V0 bytes (KIP-54, no generation) decode with generation None; V1 with its generation."""
    parts = [TP("x", 2), TP("y", 0)]
    v0 = encode_sticky_user_data(parts, None)
    v1 = encode_sticky_user_data(parts, 9)
    assert v1 == v0 + struct.pack(">i", 9)
    assert sorted(decode_sticky_user_data(v0).partitions) == parts
    assert decode_sticky_user_data(v0).generation is None
    assert decode_sticky_user_data(v1).generation == 9


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x00",  # truncated array size
        bytes.fromhex("ffffffff"),  # negative array size
        bytes.fromhex("00000001000574"),  # string longer than the bytes
        bytes.fromhex("00000001ffff"),  # negative string length
        bytes.fromhex("000000010001740000000300000000"),  # partitions truncated
        bytes.fromhex("7fffffff"),  # absurd array size
    ],
)
def test_corrupt_bytes_mean_owns_nothing(data):
    """Unreadable StickyAssignor bytes: the strict decoder raises UserDataError, the leader's
    reading is 'owns nothing, generation -1'."""
    with pytest.raises(UserDataError):
        decode_sticky_user_data(data)
    md = sticky_member_data(data)
    assert md.partitions == [] and md.generation == -1


def test_no_user_data_means_no_generation():
    """No bytes (a member that never had an assignment): nothing owned and no generation."""
    assert sticky_member_data(None).generation is None
    assert sticky_member_data(b"").partitions == []


def test_cooperative_user_data():
    """CooperativeStickyAssignor sends its generation as one INT32; short bytes read as -1."""
    assert encode_cooperative_user_data(7) == b"\x00\x00\x00\x07"
    assert decode_cooperative_user_data(b"\xff\xff\xff\xfe") == -2
    assert cooperative_generation(b"\x01") == -1
    assert cooperative_generation(None) is None


def test_invalid_utf8_decodes_with_replacement():
    """Invalid UTF-8 in a topic name decodes with replacement characters, as java.lang.String does."""
    data = bytes.fromhex("000000010002ff610000000100000004")
    (tp,) = decode_sticky_user_data(data).partitions
    assert tp.partition == 4 and tp.topic.endswith("a")


@given(st.binary(max_size=200))
def test_any_bytes_decode_or_fail_cleanly(data):
    """Any bytes either decode or raise UserDataError, and the leader's reading never raises."""
    try:
        decode_sticky_user_data(data)
    except UserDataError:
        pass
    sticky_member_data(data)
    cooperative_generation(data)


@given(
    st.lists(st.tuples(st.sampled_from(["a", "b", "topic-ü"]), st.integers(0, 2**31 - 1))),
    st.integers(-1, 2**31 - 1),
)
def test_sticky_round_trip(pairs, generation):
    """Encoding then decoding gives back the partitions (grouped by topic) and the generation."""
    parts = [TP(t, p) for t, p in pairs]
    md = decode_sticky_user_data(encode_sticky_user_data(parts, generation))
    assert sorted(md.partitions) == sorted(parts)
    assert md.generation == generation


@given(st.binary(max_size=64), st.binary(max_size=64))
def test_leader_survives_garbage_user_data(a, b):
    """A group whose members send garbage user data still gets a complete assignment."""
    subs = {"m1": Subscription(["t"], user_data=a), "m2": Subscription(["t"], user_data=b)}
    for name in ("sticky", "cooperative-sticky"):
        result = get_assignor(name).assign({"t": 5}, subs)
        assert sorted(tp.partition for x in result.values() for tp in x.partitions) == [
            0,
            1,
            2,
            3,
            4,
        ]


def test_member_side_sticky_sends_last_assignment_and_generation():
    """StickyAssignor's member side sends no user data before its first assignment, then V1 bytes
    of its last assignment and generation (what KIP-341 protects against zombies with)."""
    from assignors import Assignment

    a = get_assignor("sticky")
    assert a.subscription_user_data(None, -1) is None
    a.on_assignment(Assignment([TP("t0", 0), TP("t0", 1)]), 5)
    assert a.subscription_user_data(None, None) == encode_sticky_user_data(
        [TP("t0", 0), TP("t0", 1)], 5
    )


@given(
    st.lists(
        st.one_of(
            st.none(),
            st.binary(max_size=40),
            st.builds(
                encode_sticky_user_data,
                st.lists(
                    st.builds(TP, st.sampled_from(["a", "bb", "t-1"]), st.integers(0, 2**31 - 1)),
                    max_size=6,
                ),
                st.one_of(st.none(), st.integers(-1, 2**31 - 1)),
            ),
        ),
        max_size=6,
    )
)
def test_batch_reading_equals_member_by_member(datas):
    """The leader's batched reading of many members' bytes (V1, V0, corrupt, none) gives each
    member exactly what ``sticky_member_data`` gives it alone."""
    batch = sticky_member_data_batch(datas)
    numbers = batch.numbers.tolist()
    ends = [0]
    for c in batch.run_counts.tolist():
        ends.append(ends[-1] + c)
    for i, data in enumerate(datas):
        md = sticky_member_data(data)
        lo, hi = batch.run_bounds[i], batch.run_bounds[i + 1]
        assert tuple(batch.run_topics[lo:hi]) == md.topics
        assert numbers[ends[lo] : ends[hi]] == md.numbers.tolist()
        assert batch.generations[i] == md.generation


_TOPIC_NAMES = st.sampled_from(
    ["a", "bb", "t-1", "t-2", "y" * 60 + "z", "t-1\x00", "\u00e9t\u00e9", "x" * 70, "y" * 61]
)


def _mangled(data: bytes, cut: int, flip: int) -> bytes:
    """``data`` cut short, or with one byte changed (a corrupt or truncated member)."""
    if cut % 3 == 0:
        return data[: cut % (len(data) + 1)]
    if cut % 3 == 1 and data:
        i = flip % len(data)
        return data[:i] + bytes([(data[i] + 1 + cut) % 256]) + data[i + 1 :]
    return data


@given(
    st.lists(
        st.one_of(
            st.none(),
            st.binary(max_size=24),
            st.builds(
                _mangled,
                st.builds(
                    encode_sticky_user_data,
                    st.lists(st.builds(TP, _TOPIC_NAMES, st.integers(0, 2**31 - 1)), max_size=12),
                    st.one_of(st.none(), st.integers(-1, 2**31 - 1)),
                ),
                st.integers(0, 300),
                st.integers(0, 300),
            ),
        ),
        max_size=40,
    ),
    st.sampled_from([0, 1, 3, 1000]),
)
def test_vectorised_batch_reading_equals_member_by_member(datas, scalar_below):
    """Reading members side by side (and finishing the last few one by one, at any threshold)
    gives each member what ``sticky_member_data`` gives it alone: long, non-ASCII and NUL-ending
    topic names, truncated and corrupted bytes included."""
    batch = sticky_member_data_batch(datas, scalar_below=scalar_below)
    numbers = batch.numbers.tolist()
    ends = [0]
    for c in batch.run_counts.tolist():
        ends.append(ends[-1] + c)
    run_topics = batch.run_topics
    for i, data in enumerate(datas):
        md = sticky_member_data(data)
        lo, hi = batch.run_bounds[i], batch.run_bounds[i + 1]
        assert tuple(run_topics[lo:hi]) == md.topics
        assert numbers[ends[lo] : ends[hi]] == md.numbers.tolist()
        assert batch.generations[i] == md.generation
