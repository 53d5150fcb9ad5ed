"""Sweeps on a real Spark cluster: a standalone master and worker, and a Spark Connect server,
started here on 127.0.0.1 from the pyspark package, whose processes cannot see this checkout or
its virtual environment; the sweep ships its code and dependencies and gives the same tables as
``local[*]``.

These tests start JVMs (a minute or two on a small machine): they carry the ``cluster`` marker,
which `.ci/run` runs after the default suite (``pytest -m cluster``).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rebalance_sim.lab.engine.aggregate import aggregate
from rebalance_sim.lab.engine.grid import expand, load_grid
from rebalance_sim.lab.engine.spark import cache_dir
from rebalance_sim.lab.engine.sweep import run_sweep

pytestmark = pytest.mark.cluster

CHECKOUT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(__import__("pyspark").__file__).parent
GRID = textwrap.dedent("""
    name = "tiny-cluster"
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
WALL_COLUMNS = {"wall_s"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, log: Path, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(
        f"nothing listens on {port} after {timeout_s} s:\n{log.read_text()[-3000:]}"
    )


def _can_hide() -> bool:
    """Root with mount namespaces: the servers run with the checkout and venv hidden."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


class Isolated:
    """Starts servers in a clean environment, from a directory of their own, and (as root) in a
    mount namespace where the checkout, the venv and our cache are empty directories; Spark's
    files are reached through a bind mount made before the hiding."""

    def __init__(self, root: Path):
        self.root = root
        self.hide = _can_hide()
        self.procs: list[subprocess.Popen] = []
        if self.hide:
            self.spark_home = root / "spark"
            self.spark_home.mkdir()
        else:  # a private copy (hard links where possible), outside the checkout and venv
            self.spark_home = root / "spark"
            try:
                shutil.copytree(SPARK_HOME, self.spark_home, copy_function=os.link)
            except OSError:
                shutil.copytree(SPARK_HOME, self.spark_home, dirs_exist_ok=True)

    def env(self, **extra) -> dict:
        home = self.root / "home"
        home.mkdir(exist_ok=True)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(home),
            "SPARK_HOME": str(self.spark_home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self.root / "logs"),
            "SPARK_WORKER_DIR": str(self.root / "worker-work"),
            "LANG": "C.UTF-8",
        }
        if os.environ.get("JAVA_HOME"):
            env["JAVA_HOME"] = os.environ["JAVA_HOME"]
        env.update(extra)
        return env

    def start(self, name: str, args: list[str], **env) -> tuple[subprocess.Popen, Path]:
        log = self.root / f"{name}.log"
        cmd = [str(self.spark_home / "bin" / "spark-class"), *args]
        if self.hide:
            hidden = sorted({CHECKOUT, Path(sys.prefix).resolve(), cache_dir()})
            # A path inside one hidden already (the venv in the checkout) needs no mount of its own.
            hidden = [p for p in hidden if p.exists() and not any(q in p.parents for q in hidden)]
            script = [f"mount --bind {SPARK_HOME} {self.spark_home}"]
            script += [f"mount -t tmpfs tmpfs {p}" for p in hidden]
            script.append('exec "$@"')
            cmd = [
                "unshare",
                "-m",
                "--propagation",
                "private",
                "sh",
                "-c",
                " && ".join(script),
                "sh",
                *cmd,
            ]
        workdir = self.root / name
        workdir.mkdir()
        with open(log, "wb") as f:
            proc = subprocess.Popen(
                cmd,
                cwd=workdir,
                env=self.env(**env),
                stdout=f,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc, log

    def stop(self) -> None:
        """Each server by its own process id (its group: the JVM and the Python workers it
        started), then wait for it."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _tables(out: Path) -> dict:
    tables = {}
    for name in ("runs", "points", "window_quantiles", "windows"):
        t = pq.read_table(out / "aggregate" / name)
        tables[name] = t.drop_columns([c for c in WALL_COLUMNS if c in t.column_names])
    return tables


def _sweep_cli(
    grid: Path, out: Path, *extra: str, timeout_s: float = 600
) -> subprocess.CompletedProcess:
    exe = Path(sys.prefix) / "bin" / "rebalance-sim"
    return subprocess.run(
        [str(exe), "sweep", str(grid), "--out", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("grid") / "grid.toml"
    path.write_text(GRID)
    return path


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    iso = Isolated(tmp_path_factory.mktemp("servers"))
    yield iso
    iso.stop()


def _assert_same(got: dict, ref: dict) -> None:
    for name in ref:
        assert got[name].equals(ref[name]), name


def _readme_block(marker: str) -> list[str]:
    """The command lines of the block after ``<!-- marker -->`` in docs/cluster.md, which the
    README points to for running on a cluster."""
    text = (CHECKOUT / "docs" / "cluster.md").read_text()
    (block,) = re.findall(rf"<!-- {marker} -->\n```\n(.*?)```", text, flags=re.S)
    return [line for line in block.splitlines() if line.strip()]


def _spark_class_args(line: str, ports: dict[str, str]) -> list[str]:
    """The arguments after ``$SPARK_HOME/bin/spark-class`` in a docs/cluster.md line, ports replaced."""
    for old, new in ports.items():
        line = line.replace(old, new)
    words = shlex.split(line.rstrip("&").strip())
    assert words[0] == "$SPARK_HOME/bin/spark-class", line
    return words[1:]


def _readme_sweep(
    line: str, ports: dict[str, str], out: Path
) -> tuple[subprocess.CompletedProcess, float]:
    """Run docs/cluster.md's ``.venv/bin/rebalance-sim sweep ...`` line from the checkout, with the
    test's ports and a temporary --out."""
    for old, new in ports.items():
        line = line.replace(old, new)
    words = shlex.split(line)
    assert words[0] == ".venv/bin/rebalance-sim", line
    words[0] = str(Path(sys.prefix) / "bin" / "rebalance-sim")
    words[words.index("--out") + 1] = out.as_uri()
    t0 = time.monotonic()
    r = subprocess.run(words, cwd=CHECKOUT, capture_output=True, text=True, timeout=900)
    return r, time.monotonic() - t0


@pytest.fixture(scope="module")
def readme_reference(spark, tmp_path_factory):
    """The documented grid (examples/sweep.toml) swept with local[*] in this process."""
    out = tmp_path_factory.mktemp("local") / "out"
    run_sweep(expand(load_grid(CHECKOUT / "examples" / "sweep.toml")), out)
    aggregate(spark, out)
    return _tables(out)


def test_standalone_cluster_from_the_readme_gives_the_local_tables(
    servers, readme_reference, tmp_path
):
    """The standalone-cluster commands of docs/cluster.md, on 127.0.0.1 with a master and a worker that
    cannot see the checkout or its venv: code and dependencies are shipped, the command exits 0,
    and the aggregate tables equal local[*]'s."""
    master_line, worker_line, sweep_line = _readme_block("cluster-commands")[1:4]
    ports = {"7077": str(_free_port())}
    master, log = servers.start(
        "master", _spark_class_args(master_line, ports) + ["--webui-port", str(_free_port())]
    )
    _wait_port(int(ports["7077"]), master, log)
    worker, wlog = servers.start(
        "worker",
        _spark_class_args(worker_line, ports)[:1]
        + ["--webui-port", str(_free_port()), "--memory", "2g"]
        + _spark_class_args(worker_line, ports)[1:],
    )
    deadline = time.monotonic() + 180
    while "registered with master" not in wlog.read_text(errors="replace"):
        assert worker.poll() is None and time.monotonic() < deadline, wlog.read_text()[-3000:]
        time.sleep(0.5)
    r, elapsed = _readme_sweep(sweep_line, ports, tmp_path / "out")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    print(f"\nstandalone cluster sweep (docs/cluster.md command): {elapsed:.1f} s")
    _assert_same(_tables(tmp_path / "out"), readme_reference)


def test_spark_connect_from_the_readme_gives_the_local_tables(servers, readme_reference, tmp_path):
    """The Spark Connect commands of docs/cluster.md: a server whose own Python has none of our
    dependencies (the system's), which cannot see the checkout or its venv; the code and the
    packed venv go as session artifacts, and the tables equal local[*]'s."""
    server_line, sweep_line = _readme_block("connect-commands")[:2]
    ports = {"15002": str(_free_port())}
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    server, log = servers.start(
        "connect",
        _spark_class_args(server_line, ports)[:-1]
        + [
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            "spark.ui.enabled=false",
            "spark-internal",
        ],
        PYSPARK_PYTHON=python,
    )
    _wait_port(int(ports["15002"]), server, log)
    r, elapsed = _readme_sweep(sweep_line, ports, tmp_path / "out")
    assert r.returncode == 0, r.stderr[-3000:] + log.read_text()[-3000:]
    assert "Traceback" not in r.stderr
    print(f"\nSpark Connect sweep (docs/cluster.md command): {elapsed:.1f} s")
    _assert_same(_tables(tmp_path / "out"), readme_reference)


def test_ctrl_c_keeps_complete_runs_and_exits_130(grid, tmp_path):
    """Ctrl-C (SIGINT to the command's process group, as a terminal sends it) during a sweep
    prints one line saying what was kept and exits 130, with no traceback from Python or Java."""
    out = tmp_path / "out"
    exe = Path(sys.prefix) / "bin" / "rebalance-sim"
    # As a terminal starts a foreground command: SIGINT at its default disposition. (A command
    # started in the background by a non-interactive shell, as CI scripts may start this test
    # run, inherits SIGINT ignored, and Python and the JVM then rightly ignore Ctrl-C.)
    argv = [str(exe), "sweep", str(grid), "--out", str(out), "--batch-runs", "2"]
    trampoline = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", trampoline, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if list((out / "commits").glob("batch=*/part-*")):
                break
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Exception" not in err, err
    last = err.strip().splitlines()[-1]
    assert "interrupted" in last and "runs are complete" in last, err
    kept = int(last.split("interrupted; ")[1].split(" of ")[0])
    assert kept >= 2 and kept == len(pq.read_table(out / "commits")), err
