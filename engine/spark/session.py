"""One quiet, local-friendly SparkSession for skewlab (engine, CLI, tests).

:func:`get_session` is idempotent: the first call builds the session, later calls return the same
one (a JVM hosts one SparkContext; ``master``/``app_name`` of later calls are then ignored, runtime
SQL settings given as ``**conf`` are applied with ``spark.conf.set``).

Settings and why:

* ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` = this interpreter, set *before* the JVM starts.
  Without it Spark launches ``python3`` from ``PATH`` for its workers, which on this kind of
  machine is a different interpreter without the project installed ("Python worker failed to
  connect back").
* UI off, driver bound to 127.0.0.1 (no hostname lookups, no extra ports), log level ERROR.
* ``spark.sql.shuffle.partitions`` small (default 4): micro-batches here are small and a
  shuffle into 200 partitions costs more than the work.
* Arrow enabled for pandas conversions / ``applyInPandas``; the Python data sources of
  :mod:`engine.spark.sources` return Arrow record batches anyway.
* The skewlab streaming sources (``skewlab-generator``, ``skewlab-file``, ``skewlab-kafka``) are
  registered on the session.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

__all__ = ["DEFAULT_CONF", "get_session", "stop_session"]

#: Static (JVM start) and SQL settings applied when the session is built; ``**conf`` overrides.
DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.log.level": "ERROR",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.pyspark.fallback.enabled": "true",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    "spark.sql.adaptive.enabled": "false",
    "spark.python.worker.reuse": "true",
    "spark.sql.session.timeZone": "UTC",
}

_LOCK = threading.Lock()
_SESSION = None


def _alive(spark) -> bool:
    try:
        sc = spark.sparkContext
        return sc._jsc is not None and not sc._jsc.sc().isStopped()
    except Exception:  # noqa: BLE001 - any failure means "not usable"
        return False


def get_session(master: str = "local[*]", app_name: str = "skewlab", **conf: Any):
    """Return the process-wide SparkSession, building it on first use.

    ``conf``: Spark settings by their real keys, e.g.
    ``get_session("local[2]", **{"spark.sql.shuffle.partitions": "2"})``; they override
    :data:`DEFAULT_CONF`.
    """
    global _SESSION
    # Must happen before the JVM (and with it the Python worker factory) starts.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no hostname lookup / "resolves to loopback" warning
    with _LOCK:
        if _SESSION is not None and _alive(_SESSION):
            spark = _SESSION
            for key, value in conf.items():
                try:
                    spark.conf.set(str(key), str(value))
                except Exception:  # noqa: BLE001 - static confs cannot change on a live session
                    pass
            return spark
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.master(master).appName(app_name)
        settings = dict(DEFAULT_CONF)
        settings.update({str(k): str(v) for k, v in conf.items()})
        for key, value in settings.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        from engine.spark.sources import register

        register(spark)
        _SESSION = spark
        return spark


def stop_session() -> None:
    """Stop the session built by :func:`get_session` (no-op when there is none)."""
    global _SESSION
    with _LOCK:
        if _SESSION is not None:
            try:
                _SESSION.stop()
            finally:
                _SESSION = None
