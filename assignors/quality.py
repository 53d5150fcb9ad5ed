"""How good an assignment is: balance, movement against the previous owners, withheld partitions."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from .types import Assignment, Subscription, TopicPartition


@attrs.frozen
class Quality:
    """Summary of one assignment.

    ``spread``: max minus min partition count over members. ``moved``: partitions (of existing,
    subscribed topics) that their owner in ``owned_partitions`` does not keep, whether they go to
    another member now or after a cooperative follow-up round. ``withheld``: subscribed
    partitions of existing topics that no member received (a cooperative assignor withholds
    partitions that change owner until the follow-up round). ``kept``: owned partitions that stayed.
    """

    members: int
    partitions: int
    assigned: int
    min_count: int
    max_count: int
    spread: int
    moved: int
    kept: int
    withheld: int


def assignment_quality(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    assignment: Mapping[str, Assignment],
) -> Quality:
    subscribed = {t for s in subscriptions.values() for t in s.topics if t in partitions_per_topic}
    total = sum(partitions_per_topic[t] for t in subscribed)
    counts = [len(a.partitions) for a in assignment.values()] or [0]
    owned: set[tuple[str, TopicPartition]] = {
        (member, tp)
        for member, sub in subscriptions.items()
        for tp in sub.owned_partitions
        if tp.topic in subscribed and 0 <= tp.partition < partitions_per_topic[tp.topic]
    }
    assigned = kept = 0
    for member, a in assignment.items():
        assigned += len(a.partitions)
        kept += sum((member, tp) in owned for tp in a.partitions)
    moved = len(owned) - kept
    return Quality(
        members=len(assignment),
        partitions=total,
        assigned=assigned,
        min_count=min(counts),
        max_count=max(counts),
        spread=max(counts) - min(counts),
        moved=moved,
        kept=kept,
        withheld=total - assigned,
    )
