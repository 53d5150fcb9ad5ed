"""`rebalance-sim bench assignors`: wall time, peak memory and quality of every assignor at scale.

Each case is a group shape (members x partitions, uniform or two subscription groups) run twice
per assignor: a fresh assignment (nobody owns anything) and a reassignment after one member left
(everyone else reports what the fresh assignment gave it, one generation later, the way each
assignor's member side reports it). Wall time is the median of ``--repeat`` runs, or of more when
those add up to under half a second (``rebalance_sim.lab.bench.timing``); peak memory is
measured in one extra run under ``tracemalloc`` (Python and numpy allocations) so that tracing
does not slow the timed runs. ``moved`` counts partitions whose owner changed from the previous
assignment (the leaver's partitions and cooperatively withheld ones included). The KIP-848
server-side assignors (``server:uniform``, ``server:range``) run their own cases: see
``rebalance_sim/lab/bench/server_assignors.py``.
"""

from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import attrs
import numpy as np

from assignors import ASSIGNORS, Assignment, Subscription, get_assignor
from assignors.quality import assignment_quality
from assignors.stream_join import decode_assignment_user_data, encode_assignment_user_data

from ..atomic import atomic_write_text
from .server_assignors import (
    QUICK_SERVER_CASES,
    SERVER_CASES,
    ServerCase,
    bench_server_case,
    server_names,
)
from .timing import MIN_TIMED_S, timed_median


@attrs.frozen
class Case:
    """A group shape: ``topics`` x ``partitions_per_topic``, ``members``; ``split`` gives the
    second half of the members only the first half of the topics (two subscription groups);
    ``random_half_seed`` (instead) gives every member its own half of the topics, drawn from a
    seeded RNG (heterogeneous subscriptions)."""

    name: str
    members: int
    topics: int
    partitions_per_topic: int
    split: bool = False
    random_half_seed: int | None = None

    @property
    def partitions(self) -> int:
        return self.topics * self.partitions_per_topic


CASES = [
    Case("10 x 100", 10, 10, 10),
    Case("2100 x 2100", 2100, 1, 2100),
    Case("1000 x 10,000", 1000, 10, 1000),
    Case("2000 x 1,000,000", 2000, 500, 2000),
    Case("500 x 20,000 two groups", 500, 40, 500, split=True),
]
QUICK_CASES = [CASES[0], CASES[1], Case("200 x 2,000 two groups", 200, 20, 100, split=True)]
# range and roundrobin are also benchmarked at the 10,000 x 1,000,000 target.
RANGE_ROUNDROBIN_CASES = [Case("10,000 x 1,000,000", 10_000, 100, 10_000)]

# Kafka's own Java assignor classes (JDK 17, warmed up) on these inputs, 2 cores, medians in ms:
# the reference figures of the speed targets, measured outside this command and printed beside
# our rows (`java_ms`) so that one run shows where we stand. Keys: (assignor, case, mode).
RANDOM_HALVES = Case("2000 x 20,000 random halves", 2000, 20, 1000, random_half_seed=13)
JAVA_MS = {
    ("sticky", "2100 x 2100", "one member left"): 14.0,
    ("roundrobin", "2100 x 2100", "fresh"): 1.9,
    ("sticky", "2000 x 1,000,000", "fresh"): 140.0,
    ("cooperative-sticky", "2000 x 1,000,000", "fresh"): 214.0,
    ("sticky", RANDOM_HALVES.name, "one member left"): 61.0,
    ("cooperative-sticky", RANDOM_HALVES.name, "one member left"): 32.0,
    ("sticky", "1000 x 10,000", "one member left"): 23.0,
}
# The general-path case for the sticky family (the others run it too: it is small).
CASES.append(RANDOM_HALVES)


def group_of(case: Case) -> tuple[dict[str, int], dict[str, list[str]]]:
    names = [f"topic-{i:03d}" for i in range(case.topics)]
    metadata = dict.fromkeys(names, case.partitions_per_topic)
    half = names[: max(1, case.topics // 2)]
    if case.random_half_seed is not None:
        rng = np.random.default_rng(case.random_half_seed)
        k = max(1, case.topics // 2)
        return metadata, {
            f"consumer-{i:05d}": [
                names[j] for j in np.sort(rng.choice(case.topics, k, replace=False)).tolist()
            ]
            for i in range(case.members)
        }
    topics_of = {
        f"consumer-{i:05d}": (half if case.split and i >= case.members // 2 else names)
        for i in range(case.members)
    }
    return metadata, topics_of


def fresh_subscriptions(topics_of: dict[str, list[str]]) -> dict[str, Subscription]:
    return {m: Subscription(ts) for m, ts in topics_of.items()}


def next_round(name: str, topics_of, result: dict[str, Assignment], generation: int, leaver: str):
    """Subscriptions of the survivors, as each one's member side of ``name`` would send them."""
    subs = {}
    for m, ts in topics_of.items():
        if m == leaver:
            continue
        member_side = get_assignor(name)
        member_side.on_assignment(result[m], generation)
        subs[m] = Subscription(
            ts,
            user_data=member_side.subscription_user_data(None, generation),
            owned_partitions=result[m].partitions,
            generation=generation,
        )
    return subs


def _peak_mib(fn: Callable[[], object]) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


MODES = ("fresh", "one member left")


def bench_case(
    name: str, case: Case, repeat: int, measure_memory: bool = True, modes: tuple[str, ...] = MODES
) -> list[dict]:
    """Rows for ``modes`` of ``case`` (the fresh assignment is computed, untimed, when only the
    reassignment is asked for)."""
    metadata, topics_of = group_of(case)
    fresh_subs = fresh_subscriptions(topics_of)
    rows = []
    assignor = get_assignor(name)
    if "fresh" in modes:
        wall, fresh, _ = timed_median(lambda: assignor.assign(metadata, fresh_subs), repeat)
        rows.append(
            _row(
                name,
                case,
                "fresh",
                wall,
                metadata,
                fresh_subs,
                fresh,
                None,
                _peak_mib(lambda: assignor.assign(metadata, fresh_subs))
                if measure_memory
                else None,
            )
        )
    else:
        fresh = assignor.assign(metadata, fresh_subs)
    if "one member left" not in modes:
        return rows
    generation = 1
    leaver = next(iter(topics_of))
    if name == "stream-join-sticky":
        generation = decode_assignment_user_data(
            fresh[leaver].user_data or encode_assignment_user_data(0)
        )
    subs = next_round(name, topics_of, fresh, generation, leaver)
    wall, again, _ = timed_median(lambda: assignor.assign(metadata, subs), repeat)
    rows.append(
        _row(
            name,
            case,
            "one member left",
            wall,
            metadata,
            subs,
            again,
            fresh,
            _peak_mib(lambda: assignor.assign(metadata, subs)) if measure_memory else None,
        )
    )
    return rows


def moved_since(previous: dict[str, Assignment] | None, result: dict[str, Assignment]) -> int:
    """Partitions of the previous assignment whose owner is not the same now: the leaver's
    partitions count (they must move), and so do partitions a cooperative assignor withholds
    (they move in the follow-up round). Counting only the survivors' claims would hide both."""
    if previous is None:
        return 0
    now = {tp: m for m, a in result.items() for tp in a.partitions}
    return sum(now.get(tp) != m for m, a in previous.items() for tp in a.partitions)


def _row(name, case, mode, wall, metadata, subs, result, previous, peak) -> dict:
    q = assignment_quality(metadata, subs, result)
    return {
        "assignor": name,
        "case": case.name,
        "members": len(subs),
        "partitions": case.partitions,
        "mode": mode,
        "wall_s": wall,
        "java_ms": JAVA_MS.get((name, case.name, mode)),
        "peak_mib": peak,
        "spread": q.spread,
        "moved": moved_since(previous, result),
        "withheld": q.withheld,
    }


COLUMNS = [
    "assignor",
    "case",
    "mode",
    "members",
    "partitions",
    "wall_s",
    "java_ms",
    "spec_ms",
    "peak_mib",
    "spread",
    "moved",
    "withheld",
]


def _fmt(row: dict, col: str) -> str:
    v = row.get(col)
    if v is None:
        return "-"
    if col == "wall_s":
        return f"{v * 1000:.1f} ms" if v < 1 else f"{v:.2f} s"
    if col == "java_ms":
        return f"{v:g} ms"
    if col == "peak_mib":
        return f"{v:.0f} MiB" if v >= 10 else f"{v:.1f} MiB"
    return f"{v:,}" if isinstance(v, int) else str(v)


def markdown_table(rows: list[dict]) -> str:
    head = "| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS) + "\n"
    return head + "".join("| " + " | ".join(_fmt(r, c) for c in COLUMNS) + " |\n" for r in rows)


def run(args) -> int:
    known = list(ASSIGNORS) + server_names()
    names = args.assignor or known
    unknown = [n for n in names if n not in known]
    if unknown:
        print(
            f"rebalance-sim bench assignors: unknown assignor {unknown[0]!r}; known: {', '.join(known)}",
            file=sys.stderr,
        )
        return 2
    if args.out:
        from ..outputs import OutputError, check_output_file

        try:
            check_output_file(args.out)
        except OutputError as e:
            print(f"rebalance-sim bench assignors: {e}", file=sys.stderr)
            return 2
    rows = _target_rows(args, names) if args.targets else _all_rows(args, names)
    table = markdown_table(rows)
    if args.json:
        import json

        print(json.dumps(rows, indent=2))
    else:
        print(table)
    if args.out:
        header = (
            "# Assignor benchmark\n\n"
            f"`rebalance-sim bench assignors{' --quick' if args.quick else ''}{' --targets' if args.targets else ''}`, median of at least {args.repeat} runs and of at least {MIN_TIMED_S:g} s of runs, "
            "peak memory from one tracemalloc run. Machine: "
            f"{_machine()}.\n\n"
        )
        atomic_write_text(Path(args.out), header + table)
        print(f"written to {args.out}", file=sys.stderr)
    return 0


def _all_rows(args, names: list[str]) -> list[dict]:
    cases = QUICK_CASES if args.quick else CASES
    plan: list[tuple[str, Case | ServerCase]] = [
        (n, c) for n in names if n in ASSIGNORS for c in cases
    ]
    # KIP-848 server-side assignors ("server:uniform", "server:range") on their own cases.
    plan += [
        (n, c)
        for n in names
        if n not in ASSIGNORS
        for c in (QUICK_SERVER_CASES if args.quick else SERVER_CASES)
    ]
    if not args.quick:
        plan += [
            (n, c) for n in names if n in ("range", "roundrobin") for c in RANGE_ROUNDROBIN_CASES
        ]
    rows: list[dict] = []
    for i, (name, case) in enumerate(plan, 1):
        print(f"[{i}/{len(plan)}] {name:<20} {case.name}", file=sys.stderr, flush=True)
        if isinstance(case, Case):
            rows.extend(bench_case(name, case, args.repeat, measure_memory=not args.no_memory))
        else:
            rows.extend(
                bench_server_case(name, case, args.repeat, None if args.no_memory else _peak_mib)
            )
    return rows


def _target_rows(args, names: list[str]) -> list[dict]:
    """Only the rows that have a Java reference figure (the speed targets), in its order."""
    by_case = {c.name: c for c in CASES}
    plan = [(a, by_case[c], mode) for (a, c, mode) in JAVA_MS if a in names]
    rows: list[dict] = []
    for i, (name, case, mode) in enumerate(plan, 1):
        print(f"[{i}/{len(plan)}] {name:<20} {case.name}, {mode}", file=sys.stderr, flush=True)
        rows.extend(
            bench_case(name, case, args.repeat, measure_memory=not args.no_memory, modes=(mode,))
        )
    return rows


def _machine() -> str:
    import os
    import platform

    load = (
        f", load average {os.getloadavg()[0]:.1f} at the end" if hasattr(os, "getloadavg") else ""
    )
    return f"{os.cpu_count()} cores, Python {platform.python_version()}{load}"
