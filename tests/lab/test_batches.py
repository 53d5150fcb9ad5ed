"""How a sweep splits its runs into batches (one Spark job and one commit each)."""

from __future__ import annotations

import pytest

from rebalance_sim.lab.engine.grid import RunSpec
from rebalance_sim.lab.engine.sweep import BATCHES, batches_of


def _specs(costs):
    return [RunSpec("crash", (), i, (), run_id=f"r{i:03d}") for i in range(len(costs))], {
        f"r{i:03d}": c for i, c in enumerate(costs)
    }


@pytest.mark.parametrize("parallelism", [1, 2, 8])
def test_batches_share_the_cost_and_keep_the_order(parallelism):
    # a main-job-like spread: a few big runs first, then many small ones
    costs = [30_000.0] * 6 + [3_000.0] * 30 + [100.0] * 200 + [10.0] * 40
    todo, cost = _specs(costs)
    batches = batches_of(todo, parallelism, None, cost)
    assert [s for b in batches for s in b] == todo  # every run once, in the given order
    assert len(batches) <= BATCHES
    assert all(len(b) >= 2 * parallelism for b in batches)
    share = sum(costs) / BATCHES
    # every batch but the last reaches its share of the cost, and passes it by one run at most
    for b in batches[:-1]:
        total = sum(cost[s.run_id] for s in b)
        assert total >= share or len(b) == 2 * parallelism
        assert total - cost[b[-1].run_id] < share or len(b) <= 2 * parallelism
    # the small runs at the end do not get a batch each
    assert len(batches[-1]) > 40


def test_batch_runs_fixes_the_batch_size():
    todo, cost = _specs([5.0] * 11)
    assert [len(b) for b in batches_of(todo, 2, 4, cost)] == [4, 4, 3]


def test_few_runs_make_one_batch():
    todo, cost = _specs([1.0, 1.0, 1.0])
    assert batches_of(todo, 2, None, cost) == [todo]
