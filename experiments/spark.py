"""One SparkSession per process, created on first use: embedded ``local[*]`` or a real cluster.

Where it runs, in order of precedence:
  ``get_spark(master="sc://host:15002")``  Spark Connect to a cluster (``--master sc://...``)
  ``get_spark(master="spark://host:7077")`` a classic cluster master (``--master URL``)
  ``SPARK_REMOTE=sc://host:15002``          Spark Connect, from the environment
  otherwise                                 ``local[*]``, embedded in this process

Only DataFrame APIs are used anywhere in ``experiments`` (no RDDs, no SparkContext), so every
pipeline runs the same under Spark Connect. Starting the JVM costs 10-20 s on a small machine,
which is why the session is cached and the tests share one.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_lock = threading.Lock()
_session: SparkSession | None = None

# Small data, few cores: a handful of shuffle partitions beats Spark's default of 200.
SHUFFLE_PARTITIONS = 4

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


def _quiet_log4j_conf() -> str:
    """A log4j2 properties file that sends only errors to stderr (no startup banner noise)."""
    import tempfile

    from .atomic import atomic_write_text

    path = Path(tempfile.gettempdir()) / f"rebalance-sim-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _QUIET_LOG4J:
        atomic_write_text(path, _QUIET_LOG4J)
    return str(path)


class SparkUnavailable(RuntimeError):
    """Spark cannot be started as asked (a one-line reason for the command line)."""


_PANDAS_WARNING = "PySpark does not yet fully support pandas"


def _silence_pandas_version_warning() -> None:
    """pyspark 4.x warns on every pandas >= 3 conversion; the APIs we use work, so say it once."""
    warnings.filterwarnings("ignore", message=_PANDAS_WARNING, category=FutureWarning)
    # Python workers are separate processes: pass the same filter through the environment.
    spec = f"ignore:{_PANDAS_WARNING}:FutureWarning"
    current = os.environ.get("PYTHONWARNINGS", "")
    if spec not in current:
        os.environ["PYTHONWARNINGS"] = f"{current},{spec}" if current else spec


def get_spark(master: str | None = None, conf: Sequence[str] = (), ship: bool = True) -> SparkSession:
    """The process's SparkSession, created on the first call (later ``master`` values are ignored)."""
    global _session
    with _lock:
        if _session is not None:
            return _session
        # Workers must run this interpreter, so they see the same packages (sim, assignors, ...).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        _silence_pandas_version_warning()
        from pyspark.sql import SparkSession

        remote = None
        if master and master.startswith("sc://"):
            remote = master
        elif not master and os.environ.get("SPARK_REMOTE"):
            remote = os.environ["SPARK_REMOTE"]
        builder = SparkSession.builder.appName("rebalance-sim")
        if remote:
            # pyspark's Connect client needs grpc; without it, pyspark 4.x exits the process
            # silently on import, so check first and say what to install.
            import importlib.util

            missing = [m for m in ("grpc", "grpc_status", "google.protobuf")
                       if importlib.util.find_spec(m.split(".")[0]) is None]
            if missing:
                raise SparkUnavailable(
                    f"Spark Connect ({remote}) needs the packages of pyspark[connect] "
                    f"(missing: {', '.join(missing)}); install them with "
                    f"'{sys.executable} -m pip install \"pyspark[connect]\"'")
            builder = builder.remote(remote)
        else:
            log4j = _quiet_log4j_conf()
            java_opts = f"-Dlog4j2.configurationFile=file:{log4j}"
            builder = (
                builder.master(master or "local[*]")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
                .config("spark.default.parallelism", str(max(2, os.cpu_count() or 2)))
                .config("spark.driver.extraJavaOptions", java_opts)
                .config("spark.executor.extraJavaOptions", java_opts)
                .config("spark.sql.execution.arrow.pyspark.enabled", "true")
                .config("spark.sql.session.timeZone", "UTC")
                .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
            )
        session = builder.getOrCreate()
        if not remote:
            session.sparkContext.setLogLevel("ERROR")
        else:
            try:
                session.conf.set("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
            except Exception:  # a cluster may forbid it; its own setting is then fine
                pass
        _session = session
        return session


def stop_spark() -> None:
    """Stop the process's session, if one was started (the next ``get_spark`` starts a new one)."""
    global _session
    with _lock:
        if _session is not None:
            _session.stop()
            _session = None
