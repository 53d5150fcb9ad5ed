"""What the experiments' declarations share: the protocol variants they compare, the consumer
they simulate, how they build a scenario at a size, and how many seeds each size runs."""

from __future__ import annotations

import math
import statistics
import time

from ..report.headline import CONSUMER

EAGER_VS_COOP_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")


# The third protocol beside classic eager and cooperative: the consumer group protocol (KIP-848),
# where the coordinator assigns with the broker's default server-side assignor (uniform). In the
# tables it is one more value of the ``assignor`` column.
CONSUMER_PROTOCOL = CONSUMER


MAIN_JOB_VARIANTS = (*EAGER_VS_COOP_ASSIGNORS, CONSUMER_PROTOCOL)


def variant_overrides(variant: str) -> tuple[str, ...]:
    """The scenario overrides of one ``assignor`` column value (a classic assignor, or the
    consumer group protocol)."""
    if variant == CONSUMER_PROTOCOL:
        return ("consumer.group_protocol=consumer", "consumer.group_remote_assignor=uniform")
    return (f"consumer.partition_assignment_strategy={variant}",)


# The deploy: every member restarts once, a quarter of the group at a time (Kubernetes' default
# maxUnavailable for a Deployment), 10 s down, 20 s between batches. Four batches at every size,
# so the run cost grows with the group like the other scenarios'.
DEPLOY_BATCH = "25%"


def seeds_for(
    seeds: tuple[int, ...], by_size: tuple[tuple[int, int], ...], members: int
) -> tuple[int, ...]:
    """The first of ``seeds`` that group size ``members`` runs: as many as ``by_size`` gives it,
    else all."""
    n = dict(by_size).get(members)
    return seeds if n is None else seeds[:n]


def seeds_text(seeds: tuple[int, ...], by_size: tuple[tuple[int, int], ...], sizes) -> str:
    """How many seeds each group size runs, as the reports say it."""
    counts = [(m, len(seeds_for(seeds, by_size, m))) for m in sizes]
    if len({n for _, n in counts}) == 1:
        return f"{counts[0][1]} seed{'s' if counts[0][1] != 1 else ''} per point"
    return "seeds per point: " + ", ".join(f"{n} at {m:,} members" for m, n in counts)


# Seeds only matter if something is random: a lognormal link latency (median 2 ms).
COMMON_OVERRIDES = {"network.latency.kind": "lognormal", "network.latency.ms": 2.0}


# A plain (stateless) consumer doing real work per record: 500 records/s per member, so a
# 500-record poll batch takes up to 1 s (members react to a rebalance between batches), plus
# rebalance-listener costs per partition: flush and commit on revoke, re-open state on assign.
CONSUMER_PROFILE = {"capacity": 500.0, "revoke_cost_ms": 10.0, "assign_cost_ms": 50.0}


# The built-ins' fault time and its jitter (sim.builtin_scenarios); later faults move by multiples
# of the jitter's period.
BUILTIN_FAULT_S = 60.0


BUILTIN_JITTER_S = 15.0


PHASE_PERIOD_S = 15.0


CONSUMER_HEARTBEAT_S = 5.0  # group.consumer.heartbeat.interval.ms, the broker's default (KIP-848)


def formation_allowance_s(partitions: int) -> float:
    """How much later than the built-ins' 60 s the fault comes, so that the group has formed
    under every protocol first (0 when it has anyway). Under the consumer protocol the first
    member to join is assigned every partition at once (KIP-848 has no
    group.initial.rebalance.delay.ms), runs onPartitionsAssigned for all of them, then revokes all
    but its share before the others can take theirs: forming takes about partitions x (assign +
    revoke cost) plus a heartbeat (125 s at 2,000 partitions here). A fault before that would fall
    into the formation, which no metric counts. Two heartbeats of margin, rounded up to a multiple
    of ``PHASE_PERIOD_S``; the same for every protocol of a point, so all see the same scenario."""
    cost_s = (CONSUMER_PROFILE["assign_cost_ms"] + CONSUMER_PROFILE["revoke_cost_ms"]) / 1000.0
    need_s = partitions * cost_s + 2 * CONSUMER_HEARTBEAT_S - BUILTIN_FAULT_S
    return PHASE_PERIOD_S * math.ceil(max(0.0, need_s) / PHASE_PERIOD_S)


def scenario_dict(
    label: str,
    membership: str,
    members: int,
    partitions: int,
    deploy_batch: str,
    consumer_protocol: bool = True,
) -> dict:
    """A built-in at this size with the experiment's consumer and network; when the consumer
    protocol runs it too, its fault moved past that protocol's formation (``formation_allowance_s``)."""
    from sim.builtin_scenarios import builtin_dict

    overrides = {"members": str(members), "partitions": str(partitions)}
    if label == "rolling-deploy":
        data = builtin_dict(
            label,
            {
                **overrides,
                "batch_size": deploy_batch,
                "static": str(membership == "static").lower(),
            },
        )
    else:
        data = builtin_dict(label, overrides)  # crash: the second member by name, at any size
        data["consumer"]["static"] = membership == "static"
    data["name"] = label
    data["description"] = f"{label}, {membership} members (eager-vs-cooperative experiment)"
    data["consumer"].update(CONSUMER_PROFILE)
    net = data.setdefault("network", {})
    net["latency"] = {
        "kind": COMMON_OVERRIDES["network.latency.kind"],
        "ms": COMMON_OVERRIDES["network.latency.ms"],
    }
    shift = formation_allowance_s(partitions) if consumer_protocol else 0.0
    for action in data["timeline"]:
        action["at_s"] = action["at_s"] + shift
    return data


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
