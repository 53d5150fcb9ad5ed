"""Our assignors timed directly, for the reports' assignment-time figure and table."""

from __future__ import annotations

import statistics
import time


def time_assignors(assignors, shapes) -> list[dict]:
    """Wall time of one reassignment (after one member left) per assignor and (members, partitions)."""
    from assignors import get_assignor

    from ..bench.assignors import Case, fresh_subscriptions, group_of, next_round

    rows = []
    for members, partitions in shapes:
        topics = max(1, partitions // 10_000)
        case = Case(f"{members}x{partitions}", members, topics, partitions // topics)
        metadata, topics_of = group_of(case)
        for name in assignors:
            a = get_assignor(name)
            fresh = a.assign(metadata, fresh_subscriptions(topics_of))
            subs = next_round(name, topics_of, fresh, 1, next(iter(topics_of)))
            times = []
            for _ in range(3 if partitions <= 100_000 else 1):
                # (no gc.collect() first: assign() pauses the cyclic collector itself, and a full
                # collection of the report's heap before every call would cost more than the calls)
                t0 = time.perf_counter()
                get_assignor(name).assign(metadata, subs)
                times.append(time.perf_counter() - t0)
            rows.append(
                {
                    "assignor": name,
                    "members": members,
                    "partitions": case.partitions,
                    "assign_s": statistics.median(times),
                }
            )
    return rows
