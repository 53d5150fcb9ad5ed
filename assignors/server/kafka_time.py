"""How long Kafka's own server-side assignors take on an input: a model of the work their Java
code does, for ``assignor_cost = "kafka"`` and ``rebalance-sim assign --server``.

Each server assignor call records a ``ServerWork`` on its result (``GroupAssignment.kafka_work``;
a ``UniformChain`` step records the same figures on the same input): how many members, topics,
partitions and so on the Java builder goes through *on this input*, counted as Kafka's code
incurs them. ``server_kafka_ms(work)`` prices them, one coefficient per step of the builder's
code, fitted to ``calibration/server_assignors_java.csv`` (Kafka's classes at commit 1eb7644
timed on a warm JVM; ``tests/assignors/test_server_kafka_time.py`` holds the fit row by row):

    from assignors.server import get_server_assignor
    from assignors.server.kafka_time import server_kafka_ms

    result = get_server_assignor("uniform").assign(spec, topics)
    server_kafka_ms(result.kafka_work)   # milliseconds Kafka's UniformAssignor takes on spec

The figure stands for Kafka's time on the input, not ours: it is the same whichever of our code
paths computed the target (the full assignor or an incremental chain step) and however long our
Python took. Evaluating it costs a few multiplications.

The builders and what each term counts (``ServerWork`` fields in brackets):

``range`` (``RangeAssignor``; its result does not depend on the current assignment):
- ``sortMemberIds`` sorts the members, ``N log2 N`` comparisons, each reading two members' specs;
  the same term carries the per-member map and ``MemberAssignmentImpl`` [members];
- each subscribed topic is resolved to its metadata once [topics];
- homogeneous: a loop over every member and every topic, skipping topics whose range is empty
  [members x topics]; heterogeneous: each member's subscription is read twice (counting the
  subscribers, then assigning) [members], and each (member, subscribed topic) pair is resolved
  through ``TopicIds`` and the topic map in both passes [pairs];
- one ``RangeSet`` and map entry per non-empty range: ``min(subscribers, partitions)`` per
  topic [ranges].

``uniform``, homogeneous group (``UniformHomogeneousAssignmentBuilder``):
- the subscribed topics resolved and counted [topics];
- every partition checked against the current target (``GroupSpec.isPartitionAssigned``): a hash
  lookup that finds the partition when it is held [held]; the unheld ones are listed, which the
  placement term carries;
- per member: its spec, its quota and its new target put in the result [members]; per topic of
  its current target (``maybeRevokePartitions`` walks them, reading each partition set) [entries];
- every partition dealt out in ``assignRemainingPartitions`` (a ``TopicIdPartition`` listed, a
  hash-set insert into the taker's target), and every partition copied when a member's target is
  copied before it changes (``AssignorHelpers.deepCopyAssignment``) [placed + copied];
- a new partition set per (member, topic) that receives its first partition [new_entries].

``uniform``, heterogeneous group (``UniformHeterogeneousAssignmentBuilder``, KAFKA-17710):
- per member: numbered in ``memberIndices``, its spec read, its target put [members];
- per (member, subscribed topic) pair: resolved, counted, and a boxed member index appended to
  the topic's subscriber list [pairs];
- per held partition: the owner arrays filled from the current targets [held]; per topic of a
  member's current target: the subscription check [entries];
- each ``MemberAssignmentBalancer.initialize`` (one per topic filled, one per topic per balancing
  pass) copies and sorts the topic's subscribers [balancer_inits, sorted_members];
- the partitions dealt out and copied, and the new partition sets, as above [placed + copied,
  new_entries];
- a topic that needs balancing has its partitions listed, sorted by owner and indexed in two hash
  maps [imbalanced_partitions]; each partition moved [moved].

Both uniform builders also pay the young-generation collections that their allocations trigger
while what they built is still reachable (the subscriber lists, the unassigned partition lists,
the new partition sets): a term in the square of those objects [live_objects] (collections come
with allocation, and each copies what is live). It is small except for the largest
heterogeneous groups, where it dominates: Kafka's own times grow faster than linearly there.

What is not modelled: rack awareness (Kafka removed it from these assignors, KAFKA-16694), the
``TargetAssignmentBuilder`` around the call (building the member specs and the records, which
Kafka's figures in the CSV do not include either), and a JVM that is not warm: a broker runs
these builders at every group epoch of every group it coordinates, so its JIT has compiled them;
the calibration times a warm JVM.
"""

from __future__ import annotations

import math

import attrs

RANGE = "range"
UNIFORM_HOMOGENEOUS = "uniform-homogeneous"
UNIFORM_HETEROGENEOUS = "uniform-heterogeneous"
EMPTY = "empty"  # no member or no subscribed topic: the assignor returns at once
BUILDERS = (RANGE, UNIFORM_HOMOGENEOUS, UNIFORM_HETEROGENEOUS, EMPTY)


@attrs.frozen
class ServerWork:
    """What one call of a Kafka server-side assignor goes through on its input (see the module
    docstring for which builder counts what). All counts are of the call's input and of what
    Kafka's code does with it, not of our implementation's work."""

    builder: str = attrs.field(validator=attrs.validators.in_(BUILDERS))
    homogeneous: bool = True
    members: int = 0  # members in the group spec
    topics: int = 0  # subscribed topics that exist
    pairs: int = 0  # (member, subscribed topic) pairs
    ranges: int = 0  # range: non-empty ranges handed out
    held: int = 0  # partitions of the current targets that the builder keeps track of
    entries: int = 0  # (member, topic) entries of the current targets
    unassigned: int = 0  # partitions listed as unassigned (never held, or revoked)
    placed: int = 0  # partitions dealt out to members with room
    copied: int = 0  # partitions copied with a target before it changed
    new_entries: int = 0  # (member, topic) partition sets created in the new targets
    balancer_inits: int = 0  # uniform heterogeneous: MemberAssignmentBalancer.initialize calls
    sorted_members: int = 0  # ... and the subscribers they sorted, in all
    imbalanced_partitions: int = 0  # partitions of the topics that needed balancing, per pass
    moved: int = 0  # partitions moved by balancing

    @property
    def live_objects(self) -> int:
        """Objects a uniform builder allocates that stay reachable until it returns."""
        if self.builder == UNIFORM_HOMOGENEOUS:
            # a TopicIdPartition per unassigned partition, a set node per partition placed or
            # copied, three objects per new partition set
            return self.unassigned + self.placed + self.copied + 3 * self.new_entries
        if self.builder == UNIFORM_HETEROGENEOUS:
            # a boxed member index per pair in the subscriber lists, a boxed partition id per
            # unassigned partition, then as above
            return self.pairs + 2 * self.unassigned + self.copied + 3 * self.new_entries
        return 0


# Coefficients, in nanoseconds per unit of the term, fitted to calibration/server_assignors_java.csv
# builder by builder, minimising the mean fourth power of log(model / Kafka) over its rows (a
# least-squares fit would trade the worst rows for the median; tests/assignors/
# test_server_kafka_time.py holds the fit row by row). Kafka's rows barely move partitions, so
# ``moved`` is set from the work of a move instead (a partition out of one set and into another,
# two index-map updates: about three placed partitions).
RANGE_NS = {
    "call": 281000,
    "sort": 15,  # per N log2 N
    "subscription_reads": 196,  # heterogeneous: per member
    "topics": 364,
    "member_topics": 2.66,  # homogeneous: per member x topic
    "pairs": 46.5,  # heterogeneous: per (member, subscribed topic)
    "ranges": 37.2,
}
UNIFORM_HOMOGENEOUS_NS = {
    "call": 204000,
    "topics": 231,
    "held": 23.2,
    "members": 112,
    "entries": 374,
    "placed": 46.7,  # per partition placed or copied
    "new_entries": 208,
    "gc": 5.35e-06,  # per live object squared
}
UNIFORM_HETEROGENEOUS_NS = {
    "call": 521000,
    "members": 301,
    "pairs": 32.9,
    "held": 31.5,
    "entries": 270,
    "balancer_inits": 1520,
    "sorted_members": 13.3,
    "placed": 114,
    "new_entries": 94.4,
    "imbalanced_partitions": 292,
    "moved": 350,
    "gc": 1.61e-05,
}


def terms(work: ServerWork) -> dict[str, float]:
    """The model's terms for ``work``: term name -> units (multiply by the builder's
    coefficients, ``coefficients(work.builder)``, and add up for nanoseconds)."""
    b = work.builder
    n = work.members
    if b == RANGE:
        return {
            "call": 1.0,
            "sort": n * math.log2(n) if n > 1 else 0.0,
            "subscription_reads": 0.0 if work.homogeneous else 2.0 * n,
            "topics": float(work.topics),
            "member_topics": float(n * work.topics) if work.homogeneous else 0.0,
            "pairs": 0.0 if work.homogeneous else float(work.pairs),
            "ranges": float(work.ranges),
        }
    live = float(work.live_objects)
    if b == UNIFORM_HOMOGENEOUS:
        return {
            "call": 1.0,
            "topics": float(work.topics),
            "held": float(work.held),
            "members": float(n),
            "entries": float(work.entries),
            "placed": float(work.placed + work.copied),
            "new_entries": float(work.new_entries),
            "gc": live * live,
        }
    if b == UNIFORM_HETEROGENEOUS:
        return {
            "call": 1.0,
            "members": float(n),
            "pairs": float(work.pairs),
            "held": float(work.held),
            "entries": float(work.entries),
            "balancer_inits": float(work.balancer_inits),
            "sorted_members": float(work.sorted_members),
            "placed": float(work.placed + work.copied),
            "new_entries": float(work.new_entries),
            "imbalanced_partitions": float(work.imbalanced_partitions),
            "moved": float(work.moved),
            "gc": live * live,
        }
    return {}


def coefficients(builder: str) -> dict[str, float]:
    """The builder's coefficients (nanoseconds per unit of each term)."""
    return {
        RANGE: RANGE_NS,
        UNIFORM_HOMOGENEOUS: UNIFORM_HOMOGENEOUS_NS,
        UNIFORM_HETEROGENEOUS: UNIFORM_HETEROGENEOUS_NS,
    }.get(builder, {})


def server_kafka_ms(work: ServerWork | None) -> float:
    """Milliseconds Kafka's assignor takes on the input ``work`` was counted on (0 for an empty
    group or no subscribed topic: Kafka's assignors return at once; 0 for None, no work known)."""
    if work is None:
        return 0.0
    price = coefficients(work.builder)
    return sum(price[k] * v for k, v in terms(work).items()) / 1e6


__all__ = [
    "BUILDERS",
    "EMPTY",
    "RANGE",
    "UNIFORM_HETEROGENEOUS",
    "UNIFORM_HOMOGENEOUS",
    "ServerWork",
    "coefficients",
    "server_kafka_ms",
    "terms",
]
