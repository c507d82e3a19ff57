"""The Spark engine's stateful operator without Spark (skewlab.engine.runtimes.spark.operator): the handler of each
worker on routed rows with a fake state store — results in the sink, statistics, export blobs that
another worker imports, replays that rewrite the same sink file, and the labels that pin each worker to
one state partition."""

from __future__ import annotations

import pickle
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

from skewlab.engine.algorithms import registry
from skewlab.engine.algorithms.keys import fingerprint, fingerprints
from skewlab.engine.runtimes.spark.labels import spark_partition_of, worker_labels
from skewlab.engine.runtimes.spark.operator import OUT_ARROW, make_handler, unpack_output
from skewlab.engine.runtimes.spark.result_sink import read_sink, sink_file
from skewlab.engine.runtimes.spark.messages import ControlOrder
from skewlab.engine.runtimes.spark.state_transfer import export_path, read_export
from skewlab.engine.runtimes.spark.topology import RoutingSnapshot, make_router




class FakeState:
    """The part of pyspark's GroupState the handler uses: one tuple value, exists/get/update/remove."""

    def __init__(self, value=None):
        self.value = value

    @property
    def exists(self):
        return self.value is not None

    @property
    def get(self):
        return self.value

    def update(self, value):
        self.value = tuple(value)

    def remove(self):
        self.value = None


def run_handler(handler, routed: pa.Table, partitions: int, states: dict[int, FakeState]) -> list[pa.Table]:
    """Group routed rows by worker (data and message rows alike: ``worker`` is the worker's number) as
    the label exchange does and call the handler."""
    wcol = routed.column("worker").to_numpy()
    out = []
    for w in sorted(set(wcol.tolist())):
        pdf = routed.filter(pa.array(wcol == w)).to_pandas()
        frames = list(handler((w,), iter([pdf]), states.setdefault(w, FakeState())))
        out.extend(pa.Table.from_pandas(f, schema=OUT_ARROW, preserve_index=False) for f in frames)
    return out


def rows(keys, source=0, start=0):
    n = len(keys)
    return pa.RecordBatch.from_arrays(
        [pa.array(keys), pa.array([source] * n, pa.int32()), pa.array(range(start, start + n), pa.int64()),
         pa.nulls(n, pa.string())], names=["key", "source", "seq", "error"])


def route(grouping, batch, P, control, imports=None, keys=()):
    """The routed rows of ``keys`` in ``batch``, with the workers' ``control`` orders (made ``batch``'s)."""
    control = {w: replace(c, batch=batch) for w, c in control.items()}
    snap = RoutingSnapshot(batch, grouping.router, P, control, imports or {})
    return pa.Table.from_batches(list(make_router(snap.dumps(), lead=True)(iter([rows(list(keys))]))))


def test_labels_hash_onto_their_partition():
    for P in (1, 2, 8, 32):
        labels = worker_labels(P)
        assert [spark_partition_of(v, P) for v in labels] == list(range(P))
    assert worker_labels(8) == (12, 6, 5, 1, 25, 15, 2, 0)  # the design note's prototype found the same


def test_handler_results_in_sink_and_migration_between_workers(tmp_path):
    """Batch 0 counts; batch 1 moves key 'a' from its owner to the other worker (export + hold: the
    owner writes the blob to the migrations directory and returns only a reference); batch 2 imports
    it from the file: the held tuples are emitted with the exact window count, once."""
    P, W = 2, 3
    sink = str(tmp_path / "sink")
    moves = str(tmp_path / "migrations")
    handler = make_handler(P, W, sink, migrations=moves)
    states: dict[int, FakeState] = {}
    g = registry.create("hash", 2)
    idle = {0: ControlOrder(0), 1: ControlOrder(0)}
    out0 = unpack_output(pa.concat_tables(run_handler(handler, route(g, 0, P, idle, keys=["a"] * 3 + ["b"]), P, states)))
    owner = int(out0.workers[out0.fps.tolist().index(fingerprint("a"))])
    assert out0.names == {fingerprint("a"): "a", fingerprint("b"): "b"}
    other = 1 - owner
    # the table would send 'a' to `other` from batch 1 on: emulate with a grouping whose table says so
    table = pa.table({"key": pa.array(["a", "a"]), "worker": pa.array([other, other], pa.int32()),
                      "msg": pa.nulls(2, pa.binary())})
    a = fingerprints(["a"])
    control = {owner: ControlOrder(1, {other: a}), other: ControlOrder(1, expect=a)}
    snap1 = route(g, 1, P, control)
    routed1 = pa.concat_tables([table, snap1.cast(table.schema)])
    collected = pa.concat_tables(run_handler(handler, routed1, P, states))
    out1 = unpack_output(collected)
    assert len(out1.exports) == 1
    ref = out1.exports[0]
    assert (ref.batch, ref.source, ref.target, ref.keys) == (1, owner, other, 1)
    assert ref.path == export_path(moves, 1, owner, other)
    blob = (tmp_path / "migrations" / "batch=1" / f"from-{owner}-to-{other}.blob").read_bytes()
    assert pickle.loads(blob)["keys"] == ["a"] and ref.bytes == len(blob)
    # the driver's collected output and the next routing snapshot carry the reference, not the state
    assert not any(blob in (d or b"") for d in collected.column("data").to_pylist())
    snap2 = RoutingSnapshot(2, g.router, P, idle, {other: [ref]}).dumps()
    assert blob not in snap2 and len(snap2) < len(RoutingSnapshot(2, g.router, P, idle, {}).dumps()) + 400
    assert out1.summaries[other].held == 2
    out2 = unpack_output(pa.concat_tables(run_handler(handler, route(g, 2, P, idle, {other: [ref]}), P, states)))
    assert out2.summaries[other].imported_keys == 1
    # a replay of the import batch reads the same file again: the import is repeatable
    assert read_export(ref)["keys"] == ["a"]
    res = read_sink(sink).to_pydict()
    got = sorted(zip(res["batch"], res["key"], res["result"]))
    assert got == [(0, "a", 3), (0, "b", 1), (1, "a", 5)]  # once, by the new owner: 3 + 2 (no retraction row)


def test_service_time_is_slept_for_the_tuples_a_worker_applies(tmp_path, monkeypatch):
    """``service_us`` (Nasir et al.'s fixed delay per message): each call sleeps for the tuples it
    applies — held tuples when their state arrives, not when they are held — and reports them."""
    import skewlab.engine.runtimes.spark.operator as operator

    import threading

    slept: list[tuple[int, float]] = []
    calls = iter(range(10**6))
    real_sleep, here = operator.time.sleep, threading.get_ident()

    def sleep(seconds: float) -> None:  # time.sleep is the process's: other threads' sleeps are theirs
        if threading.get_ident() != here:
            return real_sleep(seconds)
        slept.append((next(calls), round(seconds, 9)))

    monkeypatch.setattr(operator.time, "sleep", sleep)
    P, W = 2, 3
    handler = make_handler(P, W, str(tmp_path), service_us=250.0, migrations=str(tmp_path / "migrations"))
    states: dict[int, FakeState] = {}
    g = registry.create("hash", 2)
    idle = {0: ControlOrder(0), 1: ControlOrder(0)}
    out0 = unpack_output(pa.concat_tables(run_handler(handler, route(g, 0, P, idle, keys=["a"] * 3 + ["b"]), P, states)))
    assert sum(s.applied for s in out0.summaries.values()) == 4
    assert sum(s for _, s in slept) == pytest.approx(4 * 250e-6)
    owner = int(out0.workers[out0.fps.tolist().index(fingerprint("a"))])
    other = 1 - owner
    table = pa.table({"key": pa.array(["a", "a"]), "worker": pa.array([other, other], pa.int32()),
                      "msg": pa.nulls(2, pa.binary())})
    a = fingerprints(["a"])
    control = {owner: ControlOrder(1, {other: a}), other: ControlOrder(1, expect=a)}
    slept.clear()
    routed1 = pa.concat_tables([table, route(g, 1, P, control).cast(table.schema)])
    out1 = unpack_output(pa.concat_tables(run_handler(handler, routed1, P, states)))
    assert out1.summaries[other].applied == 0 and out1.summaries[other].held == 2
    assert slept == []  # held tuples are not worked on yet
    ref = out1.exports[0]
    out2 = unpack_output(pa.concat_tables(run_handler(handler, route(g, 2, P, idle, {other: [ref]}), P, states)))
    assert out2.summaries[other].applied == 2
    assert [s for _, s in slept] == [pytest.approx(2 * 250e-6)]
    quiet = make_handler(P, W, str(tmp_path / "quiet"))
    slept.clear()
    run_handler(quiet, route(g, 0, P, idle, keys=["a"] * 3), P, {})
    assert slept == []  # 0 = no emulated work


def test_replayed_batch_rewrites_the_same_sink_file(tmp_path):
    P = 2
    handler = make_handler(P, 2, str(tmp_path))
    g = registry.create("hash", 2)
    idle = {0: ControlOrder(0), 1: ControlOrder(0)}
    routed = route(g, 0, P, idle, keys=["x", "y", "x"])
    run_handler(handler, routed, P, {})
    files = sorted(p.name for p in tmp_path.rglob("*.parquet"))
    run_handler(handler, routed, P, {})  # fresh states = Spark reloading the version before the batch
    assert sorted(p.name for p in tmp_path.rglob("*.parquet")) == files
    assert read_sink(str(tmp_path)).num_rows == 2
    assert sink_file(str(tmp_path), 0, 1).endswith("batch=0/worker-1.parquet")


def test_tuples_without_a_control_row_are_refused(tmp_path):
    handler = make_handler(2, 2, str(tmp_path))
    routed = pa.table({"key": pa.array(["k"]), "worker": pa.array([0], pa.int32()), "msg": pa.nulls(1, pa.binary())})
    with pytest.raises(RuntimeError, match="without a control row"):
        run_handler(handler, routed, 2, {})


def test_summary_reports_state_bytes_and_an_empty_worker_keeps_no_state(tmp_path):
    P = 2
    handler = make_handler(P, 1, str(tmp_path))
    g = registry.create("hash", 2)
    idle = {0: ControlOrder(0), 1: ControlOrder(0)}
    states: dict[int, FakeState] = {}
    out = unpack_output(pa.concat_tables(run_handler(handler, route(g, 0, P, idle, keys=["k"] * 5), P, states)))
    w = int(out.workers[0])
    assert out.summaries[w].state_bytes == len(states[w].value[0]) > 0
    run_handler(handler, route(g, 1, P, idle), P, states)  # window of 1 batch: 'k' expires
    assert not states[w].exists


def test_flush_runs_one_batch_without_new_tuples_while_state_is_in_flight(tmp_path):
    """No new tuples: no batch — unless the engine flagged the next version ``flush`` (state to export
    or import); then only the route changes, once, and the lead partition alone runs it."""
    from skewlab.engine.runtimes.spark.sources import ROUTE_FIELD, RouteFiles, _flushing, _with_route

    routes = RouteFiles(tmp_path)
    start = {"0": 10, "1": 10, ROUTE_FIELD: 3}
    routes.publish(4, b"snap")
    assert _with_route(routes, {"0": 10, "1": 10}, start) == start  # idle: no batch
    routes.publish(4, b"snap", flush=True)
    end = _with_route(routes, {"0": 10, "1": 10}, start)
    assert end == {"0": 10, "1": 10, ROUTE_FIELD: 4} and _flushing(start, end)
    assert _with_route(routes, {"0": 10, "1": 10}, end) == end  # once
    routes.publish(5, b"snap")
    assert routes.flush_version() is None


def test_compose_orders_and_control_payloads():
    """Moves applied in sequence compose to one step: a key goes from every worker that held some of it
    to its last target; a holder that is the final target keeps its share; composing composed orders
    with later moves is the same as composing everything."""
    from skewlab.engine.control.controller import compose_orders
    from skewlab.engine.runtimes.spark.topology import control_payloads

    a = (np.array([1, 1, 2]), np.array([0, 2, 0]), np.array([3, 3, 1]))  # key 1 split on 0 and 2 -> 3; key 2: 0 -> 1
    b = (np.array([1, 5]), np.array([3, 4]), np.array([2, 0]))  # key 1 moves on 3 -> 2; key 5: 4 -> 0
    k, h, t = compose_orders([a, b])
    got = sorted(zip(k.tolist(), h.tolist(), t.tolist()))
    assert got == [(1, 0, 2), (1, 3, 2), (2, 0, 1), (5, 4, 0)]  # worker 2 keeps key 1; 3 held it in between
    again = compose_orders([compose_orders([a]), b])
    assert sorted(zip(*(x.tolist() for x in again))) == got
    assert all(x.size == 0 for x in compose_orders([]))
    fps = np.arange(100, 106, dtype=np.uint64)  # key id i has fingerprint 100 + i
    control = {w: {"exports": {t: ks.tolist() for t, ks in c.exports.items()}, "expect": c.expect.tolist()}
               for w, c in control_payloads((k, h, t), fps, {0, 1}, partitions=4, batch=9).items()}
    assert control[0] == {"exports": {1: [102], 2: [101]}, "expect": [105]}
    assert control[2] == {"exports": {}, "expect": [101]} and control[3] == {"exports": {2: [101]}, "expect": []}
    assert 4 not in control  # beyond the state partitions: never a worker


def _inbox_frame(worker, messages=(), keys=(), **columns):
    """One worker's group of rows as the label exchange hands it over: its data rows (``keys`` and
    any extra ``columns``, ``msg`` NULL) and one message row per message (``key`` NULL, the message's
    bytes in ``msg``, the same ``worker``)."""
    import pandas as pd

    data = {"key": list(keys), "worker": [worker] * len(keys), "msg": [None] * len(keys),
            **{c: list(v) for c, v in columns.items()}}
    msgs = {"key": [None] * len(messages), "worker": [worker] * len(messages), "msg": [m.encode() for m in messages],
            **{c: [0] * len(messages) for c in columns}}
    return pd.DataFrame({c: data[c] + msgs[c] for c in data}).astype({"worker": "int32"})


def test_decode_inbox_splits_the_message_rows_from_the_data_rows():
    from skewlab.engine.runtimes.spark.messages import SourceSide, TouchedKeys, decode
    from skewlab.engine.runtimes.spark.operator import decode_inbox

    P = 4
    side = SourceSide(0, 3, rows=2, consumed=2)
    touch = TouchedKeys(3, fingerprints(["x"]))
    inbox = decode_inbox(_inbox_frame(2, [side, ControlOrder(3, split=True), touch], keys=["a", "b"]), P)
    assert inbox.worker == 2 and inbox.batch == 3 and inbox.control.split
    assert inbox.rows["key"].tolist() == ["a", "b"] and inbox.imports == ()
    assert [t.keys.tolist() for t in inbox.touches] == [touch.keys.tolist()]
    assert [decode(s) for s in inbox.sides] == [side] and inbox.sides == (side.encode(),)  # as they came
    only_sides = decode_inbox(_inbox_frame(1, [side]), P)  # a worker without a control order
    assert only_sides.batch is None and only_sides.control is None and len(only_sides.rows) == 0


def test_decode_inbox_refuses_rows_of_two_workers_in_one_group():
    from skewlab.engine.runtimes.spark.operator import decode_inbox

    pdf = _inbox_frame(1, [ControlOrder(0)], keys=["a"])
    pdf.loc[0, "worker"] = 2
    with pytest.raises(RuntimeError, match=r"rows of several workers in one group \(\[1, 2\]\): worker labels are wrong"):
        decode_inbox(pdf, 4)


def test_decode_inbox_tells_message_rows_by_msg_not_by_worker():
    """Issue 37 item 3: a message row is ``msg`` not NULL, whatever its ``key``; its ``worker`` is the
    worker's own number, so rows numbered ``P + w`` (the old layout) are refused as outside the state
    partitions, and a data row whose key looks like an encoded message stays a data row."""
    import base64

    import pandas as pd

    from skewlab.engine.runtimes.spark.operator import decode_inbox

    order = ControlOrder(3)
    lookalike = base64.b64encode(order.encode()).decode("ascii")
    inbox = decode_inbox(_inbox_frame(1, [order], keys=[lookalike, "b"]), 4)
    assert inbox.batch == 3 and inbox.rows["key"].tolist() == [lookalike, "b"]
    assert inbox.rows["msg"].isna().all()
    with pytest.raises(RuntimeError, match=r"rows of worker 5, outside the 4 state partitions"):
        decode_inbox(pd.DataFrame({"key": [None], "worker": pd.array([5], "int32"), "msg": [order.encode()]}), 4)


def test_decode_inbox_refuses_tuples_without_a_control_row_and_touch_rows_of_another_batch():
    from skewlab.engine.runtimes.spark.messages import SourceSide, TouchedKeys
    from skewlab.engine.runtimes.spark.operator import decode_inbox

    with pytest.raises(RuntimeError, match="worker 1 received 2 tuples without a control row"):
        decode_inbox(_inbox_frame(1, [SourceSide(0, 0)], keys=["a", "b"]), 4)
    with pytest.raises(RuntimeError, match=r"worker 1 received touch rows of batch \[4\] in batch 5"):
        decode_inbox(_inbox_frame(1, [ControlOrder(5, split=True), TouchedKeys(4), TouchedKeys(5)], keys=["a"]), 4)


@pytest.mark.parametrize("name", ["count", "sum", "mean"])
def test_batch_keys_of_combined_rows_equal_those_of_the_tuples(name):
    """A combined row stands for its ``tuples``: the counts and partials are those of the tuples it
    combines (counts per tuple, not per row), and a window of counts only gets no partials."""
    import pandas as pd

    from skewlab.engine.operators.builtin import BUILTINS
    from skewlab.engine.runtimes.spark.operator import batch_keys
    from skewlab.engine.runtimes.spark.window_state import WorkerWindow

    op = BUILTINS[name]()
    ring_only = WorkerWindow(2, op).ring_only
    keys, values = ["a", "b", "a", "a", "c", "b"], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    plain = batch_keys(pd.DataFrame({"key": keys, "value": values}), op, ring_only)
    # two source tasks: a (1, 3) + a (4), b (2) + b (6), c (5)
    combined = pd.DataFrame({"key": ["a", "b", "a", "b", "c"], "tuples": [2, 1, 1, 1, 1],
                             "sum": [4.0, 2.0, 4.0, 6.0, 5.0]})
    comb = batch_keys(combined[["key", "tuples"] + [c for c, _ in op.combined or ()]], op, ring_only)
    for got in (plain, comb):
        assert got.names == ["a", "b", "c"] and got.counts.tolist() == [3, 2, 1]
        assert got.counts.dtype == np.int64 and got.fps.tolist() == fingerprints(["a", "b", "c"]).tolist()
    assert ring_only == (name == "count")
    if ring_only:
        assert plain.partials is None and comb.partials is None
    else:
        assert [op.finish(p) for p in comb.partials] == [op.finish(p) for p in plain.partials]


def test_window_step_without_a_control_order_does_nothing_and_exports_need_a_directory(tmp_path):
    from skewlab.engine.runtimes.spark.operator import batch_keys, decode_inbox, window_step
    from skewlab.engine.runtimes.spark.result_sink import ParquetSink, sink_schema
    from skewlab.engine.runtimes.spark.messages import SourceSide
    from skewlab.engine.runtimes.spark.window_state import WorkerWindow

    win = WorkerWindow(2)
    schema = sink_schema(win.operator)
    sink = ParquetSink(str(tmp_path / "sink"), schema)
    idle = decode_inbox(_inbox_frame(0, [SourceSide(0, 0)]), 2)
    nothing = window_step(win, idle, batch_keys(idle.rows, win.operator, True), results=sink, schema=schema,
                          migrations=None)
    assert (nothing.merge_rows, nothing.exports, nothing.applied, nothing.results, nothing.home_n) == ((), (), 0, 0, 0)
    assert nothing.off_home.size == 0 and win.last < 0 and not (tmp_path / "sink").exists()
    first = decode_inbox(_inbox_frame(0, [ControlOrder(0)], keys=["a", "a", "b"]), 2)
    done = window_step(win, first, batch_keys(first.rows, win.operator, True), results=sink, schema=schema,
                       migrations=None)
    assert (done.applied, done.results, done.exports, done.merge_rows) == (3, 2, (), ())
    move = decode_inbox(_inbox_frame(0, [ControlOrder(1, {1: fingerprints(["a"])})]), 2)
    with pytest.raises(RuntimeError, match="worker 0 exports state in batch 1 but the handler has no migrations directory"):
        window_step(win, move, batch_keys(move.rows, win.operator, True), results=sink, schema=schema, migrations=None)


def test_emit_frame_rows_come_in_their_order_and_the_state_goes_when_the_window_is_empty(tmp_path):
    """Merge-stage rows, exports, sides, the summary, then one stat row with the ``named`` most
    frequent keys' names; an empty window leaves no state behind."""
    from skewlab.engine.runtimes.spark.messages import KeyCounts, SourceSide, WorkerSummary, decode
    from skewlab.engine.runtimes.spark.operator import (EXPORT, FRESH_SHARE, SIDE, STAT, SUMMARY, BatchKeys, StepOutcome,
                                                       decode_inbox, emit_frame, store_window)
    from skewlab.engine.runtimes.spark.state_transfer import ExportRef
    from skewlab.engine.runtimes.spark.window_state import WorkerWindow

    inbox = decode_inbox(_inbox_frame(1, [ControlOrder(7), SourceSide(0, 7)], keys=["a"]), 2)
    keys = BatchKeys(["a", "b", "c"], np.array([1, 5, 3], np.int64), fingerprints(["a", "b", "c"]), None)
    ref = ExportRef(7, 1, 0, "m/x.blob", 40, 2)
    outcome = StepOutcome(((FRESH_SHARE, 7, "b", None, 4),), (ref,), applied=9, results=2)  # count: a typed share
    win = WorkerWindow(2)
    state = FakeState((b"old",))
    assert store_window(win, state) == 0 and not state.exists
    frame = emit_frame(inbox, keys, outcome, win, state_bytes=0, started=0.0, named=2)
    assert frame["kind"].tolist() == [FRESH_SHARE, EXPORT, SIDE, SUMMARY, STAT]
    assert frame["worker"].tolist() == [1] * 5 and frame["key"].tolist()[:2] == ["b", None]
    assert frame["batch"].tolist()[0] == 7 and frame["batch"].isna().tolist() == [False, True, True, True, True]
    assert frame["data"][0] is None and frame["share"].tolist() == [4, None, None, None, None]
    summary = decode(frame["data"][3], WorkerSummary)
    assert (summary.batch, summary.applied, summary.results, summary.shares) == (7, 9, 2, 1)
    assert (summary.export_bytes, summary.exported_keys) == (40, 2)
    stats = decode(frame["data"][4], KeyCounts)
    assert stats.tuples.tolist() == [5, 3, 1] and stats.names == ["b", "c"]
    typed = pa.schema([*OUT_ARROW, pa.field("share", pa.int64())])  # out_schema(count)
    assert pa.Table.from_pandas(frame, schema=typed, preserve_index=False).column("share").to_pylist() == [4] + [None] * 4
