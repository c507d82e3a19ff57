"""The keyed topology inside Spark: route per input partition, shuffle by worker, aggregate per worker.

Per micro-batch the driver builds a :class:`RoutingSnapshot` (the grouping object: routing table,
heavy hitters and their d, per-source load estimates, pickled — a few KB to a few hundred KB) and
the executors run

1. :func:`make_router` in ``mapInArrow`` over the source DataFrame: every input partition is one
   upstream source instance; its tuples are fingerprinted (mmh3 per distinct key, cached per Python
   worker) and routed in stream order by ``grouping.route(fps, source)`` — exactly the per-source
   semantics of the local runtime.  Each partition also emits one *state row* carrying the source's
   updated local state (``grouping.source_state``) back to the driver.
2. ``repartitionById(n_workers, worker)``: one Spark partition = one worker.
3. :func:`make_worker` in ``mapInArrow``: the keyed operator of a worker — per-key counts of the
   interval (the windowed count/join state lives with the controller, which merges these
   aggregates into per-worker keyed state) plus the worker's processing time.  State rows pass
   through.

Only per-(worker, key) aggregates, the side rows and dead-letter samples reach the driver; raw
tuples never do.
"""

from __future__ import annotations

import pickle
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.grouping import Grouping
from engine.keys import fingerprint

__all__ = [
    "AGG_SCHEMA",
    "ROUTED_SCHEMA",
    "RoutingSnapshot",
    "make_router",
    "make_worker",
]

#: routed tuples (and state rows: key NULL, state set)
ROUTED_SCHEMA = "key string, worker int, source int, state binary"
#: per-(worker, key) aggregates of one interval; state rows (key NULL) and one timing row per worker
AGG_SCHEMA = "worker int, key string, count long, source int, state binary, seconds double"

_FP_CACHE: "OrderedDict[str, int]" = OrderedDict()
_FP_CACHE_MAX = 1_000_000


def fingerprint_keys(keys: pa.Array) -> np.ndarray:
    """Fingerprints of a string column; mmh3 once per distinct key, LRU-cached per process."""
    if len(keys) == 0:
        return np.zeros(0, dtype=np.uint64)
    enc = pc.dictionary_encode(keys).combine_chunks() if isinstance(keys, pa.ChunkedArray) else pc.dictionary_encode(keys)
    uniques = enc.dictionary.to_pylist()
    cache = _FP_CACHE
    fps_u = np.empty(len(uniques), dtype=np.uint64)
    for i, k in enumerate(uniques):
        fp = cache.get(k)
        if fp is None:
            fp = fingerprint(k)
            cache[k] = fp
            if len(cache) > _FP_CACHE_MAX:
                cache.popitem(last=False)
        fps_u[i] = fp
    return fps_u[enc.indices.to_numpy(zero_copy_only=False)]


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


def make_router(snapshot_bytes: bytes, max_samples: int = 5) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow`` function routing one input partition.

    Input columns: ``key``, ``source``, and optionally ``seq`` (position in the source's stream) and
    ``error``/``raw`` (dead letters: rows with ``error`` set are counted, sampled and dropped).
    Besides the routed rows it emits one *side row* per source seen (key NULL, ``state`` set) with a
    pickled dict: ``source_state`` (the grouping's per-source state after routing), ``consumed``
    (max ``seq`` + 1), ``first_seq``, ``rows``, ``route_seconds`` and ``dead_letters``
    (``{reason: (count, [samples])}``).
    """

    def route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        snap = RoutingSnapshot.loads(snapshot_bytes)
        grouping = snap.grouping
        n = grouping.n_workers
        side: dict[int, dict[str, Any]] = {}
        for rb in batches:
            if rb.num_rows == 0:
                continue
            names = rb.schema.names
            sources = rb.column("source").to_numpy(zero_copy_only=False).astype(np.int64)
            seqs = rb.column("seq").to_numpy(zero_copy_only=False).astype(np.int64) if "seq" in names else None
            for s in np.unique(sources):
                info = side.setdefault(int(s), {"rows": 0, "route_seconds": 0.0, "dead_letters": {},
                                                "consumed": -1, "first_seq": None})
                sel = sources == s
                info["rows"] += int(sel.sum())
                if seqs is not None:
                    info["consumed"] = max(info["consumed"], int(seqs[sel].max()) + 1)
                    lo = int(seqs[sel].min())
                    info["first_seq"] = lo if info["first_seq"] is None else min(info["first_seq"], lo)
            if "error" in names:
                err = rb.column("error")
                bad = pc.is_valid(err)
                if pc.any(bad).as_py():
                    bad_np = bad.to_numpy(zero_copy_only=False)
                    raw = rb.column("raw").to_pylist() if "raw" in names else [None] * rb.num_rows
                    errs = err.to_pylist()
                    for i in np.flatnonzero(bad_np):
                        d = side[int(sources[i])]["dead_letters"].setdefault(errs[i], [0, []])
                        d[0] += 1
                        if len(d[1]) < max_samples:
                            d[1].append(raw[i] if raw[i] is not None else "")
                    rb = rb.filter(pc.invert(bad))
                    sources = sources[~bad_np]
                    if rb.num_rows == 0:
                        continue
            keys = rb.column("key")
            fps = fingerprint_keys(keys)
            workers = np.empty(rb.num_rows, dtype=np.int64)
            for s in np.unique(sources):
                sel = np.flatnonzero(sources == s)
                t1 = time.perf_counter()
                workers[sel] = grouping.route(fps[sel], int(s) % grouping.n_sources)
                side[int(s)]["route_seconds"] += time.perf_counter() - t1
            yield pa.RecordBatch.from_arrays(
                [keys, pa.array(workers.astype(np.int32)), pa.array(sources.astype(np.int32)),
                 pa.nulls(rb.num_rows, pa.binary())],
                names=["key", "worker", "source", "state"],
            )
        for s, info in sorted(side.items()):
            info["source_state"] = grouping.source_state(s % grouping.n_sources)
            blob = pickle.dumps(info, protocol=pickle.HIGHEST_PROTOCOL)
            yield pa.RecordBatch.from_arrays(
                [pa.nulls(1, pa.string()), pa.array([s % n], pa.int32()), pa.array([s], pa.int32()),
                 pa.array([blob], pa.binary())],
                names=["key", "worker", "source", "state"],
            )

    return route


def make_worker() -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow`` function of one worker partition: per-key counts + pass-through state rows."""

    def work(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        started = time.perf_counter()
        tables = []
        worker = -1
        for rb in batches:
            if rb.num_rows == 0:
                continue
            t = pa.Table.from_batches([rb])
            state_mask = pc.is_valid(t.column("state"))
            if pc.any(state_mask).as_py():
                st = t.filter(state_mask)
                yield pa.RecordBatch.from_arrays(
                    [st.column("worker").combine_chunks(), pa.nulls(st.num_rows, pa.string()),
                     pa.array(np.zeros(st.num_rows, np.int64)), st.column("source").combine_chunks(),
                     st.column("state").combine_chunks(), pa.nulls(st.num_rows, pa.float64())],
                    names=["worker", "key", "count", "source", "state", "seconds"],
                )
                t = t.filter(pc.invert(state_mask))
            if t.num_rows:
                worker = int(t.column("worker")[0].as_py())
                tables.append(t.select(["key"]))
        if not tables:
            return
        agg = pa.concat_tables(tables).group_by("key").aggregate([("key", "count")])
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


def unpack_aggregates(table: pa.Table) -> dict[str, Any]:
    """Split the collected aggregate table into counts, per-source states and worker timings."""
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
    return {
        "workers": data.column("worker").to_numpy().astype(np.int64),
        "keys": data.column("key").to_pylist(),
        "counts": data.column("count").to_numpy().astype(np.int64),
        "states": sides,
        "dead_letters": dead,
        "seconds": {int(w): float(x) for w, x in zip(timing.column("worker").to_pylist(), timing.column("seconds").to_pylist())},
    }
