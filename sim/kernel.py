"""The simulation kernel: one deterministic queue of timed inputs, delivered to the actors.

Every input (a network message, a timer, a control note) is an entry keyed by
``(time, sender_rank, sender_seq)``. The kernel takes every entry due at the earliest time, hands
each actor its entries in key order, and only when all those actors have handled them looks at
the queue again (so zero-delay replies form the next batch at the same instant). Within a batch
the actors are handed their inputs one actor at a time, in the order of each actor's first entry
in key order: ties at one instant are broken by that explicit key, never by a scheduler.

The actors (``sim.actors``: the group coordinator, one per client process, and the director that
plays the timeline) are run by one of two kernels that give the same results, event for event
(``tests/sim/test_kernels.py`` runs both on every built-in scenario under both group protocols and
on soak schedules):

- ``TaskKernel`` ("tasks", in ``sim.task_kernel``): every actor is a trio task of its own, parked in
  ``trio.lowlevel.wait_task_rescheduled`` until it is handed its inputs of a batch with
  ``trio.lowlevel.reschedule``. Exactly one actor's task runs simulation code at a time: when it
  has handled its inputs it takes the kernel's next step (``TaskKernel._advance``, the one place
  that takes entries off the queue, in the order above), hands that to the next actor's task
  and parks; the kernel's own task starts the actors' tasks, hands over the first inputs and waits
  for the end. trio's clock (a ``MockClock``) is moved to each batch's instant before the batch is
  handed over, so ``trio.current_time()`` in any task is the simulated time (up to float
  rounding); the actors are handed the entry's own time instead, so that rounding never leaks
  into results.
- ``Kernel`` ("inline", the default): the same actors, handed the same inputs in the same order,
  but called from the kernel's one task (an actor's ``deliver`` never awaits). It moves trio's
  clock only when other tasks can run (every ``YIELD_EVERY`` batches, and when it stops).

Handing inputs to another task costs one of trio's scheduling rounds (an I/O poll, the run queue,
a coroutine switch) per change of actor, and most inputs go to another actor than the one before
(a coordinator's replies go to one member each); the inline kernel pays a method call instead,
which is why it is the default (docs/performance.md has the cost). Handing the actors of one batch to their tasks all at once would save rounds but not keep
results: trio runs the tasks of one round in an order of its own, and the actors of a batch are
not independent (the director reads the coordinator's leader and the members' liveness; members
share the partitions' hand-off record).
"""

from __future__ import annotations

import functools
import heapq
import sys
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, cast

import numpy as np
import trio
import trio.testing

try:
    from mypy_extensions import mypyc_attr
except ImportError:  # (a dev tool) what it says is for mypyc alone, read as it compiles

    def mypyc_attr(*_args, **_attrs):  # type: ignore[misc]
        return lambda cls: cls


if TYPE_CHECKING:
    from .network import Network

YIELD_EVERY = 4096  # batches between yields to trio's scheduler

# A stop asked from outside the simulation (``request_stop``: the command line's Ctrl-C and wall
# time limit, from a signal handler), looked at before every input a kernel delivers, so that a
# batch of a hundred thousand inputs stops within one of them. ``running``: whether a kernel is
# delivering inputs (a stop asked before or after that finds no kernel to stop).
_stop_reason: str | None = None
_running = False
_started = 0  # kernels that started delivering inputs in this process


def request_stop(reason: str) -> None:
    """Ask the kernel that is running (or the next one) to stop before its next input; the run
    then ends as a partial run (``Kernel.stopped`` says why). Safe to call from a signal handler."""
    global _stop_reason
    _stop_reason = reason


def clear_stop() -> None:
    global _stop_reason
    _stop_reason = None


def running() -> bool:
    """Whether a kernel is delivering inputs now."""
    return _running


def started() -> int:
    """How many kernels started delivering inputs in this process so far."""
    return _started


def stop_requested() -> str | None:
    """Why ``request_stop`` asked the kernel to stop; None when it did not. (The kernels read it
    through this call: a test of the global itself would let mypyc take it for None after the
    first test in a loop, and a stop that lands later would then fail its type check.)"""
    return _stop_reason


def note_start() -> None:
    """A kernel starts delivering inputs (``running``, ``started``)."""
    global _running, _started
    _running = True
    _started += 1


def note_end() -> None:
    """The kernel that was delivering inputs has stopped."""
    global _running
    _running = False


# Python subclasses of these two compiled classes: the task kernel, and tests' actors
@mypyc_attr(allow_interpreted_subclasses=True)
class Actor:
    """Base of the thin actors: a seeded random stream, effect handling, and ``deliver`` (one input)."""

    def __init__(self, kernel: Kernel, name: str):
        self.kernel = kernel
        self.name = name
        self.rank = kernel.register(self)
        self.rng = kernel.lazy_rng(self.rank)
        self.seq = 0
        self.input_rank = -1  # sender rank of the input being delivered (ties are ordered by it)

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def deliver(self, now: float, kind: str, sender: str, payload) -> None:
        raise NotImplementedError

    def apply(self, now: float, effects: list[tuple]) -> None:
        """Carry out a core's effects (see ``sim.messages``)."""
        k = self.kernel
        rec = k.recorder
        io_only = True  # only messages, timers and control notes (see ``Kernel.dirty_on_io``)
        for eff in effects:
            op = eff[0]
            if op == "timer":  # the commonest effect (a cancel, at None, queues nothing)
                if eff[2] is not None:
                    k.push(eff[2], self, self.name, "timer", (eff[1], eff[2]))
            elif op == "send":
                k.network.send(self, eff[1], eff[2], now, eff[3] if len(eff) > 3 else None)
            elif op == "control":
                k.push(now, self, eff[1], "control", eff[2])
            else:
                io_only = False
                if op == "event":
                    self.seq += 1
                    rec.events.append(
                        (now, self.rank, self.seq, eff[1], eff[2], eff[3], eff[4])
                    )  # rec.event
                elif op == "open":
                    rec.open(now, eff[1], eff[2], eff[3], eff[4])
                elif op == "close":
                    rec.close(now, eff[1], eff[2], eff[3], eff[4])
                elif op == "violation":
                    rec.violation(now, eff[1])
                elif op == "settled_changed":
                    pass  # only makes the run look again at whether it settled (below)
                else:
                    raise ValueError(f"unknown effect {eff!r}")
        if effects and (k.dirty_on_io or not io_only):
            k.dirty = True

    def deliver_batch(self, now: float, items: list[tuple]) -> None:
        """Handle this actor's inputs of one batch (queue entries, see ``Kernel.push``) in key order."""
        for _t, rank, _seq, kind, sender, payload, _dest in items:
            if stop_requested() is not None:
                return
            self.input_rank = rank
            self.deliver(now, kind, sender, payload)


# a Python class, compiled methods: it keeps methods found on first use in its instance dict
@mypyc_attr(native_class=False)
class LazyGenerator:
    """A numpy Generator built on first use, then the same object's methods.

    Building one costs microseconds, and most actors never draw (the default latency is
    constant): 10,000 members asked for 20,000 of them. The stream depends only on (seed, rank,
    stream), so when it is built does not change a draw.

    ``standard_normal()`` (one draw, what every lognormal latency takes) is served from a block
    drawn ahead: numpy's array draw gives the same numbers as that many scalar draws, at a
    fraction of the per-call cost. Any other use of the generator first puts it where scalar draws
    would have left it (the state before the block, plus the draws served), so mixing draws of
    other kinds with latencies (a drop probability) gives the same stream as before.
    """

    BLOCK_MAX = 32  # normals drawn ahead at most (10,000 members hold one block each)

    def __init__(self, make: Callable[[], np.random.Generator]):
        self._make = make
        self._generator: np.random.Generator | None = None
        self._normals: list[float] = []  # the block; _next is the first one not yet served
        self._next = 0
        self._block_state: dict | None = None  # the bit generator's state before the block

    def _get(self) -> np.random.Generator:
        g = self._generator
        if g is None:
            g = self._generator = self._make()
        return g

    def standard_normal(self, *args, **kwargs):
        if args or kwargs:
            self._settle()
            return self._get().standard_normal(*args, **kwargs)
        i = self._next
        normals = self._normals
        if i < len(normals):
            self._next = i + 1
            return normals[i]
        g = self._get()
        size = min(2 * len(normals), self.BLOCK_MAX) if normals else 4
        self._block_state = g.bit_generator.state
        self._normals = g.standard_normal(size).tolist()
        self._next = 1
        return self._normals[0]

    def _settle(self) -> None:
        """Leave the generator where scalar draws would have: after the normals served so far."""
        if self._next < len(self._normals):
            g = self._get()  # made already: normals were drawn from it
            g.bit_generator.state = self._block_state  # type: ignore[assignment]  # (set with the normals)
            if self._next:
                g.standard_normal(self._next)
        self._normals = []
        self._next = 0
        self._block_state = None

    def random(self, *args, **kwargs):
        if self._normals:
            self._settle()
        return self._get().random(*args, **kwargs)

    def uniform(self, *args, **kwargs):
        if self._normals:
            self._settle()
        return self._get().uniform(*args, **kwargs)

    def __getattr__(self, name: str):
        # only reached for names not defined above nor yet in the instance dict: the first use
        # of each other method
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self._get(), name)
        if not callable(value):  # bit_generator and the like: read from a settled generator
            self._settle()
            return value
        call = _settling(weakref.ref(self), value)
        self.__dict__[name] = call  # later lookups find it directly
        return call


def _settling(ref: weakref.ref[LazyGenerator], method: Callable) -> Callable:
    """``method`` of a LazyGenerator's generator, called once the generator is settled. (The
    instance dict keeps the result: a weak reference, so no reference cycle back to it.)"""

    def call(*args, **kwargs):
        lazy = ref()
        if lazy is not None and lazy._normals:
            lazy._settle()
        return method(*args, **kwargs)

    return call


# numpy's SeedSequence constants (numpy/random/bit_generator.pyx, after Melissa O'Neill's
# seed_seq); ``seed_states`` computes what SeedSequence does, for many spawn keys at once.
_INIT_A, _MULT_A = 0x43B0D7E5, 0x931E8875
_INIT_B, _MULT_B = 0x8B51F9DD, 0x58F38DED
_MIX_MULT_L, _MIX_MULT_R = 0xCA01F9DD, 0x4973F715
_POOL = 4  # SeedSequence's default pool size (32-bit words)
_MASK32 = 0xFFFFFFFF
RNG_BLOCK = 1024  # ranks whose seed states are computed together


def _uint32_words(n: int) -> list[int]:
    """A non-negative int as SeedSequence takes it: 32-bit words, least significant first."""
    if n < 0:
        raise ValueError("seed entropy must be non-negative")
    words = [n & _MASK32]
    n >>= 32
    while n:
        words.append(n & _MASK32)
        n >>= 32
    return words


def seed_states(entropy: int, keys: np.ndarray) -> np.ndarray:
    """``SeedSequence(entropy, spawn_key=tuple(row)).generate_state(4, np.uint64)`` for every row
    of ``keys`` (non-negative integers below 2**32), as one (rows, 4) uint64 array. numpy builds
    one SeedSequence in about 20 us of Python-level hashing; here the same hashing runs once per
    word position over all rows (the hash constants do not depend on the data), which is what
    10,000 members' streams cost to seed."""
    keys = np.asarray(keys, dtype=np.uint64)
    if keys.ndim != 2 or (keys.size and int(keys.max()) > _MASK32):
        raise ValueError("seed_states: keys must be rows of integers below 2**32")
    run = _uint32_words(entropy)
    if keys.shape[1] and len(run) < _POOL:
        run += [0] * (
            _POOL - len(run)
        )  # SeedSequence pads the run entropy when a spawn key follows
    rows = keys.shape[0]
    words = np.empty((rows, len(run) + keys.shape[1]), dtype=np.uint32)
    words[:, : len(run)] = np.array(run, dtype=np.uint32)
    words[:, len(run) :] = keys.astype(np.uint32)
    hash_const = _INIT_A

    def hashmix(value: np.ndarray) -> np.ndarray:
        nonlocal hash_const
        value = value ^ np.uint32(hash_const)
        hash_const = (hash_const * _MULT_A) & _MASK32
        value = value * np.uint32(hash_const)
        return value ^ (value >> np.uint32(16))

    def mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        result: np.ndarray = np.uint32(_MIX_MULT_L) * x - np.uint32(_MIX_MULT_R) * y
        return result ^ (result >> np.uint32(16))

    zero = np.zeros(rows, dtype=np.uint32)
    pool = [hashmix(words[:, i] if i < words.shape[1] else zero) for i in range(_POOL)]
    for i_src in range(_POOL):
        for i_dst in range(_POOL):
            if i_src != i_dst:
                pool[i_dst] = mix(pool[i_dst], hashmix(pool[i_src]))
    for i_src in range(_POOL, words.shape[1]):
        for i_dst in range(_POOL):
            pool[i_dst] = mix(pool[i_dst], hashmix(words[:, i_src]))
    state = np.empty((rows, 8), dtype=np.uint32)  # generate_state(4, uint64): 8 words
    hash_const = _INIT_B
    for i in range(8):
        value = pool[i % _POOL] ^ np.uint32(hash_const)
        hash_const = (hash_const * _MULT_B) & _MASK32
        value = value * np.uint32(hash_const)
        state[:, i] = value ^ (value >> np.uint32(16))
    if sys.byteorder == "big":  # as SeedSequence: words in little-endian order within each uint64
        state = state.byteswap()
    return state.view(np.uint64)


class _SeedState(np.random.bit_generator.ISeedSequence):
    """A SeedSequence whose state is already computed (``seed_states``): PCG64 seeds from it
    exactly as from ``SeedSequence(entropy, spawn_key=key)``, which it stands for."""

    __slots__ = ("_state", "entropy", "spawn_key")

    def __init__(self, state: np.ndarray, entropy: int, spawn_key: tuple[int, ...]):
        self._state = state
        self.entropy = entropy
        self.spawn_key = spawn_key

    def generate_state(self, n_words, dtype=np.uint32):
        if n_words == 4 and np.dtype(dtype) == np.uint64:
            return self._state
        return np.random.SeedSequence(self.entropy, spawn_key=self.spawn_key).generate_state(
            n_words, dtype
        )

    def spawn(self, n_children):
        return np.random.SeedSequence(self.entropy, spawn_key=self.spawn_key).spawn(n_children)


def group_batch(entries: list[tuple]) -> dict[str, list]:
    """The entries due at one instant in key order (keys are unique: time, sender rank, sender
    seq), grouped by destination in the order each destination first appears: the order both
    kernels hand actors their inputs in."""
    entries.sort()
    batch: dict[str, list] = {}
    for entry in entries:
        items = batch.get(entry[6])
        if items is None:
            batch[entry[6]] = [entry]
        else:
            items.append(entry)
    return batch


@mypyc_attr(allow_interpreted_subclasses=True)
class Kernel:
    """The queue of timed inputs, and the inline kernel that delivers them by calling each
    actor's ``deliver`` from its own task (see the module docstring)."""

    network: Network  # set by the runner (unset until then)

    def __init__(self, seed: int, recorder, max_time: float):
        self.recorder = recorder
        self.max_time = max_time
        self._seed = np.random.SeedSequence(seed)
        self._entropy = cast(int, self._seed.entropy)  # an int seed's entropy is that int
        self._seed_states: dict[tuple[int | None, int], np.ndarray] = {}  # see rng_for
        # The queue: a heap of the distinct times that have inputs, and each time's inputs (queue
        # entries, see ``push``) in a list, sorted by key only when they are delivered. Most
        # inputs share their instant with others (a coordinator's replies, members' timers set
        # at one instant), so this is a fraction of the comparisons of one heap of every entry,
        # and an entry that is never delivered (a timer past the end of the run) costs an append.
        self._times: list[float] = []
        self._buckets: dict[float, list[tuple]] = {}
        self._actors: dict[str, Actor] = {}
        self._ranks: list[Actor] = []
        self.now = 0.0
        self.dirty = False
        # False: messages and timers alone do not make the run re-check whether it settled (a
        # core then records an event whenever its settled state can change; the consumer
        # protocol's cores do, where every idle heartbeat is simulated)
        self.dirty_on_io = True
        self.messages = 0
        self.batches = 0
        self.delivered = 0  # inputs handed to actors (the unit of --max-events)
        self.after_batch: Callable[[float], bool] | None = None  # returns True to stop
        self.batch_dests: Iterable[str] = ()  # the names of the actors the last batch went to
        self.stopped: str | None = None  # why it stopped on request (``request_stop``)

    # ---- actors

    def register(self, actor: Actor) -> int:
        if actor.name in self._actors:
            raise ValueError(f"duplicate actor {actor.name}")
        self._actors[actor.name] = actor
        self._ranks.append(actor)
        return len(self._ranks) - 1

    def rng_for(self, rank: int, stream: int | None = None) -> np.random.Generator:
        """The rank-th child of the run's SeedSequence (what ``SeedSequence.spawn`` would give);
        with ``stream``, that child's own ``stream``-th child (a second stream of the same actor).
        The seed states are computed ``RNG_BLOCK`` ranks at a time (``seed_states``)."""
        block = rank // RNG_BLOCK
        states = self._seed_states.get((stream, block))
        if states is None:
            ranks = np.arange(block * RNG_BLOCK, (block + 1) * RNG_BLOCK, dtype=np.uint64)[:, None]
            prefix = np.array(self._seed.spawn_key, dtype=np.uint64)
            keys = np.hstack(
                [np.broadcast_to(prefix, (RNG_BLOCK, prefix.size)), ranks]
                + ([] if stream is None else [np.full((RNG_BLOCK, 1), stream, dtype=np.uint64)])
            )
            states = self._seed_states[(stream, block)] = seed_states(self._entropy, keys)
        key = self._seed.spawn_key + (rank,) + (() if stream is None else (stream,))
        seed_seq = _SeedState(states[rank - block * RNG_BLOCK], self._entropy, key)
        return np.random.Generator(np.random.PCG64(seed_seq))  # type: ignore[arg-type]  # (an ISeedSequence: PCG64 takes one)

    def lazy_rng(self, rank: int, stream: int | None = None) -> LazyGenerator:
        """``rng_for(rank, stream)``, built on its first draw."""
        return LazyGenerator(functools.partial(self.rng_for, rank, stream))

    def actor(self, name: str) -> Actor:
        return self._actors[name]

    def has_actor(self, name: str) -> bool:
        return name in self._actors

    # ---- the queue

    def push(self, at: float, sender: Actor, dest: str, kind: str, payload) -> None:
        """Queue an input for ``dest`` at ``at`` (not before now). The entry is its own key
        ``(at, sender rank, sender seq)`` followed by what the actor is handed."""
        if at < self.now:
            at = self.now
        sender.seq = seq = sender.seq + 1
        entry = (at, sender.rank, seq, kind, sender.name, payload, dest)
        bucket = self._buckets.get(at)
        if bucket is None:
            self._buckets[at] = [entry]
            heapq.heappush(self._times, at)
        else:
            bucket.append(entry)

    def next_time(self) -> float | None:
        """The time of the earliest queued input, None when the queue is empty."""
        return self._times[0] if self._times else None

    async def run(self) -> None:
        times = self._times
        buckets = self._buckets
        heappop = heapq.heappop
        actors = self._actors
        current = trio.lowlevel.current_clock()
        # a real clock cannot be moved; simulated time is self.now either way
        clock = current if isinstance(current, trio.testing.MockClock) else None
        clock_at = self.now  # where trio's clock stands (moved only when other tasks may look)
        after_batch = self.after_batch
        note_start()
        try:
            while times:
                if stop_requested() is not None:
                    break
                t = times[0]
                if t > self.max_time:
                    break
                heappop(times)
                self.now = t
                # every entry due at t (inputs queued at t from now on form the next batch),
                # grouped by destination in key order (an entry is handed to the actor as it is:
                # building other tuples per input costs more than the grouping)
                entries = buckets.pop(t)
                n = len(entries)
                self.batches += 1
                self.delivered += n
                if self.batches % YIELD_EVERY == 0:
                    if clock is not None and t > clock_at:
                        clock.jump(t - clock_at)
                        clock_at = t
                    await trio.lowlevel.checkpoint()
                if n == 1:  # most batches: one input, handed over without grouping
                    entry = entries[0]
                    dest = entry[6]
                    actor = actors[dest]
                    actor.input_rank = entry[1]
                    actor.deliver(t, entry[3], entry[4], entry[5])
                    self.batch_dests = (dest,)
                else:
                    batch = group_batch(entries)
                    for dest, items in batch.items():
                        if stop_requested() is not None:
                            break
                        actors[dest].deliver_batch(t, items)
                    self.batch_dests = batch
                if stop_requested() is not None:
                    break
                if after_batch is not None and after_batch(t):
                    break
        finally:
            note_end()
            self.stopped = stop_requested()
            if clock is not None and self.now > clock_at:
                clock.jump(self.now - clock_at)
