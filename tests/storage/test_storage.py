"""Tests of :mod:`storage` on SQLite AND on a real PostgreSQL server started by the tests (tests/pg.py)."""

from __future__ import annotations

import csv
import io
import json
import math
import pickle
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import event, inspect, select

from skewlab.storage import (
    COMMAND_KINDS,
    DeadLetterRow,
    EventRow,
    HotKeyRow,
    IntervalRecord,
    MigrationRow,
    RoutingRow,
    ShadowRow,
    INTERVAL_METRIC_COLUMNS,
    SCHEMA_VERSION,
    UnknownCommand,
    UnknownRun,
    WorkerRow,
    connect,
    default_url,
    make_engine,
    normalize_url,
    safe_url,
)
from skewlab.storage.models import ADDED_COLUMNS, Base, IntervalMetric
from skewlab.storage.store import DEAD_LETTER_SAMPLE_CHARS, DEAD_LETTER_SAMPLE_LIMIT, MAX_PAYLOAD_CHARS
from tests.pg import pg_server, pg_url  # noqa: F401  (pytest fixtures)

INJECTION = "x'); DROP TABLE runs; -- \" OR 1=1; /* ${jndi:ldap://e} {{7*7}} %s %(p)s :p ? \\"
SCHEMA_V1 = Path(__file__).resolve().parent / "schema_v1"
#: More than a signed 32-bit integer holds: the byte columns must be BIGINT on PostgreSQL too.
BIG = 3 * 2**31


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'data' / 'skewlab.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def store(url):
    s = connect(url)
    yield s
    s.close()


def _full_interval(store, run, batch, interval, scale=1.0):
    """One complete record_interval call; returns its result."""
    record = IntervalRecord.from_parts(
        batch,
        interval,
        {
            "tuples": np.int64(1000),
            "algorithm": "mixed",
            "n_workers": 4,
            "imbalance": 0.25 * scale,
            "theta_max_observed": 0.3 * scale,
            "seeds_imbalance": 0.1,
            "load_variance": 4.0,
            "load_stddev": 2.0,
            "replication": 1.0,
            "migration_cost": 0.05,
            "plan_seconds": 0.01,
            "tuples_per_second": 1e6,
            "throughput": 5e4,
            "batch_latency_ms": 12.5,
            "feasible": True,
        },
        workers={
            "tuples": np.array([400, 200, 200, 200]),
            "cost": np.array([400.0, 200.0, 200.0, 200.0]) * scale,
            "distinct_keys": np.array([10, 20, 30, 40]),
            "state_size": np.array([1.0, 2.0, 3.0, 4.0]),
            "processing_seconds": np.array([0.1, 0.05, 0.05, 0.05]),
            "state_bytes": np.array([4096, 0, BIG, 12]),
        },
        hot_keys=[
            {"key": "the", "fingerprint": np.uint64(2**64 - 5), "count": 300, "share": 0.3, "workers": [0]},
            {"key": "of", "fingerprint": 17, "count": 100, "share": 0.1, "workers": np.array([1, 2])},
        ],
        shadow={
            "hash": {"imbalance": 0.9, "replication": 1.0, "migration_cost": 0.0},
            "pkg": {"imbalance": 0.01, "replication": 1.7, "migration_cost": 0.0},
        },
        migrations=[{"algorithm": "mixed", "keys_moved": 3, "state_moved": 12.0, "migration_cost": 0.05,
                     "pause_ms": 4.0, "detail": {"from": [0], "to": [1]}, "bytes_moved": np.int64(BIG),
                     "pause_batches": 2}],
        routing={"entries": 42, "memory_bytes": 672, "amax": 100},
        events=[{"kind": "param", "detail": {"theta_max": 0.1}, "command_id": None}],
        dead_letters={"bad-json": {"count": 2, "samples": ["{oops", "]"]}},
        extra={"note": "x"},
    )
    return store.record_interval(run, record)


def _counts(store, run):
    data = store.export_run(run)
    return {k: len(v) for k, v in data.items() if isinstance(v, list)}


# ---------------------------------------------------------------------------------------------
# URLs and schema
# ---------------------------------------------------------------------------------------------
def test_url_normalisation(tmp_path, monkeypatch):
    assert normalize_url("postgres://u:pw@h:5/db").drivername == "postgresql+psycopg"
    assert normalize_url("postgresql://u@h/db").drivername == "postgresql+psycopg"
    assert normalize_url("postgresql+psycopg://u@h/db").drivername == "postgresql+psycopg"
    assert normalize_url(str(tmp_path / "x.db")).database == str(tmp_path / "x.db")
    assert normalize_url("sqlite:///rel/x.db").database == "rel/x.db"
    for bad in ("mysql://u@h/db", "", "sqlite+aiosqlite:///x.db", "postgresql+asyncpg://h/db"):
        with pytest.raises(ValueError):
            normalize_url(bad)
    text = safe_url("postgresql://user:s3cret@h/db")
    assert "s3cret" not in text and "user" in text
    monkeypatch.delenv("SKEWLAB_DB_URL", raising=False)
    monkeypatch.setenv("SKEWLAB_DATA_DIR", str(tmp_path / "dd"))
    assert default_url() == f"sqlite:///{tmp_path / 'dd' / 'skewlab.db'}"
    monkeypatch.setenv("SKEWLAB_DB_URL", "postgresql://h/x")
    assert default_url() == "postgresql://h/x"
    monkeypatch.delenv("SKEWLAB_DB_URL")
    s = connect()  # default: a SQLite file in the data dir, directory created
    try:
        assert (tmp_path / "dd" / "skewlab.db").exists()
        assert s.sqlite_pragmas()["journal_mode"] == "wal"
    finally:
        s.close()


def test_schema_creation(store, url):
    insp = inspect(store.engine)
    tables = set(insp.get_table_names())
    assert set(Base.metadata.tables) <= tables
    idx = {i["name"] for i in insp.get_indexes("interval_metrics")}
    assert "ix_interval_metrics_run_interval" in idx
    cols = {c["name"] for c in insp.get_columns("interval_metrics")}
    assert set(INTERVAL_METRIC_COLUMNS) | {"run_id", "batch_id", "interval", "wall_time"} <= cols
    # creating again (second process starting) is harmless and keeps the data
    run = store.create_run("hash")
    other = connect(url)
    try:
        other.create_schema()
        assert other.get_run(run)["algorithm"] == "hash"
    finally:
        other.close()
    with store.engine.connect() as conn:
        assert conn.execute(select(Base.metadata.tables["skewlab_meta"].c.value)).scalar() == str(SCHEMA_VERSION)


def _create_v1_database(url):
    """A database as schema version 1 created it, with one run of v1 rows (tests/schema_v1/)."""
    engine = make_engine(url)
    script = (SCHEMA_V1 / f"{engine.dialect.name}.sql").read_text(encoding="utf-8")
    sql = "\n".join(line for line in script.splitlines() if not line.startswith("--"))
    try:
        with engine.begin() as conn:
            for statement in filter(None, (s.strip() for s in sql.split(";"))):
                conn.exec_driver_sql(statement)
    finally:
        engine.dispose()


def _columns(store, table):
    return {c["name"] for c in inspect(store.engine).get_columns(table)}


def test_opening_a_version_1_database_upgrades_it_in_place(url):
    _create_v1_database(url)
    store = connect(url)
    try:
        assert {"state_bytes"} <= _columns(store, "worker_metrics")
        assert {"bytes_moved", "pause_batches"} <= _columns(store, "migration_events")
        with store.engine.connect() as conn:
            assert conn.execute(select(Base.metadata.tables["skewlab_meta"].c.value)).scalar() == str(SCHEMA_VERSION)
        # rows written by version 1 are kept, with NULL in the new columns
        (run,) = store.list_runs()
        assert (run["name"], run["intervals"]) == ("v1 run", 1)
        old = store.worker_metrics(run["id"])
        assert [(r["tuples"], r["state_bytes"]) for r in old] == [(20, None), (10, None)]
        (mig,) = store.migration_events(run["id"])
        assert (mig["keys_moved"], mig["bytes_moved"], mig["pause_batches"]) == (2, None, None)
        assert mig["planned_interval"] == mig["interval"]  # schema 4's column, read for a row without it
        # and the new fields round-trip in the upgraded tables
        assert _full_interval(store, run["id"], 1, 1) is True
        new = store.worker_metrics(run["id"], interval=1)
        assert [r["state_bytes"] for r in new] == [4096, 0, BIG, 12]
        mig = store.migration_events(run["id"], since_interval=0)[0]
        assert (mig["bytes_moved"], mig["pause_batches"]) == (BIG, 2)
        data = store.export_run(run["id"])
        assert _strip_ids(store.export_run(store.import_run(data))) == _strip_ids(data)
    finally:
        store.close()
    again = connect(url)  # a second process opening the upgraded database changes nothing
    try:
        assert len(again.worker_metrics(run["id"])) == 6
    finally:
        again.close()


def test_a_database_of_a_newer_version_is_refused(url):
    connect(url).close()
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            meta = Base.metadata.tables["skewlab_meta"]
            conn.execute(meta.update().values(value=str(SCHEMA_VERSION + 1)))
    finally:
        engine.dispose()
    with pytest.raises(RuntimeError, match=f"schema version {SCHEMA_VERSION + 1} does not match"):
        connect(url)


def test_every_added_column_is_in_the_models_and_nullable():
    assert max(ADDED_COLUMNS) == SCHEMA_VERSION
    for columns in ADDED_COLUMNS.values():
        for table, column in columns:
            assert Base.metadata.tables[table].c[column].nullable, (table, column)


def test_sqlite_wal_busy_timeout_foreign_keys(tmp_path):
    url = f"sqlite:///{tmp_path / 'w.db'}"
    s = connect(url, busy_timeout_ms=1234)
    try:
        p = s.sqlite_pragmas()
        assert p["journal_mode"] == "wal"
        assert p["busy_timeout"] == 1234
        assert p["foreign_keys"] == 1
        # every pooled connection gets the pragmas, not only the first
        conns = [s.engine.connect() for _ in range(3)]
        try:
            for c in conns:
                assert c.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
                assert c.exec_driver_sql("PRAGMA busy_timeout").scalar() == 1234
        finally:
            for c in conns:
                c.close()
    finally:
        s.close()


def test_sqlite_writes_begin_immediate_reads_deferred(tmp_path):
    s = connect(f"sqlite:///{tmp_path / 'b.db'}")
    seen: list[str] = []
    event.listen(s.engine, "before_cursor_execute", lambda c, cur, stmt, *a: seen.append(stmt))
    try:
        run = s.create_run("hash")
        assert seen[0] == "BEGIN IMMEDIATE" and seen[1].startswith("INSERT INTO runs")
        seen.clear()
        s.get_run(run)
        assert seen[0] == "BEGIN" and seen[1].startswith("SELECT")
    finally:
        s.close()


# ---------------------------------------------------------------------------------------------
# record_interval
# ---------------------------------------------------------------------------------------------
def test_record_interval_writes_everything(store):
    run = store.create_run("mixed", {"theta_max": 0.1}, seed=7, n_workers=4, config={"source": "zipf"})
    assert _full_interval(store, run, batch=10, interval=3) is True
    (m,) = store.interval_metrics(run)
    assert m["batch_id"] == 10 and m["interval"] == 3 and m["tuples"] == 1000
    assert m["imbalance"] == pytest.approx(0.25) and m["batch_latency_ms"] == pytest.approx(12.5)
    assert m["routing_table_size"] == 42 and m["feasible"] is True and m["extra"] == {"note": "x"}
    w = store.worker_metrics(run)
    assert [r["worker"] for r in w] == [0, 1, 2, 3]
    assert [r["tuples"] for r in w] == [400, 200, 200, 200]
    assert w[3]["distinct_keys"] == 40 and w[0]["processing_seconds"] == pytest.approx(0.1)
    assert [r["state_bytes"] for r in w] == [4096, 0, BIG, 12]
    hk = store.hot_keys(run)
    assert [h["key"] for h in hk] == ["the", "of"]
    assert hk[0]["fingerprint"] == f"{2**64 - 5:016x}" and hk[1]["workers"] == [1, 2]
    sh = {r["algorithm"]: r for r in store.shadow_results(run)}
    assert sh["pkg"]["replication"] == pytest.approx(1.7) and sh["hash"]["imbalance"] == pytest.approx(0.9)
    (mig,) = store.migration_events(run)
    assert mig["keys_moved"] == 3 and mig["pause_ms"] == pytest.approx(4.0) and mig["detail"] == {"from": [0], "to": [1]}
    assert (mig["bytes_moved"], mig["pause_batches"]) == (BIG, 2)
    (rs,) = store.routing_sizes(run)
    assert (rs["entries"], rs["memory_bytes"], rs["amax"]) == (42, 672, 100)
    (ev,) = store.events(run)
    assert ev["kind"] == "param" and ev["detail"] == {"theta_max": 0.1} and ev["batch_id"] == 10
    (dl,) = store.dead_letters(run)
    assert dl["count"] == 2 and dl["sample"] == ["{oops", "]"]


def test_typed_record_equals_loose_parts(store):
    """A record built from typed rows writes exactly what the same rows as mappings write."""
    loose = store.create_run("mixed")
    typed = store.create_run("mixed")
    assert _full_interval(store, loose, batch=5, interval=2) is True
    parts = IntervalRecord.from_parts(5, 2)
    assert parts.workers == [] and parts.routing is None and parts.note == ""
    record = IntervalRecord(
        batch_id=5, interval=2, tuples=np.int64(1000), algorithm="mixed", n_workers=4, imbalance=0.25,
        theta_max_observed=0.3, seeds_imbalance=0.1, load_variance=4.0, load_stddev=2.0, replication=1.0,
        migration_cost=0.05, plan_seconds=0.01, tuples_per_second=1e6, throughput=5e4, batch_latency_ms=12.5,
        feasible=True, extra={"note": "x"},
        workers=[WorkerRow(worker=w, tuples=t, cost=float(t), distinct_keys=10 * (w + 1), state_size=float(w + 1),
                           processing_seconds=0.1 if w == 0 else 0.05, state_bytes=b)
                 for w, (t, b) in enumerate(zip([400, 200, 200, 200], [4096, 0, BIG, np.int64(12)]))],
        hot_keys=[HotKeyRow(key="the", fingerprint=np.uint64(2**64 - 5), count=300, share=0.3, workers=[0]),
                  HotKeyRow(key="of", fingerprint=17, count=100, share=0.1, workers=np.array([1, 2]))],
        shadow=[ShadowRow(algorithm="hash", imbalance=0.9, replication=1.0, migration_cost=0.0),
                ShadowRow(algorithm="pkg", imbalance=0.01, replication=1.7, migration_cost=0.0)],
        migrations=[MigrationRow(algorithm="mixed", keys_moved=3, state_moved=12.0, migration_cost=0.05,
                                 pause_ms=4.0, detail={"from": [0], "to": [1]}, bytes_moved=BIG, pause_batches=2)],
        routing=RoutingRow(entries=42, memory_bytes=672, amax=100),
        events=[EventRow(kind="param", detail={"theta_max": 0.1})],
        dead_letters=[DeadLetterRow(reason="bad-json", count=2, samples=["{oops", "]"])],
    )
    assert pickle.loads(pickle.dumps(record)).migrations == record.migrations  # the engine keeps unwritten records in its snapshot
    assert store.record_interval(typed, record) is True
    assert store.record_interval(typed, record) is False
    a, b = store.export_run(loose), store.export_run(typed)
    for name in ("interval_metrics", "worker_metrics", "hot_keys", "shadow_results", "migration_events",
                 "routing_sizes", "events", "dead_letters"):
        strip = {"id", "wall_time", "first_seen", "last_seen"}
        assert [{k: v for k, v in r.items() if k not in strip} for r in a[name]] == \
               [{k: v for k, v in r.items() if k not in strip} for r in b[name]], name
    with pytest.raises(ValueError, match="expects an IntervalRecord"):
        store.record_interval(typed, {"batch_id": 6, "interval": 3})


def test_interval_record_has_every_metric_column():
    record = IntervalRecord(batch_id=0, interval=0)
    assert set(record.metrics()) == set(INTERVAL_METRIC_COLUMNS)
    with pytest.raises(TypeError):
        IntervalRecord(batch_id=0, interval=0, imbalanse=0.1)


def test_record_interval_replay_is_idempotent(store):
    run = store.create_run("mixed")
    assert _full_interval(store, run, 1, 0) is True
    before = store.export_run(run)
    # an identical replay and a replay with different numbers both write nothing
    assert _full_interval(store, run, 1, 0) is False
    assert _full_interval(store, run, 1, 0, scale=3.0) is False
    assert store.record_interval(run, IntervalRecord.from_parts(1, 0, {"imbalance": 99.0})) is False
    assert store.export_run(run) == before
    assert _full_interval(store, run, 2, 1) is True
    counts = _counts(store, run)
    assert counts["interval_metrics"] == 2 and counts["worker_metrics"] == 8 and counts["hot_keys"] == 4
    assert counts["events"] == 2 and counts["shadow_results"] == 4
    assert store.dead_letters(run)[0]["count"] == 4


def test_concurrent_replays_write_once(url):
    stores = [connect(url) for _ in range(3)]
    try:
        run = stores[0].create_run("hash")
        barrier = threading.Barrier(len(stores))
        results, errors = [], []

        def go(s):
            try:
                barrier.wait(timeout=10)
                results.append(_full_interval(s, run, 5, 5))
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=go, args=(s,)) for s in stores]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert not errors
        assert sorted(results) == [False, False, True]
        assert _counts(stores[0], run)["worker_metrics"] == 4
        assert stores[0].dead_letters(run)[0]["count"] == 2
    finally:
        for s in stores:
            s.close()


def test_record_interval_validation_writes_nothing(store):
    run = store.create_run("hash")
    with pytest.raises(ValueError, match="unknown interval metric"):
        store.record_interval(run, IntervalRecord.from_parts(1, 1, {"imbalanse": 0.1}))
    with pytest.raises(ValueError, match="unknown field"):
        store.record_interval(run, IntervalRecord.from_parts(1, 1, {"imbalance": 0.1}, workers=[{"worker": 0, "tupels": 1}]))
    with pytest.raises(ValueError, match="duplicate worker"):
        store.record_interval(run, IntervalRecord.from_parts(1, 1, {}, workers=[{"worker": 0}, {"worker": 0}]))
    with pytest.raises(ValueError, match="differs"):
        store.record_interval(run, IntervalRecord.from_parts(1, 1, {"interval": 2}))
    with pytest.raises(UnknownRun):
        store.record_interval(run + 1000, IntervalRecord.from_parts(1, 1, {"imbalance": 0.1}))
    assert store.interval_metrics(run) == []
    # the batch was not consumed by the failed attempts
    assert store.record_interval(run, IntervalRecord.from_parts(1, 1, {"imbalance": float("nan"), "throughput": float("inf"),
                                              "tuples": np.float64(3.0)})) is True
    (m,) = store.interval_metrics(run)
    assert m["imbalance"] is None and m["throughput"] is None and m["tuples"] == 3
    assert m["algorithm"] == "hash"  # defaults to the run's algorithm


def test_state_and_migration_bytes_are_null_when_absent(store):
    run = store.create_run("hash")
    assert store.record_interval(run, IntervalRecord.from_parts(1, 1, {}, workers=[{"tuples": 5}, {"tuples": 6, "state_bytes": None}],
                                 migrations=[{"keys_moved": 1, "pause_ms": 2.0}]))
    assert [r["state_bytes"] for r in store.worker_metrics(run)] == [None, None]
    (mig,) = store.migration_events(run)
    assert (mig["bytes_moved"], mig["pause_batches"], mig["pause_ms"]) == (None, None, 2.0)
    with pytest.raises(ValueError, match="expected an integer"):
        store.record_interval(run, IntervalRecord.from_parts(2, 2, {}, workers=[{"state_bytes": 1.5}]))
    with pytest.raises(ValueError, match="unknown field"):
        store.record_interval(run, IntervalRecord.from_parts(2, 2, {}, migrations=[{"moved_bytes": 1}]))
    assert len(store.interval_metrics(run)) == 1


def test_incremental_reads_and_run_listing(store):
    a = store.create_run("hash", n_workers=2)
    b = store.create_run("pkg", n_workers=2)
    for i in range(10):
        store.record_interval(a, IntervalRecord.from_parts(100 + i, i, {"imbalance": i / 10, "algorithm": "hash"},
                              workers=[{"tuples": i}, {"tuples": 2 * i}],
                              hot_keys=[{"key": f"k{i}", "count": i, "share": 0.5, "workers": [i % 2]}]))
    store.record_interval(b, IntervalRecord.from_parts(0, 0, {"imbalance": 0.0}))
    assert [m["interval"] for m in store.interval_metrics(a, since_interval=6)] == [7, 8, 9]
    assert [m["interval"] for m in store.interval_metrics(a, limit=3)] == [0, 1, 2]
    assert [m["interval"] for m in store.interval_metrics(a, since_interval=2, limit=3)] == [3, 4, 5]
    assert [m["interval"] for m in store.interval_metrics(a, limit=3, latest=True)] == [7, 8, 9]
    assert [r["tuples"] for r in store.worker_metrics(a, interval=4)] == [4, 8]
    assert len(store.worker_metrics(a, since_interval=7)) == 4
    assert [h["key"] for h in store.hot_keys(a)] == ["k9"]
    assert [h["key"] for h in store.hot_keys(a, interval=3)] == ["k3"]
    assert store.hot_keys(b) == []
    runs = store.list_runs()
    assert [r["id"] for r in runs] == [b, a]
    ra = runs[1]
    assert (ra["intervals"], ra["last_interval"], ra["last_batch"]) == (10, 9, 109)
    assert [r["id"] for r in store.list_runs(limit=1)] == [b]
    store.finish_run(a)
    assert [r["id"] for r in store.list_runs(status="finished")] == [a]
    assert store.get_run(a)["finished_at"] is not None
    store.update_run(b, algorithm="dkg", params={"k": 3}, n_workers=8)
    rb = store.get_run(b)
    assert (rb["algorithm"], rb["params"], rb["n_workers"]) == ("dkg", {"k": 3}, 8)
    with pytest.raises(UnknownRun):
        store.update_run(10_000, status="paused")
    assert store.delete_run(a) is True
    assert store.interval_metrics(a) == [] and store.get_run(a) is None
    assert len(store.interval_metrics(b)) == 1


def test_concurrent_reader_while_writer_writes(url):
    """A dashboard reads while the engine writes: no errors, consistent incremental reads."""
    writer = connect(url, busy_timeout_ms=2000)
    reader = connect(url, busy_timeout_ms=2000)
    try:
        run = writer.create_run("hash")
        n = 40
        errors: list[BaseException] = []

        def write():
            try:
                for i in range(n):
                    _full_interval(writer, run, i, i)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        t = threading.Thread(target=write)
        t.start()
        seen: list[int] = []
        last = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rows = reader.interval_metrics(run, since_interval=last)
            for r in rows:
                seen.append(r["interval"])
                # a row is only visible with its children: the transaction is atomic
                assert len(reader.worker_metrics(run, interval=r["interval"])) == 4
            if rows:
                last = rows[-1]["interval"]
            if not t.is_alive() and last == n - 1:
                break
        t.join(timeout=30)
        assert not errors
        assert seen == list(range(n))
    finally:
        writer.close()
        reader.close()


def test_open_read_transaction_does_not_block_writer(url):
    """With WAL (SQLite) / MVCC (PostgreSQL) a long read transaction neither blocks nor sees writes."""
    writer = connect(url, busy_timeout_ms=300)
    reader = connect(url)
    try:
        run = writer.create_run("hash")
        writer.record_interval(run, IntervalRecord.from_parts(0, 0, {"imbalance": 0.0}))
        t = IntervalMetric.__table__
        with reader.engine.connect() as conn:
            with conn.begin():
                before = conn.execute(select(t.c.batch_id).where(t.c.run_id == run)).all()
                # the writer commits while the reader's transaction is open (rollback-journal
                # SQLite would fail here with "database is locked" after 300 ms)
                for b in range(1, 4):
                    assert writer.record_interval(run, IntervalRecord.from_parts(b, b, {"imbalance": 0.0})) is True
                still = conn.execute(select(t.c.batch_id).where(t.c.run_id == run)).all()
                if reader.dialect == "sqlite":  # snapshot isolation within the read transaction
                    assert still == before
        assert len(reader.interval_metrics(run)) == 4
    finally:
        writer.close()
        reader.close()


# ---------------------------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------------------------
def test_command_lifecycle(store):
    run = store.create_run("hash")
    other = store.create_run("hash")
    c1 = store.submit_command("set-algorithm", {"algorithm": "pkg", "params": {"d": 2}})
    c2 = store.submit_command("set-workers", {"workers": 8}, run_id=run)
    c3 = store.submit_command("pause")
    assert [c["id"] for c in store.pending_commands(run)] == [c1, c2, c3]
    assert [c["id"] for c in store.pending_commands()] == [c1, c3]
    assert [c["id"] for c in store.pending_commands(other)] == [c1, c3]
    first = store.pending_commands(run)[0]
    assert first["kind"] == "set-algorithm" and first["payload"] == {"algorithm": "pkg", "params": {"d": 2}}
    assert first["status"] == "pending" and first["applied_batch"] is None

    assert store.mark_command(c1, "applied", applied_batch=12, run_id=run) is True
    assert store.mark_command(c2, "rejected", reason="workers must be <= 4") is True
    # re-marking (a replay after a crash) changes nothing
    assert store.mark_command(c1, "rejected", reason="late") is False
    got = store.get_command(c1)
    assert (got["status"], got["applied_batch"], got["run_id"], got["reason"]) == ("applied", 12, run, "")
    assert store.get_command(c2)["reason"] == "workers must be <= 4"
    assert [c["id"] for c in store.pending_commands(run)] == [c3]
    assert [c["id"] for c in store.recent_commands(limit=2)] == [c3, c2]
    assert {c["status"] for c in store.recent_commands()} == {"pending", "applied", "rejected"}

    c4 = store.submit_command("resume", {})
    assert store.mark_command(c4, "applied", applied_batch=13) is True
    with pytest.raises(UnknownCommand):
        store.mark_command(99_999, "applied")
    with pytest.raises(ValueError):
        store.mark_command(c3, "done")
    with pytest.raises(UnknownRun):
        store.submit_command("pause", run_id=99_999)


@pytest.mark.parametrize(
    "kind,payload",
    [
        ("drop-table", {}),
        ("SET-ALGORITHM", {}),
        ("pause; DROP TABLE commands; --", {}),
        (None, {}),
        ("set-param", ["not", "an", "object"]),
        ("set-param", "theta_max=0.1"),
        ("set-param", {"value": object()}),
        ("set-param", {"value": float("nan")}),
        ("set-param", {"blob": "x" * (MAX_PAYLOAD_CHARS + 1)}),
    ],
)
def test_command_rejects_bad_kind_or_payload(kind, payload, tmp_path):
    s = connect(f"sqlite:///{tmp_path / 'c.db'}")
    try:
        with pytest.raises(ValueError):
            s.submit_command(kind, payload)
        assert s.recent_commands() == []
    finally:
        s.close()
    assert set(COMMAND_KINDS) == {"set-algorithm", "set-param", "set-workers", "pause", "resume"}


# ---------------------------------------------------------------------------------------------
# dead letters
# ---------------------------------------------------------------------------------------------
def test_dead_letters_counts_and_bounded_sample(store):
    run = store.create_run("hash")
    for i in range(5):
        assert store.record_dead_letters(run, "bad-utf8", 10, [f"rec{i}-{j}" for j in range(10)], batch_id=i)
    # a replayed batch is not counted twice
    assert store.record_dead_letters(run, "bad-utf8", 10, ["again"], batch_id=4) is False
    store.record_dead_letters(run, "too-long", 1, ["y" * (DEAD_LETTER_SAMPLE_CHARS * 3)])
    store.record_dead_letters(run, "too-long", 2, [b"\x00\xff\xfe raw", "nul\x00inside"])
    rows = {r["reason"]: r for r in store.dead_letters(run)}
    bad = rows["bad-utf8"]
    assert bad["count"] == 50
    assert len(bad["sample"]) == DEAD_LETTER_SAMPLE_LIMIT
    assert bad["sample"][-1] == "rec4-9" and bad["sample"][0] == f"rec{5 - DEAD_LETTER_SAMPLE_LIMIT // 10}-0"
    assert bad["last_batch"] == 4
    long = rows["too-long"]
    assert long["count"] == 3
    assert len(long["sample"][0]) == DEAD_LETTER_SAMPLE_CHARS and long["sample"][0].endswith("…")
    assert long["sample"][1] == "\\x00\\xff\\xfe raw" and long["sample"][2] == "nul\\x00inside"
    with pytest.raises(ValueError):
        store.record_dead_letters(run, "", 1)
    with pytest.raises(ValueError):
        store.record_dead_letters(run, "neg", -1)
    with pytest.raises(UnknownRun):
        store.record_dead_letters(run + 99, "x", 1)


def test_dead_letters_and_the_heaviest_key_per_interval(store):
    """Issue 38 items 4 and 10: the dead letters of each interval and reason as recorded with the
    interval (a replay adds nothing), and the heaviest key of each interval (hot keys rank 0)."""
    run = store.create_run("hash")
    for b in range(3):
        rec = IntervalRecord.from_parts(b, 10 + b, {"tuples": 100},
                                        hot_keys=[{"key": "a", "count": 40 + b, "share": (40 + b) / 100, "workers": [0]},
                                                  {"key": "b", "count": 5, "share": 0.05, "workers": [1]}],
                                        dead_letters={"bad_json": {"count": b + 1, "samples": ['{"user"']},
                                                      "missing_value": 7} if b != 1 else None)
        assert store.record_interval(run, rec)
    assert not store.record_interval(run, IntervalRecord.from_parts(2, 12, {"tuples": 100}, dead_letters={"bad_json": 50}))
    assert store.dead_letter_counts(run) == [
        {"interval": 10, "batch_id": 0, "reason": "bad_json", "count": 1},
        {"interval": 10, "batch_id": 0, "reason": "missing_value", "count": 7},
        {"interval": 12, "batch_id": 2, "reason": "bad_json", "count": 3},
        {"interval": 12, "batch_id": 2, "reason": "missing_value", "count": 7}]
    assert [r["interval"] for r in store.dead_letter_counts(run, since_interval=10)] == [12, 12]
    totals = {r["reason"]: r["count"] for r in store.dead_letters(run)}
    assert totals == {"bad_json": 4, "missing_value": 14}  # the per-interval rows sum to the totals
    assert [(r["interval"], r["count"]) for r in store.hottest_keys(run)] == [(10, 40), (11, 41), (12, 42)]
    assert [r["interval"] for r in store.hottest_keys(run, since_interval=11)] == [12]
    copy = store.import_run(store.export_run(run))  # an exported run keeps its counts per interval
    assert store.dead_letter_counts(copy) == store.dead_letter_counts(run)


# ---------------------------------------------------------------------------------------------
# injection-looking input
# ---------------------------------------------------------------------------------------------
def test_injection_strings_stored_verbatim(store):
    statements: list[str] = []

    def capture(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement)

    event.listen(store.engine, "before_cursor_execute", capture)
    try:
        run = store.create_run("hash", {INJECTION: INJECTION}, name=INJECTION, workload=INJECTION,
                               config={"path": INJECTION}, note=INJECTION)
        cid = store.submit_command("set-param", {"params": {INJECTION: INJECTION}}, run_id=run)
        store.mark_command(cid, "rejected", reason=INJECTION)
        store.record_dead_letters(run, INJECTION, 1, [INJECTION], batch_id=1)
        store.record_event(run, "param", {"value": INJECTION})
        store.record_interval(run, IntervalRecord.from_parts(1, 1, {"note": INJECTION},
                              hot_keys=[{"key": INJECTION, "count": 1, "share": 1.0, "workers": [0]}]))
    finally:
        event.remove(store.engine, "before_cursor_execute", capture)
    assert statements and not any("DROP" in s or "jndi" in s for s in statements)
    r = store.get_run(run)
    assert r["name"] == INJECTION and r["params"] == {INJECTION: INJECTION} and r["note"] == INJECTION
    assert r["config"] == {"path": INJECTION} and r["workload"] == INJECTION
    cmd = store.get_command(cid)
    assert cmd["payload"] == {"params": {INJECTION: INJECTION}} and cmd["reason"] == INJECTION
    (dl,) = store.dead_letters(run)
    assert dl["reason"] == INJECTION and dl["sample"] == [INJECTION]
    assert store.events(run)[0]["detail"] == {"value": INJECTION}
    assert store.hot_keys(run)[0]["key"] == INJECTION
    assert store.interval_metrics(run)[0]["note"] == INJECTION
    assert set(Base.metadata.tables) <= set(inspect(store.engine).get_table_names())
    assert len(store.list_runs()) == 1


# ---------------------------------------------------------------------------------------------
# export
# ---------------------------------------------------------------------------------------------
def _strip_ids(data):
    out = json.loads(json.dumps(data))
    out["run"].pop("id")
    for name in ("events", "commands"):
        for r in out[name]:
            r.pop("id")
    return out


def test_export_round_trip(store, tmp_path):
    run = store.create_run("mixed", {"theta_max": 0.1, "amax": 100}, seed=42, n_workers=4,
                           config={"workload": {"kind": "zipf", "s": 1.1}}, name="exp")
    for b in range(3):
        _full_interval(store, run, b, b)
    cid = store.submit_command("set-param", {"params": {"theta_max": 0.2}}, run_id=run)
    store.mark_command(cid, "applied", applied_batch=2)
    store.record_event(run, "workers", {"from": 4, "to": 6}, command_id=cid)
    data = store.export_run(run)
    assert data["format"] == "skewlab-run" and data["schema_version"] == SCHEMA_VERSION
    assert json.loads(json.dumps(data, allow_nan=False)) == data  # strictly JSON-serialisable
    assert len(data["interval_metrics"]) == 3 and len(data["commands"]) == 1

    # import into this store and into a fresh SQLite store: exports agree except for ids
    again = store.import_run(json.loads(json.dumps(data)))
    assert again != run
    assert _strip_ids(store.export_run(again)) == _strip_ids(data)
    other = connect(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        copied = other.import_run(json.loads(json.dumps(data)))
        assert _strip_ids(other.export_run(copied)) == _strip_ids(data)
    finally:
        other.close()

    tables = store.export_csv(run)
    rows = list(csv.DictReader(io.StringIO(tables["interval_metrics"])))
    assert [int(r["batch_id"]) for r in rows] == [0, 1, 2]
    assert float(rows[1]["imbalance"]) == pytest.approx(0.25)
    hot = list(csv.DictReader(io.StringIO(tables["hot_keys"])))
    assert json.loads(hot[1]["workers"]) == [1, 2]
    workers = list(csv.DictReader(io.StringIO(tables["worker_metrics"])))
    assert [int(r["state_bytes"]) for r in workers[:4]] == [4096, 0, BIG, 12]
    (mig, *_) = csv.DictReader(io.StringIO(tables["migration_events"]))
    assert (int(mig["bytes_moved"]), int(mig["pause_batches"])) == (BIG, 2)
    assert data["worker_metrics"][2]["state_bytes"] == BIG and data["migration_events"][0]["pause_batches"] == 2
    (run_row,) = csv.DictReader(io.StringIO(tables["run"]))
    assert json.loads(run_row["params"]) == {"amax": 100, "theta_max": 0.1}
    with pytest.raises(UnknownRun):
        store.export_run(10_000)
    with pytest.raises(ValueError):
        store.import_run({"format": "something else"})


def test_an_export_of_schema_version_1_still_imports(store):
    run = store.create_run("mixed")
    _full_interval(store, run, 0, 0)
    data = json.loads(json.dumps(store.export_run(run)))
    data["schema_version"] = 1  # version 1 exports lack the columns version 2 added
    for row in data["worker_metrics"]:
        del row["state_bytes"]
    for row in data["migration_events"]:
        del row["bytes_moved"], row["pause_batches"]
    copied = store.import_run(data)
    assert [r["state_bytes"] for r in store.worker_metrics(copied)] == [None] * 4
    assert store.migration_events(copied)[0]["bytes_moved"] is None
    assert store.worker_metrics(copied)[0]["tuples"] == 400
    with pytest.raises(ValueError, match="schema version"):
        store.import_run(dict(data, schema_version=SCHEMA_VERSION + 1))


# ---------------------------------------------------------------------------------------------
# property: replays never change what was first written
# ---------------------------------------------------------------------------------------------
@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.floats(0, 10, allow_nan=False)), min_size=1, max_size=15))
def test_property_first_write_wins(batches):
    s = connect("sqlite://")
    try:
        run = s.create_run("hash")
        first: dict[int, float] = {}
        for batch, value in batches:
            wrote = s.record_interval(run, IntervalRecord.from_parts(batch, batch, {"imbalance": value},
                                      workers=[{"tuples": 1}, {"tuples": 2}]))
            assert wrote == (batch not in first)
            first.setdefault(batch, value)
        rows = s.interval_metrics(run)
        assert [r["batch_id"] for r in rows] == sorted(first)
        for r in rows:
            assert math.isclose(r["imbalance"], first[r["batch_id"]])
        assert len(s.worker_metrics(run)) == 2 * len(first)
    finally:
        s.close()


def test_pg_fixture_fails_under_ci_and_skips_elsewhere(monkeypatch):
    from tests import pg

    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        pg._unavailable("initdb not found")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="initdb not found"):
        pg._unavailable("initdb not found")
    monkeypatch.setenv("SKEWLAB_PG_BIN", "/nonexistent")
    found = pg.find_pg_bin()
    assert found is None or all((found / exe).is_file() for exe in ("initdb", "pg_ctl", "postgres"))
