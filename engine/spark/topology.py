"""The keyed topology inside Spark: route per input partition, shuffle by worker, aggregate per worker.

Per micro-batch the driver builds a :class:`RoutingSnapshot` (the grouping object: routing table,
heavy hitters and their d, per-source load estimates, pickled — a few KB to a few hundred KB) and
the executors run

1. :func:`make_router` in ``mapInArrow`` over the source DataFrame: every input partition is one
   upstream source instance; its tuples are fingerprinted (:func:`engine.keys.fingerprint_keys`: a numba
   MurmurHash3 over the Arrow buffers, bit-identical to :func:`engine.keys.fingerprint`) and
   routed in stream order by ``grouping.route(fps, source)`` — exactly the per-source semantics
   of the local runtime.  Each partition also emits one *side row* per source carrying the
   source's updated local state (``grouping.source_state``), its offsets and dead letters back to
   the driver.  Only ``(key, worker)`` is shuffled (:data:`ROUTED_SCHEMA`).
2. ``repartitionById(n_workers, worker)``: one Spark partition = one worker.
3. :func:`make_worker` in ``mapInArrow``: the keyed operator of a worker — per-key counts of the
   interval (the windowed count/join state lives with the controller, which merges these
   aggregates into per-worker keyed state) plus the worker's processing time.  Side rows become
   state rows of the output.

Only per-(worker, key) aggregates, the side rows and dead-letter samples reach the driver; raw
tuples never do.
"""

from __future__ import annotations

import base64
import pickle
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.grouping import Grouping
from engine.keys import fingerprint_keys

__all__ = [
    "AGG_SCHEMA",
    "ROUTED_SCHEMA",
    "ROUTER_INPUT",
    "RoutingSnapshot",
    "VocabIndex",
    "encode_side",
    "make_router",
    "make_worker",
]

#: routed tuples: data rows have ``worker`` in ``[0, n)``; a *side row* of source ``s`` has
#: ``worker = n + s mod n`` (same partition as ``s mod n`` under ``repartitionById``'s modulo) and its
#: pickled side dict, base64-encoded, in ``key``.  Two columns only: every shuffled row pays per field
#: (Arrow → UnsafeRow, shuffle write/read, UnsafeRow → Arrow), and a NULL ``source``/``state`` on
#: every data row cost ~16 bytes and two field writes per tuple for one side row per source.
ROUTED_SCHEMA = "key string, worker int"
#: source columns :func:`make_router` reads (others, e.g. Kafka's ``ts``, are not shipped to it)
ROUTER_INPUT = ("key", "source", "seq", "error", "raw")
#: per-(worker, key) aggregates of one interval; state rows (key NULL) and one timing row per worker
AGG_SCHEMA = "worker int, key string, count long, source int, state binary, seconds double"

@dataclass
class RoutingSnapshot:
    """What the controller ships to the executors each micro-batch."""

    batch_id: int
    grouping: Grouping

    def dumps(self) -> bytes:
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def loads(data: bytes) -> "RoutingSnapshot":
        return pickle.loads(data)


def encode_side(info: dict[str, Any]) -> str:
    """A side dict as the ``key`` text of a side row (pickle, base64: Arrow strings are UTF-8)."""
    return base64.b64encode(pickle.dumps(info, protocol=pickle.HIGHEST_PROTOCOL)).decode("ascii")


def make_router(snapshot_bytes: bytes, max_samples: int = 5) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow`` function routing one input partition (output :data:`ROUTED_SCHEMA`).

    Input columns: ``key``, ``source``, and optionally ``seq`` (position in the source's stream) and
    ``error``/``raw`` (dead letters: rows with ``error`` set are counted, sampled and dropped).
    Data rows: ``(key, worker)``.  After them, one *side row* per source seen (``worker = n + s mod
    n``, ``key`` = :func:`encode_side` of a dict with ``source``, ``source_state`` (the grouping's
    per-source state after routing), ``consumed`` (max ``seq`` + 1), ``first_seq``, ``rows``,
    ``route_seconds`` and ``dead_letters`` (``{reason: (count, [samples])}``)).
    """

    def route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        snap = RoutingSnapshot.loads(snapshot_bytes)
        grouping = snap.grouping
        n = grouping.n_workers
        side: dict[int, dict[str, Any]] = {}

        def info_of(s: int) -> dict[str, Any]:
            info = side.get(s)
            if info is None:
                info = side[s] = {"source": s, "rows": 0, "route_seconds": 0.0, "dead_letters": {},
                                  "consumed": -1, "first_seq": None}
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
                workers = np.asarray(grouping.route(fps, s0 % grouping.n_sources), dtype=np.int32)
                side[s0]["route_seconds"] += time.perf_counter() - t1
            else:
                workers = np.empty(m, dtype=np.int32)
                for s, sel in groups:
                    t1 = time.perf_counter()
                    workers[sel] = grouping.route(fps[sel], s % grouping.n_sources)
                    side[s]["route_seconds"] += time.perf_counter() - t1
            yield pa.RecordBatch.from_arrays([keys, pa.array(workers, type=pa.int32())], names=["key", "worker"])
        if side:
            order = sorted(side)
            for s in order:
                side[s]["source_state"] = grouping.source_state(s % grouping.n_sources)
            yield pa.RecordBatch.from_arrays(
                [pa.array([encode_side(side[s]) for s in order], pa.string()),
                 pa.array([n + s % n for s in order], pa.int32())],
                names=["key", "worker"],
            )

    return route


def make_worker(n_workers: int) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow`` function of one worker partition (input :data:`ROUTED_SCHEMA`, output
    :data:`AGG_SCHEMA`): per-key counts of the data rows (``worker < n_workers``) and the side rows
    (``worker >= n_workers``) decoded into state rows (``source``, ``state`` = the pickled dict)."""
    n = int(n_workers)

    def work(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        started = time.perf_counter()
        keys = []
        worker = -1
        for rb in batches:
            if rb.num_rows == 0:
                continue
            wcol = rb.column("worker")
            if pc.max(wcol).as_py() >= n:
                is_side = pc.greater_equal(wcol, n)
                st = rb.filter(is_side)
                infos = [base64.b64decode(k) for k in st.column("key").to_pylist()]
                srcs = [int(pickle.loads(b)["source"]) for b in infos]
                m = len(infos)
                yield pa.RecordBatch.from_arrays(
                    [pa.array(st.column("worker").to_numpy(zero_copy_only=False).astype(np.int32) - n, pa.int32()),
                     pa.nulls(m, pa.string()),
                     pa.array(np.zeros(m, np.int64)), pa.array(srcs, pa.int32()), pa.array(infos, pa.binary()),
                     pa.nulls(m, pa.float64())],
                    names=["worker", "key", "count", "source", "state", "seconds"],
                )
                rb = rb.filter(pc.invert(is_side))
                if rb.num_rows == 0:
                    continue
            worker = int(rb.column("worker")[0].as_py())
            keys.append(rb.column("key"))
        if not keys:
            return
        agg = pa.table({"key": pa.chunked_array(keys, pa.string())}).group_by("key").aggregate([("key", "count")])
        m = agg.num_rows
        yield pa.RecordBatch.from_arrays(
            [pa.array(np.full(m, worker, np.int32)), agg.column("key").combine_chunks(),
             agg.column("key_count").combine_chunks().cast(pa.int64()), pa.nulls(m, pa.int32()),
             pa.nulls(m, pa.binary()), pa.nulls(m, pa.float64())],
            names=["worker", "key", "count", "source", "state", "seconds"],
        )
        yield pa.RecordBatch.from_arrays(
            [pa.array([worker], pa.int32()), pa.nulls(1, pa.string()), pa.array([0], pa.int64()),
             pa.nulls(1, pa.int32()), pa.nulls(1, pa.binary()),
             pa.array([time.perf_counter() - started], pa.float64())],
            names=["worker", "key", "count", "source", "state", "seconds"],
        )

    return work


def unpack_aggregates(table: pa.Table, key_list: bool = True) -> dict[str, Any]:
    """Split the collected aggregate table into counts, per-source states and worker timings.

    ``key_array``: the keys of the count rows as one Arrow string array; ``keys`` the same as a
    Python list (only with ``key_list``: the engine encodes ``key_array`` with :class:`VocabIndex`
    and never needs the Python strings of known keys).
    """
    key_valid = pc.is_valid(table.column("key"))
    data = table.filter(key_valid)
    state = table.filter(pc.is_valid(table.column("state")))
    timing = table.filter(pc.is_valid(table.column("seconds")))
    sides = {int(s): pickle.loads(b) for s, b in zip(state.column("source").to_pylist(), state.column("state").to_pylist())}
    dead: dict[str, list] = {}
    for info in sides.values():
        for reason, (count, samples) in info.get("dead_letters", {}).items():
            d = dead.setdefault(reason, [0, []])
            d[0] += count
            d[1].extend(samples[: max(0, 5 - len(d[1]))])
    key_array = data.column("key").combine_chunks() if data.num_rows else pa.array([], pa.string())
    out = {
        "workers": data.column("worker").to_numpy().astype(np.int64),
        "key_array": key_array,
        "counts": data.column("count").to_numpy().astype(np.int64),
        "states": sides,
        "dead_letters": dead,
        "seconds": {int(w): float(x) for w, x in zip(timing.column("worker").to_pylist(), timing.column("seconds").to_pylist())},
    }
    if key_list:
        out["keys"] = key_array.to_pylist()
    return out


class VocabIndex:
    """Driver-side, vectorised ``Vocabulary.encode`` of an Arrow string column.

    ``Vocabulary.encode`` looks every key up in a Python dict (one ``str`` object per key: ~0.1 s
    per 1M-tuple batch).  This keeps an Arrow copy of ``vocab.names`` (ids are positions: names
    are only ever appended) and resolves a batch with one ``pyarrow.compute.index_in`` (a C++ hash
    lookup); only keys not in the vocabulary go through ``vocab.encode``, in their order of first
    appearance, so ids are exactly those of ``vocab.encode(keys.to_pylist())``.  Not part of any
    snapshot: rebuilt from the vocabulary when it is a different object (restore) or shrank.
    """

    def __init__(self) -> None:
        self._vocab: Any = None
        self._names = pa.array([], pa.string())

    def _sync(self, vocab: Any) -> None:
        names = vocab.names
        if vocab is not self._vocab or len(self._names) > len(names):
            self._vocab = vocab
            self._names = pa.array(names, pa.string())
        elif len(self._names) < len(names):
            self._names = pa.concat_arrays([self._names, pa.array(names[len(self._names):], pa.string())])

    def encode(self, vocab: Any, keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
        if isinstance(keys, pa.ChunkedArray):
            keys = keys.combine_chunks()
        if len(keys) == 0:
            return np.zeros(0, dtype=np.int64)
        self._sync(vocab)
        idx = pc.index_in(keys, value_set=self._names)
        ids = pc.fill_null(idx, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        if idx.null_count:
            missing = ids < 0
            ids[missing] = vocab.encode(keys.filter(pa.array(missing)).to_pylist())
            self._sync(vocab)
        return ids
