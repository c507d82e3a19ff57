"""The combiner in the source scan, without Spark: each built-in that combines gives from its combined
rows (:meth:`KeyedOperator.pre_aggregate` per source partition, then
:meth:`KeyedOperator.partials_combined`) the partial states of its tuples; the router's combined rows
through the worker's handler give the same statistics (per-key tuple counts) and the same sink rows as
a row per tuple; the combiner is a query setting (a file the sources read once per process), not a
field of every batch's routing snapshot, and a snapshot of an older checkpoint that carries it still
combines; the loader refuses an operator that declares combined rows without their methods, or a
combined column named as one of the engine's routed columns."""

from __future__ import annotations

import sys
import types

import numpy as np
import pyarrow as pa
import pytest

from skewlab.engine.algorithms import registry
from skewlab.engine.operators import BUILTINS, KeyedOperator, OperatorError, load_operator
from skewlab.engine.runtimes.spark.messages import ControlOrder, TouchedKeys, decode
from skewlab.engine.runtimes.spark.topology import RoutingSnapshot, combiner_bytes, make_router

COMBINING = sorted(n for n, c in BUILTINS.items() if c.combined is not None)


def test_the_builtins_that_combine():
    assert COMBINING == ["count", "max", "mean", "min", "sum"]
    assert BUILTINS["distinct"].combined is None and BUILTINS["join"].combined is None
    assert combiner_bytes(BUILTINS["join"]()) is None


@pytest.mark.parametrize("name", COMBINING)
def test_partials_of_combined_rows_equal_the_partials_of_the_tuples(name):
    """Three source partitions pre-aggregate their tuples per key; the worker's partials of the rows
    equal those of the tuples (integer values: float sums are exact in any order)."""
    op = BUILTINS[name]()
    rng = np.random.default_rng(3)
    keys = 9
    codes = rng.integers(0, keys, 4000)
    codes[:keys] = np.arange(keys)
    values = rng.integers(-500, 500, codes.size).astype(np.float64)
    part = rng.integers(0, 3, codes.size)
    row_codes, row_tuples, row_cols = [], [], []
    for p in range(3):
        sel = part == p
        present, local = np.unique(codes[sel], return_inverse=True)
        cols = op.pre_aggregate(local, present.size, values[sel] if op.needs_value else None)
        assert len(cols) == len(op.combined)
        row_codes.append(present)
        row_tuples.append(np.bincount(local, minlength=present.size))
        row_cols.append(cols)
    got = op.partials_combined(np.concatenate(row_codes), keys, np.concatenate(row_tuples).astype(np.int64),
                               [np.concatenate([c[j] for c in row_cols]) for j in range(len(op.combined))])
    assert got == op.partials(codes, keys, values if op.needs_value else None)


def _batches() -> list[pa.RecordBatch]:
    rng = np.random.default_rng(5)
    batches = []
    for start in (0, 700):  # two record batches of one partition
        keys = [f"k{int(i)}" for i in rng.zipf(1.5, 700) % 40]
        batches.append(pa.RecordBatch.from_arrays(
            [pa.array(keys), pa.array([0] * 700, pa.int32()), pa.array(range(start, start + 700), pa.int64()),
             pa.nulls(700, pa.string()), pa.array(rng.integers(0, 1000, 700).astype(np.float64))],
            names=["key", "source", "seq", "error", "value"]))
    return batches


def _snapshot(op, algorithm: str) -> RoutingSnapshot:
    control = {w: ControlOrder(0) for w in range(3)}
    return RoutingSnapshot(0, registry.create(algorithm, 3).router, 3, control, {},
                           values="field" if op.needs_value else "none")


def _routed(op, combine: bool, algorithm: str) -> pa.Table:
    snap = _snapshot(op, algorithm)
    return pa.Table.from_batches(list(make_router(snap.dumps(), lead=True, combiner=op if combine else None)(iter(_batches()))))


@pytest.mark.parametrize("algorithm", ["pkg", "shuffle"])
def test_touch_rows_of_combined_rows_equal_those_of_the_tuples(algorithm):
    """In a split-key run (control orders with ``split``) the router's touch rows, made from the
    combined rows when it combines, are the same rows as made from the tuples."""
    op = BUILTINS["mean"]()
    touch = {}
    for combine in (True, False):
        snap = _snapshot(op, algorithm)
        snap.control = {w: ControlOrder(0, split=True) for w in range(3)}
        routed = pa.Table.from_batches(list(make_router(snap.dumps(), lead=True, combiner=op if combine else None)(
            iter(_batches()))))
        msgs = [(m, w) for m, w in zip(routed.column("msg").to_pylist(), routed.column("worker").to_pylist())
                if m is not None]
        touch[combine] = sorted((m, w) for m, w in msgs if isinstance(decode(m), TouchedKeys))
    assert touch[True] == touch[False]
    keys = {w: decode(m).keys for m, w in touch[True]}
    assert len(keys) == 3 and all(k.size for k in keys.values())


def test_the_combiner_reaches_the_sources_once_per_query_not_in_each_snapshot(tmp_path):
    """The engine writes the combiner once (``route_combiner``); the sources route with it, unpickled
    once per process; the published snapshot holds no operator bytes.  A snapshot published before
    (a ``combiner`` attribute of operator bytes) still combines its batch when replayed."""
    from skewlab.engine.runtimes.spark import sources as S

    op = BUILTINS["mean"]()
    files = S.RouteFiles(tmp_path)
    name = files.publish_combiner(combiner_bytes(op))
    assert name == files.publish_combiner(combiner_bytes(op))  # named by its content
    files.publish(0, _snapshot(op, "hash").dumps())
    route = files.read(0)
    assert "combiner" not in vars(RoutingSnapshot.loads(route))
    reader = S._route_files({"route_dir": str(tmp_path), "route_combiner": name})
    assert reader.combiner_operator() is reader.combiner_operator()  # unpickled once per process

    def data(batches) -> pa.Table:  # the data rows (side rows carry timings)
        t = pa.Table.from_batches(list(batches))
        return t.filter(pa.compute.is_null(t.column("msg")))

    via_source = data(S._routed(route, iter(_batches()), True, reader))
    expected = data(_routed(op, True, "hash").to_batches())
    assert via_source.equals(expected) and sum(via_source.column("tuples").to_pylist()) == 1400
    plain = S._routed(route, iter(_batches()), True, S._route_files({"route_dir": str(tmp_path), "route_combiner": ""}))
    assert data(plain).num_rows == 1400  # no combiner: a row per tuple
    old = _snapshot(op, "hash")
    old.combiner = combiner_bytes(op)  # as published before the combiner became a query setting
    assert data(make_router(old.dumps(), lead=True)(iter(_batches()))).equals(expected)


@pytest.mark.parametrize("name, algorithm", [("count", "hash"), ("mean", "dchoices"), ("min", "pkg")])
def test_combined_rows_through_the_handler_give_the_tuples_statistics_and_results(tmp_path, name, algorithm):
    from skewlab.engine.runtimes.spark.operator import make_handler, unpack_output
    from skewlab.engine.runtimes.spark.result_sink import read_sink, sink_schema
    from tests.engine.test_spark_operator import FakeState, run_handler

    op = BUILTINS[name]()
    out = {}
    for combine in (True, False):
        routed = _routed(op, combine, algorithm)
        data = routed.filter(pa.compute.is_null(routed.column("msg")))
        if combine:  # one row per (key, worker), standing for all of its tuples
            pairs = list(zip(data.column("key").to_pylist(), data.column("worker").to_pylist()))
            assert len(pairs) == len(set(pairs)) and sum(data.column("tuples").to_pylist()) == 1400
        else:
            assert data.num_rows == 1400 and "tuples" not in routed.column_names
        sink = tmp_path / f"sink-{combine}"
        handler = make_handler(3, 2, str(sink), op)
        u = unpack_output(pa.concat_tables(run_handler(handler, routed, 3, {w: FakeState() for w in range(3)})))
        stats = sorted(zip(u.workers.tolist(), u.fps.tolist(), u.counts.tolist()))
        res = read_sink(str(sink), sink_schema(op)).sort_by([("key", "ascending"), ("result", "ascending")])
        out[combine] = (stats, res.to_pydict(), sum(s.applied for s in u.summaries.values()))
    assert out[True] == out[False]
    assert sum(c for _, _, c in out[True][0]) == 1400 and out[True][2] == 1400


def test_loader_refuses_combined_rows_without_their_methods(monkeypatch):
    mod = types.ModuleType("combiner_test_ops")

    class Half(KeyedOperator):
        name = "half"
        needs_value = False
        combined = ()

        def partials(self, codes, n_keys, values):
            return np.bincount(codes, minlength=n_keys).tolist()

        def concat(self, first, then):
            return first + then

        def emit(self, window, new):
            return (new,)

    Half.__module__ = mod.__name__
    mod.Half = Half
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    with pytest.raises(OperatorError, match="declares combined rows but does not implement pre_aggregate, "
                                            "partials_combined"):
        load_operator("combiner_test_ops:Half")


@pytest.mark.parametrize("column", ["msg", "key", "worker", "tuples", "label", "MSG"])
def test_loader_refuses_a_combined_column_named_as_a_routed_column(monkeypatch, column):
    """Issue 37 item 3: a combined row is ``key, worker, msg, tuples`` and the operator's columns, and
    the engine groups it by ``label``: a combined column of one of these names (in any case: Spark
    resolves names case-insensitively) is refused at start-up in one line, not at the first batch."""
    mod = types.ModuleType("combiner_name_ops")

    class Clash(KeyedOperator):
        name = "clash"
        combined = ((column, pa.float64()),)

        def partials(self, codes, n_keys, values):
            return np.bincount(codes, weights=values, minlength=n_keys).tolist()

        def concat(self, first, then):
            return first + then

        def emit(self, window, new):
            return (sum(window) + new,)

        def pre_aggregate(self, codes, n_groups, values):
            return [np.bincount(codes, weights=values, minlength=n_groups)]

        def partials_combined(self, codes, n_keys, tuples, columns):
            return np.bincount(codes, weights=columns[0], minlength=n_keys).tolist()

    Clash.__module__, Clash.__qualname__ = mod.__name__, "Clash"  # picklable by reference
    mod.Clash = Clash
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    with pytest.raises(OperatorError, match=rf"Clash declares a combined column named '{column}', a name of the "
                                            r"engine's routed rows \(key, worker, msg, tuples, label\): rename") as err:
        load_operator("combiner_name_ops:Clash")
    assert "\n" not in str(err.value)
    Clash.combined = (("total", pa.float64()),)  # any other name loads
    assert load_operator("combiner_name_ops:Clash").combined == (("total", pa.float64()),)
