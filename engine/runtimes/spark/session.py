"""One quiet, local-friendly SparkSession for skewlab (engine, CLI, tests).

:func:`get_session` is idempotent: the first call builds the session, later calls return the same
one (a JVM hosts one SparkContext; ``master``/``app_name`` of later calls are then ignored, runtime
SQL settings given as ``**conf`` are applied with ``spark.conf.set``).

Settings and why:

* The cluster's settings win: the order of precedence (skewlab's defaults, local-only defaults,
  ``spark-defaults.conf``/``PYSPARK_SUBMIT_ARGS``/``spark-submit``, explicit ``**conf``) is
  :mod:`skewlab.engine.runtimes.spark.cluster_settings`.  The JVM is started first, so that what
  Spark itself read (its system properties) is known before the session's settings are chosen.
* For a local master only: ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` = this interpreter unless
  set (without it Spark launches ``python3`` from ``PATH`` for its workers, on this kind of machine a
  different interpreter without the project installed: "Python worker failed to connect back"), and
  the driver bound to 127.0.0.1 (no hostname lookups, no extra ports).
* UI off, log level ERROR.
* ``spark.sql.shuffle.partitions`` small (default 4): micro-batches here are small and a
  shuffle into 200 partitions costs more than the work.
* Arrow enabled for pandas conversions / ``applyInPandas``; the Python data sources of
  :mod:`skewlab.engine.runtimes.spark.sources` return Arrow record batches anyway.
* ``spark.sql.execution.arrow.maxBytesPerBatch`` = 2147483647 (``Int.MaxValue``): with any other
  value Spark's ``BatchedPythonArrowInput.writeSizedBatch`` calls ``ArrowWriter.sizeInBytes()``
  after *every row*; ``Int.MaxValue`` is the value Spark special-cases to skip the check; batches
  stay bounded by ``maxRecordsPerBatch``.
* ``spark.sql.execution.arrow.maxRecordsPerBatch`` = 100000 (default 10000): rows per Arrow batch
  handed to a Python function (the stateful worker operator's frames) and collected by ``toArrow``.
  The per-batch Python overhead is paid 10x less often, while a 500k-row partition
  still arrives in several batches (rows are small: ~10-50 MB per batch at most).
  Measurements behind these settings: docs/design-notes.md, "engine/runtimes/spark/session.py".
* ``spark.sql.streaming.checkpointFileManagerClass`` = Spark's ``FileSystemBasedCheckpointFileManager``
  (set by :func:`get_session` when the class exists, unless given in ``**conf``).  The default
  FileContext-based manager creates every offset/commit-log file with explicit permissions, and
  without Hadoop's native library (the usual pip install) Hadoop applies them by forking
  ``chmod``/``stat`` processes from the JVM — several per micro-batch.  It still writes each log file to a temporary file and renames it, refusing to overwrite
  an existing batch file: atomic on local and HDFS paths, which is what exactly-once needs (a
  checkpoint has a single writer, the running query).
* The driver's accumulator server (a Python socket server thread) does not print a traceback when
  the JVM closes its connection: ``SparkContext.stop()`` stops the JVM *before* it flags that
  server as shut down, so a handler polling the socket reads EOF and ``socketserver`` prints an
  ``EOFError`` traceback on every clean stop that races this way (seen on Ctrl-C of
  ``skewlab engine``).  A peer hang-up (``EOFError``, ``ConnectionError``) is dropped; any other
  error is reported as before.
* ``jvm_output``: when given, the JVM is started with that file as its stdout and stderr, so its
  start-up banner, log4j lines and the tracebacks of the Python workers it spawns go to the log
  instead of the operator's terminal (``skewlab engine`` passes ``data/logs/spark-<run>.log``).
  pyspark inherits the driver's file descriptors 1 and 2 when it launches the JVM and offers no
  hook for them in ``getOrCreate``, so they point at the file only while the JVM is launched.
* :func:`configure_state_store`: the engine's stateful query uses the RocksDB state store with
  changelog checkpointing and one shuffle partition per possible worker.
* The skewlab streaming sources (``skewlab-generator``, ``skewlab-file``, ``skewlab-kafka``) are
  registered on the session.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

from skewlab.engine.runtimes.spark.cluster_settings import (is_local_master, python_env, loopback_problem,
                                                             plan_settings)
from skewlab.shared import UsageError

__all__ = ["DEFAULT_CONF", "get_session", "stop_session"]

#: Static (JVM start) and SQL settings applied when the session is built; ``**conf`` overrides.
DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.log.level": "ERROR",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.pyspark.fallback.enabled": "true",
    "spark.sql.execution.arrow.maxBytesPerBatch": "2147483647",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    "spark.sql.adaptive.enabled": "false",
    "spark.python.worker.reuse": "true",
    "spark.sql.session.timeZone": "UTC",
}

_CHECKPOINT_MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"
#: the class moved to a sub-package in Spark 4.1; the first one the JVM knows is used
_CHECKPOINT_MANAGERS = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager",
)

_LOCK = threading.Lock()


def _use_filesystem_checkpoint_manager(spark) -> None:
    """Select Spark's FileSystem-based checkpoint file manager (see the module docstring)."""
    for name in _CHECKPOINT_MANAGERS:
        try:
            spark.sparkContext._jvm.java.lang.Class.forName(name)
        except Exception:  # noqa: BLE001 - py4j error: no such class in this Spark version
            continue
        spark.conf.set(_CHECKPOINT_MANAGER_KEY, name)
        return
_SESSION = None

#: what the JVM closing the accumulator connection raises in the server's handler thread
_PEER_CLOSED = (EOFError, ConnectionError)


def _quiet_accumulator_server(server) -> None:
    """Drop the accumulator server's traceback for a peer hang-up (see the module docstring)."""
    if server is None or getattr(server, "_skewlab_quiet", False):
        return
    report = server.handle_error

    def handle_error(request, client_address) -> None:
        if isinstance(sys.exc_info()[1], _PEER_CLOSED):
            return
        report(request, client_address)

    server.handle_error = handle_error
    server._skewlab_quiet = True


def _alive(spark) -> bool:
    try:
        sc = spark.sparkContext
        return sc._jsc is not None and not sc._jsc.sc().isStopped()
    except Exception:  # noqa: BLE001 - any failure means "not usable"
        return False


@contextlib.contextmanager
def _output_to(path: str | os.PathLike | None) -> Iterator[None]:
    """Point file descriptors 1 and 2 at ``path`` (appending) for the block; no-op for ``None``."""
    if path is None:
        yield
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)


def get_session(master: str | None = None, app_name: str = "skewlab",
                jvm_output: str | os.PathLike | None = None, **conf: Any):
    """Return the process-wide SparkSession, building it on first use.

    ``master``: ``None`` = the cluster's ``spark.master`` (spark-submit, spark-defaults.conf), else
    ``local[*]``.  ``conf``: Spark settings by their real keys, e.g.
    ``get_session("local[2]", **{"spark.sql.shuffle.partitions": "2"})``; they override everything
    else (:mod:`skewlab.engine.runtimes.spark.cluster_settings`).  ``jvm_output``: file for the JVM's
    own output when this call starts it (see the module docstring).  A driver host the executors
    cannot reach is a :class:`skewlab.shared.UsageError` before the session is built.
    """
    global _SESSION
    explicit = {str(k): str(v) for k, v in conf.items()}
    if master is not None and is_local_master(master):
        # Must happen before the JVM starts: no hostname lookup / "resolves to loopback" warning.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with _LOCK:
        if _SESSION is not None and _alive(_SESSION):
            spark = _SESSION
            for key, value in conf.items():
                try:
                    spark.conf.set(str(key), str(value))
                except Exception:  # noqa: BLE001 - static confs cannot change on a live session
                    pass
            return spark
        from pyspark import SparkConf, SparkContext
        from pyspark.sql import SparkSession

        # The JVM inherits the interpreter choice as the old code gave it (a local master, or one not yet
        # known); it is taken back below if the cluster's master turns out not to be local.
        provisional = python_env(master or "local[*]", explicit, os.environ) if master is None or is_local_master(master) else {}
        os.environ.update(provisional)
        with _output_to(jvm_output):
            SparkContext._ensure_initialized()  # the JVM, with what spark-submit/spark-defaults.conf gave it
        cluster = dict(SparkConf().getAll())
        master, settings = plan_settings(master, cluster, explicit, DEFAULT_CONF)
        problem = loopback_problem(master, settings.get("spark.driver.host", cluster.get("spark.driver.host"))
                                   or os.environ.get("SPARK_LOCAL_IP"))
        if problem:
            raise UsageError(problem)
        for variable in provisional:
            os.environ.pop(variable, None)
        os.environ.update(python_env(master, {**cluster, **settings}, os.environ))
        builder = SparkSession.builder.master(master).appName(app_name)
        for key, value in settings.items():
            builder = builder.config(key, value)
        with _output_to(jvm_output):
            try:
                spark = builder.getOrCreate()
            except Exception as exc:  # noqa: BLE001 - pyspark's PySparkRuntimeError
                if "JAVA_GATEWAY_EXITED" not in str(exc):
                    raise
                from skewlab.engine.runtimes.spark.java import java_problem

                where = f"; its output is in {jvm_output}" if jvm_output is not None else ""
                raise UsageError(f"Spark's Java process exited at start{where}: "
                                 f"{java_problem() or 'check JAVA_HOME and java -version'}") from None
            spark.sparkContext.setLogLevel("ERROR")
        _quiet_accumulator_server(getattr(spark.sparkContext, "_accumulatorServer", None))
        if _CHECKPOINT_MANAGER_KEY not in settings:
            _use_filesystem_checkpoint_manager(spark)
        from skewlab.engine.runtimes.spark.sources import register

        register(spark)
        _SESSION = spark
        return spark


#: Spark's RocksDB state store, with changelog checkpointing (a batch commits its changes, not a
#: snapshot of every state partition; measured 0.7 s -> 0.04 s per batch in the design note)
STATE_STORE_CONF = {
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}


def configure_state_store(spark, partitions: int) -> None:
    """Settings of a query with keyed state on the executors: the RocksDB state store and
    ``partitions`` shuffle (= state) partitions.  They take effect when a query starts on a new
    checkpoint; a restarted query keeps the values its checkpoint recorded."""
    for key, value in {**STATE_STORE_CONF, "spark.sql.shuffle.partitions": str(int(partitions))}.items():
        spark.conf.set(key, value)


def stop_session() -> None:
    """Stop the session built by :func:`get_session` (no-op when there is none)."""
    global _SESSION
    with _LOCK:
        if _SESSION is not None:
            try:
                _SESSION.stop()
            finally:
                _SESSION = None
