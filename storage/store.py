"""The repository API the engine writes through and the dashboard reads through.

Every public method is one short transaction on its own pooled connection, so a dashboard process
can read while the engine process writes (SQLite WAL; see :mod:`storage.db`).  Writes that belong
to a Spark micro-batch are **idempotent by (run, batch)**: Spark replays a batch after a failure,
and replaying it here changes nothing.

Security: every value reaches the database as a bound parameter.  Command payloads, event details,
dead-letter samples and the like are stored as JSON text and never evaluated, formatted into SQL or
interpreted by the database; the only SQL text built here comes from constants of this package.

Writer API (engine)
-------------------
* :meth:`Store.create_run`, :meth:`Store.update_run`, :meth:`Store.finish_run`
* :meth:`Store.record_interval` — run metrics + per-worker metrics + hot keys + shadow results +
  migration events + routing size (+ events, dead letters) of one (run, batch) in ONE transaction.
  The ``interval_metrics`` row is inserted first with ``INSERT … ON CONFLICT DO NOTHING``; only if
  it was new are the other rows written, so a replay writes nothing (returns ``False``).  On
  PostgreSQL a concurrent duplicate waits for the first transaction and then does nothing; on
  SQLite ``BEGIN IMMEDIATE`` serialises writers.
* :meth:`Store.record_event`, :meth:`Store.record_dead_letters`
* :meth:`Store.pending_commands`, :meth:`Store.mark_command`

Reader API (dashboard, CLI)
---------------------------
* :meth:`Store.list_runs`, :meth:`Store.get_run`
* :meth:`Store.interval_metrics` (incremental: ``since_interval``), :meth:`Store.worker_metrics`,
  :meth:`Store.hot_keys`, :meth:`Store.shadow_results`, :meth:`Store.migration_events`,
  :meth:`Store.routing_sizes`, :meth:`Store.events`, :meth:`Store.dead_letters`
* :meth:`Store.submit_command`, :meth:`Store.recent_commands`
* :meth:`Store.export_run` (JSON-ready dict), :meth:`Store.export_csv`, :meth:`Store.import_run`

Values: floats that are NaN or infinite are stored as NULL (``None``); numpy scalars are accepted
everywhere; text is stored verbatim except that NUL characters (which PostgreSQL ``TEXT`` cannot
hold) become the four characters ``\\x00``, unpaired surrogates are backslash-escaped, and overlong
text is truncated to the documented bound (ending in ``…``).

Command payload conventions (validated by the engine against the registry, not here):
``set-algorithm`` ``{"algorithm": name, "params": {…}}``; ``set-param`` ``{"params": {name: value}}``;
``set-workers`` ``{"workers": n}``; ``pause`` / ``resume`` ``{}``.  The store only checks that the
kind is known and that the payload is a JSON object of at most :data:`MAX_PAYLOAD_CHARS` characters.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
import time
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Mapping, Sequence

from sqlalchemy import Connection, Engine, Table, func, inspect, select, update
from sqlalchemy import delete as sa_delete
from sqlalchemy import insert as sa_insert
from sqlalchemy import text as sa_text

from skewlab.shared import COMMAND_KINDS
from storage.models import (
    ADDED_COLUMNS,
    INTERVAL_METRIC_COLUMNS,
    RUN_STATUSES,
    SCHEMA_VERSION,
    Base,
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

__all__ = [
    "EXPORT_FORMAT",
    "MAX_PAYLOAD_CHARS",
    "Store",
    "UnknownCommand",
    "UnknownRun",
]

EXPORT_FORMAT = "skewlab-run"
MAX_PAYLOAD_CHARS = 65_536
DEAD_LETTER_SAMPLE_LIMIT = 20
DEAD_LETTER_SAMPLE_CHARS = 1_000
_REASON_CHARS = 200
_TEXT_CHARS = 2_000
_KEY_CHARS = 500
_JSON_CHARS = 262_144
_NAME_RE = re.compile(r"^[A-Za-z0-9_.:+\-]{1,64}$")
_EVENT_KIND_RE = re.compile(r"^[a-z][a-z0-9_.\-]{0,63}$")
# Serialises schema creation between processes on PostgreSQL (arbitrary constant: "skewlab" in ASCII).
_PG_SCHEMA_LOCK = 0x736B65776C6162

_T_RUN: Table = Run.__table__  # type: ignore[assignment]
_T_IM: Table = IntervalMetric.__table__  # type: ignore[assignment]
_T_WM: Table = WorkerMetric.__table__  # type: ignore[assignment]
_T_RS: Table = RoutingSize.__table__  # type: ignore[assignment]
_T_MIG: Table = MigrationEvent.__table__  # type: ignore[assignment]
_T_HOT: Table = HotKey.__table__  # type: ignore[assignment]
_T_SH: Table = ShadowResult.__table__  # type: ignore[assignment]
_T_EV: Table = Event.__table__  # type: ignore[assignment]
_T_DL: Table = DeadLetter.__table__  # type: ignore[assignment]
_T_DLB: Table = DeadLetterBatch.__table__  # type: ignore[assignment]
_T_CMD: Table = Command.__table__  # type: ignore[assignment]
_T_META: Table = Meta.__table__  # type: ignore[assignment]

# JSON-text columns, decoded on read / export and encoded on write / import.
_JSON_COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": ("params", "config"),
    "interval_metrics": ("extra",),
    "migration_events": ("detail",),
    "hot_keys": ("workers",),
    "events": ("detail",),
    "dead_letters": ("sample",),
    "commands": ("payload",),
}

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

# Per-interval child tables in export order: (export name, table, order-by column names).
_CHILD_TABLES: tuple[tuple[str, Table, tuple[str, ...]], ...] = (
    ("interval_metrics", _T_IM, ("interval", "batch_id")),
    ("worker_metrics", _T_WM, ("interval", "batch_id", "worker")),
    ("routing_sizes", _T_RS, ("interval", "batch_id")),
    ("migration_events", _T_MIG, ("interval", "batch_id", "seq")),
    ("hot_keys", _T_HOT, ("interval", "batch_id", "rank")),
    ("shadow_results", _T_SH, ("interval", "batch_id", "algorithm")),
    ("events", _T_EV, ("id",)),
    ("dead_letters", _T_DL, ("reason",)),
    ("commands", _T_CMD, ("id",)),
)


class UnknownRun(LookupError):
    """No run with that id."""


class UnknownCommand(LookupError):
    """No command with that id."""


# ---------------------------------------------------------------------------------------------
# Value cleaning
# ---------------------------------------------------------------------------------------------
def _now() -> float:
    return time.time()


def _f(value: Any) -> float | None:
    """A finite float, or None (None, NaN, ±inf)."""
    if value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"expected a number, got {type(value).__name__}") from exc
    return out if math.isfinite(out) else None


def _i(value: Any, default: int | None = None) -> int | None:
    """An int (numpy integers and integral floats accepted), or ``default`` for None."""
    if value is None:
        return default
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) or (hasattr(value, "dtype") and getattr(value.dtype, "kind", "") == "f"):
        fv = float(value)
        if not math.isfinite(fv):
            return default
        if fv != int(fv):
            raise ValueError(f"expected an integer, got {fv!r}")
        return int(fv)
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"expected an integer, got {type(value).__name__}") from exc


def _b(value: Any) -> bool | None:
    return None if value is None else bool(value)


def _text(value: Any, limit: int = _TEXT_CHARS) -> str:
    """Text stored verbatim, except NUL → ``\\x00``, lone surrogates escaped, truncated to ``limit``."""
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        s = bytes(value).decode("utf-8", errors="backslashreplace")
    else:
        s = value if isinstance(value, str) else str(value)
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        s = s.encode("utf-8", errors="backslashreplace").decode("utf-8")
    if "\x00" in s:
        s = s.replace("\x00", "\\x00")
    if len(s) > limit:
        s = s[: max(limit - 1, 0)] + "…"
    return s


def _name(value: Any, what: str) -> str:
    """An algorithm / parameter name: a short identifier (the engine checks it against the registry)."""
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise ValueError(f"{what} must be 1-64 characters of letters, digits, '_', '.', ':', '+', '-'")
    return value


def _plain(obj: Any, strict: bool = False) -> Any:
    """numpy scalars / arrays and tuples → plain JSON types.

    Non-finite floats become None, or raise ``ValueError`` when ``strict`` (command payloads: a NaN
    parameter value is an error, not a missing value).  Mapping keys must be text when ``strict``,
    else they are converted with ``str``.
    """
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        if strict:
            raise ValueError("NaN and infinity are not valid JSON")
        return None
    if isinstance(obj, Mapping):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                if strict:
                    raise ValueError(f"JSON object keys must be text, got {type(k).__name__}")
                k = str(_plain(k))
            out[k] = _plain(v, strict)
        return out
    if isinstance(obj, (list, tuple)):
        return [_plain(v, strict) for v in obj]
    if hasattr(obj, "tolist"):  # numpy arrays and scalars
        return _plain(obj.tolist(), strict)
    raise ValueError(f"value of type {type(obj).__name__} is not JSON-serialisable")


def _dumps(obj: Any, what: str, limit: int = _JSON_CHARS, strict: bool = False) -> str:
    """JSON text (sorted keys, ASCII, no NaN) of ``obj``; ``ValueError`` if impossible or too long."""
    try:
        out = json.dumps(_plain(obj, strict), sort_keys=True, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{what} is not JSON-serialisable: {exc}") from exc
    if len(out) > limit:
        raise ValueError(f"{what} is too large ({len(out)} > {limit} characters of JSON)")
    return out


def _loads(text: str | None, default: Any) -> Any:
    if text is None or text == "":
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default


def _records(obj: Any, fields: Sequence[str], what: str, key_field: str | None = None) -> list[dict[str, Any]]:
    """Normalise a list of mappings, a columnar mapping of sequences, or ``{key: mapping}``.

    Unknown field names raise ``ValueError`` listing the valid ones (catches typos early).
    """
    if obj is None:
        return []
    items: list[Mapping[str, Any]]
    if isinstance(obj, Mapping):
        values = list(obj.values())
        if values and all(isinstance(v, Mapping) for v in values):
            if key_field is None:
                raise ValueError(f"{what}: expected a list of mappings or a mapping of equal-length columns")
            items = [{key_field: k, **v} for k, v in obj.items()]
        elif all(hasattr(v, "__len__") and not isinstance(v, (str, bytes, Mapping)) for v in values):
            n = {len(v) for v in values}
            if len(n) > 1:
                raise ValueError(f"{what}: columns have different lengths {sorted(n)}")
            m = n.pop() if n else 0
            items = [{k: obj[k][i] for k in obj} for i in range(m)]
        else:
            raise ValueError(f"{what}: expected a list of mappings or a mapping of equal-length columns")
    elif isinstance(obj, (str, bytes)):
        raise ValueError(f"{what}: expected a list of mappings")
    else:
        items = list(obj)
    out = []
    allowed = set(fields)
    for item in items:
        if not isinstance(item, Mapping):
            raise ValueError(f"{what}: every entry must be a mapping, got {type(item).__name__}")
        unknown = set(item) - allowed
        if unknown:
            raise ValueError(f"{what}: unknown field(s) {sorted(map(str, unknown))}; valid: {', '.join(fields)}")
        out.append(dict(item))
    return out


def _decode(table: str, row: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for col in _JSON_COLUMNS.get(table, ()):
        if col in out:
            out[col] = _loads(out[col], [] if col in ("workers", "sample") else {})
    return out


# ---------------------------------------------------------------------------------------------
# The store
# ---------------------------------------------------------------------------------------------
class Store:
    """Repository over one SQLAlchemy engine (SQLite or PostgreSQL); thread-safe, one pool."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name
        if self.dialect not in ("sqlite", "postgresql"):
            raise ValueError(f"unsupported database dialect {self.dialect!r}")

    # ------------------------------------------------------------------ plumbing
    @property
    def url(self) -> str:
        """The database URL with the password hidden."""
        return self.engine.url.render_as_string(hide_password=True)

    def __repr__(self) -> str:
        return f"Store({self.url})"

    def close(self) -> None:
        """Release pooled connections."""
        self.engine.dispose()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """One short write transaction (SQLite: ``BEGIN IMMEDIATE``)."""
        with self.engine.connect() as conn:
            conn = conn.execution_options(skewlab_write=True)
            with conn.begin():
                yield conn

    @contextmanager
    def _read(self, snapshot: bool = False) -> Iterator[Connection]:
        """One read transaction; ``snapshot``: one consistent view over several queries (PG: REPEATABLE READ)."""
        with self.engine.connect() as conn:
            if snapshot and self.dialect == "postgresql":
                conn = conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                yield conn

    def _insert(self, table: Table) -> Any:
        """The dialect's INSERT construct (supports ``on_conflict_do_nothing``)."""
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        return insert(table)

    def _insert_ignore(self, conn: Connection, table: Table, row: Mapping[str, Any], keys: Sequence[str]) -> bool:
        """``INSERT … ON CONFLICT (keys) DO NOTHING``; True if the row was inserted."""
        pk = list(table.primary_key.columns)[0]
        stmt = self._insert(table).values(**row).on_conflict_do_nothing(index_elements=list(keys)).returning(pk)
        return conn.execute(stmt).first() is not None

    def create_schema(self) -> None:
        """Create missing tables and indexes, upgrading an older schema (idempotent; serialised between processes).

        A new database gets the current schema; one written by an older version gets the columns added
        since (:meth:`_upgrade`); one written by a newer version raises ``RuntimeError``.
        """
        with self._write() as conn:
            if self.dialect == "postgresql":
                conn.execute(sa_text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_SCHEMA_LOCK})
            Base.metadata.create_all(conn, checkfirst=True)
            self._insert_ignore(conn, _T_META, {"key": "schema_version", "value": str(SCHEMA_VERSION)}, ["key"])
            found = conn.execute(select(_T_META.c.value).where(_T_META.c.key == "schema_version")).scalar_one()
            if found.isdigit() and int(found) < SCHEMA_VERSION:
                self._upgrade(conn, int(found))
                found = str(SCHEMA_VERSION)
        if found != str(SCHEMA_VERSION):
            raise RuntimeError(
                f"database schema version {found} does not match this skewlab (version {SCHEMA_VERSION})"
            )

    @staticmethod
    def _upgrade(conn: Connection, version: int) -> None:
        """Add the columns of every schema version after ``version`` (:data:`storage.models.ADDED_COLUMNS`)
        that the tables lack, with ``ALTER TABLE … ADD COLUMN``, and record the current version.

        Table and column names come from the models, never from the database or a caller.
        """
        quote = conn.dialect.identifier_preparer.quote
        for v in range(version + 1, SCHEMA_VERSION + 1):
            for table, column in ADDED_COLUMNS.get(v, ()):
                if column in {c["name"] for c in inspect(conn).get_columns(table)}:
                    continue
                col_type = Base.metadata.tables[table].c[column].type.compile(dialect=conn.dialect)
                conn.exec_driver_sql(f"ALTER TABLE {quote(table)} ADD COLUMN {quote(column)} {col_type}")
        conn.execute(update(_T_META).where(_T_META.c.key == "schema_version").values(value=str(SCHEMA_VERSION)))

    def drop_schema(self) -> None:
        """Drop every skewlab table (tests and ``reset`` tooling only)."""
        with self._write() as conn:
            Base.metadata.drop_all(conn, checkfirst=True)

    def sqlite_pragmas(self) -> dict[str, Any]:
        """Current ``journal_mode``, ``busy_timeout``, ``foreign_keys``, ``synchronous`` (SQLite only)."""
        if self.dialect != "sqlite":
            return {}
        out = {}
        with self.engine.connect() as conn:
            for name in ("journal_mode", "busy_timeout", "foreign_keys", "synchronous"):
                out[name] = conn.exec_driver_sql(f"PRAGMA {name}").scalar()  # constant names only
        return out

    @staticmethod
    def _require_run(conn: Connection, run_id: int) -> dict[str, Any]:
        """``id`` and current ``algorithm`` of a run; :class:`UnknownRun` if there is none."""
        row = conn.execute(
            select(_T_RUN.c.id, _T_RUN.c.algorithm).where(_T_RUN.c.id == int(run_id))
        ).mappings().first()
        if row is None:
            raise UnknownRun(f"no run with id {run_id}")
        return dict(row)

    # ------------------------------------------------------------------ runs
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
        now = _now()
        row = {
            "name": _text(name, 200),
            "algorithm": _name(algorithm, "algorithm"),
            "params": _dumps(params or {}, "params"),
            "seed": _i(seed, 0),
            "n_workers": _i(n_workers),
            "workload": _text(workload, 500),
            "config": _dumps(config or {}, "config"),
            "status": status,
            "note": _text(note),
            "created_at": now,
            "updated_at": now,
            "finished_at": None,
        }
        with self._write() as conn:
            return int(conn.execute(sa_insert(_T_RUN).values(**row).returning(_T_RUN.c.id)).scalar_one())

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
        values: dict[str, Any] = {"updated_at": _now()}
        if algorithm is not None:
            values["algorithm"] = _name(algorithm, "algorithm")
        if params is not None:
            values["params"] = _dumps(params, "params")
        if n_workers is not None:
            values["n_workers"] = _i(n_workers)
        if note is not None:
            values["note"] = _text(note)
        if status is not None:
            if status not in RUN_STATUSES:
                raise ValueError(f"run status must be one of {', '.join(RUN_STATUSES)}")
            values["status"] = status
            if status in ("finished", "failed", "stopped"):
                values["finished_at"] = values["updated_at"]
        with self._write() as conn:
            res = conn.execute(update(_T_RUN).where(_T_RUN.c.id == int(run_id)).values(**values))
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
            for table in (_T_IM, _T_WM, _T_RS, _T_MIG, _T_HOT, _T_SH, _T_EV, _T_DL, _T_DLB, _T_CMD):
                conn.execute(sa_delete(table).where(table.c.run_id == int(run_id)))
            return conn.execute(sa_delete(_T_RUN).where(_T_RUN.c.id == int(run_id))).rowcount > 0

    def get_run(self, run_id: int) -> dict[str, Any] | None:
        """The run's row (params/config decoded), or None."""
        with self._read() as conn:
            row = conn.execute(select(_T_RUN).where(_T_RUN.c.id == int(run_id))).mappings().first()
        return None if row is None else _decode("runs", row)

    def list_runs(self, limit: int | None = None, status: str | None = None) -> list[dict[str, Any]]:
        """Runs, newest first, with progress: ``intervals``, ``last_interval``, ``last_batch``, ``last_wall_time``."""
        agg = (
            select(
                _T_IM.c.run_id,
                func.count().label("intervals"),
                func.max(_T_IM.c.interval).label("last_interval"),
                func.max(_T_IM.c.batch_id).label("last_batch"),
                func.max(_T_IM.c.wall_time).label("last_wall_time"),
            )
            .group_by(_T_IM.c.run_id)
            .subquery()
        )
        stmt = (
            select(_T_RUN, agg.c.intervals, agg.c.last_interval, agg.c.last_batch, agg.c.last_wall_time)
            .select_from(_T_RUN.outerjoin(agg, agg.c.run_id == _T_RUN.c.id))
            .order_by(_T_RUN.c.id.desc())
        )
        if status is not None:
            stmt = stmt.where(_T_RUN.c.status == status)
        if limit is not None:
            stmt = stmt.limit(max(int(limit), 0))
        with self._read() as conn:
            rows = conn.execute(stmt).mappings().all()
        out = []
        for r in rows:
            d = _decode("runs", r)
            d["intervals"] = int(d["intervals"] or 0)
            out.append(d)
        return out

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
        batch_id = _i(batch_id)
        interval = _i(interval)
        if batch_id is None or interval is None:
            raise ValueError("batch_id and interval are required integers")
        metrics = dict(metrics or {})
        for key, expected in (("batch_id", batch_id), ("interval", interval), ("run_id", run_id)):
            if key in metrics:
                if _i(metrics.pop(key)) != expected:
                    raise ValueError(f"metrics[{key!r}] differs from the {key} argument")
        if "wall_time" in metrics:
            mt = metrics.pop("wall_time")
            wall_time = wall_time if wall_time is not None else mt
        unknown = set(metrics) - set(INTERVAL_METRIC_COLUMNS)
        if unknown:
            raise ValueError(
                f"unknown interval metric(s) {sorted(map(str, unknown))}; valid: {', '.join(INTERVAL_METRIC_COLUMNS)}"
            )
        now = _now()
        wt = _f(wall_time) if wall_time is not None else now
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
                "entries": _i(r.get("entries"), 0),
                "memory_bytes": _i(r.get("memory_bytes")),
                "amax": _i(r.get("amax")),
            }
        rts = _i(metrics.get("routing_table_size"))
        if rts is None and routing_row is not None:
            rts = routing_row["entries"]
        elif rts is not None and routing_row is None:
            routing_row = {**key, "entries": rts, "memory_bytes": None, "amax": None}

        # ---- run metrics row (the idempotency gate)
        row: dict[str, Any] = {
            **key,
            "wall_time": wt,
            "tuples": _i(metrics.get("tuples"), 0),
            "algorithm": None,
            "n_workers": _i(metrics.get("n_workers")),
            "routing_table_size": rts,
            "feasible": _b(metrics.get("feasible")),
            "note": _text(metrics.get("note")),
            "extra": _dumps(extra or {}, "extra"),
        }
        if metrics.get("algorithm") is not None:
            row["algorithm"] = _name(metrics["algorithm"], "algorithm")
        for col in (
            "imbalance", "theta_max_observed", "seeds_imbalance", "load_variance", "load_stddev",
            "replication", "migration_cost", "plan_seconds", "tuples_per_second", "throughput",
            "batch_latency_ms",
        ):
            row[col] = _f(metrics.get(col))

        # ---- per-worker rows
        wrecs = _records(workers, _WORKER_FIELDS, "workers")
        worker_rows = []
        for pos, w in enumerate(wrecs):
            worker_rows.append({
                **key,
                "worker": _i(w.get("worker"), pos),
                "tuples": _i(w.get("tuples"), 0),
                "cost": _f(w.get("cost")),
                "distinct_keys": _i(w.get("distinct_keys"), 0),
                "state_size": _f(w.get("state_size")),
                "processing_seconds": _f(w.get("processing_seconds")),
                "state_bytes": _i(w.get("state_bytes")),
            })
        _no_duplicates(worker_rows, "worker", "workers")

        # ---- hot keys
        hot_rows = []
        for pos, h in enumerate(_records(hot_keys, _HOT_FIELDS, "hot_keys")):
            ws = h.get("workers")
            ws_list = [] if ws is None else [int(_i(x)) for x in (ws.tolist() if hasattr(ws, "tolist") else ws)]
            hot_rows.append({
                **key,
                "rank": _i(h.get("rank"), pos),
                "key": _text(h.get("key"), _KEY_CHARS),
                "fingerprint": _fingerprint(h.get("fingerprint")),
                "count": _i(h.get("count"), 0),
                "share": _f(h.get("share")),
                "workers": _dumps(ws_list, "hot_keys.workers"),
            })
        _no_duplicates(hot_rows, "rank", "hot_keys")

        # ---- shadow what-if results
        shadow_rows = []
        for s in _records(shadow, _SHADOW_FIELDS, "shadow", key_field="algorithm"):
            shadow_rows.append({
                **key,
                "algorithm": _name(s.get("algorithm"), "shadow algorithm"),
                "imbalance": _f(s.get("imbalance")),
                "replication": _f(s.get("replication")),
                "migration_cost": _f(s.get("migration_cost")),
                "theta_max_observed": _f(s.get("theta_max_observed")),
                "routing_table_size": _i(s.get("routing_table_size")),
                "plan_seconds": _f(s.get("plan_seconds")),
                "feasible": _b(s.get("feasible")),
                "note": _text(s.get("note")),
            })
        _no_duplicates(shadow_rows, "algorithm", "shadow")

        # ---- migrations
        mig_rows = []
        for pos, m in enumerate(_records(migrations, _MIGRATION_FIELDS, "migrations")):
            mig_rows.append({
                **key,
                "seq": _i(m.get("seq"), pos),
                "wall_time": _f(m.get("wall_time")) if m.get("wall_time") is not None else wt,
                "algorithm": _text(m.get("algorithm"), 64),
                "keys_moved": _i(m.get("keys_moved"), 0),
                "state_moved": _f(m.get("state_moved")),
                "migration_cost": _f(m.get("migration_cost")),
                "pause_ms": _f(m.get("pause_ms")),
                "detail": _dumps(m.get("detail") or {}, "migrations.detail"),
                "bytes_moved": _i(m.get("bytes_moved")),
                "pause_batches": _i(m.get("pause_batches")),
            })
        _no_duplicates(mig_rows, "seq", "migrations")

        # ---- events and dead letters of this batch
        event_rows = [
            self._event_row(run_id, e.get("kind"), e.get("detail"), batch_id, _i(e.get("interval"), interval),
                            e.get("command_id"),
                            e.get("wall_time") if e.get("wall_time") is not None else wt)
            for e in _records(events, _EVENT_FIELDS, "events")
        ]
        dead = _dead_letter_records(dead_letters)

        with self._write() as conn:
            run = self._require_run(conn, run_id)
            if row["algorithm"] is None:
                row["algorithm"] = run["algorithm"]
            if not self._insert_ignore(conn, _T_IM, row, ["run_id", "batch_id"]):
                return False  # replay of an already recorded batch: nothing new is written
            for table, rows in (
                (_T_WM, worker_rows), (_T_HOT, hot_rows), (_T_SH, shadow_rows), (_T_MIG, mig_rows),
            ):
                if rows:
                    conn.execute(sa_insert(table), rows)
            if routing_row is not None:
                conn.execute(sa_insert(_T_RS), [routing_row])
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
        detail_json = _dumps(detail or {}, "event detail")
        cid = _i(command_id)
        dedupe = None
        if batch_id is not None:
            digest = hashlib.sha1(detail_json.encode("ascii")).hexdigest()[:24]
            dedupe = f"{batch_id}:{kind}:{cid if cid is not None else '-'}:{digest}"[:128]
        wt = _f(wall_time) if wall_time is not None else None
        return {
            "run_id": int(run_id),
            "batch_id": batch_id,
            "interval": interval,
            "wall_time": _now() if wt is None else wt,
            "kind": kind,
            "detail": detail_json,
            "command_id": cid,
            "dedupe": dedupe,
        }

    def _insert_event(self, conn: Connection, row: Mapping[str, Any]) -> int | None:
        if row["dedupe"] is None:
            return int(conn.execute(sa_insert(_T_EV).values(**row).returning(_T_EV.c.id)).scalar_one())
        stmt = (
            self._insert(_T_EV)
            .values(**row)
            .on_conflict_do_nothing(index_elements=["run_id", "dedupe"])
            .returning(_T_EV.c.id)
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
        row = self._event_row(run_id, kind, detail, _i(batch_id), _i(interval), command_id, wall_time)
        with self._write() as conn:
            self._require_run(conn, int(run_id))
            return self._insert_event(conn, row)

    def events(self, run_id: int, since_id: int | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Events of a run in order (``since_id`` exclusive, for incremental reads)."""
        stmt = select(_T_EV).where(_T_EV.c.run_id == int(run_id))
        if since_id is not None:
            stmt = stmt.where(_T_EV.c.id > int(since_id))
        stmt = stmt.order_by(_T_EV.c.id)
        if limit is not None:
            stmt = stmt.limit(max(int(limit), 0))
        with self._read() as conn:
            return [_decode("events", r) for r in conn.execute(stmt).mappings()]

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
            conn, _T_DLB, {"run_id": run_id, "batch_id": batch_id, "reason": reason}, ["run_id", "batch_id", "reason"]
        ):
            return False
        self._insert_ignore(
            conn,
            _T_DL,
            {"run_id": run_id, "reason": reason, "count": 0, "sample": "[]", "first_seen": now, "last_seen": now},
            ["run_id", "reason"],
        )
        cur = conn.execute(
            select(_T_DL.c.count, _T_DL.c.sample)
            .where(_T_DL.c.run_id == run_id, _T_DL.c.reason == reason)
            .with_for_update()
        ).one()
        kept = _loads(cur.sample, [])
        if not isinstance(kept, list):
            kept = []
        kept = (kept + samples)[-DEAD_LETTER_SAMPLE_LIMIT:]
        conn.execute(
            update(_T_DL)
            .where(_T_DL.c.run_id == run_id, _T_DL.c.reason == reason)
            .values(count=int(cur.count) + count, sample=_dumps(kept, "dead letter sample"), last_seen=now,
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
            return self._add_dead_letters(conn, int(run_id), reason_s, n, sample_list, _i(batch_id), _now())

    def dead_letters(self, run_id: int) -> list[dict[str, Any]]:
        """Per reason: ``count``, ``sample`` (list of text), ``first_seen``, ``last_seen``, ``last_batch``."""
        stmt = select(_T_DL).where(_T_DL.c.run_id == int(run_id)).order_by(_T_DL.c.reason)
        with self._read() as conn:
            return [_decode("dead_letters", r) for r in conn.execute(stmt).mappings()]

    # ------------------------------------------------------------------ commands
    def submit_command(self, kind: str, payload: Mapping[str, Any] | None = None, *, run_id: int | None = None) -> int:
        """Queue an operator command (``pending``); returns its id.

        ``kind`` must be one of :data:`skewlab.shared.COMMAND_KINDS`; ``payload`` a JSON object.  The
        payload is stored as JSON text only — the engine validates it against the registry.
        ``run_id`` None addresses whichever run is active.
        """
        if not isinstance(kind, str) or kind not in COMMAND_KINDS:
            raise ValueError(f"unknown command kind {str(kind)[:40]!r}; valid: {', '.join(COMMAND_KINDS)}")
        if payload is None:
            payload = {}
        if not isinstance(payload, Mapping):
            raise ValueError("command payload must be a JSON object (a mapping)")
        payload_json = _dumps(payload, "command payload", MAX_PAYLOAD_CHARS, strict=True)
        now = _now()
        row = {
            "run_id": None if run_id is None else int(run_id),
            "kind": kind,
            "payload": payload_json,
            "status": "pending",
            "reason": "",
            "applied_batch": None,
            "created_at": now,
            "updated_at": now,
        }
        with self._write() as conn:
            if run_id is not None:
                self._require_run(conn, int(run_id))
            return int(conn.execute(sa_insert(_T_CMD).values(**row).returning(_T_CMD.c.id)).scalar_one())

    def pending_commands(self, run_id: int | None = None) -> list[dict[str, Any]]:
        """Pending commands in submission order: global ones, plus those addressed to ``run_id``."""
        cond = _T_CMD.c.run_id.is_(None)
        if run_id is not None:
            cond = cond | (_T_CMD.c.run_id == int(run_id))
        stmt = select(_T_CMD).where(_T_CMD.c.status == "pending", cond).order_by(_T_CMD.c.id)
        with self._read() as conn:
            return [_decode("commands", r) for r in conn.execute(stmt).mappings()]

    def mark_command(
        self,
        command_id: int,
        status: str,
        reason: str = "",
        applied_batch: int | None = None,
        *,
        run_id: int | None = None,
    ) -> bool:
        """Move a pending command to ``applied`` or ``rejected``; True if this call changed it.

        Only a pending command changes (a replay after a crash is harmless and returns False).
        ``run_id`` records which run handled a global command.  Unknown ids raise
        :class:`UnknownCommand`.
        """
        if status not in ("applied", "rejected"):
            raise ValueError("command status must be 'applied' or 'rejected'")
        values: dict[str, Any] = {
            "status": status,
            "reason": _text(reason),
            "applied_batch": _i(applied_batch),
            "updated_at": _now(),
        }
        with self._write() as conn:
            if run_id is not None:
                self._require_run(conn, int(run_id))
            cur = conn.execute(select(_T_CMD.c.run_id, _T_CMD.c.status).where(_T_CMD.c.id == int(command_id))).first()
            if cur is None:
                raise UnknownCommand(f"no command with id {command_id}")
            if run_id is not None and cur.run_id is None:
                values["run_id"] = int(run_id)
            res = conn.execute(
                update(_T_CMD).where(_T_CMD.c.id == int(command_id), _T_CMD.c.status == "pending").values(**values)
            )
            return res.rowcount == 1

    def get_command(self, command_id: int) -> dict[str, Any] | None:
        with self._read() as conn:
            row = conn.execute(select(_T_CMD).where(_T_CMD.c.id == int(command_id))).mappings().first()
        return None if row is None else _decode("commands", row)

    def recent_commands(self, limit: int = 50, run_id: int | None = None) -> list[dict[str, Any]]:
        """Most recent commands first (all statuses); with ``run_id``: that run's and global ones.

        Each row also carries ``applied_interval``: the interval of the run from which the command is
        in effect (see :meth:`_applied_interval`), None when unknown.
        """
        stmt = select(_T_CMD)
        if run_id is not None:
            stmt = stmt.where(_T_CMD.c.run_id.is_(None) | (_T_CMD.c.run_id == int(run_id)))
        stmt = stmt.order_by(_T_CMD.c.id.desc()).limit(max(int(limit), 0))
        with self._read(snapshot=True) as conn:
            rows = [_decode("commands", r) for r in conn.execute(stmt).mappings()]
            for r in rows:
                r["applied_interval"] = self._applied_interval(conn, r["run_id"], r["applied_batch"])
        return rows

    @staticmethod
    def _applied_interval(conn: Connection, run_id: int | None, batch_id: int | None) -> int | None:
        """The interval number of ``batch_id`` in ``run_id``.

        A command takes effect from a batch that may not be recorded yet (the next one): its interval is
        then counted on from the last recorded batch before it (batches and intervals advance together).
        """
        if run_id is None or batch_id is None:
            return None
        got = conn.execute(
            select(_T_IM.c.batch_id, _T_IM.c.interval)
            .where(_T_IM.c.run_id == int(run_id), _T_IM.c.batch_id <= int(batch_id))
            .order_by(_T_IM.c.batch_id.desc()).limit(1)
        ).first()
        return None if got is None else int(got.interval) + int(batch_id) - int(got.batch_id)

    # ------------------------------------------------------------------ dashboard reads
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
            rows = [_decode(name, r) for r in conn.execute(stmt).mappings()]
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
        return self._interval_rows("interval_metrics", _T_IM, ("interval", "batch_id"), run_id, since_interval,
                                   limit, latest)

    def worker_metrics(
        self, run_id: int, since_interval: int | None = None, *, interval: int | None = None,
        limit: int | None = None, latest: bool = False,
    ) -> list[dict[str, Any]]:
        """Per-worker rows ordered by (interval, batch, worker); filter by ``since_interval`` or ``interval``."""
        return self._interval_rows("worker_metrics", _T_WM, ("interval", "batch_id", "worker"), run_id,
                                   since_interval, limit, latest, interval)

    def routing_sizes(self, run_id: int, since_interval: int | None = None) -> list[dict[str, Any]]:
        return self._interval_rows("routing_sizes", _T_RS, ("interval", "batch_id"), run_id, since_interval,
                                   None, False)

    def migration_events(self, run_id: int, since_interval: int | None = None) -> list[dict[str, Any]]:
        return self._interval_rows("migration_events", _T_MIG, ("interval", "batch_id", "seq"), run_id,
                                   since_interval, None, False)

    def shadow_results(
        self, run_id: int, since_interval: int | None = None, *, interval: int | None = None
    ) -> list[dict[str, Any]]:
        return self._interval_rows("shadow_results", _T_SH, ("interval", "batch_id", "algorithm"), run_id,
                                   since_interval, None, False, interval)

    def hot_keys(self, run_id: int, interval: int | None = None) -> list[dict[str, Any]]:
        """Top-k hot keys of ``interval`` (default: the latest batch that has any), by rank."""
        with self._read() as conn:
            stmt = select(_T_HOT.c.batch_id).where(_T_HOT.c.run_id == int(run_id))
            if interval is not None:
                stmt = stmt.where(_T_HOT.c.interval == int(interval))
            batch = conn.execute(
                stmt.order_by(_T_HOT.c.interval.desc(), _T_HOT.c.batch_id.desc()).limit(1)
            ).scalar()
            if batch is None:
                return []
            rows = conn.execute(
                select(_T_HOT)
                .where(_T_HOT.c.run_id == int(run_id), _T_HOT.c.batch_id == batch)
                .order_by(_T_HOT.c.rank)
            ).mappings()
            return [_decode("hot_keys", r) for r in rows]

    # ------------------------------------------------------------------ export / import
    def export_run(self, run_id: int) -> dict[str, Any]:
        """Everything recorded for a run as a JSON-serialisable dict (one consistent snapshot).

        Layout: ``{"format": "skewlab-run", "schema_version", "run": {...}, "<table>": [rows...]}``
        for the tables of :mod:`storage.models` (rows without ``run_id``; JSON columns decoded).
        Commands addressed to the run or marked by it are included, and so are global commands
        (``run_id`` NULL) that an event of the run names; the internal replay markers of dead letters
        are not.
        """
        out: dict[str, Any] = {"format": EXPORT_FORMAT, "schema_version": SCHEMA_VERSION}
        with self._read(snapshot=True) as conn:
            run = conn.execute(select(_T_RUN).where(_T_RUN.c.id == int(run_id))).mappings().first()
            if run is None:
                raise UnknownRun(f"no run with id {run_id}")
            out["run"] = _decode("runs", run)
            for name, table, order in _CHILD_TABLES:
                cond = table.c.run_id == int(run_id)
                if table is _T_CMD:  # global commands this run applied (events name them)
                    cond = cond | (_T_CMD.c.run_id.is_(None) & _T_CMD.c.id.in_(
                        select(_T_EV.c.command_id).where(_T_EV.c.run_id == int(run_id),
                                                         _T_EV.c.command_id.is_not(None))))
                stmt = select(table).where(cond).order_by(*[table.c[c] for c in order])
                rows = []
                for r in conn.execute(stmt).mappings():
                    d = _decode(name, r)
                    d.pop("run_id", None)
                    rows.append(d)
                out[name] = rows
        return out

    def export_csv(self, run_id: int) -> dict[str, str]:
        """CSV text per table of :meth:`export_run` (``run`` is a one-row table; JSON cells as JSON)."""
        data = self.export_run(run_id)
        out = {}
        for name in ["run"] + [n for n, _, _ in _CHILD_TABLES]:
            rows = [data["run"]] if name == "run" else data[name]
            table = _T_RUN if name == "run" else dict((n, t) for n, t, _ in _CHILD_TABLES)[name]
            cols = [c.name for c in table.columns if name == "run" or c.name != "run_id"]
            buf = io.StringIO()
            writer = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
            writer.writeheader()
            for r in rows:
                writer.writerow({
                    c: (json.dumps(r[c], sort_keys=True) if isinstance(r.get(c), (dict, list)) else r.get(c))
                    for c in cols
                })
            out[name] = buf.getvalue()
        return out

    def import_run(self, data: Mapping[str, Any]) -> int:
        """Insert a run exported by :meth:`export_run` (from any backend) as a new run; its new id.

        Exports of an older schema version are accepted: the columns added since are NULL.
        """
        if not isinstance(data, Mapping) or data.get("format") != EXPORT_FORMAT:
            raise ValueError(f"not a {EXPORT_FORMAT} export")
        if not 1 <= int(data.get("schema_version", -1)) <= SCHEMA_VERSION:
            raise ValueError(f"export schema version {data.get('schema_version')} is not 1 to {SCHEMA_VERSION}")
        run = dict(data["run"])
        run.pop("id", None)
        for extra_col in ("intervals", "last_interval", "last_batch", "last_wall_time"):
            run.pop(extra_col, None)
        _encode_row("runs", _T_RUN, run)
        with self._write() as conn:
            new_id = int(conn.execute(sa_insert(_T_RUN).values(**run).returning(_T_RUN.c.id)).scalar_one())
            for name, table, _ in _CHILD_TABLES:
                rows = []
                for r in data.get(name, []) or []:
                    row = dict(r)
                    row["run_id"] = new_id
                    if name in ("events", "commands"):
                        row.pop("id", None)
                    _encode_row(name, table, row)
                    rows.append(row)
                if rows:
                    conn.execute(sa_insert(table), rows)
        return new_id


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _no_duplicates(rows: list[dict[str, Any]], field: str, what: str) -> None:
    seen = set()
    for r in rows:
        if r[field] in seen:
            raise ValueError(f"{what}: duplicate {field} {r[field]!r}")
        seen.add(r[field])


def _fingerprint(value: Any) -> str | None:
    """A uint64 fingerprint as 16 hex digits (ints, numpy integers, or hex text accepted)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = int(value, 16)
        except ValueError as exc:
            raise ValueError("fingerprint text must be hexadecimal") from exc
    v = int(value) & 0xFFFFFFFFFFFFFFFF
    return f"{v:016x}"


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
    for item in _records(items, _DEAD_FIELDS, "dead_letters"):
        reason = _text(item.get("reason"), _REASON_CHARS)
        if not reason:
            raise ValueError("dead letter reason must be non-empty text")
        samples_in = item.get("samples") or ()
        if isinstance(samples_in, (str, bytes)):
            samples_in = [samples_in]
        samples = [_text(s, DEAD_LETTER_SAMPLE_CHARS) for s in list(samples_in)[-DEAD_LETTER_SAMPLE_LIMIT:]]
        count = _i(item.get("count"), len(samples))
        if count is None or count < 0:
            raise ValueError("dead letter count must be >= 0")
        out.append((reason, count, samples))
    return out


def _encode_row(name: str, table: Table, row: dict[str, Any]) -> None:
    """Re-encode an exported row for insertion (JSON columns → text); drop unknown keys strictly."""
    unknown = set(row) - {c.name for c in table.columns}
    if unknown:
        raise ValueError(f"{name}: unknown column(s) {sorted(unknown)} in import")
    for col in _JSON_COLUMNS.get(name, ()):
        if col in row and not isinstance(row[col], str):
            row[col] = _dumps(row[col], f"{name}.{col}")
