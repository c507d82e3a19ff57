"""The store's writer API (the engine): runs, one interval's rows, events, dead letters.

:meth:`Writing.record_interval` writes run metrics + per-worker metrics + hot keys + shadow results +
migration events + routing size (+ events, dead letters) of one (run, batch) in ONE transaction.  The
``interval_metrics`` row is inserted first with ``INSERT … ON CONFLICT DO NOTHING``; only if it was
new are the other rows written, so a replay writes nothing (returns ``False``): Spark replays a batch
after a failure, and replaying it here changes nothing.  On PostgreSQL a concurrent duplicate waits
for the first transaction and then does nothing; on SQLite ``BEGIN IMMEDIATE`` serialises writers.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Iterable, Mapping

from sqlalchemy import Connection, select, update
from sqlalchemy import delete as sa_delete
from sqlalchemy import insert as sa_insert

from storage.base import StoreBase, UnknownRun
from storage.models import INTERVAL_METRIC_COLUMNS, RUN_STATUSES
from storage.tables import (
    T_CMD, T_DL, T_DLB, T_EV, T_HOT, T_IM, T_MIG, T_RS, T_RUN, T_SH, T_WM,
)
from storage.values import (
    KEY_CHARS, REASON_CHARS, as_bool, as_float, as_int, check_name, clean_text, dump_json, fingerprint_hex,
    load_json, no_duplicates, normalise_records, wall_clock,
)

__all__ = ["DEAD_LETTER_SAMPLE_CHARS", "DEAD_LETTER_SAMPLE_LIMIT", "Writing"]

#: dead-letter records kept per (run, reason), and the characters kept of each
DEAD_LETTER_SAMPLE_LIMIT = 20
DEAD_LETTER_SAMPLE_CHARS = 1_000
_EVENT_KIND_RE = re.compile(r"^[a-z][a-z0-9_.\-]{0,63}$")

_WORKER_FIELDS = ("worker", "tuples", "cost", "distinct_keys", "state_size", "processing_seconds", "state_bytes")
_HOT_FIELDS = ("rank", "key", "fingerprint", "count", "share", "workers")
_SHADOW_FIELDS = (
    "algorithm", "imbalance", "replication", "migration_cost", "theta_max_observed",
    "routing_table_size", "plan_seconds", "feasible", "note",
)
_MIGRATION_FIELDS = (
    "seq", "algorithm", "keys_moved", "state_moved", "migration_cost", "pause_ms", "detail", "wall_time",
    "bytes_moved", "pause_batches",
)
_ROUTING_FIELDS = ("entries", "memory_bytes", "amax")
_EVENT_FIELDS = ("kind", "detail", "command_id", "wall_time", "interval")
_DEAD_FIELDS = ("reason", "count", "samples")



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
    def record_interval(
        self,
        run_id: int,
        batch_id: int,
        interval: int,
        metrics: Mapping[str, Any],
        *,
        workers: Any = None,
        hot_keys: Any = None,
        shadow: Any = None,
        migrations: Any = None,
        routing: Any = None,
        events: Any = None,
        dead_letters: Any = None,
        extra: Mapping[str, Any] | None = None,
        wall_time: float | None = None,
    ) -> bool:
        """Write everything of one (run, batch) in ONE transaction; False if it was already written.

        ``metrics``: the run metrics, keys from :data:`storage.models.INTERVAL_METRIC_COLUMNS`
        (``algorithm`` defaults to the run's current one; ``wall_time``, ``interval``, ``batch_id``
        may be repeated there if equal to the arguments).
        ``workers``: per-worker rows ``worker, tuples, cost, distinct_keys, state_size,
        processing_seconds, state_bytes`` — a list of mappings or a mapping of equal-length columns
        (worker ids default to 0..n-1).
        ``hot_keys``: top-k ``key, fingerprint, count, share, workers[, rank]`` (rank defaults to the
        position).  ``shadow``: ``{algorithm: {imbalance, replication, migration_cost, …}}`` or a list
        of mappings with ``algorithm``.  ``migrations``: ``algorithm, keys_moved, state_moved,
        migration_cost, pause_ms, bytes_moved, pause_batches, detail[, seq]``; absent or None
        ``state_bytes`` / ``bytes_moved`` / ``pause_batches`` (integers) are stored as NULL.
        ``routing``: ``{entries, memory_bytes, amax}`` or an int (entries); fills
        ``routing_table_size`` when the metrics lack it, and vice versa.
        ``events``: ``kind, detail, command_id[, interval]`` (the interval the event belongs to when
        it is not this one, e.g. a command that takes effect from the next).  ``dead_letters``: ``{reason: count}``,
        ``{reason: {count, samples}}`` or a list of ``reason, count, samples``.

        Everything is validated before the transaction starts; invalid input raises ``ValueError``
        and writes nothing; an unknown run raises :class:`UnknownRun`.
        """
        run_id = int(run_id)
        batch_id = as_int(batch_id)
        interval = as_int(interval)
        if batch_id is None or interval is None:
            raise ValueError("batch_id and interval are required integers")
        metrics = dict(metrics or {})
        for key, expected in (("batch_id", batch_id), ("interval", interval), ("run_id", run_id)):
            if key in metrics:
                if as_int(metrics.pop(key)) != expected:
                    raise ValueError(f"metrics[{key!r}] differs from the {key} argument")
        if "wall_time" in metrics:
            mt = metrics.pop("wall_time")
            wall_time = wall_time if wall_time is not None else mt
        unknown = set(metrics) - set(INTERVAL_METRIC_COLUMNS)
        if unknown:
            raise ValueError(
                f"unknown interval metric(s) {sorted(map(str, unknown))}; valid: {', '.join(INTERVAL_METRIC_COLUMNS)}"
            )
        now = wall_clock()
        wt = as_float(wall_time) if wall_time is not None else now
        wt = now if wt is None else wt
        key = {"run_id": run_id, "batch_id": batch_id, "interval": interval}

        # ---- routing size
        routing_row: dict[str, Any] | None = None
        if routing is not None:
            r = {"entries": routing} if not isinstance(routing, Mapping) else dict(routing)
            bad = set(r) - set(_ROUTING_FIELDS)
            if bad:
                raise ValueError(f"routing: unknown field(s) {sorted(bad)}; valid: {', '.join(_ROUTING_FIELDS)}")
            routing_row = {
                **key,
                "entries": as_int(r.get("entries"), 0),
                "memory_bytes": as_int(r.get("memory_bytes")),
                "amax": as_int(r.get("amax")),
            }
        rts = as_int(metrics.get("routing_table_size"))
        if rts is None and routing_row is not None:
            rts = routing_row["entries"]
        elif rts is not None and routing_row is None:
            routing_row = {**key, "entries": rts, "memory_bytes": None, "amax": None}

        # ---- run metrics row (the idempotency gate)
        row: dict[str, Any] = {
            **key,
            "wall_time": wt,
            "tuples": as_int(metrics.get("tuples"), 0),
            "algorithm": None,
            "n_workers": as_int(metrics.get("n_workers")),
            "routing_table_size": rts,
            "feasible": as_bool(metrics.get("feasible")),
            "note": clean_text(metrics.get("note")),
            "extra": dump_json(extra or {}, "extra"),
        }
        if metrics.get("algorithm") is not None:
            row["algorithm"] = check_name(metrics["algorithm"], "algorithm")
        for col in (
            "imbalance", "theta_max_observed", "seeds_imbalance", "load_variance", "load_stddev",
            "replication", "migration_cost", "plan_seconds", "tuples_per_second", "throughput",
            "batch_latency_ms",
        ):
            row[col] = as_float(metrics.get(col))

        # ---- per-worker rows
        wrecs = normalise_records(workers, _WORKER_FIELDS, "workers")
        worker_rows = []
        for pos, w in enumerate(wrecs):
            worker_rows.append({
                **key,
                "worker": as_int(w.get("worker"), pos),
                "tuples": as_int(w.get("tuples"), 0),
                "cost": as_float(w.get("cost")),
                "distinct_keys": as_int(w.get("distinct_keys"), 0),
                "state_size": as_float(w.get("state_size")),
                "processing_seconds": as_float(w.get("processing_seconds")),
                "state_bytes": as_int(w.get("state_bytes")),
            })
        no_duplicates(worker_rows, "worker", "workers")

        # ---- hot keys
        hot_rows = []
        for pos, h in enumerate(normalise_records(hot_keys, _HOT_FIELDS, "hot_keys")):
            ws = h.get("workers")
            ws_list = [] if ws is None else [int(as_int(x)) for x in (ws.tolist() if hasattr(ws, "tolist") else ws)]
            hot_rows.append({
                **key,
                "rank": as_int(h.get("rank"), pos),
                "key": clean_text(h.get("key"), KEY_CHARS),
                "fingerprint": fingerprint_hex(h.get("fingerprint")),
                "count": as_int(h.get("count"), 0),
                "share": as_float(h.get("share")),
                "workers": dump_json(ws_list, "hot_keys.workers"),
            })
        no_duplicates(hot_rows, "rank", "hot_keys")

        # ---- shadow what-if results
        shadow_rows = []
        for s in normalise_records(shadow, _SHADOW_FIELDS, "shadow", key_field="algorithm"):
            shadow_rows.append({
                **key,
                "algorithm": check_name(s.get("algorithm"), "shadow algorithm"),
                "imbalance": as_float(s.get("imbalance")),
                "replication": as_float(s.get("replication")),
                "migration_cost": as_float(s.get("migration_cost")),
                "theta_max_observed": as_float(s.get("theta_max_observed")),
                "routing_table_size": as_int(s.get("routing_table_size")),
                "plan_seconds": as_float(s.get("plan_seconds")),
                "feasible": as_bool(s.get("feasible")),
                "note": clean_text(s.get("note")),
            })
        no_duplicates(shadow_rows, "algorithm", "shadow")

        # ---- migrations
        mig_rows = []
        for pos, m in enumerate(normalise_records(migrations, _MIGRATION_FIELDS, "migrations")):
            mig_rows.append({
                **key,
                "seq": as_int(m.get("seq"), pos),
                "wall_time": as_float(m.get("wall_time")) if m.get("wall_time") is not None else wt,
                "algorithm": clean_text(m.get("algorithm"), 64),
                "keys_moved": as_int(m.get("keys_moved"), 0),
                "state_moved": as_float(m.get("state_moved")),
                "migration_cost": as_float(m.get("migration_cost")),
                "pause_ms": as_float(m.get("pause_ms")),
                "detail": dump_json(m.get("detail") or {}, "migrations.detail"),
                "bytes_moved": as_int(m.get("bytes_moved")),
                "pause_batches": as_int(m.get("pause_batches")),
            })
        no_duplicates(mig_rows, "seq", "migrations")

        # ---- events and dead letters of this batch
        event_rows = [
            self._event_row(run_id, e.get("kind"), e.get("detail"), batch_id, as_int(e.get("interval"), interval),
                            e.get("command_id"),
                            e.get("wall_time") if e.get("wall_time") is not None else wt)
            for e in normalise_records(events, _EVENT_FIELDS, "events")
        ]
        dead = _dead_letter_records(dead_letters)

        with self._write() as conn:
            run = self._require_run(conn, run_id)
            if row["algorithm"] is None:
                row["algorithm"] = run["algorithm"]
            if not self._insert_ignore(conn, T_IM, row, ["run_id", "batch_id"]):
                return False  # replay of an already recorded batch: nothing new is written
            for table, rows in (
                (T_WM, worker_rows), (T_HOT, hot_rows), (T_SH, shadow_rows), (T_MIG, mig_rows),
            ):
                if rows:
                    conn.execute(sa_insert(table), rows)
            if routing_row is not None:
                conn.execute(sa_insert(T_RS), [routing_row])
            for ev in event_rows:
                self._insert_event(conn, ev)
            for reason, count, samples in dead:
                self._add_dead_letters(conn, run_id, reason, count, samples, batch_id, wt)
        return True

    # ------------------------------------------------------------------ events
    def _event_row(
        self,
        run_id: int,
        kind: Any,
        detail: Any,
        batch_id: int | None,
        interval: int | None,
        command_id: Any,
        wall_time: Any,
    ) -> dict[str, Any]:
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
        row = self._event_row(run_id, kind, detail, as_int(batch_id), as_int(interval), command_id, wall_time)
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
            conn, T_DLB, {"run_id": run_id, "batch_id": batch_id, "reason": reason}, ["run_id", "batch_id", "reason"]
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
        ((reason_s, n, sample_list),) = _dead_letter_records([{"reason": reason, "count": count, "samples": samples}])
        with self._write() as conn:
            self._require_run(conn, int(run_id))
            return self._add_dead_letters(conn, int(run_id), reason_s, n, sample_list, as_int(batch_id), wall_clock())


def _dead_letter_records(obj: Any) -> list[tuple[str, int, list[str]]]:
    if obj is None:
        return []
    if isinstance(obj, Mapping):
        items = []
        for reason, v in obj.items():
            if isinstance(v, Mapping):
                items.append({"reason": reason, **v})
            else:
                items.append({"reason": reason, "count": v})
    else:
        items = list(obj)
    out = []
    for item in normalise_records(items, _DEAD_FIELDS, "dead_letters"):
        reason = clean_text(item.get("reason"), REASON_CHARS)
        if not reason:
            raise ValueError("dead letter reason must be non-empty text")
        samples_in = item.get("samples") or ()
        if isinstance(samples_in, (str, bytes)):
            samples_in = [samples_in]
        samples = [clean_text(s, DEAD_LETTER_SAMPLE_CHARS) for s in list(samples_in)[-DEAD_LETTER_SAMPLE_LIMIT:]]
        count = as_int(item.get("count"), len(samples))
        if count is None or count < 0:
            raise ValueError("dead letter count must be >= 0")
        out.append((reason, count, samples))
    return out
