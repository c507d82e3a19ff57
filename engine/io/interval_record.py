"""The controller's output of one interval → the :class:`~skewlab.storage.records.IntervalRecord` stored for it.

Shared by the Spark engine (:mod:`skewlab.engine.runtimes.spark.engine`) and the local runtime (``skewlab simulate
--db``, :mod:`skewlab.engine.runtimes.local`), so both store the same metrics from the same
:meth:`skewlab.engine.control.controller.Controller.end_interval` row.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from skewlab.storage.records import (
    DeadLetterRow, EventRow, HotKeyRow, IntervalRecord, MigrationRow, RoutingRow, ShadowRow, WorkerRow,
)

__all__ = ["interval_record", "rebalance_events", "worker_rows"]

#: the controller's row fields stored as they are
_ROW_METRICS = (
    "tuples", "algorithm", "imbalance", "theta_max_observed", "seeds_imbalance", "load_variance", "load_stddev",
    "replication", "routing_table_size", "migration_cost", "plan_seconds", "tuples_per_second",
)
#: controller events stored with the interval they were decided in
_REBALANCE_KINDS = ("rebalance", "rebalance_skipped")


def interval_record(
    row: Mapping[str, Any],
    batch_id: int,
    *,
    batch_seconds: float | None = None,
    amax: int | None = None,
    workers: Sequence[WorkerRow] = (),
    hot_keys: Iterable[Mapping[str, Any]] = (),
    shadow: Iterable[Mapping[str, Any]] = (),
    migrations: Iterable[Mapping[str, Any]] = (),
    events: Iterable[Mapping[str, Any]] = (),
    dead_letters: Mapping[str, tuple[int, Sequence[Any]]] | None = None,
) -> IntervalRecord:
    """The record of one ``Controller.end_interval`` row.

    ``batch_seconds``: the whole batch's time (throughput = tuples / it, latency); None leaves both
    NULL.  Replication is NULL for an interval without tuples (workers per key is undefined; the
    controller says 0).  ``feasible`` / ``note`` are the plan's when the interval rebalanced.
    ``hot_keys``, ``shadow``, ``migrations``, ``events``: mappings with the row types' fields;
    ``dead_letters``: ``{reason: (count, samples)}``.
    """
    metrics = {k: row[k] for k in _ROW_METRICS}
    metrics["n_workers"] = row["workers"]
    if not row["tuples"]:
        metrics["replication"] = None
    if batch_seconds is not None:
        metrics["throughput"] = row["tuples"] / batch_seconds if batch_seconds > 0 else 0.0
        metrics["batch_latency_ms"] = batch_seconds * 1000.0
    if row.get("rebalanced"):
        metrics["feasible"] = row.get("plan_feasible")
        metrics["note"] = row.get("plan_note", "")
    return IntervalRecord(
        batch_id=batch_id,
        interval=row["interval"],
        **metrics,
        params=row.get("params"),
        workers=list(workers),
        hot_keys=[HotKeyRow(**h) for h in hot_keys],
        shadow=[ShadowRow(**s) for s in shadow],
        migrations=[MigrationRow(**m) for m in migrations],
        routing=RoutingRow(entries=row["routing_table_size"], amax=amax),
        events=[EventRow(**e) for e in events],
        dead_letters=[DeadLetterRow(reason, count, samples)
                      for reason, (count, samples) in (dead_letters or {}).items()],
    )


def worker_rows(
    tuples: np.ndarray,
    distinct_keys: np.ndarray,
    loads: Sequence[float],
    state_size: np.ndarray,
    *,
    state_bytes: Mapping[int, int] | None = None,
    task_seconds: Mapping[int, float] | None = None,
) -> list[WorkerRow]:
    """One row per worker 0..len(tuples)-1: its tuples, distinct keys, load L(d), state S (and, from
    Spark, its state bytes and task seconds)."""
    return [
        WorkerRow(
            worker=w,
            tuples=int(tuples[w]),
            cost=float(loads[w]) if w < len(loads) else 0.0,
            distinct_keys=int(distinct_keys[w]),
            state_size=int(state_size[w]) if w < state_size.size else 0,
            state_bytes=None if state_bytes is None else state_bytes.get(w, 0),
            processing_seconds=None if task_seconds is None else task_seconds.get(w),
        )
        for w in range(len(tuples))
    ]


def rebalance_events(controller_events: Iterable[Mapping[str, Any]], interval: int) -> list[dict[str, Any]]:
    """The controller's rebalance decisions (done or skipped) of ``interval`` as event mappings."""
    return [
        {"kind": ev["kind"], "detail": {k: v for k, v in ev.items() if k not in ("interval", "kind")}}
        for ev in controller_events
        if ev["interval"] == interval and ev["kind"] in _REBALANCE_KINDS
    ]
