"""Sweeps: grid files, fan-out on Spark, atomic run directories, and resuming a killed sweep."""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rebalance_sim.cli.sweep import cmd_sweep
from rebalance_sim.lab import provenance
from rebalance_sim.lab.engine.aggregate import aggregate
from rebalance_sim.lab.engine.grid import GridError, expand, load_grid

# 2 assignors x 2 group sizes x 2 seeds = 8 small runs (a crash 30 s in, 8 partitions).
from rebalance_sim.lab.engine.sweep import run_sweep

GRID = textwrap.dedent("""
    name = "tiny"
    scenarios = ["crash"]
    assignors = ["range", "cooperative-sticky"]
    seeds = 2

    [set]
    partitions = 8
    at_s = 30.0
    "network.latency.kind" = "lognormal"

    [vary]
    members = [3, 4]
""")
# Columns that measure the machine, not the simulation.
WALL_COLUMNS = {"wall_s"}


def _grid(tmp_path: Path, text: str = GRID, name: str = "grid.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _tables(out: Path) -> dict:
    tables = {}
    for name in ("runs", "points", "window_quantiles", "windows"):
        t = pq.read_table(out / "aggregate" / name)
        tables[name] = t.drop_columns([c for c in WALL_COLUMNS if c in t.column_names])
    return tables


def _commits(out: Path) -> list[dict]:
    """The commit rows a sweep wrote (read without Spark)."""
    if not (out / "commits").is_dir():
        return []
    return pq.read_table(out / "commits").to_pylist()


@pytest.fixture(scope="module")
def reference(spark, tmp_path_factory):
    """The tiny grid swept once, start to finish, and aggregated."""
    tmp = tmp_path_factory.mktemp("ref")
    specs = expand(load_grid(_grid(tmp)))
    out = tmp / "out"
    status = run_sweep(specs, out, batch_runs=4)
    aggregate(spark, out)
    return specs, out, status


def test_grid_expands_to_every_combination(tmp_path):
    """A grid expands to scenarios x assignors x [vary] x seeds runs, each with a distinct run id."""
    specs = expand(load_grid(_grid(tmp_path)))
    assert len(specs) == 8
    assert len({s.run_id for s in specs}) == 8
    points = {tuple(sorted(dict(s.point).items())) for s in specs}
    assert len(points) == 4
    assert {s.seed for s in specs} == {0, 1}


def test_run_ids_are_stable(tmp_path):
    """The same grid gives the same run ids (a hash of the configuration and seed) every time."""
    a = [s.run_id for s in expand(load_grid(_grid(tmp_path)))]
    b = [s.run_id for s in expand(load_grid(_grid(tmp_path, name="again.toml")))]
    assert a == b


def test_sweep_commits_every_run_with_its_model(reference):
    """Every run of a sweep ends committed once, with the model that produced it, and its rows
    are in the tables Spark wrote (the runs table records the model too)."""
    specs, out, status = reference
    assert set(status["status"]) == {"ok"}
    commits = _commits(out)
    assert sorted(c["run_id"] for c in commits) == sorted(s.run_id for s in specs)
    assert {c["model"] for c in commits} == {provenance.model_id()}
    assert len({c["batch"] for c in commits}) >= 2, "the sweep ran in several batches"
    runs = pq.read_table(out / "runs").to_pylist()
    assert sorted(r["run_id"] for r in runs) == sorted(s.run_id for s in specs)
    assert {r["model_digest"] for r in runs} == {provenance.model_digest()}
    points = pq.read_table(out / "aggregate" / "points")
    assert points.num_rows == 4
    assert set(points.column("seeds").to_pylist()) == {2}


def test_aggregate_matches_simulator_summaries(reference):
    """Unassigned partition-seconds and max window recomputed by Spark from the intervals equal the
    simulator's own per-run summary, for every run of a real sweep."""
    _, out, _ = reference
    runs = pq.read_table(out / "aggregate" / "runs").to_pylist()
    assert len(runs) == 8
    assert sum(r["unassigned_partition_s"] for r in runs) > 0, "the grid must produce windows"
    for r in runs:
        assert r["intervals_match"], r
        assert r["unassigned_partition_s_from_intervals"] == pytest.approx(
            r["unassigned_partition_s"]
        )
        assert r["unassigned_max_s_from_intervals"] == pytest.approx(r["unassigned_max_s"])


def test_rerun_skips_complete_runs(reference):
    """Rerunning a finished sweep runs nothing again: every run is reported as skipped."""
    specs, out, _ = reference
    status = run_sweep(specs, out)
    assert set(status["status"]) == {"skipped"}
    assert len(status) == len(specs)


def test_commit_rows_are_read_again_only_when_a_batch_changes(
    spark, reference, tmp_path, monkeypatch
):
    """An experiment reads the commit rows once per table; they are read from disk again only when
    a local OUT's commits directory changed (a batch removed, a batch added)."""
    from rebalance_sim.lab.engine import store

    _specs, ref_out, _ = reference
    out = tmp_path / "out"
    shutil.copytree(ref_out, out)
    first = store.commits(spark, out)
    batches = sorted(set(first["batch"]))
    assert len(batches) >= 2

    reads = []
    real = store._commits_signature

    def counting(o):
        reads.append(o)
        return real(o)

    class NoSpark:  # a second read of an unchanged directory must not ask Spark
        @property
        def read(self):
            raise AssertionError("commit rows read again from an unchanged directory")

    monkeypatch.setattr(store, "_commits_signature", counting)
    again = store.commits(NoSpark(), out)
    assert again.equals(first) and reads
    assert store.complete_runs(NoSpark(), out, provenance.model_id()) == store.complete_runs(
        spark, out, provenance.model_id()
    )

    kept = tmp_path / "kept"
    shutil.move(out / "commits" / f"batch={batches[0]}", kept)
    fewer = store.commits(spark, out)
    assert set(fewer["batch"]) == set(batches[1:])
    shutil.move(kept, out / "commits" / f"batch={batches[0]}")
    assert (
        store.commits(spark, out)
        .sort_values(["batch", "run_id"])
        .reset_index(drop=True)
        .equals(first.sort_values(["batch", "run_id"]).reset_index(drop=True))
    )


def test_a_local_outputs_commit_rows_are_read_without_spark(spark, reference, tmp_path):
    """No ``OUT/commits``, or batch directories holding no data file (only ``_SUCCESS``, a
    leftover ``_temporary/``, hidden files): no commit rows. A local output's commit rows are
    read without Spark (an interrupted sweep counts them after its JVM may be gone), and they
    are the rows Spark reads."""
    from rebalance_sim.lab.engine import store

    class NoSpark:
        @property
        def read(self):
            raise AssertionError("Spark asked for the commit rows of a local output")

    out = tmp_path / "fresh"
    empty = store.commits(NoSpark(), out)
    assert empty.empty and list(empty.columns) == [
        c.split()[0] for c in store.COMMIT_SCHEMA.split(", ")
    ]
    leftovers = out / "commits" / "batch=b1"
    (leftovers / "_temporary" / "attempt-0").mkdir(parents=True)
    (leftovers / "_SUCCESS").touch()
    (leftovers / ".part-0.parquet.crc").touch()
    (out / "commits" / ".batch=b2.tmp").mkdir()
    assert store.commits(NoSpark(), out).empty
    assert store.complete_runs(NoSpark(), out, provenance.model_id()) == {}

    _, ref_out, _ = reference
    shutil.copytree(ref_out / "commits", out / "commits", dirs_exist_ok=True)
    rows = store.commits(NoSpark(), out)
    by_spark = (
        spark.read.schema(store.COMMIT_SCHEMA).parquet(str(out / "commits")).toArrow().to_pandas()
    )
    key = ["batch", "run_id"]
    assert len(rows) == len(_commits(out)) > 0
    assert (
        rows.sort_values(key)
        .reset_index(drop=True)
        .equals(by_spark[rows.columns].sort_values(key).reset_index(drop=True))
    )


def test_resume_after_partial_loss_gives_the_same_tables(spark, reference, tmp_path):
    """A batch whose commit is missing (killed between its tables and its commit) and leftovers of
    an uncommitted write are ignored: a rerun recomputes exactly that batch's runs and the final
    tables equal the uninterrupted sweep's, with no run counted twice."""
    specs, ref_out, _ = reference
    out = tmp_path / "out"
    shutil.copytree(ref_out, out)
    shutil.rmtree(out / "aggregate")
    commits = _commits(out)
    lost_batch = sorted({c["batch"] for c in commits})[0]
    lost = {c["run_id"] for c in commits if c["batch"] == lost_batch}
    shutil.rmtree(out / "commits" / f"batch={lost_batch}")
    junk = out / "events" / "batch=b00000000T000000000000-deadbeef" / "_temporary" / "0"
    junk.mkdir(parents=True)
    (junk / "part-00000.parquet").write_bytes(b"PAR1 truncated")
    status = run_sweep(specs, out)
    ran = set(status.loc[status["status"] == "ok", "run_id"])
    assert ran == lost
    aggregate(spark, out)
    ref, got = _tables(ref_out), _tables(out)
    for name in ref:
        assert got[name].equals(ref[name]), name


def test_model_change_forces_recomputation(spark, reference, tmp_path, monkeypatch):
    """After the simulator's or assignors' sources change (a new model digest), a rerun into the
    same output recomputes every run instead of reusing them, and the tables hold each run once."""
    specs, ref_out, _ = reference
    out = tmp_path / "out"
    shutil.copytree(ref_out, out)
    before = provenance.model_id()
    monkeypatch.setattr(provenance, "model_digest", lambda: "0123456789ab")
    assert provenance.model_id() != before
    status = run_sweep(specs, out)
    assert set(status["status"]) == {"ok"} and len(status) == len(specs)
    assert {c["model"] for c in _commits(out)} == {before, provenance.model_id()}
    assert {r["model_digest"] for r in pq.read_table(out / "runs").to_pylist()} == {
        before.partition("+")[2],
        "0123456789ab",
    }
    aggregate(spark, out)
    ref, got = _tables(ref_out), _tables(out)
    for name in ref:
        assert got[name].equals(ref[name]), name
    assert run_sweep(specs, out)["status"].eq("skipped").all()


KILLED_SWEEP = """
import sys, time
from rebalance_sim.lab.engine import lock
from rebalance_sim.lab.engine.grid import expand, load_grid
from rebalance_sim.lab.engine.sweep import run_sweep

grid, out, log = sys.argv[1:4]

def runner(spec):
    import time as _time

    from rebalance_sim.lab.engine.task import run_one

    result = run_one(spec)
    _time.sleep(1.0)  # every batch stays in flight a while: the kill finds some running
    with open(log, "a") as f:
        f.write(f"{spec.run_id} {_time.time()}\\n")
    return result

lock.hold(out)
run_sweep(expand(load_grid(grid)), out, runner=runner, batch_runs=2)
"""
GRACE_S = 2.5  # from a batch's last run to its commit, at most (a loaded 2-core machine)


def test_a_sweep_killed_midway_keeps_every_batch_it_finished(spark, reference, tmp_path):
    """A sweep killed with SIGKILL (its process group and every process it started) while
    batches run keeps each batch whose runs had finished (committed as it went, whole or not at
    all) and loses at most the batches in flight; a second sweep into the same output meanwhile
    is refused naming the first; a rerun yields exactly the uninterrupted tables."""
    from rebalance_sim.lab.engine.sweep import IN_FLIGHT

    specs, ref_out, _ = reference
    grid = _grid(tmp_path)
    out, log = tmp_path / "out", tmp_path / "finished.log"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_SWEEP, str(grid), str(out), str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while (
            time.monotonic() < deadline
            and proc.poll() is None
            and not ((out / ".lock").exists() and (out / ".lock").stat().st_size)
        ):
            time.sleep(0.02)
        second = subprocess.run(
            [sys.executable, "-m", "rebalance_sim", "sweep", str(grid), "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        while time.monotonic() < deadline and proc.poll() is None:
            if list((out / "commits").glob("batch=*/part-*")):
                break
            time.sleep(0.02)
        time.sleep(0.5)  # midway: more batches run
        killed_at = time.time()
    finally:
        _kill_tree(proc)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read()[-2000:]
    assert second.returncode == 2 and second.stderr.count("\n") == 1, second.stderr
    assert f"process {proc.pid} " in second.stderr and "is being written by" in second.stderr

    kept = {c["run_id"] for c in _commits(out)}
    ended = {r: float(t) for r, t in (ln.split() for ln in log.read_text().splitlines())}
    order = sorted(specs, key=lambda s: (-s.cost, s.run_id))
    batches = [{s.run_id for s in order[i : i + 2]} for i in range(0, len(order), 2)]
    for b in batches:  # committed whole or not at all, and as soon as its runs were done
        assert b <= kept or not b & kept, (b, kept)
        if b <= set(ended) and max(ended[r] for r in b) < killed_at - GRACE_S:
            assert b <= kept, (b, kept, killed_at)
    lost = set(ended) - kept
    assert 2 <= len(kept) < len(specs) and len(lost) <= 2 * IN_FLIGHT, (kept, lost)
    print(
        f"\nkilled sweep: {len(kept)} runs kept, {len(lost)} finished runs lost, "
        f"{len(specs) - len(kept) - len(lost)} not run yet"
    )

    status = run_sweep(specs, out)
    assert set(status.loc[status["status"] == "skipped", "run_id"]) == kept
    aggregate(spark, out)
    ref, got = _tables(ref_out), _tables(out)
    for name in ref:
        assert got[name].equals(ref[name]), name
    for name in ("runs", "events"):  # the raw tables hold every run once
        rows = pq.read_table(out / name).to_pandas()
        chosen = rows[rows["batch"].isin({c["batch"] for c in _commits(out)})]
        per_run = chosen.groupby("run_id")["batch"].nunique()
        assert (per_run == 1).all() and set(per_run.index) == {s.run_id for s in specs}, name


def _damage(path: Path, how: str) -> None:
    if how == "truncated":
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size // 2)
    elif how == "random bytes":
        path.write_bytes(os.urandom(path.stat().st_size))
    else:
        path.unlink()


@pytest.mark.parametrize("hows", [("truncated", "random bytes"), ("deleted", "deleted")])
def test_damaged_batches_are_said_and_recomputed(spark, reference, tmp_path, hows):
    """A committed batch whose files were truncated, overwritten or deleted is found before its
    runs are reused: one line says so, exactly its runs are recomputed, and the tables equal the
    uninterrupted sweep's (no run silently dropped)."""
    import io

    specs, ref_out, _ = reference
    out = tmp_path / "out"
    shutil.copytree(ref_out, out)
    shutil.rmtree(out / "aggregate")
    commits = _commits(out)
    first, second = sorted({c["batch"] for c in commits})[:2]
    _damage(next((out / "runs" / f"batch={first}").glob("part-*")), hows[0])
    _damage(next((out / "events" / f"batch={second}").glob("part-*")), hows[1])
    stream = io.StringIO()
    status = run_sweep(specs, out, stream=stream)
    lines = [ln for ln in stream.getvalue().splitlines() if "damaged" in ln]
    assert len(lines) == 1 and "2 committed batch(es) damaged (runs/batch=" in lines[0], (
        stream.getvalue()
    )
    expected = {c["run_id"] for c in commits if c["batch"] in (first, second)}
    assert set(status.loc[status["status"] == "ok", "run_id"]) == expected
    assert f"their {len(expected)} run(s) are recomputed" in lines[0]
    aggregate(spark, out)
    ref, got = _tables(ref_out), _tables(out)
    for name in ref:
        assert got[name].equals(ref[name]), name
    again = io.StringIO()
    assert run_sweep(specs, out, stream=again)["status"].eq("skipped").all()
    assert "damaged" not in again.getvalue()


def test_a_file_beside_a_batchs_files_makes_it_damaged(spark, reference, tmp_path):
    """A data file the batch did not write (it would be read with it) counts as damage."""
    from rebalance_sim.lab.engine import store

    _specs, ref_out, _ = reference
    out = tmp_path / "out"
    shutil.copytree(ref_out, out)
    batch = sorted({c["batch"] for c in _commits(out)})[0]
    part = next((out / "events" / f"batch={batch}").glob("part-*"))
    shutil.copy(part, part.with_name("part-99999-copy.snappy.parquet"))
    damaged: dict = {}
    complete = store.complete_runs(spark, out, provenance.model_id(), damaged)
    assert list(damaged) == [batch] and "a file the batch did not write" in damaged[batch][0]
    assert not {r for r, b in complete.items() if b == batch}


def test_runs_the_aggregate_cannot_read_fail_the_sweep_in_one_line(
    spark, reference, tmp_path, capsys, monkeypatch
):
    """Should damage go unnoticed (a batch committed before commits listed their files), the
    aggregate's runs are checked against the grid: the sweep fails in one line, exit 1, instead
    of reporting a point with fewer seeds."""
    from rebalance_sim.lab.engine import store

    _specs, ref_out, _ = reference
    out = tmp_path / "out"
    shutil.copytree(ref_out, out)
    batch = sorted({c["batch"] for c in _commits(out)})[0]
    next((out / "runs" / f"batch={batch}").glob("part-*")).unlink()
    monkeypatch.setattr(store, "check_batches", lambda *a, **k: {})
    code = cmd_sweep(argparse.Namespace(grid=str(_grid(tmp_path)), out=str(out), master=None))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1, err
    assert (
        "complete runs are missing from the aggregate tables" in err[-1]
        and "Traceback" not in err[-1]
    )


def _descendants(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout
    children: dict[int, list[int]] = {}
    for line in out.splitlines():
        child, parent = map(int, line.split())
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            found.append(c)
            todo.append(c)
    return found


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the sweep's process group and everything it started (Spark's Python daemon runs
    in its own process group, so killing the group alone would leave workers finishing runs)."""
    victims = [proc.pid, *_descendants(proc.pid)]
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # its process group, as kill -9 -PGID
    except ProcessLookupError:
        pass
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(
        os.path.exists(f"/proc/{p}") and "zombie" not in _state(p) for p in victims[1:]
    ):
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            return f.read().lower()
    except OSError:
        return "zombie"


BAD_GRIDS = [
    ("scenarioz = ['crash']", "scenarioz"),
    ("seeds = 2", "scenarios"),
    ("scenarios = ['crash']\nassignors = ['rnage']", "assignors"),
    ("scenarios = ['crash']\nseeds = -1", "seeds"),
    ("scenarios = ['crash']\nseeds = [1, 1]", "seeds"),
    ("scenarios = ['crash']\n[vary]\nmembers = 3", "vary.members"),
    ("scenarios = ['crash']\n[vary]\nmembers = [3, 'x']", "vary.members"),
    ("scenarios = ['crash']\n[vary]\nmembers = []", "vary.members"),
    ("scenarios = ['crash']\n[set]\nmembers = [1]", "set.members"),
    ("scenarios = ['crash']\n[set]\nmembers = 'many'", "members"),
    ("scenarios = ['crash']\n[set]\nbogus = 1", "bogus"),
    ("scenarios = ['crash']\n[set]\n\"consumer.session_timeout_ms\" = 1000", "session_timeout_ms"),
    ("scenarios = ['no-such-scenario']", "scenario"),
    ("scenarios = ['crash'", "not valid TOML"),
]


@pytest.mark.parametrize(("text", "field"), BAD_GRIDS)
def test_bad_grid_errors_name_the_file_and_field(tmp_path, text, field):
    """A bad grid file fails before anything runs, with one line naming the file and the field."""
    path = _grid(tmp_path, text, "bad.toml")
    with pytest.raises(GridError) as e:
        expand(load_grid(path))
    message = str(e.value)
    assert "\n" not in message
    assert str(path) in message
    assert field in message


def test_sweep_command_reports_a_bad_grid_in_one_line(tmp_path, capsys):
    """`rebalance-sim sweep` on a bad grid exits 2 with a one-line error and no traceback."""
    path = _grid(tmp_path, "scenarios = ['crash']\nassignors = ['nope']", "bad.toml")
    code = cmd_sweep(argparse.Namespace(grid=str(path), out=str(tmp_path / "o"), master=None))
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.count("\n") == 0 and "assignors" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def _timed_runner(log: Path, pause_s: float, fail: str | None = None):
    """A runner that records when each run started and ended (one line per run in ``log``),
    pausing ``pause_s`` first; the run ``fail`` kills its Spark worker instead (a failed job)."""

    def runner(spec):
        import os as _os
        import time as _time

        from rebalance_sim.lab.engine.task import run_one

        start = _time.time()
        _time.sleep(pause_s)
        if spec.run_id == fail:
            _os._exit(1)
        result = run_one(spec)
        with open(log, "a") as f:
            f.write(f"{spec.run_id} {start} {_time.time()}\n")
        return result

    return runner


def test_the_next_batch_runs_while_a_batch_finishes_and_commits(spark, reference, tmp_path):
    """Batches overlap: with one run per batch, two batches' runs share the two cores, which a
    batch-at-a-time sweep never does; the tables are still the uninterrupted sweep's."""
    specs, ref_out, _ = reference
    log = tmp_path / "runs.log"
    out = tmp_path / "out"
    status = run_sweep(specs, out, runner=_timed_runner(log, 0.5), batch_runs=1)
    assert set(status["status"]) == {"ok"} and len(status) == len(specs)
    spans = sorted(
        (float(a), float(b)) for _, a, b in (ln.split() for ln in log.read_text().splitlines())
    )
    assert len(spans) == len(specs)
    assert any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans)), spans
    assert len({c["batch"] for c in _commits(out)}) == len(specs)
    aggregate(spark, out)
    ref, got = _tables(ref_out), _tables(out)
    for name in ref:
        assert got[name].equals(ref[name]), name


def test_a_failed_spark_job_keeps_the_batches_computed_before_it(spark, reference, tmp_path):
    """When a batch's Spark job fails (here its worker dies), the sweep raises, and every run of
    the batches computed before it is committed: a rerun runs only the rest."""
    specs, _, _ = reference
    order = sorted(specs, key=lambda s: (-s.cost, s.run_id))
    last = order[-1].run_id
    out = tmp_path / "out"
    with pytest.raises(Exception) as raised:
        run_sweep(
            specs, out, runner=_timed_runner(tmp_path / "runs.log", 0.2, fail=last), batch_runs=1
        )
    assert not isinstance(raised.value, AssertionError)
    assert {c["run_id"] for c in _commits(out)} == {s.run_id for s in order[:-1]}
    status = run_sweep(specs, out)
    assert set(status.loc[status["status"] != "skipped", "run_id"]) == {last}


def test_a_long_batch_shows_runs_finishing_inside_it(spark, tmp_path, monkeypatch):
    """The biggest runs go first, so the first batch can hold most of the work: while it runs,
    progress lines count the runs finished inside it instead of sitting at 0."""
    import io

    from rebalance_sim.lab.engine import sweep

    monkeypatch.setattr(sweep, "PROGRESS_EVERY_S", 0.2)

    def slow(spec):
        import time as _time

        from rebalance_sim.lab.engine.task import run_one

        _time.sleep(1.5)
        return run_one(spec)

    specs = expand(load_grid(_grid(tmp_path)))
    stream = io.StringIO()
    status = run_sweep(specs, tmp_path / "out", runner=slow, batch_runs=len(specs), stream=stream)
    assert set(status["status"]) == {"ok"}
    lines = stream.getvalue().splitlines()
    inside = [ln for ln in lines if "runs done, " in ln]
    assert inside, lines
    counts = [int(ln.split(": ")[1].split("/")[0]) for ln in inside]
    assert all(0 < c < len(specs) for c in counts) and counts == sorted(counts)
    saved = [int(ln.split("done, ")[1].split(" saved")[0]) for ln in inside]
    assert all(0 <= k <= c for k, c in zip(saved, counts, strict=True))
    assert lines[-1].startswith(f"sweep: {len(specs)}/{len(specs)} runs complete ("), lines


def test_run_cost_orders_consumer_protocol_and_deploys_above_a_classic_crash():
    """The start order and the ETA use a run's estimated cost: a consumer-protocol run costs
    more than the same classic run, a dynamic deploy more than a crash."""
    from rebalance_sim.lab.engine.grid import estimated_cost
    from sim.scenario.builtins import load_scenario

    def cost(name, **kv):
        return estimated_cost(load_scenario(name, {"members": "100", **kv}))

    assert cost("crash", **{"consumer.group_protocol": "consumer"}) > cost("crash")
    assert cost("rolling-deploy") > cost("crash")


def test_a_reused_spark_worker_freezes_what_it_imported_once(monkeypatch):
    """pyspark's daemon runs a full gc.collect() after every task of a reused worker: the
    worker's imports are frozen on its first task (never traced again), and only there."""
    import gc

    from rebalance_sim.lab.engine import task

    calls = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(task, "_worker_heap_frozen", False)
    monkeypatch.delenv("SPARK_REUSE_WORKER", raising=False)
    task._freeze_worker_heap()  # not a reused worker (the driver, a test): nothing frozen
    assert calls == [] and not task._worker_heap_frozen
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    task._freeze_worker_heap()
    assert calls == ["freeze"] and task._worker_heap_frozen
    task._freeze_worker_heap()  # once per worker
    assert calls == ["freeze"]


@pytest.mark.slow
@pytest.mark.parametrize("delay_s", [1.0, 3.0, 5.0, 7.0, 9.0, 11.0, 13.0, 16.0])
def test_ctrl_c_at_any_instant_exits_130_keeping_what_is_committed(tmp_path, delay_s):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it, the JVM and Python workers
    included) at instants from Spark's start to the aggregation: exit 130 (0 if it was done),
    one line, never an abort or a traceback, and the runs it says it kept are those on disk."""
    grid = _grid(tmp_path)
    out = tmp_path / "out"
    exe = Path(sys.prefix) / "bin" / "rebalance-sim"
    trampoline = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            trampoline,
            str(exe),
            "sweep",
            str(grid),
            "--out",
            str(out),
            "--batch-runs",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    time.sleep(delay_s)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode in (130, 0), err
    assert "Fatal Python error" not in err and "Traceback" not in err and "Exception" not in err, (
        err
    )
    last = err.strip().splitlines()[-1]
    if proc.returncode == 130:
        assert "interrupted" in last, err
        if "runs are complete" in last:
            kept = int(last.split("interrupted; ")[1].split(" of ")[0])
            assert kept == len(_commits(out)), err


@pytest.mark.parametrize("lister", ["hadoop", "spark"])
def test_a_remote_outputs_batches_are_checked_by_listing_them(
    spark, reference, tmp_path, monkeypatch, lister
):
    """A Hadoop URI's batches are checked by listing their directories: through Hadoop's
    FileSystem on a classic session, as Spark lists files under Connect (here both on file://,
    as they would be on hdfs://)."""
    import rebalance_sim.lab.engine.spark
    from rebalance_sim.lab.engine import store

    _specs, ref_out, _ = reference
    out = tmp_path / "out"
    shutil.copytree(ref_out, out)
    first, second = sorted({c["batch"] for c in _commits(out)})[:2]
    with open(next((out / "episodes" / f"batch={first}").glob("part-*")), "ab") as f:
        f.write(b"more")
    next((out / "points" / f"batch={second}").glob("part-*")).unlink()
    real = store.local_path
    remote = out.as_uri()
    monkeypatch.setattr(
        store, "local_path", lambda o: None if str(o).startswith(remote) else real(o)
    )
    if lister == "spark":
        monkeypatch.setattr(rebalance_sim.lab.engine.spark, "can_overlap_jobs", lambda: False)
    listings = store.commits(spark, remote).groupby("batch")["files"].first().to_dict()
    assert store.local_path(remote) is None and len(listings) >= 2
    store._remote_checks.clear()
    problems = store.check_batches(spark, remote, listings)
    assert set(problems) == {first, second}
    assert (
        problems[first].startswith(f"episodes/batch={first}/")
        and "when committed" in problems[first]
    )
    assert problems[second].startswith(f"points/batch={second}/") and problems[second].endswith(
        ": missing"
    )


def test_only_a_declared_unsettled_end_is_not_a_violation():
    """A run whose only violation is ending unsettled is counted apart where its spec declares
    it may (``may_end_unsettled``, which survives the JSON an executor gets); the same violation
    in an undeclared run, or any other violation in a declared one, is still broken."""
    from rebalance_sim.lab.engine.grid import RunSpec
    from rebalance_sim.lab.engine.sweep import judge_violations
    from sim.observe.invariants import NOT_SETTLED

    def spec(run_id, declared):
        return RunSpec("slow-assignor", (), 0, (), run_id, may_end_unsettled=declared)

    declared = spec("a", True)
    assert RunSpec.from_json(declared.to_json(), "a").may_end_unsettled
    assert "may_end_unsettled" not in spec("b", False).to_json()
    unsettled = f"{NOT_SETTLED} (some partition never got a live processing owner, ...)"
    other = "t=1.000000: events-0 owned by c001 and c002 at once (eager group)"
    specs = [declared, spec("b", False), spec("c", True), spec("d", True), spec("e", False)]
    expected, broken = judge_violations(
        specs, {"a": [unsettled], "b": [unsettled], "c": [other, unsettled]}
    )
    assert [s.run_id for s in expected] == ["a"]
    assert [(s.run_id, texts) for s, texts in broken] == [
        ("b", [unsettled]),
        ("c", [other, unsettled]),
    ]
