"""The keyed topology inside Spark: route per input partition, group by worker, keyed state per worker.

Per micro-batch the driver builds a :class:`RoutingSnapshot` (the grouping object: routing table,
heavy hitters and their d, per-source load estimates, pickled — a few KB to a few MB — plus the
batch's migration orders and the state blobs to import) and publishes it for the batch
(:class:`engine.spark.sources.RouteFiles`); the executors run

1. :func:`make_router` inside every source scan (:mod:`engine.spark.sources`, option ``route_dir``):
   every input partition is one upstream source instance; its tuples are fingerprinted
   (:func:`engine.keys.fingerprint_keys`: a numba MurmurHash3 over the Arrow buffers,
   bit-identical to :func:`engine.keys.fingerprint`) and routed in stream order by
   ``grouping.route(fps, source)`` — exactly the per-source semantics of the local runtime.  Each
   partition also emits one *side row* per source carrying the source's updated local state
   (``grouping.source_state``), its offsets, dead letters and the batch whose snapshot it used back
   to the driver; the batch's *lead* partition also emits the control and import rows of every
   worker.  Only ``(key, worker)`` leaves the scan (:data:`ROUTED_SCHEMA`).  (Routing in a
   separate ``mapInArrow`` after the scan gives the same rows but costs a second Python stage:
   every tuple converted to Arrow by the JVM, shipped to another Python worker and converted back;
   measured ~15-20 % of a batch's wall time.)
2. ``groupBy(label of worker)`` + ``applyInPandasWithState``: the stateful operator of
   :mod:`engine.spark.operator`, one task and one state partition per worker
   (:mod:`engine.spark.labels`).

Only per-(worker, key) statistics, export blobs, the side rows and dead-letter samples reach the
driver; raw tuples and results never do (the workers write results to the sink).
"""

from __future__ import annotations

import base64
import pickle
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from engine.grouping import Grouping
from engine.keys import fingerprint_keys

__all__ = [
    "ROUTED_SCHEMA",
    "ROUTED_VALUES_SCHEMA",
    "RoutingSnapshot",
    "VocabIndex",
    "control_payloads",
    "encode_side",
    "make_router",
]

#: routed tuples: data rows have ``worker`` in ``[0, n)``; a *special row* for worker ``w`` (side,
#: control, import) has ``worker = P + w`` (the same label, so the same task and state partition) and
#: its pickled dict, base64-encoded, in ``key``.  Two columns only: every shuffled row pays per field
#: (Arrow → UnsafeRow, shuffle write/read, UnsafeRow → Arrow), and a NULL ``source``/``state`` on
#: every data row cost ~16 bytes and two field writes per tuple for one side row per source.
ROUTED_SCHEMA = "key string, worker int"
#: routed tuples of the join operator: also each tuple's value (its position ``seq`` in its source)
ROUTED_VALUES_SCHEMA = "key string, worker int, value long"

@dataclass
class RoutingSnapshot:
    """What the controller ships to the executors each micro-batch.

    ``partitions``: the state partitions P of the query (one per possible worker; special rows go to
    ``P + w``).  ``control``: per worker the instructions of this batch (``exports``: target → keys,
    ``expect``: keys whose state arrives next batch); ``imports``: per worker the export blobs it
    receives this batch.  Only the *lead* input partition emits the control and import rows.
    """

    batch_id: int
    grouping: Grouping
    partitions: int = 0
    control: dict[int, dict[str, Any]] = field(default_factory=dict)
    imports: dict[int, list[bytes]] = field(default_factory=dict)
    values: bool = False  # the join operator: routed rows carry each tuple's value (ROUTED_VALUES_SCHEMA)

    def dumps(self) -> bytes:
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def loads(data: bytes) -> "RoutingSnapshot":
        return pickle.loads(data)


def control_payloads(orders: tuple[np.ndarray, np.ndarray, np.ndarray], names: list[str], workers: set[int],
                     partitions: int) -> dict[int, dict[str, Any]]:
    """Control payload of every worker that runs in a batch: ``workers`` (the active ones and those
    still holding state) plus every holder and target of ``orders`` (composed ``(key ids, holders,
    targets)``, :func:`engine.controller.compose_orders`).  A holder gets ``exports`` (target → key
    names), a target ``expect`` (key names whose state arrives in the next batch)."""
    keys, holders, targets = orders
    exports: dict[int, dict[int, list[str]]] = {}
    expect: dict[int, list[str]] = {}
    if keys.size:
        order = np.lexsort((keys, targets, holders))
        k, h, t = keys[order], holders[order], targets[order]
        cut = np.flatnonzero((h[1:] != h[:-1]) | (t[1:] != t[:-1])) + 1
        for lo, hi in zip(np.r_[0, cut], np.r_[cut, k.size]):
            exports.setdefault(int(h[lo]), {})[int(t[lo])] = [names[i] for i in k[lo:hi].tolist()]
        order = np.lexsort((keys, targets))
        tk, kk = targets[order], keys[order]
        first = np.ones(kk.size, dtype=bool)
        first[1:] = (kk[1:] != kk[:-1]) | (tk[1:] != tk[:-1])  # a key with two holders is expected once
        tk, kk = tk[first], kk[first]
        cut = np.flatnonzero(tk[1:] != tk[:-1]) + 1
        for lo, hi in zip(np.r_[0, cut], np.r_[cut, tk.size]):
            expect[int(tk[lo])] = [names[i] for i in kk[lo:hi].tolist()]
    every = set(workers) | set(exports) | set(expect)
    return {w: {"exports": exports.get(w, {}), "expect": expect.get(w, [])} for w in sorted(every) if w < partitions}


def encode_side(info: dict[str, Any]) -> str:
    """A side dict as the ``key`` text of a side row (pickle, base64: Arrow strings are UTF-8)."""
    return base64.b64encode(pickle.dumps(info, protocol=pickle.HIGHEST_PROTOCOL)).decode("ascii")


def make_router(snapshot_bytes: bytes, max_samples: int = 5, *, lead: bool = False) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Router of one input partition, applied by the source scan to its record batches (a
    ``mapInArrow``-style function; output :data:`ROUTED_SCHEMA`).

    Input columns: ``key``, ``source``, and optionally ``seq`` (position in the source's stream) and
    ``error``/``raw`` (dead letters: rows with ``error`` set are counted, sampled and dropped).
    Data rows: ``(key, worker)``.  After them, one *side row* per source seen (``worker = n + s mod
    n``, ``key`` = :func:`encode_side` of a dict with ``source``, ``source_state`` (the grouping's
    per-source state after routing), ``consumed`` (max ``seq`` + 1), ``first_seq``, ``rows``,
    ``route_seconds``, ``dead_letters`` (``{reason: (count, [samples])}``) and ``route_batch`` (the
    snapshot's batch id: the engine refuses a batch routed with another batch's snapshot)).
    Special rows go to ``worker = P + w`` (``P`` = ``snapshot.partitions``, else ``n``): side rows of
    source ``s`` to ``w = s mod n``; with ``lead`` (one input partition per batch), one *control row*
    per worker of ``snapshot.control`` (``{"type": "control", "batch", "exports", "expect"}``) and one
    *import row* per blob of ``snapshot.imports`` (``{"type": "import", "blob"}``).
    """

    def route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        snap = RoutingSnapshot.loads(snapshot_bytes)
        grouping = snap.grouping
        n = grouping.n_workers
        base = snap.partitions or n
        side: dict[int, dict[str, Any]] = {}

        def info_of(s: int) -> dict[str, Any]:
            info = side.get(s)
            if info is None:
                info = side[s] = {"source": s, "rows": 0, "route_seconds": 0.0, "dead_letters": {},
                                  "consumed": -1, "first_seq": None, "route_batch": snap.batch_id}
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
            cols, names_out = [keys, pa.array(workers, type=pa.int32())], ["key", "worker"]
            if snap.values:
                cols.append(rb.column("seq").cast(pa.int64()))
                names_out.append("value")
            yield pa.RecordBatch.from_arrays(cols, names=names_out)
        special: list[tuple[str, int]] = []
        for s in sorted(side):
            side[s]["source_state"] = grouping.source_state(s % grouping.n_sources)
            special.append((encode_side(side[s]), base + s % n))
        if lead:
            for w, payload in sorted(snap.control.items()):
                special.append((encode_side({"type": "control", "batch": snap.batch_id, **payload}), base + w))
            for w, blobs in sorted(snap.imports.items()):
                special.extend((encode_side({"type": "import", "blob": b}), base + w) for b in blobs)
        if special:
            cols = [pa.array([k for k, _ in special], pa.string()), pa.array([w for _, w in special], pa.int32())]
            names_out = ["key", "worker"]
            if snap.values:
                cols.append(pa.nulls(len(special), pa.int64()))
                names_out.append("value")
            yield pa.RecordBatch.from_arrays(cols, names=names_out)

    return route


# --------------------------------------------------------------------------------------------- VocabIndex


@njit(cache=True, inline="always")
def _word(data, start, length, k):  # pragma: no cover - compiled
    """Bytes ``8k..8k+7`` of the string ``data[start:start+length]`` as a little-endian uint64 (zero-padded)."""
    w = np.uint64(0)
    for t in range(8):
        p = k * 8 + t
        if p < length:
            w |= np.uint64(data[start + p]) << np.uint64(8 * t)
    return w


@njit(cache=True)
def _vocab_insert(table, fps, names, name_offs, start, stop):  # pragma: no cover - compiled
    """Insert ids ``start..stop-1`` into the open-addressing ``table`` (slot = fp & mask, linear probing).

    An entry is 4 words: fingerprint, ``id + 1 | byte length << 32`` (0 = empty slot), and the first 16
    bytes of the name, so most lookups are confirmed from the entry's own cache line."""
    mask = table.shape[0] - 1
    for i in range(start, stop):
        s = np.int64(fps[i] & np.uint64(mask))
        while table[s, 1] != 0:
            s = (s + 1) & mask
        a = name_offs[i]
        ln = name_offs[i + 1] - a
        table[s, 0] = fps[i]
        table[s, 1] = np.uint64(i + 1) | (np.uint64(ln) << np.uint64(32))
        table[s, 2] = _word(names, a, ln, 0)
        table[s, 3] = _word(names, a, ln, 1)


@njit(cache=True)
def _vocab_lookup(table, names, name_offs, key_fps, data, offs, valid, out):  # pragma: no cover - compiled
    """``out[j]`` = id of key ``j`` (bytes ``data[offs[j]:offs[j+1]]``, fingerprint ``key_fps[j]``) or -1.

    A candidate must have the same fingerprint, byte length and bytes (the first 16 from the entry,
    the rest from ``names``), so colliding fingerprints never merge two keys.  Returns the number of -1."""
    mask = table.shape[0] - 1
    missing = 0
    for j in range(out.size):
        res = -1
        if valid[j]:
            fp = key_fps[j]
            a = np.int64(offs[j])
            ln = np.int64(offs[j + 1]) - a
            w0 = _word(data, a, ln, 0)
            w1 = _word(data, a, ln, 1)
            s = np.int64(fp & np.uint64(mask))
            while True:
                meta = table[s, 1]
                if meta == 0:
                    break
                if (table[s, 0] == fp and (meta >> np.uint64(32)) == np.uint64(ln)
                        and table[s, 2] == w0 and table[s, 3] == w1):
                    i = np.int64(meta & np.uint64(0xFFFFFFFF)) - 1
                    same = True
                    if ln > 16:
                        b = name_offs[i]
                        for t in range(16, ln):
                            if names[b + t] != data[a + t]:
                                same = False
                                break
                    if same:
                        res = i
                        break
                s = (s + 1) & mask
        out[j] = res
        if res < 0:
            missing += 1
    return missing


def _utf8_of(names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 bytes of ``names`` concatenated and their byte lengths (``surrogatepass``: a name that is
    not valid UTF-8 gets bytes no Arrow string has, so it is simply never matched)."""
    try:
        arr = pa.array(names, pa.large_string())
    except (pa.ArrowException, UnicodeError):
        enc = [s.encode("utf-8", "surrogatepass") for s in names]
        return np.frombuffer(b"".join(enc), dtype=np.uint8), np.fromiter(map(len, enc), np.int64, len(enc))
    _, obuf, dbuf = arr.buffers()[:3]
    offs = np.frombuffer(obuf, dtype=np.int64)[: len(names) + 1]
    data = np.frombuffer(dbuf, dtype=np.uint8)[offs[0]: offs[-1]] if dbuf is not None else np.zeros(0, np.uint8)
    return data, np.diff(offs)


class VocabIndex:
    """Driver-side, vectorised ``Vocabulary.encode`` of an Arrow string column.

    ``Vocabulary.encode`` looks every key up in a Python dict (one ``str`` object per key: ~0.1 s per
    1M-tuple batch).  The first vectorised version used ``pyarrow.compute.index_in`` against an Arrow
    copy of the names, which builds a hash table of the whole value set on *every* call and re-copies
    the names whenever keys are added.  This index instead keeps across batches (issue #4):

    * the vocabulary's names as one UTF-8 byte buffer plus offsets (ids are positions: names are only
      ever appended, so new names are appended, never rewritten);
    * an open-addressing hash table keyed by the vocabulary's own fingerprints (``vocab.fps``:
      MurmurHash3, uniform bits; load factor <= 1/2, linear probing, doubled and rebuilt when full).
      An entry holds the fingerprint, id, byte length and the first 16 name bytes (32 bytes: one
      cache line access confirms most keys; the table is random-accessed once per key, so memory
      latency, not arithmetic, is the cost — this layout measured ~1.5x faster than id-only slots).

    A batch is resolved by :func:`engine.keys.fingerprint_keys` (numba MurmurHash3 over the Arrow
    buffers) and one numba probe per key that confirms the match byte for byte, so fingerprint
    collisions cannot merge keys.  Only keys not in the vocabulary (and NULLs) go through
    ``vocab.encode``, in their order of first appearance, so ids are exactly those of
    ``vocab.encode(keys.to_pylist())``.  Not part of any snapshot: rebuilt from the vocabulary when it
    is a different object (restore) or shrank.  Ids must stay below 2**32 - 1.
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._vocab: Any = None
        self._n = 0
        self._names = np.zeros(0, dtype=np.uint8)  # UTF-8 of all names; capacity grows by doubling
        self._offs = np.zeros(1, dtype=np.int64)  # name i is _names[_offs[i]:_offs[i + 1]]
        self._table = np.zeros((1024, 4), dtype=np.uint64)

    def _sync(self, vocab: Any) -> None:
        names = vocab.names
        n = len(names)
        if vocab is not self._vocab or self._n > n:  # another vocabulary (restore): start over
            self._reset()
            self._vocab = vocab
        if self._n == n:
            return
        data, lengths = _utf8_of(names[self._n:n])
        used = int(self._offs[self._n])
        if used + data.size > self._names.size:
            grown = np.zeros(max(2 * self._names.size, used + data.size, 1 << 16), dtype=np.uint8)
            grown[:used] = self._names[:used]
            self._names = grown
        self._names[used: used + data.size] = data
        offs = np.empty(n + 1, dtype=np.int64)
        offs[: self._n + 1] = self._offs[: self._n + 1]
        offs[self._n + 1:] = used + np.cumsum(lengths)
        self._offs = offs
        fps = np.asarray(vocab.fps, dtype=np.uint64)
        if 2 * n > self._table.shape[0]:
            size = self._table.shape[0]
            while 2 * n > size:
                size *= 2
            self._table = np.zeros((size, 4), dtype=np.uint64)
            _vocab_insert(self._table, fps, self._names, self._offs, 0, n)
        else:
            _vocab_insert(self._table, fps, self._names, self._offs, self._n, n)
        self._n = n

    def encode(self, vocab: Any, keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
        if isinstance(keys, pa.ChunkedArray):
            keys = keys.combine_chunks()
        m = len(keys)
        if m == 0:
            return np.zeros(0, dtype=np.int64)
        if keys.type not in (pa.string(), pa.large_string()):
            keys = keys.cast(pa.string())
        self._sync(vocab)
        key_fps = fingerprint_keys(keys)
        _, obuf, dbuf = keys.buffers()[:3]
        odt = np.int64 if keys.type == pa.large_string() else np.int32
        offs = np.frombuffer(obuf, dtype=odt)[keys.offset: keys.offset + m + 1]
        data = np.frombuffer(dbuf, dtype=np.uint8) if dbuf is not None and dbuf.size else np.zeros(1, dtype=np.uint8)
        valid = (np.ones(m, dtype=np.bool_) if keys.null_count == 0
                 else pc.is_valid(keys).to_numpy(zero_copy_only=False))
        ids = np.empty(m, dtype=np.int64)
        missing = _vocab_lookup(self._table, self._names, self._offs, key_fps, data, offs, valid, ids)
        if missing:
            new = ids < 0
            ids[new] = vocab.encode(keys.filter(pa.array(new)).to_pylist())
            self._sync(vocab)
        return ids
