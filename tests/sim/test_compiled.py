"""The compiled build (``scripts/build_compiled.py``, ``sim.compiled``) gives the same runs as the
source: the same events and intervals files, byte for byte, and the same episodes, summary (but
for wall time) and violations, on built-ins under both group protocols, several seeds and random
fault schedules; and a finished run leaves no more to the cyclic collector than the source's.
A process imports one build or the other: this one runs its own (``conftest.this_build``, the runs
``test_golden`` reads too) and a child process the other; skipped when no current compiled build
exists."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import sim.compiled
from tests.sim import golden

ROOT = Path(__file__).resolve().parent.parent.parent


def _other_build(pure: bool) -> dict:
    """``golden.build_runs`` in a process of its own, on the source (``pure``) or the build."""
    env = {k: v for k, v in os.environ.items() if k != sim.compiled.PURE_ENV}
    if pure:
        env[sim.compiled.PURE_ENV] = "1"
    proc = subprocess.run(
        [
            sys.executable,
            str(Path(golden.__file__)),
            "--build-runs",
            json.dumps(list(golden.SOAK_SAMPLE)),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_the_compiled_build_gives_the_same_bytes_as_the_source(this_build):
    """This process runs one build (compiled unless told otherwise); a child runs the other."""
    here_compiled = this_build["status"].startswith("compiled")
    if not here_compiled and not sim.compiled.extension_modules():
        pytest.skip(f"no compiled build (./scripts/setup builds it): {this_build['status']}")
    other = _other_build(pure=here_compiled)
    compiled, pure = (this_build, other) if here_compiled else (other, this_build)
    if not compiled["status"].startswith("compiled"):
        pytest.skip(f"no current compiled build (./scripts/setup builds it): {compiled['status']}")
    # each side ran the build it was meant to
    assert not compiled["kernel_module"].endswith(".py")
    assert pure["status"].startswith("pure Python")
    assert pure["kernel_module"].endswith(".py")
    assert len(compiled["runs"]) == (
        11 * 2 * len(golden.SIZES) - len(golden.LEFT_OUT) + len(golden.SOAK_SAMPLE)
    )
    assert sum(rows for rows, _ in pure["runs"].values()) > 0
    differ = [case for case in pure["runs"] if pure["runs"][case] != compiled["runs"][case]]
    assert not differ, f"the compiled build and the source differ on {differ}"
    # compiled objects hold their attributes outside any __dict__, and compiled closures keep
    # their variables in objects of their own: a finished run must still free its world without
    # the cyclic collector (which would trace all of it at its next pass)
    assert compiled["garbage"] <= pure["garbage"] < 1000


_WHICH = "import sim, sim.kernel.queue; print(sim.compiled.status()); print(sim.kernel.queue.__file__.endswith('.py'))"


def test_a_module_edited_since_the_build_makes_the_package_run_its_source(tmp_path):
    """A copy of the package with its build: as built, it runs compiled; with one module's source
    edited, it says so in one line and runs the source, every module of it."""
    built = sim.compiled.extension_modules()
    if not built or sim.compiled.PURE_ENV in os.environ:
        pytest.skip("no compiled build here, or this process was asked for the source")
    shutil.copytree(ROOT / "sim", tmp_path / "sim", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != sim.compiled.PURE_ENV}
    env["PYTHONPATH"] = str(tmp_path)

    def which():
        p = subprocess.run(
            [sys.executable, "-c", _WHICH], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert p.returncode == 0, p.stderr
        return p.stdout.split("\n")[:2], p.stderr

    assert which() == (["compiled (mypyc)", "False"], "")
    member = tmp_path / "sim" / "client" / "classic.py"
    member.write_text(member.read_text() + "\n# edited\n")
    (status, source), err = which()
    assert (status, source) == ("pure Python (the compiled build is stale)", "True")
    assert err.count("\n") == 1 and "sim/client/classic.py changed since it was built" in err
    assert "./scripts/setup" in err


def test_compiled_modules_import_their_compiled_neighbours_for_real():
    """No compiled module imports another module of the package under ``if TYPE_CHECKING:``
    only: compiled, such an import still sets the module as an attribute of its package when
    the importer runs, and if nothing has imported it for real by then, the build crashes at
    import (a segmentation fault, not an exception). Runs without a build: it reads the
    sources the build lists."""
    import ast
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "build_compiled", ROOT / "scripts" / "build_compiled.py"
    )
    assert spec is not None and spec.loader is not None
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    wrong = []
    for name in build.MODULES:
        path = ROOT / "sim" / f"{name}.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.If)
                and isinstance(node.test, ast.Name)
                and node.test.id == "TYPE_CHECKING"
            ):
                wrong += [
                    f"sim/{name}.py:{imp.lineno}"
                    for imp in node.body
                    if isinstance(imp, ast.ImportFrom)
                    and (imp.level or (imp.module or "").startswith("sim"))
                ]
    assert not wrong, wrong
