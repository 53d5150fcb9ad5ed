"""Which build of the simulator's hot modules this process runs: the compiled one, or the source.

``scripts/build_compiled.py`` (run by ``scripts/setup``) compiles some of ``sim``'s modules with
mypyc into extension modules beside their ``.py`` files, which Python's import prefers. Importing
``sim`` imports this module first, before any of those, and it keeps the compiled build only when
it is current: the manifest the build writes last (``sim/_compiled.json``) lists every compiled
module with the SHA-256 of the source it was compiled from, and each source still has that
digest (hashing them costs about a millisecond). Otherwise, or when the environment sets
``REBALANCE_SIM_PURE=1``, every module of the package is imported from its ``.py`` file (a finder
ahead of the others on ``sys.meta_path``). A stale build (a module edited since, or a build cut
short) says so in one line on stderr and is not used: all or nothing, since compiled modules call
one another directly and cannot be mixed with source ones.

Both builds give the same events and intervals, byte for byte (``tests/sim/test_compiled.py``), so
a run's identity (``rebalance_sim.lab.provenance.model_digest``) is a digest of the source alone.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from pathlib import Path

try:
    from mypy_extensions import mypyc_attr
except ImportError:  # (a dev tool) what it says is for mypyc alone, read as it compiles

    def mypyc_attr(*_args, **_attrs):  # type: ignore[misc]
        return lambda cls: cls


PURE_ENV = "REBALANCE_SIM_PURE"  # "1": run the source even when a compiled build is current
MANIFEST = "_compiled.json"
_ROOT = Path(__file__).parent
_status = "pure Python (no compiled build)"


class _SourceFinder:
    """Finds the named modules at their ``.py`` files, ahead of the extension modules beside
    them."""

    def __init__(self, sources: dict[str, Path]):
        self.sources = sources

    def find_spec(self, fullname: str, path=None, target=None):
        source = self.sources.get(fullname)
        if source is None:
            return None
        return importlib.util.spec_from_file_location(fullname, source)


def extension_modules() -> dict[str, Path]:
    """The package's modules (in its subpackages too) that have an extension module of this
    interpreter beside their source: dotted name -> source file (none when the package is not a
    directory, e.g. in a zip shipped to a Spark executor)."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    found = {}
    try:
        paths = sorted(_ROOT.rglob("*"))
    except OSError:
        return {}
    for path in paths:
        for suffix in suffixes:
            if path.name.endswith(suffix):
                source = path.with_name(path.name[: -len(suffix)] + ".py")
                if source.exists():
                    parts = source.relative_to(_ROOT).with_suffix("").parts
                    found[".".join((__package__, *parts))] = source
                break
    return found


def _stale(built: dict[str, Path]) -> str | None:
    """Why the compiled build may not be used (None: it is current)."""
    try:
        recorded = json.loads((_ROOT / MANIFEST).read_text())["modules"]
    except (OSError, ValueError, KeyError, TypeError):
        return "its manifest is missing (a build cut short?)"
    if set(recorded) != set(built):
        return "its modules are not the ones its manifest lists"
    for name, digest in sorted(recorded.items()):
        if hashlib.sha256(built[name].read_bytes()).hexdigest() != digest:
            return f"{built[name].relative_to(_ROOT.parent).as_posix()} changed since it was built"
    return None


def select() -> str:
    """Decide which build to import (once, before any compiled module is imported); returns
    ``status()``."""
    global _status
    built = extension_modules()
    if not built:
        return _status
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        reason = f"{PURE_ENV}={os.environ[PURE_ENV]}"
    else:
        why = _stale(built)
        if why is None:
            _status = "compiled (mypyc)"
            return _status
        reason = "the compiled build is stale"
        sys.stderr.write(
            f"rebalance-sim: the compiled simulator is stale ({why}); running pure Python; "
            "rerun ./scripts/setup to rebuild it\n"
        )
    sys.meta_path.insert(0, _SourceFinder(built))
    _status = f"pure Python ({reason})"
    return _status


def status() -> str:
    """ "compiled (mypyc)" or "pure Python (why)": what this process runs."""
    return _status


select()
