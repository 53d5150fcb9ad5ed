"""The `run`, `timeline` and `bench sim` handlers and the built-in scenarios."""

from __future__ import annotations

import argparse
import json

import pytest

from rebalance_sim.cli import bench, timeline
from rebalance_sim.cli import run as run_cmd
from rebalance_sim.lab.bench import sim as bench_sim
from sim import ConfigError
from sim.scenario.builtins import BUILTINS, load_scenario


def cli(argv):
    parser = argparse.ArgumentParser(prog="rebalance-sim")
    sub = parser.add_subparsers(dest="cmd", required=True)
    run_cmd.register(sub)
    timeline.register(sub)
    bench.register(sub)
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_every_builtin_loads_with_a_description(name):
    """Every built-in scenario builds and has a one-line description."""
    try:
        sc = load_scenario(name)
    except ConfigError as e:  # an assignor that is not there yet
        pytest.skip(str(e))
    assert sc.name == name and sc.description and "\n" not in sc.description


def test_overrides_set_parameters_and_fields():
    """key=value overrides set built-in parameters and dotted scenario fields."""
    sc = load_scenario(
        "crash", ["members=4", "assignor=range", "consumer.session_timeout_ms=10000"]
    )
    assert sc.config.members == 4
    assert sc.config.consumer.partition_assignment_strategy == ("range",)
    assert sc.config.consumer.session_timeout_ms == 10000


@pytest.mark.parametrize(
    "args,needle",
    [
        (["nope"], "neither a TOML file nor a built-in"),
        (["crash", "--set", "members"], "expected key=value"),
        (["crash", "--set", "colour=blue"], "unknown parameter of crash"),
        (["crash", "--set", "consumer.session_timeout_ms=5000"], "group.min.session.timeout.ms"),
        (["missing.toml"], "no such scenario file"),
        (["crash", "--max-memory", "12Q"], "--max-memory: '12Q' is not a size"),
        (["crash", "--max-memory", "0M"], "--max-memory: '0M' must be more than 0 bytes"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needle, capsys):
    """Bad scenarios or overrides print one clean line on stderr and exit 2."""
    assert cli(["run", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err


def test_toml_errors_name_the_file(tmp_path, capsys):
    """An invalid TOML scenario names the file and the field."""
    path = tmp_path / "bad.toml"
    path.write_text(
        'members = 2\n[[topics]]\nname = "t"\npartitions = 2\n[consumer]\nheartbeat_interval_ms = 99999\n'
    )
    assert cli(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "heartbeat_interval_ms" in err


def test_run_json_and_timeline(tmp_path, capsys):
    """`run --json --out` prints the metrics as JSON and writes the run; `timeline` draws it."""
    out = tmp_path / "run"
    assert cli(["run", "scale-out", "--set", "assignor=range", "--json", "--out", str(out)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["episodes"] == 1 and len(data["episodes"]) == 2
    assert cli(["timeline", str(out), "--out", str(tmp_path / "t.png")]) == 0
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"


def test_run_table_output(capsys):
    """`run` prints a table of episodes and the summary."""
    assert cli(["run", "crash", "--set", "assignor=range", "--set", "members=3"]) == 0
    out = capsys.readouterr().out
    assert "rebalance s" in out and "time_to_detect_max_s" in out


def test_timeline_missing_dir_is_exit_2(tmp_path, capsys):
    """`timeline` on a directory without a run exits 2 with one line."""
    assert cli(["timeline", str(tmp_path)]) == 2
    assert "no such file" in capsys.readouterr().err


def test_bench_sim_quick_json(capsys):
    """`bench sim --quick --json` reports wall time, messages/s and peak memory per case."""
    assert cli(["bench", "sim", "--quick", "--json", "--kernel", "inline"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(
        {"wall_s", "cpu_s", "messages_per_s", "peak_rss_mib"} <= set(r) for r in rows
    )


def test_bench_sim_repeat_reports_medians_and_their_range(capsys):
    """`bench sim --repeat 2 --only TEXT` runs only the matching case, twice under each kernel:
    each kernel's row holds the median wall and CPU time inside their range, and one run's counts
    (the same under both kernels); the other kernel's row has its time as a ratio of the default's."""
    assert (
        cli(["bench", "sim", "--quick", "--json", "--repeat", "2", "--only", "SCALE-OUT 100 "]) == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert [(r["case"], r["kernel"]) for r in rows] == [
        ("scale-out 100 members", "inline"),
        ("scale-out 100 members", "tasks"),
    ]
    for row in rows:
        assert row["repeat"] == 2 and row["messages"] == rows[0]["messages"] > 0
        for key in ("wall_s", "cpu_s", "sim_wall_s"):
            assert row[f"{key}_min"] <= row[key] <= row[f"{key}_max"]
    assert rows[1]["cpu_s_ratio"] == round(rows[1]["cpu_s"] / rows[0]["cpu_s"], 2)


def test_bench_sim_repeats_that_disagree_fail(monkeypatch, capsys):
    """Two runs of one scenario and seed with different counts are a bug, not noise: exit 1."""
    runs = iter(
        [
            {"messages": 10, "rounds": 1, "rebalance_s": 1.0},
            {"messages": 11, "rounds": 1, "rebalance_s": 1.0},
        ]
    )

    def fake(index, quick, kernel):
        return {
            "case": "x",
            "kernel": kernel,
            "wall_s": 1.0,
            "cpu_s": 1.0,
            "sim_wall_s": 1.0,
            "peak_rss_mib": 1,
            "target_s": None,
            "invariant_violations": 0,
            **next(runs),
        }

    monkeypatch.setattr(bench_sim, "_measure_in_subprocess", fake)
    assert (
        cli(
            [
                "bench",
                "sim",
                "--quick",
                "--repeat",
                "2",
                "--only",
                "scale-out 100 ",
                "--kernel",
                "inline",
            ]
        )
        == 1
    )
    assert "repeats disagree" in capsys.readouterr().err


def test_bench_sim_measures_both_kernels_interleaved(monkeypatch, capsys):
    """Both kernels per case, the default first with its target judged, the other as a ratio of
    it; the repeats alternate which kernel goes first."""
    calls = []

    def fake(index, quick, kernel="inline"):
        calls.append(kernel)
        wall = 1.0 if kernel == "inline" else 1.5
        return {
            "case": "x",
            "kernel": kernel,
            "wall_s": wall,
            "cpu_s": wall / 2,
            "sim_wall_s": wall,
            "peak_rss_mib": 1,
            "target_s": None,
            "invariant_violations": 0,
            "messages": 10,
            "rounds": 1,
            "rebalance_s": 1.0,
        }

    monkeypatch.setattr(bench_sim, "_measure_in_subprocess", fake)
    assert (
        cli(["bench", "sim", "--quick", "--json", "--repeat", "3", "--only", "scale-out 100 "]) == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert calls == ["inline", "tasks", "tasks", "inline", "inline", "tasks"]
    assert [r["kernel"] for r in rows] == ["inline", "tasks"]
    assert (
        rows[1]["wall_s_ratio"] == 1.5
        and rows[1]["cpu_s_ratio"] == 1.5
        and rows[1]["ratio_to"] == "inline"
    )
    assert "wall_s_ratio" not in rows[0]


def test_bench_sim_fails_when_the_kernels_disagree(monkeypatch, capsys):
    def fake(index, quick, kernel="inline"):
        return {
            "case": "x",
            "kernel": kernel,
            "wall_s": 1.0,
            "cpu_s": 1.0,
            "sim_wall_s": 1.0,
            "peak_rss_mib": 1,
            "target_s": None,
            "invariant_violations": 0,
            "messages": 10 if kernel == "inline" else 11,
            "rounds": 1,
            "rebalance_s": 1.0,
        }

    monkeypatch.setattr(bench_sim, "_measure_in_subprocess", fake)
    assert cli(["bench", "sim", "--quick", "--only", "scale-out 100 "]) == 1
    assert "kernels disagree" in capsys.readouterr().err


def test_bench_sim_profile_writes_the_case_statistics(tmp_path, capsys):
    """`bench sim --profile DIR` runs the chosen case under cProfile: DIR/<case>.prof holds its
    statistics (the simulator's kernel loop among them) and DIR/<case>.txt the top functions."""
    import pstats

    out = tmp_path / "prof"
    assert cli(["bench", "sim", "--quick", "--only", "scale-out 100 ", "--profile", str(out)]) == 0
    prof = out / "scale-out-100-members.prof"
    stats = pstats.Stats(str(prof))
    assert any(func[0].endswith("kernel/queue.py") and func[2] == "run" for func in stats.stats)
    assert "queue.py" in (out / "scale-out-100-members.txt").read_text()
    assert str(prof) in capsys.readouterr().out


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--repeat", "0"], "--repeat"),
        (["--only", "no such case"], "--only"),
        (["--kernel", "threads"], "--kernel"),
        (["--profile", __file__], "--profile"),
    ],
)
def test_bench_sim_bad_options_exit_2_with_one_line(args, needle, capsys):
    assert cli(["bench", "sim", "--quick", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err


@pytest.mark.parametrize(
    "args,needle",
    [
        (["scale-out", "--set", "members=-1"], "members"),
        (["scale-out", "--set", "consumer.max_poll_records=0"], "consumer.max_poll_records"),
        (["scale-out", "--set", "consumer.topics.x=1"], "consumer.topics"),
        (["scale-out", "--set", "network.latency=abc"], "network.latency"),
        (
            ["scale-out", "--set", "at_s=1e9", "--set", "max_duration_s=3600"],
            "beyond max_duration_s",
        ),
        (
            [
                "crash",
                "--set",
                "consumer.group_protocol=consumer",
                "--set",
                "group.consumer_session_timeout_ms=120000",
                "--set",
                "group.consumer_max_session_timeout_ms=120000",
                "--set",
                "at_s=100",
                "--set",
                "max_duration_s=150",
            ],
            "max_duration_s: 150 s is too short for this timeline",
        ),
        (
            [
                "crash",
                "--set",
                "consumer.group_protocol=consumer",
                "--set",
                "group.consumer_session_timeout_ms=10000",
            ],
            "group.consumer_session_timeout_ms: 10000 is below group.consumer.min.session.timeout.ms",
        ),
        (["scale-out", "--max-wall", "0"], "--max-wall"),
        (["scale-out", "--max-events", "-5"], "--max-events"),
    ],
)
def test_bad_overrides_never_print_a_traceback(args, needle, capsys):
    """Bad overrides and bounds exit 2 with one line naming the field, never a traceback."""
    assert cli(["run", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err


@pytest.mark.parametrize(
    "content",
    [
        b"\xff\xfe\x00junk",
        b"members = [\n",
        b"members = 2\n",
        b'members = 2\n[[topics]]\nname = "t"\npartitions = 2\n'
        b'[[timeline]]\naction = "crash"\nat_s = 5\nmember = "c009"\n',
    ],
)
def test_bad_files_never_print_a_traceback(tmp_path, content, capsys):
    """Undecodable, malformed, incomplete or inconsistent TOML files exit 2 with one line."""
    path = tmp_path / "bad.toml"
    path.write_bytes(content)
    assert cli(["run", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert str(path) in err and "\n" not in err and "Traceback" not in err


def test_directory_as_scenario_is_exit_2(tmp_path, capsys):
    """A directory given as the scenario exits 2 with one line."""
    (tmp_path / "x.toml").mkdir()
    assert cli(["run", str(tmp_path / "x.toml")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_max_events_stops_with_partial_results(tmp_path, capsys):
    """--max-events stops the run cleanly: files written, marked partial, a PARTIAL line, exit 3."""
    import pyarrow.parquet as pq

    out = tmp_path / "run"
    assert cli(["run", "scale-out", "--max-events", "50", "--out", str(out)]) == 3
    printed = capsys.readouterr().out
    assert "PARTIAL:" in printed and "max_events=50" in printed
    row = pq.read_table(out / "runs.parquet").to_pylist()[0]
    assert row["partial"] is True and row["summary.partial"] is True
    assert (out / "events.parquet").exists() and (out / "intervals.parquet").exists()


def test_max_wall_stops_a_long_run(capsys):
    """--max-wall stops a run that would take longer, with partial results and exit 3."""
    # (300 members once took seconds; the simulator now forms them in about 0.2 s: 2,000 take 2-3 s)
    assert (
        cli(
            [
                "run",
                "scale-out",
                "--set",
                "members=2000",
                "--set",
                "partitions=20000",
                "--max-wall",
                "0.2",
                "--json",
            ]
        )
        == 3
    )
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["summary"]["partial"] and "max_wall_s=0.2" in data["summary"]["partial_reason"]
    assert data["invariant_violations"] == []
    assert "PARTIAL:" in captured.err


def test_max_memory_stops_with_one_line_naming_what_grew(tmp_path, capsys):
    """--max-memory stops a run as partial (exit 3) with one line saying what the run held."""
    out = tmp_path / "run"
    argv = ["run", "rolling-bounce-dynamic", "--max-memory", "1M", "--out", str(out)]
    assert cli(argv) == 3
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("PARTIAL:")]
    assert len(lines) == 1 and "max_memory=1M reached (" in lines[0]
    assert "resident) at simulated t=" in lines[0] and " events and " in lines[0]
    assert (out / "events.parquet").exists()


@pytest.mark.parametrize(
    ("argv", "files", "record"),
    [
        ([], ["events.parquet", "intervals.parquet", "runs.parquet"], "all"),
        (
            ["--record", "episodes"],
            ["events.parquet", "intervals.parquet", "runs.parquet"],
            "episodes",
        ),
        (["--record", "none"], ["runs.parquet"], "none"),
    ],
)
def test_record_chooses_what_out_holds(tmp_path, capsys, argv, files, record):
    """With --out a run keeps every row unless --record says otherwise; the summary is the same."""
    import pyarrow.parquet as pq

    out = tmp_path / "run"
    assert cli(["run", "crash", "--json", "--out", str(out), *argv]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert sorted(p.name for p in out.iterdir()) == files
    row = pq.read_table(out / "runs.parquet").to_pylist()[0]
    assert row["record"] == record
    assert row["summary.rebalance_time_total_s"] == summary["rebalance_time_total_s"]


def test_a_stop_after_the_simulation_cuts_the_result_building():
    """Ctrl-C once the simulation is over asks the phases that build its result to stop (they look
    at the token between them) instead of raising into them; --max-wall sets their deadline."""
    stopper = run_cmd._Stopper(30.0)
    with stopper:
        stopper.token.note_start()
        stopper.token.note_end()
        stopper._on_sigint(2, None)
        assert stopper.token.cut_reason == "interrupted" and stopper.interrupted
        with pytest.raises(Exception, match="interrupted while computing the metrics"):
            stopper.token.check("computing the metrics")
