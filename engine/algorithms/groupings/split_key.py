"""Split-key groupings of Nasir et al., "When Two Choices Are not Enough", ICDE 2016.

Registry names: ``pkg``, ``dchoices``, ``wchoices``, ``rr-head``.  All four split a key over
several workers (``single_owner = False``) and decide per tuple from the state of the emitting
source only (Sec. IV-B "Overhead on Sources": each source keeps its own load vector ``loads[s]``,
tuples sent to each worker, and, for the head-aware groupings, its own SpaceSaving sketch of
:mod:`skewlab.engine.algorithms.sketches` with ``N_s`` = tuples seen).

Hash choices are those of :mod:`skewlab.engine.algorithms.keys`: ``F_0 = h(k) = fp mod n`` (computed division-free
by :func:`_fastmod`, Lemire, Kaser & Kurz 2019, same value as ``%``) and
``F_i = ⌊mix64(fp + i·GOLDEN) · n / 2^64⌋`` (the paper's F_1..F_d, numbered from 0 here).

Routing of one tuple (Alg. 1) is sequential greedy per source, tuple by tuple in numba kernels, so
splitting a stream into batches never changes the result:

* ``pkg`` — Partial Key Grouping (Sec. II-B): ``w = argmin(L[F_0], L[F_1])``, ties → F_0.
* Head-aware groupings count k in the sketch (Alg. 1 line 2), then test k ∈ H = {k : p_k >= θ}
  (Sec. III-A), θ = ``head_threshold`` or 1/(5n).  Head keys: ``dchoices`` Greedy-d over the first
  d **distinct** values of F_0, F_1, … (d from :func:`find_d`, Sec. IV-A, Eq. 3; W-Choices when
  d >= n); ``wchoices`` the least loaded of all n workers (ties → lower id); ``rr-head`` round robin
  from ``s mod n``.  Tail keys: PKG on the same load vector.

Deviations: (1) D-Choices draws *distinct* choices (the paper's F_i may collide, leaving a hot key
on fewer than d workers; docs/results/nasir.md, Nasir section).  (2) Head membership uses the guaranteed
count, ``N_s > warmup and count − error >= θ·N_s`` (warm-up default ``ceil(10/θ)``), not the public
simulator's ``(count + error)/N``; keys within 1/capacity of θ may be missed.  (3) :func:`find_d`
checks Eq. 3 for every head prefix h = 1..|H| (the simulator: h = 1 and |H| only) and d is
recomputed per source at ``warmup`` and then every ``refresh`` tuples instead of per head tuple
(before the first refresh d = 2).  (4) Recency (skewlab extension, issue #15): with ``decay`` < 1 the
source's sketch is multiplied by ``decay`` every ``epoch`` tuples (as FISH's epoch decay, Chen et
al., arXiv 1806.00760), so H holds the keys with recent frequency >= θ.  On by default (``decay =
0.5`` every ``warmup / 5`` tuples, chosen on the real traces of issue 25, where users and devices
emit bursts and a head counted since the start lags: docs/results/gate.md, "Recency and the migration
gate"); ``decay = 1`` is the paper, and the paper reproductions and the tests of the paper's
semantics pin it.  Decays and refreshes depend on the source's tuple count only (``state[s, ST_LOST]``
holds what the decays took off N_s), so routing stays independent of batching.  (5) Option
``distinct`` (off by default = the paper): PKG's second choice is the first of F_1, F_2, … that
differs from F_0 (:func:`_second_choice`), for ``pkg`` and the tail of the head-aware groupings; in
the paper F_0 = F_1 for 1/n of the keys, which then have one worker as under hash.

``resize(n)``: local loads restart at zero, sketches are kept, θ and warm-up follow the new n, d is
recomputed at each source's next tuple.  Kernel layout, per-tuple timings and what was tried:
docs/design-notes.md, "engine/algorithms/groupings/split_key.py".  After editing :mod:`skewlab.engine.algorithms.sketches`,
delete ``engine/algorithms/groupings/__pycache__/split_key*.nbi/.nbc`` (numba's cache does not see the
inlined kernels change).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Mapping

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from skewlab.engine.algorithms.grouping import Router, StreamingPlanner
from skewlab.engine.algorithms.keys import mix64_scalar, reduce_scalar
from skewlab.engine.config.params import Param
from skewlab.engine.algorithms.registry import register
from skewlab.engine.algorithms.sketches import (
    SketchPerSource,
    PF_COUNTER,
    PF_SLOT,
    SHIFT,
    TOTAL,
    SpaceSaving,
    prefetch,
    ss_count,
    ss_decay,
    ss_error,
    ss_guaranteed,
    ss_offer,
    ss_prefetch_counter,
    ss_prefetch_slot,
)

__all__ = [
    "DChoicesGrouping",
    "DChoicesRouter",
    "PKGGrouping",
    "PKGRouter",
    "RoundRobinHeadGrouping",
    "RoundRobinHeadRouter",
    "WChoicesGrouping",
    "WChoicesRouter",
    "b_h",
    "find_d",
]

_GOLDEN = 0x9E3779B97F4A7C15
_CHUNK = 512  # tuples per vectorised candidate pre-pass

# head modes
MODE_D, MODE_W, MODE_RR = 1, 2, 3
# how a head tuple picks its worker (see _head_body)
KIND_PRE, KIND_CACHE, KIND_TRACK, KIND_RR = 0, 1, 2, 3
PRE_D = 4  # D-Choices with d <= PRE_D: F_2, F_3 in the vectorised pre-pass instead of the cache
# per-source state columns (``src_state`` in the kernels): ST_D current d of D-Choices; ST_NEXT the
# source's tuple count at the next d refresh; ST_RR round-robin pointer; ST_ROW next free row of the
# D-Choices choice cache
ST_D, ST_NEXT, ST_RR, ST_ROW = 0, 1, 2, 5  # (6: unused, kept for the state layout)
ST_LOST, ST_EPOCH = 3, 4  # recency decay: N lost to decays so far; tuple count of the next decay
_STATE_COLUMNS = 7  # number of state columns
_CACHE_ENTRIES = 1 << 20  # bound on rows x n of the D-Choices candidate cache, per source


@njit(cache=True, inline="always")
def _ug(a, i):  # pragma: no cover - compiled
    """``a[i]`` for ``i >= 0``: an unsigned index spares numba's negative-index wraparound."""
    return a[np.uint64(i)]


@njit(cache=True, inline="always")
def _us(a, i, v):  # pragma: no cover - compiled
    """``a[i] = v`` for ``i >= 0`` (unsigned index, see :func:`_ug`)."""
    a[np.uint64(i)] = v


# ---------------------------------------------------------------------------------------------
# Exact remainder without division (n < 2^32)
# ---------------------------------------------------------------------------------------------
def _magic(n: int) -> tuple[np.uint64, np.uint64]:
    """128-bit M = floor((2^128 − 1)/n) + 1 as (high, low) words; (0, 0) for n = 1 (x mod 1 = 0)."""
    n = int(n)
    if not 1 <= n < (1 << 32):
        raise ValueError(f"number of workers must be in [1, 2^32), got {n}")
    if n == 1:
        return np.uint64(0), np.uint64(0)
    m = ((1 << 128) - 1) // n + 1
    return np.uint64(m >> 64), np.uint64(m & 0xFFFFFFFFFFFFFFFF)


@njit(cache=True, inline="always")
def _mulhi64(a, b):  # pragma: no cover - compiled
    """High 64 bits of the 128-bit product of two uint64."""
    m32 = np.uint64(0xFFFFFFFF)
    s = np.uint64(32)
    ah = a >> s
    al = a & m32
    bh = b >> s
    bl = b & m32
    ll = al * bl
    lh = al * bh
    hl = ah * bl
    mid = (ll >> s) + (lh & m32) + (hl & m32)
    return ah * bh + (lh >> s) + (hl >> s) + (mid >> s)


@njit(cache=True, inline="always")
def _fastmod(a, magic_hi, magic_lo, d):  # pragma: no cover - compiled
    """``a mod d`` (uint64 a, d < 2^32) by Lemire's direct computation with a 128-bit M."""
    lo = magic_lo * a
    hi = magic_hi * a + _mulhi64(magic_lo, a)
    h0 = hi * d
    total = h0 + reduce_scalar(lo, d)
    return reduce_scalar(hi, d) + np.uint64(total < h0)


@njit(cache=True, inline="always")
def _cand(fp, i, d, magic_hi, magic_lo):  # pragma: no cover - compiled
    """``F_i(fp)`` in ``[0, n)``; equal to :func:`skewlab.engine.algorithms.keys.candidate_scalar` (d = uint64(n))."""
    if i == 0:
        return np.int64(_fastmod(fp, magic_hi, magic_lo, d))
    return np.int64(reduce_scalar(mix64_scalar(fp + np.uint64(i) * np.uint64(_GOLDEN)), d))


@njit(cache=True, _nrt=False)
def _candidates_kernel(fps, i, n, magic_hi, magic_lo, out):  # pragma: no cover - compiled
    d = np.uint64(n)
    for x in range(fps.size):
        out[x] = _cand(fps[x], i, d, magic_hi, magic_lo)


def fast_candidate(fps: np.ndarray, i: int, n: int) -> np.ndarray:
    """``F_i`` through the kernels' division-free path (tests compare it with ``keys.candidate``)."""
    fps = np.ascontiguousarray(fps, dtype=np.uint64)
    magic_hi, magic_lo = _magic(n)
    out = np.empty(fps.size, dtype=np.int64)
    if fps.size:
        _candidates_kernel(fps, int(i), int(n), magic_hi, magic_lo, out)
    return out


@njit(cache=True, inline="always")
def _prepass(f, d, magic_hi, magic_lo, chunk_f0, chunk_f1):  # pragma: no cover - compiled
    """F_0, F_1 of the chunk ``f`` into ``chunk_f0``, ``chunk_f1``.

    No loop-carried dependency, so LLVM vectorises it; ``f`` must be a slice (a view starting at
    0): indexing ``fps[start + x]`` instead would keep numba's negative-index wraparound check
    and block vectorisation (measured 4x slower).
    """
    g = np.uint64(_GOLDEN)
    for x in range(f.size):
        fp = f[x]
        chunk_f0[x] = np.int64(_fastmod(fp, magic_hi, magic_lo, d))
        chunk_f1[x] = np.int64(reduce_scalar(mix64_scalar(fp + g), d))


@njit(cache=True, inline="always")
def _prepass_choice(f, i, d, c):  # pragma: no cover - compiled
    """F_i (i >= 1) of the chunk ``f`` into ``c`` (vectorised like :func:`_prepass`)."""
    salt = np.uint64(i) * np.uint64(_GOLDEN)
    for x in range(f.size):
        c[x] = np.int64(reduce_scalar(mix64_scalar(f[x] + salt), d))


# ---------------------------------------------------------------------------------------------
# Eq. (3) / Eq. (10) and FINDOPTIMALCHOICES
# ---------------------------------------------------------------------------------------------
def b_h(h: int, d: int, n: int) -> float:
    """Expected number of distinct workers among the choices of a head prefix of length h (Eq. 10).

    ``b_h = n − n((n−1)/n)^{h·d}`` (Appendix A with h·d balls in n bins).
    """
    h, d, n = int(h), int(d), int(n)
    if n < 1 or h < 0 or d < 0:
        raise ValueError("b_h needs n >= 1, h >= 0, d >= 0")
    return float(_b_h(h, d, n))


@njit(cache=True, inline="always")
def _b_h(h, d, n):  # pragma: no cover - compiled
    return n - n * ((n - 1.0) / n) ** (h * d)


@njit(cache=True, _nrt=False)
def _find_d_sorted(p, m, tail, n, eps):  # pragma: no cover - compiled
    """FINDOPTIMALCHOICES on p[:m] sorted decreasingly; returns d in [2, n) or n (W-Choices)."""
    if m == 0:
        return np.int64(2) if n > 2 else np.int64(n)
    start = p[0] * n
    if start >= n:
        return np.int64(n)
    d = np.int64(math.ceil(start))
    if d < 2:
        d = np.int64(2)
    total_head = 0.0
    for i in range(m):
        total_head += p[i]
    while d < n:
        ok = True
        prefix = 0.0
        for h in range(1, m + 1):
            prefix += p[h - 1]
            b = _b_h(h, d, n)
            r = b / n
            lhs = prefix + r ** d * (total_head - prefix) + r * r * tail
            if lhs > b * (1.0 / n + eps):
                ok = False
                break
        if ok:
            return d
        d += 1
    return np.int64(n)


def find_d(head_probs: np.ndarray, tail_prob_sum: float, n: int, epsilon: float) -> int:
    """Number of choices for head keys (Nasir et al. Sec. IV-A, Prop. 4.1 / Eq. 3).

    ``head_probs`` are the head keys' frequencies (any order; sorted decreasingly here),
    ``tail_prob_sum`` the total frequency of the tail.  Search upward from ``max(2, ceil(p_1·n))``
    for the smallest d < n meeting Eq. (3) for every prefix h = 1..|H|; return ``n`` (switch to
    W-Choices) when there is none.  An empty head gives 2 (PKG), n <= 2 gives n.
    """
    n = int(n)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not (math.isfinite(float(tail_prob_sum)) and math.isfinite(float(epsilon))):
        raise ValueError("tail_prob_sum and epsilon must be finite")
    if np.any(~np.isfinite(np.asarray(head_probs, dtype=np.float64))):
        raise ValueError("head_probs must be finite")
    p = np.sort(np.asarray(head_probs, dtype=np.float64).ravel())[::-1].copy()
    return int(_find_d_sorted(p, p.size, float(tail_prob_sum), n, float(epsilon)))


@njit(cache=True, inline="always")
def _sort_desc(a, m):  # pragma: no cover - compiled
    """In-place heapsort of a[:m] into decreasing order (no allocation: the kernels run without NRT)."""
    # min-heap, then move the minimum to the end repeatedly -> decreasing order
    for start in range(m // 2 - 1, -1, -1):
        _sift_min(a, start, m)
    for end in range(m - 1, 0, -1):
        t = a[0]
        a[0] = a[end]
        a[end] = t
        _sift_min(a, 0, end)


@njit(cache=True, inline="always")
def _sift_min(a, i, m):  # pragma: no cover - compiled
    while True:
        c = 2 * i + 1
        if c >= m:
            return
        if c + 1 < m and a[c + 1] < a[c]:
            c += 1
        if a[i] <= a[c]:
            return
        t = a[i]
        a[i] = a[c]
        a[c] = t
        i = c


@njit(cache=True, _nrt=False)
def _refresh_d(sketch, theta, eps, n, probs):  # pragma: no cover - compiled
    """FINDOPTIMALCHOICES on the source's current head: keys with guaranteed count >= θ·N, their
    frequencies (count − error)/N sorted decreasingly, tail = 1 − Σ; ``probs`` is scratch space."""
    total = sketch[4][TOTAL]
    if total <= 0:
        return np.int64(2) if n > 2 else np.int64(n)
    m = ss_guaranteed(sketch, theta * total, probs)
    for a in range(m):
        probs[a] = probs[a] / total
    _sort_desc(probs, m)
    head = 0.0
    for a in range(m):
        head += probs[a]
    tail = 1.0 - head
    if tail < 0.0:
        tail = 0.0
    return _find_d_sorted(probs, m, tail, n, eps)


# ---------------------------------------------------------------------------------------------
# Routing kernels
# ---------------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _second_choice(fp, f0, n_u64, magic_hi, magic_lo):  # pragma: no cover - compiled
    """The first of F_1, F_2, … that differs from ``f0`` (option ``distinct``: PKG's two choices
    name two workers); ``f0`` itself when n = 1.  Terminates: i ↦ mix64(fp + i·GOLDEN) is a
    bijection, so the sequence names every worker (expected draws n/(n−1))."""
    if n_u64 < np.uint64(2):
        return f0
    i = 1
    c = _cand(fp, i, n_u64, magic_hi, magic_lo)
    while c == f0:
        i += 1
        c = _cand(fp, i, n_u64, magic_hi, magic_lo)
    return c


@njit(cache=True, _nrt=False)
def _pkg_kernel(fps, out, loads, magic_hi, magic_lo, chunk_f0, chunk_f1, distinct):  # pragma: no cover - compiled
    n = loads.size
    d = np.uint64(n)
    m = fps.size
    for start in range(0, m, _CHUNK):
        stop = min(start + _CHUNK, m)
        _prepass(fps[start:stop], d, magic_hi, magic_lo, chunk_f0, chunk_f1)
        o = out[start:stop]
        for x in range(stop - start):
            a = _ug(chunk_f0, x)
            b = _ug(chunk_f1, x)
            if distinct and b == a:
                b = _second_choice(_ug(fps, start + x), a, d, magic_hi, magic_lo)
            la = _ug(loads, a)
            lb = _ug(loads, b)
            if lb < la:
                a = b
                la = lb
            _us(loads, a, la + 1)
            _us(o, x, a)


@njit(cache=True, inline="always")
def _min_build(loads, min_set_words, min_load):  # pragma: no cover - compiled
    """Bit set of the workers whose load is ``min_load`` into ``min_set_words`` (bit w of word
    w >> 6); returns the lowest word index holding a set bit (``min_set_words.size`` when none)."""
    n = loads.size
    for k in range(min_set_words.size):
        min_set_words[k] = np.uint64(0)
    for j in range(n):
        k = np.uint64(j) >> np.uint64(6)
        at_min = np.uint64(_ug(loads, j) == min_load)
        min_set_words[k] = min_set_words[k] | (at_min << (np.uint64(j) & np.uint64(63)))
    min_word = 0
    while min_word < min_set_words.size and _ug(min_set_words, min_word) == 0:
        min_word += 1
    return min_word


@njit(cache=True, inline="always")
def _min_init(loads, min_set_words):  # pragma: no cover - compiled
    """Tracker of (min load, workers holding it) from scratch: returns (min_load, min_word) (O(n))."""
    min_load = _ug(loads, 0)
    for j in range(1, loads.size):
        if _ug(loads, j) < min_load:
            min_load = _ug(loads, j)
    return min_load, _min_build(loads, min_set_words, min_load)


@njit(cache=True, inline="always")
def _min_worker(min_set_words, min_word):  # pragma: no cover - compiled
    """The lowest worker holding the minimum load."""
    return np.int64(min_word) * 64 + np.int64(trailing_zeros(_ug(min_set_words, min_word)))


@njit(cache=True, inline="always")
def _bump_tracked(loads, w, min_set_words, min_load, min_word):  # pragma: no cover - compiled
    """loads[w] += 1 keeping the tracker: ``min_load`` = min(loads), ``min_set_words`` = the
    workers at ``min_load``, ``min_word`` = the lowest non-empty word of ``min_set_words``; returns
    the new (min_load, min_word).

    A worker leaves the set when its load was ``min_load`` (branch-free bit clear).  When the set
    empties, the worker that emptied it is now at ``min_load + 1`` and no load is below, so the
    minimum is ``min_load + 1`` and the set is rebuilt (O(n), once per load level)."""
    old = _ug(loads, w)
    _us(loads, w, old + 1)
    k = np.uint64(w) >> np.uint64(6)
    bit = np.uint64(old == min_load) << (np.uint64(w) & np.uint64(63))
    min_set_words[k] = min_set_words[k] & ~bit
    if _ug(min_set_words, min_word) == 0:
        min_word += 1
        while min_word < min_set_words.size and _ug(min_set_words, min_word) == 0:
            min_word += 1
        if min_word == min_set_words.size:
            min_load += 1
            min_word = _min_build(loads, min_set_words, min_load)
    return min_load, min_word


@njit(cache=True, inline="always")
def _word_build(loads, min_load):  # pragma: no cover - compiled
    """n <= 64: the bit set of the workers whose load is ``min_load`` as one word (branch-free)."""
    word = np.uint64(0)
    for j in range(loads.size):
        word |= np.uint64(_ug(loads, j) == min_load) << np.uint64(j)
    return word


@njit(cache=True, inline="always")
def _bump_word(loads, w, word, min_load):  # pragma: no cover - compiled
    """:func:`_bump_tracked` for n <= 64 with the set in one register word: returns (min_load, word)."""
    old = _ug(loads, w)
    _us(loads, w, old + 1)
    word &= ~(np.uint64(old == min_load) << np.uint64(w))
    if word == 0:
        min_load += 1
        word = _word_build(loads, min_load)
    return min_load, word


@njit(cache=True, inline="always")
def _keep_less(loads, w, w_load, c):  # pragma: no cover - compiled
    """One Greedy-d step: candidate ``c`` replaces the best so far ``(w, w_load)`` if strictly less
    loaded (ties keep the earlier choice); returns the new ``(w, w_load)``."""
    lc = _ug(loads, c)
    if lc < w_load:
        return c, lc
    return w, w_load


@njit(cache=True, inline="always")
def _prefetch_cache_slot(sketch, counter_row, fp):  # pragma: no cover - compiled
    """Prefetch the D-Choices cache slot (``counter_row``) of the counter in ``fp``'s home table slot
    (speed only, like :func:`skewlab.engine.algorithms.sketches.ss_prefetch_counter`)."""
    e = sketch[3][np.uint64(fp) >> np.uint64(sketch[4][SHIFT])]
    prefetch(counter_row, (e & np.uint64(0xFFFFFFFF)) - np.uint64(1))


@njit(cache=True, inline="always")
def _distinct_choices(  # pragma: no cover - compiled
    fp, d, f0, f1, choice_rows, base, seen, n_u64, magic_hi, magic_lo
):
    """``choice_rows[base : base + d]`` = the first d **distinct** values of F_0, F_1, F_2, … (d < n).

    Greedy-d sampling without replacement by rejection: F_i is skipped when an earlier choice already
    named its worker, so a head key always has d different workers (with repeats kept it could land
    on fewer).  F_0, F_1 are the key's PKG choices whenever they differ, so a key's tail
    workers stay among its head workers.  ``seen`` is scratch, one bit per worker (>= ceil(n/64)
    words).  Terminates for every d < n: i ↦ mix64(fp + i·GOLDEN) is a bijection of the 64-bit
    integers, so the sequence names every worker; the expected number of draws is n(H_n − H_{n−d}).
    """
    for k in range(seen.size):
        seen[k] = np.uint64(0)
    seen[np.uint64(f0) >> np.uint64(6)] |= np.uint64(1) << (np.uint64(f0) & np.uint64(63))
    _us(choice_rows, base, f0)
    got = 1
    i = 1
    while got < d:
        c = f1 if i == 1 else _cand(fp, i, n_u64, magic_hi, magic_lo)
        k = np.uint64(c) >> np.uint64(6)
        bit = np.uint64(1) << (np.uint64(c) & np.uint64(63))
        if (_ug(seen, k) & bit) == np.uint64(0):
            seen[k] = _ug(seen, k) | bit
            _us(choice_rows, base + got, c)
            got += 1
        i += 1


@njit(cache=True, inline="always")
def _dchoices_pick(  # pragma: no cover - compiled
    fp, cid, d, f0, f1, loads, src_state, choice_cache, n_u64, magic_hi, magic_lo, seen
):
    """Greedy-d for a head key: least loaded of its d distinct choices (:func:`_distinct_choices`),
    ties → the earlier choice.

    The choices of a head key are cached per sketch counter (``choice_cache``: counter → row, row →
    fingerprint, row → d, workers), so a head tuple does not redraw up to n − 1 hash choices.  A row
    is rebuilt when it belongs to another key (counter reused, row reallocated) or d changed; the
    scan has a fixed trip count d.
    """
    counter_row, row_fp, row_d, choice_rows = choice_cache
    rows = row_fp.size
    row = np.int64(_ug(counter_row, cid))
    if row < 0 or _ug(row_fp, row) != fp:
        row = src_state[ST_ROW]
        src_state[ST_ROW] = row + 1 if row + 1 < rows else 0
        _us(counter_row, cid, row)
        _us(row_fp, row, fp)
        _us(row_d, row, -1)
    base = row * loads.size  # rows are n wide (_alloc_cache; d < n here)
    if _ug(row_d, row) != d:
        _distinct_choices(fp, d, f0, f1, choice_rows, base, seen, n_u64, magic_hi, magic_lo)
        _us(row_d, row, d)
    w = np.int64(_ug(choice_rows, base))
    w_load = _ug(loads, w)
    for i in range(1, d):
        w, w_load = _keep_less(loads, w, w_load, np.int64(_ug(choice_rows, base + i)))
    return w


@njit(cache=True, inline="always")
def _head_body(  # pragma: no cover - compiled
    mode, kind, fps, out, loads, src_state, sketch, choice_cache, theta, eps, warmup, refresh, distinct, tail_pkg,
    magic_hi, magic_lo, chunk_f0, chunk_f1, chunk_f2, chunk_f3, probs, min_set_words,
):
    """Alg. 1 for one batch of one source; returns how many tuples of ``fps`` it routed.

    ``mode`` (MODE_D, MODE_W or MODE_RR) and ``kind``, how a head tuple picks its worker
    (:func:`_d_kind`: KIND_PRE, the choices F_0..F_{d-1} come from the pre-pass, d <= PRE_D;
    KIND_CACHE, from the choice cache; KIND_TRACK, the least loaded of all n workers through the
    tracker, ``min_set_words`` its scratch words, >= ceil(n/64); KIND_RR, round robin) are compile-time
    constants: the body is inlined into one kernel per combination (:data:`_HEAD_KERNELS`).
    D-Choices runs the kernel of its current d; when a refresh changes the kind the kernel stops
    before the next tuple and the caller goes on with the other one (:meth:`_HeadRouter.route`)."""
    track = kind == KIND_TRACK
    n = loads.size
    n_u64 = np.uint64(n)
    meta = sketch[4]
    dcur = src_state[ST_D]
    nxt_refresh = src_state[ST_NEXT]
    small = n <= 64  # the worker set fits one register word
    min_load = np.int64(0)
    min_word = 0
    word = np.uint64(0)
    if track:  # derived from the loads, so built per call (O(n))
        min_load, min_word = _min_init(loads, min_set_words)
        word = _ug(min_set_words, 0)
    m = fps.size
    for start in range(0, m, _CHUNK):
        stop = min(start + _CHUNK, m)
        f = fps[start:stop]
        o = out[start:stop]
        _prepass(f, n_u64, magic_hi, magic_lo, chunk_f0, chunk_f1)
        if kind == KIND_PRE:
            if dcur > 2:
                _prepass_choice(f, 2, n_u64, chunk_f2)
            if dcur > 3:
                _prepass_choice(f, 3, n_u64, chunk_f3)
        for x in range(stop - start):
            # prefetch targets of the tuples PF_SLOT / PF_COUNTER ahead (clamped: no branch)
            ss_prefetch_slot(sketch, _ug(fps, min(start + x + PF_SLOT, m - 1)))
            fpc = _ug(fps, min(start + x + PF_COUNTER, m - 1))
            ss_prefetch_counter(sketch, fpc)
            if kind == KIND_CACHE:
                _prefetch_cache_slot(sketch, choice_cache[0], fpc)
            if mode == MODE_D and meta[TOTAL] == nxt_refresh:
                # FINDOPTIMALCHOICES on the sketch after the previous tuple (N_s = nxt_refresh)
                dnew = _refresh_d(sketch, theta, eps, n, probs)
                nxt_refresh += refresh
                src_state[ST_D] = dnew
                src_state[ST_NEXT] = nxt_refresh
                if _d_kind(dnew, n) != kind or (kind == KIND_PRE and dnew > dcur):
                    return start + x  # (KIND_PRE: the pre-pass of this chunk lacks F_2/F_3)
                dcur = dnew
            fp = _ug(f, x)
            cid = ss_offer(sketch, fp)
            total = meta[TOTAL]
            head = total > warmup and (ss_count(sketch, cid) - ss_error(sketch, cid)) >= theta * total
            if head:
                if mode == MODE_RR:
                    w = src_state[ST_RR]
                    nxt = w + 1
                    src_state[ST_RR] = nxt if nxt < n else 0
                elif track:
                    w = np.int64(trailing_zeros(word)) if small else _min_worker(min_set_words, min_word)
                elif kind == KIND_PRE:
                    # Greedy-d over F_0..F_{d-1} (d <= PRE_D), ties → lower choice index; when two
                    # of them name the same worker, the cache path draws d distinct choices
                    a0 = _ug(chunk_f0, x)
                    a1 = _ug(chunk_f1, x)
                    a2 = a0
                    a3 = a0
                    rep = a0 == a1
                    if dcur > 2:
                        a2 = _ug(chunk_f2, x)
                        rep = rep | (a2 == a0) | (a2 == a1)
                    if dcur > 3:
                        a3 = _ug(chunk_f3, x)
                        rep = rep | (a3 == a0) | (a3 == a1) | (a3 == a2)
                    if rep:
                        w = _dchoices_pick(
                            fp, cid, dcur, a0, a1, loads, src_state, choice_cache, n_u64, magic_hi, magic_lo,
                            min_set_words,
                        )
                    else:
                        w, w_load = _keep_less(loads, a0, _ug(loads, a0), a1)
                        if dcur > 2:
                            w, w_load = _keep_less(loads, w, w_load, a2)
                        if dcur > 3:
                            w, w_load = _keep_less(loads, w, w_load, a3)
                else:
                    w = _dchoices_pick(
                        fp, cid, dcur, _ug(chunk_f0, x), _ug(chunk_f1, x), loads, src_state, choice_cache, n_u64,
                        magic_hi, magic_lo, min_set_words,
                    )
            else:
                w = _ug(chunk_f0, x)
                if tail_pkg:
                    cand = _ug(chunk_f1, x)
                    if distinct and cand == w:
                        cand = _second_choice(fp, w, n_u64, magic_hi, magic_lo)
                    if _ug(loads, cand) < _ug(loads, w):
                        w = cand
            if track:
                if small:
                    min_load, word = _bump_word(loads, w, word, min_load)
                else:
                    min_load, min_word = _bump_tracked(loads, w, min_set_words, min_load, min_word)
            else:
                _us(loads, w, _ug(loads, w) + 1)
            _us(o, x, w)
    if mode == MODE_D and meta[TOTAL] == nxt_refresh:  # (so that the batch ends with d up to date)
        dcur = _refresh_d(sketch, theta, eps, n, probs)
        src_state[ST_D] = dcur
        src_state[ST_NEXT] = nxt_refresh + refresh
    return m


@njit(cache=True, inline="always")
def _d_kind(d, n):  # pragma: no cover - compiled
    """How a D-Choices head tuple picks among its d choices (see :func:`_head_body`)."""
    if d >= n:
        return KIND_TRACK
    return KIND_PRE if d <= PRE_D else KIND_CACHE


@njit(cache=True, _nrt=False)
def _head_kernel_d_pre(  # pragma: no cover - compiled
    fps, out, loads, src_state, sketch, choice_cache, theta, eps, warmup, refresh, distinct, tail_pkg,
    magic_hi, magic_lo, chunk_f0, chunk_f1, chunk_f2, chunk_f3, probs, min_set_words,
):
    return _head_body(
        MODE_D, KIND_PRE, fps, out, loads, src_state, sketch, choice_cache, theta, eps, warmup, refresh, distinct, tail_pkg,
        magic_hi, magic_lo, chunk_f0, chunk_f1, chunk_f2, chunk_f3, probs, min_set_words,
    )


@njit(cache=True, _nrt=False)
def _head_kernel_d_cache(  # pragma: no cover - compiled
    fps, out, loads, src_state, sketch, choice_cache, theta, eps, warmup, refresh, distinct, tail_pkg,
    magic_hi, magic_lo, chunk_f0, chunk_f1, chunk_f2, chunk_f3, probs, min_set_words,
):
    return _head_body(
        MODE_D, KIND_CACHE, fps, out, loads, src_state, sketch, choice_cache, theta, eps, warmup, refresh, distinct, tail_pkg,
        magic_hi, magic_lo, chunk_f0, chunk_f1, chunk_f2, chunk_f3, probs, min_set_words,
    )


@njit(cache=True, _nrt=False)
def _head_kernel_d_track(  # pragma: no cover - compiled
    fps, out, loads, src_state, sketch, choice_cache, theta, eps, warmup, refresh, distinct, tail_pkg,
    magic_hi, magic_lo, chunk_f0, chunk_f1, chunk_f2, chunk_f3, probs, min_set_words,
):
    return _head_body(
        MODE_D, KIND_TRACK, fps, out, loads, src_state, sketch, choice_cache, theta, eps, warmup, refresh, distinct, tail_pkg,
        magic_hi, magic_lo, chunk_f0, chunk_f1, chunk_f2, chunk_f3, probs, min_set_words,
    )


@njit(cache=True, _nrt=False)
def _head_kernel_w(  # pragma: no cover - compiled
    fps, out, loads, src_state, sketch, choice_cache, theta, eps, warmup, refresh, distinct, tail_pkg,
    magic_hi, magic_lo, chunk_f0, chunk_f1, chunk_f2, chunk_f3, probs, min_set_words,
):
    return _head_body(
        MODE_W, KIND_TRACK, fps, out, loads, src_state, sketch, choice_cache, theta, eps, warmup, refresh, distinct, tail_pkg,
        magic_hi, magic_lo, chunk_f0, chunk_f1, chunk_f2, chunk_f3, probs, min_set_words,
    )


@njit(cache=True, _nrt=False)
def _head_kernel_rr(  # pragma: no cover - compiled
    fps, out, loads, src_state, sketch, choice_cache, theta, eps, warmup, refresh, distinct, tail_pkg,
    magic_hi, magic_lo, chunk_f0, chunk_f1, chunk_f2, chunk_f3, probs, min_set_words,
):
    return _head_body(
        MODE_RR, KIND_RR, fps, out, loads, src_state, sketch, choice_cache, theta, eps, warmup, refresh, distinct, tail_pkg,
        magic_hi, magic_lo, chunk_f0, chunk_f1, chunk_f2, chunk_f3, probs, min_set_words,
    )


#: one compiled kernel per (head mode, kind): D-Choices switches among the first three
_HEAD_KERNELS = {
    (MODE_D, KIND_PRE): _head_kernel_d_pre,
    (MODE_D, KIND_CACHE): _head_kernel_d_cache,
    (MODE_D, KIND_TRACK): _head_kernel_d_track,
    (MODE_W, KIND_TRACK): _head_kernel_w,
    (MODE_RR, KIND_RR): _head_kernel_rr,
}


# ---------------------------------------------------------------------------------------------
# Routers (all state of a split-key grouping is routing state: per-source loads, sketches, caches)
# ---------------------------------------------------------------------------------------------
class _SplitKeyRouter(Router):
    """Per-source local loads and the common ``route`` plumbing."""

    source_state_attrs: ClassVar[tuple[str, ...]] = ("loads",)

    def __init__(self, n_workers: int, n_sources: int = 1, seed: int = 0, params: Mapping[str, Any] | None = None):
        super().__init__(n_workers, n_sources, seed, params)
        self._chunk_f0 = np.zeros(_CHUNK, dtype=np.int64)
        self._chunk_f1 = np.zeros(_CHUNK, dtype=np.int64)
        self._chunk_f2 = np.zeros(_CHUNK, dtype=np.int64)  # F_2, F_3: D-Choices with d <= PRE_D
        self._chunk_f3 = np.zeros(_CHUNK, dtype=np.int64)
        self._reset_loads()

    def _reset_loads(self) -> None:
        self.loads = np.zeros((self.n_sources, self.n_workers), dtype=np.int64)
        self._magic_hi, self._magic_lo = _magic(self.n_workers)

    def _source(self, source: int) -> int:
        s = int(source)
        if not 0 <= s < self.n_sources:
            raise ValueError(f"source must be in [0, {self.n_sources}), got {source}")
        return s

    def resize(self, n_workers: int) -> None:
        """New number of workers: local loads restart at zero (sketches, if any, are kept)."""
        super().resize(n_workers)
        self._reset_loads()

    def d_of(self, source: int = 0) -> int:
        """Number of choices a head key has at ``source`` now (n means any worker)."""
        return 2


class PKGRouter(_SplitKeyRouter):
    """Partial Key Grouping: least loaded (local estimate) of F_0(k), F_1(k); ties → F_0."""

    def route(self, fps: np.ndarray, source: int = 0) -> np.ndarray:
        s = self._source(source)
        fps = np.ascontiguousarray(fps, dtype=np.uint64).ravel()
        out = np.empty(fps.size, dtype=np.int64)
        if fps.size:
            _pkg_kernel(
                fps, out, self.loads[s], self._magic_hi, self._magic_lo, self._chunk_f0, self._chunk_f1,
                bool(self.p.get("distinct", False)),
            )
        return out


_DISTINCT = Param(
    "distinct", "bool", False,
    "PKG's second choice is the first of F_1, F_2, … that differs from F_0, so every key (the tail "
    "keys of the head-aware groupings) has two different workers; off = the paper, where F_0 = F_1 "
    "happens for 1/n of the keys and such a key has one worker (as under hash)",
)
_TAIL = Param(
    "tail", "choice", "pkg",
    "how a tail (not head) key is routed: pkg = the least loaded of its two hash choices F_0, F_1 (the "
    "paper, Alg. 1); hash = its first choice F_0 alone, the worker `hash` gives it, so only head keys "
    "are split and every tail key has one owner (deviation for the Spark engine, where a key held by "
    "one worker needs no merge: docs/results/engine.md)",
    choices=("pkg", "hash"),
)
_THETA = Param(
    "head_threshold", "float", 0.0,
    "θ: a key is in the head when its guaranteed frequency (count − error)/N at the source is >= θ; "
    "0 means the paper's default 1/(5n)",
    low=0.0, high=1.0,
)
_CAPACITY = Param(
    "capacity", "int", 10000,
    "SpaceSaving counters per source (1/ε of the sketch: counts are over-estimated by at most "
    "N/capacity); memory ≈ 110-140 bytes per counter per source",
    low=1, high=1_000_000,
)
_WARMUP = Param(
    "warmup", "int", 0,
    "the first this many tuples of each source are routed as tail (no key is hot before; avoids "
    "flagging keys hot from their first tuples); 0 means ceil(10/θ) = 50n with the default θ",
    low=0, high=10**12,
)
_EPSILON = Param(
    "epsilon", "float", 1e-4,
    "ε: imbalance tolerance of Eq. (3) used to choose d (paper default 1e-4)",
    low=0.0, high=1.0, low_open=True,
)
_DECAY = Param(
    "decay", "float", 0.5,
    "recency: every `epoch` tuples of a source its sketch counts (and N) are multiplied by this factor, "
    "so the head follows recent frequencies (FISH-style epoch decay; default 0.5 chosen on the real traces, "
    "docs/results/gate.md \"Recency and the migration gate\"); 1 = counts since the start (the paper)",
    low=0.0, high=1.0, low_open=True,
)
_EPOCH = Param(
    "epoch", "int", 0,
    "recency: tuples of a source between two decays of its sketch (with decay < 1); 0 means warmup/5 "
    "= 10n with the default θ",
    low=0, high=10**12,
)
_REFRESH = Param(
    "refresh", "int", 1000,
    "d is recomputed from the source's head every this many tuples (first at the end of warmup)",
    low=1, high=10**12,
)


class _HeadRouter(SketchPerSource, _SplitKeyRouter):
    """Head/tail split with a SpaceSaving sketch per source; subclasses set ``mode``."""

    mode: ClassVar[int] = 0

    source_state_attrs: ClassVar[tuple[str, ...]] = ("loads", "state", "_hslot", "_cfp", "_cmeta", "_crow")

    def __init__(self, n_workers: int, n_sources: int = 1, seed: int = 0, params: Mapping[str, Any] | None = None):
        super().__init__(n_workers, n_sources, seed, params)
        self.sketch = SpaceSaving(self.sketch_capacity(), self.n_sources)
        self._probs = np.zeros(self.sketch.capacity, dtype=np.float64)
        self.state = np.zeros((self.n_sources, _STATE_COLUMNS), dtype=np.int64)
        self._reset_state()

    def sketch_capacity(self) -> int:
        """Counters per source: ``capacity``, or, while the sketches decay, at most the number of
        keys a source's sketch can ever hold, ``⌈epoch / (1 − decay)⌉``: between two decays a source
        adds ``epoch`` tuples and a decay leaves at most ``decay · N``, so N (hence the number of
        tracked keys) stays below ``epoch · (1 + decay + decay² + …)``.  A sketch of that size never
        evicts, so it counts exactly what the ``capacity``-sized one would, and a decay (which
        touches every counter and the whole hash table) costs what the sketch holds, not
        ``capacity``."""
        capacity = int(self.p["capacity"])
        if not self.decaying:
            return capacity
        bound = math.ceil(self.epoch / (1.0 - float(self.p["decay"])))
        return max(1, min(capacity, bound))

    # ------------------------------------------------------------------ effective parameters
    @property
    def tail_pkg(self) -> bool:
        """Whether tail keys take the less loaded of two choices (the paper) or their first (``tail=hash``)."""
        return self.p.get("tail", "pkg") == "pkg"

    @property
    def theta(self) -> float:
        """Effective head threshold θ (``head_threshold`` or 1/(5n))."""
        t = float(self.p["head_threshold"])
        return t if t > 0 else 1.0 / (5.0 * self.n_workers)

    @property
    def warmup(self) -> int:
        """Effective warm-up in tuples per source (``warmup`` or ceil(10/θ))."""
        w = int(self.p["warmup"])
        # round first: 10 / (1/(5n)) must give 50n, not 50n + 1 through a representation error
        return w if w > 0 else int(math.ceil(round(10.0 / self.theta, 6)))

    def _reset_state(self) -> None:
        if self.sketch_capacity() > self.sketch.capacity:  # more workers: a longer epoch, more keys
            self.sketch = self.sketch.with_capacity(self.sketch_capacity())
            self._probs = np.zeros(self.sketch.capacity, dtype=np.float64)
        n = self.n_workers
        st = self.state
        st[:, ST_D] = 2 if n > 2 else n
        st[:, ST_RR] = np.arange(self.n_sources) % n
        st[:, ST_ROW] = 0
        self._tw = np.zeros((n + 63) // 64, dtype=np.uint64)
        self._alloc_cache()
        totals = self.sketch.meta[:, TOTAL]
        # next d refresh: at the end of warm-up, or before the next tuple if already past it
        # (ST_NEXT counts in the sketch's N, which decays: tuples seen = N + ST_LOST)
        st[:, ST_NEXT] = np.maximum(self.warmup - st[:, ST_LOST], totals)
        seen = totals + st[:, ST_LOST]
        st[:, ST_EPOCH] = (seen // self.epoch + 1) * self.epoch if self.decaying else 0

    @property
    def decaying(self) -> bool:
        """Whether the sketches decay (parameter ``decay`` < 1)."""
        return float(self.p.get("decay", 1.0)) < 1.0

    @property
    def epoch(self) -> int:
        """Effective tuples per source between two decays (``epoch`` or warmup / 5, at least 1)."""
        e = int(self.p.get("epoch", 0))
        return e if e > 0 else max(1, self.warmup // 5)

    def seen(self, source: int = 0) -> int:
        """Tuples ``source`` has routed (its sketch's N plus what decays took off N)."""
        s = self._source(source)
        return int(self.sketch.meta[s, TOTAL] + self.state[s, ST_LOST])

    def _decay(self, s: int, arrays: tuple, factor: float, epoch: int) -> None:
        """Decay source ``s``'s sketch by ``factor`` (:func:`skewlab.engine.algorithms.sketches.ss_decay`
        on its ``arrays``, :meth:`SpaceSaving.arrays`), shift the schedules that count in its N (the
        next d refresh) by what N lost and schedule the next decay ``epoch`` tuples later.  (Called
        every ``epoch`` tuples, a few hundred: the caller passes what it computed once per batch.)"""
        lost = ss_decay(arrays, factor)
        st = self.state[s]
        st[ST_LOST] += lost
        st[ST_NEXT] -= lost
        st[ST_EPOCH] += epoch

    def _reset_loads(self) -> None:
        super()._reset_loads()
        if hasattr(self, "state"):
            self._reset_state()

    def _alloc_cache(self) -> None:
        """D-Choices candidate cache (see :func:`_dchoices_pick`); a stub for the other modes.

        Rows: at most ``1/θ`` keys can be in the head at once (their guaranteed frequencies sum to
        <= 1), so ``min(capacity, floor(1/θ) + 1)`` rows, capped so rows × n <= 2^20 per source.
        """
        s, n = self.n_sources, self.n_workers
        if self.mode == MODE_D and n > 2:
            rows = max(1, min(self.sketch.capacity, int(1.0 / self.theta) + 1, _CACHE_ENTRIES // n))
            cols = n
        else:
            rows, cols = 1, 1
        self._hslot = np.full((s, self.sketch.capacity if self.mode == MODE_D else 1), -1, dtype=np.int32)
        self._cfp = np.zeros((s, rows), dtype=np.uint64)
        self._cmeta = np.full((s, rows), -1, dtype=np.int64)
        self._crow = np.zeros((s, rows, cols), dtype=np.int32)

    def _cache(self, s: int) -> tuple:
        """Flat views of the D-Choices candidate cache of source ``s`` (see :func:`_dchoices_pick`)."""
        return self._hslot[s], self._cfp[s], self._cmeta[s], self._crow[s].reshape(-1)

    # ------------------------------------------------------------------ routing
    def route(self, fps: np.ndarray, source: int = 0) -> np.ndarray:
        s = self._source(source)
        fps = np.ascontiguousarray(fps, dtype=np.uint64).ravel()
        out = np.empty(fps.size, dtype=np.int64)
        st = self.state[s]
        decaying = self.decaying
        meta = self.sketch.meta[s]
        pos = 0
        # (built once per call: a decay every few hundred tuples must not rebuild them)
        before = (self.loads[s], st, self.sketch.arrays(s), self._cache(s), self.theta, float(self.p.get("epsilon", 1e-4)))
        after = (int(self.p.get("refresh", 1)), bool(self.p.get("distinct", False)), self.tail_pkg,
                 self._magic_hi, self._magic_lo,
                 self._chunk_f0, self._chunk_f1, self._chunk_f2, self._chunk_f3, self._probs, self._tw)
        warmup = self.warmup
        arrays, factor, epoch = before[2], float(self.p.get("decay", 1.0)), self.epoch
        kernel = None if self.mode == MODE_D else _HEAD_KERNELS[(self.mode, KIND_TRACK if self.mode == MODE_W else KIND_RR)]
        while pos < fps.size:
            end = fps.size
            if decaying:  # the kernel stops at the next decay (a function of the tuple count only)
                if meta[TOTAL] + st[ST_LOST] == st[ST_EPOCH]:
                    self._decay(s, arrays, factor, epoch)
                end = min(end, pos + int(st[ST_EPOCH] - meta[TOTAL] - st[ST_LOST]))
            # the warm-up counts tuples seen; the kernel compares it with the (decayed) N
            args = (*before, warmup - int(st[ST_LOST]), *after)
            while pos < end:  # D-Choices: the kernel stops where a refresh changes the kind of pick
                k = kernel or _HEAD_KERNELS[(MODE_D, _d_kind(int(st[ST_D]), self.n_workers))]
                pos += k(fps[pos:end], out[pos:end], *args)
        if decaying and self.seen(s) == st[ST_EPOCH]:  # (so that the batch ends after its decay)
            self._decay(s, arrays, factor, epoch)
        return out

    # ------------------------------------------------------------------ inspection
    def head(self, source: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Current head of ``source``: fingerprints and guaranteed frequencies (count − error)/N_s,
        by decreasing frequency: the keys the next tuple would treat as head (empty while
        ``N_s <= warmup``)."""
        s = self._source(source)
        total = self.sketch.total(s)
        if total <= 0 or self.seen(s) <= self.warmup:
            return np.zeros(0, np.uint64), np.zeros(0, np.float64)
        thr = self.theta * total
        fps, counts, errs = self.sketch.entries(s, min_count=int(math.floor(thr)))
        g = counts - errs
        keep = g >= thr
        fps, freqs = fps[keep], g[keep] / total
        order = np.argsort(-freqs, kind="stable")
        return fps[order], freqs[order]

    def resize(self, n_workers: int) -> None:
        """New number of workers: loads restart, sketches are kept, d is recomputed at the next
        tuple of each source (θ = 1/(5n) and the automatic warm-up follow the new n)."""
        super().resize(n_workers)

    def describe(self) -> dict[str, Any]:
        out = super().describe()  # (Planner.describe adds these to the algorithm's description)
        out["theta"] = self.theta
        out["warmup_tuples"] = self.warmup
        if self.decaying:
            out["epoch_tuples"] = self.epoch
        out["d"] = [self.d_of(s) for s in range(self.n_sources)]
        return out


class DChoicesRouter(_HeadRouter):
    """D-Choices: head keys Greedy-d with d from Eq. (3) (W-Choices when d >= n), tail PKG."""

    mode: ClassVar[int] = MODE_D

    def d_of(self, source: int = 0) -> int:
        return int(self.state[self._source(source), ST_D])


class WChoicesRouter(_HeadRouter):
    """W-Choices: head keys go to the least loaded of all n workers, tail PKG."""

    mode: ClassVar[int] = MODE_W

    def d_of(self, source: int = 0) -> int:
        self._source(source)
        return self.n_workers


class RoundRobinHeadRouter(_HeadRouter):
    """Round-Robin: head keys round robin over all n workers (load-oblivious), tail PKG."""

    mode: ClassVar[int] = MODE_RR

    def d_of(self, source: int = 0) -> int:
        self._source(source)
        return self.n_workers


# ---------------------------------------------------------------------------------------------
# Planners (registry entries: metadata and parameters; routing in the routers above)
# ---------------------------------------------------------------------------------------------
@register
class PKGGrouping(StreamingPlanner):
    name: ClassVar[str] = "pkg"
    summary: ClassVar[str] = "Partial key grouping: least loaded of two hash choices (local load per source)"
    paper: ClassVar[str] = "nasir-icde16 Sec. II-B (PKG, Nasir et al. ICDE 2015)"
    single_owner: ClassVar[bool] = False
    params: ClassVar[tuple[Param, ...]] = (_DISTINCT,)
    router_class: ClassVar[type[Router]] = PKGRouter


@register
class DChoicesGrouping(StreamingPlanner):
    name: ClassVar[str] = "dchoices"
    summary: ClassVar[str] = "D-Choices: heavy hitters get d >= 2 distinct hash choices (d from Eq. 3), tail PKG"
    paper: ClassVar[str] = "nasir-icde16 Sec. III-B, IV-A, Alg. 1 (D-Choices)"
    params: ClassVar[tuple[Param, ...]] = (_THETA, _EPSILON, _CAPACITY, _WARMUP, _REFRESH, _DECAY, _EPOCH, _DISTINCT, _TAIL)
    single_owner: ClassVar[bool] = False
    router_class: ClassVar[type[Router]] = DChoicesRouter


@register
class WChoicesGrouping(StreamingPlanner):
    name: ClassVar[str] = "wchoices"
    summary: ClassVar[str] = "W-Choices: heavy hitters may go to any worker (least loaded), tail PKG"
    paper: ClassVar[str] = "nasir-icde16 Sec. III-B, Alg. 1 (W-Choices)"
    params: ClassVar[tuple[Param, ...]] = (_THETA, _CAPACITY, _WARMUP, _DECAY, _EPOCH, _DISTINCT, _TAIL)
    single_owner: ClassVar[bool] = False
    router_class: ClassVar[type[Router]] = WChoicesRouter


@register
class RoundRobinHeadGrouping(StreamingPlanner):
    name: ClassVar[str] = "rr-head"
    summary: ClassVar[str] = "Round robin for heavy hitters over all workers, tail PKG"
    paper: ClassVar[str] = "nasir-icde16 Sec. III-B (Round-Robin baseline)"
    params: ClassVar[tuple[Param, ...]] = (_THETA, _CAPACITY, _WARMUP, _DECAY, _EPOCH, _DISTINCT, _TAIL)
    single_owner: ClassVar[bool] = False
    router_class: ClassVar[type[Router]] = RoundRobinHeadRouter
