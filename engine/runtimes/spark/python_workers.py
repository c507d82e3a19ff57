"""Start the executors' Python workers while the driver waits, so that batch 0 finds them running.

Every Python function of the engine's query (the source's reader, the stateful worker operator, the
merge stage) runs in a Python worker process of an executor.  Spark starts these on the first task
that needs one and, with ``spark.python.worker.reuse`` (on, :mod:`skewlab.engine.runtimes.spark.session`),
keeps them for later tasks; the first task of each pays the start and the imports (pandas, pyarrow,
numba, skewlab's operator and source modules, a few seconds on a 2-core machine).  Without this
module that is batch 0.  :func:`start_python_workers` runs one task per default-parallelism slot
that imports those modules, in a background thread, as a pandas (Arrow) job: Spark keys its pool of
reusable workers by their environment, and an RDD job's workers are not the ones a SQL job's Python
functions get (checked with PySpark 4.3: a later ``applyInPandas`` ran in the warmed workers after a
``mapInPandas`` warm-up, in fresh ones after an RDD warm-up).  It runs right after the session exists: the driver is
then waiting for the live grouping's routing kernels (cold cache) or building the query, and the
executors are idle.  A failure here only means batch 0 starts the workers itself; it is not reported
(:func:`skewlab.engine.runtimes.spark.cluster_settings.check_executors` reports executors that
cannot import skewlab on a cluster).
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["start_python_workers"]

#: the job group of the warm-up job (its tasks are not a batch's: task_metrics selects by description)
JOB_GROUP = "skewlab-python-workers"


def _import_executor_modules(frames):
    """The modules the query's Python functions import on an executor (the task's only work)."""
    from skewlab.engine.runtimes.spark import operator, sources, topology  # noqa: F401
    for frame in frames:
        yield frame.iloc[:0]


def start_python_workers(spark: Any) -> threading.Thread:
    """Run the warm-up job (one task per default-parallelism slot) in a daemon thread; returns it."""
    sc = spark.sparkContext
    slots = max(1, min(int(sc.defaultParallelism), 64))

    def run() -> None:
        try:
            sc.setJobGroup(JOB_GROUP, "skewlab: start the executors' Python workers", interruptOnCancel=True)
            spark.range(0, slots, 1, slots).mapInPandas(_import_executor_modules, "id long").collect()
        except Exception:  # noqa: BLE001 - Spark stopped or a worker failed: batch 0 starts its workers itself
            pass

    thread = threading.Thread(target=run, name="skewlab-python-workers", daemon=True)
    thread.start()
    return thread
