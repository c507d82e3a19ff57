"""skewlab storage: the only thing the engine and the dashboard share.

SQLAlchemy 2 models (:mod:`skewlab.storage.models`), URL / engine handling (:mod:`skewlab.storage.db`: SQLite by
default with WAL + busy timeout + foreign keys, PostgreSQL by URL) and the repository API
(:class:`skewlab.storage.store.Store`, composed of :mod:`skewlab.storage.writing`, :mod:`skewlab.storage.reading`,
:mod:`skewlab.storage.commands` and :mod:`skewlab.storage.export`) and the typed record one interval writes
(:class:`skewlab.storage.records.IntervalRecord`).  Typical use::

    from skewlab.storage import IntervalRecord, WorkerRow, connect
    store = connect()                       # ./data/skewlab.db, or $SKEWLAB_DB_URL
    run = store.create_run("mixed", {"theta_max": 0.1}, seed=7, n_workers=8)
    store.record_interval(run, IntervalRecord(batch_id=0, interval=0, imbalance=0.2, tuples=1000,
                                              workers=[WorkerRow(worker=0, tuples=1000)]))
"""

from skewlab.shared import COMMAND_KINDS
from skewlab.storage.db import connect, default_url, make_engine, normalize_url, open_store, safe_url
from skewlab.storage.models import COMMAND_STATUSES, INTERVAL_METRIC_COLUMNS, RUN_STATUSES, SCHEMA_VERSION
from skewlab.storage.records import (
    DeadLetterRow,
    EventRow,
    HotKeyRow,
    IntervalRecord,
    MigrationRow,
    RoutingRow,
    ShadowRow,
    WorkerRow,
)
from skewlab.storage.store import Store, UnknownCommand, UnknownRun

__all__ = [
    "COMMAND_KINDS",
    "COMMAND_STATUSES",
    "DeadLetterRow",
    "EventRow",
    "HotKeyRow",
    "INTERVAL_METRIC_COLUMNS",
    "IntervalRecord",
    "MigrationRow",
    "RUN_STATUSES",
    "RoutingRow",
    "SCHEMA_VERSION",
    "ShadowRow",
    "Store",
    "UnknownCommand",
    "UnknownRun",
    "WorkerRow",
    "connect",
    "default_url",
    "make_engine",
    "normalize_url",
    "open_store",
    "safe_url",
]
