"""One writer per output: a sweep or experiment holds a lock on its output while it writes there.

The lock is the file ``OUT/.lock``, holding who took it (JSON: process id, host, the machine's
boot id, the process's start time, the command, when). Another process is refused with one line
naming the holder, and takes the lock over only once the holder is gone:

- a local output (a path or ``file:``, whatever the master): the file is also locked with
  ``flock``, which the kernel releases when its holder exits or is killed, so a lock whose
  holder died is free at once; where ``flock`` is not available, the holder is gone when no
  process of that id and start time runs on this machine;
- a Hadoop URI (``hdfs://``, ``s3a://``, ...): the file is created only if it does not exist
  (Hadoop's FileSystem through the JVM; under Spark Connect, which has no filesystem on the
  client, written by Spark, and marked released at the end instead of deleted). A lock left
  by a process on this machine that is gone is taken over; one held from another machine is
  refused, naming the file to delete if that process is gone.

The lock is released when the command ends (``release_all``).
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import socket
import sys
from typing import Any

LOCK_NAME = ".lock"


class LockHeld(RuntimeError):
    """The output is being written by another process (one line naming it)."""


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> str:
    """A process's start time (clock ticks since boot, /proc/PID/stat), "" if unknown: with the
    boot id, it tells a process from a later one that got its id."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
        return text.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _me(command: str) -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "boot": _boot_id(),
        "start": _start_ticks(os.getpid()),
        "command": command,
        "since": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def _gone(holder: dict) -> bool:
    """Whether the process that wrote ``holder`` has ended (known only on this machine)."""
    if holder.get("released"):
        return True
    if holder.get("host") != socket.gethostname():
        return False  # another machine's process: nothing here can tell
    if holder.get("boot") and holder.get("boot") != _boot_id():
        return True  # this machine, rebooted since
    try:
        pid = int(holder["pid"])
        os.kill(pid, 0)
    except (KeyError, TypeError, ValueError):
        return True  # not a lock we wrote: unreadable, so nobody holds it
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # another user's process: alive
    start = holder.get("start")
    return bool(start) and _start_ticks(pid) not in ("", start)


def _describe(holder: dict | None, where: str) -> str:
    if not holder:
        return f"another process (its lock {where} is unreadable)"
    command = f" ({holder['command']})" if holder.get("command") else ""
    since = f", since {holder['since']}" if holder.get("since") else ""
    return f"process {holder.get('pid', '?')} on {holder.get('host', '?')}{command}{since}"


def _parse(data: bytes) -> dict | None:
    try:
        holder = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None


class _LocalLock:
    def __init__(self, path, flag: str, command: str):
        self.path, self.flag, self.command = path, flag, command
        self.fd: int | None = None

    def acquire(self) -> None:
        import fcntl

        from ..atomic import file_mode

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, file_mode())
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise  # no flock here: fall back on the holder's process id (below)
                raise LockHeld(self._held(_parse(os.pread(fd, 65536, 0)))) from None
        except LockHeld:
            os.close(fd)
            raise
        except OSError:
            holder = _parse(os.pread(fd, 65536, 0))
            if holder and not _gone(holder) and holder.get("pid") != os.getpid():
                os.close(fd)
                raise LockHeld(self._held(holder)) from None
        data = json.dumps(_me(self.command)).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        self.fd = fd

    def _held(self, holder: dict | None) -> str:
        return (
            f"{self.flag} {self.path.parent} is being written by {_describe(holder, self.path)}; "
            "wait for it to end or stop it (one writer per output)"
        )

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.ftruncate(self.fd, 0)  # nobody's: the next writer finds no stale holder
        except OSError:
            pass
        os.close(self.fd)  # and with it the flock
        self.fd = None


class _HadoopLock:
    """``OUT/.lock`` on a Hadoop filesystem (see the module docstring)."""

    def __init__(self, spark, path: str, flag: str, command: str):
        self.spark, self.path, self.flag, self.command = spark, path, flag, command
        self.mine: bytes | None = None

    def _fs(self):
        jvm = self.spark._jvm
        path = jvm.org.apache.hadoop.fs.Path(self.path)
        return path.getFileSystem(self.spark._jsc.hadoopConfiguration()), path

    def _classic(self) -> bool:
        from .spark import can_overlap_jobs

        return can_overlap_jobs()

    def _read(self) -> bytes | None:
        if self._classic():
            fs, path = self._fs()
            if not fs.exists(path):
                return None
            files = (
                [path]
                if fs.isFile(path)
                else [
                    s.getPath()
                    for s in fs.listStatus(path)
                    if s.isFile() and not s.getPath().getName().startswith(("_", "."))
                ]
            )
            chunks = []
            for p in files:
                stream = fs.open(p)
                try:
                    chunks.append(
                        bytes(self.spark._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
                    )
                finally:
                    stream.close()
            return b"".join(chunks)
        try:
            rows = self.spark.read.text(self.path).collect()
        except Exception as e:  # Spark Connect raises several classes for a missing path
            from .store import is_missing

            if is_missing(e):
                return None
            raise
        return "\n".join(r[0] for r in rows).encode()

    def _write(self, data: bytes, replace: bool) -> bool:
        """Write the lock; False if it exists and ``replace`` is not set."""
        if self._classic():
            fs, path = self._fs()
            if replace:
                fs.delete(path, True)
            try:
                stream = fs.create(path, False)
            except Exception as e:  # py4j wraps Hadoop's FileAlreadyExistsException
                if "AlreadyExists" in str(e) or fs.exists(path):
                    return False
                raise
            try:
                stream.write(bytearray(data))
            finally:
                stream.close()
            return True
        mode = "overwrite" if replace else "errorifexists"
        try:
            (
                self.spark.createDataFrame([(data.decode(),)], "value string")
                .coalesce(1)
                .write.mode(mode)
                .text(self.path)
            )
        except Exception as e:
            if "PATH_ALREADY_EXISTS" in str(e) or "already exists" in str(e):
                return False
            raise
        return True

    def acquire(self) -> None:
        data = json.dumps(_me(self.command)).encode()
        for _ in range(2):
            if self._write(data, replace=False):
                break
            holder = _parse(self._read() or b"")
            if holder is None or not _gone(holder):
                raise LockHeld(
                    f"{self.flag} {self.path.rsplit('/', 1)[0]} is being written by "
                    f"{_describe(holder, self.path)}; wait for it to end or stop it "
                    f"(if that process is gone, delete {self.path})"
                )
            self._write(data, replace=True)
            break
        if _parse(self._read() or b"") != json.loads(data):
            raise LockHeld(
                f"{self.flag} {self.path.rsplit('/', 1)[0]}: another process took "
                f"{self.path} at the same time; try again"
            )
        self.mine = data

    def release(self) -> None:
        if self.mine is None:
            return
        try:
            if _parse(self._read() or b"") == json.loads(self.mine):
                if self._classic():
                    fs, path = self._fs()
                    fs.delete(path, True)
                else:  # no delete under Spark Connect: marked released
                    self._write(
                        json.dumps({**json.loads(self.mine), "released": True}).encode(), True
                    )
        except Exception:  # a lost session at exit: the next writer takes it over
            pass
        self.mine = None


_held: dict[str, Any] = {}  # uri -> lock held by this process


def hold(out, flag: str = "--out", spark=None, command: str | None = None) -> None:
    """Take the lock of output ``out`` for this process, unless it holds it already; raises
    ``LockHeld``. A Hadoop URI needs ``spark`` (a local output does not)."""
    from .store import local_path, uri

    key = uri(out)
    if key in _held:
        return
    command = command or " ".join(["rebalance-sim", *sys.argv[1:]])
    local = local_path(out)
    if local is not None:
        lock: _LocalLock | _HadoopLock = _LocalLock(local / LOCK_NAME, flag, command)
    elif spark is None:
        return  # taken once Spark is up (the caller calls again)
    else:
        lock = _HadoopLock(spark, f"{key}/{LOCK_NAME}", flag, command)
    lock.acquire()
    _held[key] = lock


def release_all() -> None:
    """Release every lock this process holds (the command is done)."""
    while _held:
        _, lock = _held.popitem()
        lock.release()
