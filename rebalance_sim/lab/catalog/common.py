"""What the experiments' declarations share: how they turn a variant into scenario overrides,
build a scenario at a size, and how many seeds each size runs (the names and constants they share
with their reports are in ``rebalance_sim.lab.vocabulary``)."""

from __future__ import annotations

import math

from ..vocabulary import (
    BUILTIN_FAULT_S,
    CONSUMER,
    CONSUMER_HEARTBEAT_MS,
    CONSUMER_PROFILE,
)


def variant_overrides(variant: str) -> tuple[str, ...]:
    """The scenario overrides of one ``assignor`` column value (a classic assignor, or the
    consumer group protocol)."""
    if variant == CONSUMER:
        return ("consumer.group_protocol=consumer", "consumer.group_remote_assignor=uniform")
    return (f"consumer.partition_assignment_strategy={variant}",)


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


# A fault moved later moves by whole multiples of the built-ins' jitter period.
PHASE_PERIOD_S = 15.0


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
    need_s = partitions * cost_s + 2 * CONSUMER_HEARTBEAT_MS / 1000.0 - BUILTIN_FAULT_S
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
    from sim.scenario.builtins import builtin_dict

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
