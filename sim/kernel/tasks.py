"""The task kernel ("tasks"): the queue of ``sim.kernel.queue.Kernel`` delivered to actors that are
trio tasks of their own (``sim.kernel.queue``'s docstring describes both kernels and why they give
the same results). It is kept apart from ``sim.kernel.queue`` because it is made of trio's
scheduling (tasks parked and rescheduled, signals kept out of trio's machinery), which stays
Python: the compiled build (``scripts/build_compiled.py``) compiles ``sim.kernel.queue`` and
leaves this module as it is.
"""

from __future__ import annotations

import heapq
import signal
import threading
from collections.abc import Callable, Iterable
from typing import cast

import outcome
import trio
import trio.testing

from sim.kernel.queue import YIELD_EVERY, Actor, Kernel, group_batch
from sim.kernel.stop import StopToken


class _Inbox:
    """Where the task kernel hands an actor its inputs: the actor's trio task, whether that task
    is parked waiting for them, and an input handed before the task first ran."""

    __slots__ = ("task", "parked", "pending")

    def __init__(self):
        self.task = cast("trio.lowlevel.Task", None)  # set when the actor's task starts
        self.parked = False
        self.pending = None

    def abort(self, _raise_cancel) -> trio.lowlevel.Abort:
        # a cancelled run (Ctrl-C): the task wakes with Cancelled and is no longer parked
        self.parked = False
        return trio.lowlevel.Abort.SUCCEEDED


_STOP = ("stop",)  # handed to every actor task when the run ends


class TaskKernel(Kernel):
    """The queue of ``Kernel`` delivered to actors that are trio tasks (see the module docstring).

    The turn passes from task to task: the task that has just handled its inputs runs the
    kernel's step (``_advance``, which also calls ``after_batch`` between batches) and reschedules
    the task of the actor it hands the next inputs to, then parks; consecutive inputs for the same
    actor stay in its task. A scheduling round per change of actor instead of two (to the
    actor's task and back to a kernel task) per input handed."""

    def __init__(self, seed: int, max_time: float, stop: StopToken | None = None):
        super().__init__(seed, max_time, stop)
        self._nursery: trio.Nursery | None = None
        self._inboxes: dict[str, _Inbox] = {}
        self._me = cast("trio.lowlevel.Task", None)  # the kernel's own task, set when it starts
        self._waiting = False  # the kernel's task is parked until the run ends
        self._clock: trio.testing.MockClock | None = None
        self._clock_at = 0.0  # where trio's clock stands
        self._handoffs: list[
            tuple[str, list]
        ] = []  # the current batch's handoffs still to make, last first
        self._dests: Iterable[
            str
        ] = ()  # the current batch's destinations (``batch_dests`` once it is done)
        self._in_batch = False
        self._handlers: dict[int, Callable] = {}  # the guarded signals' handlers (_guard_signals)
        self._deferred: list[int] = []  # signals that landed in trio's machinery, to pass on

    def register(self, actor: Actor) -> int:
        rank = super().register(actor)
        self._inboxes[actor.name] = _Inbox()
        if self._nursery is not None:  # an actor created during the run (a member that joins)
            self._nursery.start_soon(self._serve, actor, name=f"actor {actor.name}")
        return rank

    # ---- the kernel's step (run by the task whose turn it is)

    def _advance(self) -> tuple[str, list] | None:
        """The next handoff, (destination, its entries of the batch at ``now``), in the inline
        kernel's order; None when the run is over. Finishing a batch calls ``after_batch``."""
        if self._deferred:
            self._pass_deferred()  # (an actor's task: not inside trio's machinery)
        stop = self.stop.reason
        if stop is not None:  # a stop asked from outside, looked at before every handoff
            self.stopped = stop
            return None
        handoffs = self._handoffs
        if handoffs:
            return handoffs.pop()
        if self._in_batch:
            self._in_batch = False
            self.batch_dests = self._dests
            if self.after_batch is not None and self.after_batch(self.now):
                return None
            if self.stop.past_limits(self.delivered, self.batches) is not None:
                self.stopped = self.stop.reason
                return None
        times = self._times
        if not times:
            return None
        t = times[0]
        if t > self.max_time:
            return None
        heapq.heappop(times)
        self.now = t
        if self._clock is not None and t > self._clock_at:
            self._clock.jump(t - self._clock_at)
            self._clock_at = t
        entries = self._buckets.pop(t)
        n = len(entries)
        self.batches += 1
        self.delivered += n
        self._in_batch = True
        if n == 1:
            dest = entries[0][6]
            self._dests = (dest,)
            return dest, entries
        batch = group_batch(entries)
        self._dests = batch
        handoffs.extend(batch.items())
        handoffs.reverse()
        return handoffs.pop()

    def _finish(self, failure: BaseException | None) -> None:
        """The run is over (or failed): wake the kernel's task."""
        if self._waiting:  # (not when the run was cancelled meanwhile)
            self._waiting = False
            trio.lowlevel.reschedule(self._me, outcome.Value(failure))

    # ---- the tasks

    async def _serve(self, actor: Actor) -> None:
        """An actor's task: handle the inputs handed to it, then take the kernel's next step and
        hand that to its actor's task (or keep going at once when they are this actor's own),
        and park until handed inputs again."""
        inbox = self._inboxes[actor.name]
        inbox.task = trio.lowlevel.current_task()
        inboxes = self._inboxes
        advance = self._advance
        deliver_batch = actor.deliver_batch
        wait = trio.lowlevel.wait_task_rescheduled
        reschedule = trio.lowlevel.reschedule
        value = outcome.Value
        abort = inbox.abort
        items = inbox.pending
        if items is None:
            inbox.parked = True
            items = await wait(abort)
        else:  # handed over before this task first ran
            inbox.pending = None
        while items is not _STOP:
            try:
                deliver_batch(self.now, items)
                step = advance()
            except Exception as e:  # the kernel's task raises it, as the inline kernel would
                self._finish(e)
                step = None
            if step is None:
                self._finish(None)
            else:
                if self.batches % YIELD_EVERY == 0 and not self._handoffs:
                    await trio.lowlevel.checkpoint()  # other tasks run even if no actor hands over
                dest, items = step
                target = inboxes[dest]
                if target is inbox:
                    continue  # this actor's own inputs: no task switch
                if target.parked:
                    target.parked = False
                    reschedule(target.task, value(items))
                else:  # started during this batch, not yet run (or a cancelled run)
                    target.pending = items
            inbox.parked = True
            items = await wait(abort)

    # signals whose Python handlers may raise into the run: Ctrl-C, and the wall-time alarm of
    # ``rebalance-sim run`` (which cuts a step short that outlasts a stop)
    GUARDED_SIGNALS = (signal.SIGINT, signal.SIGALRM)

    def _guard_signals(self) -> None:
        """While the run lasts, let the handlers of ``GUARDED_SIGNALS`` raise only in the actors'
        code. trio keeps its own SIGINT handler out of its scheduler, but a handler of the
        caller's (``rebalance-sim run``: the first Ctrl-C stops the run, the second raises) would
        raise wherever the signal lands, and here trio's scheduler runs between every two actors:
        an exception raised there breaks trio itself. A signal that lands there is passed to its
        handler at the kernel's next step, in an actor's task (or as the run ends)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in self.GUARDED_SIGNALS:
            handler = signal.getsignal(signum)
            if not callable(handler):
                continue

            def guarded(signum, frame, handler=handler):
                if trio.lowlevel.currently_ki_protected():  # (the interrupted frames are trio's)
                    self._deferred.append(signum)
                else:
                    handler(signum, frame)

            self._handlers[signum] = handler
            signal.signal(signum, guarded)

    def _pass_deferred(self) -> None:
        deferred, self._deferred = self._deferred, []
        for signum in deferred:
            self._handlers[signum](signum, None)

    async def run(self) -> None:
        clock = trio.lowlevel.current_clock()
        self._clock = clock if isinstance(clock, trio.testing.MockClock) else None
        self._clock_at = self.now
        self._me = trio.lowlevel.current_task()
        failure: BaseException | None = None
        self._guard_signals()
        self.stop.note_start()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for actor in self._ranks:
                    nursery.start_soon(self._serve, actor, name=f"actor {actor.name}")
                try:
                    step = self._advance()
                    if step is not None:
                        dest, items = step
                        self._inboxes[dest].pending = items  # no task has run yet
                        self._waiting = True
                        failure = await trio.lowlevel.wait_task_rescheduled(self._abort)
                finally:
                    self._nursery = None
                    for inbox in self._inboxes.values():
                        if inbox.parked:
                            inbox.parked = False
                            trio.lowlevel.reschedule(inbox.task, outcome.Value(_STOP))
                        else:
                            inbox.pending = _STOP
        except BaseExceptionGroup as group:
            # what escapes a task here is an interruption (Ctrl-C): raise it alone, as the
            # inline kernel's single task does
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        finally:
            self.stop.note_end()
            for signum, handler in self._handlers.items():
                signal.signal(signum, handler)
        if self._deferred:  # landed in trio's machinery after the last step
            self._pass_deferred()
        if failure is not None:
            raise failure

    def _abort(self, _raise_cancel) -> trio.lowlevel.Abort:
        self._waiting = False
        return trio.lowlevel.Abort.SUCCEEDED


KERNELS = {"inline": Kernel, "tasks": TaskKernel}
DEFAULT_KERNEL = "inline"
