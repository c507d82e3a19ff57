"""The keyed stateful operator of the Spark engine: one task and one state partition per worker.

The routed stream (:data:`skewlab.engine.runtimes.spark.topology.ROUTED_SCHEMA`: ``key, worker, msg``) is grouped by the
worker's label (:mod:`skewlab.engine.runtimes.spark.labels`) and handed to :func:`make_handler` through
``applyInPandasWithState``: Spark calls the handler once per worker and micro-batch with all of the
worker's rows and the worker's state — a :class:`~skewlab.engine.runtimes.spark.window_state.WorkerWindow` stored as
one binary value in Spark's state store (RocksDB provider, changelog checkpointing: see
:func:`skewlab.engine.runtimes.spark.session.configure_state_store`), so Spark checkpoints it with the query's offsets
and restores it on restart.

Per batch the handler of worker ``w`` loads its window from the state and

1. reads its message rows (``msg`` not NULL: one message of :mod:`skewlab.engine.runtimes.spark.messages`
   each, its bytes): the batch's :class:`~skewlab.engine.runtimes.spark.messages.ControlOrder` (batch id, exports,
   keys to expect, split), in a split-key run the input partitions'
   :class:`~skewlab.engine.runtimes.spark.messages.TouchedKeys`,
   :class:`~skewlab.engine.runtimes.spark.messages.ImportOrder` rows (references
   to the export blobs other workers wrote in the previous batch,
   :mod:`skewlab.engine.runtimes.spark.state_transfer`: it reads the files) and the sources'
   :class:`~skewlab.engine.runtimes.spark.messages.SourceSide` rows (passed on to the driver as they came):
   :func:`decode_inbox`;
2. computes the keyed operator's per-key partial states of the batch at once
   (:meth:`skewlab.engine.operators.KeyedOperator.partials`, or
   :meth:`~skewlab.engine.operators.KeyedOperator.partials_combined` of the combined rows of an
   operator that combines, column ``tuples``: the per-key tuple counts are the tuples', not the
   rows'; not for count, whose state is the tuple count; :func:`batch_keys`) and runs
   :meth:`WorkerWindow.step` (import, slide, export, hold, apply; in a run with split keys nothing is
   held and the exported keys' shares go to the merge stage; :func:`window_step`, which also does
   step 3);
3. under a single-owner grouping writes its results — one row per key with tuples applied:
   ``(batch, key, result, <operator columns>, shares)``
   (:func:`skewlab.engine.runtimes.spark.result_sink.sink_schema`) — to the sink
   (:mod:`skewlab.engine.runtimes.spark.result_sink`): by default one Parquet file per (batch,
   worker), written atomically under a name fixed by the batch, so a replayed batch rewrites the
   same file with the same rows; or partition ``w`` of a Kafka topic, where a replay writes only the
   records not yet there: results are exactly once.  In a run with split keys (control row
   ``split``) it writes the results of the keys no other worker holds (their owner's result is
   final) and sends its window shares of the other keys of the batch to the merge stage — every key
   when the control row says ``merge_all`` — its own keys and those of the batch's
   :class:`~skewlab.engine.runtimes.spark.messages.TouchedKeys` rows (keys the input partitions
   routed to other workers) — (:func:`merge_stage_rows`, :mod:`skewlab.engine.runtimes.spark.share_merge`);
4. stores its window (:func:`store_window`) and returns to the driver only statistics
   (:func:`emit_frame`): per-key tuple counts of the batch (the controller's input; one
   :class:`~skewlab.engine.runtimes.spark.messages.KeyCounts` row of arrays, not a row per key), an
   :class:`~skewlab.engine.runtimes.spark.messages.ExportNotice` of each export blob it wrote (path,
   bytes, keys, target), the side rows, and one
   :class:`~skewlab.engine.runtimes.spark.messages.WorkerSummary` (state keys, state bytes, handler
   seconds, tuples held, rows sent to the merge stage); the merge stage's rows
   (:data:`MERGE_KINDS`, column ``batch``: the row's batch) stay on the executors.

The driver knows keys by their 64-bit fingerprint (:func:`skewlab.engine.algorithms.keys.fingerprint`), the identity
routing already uses (a routing table entry, a hash choice and a migration order all act on the
fingerprint), so the stat row carries the fingerprints and the key names only of the worker's
``named`` most frequent keys of the batch (the dashboard's hot keys); migration orders arrive as
fingerprints too.  This keeps key names, the bulk of per-key memory, out of the driver.

Output columns (:data:`OUT_SCHEMA`; :func:`out_schema` of the operator), each meaning one thing: ``kind`` (:data:`STAT`, :data:`EXPORT`,
:data:`SIDE`, :data:`SUMMARY`, and the merge stage's :data:`MERGE_KINDS`), ``worker``, ``key``
(merge-stage rows), ``data`` (stat, export, side, summary rows: the encoded
:class:`~skewlab.engine.runtimes.spark.messages.KeyCounts`,
:class:`~skewlab.engine.runtimes.spark.messages.ExportNotice`,
:class:`~skewlab.engine.runtimes.spark.messages.SourceSide`,
:class:`~skewlab.engine.runtimes.spark.messages.WorkerSummary`; merge stage: the share's bytes, the
operator's ``dumps``, or a released result row, pickled; NULL for a share in ``share``), ``batch``
(merge stage: the row's batch) and, for an operator that declares
:attr:`~skewlab.engine.operators.KeyedOperator.share_type`, ``share`` (merge stage: the share as
a value of that type, merged as a column by the merge stage, no pickle per key).
A worker's output has one stat row, not one per key: PySpark pads the state column of
``applyInPandasWithState``'s output to as many rows as the data, in pandas, and every row is
converted to Arrow and to a JVM row (issue 36: this was the largest part of a hash batch's Python CPU,
docs/results/engine.md).
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from skewlab.engine.operators import KeyedOperator
from skewlab.engine.runtimes.spark.messages import (BatchOutput, ControlOrder, ExportNotice, ImportOrder, KeyCounts,
                                                   KeyStats, SourceSide, TouchedKeys, WorkerSummary, decode)
from skewlab.engine.runtimes.spark.result_sink import sink_schema
from skewlab.engine.runtimes.spark.state_transfer import ExportRef, read_export, write_export
from skewlab.engine.runtimes.spark.window_state import WorkerWindow, key_fingerprints

__all__ = ["EXPORT", "FINAL", "FRESH_SHARE", "KEPT_SHARE", "MERGE_KINDS", "OUT_ARROW", "OUT_COLUMNS", "OUT_SCHEMA", "SHARE", "SIDE",
           "STAT", "STATE_SCHEMA", "SUMMARY", "BatchKeys", "StepOutcome", "WorkerInbox", "batch_keys", "decode_inbox",
           "emit_frame", "make_handler", "merge_stage_rows", "out_schema", "store_window", "unpack_output", "window_step"]

OUT_SCHEMA = "kind int, worker int, key string, data binary, batch long"
#: the merge stage's column of a share of an operator that declares
#: :attr:`~skewlab.engine.operators.KeyedOperator.share_type` (:func:`out_schema`)
SHARE = "share"
#: :data:`OUT_SCHEMA` as Arrow (the handler's frames converted as Spark does; for tests and benches)
OUT_ARROW = pa.schema([("kind", pa.int32()), ("worker", pa.int32()), ("key", pa.string()), ("data", pa.binary()),
                       ("batch", pa.int64())])
#: the column names of :data:`OUT_SCHEMA`, in order
OUT_COLUMNS = OUT_ARROW.names
STATE_SCHEMA = "blob binary"
STAT, EXPORT, SIDE, SUMMARY = 0, 1, 2, 3
#: rows for the merge stage of a split-key run (:mod:`skewlab.engine.runtimes.spark.share_merge`): a
#: worker's share of a key with tuples here in this batch, of a key without, a released held result
FRESH_SHARE, KEPT_SHARE, FINAL = 4, 5, 6
#: the kinds that go to the merge stage, never to the driver
MERGE_KINDS = (FRESH_SHARE, KEPT_SHARE, FINAL)
#: a worker reports its keys held away from home only while they are at most this share of its keys:
#: under a grouping that spreads its tail too (PKG's two choices) nearly every key would merge anyway,
#: and every key merging (ControlOrder.merge_all) then costs less than naming them all in every
#: summary, snapshot and touch row
MAX_OFF_HOME_SHARE = 0.25


def out_schema(operator: KeyedOperator) -> str:
    """The handler output's Spark schema for ``operator``: :data:`OUT_SCHEMA`, and for an operator that
    declares :attr:`~skewlab.engine.operators.KeyedOperator.share_type` a last column
    :data:`SHARE` of that type — a merge-stage share's value (its ``data`` is NULL then)."""
    if operator.share_type is None:
        return OUT_SCHEMA
    from pyspark.sql.pandas.types import from_arrow_type

    return f"{OUT_SCHEMA}, {SHARE} {from_arrow_type(operator.share_type).simpleString()}"


def merge_stage_rows(win: WorkerWindow, batch: int, keys: Sequence[str], results: list[tuple],
                     export_shares: tuple[list[str], list[Any]] = ([], []),
                     touched: np.ndarray | None = None,
                     fps: np.ndarray | None = None) -> list[tuple[int, int, str, bytes | None, Any]]:
    """What a worker of a split-key run sends to the merge stage after :meth:`WorkerWindow.step` of
    ``batch`` (:mod:`skewlab.engine.runtimes.spark.share_merge`): ``(kind, batch, key, bytes, share)`` —
    its share (:meth:`WorkerWindow.shares`; as the operator's ``dumps`` in ``bytes``, or, for an
    operator that declares :attr:`~skewlab.engine.operators.KeyedOperator.share_type`, as it is in
    ``share``, ``bytes`` ``None``) of every key in its window that
    had tuples somewhere in the batch: :data:`FRESH_SHARE` for the batch's ``keys`` whose tuples were
    applied (not held), :data:`KEPT_SHARE` for the keys in ``touched`` (the fingerprints other
    workers got tuples of: the :class:`~skewlab.engine.runtimes.spark.messages.TouchedKeys` of the
    batch; ``None``: every key of the window, as before touch rows existed), and the step's
    ``results`` of earlier batches (held tuples released by an import; :data:`FINAL`, the pickled
    result row: a moved key's state goes to one worker from all its holders, so the released result
    is whole) — and, as :data:`KEPT_SHARE`, the ``export_shares`` of the touched keys it exported in
    this batch (:meth:`WorkerWindow.step` with ``split``: their state is on its way to another worker
    but still part of the key's result at ``batch``).  The merge stage writes only the (batch, key)
    with a :data:`FRESH_SHARE`; a share of a key without tuples in the batch would be dropped there, so
    it is not sent: the stage's work scales with the keys of the batch, not with the window.
    ``fps``: the fingerprints of ``keys`` (:func:`key_fingerprints`) if the caller has them; ``None``:
    computed here."""
    held = {k for k, entries in win.held.items() if any(e[0] == batch for e in entries)}
    applied = set(keys) - held
    if touched is None:
        names, states = win.shares(batch)
    else:
        own = key_fingerprints(list(keys)) if fps is None else np.asarray(fps, np.uint64)
        wanted = np.union1d(np.asarray(touched, np.uint64), own)
        names, states = win.shares(batch, wanted)
        kept = export_shares[0]
        if len(kept):
            sent = np.isin(key_fingerprints(kept), wanted)
            export_shares = ([k for k, x in zip(kept, sent) if x], [st for st, x in zip(export_shares[1], sent) if x])
    typed, dumps = win.operator.share_type is not None, win.operator.dumps

    def share_row(kind: int, key: str, state: Any) -> tuple[int, int, str, bytes | None, Any]:
        return (kind, batch, key, None, state) if typed else (kind, batch, key, dumps(state), None)

    rows = [share_row(FRESH_SHARE if k in applied else KEPT_SHARE, k, st) for k, st in zip(names, states)]
    rows += [share_row(KEPT_SHARE, k, st) for k, st in zip(*export_shares)]
    rows += [(FINAL, r[0], r[1], pickle.dumps(tuple(r[2:]), protocol=pickle.HIGHEST_PROTOCOL), None)
             for r in results if r[0] < batch]
    return rows


@dataclass(frozen=True)
class WorkerInbox:
    """One worker's rows of one batch, decoded (:func:`decode_inbox`): the ``worker``, the batch's
    :class:`~skewlab.engine.runtimes.spark.messages.ControlOrder` (``None``: the worker has no control
    row, and then no tuples), the export blobs its
    :class:`~skewlab.engine.runtimes.spark.messages.ImportOrder` rows reference (``imports``, read),
    the :class:`~skewlab.engine.runtimes.spark.messages.TouchedKeys` rows (``touches``), the
    :class:`~skewlab.engine.runtimes.spark.messages.SourceSide` rows as they came (``sides``, encoded)
    and the data rows (``rows``: a pandas frame; ``key``, ``worker``, ``msg`` (NULL) and the routed
    value or the combined columns)."""

    worker: int
    control: ControlOrder | None
    imports: tuple[dict[str, Any], ...]
    touches: tuple[TouchedKeys, ...]
    sides: tuple[bytes, ...]
    rows: Any

    @property
    def batch(self) -> int | None:
        """The control order's batch; ``None`` without one."""
        return None if self.control is None else self.control.batch


@dataclass(frozen=True)
class BatchKeys:
    """The distinct keys of a worker's rows in one batch (:func:`batch_keys`): their ``names``,
    their ``counts`` (tuples, int64; of a combined row, the tuples it stands for), ``fps``
    (fingerprints, :func:`key_fingerprints`) and ``partials`` (the operator's partial state of each
    key; ``None`` when the window keeps tuple counts only)."""

    names: list[str]
    counts: np.ndarray
    fps: np.ndarray
    partials: Sequence[Any] | None


@dataclass(frozen=True)
class StepOutcome:
    """What :func:`window_step` did in one batch: the merge stage's ``merge_rows``
    (``(kind, batch, key, bytes, share)``, :func:`merge_stage_rows`), the references of the export blobs it
    wrote (``exports``), the tuples ``applied``, the result rows written to the sink (``results``)
    and the keys in the window held away from their home (``off_home``, computed for ``home_n``
    workers; ``home_n`` 0: not reported)."""

    merge_rows: tuple[tuple[int, int, str, bytes | None, Any], ...] = ()
    exports: tuple[ExportRef, ...] = ()
    applied: int = 0
    results: int = 0
    off_home: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    home_n: int = 0


def decode_inbox(pdf: Any, partitions: int) -> WorkerInbox:
    """Split one worker's rows of a batch (a pandas frame of
    :data:`~skewlab.engine.runtimes.spark.topology.ROUTED_SCHEMA` rows, ``partitions`` = P) into its
    message rows' messages (``msg`` not NULL: the message's bytes) and its data rows (``msg`` NULL);
    reads the export blobs the import rows reference
    (:func:`~skewlab.engine.runtimes.spark.state_transfer.read_export`).  Refuses (``RuntimeError``)
    rows of several workers in one group, a worker outside ``[0, P)``, data rows without a control row
    and touch rows of another batch than the control row's; a message row that holds no message it
    expects raises :class:`~skewlab.engine.runtimes.spark.messages.MessageError`."""
    wcol = pdf["worker"].to_numpy()
    is_msg = pdf["msg"].notna().to_numpy()
    worker = int(wcol[0])
    if not (wcol == worker).all():
        raise RuntimeError(f"rows of several workers in one group ({sorted(set(wcol.tolist()))}): "
                           "worker labels are wrong")
    if not 0 <= worker < partitions:
        raise RuntimeError(f"rows of worker {worker}, outside the {partitions} state partitions")
    control: ControlOrder | None = None
    imports: list[dict[str, Any]] = []
    sides: list[bytes] = []
    touches: list[TouchedKeys] = []
    if is_msg.any():
        for data in pdf["msg"].to_numpy()[is_msg]:
            msg = decode(data, (ControlOrder, ImportOrder, TouchedKeys, SourceSide))
            if isinstance(msg, ControlOrder):
                control = msg
            elif isinstance(msg, ImportOrder):
                imports.append(read_export(msg.ref))
            elif isinstance(msg, TouchedKeys):
                touches.append(msg)
            else:
                sides.append(data)  # as it came: the driver decodes it
    rows = pdf[~is_msg] if is_msg.any() else pdf
    batch = None if control is None else control.batch
    if control is None and len(rows):
        raise RuntimeError(f"worker {worker} received {len(rows)} tuples without a control row")
    if any(t.batch != batch for t in touches):
        raise RuntimeError(f"worker {worker} received touch rows of batch "
                           f"{sorted({t.batch for t in touches} - {batch})} in batch {batch}")
    return WorkerInbox(worker, control, tuple(imports), tuple(touches), tuple(sides), rows)


def batch_keys(rows: Any, op: KeyedOperator, ring_only: bool) -> BatchKeys:
    """The distinct keys of a worker's data ``rows`` (pandas), their tuple counts and fingerprints,
    and the operator's per-key partial states of the batch computed at once: of combined rows
    (column ``tuples``, :meth:`~skewlab.engine.operators.KeyedOperator.partials_combined` of the
    operator's combined columns), else of the tuples
    (:meth:`~skewlab.engine.operators.KeyedOperator.partials`, with the ``value`` column if the
    operator reads values).  ``ring_only`` (the window keeps tuple counts only, as for count): no
    partials."""
    import pandas as pd

    data = rows["key"]
    partials = None
    if "tuples" in rows.columns:  # combined rows (topology.combined_schema): a row per (key, source task)
        codes, uniq = pd.factorize(data, sort=False)
        codes = codes.astype(np.int64, copy=False)
        tuples = rows["tuples"].to_numpy(dtype=np.int64)
        counts = np.bincount(codes, weights=tuples, minlength=len(uniq)).astype(np.int64)
        keys = list(uniq)
        if not ring_only:
            partials = op.partials_combined(codes, len(keys), tuples, [rows[name].to_numpy() for name, _
                                                                       in op.combined]) if len(keys) else []
    elif ring_only:
        vc = data.value_counts(sort=False)
        keys = vc.index.tolist()
        counts = vc.to_numpy(dtype=np.int64)
    else:
        codes, uniq = pd.factorize(data, sort=False)
        codes = codes.astype(np.int64, copy=False)
        counts = np.bincount(codes, minlength=len(uniq)).astype(np.int64)
        keys = list(uniq)
        values = rows["value"].to_numpy() if op.needs_value else None
        partials = op.partials(codes, len(keys), values) if len(keys) else []
    return BatchKeys(keys, counts, key_fingerprints(keys), partials)


def window_step(win: WorkerWindow, inbox: WorkerInbox, keys: BatchKeys, *, results: Any, schema: pa.Schema,
                migrations: str | None, service: float = 0.0) -> StepOutcome:
    """Run :meth:`WorkerWindow.step` of the inbox's batch on ``win`` (imports, the control order's
    exports and expected keys, ``split``) and carry out its effects, in this order: sleep ``service``
    seconds per tuple applied in this call (the batch's tuples not held plus held tuples released by an
    import); in a split-key run, make the merge stage's rows (:func:`merge_stage_rows`: the shares of
    the batch's keys whose result is merged — every key with ``merge_all``, else those in the touch rows
    — and of the touched keys it holds) and keep only this batch's results of the keys held here alone;
    write the remaining results to ``results`` (the sink; one owner per key, ``shares`` 1); compute the
    keys held away from home if the control order names the workers; write each export blob to
    ``migrations`` (``RuntimeError`` if there are exports and no directory).  Without a control order
    nothing runs (an empty :class:`StepOutcome`)."""
    control = inbox.control
    if control is None:
        return StepOutcome()
    batch, worker, imports = control.batch, inbox.worker, list(inbox.imports)
    names, counts, fps = keys.names, keys.counts, keys.fps
    # tuples applied in this call = arrived (new + carried held) - still held - held carried away
    arrived = win.held_tuples() + int(counts.sum()) + sum(int(h[2]) for blob in imports for h in blob.get("held", ()))
    touched = np.unique(np.concatenate([t.keys for t in inbox.touches])) if inbox.touches else np.zeros(0, np.uint64)
    # a run with split keys writes here the results of the keys no other worker holds
    final = None if not control.split or control.merge_all else ~np.isin(fps, touched, assume_unique=True)
    step = win.step(batch, names, counts, partials=keys.partials, fps=fps, imports=imports,
                    exports={int(t): ks for t, ks in control.exports.items()},
                    expect=control.expect, split=control.split, final=final)
    applied = arrived - win.held_tuples() - sum(int(h[2]) for blob in step["exports"].values()
                                                for h in blob.get("held", ()))
    if service and applied > 0:
        time.sleep(applied * service)  # the emulated work, before its results go out
    res = step["results"]
    merge_rows: list[tuple[int, int, str, bytes | None, Any]] = []
    if control.split:
        # the key-partitioned merge stage (share_merge) writes the results of the split keys
        merged = None if final is None else ~final
        m_keys = names if merged is None else [names[i] for i in np.flatnonzero(merged).tolist()]
        merge_rows = merge_stage_rows(win, batch, m_keys, res, step["export_shares"], touched,
                                      fps if merged is None else fps[merged])
        res = [r for r in res if r[0] == batch]  # the keys held here alone (earlier batches: merged)
    if res:  # a single owner per key: its result is final
        cols = list(zip(*res))  # batch, key, result, the operator's columns
        cols.append(np.ones(len(res), np.int32))  # shares: the owner's
        table = pa.table([pa.array(c, f.type) for c, f in zip(cols, schema)], schema=schema)
        results.write(batch, worker, table)
    off_home, home_n = np.zeros(0, np.uint64), 0
    if control.workers:
        off = win.off_home(worker, control.workers)
        if off.size <= MAX_OFF_HOME_SHARE * len(win):  # else: unknown, so every key merges
            off_home, home_n = off, control.workers
    if step["exports"] and migrations is None:
        raise RuntimeError(f"worker {worker} exports state in batch {batch} but the handler has no migrations "
                           "directory")
    refs = tuple(write_export(migrations, batch, worker, int(target), blob) for target, blob in step["exports"].items())
    return StepOutcome(tuple(merge_rows), refs, applied, len(res), off_home, home_n)


def store_window(win: WorkerWindow, state: Any) -> int:
    """Keep ``win`` in the worker's Spark state (``GroupState``: one binary value), or remove the
    state when the window holds no key, held tuple or expected key; returns the bytes stored."""
    if len(win) or win.held or win.expect:
        blob = win.dumps()
        state.update((blob,))
        return len(blob)
    if state.exists:
        state.remove()
    return 0


def emit_frame(inbox: WorkerInbox, keys: BatchKeys, outcome: StepOutcome, win: WorkerWindow, *, state_bytes: int,
               started: float, named: int) -> Any:
    """The worker's output frame of the batch (:func:`out_schema` of the window's operator), rows in this order: the merge
    stage's rows, one :data:`EXPORT` row per blob written, the :data:`SIDE` rows as they came, the
    :data:`SUMMARY` (its ``seconds``: since ``started``, taken here) and one :data:`STAT` row: the
    batch's key counts, the ``named`` most frequent keys first, with their names."""
    import pandas as pd

    out_kind = [r[0] for r in outcome.merge_rows]
    out_key: list[str | None] = [r[2] for r in outcome.merge_rows]
    out_data: list[bytes | None] = [r[3] for r in outcome.merge_rows]
    out_batch: list[int | None] = [r[1] for r in outcome.merge_rows]
    for ref in outcome.exports:
        out_kind.append(EXPORT)
        out_key.append(None)
        out_data.append(ExportNotice(ref).encode())
        out_batch.append(None)
    for raw in inbox.sides:
        out_kind.append(SIDE)
        out_key.append(None)
        out_data.append(raw)
        out_batch.append(None)
    summary = WorkerSummary(inbox.batch, keys=len(win), state_bytes=state_bytes, held=win.held_tuples(),
                            export_bytes=sum(ref.bytes for ref in outcome.exports),
                            exported_keys=sum(ref.keys for ref in outcome.exports),
                            imported_keys=sum(len(b.get("keys", ())) for b in inbox.imports),
                            results=outcome.results, shares=len(outcome.merge_rows), applied=outcome.applied,
                            seconds=time.perf_counter() - started, off_home=outcome.off_home,
                            home_n=outcome.home_n)
    out_kind.append(SUMMARY)
    out_key.append(None)
    out_data.append(summary.encode())
    out_batch.append(None)
    order = np.argsort(-keys.counts, kind="stable")
    top = order[:named].tolist()
    stats = KeyCounts(keys.fps[order], keys.counts[order].astype(np.uint64), [keys.names[i] for i in top])
    out_kind.append(STAT)
    out_key.append(None)
    out_data.append(stats.encode())
    out_batch.append(None)
    frame = pd.DataFrame({
        "kind": np.asarray(out_kind, np.int32),
        "worker": np.full(len(out_kind), inbox.worker, np.int32),
        "key": out_key,
        "data": out_data,
        "batch": pd.array(out_batch, dtype="Int64"),
    }, columns=OUT_COLUMNS)
    if win.operator.share_type is not None:  # out_schema's last column
        shares = [r[4] for r in outcome.merge_rows]
        frame[SHARE] = pd.Series(shares + [None] * (len(frame) - len(shares)), dtype=object)
    return frame


def make_handler(partitions: int, window: int, sink: Any, operator: KeyedOperator | None = None, named: int = 10,
                 service_us: float = 0.0, migrations: str | None = None) -> Callable[..., Iterator[Any]]:
    """The ``applyInPandasWithState`` function of ``operator`` (default count; an operator that
    reads values gets input rows with ``value``; see the module docstring).  ``sink``: a sink of
    :mod:`skewlab.engine.runtimes.spark.result_sink`, or a directory for Parquet results.  ``named``: how many of its
    most frequent keys per batch a worker reports by name.  ``migrations``: the directory (resolved
    path or URI) where exported state goes (:mod:`skewlab.engine.runtimes.spark.state_transfer`);
    a handler without it refuses to export.

    ``service_us``: an emulated service time per tuple, as in Nasir et al. (ICDE 2016), Sec. VI, Q4,
    who add "a fixed delay of 1 ms to the processing of each message" to emulate CPU or I/O cost:
    the handler sleeps ``service_us`` µs for every tuple it applies in this call (the batch's tuples
    that are not held, plus held tuples released by an import).  Deviation: one sleep per call for all
    of them, not one per tuple — the task's time is the same, without a million timer calls.

    Per call: :func:`decode_inbox` → :func:`batch_keys` → :func:`window_step` → :func:`store_window`
    → :func:`emit_frame`; the worker's window is loaded from the state first."""
    import pandas as pd

    from skewlab.engine.runtimes.spark.result_sink import ParquetSink

    op = operator if operator is not None else WorkerWindow(1).operator
    schema = sink_schema(op)
    results = sink if hasattr(sink, "write") else ParquetSink(str(sink), schema)
    P = int(partitions)
    W = int(window)
    service = float(service_us) * 1e-6

    def handle(label: tuple, frames: Iterator[Any], state: Any) -> Iterator[Any]:
        started = time.perf_counter()
        parts = [f for f in frames if len(f)]
        if not parts:
            return
        inbox = decode_inbox(parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True), P)
        win = WorkerWindow.loads(state.get[0], op) if state.exists else WorkerWindow(W, op)
        keys = batch_keys(inbox.rows, op, win.ring_only)
        outcome = window_step(win, inbox, keys, results=results, schema=schema, migrations=migrations,
                              service=service)
        state_bytes = store_window(win, state)
        yield emit_frame(inbox, keys, outcome, win, state_bytes=state_bytes, started=started, named=named)

    return handle


def unpack_output(table: pa.Table) -> BatchOutput:
    """Split one batch's collected operator output into a
    :class:`~skewlab.engine.runtimes.spark.messages.BatchOutput`: the stat rows'
    :class:`~skewlab.engine.runtimes.spark.messages.KeyCounts` as one
    :class:`~skewlab.engine.runtimes.spark.messages.KeyStats` (``workers``/``fps``/``counts``: per
    (worker, key fingerprint) tuples of the batch; ``names``: fingerprint → name of the keys reported
    by name), ``states`` (source → its :class:`~skewlab.engine.runtimes.spark.messages.SourceSide`),
    ``dead_letters`` (reason → [count, samples], at most 5 samples), ``exports`` (the
    :class:`~skewlab.engine.runtimes.spark.state_transfer.ExportRef` of every blob the workers wrote:
    references, never the state's bytes) and ``summaries`` (worker → its
    :class:`~skewlab.engine.runtimes.spark.messages.WorkerSummary`).  A row whose message is not the one
    its kind declares is refused (:class:`~skewlab.engine.runtimes.spark.messages.MessageError`).
    """
    sides: dict[int, SourceSide] = {}
    exports: list[ExportRef] = []
    summaries: dict[int, WorkerSummary] = {}
    counts: list[tuple[int, KeyCounts]] = []
    for k, w, d in zip(table.column("kind").to_pylist(), table.column("worker").to_pylist(),
                       table.column("data").to_pylist()):
        if k == STAT:
            counts.append((int(w), decode(d, KeyCounts)))
        elif k == SIDE:
            side = decode(d, SourceSide)
            sides[side.source] = side
        elif k == EXPORT:
            exports.append(decode(d, ExportNotice).ref)
        elif k == SUMMARY:
            summaries[int(w)] = decode(d, WorkerSummary)
    dead: dict[str, list] = {}
    for side in sides.values():
        for reason, (count, samples) in side.dead_letters.items():
            d = dead.setdefault(reason, [0, []])
            d[0] += count
            d[1].extend(samples[: max(0, 5 - len(d[1]))])
    stats = KeyStats.of(counts)
    return BatchOutput(workers=stats.workers, fps=stats.fps, counts=stats.tuples, names=stats.names, states=sides,
                       dead_letters=dead, exports=tuple(exports), summaries=summaries)
