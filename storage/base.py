"""The store's plumbing: one engine, short read / write transactions, the schema, run look-up.

Every public method of the store is one short transaction on its own pooled connection, so a
dashboard process can read while the engine process writes (SQLite WAL; see :mod:`skewlab.storage.db`).
:class:`StoreBase` is the part the writing, reading, command and export modules share.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Sequence

from sqlalchemy import Connection, Engine, Table, inspect, select, update
from sqlalchemy import text as sa_text

from skewlab.storage.models import ADDED_COLUMNS, SCHEMA_VERSION, Base
from skewlab.storage.tables import T_META, T_RUN

__all__ = ["StoreBase", "UnknownCommand", "UnknownRun"]

# Serialises schema creation between processes on PostgreSQL (arbitrary constant: "skewlab" in ASCII).
_PG_SCHEMA_LOCK = 0x736B65776C6162


class UnknownRun(LookupError):
    """No run with that id."""


class UnknownCommand(LookupError):
    """No command with that id."""


class StoreBase:
    """One SQLAlchemy engine (SQLite or PostgreSQL; thread-safe, one pool): transactions and schema."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name
        if self.dialect not in ("sqlite", "postgresql"):
            raise ValueError(f"unsupported database dialect {self.dialect!r}")

    @property
    def url(self) -> str:
        """The database URL with the password hidden."""
        return self.engine.url.render_as_string(hide_password=True)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url})"

    def close(self) -> None:
        """Release pooled connections."""
        self.engine.dispose()

    def __enter__(self) -> "StoreBase":
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
            self._insert_ignore(conn, T_META, {"key": "schema_version", "value": str(SCHEMA_VERSION)}, ["key"])
            found = conn.execute(select(T_META.c.value).where(T_META.c.key == "schema_version")).scalar_one()
            if found.isdigit() and int(found) < SCHEMA_VERSION:
                self._upgrade(conn, int(found))
                found = str(SCHEMA_VERSION)
        if found != str(SCHEMA_VERSION):
            raise RuntimeError(
                f"database schema version {found} does not match this skewlab (version {SCHEMA_VERSION})"
            )

    def has_schema(self) -> bool:
        """True if the database holds skewlab's tables (its ``meta`` table records a schema version)."""
        with self._read() as conn:
            if not inspect(conn).has_table(T_META.name):
                return False
            return conn.execute(select(T_META.c.value).where(T_META.c.key == "schema_version")).first() is not None

    @staticmethod
    def _upgrade(conn: Connection, version: int) -> None:
        """Add the columns of every schema version after ``version`` (:data:`skewlab.storage.models.ADDED_COLUMNS`)
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
        conn.execute(update(T_META).where(T_META.c.key == "schema_version").values(value=str(SCHEMA_VERSION)))

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
            select(T_RUN.c.id, T_RUN.c.algorithm).where(T_RUN.c.id == int(run_id))
        ).mappings().first()
        if row is None:
            raise UnknownRun(f"no run with id {run_id}")
        return dict(row)
