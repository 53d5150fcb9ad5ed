"""The simulation kernel: one deterministic queue of timed inputs, delivered to the actors.

Every input (a network message, a timer, a control note) is an entry keyed by
``(time, sender_rank, sender_seq)``. The kernel takes every entry due at the earliest time, hands
each actor its entries in key order, and only when all those actors have handled them looks at
the queue again (so zero-delay replies form the next batch at the same instant). Within a batch
the actors are handed their inputs one actor at a time, in the order of each actor's first entry
in key order: ties at one instant are broken by that explicit key, never by a scheduler.

The actors (``sim.world.actors``: the group coordinator, one per client process, and the director that
plays the timeline) are run by one of two kernels that give the same results, event for event
(``tests/sim/test_kernels.py`` runs both on every built-in scenario under both group protocols and
on soak schedules):

- ``TaskKernel`` ("tasks", in ``sim.kernel.tasks``): every actor is a trio task of its own, parked in
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

import heapq
from collections.abc import Callable, Iterable
from typing import Protocol

import numpy as np
import trio
import trio.testing

from sim.compiled import mypyc_attr
from sim.kernel.rng import LazyGenerator, SeedStreams
from sim.kernel.stop import StopToken


class EffectSink(Protocol):
    """Where the effects that are not the kernel's own go (the kernel's own: timers and control
    notes, which it queues): the world plugs one in (``Kernel.sink``), in the manner of trio's
    instruments, so the kernel knows neither the network nor the recorder."""

    def send(
        self, sender: Actor, dest: str, msg: object, now: float, sent_at: float | None = None
    ) -> None:
        """A "send" effect: put ``msg`` from ``sender`` on its way to ``dest``."""
        ...

    def record(self, now: float, rank: int, seq: int, effect: tuple) -> None:
        """An "event", "open", "close" or "violation" effect of the actor of rank ``rank``;
        ``seq`` is the actor's sequence number, advanced for each event (its tie-breaker)."""
        ...


YIELD_EVERY = 4096  # batches between yields to trio's scheduler


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
        """Carry out a core's effects (see ``sim.wire.messages``)."""
        k = self.kernel
        sink = k.sink
        io_only = True  # only messages, timers and control notes (see ``Kernel.dirty_on_io``)
        for eff in effects:
            op = eff[0]
            if op == "timer":  # the commonest effect (a cancel, at None, queues nothing)
                if eff[2] is not None:
                    k.push(eff[2], self, self.name, "timer", (eff[1], eff[2]))
            elif op == "send":
                sink.send(self, eff[1], eff[2], now, eff[3] if len(eff) > 3 else None)
            elif op == "control":
                k.push(now, self, eff[1], "control", eff[2])
            else:
                io_only = False
                # "settled_changed" only makes the run look again at whether it settled (below)
                if op != "settled_changed":
                    if op == "event":
                        self.seq += 1
                    sink.record(now, self.rank, self.seq, eff)
        if effects and (k.dirty_on_io or not io_only):
            k.dirty = True

    def deliver_batch(self, now: float, items: list[tuple]) -> None:
        """Handle this actor's inputs of one batch (queue entries, see ``Kernel.push``) in key order."""
        stop = self.kernel.stop
        for _t, rank, _seq, kind, sender, payload, _dest in items:
            if stop.requested():
                return
            self.input_rank = rank
            self.deliver(now, kind, sender, payload)


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
    actor's ``deliver`` from its own task (see the module docstring). ``sink`` takes the
    effects that are not the kernel's own; ``stop`` is the run's stop token (a fresh one unless
    given)."""

    sink: EffectSink  # plugged in by the world before the run (unset until then)

    def __init__(self, seed: int, max_time: float, stop: StopToken | None = None):
        self.stop = StopToken() if stop is None else stop
        self.max_time = max_time
        self.streams = SeedStreams(seed)
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
        self.stopped: str | None = None  # why the stop token stopped it

    # ---- actors

    def register(self, actor: Actor) -> int:
        if actor.name in self._actors:
            raise ValueError(f"duplicate actor {actor.name}")
        self._actors[actor.name] = actor
        self._ranks.append(actor)
        return len(self._ranks) - 1

    def rng_for(self, rank: int, stream: int | None = None) -> np.random.Generator:
        """The random stream of the actor of rank ``rank`` (``SeedStreams.generator``)."""
        return self.streams.generator(rank, stream)

    def lazy_rng(self, rank: int, stream: int | None = None) -> LazyGenerator:
        """``rng_for(rank, stream)``, built on its first draw."""
        return self.streams.lazy(rank, stream)

    def actors(self) -> list[Actor]:
        """The registered actors, in rank order."""
        return list(self._ranks)

    def clear(self) -> None:
        """Forget every actor and queued input (a finished run's world is being freed)."""
        self._actors.clear()
        self._ranks.clear()
        self._buckets.clear()
        self._times.clear()

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
        stop = self.stop
        stop.note_start()
        try:
            while times:
                if stop.requested():
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
                        if stop.requested():
                            break
                        actors[dest].deliver_batch(t, items)
                    self.batch_dests = batch
                if stop.requested():
                    break
                if after_batch is not None and after_batch(t):
                    break
                if stop.past_limits(self.delivered, self.batches) is not None:
                    break
        finally:
            stop.note_end()
            self.stopped = stop.reason
            if clock is not None and self.now > clock_at:
                clock.jump(self.now - clock_at)
