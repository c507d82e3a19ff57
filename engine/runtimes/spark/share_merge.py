"""The merge stage of the Spark engine: one final result row per (batch, key) of a split key, merged in Spark.

Under a split-key grouping (PKG, D-Choices, ...; nasir-icde15 Sec. III: "the downstream operator
merges the partial results") several workers hold a share of one key, so no worker can write the
key's result.  In a run that has split keys, every worker therefore sends, per micro-batch, its
*share* of each split key in its window that had tuples somewhere in the batch (the keys the
batch's touch rows name, :func:`skewlab.engine.runtimes.spark.topology.touch_rows`: routed or held
away from their home worker; a key held by one worker alone is written by that worker) — the key's partial states
of the window merged (:meth:`skewlab.engine.runtimes.spark.window_state.WorkerWindow.shares`), as the
operator's bytes, or as a value of the handler output's typed ``share`` column for an operator that declares
:attr:`~skewlab.engine.operators.KeyedOperator.share_type` (merged then by its ``merge_shares``, all keys
at once) — marked ``FRESH_SHARE`` when the key had tuples on that worker in the batch,
``KEPT_SHARE`` when it had them only on others (the input partitions' touch rows,
:func:`skewlab.engine.runtimes.spark.topology.touch_rows`, name those keys to every worker),
plus the results of held tuples released by an import (``FINAL``: a moved key's state goes to one
worker from all its holders, so its released result is whole)
(:func:`skewlab.engine.runtimes.spark.operator.make_handler`).

:func:`merge_in_spark` runs inside the batch's ``foreachBatch`` on those rows of the persisted
operator output — a Spark job on the executors; the driver receives one row count per task, never a
key.  Each row's *writer* is ``P +`` its key's hash bucket, ``pmod(hash(key), P)``
(:func:`writer_column`; writers below P are the workers, :mod:`skewlab.engine.runtimes.spark.result_sink`);
the rows are repartitioned by writer into as many tasks as the cluster runs at once (Spark's default
parallelism, at most P: a small batch does not pay P task launches) — or, when the workers announced at
most :data:`SMALL_MERGE` rows (the split head of D-/W-Choices), read by one task without a shuffle — and a
task merges each of its writers' rows (:func:`merge_rows`:
:meth:`~skewlab.engine.operators.MergeableOperator.combine` then
:meth:`~skewlab.engine.operators.MergeableOperator.finish`), keeps the keys that had tuples somewhere
in the batch, and writes them with the released results as that writer's output of the batch
(:mod:`skewlab.engine.runtimes.spark.result_sink`).

:func:`merge_on_driver` is the same merge without that second Spark job, for a batch expected to be
small (the previous batch announced at most :data:`SMALL_MERGE` rows): the merge-stage rows come to the
driver with the batch's statistics, in its one collect, each with its writer computed in that query, and
the driver runs the merge tasks' own function (:func:`make_merger`) over them.  Deviation from merging
on the executors, measured (docs/results/engine.md, "The merge stage on the driver"): under D-/W-Choices
at 100,000 tuples per batch the second job cost 0.33–0.47 s per batch (0.17–0.25 s to build and plan it,
0.16–0.22 s to run one task), merging its ~16,000 rows 0.06 s.  The rows are one batch's output passing
through, at most a few per (worker, key) of the batch, never kept: the driver still keeps statistics only.

Exactly once as the workers' own writes, whichever of the two merges a batch: a replayed batch
recomputes the same shares (Spark restores the state version before it), each key's writer is a function
of the key and P alone (not of the number of tasks, nor of where the merge ran, which may differ on a
replay), and the sink rewrites (Parquet) or completes (Kafka) the same (batch, writer) output.

A move in a run with split keys holds nothing (:meth:`WorkerWindow.step` with ``split``): the key's
new holder applies its tuples at once as its own share, and the exporter sends the exported keys'
shares of the move's batch as ``KEPT_SHARE``, so a key moved while *other* workers keep shares of it
and receive its tuples (``set-workers`` shrinking a split-key grouping) still gets one row with every
part.  ``FINAL`` rows come only from holds begun before the run's first split batch (a rebalancer's
move published with the switch to a split-key grouping): the key had one owner then, so the released
result is whole.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np
import pickle
import pyarrow as pa
import pyarrow.compute as pc

from skewlab.engine.operators import KeyedOperator
from skewlab.engine.runtimes.spark.operator import FINAL, FRESH_SHARE, MERGE_KINDS, SHARE
from skewlab.engine.runtimes.spark.result_sink import sink_schema
from skewlab.engine.runtimes.spark.task_metrics import MERGE_JOB_MARK

__all__ = ["MERGE_COLUMNS", "merge_in_spark", "merge_on_driver", "merge_rows", "writer_column"]

#: what a merge task returns to the driver: the rows it wrote
MERGED_SCHEMA = "rows long"
#: the handler output's columns the merge stage reads (``share`` only where the operator declares
#: :attr:`~skewlab.engine.operators.KeyedOperator.share_type`)
MERGE_COLUMNS = ("kind", "batch", "key", "data", SHARE)
#: at most this many merge-stage rows are merged by one task, without a shuffle
SMALL_MERGE = 20_000


def merge_rows(rows: pa.Table, operator: KeyedOperator, carry: str | None = None) -> pa.Table:
    """The final result rows (:func:`~skewlab.engine.runtimes.spark.result_sink.sink_schema` of
    ``operator``) of the merge-stage rows ``rows`` (columns ``kind, batch, key, data``, and ``share``
    for an operator that declares :attr:`~skewlab.engine.operators.KeyedOperator.share_type`): per
    (batch, key) with at least one ``FRESH_SHARE``, ``finish`` of the ``combine`` of all its shares
    (column ``shares``: how many); every ``FINAL`` row as it is (``shares`` 1).  The rows are grouped by
    (batch, key) in Arrow and numpy (a sort and the group boundaries).  Shares in a ``share`` column
    merge at once (:meth:`~skewlab.engine.operators.MergeableOperator.merge_shares`); shares as bytes
    run the operator's own ``loads``, ``combine`` and ``finish`` per share and per key.  ``carry``: a
    column of ``rows`` constant per key (the merge stage's ``writer``) kept as the result's last column."""
    results = sink_schema(operator)
    schema = results if carry is None else results.append(rows.schema.field(carry))
    kind = np.asarray(rows.column("kind").to_numpy(zero_copy_only=False))
    final = kind == FINAL
    parts: list[pa.Table] = []
    shares = rows
    if final.any():
        picked = rows.filter(pa.array(final))
        columns = ("batch", "key", "data") + ((carry,) if carry is not None else ())
        out = [(r[0], r[1], *pickle.loads(r[2]), 1, *r[3:]) for r in zip(*(picked.column(c).to_pylist() for c in columns))]
        parts.append(_rows_table(out, schema))
        shares = rows.filter(pa.array(~final))
    if shares.num_rows:
        order = pc.sort_indices(shares, sort_keys=[("batch", "ascending"), ("key", "ascending")])
        shares = shares.take(order).combine_chunks()
        batch = shares.column("batch").to_numpy()
        codes = pc.dictionary_encode(shares.column("key")).combine_chunks().indices.to_numpy(zero_copy_only=False)
        first = np.r_[True, (batch[1:] != batch[:-1]) | (codes[1:] != codes[:-1])]
        starts = np.flatnonzero(first)
        fresh = np.logical_or.reduceat(np.asarray(shares.column("kind").to_numpy(zero_copy_only=False)) == FRESH_SHARE,
                                       starts)
        ends = np.r_[starts[1:], shares.num_rows]
        if operator.share_type is not None and SHARE in shares.column_names:
            part = _merge_share_column(shares, starts, ends, first, fresh, results, operator)
        else:
            part = _merge_share_bytes(shares, starts, ends, fresh, results, operator)
        if carry is not None:
            part = part.append_column(schema.field(carry), shares.column(carry).take(starts[fresh]))
        parts.append(part)
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return schema.empty_table()
    return parts[0] if len(parts) == 1 else pa.concat_tables(parts)


def _rows_table(out: list[tuple], schema: pa.Schema) -> pa.Table:
    """The sink table of result rows ``(batch, key, *result, shares)``."""
    if not out:
        return schema.empty_table()
    return pa.table([pa.array(c, f.type) for c, f in zip(zip(*out), schema)], schema=schema)


def _merge_share_bytes(shares: pa.Table, starts: np.ndarray, ends: np.ndarray, fresh: np.ndarray,
                       schema: pa.Schema, operator: KeyedOperator) -> pa.Table:
    """:func:`merge_rows` of shares as the operator's bytes (sorted by (batch, key), groups from
    ``starts`` to ``ends``): ``loads``, ``combine`` and ``finish`` per share and per fresh group."""
    batch = shares.column("batch").to_numpy()
    keys = shares.column("key").to_pylist()
    data = shares.column("data").to_pylist()
    loads, combine, finish = operator.loads, operator.combine, operator.finish  # type: ignore[attr-defined]
    out = []
    for start, end in zip(starts[fresh].tolist(), ends[fresh].tolist()):
        state = loads(data[start])
        for i in range(start + 1, end):
            state = combine(state, loads(data[i]))
        out.append((int(batch[start]), keys[start], *finish(state), end - start))
    return _rows_table(out, schema)


def _merge_share_column(shares: pa.Table, starts: np.ndarray, ends: np.ndarray, first: np.ndarray,
                        fresh: np.ndarray, schema: pa.Schema, operator: Any) -> pa.Table:
    """:func:`merge_rows` of shares in the ``share`` column (sorted by (batch, key), ``first`` marking
    each group's first row): the operator's
    :meth:`~skewlab.engine.operators.MergeableOperator.merge_shares` over all groups at once, the fresh
    groups kept."""
    groups = np.cumsum(first, dtype=np.int64) - 1
    results = operator.merge_shares(groups, len(starts), shares.column(SHARE).combine_chunks())
    keep = np.flatnonzero(fresh)
    heads = starts[keep]
    columns = [shares.column("batch").take(heads), shares.column("key").take(heads)]
    columns += [pa.array(r).take(keep) for r in results]
    columns.append(pa.array((ends - starts)[keep]))
    return pa.table([c.cast(f.type) for c, f in zip(columns, schema)], schema=schema)


def make_merger(batch_id: int, sink: Any, operator: KeyedOperator) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of batch ``batch_id``'s merge stage: merge the task's rows at once
    (:func:`merge_rows`; a key's rows all have one writer, column ``writer``, a function of the key), split
    the merged rows by writer, write every writer's rows to ``sink`` as that writer's output, in one call
    (the sink's ``write_many``: a Parquet sink writes the files at once); return the count."""

    def merge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parts = [b for b in batches if b.num_rows]
        written = 0
        if parts:
            rows = pa.Table.from_batches(parts)
            table = merge_rows(rows, operator, carry="writer")
            if table.num_rows:
                writers = table.column("writer").to_numpy()
                order = np.argsort(writers, kind="stable")
                table = table.drop_columns(["writer"]).take(order)
                bounds = np.flatnonzero(np.r_[True, np.diff(writers[order]) != 0, True])
                tables = {int(writers[order[a]]): table.slice(a, b - a) for a, b in zip(bounds[:-1], bounds[1:])}
                sink.write_many(batch_id, tables)
                written = table.num_rows
        yield pa.RecordBatch.from_pydict({"rows": pa.array([written], pa.int64())})

    return merge


def writer_column(partitions: int) -> Any:
    """The Spark column of a merge-stage row's writer: ``P + pmod(hash(key), P)`` (Spark's Murmur3 hash
    of the key, so the writer of a key is the partition ``repartition(P, key)`` gives it, plus P)."""
    from pyspark.sql import functions as F

    P = int(partitions)
    return F.expr(f"{P} + pmod(hash(key), {P})")


def merge_on_driver(rows: pa.Table, batch_id: int, sink: Any, operator: KeyedOperator) -> int:
    """Merge and write batch ``batch_id``'s merge-stage rows ``rows`` (columns ``kind, batch, key,
    data, writer``, the writer from :func:`writer_column`) on the driver, with the merge tasks' own
    function (:func:`make_merger`): the same (batch, writer) outputs as :func:`merge_in_spark`; returns
    the rows written."""
    counts = make_merger(batch_id, sink, operator)(iter(rows.to_batches()))
    return int(sum(b.column(0)[0].as_py() for b in counts))


def merge_in_spark(df: Any, batch_id: int, partitions: int, sink: Any, operator: KeyedOperator,
                   tasks: int | None = None, rows_announced: int | None = None) -> int:
    """Run batch ``batch_id``'s merge stage on the operator output ``df`` (persisted by the caller:
    the stateful stage must not run twice): writers ``partitions + pmod(hash(key), partitions)``, in
    ``tasks`` tasks (default: Spark's default parallelism, at most ``partitions``), or in one task
    without a shuffle when ``rows_announced`` (the merge-stage rows the workers' summaries count) is
    at most :data:`SMALL_MERGE`; returns the rows written."""
    from pyspark.sql import functions as F

    P = int(partitions)
    tasks = max(1, min(P, int(tasks or df.sparkSession.sparkContext.defaultParallelism)))
    rows = (df.filter(F.col("kind").isin(*MERGE_KINDS)).select(*[c for c in MERGE_COLUMNS if c in df.columns])
            .withColumn("writer", writer_column(P)))
    sc = df.sparkSession.sparkContext
    description = sc.getLocalProperty("spark.job.description")
    sc.setLocalProperty("spark.job.description", f"{description or ''}{MERGE_JOB_MARK}")  # not a worker's task time
    try:
        small = rows_announced is not None and rows_announced <= SMALL_MERGE
        spread = rows.coalesce(1) if small else rows.repartition(tasks, "writer")
        counts = spread.mapInArrow(make_merger(batch_id, sink, operator), MERGED_SCHEMA).collect()
    finally:
        sc.setLocalProperty("spark.job.description", description)
    return int(sum(r["rows"] for r in counts))
