"""TaskTimes reads a batch's stateful-stage task times from Spark's status store, on a real session."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")


class CountingStore:
    """Spark's status store, counting the lookups of jobs it does not hold (each a Java exception)."""

    def __init__(self, store) -> None:
        self.store, self.misses = store, 0

    def job(self, job_id):
        from py4j.protocol import Py4JJavaError

        try:
            return self.store.job(job_id)
        except Py4JJavaError:
            self.misses += 1
            raise

    def __getattr__(self, name):
        return getattr(self.store, name)


def run_batch_job(spark, query: str, batch: int, partitions: int) -> None:
    """One job described as a streaming query's batch, its last stage ``partitions`` tasks (a shuffle)."""
    sc = spark.sparkContext
    sc.setJobDescription(f"{query}\nid = 0\nrunId = 0\nbatch = {batch}")
    try:
        sc.parallelize(range(1000), 3).map(lambda x: (x, x)).partitionBy(partitions).count()
    finally:
        sc.setJobDescription(None)


def test_task_times_of_a_batch_without_looking_up_jobs_spark_does_not_hold(spark):
    """Issue 36: the scan asked the store for the job after the newest; the store throws for it, and
    the Java exception through Py4J cost 50–130 ms of every batch on the loaded bench machine.  The
    times of each batch's last stage are read; a batch without a job gives ``None`` after the timeout."""
    from skewlab.engine.runtimes.spark.task_metrics import TaskTimes

    times = TaskTimes(spark, "tasktimes-test", timeout=0.2)
    times._store = CountingStore(times._store)
    run_batch_job(spark, "tasktimes-test", 0, 2)
    run_batch_job(spark, "another-query", 0, 3)
    run_batch_job(spark, "tasktimes-test", 1, 3)
    first, second = times.of_batch(0), times.of_batch(1)
    assert first is not None and sorted(first) == [0, 1] and all(s >= 0 for s in first.values())
    assert second is not None and sorted(second) == [0, 1, 2]
    assert times.of_batch(2) is None  # no such batch: the bounded wait ends
    assert times._store.misses == 0
