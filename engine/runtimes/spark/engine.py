"""``skewlab engine``: a PySpark Structured Streaming query with a swappable grouping and keyed
state on the executors.

The query (:meth:`SparkEngine.start_query`): the source routes each input partition with the
routing snapshot published for the batch (:mod:`skewlab.engine.runtimes.spark.sources`, :mod:`skewlab.engine.runtimes.spark.topology`)
→ ``groupBy(worker label).applyInPandasWithState``: every worker is one task and one state partition,
its sliding-window keyed state is in Spark's RocksDB state store, checkpointed and restored by Spark
with the offsets, and it writes its results to the sink — Parquet files or a Kafka topic
(:mod:`skewlab.engine.runtimes.spark.operator`, :mod:`skewlab.engine.runtimes.spark.result_sink`) →
``foreachBatch`` on the driver.  The number of state partitions is ``--max-workers``, fixed for the
checkpoint's life.

Per micro-batch ``b`` the driver (``foreachBatch``:
:class:`~skewlab.engine.runtimes.spark.batch_driver.BatchDriver`), which keeps statistics, not state, collects
the operator's output and hands it to one pure step (:func:`skewlab.engine.runtimes.spark.driver_step.step`:
``(snapshot, batch output) → (snapshot', decisions)``, steps 2–5 below), then carries out its decisions:

1. runs the batch's operator and collects only statistics: per-(worker, key fingerprint) tuple counts
   (:class:`~skewlab.engine.algorithms.keys.FingerprintVocabulary`), each worker's summary (keys and bytes of state, held
   tuples), the task times from Spark's task metrics, references to the state blobs workers
   exported and the sources' side rows; a batch the restored snapshot already applied is re-run (the
   state must advance with Spark's batch; its exports and result files are identical) and nothing
   is applied (exactly-once, see :mod:`skewlab.engine.io.checkpoint`);
2. the :class:`~skewlab.engine.control.controller.Controller` closes the interval from those statistics: metrics,
   rebalancing plans, and the move orders of the migration path;
3. shadow what-if of the other groupings (:mod:`skewlab.engine.control.shadow`), hot keys;
4. pending operator commands (validated, :mod:`skewlab.engine.control.commands`) are applied: they take effect from
   batch ``b + 1`` (recorded as its ``applied_batch``), whose routing snapshot is published next, and
   their events are numbered with its interval;
5. publishes batch ``b + 1``'s routing snapshot: the grouping's router, every worker's orders (keys to export
   and to whom, keys to expect) and references to the blobs the workers wrote in ``b`` for their new
   workers to import (:mod:`skewlab.engine.runtimes.spark.state_transfer`: the state's bytes go from
   task to task through the checkpoint's filesystem, never through the driver);
6. snapshot to the checkpoint directory, then metrics to the database through the buffered sink
   (:mod:`skewlab.engine.io.metrics_sink`), then one status line.

Migration therefore spans three batches: planned at the end of ``t``; in ``t + 1`` the sources route
moved keys to their new workers, the old workers export the keys' windows and the new ones hold the
keys' tuples; in ``t + 2`` the new workers import the windows, apply the held tuples and emit their
results.  The migration row is recorded when the import completes, with the bytes that crossed and
the pause (batches, milliseconds).

Before a query starts the engine publishes the snapshot of the next batch; Spark's offset log names
the snapshot each batch was planned with, so a replay after a crash routes identically.

Pausing stops the streaming query after the current batch (offsets stay in Spark's checkpoint, no
record is lost) and polls for ``resume``; resuming restarts the query from the checkpoint.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any, Callable

from skewlab.engine.io.checkpoint import SnapshotStore
from skewlab.engine.runtimes.background_warmup import BackgroundWarmup
from skewlab.engine.runtimes.spark.batch_driver import BatchDriver
from skewlab.engine.runtimes.spark.cluster_settings import check_executors, is_local_master
from skewlab.engine.runtimes.spark.driver_memory import limit_retained_memory
from skewlab.engine.runtimes.spark.driver_step import INTERIM_GROUPING, DriverSnapshot
from skewlab.engine.runtimes.spark.engine_config import EngineConfig
from skewlab.engine.runtimes.spark.python_workers import start_python_workers
from skewlab.engine.runtimes.spark.query_lifecycle import EngineFailed, QueryLifecycle, first_line
from skewlab.engine.runtimes.spark.run_start import start_run
from skewlab.shared import UsageError, filesystems

__all__ = ["EngineConfig", "EngineFailed", "SparkEngine"]

# py4j logs every exception our foreachBatch callback raises, with the whole traceback; the engine
# logs its own failures in one line and refuses batches on purpose while stopping.
logging.getLogger("py4j.clientserver").setLevel(logging.CRITICAL)


def _quiet_stream_errors(spark: Any) -> None:
    """Silence Spark's multi-page ERROR for a foreachBatch failure; the engine logs it in one line."""
    try:
        jvm = spark.sparkContext._jvm
        level = jvm.org.apache.logging.log4j.Level.OFF
        for name in ("org.apache.spark.sql.execution.streaming.MicroBatchExecution",
                     "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
                     "org.apache.spark.sql.execution.streaming.StreamExecution"):
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)
    except Exception:  # noqa: BLE001 - logging is cosmetic
        pass


def _capture_library_warnings(path: Path) -> None:
    """Send Python warnings (pyspark's and pandas' FutureWarnings, say) to ``path``, not the console.

    The console carries the engine's status lines only; the warnings are kept in the Spark log.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    logging.captureWarnings(True)
    logger = logging.getLogger("py.warnings")
    if not any(getattr(h, "baseFilename", None) == str(path.resolve()) for h in logger.handlers):
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
    logger.propagate = False


def workers_line(workers: int, partitions: int) -> str:
    """The start line's workers: with room for ``set-workers`` (more state partitions than workers), what
    the room costs and how to drop it.  Every state partition is a task of every batch, used or not
    (``bench/bench_state_partitions.py``)."""
    if partitions <= workers:
        return f"{workers} workers"
    return (f"{workers} workers, room for {partitions} (each of the {partitions} state partitions is a task of "
            f"every batch, used or not: --max-workers {workers} runs faster if the run will not grow)")


class SparkEngine:
    """Defines and runs one run's query: starts (or restores) the run, the numba warm-up child and Spark,
    then hands the query to its lifecycle (:class:`QueryLifecycle`); each batch's work is the
    :class:`BatchDriver`'s."""

    def __init__(self, cfg: EngineConfig, *, log: Callable[[str], None] | None = None,
                 after_batch: Callable[["SparkEngine", int], None] | None = None,
                 spark_log: Path | None = None) -> None:
        """``spark_log``: file for the JVM's own output and for Python warnings, so that the console
        carries the engine's lines only (``skewlab engine``); ``None`` leaves both where they are.
        ``after_batch``: called with ``(engine, batch_id)`` after each applied batch."""
        cfg.validate()
        #: the keyed operator the workers run (pickled to the executors with the query's function)
        self.operator = cfg.keyed_operator()
        self.spark_log = spark_log
        self.cfg = cfg
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.checkpoint = cfg.checkpoint_dir()
        #: the numba warm-up child of :meth:`run` (None outside run(): waiting shadows join at once)
        self.kernels: BackgroundWarmup | None = None
        limit_retained_memory()  # the driver's per-batch temporaries go back to the system when freed
        start = start_run(cfg, self.operator, SnapshotStore(filesystems.join(self.checkpoint, "skewlab")),
                          self.checkpoint, self.log)
        self.store, self.results = start.store, start.results
        #: each batch's work on the driver: statistics, the pure step, routes, snapshots, metrics
        self.driver = BatchDriver(cfg, self.operator, start, self.checkpoint, log=self.log,
                                  kernels_ready=self._kernels_ready,
                                  after_batch=(lambda b: after_batch(self, b)) if after_batch is not None else None)
        #: when the query runs, pauses and stops (:mod:`skewlab.engine.runtimes.spark.query_lifecycle`)
        self.lifecycle = QueryLifecycle(self.driver, cfg, self.log)

    @property
    def snapshot(self) -> DriverSnapshot:
        """The driver's state after the last batch (:attr:`BatchDriver.snapshot`)."""
        return self.driver.snapshot

    def process_batch(self, df: Any, batch_id: int) -> None:
        """The query's ``foreachBatch`` function: the driver's batch (:meth:`BatchDriver.process_batch`),
        refused while the query stops (:meth:`QueryLifecycle.running_batch`); a batch that refuses the
        input stops the run after it."""
        with self.lifecycle.running_batch():
            self.driver.process_batch(df, batch_id)
            if self.driver.input_refused is not None:
                self.lifecycle.stop_requested.set()

    def _kernels_ready(self) -> frozenset[str] | None:
        """The groupings whose kernels are compiled, or ``None`` (all: waiting shadows and an interim
        run's grouping may join) outside :meth:`run` or once the warm-up child has exited: then the
        driver compiles what is left."""
        kernels = self.kernels
        return None if kernels is None or kernels.finished else frozenset(kernels.ready())

    # ------------------------------------------------------------------ the query
    def start_query(self, spark: Any) -> Any:
        """Source (routing in the scan) → ``groupBy(worker label).applyInPandasWithState`` (each
        worker's keyed state in its own state partition, :mod:`skewlab.engine.runtimes.spark.operator`) →
        ``foreachBatch`` (the driver's statistics and planning)."""
        from pyspark.sql import functions as F

        from skewlab.engine.runtimes.spark.labels import worker_labels
        from skewlab.engine.runtimes.spark.operator import STATE_SCHEMA, make_handler, out_schema
        from skewlab.engine.runtimes.spark.session import configure_state_store
        from skewlab.engine.runtimes.spark.topology import combined_schema, combiner_bytes

        fmt, opts = self.cfg.source_options()
        opts["route_dir"] = str(self.driver.routes.dir)  # the sources route (skewlab.engine.runtimes.spark.sources)
        opts["route_values"] = self.cfg.value_kind(self.operator)  # each tuple's value, for the operator
        P = self.snapshot.partitions
        configure_state_store(spark, P)
        module = sys.modules.get(type(self.operator).__module__)
        if module is not None and not module.__name__.startswith("skewlab."):
            # a user's operator travels with the handler by value: its module need not be importable
            # on the executors (Spark pickles the handler with its own cloudpickle)
            from pyspark import cloudpickle

            cloudpickle.register_pickle_by_value(module)
        if self.cfg.combine and self.operator.combined is not None:
            opts["route_combined"] = combined_schema(self.operator)  # a row per (key, worker) of a source task
            # the operator the source tasks combine with, once per query (not in each batch's snapshot);
            # after the registration above: a user's combiner pickles by value
            opts["route_combiner"] = self.driver.routes.publish_combiner(combiner_bytes(self.operator))
        self.driver.publish_route(self.snapshot.last_batch + 1)
        labels = F.array(*[F.lit(v) for v in worker_labels(P)])
        routed = spark.readStream.format(fmt).options(**opts).load()
        out = (routed.withColumn("label", F.element_at(labels, F.col("worker") + 1))  # data and message rows alike
               .groupBy("label")
               .applyInPandasWithState(make_handler(P, self.cfg.window, self.results, self.operator, named=self.cfg.top_k,
                                                    service_us=self.cfg.service_us, migrations=self.driver.migrations.directory),
                                       out_schema(self.operator), STATE_SCHEMA, "append", "NoTimeout"))
        return (
            out.writeStream.outputMode("append").foreachBatch(self.process_batch)
            .option("checkpointLocation", filesystems.spark_location(filesystems.join(self.checkpoint, "spark")))
            .trigger(processingTime=f"{self.cfg.interval} seconds")
            .queryName(f"skewlab-{self.snapshot.run_id}")
            .start()
        )

    def _compiling_notice(self, shadows: list[str]) -> Callable[[str], None]:
        """What the console says when the background warm-up starts compiling a grouping's kernels (a
        cold numba cache: the first run after a plain install): one line for a grouping the run routes
        by, one for the first shadow.  A start that only loads the cache says nothing about compiling."""
        said_shadows = False

        def notice(name: str) -> None:
            nonlocal said_shadows
            if name not in shadows:
                self.log(f"routing kernels: compiling {name} in the background (numba, once per install; later "
                         "runs load them from the cache in seconds)")
            elif not said_shadows:
                said_shadows = True
                self.log(f"routing kernels: compiling the shadow groupings' kernels in the background ({name} "
                         "first); each joins the what-if when ready")
        return notice

    def run(self) -> int:
        """Run until ``--duration`` passes, ``max_batches`` are done or Ctrl-C; returns an exit status.
        Warm-up and Spark start-up (:meth:`_start_spark`), then the query runs
        (:meth:`QueryLifecycle.drive`); the run's status is recorded however it ends."""
        if self.spark_log is not None:
            _capture_library_warnings(self.spark_log)
        status, reason = "finished", None
        try:
            self.lifecycle.interrupt_on_sigterm()
            spark = self._start_spark()
            self.lifecycle.stop_on_signals()
            self.driver.mark_run("running")  # a restored run is running again
            self.log(f"run {self.snapshot.run_id}: {self.snapshot.controller.planner.name} on {self.cfg.source}, "
                     f"{workers_line(self.snapshot.controller.n_workers, self.snapshot.partitions)}, "
                     f"master {spark.sparkContext.master}, "
                     f"checkpoint {self.checkpoint}, db {self.store.url}"
                     + (f", Spark log {self.spark_log}" if self.spark_log is not None else ""))
            self.lifecycle.drive(lambda: self.start_query(spark))
        except KeyboardInterrupt:
            status = "stopped"
        except BaseException as exc:
            status, reason = "failed", first_line(exc)
            raise
        finally:
            status = self._finish(status, reason)
        self.log(f"run {self.snapshot.run_id} {status} after {self.driver.batches_done} batch(es)")
        if self.driver.input_refused is not None:
            raise UsageError(self.driver.input_refused)
        return 0

    def _start_spark(self) -> Any:
        """Start the numba warm-up child and the Spark session; wait for the live grouping's kernels
        or, for a new run whose grouping still compiles, route by :data:`INTERIM_GROUPING` meanwhile
        (unless ``--wait-for-kernels``).  Returns the session."""
        from skewlab.engine.runtimes.spark.session import get_session

        live = self.snapshot.controller.planner.name
        waiting = list(self.snapshot.shadow.waiting) if self.snapshot.shadow is not None else []
        stop = self.lifecycle.stop_requested
        # a new run may route by the interim grouping while the live one compiles: its kernels first
        interim = (not self.cfg.wait_for_kernels and self.snapshot.last_batch < 0 and self.snapshot.interim is None
                   and live != INTERIM_GROUPING)
        asked = [self.snapshot.interim[0]] if self.snapshot.interim is not None else []  # restored mid-interim
        self.kernels = BackgroundWarmup([*([INTERIM_GROUPING] if interim else []), live, *asked, *waiting],
                                        on_compiling=self._compiling_notice(waiting))
        started = time.monotonic()
        spark = get_session(self.cfg.master, f"skewlab-engine-{self.snapshot.run_id}", jvm_output=self.spark_log,
                            **self.cfg.spark_conf)
        if not is_local_master(spark.sparkContext.master):
            check_executors(spark)  # one line, not a hung query, when the executors cannot run skewlab
        _quiet_stream_errors(spark)
        spark_up = time.monotonic()
        start_python_workers(spark)  # while the driver waits for kernels / builds the query
        # route by the interim grouping only if the live one really compiles (not: its cached kernels
        # are still loading, as when Spark was up already)
        waiting_live = not (self.kernels.wait_until_known(live, stop) if interim else live in self.kernels.ready())
        if waiting_live and interim:
            self.log(f"Spark started in {spark_up - started:.0f} s; the routing kernels of {live} are still "
                     f"compiling (numba, once per install): routing by {INTERIM_GROUPING} until they are ready, "
                     f"then switching to {live} (--wait-for-kernels waits instead)")
            self.driver.route_by_interim_grouping()
            live, waiting_live = INTERIM_GROUPING, INTERIM_GROUPING not in self.kernels.ready()
        else:
            self.log(f"Spark started in {spark_up - started:.0f} s"
                     + (f"; waiting for the routing kernels of {live} …" if waiting_live else ""))
        self.kernels.wait_for(live, stop, progress=lambda waited: self.log(
            f"still compiling the routing kernels of {live} ({waited:.0f} s; numba, once per install)"))
        if waiting_live:
            self.log(f"routing kernels of {live} ready {time.monotonic() - spark_up:.0f} s later")
        return spark

    def _finish(self, status: str, reason: str | None) -> str:
        """However the run ended: close the warm-up child, flush the metrics, record the run's status
        (``failed`` when its input was refused, ``stopped`` when interrupted; returned) and give the
        signals back."""
        if self.driver.input_refused is not None and status != "failed":
            status, reason = "failed", self.driver.input_refused
        if self.lifecycle.interrupted and status != "failed":
            status = "stopped"
        if self.kernels is not None:
            self.kernels.close()
        if not self.driver.sink.flush(force=True):
            self.log(f"warning: {self.driver.sink.backlog} interval(s) not yet written; they are kept in the snapshot "
                     "and written on the next start")
        try:
            self.store.finish_run(self.snapshot.run_id, status, note=reason)
        except Exception:  # noqa: BLE001
            pass
        self.lifecycle.restore_signals()
        return status

