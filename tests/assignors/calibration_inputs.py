"""The inputs of ``calibration/client_assignors_java.csv``, rebuilt exactly as its README says.

A row names a scenario (``uniform_2100c_1x2100``, ``hetero_2000c_20x1000_randhalf``, ...), a
phase (``fresh``, ``leave1``) and an assignor. Topics are ``t0000``, ``t0001``, ...; members
``m00000``, ``m00001``, ... in that order. ``leave1``: member N/2 has left, and every other member
owns what the same assignor gave it in the fresh run, at generation 1 (eager ``sticky`` in KIP-341
user data, the others in the subscription's ``owned_partitions`` and ``generation`` fields).
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path

import attrs

from assignors import Subscription, get_assignor

CSV = Path(__file__).resolve().parents[2] / "calibration" / "client_assignors_java.csv"

_MASK64 = (1 << 64) - 1


class SplitMix64:
    """Java's ``SplittableRandom``-style SplitMix64 on 64-bit wrap-around arithmetic."""

    def __init__(self, seed: int):
        self.state = seed & _MASK64

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        return z ^ (z >> 31)


def random_topics(n_members: int, topics: list[str], k: int, seed: int = 42) -> list[list[str]]:
    """Each member's ``k`` topics: a partial Fisher-Yates shuffle of the topic indexes driven by
    one SplitMix64 generator for all members, in member order; the first ``k`` indexes, sorted."""
    rng = SplitMix64(seed)
    n = len(topics)
    out = []
    for _ in range(n_members):
        idx = list(range(n))
        for j in range(k):
            swap = j + rng.next() % (n - j)  # an unsigned remainder: next() is never negative here
            idx[j], idx[swap] = idx[swap], idx[j]
        out.append([topics[i] for i in sorted(idx[:k])])
    return out


@attrs.frozen
class Scenario:
    """One row's group: ``members`` x ``topics`` topics of ``partitions_per_topic`` partitions,
    subscribed by ``pattern`` (``all``, ``quarter``, ``randhalf``)."""

    name: str
    members: int
    topics: int
    partitions_per_topic: int
    pattern: str

    def metadata(self) -> dict[str, int]:
        return {f"t{t:04d}": self.partitions_per_topic for t in range(self.topics)}

    def member_topics(self) -> dict[str, list[str]]:
        names = list(self.metadata())
        ids = [f"m{i:05d}" for i in range(self.members)]
        if self.pattern == "all":
            return dict.fromkeys(ids, names)
        if self.pattern == "quarter":
            half = len(names) // 2
            return {m: names[:half] if i % 4 == 0 else names[half:] for i, m in enumerate(ids)}
        if self.pattern == "randhalf":
            picks = random_topics(self.members, names, len(names) // 2)
            return dict(zip(ids, picks, strict=True))
        raise ValueError(self.pattern)


def parse_scenario(name: str) -> Scenario:
    """``uniform_2100c_1x2100`` -> 2100 members, 1 topic of 2100 partitions, all subscribe all;
    ``hetero_500c_100x200_quarter`` -> the quarter pattern; ``..._randhalf`` -> SplitMix64 halves."""
    parts = name.split("_")
    members = int(parts[1].rstrip("c"))
    topics, per_topic = (int(x) for x in parts[2].split("x"))
    pattern = "all" if parts[0] == "uniform" else parts[3]
    return Scenario(name, members, topics, per_topic, pattern)


@attrs.frozen
class Row:
    scenario: Scenario
    phase: str
    assignor: str
    members: int
    partitions: int
    median_ms: float
    timed_runs_ms: tuple[float, ...]

    @property
    def id(self) -> str:
        return f"{self.scenario.name}-{self.phase}-{self.assignor}"


def rows() -> list[Row]:
    with CSV.open(newline="") as f:
        return [
            Row(
                parse_scenario(r["scenario"]),
                r["phase"],
                r["assignor"],
                int(r["members"]),
                int(r["partitions"]),
                float(r["median_ms"]),
                tuple(float(x) for x in r["timed_runs_ms"].split()),
            )
            for r in csv.DictReader(f)
        ]


@functools.lru_cache(maxsize=4)
def _fresh(scenario: Scenario, assignor: str):
    subs = {m: Subscription(ts) for m, ts in scenario.member_topics().items()}
    return subs, get_assignor(assignor).assign(scenario.metadata(), subs)


def row_input(row: Row) -> tuple[dict[str, int], dict[str, Subscription]]:
    """The (partitions_per_topic, subscriptions) Kafka's assignor was timed on for ``row``."""
    scenario = row.scenario
    metadata = scenario.metadata()
    if row.phase == "fresh":
        return metadata, {m: Subscription(ts) for m, ts in scenario.member_topics().items()}
    if row.phase != "leave1":
        raise ValueError(row.phase)
    fresh_subs, fresh = _fresh(scenario, row.assignor)
    gone = f"m{scenario.members // 2:05d}"
    subs = {}
    for m, sub in fresh_subs.items():
        if m == gone:
            continue
        owned = fresh[m].partitions
        if row.assignor == "sticky":
            member_side = get_assignor("sticky")
            data = member_side.subscription_user_data(list(owned), 1)
            subs[m] = Subscription(sub.topics, user_data=data, generation=1)
        else:
            subs[m] = Subscription(sub.topics, owned_partitions=owned, generation=1)
    return metadata, subs
