"""Migrations as the operator reads them: one *move* per interval, with one number.

Which interval a migration belongs to and what it costs is decided once, where it is recorded: the
controller (:class:`skewlab.engine.control.controller.MigrationEvent`) counts every migration in
one interval's metric ``migration_cost`` — a rebalance in the interval that planned it, a command's
moves in the first interval it is in effect for ("applied at interval N") — and the engine stores
each migration row with that interval (``migration_events.planned_interval``, schema 4) and its
share of that metric (``migration_cost`` = its state moved / the interval's total state), one row
per interval even when moves of two intervals travel in one export
(:func:`skewlab.engine.runtimes.spark.driver_step.track_migrations`).  The Spark engine records a row
when its import completes, one or two micro-batches later; several rows can belong to one interval
(a switch applied for interval ``t`` and the rebalance planned at ``t`` travel as two migrations),
and once all have arrived their figures sum to interval ``t``'s metric.

:func:`moves` groups the rows by that interval and gives each move the interval's metric, so the
dashboard's KPI card and migration table and ``skewlab control status`` show the same interval number
and the same figure.  Rows of older runs (before schema 4) divided by the total state when they ran
and could name an interval whose metric did not count them; their moves still show the interval's
metric (the rows' own figures only where the interval's metric is not stored).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

__all__ = ["cost_text", "planned_interval", "moves", "recent_moves"]

#: how many intervals back :func:`recent_moves` looks for migration rows
LOOKBACK_INTERVALS = 500


def planned_interval(migration: Mapping[str, Any]) -> int:
    """The interval whose plan or command a migration row carried out (the numbering of "applied at
    interval N" and of the interval metrics): its ``planned_interval`` (schema 4, filled in for older
    rows by :meth:`~skewlab.storage.store.Store.migration_events`), else ``detail.planned_interval``,
    else its own interval."""
    planned = migration.get("planned_interval")
    if planned is None:
        detail = migration.get("detail")
        planned = detail.get("planned_interval") if isinstance(detail, Mapping) else None
    return int(planned) if planned is not None else int(migration["interval"])


def cost_text(cost: float | None) -> str:
    """A move's figure as every view prints it (4 significant digits; "—" when unknown)."""
    return "—" if cost is None else f"{float(cost):.4g}"


def _num(v: Any) -> float | None:
    return None if v is None else float(v)


def moves(migrations: Sequence[Mapping[str, Any]], interval_costs: Mapping[int, Any]) -> list[dict[str, Any]]:
    """One move per planned interval (newest first) from migration rows (as
    :meth:`~skewlab.storage.store.Store.migration_events` returns them): ``interval`` (planned),
    ``imported`` (the last import's interval), ``algorithm``, ``reason`` (the rows' reasons, joined by
    ``+``), ``keys_moved``, ``state_moved``, ``bytes_moved`` and ``pause_ms`` summed, ``pause_batches``
    the longest hold, and ``migration_cost``: ``interval_costs[interval]`` (the interval's metric),
    else the sum of the rows' own figures."""
    grouped: dict[int, list[Mapping[str, Any]]] = {}
    for m in migrations:
        grouped.setdefault(planned_interval(m), []).append(m)
    out = []
    for iv in sorted(grouped, reverse=True):
        rows = grouped[iv]
        reasons = [str(m["detail"].get("reason") or "") for m in rows if isinstance(m.get("detail"), Mapping)]
        held = [int(m["pause_batches"]) for m in rows if m.get("pause_batches") is not None]
        nbytes = [int(m["bytes_moved"]) for m in rows if m.get("bytes_moved") is not None]
        pauses = [float(m["pause_ms"]) for m in rows if m.get("pause_ms") is not None]
        cost = _num(interval_costs.get(iv))
        if cost is None:
            own = [float(m["migration_cost"]) for m in rows if m.get("migration_cost") is not None]
            cost = sum(own) if own else None
        out.append({
            "interval": iv, "imported": max(int(m["interval"]) for m in rows),
            "algorithm": next((str(m["algorithm"]) for m in rows if m.get("algorithm")), ""),
            "reason": "+".join(dict.fromkeys(r for part in reasons for r in part.split("+") if r)),
            "keys_moved": sum(int(m.get("keys_moved") or 0) for m in rows),
            "state_moved": sum(float(m.get("state_moved") or 0.0) for m in rows),
            "migration_cost": cost, "pause_ms": sum(pauses) if pauses else None,
            "bytes_moved": sum(nbytes) if nbytes else None, "pause_batches": max(held) if held else None,
        })
    return out


def recent_moves(store: Any, run_id: int, upper: int | None = None, limit: int = 20) -> list[dict[str, Any]]:
    """The newest ``limit`` moves of run ``run_id`` (:func:`moves`) among the migration rows recorded up to
    interval ``upper`` (None: all) in its last :data:`LOOKBACK_INTERVALS` intervals."""
    if upper is None:
        latest = store.interval_metrics(run_id, limit=1, latest=True)
        upper = int(latest[0]["interval"]) if latest else None
    since = None if upper is None else upper - LOOKBACK_INTERVALS
    rows = [m for m in store.migration_events(run_id, since_interval=since) if upper is None or int(m["interval"]) <= upper]
    if not rows:
        return []
    keep = sorted({planned_interval(m) for m in rows})[-limit:]
    rows = [m for m in rows if planned_interval(m) >= keep[0]]
    metrics = store.interval_metrics(run_id, since_interval=keep[0] - 1, limit=keep[-1] - keep[0] + 1)
    costs = {int(r["interval"]): r.get("migration_cost") for r in metrics if int(r["interval"]) in set(keep)}
    return moves(rows, costs)
