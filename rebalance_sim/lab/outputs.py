"""Output locations checked before any work starts: a run that would fail to write its results
fails in the first second, with one line naming the location, instead of after the simulation."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class OutputError(ValueError):
    """An output location that cannot be written or read (a local path checked here, or a
    sweep's output read through Spark, ``rebalance_sim.lab.engine.store``); the message names it and
    says why, in one line."""


def _why(e: OSError) -> str:
    return e.strerror or str(e)


def check_output_dir(path: str | os.PathLike, flag: str = "--out") -> Path:
    """Make sure ``path`` is (or can become) a directory we can write files in.

    The directory is created if missing (the run would create it anyway) and a probe file is
    written and removed, which catches what permission bits do not (read-only or pseudo file
    systems such as /proc, running as root)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise OutputError(f"{flag} {path}: exists and is not a directory")
    try:
        p.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-check-", dir=p)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OutputError(f"{flag} {path}: cannot write there ({_why(e)})") from None
    return p


def check_output_file(path: str | os.PathLike, flag: str = "--out") -> Path:
    """Make sure the file ``path`` can be written (its directory is created and probed)."""
    p = Path(path)
    if p.is_dir():
        raise OutputError(f"{flag} {path}: is a directory, expected a file name")
    check_output_dir(p.parent if str(p.parent) else Path("."), flag=f"{flag} {path}: directory")
    return p
