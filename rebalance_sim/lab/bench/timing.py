"""Timing of the assignor benchmarks: the median of repeated calls, each charged only for itself."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TypeVar, cast

T = TypeVar("T")

# A call that takes a millisecond or two is at the mercy of a single interruption (a context
# switch, another tenant of the machine): such calls are repeated beyond ``repeat`` until the timed
# calls add up to this much, so that their median is measured over enough of them (Kafka's Java
# figures are of warmed-up runs too).
MIN_TIMED_S = 0.5
MAX_CALLS = 1000


def timed_median(fn: Callable[[], T], repeat: int) -> tuple[float, T, int]:
    """(median seconds, the last result, calls timed) of calling ``fn`` at least ``repeat`` times
    and until ``MIN_TIMED_S`` seconds were timed (at most ``MAX_CALLS`` calls)."""
    times: list[float] = []
    total = 0.0
    out: T | None = None
    while len(times) < repeat or (total < MIN_TIMED_S and len(times) < MAX_CALLS):
        # Free the previous call's result before the clock starts: a call is charged for building
        # its result, not for dropping the one before it.
        out = None
        t0 = time.perf_counter()
        out = fn()
        elapsed = time.perf_counter() - t0
        times.append(elapsed)
        total += elapsed
    return statistics.median(times), cast(T, out), len(times)
