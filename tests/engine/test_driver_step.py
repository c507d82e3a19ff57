"""The driver's per-batch step (engine/runtimes/spark/driver_step.py) without Spark: a sequence of
batch outputs through a set-workers migration (export → import bookkeeping), a switch to a grouping
that splits keys, a rejected command and a replay of an applied batch; and the step's purity."""

from __future__ import annotations

import pickle
from dataclasses import replace

import numpy as np
import pytest

from skewlab.engine.algorithms import registry
from skewlab.engine.algorithms.keys import FingerprintVocabulary
from skewlab.engine.control.controller import Controller
from skewlab.engine.runtimes.spark.driver_step import CommandMark, DriverSettings, DriverSnapshot, StepInput, step
from skewlab.engine.runtimes.spark.messages import BatchOutput, SourceSide, WorkerSummary
from skewlab.engine.runtimes.spark.state_transfer import ExportRef

SETTINGS = DriverSettings("count", True, values="none", top_k=3)
KEYS = np.arange(1, 41, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)  # 40 key fingerprints


def fresh_snapshot(workers: int = 2, partitions: int = 4, algorithm: str = "hash") -> DriverSnapshot:
    controller = Controller(registry.create(algorithm, workers, 1, 0, {}), FingerprintVocabulary(), window=3)
    controller.track_orders = True
    return DriverSnapshot(run_id=7, controller=controller, shadow=None, partitions=partitions)


def output(batch: int, snapshot: DriverSnapshot, *, exports: tuple[ExportRef, ...] = (), seq: int = 0) -> BatchOutput:
    """Every key once, on the worker the published grouping routes it to (the controller's router)."""
    router = pickle.loads(pickle.dumps(snapshot.controller.planner.router))  # routing may change a router
    workers = np.asarray(router.route(KEYS.copy()), dtype=np.int64)
    return BatchOutput(
        workers=workers, fps=KEYS.copy(), counts=np.ones(KEYS.size, dtype=np.int64), names={int(KEYS[0]): "hot"},
        states={0: SourceSide(0, batch, KEYS.size, consumed=seq + KEYS.size, first_seq=seq)},
        dead_letters={"no_key": [1, ["x"]]} if batch == 0 else {},
        exports=exports,
        summaries={w: WorkerSummary(batch, keys=20, held=0, state_bytes=100) for w in (0, 1)})


def run(snapshot: DriverSnapshot, batch: int, *, commands=(), exports=(), seq: int = 0):
    return step(snapshot, StepInput(batch, output(batch, snapshot, exports=exports, seq=seq), started=0.0,
                                    clock=lambda: 0.25, wall=1000.0 + batch, commands=tuple(commands)), SETTINGS)


def test_a_sequence_of_batches_through_a_migration_a_switch_a_rejection_and_a_replay():
    s0 = fresh_snapshot()
    # batch 0: statistics, dead letters, a set-workers command and a rejected one (above P = 4)
    s1, d0 = run(s0, 0, commands=[{"id": 1, "kind": "set-workers", "payload": {"workers": 3}},
                                  {"id": 2, "kind": "set-workers", "payload": {"workers": 9}}])
    assert not d0.already_applied and s1.last_batch == 0 and s1.consumed == {0: 40} and s1.dead_total == 1
    assert d0.marks[0] == CommandMark(1, "applied", None, 1)
    assert d0.marks[1].status == "rejected" and "9" in d0.marks[1].reason and d0.marks[1].applied_batch == 1
    assert s1.controller.n_workers == 3 and s1.applied_commands == (1, 2)
    assert d0.record.batch_id == 0 and d0.record.tuples == 40 and d0.prune_before == -1
    assert [e.kind for e in d0.record.events if e.command_id] == ["workers"]
    # the route of batch 1 carries the move orders of the resize: holders export, the new worker expects
    r1 = d0.route.snapshot
    assert r1.batch_id == 1 and r1.partitions == 4 and d0.route.flush and not r1.imports
    to: dict[int, set[int]] = {}
    for p in r1.control.values():
        for t, fps in p.exports.items():
            to.setdefault(t, set()).update(fps.tolist())
    assert to.get(2) and all(set(r1.control[t].expect.tolist()) == keys for t, keys in to.items())
    assert not any(p.split for p in r1.control.values())
    assert len(s1.migrating) == 1 and s1.migrating[0].export_batch == 1 and s1.migrating[0].bytes_moved is None

    # batch 1: the holders exported; the driver keeps references only, for the route of batch 2
    refs = tuple(ExportRef(1, w, t, f"migrations/batch=1/from-{w}-to-{t}.blob", 50 + w, int(fps.size))
                 for w, p in r1.control.items() for t, fps in p.exports.items())
    s2, d1 = run(s1, 1, exports=refs, seq=40)
    by_target = {t: tuple(r for r in refs if r.target == t) for t in to}
    assert s2.next_imports == by_target and d1.route.flush
    assert d1.route.snapshot.imports == {t: list(r) for t, r in by_target.items()}
    assert s2.migrating[0].bytes_moved == sum(r.bytes for r in refs) and s2.migrating[0].export_end == 1001.0
    assert not d1.record.migrations

    # batch 2: the new worker imported; the migration row is recorded; a switch to a split-key grouping
    s3, d2 = run(s2, 2, seq=80, commands=[{"id": 3, "kind": "set-algorithm", "payload": {"algorithm": "dchoices"}}])
    assert s3.migrating == () and s3.next_imports == {} and d2.prune_before == 1
    (row,) = d2.record.migrations
    assert row.keys_moved == sum(r.keys for r in refs) and row.bytes_moved == sum(r.bytes for r in refs)
    assert row.pause_batches == 1 and row.pause_ms == pytest.approx(1000.0) and row.detail["import_batch"] == 2
    assert s3.controller.planner.name == "dchoices" and s3.shares_split
    assert all(p.split for p in d2.route.snapshot.control.values())

    # batch 1 replayed after a restart from the snapshot of batch 2: nothing applied, nothing decided
    s3b, d1b = run(s3, 1, seq=40, commands=[{"id": 4, "kind": "pause", "payload": {}}])
    assert d1b.already_applied and s3b is s3 and d1b.route is None and d1b.record is None and not d1b.marks

    # a routing file of another batch is refused
    with pytest.raises(RuntimeError, match="routed with the snapshot of batch 2"):
        step(s3, StepInput(3, output(2, s3)), SETTINGS)


@pytest.mark.parametrize("algorithm", ["hash", "mixed"])  # mixed: a routing table and a heavy-hitter sketch
def test_the_step_is_pure(algorithm, monkeypatch):
    import types

    import skewlab.engine.algorithms.grouping as grouping
    import skewlab.engine.control.controller as controller

    # the planners time their plans (plan_seconds): the one clock the step does not take as input
    fixed = types.SimpleNamespace(perf_counter=lambda: 1.0)
    monkeypatch.setattr(grouping, "time", fixed)
    monkeypatch.setattr(controller, "time", fixed)
    s0, _ = run(fresh_snapshot(algorithm=algorithm), 0, commands=[{"id": 1, "kind": "set-workers", "payload": {"workers": 3}}])
    before = pickle.dumps(s0)
    a_snap, a = run(s0, 1, seq=40, commands=[{"id": 2, "kind": "set-algorithm", "payload": {"algorithm": "dchoices"}}])
    assert pickle.dumps(s0) == before  # the input snapshot (controller included) is unchanged
    b_snap, b = run(s0, 1, seq=40, commands=[{"id": 2, "kind": "set-algorithm", "payload": {"algorithm": "dchoices"}}])
    assert pickle.dumps(a_snap) == pickle.dumps(b_snap)
    assert a.record == b.record and a.marks == b.marks and a.log == b.log and a.route.flush == b.route.flush
    assert a.route.snapshot.dumps() == b.route.snapshot.dumps()
    assert a_snap.controller is not s0.controller and s0.controller.planner.name == algorithm


def run_owned(snapshot: DriverSnapshot, batch: int, *, commands=(), seq: int = 0):
    data = StepInput(batch, output(batch, snapshot, seq=seq), started=0.0, clock=lambda: 0.25, wall=1000.0 + batch,
                     commands=tuple(commands))
    return step(snapshot, data, SETTINGS, owned=True)


@pytest.mark.parametrize("algorithm", ["hash", "mixed"])
def test_an_owned_step_updates_in_place_and_decides_as_the_pure_step(algorithm, monkeypatch):
    """The engine's mode (``owned=True``, no copy of the controller per batch) gives the pure step's
    snapshots and decisions over a resize and a switch to a split-key grouping."""
    import types

    import skewlab.engine.algorithms.grouping as grouping
    import skewlab.engine.control.controller as controller

    fixed = types.SimpleNamespace(perf_counter=lambda: 1.0)
    monkeypatch.setattr(grouping, "time", fixed)
    monkeypatch.setattr(controller, "time", fixed)
    commands = {0: [{"id": 1, "kind": "set-workers", "payload": {"workers": 3}}],
                2: [{"id": 2, "kind": "set-algorithm", "payload": {"algorithm": "dchoices"}}]}
    pure, owned = fresh_snapshot(algorithm=algorithm), fresh_snapshot(algorithm=algorithm)
    for b in range(5):
        controller_before = owned.controller
        pure, a = run(pure, b, commands=commands.get(b, ()), seq=40 * b)
        owned, o = run_owned(owned, b, commands=commands.get(b, ()), seq=40 * b)
        assert owned.controller is controller_before  # updated in place, not copied
        assert a.record == o.record and a.marks == o.marks and a.log == o.log
        assert a.route.snapshot.dumps() == o.route.snapshot.dumps()
        assert pickle.dumps(pure) == pickle.dumps(owned)


def run_ready(snapshot: DriverSnapshot, batch: int, ready, *, commands=(), seq: int = 0):
    return step(snapshot, StepInput(batch, output(batch, snapshot, seq=seq), started=0.0, clock=lambda: 0.25,
                                    wall=1000.0 + batch, commands=tuple(commands), kernels_ready=ready), SETTINGS)


def test_an_interim_run_switches_to_its_grouping_when_its_kernels_are_compiled():
    """A run routing by hash while dchoices compiles: no switch while dchoices is not among the
    compiled groupings; then one switch to it with its parameters, recorded as an algorithm event with
    the reason and no command, and the interim is over (persisted across a snapshot round trip)."""
    from skewlab.engine.runtimes.spark.driver_step import KERNELS_READY
    from skewlab.engine.runtimes.spark.engine_snapshot import EngineSnapshot

    s0 = replace(fresh_snapshot(), interim=("dchoices", {"capacity": 300}))
    s0 = EngineSnapshot.decode(EngineSnapshot(s0, sink="x").encode(), -1).driver  # persisted
    assert s0.interim == ("dchoices", {"capacity": 300})
    s1, d0 = run_ready(s0, 0, frozenset({"hash", "mixed"}))
    assert s1.controller.planner.name == "hash" and s1.interim == s0.interim
    assert not [e for e in d0.record.events if e.kind == "algorithm"]
    s2, d1 = run_ready(s1, 1, frozenset({"hash", "dchoices"}), seq=40)
    assert s2.controller.planner.name == "dchoices" and s2.controller.planner.p["capacity"] == 300 and s2.interim is None
    (event,) = [e for e in d1.record.events if e.kind == "algorithm"]
    assert event.command_id is None and event.detail["reason"] == KERNELS_READY and event.interval == 2
    assert not d1.marks and s2.applied_commands == () and s2.shares_split  # its results merge from now on
    assert any("switch to dchoices" in line for line in d1.log)
    assert all(p.split for p in d1.route.snapshot.control.values())  # batch 2 routes by dchoices
    s3, d2 = run_ready(s2, 2, None, seq=80)  # later batches: nothing more
    assert s3.controller.planner.name == "dchoices" and not [e for e in d2.record.events if e.kind == "algorithm"]


def test_an_operators_switch_during_the_interim_supersedes_the_grouping_the_run_waited_for():
    s0 = replace(fresh_snapshot(), interim=("dchoices", {}))
    s1, d0 = run_ready(s0, 0, frozenset(), commands=[{"id": 1, "kind": "set-algorithm", "payload": {"algorithm": "mixed"}}])
    assert s1.controller.planner.name == "mixed" and s1.interim is None and d0.marks[0].status == "applied"
    s2, _ = run_ready(s1, 1, None, seq=40)  # dchoices' kernels ready later: the operator's choice stays
    assert s2.controller.planner.name == "mixed"


def test_a_migration_in_flight_through_its_export_and_import_batches():
    """:func:`track_migrations` on :class:`InFlightMigration`: the export batch sets the bytes, its
    latency and end (and the closed interval's total on its moves), the import batch gives the row;
    one whose export batch was never seen completes with 0 bytes and no pause time."""
    from skewlab.engine.runtimes.spark.driver_step import InFlightMigration, track_migrations

    move = {"interval": 3, "reason": "workers", "keys": 4, "state_moved": 8.0, "total_state": 16.0,
            "interval_total": None}
    planned = InFlightMigration(2, (move,), latency_before_ms=5.0, latency_plan_ms=6.0)
    ref = ExportRef(2, 0, 1, "migrations/batch=2/from-0-to-1.blob", 77, 4)
    (exported,), done = track_migrations((planned,), 2, (ref,), 30.0, 100.0, "hash", closed=(3, 32.0))
    assert done == [] and (exported.bytes_moved, exported.latency_export_ms, exported.export_end) == (77, 30.0, 100.0)
    assert exported.events[0]["interval_total"] == 32.0 and planned.events[0]["interval_total"] is None
    left, (row,) = track_migrations((exported,), 3, (), 40.0, 100.25, "dchoices")
    assert left == () and (row["bytes_moved"], row["pause_batches"], row["pause_ms"]) == (77, 1, 250.0)
    assert row["migration_cost"] == 0.25 and row["algorithm"] == "dchoices"
    detail = row["detail"]
    assert (detail["latency_before_ms"], detail["latency_plan_ms"], detail["latency_export_ms"]) == (5.0, 6.0, 30.0)
    (unseen,) = track_migrations((planned,), 3, (), 40.0, 100.25, "hash")[1]
    assert unseen["bytes_moved"] == 0 and unseen["pause_ms"] is None and unseen["detail"]["latency_export_ms"] is None
