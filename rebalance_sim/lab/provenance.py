"""How a result was produced: the package version, a digest of the simulation model, the date,
the machine and the Spark master, for `--version` and every report's "How this was produced".

``model_digest`` hashes the source of the packages that decide a run's outcome (``sim`` and
``assignors``), so two reports with the same digest came from the same model whatever the
version string says. The experiments package (plots, reports, CLI) is left out on purpose:
changing a figure does not change a result.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import os
import platform
from importlib import metadata as importlib_metadata
from pathlib import Path

MODEL_PACKAGES = ("sim", "assignors")


def version() -> str:
    """The installed ``rebalance-sim`` version ("unknown" when run from an uninstalled tree)."""
    try:
        return importlib_metadata.version("rebalance-sim")
    except importlib_metadata.PackageNotFoundError:
        return "unknown"


@functools.cache
def model_digest() -> str:
    """12 hex digits of SHA-256 over the model's source files (path and bytes, in path order)."""
    h = hashlib.sha256()
    for package in MODEL_PACKAGES:
        root = Path(str(__import__(package).__file__)).parent
        for path in sorted(root.rglob("*.py")):
            h.update(path.relative_to(root.parent).as_posix().encode())
            h.update(b"\0")
            h.update(path.read_bytes())
            h.update(b"\0")
    return h.hexdigest()[:12]


def machine() -> str:
    """Host name, OS, CPU architecture, core count and Python version, in one phrase."""
    return (
        f"{platform.node() or 'unknown host'} ({platform.system()} {platform.machine()}, "
        f"{os.cpu_count() or '?'} cores, Python {platform.python_version()})"
    )


# What simulated assignor time stands for in every report whose runs use the default.
ASSIGNOR_TIME = (
    "assignor time (assignor_cost=kafka, the default): Kafka's own assignors' time on each input, "
    "from the work their code does on it, priced as Kafka's classes take it on a 2-vCPU VM with "
    "JDK 17, warm (calibration/)"
)


def produced_by(master: str | None = None, when: _dt.datetime | None = None) -> list[str]:
    """The lines of a report's "How this was produced" section that every report shares."""
    when = when or _dt.datetime.now(_dt.UTC)
    lines = [
        f"rebalance-sim {version()}, model digest {model_digest()} (sim + assignors source)",
        f"date: {when.strftime('%Y-%m-%d %H:%M UTC')}",
        f"machine: {machine()}",
        ASSIGNOR_TIME,
    ]
    if master is not None:
        lines.append(f"Spark master: {master}")
    return lines


def model_id() -> str:
    """``<version>+<digest>``: a stored run is reused only by a sweep with the same model id, so a
    change to the simulator or the assignors (an edit, a ``git pull``) forces recomputation."""
    return f"{version()}+{model_digest()}"
