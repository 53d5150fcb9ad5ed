"""The two kernels (``sim.kernel``): every actor a trio task of its own ("tasks"), or the same
actors called from one task ("inline"). They must give the same runs, event for event."""

from __future__ import annotations

import io
import signal

import pyarrow.parquet as pq
import pytest
import trio
import trio.testing

from sim import ConfigError, Scenario, run_scenario
from sim.kernel.queue import Actor, Kernel
from sim.kernel.tasks import DEFAULT_KERNEL, KERNELS, TaskKernel
from sim.scenario.builtins import BUILTINS, load_scenario
from sim.testing import soak

# what a run reports about the machine rather than the simulation
_WALL = {"wall_s", "messages_per_wall_s"}


def _parquet(table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def _fingerprint(result) -> tuple:
    summary = {k: v for k, v in result.summary.items() if k not in _WALL}
    return (
        _parquet(result.events),
        _parquet(result.intervals),
        result.episodes,
        summary,
        result.invariant_violations,
    )


def _both(scenario: Scenario, seed: int, **kw) -> tuple[tuple, tuple]:
    got = [
        _fingerprint(run_scenario(scenario, seed=seed, raise_on_violation=False, kernel=k, **kw))
        for k in ("inline", "tasks")
    ]
    return got[0], got[1]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_both_kernels_give_the_same_bytes_on_every_builtin(name, protocol):
    """Every built-in under both group protocols, a small and a larger group, two seeds: the same
    events and intervals files, episodes, summary (but for wall time) and violations."""
    overrides = {"consumer.group_protocol": "consumer"} if protocol == "consumer" else {}
    for members, seed in ((3, 0), (12, 1)):
        sc = load_scenario(name, {**overrides, "members": str(members)})
        inline, tasks = _both(sc, seed)
        assert inline == tasks, f"{name} members={members} seed={seed}: the kernels differ"


@pytest.mark.parametrize("first", range(0, 24, 6))
def test_both_kernels_give_the_same_bytes_on_soak_schedules(first):
    """Random fault schedules as `rebalance-sim soak` draws them (crashes, pauses, partitions,
    loss, leader crashes timed inside a rebalance, both protocols, lognormal latency and drops),
    with the soak's bound on inputs."""
    for index in range(first, first + 6):
        data, sim_seed = soak.schedule(0, index)
        inline, tasks = _both(Scenario.from_dict(data), sim_seed, max_events=soak.MAX_EVENTS)
        assert inline == tasks, f"soak seed 0 schedule {index}: the kernels differ"


def test_the_comparison_sees_a_difference_of_seed():
    # the fingerprint is not blind: another seed (other latencies) gives another fingerprint
    sc = load_scenario("crash", {"members": "4", "network.latency.kind": "lognormal"})
    assert _both(sc, 0)[0] != _both(sc, 1)[0]


def test_a_run_records_its_kernel_but_keeps_its_id():
    sc = load_scenario("scale-out", {"members": "3"})
    runs = {k: run_scenario(sc, seed=0, kernel=k) for k in KERNELS}
    assert len({r.run_id for r in runs.values()}) == 1
    assert {k: r.runs.column("kernel").to_pylist() for k, r in runs.items()} == {
        k: [k] for k in KERNELS
    }
    assert run_scenario(sc, seed=0).runs.column("kernel").to_pylist() == [DEFAULT_KERNEL]


def test_an_unknown_kernel_is_a_config_error_naming_the_field():
    with pytest.raises(ConfigError) as e:
        run_scenario(load_scenario("scale-out", {"members": "2"}), kernel="threads")
    assert e.value.field == "kernel" and "inline" in str(e.value) and "tasks" in str(e.value)


# ---- the kernels themselves, on actors of the test's own


class _Echo(Actor):
    """Logs what it is handed, with the trio task and clock it sees; "ping" answers the other
    actor a second later, until ``until``; "spawn" creates actor "c" and writes to it at once."""

    def __init__(self, kernel, name, log, other=None, until=10.0):
        super().__init__(kernel, name)
        self.log, self.other, self.until = log, other, until

    def deliver(self, now, kind, sender, payload):
        self.log.append(
            (now, self.name, payload, trio.lowlevel.current_task(), trio.current_time())
        )
        if payload == "ping" and now + 1.0 <= self.until:
            self.kernel.push(now + 1.0, self, self.other, "msg", "ping")
        elif payload == "spawn":
            _Echo(self.kernel, "c", self.log)
            self.kernel.push(now, self, "c", "msg", "hello")  # before c's task has ever run
            self.kernel.push(now + 0.5, self, "c", "msg", "again")
        elif payload == "boom":
            raise ValueError("boom")


def _ping_pong(kernel_class, until=10.0, max_time=100.0):
    log: list = []
    k = kernel_class(0, max_time)
    a, b = _Echo(k, "a", log, "b", until), _Echo(k, "b", log, "a", until)
    k.push(1.0, b, "a", "msg", "ping")
    k.push(1.0, a, "b", "msg", "x")  # one instant, two actors: ordered by sender rank (a, then b)
    return k, log


def test_under_the_task_kernel_each_actor_is_a_trio_task_of_its_own():
    logs = {}
    for name, cls in (("inline", Kernel), ("tasks", TaskKernel)):
        k, log = _ping_pong(cls, until=4.0)

        async def main(k=k):
            await k.run()
            return trio.lowlevel.current_task()

        main_task = trio.run(main, clock=trio.testing.MockClock())
        tasks = {}
        for now, actor, _payload, task, clock in log:
            tasks.setdefault(actor, set()).add(task)
            if cls is TaskKernel:
                assert clock == pytest.approx(now)  # trio's clock stands at the batch's instant
        if cls is TaskKernel:
            assert all(len(t) == 1 for t in tasks.values())  # an actor stays in its task
            assert len({t for ts in tasks.values() for t in ts} | {main_task}) == len(tasks) + 1
        else:
            assert set(tasks) == {"a", "b"} and all(t == {main_task} for t in tasks.values())
        logs[name] = [(now, actor, payload) for now, actor, payload, _t, _c in log]
    assert (
        logs["inline"]
        == logs["tasks"]
        == [
            (1.0, "b", "x"),
            (1.0, "a", "ping"),
            (2.0, "b", "ping"),
            (3.0, "a", "ping"),
            (4.0, "b", "ping"),
        ]
    )


@pytest.mark.parametrize("cls", [Kernel, TaskKernel])
def test_an_actor_created_during_the_run_is_handed_its_inputs(cls):
    log: list = []
    k = cls(0, 10.0)
    a = _Echo(k, "a", log)
    k.push(1.0, a, "a", "msg", "spawn")
    trio.run(k.run, clock=trio.testing.MockClock())
    assert [(now, actor, payload) for now, actor, payload, _t, _c in log] == [
        (1.0, "a", "spawn"),
        (1.0, "c", "hello"),
        (1.5, "c", "again"),
    ]
    if cls is TaskKernel:
        assert log[1][3] is log[2][3] is not log[0][3]  # c's own task, started during the run


@pytest.mark.parametrize("cls", [Kernel, TaskKernel])
def test_a_failure_in_an_actor_is_raised_as_it_is(cls):
    """A bug in an actor (or in the run's bookkeeping between batches) surfaces as the exception
    itself, not wrapped in an exception group, and nothing more is delivered after it."""
    log: list = []
    k = cls(0, 10.0)
    a = _Echo(k, "a", log)
    k.push(1.0, a, "a", "msg", "boom")
    k.push(2.0, a, "a", "msg", "late")
    with pytest.raises(ValueError, match="boom"):
        trio.run(k.run, clock=trio.testing.MockClock())
    assert [p for _n, _a, p, _t, _c in log] == ["boom"]

    k, log = _ping_pong(cls)

    def after_batch(t):
        if t >= 3.0:
            raise KeyError("bookkeeping")
        return False

    k.after_batch = after_batch
    with pytest.raises(KeyError, match="bookkeeping"):
        trio.run(k.run, clock=trio.testing.MockClock())
    assert max(now for now, *_ in log) == 3.0


async def test_other_trio_tasks_wait_in_the_simulated_time(autojump_clock):
    """Run inside a test's own trio run (trio_mode, an autojump MockClock): a task sleeping until
    4.5 s of simulated time wakes while the task kernel is at 5 s, having seen exactly the inputs
    before that instant. (It may be woken one instant later: trio runs the tasks of one of its
    scheduling rounds in an order of its own, and the sleeper shares a round with an actor.) The
    inline kernel lets other tasks run only every ``YIELD_EVERY`` batches and when it stops."""
    for cls in (TaskKernel, Kernel):
        k, log = _ping_pong(cls)
        start = trio.current_time()
        seen = []

        async def sleeper(start=start, log=log, seen=seen):
            await trio.sleep_until(start + 4.5)
            seen.append((trio.current_time() - start, [now for now, *_ in log]))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sleeper)
            await k.run()
        woke_at, handled = seen[0]
        everything = [now for now, *_ in log]
        if cls is TaskKernel:
            assert woke_at in (pytest.approx(5.0), pytest.approx(6.0))
            assert handled == [t for t in everything if t < woke_at - 1e-9]
        else:
            assert woke_at == pytest.approx(10.0) and handled == everything


class _Alarm(Exception):
    pass


@trio.lowlevel.enable_ki_protection
def _signal_inside_trio_machinery(signum):
    signal.raise_signal(signum)  # handled at once, in this KI-protected frame (as trio's own)
    return "handled"


class _Interrupter(_Echo):
    def deliver(self, now, kind, sender, payload):
        where, signum = payload
        self.log.append((now, self.name, where, None, None))
        if where == "protected":
            self.log.append((now, self.name, _signal_inside_trio_machinery(signum), None, None))
        elif where == "plain":
            signal.raise_signal(signum)
            self.log.append((now, self.name, "not reached", None, None))


@pytest.mark.parametrize(
    "signum, raised", [(signal.SIGINT, KeyboardInterrupt), (signal.SIGALRM, _Alarm)]
)
@pytest.mark.parametrize("where", ["protected", "plain"])
def test_a_callers_signal_handler_never_raises_in_trios_scheduler(where, signum, raised):
    """`rebalance-sim run` has handlers of its own (its second Ctrl-C raises KeyboardInterrupt, its
    wall-time alarm cuts a step short), which would raise wherever the signal lands; under the task
    kernel trio's scheduler runs between every two actors, and an exception raised there breaks
    trio itself (TrioInternalError). A signal that lands in trio's KI-protected code is handled at
    the kernel's next step instead, in an actor's task; one that lands in an actor's code at once.
    Either way the run raises what the handler raised, and the handler is back in place after."""
    calls = []

    def handler(signum, frame):
        calls.append("deferred" if frame is None else "at once")
        raise raised

    previous = signal.signal(signum, handler)
    try:
        log: list = []
        k = TaskKernel(0, 100.0)
        a = _Interrupter(k, "a", log)
        k.push(1.0, a, "a", "msg", (where, signum))
        k.push(2.0, a, "a", "msg", ("later", signum))
        with pytest.raises(raised):
            trio.run(k.run, clock=trio.testing.MockClock())
        assert signal.getsignal(signum) is handler
    finally:
        signal.signal(signum, previous)
    payloads = [p for _n, _a, p, _t, _c in log]
    if where == "protected":
        assert calls == ["deferred"] and payloads == ["protected", "handled"]
    else:
        assert calls == ["at once"] and payloads == ["plain"]
