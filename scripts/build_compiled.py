"""Build the compiled simulator: mypyc compiles the simulator's hot modules from their type
annotations to C extension modules, placed beside their source in ``sim/``.

    .venv/bin/python scripts/build_compiled.py          # build (or nothing, when up to date)
    .venv/bin/python scripts/build_compiled.py --clean  # remove the build: pure Python again
    .venv/bin/python scripts/build_compiled.py --check  # exit status 0: the build is current

``scripts/setup`` runs it. What it leaves in ``sim/`` (ignored by git): one extension module per
compiled module, beside its source (``sim/kernel/queue.cpython-311-x86_64-linux-gnu.so``, ...), the shared library they
all live in (``sim/_compiled__mypyc...so``), and last ``sim/_compiled.json``: the interpreter's
extension suffix and the SHA-256 of each compiled module's source. ``sim/__init__.py``
(``sim.compiled``) checks that manifest at import: a module edited since the build, a missing
manifest or ``REBALANCE_SIM_PURE=1`` make the whole package run its source instead.

The compiled modules give the same events and intervals as their source, byte for byte
(``tests/sim/test_compiled.py``): mypyc keeps Python's semantics for ints, floats, dicts and
ordering, and the C compiler is told not to fuse floating-point multiplies and adds
(``-ffp-contract=off``), which would round differently from Python. What differs is what the
annotations say: compiled, they are checked (a value of another type is a TypeError) and a value
annotated ``float`` is a float (an int stored there becomes one, and prints as "1.0"), so an
annotation must say what the value is.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.machinery
import json
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "sim"
# The modules compiled (paths under sim/, without .py), together (one shared library: calls
# between them are C calls). The rest of sim/ stays Python: the task kernel (kernel/tasks: trio's
# scheduling), scenarios and configuration (parsing), the target assignment's call of the
# server-side assignor (its time is the assignor's), metrics and the invariants (run once per
# run, on Arrow tables), the exceptions (sim.errors), the runner (world/runner: once per batch),
# the testing harness, and sim.run, whose run_scenario checks its arguments itself (compiled, an
# argument of the wrong type would be a TypeError before that check could name it).
MODULES = (
    "kernel/queue",
    "kernel/rng",
    "kernel/stop",
    "wire/messages",
    "wire/faults",
    "client/states",
    "client/base",
    "client/classic",
    "client/consumer",
    "client/cooperative",
    "client/handoffs",
    "coordinator/offsets",
    "coordinator/classic/states",
    "coordinator/classic/group",
    "coordinator/consumer/states",
    "coordinator/consumer/member",
    "coordinator/consumer/reconcile",
    "coordinator/consumer/members_order",
    "coordinator/consumer/group",
    "coordinator/consumer/classic_members",
    "coordinator/migration",
    "world/network",
    "world/actors",
    "world/group_types",
    "observe/recorder",
    "observe/zombies",
)
GROUP = f"{PACKAGE}._compiled"  # the shared library: sim/_compiled__mypyc<suffix>
MANIFEST = ROOT / PACKAGE / "_compiled.json"
BUILD_DIR = ROOT / "build" / "mypyc"


def source_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest() -> dict:
    """What the build is made of: the interpreter it is for, and each compiled module's source."""
    return {
        "suffix": importlib.machinery.EXTENSION_SUFFIXES[0],
        "modules": {
            f"{PACKAGE}.{name.replace('/', '.')}": source_digest(ROOT / PACKAGE / f"{name}.py")
            for name in MODULES
        },
    }


def built_files() -> list[Path]:
    """The extension modules of a build in the package (of any interpreter), and its manifest."""
    root = ROOT / PACKAGE
    return sorted(
        p for p in root.rglob("*") if p.name.endswith(".so") or p.name.endswith(".pyd")
    ) + ([MANIFEST] if MANIFEST.exists() else [])


def clean() -> None:
    for path in built_files():
        path.unlink()
    shutil.rmtree(BUILD_DIR, ignore_errors=True)


def up_to_date() -> bool:
    try:
        recorded = json.loads(MANIFEST.read_text())
    except (OSError, ValueError):
        return False
    suffix = recorded.get("suffix", "")
    return recorded == manifest() and all(
        (ROOT / PACKAGE / f"{name}{suffix}").exists() for name in MODULES
    )


def build() -> None:
    from mypyc.build import mypycify
    from setuptools import Distribution

    os.chdir(ROOT)  # mypy reads pyproject.toml's [tool.mypy]; paths below are relative to it
    if MANIFEST.exists():
        MANIFEST.unlink()  # an interrupted build leaves no manifest: the package runs its source
    extensions = mypycify(
        [f"{PACKAGE}/{name}.py" for name in MODULES],
        group_name=GROUP,
        target_dir=str(BUILD_DIR / "c"),
        opt_level="3",
        debug_level="0",
    )
    for ext in extensions:
        # Python rounds every multiply and add; a fused multiply-add rounds once
        ext.extra_compile_args = [*(ext.extra_compile_args or []), "-ffp-contract=off"]
    # setuptools' build_ext alone (no setup(): that would read pyproject.toml as a project)
    dist = Distribution({"name": "rebalance-sim-compiled", "ext_modules": extensions})
    build_ext = dist.get_command_obj("build_ext")
    build_ext.inplace = True
    build_ext.build_temp = str(BUILD_DIR / "temp")
    build_ext.parallel = os.cpu_count() or 1
    dist.run_command("build_ext")
    MANIFEST.write_text(json.dumps(manifest(), indent=1, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clean", action="store_true", help="remove the compiled build")
    parser.add_argument("--force", action="store_true", help="build even when up to date")
    parser.add_argument(
        "--check",
        action="store_true",
        help="only say (exit status 0 or 1) whether it is up to date",
    )
    args = parser.parse_args(argv)
    if args.check:
        return 0 if up_to_date() else 1
    if args.clean:
        clean()
        return 0
    if not args.force and up_to_date():
        return 0
    clean()
    build()
    return 0


if __name__ == "__main__":
    sys.exit(main())
