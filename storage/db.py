"""Database URLs and engines: SQLite by default, PostgreSQL by URL.

``connect(url)`` is the one entry point; it returns a :class:`skewlab.storage.store.Store` whose tables exist
and have the current schema version (an older database is upgraded when it is opened).  A URL a user
typed goes through :func:`open_store` instead, which refuses what ``connect`` would quietly create: a
bare word (not a URL), a SQLite file in a directory that does not exist, and — for ``existing`` — a
database without skewlab's tables.

URL handling (:func:`normalize_url`):

* ``None`` → ``$SKEWLAB_DB_URL`` if set, else a SQLite file ``skewlab.db`` in the data directory
  (``$SKEWLAB_DATA_DIR``, default ``./data``), created if needed;
* a plain path (no ``://``) → that SQLite file;
* ``sqlite:///path`` / ``sqlite+pysqlite:///path`` → as given (parent directory created);
  ``sqlite://`` / ``sqlite:///:memory:`` → an in-memory database (tests; one connection shared);
* ``postgresql://…``, ``postgres://…``, ``postgresql+psycopg://…`` → ``postgresql+psycopg://…``
  (psycopg 3 is the driver the project depends on);
* anything else → :class:`ValueError`.

SQLite engines (the dashboard reads while the engine writes, from another process):

* every new DB-API connection gets, in a ``connect`` event, ``PRAGMA busy_timeout`` (wait for a
  lock instead of failing), ``PRAGMA journal_mode=WAL`` (readers never block the writer and the
  writer never blocks readers), ``PRAGMA synchronous=NORMAL`` (safe with WAL) and
  ``PRAGMA foreign_keys=ON``;
* transaction control is taken over from the ``sqlite3`` module (SQLAlchemy's documented recipe:
  ``isolation_level = None`` plus a ``begin`` event emitting ``BEGIN``).  Connections opened with
  the execution option ``skewlab_write=True`` begin with ``BEGIN IMMEDIATE``: the write lock is taken
  up front, so a read-then-write transaction (idempotency checks, counters) never fails with
  "database is locked" half-way through but waits for the busy timeout instead.

PostgreSQL engines use ``pool_pre_ping`` (the dashboard may sit idle for long) and the default
READ COMMITTED isolation; idempotent writes rely on ``INSERT … ON CONFLICT DO NOTHING``.

Nothing here logs or prints a password: :func:`safe_url` renders URLs with the password hidden.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.pool import StaticPool

if TYPE_CHECKING:  # pragma: no cover
    from skewlab.storage.store import Store

__all__ = [
    "DEFAULT_BUSY_TIMEOUT_MS",
    "DEFAULT_DATA_DIR",
    "connect",
    "default_url",
    "make_engine",
    "normalize_url",
    "open_store",
    "safe_url",
]

DEFAULT_DATA_DIR = "data"
DEFAULT_DB_FILE = "skewlab.db"
DEFAULT_BUSY_TIMEOUT_MS = 10_000


def default_url(data_dir: str | os.PathLike[str] | None = None) -> str:
    """The default database: ``$SKEWLAB_DB_URL``, else ``sqlite:///<data dir>/skewlab.db``."""
    if data_dir is None:
        env = os.environ.get("SKEWLAB_DB_URL")
        if env:
            return env
        data_dir = os.environ.get("SKEWLAB_DATA_DIR") or DEFAULT_DATA_DIR
    path = Path(data_dir) / DEFAULT_DB_FILE
    return f"sqlite:///{path}"


def normalize_url(url: str | URL | None = None) -> URL:
    """Parse and normalise a database URL (see the module docstring); raises ``ValueError``."""
    if url is None:
        url = default_url()
    if isinstance(url, str):
        text = url.strip()
        if not text:
            raise ValueError("empty database URL")
        if "://" not in text:  # a plain path: SQLite file
            return make_url("sqlite://").set(database=str(Path(text)))
        try:
            parsed = make_url(text)
        except Exception as exc:  # sqlalchemy.exc.ArgumentError: keep the password out of it
            raise ValueError("cannot parse database URL (expected sqlite:///path or postgresql://…)") from exc
    else:
        parsed = url
    # Split the drivername by hand: get_driver_name() would load the dialect ("postgres" has none).
    backend, _, driver = parsed.drivername.partition("+")
    if backend == "sqlite":
        if driver not in ("pysqlite", ""):
            raise ValueError(f"unsupported SQLite driver {driver!r} (use sqlite:///path)")
        return parsed.set(drivername="sqlite")
    if backend in ("postgresql", "postgres"):
        if driver not in ("psycopg", "", "psycopg2"):
            raise ValueError(f"unsupported PostgreSQL driver {driver!r} (use postgresql+psycopg://…)")
        return parsed.set(drivername="postgresql+psycopg")
    raise ValueError(f"unsupported database {backend!r}: use sqlite:///path or postgresql://user@host/db")


def safe_url(url: str | URL | None) -> str:
    """The URL as text with the password replaced by ``***`` (for logs and error messages)."""
    try:
        return normalize_url(url).render_as_string(hide_password=True)
    except ValueError:
        return "<invalid database URL>"


def _is_memory(url: URL) -> bool:
    return url.database in (None, "", ":memory:") or (url.database or "").startswith("file::memory:")


def _sqlite_pragmas(busy_timeout_ms: int, memory: bool):
    def on_connect(dbapi_connection: Any, connection_record: Any) -> None:
        # Take BEGIN away from the sqlite3 module; the "begin" event below emits it.
        dbapi_connection.isolation_level = None
        cur = dbapi_connection.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")  # int(): never user text
            if not memory:
                cur.execute("PRAGMA journal_mode = WAL")
                cur.execute("PRAGMA synchronous = NORMAL")
            cur.execute("PRAGMA foreign_keys = ON")
        finally:
            cur.close()

    return on_connect


def _sqlite_begin(conn: Any) -> None:
    # The mode comes from a closed set chosen by this package, never from caller data.
    if conn.get_execution_options().get("skewlab_write"):
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        conn.exec_driver_sql("BEGIN")


def make_engine(
    url: str | URL | None = None,
    *,
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    echo: bool = False,
) -> Engine:
    """A SQLAlchemy engine for ``url`` configured as the module docstring describes."""
    parsed = normalize_url(url)
    if parsed.get_backend_name() == "sqlite":
        memory = _is_memory(parsed)
        kwargs: dict[str, Any] = {"echo": echo}
        if memory:
            # One shared connection, otherwise every pooled connection sees its own empty database.
            kwargs["poolclass"] = StaticPool
            kwargs["connect_args"] = {"check_same_thread": False}
        else:
            Path(parsed.database).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
            # Connections are handed to one thread at a time by the pool.
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": busy_timeout_ms / 1000.0}
        engine = create_engine(parsed, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas(busy_timeout_ms, memory))
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    return create_engine(parsed, echo=echo, pool_pre_ping=True)


def connect(
    url: str | URL | None = None,
    *,
    create: bool = True,
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    echo: bool = False,
) -> "Store":
    """Open the database at ``url`` (default: see :func:`default_url`) and return a ``Store``.

    With ``create`` (default) the tables are created if missing and a database of an older schema
    version is upgraded in place (idempotent, safe when the engine and the dashboard start at the same
    time; see :meth:`skewlab.storage.store.Store.create_schema`).
    """
    from skewlab.storage.store import Store

    store = Store(make_engine(url, busy_timeout_ms=busy_timeout_ms, echo=echo))
    if create:
        store.create_schema()
    return store


def open_store(url: str | URL | None = None, *, existing: bool = False) -> "Store":
    """:func:`connect` for a user-given URL: any failure becomes a one-line ``ValueError`` (password hidden).

    Stricter than :func:`connect`, because a typo must not become a new database somewhere: a given URL
    must name a database (``sqlite:///PATH`` or ``postgresql://…``, not a bare word), and a SQLite file's
    directory must exist (only the default data directory is created).  ``existing``: the database must
    already hold the skewlab schema (``skewlab control`` queues commands for a running engine; a fresh
    empty database has none) — it is neither created nor upgraded.
    """
    parsed = _user_url(url)
    if parsed.get_backend_name() == "sqlite" and not _is_memory(parsed):
        path = Path(parsed.database).expanduser()
        if url is not None and not path.resolve().parent.is_dir():
            raise ValueError(f"cannot open database {safe_url(parsed)}: directory {path.parent} does not exist")
        if existing and not path.is_file():
            raise ValueError(f"no skewlab database at {safe_url(parsed)} (no such file)")
    try:
        store = connect(parsed, create=not existing)
        schema = store.has_schema() if existing else True  # the first connection when nothing is created
    except ValueError:
        raise
    except RuntimeError as exc:  # a schema version this skewlab does not know
        raise ValueError(f"cannot open database {safe_url(parsed)}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - driver / sqlalchemy errors: one line, no password
        raise ValueError(f"cannot open database {safe_url(parsed)}: {driver_reason(exc)}") from None
    if not schema:
        store.close()
        raise ValueError(f"no skewlab database at {safe_url(parsed)} (it has no skewlab tables)")
    return store


def _user_url(url: str | URL | None) -> URL:
    """:func:`normalize_url` of a user-given URL, refusing a bare word (which would be a SQLite file)."""
    if isinstance(url, str) and url.strip() and "://" not in url:
        raise ValueError(f"not a database URL: {url.strip()[:80]!r} (expected sqlite:///PATH or postgresql://…)")
    return normalize_url(url)


def driver_reason(exc: BaseException) -> str:
    """The database driver's own message (psycopg's "connection refused", "password authentication
    failed for user ...", "database ... does not exist") on one line, without SQLAlchemy's wrapper and
    link; the exception's type name when it has no message."""
    orig = getattr(exc, "orig", None) or exc
    text = " ".join(line.strip() for line in str(orig).splitlines() if line.strip())
    return f"{type(orig).__name__}: {text}" if text else type(orig).__name__
