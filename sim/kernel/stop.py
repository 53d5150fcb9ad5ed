"""One run's stop token: the three ways a run ends before its world is done, in one object.

A ``StopToken`` belongs to one run. Its holder asks it to stop (``request``: the command line's
Ctrl-C and wall-time alarm, safe from a signal handler), and it carries the run's resource
limits (``max_events`` simulation inputs delivered, ``max_wall_s`` seconds of wall time since the
kernel started delivering). Both kernels look at ``reason`` before every input they deliver, so a
batch of a hundred thousand inputs stops within one of them, and ask ``past_limits`` after every
batch's bookkeeping (the run's ``after_batch``), so a partial run's prefix is consistent.
``running`` and ``started`` tell the holder whether the run's kernel is delivering inputs now (a
stop asked before or after that finds no kernel to stop).

``max_memory_bytes`` bounds the process's resident memory, read with the wall clock; a run that
reaches it stops as a partial run instead of being killed by the operating system. Once the
kernel is over, the run's result is built in phases (tables, invariants, metrics): ``cut`` asks
them to stop, ``check`` is where they look (and where the run's ``max_wall_s`` still holds).
"""

from __future__ import annotations

import os
import resource
import time

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int:
    """This process's resident memory now (its peak where ``/proc`` is missing)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# The share of the machine's memory a run may take by default (``rebalance-sim run``'s
# ``--max-memory``; a sweep's runs share it among the machine's cores).
MEMORY_SHARE = 0.8


def machine_memory() -> int | None:
    """The memory this process may use: the machine's, or less under a cgroup's limit (None when
    neither is known)."""
    sizes = []
    try:
        sizes.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:
            sizes.append(int(text))
    return min(sizes) if sizes else None


def format_bytes(n: float) -> str:
    """``n`` bytes as a short figure in binary units (``1.5G``, ``800M``), as ``--max-memory`` takes
    them."""
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return f"{int(n)}"


class RunCut(Exception):
    """The building of a run's result was stopped (``StopToken.check``): ``reason``, ``phase``."""

    def __init__(self, reason: str, phase: str):
        super().__init__(f"{reason} while {phase}")
        self.reason = reason
        self.phase = phase


class StopToken:
    """Why one run should stop (``reason``, None while it should not), and its limits."""

    def __init__(
        self,
        max_wall_s: float | None = None,
        max_events: int | None = None,
        max_memory_bytes: int | None = None,
    ):
        self.max_wall_s = max_wall_s
        self.max_events = max_events
        self.max_memory_bytes = max_memory_bytes
        self.reason: str | None = None
        self.cut_reason: str | None = None  # asked of the phases after the kernel
        self._finish_at: float | None = None  # (monotonic) when those phases are cut
        self._finish_reason = ""
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
        (recorded as ``reason``), else None. The wall clock and the memory are read every 64
        batches only."""
        if self.max_events is not None and delivered >= self.max_events:
            self.reason = f"max_events={self.max_events} reached"
        elif (batches & 63) == 0:
            if self.max_wall_s is not None and time.monotonic() - self._wall0 > self.max_wall_s:
                self.reason = f"max_wall_s={self.max_wall_s:g} reached"
            elif self.max_memory_bytes is not None:
                resident = resident_bytes()
                if resident >= self.max_memory_bytes:
                    self.reason = (
                        f"max_memory={format_bytes(self.max_memory_bytes)} reached "
                        f"({format_bytes(resident)} resident)"
                    )
        return self.reason

    def cut(self, reason: str) -> None:
        """Ask the phases that build the run's result, once the kernel is over, to stop at their
        next ``check``. Safe to call from a signal handler."""
        self.cut_reason = reason

    def finish_by(self, at: float, reason: str) -> None:
        """Cut the phases after the kernel at ``at`` (``time.monotonic()``), for ``reason``."""
        self._finish_at = at
        self._finish_reason = reason

    def finish_within(self, grace_s: float) -> None:
        """With a ``max_wall_s`` and no deadline set by the holder: cut the phases after the kernel
        ``grace_s`` after that wall time."""
        if self.max_wall_s is not None and self._finish_at is None:
            self.finish_by(
                self._wall0 + self.max_wall_s + grace_s, f"max_wall_s={self.max_wall_s:g} reached"
            )

    def check(self, phase: str) -> None:
        """Raise ``RunCut`` if the result's building should stop: ``cut`` was asked, or its
        deadline (``finish_by``) is past. ``phase`` says what was being done."""
        reason = self.cut_reason
        at = self._finish_at
        if reason is None and at is not None and time.monotonic() > at:
            reason = self._finish_reason
        if reason is not None:
            raise RunCut(reason, phase)

    def note_start(self) -> None:
        """The kernel starts delivering inputs; the wall time counts from here."""
        self.running = True
        self.started = True
        self._wall0 = time.monotonic()

    def note_end(self) -> None:
        """The kernel has stopped delivering inputs."""
        self.running = False
