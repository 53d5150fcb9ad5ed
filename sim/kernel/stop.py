"""One run's stop token: the three ways a run ends before its world is done, in one object.

A ``StopToken`` belongs to one run. Its holder asks it to stop (``request``: the command line's
Ctrl-C and wall-time alarm, safe from a signal handler), and it carries the run's resource
limits (``max_events`` simulation inputs delivered, ``max_wall_s`` seconds of wall time since the
kernel started delivering). Both kernels look at ``reason`` before every input they deliver, so a
batch of a hundred thousand inputs stops within one of them, and ask ``past_limits`` after every
batch's bookkeeping (the run's ``after_batch``), so a partial run's prefix is consistent.
``running`` and ``started`` tell the holder whether the run's kernel is delivering inputs now (a
stop asked before or after that finds no kernel to stop).
"""

from __future__ import annotations

import time


class StopToken:
    """Why one run should stop (``reason``, None while it should not), and its limits."""

    def __init__(self, max_wall_s: float | None = None, max_events: int | None = None):
        self.max_wall_s = max_wall_s
        self.max_events = max_events
        self.reason: str | None = None
        self.running = False  # a kernel is delivering this run's inputs now
        self.started = False  # the kernel started delivering (it may be over)
        self._wall0 = time.monotonic()

    def request(self, reason: str) -> None:
        """Ask the run's kernel to stop before its next input; the run then ends as a partial
        run (``Kernel.stopped`` says why). Safe to call from a signal handler."""
        self.reason = reason

    def requested(self) -> bool:
        """Whether the run should stop before its next input. Read through this method, not the
        attribute: a signal handler or another thread sets ``reason`` between two reads, and the
        compiled kernel, once it has seen ``reason`` None, would take it as None for good (the
        type narrowed) and fail on the string."""
        return self.reason is not None

    def past_limits(self, delivered: int, batches: int) -> str | None:
        """Called by the kernel after each batch: the reason to stop when a limit is reached
        (recorded as ``reason``), else None. The wall clock is read every 64 batches only."""
        if self.max_events is not None and delivered >= self.max_events:
            self.reason = f"max_events={self.max_events} reached"
        elif (
            self.max_wall_s is not None
            and (batches & 63) == 0
            and time.monotonic() - self._wall0 > self.max_wall_s
        ):
            self.reason = f"max_wall_s={self.max_wall_s:g} reached"
        return self.reason

    def note_start(self) -> None:
        """The kernel starts delivering inputs; the wall time counts from here."""
        self.running = True
        self.started = True
        self._wall0 = time.monotonic()

    def note_end(self) -> None:
        """The kernel has stopped delivering inputs."""
        self.running = False
