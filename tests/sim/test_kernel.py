"""The kernel's random streams and its delivery loop."""

from __future__ import annotations

import numpy as np
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.kernel.queue import Actor, Kernel
from sim.kernel.rng import RNG_BLOCK, seed_states
from sim.kernel.stop import StopToken
from sim.kernel.tasks import KERNELS


def _numpy_stream(seed: int, key: tuple[int, ...]) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**96),
    rank=st.integers(0, 3 * RNG_BLOCK),
    stream=st.one_of(st.none(), st.integers(0, 2**32 - 1)),
)
def test_an_actor_stream_is_numpys_spawned_child(seed, rank, stream):
    # rng_for promises what SeedSequence(seed).spawn would give (and, with a stream, that child's
    # own child): the same bit generator state, hence the same draws
    key = (rank,) if stream is None else (rank, stream)
    got = Kernel(seed, 1e9).rng_for(rank, stream)
    want = _numpy_stream(seed, key)
    assert got.bit_generator.state == want.bit_generator.state
    assert got.standard_normal(5).tolist() == want.standard_normal(5).tolist()


def test_seed_states_match_seedsequence_row_by_row():
    keys = np.array([[r, s] for r in (0, 1, 2, 77, 2**32 - 1) for s in (0, 5)], dtype=np.uint64)
    for seed in (0, 1, 2**31, 2**32, 2**64 + 9):
        states = seed_states(seed, keys)
        for row, key in zip(states, keys.tolist(), strict=True):
            want = np.random.SeedSequence(seed, spawn_key=tuple(key)).generate_state(4, np.uint64)
            assert row.tolist() == want.tolist()


def test_seed_states_refuses_keys_beyond_32_bits():
    with pytest.raises(ValueError):
        seed_states(0, np.array([[2**32]], dtype=np.uint64))


def test_streams_of_many_actors_are_built_block_by_block_and_stay_distinct():
    k = Kernel(3, 1e9)
    firsts = [k.rng_for(r).random() for r in range(RNG_BLOCK + 5)]
    assert len(set(firsts)) == len(firsts)
    assert set(k.streams._seed_states) == {(None, 0), (None, 1)}
    assert firsts[RNG_BLOCK + 1] == _numpy_stream(3, (RNG_BLOCK + 1,)).random()


class _Echo(Actor):
    def __init__(self, kernel, name, log):
        super().__init__(kernel, name)
        self.log = log

    def deliver(self, now, kind, sender, payload):
        self.log.append((now, self.name, sender, payload, self.input_rank))
        if payload == "ping":
            self.kernel.push(
                now, self, "b", "msg", "pong"
            )  # zero delay: the next batch, same instant


def test_one_batch_per_instant_in_key_order_and_the_clock_follows():
    log: list = []
    seen_clock: list = []

    async def main():
        k = Kernel(0, 100.0)
        a, b = _Echo(k, "a", log), _Echo(k, "b", log)
        k.push(2.0, b, "a", "msg", "ping")
        k.push(1.0, b, "b", "msg", "x")
        k.push(1.0, a, "b", "msg", "y")  # same instant: ordered by sender rank (a before b)
        k.push(200.0, a, "b", "msg", "late")  # past max_time: never delivered
        await k.run()
        seen_clock.append((trio.current_time(), k.now, k.batches, k.delivered))

    trio.run(main, clock=trio.testing.MockClock())
    assert log == [
        (1.0, "b", "a", "y", 0),
        (1.0, "b", "b", "x", 1),
        (2.0, "a", "b", "ping", 1),
        (2.0, "b", "a", "pong", 0),
    ]
    clock_now, now, batches, delivered = seen_clock[0]
    assert now == 2.0 and clock_now == pytest.approx(
        2.0
    )  # trio's clock stands where the kernel stopped
    assert (batches, delivered) == (3, 4)


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    ops=st.lists(
        st.sampled_from(["normal", "normal", "normal", "random", "uniform", "normals"]),
        max_size=120,
    ),
)
def test_lazy_generator_draws_what_scalar_draws_would(seed, ops):
    # latencies are drawn ahead in blocks; any other draw must still see the scalar stream
    from sim.kernel.rng import LazyGenerator

    ref = np.random.default_rng(seed)
    lazy = LazyGenerator(lambda: np.random.default_rng(seed))
    for op in ops:
        if op == "normal":
            assert lazy.standard_normal() == ref.standard_normal()
        elif op == "random":
            assert lazy.random() == ref.random()
        elif op == "uniform":
            assert lazy.uniform(1.0, 3.0) == ref.uniform(1.0, 3.0)
        else:
            assert lazy.standard_normal(3).tolist() == ref.standard_normal(3).tolist()
    assert lazy.bit_generator.state == ref.bit_generator.state


@pytest.mark.parametrize("kernel", ["inline", "tasks"])
@pytest.mark.parametrize(
    "name, overrides",
    [
        ("rolling-deploy", {"members": "100"}),
        ("crash", {"members": "100", "consumer.group_protocol": "consumer"}),
        ("scale-out", {"members": "100", "network.latency.kind": "lognormal"}),
    ],
)
def test_a_finished_run_leaves_its_world_to_reference_counting(name, overrides, kernel):
    """What a run built is freed as the run returns, not left in reference cycles for the cyclic
    collector to trace (Spark's Python workers run a full collection after every task); a
    100-member rolling deploy once left 46,000 objects in cycles. Trio's own finished run keeps
    a few hundred."""
    import gc

    from sim import run_scenario
    from sim.scenario.builtins import load_scenario

    gc.collect()
    result = run_scenario(load_scenario(name, overrides), seed=0, kernel=kernel)
    assert gc.collect() < 1000
    assert result.summary["messages"] > 0 and result.events.num_rows > 0  # the results are intact


class _Stopper(Actor):
    """Asks the kernel to stop on its ``at``-th input (as a signal handler would, mid-batch)."""

    count = 0

    def __init__(self, kernel, name, at):
        super().__init__(kernel, name)
        self.at = at

    def deliver(self, now, kind, sender, payload):
        _Stopper.count += 1
        if _Stopper.count == self.at:
            self.kernel.stop.request("asked")


@pytest.mark.parametrize("same_actor", [False, True])
def test_a_stop_asked_from_outside_acts_before_the_next_input_of_a_batch(same_actor):
    """A stop (``StopToken.request``) is looked at before every input, inside one batch too: a
    batch of 5,000 inputs, to 5,000 actors or to one, stops right after the input during which it
    was asked; the kernel says why, and its token says the kernel ran and is no longer running."""

    def run_batch(k: Kernel) -> int:
        _Stopper.count = 0
        actors = [_Stopper(k, f"m{i}", at=100) for i in range(1 if same_actor else 5000)]
        for i in range(5000):
            k.push(1.0, actors[0], actors[i % len(actors)].name, "msg", i)
        trio.run(k.run, clock=trio.testing.MockClock())
        return _Stopper.count

    token = StopToken()
    assert not token.started
    k = Kernel(0, 100.0, token)
    assert run_batch(k) == 100 and k.stopped == "asked"
    assert token.started and not token.running and token.reason == "asked"


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_the_stop_token_limits_inputs_delivered(kernel):
    """A token's ``max_events`` stops the run after the batch that reaches it (both kernels), and
    the kernel says why."""
    k = KERNELS[kernel](0, 100.0, StopToken(max_events=3))
    log: list = []
    a = _Echo(k, "a", log)
    for i in range(10):
        k.push(float(i), a, "a", "msg", i)
    trio.run(k.run, clock=trio.testing.MockClock())
    assert [p for _n, _a, _s, p, _r in log] == [0, 1, 2]
    assert k.stopped == "max_events=3 reached" and k.delivered == 3
