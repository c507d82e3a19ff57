"""SQLAlchemy 2 declarative models: the schema the engine writes and the dashboard reads.

One table per kind of record of the "Storage" part of the issue:

=====================  ==========================================================================
table                  contents (primary key)
=====================  ==========================================================================
``runs``               one run: name, algorithm, params, seed, workers, workload, config snapshot
``interval_metrics``   per-interval run metrics, every core metric as a column ((run, batch))
``worker_metrics``     per-interval per-worker tuples, cost, distinct keys, state, processing time,
                       serialized state bytes ((run, batch, worker))
``routing_sizes``      routing-table size A per interval: entries, bytes, limit ``amax`` ((run, batch))
``migration_events``   migrations executed in a batch: keys, state moved, serialized bytes moved,
                       pause in ms and in held micro-batches ((run, batch, seq))
``hot_keys``           top-k keys of an interval: share, count, destination workers
                       ((run, batch, rank))
``shadow_results``     what-if: imbalance / replication / migration another grouping would have
                       had on the same interval ((run, batch, algorithm))
``events``             algorithm / parameter / worker changes, pause, resume, ... (id)
``dead_letters``       malformed input records: count and a bounded sample ((run, reason))
``dead_letter_batches``  which (run, batch, reason) dead-letter counts were already added, and how many
                       (schema 5); makes :meth:`skewlab.storage.store.Store.record_dead_letters`
                       idempotent per batch and gives the dashboard the count per interval and reason
``commands``           operator commands: kind, JSON payload, status, reason, applied batch (id)
``skewlab_meta``       ``schema_version``
=====================  ==========================================================================

Design decisions (the issue fixes the contents, not the layout):

* **Idempotency by (run, batch)** is carried by the primary keys: every per-batch table has
  ``(run_id, batch_id, …)`` as its primary key, so a replayed Spark micro-batch cannot add rows.
  ``interval_metrics`` is the *gate*: :meth:`~skewlab.storage.store.Store.record_interval` inserts it with
  ``ON CONFLICT DO NOTHING`` first and writes the other rows only when that insert took effect.
* **Incremental dashboard reads**: index ``(run_id, interval)`` on every per-interval table.
* **Times** are epoch seconds (``DOUBLE PRECISION``), portable and what the engine measures.
* **JSON** (params, config, payloads, worker lists, samples) is stored as JSON *text* (``TEXT``),
  the same on SQLite and PostgreSQL; nothing in it is ever interpreted by the database.
* **Non-finite floats** (NaN, ±inf) are stored as NULL: SQLite turns NaN into NULL anyway, and JSON
  export cannot carry them, so both backends behave the same.
* **Fingerprints** are ``uint64``, which does not fit a signed ``BIGINT``; hot keys store them as
  16 lowercase hex digits.
* Children reference ``runs.id`` with ``ON DELETE CASCADE`` (foreign keys are switched on for
  SQLite by :mod:`skewlab.storage.db`).
* **Schema versions** (``skewlab_meta.schema_version``, :data:`SCHEMA_VERSION`): a database written
  by an older version is upgraded in place when it is opened (:meth:`skewlab.storage.store.Store.create_schema`)
  by adding the nullable columns listed in :data:`ADDED_COLUMNS`; rows written before keep NULL there.
  Version 2 added ``worker_metrics.state_bytes``, ``migration_events.bytes_moved`` and
  ``migration_events.pause_batches``; version 3 added ``interval_metrics.params`` (the parameters of
  the interval's algorithm as they were when it routed the interval; NULL in older rows); version 4
  ``migration_events.planned_interval``; version 5 ``dead_letter_batches.count`` (the dead letters of
  that batch and reason; NULL in older rows).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Double,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = [
    "ADDED_COLUMNS",
    "Base",
    "COMMAND_STATUSES",
    "Command",
    "DeadLetter",
    "DeadLetterBatch",
    "Event",
    "HotKey",
    "IntervalMetric",
    "Meta",
    "MigrationEvent",
    "RUN_STATUSES",
    "RoutingSize",
    "Run",
    "SCHEMA_VERSION",
    "ShadowResult",
    "WorkerMetric",
    "INTERVAL_METRIC_COLUMNS",
]

SCHEMA_VERSION = 5

#: Command lifecycle: ``pending`` → ``applied`` | ``rejected`` (with a reason).
COMMAND_STATUSES: tuple[str, ...] = ("pending", "applied", "rejected")
#: Run lifecycle.
RUN_STATUSES: tuple[str, ...] = ("running", "paused", "finished", "failed", "stopped")



def _run_fk() -> ForeignKey:
    """A new ``runs.id`` foreign key (a ForeignKey object belongs to exactly one column)."""
    return ForeignKey("runs.id", ondelete="CASCADE")


class Base(DeclarativeBase):
    """Declarative base of every skewlab table."""


class Meta(Base):
    """Key/value facts about the database itself (``schema_version``)."""

    __tablename__ = "skewlab_meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class Run(Base):
    """One run of the engine (or of a benchmark): what was started, with which configuration.

    ``algorithm``/``params``/``n_workers`` are the values at start (and are updated by
    :meth:`~skewlab.storage.store.Store.update_run` when an operator changes them); the value in force in a
    given interval is in :class:`IntervalMetric`.  ``config`` is the full configuration snapshot
    (JSON text) so a run can be reproduced; ``seed`` is the run's random seed.
    """

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(Text, default="")
    algorithm: Mapped[str] = mapped_column(String(64))
    params: Mapped[str] = mapped_column(Text, default="{}")
    seed: Mapped[int] = mapped_column(BigInteger, default=0)
    n_workers: Mapped[int | None] = mapped_column(Integer, nullable=True)
    workload: Mapped[str] = mapped_column(Text, default="")
    config: Mapped[str] = mapped_column(Text, default="{}")
    status: Mapped[str] = mapped_column(String(16), default="running")
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Double)
    updated_at: Mapped[float] = mapped_column(Double)
    finished_at: Mapped[float | None] = mapped_column(Double, nullable=True)

    __table_args__ = (Index("ix_runs_status", "status"),)


class IntervalMetric(Base):
    """Per-interval run metrics; one row per (run, batch); every core metric is a column.

    * ``imbalance`` = max L / mean L − 1;
    * ``theta_max_observed`` = max_d |L(d) − L̄| / L̄ (Fang et al., Eq. 1, the quantity bounded by θmax);
    * ``seeds_imbalance`` = max − average of the normalised load (Nasir et al. "PKG", λ(t));
    * ``load_variance`` / ``load_stddev`` of the per-worker load;
    * ``replication`` = mean number of distinct workers per key (1 for single-owner groupings);
    * ``routing_table_size`` = |A|; ``migration_cost`` = moved state / total state;
    * ``plan_seconds`` (controller), ``tuples_per_second`` (routing speed), ``throughput``
      (end-to-end tuples/s), ``batch_latency_ms``.

    ``extra`` is JSON text for anything else the engine wants to keep (never queried by SQL).
    """

    __tablename__ = "interval_metrics"

    run_id: Mapped[int] = mapped_column(_run_fk(), primary_key=True)
    batch_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    interval: Mapped[int] = mapped_column(BigInteger)
    wall_time: Mapped[float] = mapped_column(Double)
    tuples: Mapped[int] = mapped_column(BigInteger, default=0)
    algorithm: Mapped[str] = mapped_column(String(64))
    n_workers: Mapped[int | None] = mapped_column(Integer, nullable=True)
    imbalance: Mapped[float | None] = mapped_column(Double, nullable=True)
    theta_max_observed: Mapped[float | None] = mapped_column(Double, nullable=True)
    seeds_imbalance: Mapped[float | None] = mapped_column(Double, nullable=True)
    load_variance: Mapped[float | None] = mapped_column(Double, nullable=True)
    load_stddev: Mapped[float | None] = mapped_column(Double, nullable=True)
    replication: Mapped[float | None] = mapped_column(Double, nullable=True)
    routing_table_size: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    migration_cost: Mapped[float | None] = mapped_column(Double, nullable=True)
    plan_seconds: Mapped[float | None] = mapped_column(Double, nullable=True)
    tuples_per_second: Mapped[float | None] = mapped_column(Double, nullable=True)
    throughput: Mapped[float | None] = mapped_column(Double, nullable=True)
    batch_latency_ms: Mapped[float | None] = mapped_column(Double, nullable=True)
    feasible: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    note: Mapped[str] = mapped_column(Text, default="")
    extra: Mapped[str] = mapped_column(Text, default="{}")
    #: JSON object: the parameters of ``algorithm`` in force for this interval (None: not recorded)
    params: Mapped[str | None] = mapped_column(Text, nullable=True)

    __table_args__ = (Index("ix_interval_metrics_run_interval", "run_id", "interval"),)


#: Metric columns of ``interval_metrics`` (besides the key columns): the metric fields of
#: :class:`skewlab.storage.records.IntervalRecord`.
INTERVAL_METRIC_COLUMNS: tuple[str, ...] = (
    "tuples",
    "algorithm",
    "n_workers",
    "imbalance",
    "theta_max_observed",
    "seeds_imbalance",
    "load_variance",
    "load_stddev",
    "replication",
    "routing_table_size",
    "migration_cost",
    "plan_seconds",
    "tuples_per_second",
    "throughput",
    "batch_latency_ms",
    "feasible",
    "note",
)


class WorkerMetric(Base):
    """Per-interval per-worker metrics: tuples, cost (load L(d)), distinct keys, state size S, time.

    ``state_size`` is the cost model's state S (window tuples); ``state_bytes`` the serialized size of
    the worker's keyed state in Spark's state store at the end of the interval (NULL when not reported);
    ``processing_seconds`` the run time of the worker's task in the interval from Spark's task metrics
    (``executorRunTime``; NULL when not reported).
    """

    __tablename__ = "worker_metrics"

    run_id: Mapped[int] = mapped_column(_run_fk(), primary_key=True)
    batch_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    worker: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    interval: Mapped[int] = mapped_column(BigInteger)
    tuples: Mapped[int] = mapped_column(BigInteger, default=0)
    cost: Mapped[float | None] = mapped_column(Double, nullable=True)
    distinct_keys: Mapped[int] = mapped_column(BigInteger, default=0)
    state_size: Mapped[float | None] = mapped_column(Double, nullable=True)
    processing_seconds: Mapped[float | None] = mapped_column(Double, nullable=True)
    state_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)

    __table_args__ = (Index("ix_worker_metrics_run_interval", "run_id", "interval"),)


class RoutingSize(Base):
    """Routing-table size of an interval: entries |A|, memory in bytes, and the limit Amax in force."""

    __tablename__ = "routing_sizes"

    run_id: Mapped[int] = mapped_column(_run_fk(), primary_key=True)
    batch_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    interval: Mapped[int] = mapped_column(BigInteger)
    entries: Mapped[int] = mapped_column(BigInteger, default=0)
    memory_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    amax: Mapped[int | None] = mapped_column(BigInteger, nullable=True)

    __table_args__ = (Index("ix_routing_sizes_run_interval", "run_id", "interval"),)


class MigrationEvent(Base):
    """A migration executed in a batch: keys moved, state moved, pause of the affected keys.

    ``state_moved`` is in the cost model's units (window tuples); ``bytes_moved`` the serialized state
    bytes that crossed from the old workers to the new ones; ``pause_ms`` the pause in milliseconds and
    ``pause_batches`` the micro-batches the moved keys' tuples were held at their new worker (both
    NULL when not reported).  ``interval`` is the interval the migration completed in (its import, in
    the Spark engine); ``planned_interval`` (schema 4) the interval it belongs to — whose plan or command
    it carried out and whose ``interval_metrics.migration_cost`` counts it — and ``migration_cost`` its
    share of that figure (state moved / that interval's total state).  Rows written before schema 4
    have NULL there (:meth:`~skewlab.storage.store.Store.migration_events` reads ``detail.planned_interval``,
    else ``interval``) and a ``migration_cost`` over the total state when they ran.
    """

    __tablename__ = "migration_events"

    run_id: Mapped[int] = mapped_column(_run_fk(), primary_key=True)
    batch_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    interval: Mapped[int] = mapped_column(BigInteger)
    wall_time: Mapped[float] = mapped_column(Double)
    algorithm: Mapped[str] = mapped_column(String(64), default="")
    keys_moved: Mapped[int] = mapped_column(BigInteger, default=0)
    state_moved: Mapped[float | None] = mapped_column(Double, nullable=True)
    migration_cost: Mapped[float | None] = mapped_column(Double, nullable=True)
    pause_ms: Mapped[float | None] = mapped_column(Double, nullable=True)
    detail: Mapped[str] = mapped_column(Text, default="{}")
    bytes_moved: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    pause_batches: Mapped[int | None] = mapped_column(Integer, nullable=True)
    planned_interval: Mapped[int | None] = mapped_column(BigInteger, nullable=True)

    __table_args__ = (Index("ix_migration_events_run_interval", "run_id", "interval"),)


#: Columns each schema version added to existing tables: {version: ((table, column), ...)}.  Opening an
#: older database adds them (nullable, so every row written before reads NULL there).
ADDED_COLUMNS: dict[int, tuple[tuple[str, str], ...]] = {
    2: (("worker_metrics", "state_bytes"), ("migration_events", "bytes_moved"),
        ("migration_events", "pause_batches")),
    3: (("interval_metrics", "params"),),
    4: (("migration_events", "planned_interval"),),
    5: (("dead_letter_batches", "count"),),
}


class HotKey(Base):
    """One of the top-k keys of an interval: its share of the tuples and its destination workers."""

    __tablename__ = "hot_keys"

    run_id: Mapped[int] = mapped_column(_run_fk(), primary_key=True)
    batch_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    rank: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    interval: Mapped[int] = mapped_column(BigInteger)
    key: Mapped[str] = mapped_column(Text, default="")
    fingerprint: Mapped[str | None] = mapped_column(String(16), nullable=True)
    count: Mapped[int] = mapped_column(BigInteger, default=0)
    share: Mapped[float | None] = mapped_column(Double, nullable=True)
    workers: Mapped[str] = mapped_column(Text, default="[]")

    __table_args__ = (Index("ix_hot_keys_run_interval", "run_id", "interval"),)


class ShadowResult(Base):
    """Shadow what-if: what another grouping would have had on the same interval.

    Each interval the controller also evaluates other groupings on the interval's statistics and
    stores the imbalance, replication and migration cost each would have had (issue, "Shadow
    what-if"); ``theta_max_observed``, ``routing_table_size``, ``plan_seconds``, ``feasible`` and
    ``note`` are kept when the evaluation provides them.
    """

    __tablename__ = "shadow_results"

    run_id: Mapped[int] = mapped_column(_run_fk(), primary_key=True)
    batch_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    algorithm: Mapped[str] = mapped_column(String(64), primary_key=True)
    interval: Mapped[int] = mapped_column(BigInteger)
    imbalance: Mapped[float | None] = mapped_column(Double, nullable=True)
    replication: Mapped[float | None] = mapped_column(Double, nullable=True)
    migration_cost: Mapped[float | None] = mapped_column(Double, nullable=True)
    theta_max_observed: Mapped[float | None] = mapped_column(Double, nullable=True)
    routing_table_size: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    plan_seconds: Mapped[float | None] = mapped_column(Double, nullable=True)
    feasible: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    note: Mapped[str] = mapped_column(Text, default="")

    __table_args__ = (Index("ix_shadow_results_run_interval", "run_id", "interval"),)


class Event(Base):
    """Something that happened in a run: algorithm / parameter / worker change, pause, resume, ...

    ``detail`` is JSON text.  ``dedupe`` is set when the event belongs to a batch; it is unique per
    run, so replaying the batch does not duplicate the event (NULLs never collide).
    """

    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(_run_fk())
    batch_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    interval: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    wall_time: Mapped[float] = mapped_column(Double)
    kind: Mapped[str] = mapped_column(String(64))
    detail: Mapped[str] = mapped_column(Text, default="{}")
    command_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    dedupe: Mapped[str | None] = mapped_column(String(128), nullable=True)

    __table_args__ = (
        Index("ix_events_run_id", "run_id", "id"),
        Index("ux_events_run_dedupe", "run_id", "dedupe", unique=True),
    )


class DeadLetter(Base):
    """Malformed input records of a run, per reason: a running count and a bounded sample (JSON list)."""

    __tablename__ = "dead_letters"

    run_id: Mapped[int] = mapped_column(_run_fk(), primary_key=True)
    reason: Mapped[str] = mapped_column(String(200), primary_key=True)
    count: Mapped[int] = mapped_column(BigInteger, default=0)
    sample: Mapped[str] = mapped_column(Text, default="[]")
    first_seen: Mapped[float] = mapped_column(Double)
    last_seen: Mapped[float] = mapped_column(Double)
    last_batch: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class DeadLetterBatch(Base):
    """Marker that the dead letters of (run, batch, reason) were counted (replay guard), with their
    number in that batch (``count``, schema 5; NULL in rows written before): the per-interval series of
    :meth:`~skewlab.storage.store.Store.dead_letter_counts`."""

    __tablename__ = "dead_letter_batches"

    run_id: Mapped[int] = mapped_column(_run_fk(), primary_key=True)
    batch_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    reason: Mapped[str] = mapped_column(String(200), primary_key=True)
    count: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class Command(Base):
    """An operator command (issue, "Operator commands").

    ``kind`` is one of :data:`skewlab.shared.COMMAND_KINDS`; ``payload`` is JSON text (validated against the
    algorithm registry by the engine, never evaluated or interpolated into SQL); ``run_id`` NULL
    means "whichever run is active".  ``status`` moves once from ``pending`` to ``applied`` or
    ``rejected``; ``reason`` says why, ``applied_batch`` is the batch from which it took effect.
    """

    __tablename__ = "commands"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int | None] = mapped_column(_run_fk(), nullable=True)
    kind: Mapped[str] = mapped_column(String(32))
    payload: Mapped[str] = mapped_column(Text, default="{}")
    status: Mapped[str] = mapped_column(String(16), default="pending")
    reason: Mapped[str] = mapped_column(Text, default="")
    applied_batch: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    created_at: Mapped[float] = mapped_column(Double)
    updated_at: Mapped[float] = mapped_column(Double)

    __table_args__ = (Index("ix_commands_status_id", "status", "id"),)
