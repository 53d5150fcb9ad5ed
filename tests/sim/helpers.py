"""Small builders shared by the simulator tests."""

from __future__ import annotations

import pytest

from sim import Scenario, run_scenario


def need_assignor(name: str) -> None:
    """Skip the calling test while the assignor ``name`` is not importable yet."""
    from assignors import get_assignor

    try:
        get_assignor(name)
    except (ImportError, ModuleNotFoundError, AttributeError) as e:
        pytest.skip(f"assignor {name!r} not available yet: {e}")


def scenario(
    timeline=(), *, members=3, partitions=6, strategy=("range",), consumer=None, **top
) -> Scenario:
    """A one-topic scenario ``t`` with ``partitions`` partitions at 10 records/s each, and an
    instant assignor (``assignor_cost = "zero"``) unless ``assignor_cost`` is given: these
    scenarios pin the protocols' exact timings; a test of assignor time asks for it."""
    for name in strategy:
        need_assignor(name)
    cons = {"partition_assignment_strategy": list(strategy)}
    cons.update(consumer or {})
    data = {
        "name": "test",
        "members": members,
        "topics": [{"name": "t", "partitions": partitions, "rate": 10.0}],
        "consumer": cons,
        "timeline": list(timeline),
        "assignor_cost": "zero",
    }
    data.update(top)
    return Scenario.from_dict(data)


def run(sc: Scenario, seed: int = 1, **kw):
    return run_scenario(sc, seed=seed, **kw)


def events(result, kind=None, member=None, after=0.0):
    rows = result.events.to_pylist()
    return [
        r
        for r in rows
        if (kind is None or r["kind"] == kind)
        and (member is None or r["member"] == member)
        and r["t"] >= after
    ]


def intervals(result, kind, member=None):
    return [
        r
        for r in result.intervals.to_pylist()
        if r["kind"] == kind and (member is None or r["member"] == member)
    ]


def episode(result, index=1):
    return result.episodes[index]


def owners_at(result, t):
    """{partition: [members owning it at time t]} from the owned intervals."""
    out = {}
    for r in intervals(result, "owned"):
        if r["start"] <= t < r["end"]:
            out.setdefault(r["partition"], []).append(r["member"])
    return out
