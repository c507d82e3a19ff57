"""Dynamic Key Grouping (``dkg``): Dalabasmaz & Can, "Dynamic Key Grouping".

DKG extends PKG: a key may be sent to a run of **consecutive** workers ``h, h+1, …, h+W−1 (mod n)``
with ``h = hash(key) mod n`` (Sec. 4.4, Eq. 5) and width ``W = 2`` by default; a tuple goes to the
least loaded of them by the source's local load estimate (Sec. 3.3: tuples this source sent to each
worker, as percentages).  A hot key's width grows (scale out, Sec. 4.5, Alg. 4–5) up to the
"# of Max Machines" of Table 1, ``min(m, ⌊100/L_s⌋ + 1)``, and shrinks again (scale down, Sec. 4.6,
Alg. 6).  Every source runs its own independent copy (``route(fps, source)``).

* Key Items and Key Spaces (Sec. 4.1): occurrence count, width and space per key; Baby / Teenage /
  Old sized 50 / 40 / 10 % of ``expected_keys`` (paper: 100).  Key Space Manager (Alg. 1–3):
  Baby→Teenage every ``teenage_cycle_tuples``, Teenage→Old every ``old_cycle_tuples``; Alg. 3
  ``promoteToNextSpace`` literally (ties swap).
* Thresholds (Sec. 4.3): ideal load ``L_i = 100/m`` (Eq. 3), scale-out ``L_s = L_i + √L_i`` (Eq. 4).
* chooseBestTask (Alg. 4): scan candidates from ``h`` (ties → earliest); scale out (Alg. 5: warmed
  up, all candidates ``≥ L_s``, key in Old) takes ``(h+W) mod n`` if it is less loaded; scale down
  (Alg. 6: ``W > 2`` and two candidates below ``L_s``); the recursion of Alg. 4 is done in one pass.

Deviations and decisions (all tested in ``tests/algorithms/test_dkg.py``): time is counted in tuples of the
source, at :data:`NOMINAL_RATE` = 1,000 tuples/s per source (15 s / 60 s / 15 s warm-up →
15,000 / 60,000 / 15,000 tuples), so runs are deterministic; cycles run before the tuple that
reaches them, Baby→Teenage first.  Empty destination spaces are filled before Alg. 3's swap loop;
Baby is truncated to ``expected_keys − |Old| − |Teenage|`` items at each Baby→Teenage cycle (keys
wider than the default are kept); counts are never decayed; a key's width only shrinks when one of
its tuples arrives; ``resize(n)`` keeps spaces, counts and widths (capped) and restarts loads and
warm-up; ``seed`` is unused; ``default_width`` is also the floor of scale-down.  The last-processed
time of the paper's Key Item is read by no rule and not stored.

Routing runs in the numba kernel :func:`_route_kernel` over numpy arrays held by per-source
:class:`_SourceState` objects (the grouping pickles); it returns early only when the item arrays are
full, Python doubles them and resumes at the same tuple.  The full reasoning behind each decision,
the behaviour that follows from the literal rules, the data layout and the timings:
docs/design-notes.md, "engine/algorithms/groupings/dkg.py".
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Mapping

import numba
import numpy as np

from skewlab.engine.algorithms.grouping import Router, StreamingPlanner
from skewlab.engine.config.params import Param
from skewlab.engine.algorithms.registry import register

__all__ = ["DynamicKeyGrouping", "DynamicKeyRouter", "NOMINAL_RATE", "BABY", "TEENAGE", "OLD", "table1"]

NOMINAL_RATE = 1000
"""Tuples per second per source used to turn the paper's seconds into tuple counts."""

BABY, TEENAGE, OLD = 0, 1, 2
"""Key Space codes returned by :meth:`DynamicKeyGrouping.key_space` (``-1``: no Key Item)."""

# meta[] slots of a source state
_CLOCK, _TOTAL, _NEXT_TEEN, _NEXT_OLD, _SIZE, _N_OLD, _N_TEEN, _WARM_BASE = range(8)
_META = 8
_INITIAL_CAPACITY = 1024
_INDEX_FACTOR = 8  # index slots per Key Item place (load factor <= 1/8)


def table1(m: int) -> tuple[float, float, int]:
    """Table 1 of the paper for ``m`` machines: ``(L_i, L_s, max machines)``.

    ``L_i = 100/m`` (Eq. 3), ``L_s = L_i + √L_i`` (Eq. 4), max = ``min(m, ⌊100/L_s⌋ + 1)`` (the
    widest a key can grow: see the module docstring).
    """
    m = int(m)
    ideal = 100.0 / m
    thr = ideal + math.sqrt(ideal)
    return ideal, thr, int(min(m, math.floor(100.0 / thr + 1e-9) + 1))


def _index_size(capacity: int) -> int:
    """Index slots for ``capacity`` Key Items: a power of two >= ``_INDEX_FACTOR * capacity``."""
    size = 8
    while size < _INDEX_FACTOR * capacity:
        size *= 2
    return size


# ---------------------------------------------------------------------------------------------
# numba kernels.  Key Items live in dense arrays indexed by item id 1..size (row 0 is the probe
# sentinel; rows above ``size`` are kept pristine: count 0, width default_w, Baby); ``index`` is a
# linear-probing hash index of uint32 item ids (0 = empty).
# ---------------------------------------------------------------------------------------------
@numba.njit(cache=True, inline="always")
def _ug(a, i):  # pragma: no cover - compiled
    """``a[i]`` for ``i >= 0``: an unsigned index spares numba's negative-index wraparound."""
    return a[np.uint64(i)]


@numba.njit(cache=True, inline="always")
def _us(a, i, v):  # pragma: no cover - compiled
    """``a[i] = v`` for ``i >= 0`` (unsigned index, see :func:`_ug`)."""
    a[np.uint64(i)] = v


@numba.njit(cache=True, inline="always")
def _shift(index):  # pragma: no cover - compiled
    """``64 − log2(index.size)``: the home slot is the top bits of a Fibonacci hash."""
    b = np.uint64(0)
    while (np.uint64(1) << b) < np.uint64(index.size):
        b += np.uint64(1)
    return np.uint64(64) - b


@numba.njit(cache=True, inline="always")
def _home(fp, shift):  # pragma: no cover - compiled
    return (np.uint64(fp) * np.uint64(0x9E3779B97F4A7C15)) >> shift


@numba.njit(cache=True, inline="always")
def _probe(index, tkeys, fp, shift):  # pragma: no cover - compiled
    """Index slot of ``fp``'s item id, or the empty slot where it goes; needs ``tkeys[0] == fp``.

    Sentinel search: an empty entry (0) points at row 0, which holds ``fp``, so the loop has one
    exit test, the fingerprint comparison (load factor ≤ 1/8 ⇒ it ends, nearly always at once).
    """
    mask = np.uint64(index.size - 1)
    j = _home(fp, shift)
    while _ug(tkeys, index[j]) != fp:
        j = (j + np.uint64(1)) & mask
    return j


@numba.njit(cache=True)
def _find_id(index, tkeys, fp):  # pragma: no cover - compiled
    """Item id of ``fp`` (>= 1), or 0 when it has no Key Item (no sentinel: reads only)."""
    mask = np.uint64(index.size - 1)
    fp = np.uint64(fp)
    j = _home(fp, _shift(index))
    while True:
        e = index[j]
        if e == 0 or _ug(tkeys, e) == fp:
            return np.int64(e)
        j = (j + np.uint64(1)) & mask


@numba.njit(cache=True)
def _build_index(index, tkeys, size):  # pragma: no cover - compiled
    """Clear ``index`` and insert items ``1..size``."""
    index[:] = 0
    mask = np.uint64(index.size - 1)
    shift = _shift(index)
    for t in range(1, size + 1):
        j = _home(tkeys[t], shift)
        while index[j] != 0:
            j = (j + np.uint64(1)) & mask
        index[j] = t


@numba.njit(cache=True)
def _better(tcount, tkeys, a, b):  # pragma: no cover - compiled
    """Item ``a`` ranks before ``b``: more occurrences, ties by smaller fingerprint."""
    ca = tcount[a]
    cb = tcount[b]
    if ca != cb:
        return ca > cb
    return tkeys[a] < tkeys[b]


@numba.njit(cache=True)
def _sort_desc(slots, k, tcount, tkeys):  # pragma: no cover - compiled
    """Sort ``slots[:k]`` in place by (count desc, fingerprint asc)."""
    if k <= 1:
        return
    sub = slots[:k].copy()
    o1 = np.argsort(tkeys[sub], kind="mergesort")
    sub = sub[o1]
    o2 = np.argsort(-tcount[sub], kind="mergesort")
    sub = sub[o2]
    for i in range(k):
        slots[i] = sub[i]


@numba.njit(cache=True)
def _top_baby(size, tspace, tcount, twidth, tkeys, k, default_w):  # pragma: no cover - compiled
    """The ``k`` best Baby items (ids, sorted) and the Baby items wider than ``default_w``.

    Returns ``(best, wide, n_wide)``; ``best`` is found with a bounded heap whose root is its worst
    item.  Speed: an item needs a closer look only if it is a Baby item with a count >= the root's
    or a wide item; that test is one integer comparison (``count − space · 2^56 + wide · 2^58 >=
    floor``), so the scan of the live items takes one well-predicted branch per item.
    """
    heap = np.empty(max(k, 1), dtype=np.int64)
    wide = np.empty(size + 1, dtype=np.int64)
    n_wide = 0
    hsize = 0
    floor = np.int64(-1)  # count an item needs to be considered: -1 until the heap is full
    for s in range(1, size + 1):
        sp = np.int64(_ug(tspace, s))
        wd = np.int64(_ug(twidth, s) > default_w)
        if _ug(tcount, s) - (sp << 56) + (wd << 58) < floor:
            continue
        if wd != 0 and sp == 0:
            wide[n_wide] = s
            n_wide += 1
        if sp != 0 or tcount[s] < floor:
            continue
        if hsize < k:
            # sift up: parent must be "worse" than child
            i = hsize
            heap[i] = s
            hsize += 1
            while i > 0:
                p = (i - 1) // 2
                if _better(tcount, tkeys, heap[p], heap[i]):
                    t = heap[p]
                    heap[p] = heap[i]
                    heap[i] = t
                    i = p
                else:
                    break
            if hsize == k:
                floor = tcount[heap[0]]
        elif k > 0 and _better(tcount, tkeys, s, heap[0]):
            heap[0] = s
            i = 0
            while True:
                left = 2 * i + 1
                if left >= hsize:
                    break
                worst = left
                right = left + 1
                if right < hsize and _better(tcount, tkeys, heap[left], heap[right]):
                    worst = right
                if _better(tcount, tkeys, heap[i], heap[worst]):
                    t = heap[i]
                    heap[i] = heap[worst]
                    heap[worst] = t
                    i = worst
                else:
                    break
            floor = tcount[heap[0]]
    out = heap[:hsize].copy()
    _sort_desc(out, hsize, tcount, tkeys)
    return out, wide, n_wide


@numba.njit(cache=True)
def _promote(src, src_n, dst, dst_n, dst_cap, src_space, dst_space, tcount, tkeys, tspace):  # pragma: no cover
    """Alg. 3 promoteToNextSpace(SS, DS) on slot lists sorted by (count desc).

    Returns ``(new_src, new_dst)`` arrays; ``tspace`` flags are updated.  Free places of the
    destination are first filled with the source's best items (decision 1 of the module docstring).
    """
    sbuf = np.empty(src_n + dst_cap + 1, dtype=np.int64)
    for i in range(src_n):
        sbuf[i] = src[i]
    head = 0
    tail = src_n
    d = np.empty(dst_cap, dtype=np.int64)
    for i in range(dst_n):
        d[i] = dst[i]
    dn = dst_n
    while dn < dst_cap and head < tail:
        x = sbuf[head]
        head += 1
        d[dn] = x
        dn += 1
        tspace[x] = dst_space
    _sort_desc(d, dn, tcount, tkeys)
    # destination as a deque: head insertions, tail removals
    dbuf = np.empty(2 * dst_cap + 1, dtype=np.int64)
    dstart = dst_cap
    dend = dst_cap
    for i in range(dn):
        dbuf[dend] = d[i]
        dend += 1
    for _ in range(dn):  # "for each item in DS"
        if head == tail:
            break
        fi = sbuf[head]
        li = dbuf[dend - 1]
        if tcount[li] > tcount[fi]:
            break  # transition completed
        head += 1
        dend -= 1
        dstart -= 1
        dbuf[dstart] = fi
        tspace[fi] = dst_space
        sbuf[tail] = li
        tail += 1
        tspace[li] = src_space
    return sbuf[head:tail].copy(), dbuf[dstart:dend].copy()


@numba.njit(cache=True)
def _teen_cycle(index, tkeys, tcount, twidth, tspace, old_list, teen_list, meta,
                baby_keep, teen_cap, default_w):  # pragma: no cover - compiled
    """Alg. 1 promoteToTeenageSpace: sort Baby/Teenage, truncate Baby, Alg. 3 (Baby → Teenage)."""
    size = meta[_SIZE]
    best, wide, n_wide = _top_baby(size, tspace, tcount, twidth, tkeys, baby_keep, default_w)
    # --- truncate Baby: keep Old, Teenage, the best Baby items and the wide ones
    n_old = meta[_N_OLD]
    n_teen = meta[_N_TEEN]
    ks = np.empty(n_old + n_teen + best.size + n_wide, dtype=np.int64)
    ks[:n_old] = old_list[:n_old]
    ks[n_old:n_old + n_teen] = teen_list[:n_teen]
    ks[n_old + n_teen:n_old + n_teen + best.size] = best
    ks[n_old + n_teen + best.size:] = wide[:n_wide]
    ks.sort()
    n_keep = 0
    for i in range(ks.size):  # unique (a wide item may be among the best)
        if n_keep == 0 or ks[i] != ks[n_keep - 1]:
            ks[n_keep] = ks[i]
            n_keep += 1
    if n_keep < size:
        # compact: kept item ks[t] becomes item t + 1 <= ks[t] (ascending, so no row is overwritten
        # before it is moved); the rows above the new size are made pristine again
        for t in range(n_keep):
            a = ks[t]
            tkeys[t + 1] = tkeys[a]
            tcount[t + 1] = tcount[a]
            twidth[t + 1] = twidth[a]
            tspace[t + 1] = tspace[a]
        tcount[n_keep + 1:size + 1] = 0
        twidth[n_keep + 1:size + 1] = default_w
        tspace[n_keep + 1:size + 1] = 0
        _build_index(index, tkeys, n_keep)
        meta[_SIZE] = n_keep
        ks = ks[:n_keep]
        for i in range(n_old):
            old_list[i] = np.searchsorted(ks, old_list[i]) + 1
        for i in range(n_teen):
            teen_list[i] = np.searchsorted(ks, teen_list[i]) + 1
        for i in range(best.size):
            best[i] = np.searchsorted(ks, best[i]) + 1
    # --- Alg. 3 (Baby → Teenage); demoted Teenage items land at Baby's tail (space flag only)
    n_teen = meta[_N_TEEN]
    teen = teen_list[:n_teen].copy()
    _sort_desc(teen, n_teen, tcount, tkeys)
    rest, new_teen = _promote(best, best.size, teen, n_teen, teen_cap, 0, 1, tcount, tkeys, tspace)
    for i in range(new_teen.size):
        teen_list[i] = new_teen[i]
    for i in range(new_teen.size, teen_list.size):
        teen_list[i] = -1
    meta[_N_TEEN] = new_teen.size


@numba.njit(cache=True)
def _old_cycle(tkeys, tcount, tspace, old_list, teen_list, meta, old_cap):  # pragma: no cover
    """Alg. 2 promoteToOldSpace: sort Teenage/Old, Alg. 3 (Teenage → Old)."""
    n_teen = meta[_N_TEEN]
    n_old = meta[_N_OLD]
    teen = teen_list[:n_teen].copy()
    old = old_list[:n_old].copy()
    _sort_desc(teen, n_teen, tcount, tkeys)
    _sort_desc(old, n_old, tcount, tkeys)
    new_teen, new_old = _promote(teen, n_teen, old, n_old, old_cap, 1, 2, tcount, tkeys, tspace)
    for i in range(teen_list.size):
        teen_list[i] = new_teen[i] if i < new_teen.size else -1
    for i in range(old_list.size):
        old_list[i] = new_old[i] if i < new_old.size else -1
    meta[_N_TEEN] = new_teen.size
    meta[_N_OLD] = new_old.size


@numba.njit(cache=True)
def _route_kernel(fps, out, trace_w, start, n, default_w, max_w, scale_out_load, warmup, teen_cycle, old_cycle,
                  old_cap, teen_cap, baby_keep, index, tkeys, tcount, twidth, tspace,
                  old_list, teen_list, sent, meta):  # pragma: no cover - compiled
    """Route ``fps[start:]`` tuple by tuple (Alg. 4); returns the index reached.

    Stops early (returning ``i < fps.size``) only when the Key Item of ``fps[i]`` must be created
    and the item arrays are full; the caller grows them and calls again from ``i``.
    """
    cap = tkeys.size - 1
    m = fps.size
    trace = trace_w.size > 0
    nu = np.uint64(n)
    shift = _shift(index)
    # clock, total, item count and cycle deadlines live in locals; meta is written back around the
    # promotion cycles (which read and update it) and on return
    clock = meta[_CLOCK]
    total = meta[_TOTAL]
    size = meta[_SIZE]
    warm_base = meta[_WARM_BASE]
    next_teen = meta[_NEXT_TEEN]
    next_old = meta[_NEXT_OLD]
    i = start
    while i < m:
        if clock >= next_teen or clock >= next_old:
            meta[_SIZE] = size
            if clock >= next_teen:
                _teen_cycle(index, tkeys, tcount, twidth, tspace, old_list, teen_list, meta,
                            baby_keep, teen_cap, default_w)
                while next_teen <= clock:
                    next_teen += teen_cycle
                meta[_NEXT_TEEN] = next_teen
            if clock >= next_old:
                _old_cycle(tkeys, tcount, tspace, old_list, teen_list, meta, old_cap)
                while next_old <= clock:
                    next_old += old_cycle
                meta[_NEXT_OLD] = next_old
            size = meta[_SIZE]
        # at most one new Key Item per tuple: the next `room` tuples need no capacity check, and
        # no cycle is due before `min(next_teen, next_old) - clock` more tuples
        room = cap - size
        if room <= 0:
            if _find_id(index, tkeys, fps[i]) == 0:
                tkeys[0] = 0
                meta[_CLOCK] = clock
                meta[_TOTAL] = total
                meta[_SIZE] = size
                return i
            room = 1
        end = min(m, i + room, i + (min(next_teen, next_old) - clock))
        for i in range(i, end):
            fp = _ug(fps, i)
            _us(tkeys, 0, fp)  # sentinel
            j = _probe(index, tkeys, fp, shift)
            e = np.int64(index[j])
            # Key Item id without a branch: a new item (e == 0) takes the pristine row size + 1
            newm = (e - 1) >> 63  # -1 if new, else 0
            s = e | (newm & (size + 1))
            size -= newm
            index[j] = np.uint32(s)
            _us(tkeys, s, fp)
            _us(tcount, s, _ug(tcount, s) + 1)
            h = np.int64(fp % nu)
            W = np.int64(_ug(twidth, s))
            if W > max_w:  # stored widths are >= 1
                W = max_w
            # with total = 0 every count is 0, so any finite inv gives the loads 0 (paper: 0)
            inv = 100.0 / max(total, 1)
            # findBestCandidate over h, h+1, …, h+W-1 (mod n); j2 = position of the 2nd candidate < L_s
            if W == 2:
                # the default width without data-dependent branches (the loop's comparisons, unrolled)
                w1 = h + 1
                if w1 == n:
                    w1 = 0
                c0 = _ug(sent, h) * inv
                c1 = _ug(sent, w1) * inv
                b0 = c0 < scale_out_load
                b1 = c1 < scale_out_load
                nll = np.int64(b0) + np.int64(b1)
                j2 = 1  # only read when nll >= 2, i.e. both below L_s
                lt = c1 < c0
                cm = w1 if lt else h
                llmin = c1 if lt else c0
                w = w1 + 1
                if w == n:
                    w = 0
            else:
                llmin = np.inf
                nll = 0
                j2 = -1
                cm = h
                w = h
                for j in range(W):
                    cl = _ug(sent, w) * inv
                    if cl < scale_out_load:
                        nll += 1
                        if nll == 2:
                            j2 = j
                    if cl < llmin:
                        llmin = cl
                        cm = w
                    w += 1
                    if w == n:
                        w = 0
            # shouldScaleOut (Alg. 5): warmed up, LLmin >= L_s, key in Old space
            if llmin >= scale_out_load and clock - warm_base >= warmup and _ug(tspace, s) == 2:
                if W < max_w and _ug(sent, w) * inv < llmin:  # w = normalize(h + W)
                    cm = w
                    W += 1
            elif W > default_w and nll >= 2:
                # shouldScaleDown (Alg. 6): W <- W-1 and chooseBestTask again, repeated while the first W
                # candidates still hold >= 2 below L_s, i.e. down to max(default_w, j2).  At that level
                # NLL >= 1, so neither rule fires again; the tuple goes to the least loaded of them.
                W = max(default_w, j2)
                llmin = np.inf
                w = h
                for j in range(W):
                    cl = _ug(sent, w) * inv
                    if cl < llmin:
                        llmin = cl
                        cm = w
                    w += 1
                    if w == n:
                        w = 0
            _us(twidth, s, W)
            _us(out, i, cm)
            _us(sent, cm, _ug(sent, cm) + 1)
            total += 1
            clock += 1
            if trace:
                _us(trace_w, i, W)
        i = end
    tkeys[0] = 0
    meta[_CLOCK] = clock
    meta[_TOTAL] = total
    meta[_SIZE] = size
    return m


@numba.njit(cache=True)
def _lookup_kernel(fps, index, tkeys, twidth, tspace, default_w, max_w, out_w, out_space):  # pragma: no cover
    w0 = min(default_w, max_w)
    for i in range(fps.size):
        s = _find_id(index, tkeys, fps[i])
        if s == 0:
            out_w[i] = w0
            out_space[i] = -1
        else:
            out_w[i] = max(1, min(np.int64(twidth[s]), max_w))
            out_space[i] = tspace[s]


@numba.njit(cache=True)
def _count_kernel(fps, index, tkeys, tcount, out):  # pragma: no cover - compiled
    for i in range(fps.size):
        out[i] = tcount[_find_id(index, tkeys, fps[i])]  # row 0 (no item) has count 0


# ---------------------------------------------------------------------------------------------
# Per-source state
# ---------------------------------------------------------------------------------------------
class _SourceState:
    """One source's DKG state: Key Items, their hash index, space lists, local loads, clock (picklable).

    Key Item ``t`` (``1 <= t <= meta[_SIZE]``) is ``tkeys[t], tcount[t], twidth[t], tspace[t]``;
    row 0 is a sentinel with count 0 and the rows above the size are pristine (count 0, width
    ``default_width``, Baby), so creating an item is taking the next row.
    """

    def __init__(self, n_workers: int, old_cap: int, teen_cap: int, cyc_teen: int, cyc_old: int,
                 default_width: int, capacity: int = _INITIAL_CAPACITY) -> None:
        self.default_width = int(default_width)
        self._alloc(capacity)
        self.old_list = np.full(old_cap, -1, dtype=np.int64)
        self.teen_list = np.full(teen_cap, -1, dtype=np.int64)
        self.sent = np.zeros(n_workers, dtype=np.int64)
        self.meta = np.zeros(_META, dtype=np.int64)
        self.meta[_NEXT_TEEN] = cyc_teen
        self.meta[_NEXT_OLD] = cyc_old

    def _alloc(self, capacity: int) -> None:
        self.tkeys = np.zeros(capacity + 1, dtype=np.uint64)
        self.tcount = np.zeros(capacity + 1, dtype=np.int64)
        self.twidth = np.full(capacity + 1, self.default_width, dtype=np.int32)
        self.tspace = np.zeros(capacity + 1, dtype=np.int8)
        self.index = np.zeros(_index_size(capacity), dtype=np.uint32)

    def grow(self) -> None:
        """Double the item arrays (ids are kept, so the space lists stay valid) and rebuild the index."""
        old = (self.tkeys, self.tcount, self.twidth, self.tspace)
        size = int(self.meta[_SIZE])
        self._alloc(2 * (self.tkeys.size - 1))
        for a, b in zip(old, (self.tkeys, self.tcount, self.twidth, self.tspace)):
            b[: size + 1] = a[: size + 1]
        _build_index(self.index, self.tkeys, size)


# ---------------------------------------------------------------------------------------------
# The grouping
# ---------------------------------------------------------------------------------------------
class DynamicKeyRouter(Router):
    """Dynamic Key Grouping's routing (Dalabasmaz & Can, Sec. 4): all of its state is per-source
    routing state; see the module docstring for every rule and decision."""

    #: one _SourceState per source (its own key spaces, counters and load estimate)
    source_state_attrs: ClassVar[tuple[str, ...]] = ("states",)

    def __init__(self, n_workers: int, n_sources: int = 1, seed: int = 0, params: Mapping[str, Any] | None = None):
        super().__init__(n_workers, n_sources, seed, params)
        e = int(self.p["expected_keys"])
        self.old_cap = max(1, (e + 5) // 10)
        self.teen_cap = max(1, (4 * e + 5) // 10)
        self.baby_keep = max(1, e - self.old_cap - self.teen_cap)
        self._set_thresholds()
        self.states = [
            _SourceState(self.n_workers, self.old_cap, self.teen_cap,
                         int(self.p["teenage_cycle_tuples"]), int(self.p["old_cycle_tuples"]),
                         int(self.p["default_width"]))
            for _ in range(self.n_sources)
        ]

    def _set_thresholds(self) -> None:
        self.ideal_load, self.threshold, table_max = table1(self.n_workers)
        self.max_width = max(table_max, min(int(self.p["default_width"]), self.n_workers))

    # -------------------------------------------------------------- routing
    def _state(self, source: int) -> _SourceState:
        s = int(source)
        if not 0 <= s < self.n_sources:
            raise ValueError(f"source {source} out of range [0, {self.n_sources})")
        return self.states[s]

    def _run(self, fps: np.ndarray, source: int, trace: bool) -> tuple[np.ndarray, np.ndarray]:
        st = self._state(source)
        fps = np.ascontiguousarray(fps, dtype=np.uint64)
        m = fps.size
        out = np.empty(m, dtype=np.int64)
        trace_w = np.empty(m if trace else 0, dtype=np.int64)
        if m == 0:
            return out, trace_w
        p = self.p
        i = 0
        while True:
            i = _route_kernel(
                fps, out, trace_w, i, self.n_workers, int(p["default_width"]), self.max_width,
                self.threshold, int(p["warmup_tuples"]), int(p["teenage_cycle_tuples"]),
                int(p["old_cycle_tuples"]), self.old_cap, self.teen_cap, self.baby_keep,
                st.index, st.tkeys, st.tcount, st.twidth, st.tspace,
                st.old_list, st.teen_list, st.sent, st.meta,
            )
            if i >= m:
                return out, trace_w
            st.grow()

    def route(self, fps: np.ndarray, source: int = 0) -> np.ndarray:
        return self._run(fps, source, trace=False)[0]

    def route_traced(self, fps: np.ndarray, source: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Like :meth:`route`, also returning each tuple's candidate set right after its decision.

        Returns ``(workers, first, width)``: tuple ``i`` went to ``workers[i]`` and its key's
        candidates were then ``first[i] + j (mod n)`` for ``0 <= j < width[i]``.
        """
        out, width = self._run(fps, source, trace=True)
        first = (np.ascontiguousarray(fps, dtype=np.uint64) % np.uint64(self.n_workers)).astype(np.int64)
        return out, first, width

    def resize(self, n_workers: int) -> None:
        super().resize(n_workers)
        self._set_thresholds()
        for st in self.states:
            st.sent = np.zeros(self.n_workers, dtype=np.int64)
            st.meta[_TOTAL] = 0
            st.meta[_WARM_BASE] = st.meta[_CLOCK]

    # -------------------------------------------------------------- inspection (no side effects)
    def thresholds(self) -> dict[str, float]:
        """Sec. 4.3 for the current ``n``: ideal load L_i, scale-out threshold L_s, max width."""
        return {"ideal_load": self.ideal_load, "scale_out_threshold": self.threshold,
                "max_width": self.max_width}

    def candidate_set(self, fps: np.ndarray, source: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``(first, width)`` per key: current candidates ``first, first+1, …`` (mod n) at ``source``."""
        st = self._state(source)
        fps = np.ascontiguousarray(fps, dtype=np.uint64)
        width = np.empty(fps.size, dtype=np.int64)
        space = np.empty(fps.size, dtype=np.int64)
        _lookup_kernel(fps, st.index, st.tkeys, st.twidth, st.tspace, int(self.p["default_width"]),
                       self.max_width, width, space)
        return (fps % np.uint64(self.n_workers)).astype(np.int64), width

    def key_space(self, fps: np.ndarray, source: int = 0) -> np.ndarray:
        """Key Space of each key at ``source``: BABY, TEENAGE, OLD, or -1 (no Key Item)."""
        st = self._state(source)
        fps = np.ascontiguousarray(fps, dtype=np.uint64)
        width = np.empty(fps.size, dtype=np.int64)
        space = np.empty(fps.size, dtype=np.int64)
        _lookup_kernel(fps, st.index, st.tkeys, st.twidth, st.tspace, int(self.p["default_width"]),
                       self.max_width, width, space)
        return space

    def key_count(self, fps: np.ndarray, source: int = 0) -> np.ndarray:
        """Occurrences recorded in each key's Key Item at ``source`` (0 when it has none)."""
        st = self._state(source)
        fps = np.ascontiguousarray(fps, dtype=np.uint64)
        out = np.zeros(fps.size, dtype=np.int64)
        _count_kernel(fps, st.index, st.tkeys, st.tcount, out)
        return out

    def local_loads(self, source: int = 0) -> np.ndarray:
        """The source's local load estimate of every worker, in percent (Sec. 4.3)."""
        st = self._state(source)
        total = int(st.meta[_TOTAL])
        return st.sent * (100.0 / total) if total > 0 else np.zeros(self.n_workers)

    def space_sizes(self, source: int = 0) -> dict[str, int]:
        """Items in Old and Teenage space and Key Items in the table at ``source``."""
        st = self._state(source)
        return {"old": int(st.meta[_N_OLD]), "teenage": int(st.meta[_N_TEEN]), "items": int(st.meta[_SIZE])}

    def describe(self) -> dict[str, Any]:
        return {"thresholds": self.thresholds()}  # (Planner.describe adds it to the description)


@register
class DynamicKeyGrouping(StreamingPlanner):
    """Dynamic Key Grouping (Dalabasmaz & Can, Sec. 4); see the module docstring for every rule and decision."""

    name: ClassVar[str] = "dkg"
    summary: ClassVar[str] = (
        "Dynamic Key Grouping: consecutive candidates h..h+W-1, W grows for Old-space keys above L_i+sqrt(L_i)"
    )
    paper: ClassVar[str] = "dalabasmaz-dkg Sec. 4 (Alg. 1-6, Eq. 3-5, Table 1)"
    single_owner: ClassVar[bool] = False
    params: ClassVar[tuple[Param, ...]] = (
        Param("expected_keys", "int", 100,
              "expected number of distinct keys; Old = 10%, Teenage = 40%, Baby keeps 50% (paper: 100)",
              low=1, high=1_000_000),
        Param("teenage_cycle_tuples", "int", 15 * NOMINAL_RATE,
              "tuples per source between Baby->Teenage promotions (paper: 15 s at 1000 tuples/s)",
              low=1, high=10**12),
        Param("old_cycle_tuples", "int", 60 * NOMINAL_RATE,
              "tuples per source between Teenage->Old promotions (paper: 60 s at 1000 tuples/s)",
              low=1, high=10**12),
        Param("warmup_tuples", "int", 15 * NOMINAL_RATE,
              "tuples a source routes before it may scale out (paper: 15 s at 1000 tuples/s)",
              low=0, high=10**12),
        Param("default_width", "int", 2,
              "initial number of consecutive candidate workers per key, floor of scale-down (paper: 2)",
              low=1, high=100_000),
    )
    router_class: ClassVar[type[Router]] = DynamicKeyRouter
