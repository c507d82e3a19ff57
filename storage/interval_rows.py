"""An :class:`~skewlab.storage.records.IntervalRecord` → the cleaned rows of each table, validated before any write.

Every value goes through :mod:`skewlab.storage.values` (NaN / ±inf → NULL, integers checked, text bounded);
ids left None take their position, duplicates (worker, rank, shadow algorithm, seq) raise
``ValueError``.  :meth:`skewlab.storage.writing.Writing.record_interval` writes the result in one transaction.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from skewlab.storage.records import DeadLetterRow, IntervalRecord
from skewlab.storage.values import (
    KEY_CHARS, REASON_CHARS, as_bool, as_float, as_int, check_name, clean_text, dump_json, fingerprint_hex,
    no_duplicates, wall_clock,
)

__all__ = [
    "DEAD_LETTER_SAMPLE_CHARS",
    "DEAD_LETTER_SAMPLE_LIMIT",
    "IntervalRows",
    "clean_dead_letter",
    "event_row",
    "interval_rows",
]

#: dead-letter records kept per (run, reason), and the characters kept of each
DEAD_LETTER_SAMPLE_LIMIT = 20
DEAD_LETTER_SAMPLE_CHARS = 1_000
_EVENT_KIND_RE = re.compile(r"^[a-z][a-z0-9_.\-]{0,63}$")
_FLOAT_METRICS = (
    "imbalance", "theta_max_observed", "seeds_imbalance", "load_variance", "load_stddev",
    "replication", "migration_cost", "plan_seconds", "tuples_per_second", "throughput",
    "batch_latency_ms",
)


@dataclass
class IntervalRows:
    """The rows of one (run, batch), ready to insert.  ``metrics["algorithm"]`` None: the run's current one."""

    wall_time: float
    metrics: dict[str, Any]
    workers: list[dict[str, Any]] = field(default_factory=list)
    hot_keys: list[dict[str, Any]] = field(default_factory=list)
    shadow: list[dict[str, Any]] = field(default_factory=list)
    migrations: list[dict[str, Any]] = field(default_factory=list)
    routing: dict[str, Any] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    dead_letters: list[tuple[str, int, list[str]]] = field(default_factory=list)


def interval_rows(run_id: int, record: IntervalRecord) -> IntervalRows:
    """The cleaned rows of ``record`` for run ``run_id``; ``ValueError`` on invalid input."""
    if not isinstance(record, IntervalRecord):
        raise ValueError(f"record_interval expects an IntervalRecord, got {type(record).__name__}")
    run_id = int(run_id)
    batch_id, interval = as_int(record.batch_id), as_int(record.interval)
    if batch_id is None or interval is None:
        raise ValueError("batch_id and interval are required integers")
    now = wall_clock()
    wt = as_float(record.wall_time) if record.wall_time is not None else now
    wt = now if wt is None else wt
    key = {"run_id": run_id, "batch_id": batch_id, "interval": interval}

    # ---- routing size
    routing_row: dict[str, Any] | None = None
    if record.routing is not None:
        r = record.routing
        routing_row = {**key, "entries": as_int(r.entries, 0), "memory_bytes": as_int(r.memory_bytes),
                       "amax": as_int(r.amax)}
    rts = as_int(record.routing_table_size)
    if rts is None and routing_row is not None:
        rts = routing_row["entries"]
    elif rts is not None and routing_row is None:
        routing_row = {**key, "entries": rts, "memory_bytes": None, "amax": None}

    # ---- run metrics row (the idempotency gate)
    metrics: dict[str, Any] = {
        **key,
        "wall_time": wt,
        "tuples": as_int(record.tuples, 0),
        "algorithm": None if record.algorithm is None else check_name(record.algorithm, "algorithm"),
        "n_workers": as_int(record.n_workers),
        "routing_table_size": rts,
        "feasible": as_bool(record.feasible),
        "note": clean_text(record.note),
        "extra": dump_json(record.extra or {}, "extra"),
        "params": None if record.params is None else dump_json(dict(record.params), "params"),
    }
    for col in _FLOAT_METRICS:
        metrics[col] = as_float(getattr(record, col))

    # ---- per-worker rows
    worker_rows = [
        {
            **key,
            "worker": as_int(w.worker, pos),
            "tuples": as_int(w.tuples, 0),
            "cost": as_float(w.cost),
            "distinct_keys": as_int(w.distinct_keys, 0),
            "state_size": as_float(w.state_size),
            "processing_seconds": as_float(w.processing_seconds),
            "state_bytes": as_int(w.state_bytes),
        }
        for pos, w in enumerate(record.workers)
    ]
    no_duplicates(worker_rows, "worker", "workers")

    # ---- hot keys
    hot_rows = []
    for pos, h in enumerate(record.hot_keys):
        ws = h.workers
        ws_list = [] if ws is None else [int(as_int(x)) for x in (ws.tolist() if hasattr(ws, "tolist") else ws)]
        hot_rows.append({
            **key,
            "rank": as_int(h.rank, pos),
            "key": clean_text(h.key, KEY_CHARS),
            "fingerprint": fingerprint_hex(h.fingerprint),
            "count": as_int(h.count, 0),
            "share": as_float(h.share),
            "workers": dump_json(ws_list, "hot_keys.workers"),
        })
    no_duplicates(hot_rows, "rank", "hot_keys")

    # ---- shadow what-if results
    shadow_rows = [
        {
            **key,
            "algorithm": check_name(s.algorithm, "shadow algorithm"),
            "imbalance": as_float(s.imbalance),
            "replication": as_float(s.replication),
            "migration_cost": as_float(s.migration_cost),
            "theta_max_observed": as_float(s.theta_max_observed),
            "routing_table_size": as_int(s.routing_table_size),
            "plan_seconds": as_float(s.plan_seconds),
            "feasible": as_bool(s.feasible),
            "note": clean_text(s.note),
        }
        for s in record.shadow
    ]
    no_duplicates(shadow_rows, "algorithm", "shadow")

    # ---- migrations
    mig_rows = [
        {
            **key,
            "seq": as_int(m.seq, pos),
            "wall_time": as_float(m.wall_time) if m.wall_time is not None else wt,
            "algorithm": clean_text(m.algorithm, 64),
            "keys_moved": as_int(m.keys_moved, 0),
            "state_moved": as_float(m.state_moved),
            "migration_cost": as_float(m.migration_cost),
            "pause_ms": as_float(m.pause_ms),
            "detail": dump_json(m.detail or {}, "migrations.detail"),
            "bytes_moved": as_int(m.bytes_moved),
            "pause_batches": as_int(m.pause_batches),
            "planned_interval": as_int(m.planned_interval),
        }
        for pos, m in enumerate(record.migrations)
    ]
    no_duplicates(mig_rows, "seq", "migrations")

    # ---- events and dead letters of this batch
    event_rows = [
        event_row(run_id, e.kind, e.detail, batch_id, as_int(e.interval, interval), e.command_id,
                  e.wall_time if e.wall_time is not None else wt)
        for e in record.events
    ]
    dead = [clean_dead_letter(d) for d in record.dead_letters]
    return IntervalRows(wt, metrics, worker_rows, hot_rows, shadow_rows, mig_rows, routing_row, event_rows, dead)


def event_row(
    run_id: int,
    kind: Any,
    detail: Any,
    batch_id: int | None,
    interval: int | None,
    command_id: Any,
    wall_time: Any,
) -> dict[str, Any]:
    """The ``events`` row; with ``batch_id`` it carries a ``dedupe`` key (batch, kind, command, detail)."""
    if not isinstance(kind, str) or not _EVENT_KIND_RE.match(kind):
        raise ValueError("event kind must match [a-z][a-z0-9_.-]{0,63}")
    detail_json = dump_json(detail or {}, "event detail")
    cid = as_int(command_id)
    dedupe = None
    if batch_id is not None:
        digest = hashlib.sha1(detail_json.encode("ascii")).hexdigest()[:24]
        dedupe = f"{batch_id}:{kind}:{cid if cid is not None else '-'}:{digest}"[:128]
    wt = as_float(wall_time) if wall_time is not None else None
    return {
        "run_id": int(run_id),
        "batch_id": batch_id,
        "interval": interval,
        "wall_time": wall_clock() if wt is None else wt,
        "kind": kind,
        "detail": detail_json,
        "command_id": cid,
        "dedupe": dedupe,
    }


def clean_dead_letter(row: DeadLetterRow) -> tuple[str, int, list[str]]:
    """(reason, count, samples): the last :data:`DEAD_LETTER_SAMPLE_LIMIT` samples, each bounded."""
    reason = clean_text(row.reason, REASON_CHARS)
    if not reason:
        raise ValueError("dead letter reason must be non-empty text")
    samples_in = row.samples or ()
    if isinstance(samples_in, (str, bytes)):
        samples_in = [samples_in]
    samples = [clean_text(s, DEAD_LETTER_SAMPLE_CHARS) for s in list(samples_in)[-DEAD_LETTER_SAMPLE_LIMIT:]]
    count = as_int(row.count, len(samples))
    if count is None or count < 0:
        raise ValueError("dead letter count must be >= 0")
    return reason, count, samples
