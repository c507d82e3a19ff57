"""Engine pieces without Spark: snapshot store, buffered metrics sink, topology functions."""

import pickle

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sqlalchemy.exc import OperationalError

from engine import registry
from engine.checkpoint import SnapshotStore
from engine.metrics_sink import MetricsSink, PendingInterval
from engine.spark.topology import RoutingSnapshot, make_router, make_worker, unpack_aggregates


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

    def record_interval(self, run_id, batch_id, interval, metrics, **kw):
        if self.down:
            raise OperationalError("INSERT", {}, Exception("connection refused"))
        if (run_id, batch_id) in self.rows:
            return False
        self.rows[(run_id, batch_id)] = metrics
        return True

    def mark_command(self, cid, status, reason="", applied_batch=None):
        self.marks.append((cid, status, applied_batch))


def test_sink_buffers_during_outage_and_loses_nothing():
    clock = [0.0]
    store = FlakyStore()
    logs = []
    sink = MetricsSink(store, 1, clock=lambda: clock[0], log=logs.append)
    for b in range(5):
        sink.put(PendingInterval(b, b, {"tuples": b}, {}, [(b, "applied", None)]))
        clock[0] += 10
    assert sink.backlog == 5 and "DOWN" in sink.status and store.rows == {}
    store.down = False
    clock[0] += 100
    assert sink.flush()
    assert sorted(store.rows) == [(1, b) for b in range(5)] and sink.status == "db ok"
    assert [m[0] for m in store.marks] == list(range(5))
    assert any("buffering" in m for m in logs) and any("nothing lost" in m for m in logs)
    # a replayed row (e.g. after a restart) is written idempotently
    sink.put(PendingInterval(4, 4, {"tuples": 4}))
    assert len(store.rows) == 5 and sink.backlog == 0


def test_sink_raises_on_programming_errors():
    class Broken(FlakyStore):
        def record_interval(self, *a, **k):
            raise ValueError("unknown interval metric")

    sink = MetricsSink(Broken(), 1)
    with pytest.raises(ValueError):
        sink.put(PendingInterval(0, 0, {"bogus": 1}))


@pytest.mark.parametrize("name", ["hash", "pkg", "dchoices", "dkg", "mixed"])
def test_executor_routing_equals_local_routing(name):
    """The Spark path (pickled snapshot, per-source state shipped back) routes exactly like the local runtime."""
    keys = [f"k{int(x)}" for x in np.random.default_rng(0).zipf(1.3, 6000) % 400]
    local = registry.create(name, 5, n_sources=2)
    driver = registry.create(name, 5, n_sources=2)
    from engine.keys import fingerprints

    fps = fingerprints(keys)
    expected = []
    got = []
    for chunk in range(3):
        sl = slice(chunk * 2000, (chunk + 1) * 2000)
        for src in (0, 1):
            part = fps[sl][src::2]
            expected.append(local.route(part, src))
        snap = RoutingSnapshot(chunk, driver).dumps()
        for src in (0, 1):
            ks = keys[sl][src::2]
            rb = pa.RecordBatch.from_arrays([pa.array(ks), pa.array([src] * len(ks), pa.int32())], names=["key", "source"])
            out = pa.Table.from_batches(list(make_router(snap)(iter([rb]))))
            data = out.filter(pc.is_valid(out.column("key")))
            got.append(data.column("worker").to_numpy().astype(np.int64))
            side = out.filter(pc.is_valid(out.column("state")))
            driver.set_source_state(src, pickle.loads(side.column("state")[0].as_py())["source_state"])
    for e, g in zip(expected, got):
        assert np.array_equal(e, g)


def test_worker_aggregates_and_dead_letters():
    g = registry.create("hash", 2)
    rb = pa.RecordBatch.from_arrays(
        [pa.array(["a", "a", None, "b"]), pa.array([0, 0, 0, 0], pa.int32()), pa.array([0, 1, 2, 3], pa.int64()),
         pa.array([None, None, "no_key", None]), pa.array([None, None, "00", None])],
        names=["key", "source", "seq", "error", "raw"])
    routed = pa.Table.from_batches(list(make_router(RoutingSnapshot(0, g).dumps())(iter([rb]))))
    parts = []
    for w in range(2):
        sub = routed.filter(pc.equal(routed.column("worker"), w))
        parts += list(make_worker()(iter(sub.to_batches())))
    u = unpack_aggregates(pa.Table.from_batches(parts))
    assert sorted(zip(u["keys"], u["counts"].tolist())) == [("a", 2), ("b", 1)]
    assert u["dead_letters"] == {"no_key": [1, ["00"]]}
    assert u["states"][0]["consumed"] == 4 and u["states"][0]["first_seq"] == 0
