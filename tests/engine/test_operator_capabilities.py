"""Capabilities an operator declares, open to a user's operator (issue 37, item 4): what makes
``count`` fast (:attr:`KeyedOperator.partial_is_tuple_count`, the ring path) and ``join`` special
(:attr:`KeyedOperator.values_are_positions`, the ``seq`` value kind) follows from the declaration, not
from the class; a declaration that is plainly wrong is refused in one line; a mergeable operator may
combine in the source scan with the default combiner of its ``partials``/``merge``
(:attr:`MergeableOperator.combine_partials`).  The operators here are the user's: defined in this
module, none a subclass of a built-in."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest

from examples.ewma_rate import ALPHA, EwmaRate
from skewlab.engine.operators import KeyedOperator, MergeableOperator, OperatorError, load_operator
from skewlab.engine.runtimes.spark.window_state import WorkerWindow, key_fingerprints

HERE = "tests.engine.test_operator_capabilities"


class Arrivals(MergeableOperator):
    """A user's windowed arrival counter with a second column: tuples per key in the window, and the
    same as a rate per batch of the window (mergeable, so ``finish`` of the window's count)."""

    name = "arrivals"
    needs_value = False
    result_type = pa.int64()
    columns = (("per_batch", pa.float64()),)
    partial_is_tuple_count = True
    window = 3

    def partials(self, codes, n_keys, values):
        return np.bincount(codes, minlength=n_keys).tolist()

    def combine(self, a, b):
        return a + b

    def finish(self, state):
        return (int(state), state / self.window)


class EarliestPosition(MergeableOperator):
    """A user's operator of tuple positions: each key's earliest position (offset) in the window."""

    name = "earliest_position"
    result_type = pa.int64()
    values_are_positions = True

    def partials(self, codes, n_keys, values):
        out = np.full(n_keys, np.iinfo(np.int64).max, np.int64)
        np.minimum.at(out, codes, np.asarray(values, np.int64))
        return out.tolist()

    def combine(self, a, b):
        return min(a, b)

    def finish(self, state):
        return (int(state),)


class EarliestPositionColumns(EarliestPosition):
    """The same operator declaring ``share_type``: a split key's shares merge as one int64 column."""

    name = "earliest_position_columns"
    share_type = pa.int64()

    def merge_shares(self, groups, n_groups, shares):
        out = np.full(n_groups, np.iinfo(np.int64).max, np.int64)
        np.minimum.at(out, groups, shares.to_numpy())
        return [out]


class LatestPositionColumns(EarliestPositionColumns):
    """Declares ``share_type`` wrongly: its column merge keeps the largest share where ``combine`` keeps
    the smallest."""

    name = "latest_position_columns"

    def merge_shares(self, groups, n_groups, shares):
        out = np.zeros(n_groups, np.int64)
        np.maximum.at(out, groups, shares.to_numpy())
        return [out]


class BatchesSeen(MergeableOperator):
    """Declares the ring path wrongly: its partial state is 1 per batch with tuples (it counts the
    window's batches in which the key occurred), not the batch's tuple count."""

    name = "batches_seen"
    needs_value = False
    result_type = pa.int64()
    partial_is_tuple_count = True

    def partials(self, codes, n_keys, values):
        return [1] * n_keys

    def combine(self, a, b):
        return a + b

    def finish(self, state):
        return (int(state),)


class ValueSumTally(MergeableOperator):
    """Declares the ring path wrongly: it reads a value per tuple, which the ring of counts never sees."""

    name = "value_sum_tally"
    partial_is_tuple_count = True

    def partials(self, codes, n_keys, values):
        return np.bincount(codes, weights=values, minlength=n_keys).tolist()

    def combine(self, a, b):
        return a + b

    def finish(self, state):
        return (float(state),)


class KeylessPositions(KeyedOperator):
    """Declares positions as values but reads no value."""

    name = "keyless_positions"
    needs_value = False
    values_are_positions = True

    def partials(self, codes, n_keys, values):
        return [0] * n_keys

    def concat(self, first, then):
        return first

    def emit(self, window, new):
        return (0.0,)


class SketchySpread(MergeableOperator):
    """A mergeable operator whose partial state is an arbitrary object (a tuple with a set), that
    combines in the source scan with the default combiner."""

    name = "sketchy_spread"
    combine_partials = True
    columns = (("n", pa.int64()),)

    def partials(self, codes, n_keys, values):
        out = [(set(), 0) for _ in range(n_keys)]
        for c, v in zip(codes.tolist(), np.asarray(values).tolist()):
            s, n = out[c]
            s.add(int(v) % 7)
            out[c] = (s, n + 1)
        return out

    def combine(self, a, b):
        return (a[0] | b[0], a[1] + b[1])

    def finish(self, state):
        return (float(len(state[0])), int(state[1]))


# ----------------------------------------------------------------------------- the ring path
def _run_windows(make, W=3, n=2, batches=14, seed=4):
    """A stream of Zipf keys over ``n`` workers, each key moving between workers by the hold protocol
    (export at batch b, tuples held at the new owner, imported at b + 1), the windows checkpointed
    (dumps/loads) after every batch.  Returns the workers' windows, the results by (batch, key), and the
    tuples' keys per batch."""
    rng = np.random.default_rng(seed)
    workers = [WorkerWindow(W, make()) for _ in range(n)]
    owner: dict[str, int] = {}
    imports: dict[int, list] = defaultdict(list)
    results: dict[tuple[int, str], tuple] = {}
    history: list[list[str]] = []
    moves = 0
    for b in range(batches + 2):
        keys = [f"k{int(x)}" for x in rng.zipf(1.4, int(rng.integers(40, 200))) % 25] if b < batches else []
        history.append(keys)
        exports: dict[int, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
        expect: dict[int, list[str]] = defaultdict(list)
        if 0 < b < batches:
            for k in rng.choice(sorted(owner), min(3, len(owner)), replace=False).tolist():
                h = owner[k]
                t = (h + 1) % n
                exports[h][t].append(k)
                expect[t].append(k)
                owner[k] = t
                moves += 1
        per: dict[int, list[str]] = defaultdict(list)
        for k in keys:
            per[owner.setdefault(k, int(rng.integers(n)))].append(k)
        now = dict(imports)
        imports = defaultdict(list)
        for w in range(n):
            win = workers[w]
            ks = list(dict.fromkeys(per[w]))
            code = {k: i for i, k in enumerate(ks)}
            codes = np.array([code[k] for k in per[w]], np.int64)
            counts = np.bincount(codes, minlength=len(ks)).astype(np.int64)
            partials = None if win.ring_only else win.operator.partials(codes, len(ks), None)
            out = win.step(b, ks, counts, partials=partials, imports=now.get(w, []),
                           exports={t: key_fingerprints(v) for t, v in exports[w].items()},
                           expect=key_fingerprints(expect[w]))
            for t, blob in out["exports"].items():
                imports[t].append(blob)
            for batch, key, *row in out["results"]:
                assert (batch, key) not in results
                results[(batch, key)] = tuple(row)
            workers[w] = WorkerWindow.loads(win.dumps(), win.operator)
    assert moves > 20
    return workers, results, history


def _window_counts(history, W, b, k):
    """Ground truth from the tuples: the key's tuple counts of batches (b - W, b], oldest first."""
    return [history[j].count(k) for j in range(max(0, b - W + 1), b + 1)]


@pytest.mark.parametrize("make", [Arrivals, EwmaRate], ids=["mergeable", "not-mergeable"])
def test_a_user_operator_whose_partial_is_the_tuple_count_takes_the_ring_path(make):
    """A user's operator declaring ``partial_is_tuple_count`` — mergeable (``finish`` of the summed
    ring) or not (examples/ewma_rate.py: ``emit`` of the ring's non-zero counts) — keeps no partial
    states, only the ring, through migrations and checkpoints; every (batch, key) result equals the one
    computed from the tuples.  Before, only ``type(op) is Count`` took the ring."""
    W = 3
    workers, results, history = _run_windows(make, W=W)
    assert all(w.ring_only for w in workers)
    assert all(not w.partials for w in workers)  # the ring is the whole state
    truth = {}
    for b, keys in enumerate(history):
        for k in set(keys):
            counts = [c for c in _window_counts(history, W, b, k) if c]
            if make is Arrivals:
                truth[(b, k)] = (sum(counts), sum(counts) / W)
            else:
                m = None
                for c in counts:
                    m = float(c) if m is None else ALPHA * c + (1 - ALPHA) * m
                truth[(b, k)] = (m,)
    assert results.keys() == truth.keys()
    assert all(results[p] == pytest.approx(truth[p]) for p in truth)


def test_the_ring_path_is_refused_for_an_operator_whose_partials_are_not_counts(capsys):
    """A wrong declaration is refused at start-up in one line (exit status 2 from the CLI), before
    the ring would have counted tuples where the operator sums values."""
    from skewlab.cli import main

    with pytest.raises(OperatorError, match=r"declares partial_is_tuple_count, but partials of 6 tuples of keys "
                                            r"\[0, 1, 1, 2, 2, 2\] are \[1, 1, 1\], not the tuple counts \[1, 2, 3\]"):
        load_operator(f"{HERE}:BatchesSeen")
    assert main(["engine", "--operator", f"{HERE}:BatchesSeen", "--algorithm", "hash"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "BatchesSeen declares partial_is_tuple_count" in err
    with pytest.raises(OperatorError, match="declares partial_is_tuple_count but needs_value = True"):
        load_operator(f"{HERE}:ValueSumTally")
    with pytest.raises(OperatorError, match="declares values_are_positions but needs_value = False"):
        load_operator(f"{HERE}:KeylessPositions")
    assert load_operator(f"{HERE}:Arrivals").partial_is_tuple_count  # a right declaration passes


def test_share_type_is_checked_against_combine_and_finish(capsys):
    """A declared ``share_type`` is probed at start-up: two workers' shares of 3 keys in one typed
    column, merged by ``merge_shares``, must equal ``finish(combine(a, b))`` per key.  A column merge
    that disagrees is refused in one line (exit status 2 from the CLI); the built-ins' and a right
    user declaration pass."""
    from skewlab.cli import main

    with pytest.raises(OperatorError, match=r"declares share_type int64, but merge_shares of two workers' shares "
                                            r"of 3 keys gives \[\(2,\), \(4,\), \(8,\)\], not "
                                            r"finish\(combine\(a, b\)\) \[\(1,\), \(2,\), \(4,\)\]"):
        load_operator(f"{HERE}:LatestPositionColumns")
    assert main(["engine", "--operator", f"{HERE}:LatestPositionColumns", "--algorithm", "pkg"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "LatestPositionColumns declares share_type" in err
    assert load_operator(f"{HERE}:EarliestPositionColumns").share_type == pa.int64()
    for name in ("count", "sum", "min", "max"):
        assert load_operator(name).share_type is not None


# ----------------------------------------------------------------------------- positions as values
def test_a_user_operator_of_positions_gets_the_tuples_positions():
    """A user's operator declaring ``values_are_positions`` is routed the ``seq`` value kind and its
    partials see each tuple's position in its source: through the router and the worker's handler,
    each key's earliest position equals the one read from the source's rows.  Before, only
    ``isinstance(op, Join)`` got positions; this operator got the records' values."""
    from skewlab.engine.algorithms import registry
    from skewlab.engine.runtimes.spark.engine import EngineConfig
    from skewlab.engine.runtimes.spark.messages import ControlOrder
    from skewlab.engine.runtimes.spark.operator import make_handler
    from skewlab.engine.runtimes.spark.result_sink import read_sink, sink_schema
    from skewlab.engine.runtimes.spark.topology import RoutingSnapshot, make_router
    from tests.engine.test_combiner import _batches
    from tests.engine.test_spark_operator import FakeState, run_handler

    op = load_operator(f"{HERE}:EarliestPosition")
    kind = EngineConfig(operator=f"{HERE}:EarliestPosition").value_kind()
    assert kind == "seq"
    snap = RoutingSnapshot(0, registry.create("hash", 3).router, 3, {w: ControlOrder(0) for w in range(3)}, {},
                           values=kind)
    routed = pa.Table.from_batches(list(make_router(snap.dumps(), lead=True)(iter(_batches()))))
    import tempfile

    with tempfile.TemporaryDirectory() as sink:
        run_handler(make_handler(3, 2, sink, op), routed, 3, {w: FakeState() for w in range(3)})
        got = read_sink(sink, sink_schema(op)).to_pydict()
    truth: dict[str, int] = {}
    for rb in _batches():
        for k, s in zip(rb.column("key").to_pylist(), rb.column("seq").to_pylist()):
            truth[k] = min(truth.get(k, s), s)
    assert dict(zip(got["key"], got["result"])) == truth


def test_value_field_is_refused_for_an_operator_of_positions():
    from skewlab.engine.config.params import ParamError
    from skewlab.engine.runtimes.spark.engine import EngineConfig

    cfg = EngineConfig(operator=f"{HERE}:EarliestPosition", source="file", path="x.csv", key_field="user",
                       value_field="amount")
    with pytest.raises(ParamError, match="reads no value per tuple \\(its values are the positions of its tuples\\)"):
        cfg._validate_fields(cfg.keyed_operator(), cfg.source_config())


# ----------------------------------------------------------------------------- the default combiner
def test_the_default_combiner_gives_the_partials_of_the_tuples():
    """``combine_partials``: three source partitions pre-aggregate their tuples per key into dumped
    partial states (arbitrary objects: a set and a count); the worker's partials of those rows equal
    the partials of the tuples themselves, and the loader accepts the operator without any combiner
    method of its own."""
    from skewlab.engine.operators.base import PARTIAL_STATES_COLUMN

    op = load_operator(f"{HERE}:SketchySpread")
    assert type(op).combined == PARTIAL_STATES_COLUMN
    rng = np.random.default_rng(8)
    keys = 11
    codes = rng.integers(0, keys, 3000)
    codes[:keys] = np.arange(keys)
    values = rng.integers(0, 1000, codes.size).astype(np.float64)
    part = rng.integers(0, 3, codes.size)
    rows = []
    for p in range(3):
        sel = part == p
        present, local = np.unique(codes[sel], return_inverse=True)
        (col,) = op.pre_aggregate(local, present.size, values[sel])
        assert pa.array(col, type=pa.binary()).type == pa.binary()  # the Arrow column the source ships
        rows.append((present, np.bincount(local, minlength=present.size), col))
    got = op.partials_combined(np.concatenate([r[0] for r in rows]), keys,
                               np.concatenate([r[1] for r in rows]).astype(np.int64),
                               [np.concatenate([r[2] for r in rows])])
    assert got == op.partials(codes, keys, values)


def test_combine_partials_is_opt_in_and_a_declared_combiner_keeps_its_own_methods():
    """Without ``combine_partials`` a mergeable operator ships a row per tuple; a mergeable operator
    that declares its own ``combined`` columns must still implement the methods for them."""
    import sys
    import types

    assert Arrivals.combined is None and EarliestPosition.combined is None

    class RowPerTuple(SketchySpread):  # turns the inherited default combiner off
        combine_partials = False

    assert RowPerTuple.combined is None
    mod = types.ModuleType("capability_test_ops")

    class HalfCombiner(MergeableOperator):
        name = "half_combiner"
        combined = (("sum", pa.float64()),)

        def partials(self, codes, n_keys, values):
            return np.bincount(codes, weights=values, minlength=n_keys).tolist()

        def combine(self, a, b):
            return a + b

        def finish(self, state):
            return (state,)

    HalfCombiner.__module__ = mod.__name__
    mod.HalfCombiner = HalfCombiner
    sys.modules[mod.__name__] = mod
    try:
        with pytest.raises(OperatorError, match="declares combined rows but does not implement pre_aggregate"):
            load_operator("capability_test_ops:HalfCombiner")
    finally:
        del sys.modules[mod.__name__]


def test_the_dashboard_labels_a_users_operator_of_values_by_its_declaration():
    """The dashboard names the operator from the run's stored ``value_kind`` (it cannot import the
    user's module): a user's operator of values on the generator reads the generator's values, like a
    built-in of values; a run recorded before ``value_kind`` keeps the built-ins' names."""
    from skewlab.dashboard.data import operator_label

    assert operator_label({"operator": "my_ops:Median", "value_kind": "field"}) == "my_ops:Median(generated values)"
    assert operator_label({"operator": f"{HERE}:EarliestPosition", "value_kind": "seq"}) == f"{HERE}:EarliestPosition"
    assert operator_label({"operator": "mean"}) == "mean(generated values)"
    assert operator_label({"operator": "my_ops:Median", "value_kind": "field", "value_field": "amount"}) == \
        "my_ops:Median(amount)"
