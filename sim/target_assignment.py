"""The coordinator's target assignment (KIP-848): one call of a server-side assignor for a group
epoch, behind the one small interface the consumer-protocol coordinator needs.

``compute_target(name, partitions_per_topic, members, current)`` returns, for each member id, the
frozenset of TopicPartitions it should own at the new epoch. ``members`` maps member id to a
``MemberSpec`` (subscribed topics, rack, instance id); ``current`` is the previous target
assignment (what Kafka's ``TargetAssignmentBuilder`` hands the assignor as each member's current
assignment, so the assignor can be sticky).

The server-side assignors themselves (Kafka's ``UniformAssignor`` and ``RangeAssignor`` of the
group-coordinator module) live in ``assignors.server``; this module only adapts their call.
Until that package is present the simulator uses the stand-ins below, which keep the two
properties the reconciliation depends on (sticky toward ``current``, balanced: counts differ by at
most one among members of one subscription) but not Kafka's exact choices.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from assignors import TopicPartition

SERVER_ASSIGNORS = ("uniform", "range")  # group.consumer.assignors names (GroupCoordinatorConfig)


@attrs.frozen(slots=True)
class MemberSpec:
    """What a server-side assignor learns of one member (Kafka's MemberSubscriptionAndAssignment)."""

    topics: tuple[str, ...]
    rack: str | None = None
    instance_id: str | None = None


def _server_registry():
    try:
        from assignors.server import get_server_assignor  # noqa: PLC0415 (optional until it lands)
    except ImportError:
        return None
    return get_server_assignor


def compute_target(name: str, partitions_per_topic: Mapping[str, int], members: Mapping[str, MemberSpec],
                   current: Mapping[str, frozenset]) -> dict[str, frozenset]:
    """The target assignment of ``members`` (see the module docstring)."""
    registry = _server_registry()
    if registry is not None:
        return _via_registry(registry(name), partitions_per_topic, members, current)
    if name == "range":
        return _range_standin(partitions_per_topic, members)
    return _uniform_standin(partitions_per_topic, members, current)


def _via_registry(assignor, partitions_per_topic, members, current) -> dict[str, frozenset]:
    from assignors.server import GroupSpec, MemberSubscriptionAndAssignment  # noqa: PLC0415

    def assigned(mid):
        by_topic: dict[str, list[int]] = {}
        for tp in current.get(mid, ()):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return by_topic

    spec = GroupSpec({mid: MemberSubscriptionAndAssignment(set(s.topics), assigned(mid), s.instance_id, s.rack)
                      for mid, s in members.items()})
    result = assignor.assign(spec, dict(partitions_per_topic))
    out: dict[str, frozenset] = {}
    for mid in members:
        parts = result.get(mid) or {}
        out[mid] = frozenset(TopicPartition(t, int(p)) for t, ps in parts.items() for p in ps)
    return out


def _uniform_standin(partitions_per_topic, members, current) -> dict[str, frozenset]:
    """Sticky and balanced per subscription: each group of members with the same topics shares
    those topics' partitions; a member keeps what it had up to its quota, the rest is dealt to
    the members with the fewest partitions (ties by member id)."""
    by_subscription: dict[tuple[str, ...], list[str]] = {}
    for mid in sorted(members):
        topics = tuple(sorted(set(members[mid].topics) & set(partitions_per_topic)))
        by_subscription.setdefault(topics, []).append(mid)
    out: dict[str, frozenset] = {mid: frozenset() for mid in members}
    taken: set[TopicPartition] = set()
    for topics, mids in sorted(by_subscription.items()):
        parts = [TopicPartition(t, p) for t in topics for p in range(partitions_per_topic[t])
                 if TopicPartition(t, p) not in taken]
        if not parts or not mids:
            continue
        n, total = len(mids), len(parts)
        base, extra = divmod(total, n)
        pool = set(parts)
        kept: dict[str, list] = {}
        for mid in mids:
            kept[mid] = sorted((tp for tp in current.get(mid, ()) if tp in pool), key=_order)
        # members keeping the most get the ``extra`` ceiling slots first, so fewer partitions move
        order = sorted(mids, key=lambda m: (-len(kept[m]), m))
        quota = {mid: base + (1 if i < extra else 0) for i, mid in enumerate(order)}
        assigned: dict[str, list] = {}
        for mid in mids:
            mine = kept[mid][:quota[mid]]
            assigned[mid] = mine
            pool.difference_update(mine)
        free = [tp for tp in parts if tp in pool]  # parts are in (topic, partition) order
        i = 0
        for mid in order:
            need = quota[mid] - len(assigned[mid])
            if need > 0:
                assigned[mid].extend(free[i:i + need])
                i += need
        for mid in mids:
            out[mid] = frozenset(assigned[mid])
            taken.update(assigned[mid])
    return out


def _order(tp: TopicPartition) -> tuple[str, int]:
    return (tp.topic, tp.partition)


def _range_standin(partitions_per_topic, members) -> dict[str, frozenset]:
    """Per topic, contiguous ranges to the subscribed members in member id order (co-partitioned)."""
    out: dict[str, set] = {mid: set() for mid in members}
    for topic in sorted(partitions_per_topic):
        mids = sorted(mid for mid, spec in members.items() if topic in spec.topics)
        if not mids:
            continue
        n = partitions_per_topic[topic]
        base, extra = divmod(n, len(mids))
        start = 0
        for i, mid in enumerate(mids):
            count = base + (1 if i < extra else 0)
            out[mid].update(TopicPartition(topic, p) for p in range(start, start + count))
            start += count
    return {mid: frozenset(v) for mid, v in out.items()}
