"""The ci-regression suite: a clean rerun passes, a worsened baseline metric fails by name."""

from __future__ import annotations

import argparse
import csv

import pytest

from rebalance_sim.lab.engine import regression as ci


def _args(tmp_path, *argv):
    p = argparse.ArgumentParser()
    ci.add_arguments(p)
    return p.parse_args(
        [
            "--out",
            str(tmp_path / "ci"),
            "--baseline",
            str(tmp_path / "baseline.csv"),
            "--quiet",
            *argv,
        ]
    )


@pytest.fixture(scope="module")
def suite_rows():
    return ci.run_suite(progress=False)


def test_compare_flags_only_moves_beyond_tolerance():
    """A 1% move passes a 2% tolerance, a 10% move fails, a missing run is reported."""
    base = [{"scenario": "s", "assignor": "a", "seed": 1, "rebalance_time_max_s": 10.0}]
    assert {
        f.status for f in ci.compare(base, [{**base[0], "rebalance_time_max_s": 10.1}], 0.02, 1e-3)
    } == {"ok"}
    moved = [
        f
        for f in ci.compare(base, [{**base[0], "rebalance_time_max_s": 11.0}], 0.02, 1e-3)
        if f.status != "ok"
    ]
    assert [(f.metric, f.baseline, f.current) for f in moved] == [
        ("rebalance_time_max_s", 10.0, 11.0)
    ]
    assert "baseline 10, now 11 (+10.0%)" in moved[0].describe()
    assert {f.status for f in ci.compare(base, [], 0.02, 1e-3)} == {"missing"}


def test_suite_is_deterministic(suite_rows):
    """Running the suite twice gives identical metrics (it is a pure function of the code)."""
    assert ci.run_suite(progress=False) == suite_rows


def test_clean_rerun_passes_and_worsened_baseline_fails(tmp_path, capsys, suite_rows, monkeypatch):
    """Against its own baseline the suite passes; after one baseline value is edited it exits 1,
    naming the metric, the run and both values, and still writes its plots."""
    monkeypatch.setattr(
        ci, "run_suite", lambda progress=True, kernel=None, kafka_version=None: suite_rows
    )
    assert ci.run(_args(tmp_path, "--update-baseline")) == 0
    assert ci.run(_args(tmp_path)) == 0
    assert (tmp_path / "ci" / "rebalance_time_max_s.png").exists()

    with open(tmp_path / "baseline.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    target = next(r for r in rows if r["scenario"] == "crash" and r["assignor"] == "range")
    original = float(target["rebalance_time_max_s"])
    target["rebalance_time_max_s"] = repr(original / 2)
    with open(tmp_path / "baseline.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    capsys.readouterr()
    assert ci.run(_args(tmp_path)) == 1
    err = capsys.readouterr().err
    assert f"REGRESSION rebalance_time_max_s of crash / range / seed {target['seed']}" in err
    assert f"baseline {original / 2:g}, now {original:g}" in err


def test_missing_baseline_is_a_clear_error(tmp_path, capsys, suite_rows, monkeypatch):
    """Without a baseline the command says how to create one and exits 2."""
    monkeypatch.setattr(
        ci, "run_suite", lambda progress=True, kernel=None, kafka_version=None: suite_rows
    )
    assert ci.run(_args(tmp_path)) == 2
    assert "--update-baseline" in capsys.readouterr().err
