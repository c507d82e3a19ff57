"""The store's reader API (dashboard, CLI): runs with their progress, and each per-interval table."""

from __future__ import annotations

from typing import Any, Sequence

from sqlalchemy import Table, func, select

from skewlab.storage.base import StoreBase
from skewlab.storage.tables import T_DL, T_DLB, T_EV, T_HOT, T_IM, T_MIG, T_RS, T_RUN, T_SH, T_WM
from skewlab.storage.values import decode_row

__all__ = ["Reading"]


class Reading(StoreBase):
    """Reads of the dashboard and the CLI; each call is one read transaction."""

    def get_run(self, run_id: int) -> dict[str, Any] | None:
        """The run's row (params/config decoded), or None."""
        with self._read() as conn:
            row = conn.execute(select(T_RUN).where(T_RUN.c.id == int(run_id))).mappings().first()
        return None if row is None else decode_row("runs", row)

    def list_runs(self, limit: int | None = None, status: str | None = None) -> list[dict[str, Any]]:
        """Runs, newest first, with progress: ``intervals``, ``last_interval``, ``last_batch``, ``last_wall_time``,
        and ``last_workers`` (the worker count of the newest interval; ``n_workers`` is the run's start)."""
        agg = (
            select(
                T_IM.c.run_id,
                func.count().label("intervals"),
                func.max(T_IM.c.interval).label("last_interval"),
                func.max(T_IM.c.batch_id).label("last_batch"),
                func.max(T_IM.c.wall_time).label("last_wall_time"),
            )
            .group_by(T_IM.c.run_id)
            .subquery()
        )
        last_workers = (
            select(T_IM.c.n_workers).where(T_IM.c.run_id == T_RUN.c.id)
            .order_by(T_IM.c.batch_id.desc()).limit(1).correlate(T_RUN).scalar_subquery().label("last_workers")
        )
        stmt = (
            select(T_RUN, agg.c.intervals, agg.c.last_interval, agg.c.last_batch, agg.c.last_wall_time, last_workers)
            .select_from(T_RUN.outerjoin(agg, agg.c.run_id == T_RUN.c.id))
            .order_by(T_RUN.c.id.desc())
        )
        if status is not None:
            stmt = stmt.where(T_RUN.c.status == status)
        if limit is not None:
            stmt = stmt.limit(max(int(limit), 0))
        with self._read() as conn:
            rows = conn.execute(stmt).mappings().all()
        out = []
        for r in rows:
            d = decode_row("runs", r)
            d["intervals"] = int(d["intervals"] or 0)
            out.append(d)
        return out

    def events(self, run_id: int, since_id: int | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Events of a run in order (``since_id`` exclusive, for incremental reads)."""
        stmt = select(T_EV).where(T_EV.c.run_id == int(run_id))
        if since_id is not None:
            stmt = stmt.where(T_EV.c.id > int(since_id))
        stmt = stmt.order_by(T_EV.c.id)
        if limit is not None:
            stmt = stmt.limit(max(int(limit), 0))
        with self._read() as conn:
            return [decode_row("events", r) for r in conn.execute(stmt).mappings()]

    def algorithm_events(self, run_ids: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
        """The details of the ``algorithm`` events (switches) of each of ``run_ids``, in order: one query
        for a list of runs (the dashboard's run picker names each run's sequence of groupings)."""
        ids = [int(r) for r in run_ids]
        out: dict[int, list[dict[str, Any]]] = {r: [] for r in ids}
        if not ids:
            return out
        stmt = (select(T_EV.c.run_id, T_EV.c.detail).where(T_EV.c.run_id.in_(ids), T_EV.c.kind == "algorithm")
                .order_by(T_EV.c.id))
        with self._read() as conn:
            for r in conn.execute(stmt).mappings():
                d = decode_row("events", r)["detail"]
                out[int(r["run_id"])].append(d if isinstance(d, dict) else {})
        return out

    def dead_letters(self, run_id: int) -> list[dict[str, Any]]:
        """Per reason: ``count``, ``sample`` (list of text), ``first_seen``, ``last_seen``, ``last_batch``."""
        stmt = select(T_DL).where(T_DL.c.run_id == int(run_id)).order_by(T_DL.c.reason)
        with self._read() as conn:
            return [decode_row("dead_letters", r) for r in conn.execute(stmt).mappings()]

    def dead_letter_counts(self, run_id: int, since_interval: int | None = None) -> list[dict[str, Any]]:
        """Dead letters per interval and reason: ``interval``, ``batch_id``, ``reason``, ``count``, in
        interval order (``since_interval`` exclusive).  Only batches recorded with their interval
        (:meth:`~skewlab.storage.writing.Writing.record_interval`) and a count (schema 5) are listed."""
        stmt = (
            select(T_IM.c.interval, T_DLB.c.batch_id, T_DLB.c.reason, T_DLB.c["count"])
            .select_from(T_DLB.join(T_IM, (T_IM.c.run_id == T_DLB.c.run_id) & (T_IM.c.batch_id == T_DLB.c.batch_id)))
            .where(T_DLB.c.run_id == int(run_id), T_DLB.c["count"].is_not(None))
        )
        if since_interval is not None:
            stmt = stmt.where(T_IM.c.interval > int(since_interval))
        stmt = stmt.order_by(T_IM.c.interval, T_DLB.c.batch_id, T_DLB.c.reason)
        with self._read() as conn:
            return [dict(r) for r in conn.execute(stmt).mappings()]

    def hottest_keys(self, run_id: int, since_interval: int | None = None) -> list[dict[str, Any]]:
        """The heaviest key of every interval (``hot_keys`` rank 0): ``interval``, ``batch_id``, ``count``,
        ``share``, in interval order (``since_interval`` exclusive)."""
        stmt = select(T_HOT.c.interval, T_HOT.c.batch_id, T_HOT.c["count"], T_HOT.c.share).where(
            T_HOT.c.run_id == int(run_id), T_HOT.c.rank == 0)
        if since_interval is not None:
            stmt = stmt.where(T_HOT.c.interval > int(since_interval))
        stmt = stmt.order_by(T_HOT.c.interval, T_HOT.c.batch_id)
        with self._read() as conn:
            return [dict(r) for r in conn.execute(stmt).mappings()]

    def _interval_rows(
        self,
        name: str,
        table: Table,
        order: Sequence[str],
        run_id: int,
        since_interval: int | None,
        limit: int | None,
        latest: bool,
        interval: int | None = None,
    ) -> list[dict[str, Any]]:
        stmt = select(table).where(table.c.run_id == int(run_id))
        if since_interval is not None:
            stmt = stmt.where(table.c.interval > int(since_interval))
        if interval is not None:
            stmt = stmt.where(table.c.interval == int(interval))
        cols = [table.c[c] for c in order]
        if limit is not None and latest:
            stmt = stmt.order_by(*[c.desc() for c in cols]).limit(max(int(limit), 0))
        else:
            stmt = stmt.order_by(*cols)
            if limit is not None:
                stmt = stmt.limit(max(int(limit), 0))
        with self._read() as conn:
            rows = [decode_row(name, r) for r in conn.execute(stmt).mappings()]
        if limit is not None and latest:
            rows.reverse()
        return rows

    def interval_metrics(
        self, run_id: int, since_interval: int | None = None, limit: int | None = None, *, latest: bool = False
    ) -> list[dict[str, Any]]:
        """Run metrics in interval order; ``since_interval`` exclusive (incremental polling).

        ``limit`` caps the rows: the first ``limit`` after ``since_interval`` (paging), or with
        ``latest=True`` the last ``limit`` (a dashboard's initial window), still in ascending order.
        """
        return self._interval_rows("interval_metrics", T_IM, ("interval", "batch_id"), run_id, since_interval,
                                   limit, latest)

    def worker_metrics(
        self, run_id: int, since_interval: int | None = None, *, interval: int | None = None,
        limit: int | None = None, latest: bool = False,
    ) -> list[dict[str, Any]]:
        """Per-worker rows ordered by (interval, batch, worker); filter by ``since_interval`` or ``interval``."""
        return self._interval_rows("worker_metrics", T_WM, ("interval", "batch_id", "worker"), run_id,
                                   since_interval, limit, latest, interval)

    def routing_sizes(self, run_id: int, since_interval: int | None = None) -> list[dict[str, Any]]:
        return self._interval_rows("routing_sizes", T_RS, ("interval", "batch_id"), run_id, since_interval,
                                   None, False)

    def migration_events(self, run_id: int, since_interval: int | None = None) -> list[dict[str, Any]]:
        """Migration rows in the order they completed (``interval``: the interval their import completed
        in; ``since_interval`` exclusive on it), each with ``planned_interval``: the interval it belongs
        to — as stored (schema 4), else (older rows) as its ``detail`` says, else its own interval."""
        rows = self._interval_rows("migration_events", T_MIG, ("interval", "batch_id", "seq"), run_id,
                                   since_interval, None, False)
        for r in rows:
            if r.get("planned_interval") is None:
                d = r.get("detail")
                planned = d.get("planned_interval") if isinstance(d, dict) else None
                r["planned_interval"] = int(planned) if planned is not None else int(r["interval"])
        return rows

    def shadow_results(
        self, run_id: int, since_interval: int | None = None, *, interval: int | None = None
    ) -> list[dict[str, Any]]:
        return self._interval_rows("shadow_results", T_SH, ("interval", "batch_id", "algorithm"), run_id,
                                   since_interval, None, False, interval)

    def hot_keys(self, run_id: int, interval: int | None = None) -> list[dict[str, Any]]:
        """Top-k hot keys of ``interval`` (default: the latest batch that has any), by rank."""
        with self._read() as conn:
            stmt = select(T_HOT.c.batch_id).where(T_HOT.c.run_id == int(run_id))
            if interval is not None:
                stmt = stmt.where(T_HOT.c.interval == int(interval))
            batch = conn.execute(
                stmt.order_by(T_HOT.c.interval.desc(), T_HOT.c.batch_id.desc()).limit(1)
            ).scalar()
            if batch is None:
                return []
            rows = conn.execute(
                select(T_HOT)
                .where(T_HOT.c.run_id == int(run_id), T_HOT.c.batch_id == batch)
                .order_by(T_HOT.c.rank)
            ).mappings()
            return [decode_row("hot_keys", r) for r in rows]
