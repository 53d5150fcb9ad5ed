"""Atomic output: a file or directory is either complete or absent, never half-written."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _umask() -> int:
    """The process's umask. Linux shows it in /proc/self/status; elsewhere os.umask can only read
    it by setting it, and threads creating files at that instant would get the wrong one."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a plain ``open(path, "w")`` would give a new file under the current umask."""
    return 0o666 & ~_umask()


def dir_mode() -> int:
    """The mode ``os.mkdir`` would give a new directory under the current umask."""
    return 0o777 & ~_umask()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, fsync it, then rename it into place.

    ``mkstemp`` creates its file with mode 0600; it is widened to what the user's umask allows,
    so a report is as readable as any file the user writes (a web server can serve it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def staging_directory(path: Path) -> Path:
    """A new temporary directory beside ``path``, with the mode ``os.mkdir`` would give, to be
    ``swap_in``'d in place of ``path`` (or removed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    os.chmod(tmp, dir_mode())  # mkdtemp makes it 0700
    return tmp


def swap_in(tmp: Path, path: Path) -> None:
    """Put the directory ``tmp`` in place of ``path`` (whose previous contents go)."""
    path = Path(path)
    if path.exists():
        old = path.with_name(f".{path.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)


@contextmanager
def atomic_directory(path: Path) -> Iterator[Path]:
    """Yield a temporary directory beside ``path``; on success it replaces ``path`` whole."""
    tmp = staging_directory(path)
    try:
        yield tmp
        swap_in(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
