"""The merge stage's logic without Spark: workers' window shares of split keys (WorkerWindow.shares)
merged by share_merge.merge_rows give one row per (batch, key), equal to the operator's result over
all of the key's tuples in the window, computed here directly from the tuples — shares as the
operator's bytes, and, for an operator that declares ``share_type``, as one typed column merged at once
(``merge_shares``)."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest

from skewlab.engine.operators.builtin import Count, Max, Mean, Min, Sum
from skewlab.engine.runtimes.spark.operator import FINAL, FRESH_SHARE, KEPT_SHARE
from skewlab.engine.runtimes.spark.share_merge import merge_rows
from skewlab.engine.runtimes.spark.window_state import WorkerWindow


def _rows_of_batch(workers, batch, tuples, op, typed=False):
    """Feed each worker its tuples of the batch (``tuples``: worker → (keys, values)) and return the
    merge-stage rows it would send (as make_handler does in a split-key run): the shares as the
    operator's bytes, or as they are (``typed``: the ``share`` column of a share_type operator)."""
    kind, bt, key, data = [], [], [], []
    for w, win in enumerate(workers):
        ks, vs = tuples.get(w, ([], []))
        uniq = list(np.unique(np.asarray(ks))) if ks else []
        codes = np.searchsorted(np.asarray(uniq), np.asarray(ks)) if ks else np.zeros(0, np.int64)
        counts = np.bincount(codes, minlength=len(uniq)).astype(np.int64)
        partials = op.partials(codes.astype(np.int64), len(uniq), np.asarray(vs, float)) if uniq else []
        win.step(batch, [str(k) for k in uniq], counts, partials=None if win.ring_only else partials)
        for k, st in zip(*win.shares(batch)):
            kind.append(FRESH_SHARE if k in set(map(str, uniq)) else KEPT_SHARE)
            bt.append(batch)
            key.append(k)
            data.append(st if typed else op.dumps(st))
    return kind, bt, key, data


def _run(op, W=3, batches=8, workers=3, seed=4, typed=False):
    rng = np.random.default_rng(seed)
    wins = [WorkerWindow(W, op) for _ in range(workers)]
    history: dict[int, list[tuple[str, float]]] = {}
    got: dict[tuple[int, str], tuple] = {}
    for b in range(batches):
        n = int(rng.integers(20, 60))
        keys = [f"k{int(x)}" for x in rng.zipf(1.5, n) % 12]
        vals = rng.normal(10, 3, n).round(3).tolist()
        history[b] = list(zip(keys, vals))
        dest = rng.integers(0, workers, n)  # every key split over the workers at random
        tuples = {w: ([k for k, d in zip(keys, dest) if d == w], [v for v, d in zip(vals, dest) if d == w])
                  for w in range(workers)}
        kind, bt, key, data = _rows_of_batch(wins, b, tuples, op, typed)
        columns = {"kind": pa.array(kind, pa.int32()), "batch": pa.array(bt, pa.int64()), "key": key}
        if typed:
            columns.update(data=pa.nulls(len(kind), pa.binary()), share=pa.array(data, op.share_type))
        else:
            columns.update(data=pa.array(data, pa.binary()))
        out = merge_rows(pa.table(columns), op).to_pydict()
        pairs = list(zip(out["batch"], out["key"]))
        assert len(pairs) == len(set(pairs)), "a (batch, key) merged twice"
        for i, p in enumerate(pairs):
            got[p] = tuple(out[c][i] for c in out if c not in ("batch", "key"))
    return history, got


def test_count_shares_of_split_keys_merge_to_the_windowed_count():
    history, got = _run(Count())
    W = 3
    truth = {}
    for b, tup in history.items():
        for k in {k for k, _ in tup}:
            truth[(b, k)] = sum(1 for j in range(b - W + 1, b + 1) for kk, _ in history.get(j, []) if kk == k)
    assert {p: r[0] for p, r in got.items()} == truth
    assert max(r[1] for r in got.values()) > 1  # some rows merged several workers' shares


@pytest.mark.parametrize("make, fold", [(Count, len), (Sum, sum), (Min, min), (Max, max)],
                         ids=["count", "sum", "min", "max"])
def test_typed_shares_merge_as_a_column_to_the_windowed_result(make, fold):
    """A share_type operator's shares in the typed ``share`` column (no bytes) merge, all keys at once,
    to the key's result over its tuples of the window — and to exactly the table the same shares give
    as the operator's bytes, merged per key by combine and finish."""
    history, got = _run(make(), typed=True)
    _, as_bytes = _run(make())
    W = 3
    assert set(got) == {(b, k) for b, tup in history.items() for k, _ in tup}
    for (b, k), (result, shares) in got.items():
        vals = [v for j in range(b - W + 1, b + 1) for kk, v in history.get(j, []) if kk == k]
        assert result == pytest.approx(fold(vals), rel=1e-12), (b, k)
    assert got == as_bytes
    assert max(r[-1] for r in got.values()) > 1  # some rows merged several workers' shares


def test_typed_and_released_rows_merge_together():
    """A batch's FINAL rows (a released result, pickled) and typed shares in one table: each FINAL row
    as it is, each fresh (batch, key) merged from its shares, a kept-only key not written."""
    op = Count()
    table = pa.table({"kind": pa.array([FINAL, FRESH_SHARE, KEPT_SHARE, KEPT_SHARE], pa.int32()),
                      "batch": pa.array([4, 5, 5, 5], pa.int64()), "key": ["a", "a", "a", "b"],
                      "data": pa.array([pickle.dumps((7,)), None, None, None], pa.binary()),
                      "share": pa.array([None, 3, 2, 9], pa.int64())})
    out = merge_rows(table, op).to_pydict()
    assert sorted(zip(out["batch"], out["key"], out["result"], out["shares"])) == [(4, "a", 7, 1), (5, "a", 5, 2)]


def test_mean_shares_of_split_keys_merge_to_the_windowed_mean():
    history, got = _run(Mean())
    W = 3
    assert set(got) == {(b, k) for b, tup in history.items() for k, _ in tup}
    for (b, k), (mean, n, shares) in got.items():
        vals = [v for j in range(b - W + 1, b + 1) for kk, v in history.get(j, []) if kk == k]
        assert n == len(vals) and abs(mean - sum(vals) / len(vals)) < 1e-9, (b, k)


def test_released_results_pass_through_once():
    op = Count()
    table = pa.table({"kind": pa.array([FINAL, FRESH_SHARE], pa.int32()), "batch": pa.array([4, 5], pa.int64()),
                      "key": ["a", "a"], "data": pa.array([pickle.dumps((7,)), op.dumps(3)], pa.binary())})
    out = merge_rows(table, op).to_pydict()
    assert sorted(zip(out["batch"], out["key"], out["result"], out["shares"])) == [(4, "a", 7, 1), (5, "a", 3, 1)]


def test_merge_stage_in_spark_writes_each_key_as_its_hash_bucket_whatever_the_task_count(spark, tmp_path):
    """The merge stage's writer of a key is P + the partition ``repartition(P, key)`` gives it (so
    files written before this stage ran in fewer tasks are rewritten identically on a replay; writers
    below P are the workers), and the files are the same with 1, 2 or P tasks and with one task
    without a shuffle (few rows announced): one row per (batch, key), equal to merge_rows over all rows."""
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from skewlab.engine.runtimes.spark.result_sink import ParquetSink, sink_file, sink_schema
    from skewlab.engine.runtimes.spark.share_merge import merge_in_spark

    op, P, batch = Count(), 6, 7
    rng = np.random.default_rng(3)
    keys = [f"k{int(i)}" for i in rng.integers(0, 40, 300)]
    kinds = [FRESH_SHARE if x < 0.7 else KEPT_SHARE for x in rng.random(300)]
    table = pa.table({"kind": pa.array(kinds, pa.int32()), "batch": pa.array([batch] * 300, pa.int64()),
                      "key": keys, "data": pa.array([op.dumps(int(c)) for c in rng.integers(1, 9, 300)], pa.binary())})
    df = spark.createDataFrame(table.to_pandas())
    expected_writer = {r["key"]: r["w"] for r in df.repartition(P, "key").select(
        "key", F.spark_partition_id().alias("w")).distinct().collect()}
    truth = merge_rows(table, op).to_pydict()
    truth = sorted(zip(truth["key"], truth["result"], truth["shares"]))
    files = {}
    for tasks, announced in ((1, None), (2, None), (P, None), (P, 300)):
        out = tmp_path / f"tasks-{tasks}-{announced}"
        written = merge_in_spark(df, batch, P, ParquetSink(str(out), schema=sink_schema(op)), op, tasks=tasks,
                                 rows_announced=announced)
        got, layout = [], {}
        assert not any((out / f"batch={batch}" / f"worker-{w}.parquet").exists() for w in range(P))
        for w in range(P):
            path = sink_file(str(out), batch, P + w)
            try:
                t = pq.read_table(path).to_pydict()
            except FileNotFoundError:
                continue
            layout[w] = sorted(t["key"])
            got += list(zip(t["key"], t["result"], t["shares"]))
            assert all(expected_writer[k] == w for k in t["key"]), (tasks, w)
        assert sorted(got) == truth and written == len(truth), tasks
        files[tasks, announced] = layout
    assert files[1, None] == files[2, None] == files[P, None] == files[P, 300]
    # on the driver (share_merge.merge_on_driver): the rows collected with their writer column, the same
    # files as the merge tasks write, so a batch merged in one place and replayed in the other rewrites them
    from skewlab.engine.runtimes.spark.share_merge import merge_on_driver, writer_column

    out = tmp_path / "driver"
    collected = df.withColumn("writer", writer_column(P)).toArrow()
    written = merge_on_driver(collected, batch, ParquetSink(str(out), schema=sink_schema(op)), op)
    layout = {}
    for w in range(P):
        try:
            layout[w] = sorted(pq.read_table(sink_file(str(out), batch, P + w)).to_pydict()["key"])
        except FileNotFoundError:
            continue
    assert layout == files[1, None] and written == len(truth)
    # the same shares in count's typed column (handler output with out_schema(count)): the same files,
    # on the executors and on the driver
    typed = table.set_column(3, "data", pa.nulls(300, pa.binary())).append_column(
        "share", pa.array([op.loads(d) for d in table.column("data").to_pylist()], pa.int64()))
    tdf = spark.createDataFrame(typed.to_pandas(), schema="kind int, batch long, key string, data binary, share long")
    for where in ("executors", "driver"):
        out = tmp_path / f"typed-{where}"
        sink = ParquetSink(str(out), schema=sink_schema(op))
        written = (merge_in_spark(tdf, batch, P, sink, op, tasks=2) if where == "executors" else
                   merge_on_driver(tdf.withColumn("writer", writer_column(P)).toArrow(), batch, sink, op))
        got, layout = [], {}
        for w in range(P):
            try:
                t = pq.read_table(sink_file(str(out), batch, P + w)).to_pydict()
            except FileNotFoundError:
                continue
            layout[w] = sorted(t["key"])
            got += list(zip(t["key"], t["result"], t["shares"]))
        assert sorted(got) == truth and written == len(truth) and layout == files[1, None], where
