"""One SparkSession per process, created on first use: embedded ``local[*]`` or a real cluster.

Where it runs, in order of precedence:
  ``get_spark(master="sc://host:15002")``  Spark Connect to a cluster (``--master sc://...``)
  ``get_spark(master="spark://host:7077")`` a classic cluster master (``--master URL``; also
                                            ``yarn``, ``k8s://...``)
  ``SPARK_REMOTE=sc://host:15002``          Spark Connect, from the environment
  otherwise                                 ``local[*]``, embedded in this process

A cluster's workers need only Java and a Python of the driver's version (at the same path as the
driver's base interpreter). Unless ``ship=False`` (``--no-ship``, for clusters provisioned
already), a session on a non-local master gets, as Spark's "Python Package Management" guide
says: the project's packages as a zip (``SparkContext.addPyFile``, or
``SparkSession.addArtifacts(pyfile=True)`` under Connect) and its Python dependencies as a packed
virtual environment (``venv-pack``) in ``spark.archives`` (``addArtifacts(archive=True)`` under
Connect), with ``spark.pyspark.python`` (``spark.sql.execution.pyspark.python`` under Connect)
pointing into it. Both archives are built once and cached (``~/.cache/rebalance-sim``).

Failing fast: a master or Connect URL that does not answer fails within ``timeout_s`` (default
60) with one line naming the URL and what to check. The JVM's own output (classic mode) goes to a
log file, never to the user's terminal; errors reach the user as one line.

Only DataFrame APIs are used in the pipelines (no RDDs), so everything runs the same under Spark
Connect. Starting the JVM costs 10-20 s on a small machine, which is why the session is cached and
the tests share one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
import sys
import tempfile
import threading
import time
import warnings
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_lock = threading.Lock()
_session: SparkSession | None = None
_remote = False
_master = "local[*]"

# Small data, few cores: a handful of shuffle partitions beats Spark's default of 200.
SHUFFLE_PARTITIONS = 4
DEFAULT_TIMEOUT_S = 60.0
# Our packages, shipped as one zip; the venv archive's name in the executors' working directory.
SHIPPED_PACKAGES = ("assignors", "sim", "rebalance_sim")
ENV_ALIAS = "rsim_env"
# What the executors never import: Spark brings its own pyspark and py4j; plots, tests, tools and
# the Connect client stay on the driver. Excluding them makes the archive ~4x smaller.
PACK_EXCLUDES = tuple(
    f"lib/python*/site-packages/{p}"
    for p in (
        "pyspark/*",
        "pyspark-*",
        "py4j/*",
        "py4j-*",
        "matplotlib/*",
        "matplotlib-*",
        "mpl_toolkits/*",
        "PIL/*",
        "pillow*",
        "fontTools/*",
        "fonttools-*",
        "contourpy/*",
        "contourpy-*",
        "kiwisolver*",
        "cycler*",
        "pip/*",
        "pip-*",
        "setuptools/*",
        "setuptools-*",
        "_pytest/*",
        "pytest*",
        "py.py",
        "hypothesis/*",
        "hypothesis-*",
        "ruff/*",
        "ruff-*",
        "pygments/*",
        "pygments-*",
        "grpc/*",
        "grpcio*",
        "grpc_status/*",
        "grpcio_status*",
        "google/*",
        "googleapis*",
        "protobuf-*",
        "venv_pack/*",
        "venv_pack-*",
        "pluggy/*",
        "pluggy-*",
        "iniconfig*",
        "_pytest*",
        "*__editable__*",
        "rebalance_sim-*",
        "pyarrow/include/*",
        "pyarrow/tests/*",
        "numpy/*/tests/*",
        "pandas/tests/*",
        "*/__pycache__/*",
        "zstandard/*",
        "zstandard-*",
        "pyarrow/libarrow_flight*",
        "pyarrow/_flight*",
    )
) + ("bin/ruff",)

_QUIET_LOG4J = """\
# Root at WARN: Spark prints a "Setting default log level" banner whenever the root level differs
# from its shell default (WARN). The session is set to ERROR right after it starts.
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
logger.sparkenv.name = org.apache.spark.SparkEnv
logger.sparkenv.level = error
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
"""


class SparkUnavailable(RuntimeError):
    """Spark cannot be started as asked (a one-line reason for the command line)."""


class SparkHung(SparkUnavailable):
    """The session's start did not return in time. Its thread cannot be cancelled (it waits in
    gRPC or py4j), and interpreter shutdown may wait for it: after saying so, exit at once
    (``exit_now``)."""


def exit_now(code: int) -> None:
    """Flush and leave the process without running exit handlers that could wait on a hung start."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _quiet_log4j_conf() -> str:
    """A log4j2 properties file that sends only errors to stderr (no startup banner noise)."""
    from ..atomic import atomic_write_text

    path = Path(tempfile.gettempdir()) / f"rebalance-sim-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _QUIET_LOG4J:
        atomic_write_text(path, _QUIET_LOG4J)
    return str(path)


def jvm_log_path() -> Path:
    """Where the JVM's (and its Python workers') output goes in classic mode."""
    return Path(tempfile.gettempdir()) / f"rebalance-sim-spark-{os.getuid()}-{os.getpid()}.log"


_PANDAS_WARNING = "PySpark does not yet fully support pandas"


def _silence_pandas_version_warning() -> str:
    """pyspark 4.x warns on every pandas >= 3 conversion; the APIs we use work, so say it once."""
    warnings.filterwarnings("ignore", message=_PANDAS_WARNING, category=FutureWarning)
    # Python workers are separate processes: pass the same filter through the environment.
    spec = f"ignore:{_PANDAS_WARNING}:FutureWarning"
    current = os.environ.get("PYTHONWARNINGS", "")
    if spec not in current:
        os.environ["PYTHONWARNINGS"] = f"{current},{spec}" if current else spec
    return spec


def parse_conf(items: Sequence[str]) -> list[tuple[str, str]]:
    """``KEY=VALUE`` strings (``--conf``, as in spark-submit); raises ValueError naming the bad one."""
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(
                f"--conf {item!r}: expected KEY=VALUE (for example spark.driver.host=10.0.0.5)"
            )
        pairs.append((key.strip(), value))
    return pairs


def is_local(master: str | None) -> bool:
    return not master or master.startswith("local")


# The master URLs Spark accepts (its SparkContext's and spark-submit's forms) and Spark Connect's.
_MASTER_URL = re.compile(
    r"local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?|local-cluster\[\d+,\d+,\d+\]"
    r"|spark://[^\s/]+(:\d+)?(,[^\s/]+(:\d+)?)*/?|yarn|k8s://\S+|sc://[^\s/]+(/\S*)?"
)


def check_master(master: str | None, flag: str = "--master") -> None:
    """Raise ``SparkUnavailable`` (one line) unless ``master`` is a master URL Spark can take:
    found before anything is packed for it or a JVM starts."""
    if master is None:
        return
    if not _MASTER_URL.fullmatch(master.strip()):
        raise SparkUnavailable(
            f"{flag} {master}: not a Spark master URL; use local[*], local[N], "
            "spark://HOST:PORT, yarn, k8s://HOST:PORT or sc://HOST:PORT (Spark Connect)"
        )


# ---------------------------------------------------------------------------------------------
# Failing fast on a master that does not answer


def endpoints(url: str) -> list[tuple[str, int]]:
    """(host, port) pairs a master URL names: ``spark://h1:7077,h2:7077``, ``sc://h:15002/;...``."""
    if url.startswith("sc://"):
        parsed = urlparse("http://" + url[len("sc://") :].split("/", 1)[0])
        return [(parsed.hostname or "localhost", parsed.port or 15002)]
    if url.startswith("spark://"):
        out = []
        for part in url[len("spark://") :].split(","):
            parsed = urlparse("http://" + part)
            out.append((parsed.hostname or "localhost", parsed.port or 7077))
        return out
    return []


def check_reachable(url: str, timeout_s: float) -> None:
    """One TCP connection to the URL's endpoint(s); ``SparkUnavailable`` names what to check."""
    eps = endpoints(url)
    if not eps:
        return
    deadline = time.monotonic() + timeout_s
    errors = []
    for host, port in eps:
        left = max(0.1, deadline - time.monotonic())
        try:
            with socket.create_connection((host, port), timeout=left):
                return
        except OSError as e:
            errors.append(f"{host}:{port}: {e.strerror or e}")
    what = (
        "a Spark Connect server (start-connect-server.sh) listening there"
        if url.startswith("sc://")
        else "a Spark master (spark-class ...deploy.master.Master) listening there"
    )
    raise SparkUnavailable(
        f"cannot reach {url} ({'; '.join(errors)}); check the URL, that "
        f"{what}, and the firewall between this machine and it"
    )


# ---------------------------------------------------------------------------------------------
# What is shipped to executors


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rebalance-sim"


def code_zip() -> Path:
    """Our packages (``.py`` files) as a zip for ``addPyFile``; named by a digest of its content."""
    import importlib

    files = []
    for pkg in SHIPPED_PACKAGES:
        root = Path(str(importlib.import_module(pkg).__file__)).parent
        files += [
            (f"{pkg}/{p.relative_to(root).as_posix()}", p) for p in sorted(root.rglob("*.py"))
        ]
    h = hashlib.sha256()
    for name, path in files:
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    target = cache_dir() / f"rebalance_sim-{h.hexdigest()[:12]}.zip"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".zip.tmp")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            for name, path in files:
                z.writestr(
                    zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), path.read_bytes()
                )
        os.replace(tmp, target)
    return target


def venv_archive(stream=None) -> Path:
    """The driver's virtual environment packed with ``venv-pack`` (minus what executors never
    import), cached by the set of installed distributions and the Python version."""
    prefix = Path(sys.prefix)
    if prefix == Path(sys.base_prefix):
        raise SparkUnavailable(
            f"shipping dependencies needs a virtual environment (this Python, "
            f"{sys.executable}, is not one); run from the project's .venv or "
            "use --no-ship on a cluster whose workers have them installed"
        )
    site = next(prefix.glob("lib/python*/site-packages"))
    dists = sorted(p.name for p in site.glob("*.dist-info"))
    key = hashlib.sha256("\n".join([sys.version, *dists, *PACK_EXCLUDES]).encode()).hexdigest()[:12]
    target = cache_dir() / f"venv-{key}.tar.gz"
    if target.exists():
        return target
    import venv_pack

    target.parent.mkdir(parents=True, exist_ok=True)
    print(
        f"packing the Python environment for the executors (once): {target}",
        file=stream or sys.stderr,
        flush=True,
    )
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp.tar.gz")
    try:
        venv_pack.pack(
            prefix=str(prefix),
            output=str(tmp),
            compress_level=1,
            force=True,
            filters=[("exclude", p) for p in PACK_EXCLUDES],
        )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


# ---------------------------------------------------------------------------------------------
# The session


class _JvmOutputToLog:
    """Start the JVM with its stdout and stderr on a log file: the child inherits fds 1 and 2 as
    they are while the gateway launches, ours are restored right after."""

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self.saved = (os.dup(1), os.dup(2))
        fd = os.open(jvm_log_path(), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        return self

    def __exit__(self, *exc):
        os.dup2(self.saved[0], 1)
        os.dup2(self.saved[1], 2)
        os.close(self.saved[0])
        os.close(self.saved[1])


# Settings the driver JVM takes when it is launched (spark-submit reads them; once the JVM runs,
# setting them changes nothing): they go to the launch as well as to the session.
LAUNCH_KEYS = (
    "spark.driver.memory",
    "spark.driver.extraJavaOptions",
    "spark.driver.defaultJavaOptions",
    "spark.driver.extraClassPath",
    "spark.driver.extraLibraryPath",
)
# The local driver JVM compiles with C1 only: Spark generates and compiles new classes for every
# query, and C2 recompiling them costs much of the JVM's CPU for no gain in wall time (C2 makes
# the Parquet writes cheaper, not the job faster; docs/performance.md). A user's -XX:TieredStopAtLevel=4 in spark.driver.extraJavaOptions brings C2
# back.
LOCAL_JIT = "-XX:TieredStopAtLevel=1"
EXIT_ON_OOM = "-XX:+ExitOnOutOfMemoryError"
LOCAL_DRIVER_MEMORY = "4g"


def _quiet_accumulator_server() -> None:
    """pyspark's accumulator server (a socketserver thread in this process) prints a traceback
    to stderr when the JVM goes away mid-request (a driver that exited on EXIT_ON_OOM, a killed
    JVM); the command reports the failure itself, in one line."""
    from pyspark import accumulators

    server = getattr(accumulators, "AccumulatorTCPServer", None)
    if server is not None:
        server.handle_error = lambda self, request, client_address: None


def _start(builder, timeout_s: float, url: str, remote: bool, launch: dict[str, str] | None = None):
    """``builder.getOrCreate()``; under Connect with a first call to the server, bounded by
    ``timeout_s``. (A classic master was reached already by ``check_reachable``.) ``launch``:
    the settings the driver JVM must be launched with (``LAUNCH_KEYS``)."""
    box: dict = {}
    jvm_up = threading.Event()

    def target():
        try:
            if not remote:
                from pyspark import SparkConf, SparkContext

                # launch the JVM (py4j gateway) only, with the settings it takes at launch
                SparkContext._ensure_initialized(
                    conf=SparkConf(loadDefaults=False).setAll(sorted((launch or {}).items()))
                )
            jvm_up.set()
            session = builder.getOrCreate()
            if remote:
                session.version  # the first RPC: a Connect URL without a server fails here  # noqa: B018
            box["session"] = session
        except BaseException as e:  # reported on the caller's thread
            box["error"] = e
        finally:
            jvm_up.set()

    t = threading.Thread(target=target, name="spark-start", daemon=True)
    if remote:
        t.start()
        t.join(timeout_s)
    else:
        with _JvmOutputToLog():
            t.start()
            while not jvm_up.wait(0.2):
                pass
            # A classic master that accepts connections but never registers the application is
            # given up by Spark itself (three registration attempts of 20 s); the rest of the
            # context's start (the JVM, shipping the archives) is slow on a loaded machine.
            t.join()
    if t.is_alive():
        what = "Spark Connect server" if remote else "Spark master"
        raise SparkHung(
            f"no answer from the {what} at {url} after {timeout_s:.0f} s; check "
            "the URL and that the server there is up (raise the limit with "
            "--spark-timeout)"
        )
    if "error" in box:
        e = box["error"]
        line = error_summary(str(e), type(e).__name__)
        hint = "" if remote else f" (Spark's log: {jvm_log_path()})"
        raise SparkUnavailable(f"cannot start Spark on {url}: {line[:300]}{hint}")
    return box["session"]


def get_spark(
    master: str | None = None,
    conf: Sequence[str] = (),
    ship: bool = True,
    timeout_s: float | None = None,
) -> SparkSession:
    """The process's SparkSession, created on the first call (later arguments are ignored).

    ``conf``: ``KEY=VALUE`` Spark settings; ``ship``: ship code and dependencies to a non-local
    master; ``timeout_s``: how long a master may take to answer (default 60 s)."""
    global _session, _remote, _master
    with _lock:
        if _session is not None:
            return _session
        timeout_s = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
        try:
            pairs = parse_conf(conf)
        except ValueError as e:
            raise SparkUnavailable(str(e)) from None
        check_master(master)
        if not master and os.environ.get("SPARK_REMOTE"):
            check_master(os.environ["SPARK_REMOTE"], "SPARK_REMOTE=")
        warn_spec = _silence_pandas_version_warning()
        from pyspark.sql import SparkSession

        remote = None
        if master and master.startswith("sc://"):
            remote = master
        elif not master and os.environ.get("SPARK_REMOTE"):
            remote = os.environ["SPARK_REMOTE"]
        url = remote or master or "local[*]"
        builder = SparkSession.builder.appName("rebalance-sim")
        if remote:
            # pyspark's Connect client needs grpc; without it, pyspark 4.x exits the process
            # silently on import, so check first and say what to install.
            import importlib.util

            missing = [
                m
                for m in ("grpc", "grpc_status", "google.protobuf")
                if importlib.util.find_spec(m.split(".")[0]) is None
            ]
            if missing:
                raise SparkUnavailable(
                    f"Spark Connect ({remote}) needs the packages of pyspark[connect] "
                    f"(missing: {', '.join(missing)}); install them with "
                    f"'{sys.executable} -m pip install \"pyspark[connect]\"'"
                )
            check_reachable(remote, timeout_s)
            builder = builder.remote(remote)
        else:
            if is_local(master):
                # Local workers run this interpreter, so they see the same packages.
                os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            else:
                assert master is not None  # (no master is local)
                check_reachable(master, timeout_s)
            os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
            log4j = _quiet_log4j_conf()
            java_opts = f"-Dlog4j2.configurationFile=file:{log4j}"
            # A driver out of heap (collecting a large aggregate) leaves a dead result thread and a
            # Python caller waiting forever; exiting turns that into a failed call, reported in
            # one line.
            driver_opts = f"{java_opts} {EXIT_ON_OOM}" + (
                f" {LOCAL_JIT}" if is_local(master) else ""
            )
            given = dict(pairs).get("spark.driver.extraJavaOptions")
            if given:  # the user's options after ours: theirs win where both set one
                driver_opts = f"{driver_opts} {given}"
                pairs = [(k, v) for k, v in pairs if k != "spark.driver.extraJavaOptions"]
            builder = (
                builder.master(master or "local[*]")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
                .config("spark.driver.extraJavaOptions", driver_opts)
                .config("spark.sql.execution.arrow.pyspark.enabled", "true")
                .config("spark.sql.session.timeZone", "UTC")
                .config("spark.executorEnv.PYTHONWARNINGS", warn_spec)
                # A sweep commits one batch while the next ones run (rebalance_sim.lab.engine.sweep): the
                # commit's jobs go to their own pool, which gets the next free core instead of
                # waiting behind every queued run (Spark's job scheduling, FAIR between pools).
                .config("spark.scheduler.mode", "FAIR")
            )
            if is_local(master):
                builder = (
                    builder.config("spark.default.parallelism", str(max(2, os.cpu_count() or 2)))
                    .config("spark.executor.extraJavaOptions", java_opts)
                    .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
                )
            elif ship:
                # Spark's "Python Package Management": the packed venv, unpacked by every
                # executor as ./rsim_env, and its Python for the workers. pyspark takes the
                # workers' Python from PYSPARK_PYTHON when the context starts (whatever the
                # environment said: the shipped one is the one that has our dependencies).
                worker_python = f"./{ENV_ALIAS}/bin/python"
                os.environ["PYSPARK_PYTHON"] = worker_python
                builder = (
                    builder.config("spark.archives", f"{venv_archive()}#{ENV_ALIAS}")
                    .config("spark.pyspark.python", worker_python)
                    .config("spark.pyspark.driver.python", sys.executable)
                )
            else:
                # --no-ship: the cluster's own Python, as the user configured it.
                given = dict(pairs).get("spark.pyspark.python")
                if given:
                    os.environ["PYSPARK_PYTHON"] = given
        for key, value in pairs:
            builder = builder.config(key, value)
        if not remote and not logging.getLogger().handlers:
            # py4j reports a Ctrl-C inside a call with logging.exception on the root logger
            # (a traceback); we say what happened ourselves, in one line.
            logging.getLogger().addHandler(logging.NullHandler())
        launch = {}
        if not remote:
            if is_local(master) and "spark.driver.memory" not in dict(pairs):
                # In local mode the driver's heap is all of Spark's memory; Spark's 1 GB default
                # runs out collecting a large experiment's aggregate (a maximum, not a reservation).
                pairs = [("spark.driver.memory", LOCAL_DRIVER_MEMORY), *pairs]
                builder = builder.config("spark.driver.memory", LOCAL_DRIVER_MEMORY)
            launch = {
                k: v
                for k, v in [("spark.driver.extraJavaOptions", driver_opts), *pairs]
                if k in LAUNCH_KEYS
            }
            _quiet_accumulator_server()
        session = _start(builder, timeout_s, url, bool(remote), launch)
        if not remote:
            session.sparkContext.setLogLevel("ERROR")
            if not is_local(master) and ship:
                session.sparkContext.addPyFile(str(code_zip()))
        else:
            for key, value in (
                ("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS)),
                ("spark.sql.session.timeZone", "UTC"),
            ):
                try:
                    session.conf.set(key, value)
                except Exception:  # a cluster may forbid it; its own setting is then fine
                    pass
            if ship:
                _ship_connect(session)
        _session, _remote, _master = session, bool(remote), url
        return session


def _ship_connect(session) -> None:
    """Under Spark Connect: the code zip and the packed venv as session artifacts, and the
    session's Python for UDFs inside that venv."""
    archive = venv_archive()
    session.addArtifacts(str(code_zip()), pyfile=True)
    session.addArtifacts(f"{archive}#{ENV_ALIAS}", archive=True)
    session.conf.set("spark.sql.execution.pyspark.python", f"{ENV_ALIAS}/bin/python")


def is_spark_error(e: BaseException) -> bool:
    """An error raised by Spark (a failed job, a lost connection), classic or Connect."""
    mod = type(e).__module__ or ""
    return mod.startswith(("pyspark", "py4j", "grpc")) or any(
        (type(c).__module__ or "").startswith(("pyspark", "py4j"))
        for c in (e.__cause__, e.__context__)
        if c
    )


def spark_error_line(e: BaseException) -> str:
    """One line for a Spark error, and where the full log is. py4j's first line only names the
    JVM call ("An error occurred while calling o123.getResult."); what failed is further down:
    a Python worker's exception (its traceback's last line) or the first Java exception."""
    summary = error_summary(str(e), type(e).__name__)[:300]
    if not _remote and _driver_out_of_memory():
        summary = (
            "the driver ran out of Java heap (java.lang.OutOfMemoryError) and exited; give it "
            "more with --conf spark.driver.memory=4g"
        )
    return f"Spark failed on {_master}: {summary}" + (
        "" if _remote else f" (Spark's log: {jvm_log_path()})"
    )


def _driver_out_of_memory() -> bool:
    """Whether this process's driver JVM ended on an OutOfMemoryError (EXIT_ON_OOM): its log says
    so, the Python side only sees a broken call."""
    try:
        with open(jvm_log_path(), "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 65536))
            return b"Terminating due to java.lang.OutOfMemoryError" in f.read()
    except (OSError, TypeError):
        return False


def error_summary(text: str, fallback: str) -> str:
    """The first line of what caused a Spark error: a Python worker's exception (the first
    exception of its traceback: the one the others arose from), else the JVM's root cause (its
    last "Caused by:"), else the first exception line, else the text's first line."""
    lines = [s.rstrip() for s in text.splitlines()]
    for i, s in enumerate(lines):
        if s.endswith("Traceback (most recent call last):"):
            for t in lines[i + 1 :]:
                if t.startswith("\tat "):
                    break
                if t and not t[0].isspace():  # frames and their code are indented
                    return t.strip()
    causes = [
        s.strip()[len("Caused by:") :].strip() for s in lines if s.strip().startswith("Caused by:")
    ]
    if causes:
        return causes[-1]
    first = next((s.strip() for s in lines if s.strip()), fallback)
    if not first.startswith(("An error occurred while calling", "An exception was thrown")):
        return first
    for s in lines[1:]:
        if "Exception:" in s or "Error:" in s:
            return s.strip().lstrip(": ")
    return first


def current_master() -> str:
    return _master


def finished_tasks(num_tasks: int, group: str) -> int | None:
    """Tasks finished so far in the stage of ``num_tasks`` tasks (a batch of runs) of the jobs of
    ``group`` (see ``tag_thread``), from Spark's status tracker; None when it cannot tell (Spark
    Connect has none)."""
    s = _session
    if s is None or _remote:
        return None
    try:
        tracker = s.sparkContext.statusTracker()
        best = None
        for job in tracker.getJobIdsForGroup(group):
            for stage in getattr(tracker.getJobInfo(job), "stageIds", None) or ():
                info = tracker.getStageInfo(stage)
                if info is not None and info.numTasks == num_tasks:
                    best = max(best or 0, info.numCompletedTasks)
        return best
    except Exception:  # progress is best effort; the job itself reports errors
        return None


def can_overlap_jobs() -> bool:
    """Whether this session can run jobs from several threads with per-thread job groups and
    scheduler pools (a classic session; Spark Connect has no SparkContext)."""
    return _session is not None and not _remote


def tag_thread(group: str, pool: str | None = None) -> None:
    """The calling thread's next Spark jobs belong to job ``group`` (for ``cancel_group`` and
    ``finished_tasks``) and run in scheduler ``pool`` (None: the default pool). pyspark pins each
    Python thread to a JVM thread, so the setting stays with this thread. No-op under Connect."""
    if _session is None or not can_overlap_jobs():
        return
    sc = _session.sparkContext
    sc.setJobGroup(group, group)
    # None clears the property (back to the default pool), as the JVM's setLocalProperty takes it
    sc.setLocalProperty("spark.scheduler.pool", pool)  # type: ignore[arg-type]


_live_threads: set = set()  # futures of in_daemon_thread's threads still running


def in_daemon_thread(
    fn: Callable[[], Any], name: str, before_start: Callable[[Any], None] | None = None
):
    """``fn()`` in a daemon thread (a thread stuck in a Spark call never holds the process at
    exit); returns a ``concurrent.futures.Future`` of its result. ``before_start(future)`` runs
    before the thread starts: a Ctrl-C while ``Thread.start`` waits for the thread to run (up to
    a GIL switch interval) would otherwise leave it running with nobody holding its future.
    ``threads_busy`` says whether any is still running."""
    import threading
    from concurrent.futures import Future

    future: Future = Future()
    _live_threads.add(future)
    if before_start is not None:
        before_start(future)

    def target() -> None:
        try:
            future.set_result(fn())
        except BaseException as e:  # handed to the waiting thread
            future.set_exception(e)
        finally:
            _live_threads.discard(future)

    try:
        threading.Thread(target=target, name=name, daemon=True).start()
    except BaseException:
        _live_threads.discard(future)
        raise
    return future


def threads_busy() -> bool:
    """Whether a thread of ``in_daemon_thread`` is still running (in a Spark call, typically).

    Such a thread must not be running when the interpreter finalizes: pyspark's exit handler
    stops the JVM, which wakes a thread waiting for a job's Arrow answer inside pyarrow, and a
    thread woken during finalization is ended by unwinding its stack, where pyarrow's
    ``PyGILState_Release`` aborts the process ("Fatal Python error: PyGILState_Release").
    The command line then leaves with ``exit_now`` instead."""
    return bool(_live_threads)


def cancel_group(group: str) -> None:
    """Cancel the running jobs of ``group``; quietly does nothing if it cannot."""
    if _session is None or not can_overlap_jobs():
        return
    try:
        _session.sparkContext.cancelJobGroup(group)
    except Exception:
        pass


def interrupt_all() -> None:
    """Cancel the session's running jobs (after Ctrl-C); quietly does nothing if it cannot."""
    s = _session
    if s is None:
        return
    try:
        if _remote:
            s.interruptAll()
        else:
            s.sparkContext.cancelAllJobs()
    except Exception:
        pass


def stop_spark() -> None:
    """Stop the process's session, if one was started (the next ``get_spark`` starts a new one)."""
    global _session
    with _lock:
        if _session is not None:
            _session.stop()
            _session = None
