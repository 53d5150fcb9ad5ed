"""What the commands share: one-line errors with their exit status, output checks, whether the
lab is installed, and telling a Ctrl-C from the Spark failure it causes."""

from __future__ import annotations

import importlib.util
import sys

from ..lab.outputs import check_output_dir


def err(cmd: str, message: str) -> int:
    print(f"rebalance-sim {cmd}: {message}", file=sys.stderr)
    return 2


def failed(cmd: str, message: str) -> int:
    """A job that failed while running (not bad input): one line, exit 1."""
    print(f"rebalance-sim {cmd}: {message}", file=sys.stderr)
    return 1


# What the ``[lab]`` extra installs (pyproject.toml), by import name: the Spark engine, its tables
# and the packing of the driver's environment for a cluster's workers. The base install runs the
# simulator and the commands that read one run (``run``, ``show``, ``timeline``, ``assign``).
LAB_MODULES = ("pyspark", "pandas", "venv_pack")
LAB_INSTALL = "pip install 'rebalance-sim[lab]'"


def lab_missing() -> str | None:
    """The first of the lab's libraries that cannot be imported here, or None when all can."""
    for name in LAB_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return name
    return None


def need_lab(cmd: str) -> int | None:
    """None when the lab is installed; else one line saying how to install it, and exit 2."""
    missing = lab_missing()
    if missing is None:
        return None
    return err(cmd, f"needs the lab, which is not installed ({missing} is missing): {LAB_INSTALL}")


def spark_err(cmd: str, e: Exception) -> int:
    from ..lab.engine.spark import SparkHung, exit_now

    code = err(cmd, str(e))
    if isinstance(e, SparkHung):
        exit_now(code)
    return code


def check_out(flag: str, where: str):
    """A local output directory is created and probed now; a URI is checked by Spark itself
    (``rebalance_sim.lab.engine.store``) before any run starts."""
    from ..lab.engine.store import local_path

    local = local_path(where)
    if local is None:
        return where
    check_output_dir(local, flag=flag)
    return where


def interrupted(cmd: str, message: str) -> int:
    print(f"rebalance-sim {cmd}: {message}", file=sys.stderr, flush=True)
    return 130


class SigintSeen:
    """Whether a Ctrl-C came while the block ran. A terminal's Ctrl-C reaches Spark's JVM too,
    which may fail the call under way (a broken pipe) before Python raises KeyboardInterrupt:
    that failure is the interrupt, not a Spark error. Python's own handler is kept in effect
    (it raises KeyboardInterrupt); only a command that does not simulate in this process uses
    this (trio protects its own state only under Python's handler)."""

    def __init__(self, active: bool = True):
        self.seen = False
        self.active = active

    def __enter__(self) -> SigintSeen:
        import signal
        import threading

        self.previous = None
        if (
            self.active
            and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):

            def on_sigint(signum, frame):
                self.seen = True
                signal.default_int_handler(signum, frame)

            self.previous = signal.signal(signal.SIGINT, on_sigint)
        return self

    def __exit__(self, *exc) -> None:
        import signal

        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
