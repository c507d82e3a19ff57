"""Engine pieces without Spark: snapshot store, buffered metrics sink, topology functions."""

import pickle
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sqlalchemy.exc import OperationalError

from skewlab.engine.algorithms import registry
from skewlab.engine.io.checkpoint import SnapshotStore
from skewlab.engine.io.metrics_sink import MetricsSink, PendingInterval
from skewlab.engine.algorithms.keys import fingerprint, fingerprint_keys
from skewlab.engine.runtimes.spark.messages import SourceSide, decode
from skewlab.engine.runtimes.spark.topology import RoutingSnapshot, make_router
from skewlab.storage.records import IntervalRecord


def test_snapshots_keep_latest_and_skip_torn_files(tmp_path):
    s = SnapshotStore(tmp_path, keep=2)
    assert s.latest() is None
    for b in range(4):
        s.save(b, {"b": b})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["engine-2.pkl", "engine-3.pkl"]
    (tmp_path / "engine-3.pkl").write_bytes(b"\x80\x05torn")
    assert s.latest() == (2, {"b": 2})


class FlakyStore:
    def __init__(self):
        self.down = True
        self.rows = {}
        self.marks = []

    def record_interval(self, run_id, record):
        if self.down:
            raise OperationalError("INSERT", {}, Exception("connection refused"))
        if (run_id, record.batch_id) in self.rows:
            return False
        self.rows[(run_id, record.batch_id)] = record.metrics()
        return True

    def mark_command(self, cid, status, reason="", applied_batch=None, run_id=None):
        self.marks.append((cid, status, applied_batch))
        self.marked_by = run_id


def test_sink_buffers_during_outage_and_loses_nothing():
    clock = [0.0]
    store = FlakyStore()
    logs = []
    sink = MetricsSink(store, 1, clock=lambda: clock[0], log=logs.append)
    for b in range(5):
        sink.put(PendingInterval(IntervalRecord(b, b, tuples=b), [(b, "applied", None)]))
        clock[0] += 10
    assert sink.backlog == 5 and "DOWN" in sink.status and store.rows == {}
    store.down = False
    clock[0] += 100
    assert sink.flush()
    assert sorted(store.rows) == [(1, b) for b in range(5)] and sink.status == "db ok"
    assert store.marked_by == 1, "a global command is recorded as handled by this run (exports find it)"
    assert [m[0] for m in store.marks] == list(range(5))
    assert any("buffering" in m for m in logs) and any("nothing lost" in m for m in logs)
    # a replayed row (e.g. after a restart) is written idempotently
    sink.put(PendingInterval(IntervalRecord(4, 4, tuples=4)))
    assert len(store.rows) == 5 and sink.backlog == 0


def test_sink_raises_on_programming_errors():
    class Broken(FlakyStore):
        def record_interval(self, *a, **k):
            raise ValueError("unknown interval metric")

    sink = MetricsSink(Broken(), 1)
    with pytest.raises(ValueError):
        sink.put(PendingInterval(IntervalRecord(0, 0)))


def test_pending_interval_of_an_older_snapshot_becomes_a_record():
    """Snapshots written before IntervalRecord held (batch_id, interval, metrics, kwargs)."""
    old = {"batch_id": 3, "interval": 2, "metrics": {"tuples": 7}, "kwargs": {"workers": [{"tuples": 7}]},
           "commands": [(1, "applied", "")]}
    item = PendingInterval.__new__(PendingInterval)
    item.__setstate__(old)  # what pickle does with the old state
    assert item.batch_id == 3 and item.record.interval == 2 and item.record.tuples == 7
    assert item.record.workers[0].tuples == 7 and item.commands == [(1, "applied", "")]
    again = pickle.loads(pickle.dumps(item))
    assert again.record.batch_id == 3 and again.commands == item.commands


@pytest.mark.parametrize("name, params", [("hash", {}), ("pkg", {}), ("dchoices", {}), ("dkg", {}), ("mixed", {}),
                                          # a sketch far smaller than the key set: evictions on every path,
                                          # so the hash table rebuilt after each shipment is exercised
                                          ("dchoices", {"capacity": 40, "warmup": 100}),
                                          ("wchoices", {"capacity": 40, "warmup": 100})])
def test_executor_routing_equals_local_routing(name, params):
    """The Spark path (pickled snapshot, per-source state shipped back) routes exactly like the local runtime."""
    keys = [f"k{int(x)}" for x in np.random.default_rng(0).zipf(1.3, 6000) % 400]
    local = registry.create(name, 5, n_sources=2, params=params)
    driver = registry.create(name, 5, n_sources=2, params=params)
    from skewlab.engine.algorithms.keys import fingerprints

    fps = fingerprints(keys)
    expected = []
    got = []
    for chunk in range(3):
        sl = slice(chunk * 2000, (chunk + 1) * 2000)
        for src in (0, 1):
            part = fps[sl][src::2]
            expected.append(local.router.route(part, src))
        snap = RoutingSnapshot(chunk, driver.router).dumps()
        for src in (0, 1):
            ks = keys[sl][src::2]
            rb = pa.RecordBatch.from_arrays([pa.array(ks), pa.array([src] * len(ks), pa.int32())], names=["key", "source"])
            out = pa.Table.from_batches(list(make_router(snap)(iter([rb]))))
            data = out.filter(pc.is_null(out.column("msg")))
            assert data.column("key").to_pylist() == ks
            got.append(data.column("worker").to_numpy().astype(np.int64))
            side = out.filter(pc.is_valid(out.column("msg")))
            assert side.column("worker").to_pylist() == [src % 5] and side.column("key").to_pylist() == [None]
            info = decode(side.column("msg")[0].as_py(), SourceSide)
            assert info.source == src and info.rows == len(ks)
            driver.router.set_source_state(src, info.router_state())
    for e, g in zip(expected, got):
        assert np.array_equal(e, g)


def test_operator_output_counts_and_dead_letters(tmp_path):
    """Router → the stateful operator of each worker (fake state store) → unpack_output: per-key
    statistics, side rows with dead letters and offsets, one summary per worker."""
    from skewlab.engine.runtimes.spark.operator import make_handler, unpack_output
    from tests.engine.test_spark_operator import FakeState, run_handler

    g = registry.create("hash", 2)
    rb = pa.RecordBatch.from_arrays(
        [pa.array(["a", "a", None, "b"]), pa.array([0, 0, 0, 0], pa.int32()), pa.array([0, 1, 2, 3], pa.int64()),
         pa.array([None, None, "no_key", None]), pa.array([None, None, "00", None])],
        names=["key", "source", "seq", "error", "raw"])
    snap = RoutingSnapshot(0, g.router, 2, {0: {"exports": {}, "expect": []}, 1: {"exports": {}, "expect": []}})
    routed = pa.Table.from_batches(list(make_router(snap.dumps(), lead=True)(iter([rb]))))
    handler = make_handler(2, 3, str(tmp_path))
    u = unpack_output(pa.concat_tables(run_handler(handler, routed, 2, {w: FakeState() for w in range(2)})))
    assert sorted(zip(u.fps.tolist(), u.counts.tolist())) == sorted([(fingerprint("a"), 2), (fingerprint("b"), 1)])
    assert u.names == {fingerprint("a"): "a", fingerprint("b"): "b"}
    assert u.dead_letters == {"no_key": [1, ["00"]]}
    assert u.states[0].consumed == 4 and u.states[0].first_seq == 0
    assert set(u.summaries) == {0, 1} and sum(s.keys for s in u.summaries.values()) == 2


def test_a_worker_returns_its_key_counts_in_one_row_however_many_keys(tmp_path):
    """Issue 36: every output row of applyInPandasWithState costs pandas, PySpark's padding of the
    state column, Arrow and a JVM row, so a worker returns its per-key counts as one stat row of
    arrays (KeyCounts), not a row per key; the counts and its `named` hot keys' names are the same."""
    from skewlab.engine.runtimes.spark.operator import STAT, make_handler, unpack_output
    from tests.engine.test_spark_operator import FakeState, run_handler

    g = registry.create("hash", 2)
    keys = [f"k{i}" for i in range(500)] + ["hot"] * 50 + ["warm"] * 20
    rb = pa.RecordBatch.from_arrays([pa.array(keys), pa.array([0] * len(keys), pa.int32()),
                                     pa.array(range(len(keys)), pa.int64()), pa.nulls(len(keys), pa.string())],
                                    names=["key", "source", "seq", "error"])
    snap = RoutingSnapshot(0, g.router, 2, {0: {"exports": {}, "expect": []}, 1: {"exports": {}, "expect": []}})
    routed = pa.Table.from_batches(list(make_router(snap.dumps(), lead=True)(iter([rb]))))
    out = pa.concat_tables(run_handler(make_handler(2, 3, str(tmp_path), named=2), routed, 2,
                                       {w: FakeState() for w in range(2)}))
    stat = np.asarray(out.column("kind").to_numpy()) == STAT
    assert sorted(out.column("worker").to_numpy()[stat].tolist()) == [0, 1]  # one stat row per worker
    assert out.num_rows <= 2 * 4  # per worker: stat, summary and a source's side row; no row per key
    u = unpack_output(out)
    want = {fingerprint(k): keys.count(k) for k in set(keys)}
    assert dict(zip(u.fps.tolist(), u.counts.tolist())) == want and len(u.fps) == len(want)
    hot_worker = int(u.workers[u.fps.tolist().index(fingerprint("hot"))])
    assert u.names[fingerprint("hot")] == "hot" and len(u.names) <= 4
    assert sum(1 for f in u.names if int(u.workers[u.fps.tolist().index(f)]) == hot_worker) <= 2


def test_fingerprint_keys_bit_identical_to_mmh3():
    """The numba MurmurHash3 over Arrow buffers equals skewlab.engine.algorithms.keys.fingerprint (mmh3) bit for bit:
    every tail length, multi-byte UTF-8, slices (non-zero offset), chunked and large strings."""
    rng = np.random.default_rng(7)
    keys = ["", "a", "k0", "k12345", "ü€😀", "é" * 100] + ["x" * n for n in range(1, 50)]
    keys += ["".join(chr(int(c)) for c in rng.integers(32, 0xD7FF, int(rng.integers(0, 40)))) for _ in range(500)]
    want = np.array([fingerprint(k) for k in keys], dtype=np.uint64)
    arr = pa.array(keys, pa.string())
    assert fingerprint_keys(arr).dtype == np.uint64
    assert np.array_equal(fingerprint_keys(arr), want)
    assert np.array_equal(fingerprint_keys(arr.slice(17, 101)), want[17:118])
    assert np.array_equal(fingerprint_keys(pa.array(keys, pa.large_string())), want)
    assert np.array_equal(fingerprint_keys(pa.chunked_array([arr.slice(0, 9), arr.slice(9)])), want)
    assert fingerprint_keys(pa.array([], pa.string())).size == 0
    assert fingerprint_keys(pa.array(["", ""], pa.string())).tolist() == [fingerprint("")] * 2


def test_router_mixed_sources_dead_letters_only_and_side_rows():
    """A batch holding two sources routes each in its own stream order; a source whose rows are all
    dead letters still reports its offsets and dead letters in a side row."""
    g = registry.create("pkg", 3, n_sources=2)
    local = registry.create("pkg", 3, n_sources=2)
    keys = ["a", "b", "a", "c", None, "a", "d", "a"]
    src = [0, 1, 0, 1, 2, 0, 1, 0]
    err = [None, None, None, None, "no_key", None, None, None]
    rb = pa.RecordBatch.from_arrays(
        [pa.array(keys), pa.array(src, pa.int32()), pa.array(range(8), pa.int64()), pa.array(err)],
        names=["key", "source", "seq", "error"])
    out = pa.Table.from_batches(list(make_router(RoutingSnapshot(0, g.router).dumps())(iter([rb]))))
    w = out.column("worker").to_numpy()
    is_msg = np.array([m is not None for m in out.column("msg").to_pylist()])
    data_keys = out.column("key").to_pylist()[: int((~is_msg).sum())]
    assert not is_msg[: len(data_keys)].any()  # the data rows first, then the message rows
    assert data_keys == [k for k in keys if k is not None]
    for s in (0, 1):
        ks = [k for k, x in zip(keys, src) if x == s]
        exp = local.router.route(np.array([fingerprint(k) for k in ks], np.uint64), s)
        sel = [i for i, (x, e) in enumerate(zip(src, err)) if e is None]
        got = w[: len(sel)][[j for j, i in enumerate(sel) if src[i] == s]]
        assert np.array_equal(got, exp)
    sides = {decode(m, SourceSide).source: (int(x), decode(m, SourceSide))
             for x, m in zip(w, out.column("msg").to_pylist()) if m is not None}
    assert {s: x for s, (x, _) in sides.items()} == {0: 0, 1: 1, 2: 2}  # source s's side row to worker s mod 3
    sides = {s: side for s, (_, side) in sides.items()}
    assert sorted(sides) == [0, 1, 2]
    assert sides[2].rows == 1 and sides[2].dead_letters == {"no_key": (1, ("",))}
    assert sides[2].consumed == 5 and sides[2].first_seq == 4
    assert sides[0].rows == 4 and sides[0].consumed == 8 and sides[0].first_seq == 0
    # empty input: no rows at all
    assert list(make_router(RoutingSnapshot(0, g.router).dumps())(iter([]))) == []


def test_a_second_pause_while_paused_records_no_second_pause_event(tmp_path):
    """Pause / resume commands are checked against the engine's own pause state (no Spark needed)."""
    from skewlab.engine.runtimes.spark.engine import EngineConfig, SparkEngine

    eng = SparkEngine(EngineConfig(db=f"sqlite:///{tmp_path}/db.sqlite", checkpoint=str(tmp_path / "ck")),
                      log=lambda m: None)
    try:
        for kind in ("pause", "pause"):
            eng.store.submit_command(kind, {}, run_id=eng.snapshot.run_id)
        marks, events = eng.driver.apply_commands(0)
        assert eng.driver.paused and [e["kind"] for e in events] == ["pause", "noop"]
        assert [m[2] for m in marks] == [None, "already paused"]
        for kind in ("resume", "resume"):
            eng.store.submit_command(kind, {}, run_id=eng.snapshot.run_id)
        marks, events = eng.driver.apply_commands(1)
        assert not eng.driver.paused and [e["kind"] for e in events] == ["resume", "noop"]
        assert marks[1][1:] == ("applied", "not paused")
    finally:
        eng.store.close()


def test_a_worker_holding_tuples_without_state_keeps_its_control_row(tmp_path, monkeypatch):
    """A worker outside the controller's workers (scaled in) that holds tuples for state in flight, but
    has no keys in its state, still runs with a control row: its held tuples are not stranded."""
    import skewlab.engine.runtimes.spark.driver_step as driver_step
    from skewlab.engine.runtimes.spark.engine import EngineConfig, SparkEngine

    seen: list[set[int]] = []
    real = driver_step.control_payloads
    monkeypatch.setattr(driver_step, "control_payloads", lambda o, f, workers, p, **kw: seen.append(set(workers)) or real(o, f, workers, p, **kw))
    eng = SparkEngine(EngineConfig(db=f"sqlite:///{tmp_path}/db.sqlite", checkpoint=str(tmp_path / "ck"),
                                   workers=2, max_workers=8), log=lambda m: None)
    try:
        eng.driver.snapshot = replace(eng.snapshot, worker_keys={5: 0, 6: 0}, worker_held={5: 3, 6: 0})
        eng.driver.publish_route(0)
        assert seen[-1] == {0, 1, 5}
    finally:
        eng.store.close()


def test_the_start_line_says_what_room_for_more_workers_costs():
    from skewlab.engine.runtimes.spark.engine import workers_line

    assert workers_line(8, 8) == "8 workers"
    line = workers_line(8, 16)
    assert line.startswith("8 workers, room for 16 (") and "a task of every batch" in line
    assert "--max-workers 8 runs faster" in line
