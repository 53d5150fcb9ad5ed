"""The command line at its edges: closed pipes, Ctrl-C, bad input, unwritable outputs, file modes
(issue 10). Each test runs the real ``rebalance-sim`` entry point as a user would."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments.atomic import atomic_directory, atomic_write_bytes
from experiments.cli import main

CLI = [sys.executable, "-m", "experiments"]
GROUP = {"assignor": "range", "topics": {"orders": 6},
         "members": {"c1": {"topics": ["orders"], "owned": ["orders-0"]}, "c2": {"topics": ["orders"]}}}


def _pipe_to_closed_reader(argv: list[str], stdin: str | None = None) -> tuple[int, str]:
    """Run the CLI with stdout a pipe whose reader is already gone; return (rc, stderr)."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run(CLI + argv, stdout=w, stderr=subprocess.PIPE, text=True, input=stdin,
                           timeout=120)
    finally:
        os.close(w)
    return p.returncode, p.stderr


@pytest.mark.parametrize("argv", [["list"], ["run", "scale-in", "--set", "members=3"],
                                  ["run", "scale-in", "--set", "members=3", "--json"],
                                  ["assign", "-"], ["assign", "-", "--json"]])
def test_closed_pipe_exits_quietly(argv):
    """`rebalance-sim ... | head -1` style: no traceback, no complaint, the SIGPIPE status."""
    rc, err = _pipe_to_closed_reader(argv, stdin=json.dumps(GROUP))
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err
    assert rc == 141, err


def test_ctrl_c_during_run_keeps_the_partial_result(tmp_path):
    """Ctrl-C stops the simulation where it is, writes what it has, says so in one line, rc 130."""
    out = tmp_path / "run"
    p = subprocess.Popen(CLI + ["run", "rolling-bounce-dynamic", "--set", "members=400", "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # --out is created once the scenario is loaded, just before the simulation starts
    deadline = time.monotonic() + 120
    while not out.exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # well into the simulation, which needs far longer to finish
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "interrupted; kept the partial result in" in lines[0], stderr
    assert re.search(r"^partial_reason +interrupted at simulated t=", stdout, re.M)
    assert {f.name for f in out.iterdir()} == {"events.parquet", "intervals.parquet", "runs.parquet"}


def test_negative_seed_is_bad_input(capsys):
    """`run crash --seed -1`: one line naming --seed, rc 2."""
    assert main(["run", "crash", "--seed", "-1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "rebalance-sim run: --seed: -1 must be >= 0"


def test_run_checks_its_output_before_simulating(tmp_path, capsys):
    """An --out that cannot be a directory fails at once, before any simulation."""
    f = tmp_path / "a-file"
    f.write_text("x")
    t0 = time.monotonic()
    assert main(["run", "rolling-bounce-dynamic", "--set", "members=2000", "--out", str(f / "sub")]) == 2
    assert time.monotonic() - t0 < 5.0  # the simulation would take far longer
    assert "--out" in capsys.readouterr().err
    assert main(["run", "crash", "--out", str(f)]) == 2
    assert "exists and is not a directory" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["/proc/nope", "file"])
def test_sweep_checks_its_output_first(tmp_path, capsys, where):
    """`sweep --out /proc/nope` or an existing file: one line, rc 2, no traceback."""
    if where == "file":
        where = str(tmp_path / "f")
        Path(where).write_text("x")
    elif not Path("/proc").is_dir():
        pytest.skip("no /proc")
    grid = tmp_path / "g.toml"
    grid.write_text('scenarios = ["crash"]\nseeds = 1\n')
    assert main(["sweep", str(grid), "--out", where]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"rebalance-sim sweep: --out {where}")


def _assign(doc, capsys) -> tuple[int, str]:
    import io

    sys_stdin = sys.stdin
    sys.stdin = io.StringIO(json.dumps(doc))
    try:
        rc = main(["assign", "-"])
    finally:
        sys.stdin = sys_stdin
    return rc, capsys.readouterr().err.strip()


@pytest.mark.parametrize("change, field", [
    (lambda d: d["topics"].update(orders=100_000_000), "topics.orders: 100,000,000 partitions"),
    (lambda d: d["topics"].update({f"t{i}": 1_000_000 for i in range(3)}), "topics: 3,000,006 partitions"),
    (lambda d: d["members"]["c2"].update(topics=["orders", "ordres"]), "members.c2.topics[1]: unknown topic 'ordres'"),
    (lambda d: d["members"]["c1"].update(owned=["orders-0", "orders-6"]), "members.c1.owned[1]: orders-6 is out of range"),
    (lambda d: d["members"]["c1"].update(owned=["gone-0"]), "members.c1.owned[0]: gone-0 is of unknown topic"),
])
def test_assign_rejects_bad_groups_naming_the_field(capsys, change, field):
    """Oversized groups, unknown topics and out-of-range owned partitions: one line, rc 2."""
    doc = json.loads(json.dumps(GROUP))
    change(doc)
    rc, err = _assign(doc, capsys)
    assert rc == 2 and err.startswith(f"rebalance-sim assign: {field}"), err
    assert "\n" not in err


def test_assign_accepts_a_good_group(capsys):
    """The bounds do not reject what is fine."""
    import io

    sys_stdin = sys.stdin
    sys.stdin = io.StringIO(json.dumps(GROUP))
    try:
        assert main(["assign", "-"]) == 0
    finally:
        sys.stdin = sys_stdin


@pytest.mark.parametrize("value", ["0", "-5"])
def test_timeline_max_partitions_must_be_positive(tmp_path, capsys, value):
    """`timeline --max-partitions -5` or 0 is bad input, not a strange plot."""
    from experiments.scenarios import load_scenario
    from sim import run_scenario

    run_scenario(load_scenario("scale-out", ["members=2", "partitions=4"]), out_dir=tmp_path)
    assert main(["timeline", str(tmp_path), "--max-partitions", value]) == 2
    assert "--max-partitions" in capsys.readouterr().err
    assert not (tmp_path / "timeline.png").exists()


def test_atomic_writes_keep_the_umask_mode(tmp_path):
    """Files and directories written atomically get the mode the umask allows (not mkstemp's 0600)."""
    old = os.umask(0o022)
    try:
        atomic_write_bytes(tmp_path / "report.html", b"x")
        with atomic_directory(tmp_path / "run") as d:
            (d / "f").write_text("y")
        import pyarrow as pa

        from sim.recorder import write_parquet_atomic

        write_parquet_atomic(pa.table({"a": [1]}), str(tmp_path / "t.parquet"))
        os.umask(0o077)
        atomic_write_bytes(tmp_path / "private.html", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "report.html").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "t.parquet").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "run").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "private.html").stat().st_mode) == 0o600


def test_version_names_the_model_digest(capsys):
    """`--version` prints the package version and the model digest."""
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("rebalance-sim ") and "model digest " in out


def test_list_shows_parameters_and_json(capsys):
    """`list` shows each built-in's parameters with defaults; `list --json` is the same as data."""
    from experiments.scenarios import BUILTINS

    assert main(["list"]) == 0
    text = capsys.readouterr().out
    assert "members=6" in text and "session_timeout_ms" in text
    assert main(["list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in data["scenarios"]] == list(BUILTINS)
    assert data["scenarios"][0]["parameters"]["members"] == BUILTINS[data["scenarios"][0]["name"]].params["members"]
    assert {e["name"] for e in data["experiments"]} >= {"eager-vs-cooperative", "ci-regression"}


def test_show_prints_toml_that_runs_the_same_simulation(tmp_path, capsys):
    """`show crash --set ...` is a TOML file whose run has the same events as the built-in's."""
    from experiments.scenarios import load_scenario
    from sim import run_scenario

    sets = ["members=3", "partitions=6", "consumer.session_timeout_ms=10000"]
    assert main(["show", "crash", *[a for s in sets for a in ("--set", s)]]) == 0
    path = tmp_path / "crash.toml"
    path.write_text(capsys.readouterr().out)
    a = run_scenario(load_scenario("crash", sets), seed=1)
    b = run_scenario(load_scenario(str(path)), seed=1)
    assert a.events.drop(["run_id"]).equals(b.events.drop(["run_id"]))
    assert main(["show", "crash", "--set", "members=x"]) == 2


def test_assignor_key_works_for_scenario_files(tmp_path):
    """`run deploy.toml --set assignor=range` and a sweep's assignors = [...] over a TOML file."""
    from experiments.scenarios import load_scenario
    from experiments.sweep import expand, grid_from_dict

    deploy = Path(__file__).parents[2] / "examples" / "deploy.toml"
    sc = load_scenario(str(deploy), ["assignor=range,cooperative-sticky"])
    assert sc.config.consumer.partition_assignment_strategy == ("range", "cooperative-sticky")
    grid = grid_from_dict({"scenarios": [str(deploy)], "assignors": ["range", "sticky"], "seeds": 1})
    specs = expand(grid)
    assert sorted(dict(s.point)["assignor"] for s in specs) == ["range", "sticky"]


@pytest.mark.parametrize("name", ["range", "cooperative-sticky"])
def test_bench_assignors_counts_moves_against_the_previous_assignment(name):
    """After a member leaves, `moved` includes the leaver's partitions (range used to show 0)."""
    from assignors import Assignment, TopicPartition
    from experiments.bench_assignors import Case, bench_case, moved_since

    fresh, left = bench_case(name, Case("t", 10, 10, 10), repeat=1, measure_memory=False)
    assert fresh["moved"] == 0
    assert left["moved"] >= 10  # the leaver owned one partition of each of the 10 topics
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    assert moved_since({"x": Assignment([a, b])}, {"x": Assignment([a]), "y": Assignment([b])}) == 1
    assert moved_since({"x": Assignment([a, b])}, {"x": Assignment([a])}) == 1  # withheld


def test_bench_assignors_json(capsys):
    """`bench assignors --json` prints rows as JSON."""
    assert main(["bench", "assignors", "--quick", "--assignor", "range", "--repeat", "1", "--no-memory",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["assignor"] for r in rows} == {"range"} and {"moved", "wall_s"} <= set(rows[0])


def test_progress_to_a_file_is_plain_lines(monkeypatch):
    """When stderr is not a terminal, progress is whole lines (no carriage returns), now and then."""
    import io
    import itertools

    import sim.run as sim_run
    from experiments.scenarios import load_scenario

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    clock = itertools.count(0.0, 20.0)  # every reading of the wall clock is 20 s later
    monkeypatch.setattr(sim_run.time, "monotonic", lambda: next(clock))
    sim_run.run_scenario(load_scenario("scale-out", ["members=2", "partitions=4"]), progress=True)
    text = err.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert lines and all(ln.startswith("  simulated ") and ln == ln.rstrip() for ln in lines)


def test_the_report_names_the_command_that_wrote_it_to_the_reference_results():
    import argparse

    from experiments.experiment_cmd import _command_line

    ns = argparse.Namespace(name="eager-vs-cooperative", scale="smoke", master=None, update_reference=True)
    assert _command_line(ns) == "rebalance-sim experiment eager-vs-cooperative --scale smoke --update-reference"
    ns.update_reference = False
    assert "--update-reference" not in _command_line(ns)
