"""The repository API the engine writes through and the dashboard reads through: :class:`Store`.

:class:`Store` is one facade composed of the store's concerns, each in its own module:

* :mod:`skewlab.storage.base` — the engine, short transactions, schema creation / upgrade, run look-up;
* :mod:`skewlab.storage.writing` — writer API (engine): :meth:`Store.create_run`, :meth:`Store.update_run`,
  :meth:`Store.finish_run`, :meth:`Store.record_interval` (one (run, batch) in ONE transaction,
  idempotent by (run, batch)), :meth:`Store.record_event`, :meth:`Store.record_dead_letters`;
* :mod:`skewlab.storage.reading` — reader API (dashboard, CLI): :meth:`Store.list_runs`, :meth:`Store.get_run`,
  :meth:`Store.interval_metrics` (incremental: ``since_interval``), :meth:`Store.worker_metrics`,
  :meth:`Store.hot_keys`, :meth:`Store.shadow_results`, :meth:`Store.migration_events`,
  :meth:`Store.routing_sizes`, :meth:`Store.events`, :meth:`Store.dead_letters`;
* :mod:`skewlab.storage.commands` — :meth:`Store.submit_command`, :meth:`Store.pending_commands`,
  :meth:`Store.mark_command`, :meth:`Store.recent_commands`;
* :mod:`skewlab.storage.export` — :meth:`Store.export_run` (JSON-ready dict), :meth:`Store.export_csv`,
  :meth:`Store.import_run`;
* :mod:`skewlab.storage.values` — how every value is cleaned on its way in.

Every public method is one short transaction on its own pooled connection, so a dashboard process
can read while the engine process writes (SQLite WAL; see :mod:`skewlab.storage.db`).

Security: every value reaches the database as a bound parameter.  Command payloads, event details,
dead-letter samples and the like are stored as JSON text and never evaluated, formatted into SQL or
interpreted by the database; the only SQL text built here comes from constants of this package.
"""

from __future__ import annotations

from skewlab.storage.base import UnknownCommand, UnknownRun
from skewlab.storage.commands import MAX_PAYLOAD_CHARS, Commands
from skewlab.storage.export import EXPORT_FORMAT, Export
from skewlab.storage.reading import Reading
from skewlab.storage.writing import DEAD_LETTER_SAMPLE_CHARS, DEAD_LETTER_SAMPLE_LIMIT, Writing

__all__ = [
    "DEAD_LETTER_SAMPLE_CHARS",
    "DEAD_LETTER_SAMPLE_LIMIT",
    "EXPORT_FORMAT",
    "MAX_PAYLOAD_CHARS",
    "Store",
    "UnknownCommand",
    "UnknownRun",
]


class Store(Writing, Reading, Commands, Export):
    """Repository over one SQLAlchemy engine (SQLite or PostgreSQL); thread-safe, one pool."""
