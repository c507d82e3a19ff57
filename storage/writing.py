"""The store's writer API (the engine): runs, one interval's rows, events, dead letters.

:meth:`Writing.record_interval` writes run metrics + per-worker metrics + hot keys + shadow results +
migration events + routing size (+ events, dead letters) of one (run, batch) in ONE transaction.  The
``interval_metrics`` row is inserted first with ``INSERT … ON CONFLICT DO NOTHING``; only if it was
new are the other rows written, so a replay writes nothing (returns ``False``): Spark replays a batch
after a failure, and replaying it here changes nothing.  On PostgreSQL a concurrent duplicate waits
for the first transaction and then does nothing; on SQLite ``BEGIN IMMEDIATE`` serialises writers.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from sqlalchemy import Connection, select, update
from sqlalchemy import delete as sa_delete
from sqlalchemy import insert as sa_insert

from skewlab.storage.base import StoreBase, UnknownRun
from skewlab.storage.interval_rows import (
    DEAD_LETTER_SAMPLE_CHARS, DEAD_LETTER_SAMPLE_LIMIT, clean_dead_letter, event_row, interval_rows,
)
from skewlab.storage.models import RUN_STATUSES
from skewlab.storage.records import DeadLetterRow, IntervalRecord
from skewlab.storage.tables import T_CMD, T_DL, T_DLB, T_EV, T_HOT, T_IM, T_MIG, T_RS, T_RUN, T_SH, T_WM
from skewlab.storage.values import as_int, check_name, clean_text, dump_json, load_json, wall_clock

__all__ = ["DEAD_LETTER_SAMPLE_CHARS", "DEAD_LETTER_SAMPLE_LIMIT", "Writing"]


class Writing(StoreBase):
    """Writes of the engine: runs, intervals, events and dead letters."""

    def create_run(
        self,
        algorithm: str,
        params: Mapping[str, Any] | None = None,
        *,
        seed: int = 0,
        n_workers: int | None = None,
        workload: str = "",
        config: Mapping[str, Any] | None = None,
        name: str = "",
        note: str = "",
        status: str = "running",
    ) -> int:
        """Register a new run (config snapshot, seed, algorithm, params); returns its id."""
        if status not in RUN_STATUSES:
            raise ValueError(f"run status must be one of {', '.join(RUN_STATUSES)}")
        now = wall_clock()
        row = {
            "name": clean_text(name, 200),
            "algorithm": check_name(algorithm, "algorithm"),
            "params": dump_json(params or {}, "params"),
            "seed": as_int(seed, 0),
            "n_workers": as_int(n_workers),
            "workload": clean_text(workload, 500),
            "config": dump_json(config or {}, "config"),
            "status": status,
            "note": clean_text(note),
            "created_at": now,
            "updated_at": now,
            "finished_at": None,
        }
        with self._write() as conn:
            return int(conn.execute(sa_insert(T_RUN).values(**row).returning(T_RUN.c.id)).scalar_one())

    def update_run(
        self,
        run_id: int,
        *,
        algorithm: str | None = None,
        params: Mapping[str, Any] | None = None,
        n_workers: int | None = None,
        status: str | None = None,
        note: str | None = None,
    ) -> None:
        """Update the run's current algorithm / params / workers / status / note (absolute values)."""
        values: dict[str, Any] = {"updated_at": wall_clock()}
        if algorithm is not None:
            values["algorithm"] = check_name(algorithm, "algorithm")
        if params is not None:
            values["params"] = dump_json(params, "params")
        if n_workers is not None:
            values["n_workers"] = as_int(n_workers)
        if note is not None:
            values["note"] = clean_text(note)
        if status is not None:
            if status not in RUN_STATUSES:
                raise ValueError(f"run status must be one of {', '.join(RUN_STATUSES)}")
            values["status"] = status
            if status in ("finished", "failed", "stopped"):
                values["finished_at"] = values["updated_at"]
        with self._write() as conn:
            res = conn.execute(update(T_RUN).where(T_RUN.c.id == int(run_id)).values(**values))
            if res.rowcount == 0:
                raise UnknownRun(f"no run with id {run_id}")

    def finish_run(self, run_id: int, status: str = "finished", note: str | None = None) -> None:
        """Mark a run finished / failed / stopped."""
        if status not in ("finished", "failed", "stopped"):
            raise ValueError("finish status must be finished, failed or stopped")
        self.update_run(run_id, status=status, note=note)

    def delete_run(self, run_id: int) -> bool:
        """Delete a run and everything recorded for it (cascade); True if it existed."""
        with self._write() as conn:
            for table in (T_IM, T_WM, T_RS, T_MIG, T_HOT, T_SH, T_EV, T_DL, T_DLB, T_CMD):
                conn.execute(sa_delete(table).where(table.c.run_id == int(run_id)))
            return conn.execute(sa_delete(T_RUN).where(T_RUN.c.id == int(run_id))).rowcount > 0

    # ------------------------------------------------------------------ per-interval writes
    def record_interval(self, run_id: int, record: IntervalRecord) -> bool:
        """Write everything of one (run, batch) in ONE transaction; False if it was already written.

        ``record``: the interval's :class:`~skewlab.storage.records.IntervalRecord`.  Everything is validated
        before the transaction starts (:func:`skewlab.storage.interval_rows.interval_rows`); invalid input
        raises ``ValueError`` and writes nothing; an unknown run raises :class:`UnknownRun`.
        """
        rows = interval_rows(run_id, record)
        run_id = int(run_id)
        with self._write() as conn:
            run = self._require_run(conn, run_id)
            if rows.metrics["algorithm"] is None:
                rows.metrics["algorithm"] = run["algorithm"]
            if not self._insert_ignore(conn, T_IM, rows.metrics, ["run_id", "batch_id"]):
                return False  # replay of an already recorded batch: nothing new is written
            for table, table_rows in (
                (T_WM, rows.workers), (T_HOT, rows.hot_keys), (T_SH, rows.shadow), (T_MIG, rows.migrations),
            ):
                if table_rows:
                    conn.execute(sa_insert(table), table_rows)
            if rows.routing is not None:
                conn.execute(sa_insert(T_RS), [rows.routing])
            for ev in rows.events:
                self._insert_event(conn, ev)
            for reason, count, samples in rows.dead_letters:
                self._add_dead_letters(conn, run_id, reason, count, samples, rows.metrics["batch_id"], rows.wall_time)
        return True

    # ------------------------------------------------------------------ events
    def _insert_event(self, conn: Connection, row: Mapping[str, Any]) -> int | None:
        if row["dedupe"] is None:
            return int(conn.execute(sa_insert(T_EV).values(**row).returning(T_EV.c.id)).scalar_one())
        stmt = (
            self._insert(T_EV)
            .values(**row)
            .on_conflict_do_nothing(index_elements=["run_id", "dedupe"])
            .returning(T_EV.c.id)
        )
        got = conn.execute(stmt).first()
        return None if got is None else int(got[0])

    def record_event(
        self,
        run_id: int,
        kind: str,
        detail: Mapping[str, Any] | None = None,
        *,
        batch_id: int | None = None,
        interval: int | None = None,
        command_id: int | None = None,
        wall_time: float | None = None,
    ) -> int | None:
        """Record an event (``algorithm``, ``param``, ``workers``, ``pause``, ``resume``, …); its id.

        With ``batch_id`` the event is idempotent: recording the same (kind, detail, command) for the
        same batch again returns None and writes nothing.
        """
        row = event_row(run_id, kind, detail, as_int(batch_id), as_int(interval), command_id, wall_time)
        with self._write() as conn:
            self._require_run(conn, int(run_id))
            return self._insert_event(conn, row)

    # ------------------------------------------------------------------ dead letters
    def _add_dead_letters(
        self,
        conn: Connection,
        run_id: int,
        reason: str,
        count: int,
        samples: list[str],
        batch_id: int | None,
        now: float,
    ) -> bool:
        if batch_id is not None and not self._insert_ignore(
            conn, T_DLB, {"run_id": run_id, "batch_id": batch_id, "reason": reason, "count": count},
            ["run_id", "batch_id", "reason"]
        ):
            return False
        self._insert_ignore(
            conn,
            T_DL,
            {"run_id": run_id, "reason": reason, "count": 0, "sample": "[]", "first_seen": now, "last_seen": now},
            ["run_id", "reason"],
        )
        cur = conn.execute(
            select(T_DL.c.count, T_DL.c.sample)
            .where(T_DL.c.run_id == run_id, T_DL.c.reason == reason)
            .with_for_update()
        ).one()
        kept = load_json(cur.sample, [])
        if not isinstance(kept, list):
            kept = []
        kept = (kept + samples)[-DEAD_LETTER_SAMPLE_LIMIT:]
        conn.execute(
            update(T_DL)
            .where(T_DL.c.run_id == run_id, T_DL.c.reason == reason)
            .values(count=int(cur.count) + count, sample=dump_json(kept, "dead letter sample"), last_seen=now,
                    last_batch=batch_id)
        )
        return True

    def record_dead_letters(
        self,
        run_id: int,
        reason: str,
        count: int,
        samples: Iterable[Any] = (),
        *,
        batch_id: int | None = None,
    ) -> bool:
        """Add ``count`` malformed records for (run, reason) and keep a bounded sample.

        The sample keeps the :data:`DEAD_LETTER_SAMPLE_LIMIT` most recent records, each truncated to
        :data:`DEAD_LETTER_SAMPLE_CHARS` characters (bytes are decoded as UTF-8 with backslash
        escapes).  With ``batch_id`` the call is idempotent per (run, batch, reason): a replay
        returns False and changes nothing — so call it once per batch and reason with the totals.
        """
        reason_s, n, sample_list = clean_dead_letter(DeadLetterRow(reason, count, samples))
        with self._write() as conn:
            self._require_run(conn, int(run_id))
            return self._add_dead_letters(conn, int(run_id), reason_s, n, sample_list, as_int(batch_id), wall_clock())

