"""The engine's one declared snapshot format (engine/runtimes/spark/engine_snapshot.py): a round trip
keeps every persisted field, a snapshot in the unversioned format of earlier engines restores, and one
of a later format is refused with one line (no Spark needed)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields, replace

import numpy as np
import pytest

from skewlab.engine.config.params import ParamError
from skewlab.engine.io.checkpoint import SnapshotStore
from skewlab.engine.runtimes.spark.driver_step import DriverSnapshot, InFlightMigration
from skewlab.engine.runtimes.spark.engine import EngineConfig, SparkEngine
from skewlab.engine.runtimes.spark.run_start import stream_of
from skewlab.engine.runtimes.spark.engine_snapshot import FORMAT, PERSISTED, EngineSnapshot
from skewlab.engine.runtimes.spark.state_transfer import ExportRef

REF = ExportRef(4, 0, 2, "migrations/batch=4/from-0-to-2.blob", 123, 9)


def _cfg(tmp_path) -> EngineConfig:
    return EngineConfig(db=f"sqlite:///{tmp_path / 'm.db'}", checkpoint=str(tmp_path / "ckpt"), workers=4,
                        algorithm="pkg", shadow=[])


def _busy(driver: DriverSnapshot) -> DriverSnapshot:
    """A driver snapshot with every field away from its default."""
    return replace(driver, last_batch=4, paused=True, applied_commands=(3, 5), consumed={0: 40, 1: 38},
                   dead_total=2, worker_keys={0: 7, 5: 0}, worker_held={5: 3}, worker_bytes={0: 900},
                   migrating=(InFlightMigration(4, latency_before_ms=1.5),),
                   next_orders=(np.array([1, 2]), np.array([0, 0]), np.array([2, 2])), next_imports={2: (REF,)},
                   migrations_seen=1, shares_split=True, latencies=(1.0, 2.0))


def test_every_driver_field_is_persisted_or_declared_in_memory_only():
    transient = {f.name for f in fields(DriverSnapshot) if not f.metadata.get("persist", True)}
    assert transient == {"key_names", "carry_events", "off_home"}  # off_home: after a restart every key merges once
    assert set(PERSISTED) == {f.name for f in fields(DriverSnapshot)} - transient - {"last_batch"}


def test_a_restart_restores_every_persisted_field(tmp_path):
    first = SparkEngine(_cfg(tmp_path), log=lambda m: None)
    first.driver.snapshot = _busy(first.snapshot)
    first.driver.save(4)
    again = SparkEngine(_cfg(tmp_path), log=lambda m: None)
    a, b = first.snapshot, again.snapshot
    for name in PERSISTED:
        if name in ("controller", "shadow", "next_orders"):
            continue
        assert getattr(b, name) == getattr(a, name), name
    assert b.last_batch == 4 and all(np.array_equal(x, y) for x, y in zip(a.next_orders, b.next_orders))
    assert b.controller.planner.name == "pkg" and b.controller.n_workers == 4
    payload = SnapshotStore(tmp_path / "ckpt" / "skewlab").latest()[1]
    assert payload["format"] == FORMAT and EngineSnapshot.decode(payload, 4).driver.run_id == a.run_id


def test_a_snapshot_written_by_the_unversioned_format_restores(tmp_path):
    """The dict main wrote in ``SparkEngine._save`` (today ``BatchDriver.save``) before the format was declared, key by key."""
    first = SparkEngine(_cfg(tmp_path), log=lambda m: None)
    s = _busy(first.snapshot)
    SnapshotStore(tmp_path / "ckpt" / "skewlab").save(6, {
        "run_id": s.run_id, "stream": stream_of(first.cfg, first.store), "controller": s.controller, "shadow": s.shadow,
        "paused": s.paused, "applied_commands": list(s.applied_commands), "consumed": dict(s.consumed),
        "dead_total": s.dead_total, "pending": [], "partitions": s.partitions, "sink": first.results.url,
        "sink_start": first.results.start, "worker_keys": dict(s.worker_keys), "worker_held": dict(s.worker_held),
        "worker_bytes": dict(s.worker_bytes),
        "migrating": [{"export_batch": 4, "events": [], "latency_before_ms": 1.5}],
        "next_orders": s.next_orders, "next_imports": {2: [REF]}, "migrations_seen": 1, "shares_split": True,
        "latencies": [1.0, 2.0]})
    logs: list[str] = []
    again = SparkEngine(_cfg(tmp_path), log=logs.append)
    r = again.snapshot
    assert any("restored run" in m and "batch 6" in m for m in logs)
    assert (r.last_batch, r.paused, r.applied_commands, r.consumed, r.dead_total) == (6, True, (3, 5), {0: 40, 1: 38}, 2)
    assert r.next_imports == {2: (REF,)} and r.shares_split and r.migrations_seen == 1 and r.latencies == (1.0, 2.0)
    assert r.migrating == s.migrating and r.worker_held == {5: 3}


def test_migrations_in_flight_are_stored_as_the_dicts_of_earlier_engines():
    """In the driver a migration in flight is an :class:`InFlightMigration`; the snapshot stores it as
    the dict engines before it wrote (a key only once it is known, ``events`` a list), and reads such
    dicts back, before and after the export batch."""
    from skewlab.engine.algorithms import registry
    from skewlab.engine.algorithms.keys import FingerprintVocabulary
    from skewlab.engine.control.controller import Controller

    move = {"interval": 3, "reason": "workers", "keys": 4, "state_moved": 8.0, "total_state": 16.0,
            "interval_total": 32.0, "pause_seconds": 0.1, "workers": 3}
    planned = {"export_batch": 5, "events": [move], "latency_before_ms": None, "latency_plan_ms": 12.0}
    exported = {**planned, "bytes_moved": 300, "latency_export_ms": 20.0, "export_end": 1000.5}
    controller = Controller(registry.create("hash", 2, 1, 0, {}), FingerprintVocabulary(), window=3)
    driver = DriverSnapshot(run_id=1, controller=controller, shadow=None, partitions=4, last_batch=5,
                            migrating=tuple(InFlightMigration.of(m) for m in (planned, exported)))
    payload = EngineSnapshot(driver).encode()
    assert payload["migrating"] == [planned, exported]
    restored = EngineSnapshot.decode({**payload, "migrating": [planned, exported]}, 5).driver.migrating
    assert restored == driver.migrating and all(isinstance(m, InFlightMigration) for m in restored)
    assert restored[0].bytes_moved is None and restored[0].export_end is None and restored[0].latency_plan_ms == 12.0
    assert restored[1].bytes_moved == 300 and restored[1].export_end == 1000.5 and restored[1].events == (move,)


def test_a_snapshot_of_a_later_format_is_refused_with_one_line(tmp_path):
    first = SparkEngine(_cfg(tmp_path), log=lambda m: None)
    payload = EngineSnapshot(first.snapshot, stream=stream_of(first.cfg, first.store), sink=first.results.url).encode()
    SnapshotStore(tmp_path / "ckpt" / "skewlab").save(1, {**payload, "format": FORMAT + 1})
    with pytest.raises(ParamError) as err:
        SparkEngine(_cfg(tmp_path), log=lambda m: None)
    msg = str(err.value)
    assert f"snapshot format {FORMAT + 1}" in msg and f"up to {FORMAT}" in msg and "\n" not in msg
    # what the user sees: one line on stderr, exit status 2
    out = subprocess.run([sys.executable, "-m", "skewlab.cli", "engine", "--db", f"sqlite:///{tmp_path / 'm.db'}",
                          "--checkpoint", str(tmp_path / "ckpt"), "--workers", "4", "--algorithm", "pkg"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and f"snapshot format {FORMAT + 1}" in lines[0], out.stderr
