"""The simulation kernel: one deterministic queue of timed inputs, delivered to trio actors.

Every input (a network message, a timer, a control note) is an entry keyed by
``(time, sender_rank, sender_seq)``. The kernel takes every entry due at the earliest time, hands
each actor its entries in key order, and only when all those actors have handled them looks at
the queue again (so zero-delay replies form the next batch at the same instant). Actors only touch
their own state and talk through the kernel, so the order in which the actors of one batch run
cannot change any result: ties are broken by the key, as SimPy breaks them by event id.

An actor's ``deliver`` never awaits, so the kernel calls it directly, in the batch's order, and
moves trio's MockClock forward itself (``MockClock.jump``) instead of sleeping until the next
entry. It used to wake one trio task per actor per batch and ``trio.sleep_until`` every instant;
with one or two inputs per batch that scheduling was over half the wall time of a rolling bounce.
The results are the same either way (no result may depend on the order within a batch), and the
kernel still yields to trio every ``YIELD_EVERY`` batches, so other tasks (a progress display, a
test's watchdog) keep running.

The actors are handed the entry's own time rather than reading the clock back, so float rounding
of the clock never leaks into results.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable

import numpy as np
import trio
import trio.testing

YIELD_EVERY = 4096  # batches between yields to trio's scheduler

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
                    rec.events.append((now, self.rank, self.seq, eff[1], eff[2], eff[3], eff[4]))  # rec.event
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
            self.input_rank = rank
            self.deliver(now, kind, sender, payload)


class LazyGenerator:
    """A numpy Generator built on first use, then the same object's methods.

    Building one costs tens of microseconds (a SeedSequence hash and a PCG64 seeding), and most
    actors never draw (the default latency is constant): 10,000 members asked for 20,000 of them.
    The stream depends only on (seed, rank, stream), so when it is built does not change a draw.
    """

    def __init__(self, make: Callable[[], np.random.Generator]):
        self._make = make
        self._generator: np.random.Generator | None = None

    def __getattr__(self, name: str):
        # only reached for names not yet in the instance dict: the first use of each method
        if name.startswith("__"):
            raise AttributeError(name)
        g = self._generator
        if g is None:
            g = self._generator = self._make()
        value = getattr(g, name)
        self.__dict__[name] = value  # later lookups find the bound method directly
        return value


class Kernel:
    """Heap of timed inputs plus the trio loop that delivers them (see the module docstring)."""

    def __init__(self, seed: int, recorder, max_time: float):
        self.recorder = recorder
        self.max_time = max_time
        self.network = None  # set by the runner
        self._seed = np.random.SeedSequence(seed)
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
        self.batch_dests: dict[str, list] = {}  # the actors the last batch was delivered to

    # ---- actors

    def register(self, actor: Actor) -> int:
        if actor.name in self._actors:
            raise ValueError(f"duplicate actor {actor.name}")
        self._actors[actor.name] = actor
        self._ranks.append(actor)
        return len(self._ranks) - 1

    def rng_for(self, rank: int, stream: int | None = None) -> np.random.Generator:
        """The rank-th child of the run's SeedSequence (what ``SeedSequence.spawn`` would give);
        with ``stream``, that child's own ``stream``-th child (a second stream of the same actor)."""
        key = self._seed.spawn_key + (rank,) + (() if stream is None else (stream,))
        return np.random.default_rng(np.random.SeedSequence(self._seed.entropy, spawn_key=key))

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
        clock = trio.lowlevel.current_clock()
        if not isinstance(clock, trio.testing.MockClock):
            clock = None  # a real clock cannot be moved; simulated time is self.now either way
        while times:
            t = times[0]
            if t > self.max_time:
                break
            heappop(times)
            if t > self.now:
                if clock is not None:
                    clock.jump(t - self.now)
                self.now = t
            # every entry due at t (inputs queued at t from now on form the next batch), grouped
            # by destination in key order (an entry is handed to the actor as it is: building
            # other tuples per input costs more than the grouping)
            entries = buckets.pop(t)
            n = len(entries)
            if n == 1:
                batch: dict[str, list] = {entries[0][6]: entries}
            else:
                entries.sort()  # keys are unique: (time, sender rank, sender seq)
                batch = {}
                for entry in entries:
                    items = batch.get(entry[6])
                    if items is None:
                        batch[entry[6]] = [entry]
                    else:
                        items.append(entry)
            self.batches += 1
            self.delivered += n
            if self.batches % YIELD_EVERY == 0:
                await trio.lowlevel.checkpoint()
            for dest, items in batch.items():
                actors[dest].deliver_batch(t, items)
            self.batch_dests = batch
            if self.after_batch is not None and self.after_batch(t):
                break
