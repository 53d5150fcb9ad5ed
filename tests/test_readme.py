"""The README's tour runs as written: its scenario example loads and its commands succeed."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

from experiments.cli.main import main
from sim import Scenario

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_readme_toml_example_is_the_example_file_and_loads():
    """The TOML block in the README is examples/deploy.toml verbatim and is a valid scenario."""
    (block,) = re.findall(r"```toml\n(.*?)```", README, flags=re.S)
    assert block == (Path(__file__).parent.parent / "examples" / "deploy.toml").read_text()
    scenario = Scenario.from_dict(tomllib.loads(block))
    assert scenario.config.members == 12 and len(scenario.timeline) == 2


def test_readme_opens_with_the_two_commands():
    """The README's first two commands set up the machine and run the main job, then the tests."""
    commands = re.findall(r"<!-- (\w+)-command -->\n```\n(.*?)\n```", README)
    assert [name for name, _ in commands] == ["main", "test"]
    assert all(cmd.startswith("./scripts/setup && ") for _, cmd in commands)


def test_readme_commands_succeed(tmp_path, monkeypatch, capsys):
    """Each `$ .venv/bin/rebalance-sim ...` line of the tour, in order, exits 0."""
    lines = re.findall(r"^\$ \.venv/bin/rebalance-sim (.*?)(?:\s+#.*)?$", README, flags=re.M)
    assert len(lines) >= 4
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(Path(__file__).parent.parent / "examples")
    for line in lines:
        assert main(shlex.split(line)) == 0, line
