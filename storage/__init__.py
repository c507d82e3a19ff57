"""skewlab storage: the only thing the engine and the dashboard share.

SQLAlchemy 2 models (:mod:`storage.models`), URL / engine handling (:mod:`storage.db`: SQLite by
default with WAL + busy timeout + foreign keys, PostgreSQL by URL) and the repository API
(:class:`storage.store.Store`).  Typical use::

    from storage import connect
    store = connect()                       # ./data/skewlab.db, or $SKEWLAB_DB_URL
    run = store.create_run("mixed", {"theta_max": 0.1}, seed=7, n_workers=8)
    store.record_interval(run, batch_id=0, interval=0, metrics={"imbalance": 0.2, "tuples": 1000})
"""

from skewlab.shared import COMMAND_KINDS
from storage.db import connect, default_url, make_engine, normalize_url, safe_url
from storage.models import COMMAND_STATUSES, INTERVAL_METRIC_COLUMNS, RUN_STATUSES, SCHEMA_VERSION
from storage.store import Store, UnknownCommand, UnknownRun

__all__ = [
    "COMMAND_KINDS",
    "COMMAND_STATUSES",
    "INTERVAL_METRIC_COLUMNS",
    "RUN_STATUSES",
    "SCHEMA_VERSION",
    "Store",
    "UnknownCommand",
    "UnknownRun",
    "connect",
    "default_url",
    "make_engine",
    "normalize_url",
    "safe_url",
]
