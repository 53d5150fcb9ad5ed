"""The README's tour runs as written: its scenario example loads and its commands succeed."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

from rebalance_sim.cli.main import main
from sim import Scenario

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_readme_toml_example_loads():
    """The README's scenario is a valid scenario file, as it says (12 members, two actions, the
    crash aimed at the leader)."""
    (block,) = re.findall(r"```toml\n(.*?)```", README, flags=re.S)
    scenario = Scenario.from_dict(tomllib.loads(block))
    assert scenario.config.members == 12 and len(scenario.timeline) == 2
    assert scenario.timeline[1].member == "leader"


def test_the_example_file_the_readme_points_to_loads():
    """examples/deploy.toml, which the README names as the file with every field, is a valid
    scenario and sets every table the README's example leaves out."""
    path = Path(__file__).parent.parent / "examples" / "deploy.toml"
    assert "examples/deploy.toml" in README
    scenario = Scenario.from_toml(str(path))
    assert scenario.name == "deploy-with-crash" and scenario.config.members == 12
    data = tomllib.loads(path.read_text())
    assert {"consumer", "group", "network", "assignor_cost", "member_overrides"} <= set(data)


def test_readme_opens_with_the_two_commands():
    """The README's first two commands set up the machine and run the main job, then the tests."""
    commands = re.findall(r"<!-- (\w+)-command -->\n```\n(.*?)\n```", README)
    assert [name for name, _ in commands] == ["main", "test"]
    assert all(cmd.startswith("./scripts/setup && ") for _, cmd in commands)


def test_readme_commands_succeed(tmp_path, monkeypatch, capsys):
    """Each `$ .venv/bin/rebalance-sim ...` line of the tour, in order, exits 0 (``> FILE``
    writes its output to FILE, as the shell would)."""
    lines = re.findall(r"^\$ \.venv/bin/rebalance-sim (.*?)(?:\s+#.*)?$", README, flags=re.M)
    assert len(lines) >= 4
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(Path(__file__).parent.parent / "examples")
    for line in lines:
        args = shlex.split(line)
        if ">" in args:
            at = args.index(">")
            capsys.readouterr()
            assert main(args[:at]) == 0, line
            (tmp_path / args[at + 1]).write_text(capsys.readouterr().out)
        else:
            assert main(args) == 0, line


# The README is a user's guide: what a user needs first, then links. Its length at the time the
# docs were split by audience; longer material goes to docs/ (tutorial, reference, design,
# contributing), which it links.
README_MAX_LINES = 263
DOCS_BY_AUDIENCE = ("tutorial.md", "reference.md", "design.md", "contributing.md")


def test_readme_stays_a_guide_that_links_the_docs():
    assert len(README.splitlines()) <= README_MAX_LINES, "README grew: move the detail to docs/"
    docs = Path(__file__).parent.parent / "docs"
    for name in DOCS_BY_AUDIENCE:
        assert f"](docs/{name})" in README, name
        assert (docs / name).is_file(), name
    # and every docs/ page the README links exists
    for target in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (docs.parent / target).is_file(), target
