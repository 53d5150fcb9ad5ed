"""Stopping a run from outside the simulation: the command line's Ctrl-C and wall-time limit ask
for it (``request_stop``, safe from a signal handler), and both kernels look before every input
they deliver (``stop_requested``), so that a batch of a hundred thousand inputs stops within one
of them; ``running`` and ``started`` tell the command line whether a kernel is delivering inputs
now (a stop asked before or after that finds no kernel to stop).
"""

from __future__ import annotations

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
