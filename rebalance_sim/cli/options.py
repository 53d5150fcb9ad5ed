"""Options several commands take.

``--kernel tasks|inline``: which kernel runs the simulations of ``run``, ``experiment``, ``sweep``
and ``soak`` (``sim.kernel``). Both give the same results, so the choice is not part of a run's
id: a sweep resumed with the other kernel reuses the runs already complete.

``--master``, ``--conf``, ``--no-ship``, ``--spark-timeout``: where ``sweep`` and ``experiment``
run Spark (``rebalance_sim.lab.engine.spark``)."""

from __future__ import annotations

import sys

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
