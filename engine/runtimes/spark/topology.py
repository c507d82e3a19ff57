"""The keyed topology inside Spark: route per input partition, group by worker, keyed state per worker.

Per micro-batch the driver builds a :class:`RoutingSnapshot` (the grouping's router,
:class:`skewlab.engine.algorithms.grouping.Router`: routing table, heavy hitters and their d, per-source load
estimates, pickled — a few KB to a few MB; never the planner's statistics — plus the
batch's migration orders and references to the state blobs to import) and publishes it for the batch
(:class:`skewlab.engine.runtimes.spark.sources.RouteFiles`); the executors run

1. :func:`make_router` inside every source scan (:mod:`skewlab.engine.runtimes.spark.sources`, option ``route_dir``):
   every input partition is one upstream source instance; its tuples are fingerprinted
   (:func:`skewlab.engine.algorithms.keys.fingerprint_keys`: a numba MurmurHash3 over the Arrow buffers,
   bit-identical to :func:`skewlab.engine.algorithms.keys.fingerprint`) and routed in stream order by
   ``router.route(fps, source)`` — exactly the per-source semantics of the local runtime.  Each
   partition also emits one *side row* per source carrying the source's updated local state
   (``router.source_state``), its offsets, dead letters and the batch whose snapshot it used back
   to the driver; the batch's *lead* partition also emits the control and import rows of every
   worker; in a split-key run (the control orders say ``split``) every partition also emits one
   *touch row* per worker of the batch: the keys it routed to other workers (:func:`touch_rows`).
   These are *message rows*: each carries one typed message of :mod:`skewlab.engine.runtimes.spark.messages`
   (:class:`~skewlab.engine.runtimes.spark.messages.SourceSide`,
   :class:`~skewlab.engine.runtimes.spark.messages.ControlOrder`,
   :class:`~skewlab.engine.runtimes.spark.messages.ImportOrder`,
   :class:`~skewlab.engine.runtimes.spark.messages.TouchedKeys`), its raw bytes, in the binary
   column ``msg``, with ``key`` NULL.  Only ``(key, worker, msg)`` leaves the scan (:data:`ROUTED_SCHEMA`) — or, for an operator that
   combines (:attr:`skewlab.engine.operators.KeyedOperator.combined`; the query's combiner, passed once
   per query, not in the snapshot: source option ``route_combiner``),
   one *combined row* per (key, worker) of the partition: ``key, worker, msg, tuples`` and the operator's
   pre-aggregate of the tuples' values (:func:`combined_schema`), so the shuffle carries a row per
   distinct key of a partition instead of a row per tuple.  (Routing in a
   separate ``mapInArrow`` after the scan gives the same rows but costs a second Python stage:
   every tuple converted to Arrow by the JVM, shipped to another Python worker and converted back;
   measured ~15-20 % of a batch's wall time.)
2. ``groupBy(label of worker)`` + ``applyInPandasWithState``: the stateful operator of
   :mod:`skewlab.engine.runtimes.spark.operator`, one task and one state partition per worker
   (:mod:`skewlab.engine.runtimes.spark.labels`).

Only per-(worker, key) statistics, references to export blobs, the side rows and dead-letter samples reach the
driver; raw tuples and results never do (the workers write results to the sink).
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skewlab.engine.algorithms.grouping import Router
from skewlab.engine.algorithms.keys import fingerprint_keys, home
from skewlab.engine.runtimes.spark.messages import ControlOrder, ImportOrder, SourceSide, TouchedKeys
from skewlab.engine.runtimes.spark.state_transfer import ExportRef

__all__ = [
    "ROUTED_SCHEMA",
    "ROUTED_FIELD_SCHEMA",
    "VALUE_KINDS",
    "ROUTED_VALUES_SCHEMA",
    "RoutingSnapshot",
    "combined_schema",
    "combiner_bytes",
    "control_payloads",
    "make_router",
    "touch_rows",
]

#: routed rows, two kinds told apart by ``msg``: a *data row* (a routed tuple, or a combined row) has its
#: ``key``, ``worker`` in ``[0, n)`` and ``msg`` NULL; a *message row* for worker ``w`` has ``key`` NULL,
#: ``worker = w`` (the same label as ``w``'s data rows, so the same task and state partition) and in
#: ``msg`` the raw bytes of one message of :mod:`skewlab.engine.runtimes.spark.messages`
#: (``ControlOrder``, ``ImportOrder``, ``TouchedKeys`` or ``SourceSide``: MessagePack, no text
#: encoding).  Routed keys stay keys, messages stay bytes.  Few columns: every shuffled row pays per
#: field (Arrow → UnsafeRow, shuffle write/read, UnsafeRow → Arrow); the NULL ``msg`` of a data row
#: costs a null bit and its 8-byte slot in the row (issue 37: one column for every kind of message,
#: not one per message field).  An operator's combined columns may not take these names
#: (:data:`skewlab.engine.operators.base.ENGINE_COLUMNS`).
ROUTED_SCHEMA = "key string, worker int, msg binary"
#: routed tuples of the join operator: also each tuple's value (its position ``seq`` in its source)
ROUTED_VALUES_SCHEMA = "key string, worker int, msg binary, value long"
#: routed tuples of an operator of the records' values (``--value-field``; the source's ``value`` column)
ROUTED_FIELD_SCHEMA = "key string, worker int, msg binary, value double"
#: the value a routed tuple carries (:attr:`RoutingSnapshot.values`): none, its ``seq``, its ``value`` field
VALUE_KINDS = ("none", "seq", "field")

@dataclass
class RoutingSnapshot:
    """What the controller ships to the executors each micro-batch.

    ``router``: the grouping's :class:`~skewlab.engine.algorithms.grouping.Router` only (``controller.planner.router``):
    its planner's statistics stay on the driver.  ``partitions``: the state partitions P of the query (one per possible worker).  ``control``: per worker its :class:`~skewlab.engine.runtimes.spark.messages.ControlOrder`
    of this batch (:func:`control_payloads`); ``imports``: per worker the references to the
    export blobs it reads this batch (:mod:`skewlab.engine.runtimes.spark.state_transfer`: the
    state's bytes stay in the checkpoint's filesystem).  Only the *lead* input partition emits the control and import rows.
    """

    batch_id: int
    router: Router
    partitions: int = 0
    control: dict[int, ControlOrder] = field(default_factory=dict)
    imports: dict[int, list[ExportRef]] = field(default_factory=dict)
    #: what routed rows carry as ``value`` (:data:`VALUE_KINDS`): ``seq`` (the join operator:
    #: :data:`ROUTED_VALUES_SCHEMA`), ``field`` (the record's value: :data:`ROUTED_FIELD_SCHEMA`), ``none``
    #: (snapshots of older runs hold ``True``/``False``, which mean ``seq``/``none``)
    values: str | bool = "none"
    #: a run with split keys: the fingerprints (sorted) of the keys whose result is merged whenever
    #: they have tuples — held by a worker other than their home (``fp mod n``) after the previous
    #: batch, as the workers reported (:attr:`~skewlab.engine.runtimes.spark.messages.WorkerSummary.off_home`);
    #: a key routed away from its home in this batch is merged too (:func:`touch_rows`).  ``None``:
    #: not known (a batch after a restart, a change of n, a move of state; snapshots of older
    #: runs): every key is merged (:attr:`~skewlab.engine.runtimes.spark.messages.ControlOrder.merge_all`).
    split_keys: np.ndarray | None = None
    # The operator whose rows the source combines is fixed for the query's life and reaches the
    # source tasks once (make_router's ``combiner``), not in every batch's snapshot.  Snapshots
    # published before that carry it as the attribute ``combiner`` (pickled operator bytes, or None);
    # make_router still uses it when the query gives none, so such a batch replays as it was planned.

    def dumps(self) -> bytes:
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def loads(data: bytes) -> "RoutingSnapshot":
        return pickle.loads(data)


def control_payloads(orders: tuple[np.ndarray, np.ndarray, np.ndarray], fps: np.ndarray, workers: set[int],
                     partitions: int, *, batch: int, split: bool = False, merge_all: bool = True,
                     n_workers: int = 0) -> dict[int, ControlOrder]:
    """The :class:`~skewlab.engine.runtimes.spark.messages.ControlOrder` of ``batch`` of every worker
    that runs in it: ``workers`` (the active ones and those still holding state) plus every holder and
    target of ``orders`` (composed ``(key ids, holders, targets)``,
    :func:`skewlab.engine.control.controller.compose_orders`; ``fps``: fingerprint of every key id).  A
    holder gets ``exports`` (target → ``uint64`` array of key fingerprints), a target ``expect`` (the
    fingerprints of the keys whose state arrives in the next batch); ``split``: a run with split keys;
    ``merge_all``: all its keys' results go through the merge stage; ``n_workers``: the active
    workers n (a key's home is ``fp mod n``)."""
    keys, holders, targets = orders
    exports: dict[int, dict[int, np.ndarray]] = {}
    expect: dict[int, np.ndarray] = {}
    if keys.size:
        order = np.lexsort((keys, targets, holders))
        k, h, t = keys[order], holders[order], targets[order]
        cut = np.flatnonzero((h[1:] != h[:-1]) | (t[1:] != t[:-1])) + 1
        for lo, hi in zip(np.r_[0, cut], np.r_[cut, k.size]):
            exports.setdefault(int(h[lo]), {})[int(t[lo])] = fps[k[lo:hi]]
        order = np.lexsort((keys, targets))
        tk, kk = targets[order], keys[order]
        first = np.ones(kk.size, dtype=bool)
        first[1:] = (kk[1:] != kk[:-1]) | (tk[1:] != tk[:-1])  # a key with two holders is expected once
        tk, kk = tk[first], kk[first]
        cut = np.flatnonzero(tk[1:] != tk[:-1]) + 1
        for lo, hi in zip(np.r_[0, cut], np.r_[cut, tk.size]):
            expect[int(tk[lo])] = fps[kk[lo:hi]]
    every = set(workers) | set(exports) | set(expect)
    none = np.zeros(0, np.uint64)
    return {w: ControlOrder(int(batch), exports.get(w, {}), expect.get(w, none), bool(split), bool(merge_all),
                            int(n_workers))
            for w in sorted(every) if w < partitions}


def combiner_bytes(operator: Any) -> bytes | None:
    """``operator`` pickled for the source tasks if it combines (:attr:`KeyedOperator.combined`), else
    ``None``.  Cloudpickle, as Spark ships the handler: a user's operator registered to pickle by value
    need not be importable on the executors."""
    if getattr(operator, "combined", None) is None:
        return None
    from pyspark import cloudpickle

    return cloudpickle.dumps(operator, protocol=pickle.HIGHEST_PROTOCOL)


def combined_schema(operator: Any) -> str:
    """The DDL of the routed rows of an operator that combines: ``key, worker, msg``
    (:data:`ROUTED_SCHEMA`), ``tuples`` (the tuples a row stands for) and the operator's
    :attr:`KeyedOperator.combined` columns."""
    from pyspark.sql.pandas.types import from_arrow_type

    cols = "".join(f", `{n}` {from_arrow_type(t).simpleString()}" for n, t in operator.combined)
    return f"{ROUTED_SCHEMA}, tuples long{cols}"


def _combine_rows(operator: Any, n_workers: int, keys: list[pa.Array], workers: list[np.ndarray],
                  values: list[np.ndarray], fps: list[np.ndarray] | None = None,
                  ) -> tuple[pa.RecordBatch, np.ndarray | None]:
    """One combined row per (key, worker) of a partition's routed tuples (:func:`combined_schema`):
    the keys dictionary-encoded by Arrow, the groups ``key code * n_workers + worker`` factorized,
    the operator's :meth:`~skewlab.engine.operators.KeyedOperator.pre_aggregate` of each group.
    Returns the rows and, with ``fps`` (the tuples' fingerprints, in the order of ``keys``), the
    fingerprint of each row's key (``None`` without)."""
    import pandas as pd

    arr = keys[0] if len(keys) == 1 else pa.concat_arrays(keys)
    enc = pc.dictionary_encode(arr)
    index = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    group = index * n_workers + np.concatenate(workers)
    codes, uniq = pd.factorize(group, sort=False)
    codes = codes.astype(np.int64, copy=False)
    vals = (values[0] if len(values) == 1 else np.concatenate(values)) if values else None
    row_key = uniq // n_workers
    cols = [enc.dictionary.take(pa.array(row_key)), pa.array((uniq % n_workers).astype(np.int32)),
            pa.nulls(len(uniq), pa.binary()), pa.array(np.bincount(codes, minlength=len(uniq)).astype(np.int64))]
    names = ["key", "worker", "msg", "tuples"]
    for (name, typ), col in zip(operator.combined, operator.pre_aggregate(codes, len(uniq), vals)):
        cols.append(pa.array(col, type=typ))
        names.append(name)
    row_fps = None
    if fps is not None:
        key_fps = np.zeros(len(enc.dictionary), np.uint64)
        key_fps[index] = np.concatenate(fps)  # every tuple of a dictionary entry has the entry's fingerprint
        row_fps = key_fps[row_key]
    return pa.RecordBatch.from_arrays(cols, names=names), row_fps


def _control_order(order: ControlOrder | dict[str, Any], batch: int) -> ControlOrder:
    """A control entry of a routing snapshot as a :class:`ControlOrder`.  A route file published by
    skewlab before the typed messages holds a dict (``exports``, ``expect``, ``split``): a replay of
    its batch after an upgrade still routes with it."""
    if isinstance(order, ControlOrder):
        if order.batch != batch:
            raise RuntimeError(f"the routing snapshot of batch {batch} holds a control order of batch {order.batch}")
        return order
    return ControlOrder(int(batch), {int(t): np.asarray(k, np.uint64) for t, k in order.get("exports", {}).items()},
                        np.asarray(order.get("expect", ()), np.uint64), bool(order.get("split")))


def touch_rows(fps: np.ndarray, workers: np.ndarray, targets: Iterable[int], batch: int,
               split_keys: np.ndarray | None = None, n_workers: int = 0) -> list[tuple[int, TouchedKeys]]:
    """The touch rows of one input partition of a split-key run (:class:`TouchedKeys`).

    With ``split_keys`` (the snapshot's :attr:`RoutingSnapshot.split_keys`, ``n_workers`` the batch's
    n): one row per worker of ``targets``, all with the same fingerprints: the distinct keys of the
    partition routed away from their home (``fp mod n``) or in ``split_keys`` — the keys whose result
    the merge stage writes; a worker writes the result of every other key it received itself
    (no other worker got its tuples in this batch, none holds its state: a tuple away from home
    would have named it here, a state away from home in ``split_keys``).  Cost: the split keys
    times the workers, nothing for the keys at home.

    Without (``None``): every key merges, as below."""
    if split_keys is not None:
        distinct = np.unique(fps)
        away = np.zeros(distinct.size, dtype=bool)
        if distinct.size:
            inverse = np.searchsorted(distinct, fps)
            np.logical_or.at(away, inverse, np.asarray(workers, np.int64) != home(fps, n_workers))
            if split_keys.size:
                away |= np.isin(distinct, split_keys, assume_unique=True)
        merged = distinct[away]
        return [(w, TouchedKeys(int(batch), merged)) for w in sorted(targets)] if merged.size else []
    return _touch_rows_all(fps, workers, targets, batch)


def _touch_rows_all(fps: np.ndarray, workers: np.ndarray, targets: Iterable[int],
                    batch: int) -> list[tuple[int, TouchedKeys]]:
    """The touch rows of one input partition of a split-key run: for every worker of the batch
    (``targets``: the workers with a control order, every one that holds state), the
    :class:`~skewlab.engine.runtimes.spark.messages.TouchedKeys` of the distinct fingerprints of the
    partition's tuples (``fps``, routed to ``workers``: one entry per tuple, or per combined
    (key, worker) row, which gives the same rows) that went to other workers; none where that
    set is empty.  Every worker, not only a key's candidates under the grouping: a key's window may
    sit on a worker that is no longer one of them (a key that left the head, a move under
    ``set-workers``, a switch of grouping within the window), and this needs no knowledge of the
    grouping.  Cost: at most ``(workers - 1)`` fingerprints per distinct key of the partition."""
    distinct, inverse = np.unique(fps, return_inverse=True)
    out = []
    for w in sorted(targets):
        elsewhere = distinct[np.bincount(inverse[workers != w], minlength=distinct.size) > 0]
        if elsewhere.size:
            out.append((w, TouchedKeys(int(batch), elsewhere)))
    return out


def make_router(snapshot_bytes: bytes, max_samples: int = 5, *, lead: bool = False,
                combiner: Any = None) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Router of one input partition, applied by the source scan to its record batches (a
    ``mapInArrow``-style function; output :data:`ROUTED_SCHEMA`, or its variants with ``value``, or
    :func:`combined_schema`).

    Input columns: ``key``, ``source``, and optionally ``seq`` (position in the source's stream) and
    ``error``/``raw`` (dead letters: rows with ``error`` set are counted, sampled and dropped).
    Data rows: ``(key, worker, msg NULL)`` and, per ``snapshot.values``, ``value`` (the ``seq`` or the
    ``value`` column).  After them the *message rows* (``key`` NULL, ``msg`` the message's bytes,
    ``worker`` the worker it goes to; :data:`ROUTED_SCHEMA`): one *side row* per source seen, the
    encoded :class:`~skewlab.engine.runtimes.spark.messages.SourceSide` (the router's per-source state
    after routing, offsets, dead letters, and the snapshot's batch id: the engine refuses a batch
    routed with another batch's snapshot), to worker ``s mod n`` for source ``s``; with ``lead`` (one input partition per batch), one *control row*
    per worker of ``snapshot.control`` (its :class:`~skewlab.engine.runtimes.spark.messages.ControlOrder`)
    and one *import row* per reference of ``snapshot.imports`` (an
    :class:`~skewlab.engine.runtimes.spark.messages.ImportOrder`); when the control orders say
    ``split``, one *touch row* per worker of ``snapshot.control`` (:func:`touch_rows`).
    With ``combiner`` (the query's operator that combines, unpickled once per process by the source:
    :meth:`skewlab.engine.runtimes.spark.sources.RouteFiles.combiner_operator`; or, for a snapshot
    published before the combiner became a query setting, the operator bytes it carries), the data
    rows are combined per (key, worker) over the whole partition (:func:`_combine_rows`,
    :func:`combined_schema`) and leave after its last record batch; message rows have NULL ``tuples``
    and combined columns (and NULL ``value`` in the other variants).
    """

    def route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        snap = RoutingSnapshot.loads(snapshot_bytes)
        carry = {True: "seq", False: "none"}.get(snap.values, snap.values)
        value_type = pa.float64() if carry == "field" else pa.int64()
        router = snap.router
        n = router.n_workers
        combining = combiner
        if combining is None and getattr(snap, "combiner", None):  # a snapshot of an older checkpoint
            combining = pickle.loads(snap.combiner)
        pending: tuple[list[pa.Array], list[np.ndarray], list[np.ndarray]] = ([], [], [])
        side: dict[int, dict[str, Any]] = {}
        # a split-key run: the routed tuples' (fingerprints, workers), for the touch rows
        orders = {int(w): _control_order(o, snap.batch_id) for w, o in snap.control.items()}
        touching = any(o.split for o in orders.values())
        touched: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])

        def info_of(s: int) -> dict[str, Any]:  # the source's SourceSide fields, accumulated
            info = side.get(s)
            if info is None:
                info = side[s] = {"rows": 0, "route_seconds": 0.0, "dead_letters": {}, "consumed": -1, "first_seq": None}
            return info

        for rb in batches:
            m = rb.num_rows
            if m == 0:
                continue
            names = rb.schema.names
            sources = rb.column("source").to_numpy(zero_copy_only=False)
            seqs = rb.column("seq").to_numpy(zero_copy_only=False) if "seq" in names else None
            s0 = int(sources[0])
            # One Spark input partition is one source instance: the common case is a single source.
            single = bool((sources == s0).all())
            groups = [(s0, None)] if single else [(int(s), np.flatnonzero(sources == s)) for s in np.unique(sources)]
            for s, sel in groups:
                info = info_of(s)
                info["rows"] += m if sel is None else int(sel.size)
                if seqs is not None:
                    sq = seqs if sel is None else seqs[sel]
                    info["consumed"] = max(info["consumed"], int(sq.max()) + 1)
                    lo = int(sq.min())
                    info["first_seq"] = lo if info["first_seq"] is None else min(info["first_seq"], lo)
            if "error" in names:
                err = rb.column("error")
                if err.null_count < m:
                    bad = pc.is_valid(err)
                    bad_np = bad.to_numpy(zero_copy_only=False)
                    raw = rb.column("raw").to_pylist() if "raw" in names else [None] * m
                    errs = err.to_pylist()
                    for i in np.flatnonzero(bad_np):
                        d = info_of(int(sources[i]))["dead_letters"].setdefault(errs[i], [0, []])
                        d[0] += 1
                        if len(d[1]) < max_samples:
                            d[1].append(raw[i] if raw[i] is not None else "")
                    rb = rb.filter(pc.invert(bad))
                    sources = sources[~bad_np]
                    m = rb.num_rows
                    if m == 0:
                        continue
                    s0 = int(sources[0])
                    single = bool((sources == s0).all())
                    groups = [(s0, None)] if single else [(int(s), np.flatnonzero(sources == s)) for s in np.unique(sources)]
            keys = rb.column("key")
            fps = fingerprint_keys(keys)
            if single:
                t1 = time.perf_counter()
                workers = np.asarray(router.route(fps, s0 % router.n_sources), dtype=np.int32)
                side[s0]["route_seconds"] += time.perf_counter() - t1
            else:
                workers = np.empty(m, dtype=np.int32)
                for s, sel in groups:
                    t1 = time.perf_counter()
                    workers[sel] = router.route(fps[sel], s % router.n_sources)
                    side[s]["route_seconds"] += time.perf_counter() - t1
            if touching:
                touched[0].append(fps)
                touched[1].append(workers)
            if combining is not None:
                pending[0].append(keys)
                pending[1].append(workers)
                if combining.needs_value:
                    pending[2].append(rb.column("value").to_numpy(zero_copy_only=False).astype(np.float64, copy=False))
                continue
            cols, names_out = [keys, pa.array(workers, type=pa.int32()), pa.nulls(m, pa.binary())], ["key", "worker", "msg"]
            if carry != "none":
                cols.append(rb.column("value" if carry == "field" else "seq").cast(value_type))
                names_out.append("value")
            yield pa.RecordBatch.from_arrays(cols, names=names_out)
        if pending[0]:
            combined, row_fps = _combine_rows(combining, n, *pending, fps=touched[0] if touching else None)
            if touching:  # the touch rows from the combined rows: one per (key, worker), not per tuple
                touched = ([row_fps], [combined.column("worker").to_numpy()])
            yield combined
        messages: list[tuple[bytes, int]] = []  # (message bytes, worker) of the message rows
        for s in sorted(side):
            info = side[s]
            dead = {r: (c, tuple(x)) for r, (c, x) in info["dead_letters"].items()}
            msg = SourceSide(s, snap.batch_id, info["rows"], info["consumed"], info["first_seq"], info["route_seconds"],
                             dead, SourceSide.pack_router_state(router.source_state(s % router.n_sources)))
            messages.append((msg.encode(), s % n))
        if touched[0]:
            merge_all = any(o.merge_all for o in orders.values())
            messages.extend((msg.encode(), w) for w, msg in
                           touch_rows(np.concatenate(touched[0]), np.concatenate(touched[1]), orders, snap.batch_id,
                                      None if merge_all else getattr(snap, "split_keys", None), n))
        if lead:
            for w, order in sorted(orders.items()):
                messages.append((order.encode(), w))
            for w, refs in sorted(snap.imports.items()):
                messages.extend((ImportOrder(ref).encode(), w) for ref in refs)
        if messages:
            k = len(messages)
            cols = [pa.nulls(k, pa.string()), pa.array([w for _, w in messages], pa.int32()),
                    pa.array([b for b, _ in messages], pa.binary())]
            names_out = ["key", "worker", "msg"]
            if combining is not None:
                cols.append(pa.nulls(k, pa.int64()))
                names_out.append("tuples")
                for name, typ in combining.combined:
                    cols.append(pa.nulls(k, typ))
                    names_out.append(name)
            elif carry != "none":
                cols.append(pa.nulls(k, value_type))
                names_out.append("value")
            yield pa.RecordBatch.from_arrays(cols, names=names_out)

    return route
