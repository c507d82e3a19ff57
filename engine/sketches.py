"""SpaceSaving heavy hitters (Metwally, Agrawal & El Abbadi, ICDT 2005), one sketch per source.

Nasir et al. (ICDE 2016, Sec. III-A and Alg. 1 line 2, ``UPDATESPACESAVING``) track the head of
the key distribution at every source with SpaceSaving.  This module keeps the sketches of all
sources of one grouping in plain numpy arrays (picklable, shippable to executors) and updates them
with module-level numba kernels, so that a grouping's routing kernel can update the sketch tuple by
tuple inside its own loop (:func:`ss_offer` is ``inline="always"``).

SpaceSaving with ``capacity`` counters (Metwally et al. Alg. "Space-Saving"):

* a tracked key: its counter is incremented;
* an untracked key while fewer than ``capacity`` counters are used: a new counter (count 1, error 0);
* otherwise the counter with the **minimum count** is taken over by the new key, which inherits
  count ``min + 1`` and error ``min`` (its true count lies in ``[count - error, count]``).

Guarantees used by skewlab: ``count - error <= f_k <= count`` for tracked keys; the minimum count,
hence every error, is at most ``N / capacity``; every key with ``f_k > N / capacity`` is tracked.

Eviction among tied minimum counters is arbitrary in the paper.  skewlab fixes it so that results are
reproducible and a plain-Python reference can replay them: **the victim is the counter with the
minimum count that was updated (inserted or incremented) least recently**.  The implementation is
the Stream-Summary structure of Metwally et al. (Sec. 3.1: a doubly linked list of buckets, one per
distinct count value in increasing order, each holding a list of counters) in arrays: appending a
counter to the tail of its new bucket keeps every bucket's list in update order, so the head of the
minimum bucket is the victim.  Every update is O(1); key lookup is an open-addressing hash table
(linear probing on the top bits of the fingerprint, backward-shift deletion) sized to a power of two
>= 2 * capacity.

Layout (``S`` sources, ``c = capacity``, ``T`` table slots), every array has the source as first axis:

* ``keys[s, i]`` (uint64) fingerprint held by counter ``i``; ``errs[s, i]`` (int64) its error;
* ``clink[s, i, :]`` (int32) next counter, previous counter, bucket of counter ``i``;
* ``bval[s, b]`` (int64) count of bucket ``b``; ``blink[s, b, :]`` (int32) first counter, last
  counter, next (larger) bucket, previous (smaller) bucket; ``bfree[s, :]`` stack of free buckets;
* ``table[s, j, :]`` (uint64) hash table slot: fingerprint, counter id + 1 (0 = empty slot);
* ``meta[s, :]`` used counters, smallest bucket, largest bucket, free buckets, total N, table shift.

The count of counter ``i`` is ``bval[blink-bucket of i]``; a key's frequency estimate is
``count / N`` and its *guaranteed* frequency ``(count - error) / N``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "SpaceSaving",
    "ss_collect",
    "ss_count",
    "ss_guaranteed",
    "ss_find",
    "ss_offer",
    "ss_offer_batch",
]

# meta columns
USED, BMIN, BMAX, NFREE, TOTAL, SHIFT = 0, 1, 2, 3, 4, 5
_META = 6
# clink columns
_CN, _CP, _CB = 0, 1, 2
# blink columns
_BH, _BT, _BN, _BP = 0, 1, 2, 3

MAX_CAPACITY = 1 << 22


def _table_bits(capacity: int) -> int:
    bits = 3
    while (1 << bits) < 2 * capacity:
        bits += 1
    return bits


# ---------------------------------------------------------------------------------------------
# Kernels.  ``sk`` is the tuple returned by :meth:`SpaceSaving.arrays` (row views of one source).
# ---------------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _slot(fp, shift):  # pragma: no cover - compiled
    return np.int64(np.uint64(fp) >> np.uint64(shift))


@njit(cache=True, inline="always")
def ss_find(sk, fp):  # pragma: no cover - compiled
    """Counter id tracking ``fp`` in sketch ``sk``, or -1."""
    keys, errs, clink, bval, blink, bfree, tab, meta = sk
    mask = tab.shape[0] - 1
    j = _slot(fp, meta[SHIFT])
    while True:
        t = tab[j, 1]
        if t == 0:
            return np.int64(-1)
        if tab[j, 0] == fp:
            return np.int64(t) - 1
        j = (j + 1) & mask


@njit(cache=True, inline="always")
def ss_count(sk, cid):  # pragma: no cover - compiled
    """Count (upper bound of the frequency) of counter ``cid``."""
    return sk[3][sk[2][cid, _CB]]


@njit(cache=True, inline="always")
def _table_delete(tab, shift, fp):  # pragma: no cover - compiled
    """Remove ``fp`` (present) with backward-shift deletion (linear probing stays tombstone-free)."""
    mask = tab.shape[0] - 1
    i = _slot(fp, shift)
    while tab[i, 0] != fp or tab[i, 1] == 0:
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        if tab[j, 1] == 0:
            break
        k = _slot(tab[j, 0], shift)
        # entry j may stay iff its home k lies cyclically in (i, j]
        if i <= j:
            stay = (i < k) and (k <= j)
        else:
            stay = (i < k) or (k <= j)
        if not stay:
            tab[i, 0] = tab[j, 0]
            tab[i, 1] = tab[j, 1]
            i = j
    tab[i, 1] = 0


@njit(cache=True, inline="always")
def _bucket_new(bval, blink, bfree, meta, value):  # pragma: no cover - compiled
    nf = meta[NFREE] - 1
    meta[NFREE] = nf
    b = bfree[nf]
    bval[b] = value
    blink[b, _BH] = -1
    blink[b, _BT] = -1
    blink[b, _BN] = -1
    blink[b, _BP] = -1
    return b


@njit(cache=True, inline="always")
def _bucket_unlink_release(blink, bfree, meta, b):  # pragma: no cover - compiled
    p = blink[b, _BP]
    q = blink[b, _BN]
    if p >= 0:
        blink[p, _BN] = q
    else:
        meta[BMIN] = q
    if q >= 0:
        blink[q, _BP] = p
    else:
        meta[BMAX] = p
    bfree[meta[NFREE]] = b
    meta[NFREE] += 1


@njit(cache=True, inline="always")
def _counter_append(clink, blink, i, b):  # pragma: no cover - compiled
    t = blink[b, _BT]
    clink[i, _CP] = t
    clink[i, _CN] = -1
    clink[i, _CB] = b
    if t >= 0:
        clink[t, _CN] = i
    else:
        blink[b, _BH] = i
    blink[b, _BT] = i


@njit(cache=True, inline="always")
def _counter_unlink(clink, blink, i, b):  # pragma: no cover - compiled
    p = clink[i, _CP]
    q = clink[i, _CN]
    if p >= 0:
        clink[p, _CN] = q
    else:
        blink[b, _BH] = q
    if q >= 0:
        clink[q, _CP] = p
    else:
        blink[b, _BT] = p


@njit(cache=True, inline="always")
def _increment(clink, bval, blink, bfree, meta, i):  # pragma: no cover - compiled
    """count(i) += 1, moving i to the tail of the bucket of count + 1 (Stream-Summary)."""
    b = clink[i, _CB]
    v = bval[b]
    nb = blink[b, _BN]
    nxt_ok = nb >= 0 and bval[nb] == v + 1
    if blink[b, _BH] == i and blink[b, _BT] == i:  # alone in its bucket
        if nxt_ok:
            _bucket_unlink_release(blink, bfree, meta, b)
            _counter_append(clink, blink, i, nb)
        else:
            bval[b] = v + 1
        return
    _counter_unlink(clink, blink, i, b)
    if not nxt_ok:
        nb = _bucket_new(bval, blink, bfree, meta, v + 1)
        q = blink[b, _BN]
        blink[nb, _BN] = q
        blink[nb, _BP] = b
        if q >= 0:
            blink[q, _BP] = nb
        else:
            meta[BMAX] = nb
        blink[b, _BN] = nb
    _counter_append(clink, blink, i, nb)


@njit(cache=True, inline="always")
def ss_offer(sk, fp):  # pragma: no cover - compiled
    """Count one occurrence of ``fp`` (SpaceSaving update); returns the key's counter id."""
    keys, errs, clink, bval, blink, bfree, tab, meta = sk
    meta[TOTAL] += 1
    mask = tab.shape[0] - 1
    shift = meta[SHIFT]
    j = _slot(fp, shift)
    while True:
        t = tab[j, 1]
        if t == 0:
            break
        if tab[j, 0] == fp:
            t = np.int64(t) - 1
            _increment(clink, bval, blink, bfree, meta, t)
            return t
        j = (j + 1) & mask
    used = meta[USED]
    if used < keys.size:
        # free counter: count 1, error 0, in the bucket of count 1 (the smallest possible)
        i = used
        meta[USED] = used + 1
        keys[i] = fp
        errs[i] = 0
        tab[j, 0] = fp
        tab[j, 1] = np.uint64(i + 1)
        b0 = meta[BMIN]
        if b0 >= 0 and bval[b0] == 1:
            _counter_append(clink, blink, i, b0)
        else:
            nb = _bucket_new(bval, blink, bfree, meta, 1)
            blink[nb, _BN] = b0
            if b0 >= 0:
                blink[b0, _BP] = nb
            else:
                meta[BMAX] = nb
            meta[BMIN] = nb
            _counter_append(clink, blink, i, nb)
        return np.int64(i)
    # evict the least recently updated counter among those with the minimum count
    bmin = meta[BMIN]
    i = blink[bmin, _BH]
    vmin = bval[bmin]
    # insert at the free slot found by the lookup, then delete the victim (the backward shift
    # may move the new entry; it stays reachable)
    tab[j, 0] = fp
    tab[j, 1] = np.uint64(i + 1)
    _table_delete(tab, shift, keys[i])
    keys[i] = fp
    errs[i] = vmin
    _increment(clink, bval, blink, bfree, meta, i)
    return np.int64(i)


@njit(cache=True, _nrt=False)
def ss_offer_batch(sk, fps):  # pragma: no cover - compiled
    """Offer every fingerprint of ``fps`` in order."""
    for x in range(fps.size):
        ss_offer(sk, fps[x])


@njit(cache=True)
def ss_collect(sk, min_count):  # pragma: no cover - compiled
    """Counter ids with ``count >= min_count``, walking buckets from the largest count down.

    Order: decreasing count; within a count, most recently updated first.  Cost is proportional to
    the number of counters returned (plus one bucket), not to the capacity.
    """
    keys, errs, clink, bval, blink, bfree, tab, meta = sk
    out = np.empty(meta[USED], dtype=np.int64)
    m = 0
    b = meta[BMAX]
    while b >= 0 and bval[b] >= min_count:
        i = blink[b, _BT]
        while i >= 0:
            out[m] = i
            m += 1
            i = clink[i, _CP]
        b = blink[b, _BP]
    return out[:m]


@njit(cache=True, inline="always")
def ss_guaranteed(sk, threshold, out):  # pragma: no cover - compiled
    """Write the guaranteed counts ``count − error`` that are ``>= threshold`` into ``out`` (float64,
    length >= capacity); return how many.  Walks buckets from the largest count down and stops at
    the first count below ``threshold`` (a guaranteed count never exceeds its count).  No allocation.
    """
    keys, errs, clink, bval, blink, bfree, tab, meta = sk
    m = 0
    b = meta[BMAX]
    while b >= 0 and bval[b] >= threshold:
        v = bval[b]
        i = blink[b, _BT]
        while i >= 0:
            g = v - errs[i]
            if g >= threshold:
                out[m] = g
                m += 1
            i = clink[i, _CP]
        b = blink[b, _BP]
    return m


# ---------------------------------------------------------------------------------------------
# The container
# ---------------------------------------------------------------------------------------------
class SpaceSaving:
    """SpaceSaving sketches for ``n_sources`` sources with ``capacity`` counters each (arrays only)."""

    def __init__(self, capacity: int, n_sources: int = 1) -> None:
        capacity = int(capacity)
        n_sources = int(n_sources)
        if not 1 <= capacity <= MAX_CAPACITY:
            raise ValueError(f"capacity must be in [1, {MAX_CAPACITY}], got {capacity}")
        if n_sources < 1:
            raise ValueError(f"sources must be >= 1, got {n_sources}")
        self.capacity = capacity
        self.n_sources = n_sources
        bits = _table_bits(capacity)
        s, c, t = n_sources, capacity, 1 << bits
        self.keys = np.zeros((s, c), dtype=np.uint64)
        self.errs = np.zeros((s, c), dtype=np.int64)
        self.clink = np.full((s, c, 3), -1, dtype=np.int32)
        self.bval = np.zeros((s, c), dtype=np.int64)
        self.blink = np.full((s, c, 4), -1, dtype=np.int32)
        self.bfree = np.tile(np.arange(c - 1, -1, -1, dtype=np.int32), (s, 1))
        self.table = np.zeros((s, t, 2), dtype=np.uint64)
        self.meta = np.zeros((s, _META), dtype=np.int64)
        self.meta[:, BMIN] = -1
        self.meta[:, BMAX] = -1
        self.meta[:, NFREE] = c
        self.meta[:, SHIFT] = 64 - bits

    def _check(self, source: int) -> int:
        source = int(source)
        if not 0 <= source < self.n_sources:
            raise ValueError(f"source must be in [0, {self.n_sources}), got {source}")
        return source

    def arrays(self, source: int = 0) -> tuple:
        """The tuple of row views the kernels take for ``source``."""
        s = self._check(source)
        return (
            self.keys[s], self.errs[s], self.clink[s], self.bval[s], self.blink[s],
            self.bfree[s], self.table[s], self.meta[s],
        )

    def offer(self, fps: np.ndarray, source: int = 0) -> None:
        """Count every fingerprint of ``fps`` (in order) at ``source``."""
        fps = np.ascontiguousarray(fps, dtype=np.uint64)
        if fps.size:
            ss_offer_batch(self.arrays(source), fps)

    def total(self, source: int = 0) -> int:
        """N: tuples offered so far at ``source``."""
        return int(self.meta[self._check(source), TOTAL])

    def __len__(self) -> int:
        return self.capacity

    def entries(self, source: int = 0, min_count: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(fps, counts, errors)`` of tracked keys with ``count >= min_count``, by decreasing count."""
        s = self._check(source)
        ids = ss_collect(self.arrays(s), max(int(min_count), 1))
        counts = self.bval[s][self.clink[s][ids, _CB]] if ids.size else np.zeros(0, np.int64)
        return self.keys[s][ids].copy(), np.asarray(counts, dtype=np.int64), self.errs[s][ids].copy()

    def estimate(self, fps: np.ndarray, source: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``(counts, errors)`` of each fingerprint (0, 0 for untracked keys); no side effects."""
        s = self._check(source)
        fps = np.asarray(fps, dtype=np.uint64)
        tracked, counts, errs = self.entries(s)
        order = np.argsort(tracked)
        tracked, counts, errs = tracked[order], counts[order], errs[order]
        out_c = np.zeros(fps.size, dtype=np.int64)
        out_e = np.zeros(fps.size, dtype=np.int64)
        if tracked.size and fps.size:
            pos = np.searchsorted(tracked, fps)
            pos[pos == tracked.size] = 0
            hit = tracked[pos] == fps
            out_c[hit] = counts[pos[hit]]
            out_e[hit] = errs[pos[hit]]
        return out_c, out_e
