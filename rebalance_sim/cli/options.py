"""Options several commands take.

``--kernel tasks|inline``: which kernel runs the simulations of ``run``, ``experiment``, ``sweep``
and ``soak`` (``sim.kernel``). Both give the same results, so the choice is not part of a run's
id: a sweep resumed with the other kernel reuses the runs already complete.

``--max-memory SIZE``: the resident memory at which a simulation stops as a partial run (``run``,
``soak``), by default ``MEMORY_SHARE`` of what the machine (or the container's memory limit)
has, so that a run that would outgrow the machine ends with one line rather than being killed.

``--master``, ``--conf``, ``--no-ship``, ``--spark-timeout``: where ``sweep`` and ``experiment``
run Spark (``rebalance_sim.lab.engine.spark``)."""

from __future__ import annotations

import re
import sys

from sim.kernel.stop import MEMORY_SHARE, format_bytes, machine_memory
from sim.kernel.tasks import DEFAULT_KERNEL, KERNELS

from .common import err


def add_kernel_option(parser) -> None:
    parser.add_argument(
        "--kernel",
        metavar="tasks|inline",
        default=None,
        help=f"how the simulated actors run: 'tasks' (each actor a trio task of its own) or "
        f"'inline' (the same actors called in the same order from one task, faster); the "
        f"results are the same (default {DEFAULT_KERNEL})",
    )


def kernel_error(command: str, args) -> int | None:
    """Exit status 2, with one line naming the option, when ``--kernel`` names no kernel."""
    kernel = getattr(args, "kernel", None)
    if kernel is None or kernel in KERNELS:
        return None
    print(
        f"rebalance-sim {command}: --kernel: {kernel!r} is not one of {', '.join(sorted(KERNELS))}",
        file=sys.stderr,
    )
    return 2


_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*(?:([kmgt])(?:i?b)?|b)?\s*$", re.IGNORECASE)
_UNITS = {None: 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """``1G``, ``512M``, ``1.5GiB``, ``2000000`` (bytes): binary units. Raises ``ValueError``."""
    m = _SIZE.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not a size such as 800M or 2G")
    value = int(float(m.group(1)) * _UNITS[m.group(2).lower() if m.group(2) else None])
    if value < 1:
        raise ValueError(f"{text!r} must be more than 0 bytes")
    return value


def add_memory_option(parser) -> None:
    total = machine_memory()
    default = f"{MEMORY_SHARE * 100:.0f}%% of this machine's memory" + (
        f", {format_bytes(total * MEMORY_SHARE)}" if total else ""
    )
    parser.add_argument(
        "--max-memory",
        metavar="SIZE",
        default=None,
        help=f"stop when the process's resident memory reaches SIZE (e.g. 2G, 800M); results are "
        f"kept and marked partial (exit 3) (default {default})",
    )


def max_memory_bytes(args) -> int | None:
    """``--max-memory`` in bytes (its default when not given; None when the machine's memory is
    unknown). Raises ``ValueError`` on a bad size."""
    text = getattr(args, "max_memory", None)
    if text is None:
        total = machine_memory()
        return int(total * MEMORY_SHARE) if total else None
    return parse_size(text)


def add_spark_options(p) -> None:
    """The options every command that starts Spark takes."""
    p.add_argument(
        "--master",
        help="Spark master URL (default local[*]; spark://HOST:7077, yarn, "
        "k8s://..., or sc://HOST:15002 for Spark Connect)",
    )
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, as in spark-submit (repeatable)",
    )
    p.add_argument(
        "--no-ship",
        dest="ship",
        action="store_false",
        help="do not ship this project and its dependencies to a non-local master "
        "(its workers have them installed)",
    )
    p.add_argument(
        "--spark-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long a master or Connect server may take to answer (default 60)",
    )


def check_spark_options(cmd: str, args) -> int | None:
    from ..lab.engine.spark import SparkUnavailable, check_master, parse_conf

    try:
        parse_conf(getattr(args, "conf", None) or [])
        check_master(getattr(args, "master", None))
    except (ValueError, SparkUnavailable) as e:
        return err(cmd, str(e))
    t = getattr(args, "spark_timeout", None)
    if t is not None and not t > 0:
        return err(cmd, f"--spark-timeout {t:g}: must be a positive number of seconds")
    return None
