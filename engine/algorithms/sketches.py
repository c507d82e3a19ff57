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
minimum count that was updated (inserted or incremented) least recently**.

Structure (deviation, same results): a *windowed* Stream-Summary.  Metwally et al. (Sec. 3.1) keep
every distinct count in a linked list of buckets; here only counters with a count in ``[VMIN, TOP)``
sit in per-count doubly linked lists in update order (``ring``, indexed by ``count mod WIN``), so
the head of the list of VMIN is the victim; counters with count ``>= TOP`` ("overflow") are
unordered and join the lists, sorted by (count, update time), when VMIN comes within ``WIN/2`` of TOP
(:func:`_migrate`).  The hash table is linear probing with lazy deletion (rebuilt after ``capacity``
evictions, ``T >= 8 · capacity`` slots).  Arrays per source ``s``: ``cnt[s, i, :]`` (fingerprint,
error, count, list links or last update time), ``ring``, ``ovf``, ``hot``, ``scr``, ``table`` and
``meta`` (used, VMIN, TOP, stale, total N, table shift, #overflow, HL, #hot); field-by-field layout,
the reasons and the timings: docs/design-notes.md, "engine/algorithms/sketches.py".

Decay (:meth:`SpaceSaving.decay`, skewlab extension, as the epoch-based "hotness decaying" of FISH,
Chen et al., arXiv 1806.00760): every count becomes ``⌊α·count⌋`` and every guaranteed count
``⌊α·(count − error)⌋``, so ``count − error`` stays a lower bound of the decayed true count; counters
that reach 0 are freed, N becomes the sum of the counts, and survivors keep their eviction order.

A key's frequency estimate is ``count / N`` and its *guaranteed* frequency ``(count - error) / N``.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from skewlab.engine.algorithms.sorted_lookup import find_sorted
from skewlab.shared import copy_as_in_memory
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = [
    "SketchPerSource",
    "SpaceSaving",
    "prefetch",
    "ss_collect",
    "ss_decay",
    "ss_count",
    "ss_guaranteed",
    "ss_find",
    "ss_offer",
    "ss_offer_batch",
]

# meta columns
USED, VMIN, TOP, STALE, TOTAL, SHIFT, NOVF, HL, NHOT = 0, 1, 2, 3, 4, 5, 6, 7, 8
_META_FIELDS = 9
_NO_HOT_LEVEL = 1 << 62  # meta[HL] when no overflow counter is tracked as hot
# counter columns: fingerprint, error, count, links (window) or last update time (overflow)
_FIELD_FP, _FIELD_ERROR, _FIELD_COUNT, _FIELD_LINK = 0, 1, 2, 3
_COUNTER_FIELDS = 4

MAX_CAPACITY = 1 << 22
WIN = 32  # ring of count lists: counts in [VMIN, TOP) with TOP - VMIN <= WIN
_WIN_MASK = WIN - 1
PF_SLOT, PF_COUNTER = 16, 8  # prefetch distances (tuples ahead) of table slots and counter rows
_LOW32 = 0xFFFFFFFF  # low half of a link word (next) or table entry (counter id + 1)
_HIGH32 = 0xFFFFFFFF00000000  # high half of a table entry (fingerprint tag)
_HIGH32_SIGNED = -4294967296  # _HIGH32 as int64: high half of a link word (prev)


def pow2_bits(size: int) -> int:
    """Smallest ``bits >= 3`` with ``2^bits >= size`` (sizes of power-of-two hash tables)."""
    bits = 3
    while (1 << bits) < size:
        bits += 1
    return bits


def _table_bits(capacity: int) -> int:
    return pow2_bits(8 * capacity)


def _aligned_array(shape: tuple[int, ...], dtype, fill=0, align: int = 64) -> np.ndarray:
    """A C-contiguous array filled with ``fill`` whose data starts on an ``align``-byte boundary
    (speed only: a 32-byte counter row then never straddles two cache lines)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    buf = np.empty(nbytes + align, dtype=np.uint8)
    off = (-buf.ctypes.data) % align
    out = buf[off : off + nbytes].view(dtype).reshape(shape)
    out[...] = fill
    return out


@intrinsic
def prefetch(typingctx, arr, index):
    """Hint the CPU to fetch the cache line of ``arr.flat[index]`` (``arr`` C-contiguous); no effect
    on results.  ``llvm.prefetch`` (read, high locality, data cache)."""
    sig = types.void(arr, index)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.gep(ary.data, [args[1]])
        i8p = builder.bitcast(ptr, ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p.type, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch")
        builder.call(fn, [i8p, i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


# ---------------------------------------------------------------------------------------------
# Kernels.  ``sketch`` is the tuple returned by :meth:`SpaceSaving.arrays`: flat (1-D) views of one
# source's arrays ``(cnt, ring, ovf, table, meta, scr)``.  Every index is converted to unsigned
# before use: numba then omits the negative-index wraparound it adds to each signed index.
# ---------------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _counter_get(cnt, i, field):  # pragma: no cover - compiled
    """Field ``field`` of counter ``i``."""
    return cnt[np.uint64(i * _COUNTER_FIELDS + field)]


@njit(cache=True, inline="always")
def _counter_set(cnt, i, field, v):  # pragma: no cover - compiled
    cnt[np.uint64(i * _COUNTER_FIELDS + field)] = v


@njit(cache=True, inline="always")
def _link_next(link):  # pragma: no cover - compiled
    """Next counter from a link word (sign-extended low half)."""
    return np.int64(np.int32(link & _LOW32))


@njit(cache=True, inline="always")
def ss_find(sketch, fp):  # pragma: no cover - compiled
    """Counter id tracking ``fp`` in sketch ``sketch``, or -1 (stale table entries are skipped: the
    counter's full fingerprint decides)."""
    cnt = sketch[0]
    tab = sketch[3]
    meta = sketch[4]
    mask = np.uint64(tab.size - 1)
    fpu = np.uint64(fp)
    j = fpu >> np.uint64(meta[SHIFT])
    hi = fpu & np.uint64(_HIGH32)
    fpi = np.int64(fpu)
    while True:
        e = tab[j]
        if e == 0:
            return np.int64(-1)
        if (e & np.uint64(_HIGH32)) == hi:
            t = np.int64(e & np.uint64(_LOW32)) - 1
            if _counter_get(cnt, t, _FIELD_FP) == fpi and _counter_get(cnt, t, _FIELD_COUNT) > 0:
                return t
        j = (j + np.uint64(1)) & mask


@njit(cache=True, inline="always")
def ss_prefetch_slot(sketch, fp):  # pragma: no cover - compiled
    """Prefetch the home table slot of ``fp`` (speed only)."""
    prefetch(sketch[3], np.uint64(fp) >> np.uint64(sketch[4][SHIFT]))


@njit(cache=True, inline="always")
def ss_prefetch_counter(sketch, fp):  # pragma: no cover - compiled
    """Prefetch the counter row of the first entry in ``fp``'s home slot (speed only)."""
    e = sketch[3][np.uint64(fp) >> np.uint64(sketch[4][SHIFT])]
    prefetch(sketch[0], ((e & np.uint64(_LOW32)) - np.uint64(1)) * np.uint64(_COUNTER_FIELDS))


@njit(cache=True, inline="always")
def ss_count(sketch, cid):  # pragma: no cover - compiled
    """Count (upper bound of the frequency) of counter ``cid``."""
    return _counter_get(sketch[0], cid, _FIELD_COUNT)


@njit(cache=True, inline="always")
def ss_error(sketch, cid):  # pragma: no cover - compiled
    """Error (count − error is a lower bound of the frequency) of counter ``cid``."""
    return _counter_get(sketch[0], cid, _FIELD_ERROR)


@njit(cache=True, inline="always")
def _append(cnt, ring, i, c):  # pragma: no cover - compiled
    """Counter ``i`` (count ``c``, in the window) becomes the last of the list of count ``c``."""
    s = np.uint64((c & _WIN_MASK) * 2)
    t = ring[s + np.uint64(1)]
    _counter_set(cnt, i, _FIELD_LINK, (t << 32) | np.int64(_LOW32))  # next = -1, prev = t
    if t >= 0:
        _counter_set(cnt, t, _FIELD_LINK, (_counter_get(cnt, t, _FIELD_LINK) & np.int64(_HIGH32_SIGNED)) | np.int64(i))
    else:
        ring[s] = i
    ring[s + np.uint64(1)] = i


@njit(cache=True, inline="always")
def _less(cnt, a, b):  # pragma: no cover - compiled
    ca = _counter_get(cnt, a, _FIELD_COUNT)
    cb = _counter_get(cnt, b, _FIELD_COUNT)
    return ca < cb or (ca == cb and _counter_get(cnt, a, _FIELD_LINK) < _counter_get(cnt, b, _FIELD_LINK))


@njit(cache=True, inline="always")
def _sift_down(cnt, scr, r, end):  # pragma: no cover - compiled
    """Max-heap sift of ``scr[r]`` within ``scr[:end]``, ordered by (count, last update) (:func:`_less`)."""
    while True:
        c = 2 * r + 1
        if c >= end:
            return
        if c + 1 < end and _less(cnt, scr[c], scr[c + 1]):
            c += 1
        if not _less(cnt, scr[r], scr[c]):
            return
        scr[r], scr[c] = scr[c], scr[r]
        r = c


@njit(cache=True, _nrt=False)
def _migrate(cnt, ring, ovf, meta, scr):  # pragma: no cover - compiled
    """Raise TOP to VMIN + WIN: the overflow counters with a count below the new TOP join the lists
    of their counts, in order of their last update (heapsort by (count, time) in ``scr``)."""
    top = meta[TOP]
    t2 = meta[VMIN] + WIN
    k = 0
    keep = 0
    for r in range(meta[NOVF]):
        i = ovf[r]
        if _counter_get(cnt, i, _FIELD_COUNT) < t2:
            scr[k] = i
            k += 1
        else:
            ovf[keep] = i
            keep += 1
    meta[NOVF] = keep
    # heapsort scr[:k] ascending by (count, last update)
    for start in range(k // 2 - 1, -1, -1):
        _sift_down(cnt, scr, start, k)
    for end in range(k - 1, 0, -1):
        scr[0], scr[end] = scr[end], scr[0]
        _sift_down(cnt, scr, 0, end)
    for r in range(k):
        i = scr[r]
        _append(cnt, ring, i, _counter_get(cnt, i, _FIELD_COUNT))
    meta[TOP] = t2
    if t2 >= meta[HL]:  # the hot list is valid only while HL > TOP: drop it
        meta[HL] = _NO_HOT_LEVEL
        meta[NHOT] = 0
    return top


@njit(cache=True, _nrt=False)
def _rebuild_table(cnt, tab, meta):  # pragma: no cover - compiled
    """Refill the hash table of one source from its used counters (linear probing, as ``ss_offer``)."""
    tab[:] = 0
    mask = np.uint64(tab.size - 1)
    sh = np.uint64(meta[SHIFT])
    for i in range(cnt.size // _COUNTER_FIELDS):
        if cnt[i * _COUNTER_FIELDS + _FIELD_COUNT] > 0:
            fpu = np.uint64(cnt[i * _COUNTER_FIELDS + _FIELD_FP])
            j = fpu >> sh
            while tab[j] != 0:
                j = (j + np.uint64(1)) & mask
            tab[j] = (fpu & np.uint64(_HIGH32)) | np.uint64(i + 1)
    meta[STALE] = 0


@njit(cache=True, inline="always")
def ss_offer(sketch, fp):  # pragma: no cover - compiled
    """Count one occurrence of ``fp`` (SpaceSaving update); returns the key's counter id."""
    cnt = sketch[0]
    ring = sketch[1]
    tab = sketch[3]
    meta = sketch[4]
    now = meta[TOTAL] + 1
    meta[TOTAL] = now
    mask = np.uint64(tab.size - 1)
    fpu = np.uint64(fp)
    fpi = np.int64(fpu)
    hi = fpu & np.uint64(_HIGH32)
    j = fpu >> np.uint64(meta[SHIFT])
    while True:
        e = tab[j]
        if e == 0:
            break
        if (e & np.uint64(_HIGH32)) == hi:
            t = np.int64(e & np.uint64(_LOW32)) - 1
            if _counter_get(cnt, t, _FIELD_FP) == fpi:
                # hit (a tracked key; table entries only ever point at used counters)
                c = _counter_get(cnt, t, _FIELD_COUNT)
                _counter_set(cnt, t, _FIELD_COUNT, c + 1)
                top = meta[TOP]
                if c >= top:  # overflow counter: no list to maintain
                    _counter_set(cnt, t, _FIELD_LINK, now)
                    if c + 1 == meta[HL]:  # crosses the hot level: joins the hot list
                        nh = meta[NHOT]
                        sketch[6][np.uint64(nh)] = t
                        meta[NHOT] = nh + 1
                    return t
                link = _counter_get(cnt, t, _FIELD_LINK)
                p = link >> 32
                q = _link_next(link)
                s = np.uint64((c & _WIN_MASK) * 2)
                if p >= 0:
                    p_prev_half = _counter_get(cnt, p, _FIELD_LINK) & np.int64(_HIGH32_SIGNED)
                    _counter_set(cnt, p, _FIELD_LINK, p_prev_half | (q & _LOW32))
                else:
                    ring[s] = q
                if q >= 0:
                    _counter_set(cnt, q, _FIELD_LINK, (_counter_get(cnt, q, _FIELD_LINK) & _LOW32) | (p << 32))
                else:
                    ring[s + np.uint64(1)] = p
                if c + 1 >= top:
                    _counter_set(cnt, t, _FIELD_LINK, now)
                    ovf = sketch[2]
                    nv = meta[NOVF]
                    ovf[np.uint64(nv)] = t
                    meta[NOVF] = nv + 1
                else:
                    _append(cnt, ring, t, c + 1)
                if p < 0 and q < 0 and c == meta[VMIN]:
                    meta[VMIN] = c + 1
                    if top - (c + 1) < WIN // 2:
                        _migrate(cnt, ring, sketch[2], meta, sketch[5])
                return t
        j = (j + np.uint64(1)) & mask
    # miss: the victim is the first counter of the list of the minimum count (unused counters
    # have count 0 and sit in the list of count 0 in id order)
    vmin = meta[VMIN]
    s = np.uint64((vmin & _WIN_MASK) * 2)
    i = ring[s]
    tab[j] = hi | np.uint64(i + 1)
    q = _link_next(_counter_get(cnt, i, _FIELD_LINK))
    ring[s] = q
    if q >= 0:
        _counter_set(cnt, q, _FIELD_LINK, _counter_get(cnt, q, _FIELD_LINK) | np.int64(_HIGH32_SIGNED))  # prev = -1
        prefetch(cnt, np.uint64(q * _COUNTER_FIELDS))
    else:
        ring[s + np.uint64(1)] = -1
    _counter_set(cnt, i, _FIELD_FP, fpi)
    _counter_set(cnt, i, _FIELD_ERROR, vmin)
    _counter_set(cnt, i, _FIELD_COUNT, vmin + 1)
    _append(cnt, ring, i, vmin + 1)  # vmin + 1 < TOP always (TOP - VMIN >= WIN / 2)
    if vmin == 0:
        meta[USED] += 1
    else:
        # lazy deletion: the victim's table entry stays (stale) until the next rebuild
        st = meta[STALE] + 1
        meta[STALE] = st
        if st >= cnt.size // _COUNTER_FIELDS:
            _rebuild_table(cnt, tab, meta)
    if q < 0:
        meta[VMIN] = vmin + 1
        if meta[TOP] - (vmin + 1) < WIN // 2:
            _migrate(cnt, ring, sketch[2], meta, sketch[5])
    return i


@njit(cache=True, _nrt=False)
def ss_offer_batch(sketch, fps):  # pragma: no cover - compiled
    """Offer every fingerprint of ``fps`` in order."""
    m = fps.size
    for x in range(m):
        if x + PF_SLOT < m:
            ss_prefetch_slot(sketch, fps[x + PF_SLOT])
        if x + PF_COUNTER < m:
            ss_prefetch_counter(sketch, fps[x + PF_COUNTER])
        ss_offer(sketch, fps[x])


@njit(cache=True)
def ss_collect(sketch, min_count):  # pragma: no cover - compiled
    """Counter ids with ``count >= min_count``: decreasing count; within a count, most recently
    updated first (overflow counters sorted by (count, last update), then the lists)."""
    cnt, ring, ovf, tab, meta, scr, hot = sketch
    nv = meta[NOVF]
    ids = ovf[:nv].copy()
    c = np.empty(nv, np.int64)
    ts = np.empty(nv, np.int64)
    for r in range(nv):
        c[r] = _counter_get(cnt, ids[r], _FIELD_COUNT)
        ts[r] = _counter_get(cnt, ids[r], _FIELD_LINK)
    o = np.argsort(-ts, kind="mergesort")
    o = o[np.argsort(-c[o], kind="mergesort")]
    out = np.empty(meta[USED], dtype=np.int64)
    m = 0
    for r in range(nv):
        if c[o[r]] >= min_count:
            out[m] = ids[o[r]]
            m += 1
    v = meta[TOP] - 1
    lo = max(meta[VMIN], min_count, 1)
    while v >= lo:
        i = ring[np.uint64((v & _WIN_MASK) * 2 + 1)]
        while i >= 0:
            out[m] = i
            m += 1
            i = _counter_get(cnt, i, _FIELD_LINK) >> 32
        v -= 1
    return out[:m]


@njit(cache=True, _nrt=False)
def _hot_rebuild(cnt, ovf, hot, meta, level):  # pragma: no cover - compiled
    """Hot list := the overflow counters with count >= ``level`` (``level`` > TOP)."""
    m = 0
    for r in range(meta[NOVF]):
        i = ovf[r]
        if _counter_get(cnt, i, _FIELD_COUNT) >= level:
            hot[m] = i
            m += 1
    meta[NHOT] = m
    meta[HL] = level


@njit(cache=True, _nrt=False)
def _restore(cnt, ring, ovf, meta, fps, counts, errs):  # pragma: no cover - compiled
    """Reset one source's structure to hold exactly ``fps`` with ``counts``/``errs`` (count > 0),
    given in eviction order (ascending count, least recently updated first): counter r holds entry r,
    the free counters follow in the list of count 0 in id order; N = Σ counts."""
    cap = cnt.size // _COUNTER_FIELDS
    k = fps.size
    for i in range(cap):
        _counter_set(cnt, i, _FIELD_FP, -1)
        _counter_set(cnt, i, _FIELD_ERROR, 0)
        _counter_set(cnt, i, _FIELD_COUNT, 0)
    for j in range(ring.size):
        ring[j] = -1
    vmin = np.int64(0) if k < cap else counts[0]
    top = vmin + WIN
    total = np.int64(0)
    nv = 0
    for r in range(k):
        c = counts[r]
        total += c
        _counter_set(cnt, r, _FIELD_FP, np.int64(fps[r]))
        _counter_set(cnt, r, _FIELD_ERROR, errs[r])
        _counter_set(cnt, r, _FIELD_COUNT, c)
        if c < top:
            _append(cnt, ring, r, c)
        else:
            ovf[nv] = r
            nv += 1
            _counter_set(cnt, r, _FIELD_LINK, np.int64(r + 1))  # update times 1..k: all before the next update
    for i in range(k, cap):
        _append(cnt, ring, i, np.int64(0))
    meta[USED] = k
    meta[VMIN] = vmin
    meta[TOP] = top
    meta[STALE] = 0
    meta[TOTAL] = total
    meta[NOVF] = nv
    meta[HL] = _NO_HOT_LEVEL
    meta[NHOT] = 0


@njit(cache=True)
def ss_decay(sketch, factor):  # pragma: no cover - compiled
    """Multiply every count of one source by ``factor`` (module docstring, "Decay"): counts become
    ``⌊factor·count⌋``, guaranteed counts ``⌊factor·(count − error)⌋``, counters at 0 are freed and the
    survivors keep their eviction order; returns how much N dropped.  Compiled end to end, so a
    router that decays every few hundred tuples pays no interpreter time for it."""
    cnt, ring, ovf, tab, meta, scr, hot = sketch
    before = meta[TOTAL]
    ids = ss_collect(sketch, 1)[::-1]  # eviction order
    k = ids.size
    fps = np.empty(k, np.int64)
    counts = np.empty(k, np.int64)
    errs = np.empty(k, np.int64)
    m = 0
    for r in range(k):
        i = ids[r]
        c = _counter_get(cnt, i, _FIELD_COUNT)
        new = np.int64(np.floor(c * factor))
        if new > 0:
            sure = np.int64(np.floor((c - _counter_get(cnt, i, _FIELD_ERROR)) * factor))
            fps[m] = _counter_get(cnt, i, _FIELD_FP)
            counts[m] = new
            errs[m] = new - sure
            m += 1
    _restore(cnt, ring, ovf, meta, fps[:m], counts[:m], errs[:m])
    _rebuild_table(cnt, tab, meta)
    return before - meta[TOTAL]


@njit(cache=True, inline="always")
def ss_guaranteed(sketch, threshold, out):  # pragma: no cover - compiled
    """Write the guaranteed counts ``count − error`` that are ``>= threshold`` into ``out`` (float64,
    length >= capacity); return how many (in no particular order).  No allocation.

    Counters with count >= threshold are the hot list (overflow counters with count >= HL, kept
    while HL > TOP; rebuilt from the overflow counters when threshold < HL or threshold > 2·HL)
    if threshold > TOP, else all overflow counters plus the lists of counts in [threshold, TOP)."""
    cnt = sketch[0]
    ring = sketch[1]
    ovf = sketch[2]
    meta = sketch[4]
    hot = sketch[6]
    m = 0
    top = meta[TOP]
    if threshold > top:
        hl = meta[HL]
        if threshold < hl or threshold > 2 * hl:
            level = np.int64(np.ceil(threshold))
            _hot_rebuild(cnt, ovf, hot, meta, level)
        for r in range(meta[NHOT]):
            i = hot[r]
            g = _counter_get(cnt, i, _FIELD_COUNT) - _counter_get(cnt, i, _FIELD_ERROR)
            if g >= threshold:
                out[m] = g
                m += 1
        return m
    for r in range(meta[NOVF]):
        i = ovf[r]
        g = _counter_get(cnt, i, _FIELD_COUNT) - _counter_get(cnt, i, _FIELD_ERROR)
        if g >= threshold:
            out[m] = g
            m += 1
    v = top - 1
    while v >= meta[VMIN] and v >= threshold and v >= 1:
        i = ring[np.uint64((v & _WIN_MASK) * 2 + 1)]
        while i >= 0:
            g = v - _counter_get(cnt, i, _FIELD_ERROR)
            if g >= threshold:
                out[m] = g
                m += 1
            i = _counter_get(cnt, i, _FIELD_LINK) >> 32
        v -= 1
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
        self.cnt = _aligned_array((s, c, _COUNTER_FIELDS), np.int64, 0)
        ids = np.arange(c, dtype=np.int64)
        nxt = np.where(ids + 1 < c, ids + 1, -1)
        prv = ids - 1
        self.cnt[:, :, _FIELD_LINK] = (nxt & _LOW32) | (prv << 32)  # all counters in the list of count 0
        self.cnt[:, :, _FIELD_FP] = -1
        self.ring = np.full((s, 2 * WIN), -1, dtype=np.int64)
        self.ring[:, 0] = 0
        self.ring[:, 1] = c - 1
        self.ovf = np.zeros((s, c), dtype=np.int64)
        self.scr = np.zeros((s, c), dtype=np.int64)
        self.hot = np.zeros((s, c), dtype=np.int64)
        self.table = _aligned_array((s, t), np.uint64, 0)
        self.meta = np.zeros((s, _META_FIELDS), dtype=np.int64)
        self.meta[:, TOP] = WIN
        self.meta[:, HL] = _NO_HOT_LEVEL
        self.meta[:, SHIFT] = 64 - bits

    # Pickling: the hash table is derived data (every used counter's fingerprint and id), left out
    # and rebuilt on load; the rebuilt table has no stale entries and may place entries in other
    # probe positions; no result depends on slot positions.
    def __deepcopy__(self, memo: dict) -> "SpaceSaving":
        return copy_as_in_memory(self, memo)  # no packing, no rebuilt index

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["table"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.table is None:
            self.table = _aligned_array((self.n_sources, 1 << _table_bits(self.capacity)), np.uint64, 0)
            for s in range(self.n_sources):
                self.rebuild_table(s)

    #: the arrays (source on axis 0) that make up one source's sketch; the hash table is derived from
    #: them (:meth:`rebuild_table`), so it is not shipped
    SOURCE_ARRAYS: tuple[str, ...] = ("cnt", "ring", "ovf", "hot", "meta")

    def export_source(self, source: int) -> dict[str, np.ndarray]:
        """Copies of ``source``'s arrays (:data:`SOURCE_ARRAYS`), to ship with the source's state."""
        s = self._check(source)
        return {a: getattr(self, a)[s].copy() for a in self.SOURCE_ARRAYS}

    def import_source(self, source: int, arrays: dict[str, np.ndarray]) -> None:
        """Install arrays from :meth:`export_source` for ``source`` and rebuild its hash table (other
        names, e.g. a "table" from an older sender, are derived data and ignored).  A slice from a
        sketch of another capacity is re-packed through :meth:`with_capacity`."""
        s = self._check(source)
        other = arrays.get("cnt")
        if other is not None and other.shape[0] != self.capacity:  # a sketch of another capacity
            sender = SpaceSaving(other.shape[0], 1)
            sender.import_source(0, arrays)
            arrays = sender.with_capacity(self.capacity).export_source(0)
        for a, value in arrays.items():
            if a in self.SOURCE_ARRAYS:
                getattr(self, a)[s] = value
        self.rebuild_table(s)

    def rebuild_table(self, source: int) -> None:
        """Rebuild ``source``'s hash table from its counters (after its arrays were replaced)."""
        s = self._check(source)
        _rebuild_table(self.cnt[s].reshape(-1), self.table[s], self.meta[s])

    def _check(self, source: int) -> int:
        source = int(source)
        if not 0 <= source < self.n_sources:
            raise ValueError(f"source must be in [0, {self.n_sources}), got {source}")
        return source

    def arrays(self, source: int = 0) -> tuple:
        """The tuple of row views the kernels take for ``source``."""
        s = self._check(source)
        return (self.cnt[s].reshape(-1), self.ring[s], self.ovf[s], self.table[s], self.meta[s], self.scr[s], self.hot[s])

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

    def decay(self, factor: float, source: int = 0) -> int:
        """Multiply every count of ``source`` by ``factor`` in [0, 1] (:func:`ss_decay`); returns how
        much N dropped."""
        s = self._check(source)
        factor = float(factor)
        if not 0.0 <= factor <= 1.0:
            raise ValueError(f"decay factor must be in [0, 1], got {factor}")
        return int(ss_decay(self.arrays(s), factor))

    def with_capacity(self, capacity: int) -> "SpaceSaving":
        """A sketch of ``capacity`` counters per source holding this one's entries (counts, errors,
        eviction order).  When an entry set does not fit, the ``capacity`` entries last in eviction
        order are kept and N becomes their sum (what a smaller sketch keeps of the same keys)."""
        out = SpaceSaving(capacity, self.n_sources)
        for s in range(self.n_sources):
            ids = ss_collect(self.arrays(s), 1)[::-1][-out.capacity:]
            rows = self.cnt[s][ids]
            _restore(out.cnt[s].reshape(-1), out.ring[s], out.ovf[s], out.meta[s],
                     rows[:, _FIELD_FP].copy(), rows[:, _FIELD_COUNT].copy(), rows[:, _FIELD_ERROR].copy())
            out.rebuild_table(s)
        return out

    def entries(self, source: int = 0, min_count: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(fps, counts, errors)`` of tracked keys with ``count >= min_count``, by decreasing count."""
        s = self._check(source)
        ids = ss_collect(self.arrays(s), max(int(min_count), 1))
        rows = self.cnt[s][ids]
        return rows[:, _FIELD_FP].view(np.uint64).copy(), rows[:, _FIELD_COUNT].copy(), rows[:, _FIELD_ERROR].copy()

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
            pos, hit = find_sorted(tracked, fps)
            out_c[hit] = counts[pos[hit]]
            out_e[hit] = errs[pos[hit]]
        return out_c, out_e


class SketchPerSource:
    """Router mixin: a source's state (:meth:`source_state`, shipped to the executor that routes it)
    carries that source's slice of the router's :class:`SpaceSaving` ``self.sketch`` beside the
    router's own per-source state.  Put it before the router base class."""

    sketch: SpaceSaving

    def source_state(self, source: int) -> dict[str, Any]:
        out = super().source_state(source)  # type: ignore[misc]
        out["sketch"] = self.sketch.export_source(source)
        return out

    def set_source_state(self, source: int, state: Mapping[str, Any]) -> None:
        state = dict(state)
        sketch = state.pop("sketch", None)
        super().set_source_state(source, state)  # type: ignore[misc]
        if sketch:
            self.sketch.import_source(source, sketch)
