"""The driver's side of each micro-batch of ``skewlab engine``: the query's ``foreachBatch`` work, and the
commands applied while the query is paused.

Per batch ``b`` (:meth:`BatchDriver.process_batch`):

1. :meth:`~BatchDriver.collect` runs the batch's operator and collects its statistics
   (:func:`skewlab.engine.runtimes.spark.operator.unpack_output`); when workers sent shares of split keys,
   the merge stage writes their results: on the driver from the same collect when the previous batch's
   merge was small (:func:`skewlab.engine.runtimes.spark.share_merge.merge_on_driver`), else in a second
   Spark job on the executors (:func:`skewlab.engine.runtimes.spark.share_merge.merge_in_spark`);
2. the pure step (:func:`skewlab.engine.runtimes.spark.driver_step.step`) turns (snapshot, batch output,
   pending commands, task times) into (snapshot', decisions); a batch the snapshot already applied (a replay
   after a crash) is run by the workers but applied to nothing;
3. the decisions are carried out in an order that loses nothing on a crash: batch ``b + 1``'s routing
   snapshot is published (:class:`skewlab.engine.runtimes.spark.sources.RouteFiles`), then the driver's
   snapshot saved to the checkpoint (:class:`skewlab.engine.io.checkpoint.SnapshotStore`, with the metric
   intervals not yet written), then the migration files older than the window pruned, the metrics written
   through the buffered sink, and one status line logged;
4. a batch whose records are nearly all dead letters for one reason refuses the input
   (:attr:`BatchDriver.input_refused`, :mod:`skewlab.engine.runtimes.spark.dead_batch`); the engine then
   stops the run after this batch.

While the query is paused (:meth:`BatchDriver.while_paused`) the pending commands are applied between
batches and take effect from the next one; a run paused by back-pressure (the metrics database down and
its buffer full) resumes when the database takes the buffered intervals.

The class keeps the driver's statistics (:class:`~skewlab.engine.runtimes.spark.driver_step.DriverSnapshot`),
never the workers' state; :class:`skewlab.engine.runtimes.spark.engine.SparkEngine` defines and runs the query.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable, Mapping

from skewlab.engine.control.metrics import format_rate
from skewlab.engine.io.checkpoint import SnapshotStore
from skewlab.engine.io.metrics_sink import PendingInterval
from skewlab.engine.operators import KeyedOperator
from skewlab.engine.runtimes.spark import batch_phases
from skewlab.engine.runtimes.spark.driver_memory import release_unused
from skewlab.engine.runtimes.spark.driver_step import (INTERIM_GROUPING, DriverSettings, DriverSnapshot, StepInput,
                                                       already_applied, apply_commands, next_route, step)
from skewlab.engine.runtimes.spark.engine_config import EngineConfig
from skewlab.engine.runtimes.spark.engine_snapshot import EngineSnapshot
from skewlab.engine.runtimes.spark.messages import BatchOutput
from skewlab.engine.runtimes.spark.query_lifecycle import first_line
from skewlab.engine.runtimes.spark.run_start import StartedRun, stream_of
from skewlab.engine.runtimes.spark.state_transfer import MigrationFiles
from skewlab.shared import filesystems
from skewlab.storage.records import IntervalRecord


__all__ = ["BatchDriver", "status_line"]


def status_line(batch_id: int, row: Mapping[str, Any], record: IntervalRecord, dead: Mapping[str, Any], *,
                sink_status: str = "", paused: bool = False) -> str:
    """The console's line for an applied batch: grouping, workers, tuples, imbalance, replication, routing
    table size, migration cost, throughput, latency, dead letters, the metrics sink, ``PAUSED``."""
    parts = [
        f"batch {batch_id}", f"{row['algorithm']}", f"n={row['workers']}", f"tuples={row['tuples']}",
        f"imbalance={row['imbalance']:.3f}", f"repl={row['replication']:.2f}" if row["tuples"] else "repl=–",
        f"|A|={row['routing_table_size']}", f"migr={row['migration_cost']:.3f}",
        format_rate(record.throughput), f"latency={record.batch_latency_ms:.0f}ms",
    ]
    if dead:
        parts.append(f"dead={sum(v[0] for v in dead.values())}")
    parts.append(sink_status)
    if paused:
        parts.append("PAUSED")
    return " | ".join(parts)


class BatchDriver:
    """The driver's per-batch work of one run; see the module's docstring.

    ``started``: the restored or new run (:func:`skewlab.engine.runtimes.spark.run_start.start_run`);
    ``kernels_ready``: the groupings whose routing kernels are compiled, or ``None`` for all (the engine's
    numba warm-up child); ``after_batch``: called with the batch's id after each applied batch (its failure
    fails the batch).
    """

    def __init__(self, cfg: EngineConfig, operator: KeyedOperator, started: StartedRun, checkpoint: str, *,
                 log: Callable[[str], None], kernels_ready: Callable[[], frozenset[str] | None] = lambda: None,
                 after_batch: Callable[[int], None] | None = None) -> None:
        from skewlab.engine.runtimes.spark.sources import RouteFiles

        self.cfg = cfg
        self.operator = operator
        self.log = log
        self.kernels_ready = kernels_ready
        self.after_batch = after_batch
        self.store, self.results, self.sink = started.store, started.results, started.sink
        #: the driver's state after the last batch: the input of the next step (driver_step)
        self.snapshot: DriverSnapshot = started.snapshot
        self.snapshot.controller.track_orders = True
        #: what the step needs of the configuration (driver_step)
        self.settings = DriverSettings(operator.name, operator.mergeable, values=cfg.value_kind(operator),
                                       top_k=cfg.top_k)
        self.snapshots = SnapshotStore(filesystems.join(checkpoint, "skewlab"))
        self.routes = RouteFiles(filesystems.join(checkpoint, "routes"))
        #: where exporting tasks write migrated state for the importing tasks (state_transfer)
        self.migrations = MigrationFiles(filesystems.join(checkpoint, "migrations"))
        self.batches_done = 0
        #: why the run stops on its input (:mod:`skewlab.engine.runtimes.spark.dead_batch`), or None
        self.input_refused: str | None = None
        #: what failed in this batch function, if anything (its message beats Spark's wrapper)
        self.batch_error: BaseException | None = None
        self._backpressure = False
        #: the merge-stage rows the last collected batch's workers announced (where the next merge runs)
        self._merge_rows_last = 0
        self._task_times: Any = None  # task_metrics.TaskTimes, made at the first batch (it needs the session)

    @property
    def paused(self) -> bool:
        return self.snapshot.paused

    @paused.setter
    def paused(self, value: bool) -> None:
        self.snapshot = replace(self.snapshot, paused=bool(value))

    # ------------------------------------------------------------------ one micro-batch
    def process_batch(self, df: Any, batch_id: int) -> None:
        """One batch (see the module's docstring); a failure is kept in :attr:`batch_error`, logged in one
        line and raised (Spark fails the query; the batch is not committed and is replayed on restart)."""
        batch_phases.reached("begun", batch_id, imports=bool(self.snapshot.next_imports) and batch_id == self.snapshot.last_batch + 1)
        try:
            applied = self.apply(df, batch_id)
            release_unused()  # the batch's Arrow buffers are free once apply returned
            if applied and self.after_batch is not None:
                self.after_batch(batch_id)
        except Exception as exc:
            self.batch_error = exc
            self.log(f"batch {batch_id} failed: {type(exc).__name__}: {first_line(exc)}")
            raise

    def collect(self, df: Any, batch_id: int) -> BatchOutput:
        """Run the batch's operator: collect its statistics (:func:`~skewlab.engine.runtimes.spark.operator.unpack_output`)
        and, if workers sent shares, run the merge stage that writes the results.  While the last batch's
        workers announced at most :data:`~skewlab.engine.runtimes.spark.share_merge.SMALL_MERGE` merge-stage
        rows, the batch's one collect brings them too and the driver merges them
        (:func:`~skewlab.engine.runtimes.spark.share_merge.merge_on_driver`); after a larger merge the
        operator output is persisted, its statistics collected, and the merge stage runs as a second job on
        the executors (:func:`~skewlab.engine.runtimes.spark.share_merge.merge_in_spark`), the stateful
        stage running once."""
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark.sql import functions as F

        from skewlab.engine.runtimes.spark.operator import MERGE_KINDS, unpack_output
        from skewlab.engine.runtimes.spark.share_merge import (MERGE_COLUMNS, SMALL_MERGE, merge_in_spark,
                                                               merge_on_driver, writer_column)

        P = self.snapshot.partitions
        if self._merge_rows_last <= SMALL_MERGE:
            table = df.withColumn("writer", writer_column(P)).toArrow()
            merging = pc.is_in(table.column("kind"), pa.array(MERGE_KINDS, table.schema.field("kind").type))
            # the collected table is freed here: only its numeric columns live on
            u = unpack_output(table.filter(pc.invert(merging)).drop_columns(["writer"]))
            rows = table.filter(merging).select([c for c in MERGE_COLUMNS if c in table.column_names] + ["writer"])
            del table
            if rows.num_rows:
                merge_on_driver(rows, batch_id, self.results, self.operator)
            self._merge_rows_last = sum(s.shares for s in u.summaries.values())
            return u
        df = df.persist()
        try:
            u = unpack_output(df.filter(~F.col("kind").isin(*MERGE_KINDS)).toArrow())
            self._merge_rows_last = sum(s.shares for s in u.summaries.values())
            if self._merge_rows_last:
                merge_in_spark(df, batch_id, P, self.results, self.operator, rows_announced=self._merge_rows_last)
        finally:
            df.unpersist()
        return u

    def apply(self, df: Any, batch_id: int) -> bool:
        """Collect → :func:`driver_step.step` → publish, save, prune, record.  The workers' operator
        always runs, also for a batch the snapshot already applied (the state must advance with Spark's
        batch; its exports and result files are the same as the first time): the step applies nothing
        then.  Returns whether the batch was applied."""
        t0 = time.perf_counter()
        output = self.collect(df, batch_id)
        replay = already_applied(self.snapshot, batch_id)
        moves = dict(exports=bool(output.exports), imports=bool(self.snapshot.next_imports))  # this batch's, for the hook
        if not replay:
            batch_phases.reached("collected", batch_id, **moves)
        data = StepInput(
            batch_id, output, started=t0, clock=time.perf_counter, wall=time.time(),
            commands=() if replay else self.pending_commands(),
            task_seconds={} if replay else self._task_seconds(df, batch_id),
            kernels_ready=self.kernels_ready(), backpressure=self._backpressure)
        # the old snapshot is dropped: the step may update it in place (a failed step fails the query,
        # and a restart restores the saved snapshot)
        self.snapshot, decisions = step(self.snapshot, data, self.settings, owned=True)
        for line in decisions.log:
            self.log(line)
        if decisions.already_applied:
            return False
        self.batches_done += 1
        marks = [(m.command_id, m.status, m.reason, m.applied_batch) for m in decisions.marks]
        self.sink.enqueue(PendingInterval(decisions.record, marks))
        # The next batch's routing snapshot, then our snapshot (it holds the unwritten rows, so
        # nothing is lost on a crash; rows already written are re-sent idempotently after a
        # restart), then the database.
        self.routes.publish(batch_id + 1, decisions.route.snapshot.dumps(), flush=decisions.route.flush)
        batch_phases.reached("published", batch_id, **moves)
        self.save(batch_id)
        batch_phases.reached("saved", batch_id, **moves)
        self.migrations.note(output.exports)
        self.migrations.prune(decisions.prune_before)
        if not self.sink.flush() and self.sink.full and not self.paused:
            # Back-pressure: never drop metric rows; stop consuming until the database is back.
            self.paused = self._backpressure = True
            self.log(f"metrics buffer full ({self.sink.backlog} intervals): pausing consumption until the database is back")
        self.log(status_line(batch_id, decisions.row, decisions.record, output.dead_letters,
                             sink_status=self.sink.status, paused=self.paused))
        if not self.cfg.continue_on_dead_letters and self.input_refused is None:
            from skewlab.engine.runtimes.spark.dead_batch import input_refusal

            self.input_refused = input_refusal(self.cfg, batch_id, output.dead_letters, int(decisions.row["tuples"]))
        return True

    def _task_seconds(self, df: Any, batch_id: int) -> dict[int, float]:
        """Run time of each worker's task in this batch from Spark's task metrics
        (:mod:`skewlab.engine.runtimes.spark.task_metrics`); empty when Spark has not recorded them."""
        from skewlab.engine.runtimes.spark.task_metrics import TaskTimes

        if self._task_times is None:
            self._task_times = TaskTimes(df.sparkSession, f"skewlab-{self.snapshot.run_id}")
        times = self._task_times.of_batch(batch_id)
        if times is None:
            self.log(f"batch {batch_id}: Spark has not recorded its task metrics in time; worker task times left empty")
            return {}
        return times

    # ------------------------------------------------------------------ routes and snapshots
    def publish_route(self, batch_id: int) -> None:
        """Publish the routing snapshot the sources use for ``batch_id`` (:func:`driver_step.next_route`;
        see skewlab.engine.runtimes.spark.sources), outside a step: before a query starts and after
        commands applied while paused, adding their orders to what is already published."""
        self.snapshot, route = next_route(self.snapshot, batch_id, self.settings)
        self.routes.publish(batch_id, route.snapshot.dumps(), flush=route.flush)

    def save(self, batch_id: int) -> None:
        """Write the snapshot of ``batch_id`` (:class:`EngineSnapshot`: the driver's state and the
        metric intervals not yet in the database) to the checkpoint."""
        self.snapshots.save(batch_id, EngineSnapshot(self.snapshot, stream=stream_of(self.cfg, self.store),
                                                     sink=self.results.url, sink_start=self.results.start,
                                                     pending=tuple(self.sink.pending())).encode())

    def route_by_interim_grouping(self) -> None:
        """Before the run's first batch: switch to :data:`INTERIM_GROUPING` (nothing is routed yet, so no
        state moves) and keep the grouping asked for in the snapshot; the driver step switches to it
        when its kernels are compiled.  Recorded with the first interval as an ``algorithm`` event."""
        c = self.snapshot.controller
        asked = c.planner.name, dict(c.planner.p)
        detail = {k: v for k, v in c.switch(INTERIM_GROUPING).items() if k not in ("interval", "kind")}
        detail["reason"] = f"the routing kernels of {asked[0]} are compiling"
        event = {"kind": "algorithm", "detail": detail, "command_id": None, "interval": c.interval}
        self.snapshot = replace(self.snapshot, interim=asked, carry_events=(*self.snapshot.carry_events, event))

    # ------------------------------------------------------------------ commands, paused
    def mark_run(self, status: str) -> None:
        """The run's status in the database (``running``, ``paused``); the database may be down."""
        try:
            self.store.update_run(self.snapshot.run_id, status=status)
        except Exception:  # noqa: BLE001 - metrics are buffered anyway
            pass

    def pending_commands(self) -> tuple[dict[str, Any], ...] | None:
        """The run's pending operator commands, or ``None`` when the database cannot be read."""
        try:
            return tuple(self.store.pending_commands(self.snapshot.run_id))
        except Exception as exc:  # noqa: BLE001 - database down: no commands this batch
            self.log(f"cannot read commands: {type(exc).__name__}")
            return None

    def apply_commands(self, batch_id: int) -> tuple[list[tuple[int, str, str | None]], list[dict[str, Any]]]:
        """Apply the pending operator commands between batches (the query paused); they take effect
        from batch ``batch_id`` (:func:`driver_step.apply_commands`).  Returns (command marks, events
        without interval)."""
        self.snapshot, marks, events, lines = apply_commands(
            self.snapshot, self.pending_commands(), batch_id, self.settings, backpressure=self._backpressure)
        for line in lines:
            self.log(line)
        return [(m.command_id, m.status, m.reason) for m in marks], events

    def while_paused(self) -> None:
        """One poll of a paused run (:meth:`QueryLifecycle.wait_resume`): paused by back-pressure, resume
        once the metrics database takes the buffered intervals; else apply the pending commands (they
        take effect from the next batch) and save the snapshot if any was applied or rejected."""
        if self._backpressure:
            if self.sink.flush(force=True):
                self.paused = self._backpressure = False
                self.log("metrics database back: resuming consumption")
            return
        last = self.snapshot.last_batch
        marks, events = self.apply_commands(last + 1)
        self.snapshot = replace(self.snapshot, carry_events=(*self.snapshot.carry_events, *events))
        for cid, status, reason in marks:
            try:
                self.store.mark_command(cid, status, reason=reason or "", applied_batch=last + 1,
                                        run_id=self.snapshot.run_id)
            except Exception:  # noqa: BLE001
                pass
        if marks:
            self.save(last)
