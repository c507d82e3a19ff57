"""Which Spark settings a skewlab session uses, and the checks that a cluster can run it.

Precedence, lowest first (:func:`plan_settings`):

1. skewlab's defaults (:data:`skewlab.engine.runtimes.spark.session.DEFAULT_CONF`);
2. for a ``local``/``local[N]``/``local-cluster[...]`` master only: the driver bound to and
   advertising 127.0.0.1 (:data:`LOCAL_ONLY_CONF`) and the executors' Python = the driver's
   interpreter (:func:`python_env`);
3. the cluster's settings, as Spark itself reads them when its JVM starts: ``spark-defaults.conf``
   under ``SPARK_CONF_DIR``, ``--conf`` in ``PYSPARK_SUBMIT_ARGS``, and everything ``spark-submit``
   was given when the engine runs under it;
4. settings given explicitly (``skewlab engine --conf key=value``, ``get_session(**conf)``).

The master is ``--master`` when given, else ``spark.master`` from (4) or (3), else ``local[*]``.

Checks (one-line :class:`skewlab.shared.UsageError`): :func:`loopback_problem` refuses a driver that
advertises a loopback address to executors on other hosts; :func:`check_executors` runs one tiny
task per executor that imports skewlab, and reports an executor without it (or none that runs a task
in time: a driver address the executors cannot reach, no free cores) in one line.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
import threading
from typing import Mapping
from urllib.parse import urlsplit

from skewlab.shared import UsageError

__all__ = ["LOCAL_ONLY_CONF", "check_executors", "is_local_master", "python_env", "loopback_problem",
           "plan_settings"]

DEFAULT_MASTER = "local[*]"
#: defaults for a local master only: no hostname lookups, no port open beyond loopback
LOCAL_ONLY_CONF: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
#: seconds the executor check waits for a task to finish (``SKEWLAB_EXECUTOR_CHECK_TIMEOUT``)
EXECUTOR_CHECK_TIMEOUT_S = 120.0


def is_local_master(master: str) -> bool:
    """True for masters whose executors run on the driver's machine (``local``, ``local[N]``,
    ``local[N,F]``, ``local-cluster[...]``)."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


def plan_settings(master: str | None, cluster: Mapping[str, str], explicit: Mapping[str, str],
                  defaults: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """``(master, settings for the session builder)`` under the module's precedence.  ``cluster``: what
    the JVM read at start (spark-defaults.conf, PYSPARK_SUBMIT_ARGS, spark-submit); keys it sets are
    left out of the result (the session keeps the cluster's value) unless ``explicit`` sets them."""
    chosen = master or explicit.get("spark.master") or cluster.get("spark.master") or DEFAULT_MASTER
    wanted = dict(defaults)
    if is_local_master(chosen):
        wanted.update(LOCAL_ONLY_CONF)
    settings = {k: v for k, v in wanted.items() if k not in cluster}
    settings.update({str(k): str(v) for k, v in explicit.items()})
    settings.pop("spark.master", None)
    return chosen, settings


def python_env(master: str, settings: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """Environment variables that choose the executors' (and driver's) Python, set before the
    SparkContext starts: ``spark.pyspark.python`` / ``spark.pyspark.driver.python`` when given as
    settings (pyspark reads only the environment variables unless run by spark-submit); else, for a
    local master, this interpreter; nothing that ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` already
    say, and nothing for a cluster, whose nodes install Python where they do."""
    out: dict[str, str] = {}
    for variable, key in (("PYSPARK_PYTHON", "spark.pyspark.python"),
                          ("PYSPARK_DRIVER_PYTHON", "spark.pyspark.driver.python")):
        if variable in environ:
            continue
        if key in settings:
            out[variable] = settings[key]
        elif is_local_master(master):
            out[variable] = sys.executable
    return out


def _is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
        except OSError:
            return False


def loopback_problem(master: str, driver_host: str | None) -> str | None:
    """Why executors cannot reach a driver advertising ``driver_host``, or ``None``: a loopback
    address is fine for a local master and for a standalone master on loopback itself (every process
    on this machine), and unreachable from executors on other hosts."""
    if not driver_host or is_local_master(master) or not _is_loopback(driver_host):
        return None
    master_host = urlsplit(master.split(",")[0]).hostname if "://" in master else None
    if master_host and _is_loopback(master_host):
        return None
    return (f"spark.driver.host is {driver_host}, a loopback address that executors on other hosts cannot reach "
            f"(master {master}); set --conf spark.driver.host=ADDRESS-THE-EXECUTORS-CAN-REACH "
            "(and spark.driver.bindAddress) or unset SPARK_LOCAL_IP")


def _import_skewlab(_):
    # the check: the executor's Python has skewlab installed, with what the engine's workers run
    from skewlab.engine.runtimes.spark import operator  # noqa: F401
    return [socket.gethostname()]


def _first_error_line(exc: BaseException) -> str:
    text = str(exc)
    for marker in ("ModuleNotFoundError:", "ImportError:"):
        at = text.find(marker)
        if at >= 0:
            return text[at:].splitlines()[0].strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def check_executors(spark, timeout_s: float | None = None) -> None:
    """Run one task per default-parallelism slot that imports skewlab on the executors; a one-line
    :class:`UsageError` when it fails or when no task finishes within ``timeout_s`` seconds."""
    if timeout_s is None:
        timeout_s = float(os.environ.get("SKEWLAB_EXECUTOR_CHECK_TIMEOUT", EXECUTOR_CHECK_TIMEOUT_S))
    sc = spark.sparkContext
    slots = max(1, min(int(sc.defaultParallelism), 64))
    outcome: dict[str, object] = {}
    group = "skewlab-executor-check"

    def run() -> None:
        try:
            sc.setJobGroup(group, "skewlab: can the executors import skewlab?", interruptOnCancel=True)
            outcome["hosts"] = sc.parallelize(range(slots), slots).mapPartitions(_import_skewlab).collect()
        except Exception as exc:  # noqa: BLE001 - py4j / Spark job failure, reported in one line below
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="skewlab-executor-check", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        sc.cancelJobGroup(group)
        driver = sc.getConf().get("spark.driver.host", "?")
        raise UsageError(f"no Spark executor ran a task within {timeout_s:g} s (master {sc.master}): the executors "
                         f"cannot reach the driver at {driver}, or the cluster has no free cores")
    if "error" in outcome:
        raise UsageError(f"the Spark executors cannot run skewlab (install it on every node, see README "
                         f"'Run on a cluster'): {_first_error_line(outcome['error'])}")
