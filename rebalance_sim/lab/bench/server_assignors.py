"""Rows of `rebalance-sim bench assignors` for the server-side (KIP-848) assignors.

Cases follow Kafka's ``ServerSideAssignorBenchmark``: members subscribe to every topic
(homogeneous) or fall into five buckets with disjoint topics (heterogeneous), and the group is
assigned either fresh or after one more member joins (everyone else holding the fresh target; the
new member subscribes like the last one; the others hand back their ``MemberAssignment`` of the
fresh target). As in Kafka's JMH benchmark, the timed call is
``assign`` on a ``GroupSpec`` built beforehand; building the spec (member order, checks) is timed
separately in ``spec_ms``. Wall time is the median of ``repeat`` runs or more
(``rebalance_sim.lab.bench.timing.timed_median``).
"""

from __future__ import annotations

import attrs
import numpy as np

from assignors.server import (
    SERVER_ASSIGNORS,
    GroupSpec,
    MemberSubscriptionAndAssignment,
    get_server_assignor,
)

from .timing import timed_median

PREFIX = "server:"


@attrs.frozen
class ServerCase:
    """``members`` over ``topics`` x ``partitions_per_topic``, in ``buckets`` subscription groups."""

    name: str
    members: int
    topics: int
    partitions_per_topic: int
    buckets: int = 1

    @property
    def partitions(self) -> int:
        return self.topics * self.partitions_per_topic


SERVER_CASES = [
    ServerCase("10,000 x 100,000", 10_000, 100, 1_000),
    ServerCase("10,000 x 100,000 five groups", 10_000, 100, 1_000, buckets=5),
]
QUICK_SERVER_CASES = [
    ServerCase("1000 x 10,000", 1000, 10, 1000),
    ServerCase("1000 x 10,000 five groups", 1000, 10, 1000, buckets=5),
]


def server_names() -> list[str]:
    return [PREFIX + n for n in SERVER_ASSIGNORS]


def _subscriptions(case: ServerCase) -> tuple[dict[str, int], dict[str, frozenset[str]]]:
    """Kafka's createHeterogeneousBucketedMembers: ceil-sized buckets of members and topics."""
    names = [f"topic-{i:03d}" for i in range(case.topics)]
    buckets = min(case.buckets, case.members)
    topics_per_bucket = -(-case.topics // buckets)
    members_per_bucket = -(-case.members // buckets)
    sets = [
        frozenset(names[b * topics_per_bucket : (b + 1) * topics_per_bucket])
        for b in range(buckets)
    ]
    subs = {f"member-{i:05d}": sets[i // members_per_bucket] for i in range(case.members)}
    return dict.fromkeys(names, case.partitions_per_topic), subs


def bench_server_case(name: str, case: ServerCase, repeat: int, peak_mib=None) -> list[dict]:
    """Two rows (fresh, one member joined) for server assignor ``server:NAME``."""
    assignor = get_server_assignor(name.removeprefix(PREFIX))
    meta, subs = _subscriptions(case)
    members = {m: MemberSubscriptionAndAssignment(ts) for m, ts in subs.items()}
    spec_s, spec, _ = timed_median(lambda: GroupSpec(members), repeat)
    wall, fresh, _ = timed_median(lambda: assignor.assign(spec, meta), repeat)
    rows = [
        _row(
            name,
            case,
            "fresh",
            spec_s,
            wall,
            fresh,
            None,
            peak_mib(lambda: assignor.assign(spec, meta)) if peak_mib else None,
        )
    ]

    # Everyone hands back its part of the fresh target, as the coordinator keeps it (Kafka's
    # benchmark likewise passes the MemberAssignment objects of its first run).
    joined = {m: MemberSubscriptionAndAssignment(ts, fresh.get(m, {})) for m, ts in subs.items()}
    joined["member-new"] = MemberSubscriptionAndAssignment(subs[next(reversed(subs))])
    spec_s, spec2, _ = timed_median(lambda: GroupSpec(joined), repeat)
    wall, again, _ = timed_median(lambda: assignor.assign(spec2, meta), repeat)
    rows.append(
        _row(
            name,
            case,
            "one member joined",
            spec_s,
            wall,
            again,
            fresh,
            peak_mib(lambda: assignor.assign(spec2, meta)) if peak_mib else None,
        )
    )
    return rows


def _row(name, case, mode, spec_s, wall, result, previous, peak) -> dict:
    counts = list(result.partition_counts().values())
    moved = None
    if previous is not None:
        # Partitions whose member changed between the two targets (member ids, not indices).
        moved = 0
        for t in result.topics:
            old = np.array(previous.member_ids + ("",), dtype=object)[previous.owners(t)]
            new = np.array(result.member_ids + ("",), dtype=object)[result.owners(t)]
            moved += int((old != new).sum())
    return {
        "assignor": name,
        "case": case.name,
        "members": len(result),
        "partitions": case.partitions,
        "mode": mode,
        "wall_s": wall,
        "spec_ms": round(spec_s * 1000, 1),
        "peak_mib": peak,
        "spread": (max(counts) - min(counts)) if counts else 0,
        "moved": moved if moved is not None else 0,
        "withheld": None,  # KIP-848 has no withholding round: reconciliation revokes first
    }
