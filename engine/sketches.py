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
minimum bucket is the victim.  Every update is O(1).

Memory layout (chosen for speed: a SpaceSaving update is a few dependent random memory accesses,
so the fields an update touches together share a row).  ``S`` sources, ``c = capacity``, ``T``
table slots; every array has the source as first axis and is 64-byte aligned when allocated here
(a counter row then never straddles two cache lines):

* ``cnt[s, i, :]`` (int64, 32 bytes per counter): fingerprint (bit pattern), error, bucket,
  links ``(next & 0xFFFFFFFF) | prev << 32`` (−1 = none) of counter ``i`` in its bucket's list;
* ``bkt[s, b, :]`` (int64, 40 bytes per bucket): count value, first counter, last counter, next
  (larger) bucket, previous (smaller) bucket; ``bfree[s, :]`` stack of free buckets;
* ``table[s, j]`` (uint64): open-addressing hash table, 8 bytes per slot:
  ``(fp & 0xFFFFFFFF00000000) | (counter id + 1)``, 0 = empty.  The home slot of a key is the top
  ``log2 T`` bits of its fingerprint, so the home of a stored entry is ``entry >> (64 − log2 T)``
  (no counter access is needed to move entries); a matching high half is confirmed against the
  counter's full fingerprint.  Linear probing, backward-shift deletion (tombstone-free),
  ``T`` = the power of two >= 4 · capacity (load <= 1/4: a probe for an absent key, i.e. every
  eviction, mostly stops at its home slot; measured 2x cheaper evictions than load 1/2);
* ``meta[s, :]`` used counters, smallest bucket, largest bucket, free buckets, total N, table shift.

The count of counter ``i`` is the value of its bucket; a key's frequency estimate is ``count / N``
and its *guaranteed* frequency ``(count - error) / N``.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = [
    "SpaceSaving",
    "prefetch",
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
# counter columns
_KF, _KE, _KB, _KL = 0, 1, 2, 3
_NKC = 4
# bucket columns
_BV, _BH, _BT, _BN, _BP = 0, 1, 2, 3, 4
_NBC = 5

MAX_CAPACITY = 1 << 22
PF_SLOT, PF_COUNTER = 16, 8  # prefetch distances (tuples ahead) of table slots and counter rows
_LO = 0xFFFFFFFF
_HI = 0xFFFFFFFF00000000


def _table_bits(capacity: int) -> int:
    bits = 3
    while (1 << bits) < 4 * capacity:
        bits += 1
    return bits


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
# Kernels.  ``sk`` is the tuple returned by :meth:`SpaceSaving.arrays`: flat (1-D) views of one
# source's arrays.  Every index is converted to unsigned before use (``_ld``/``_st``): numba then
# omits the negative-index wraparound it adds to each signed index (measured: ~30% fewer
# instructions per update); the ids themselves stay signed (−1 = none).
# ---------------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _ld(a, i):  # pragma: no cover - compiled
    return a[np.uint64(i)]


@njit(cache=True, inline="always")
def _st(a, i, v):  # pragma: no cover - compiled
    a[np.uint64(i)] = v


@njit(cache=True, inline="always")
def _cg(cnt, i, f):  # pragma: no cover - compiled
    """Field ``f`` of counter ``i``."""
    return cnt[np.uint64(i * _NKC + f)]


@njit(cache=True, inline="always")
def _cs(cnt, i, f, v):  # pragma: no cover - compiled
    cnt[np.uint64(i * _NKC + f)] = v


@njit(cache=True, inline="always")
def _bg(bkt, b, f):  # pragma: no cover - compiled
    """Field ``f`` of bucket ``b``."""
    return bkt[np.uint64(b * _NBC + f)]


@njit(cache=True, inline="always")
def _bs(bkt, b, f, v):  # pragma: no cover - compiled
    bkt[np.uint64(b * _NBC + f)] = v


@njit(cache=True, inline="always")
def _lo(link):  # pragma: no cover - compiled
    """Next counter from a link word (sign-extended low half)."""
    return np.int64(np.int32(link & _LO))


@njit(cache=True, inline="always")
def _prev(cnt, i):  # pragma: no cover - compiled
    return _cg(cnt, i, _KL) >> 32


@njit(cache=True, inline="always")
def _set_next(cnt, i, q):  # pragma: no cover - compiled
    _cs(cnt, i, _KL, (_cg(cnt, i, _KL) & np.int64(-4294967296)) | (q & _LO))


@njit(cache=True, inline="always")
def _set_prev(cnt, i, p):  # pragma: no cover - compiled
    _cs(cnt, i, _KL, (_cg(cnt, i, _KL) & _LO) | (p << 32))


@njit(cache=True, inline="always")
def ss_find(sk, fp):  # pragma: no cover - compiled
    """Counter id tracking ``fp`` in sketch ``sk``, or -1."""
    cnt, bkt, bfree, tab, meta = sk
    mask = np.uint64(tab.size - 1)
    fpu = np.uint64(fp)
    j = fpu >> np.uint64(meta[SHIFT])
    hi = fpu & np.uint64(_HI)
    fpi = np.int64(fpu)
    while True:
        e = tab[j]
        if e == 0:
            return np.int64(-1)
        if (e & np.uint64(_HI)) == hi:
            t = np.int64(e & np.uint64(_LO)) - 1
            if _cg(cnt, t, _KF) == fpi:
                return t
        j = (j + np.uint64(1)) & mask


@njit(cache=True, inline="always")
def ss_prefetch_slot(sk, fp):  # pragma: no cover - compiled
    """Prefetch the home table slot of ``fp`` (speed only)."""
    prefetch(sk[3], np.uint64(fp) >> np.uint64(sk[4][SHIFT]))


@njit(cache=True, inline="always")
def ss_prefetch_counter(sk, fp):  # pragma: no cover - compiled
    """Prefetch the counter row of the first entry in ``fp``'s home slot (speed only)."""
    e = sk[3][np.uint64(fp) >> np.uint64(sk[4][SHIFT])]
    prefetch(sk[0], ((e & np.uint64(_LO)) - np.uint64(1)) * np.uint64(_NKC))


@njit(cache=True, inline="always")
def ss_count(sk, cid):  # pragma: no cover - compiled
    """Count (upper bound of the frequency) of counter ``cid``."""
    return _bg(sk[1], _cg(sk[0], cid, _KB), _BV)


@njit(cache=True, inline="always")
def ss_error(sk, cid):  # pragma: no cover - compiled
    """Error (count − error is a lower bound of the frequency) of counter ``cid``."""
    return _cg(sk[0], cid, _KE)


@njit(cache=True, inline="always")
def _bucket_new(bkt, bfree, meta, value):  # pragma: no cover - compiled
    nf = meta[NFREE] - 1
    meta[NFREE] = nf
    b = np.int64(_ld(bfree, nf))
    _bs(bkt, b, _BV, value)
    return b


@njit(cache=True, inline="always")
def _bucket_unlink_release(bkt, bfree, meta, b):  # pragma: no cover - compiled
    p = _bg(bkt, b, _BP)
    q = _bg(bkt, b, _BN)
    if p >= 0:
        _bs(bkt, p, _BN, q)
    else:
        meta[BMIN] = q
    if q >= 0:
        _bs(bkt, q, _BP, p)
    else:
        meta[BMAX] = p
    _st(bfree, meta[NFREE], b)
    meta[NFREE] += 1


@njit(cache=True, inline="always")
def _counter_append(cnt, bkt, i, b):  # pragma: no cover - compiled
    """Counter ``i`` becomes the last of bucket ``b``."""
    t = _bg(bkt, b, _BT)
    _cs(cnt, i, _KL, (t << 32) | np.int64(_LO))  # next = -1, prev = t
    _cs(cnt, i, _KB, b)
    if t >= 0:
        _set_next(cnt, t, i)
    else:
        _bs(bkt, b, _BH, i)
    _bs(bkt, b, _BT, i)


@njit(cache=True, inline="always")
def _increment(cnt, bkt, bfree, meta, i):  # pragma: no cover - compiled
    """count(i) += 1, moving i to the tail of the bucket of count + 1 (Stream-Summary)."""
    b = _cg(cnt, i, _KB)
    v = _bg(bkt, b, _BV)
    nb = _bg(bkt, b, _BN)
    nxt_ok = nb >= 0 and _bg(bkt, nb, _BV) == v + 1
    link = _cg(cnt, i, _KL)
    if link == -1:  # alone in its bucket (next = prev = -1)
        if nxt_ok:
            _bucket_unlink_release(bkt, bfree, meta, b)
            _counter_append(cnt, bkt, i, nb)
        else:
            _bs(bkt, b, _BV, v + 1)
        return
    # unlink i from b
    p = link >> 32
    q = _lo(link)
    if p >= 0:
        _set_next(cnt, p, q)
    else:
        _bs(bkt, b, _BH, q)
    if q >= 0:
        _set_prev(cnt, q, p)
    else:
        _bs(bkt, b, _BT, p)
    if not nxt_ok:
        nb = _bucket_new(bkt, bfree, meta, v + 1)
        _bs(bkt, nb, _BH, -1)
        _bs(bkt, nb, _BT, -1)
        r = _bg(bkt, b, _BN)
        _bs(bkt, nb, _BN, r)
        _bs(bkt, nb, _BP, b)
        if r >= 0:
            _bs(bkt, r, _BP, nb)
        else:
            meta[BMAX] = nb
        _bs(bkt, b, _BN, nb)
    _counter_append(cnt, bkt, i, nb)


@njit(cache=True, inline="always")
def _table_delete_victim(tab, shift, oldfp, cid):  # pragma: no cover - compiled
    """Delete the entry ``(oldfp high half, cid)`` (present) with backward-shift deletion."""
    mask = np.uint64(tab.size - 1)
    sh = np.uint64(shift)
    one = np.uint64(1)
    i = oldfp >> sh
    target = (oldfp & np.uint64(_HI)) | np.uint64(cid + 1)
    while tab[i] != target:
        i = (i + one) & mask
    j = i
    while True:
        j = (j + one) & mask
        e = tab[j]
        if e == 0:
            break
        k = e >> sh
        # entry j may stay iff its home k lies cyclically in (i, j]
        if i <= j:
            stay = (i < k) and (k <= j)
        else:
            stay = (i < k) or (k <= j)
        if not stay:
            tab[i] = e
            i = j
    tab[i] = 0


@njit(cache=True, inline="always")
def ss_offer(sk, fp):  # pragma: no cover - compiled
    """Count one occurrence of ``fp`` (SpaceSaving update); returns the key's counter id."""
    cnt, bkt, bfree, tab, meta = sk
    meta[TOTAL] += 1
    mask = np.uint64(tab.size - 1)
    shift = meta[SHIFT]
    fpu = np.uint64(fp)
    fpi = np.int64(fpu)
    hi = fpu & np.uint64(_HI)
    j = fpu >> np.uint64(shift)
    while True:
        e = tab[j]
        if e == 0:
            break
        if (e & np.uint64(_HI)) == hi:
            t = np.int64(e & np.uint64(_LO)) - 1
            if _cg(cnt, t, _KF) == fpi:
                _increment(cnt, bkt, bfree, meta, t)
                return t
        j = (j + np.uint64(1)) & mask
    used = meta[USED]
    if used * _NKC < cnt.size:
        # free counter: count 1, error 0, in the bucket of count 1 (the smallest possible)
        i = used
        meta[USED] = used + 1
        _cs(cnt, i, _KF, fpi)
        _cs(cnt, i, _KE, 0)
        tab[j] = hi | np.uint64(i + 1)
        b0 = meta[BMIN]
        if b0 >= 0 and _bg(bkt, b0, _BV) == 1:
            _counter_append(cnt, bkt, i, b0)
        else:
            nb = _bucket_new(bkt, bfree, meta, 1)
            _bs(bkt, nb, _BH, -1)
            _bs(bkt, nb, _BT, -1)
            _bs(bkt, nb, _BP, -1)
            _bs(bkt, nb, _BN, b0)
            if b0 >= 0:
                _bs(bkt, b0, _BP, nb)
            else:
                meta[BMAX] = nb
            meta[BMIN] = nb
            _counter_append(cnt, bkt, i, nb)
        return np.int64(i)
    # evict the least recently updated counter among those with the minimum count: the first
    # counter of the smallest bucket
    bmin = meta[BMIN]
    i = _bg(bkt, bmin, _BH)
    vmin = _bg(bkt, bmin, _BV)
    # insert at the free slot found by the lookup, then delete the victim (the backward shift
    # may move the new entry; it stays reachable)
    tab[j] = hi | np.uint64(i + 1)
    old = _cg(cnt, i, _KF)
    _cs(cnt, i, _KF, fpi)
    _cs(cnt, i, _KE, vmin)
    # the victim's table entry now carries the new key's id as well; delete the one whose high
    # half is the victim's: it is reached first from the victim's home slot
    _table_delete_victim(tab, shift, np.uint64(old), i)
    q = _lo(_cg(cnt, i, _KL))
    nb = _bg(bkt, bmin, _BN)
    if q >= 0 and nb >= 0 and _bg(bkt, nb, _BV) == vmin + 1:
        # common case of _increment: i is the first of a bucket it shares, the bucket of
        # count + 1 exists.  q is the next victim: prefetch its table slot and its successor.
        _bs(bkt, bmin, _BH, q)
        lq = _cg(cnt, q, _KL)
        _cs(cnt, q, _KL, lq | np.int64(-4294967296))  # prev = -1
        r = _lo(lq)
        if r >= 0:
            prefetch(cnt, np.uint64(r * _NKC))
        prefetch(tab, np.uint64(_cg(cnt, q, _KF)) >> np.uint64(shift))
        _counter_append(cnt, bkt, i, nb)
    else:
        _increment(cnt, bkt, bfree, meta, i)
    return np.int64(i)


@njit(cache=True, _nrt=False)
def ss_offer_batch(sk, fps):  # pragma: no cover - compiled
    """Offer every fingerprint of ``fps`` in order."""
    m = fps.size
    for x in range(m):
        if x + PF_SLOT < m:
            ss_prefetch_slot(sk, fps[x + PF_SLOT])
        if x + PF_COUNTER < m:
            ss_prefetch_counter(sk, fps[x + PF_COUNTER])
        ss_offer(sk, fps[x])


@njit(cache=True)
def ss_collect(sk, min_count):  # pragma: no cover - compiled
    """Counter ids with ``count >= min_count``, walking buckets from the largest count down.

    Order: decreasing count; within a count, most recently updated first.  Cost is proportional to
    the number of counters returned (plus one bucket), not to the capacity.
    """
    cnt, bkt, bfree, tab, meta = sk
    out = np.empty(meta[USED], dtype=np.int64)
    m = 0
    b = meta[BMAX]
    while b >= 0 and _bg(bkt, b, _BV) >= min_count:
        i = _bg(bkt, b, _BT)
        while i >= 0:
            out[m] = i
            m += 1
            i = _prev(cnt, i)
        b = _bg(bkt, b, _BP)
    return out[:m]


@njit(cache=True, inline="always")
def ss_guaranteed(sk, threshold, out):  # pragma: no cover - compiled
    """Write the guaranteed counts ``count − error`` that are ``>= threshold`` into ``out`` (float64,
    length >= capacity); return how many.  Walks buckets from the largest count down and stops at
    the first count below ``threshold`` (a guaranteed count never exceeds its count).  No allocation.
    """
    cnt, bkt, bfree, tab, meta = sk
    m = 0
    b = meta[BMAX]
    while b >= 0 and _bg(bkt, b, _BV) >= threshold:
        v = _bg(bkt, b, _BV)
        i = _bg(bkt, b, _BT)
        while i >= 0:
            g = v - _cg(cnt, i, _KE)
            if g >= threshold:
                out[m] = g
                m += 1
            i = _prev(cnt, i)
        b = _bg(bkt, b, _BP)
    return m


@njit(cache=True)
def _rebuild_table(cnt, tab, meta):  # pragma: no cover - compiled
    """Refill the hash table of one source from its counters (linear probing, as ``ss_offer``)."""
    tab[:] = 0
    mask = np.uint64(tab.size - 1)
    sh = np.uint64(meta[SHIFT])
    for i in range(meta[USED]):
        fpu = np.uint64(cnt[i * _NKC + _KF])
        j = fpu >> sh
        while tab[j] != 0:
            j = (j + np.uint64(1)) & mask
        tab[j] = (fpu & np.uint64(_HI)) | np.uint64(i + 1)


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
        self.cnt = _aligned_array((s, c, _NKC), np.int64, -1)
        self.bkt = _aligned_array((s, c, _NBC), np.int64, -1)
        self.bfree = np.tile(np.arange(c - 1, -1, -1, dtype=np.int32), (s, 1))
        self.table = _aligned_array((s, t), np.uint64, 0)
        self.meta = np.zeros((s, _META), dtype=np.int64)
        self.meta[:, BMIN] = -1
        self.meta[:, BMAX] = -1
        self.meta[:, NFREE] = c
        self.meta[:, SHIFT] = 64 - bits

    # Pickling (the Spark engine ships the sketches to the executors and back every micro-batch, and
    # snapshots them): the hash table is derived data — every used counter's fingerprint and id — so
    # it is left out (40 % of the bytes with the default capacity) and rebuilt on load.  The rebuilt
    # table may place entries in other probe positions than the incremental one did; lookups,
    # insertions and backward-shift deletions are correct on any linear-probing layout, and no result
    # depends on slot positions (tested: routing continues identically after a round trip).
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
        return (self.cnt[s].reshape(-1), self.bkt[s].reshape(-1), self.bfree[s], self.table[s], self.meta[s])

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
        rows = self.cnt[s][ids]
        counts = self.bkt[s][rows[:, _KB], _BV] if ids.size else np.zeros(0, np.int64)
        return rows[:, _KF].view(np.uint64).copy(), np.asarray(counts, dtype=np.int64), rows[:, _KE].copy()

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
