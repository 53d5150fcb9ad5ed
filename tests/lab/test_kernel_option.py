"""`--kernel tasks|inline` on `run`, `soak`, `sweep` and `experiment`: it reaches the simulation
(on Spark's executors too), changes no result and no run id, and a bad value is one line naming
the option, exit 2."""

from __future__ import annotations

import json
import textwrap

import pyarrow.parquet as pq
import pytest

from rebalance_sim.cli.main import main
from rebalance_sim.lab.engine.grid import RunSpec, expand, grid_from_dict, with_kernel
from rebalance_sim.lab.engine.sweep import run_sweep
from rebalance_sim.lab.engine.task import run_one


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "scale-out"],
        ["soak", "--schedules", "1"],
        ["sweep", "GRID", "--out", "OUT"],
        ["experiment", "eager-vs-cooperative", "--out", "OUT/report", "--work", "OUT/work"],
    ],
)
def test_an_unknown_kernel_is_one_line_exit_2(argv, tmp_path, capsys):
    grid = tmp_path / "grid.toml"
    grid.write_text("scenarios = ['crash']\n")
    argv = [str(grid) if a == "GRID" else a.replace("OUT", str(tmp_path / "o")) for a in argv]
    assert main([*argv, "--kernel", "threads"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--kernel" in err and "'threads'" in err and "inline, tasks" in err
    assert "\n" not in err and "Traceback" not in err


def test_run_prints_the_same_run_with_either_kernel(capsys):
    out = {}
    for kernel in ("inline", "tasks"):
        assert main(["run", "crash", "--set", "members=4", "--json", "--kernel", kernel]) == 0
        got = json.loads(capsys.readouterr().out)
        for wall in ("wall_s", "messages_per_wall_s"):
            got["summary"].pop(wall)
        out[kernel] = got
    assert out["inline"] == out["tasks"]
    assert out["tasks"]["summary"]["messages"] > 0 and out["tasks"]["episodes"]


def test_soak_finds_the_same_with_either_kernel(capsys, tmp_path):
    for kernel in ("inline", "tasks"):
        assert (
            main(
                [
                    "soak",
                    "--schedules",
                    "4",
                    "--seed",
                    "2",
                    "--quiet",
                    "--kernel",
                    kernel,
                    "--out",
                    str(tmp_path),
                ]
            )
            == 0
        )
        assert capsys.readouterr().out.startswith("4 schedules, 0 violations")


def test_a_run_spec_carries_its_kernel_but_not_as_identity():
    spec = RunSpec("crash", ("members=3",), 0, (("scenario", "crash"),), run_id="x")
    tasks = with_kernel([spec], "tasks")[0]
    assert tasks.kernel == "tasks" and tasks == spec and hash(tasks) == hash(spec)
    assert RunSpec.from_json(tasks.to_json(), "x").kernel == "tasks"
    assert "kernel" not in json.loads(spec.to_json())  # the default kernel's specs are unchanged
    assert with_kernel([spec], None) == [spec]
    status, _detail, tables = run_one(tasks)
    assert status == "ok" and tables["runs"].column("kernel").to_pylist() == ["tasks"]


GRID = textwrap.dedent("""
    scenarios = ["crash"]
    seeds = 2
    [set]
    members = 3
    partitions = 6
    at_s = 20.0
    "network.latency.kind" = "lognormal"
""")


def test_a_sweep_runs_its_kernel_on_the_executors_and_resumes_with_the_other(spark, tmp_path):
    """The kernel travels with each run to Spark's executors (the runs table there records it);
    the rows are the simulator's own, and a rerun with the other kernel finds every run complete."""
    import tomllib

    specs = expand(grid_from_dict(tomllib.loads(GRID)))
    out = tmp_path / "out"
    status = run_sweep(with_kernel(specs, "tasks"), out)
    assert set(status["status"]) == {"ok"}
    runs = pq.read_table(out / "runs").to_pylist()
    assert sorted((r["run_id"], r["kernel"]) for r in runs) == sorted(
        (s.run_id, "tasks") for s in specs
    )
    events = pq.read_table(out / "events").to_pylist()
    for spec in specs:
        _status, _detail, tables = run_one(spec)  # the default kernel, here on the driver
        stored = sorted(
            (r["t"], r["kind"], r["member"] or "", r["detail"] or "")
            for r in events
            if r["run_id"] == spec.run_id
        )
        mine = sorted(
            (r["t"], r["kind"], r["member"] or "", r["detail"] or "")
            for r in tables["events"].to_pylist()
        )
        assert stored == mine and stored
    assert set(run_sweep(specs, out)["status"]) == {"skipped"}
