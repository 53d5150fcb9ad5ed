"""Starting Spark as asked: --conf, and masters that do not answer failing fast in one line."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rebalance_sim.lab.engine.spark import endpoints, parse_conf

GRID = 'scenarios = ["crash"]\nseeds = 1\n[set]\nmembers = 3\npartitions = 6\n'


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


def _sweep(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    exe = Path(sys.prefix) / "bin" / "rebalance-sim"
    t0 = time.monotonic()
    r = subprocess.run(
        [str(exe), "sweep", str(grid), "--out", str(tmp_path / "out"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return r, time.monotonic() - t0


@pytest.mark.parametrize("scheme", ["spark", "sc"])
def test_unreachable_master_fails_in_one_line(tmp_path, scheme):
    """A standalone master or Connect URL with nothing listening: exit 2 within seconds, one line
    naming the URL and what to check, no Python or Java traceback."""
    url = f"{scheme}://127.0.0.1:{_closed_port()}"
    r, elapsed = _sweep(tmp_path, "--master", url, "--spark-timeout", "5")
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.strip().splitlines() if not line.startswith("sweep ")]
    assert len(lines) == 1, r.stderr
    assert url in lines[0] and "check" in lines[0]
    assert "Traceback" not in r.stderr and "Exception" not in r.stderr
    assert elapsed < 60


@pytest.fixture
def silent_server():
    """A port that accepts connections and never answers (a firewall, a wrong service)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield s.getsockname()[1]


def test_connect_server_that_never_answers_fails_within_the_timeout(tmp_path, silent_server):
    """A Connect URL whose server accepts and says nothing: exit 2 after --spark-timeout, one
    line naming it; no hang, no traceback."""
    url = f"sc://127.0.0.1:{silent_server}"
    r, elapsed = _sweep(tmp_path, "--master", url, "--spark-timeout", "3")
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.strip().splitlines() if not line.startswith("sweep ")]
    assert len(lines) == 1 and url in lines[0] and "--spark-timeout" in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert elapsed < 60


def test_bad_conf_is_bad_input(tmp_path):
    """`--conf` without KEY=VALUE is rejected before Spark starts: exit 2, one line naming it."""
    r, _ = _sweep(tmp_path, "--conf", "spark.executor.memory")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "--conf" in r.stderr and "KEY=VALUE" in r.stderr


def test_conf_and_endpoints_parse():
    """KEY=VALUE pairs keep '=' inside values; master URLs name their endpoints (with defaults)."""
    assert parse_conf(["a.b=1", "spark.driver.extraJavaOptions=-Dx=y"]) == [
        ("a.b", "1"),
        ("spark.driver.extraJavaOptions", "-Dx=y"),
    ]
    with pytest.raises(ValueError):
        parse_conf(["=1"])
    assert endpoints("spark://h1:7077,h2:7078") == [("h1", 7077), ("h2", 7078)]
    assert endpoints("spark://h1") == [("h1", 7077)]
    assert endpoints("sc://host/;token=abc") == [("host", 15002)]
    assert endpoints("sc://host:443/;use_ssl=true") == [("host", 443)]
    assert endpoints("yarn") == []


def test_a_failed_spark_job_is_named_by_what_failed_not_by_the_jvm_call():
    """py4j's first line names only the JVM call; the line shown is the Python worker's error,
    else the first Java exception."""
    from rebalance_sim.lab.engine.spark import error_summary

    python_failure = (
        "An error occurred while calling o1359.getResult.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 87.0 "
        "failed 1 times, most recent failure: Lost task 0.0: org.apache.spark.api.python.PythonException: "
        "Traceback (most recent call last):\n"
        '  File "/x/worker.py", line 1, in main\n'
        "    raise MemoryError('no room')\n"
        "MemoryError: no room\n"
        "\n\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)\n"
    )
    assert error_summary(python_failure, "E") == "MemoryError: no room"
    java_failure = (
        "An error occurred while calling o7.collect.\n"
        ": java.lang.OutOfMemoryError: Java heap space\n\tat java.base/x.y(Z.java:1)\n"
    )
    assert error_summary(java_failure, "E") == "java.lang.OutOfMemoryError: Java heap space"
    assert error_summary("Connection refused", "E") == "Connection refused"


def test_driver_launch_settings_reach_the_local_jvm():
    # spark.driver.memory and the driver's Java options only act when the JVM is launched: they
    # must be on its command line, not only in the session's settings (they once were ignored)
    code = (
        "import sys\n"
        "from rebalance_sim.lab.engine.spark import get_spark\n"
        "s = get_spark(None, conf=['spark.driver.memory=1536m',"
        " 'spark.driver.extraJavaOptions=-Drsim.test=7'])\n"
        "rt = s.sparkContext._jvm.java.lang.Runtime.getRuntime()\n"
        "props = s.sparkContext._jvm.java.lang.System\n"
        "args = s.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()"
        ".getInputArguments()\n"
        "print(rt.maxMemory() // 2**20, props.getProperty('rsim.test'), ' '.join(str(a) for a in args))\n"
        "s.stop()\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert r.returncode == 0, r.stderr[-2000:]
    max_mib, prop, args = r.stdout.split()[0], r.stdout.split()[1], r.stdout.split(None, 2)[2]
    assert int(max_mib) > 1200  # the default (1g) gives under 1024
    assert prop == "7"
    assert "-XX:TieredStopAtLevel=1" in args and "log4j2.configurationFile" in args


def test_a_failed_spark_job_exits_1_not_as_bad_input(tmp_path, monkeypatch, capsys):
    """A Spark job that fails while running is not the user's input: one line, exit 1 (2 is
    reserved for bad input)."""
    import rebalance_sim.lab.engine.pipeline as pipeline
    from rebalance_sim.cli.main import main

    JavaError = type("Py4JJavaError", (Exception,), {"__module__": "py4j.protocol"})

    def failing(*_a, **_k):
        raise JavaError(
            "An error occurred while calling o7.collect.\n"
            ": java.lang.OutOfMemoryError: Java heap space\n\tat x.y(Z.java:1)\n"
        )

    monkeypatch.setattr(pipeline, "run_experiment", failing)
    monkeypatch.chdir(tmp_path)
    code = main(
        [
            "experiment",
            "eager-vs-cooperative",
            "--scale",
            "smoke",
            "--out",
            str(tmp_path / "r"),
            "--work",
            str(tmp_path / "w"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.count("\n") == 1 and "java.lang.OutOfMemoryError: Java heap space" in err
    assert "Traceback" not in err


def test_the_root_cause_is_named_for_a_worker_exception_and_a_jvm_chain():
    """A Python worker's exception as pyspark raises it ('An exception was thrown from the Python
    worker', then its traceback; the first exception is the one the others arose from), and a
    JVM chain (its last 'Caused by:')."""
    from rebalance_sim.lab.engine.spark import error_summary

    worker = (
        "\n  An exception was thrown from the Python worker. Please see the stack trace below.\n"
        "Traceback (most recent call last):\n"
        '  File "/x/table_sink.py", line 9, in _flush\n'
        "    writer.write_table(data)\n"
        "OSError: [Errno 28] No space left on device\n"
        "\nDuring handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n"
        '  File "/x/worker.py", line 1, in main\n'
        "RuntimeError: task failed\n"
    )
    assert error_summary(worker, "E") == "OSError: [Errno 28] No space left on device"
    chain = (
        "An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n"
        ": org.apache.spark.SparkException: Could not start\n\tat a.b(C.java:1)\n"
        "Caused by: java.lang.IllegalArgumentException: wrapped\n\tat a.b(C.java:2)\n"
        "Caused by: java.net.UnknownHostException: nohost: Name or service not known\n"
    )
    assert (
        error_summary(chain, "E")
        == "java.net.UnknownHostException: nohost: Name or service not known"
    )
    master = (
        "An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n"
        ": org.apache.spark.SparkException: Could not parse Master URL: 'bogus://x'\n\tat a.b(C.java:1)\n"
    )
    assert (
        error_summary(master, "E")
        == "org.apache.spark.SparkException: Could not parse Master URL: 'bogus://x'"
    )


@pytest.mark.parametrize(
    "url, ok",
    [
        ("local", True),
        ("local[*]", True),
        ("local[4]", True),
        ("local[2,3]", True),
        ("local-cluster[2,1,1024]", True),
        ("spark://127.0.0.1:7077", True),
        ("spark://h1:7077,h2:7077", True),
        ("yarn", True),
        ("k8s://https://10.0.0.1:6443", True),
        ("sc://127.0.0.1:15002", True),
        ("sc://host/;token=x", True),
        ("bogus://x", False),
        ("local[0]", False),
        ("spark:/h", False),
        ("", False),
        ("yarn-client x", False),
    ],
)
def test_master_urls_are_checked_before_anything_starts(url, ok):
    from rebalance_sim.lab.engine.spark import SparkUnavailable, check_master

    if ok:
        check_master(url)
    else:
        with pytest.raises(SparkUnavailable, match="not a Spark master URL"):
            check_master(url)


def test_a_driver_out_of_heap_is_named_with_what_to_do(tmp_path, monkeypatch):
    """The driver JVM exits on an OutOfMemoryError instead of leaving its caller waiting
    (EXIT_ON_OOM); the one line then says so and names spark.driver.memory, not the broken call."""
    from rebalance_sim.lab.engine import spark

    log = tmp_path / "spark.log"
    log.write_text("lines\nTerminating due to java.lang.OutOfMemoryError: Java heap space\n")
    monkeypatch.setattr(spark, "jvm_log_path", lambda: log)
    monkeypatch.setattr(spark, "_remote", None)
    line = spark.spark_error_line(RuntimeError("An error occurred while calling o61.getResult"))
    assert "ran out of Java heap" in line and "spark.driver.memory" in line
    log.write_text("nothing of the kind\n")
    assert "o61.getResult" in spark.spark_error_line(
        RuntimeError("An error occurred while calling o61.getResult")
    )
    assert spark.EXIT_ON_OOM == "-XX:+ExitOnOutOfMemoryError"
