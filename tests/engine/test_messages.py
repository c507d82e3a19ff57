"""The driver↔executor messages (engine/runtimes/spark/messages.py): every message round-trips through
its codec; unknown, newer, mistyped or foreign bytes are refused with one line; ``unpack_output`` reads
a hand-built output frame; the router sends messages as raw bytes in the routed rows' binary ``msg``
column, ``key`` NULL, to the worker itself (issue 37 item 3).  No Spark."""

from __future__ import annotations

import pickle
from dataclasses import fields

import msgpack
import numpy as np
import pyarrow as pa
import pytest

from skewlab.engine.runtimes.spark.messages import (MESSAGES, BatchOutput, ControlOrder, ExportNotice, ImportOrder, KeyCounts,
                                                    KeyStats, MessageError, SourceSide, TouchedKeys, WorkerSummary, decode,
                                                    wire_fields)
from skewlab.engine.runtimes.spark.operator import EXPORT, OUT_ARROW, SIDE, STAT, SUMMARY, unpack_output
from skewlab.engine.runtimes.spark.state_transfer import ExportRef

REF = ExportRef(batch=4, source=1, target=3, path="file:///ck/migrations/batch=4/from-1-to-3.blob", bytes=1234, keys=7)
BIG = np.array([0, 1, 2**63, 2**64 - 1], np.uint64)


def samples() -> list:
    return [
        ControlOrder(5, {2: BIG, 0: np.zeros(0, np.uint64)}, np.array([9, 2**64 - 2], np.uint64), True),
        ControlOrder(0),
        ImportOrder(REF),
        SourceSide(3, 5, rows=100, consumed=130, first_seq=30, route_seconds=0.25,
                   dead_letters={"no_key": (2, ("a", "")), "bad value": (1, ("x",))},
                   source_state=SourceSide.pack_router_state({"loads": np.arange(4)})),
        SourceSide(0, 1),
        ExportNotice(REF),
        WorkerSummary(7, keys=10, state_bytes=2048, held=3, export_bytes=1234, exported_keys=7, imported_keys=1,
                      results=9, shares=0, applied=44, seconds=0.5),
        WorkerSummary(None),
        TouchedKeys(5, BIG),
        TouchedKeys(0),
        KeyCounts(BIG, np.array([5, 4, 1, 1], np.uint64), ["hot", "b"]),
        KeyCounts(),
    ]


def same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if hasattr(a, "TAG"):
        return type(a) is type(b) and all(same(getattr(a, f), getattr(b, f)) for f in wire_fields(type(a)))
    return a == b


@pytest.mark.parametrize("msg", samples(), ids=lambda m: type(m).__name__)
def test_every_message_round_trips(msg):
    assert same(decode(msg.encode()), msg)
    assert same(decode(msg.encode(), type(msg)), msg)


def test_every_message_type_is_covered_and_declares_its_fields():
    assert {type(m) for m in samples()} == set(MESSAGES.values())
    for cls in MESSAGES.values():
        assert list(wire_fields(cls)) == [f.name for f in fields(cls)], cls.__name__  # every field has a wire type


def test_the_source_state_is_the_routers_own_and_round_trips():
    side = decode(samples()[3].encode())
    assert np.array_equal(side.router_state()["loads"], np.arange(4)) and SourceSide(0, 1).router_state() == {}


def test_fingerprints_travel_as_raw_little_endian_bytes_not_pickles():
    data = ControlOrder(1, {}, BIG).encode()
    assert BIG.astype("<u8").tobytes() in data and b"numpy" not in data


def test_unknown_type_newer_version_and_foreign_bytes_are_refused():
    body = msgpack.unpackb(WorkerSummary(1).encode(), raw=False)[2]
    with pytest.raises(MessageError, match=r"unknown message type 'gossip' \(this skewlab reads control, export"):
        decode(msgpack.packb(["gossip", 1, {}]))
    with pytest.raises(MessageError, match=r"summary message version 3: this skewlab reads version 2"):
        decode(msgpack.packb(["summary", 3, body]))
    with pytest.raises(MessageError, match=r"not a skewlab message"):
        decode(pickle.dumps({"type": "control", "batch": 1}))  # what the previous code sent
    with pytest.raises(MessageError, match=r"fields \['batch', 'keys'\], expected \['applied'"):
        decode(msgpack.packb(["summary", 1, {"batch": 1, "keys": 2}]))
    with pytest.raises(MessageError, match=r"field 'keys' is not int"):
        decode(msgpack.packb(["summary", 1, {**body, "keys": "many"}]))
    with pytest.raises(MessageError, match=r"field 'expect' is not u64\[\]"):
        decode(msgpack.packb(["control", 1, {"batch": 1, "exports": {}, "expect": b"123", "split": False}]))
    with pytest.raises(MessageError, match=r"a summary message where control, import was expected"):
        decode(WorkerSummary(1).encode(), (ControlOrder, ImportOrder))
    with pytest.raises(MessageError) as exc:
        decode(b"\xc1junk")
    assert "\n" not in str(exc.value)


def output_frame() -> pa.Table:
    """What two workers return for one batch, built by hand: their stat rows (one key named), an
    export notice, two side rows and the summaries."""
    side0 = SourceSide(0, 6, rows=3, consumed=3, first_seq=0, dead_letters={"no_key": (2, ("r1", "r2"))}).encode()
    side1 = SourceSide(1, 6, rows=4, consumed=9, first_seq=5, dead_letters={"no_key": (5, ("a", "b", "c", "d", "e"))}).encode()
    rows = [
        (STAT, 0, None, KeyCounts(np.array([2**64 - 1, 11], np.uint64), np.array([5, 1], np.uint64), ["hot"]).encode(), None),
        (STAT, 1, None, KeyCounts(np.array([12], np.uint64), np.array([2], np.uint64)).encode(), None),
        (EXPORT, 0, None, ExportNotice(REF).encode(), None),
        (SIDE, 0, None, side0, None),
        (SIDE, 1, None, side1, None),
        (SUMMARY, 0, None, WorkerSummary(6, keys=2, held=1).encode(), None),
        (SUMMARY, 1, None, WorkerSummary(6, keys=1, shares=3).encode(), None),
    ]
    return pa.Table.from_pylist([dict(zip(OUT_ARROW.names, r)) for r in rows], schema=OUT_ARROW)


def test_unpack_output_of_a_hand_built_frame():
    u = unpack_output(output_frame())
    assert u.workers.tolist() == [0, 0, 1] and u.counts.tolist() == [5, 1, 2]
    assert u.fps.dtype == np.uint64 and u.fps.tolist() == [2**64 - 1, 11, 12]
    assert u.names == {2**64 - 1: "hot"}
    assert isinstance(u, BatchOutput) and u.exports == (REF,)
    assert sorted(u.states) == [0, 1] and u.states[1].consumed == 9 and u.states[0].route_batch == 6
    assert u.dead_letters == {"no_key": [7, ["r1", "r2", "a", "b", "c"]]}  # at most 5 samples
    assert u.summaries[0].keys == 2 and u.summaries[0].held == 1 and u.summaries[1].shares == 3
    stats = KeyStats.of([(1, KeyCounts(np.array([12], np.uint64), np.array([2], np.uint64))), (0, KeyCounts())])
    assert stats.workers.tolist() == [1] and stats.tuples.tolist() == [2] and stats.names == {}


def test_key_counts_with_more_names_than_keys_are_refused():
    with pytest.raises(MessageError, match="1 fingerprints, 1 counts, 2 names"):
        KeyCounts(np.array([1], np.uint64), np.array([1], np.uint64), ["a", "b"])
    body = msgpack.unpackb(KeyCounts(np.array([1], np.uint64), np.array([1], np.uint64)).encode(), raw=False)[2]
    body["tuples"] = b""
    with pytest.raises(MessageError, match="1 fingerprints, 0 counts"):
        decode(msgpack.packb(["key-counts", 1, body], use_bin_type=True))


def test_unpack_output_refuses_a_row_whose_message_is_not_its_kind():
    table = output_frame()
    data = table.column("data").to_pylist()
    data[2] = WorkerSummary(6).encode()  # an EXPORT row carrying a summary
    with pytest.raises(MessageError, match="a summary message where export was expected"):
        unpack_output(table.set_column(3, "data", pa.array(data, pa.binary())))


def test_the_router_sends_typed_control_orders_also_from_a_route_file_of_the_previous_code():
    """A route file published before the typed messages holds dict control entries: a replay of its
    batch after an upgrade sends the same orders, typed; a control order of another batch is refused."""
    from skewlab.engine.algorithms import registry
    from skewlab.engine.runtimes.spark.topology import RoutingSnapshot, make_router

    router = registry.create("hash", 2).router
    rb = pa.RecordBatch.from_arrays([pa.array(["a"]), pa.array([0], pa.int32())], names=["key", "source"])

    def orders(control) -> dict[int, ControlOrder]:
        out = pa.Table.from_batches(list(make_router(RoutingSnapshot(3, router, 2, control).dumps(), lead=True)(iter([rb]))))
        msgs = [(w, decode(m)) for m, w in zip(out.column("msg").to_pylist(), out.column("worker").to_pylist())
                if m is not None]
        return {w: m for w, m in msgs if isinstance(m, ControlOrder)}

    typed = orders({0: ControlOrder(3, {1: BIG}), 1: ControlOrder(3, expect=BIG, split=True)})
    legacy = orders({0: {"exports": {1: BIG}, "expect": np.zeros(0, np.uint64)}, 1: {"exports": {}, "expect": BIG, "split": True}})
    assert same(typed, legacy) and same(typed[1], ControlOrder(3, {}, BIG, True))
    with pytest.raises(RuntimeError, match="routing snapshot of batch 3 holds a control order of batch 2"):
        orders({0: ControlOrder(2)})


def test_a_message_of_an_older_version_gets_the_defaults_of_the_fields_added_since():
    body = msgpack.unpackb(ControlOrder(4, {}, BIG, True).encode(), raw=False)[2]
    del body["merge_all"], body["workers"]  # version 1 had neither
    order = decode(msgpack.packb(["control", 1, body]))
    assert (order.batch, order.split, order.merge_all, order.workers) == (4, True, True, 0)
    with pytest.raises(MessageError, match="has fields"):  # the current version must carry every field
        decode(msgpack.packb(["control", 2, body]))


def _route(snap, batches, combiner=None) -> pa.Table:
    from skewlab.engine.runtimes.spark.topology import make_router

    return pa.Table.from_batches(list(make_router(snap.dumps(), lead=True, combiner=combiner)(iter(batches))))


def _source_batches() -> list[pa.RecordBatch]:
    """Two record batches of one input partition: sources 0 and 5, a dead letter, values."""
    keys = ["a", "b", "c", "a", None, "d", "e", "a"]
    return [pa.RecordBatch.from_arrays(
        [pa.array(keys), pa.array([0, 0, 5, 5, 0, 0, 5, 0], pa.int32()), pa.array(range(start, start + 8), pa.int64()),
         pa.array([None, None, None, None, "no_key", None, None, None]), pa.array([float(i) for i in range(8)])],
        names=["key", "source", "seq", "error", "value"]) for start in (0, 8)]


def test_the_routed_schemas_carry_messages_in_a_binary_msg_column():
    """Issue 37 item 3: every routed schema — plain, with values, combined — is ``key string, worker
    int, msg binary, ...``; the messages have no text form any more."""
    from skewlab.engine.operators import BUILTINS
    from skewlab.engine.runtimes.spark import messages, topology

    for ddl in (topology.ROUTED_SCHEMA, topology.ROUTED_VALUES_SCHEMA, topology.ROUTED_FIELD_SCHEMA,
                topology.combined_schema(BUILTINS["mean"]())):
        assert ddl.startswith("key string, worker int, msg binary"), ddl
    assert topology.combined_schema(BUILTINS["mean"]()).startswith(topology.ROUTED_SCHEMA + ", tuples long, ")
    assert not hasattr(ControlOrder, "encode_text") and not hasattr(messages, "decode_text")


@pytest.mark.parametrize("values, combine", [("none", False), ("seq", False), ("field", False), ("field", True)])
def test_message_rows_have_key_null_their_bytes_in_msg_and_the_workers_own_number(values, combine):
    """The router's rows: a data row has its key, a worker in [0, n) and ``msg`` NULL; a message row has
    ``key`` NULL, the raw bytes of one message in ``msg`` (no text encoding) and ``worker`` its worker
    ``w`` < P itself (not ``P + w``): side rows of source s to ``s mod n``, the lead's control and
    import rows, the touch rows of a split-key run.  The columns are those of the routed schema."""
    from skewlab.engine.algorithms import registry
    from skewlab.engine.operators import BUILTINS
    from skewlab.engine.runtimes.spark.topology import RoutingSnapshot

    n, P = 3, 6
    control = {w: ControlOrder(2, split=True) for w in range(n)}
    snap = RoutingSnapshot(2, registry.create("pkg", n).router, P, control, {1: [REF]}, values=values)
    op = BUILTINS["mean"]() if combine else None
    out = _route(snap, _source_batches(), op)
    want = ["key", "worker", "msg"] + (["tuples", "sum"] if combine else [] if values == "none" else ["value"])
    assert out.column_names[:len(want)] == want and out.schema.field("msg").type == pa.binary()
    keys, workers, raw = (out.column(c).to_pylist() for c in ("key", "worker", "msg"))
    data = [i for i, m in enumerate(raw) if m is None]
    assert data and all(keys[i] is not None and 0 <= workers[i] < n for i in data)
    assert (sum(out.column("tuples").to_pylist()[i] for i in data) if combine else len(data)) == 14  # 16 - 2 dead
    got: dict[type, list[tuple[int, object]]] = {}
    for k, w, m in zip(keys, workers, raw):
        if m is not None:
            assert k is None and 0 <= w < P and isinstance(m, bytes)
            msg = decode(m, (ControlOrder, ImportOrder, TouchedKeys, SourceSide))
            got.setdefault(type(msg), []).append((w, msg))
    assert sorted((w, s.source) for w, s in got[SourceSide]) == [(0, 0), (2, 5)]
    assert sum(s.rows for _, s in got[SourceSide]) == 16
    assert sorted(w for w, _ in got[ControlOrder]) == [0, 1, 2] and [(w, o.ref) for w, o in got[ImportOrder]] == [(1, REF)]
    assert {w for w, _ in got[TouchedKeys]} <= {0, 1, 2} and got[TouchedKeys]
