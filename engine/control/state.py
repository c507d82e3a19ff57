"""Per-worker keyed state of the stateful operator, and where every key's state lives.

The operator keeps, for every (key, worker) pair, a windowed count: the tuples of that key the worker
processed in the last ``window`` intervals (Fang et al. Sec. III: window-based state S(k, w)).  The
state is stored as ``window`` interval slots; each slot is a sorted array of pair codes
``key_id << WORKER_BITS | worker`` with their counts.  Sliding the window drops the oldest slot.

Migration (:meth:`KeyedWindowState.move`) relabels the worker of every slot entry of the moved keys,
so the state travels with all its history and nothing is lost: the merged per-key result (sum over
workers) is invariant under routing, migration, worker-count changes and algorithm switches.  That
invariant is what the tests check against the ground truth.

Speed (issue #4: this runs on the Spark driver while every executor waits, once per micro-batch with
~100k-200k (key, worker) pairs, so it is kept linear in the number of pairs):

* **Window totals are maintained incrementally**: a sorted array that
  :meth:`~KeyedWindowState.add_interval` updates with two linear merges (numba kernels
  :func:`_merge_add` / :func:`_merge_sub`): add the new slot, subtract the expired one.
  Each total also carries a *presence* count (in how many slots the code occurs), so a code stays in
  the totals exactly as long as some slot holds it, even with a zero count — the result is exactly what
  aggregating the concatenated slots gives (that definition is kept as the fallback and in the tests).
* **Aggregation without a comparison sort.**  :func:`aggregate_pairs` returns sorted, strictly
  increasing input unchanged (an O(n) check); unsorted input with dense key ids (vocabulary ids, the
  per-(worker, key) aggregates Spark returns) is sorted by a two-pass counting sort in numba
  (:func:`_sort_pairs`, O(n + K + W)); only sparse ids fall back to ``np.argsort``.  Integer weights
  are summed exactly in int64, float weights with ``np.bincount``.
* **Migration keeps slots sorted without sorting.**  Relabelling workers keeps a slot sorted by key;
  :func:`_regroup` only reorders and merges the (at most ``n_workers``) entries of each key.
* **Compact pickles.**  A snapshot (``skewlab.engine.io.checkpoint``) pickles the controller every batch; raw
  slots are 16 bytes per entry.  :meth:`KeyedWindowState.__getstate__`
  stores each slot as key deltas, workers and counts in one byte each where they fit
  (:func:`pack_small`; larger values go to an overflow list), and each slot is
  packed once (slots never change until a migration, so the packed form is cached).  The window totals
  are not pickled; they are rebuilt from the slots on load.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numba
import numpy as np

from skewlab.engine.config.settings import WINDOW, check
from skewlab.shared import copy_as_in_memory

__all__ = [
    "KeyedWindowState",
    "WORKER_BITS",
    "aggregate_pairs",
    "decode",
    "encode",
    "pack_codes",
    "pack_small",
    "searchsorted_ascending",
    "segment_sums",
    "union_sorted",
    "unpack_codes",
    "unpack_small",
]

WORKER_BITS = 20
_WMASK = np.int64((1 << WORKER_BITS) - 1)


def encode(key_ids: np.ndarray, workers: np.ndarray) -> np.ndarray:
    """Pair codes ``key << WORKER_BITS | worker``."""
    return (np.asarray(key_ids, dtype=np.int64) << WORKER_BITS) | np.asarray(workers, dtype=np.int64)


def decode(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`encode`: ``(key_ids, workers)``."""
    codes = np.asarray(codes, dtype=np.int64)
    return codes >> WORKER_BITS, codes & _WMASK


def _strictly_increasing(a: np.ndarray) -> bool:
    return a.size < 2 or bool((a[1:] > a[:-1]).all())


def segment_sums(sorted_ids: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct ids, integer sum of weights per id)`` of an ascending (not necessarily strictly) id array.

    A linear scan instead of a sort: the per-key sums of sorted pair codes (``codes >> WORKER_BITS`` is
    ascending when the codes are) are runs of equal ids.  ``weights`` must be integers (default: 1 each).
    """
    ids = np.asarray(sorted_ids, dtype=np.int64)
    if ids.size == 0:
        return ids.copy(), np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
    if weights is None:
        sums = np.diff(np.append(starts, ids.size)).astype(np.int64)
    else:
        sums = np.add.reduceat(np.asarray(weights, dtype=np.int64), starts)
    return ids[starts], sums


def aggregate_pairs(codes: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sum ``weights`` (default 1 per code) per distinct code; returns sorted unique codes and sums (int64).

    Input that is already strictly increasing (the controller's own aggregates, every slot) is returned
    as a copy without sorting.  Otherwise, with integer weights and dense key ids (vocabulary ids: at
    most ~4 per input code), a two-pass counting sort (:func:`_sort_pairs`, linear); else one
    ``np.argsort`` and a run-length reduction.  Integer weights
    are summed exactly in int64; float weights are summed in float64 in input order (``np.bincount``)
    and truncated to int64.
    """
    codes = np.asarray(codes, dtype=np.int64)
    if codes.size == 0:
        return codes.copy(), np.zeros(0, dtype=np.int64)
    w = None if weights is None else np.asarray(weights)
    if w is not None and w.dtype.kind not in "iub":
        uniq, inverse = np.unique(codes, return_inverse=True)
        return uniq, np.bincount(inverse, weights=w, minlength=uniq.size).astype(np.int64)
    if _strictly_increasing(codes):
        sums = np.ones(codes.size, dtype=np.int64) if w is None else w.astype(np.int64)
        return codes.copy(), sums
    keys, workers = decode(codes)
    n_keys = int(keys.max()) + 1
    if keys.min() >= 0 and n_keys <= 4 * codes.size + 65536:  # dense key ids: two counting-sort passes
        n_workers = int(workers.max()) + 1
        weights_i = np.ones(codes.size, np.int64) if w is None else w.astype(np.int64)
        return _sort_pairs(keys, workers, weights_i, n_keys, n_workers, WORKER_BITS)
    order = np.argsort(codes)
    return segment_sums(codes[order], None if w is None else w[order])


# ---------------------------------------------------------------------------------------------- kernels
@numba.njit(cache=True)
def _merge_add(a_codes, a_counts, a_presence, b_codes, b_counts):  # pragma: no cover - compiled
    """Union of sorted unique codes ``a_codes`` (counts ``a_counts``, presence ``a_presence``) and
    ``b_codes`` (counts ``b_counts``): counts of equal codes are summed and the presence of every
    code of ``b_codes`` grows by one."""
    n, m = a_codes.size, b_codes.size
    out_codes = np.empty(n + m, np.int64)
    out_counts = np.empty(n + m, np.int64)
    out_presence = np.empty(n + m, np.int32)
    i = j = k = 0
    while i < n and j < m:
        if a_codes[i] < b_codes[j]:
            out_codes[k] = a_codes[i]
            out_counts[k] = a_counts[i]
            out_presence[k] = a_presence[i]
            i += 1
        elif a_codes[i] > b_codes[j]:
            out_codes[k] = b_codes[j]
            out_counts[k] = b_counts[j]
            out_presence[k] = 1
            j += 1
        else:
            out_codes[k] = a_codes[i]
            out_counts[k] = a_counts[i] + b_counts[j]
            out_presence[k] = a_presence[i] + 1
            i += 1
            j += 1
        k += 1
    while i < n:
        out_codes[k] = a_codes[i]
        out_counts[k] = a_counts[i]
        out_presence[k] = a_presence[i]
        i += 1
        k += 1
    while j < m:
        out_codes[k] = b_codes[j]
        out_counts[k] = b_counts[j]
        out_presence[k] = 1
        j += 1
        k += 1
    return out_codes[:k].copy(), out_counts[:k].copy(), out_presence[:k].copy()


@numba.njit(cache=True)
def _merge_sub(a_codes, a_counts, a_presence, b_codes, b_counts):  # pragma: no cover - compiled
    """Remove slot ``b`` from the totals ``a`` (``b_codes`` must be a subset of ``a_codes``): counts
    are subtracted, presence drops by one, codes no slot holds any more (presence 0) disappear.  Returns
    ``(codes, counts, presence, ok)``; ``ok`` is False if ``b`` was not a subset (caller rebuilds)."""
    n, m = a_codes.size, b_codes.size
    out_codes = np.empty(n, np.int64)
    out_counts = np.empty(n, np.int64)
    out_presence = np.empty(n, np.int32)
    j = k = 0
    for i in range(n):
        c = a_codes[i]
        cnt = a_counts[i]
        p = a_presence[i]
        if j < m and b_codes[j] == c:
            cnt -= b_counts[j]
            p -= 1
            j += 1
        elif j < m and b_codes[j] < c:
            return out_codes[:0].copy(), out_counts[:0].copy(), out_presence[:0].copy(), False
        if p > 0:
            out_codes[k] = c
            out_counts[k] = cnt
            out_presence[k] = p
            k += 1
    return out_codes[:k].copy(), out_counts[:k].copy(), out_presence[:k].copy(), j == m


@numba.njit(cache=True)
def _union(a, b):  # pragma: no cover - compiled
    """Sorted union of two sorted unique int64 arrays."""
    n, m = a.size, b.size
    out = np.empty(n + m, np.int64)
    i = j = k = 0
    while i < n and j < m:
        if a[i] < b[j]:
            out[k] = a[i]
            i += 1
        elif a[i] > b[j]:
            out[k] = b[j]
            j += 1
        else:
            out[k] = a[i]
            i += 1
            j += 1
        k += 1
    while i < n:
        out[k] = a[i]
        i += 1
        k += 1
    while j < m:
        out[k] = b[j]
        j += 1
        k += 1
    return out[:k].copy()


@numba.njit(cache=True)
def _sort_pairs(keys, workers, weights, n_keys, n_workers, bits):  # pragma: no cover - compiled
    """Sorted unique codes ``key << bits | worker`` and integer weight sums, by an LSD radix sort with
    two counting-sort passes (worker, then key; both stable), then one run-length merge: O(n + K + W)
    for K dense key ids and W workers, instead of an O(n log n) comparison sort."""
    n = keys.size
    cw = np.zeros(n_workers + 1, np.int64)
    for i in range(n):
        cw[workers[i] + 1] += 1
    for w in range(n_workers):
        cw[w + 1] += cw[w]
    by_worker = np.empty(n, np.int64)
    for i in range(n):
        w = workers[i]
        by_worker[cw[w]] = i
        cw[w] += 1
    ck = np.zeros(n_keys + 1, np.int64)
    for i in range(n):
        ck[keys[i] + 1] += 1
    for k in range(n_keys):
        ck[k + 1] += ck[k]
    order = np.empty(n, np.int64)
    for t in range(n):
        i = by_worker[t]
        k = keys[i]
        order[ck[k]] = i
        ck[k] += 1
    out_codes = np.empty(n, np.int64)
    out_counts = np.empty(n, np.int64)
    m = -1
    last = np.int64(-1)
    for t in range(n):
        i = order[t]
        c = (keys[i] << bits) | workers[i]
        if m >= 0 and c == last:
            out_counts[m] += weights[i]
        else:
            m += 1
            out_codes[m] = c
            out_counts[m] = weights[i]
            last = c
    return out_codes[: m + 1].copy(), out_counts[: m + 1].copy()


@numba.njit(cache=True)
def _search_ascending(hay, needles):  # pragma: no cover - compiled
    """``np.searchsorted(hay, needles)`` (side left) for ascending ``needles``: one linear walk."""
    out = np.empty(needles.size, np.int64)
    i = 0
    n = hay.size
    for j in range(needles.size):
        x = needles[j]
        while i < n and hay[i] < x:
            i += 1
        out[j] = i
    return out


@numba.njit(cache=True)
def _regroup(keys, workers, counts, bits):  # pragma: no cover - compiled
    """Sorted unique codes and summed counts of entries whose ``keys`` are ascending but whose
    ``workers`` within a key are in any order (a slot after relabelling): an insertion sort of each
    key's few entries, linear in the slot size for a bounded number of workers per key."""
    n = keys.size
    mask = (np.int64(1) << bits) - 1
    out_codes = np.empty(n, np.int64)
    out_counts = np.empty(n, np.int64)
    k = 0
    i = 0
    while i < n:
        key = keys[i]
        seg = k
        j = i
        while j < n and keys[j] == key:
            w = workers[j]
            c = counts[j]
            p = k
            merged = False
            for q in range(seg, k):
                wq = out_codes[q] & mask
                if wq == w:
                    out_counts[q] += c
                    merged = True
                    break
                if wq > w:
                    p = q
                    break
            if not merged:
                for q in range(k, p, -1):
                    out_codes[q] = out_codes[q - 1]
                    out_counts[q] = out_counts[q - 1]
                out_codes[p] = (key << bits) | w
                out_counts[p] = c
                k += 1
            j += 1
        i = j
    return out_codes[:k].copy(), out_counts[:k].copy()


def searchsorted_ascending(hay: np.ndarray, needles: np.ndarray) -> np.ndarray:
    """``np.searchsorted(hay, needles)`` for sorted int64 ``hay``: a linear merge walk when ``needles``
    is ascending too (the controller's case: both are sorted pair codes or key ids), else numpy's
    binary search."""
    hay = np.asarray(hay, dtype=np.int64)
    needles = np.asarray(needles, dtype=np.int64)
    if needles.size > 1 and not bool((needles[1:] >= needles[:-1]).all()):
        return np.searchsorted(hay, needles)
    return _search_ascending(hay, needles)


def union_sorted(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sorted union of two sorted unique int64 arrays in one linear merge (``np.union1d`` sorts)."""
    return _union(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))


# ---------------------------------------------------------------------------------------------- packing
def pack_small(x: np.ndarray) -> tuple:
    """Compact form of an int64 array for pickling, the smallest of: one byte per value with the
    positions and values of those >= 255 listed apart (``("u8", bytes, idx, values)``: counts and key
    deltas of a skewed stream are mostly tiny), the narrowest unsigned dtype that holds every value
    (``("uint", array)``), or the raw array (``("raw", x)``, also for negative values).
    Inverse: :func:`unpack_small`."""
    x = np.asarray(x, dtype=np.int64)
    if x.size == 0 or x.min() < 0:
        return ("raw", x)
    top = int(x.max())
    big = np.flatnonzero(x >= 255)
    narrow = np.min_scalar_type(top)
    if x.size + 12 * big.size <= narrow.itemsize * x.size:
        idx = big.astype(np.uint32) if x.size < 2**32 else big
        return ("u8", np.minimum(x, 255).astype(np.uint8), idx, x[big])
    return ("uint", x.astype(narrow)) if narrow.itemsize < 8 else ("raw", x)


def unpack_small(packed: tuple) -> np.ndarray:
    """Inverse of :func:`pack_small`."""
    if packed[0] != "u8":
        return np.asarray(packed[1]).astype(np.int64)
    _, small, idx, values = packed
    out = np.asarray(small, dtype=np.uint8).astype(np.int64)
    out[np.asarray(idx, dtype=np.int64)] = values
    return out


def pack_codes(codes: np.ndarray) -> tuple:
    """Compact form of sorted pair codes: key-id deltas and workers via :func:`pack_small`
    (~2 bytes per pair instead of 8).  Inverse: :func:`unpack_codes`."""
    keys, workers = decode(codes)
    return (pack_small(np.diff(keys, prepend=np.int64(0))), pack_small(workers))


def unpack_codes(packed: tuple) -> np.ndarray:
    """Inverse of :func:`pack_codes`."""
    dkeys, workers = packed
    return encode(np.cumsum(unpack_small(dkeys)), unpack_small(workers))


class KeyedWindowState:
    """Windowed per-(key, worker) counts over the last ``window`` intervals (see the module docstring)."""

    def __init__(self, window: int) -> None:
        check(WINDOW, window)
        self.window = int(window)
        self.slots: deque[tuple[np.ndarray, np.ndarray]] = deque()
        self._packed: deque[tuple | None] = deque()  # pickled form of each slot, None until first needed
        # window totals (sorted codes, counts) and in how many slots each code occurs; None: rebuild
        self._merged: tuple[np.ndarray, np.ndarray] | None = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        self._presence: np.ndarray | None = np.zeros(0, np.int32)

    # ------------------------------------------------------------------ updates
    def add_interval(self, codes: np.ndarray, counts: np.ndarray) -> None:
        """Append one interval's aggregated (pair code, count) and slide the window.

        The window totals are updated incrementally (merge in the new slot, subtract the expired one).
        """
        codes, counts = aggregate_pairs(codes, counts)
        self.slots.append((codes, counts))
        self._packed.append(None)
        totals = None
        if self._merged is not None and self._presence is not None:
            totals = _merge_add(self._merged[0], self._merged[1], self._presence, codes, counts)
        while len(self.slots) > self.window:
            old_codes, old_counts = self.slots.popleft()
            self._packed.popleft()
            if totals is not None:
                mc, mn, mp, ok = _merge_sub(totals[0], totals[1], totals[2], old_codes, old_counts)
                totals = (mc, mn, mp) if ok else None  # not a subset: cannot happen; rebuild lazily
        if totals is None:
            self._merged = self._presence = None
        else:
            self._merged, self._presence = (totals[0], totals[1]), totals[2]

    def move(self, key_ids: np.ndarray, targets: np.ndarray) -> tuple[float, int]:
        """Move all state of ``key_ids[i]`` to worker ``targets[i]``.

        Returns ``(state units moved, number of keys that had state elsewhere)``.
        """
        key_ids = np.asarray(key_ids, dtype=np.int64)
        targets = np.asarray(targets, dtype=np.int64)
        if key_ids.size == 0 or not self.slots:
            return 0.0, 0
        order = np.argsort(key_ids, kind="stable")
        sk, st = key_ids[order], targets[order]
        moved_units = 0.0
        # which of the (sorted) moved keys had state elsewhere in some slot: a mask, not a list of every
        # slot's moved keys to concatenate and sort (at 1e6 keys that list was the move's memory peak)
        had_state = np.zeros(sk.size, dtype=bool)
        for i, (codes, counts) in enumerate(self.slots):
            keys, workers = decode(codes)
            pos = np.searchsorted(sk, keys)
            pos[pos == sk.size] = 0
            hit = sk[pos] == keys
            new_workers = workers.copy()
            new_workers[hit] = st[pos[hit]]
            changed = new_workers != workers
            if changed.any():
                moved_units += float(counts[changed].sum())
                had_state[pos[changed]] = True
                # slot by slot in place: the old slot is freed before the next one is regrouped
                self.slots[i] = _regroup(keys, new_workers, counts, WORKER_BITS)
                self._packed[i] = None
        n_keys = int(np.count_nonzero(had_state))
        if n_keys:
            self._merged = self._presence = None
        return moved_units, n_keys

    # ------------------------------------------------------------------ reads
    def _rebuild(self) -> None:
        mc, mn, mp = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32)
        for codes, counts in self.slots:
            mc, mn, mp = _merge_add(mc, mn, mp, codes, counts)
        self._merged, self._presence = (mc, mn), mp

    def merged(self) -> tuple[np.ndarray, np.ndarray]:
        """Window totals per (key, worker) pair: sorted codes and counts (every code some slot holds)."""
        if self._merged is None or self._presence is None:
            self._rebuild()
        assert self._merged is not None
        return self._merged

    def per_key(self) -> tuple[np.ndarray, np.ndarray]:
        """Merged per-key results (sum over workers): sorted key ids and window counts."""
        codes, counts = self.merged()
        keys, _ = decode(codes)
        return segment_sums(keys, counts)

    def per_worker(self, n_workers: int) -> np.ndarray:
        """State units held by each worker."""
        codes, counts = self.merged()
        _, workers = decode(codes)
        return np.bincount(workers, weights=counts, minlength=n_workers).astype(np.int64)

    def total(self) -> float:
        return float(self.merged()[1].sum())

    # ------------------------------------------------------------------ pickling
    def __deepcopy__(self, memo: dict) -> "KeyedWindowState":
        return copy_as_in_memory(self, memo)  # no packing, no rebuilt index

    def __getstate__(self) -> dict[str, Any]:
        """Slots in the compact form of :func:`pack_codes` / :func:`pack_small` (each packed once and
        cached); the window totals are derived data and are rebuilt on load."""
        packed = []
        for i, ((codes, counts), p) in enumerate(zip(self.slots, self._packed)):
            if p is None:
                p = (pack_codes(codes), pack_small(counts))
                self._packed[i] = p
            packed.append(p)
        return {"window": self.window, "slots": packed}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.window = int(state["window"])
        slots = list(state["slots"])
        self.slots = deque((unpack_codes(c), unpack_small(n)) for c, n in slots)
        self._packed = deque(slots)
        self._merged = None
        self._presence = None
        self._rebuild()
