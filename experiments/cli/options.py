"""``--kernel tasks|inline``: which kernel runs the simulations of ``run``, ``experiment``,
``sweep`` and ``soak`` (``sim.kernel``). Both give the same results, so the choice is not part of
a run's id: a sweep resumed with the other kernel reuses the runs already complete."""

from __future__ import annotations

import sys

from sim.kernel import DEFAULT_KERNEL, KERNELS


def add_kernel_option(parser) -> None:
    parser.add_argument(
        "--kernel", metavar="tasks|inline", default=None,
        help=f"how the simulated actors run: 'tasks' (each actor a trio task of its own) or "
             f"'inline' (the same actors called in the same order from one task, faster); the "
             f"results are the same (default {DEFAULT_KERNEL})")


def kernel_error(command: str, args) -> int | None:
    """Exit status 2, with one line naming the option, when ``--kernel`` names no kernel."""
    kernel = getattr(args, "kernel", None)
    if kernel is None or kernel in KERNELS:
        return None
    print(f"rebalance-sim {command}: --kernel: {kernel!r} is not one of {', '.join(sorted(KERNELS))}",
          file=sys.stderr)
    return 2
