"""Short handles on the tables of :mod:`skewlab.storage.models` and the facts the store modules share about them:
which columns hold JSON text, and the per-run child tables in export order."""

from __future__ import annotations

from sqlalchemy import Table

from skewlab.storage.models import (
    Command,
    DeadLetter,
    DeadLetterBatch,
    Event,
    HotKey,
    IntervalMetric,
    Meta,
    MigrationEvent,
    RoutingSize,
    Run,
    ShadowResult,
    WorkerMetric,
)

T_RUN: Table = Run.__table__  # type: ignore[assignment]
T_IM: Table = IntervalMetric.__table__  # type: ignore[assignment]
T_WM: Table = WorkerMetric.__table__  # type: ignore[assignment]
T_RS: Table = RoutingSize.__table__  # type: ignore[assignment]
T_MIG: Table = MigrationEvent.__table__  # type: ignore[assignment]
T_HOT: Table = HotKey.__table__  # type: ignore[assignment]
T_SH: Table = ShadowResult.__table__  # type: ignore[assignment]
T_EV: Table = Event.__table__  # type: ignore[assignment]
T_DL: Table = DeadLetter.__table__  # type: ignore[assignment]
T_DLB: Table = DeadLetterBatch.__table__  # type: ignore[assignment]
T_CMD: Table = Command.__table__  # type: ignore[assignment]
T_META: Table = Meta.__table__  # type: ignore[assignment]

# JSON-text columns, decoded on read / export and encoded on write / import.
JSON_COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": ("params", "config"),
    "interval_metrics": ("extra", "params"),
    "migration_events": ("detail",),
    "hot_keys": ("workers",),
    "events": ("detail",),
    "dead_letters": ("sample",),
    "commands": ("payload",),
}

# Per-interval child tables in export order: (export name, table, order-by column names).
CHILD_TABLES: tuple[tuple[str, Table, tuple[str, ...]], ...] = (
    ("interval_metrics", T_IM, ("interval", "batch_id")),
    ("worker_metrics", T_WM, ("interval", "batch_id", "worker")),
    ("routing_sizes", T_RS, ("interval", "batch_id")),
    ("migration_events", T_MIG, ("interval", "batch_id", "seq")),
    ("hot_keys", T_HOT, ("interval", "batch_id", "rank")),
    ("shadow_results", T_SH, ("interval", "batch_id", "algorithm")),
    ("events", T_EV, ("id",)),
    ("dead_letters", T_DL, ("reason",)),
    ("dead_letter_batches", T_DLB, ("batch_id", "reason")),
    ("commands", T_CMD, ("id",)),
)
