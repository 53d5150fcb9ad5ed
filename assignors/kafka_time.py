"""How long Apache Kafka's own Java implementation of a client-side assignor takes on an input.

``client_kafka_ms(assignor_name, partitions_per_topic, subscriptions, work=None)`` returns the
milliseconds Kafka's ``RangeAssignor``, ``RoundRobinAssignor``, ``StickyAssignor`` or
``CooperativeStickyAssignor`` (Kafka 4.0's line, commit 1eb7644) spends in
``AbstractPartitionAssignor.assign`` on that input: the simulated time a classic group's leader
computes an assignment for under ``assignor_cost = "kafka"``. It is deterministic: the same input
gives the same figure on every run and machine, whatever the order of the dicts.

What it models. Kafka's time is the work its code does on the input, counted by our assignors
as they follow Kafka's algorithms step by step (``Assignor.last_work``; the counts and what each
stands for are in ``assignors._kafka_work``), times a cost per operation. The terms are Kafka's
own: how many ``String.equals`` calls ``List.contains`` makes scanning subscription lists, how
many ``HashMap`` operations are keyed by ``TopicPartition`` and how many keys of an equal
``hashCode`` they walk past (topics named ``t0000``, ``t0001``, ... collide often), the element
comparisons of ``List.contains`` on partition lists, the partitions every ``isBalanced`` scan
builds (Kafka rescans from scratch on each call of ``performReassignments``' loop), the sorts.
That is why the same assignor takes 17 ms or 23 s depending on the subscriptions' shape, and why
a sticky reassignment of a million partitions costs ten times the fresh one.

What it was fitted to. ``calibration/client_assignors_java.csv``: Kafka's classes on a 2-vCPU
AMD EPYC VM (OpenJDK 17, G1), 40 inputs from 2,000 to a million partitions, fresh and after one
member left; the costs per operation are the least-squares fit in log space of those medians
(``tests/assignors/test_kafka_time.py`` holds the fit). Costs per operation were checked for
sense on more shapes measured locally (docs/kafka-fidelity.md, "Assignor time").

The JVM is warm: each figure is the median of three calls after two warm-up calls on the same
input. A broker is warm; the first assignment a classic group leader computes after its process
starts is not, and takes longer (docs/kafka-fidelity.md says how much, as far as the data shows).
The model does not add that.

``stream-join-sticky`` (KIP-315, never part of Kafka) has no Java implementation to measure: it
gets the work its algorithm does priced with the sticky costs, an estimate that is not calibrated.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import get_assignor
from ._kafka_work import TERMS, KafkaWork
from .types import AssignorError, Subscription

# Milliseconds per unit of each work term (assignors._kafka_work.TERMS), per Kafka class: the fit
# (least squares of log(ours / Kafka's), each cost held near a prior of what such an operation
# costs a JIT-compiled JVM) to the calibration medians, with shapes measured locally weighing in on
# how the costs split between terms (docs/kafka-fidelity.md, "Assignor time"). ``calls`` is what a
# call costs whatever its size: the calibration's small inputs (a JVM two calls into an input runs
# code that is not compiled yet). The two sticky assignors run one class (AbstractStickyAssignor)
# and share its costs.
_STICKY = {
    "calls": 3.63,
    "members": 8.83e-3,  # MemberData, per-member lists and maps, the TreeSet of members
    "partitions": 2.87e-5,  # per pass over every partition (PartitionInfo, lists, loops)
    "subscriptions": 2.08e-4,  # subscription lists checked and copied per member and topic
    "member_compares": 2.77e-5,  # sorts of member ids (unfilled members)
    "claims": 9.05e-5,  # memberData's partitions, read and checked per claim
    "user_data_partitions": 2.57e-4,  # eager sticky: Struct-decoded KIP-341 partitions
    "tp_hash_ops": 4.02e-5,  # HashMap<TopicPartition, ...>: allPartitions, owners, moves
    "tp_same_hash": 1.72e-5,  # their tree bins' walks over keys of one hashCode
    "tp_sort_compares": 1.19e-4,  # lambda comparators (boxed partition numbers) sorting claims
    "tp_compares": 2.40e-6,  # List#contains over a member's partitions (isBalanced)
    "topic_scans": 2.22e-6,  # List#contains over a member's topics
    "balance_scan_partitions": 1.21e-5,  # new TopicPartition per isBalanced check
    "tree_steps": 2.78e-5,  # TreeSet walks and per-member size checks
}
MS_PER_UNIT: Mapping[str, Mapping[str, float]] = {
    "range": {
        "calls": 16.4,
        "members": 4.68e-3,  # MemberInfo, the assignment map, rack lookups
        "partitions": 4.25e-4,  # PartitionInfo, TopicPartition, the topic's LinkedHashSet
        "subscriptions": 2.90e-4,  # consumersPerTopic, each topic's LinkedHashMap and counts
        "member_compares": 2.11e-5,  # Collections.sort of each topic's MemberInfos
        "stream_iterations": 6.56e-4,  # a stream pipeline per consumer per topic
        "tp_compares": 1.08e-6,  # removeAll scanning the last consumer's list
    },
    "roundrobin": {
        "calls": 0.854,
        "members": 6.49e-4,  # MemberInfo, the assignment map
        "partitions": 2.69e-4,  # TopicPartition created, listed and handed out
        "subscriptions": 7.48e-4,  # every member's topics added to a TreeSet
        "member_compares": 2.48e-5,  # Utils.sorted of the MemberInfos
        "iterator_steps": 3.60e-5,  # peeks of the circular iterator (a HashMap get each)
        "topic_scans": 1.84e-6,  # topics().contains over the peeked member's topics
    },
    "sticky": _STICKY,
    "cooperative-sticky": _STICKY,
    "stream-join-sticky": _STICKY,  # not calibrated: no Kafka class exists
}
CALIBRATED = ("range", "roundrobin", "sticky", "cooperative-sticky")


def kafka_ms_of(assignor_name: str, work: KafkaWork) -> float:
    """Milliseconds for counted ``work`` of ``assignor_name``."""
    return sum(kafka_ms_by_term(assignor_name, work).values())


def kafka_ms_by_term(assignor_name: str, work: KafkaWork) -> dict[str, float]:
    """``kafka_ms_of`` split by work term (what the time goes to)."""
    costs = MS_PER_UNIT.get(assignor_name)
    if costs is None:
        raise AssignorError(
            f"assignor {assignor_name!r}: no Kafka time model; known: {', '.join(MS_PER_UNIT)}"
        )
    if work.assignor != assignor_name:
        raise AssignorError(f"work: counted for assignor {work.assignor!r}, not {assignor_name!r}")
    counts = work.totals()
    return {t: counts[t] * costs[t] for t in TERMS if t in counts and t in costs}


def client_kafka_ms(
    assignor_name: str,
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    work: KafkaWork | None = None,
) -> float:
    """Milliseconds Kafka's own ``assignor_name`` takes to assign ``subscriptions`` over
    ``partitions_per_topic`` (a warm JVM; see the module docstring).

    ``work`` is the ``last_work`` of an assignor that has just assigned this very input (the
    simulator's leader passes it to avoid assigning twice); without it, a new assignor instance
    assigns the input to count the work. Raises ``AssignorError`` for an unknown assignor or bad
    input."""
    if work is None:
        assignor = get_assignor(assignor_name)
        assignor.assign(partitions_per_topic, subscriptions)
        work = assignor.last_work
        if work is None:  # nobody to assign to: Kafka returns at once
            return 0.0
    return kafka_ms_of(assignor_name, work)
