"""Per-worker task time of a micro-batch, from Spark's own task metrics.

Spark keeps the metrics of every task (``executorRunTime``: milliseconds the task ran on an
executor, deserialisation, shuffle read, the Python worker and the state store commit included) in
the application status store that feeds its web UI; the store is kept with the UI switched off.
Each micro-batch of the engine runs one job — the driver's ``toArrow`` of the operator's output in
``foreachBatch`` — described by Spark as ``<query name>\\nid = …\\nrunId = …\\nbatch = <id>``; its
last stage is the stateful operator with one task per state partition, whose task index is the
partition and so the worker (:mod:`skewlab.engine.runtimes.spark.labels`).  A run with split keys
then runs a second job with the same description, the merge stage
(:mod:`skewlab.engine.runtimes.spark.share_merge`), whose tasks are not workers; its description
ends with :data:`MERGE_JOB_MARK`, and it is skipped.

The status store is reached through the JVM (``SparkContext.statusStore``, internal to Spark but
public in its bytecode).  Whether a job exists is asked of Spark's public status tracker
(``getJobInfo``, an ``Option``), never by asking the store for it: the store throws for a job it does not
hold, and a Java exception through Py4J costs 18–26 ms in a quiet session; the scan that ended in one took
50–135 ms of every batch on the loaded bench machine (docs/results/engine.md, issue 36).  Events reach the store asynchronously: :meth:`TaskTimes.of_batch` waits
(a short, bounded poll) until the batch's job is recorded as finished and returns ``None`` when it
is not, so a missing figure never stalls or fails a batch.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["MERGE_JOB_MARK", "TaskTimes"]

#: the end of the description of a batch's merge-stage job (set by share_merge.merge_in_spark)
MERGE_JOB_MARK = "\nmerge stage"


class TaskTimes:
    """Reads the stateful stage's task times of the batches of one streaming query.

    ``spark``: the session; ``query_name``: the query's name (the first line of its jobs'
    descriptions); ``timeout``: seconds to wait for a batch's job to be recorded."""

    def __init__(self, spark: Any, query_name: str, timeout: float = 1.0) -> None:
        self._store = spark.sparkContext._jsc.sc().statusStore()
        self._tracker = spark.sparkContext._jsc.sc().statusTracker()
        self._prefix = f"{query_name}\n"
        self._timeout = float(timeout)
        self._next_job = 0
        self._jobs: dict[int, tuple[int, str]] = {}  # batch -> (job id, status) of the query's jobs seen

    def _scan(self) -> None:
        """Record the query's jobs created since the last scan (job ids are consecutive)."""
        while self._tracker.getJobInfo(self._next_job).isDefined():
            job = self._store.job(self._next_job)
            desc = job.description()
            text = str(desc.get()) if desc.isDefined() else ""
            if text.startswith(self._prefix) and "\nbatch = " in text:
                batch = int(text.rsplit("\nbatch = ", 1)[1].split()[0])
                status = str(job.status())
                if status in ("RUNNING", "UNKNOWN"):
                    return  # look at this job again at the next scan
                if not text.endswith(MERGE_JOB_MARK):  # the merge stage's tasks are not the workers
                    self._jobs[batch] = (self._next_job, status)
            self._next_job += 1

    def of_batch(self, batch_id: int) -> dict[int, float] | None:
        """Seconds each task of batch ``batch_id``'s stateful stage ran (task index → seconds), or
        ``None`` when Spark has not recorded the batch's job as succeeded within the timeout."""
        deadline = time.monotonic() + self._timeout
        while True:
            self._scan()
            if batch_id in self._jobs or time.monotonic() >= deadline:
                break
            time.sleep(0.005)
        job_id, status = self._jobs.pop(batch_id, (None, None))
        for b in [b for b in self._jobs if b < batch_id]:
            del self._jobs[b]
        if job_id is None or status != "SUCCEEDED":
            return None
        stages = self._store.job(job_id).stageIds()
        stage = max(int(stages.apply(i)) for i in range(stages.size()))
        attempt = self._store.lastStageAttempt(stage)
        tasks = self._store.taskList(stage, attempt.attemptId(), attempt.numTasks())
        out: dict[int, float] = {}
        for i in range(tasks.size()):
            task = tasks.apply(i)
            metrics = task.taskMetrics()
            if str(task.status()) == "SUCCESS" and metrics.isDefined():
                out[int(task.index())] = metrics.get().executorRunTime() / 1000.0
        return out
