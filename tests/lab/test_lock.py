"""One writer per output (rebalance_sim.lab.engine.lock): a second writer is refused naming the holder, and a
lock whose holder is gone is taken over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from rebalance_sim.lab.engine import lock

HOLDER = """
import sys, time
from rebalance_sim.lab.engine import lock
lock.hold(sys.argv[1], command="rebalance-sim sweep grid.toml --out somewhere")
print("held", flush=True)
time.sleep(120)
"""


@pytest.fixture
def holder(tmp_path):
    """Another process holding the lock of ``tmp_path / "out"``."""
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    yield out, proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_a_second_writer_is_refused_naming_the_holder_until_it_is_gone(holder):
    out, proc = holder
    with pytest.raises(lock.LockHeld) as e:
        lock.hold(out)
    message = str(e.value)
    assert "\n" not in message and f"process {proc.pid} on {socket.gethostname()}" in message
    assert "(rebalance-sim sweep grid.toml --out somewhere), since " in message
    proc.kill()  # SIGKILL: the holder cannot release anything; the kernel drops its flock
    proc.wait()
    try:
        lock.hold(out)
        assert json.loads((out / ".lock").read_text())["pid"] == os.getpid()
    finally:
        lock.release_all()
    assert (out / ".lock").read_text() == ""  # released: nobody's


def test_the_sweep_command_refuses_a_held_output_before_starting_anything(holder, tmp_path):
    out, proc = holder
    grid = tmp_path / "grid.toml"
    grid.write_text('scenarios = ["crash"]\n')
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "rebalance_sim", "sweep", str(grid), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(
        f"rebalance-sim sweep: --out {out} is being written by process {proc.pid} "
    )
    assert time.monotonic() - t0 < 30  # no Spark was started
    assert not (out / "grid.toml").exists()


def test_whose_process_is_gone():
    """Without flock (or on a Hadoop URI) the holder's record decides: a process of this
    machine that no longer runs (or another that took its id since), a machine rebooted since,
    a released lock; never another machine's process."""
    me = lock._me("x")
    assert not lock._gone(me)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    assert lock._gone({**me, "pid": int(dead)})
    assert lock._gone(
        {**me, "start": "1"}
    )  # this pid, but another process (started at another time)
    assert lock._gone({**me, "boot": "another-boot"})
    assert lock._gone({**me, "released": True})
    assert not lock._gone({**me, "host": "elsewhere", "pid": int(dead)})


def test_a_hadoop_uri_is_locked_through_hadoops_filesystem(spark, tmp_path):
    """The lock of a Hadoop URI (here file://, through Hadoop's FileSystem as hdfs:// would be):
    created only if absent, refused while held (naming the file to delete), taken over from a
    process of this machine that is gone, deleted on release."""
    path = (tmp_path / "out" / ".lock").as_uri()
    first = lock._HadoopLock(spark, path, "--out", "first")
    first.acquire()
    assert json.loads((tmp_path / "out" / ".lock").read_text())["command"] == "first"
    with pytest.raises(lock.LockHeld) as e:
        lock._HadoopLock(spark, path, "--out", "second").acquire()
    assert f"process {os.getpid()} " in str(e.value) and f"delete {path}" in str(e.value)
    first.release()
    assert not (tmp_path / "out" / ".lock").exists()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    (tmp_path / "out" / ".lock").write_text(json.dumps({**lock._me("gone"), "pid": int(dead)}))
    third = lock._HadoopLock(spark, path, "--out", "third")
    third.acquire()
    assert json.loads((tmp_path / "out" / ".lock").read_text())["command"] == "third"
    third.release()
