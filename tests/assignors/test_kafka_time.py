"""``assignor_cost = "kafka"`` for the client-side assignors: the fit to Kafka's own times
(``calibration/client_assignors_java.csv``) and the work counts it rests on.

Every row of the CSV is rebuilt exactly (``calibration_inputs``) and priced by
``assignors.kafka_time``: each within 2x of Kafka's median (but the one row of ``WIDER``), the
median row within 1.3x. The work
counts that Kafka's loops make exactly (not the sorting estimates) are checked against counts taken
from Kafka's own classes with counters added, on the same inputs, and against literal loops on
small inputs.
"""

from __future__ import annotations

import functools
import math
import random
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assignors import Subscription, get_assignor
from assignors._kafka_work import TERMS, KafkaWork, range_work, roundrobin_work
from assignors.kafka_time import CALIBRATED, MS_PER_UNIT, client_kafka_ms, kafka_ms_by_term

from .calibration_inputs import row_input, rows

ROWS = rows()
# The one row the model misses by more than 2x, and how far (it is held to this instead). Kafka's
# RangeAssignor does the same work on this input and on its leave1 twin (one member fewer; range
# ignores ownership), yet the CSV has 166 ms here and 95.5 ms there, and 67 ms against 19 ms on
# uniform_1000c_10x1000: two calls into a JVM its code is still being compiled, so these figures
# carry the JIT's progress as well as the work. No count of Kafka's work separates such twins;
# the fit settles between them (docs/kafka-fidelity.md, "Assignor time").
WIDER = {"hetero_2000c_20x1000_randhalf-fresh-range": 3.0}


@functools.cache
def _model_ms(row_id: str) -> float:
    row = next(r for r in ROWS if r.id == row_id)
    metadata, subscriptions = row_input(row)
    return client_kafka_ms(row.assignor, metadata, subscriptions)


@pytest.mark.parametrize("row", [pytest.param(r, id=r.id) for r in ROWS])
def test_each_row_within_twice_kafkas_median(row):
    ours = _model_ms(row.id)
    ratio = ours / row.median_ms
    bound = WIDER.get(row.id, 2.0)
    assert 1 / bound <= ratio <= bound, f"{row.id}: Kafka {row.median_ms:.1f} ms, ours {ours:.1f}"


def test_median_row_within_one_point_three():
    """Over every client row: the row in the middle of the error distribution is within 1.3x
    (at least half the rows are), and no row but those of ``WIDER`` is off by more than 2x."""
    errors = []
    for row in ROWS:
        ratio = _model_ms(row.id) / row.median_ms
        errors.append(max(ratio, 1 / ratio))
    assert statistics.median(errors) <= 1.3, sorted(errors)
    assert sum(e > 2 for e in errors) <= len(WIDER)


# Counts Kafka's classes (commit 1eb7644) made on these rows, taken with counters added to
# AbstractStickyAssignor, RangeAssignor and RoundRobinAssignor: what the closed forms must give.
KAFKA_COUNTS = {
    "hetero_2000c_20x1000_randhalf-fresh-sticky": {
        # isBalanced's List#contains over the member's partitions, and 471 moves' List#remove
        "tp_compares": 227_574_082 + 485,
        "balance_scan_partitions": 25_290_966,  # ... TopicPartitions built by 11,939 calls
        "topic_scans": 72_328_456 + 195_894,  # maybeAssignPartition and reassignPartition walks
    },
    "hetero_500c_100x200_quarter-fresh-cooperative-sticky": {
        "tp_compares": 398_953_250,
        "balance_scan_partitions": 10_000_000,
        "topic_scans": 186_828_750,
    },
    "hetero_500c_100x200_quarter-leave1-sticky": {
        "tp_compares": 398_952_548,
        "balance_scan_partitions": 9_980_000,
        "topic_scans": 509_304 + 696,
        "claims": 19_973,
        "user_data_partitions": 39_946,  # read twice on the general path
    },
    "hetero_2000c_20x1000_randhalf-leave1-cooperative-sticky": {
        "topic_scans": 110_211 + 260,
        "claims": 19_990,
    },
    "uniform_1000c_10x1000-leave1-sticky": {"claims": 9_990, "tp_compares": 10},
    "hetero_500c_100x200_quarter-fresh-roundrobin": {
        "iterator_steps": 53_330,
        "topic_scans": 2_176_500,
    },
    "hetero_2000c_20x1000_randhalf-leave1-roundrobin": {
        "iterator_steps": 39_974,
        "topic_scans": 309_699,
    },
    "hetero_2000c_20x1000_randhalf-fresh-range": {
        "stream_iterations": 19_858,
        "subscriptions": 20_000,
    },
    "hetero_500c_100x200_quarter-leave1-range": {
        "stream_iterations": 16_250,
        "tp_compares": 100,
    },
}


@pytest.mark.parametrize("row_id", sorted(KAFKA_COUNTS))
def test_counts_equal_kafkas_own(row_id):
    row = next(r for r in ROWS if r.id == row_id)
    metadata, subscriptions = row_input(row)
    assignor = get_assignor(row.assignor)
    assignor.assign(metadata, subscriptions)
    counts = assignor.last_work.totals()
    for term, expected in KAFKA_COUNTS[row_id].items():
        assert counts[term] == expected, term


def test_sticky_million_partition_hash_collisions():
    """Topics t0000..t0499 of 2,000 partitions: about 50 partitions share each
    TopicPartition#hashCode, and Kafka's allPreviousPartitionsToOwner (a get and a put per claim)
    met 47,694,500 equal-hash keys filling it (counted in Kafka's HashMap)."""
    from assignors._kafka_work import same_hash, subset_fill_same

    topics = [f"t{t:04d}" for t in range(500)]
    per_partition, fill = same_hash(topics, [2000] * 500)
    assert per_partition.mean() == pytest.approx(48.74, abs=0.01)
    met = 2 * subset_fill_same(fill, 999_500, 1_000_000)
    assert met == pytest.approx(47_694_500, rel=1e-4)


# -- literal loops on small inputs ----------------------------------------------------------


@st.composite
def groups(draw):
    n_topics = draw(st.integers(1, 5))
    topics = [f"t{i}" for i in range(n_topics)]
    counts = {t: draw(st.integers(0, 12)) for t in topics}
    n_members = draw(st.integers(1, 7))
    subs = {}
    for i in range(n_members):
        chosen = draw(st.lists(st.sampled_from([*topics, "gone"]), max_size=4))
        subs[f"c{draw(st.integers(0, 99))}-{i}"] = Subscription(chosen)
    return counts, subs


def _kafka_member_order(subs):
    return sorted(subs)  # no static members here: MemberInfo orders by member id


@given(groups())
def test_roundrobin_counts_equal_a_literal_loop(group):
    """RoundRobinAssignor's loop, literally: per partition, peek at members until one lists the
    topic (each peek a List#contains over the member's topics)."""
    counts, subs = group
    members = _kafka_member_order(subs)
    subscribed = {t for s in subs.values() for t in s.topics}
    steps = scans = 0
    cursor = 0
    for topic in sorted(t for t in counts if t in subscribed):
        for _ in range(counts[topic]):
            while True:
                listed = subs[members[cursor]].topics
                steps += 1
                scans += listed.index(topic) + 1 if topic in listed else len(listed)
                cursor = (cursor + 1) % len(members)
                if topic in listed:
                    break
    work = roundrobin_work(counts, subs).totals()
    assert work.get("iterator_steps", 0) == steps
    assert work.get("topic_scans", 0) == scans


@given(groups())
def test_range_counts_equal_a_literal_loop(group):
    """RangeAssignor per topic: one stream per subscriber until the partitions run out; the
    subscriber that takes the last ones empties the set with removeAll, which then scans the
    taken list for each element of the set."""
    counts, subs = group
    subscribed = {t for s in subs.values() for t in s.topics}
    streams = compares = 0
    for topic, n in counts.items():
        takers = [m for m in _kafka_member_order(subs) if topic in subs[m].topics]
        if topic not in subscribed or n == 0:
            continue
        left = list(range(n))
        per, extra = divmod(n, len(takers))
        for _ in takers:
            if not left:
                break
            streams += 1
            take = per + (1 if extra > 0 else 0)
            chunk, left = left[:take], left[take:]
            if take > per:
                extra -= 1
            if not left and chunk:  # the set is no larger than the list: contains per element
                compares += sum(chunk.index(p) + 1 for p in chunk)
    work = range_work(counts, subs).totals()
    assert work.get("stream_iterations", 0) == streams
    assert work.get("tp_compares", 0) == compares


# -- properties of the record ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_counts_do_not_depend_on_dict_order(name):
    row = next(
        r for r in ROWS if r.assignor == name and r.scenario.name == "hetero_500c_100x200_quarter"
    )
    metadata, subscriptions = row_input(row)
    baseline = client_kafka_ms(name, metadata, subscriptions)
    members = list(subscriptions)
    random.Random(7).shuffle(members)
    topics = list(metadata)
    random.Random(8).shuffle(topics)
    shuffled = client_kafka_ms(
        name, {t: metadata[t] for t in topics}, {m: subscriptions[m] for m in members}
    )
    assert shuffled == baseline
    assert client_kafka_ms(name, metadata, subscriptions) == baseline


def test_stream_join_sticky_is_priced_with_the_sticky_costs():
    assert "stream-join-sticky" not in CALIBRATED
    assert MS_PER_UNIT["stream-join-sticky"] is MS_PER_UNIT["sticky"]
    subs = {f"m{i}": Subscription(["a", "b"]) for i in range(4)}
    ms = client_kafka_ms("stream-join-sticky", {"a": 100, "b": 100}, subs)
    bigger = client_kafka_ms(
        "stream-join-sticky",
        {"a": 10_000, "b": 10_000},
        {f"m{i}": Subscription(["a", "b"]) for i in range(400)},
    )
    assert 0 < ms < bigger


def test_breakdown_adds_up_and_names_known_terms():
    row = next(r for r in ROWS if r.id == "hetero_500c_100x200_quarter-fresh-sticky")
    metadata, subscriptions = row_input(row)
    assignor = get_assignor("sticky")
    assignor.assign(metadata, subscriptions)
    parts = kafka_ms_by_term("sticky", assignor.last_work)
    assert set(parts) <= set(TERMS)
    total = client_kafka_ms("sticky", metadata, subscriptions, assignor.last_work)
    assert math.isclose(sum(parts.values()), total)
    # This shape's time goes to isBalanced's rescans: HashMap lookups walking partitions of one
    # hashCode (topics t0000..t0099 collide), and List#contains over the members' partitions
    # (a profile of Kafka's classes on it shows the same two: TreeNode.find, indexOfRange).
    top = sorted(parts, key=parts.get)[-2:]
    assert set(top) == {"tp_same_hash", "tp_compares"}


def test_work_of_another_assignor_is_refused():
    from assignors import AssignorError

    work = KafkaWork("range")
    with pytest.raises(AssignorError, match="work"):
        client_kafka_ms("sticky", {"a": 1}, {"m": Subscription(["a"])}, work)
    with pytest.raises(AssignorError, match="unknown assignor"):
        client_kafka_ms("nope", {"a": 1}, {"m": Subscription(["a"])})
