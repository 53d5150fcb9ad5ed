"""The base install (no ``[lab]`` extra: no pyspark, pandas or venv-pack) runs the simulator and
the commands that read one run; the lab's commands say in one line how to install it, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

# A process in which the lab's libraries cannot be imported, as after `pip install rebalance-sim`.
WITHOUT_LAB = """
import sys

class NoLab:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyspark", "pandas", "venv_pack"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoLab())
from rebalance_sim.cli.main import main
rc = main(sys.argv[1:])
assert not any(m.split(".")[0] in ("pyspark", "pandas") for m in sys.modules), "a lab library"
sys.exit(rc)
"""


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_LAB, *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_run_show_timeline_and_list_need_no_lab(tmp_path):
    run = _cli("run", "scale-out", "--seed", "1", "--out", "r", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "rebalance" in run.stdout.lower()
    show = _cli("show", "scale-out", cwd=tmp_path)
    assert show.returncode == 0, show.stderr
    assert "[consumer]" in show.stdout
    timeline = _cli("timeline", "r", "--out", "t.png", cwd=tmp_path)
    assert timeline.returncode == 0, timeline.stderr
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    listed = _cli("list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "scale-out" in listed.stdout
    assert "rebalance-sim[lab]" in listed.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("sweep", "grid.toml", "--out", "o"),
        ("experiment", "ci-regression"),
        ("plan", "--example"),
        ("soak", "--spark", "--schedules", "1"),
    ],
)
def test_the_lab_commands_say_how_to_install_it(tmp_path, args):
    done = _cli(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "needs the lab" in lines[0]
    assert "pip install 'rebalance-sim[lab]'" in lines[0]
