"""``skewlab engine --conf KEY=VALUE``: the values of well-known Spark settings checked before Spark starts.

Spark parses a setting's value only when something reads it: a bad
``spark.sql.shuffle.partitions`` fails the first query with a Python and JVM traceback after Spark
has started, a bad memory size is read (or not) when the JVM or an executor starts.  Here the
settings skewlab itself sets (:data:`skewlab.engine.runtimes.spark.session.DEFAULT_CONF`, the state
store's) and those users commonly pass get their value checked against the kind the Spark
configuration page documents for them ("Spark Properties": counts, sizes "in the same format as JVM
memory strings with a size unit suffix", time durations, booleans), parsed the way Spark parses each
kind (``JavaUtils.byteStringAs`` / ``timeStringAs``: an integer and an optional unit, case and
surrounding blanks ignored, no fractions; booleans ``true``/``false``).  Any other key passes
unchecked: this is not a validator of all of Spark's settings, only of the kinds a typo commonly
meets.
"""

from __future__ import annotations

import re
from typing import Mapping

from skewlab.engine.config.params import ParamError

__all__ = ["SETTING_KINDS", "check_spark_conf"]

_COUNT = "a whole number >= 1"
_COUNT0 = "a whole number >= 0"
_INT = "a whole number"
_SIZE = "a size such as 512m or 4g (a whole number with an optional unit b, k, m, g, t, p)"
_TIME = "a duration such as 120s or 500ms (a whole number with an optional unit us, ms, s, m, min, h, d)"
_BOOL = "true or false"
_FRACTION = "a number in [0, 1]"
_LOG_LEVELS = ("ALL", "DEBUG", "ERROR", "FATAL", "INFO", "OFF", "TRACE", "WARN")
_LEVEL = f"one of {', '.join(_LOG_LEVELS)}"

#: Setting → the kind of value Spark documents for it (the text names the kind in the error).
SETTING_KINDS: dict[str, str] = {
    # counts
    "spark.sql.shuffle.partitions": _COUNT, "spark.default.parallelism": _COUNT, "spark.executor.cores": _COUNT,
    "spark.driver.cores": _COUNT, "spark.cores.max": _COUNT, "spark.task.cpus": _COUNT,
    "spark.task.maxFailures": _COUNT, "spark.executor.instances": _COUNT0,
    "spark.dynamicAllocation.minExecutors": _COUNT0, "spark.dynamicAllocation.maxExecutors": _COUNT0,
    "spark.dynamicAllocation.initialExecutors": _COUNT0, "spark.sql.execution.arrow.maxRecordsPerBatch": _INT,
    # sizes (JVM memory strings)
    "spark.driver.memory": _SIZE, "spark.executor.memory": _SIZE, "spark.driver.memoryOverhead": _SIZE,
    "spark.executor.memoryOverhead": _SIZE, "spark.driver.maxResultSize": _SIZE, "spark.executor.pyspark.memory": _SIZE,
    "spark.python.worker.memory": _SIZE, "spark.memory.offHeap.size": _SIZE,
    "spark.sql.execution.arrow.maxBytesPerBatch": _SIZE, "spark.kryoserializer.buffer.max": _SIZE,
    # durations
    "spark.network.timeout": _TIME, "spark.executor.heartbeatInterval": _TIME,
    "spark.sql.streaming.stateStore.maintenanceInterval": _TIME, "spark.locality.wait": _TIME,
    # booleans
    "spark.ui.enabled": _BOOL, "spark.ui.showConsoleProgress": _BOOL, "spark.sql.adaptive.enabled": _BOOL,
    "spark.sql.execution.arrow.pyspark.enabled": _BOOL, "spark.sql.execution.arrow.pyspark.fallback.enabled": _BOOL,
    "spark.python.worker.reuse": _BOOL, "spark.dynamicAllocation.enabled": _BOOL, "spark.speculation": _BOOL,
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": _BOOL, "spark.memory.offHeap.enabled": _BOOL,
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": _BOOL,
    # fractions
    "spark.memory.fraction": _FRACTION, "spark.memory.storageFraction": _FRACTION,
    # log level
    "spark.log.level": _LEVEL,
}

_SIZE_RE = re.compile(r"[0-9]+(b|k|kb|m|mb|g|gb|t|tb|p|pb)?")
_TIME_RE = re.compile(r"-?[0-9]+(us|ms|s|m|min|h|d)?")
_INT_RE = re.compile(r"[+-]?[0-9]+")


def _fits(kind: str, value: str) -> bool:
    text = value.strip()
    if kind in (_COUNT, _COUNT0, _INT):
        if not _INT_RE.fullmatch(text) or not -2**31 <= int(text) < 2**31:  # Spark's int settings are Java ints
            return False
        return kind == _INT or int(text) >= (1 if kind == _COUNT else 0)
    if kind == _SIZE:
        return bool(_SIZE_RE.fullmatch(text.lower()))
    if kind == _TIME:
        return bool(_TIME_RE.fullmatch(text.lower()))
    if kind == _BOOL:
        return text.lower() in ("true", "false")
    if kind == _FRACTION:
        try:
            return 0.0 <= float(text) <= 1.0
        except ValueError:
            return False
    return text.upper() in _LOG_LEVELS


def check_spark_conf(conf: Mapping[str, str]) -> None:
    """One-line :class:`ParamError` naming ``--conf`` for the first value of a setting in
    :data:`SETTING_KINDS` that is not of its kind; other keys are not checked."""
    for key, value in conf.items():
        kind = SETTING_KINDS.get(str(key).strip())
        if kind is not None and not _fits(kind, str(value)):
            shown = str(value) if len(str(value)) <= 40 else str(value)[:40] + "..."
            raise ParamError(f"--conf {key}={shown}: {key} must be {kind}")
