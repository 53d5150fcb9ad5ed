"""Which model produced a result: the package version and a digest of the simulator's and the
assignors' sources, plus the date and the Spark master, for run identity and reports.

A sweep treats a stored run as reusable only if it was produced by the same model
(``model_id()``): after any change to ``sim/`` or ``assignors/`` (an edit, a ``git pull``) a rerun
into the same output recomputes instead of reusing. The digest covers every ``.py`` file of both
packages (path and bytes, in sorted order), so it changes whenever behaviour can; it is computed
on the driver, from the sources that are shipped to the executors.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
from importlib import metadata as importlib_metadata
from pathlib import Path

MODEL_PACKAGES = ("sim", "assignors")
DIGEST_HEX = 12


def package_version() -> str:
    try:
        return importlib_metadata.version("rebalance-sim")
    except importlib_metadata.PackageNotFoundError:  # running from a checkout without install
        return "unknown"


def _package_dir(name: str) -> Path:
    import importlib

    return Path(importlib.import_module(name).__file__).parent


@functools.cache
def model_digest() -> str:
    """sha256 over the ``.py`` sources of ``sim`` and ``assignors`` (first 12 hex digits)."""
    h = hashlib.sha256()
    for pkg in MODEL_PACKAGES:
        root = _package_dir(pkg)
        for path in sorted(root.rglob("*.py")):
            h.update(f"{pkg}/{path.relative_to(root).as_posix()}\0".encode())
            h.update(path.read_bytes())
            h.update(b"\0")
    return h.hexdigest()[:DIGEST_HEX]


def model_id() -> str:
    """``<version>+<digest>``: equal ids mean the same simulator and assignors."""
    return f"{package_version()}+{model_digest()}"


def provenance(master: str | None = None) -> dict[str, str]:
    """The values of a report's "how this was produced" line."""
    return {
        "version": package_version(),
        "model_digest": model_digest(),
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "master": master or "local[*]",
    }


def provenance_line(master: str | None = None) -> str:
    p = provenance(master)
    return (f"rebalance-sim {p['version']}, model digest {p['model_digest']} (sim + assignors "
            f"sources), {p['date']}, Spark master {p['master']}")
