"""Split-key groupings of Nasir et al., "When Two Choices Are not Enough", ICDE 2016.

Registry names: ``pkg``, ``dchoices``, ``wchoices``, ``rr-head``.  All four split a key over
several workers (``single_owner = False``) and decide per tuple from the state of the emitting
source only (Nasir et al. Sec. IV-B "Overhead on Sources": each source keeps its own load vector
and its own SpaceSaving sketch).

Per source ``s`` the state is

* ``loads[s]`` (int64, length n): tuples ``s`` has sent to each worker (the *local* load estimate);
* for the head-aware groupings, a SpaceSaving sketch (:mod:`engine.sketches`), ``N_s`` = tuples seen.

Hash choices are those of :mod:`engine.keys`: ``F_0 = h(k) = fp mod n`` and
``F_i = ⌊mix64(fp + i·GOLDEN) · n / 2^64⌋`` (the paper's F_1..F_d, numbered from 0 here).  F_0 is
computed in the kernels with an exact division-free remainder (Lemire, Kaser & Kurz, "Faster
remainder by direct computation", 2019, 128-bit magic constant; see :func:`_fastmod`), which gives
the same value as ``%`` and lets LLVM vectorise the F_0/F_1 pre-pass; F_i (i >= 1) with
:func:`engine.keys.reduce_scalar`; the tests check equality with :func:`engine.keys.candidate` for
every n used.

Routing of one tuple with key k at source s (Alg. 1), sequential greedy: tuple i sees the loads after
tuple i−1 of the same source, exactly; batches are processed tuple by tuple in numba kernels, so
splitting a stream into batches never changes the result.

* ``pkg`` — Partial Key Grouping (Sec. II-B): ``w = argmin(L[F_0], L[F_1])``, ties → F_0.
* Head-aware groupings first count k in the sketch (Alg. 1 line 2, ``UPDATESPACESAVING``), then decide
  whether k is in the head ``H = {k : p_k >= θ}`` (Sec. III-A), θ = ``head_threshold`` or 1/(5n):

  - ``dchoices`` — head keys: Greedy-d over d **distinct** workers, the first d different values of
    ``F_0, F_1, F_2, …`` (ties → the earlier choice), with d from :func:`find_d` (Sec. IV-A); when
    ``d >= n`` head keys use W-Choices.  Deviation: the paper's F_1..F_d are independent hash functions
    whose values may coincide (so may those of the public simulator), leaving a head key on fewer
    than d workers, and a hot key with p·n close to d then overloads them (docs/results.md, Nasir
    section).
    Drawing distinct choices only makes Eq. (3)'s b_h (which counts such collisions) pessimistic.
    F_0, F_1 stay first whenever they differ, so a key's tail workers are among its head workers.
  - ``wchoices`` — head keys: least loaded of all n workers (ties → lower worker id).
  - ``rr-head`` — head keys: round robin over all n workers, one pointer per source starting at
    ``s mod n`` (as ``shuffle``), load-oblivious; the loads it causes still count for the tail.
  - tail keys (all three): PKG as above, on the same load vector.

Head membership (decision; the pitfall of papers/README.md "Notes for implementers"): the authors'
public simulator (anisnasir/SLBSimulator, LBDChoice) flags k as hot when ``(count + error)/N``
exceeds the threshold, so the very first tuples of a stream are all "hot" (count 1 of N = 1) and a
key that just took over a counter inherits the victim's count.  skewlab uses the **guaranteed**
count instead: k ∈ H iff

    N_s > warmup   and   count_k − error_k >= θ · N_s         (both from the source's sketch),

``count − error`` is a lower bound of the true count, so a newly inserted key (guaranteed count 1)
is never hot, and ``warmup`` (the first ``warmup`` tuples of a source are all routed as tail;
default ``ceil(10/θ)`` = 50n: a key exactly at the threshold has then been seen ~10 times) removes
the small-N noise.  The price is that keys whose frequency is within ``1/capacity`` of θ may be
missed (1e-4 with the default capacity).  Membership is evaluated for every tuple after its sketch
update (Alg. 1 lines 2–4).  SpaceSaving ties (which counter to evict) follow the rule documented in
:mod:`engine.sketches` (least recently updated among the minimum counts).

Recency (skewlab extension, issue #15; parameters ``decay`` and ``epoch``): the paper's head is
decided from counts since the start of the stream, so a key that became hot late needs
``θ · N_s`` tuples to enter it and a key that cooled stays in it until N_s has grown by its count/θ.
With ``decay`` < 1, every ``epoch`` tuples of a source its sketch is decayed
(:meth:`engine.sketches.SpaceSaving.decay`: counts, guaranteed counts and N_s times ``decay``), as
the epoch-based hotness decay of FISH (Chen et al., arXiv 1806.00760, which keeps per-epoch counts
and decays the previous epochs' ones); skewlab decays the one SpaceSaving sketch instead of keeping
a second per-epoch counter.  N_s in the head test is then the decayed total, so the head is the keys
whose exponentially weighted recent frequency is >= θ.  The warm-up and the d refresh keep counting
tuples (tuples seen = N_s + what the decays took off N_s, ``state[s, ST_LOST]``); the decay happens
after tuple ``k · epoch`` of the source (and after a refresh due at the same tuple), a function of
the tuple count only, so routing stays independent of batching; ``route`` runs the kernels up to
each decay.  ``decay = 1`` (default) is the paper's behaviour; the decay rebuilds the sketch in
Python and numpy (O(capacity) per epoch), which is why it is not on by default (measurements in
docs/results.md, "Recency and the migration gate").

d for D-Choices (``FINDOPTIMALCHOICES``, Sec. IV-A): :func:`find_d` searches d upward from
``max(2, ceil(p_1 · n))`` for the first d satisfying Eq. (3) for **every** head prefix h = 1..|H|,

    Σ_{i<=h} p_i + (b_h/n)^d Σ_{h<i<=|H|} p_i + (b_h/n)^2 Σ_{i>|H|} p_i <= b_h (1/n + ε),
    b_h = n − n((n−1)/n)^{h·d}                                             (Eq. 10),

and returns n (W-Choices) when no d < n qualifies.  (The public simulator checks only h = 1 and
h = |H|, which the paper calls the tight ones; skewlab checks all prefixes, as Eq. 3 states.)
Online, p_i is the guaranteed frequency ``(count − error)/N_s`` of the head keys of the source's
sketch, and the tail mass is ``1 − Σ p_i``.  Alg. 1 calls FINDOPTIMALCHOICES for every head
tuple; that costs O(|H|·d) per tuple, so skewlab recomputes d (per source) when the source's tuple
count reaches ``warmup`` and then every ``refresh`` tuples, from the sketch after that tuple, and
uses it from the next tuple on — a function of the source's tuple count only, hence deterministic
and independent of batching; before the first refresh d = 2.  Per-tuple membership still uses the
current sketch.  ``d_of(source)`` exposes d (n = any worker),
``head(source)`` the current head with guaranteed frequencies.

Implementation notes (speed only; results are those of the plain tuple-by-tuple algorithm, which
the tests replay in pure Python): one compiled kernel per head mode and, for D-Choices, per kind of
head pick (:data:`_HEAD_KERNELS`; the tests on both are compile-time constants: ~1.5 ns per tuple
less than one kernel branching on the mode, and ~0.2–0.3 ns less for D-Choices than one D kernel
branching on d >= n; a refresh that changes the kind ends the kernel call and ``route`` goes on with
the other kernel).  D-Choices with d <= PRE_D (= 4) takes F_2, F_3 from the vectorised pre-pass,
computed for every tuple with the multiply-shift reduction of :mod:`engine.keys`, and scans them
inline: no cache lookup hanging off the sketch's counter id (17.5–18.2 → 15.75–16.2 ns per tuple at
d = 4, together with the multiply-shift F_1 for all groupings, which took PKG 4.35 → 3.8–4.0 ns; with
the exact 128-bit-magic remainder, the F_2/F_3 pre-pass had been ~1 ns slower than the cache); a
head tuple whose F_0..F_{d-1} hold a repeat (a branch-free test) takes the cached path instead,
which draws the key's d distinct choices once per key and d.
The least loaded of all n workers (W-Choices, and D-Choices with d >= n) comes from a
tracker of the minimum load and the *set* of workers holding it (a bit set: one register word for
n <= 64, words above), valid because loads only grow by one: a bumped worker leaves the set with a
branch-free bit clear, the head choice is the set's lowest bit, and the set is rebuilt in O(n) when it
empties (the minimum is then one higher), once per load level; it is derived from the loads, so each
kernel call builds it (O(n)), and D-Choices builds it only while d >= n (d changes only at
refreshes).  This replaced a (min load, lowest worker) pair whose successor was found by scanning
forward, an unpredictable loop on every head tuple: W-Choices 19.5 → 17 ns per tuple.  D-Choices
with PRE_D < d < n caches, per head key, its d distinct choices (:func:`_dchoices_pick`) and prefetches
the cache slot of the counter ``PF_COUNTER`` tuples ahead (~0.4 ns); kernels are compiled with
``_nrt=False`` (no reference counting of the array arguments inside the per-tuple loop, which
otherwise costs ~50 ns per tuple); data-dependent array indices are cast to unsigned
(:func:`_ug`/:func:`_us`), which removes numba's negative-index wraparound code (with the same
change in :mod:`engine.sketches`, ~45% fewer instructions per tuple); the sketch's table slot and
counter row of the tuples ``PF_SLOT``/``PF_COUNTER`` ahead are prefetched.  Per-tuple cost, 1e6-key
Zipf z = 1 stream, n = 50, capacity 1e4, one core of the development machine (shared, ±1 ns): ~4 ns
PKG part (F_0/F_1 pre-pass, choice, load update); ~8.2 ns SpaceSaving update with the windowed
Stream-Summary of :mod:`engine.sketches` (12.5 ns with the full one; hit or miss stays
unpredictable: 60 % hits, 39 % evictions); ~3 ns head test and round-robin pointer; ~0.5–0.7 ns more for
the W-Choices tracker or the D-Choices pre-pass, scan and refresh test (d = 4): in total ~15.5 ns
(rr-head), ~16 ns (wchoices, dchoices), measured with ``bench/bench_routing.py`` (before the
changes of the previous paragraph: ~17 and ~18 ns).  With d = 22 (z = 1.4) a D-Choices head tuple
scans its 22 cached choices.  Tried without a measurable
gain, hence not kept: selecting the W-Choices/Round-Robin head choice instead of branching to it
(the PKG choice computed for every tuple); keeping the per-source state in locals; a branch-free
argmin in the D-Choices scan; carrying the chosen worker's load instead of reloading it; a
SpaceSaving table of 4 · or 16 · capacity slots instead of 8 · (both slower), or rebuilt after
3 · capacity evictions instead of capacity (slower: longer probes); computing F_2, F_3 (with the
remainder) for head tuples only, inside the loop, instead of the cache (no gain); the head test
as an integer comparison with ceil(θ·N); routing in two passes per chunk (sketch and head flags
first, then the choices); computing the fingerprints inside the routing loop (from the key bytes,
to overlap hashing with the sketch's memory stalls: no gain, the mispredicted branches serialise
both); deferring the load increments (the last 1-3 updates held in registers and read through, so
the next tuples' load reads do not wait on a store whose address is computed late: PKG's kernel
alone went 4.4 → 3.3 ns, but the head kernels got 1-2 ns slower, too many live values).

Numba's on-disk cache does not see changes in other modules: the kernels here inline those of
:mod:`engine.sketches`, so after editing that module delete the cached ``split_key*.nbi/.nbc``
files in ``engine/groupings/__pycache__`` (a stale kernel would use the old array layout).

``resize(n)``: the local loads restart at zero (``Router.resize`` contract), the sketches are
kept, θ = 1/(5n) and the automatic warm-up follow the new n, and d is recomputed at the next tuple
of each source.

Imbalance reported in the tests and benchmarks is skewlab's headline ``max_w L_w / mean_w L_w − 1``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Mapping

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from engine.grouping import Router, StreamingPlanner
from engine.keys import mix64_scalar, reduce_scalar
from engine.params import Param
from engine.registry import register
from engine.sketches import (
    PF_COUNTER,
    PF_SLOT,
    SHIFT,
    TOTAL,
    SpaceSaving,
    prefetch,
    ss_count,
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
# per-source state columns
ST_D, ST_NEXT, ST_RR, ST_ROW = 0, 1, 2, 5  # (6: unused, kept for the state layout)
ST_LOST, ST_EPOCH = 3, 4  # recency decay: N lost to decays so far; tuple count of the next decay
_NST = 7
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
def _fastmod(a, mhi, mlo, d):  # pragma: no cover - compiled
    """``a mod d`` (uint64 a, d < 2^32) by Lemire's direct computation with a 128-bit M."""
    lo = mlo * a
    hi = mhi * a + _mulhi64(mlo, a)
    h0 = hi * d
    total = h0 + reduce_scalar(lo, d)
    return reduce_scalar(hi, d) + np.uint64(total < h0)


@njit(cache=True, inline="always")
def _cand(fp, i, d, mhi, mlo):  # pragma: no cover - compiled
    """``F_i(fp)`` in ``[0, n)``; equal to :func:`engine.keys.candidate_scalar` (d = uint64(n))."""
    if i == 0:
        return np.int64(_fastmod(fp, mhi, mlo, d))
    return np.int64(reduce_scalar(mix64_scalar(fp + np.uint64(i) * np.uint64(_GOLDEN)), d))


@njit(cache=True, _nrt=False)
def _candidates_kernel(fps, i, n, mhi, mlo, out):  # pragma: no cover - compiled
    d = np.uint64(n)
    for x in range(fps.size):
        out[x] = _cand(fps[x], i, d, mhi, mlo)


def fast_candidate(fps: np.ndarray, i: int, n: int) -> np.ndarray:
    """``F_i`` through the kernels' division-free path (tests compare it with ``keys.candidate``)."""
    fps = np.ascontiguousarray(fps, dtype=np.uint64)
    mhi, mlo = _magic(n)
    out = np.empty(fps.size, dtype=np.int64)
    if fps.size:
        _candidates_kernel(fps, int(i), int(n), mhi, mlo, out)
    return out


@njit(cache=True, inline="always")
def _prepass(f, d, mhi, mlo, c0, c1):  # pragma: no cover - compiled
    """F_0, F_1 of the chunk ``f`` into c0, c1.

    No loop-carried dependency, so LLVM vectorises it; ``f`` must be a slice (a view starting at
    0): indexing ``fps[start + x]`` instead would keep numba's negative-index wraparound check
    and block vectorisation (measured 4x slower).
    """
    g = np.uint64(_GOLDEN)
    for x in range(f.size):
        fp = f[x]
        c0[x] = np.int64(_fastmod(fp, mhi, mlo, d))
        c1[x] = np.int64(reduce_scalar(mix64_scalar(fp + g), d))


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
def _refresh_d(sk, theta, eps, n, probs):  # pragma: no cover - compiled
    """FINDOPTIMALCHOICES on the source's current head: keys with guaranteed count >= θ·N, their
    frequencies (count − error)/N sorted decreasingly, tail = 1 − Σ; ``probs`` is scratch space."""
    total = sk[4][TOTAL]
    if total <= 0:
        return np.int64(2) if n > 2 else np.int64(n)
    m = ss_guaranteed(sk, theta * total, probs)
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
@njit(cache=True, _nrt=False)
def _pkg_kernel(fps, out, loads, mhi, mlo, c0, c1):  # pragma: no cover - compiled
    n = loads.size
    d = np.uint64(n)
    m = fps.size
    for start in range(0, m, _CHUNK):
        stop = min(start + _CHUNK, m)
        _prepass(fps[start:stop], d, mhi, mlo, c0, c1)
        o = out[start:stop]
        for x in range(stop - start):
            a = _ug(c0, x)
            b = _ug(c1, x)
            la = _ug(loads, a)
            lb = _ug(loads, b)
            if lb < la:
                a = b
                la = lb
            _us(loads, a, la + 1)
            _us(o, x, a)


@njit(cache=True, inline="always")
def _min_build(loads, tw, minv):  # pragma: no cover - compiled
    """Bit set of the workers whose load is ``minv`` into ``tw`` (bit w of word w >> 6); returns
    the lowest word index holding a set bit (``tw.size`` when none)."""
    n = loads.size
    for k in range(tw.size):
        tw[k] = np.uint64(0)
    for j in range(n):
        k = np.uint64(j) >> np.uint64(6)
        tw[k] = tw[k] | (np.uint64(_ug(loads, j) == minv) << (np.uint64(j) & np.uint64(63)))
    wi = 0
    while wi < tw.size and _ug(tw, wi) == 0:
        wi += 1
    return wi


@njit(cache=True, inline="always")
def _min_init(loads, tw):  # pragma: no cover - compiled
    """Tracker of (min load, workers holding it) from scratch: returns (minv, wi) (O(n))."""
    minv = _ug(loads, 0)
    for j in range(1, loads.size):
        if _ug(loads, j) < minv:
            minv = _ug(loads, j)
    return minv, _min_build(loads, tw, minv)


@njit(cache=True, inline="always")
def _min_worker(tw, wi):  # pragma: no cover - compiled
    """The lowest worker holding the minimum load."""
    return np.int64(wi) * 64 + np.int64(trailing_zeros(_ug(tw, wi)))


@njit(cache=True, inline="always")
def _bump_tracked(loads, w, tw, minv, wi):  # pragma: no cover - compiled
    """loads[w] += 1 keeping the tracker: ``minv`` = min(loads), ``tw`` = the workers at ``minv``,
    ``wi`` = the lowest non-empty word of ``tw``; returns the new (minv, wi).

    A worker leaves the set when its load was ``minv`` (branch-free bit clear).  When the set
    empties, the worker that emptied it is now at ``minv + 1`` and no load is below, so the
    minimum is ``minv + 1`` and the set is rebuilt (O(n), once per load level)."""
    old = _ug(loads, w)
    _us(loads, w, old + 1)
    k = np.uint64(w) >> np.uint64(6)
    bit = np.uint64(old == minv) << (np.uint64(w) & np.uint64(63))
    tw[k] = tw[k] & ~bit
    if _ug(tw, wi) == 0:
        wi += 1
        while wi < tw.size and _ug(tw, wi) == 0:
            wi += 1
        if wi == tw.size:
            minv += 1
            wi = _min_build(loads, tw, minv)
    return minv, wi


@njit(cache=True, inline="always")
def _word_build(loads, minv):  # pragma: no cover - compiled
    """n <= 64: the bit set of the workers whose load is ``minv`` as one word (branch-free)."""
    word = np.uint64(0)
    for j in range(loads.size):
        word |= np.uint64(_ug(loads, j) == minv) << np.uint64(j)
    return word


@njit(cache=True, inline="always")
def _bump_word(loads, w, word, minv):  # pragma: no cover - compiled
    """:func:`_bump_tracked` for n <= 64 with the set in one register word: returns (minv, word)."""
    old = _ug(loads, w)
    _us(loads, w, old + 1)
    word &= ~(np.uint64(old == minv) << np.uint64(w))
    if word == 0:
        minv += 1
        word = _word_build(loads, minv)
    return minv, word


@njit(cache=True, inline="always")
def _keep_less(loads, w, lw, c):  # pragma: no cover - compiled
    """One Greedy-d step: candidate ``c`` replaces the best so far ``(w, lw)`` if strictly less
    loaded (ties keep the earlier choice); returns the new ``(w, lw)``."""
    lc = _ug(loads, c)
    if lc < lw:
        return c, lc
    return w, lw


@njit(cache=True, inline="always")
def _prefetch_cache_slot(sk, hslot, fp):  # pragma: no cover - compiled
    """Prefetch the D-Choices cache slot (``hslot``) of the counter in ``fp``'s home table slot
    (speed only, like :func:`engine.sketches.ss_prefetch_counter`)."""
    e = sk[3][np.uint64(fp) >> np.uint64(sk[4][SHIFT])]
    prefetch(hslot, (e & np.uint64(0xFFFFFFFF)) - np.uint64(1))


@njit(cache=True, inline="always")
def _distinct_choices(fp, d, f0, f1, crow, base, seen, dn, mhi, mlo):  # pragma: no cover - compiled
    """``crow[base : base + d]`` = the first d **distinct** values of F_0, F_1, F_2, … (d < n).

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
    _us(crow, base, f0)
    got = 1
    i = 1
    while got < d:
        c = f1 if i == 1 else _cand(fp, i, dn, mhi, mlo)
        k = np.uint64(c) >> np.uint64(6)
        bit = np.uint64(1) << (np.uint64(c) & np.uint64(63))
        if (_ug(seen, k) & bit) == np.uint64(0):
            seen[k] = _ug(seen, k) | bit
            _us(crow, base + got, c)
            got += 1
        i += 1


@njit(cache=True, inline="always")
def _dchoices_pick(fp, cid, d, f0, f1, loads, st, hc, dn, mhi, mlo, seen):  # pragma: no cover - compiled
    """Greedy-d for a head key: least loaded of its d distinct choices (:func:`_distinct_choices`),
    ties → the earlier choice.

    The choices of a head key are cached per sketch counter (``hc``: counter → row, row →
    fingerprint, row → d, workers), so a head tuple does not redraw up to n − 1 hash choices.  A row
    is rebuilt when it belongs to another key (counter reused, row reallocated) or d changed; the
    scan has a fixed trip count d.
    """
    hslot, cfp, cmeta, crow = hc
    rows = cfp.size
    row = np.int64(_ug(hslot, cid))
    if row < 0 or _ug(cfp, row) != fp:
        row = st[ST_ROW]
        st[ST_ROW] = row + 1 if row + 1 < rows else 0
        _us(hslot, cid, row)
        _us(cfp, row, fp)
        _us(cmeta, row, -1)
    base = row * loads.size  # rows are n wide (_alloc_cache; d < n here)
    if _ug(cmeta, row) != d:
        _distinct_choices(fp, d, f0, f1, crow, base, seen, dn, mhi, mlo)
        _us(cmeta, row, d)
    w = np.int64(_ug(crow, base))
    lw = _ug(loads, w)
    for i in range(1, d):
        w, lw = _keep_less(loads, w, lw, np.int64(_ug(crow, base + i)))
    return w


@njit(cache=True, inline="always")
def _head_body(  # pragma: no cover - compiled
    mode, kind, fps, out, loads, st, sk, hc, theta, eps, warmup, refresh, mhi, mlo, c0, c1, c2, c3, probs, tw
):
    """Alg. 1 for one batch of one source; returns how many tuples of ``fps`` it routed.

    ``mode`` (MODE_D, MODE_W or MODE_RR) and ``kind``, how a head tuple picks its worker
    (:func:`_d_kind`: KIND_PRE, the choices F_0..F_{d-1} come from the pre-pass, d <= PRE_D;
    KIND_CACHE, from the choice cache; KIND_TRACK, the least loaded of all n workers through the
    tracker, ``tw`` its scratch words, >= ceil(n/64); KIND_RR, round robin) are compile-time
    constants: the body is inlined into one kernel per combination (:data:`_HEAD_KERNELS`).
    D-Choices runs the kernel of its current d; when a refresh changes the kind the kernel stops
    before the next tuple and the caller goes on with the other one (:meth:`_HeadRouter.route`)."""
    track = kind == KIND_TRACK
    n = loads.size
    dn = np.uint64(n)
    meta = sk[4]
    dcur = st[ST_D]
    nxt_refresh = st[ST_NEXT]
    small = n <= 64  # the worker set fits one register word
    minv = np.int64(0)
    wi = 0
    word = np.uint64(0)
    if track:  # derived from the loads, so built per call (O(n))
        minv, wi = _min_init(loads, tw)
        word = _ug(tw, 0)
    m = fps.size
    for start in range(0, m, _CHUNK):
        stop = min(start + _CHUNK, m)
        f = fps[start:stop]
        o = out[start:stop]
        _prepass(f, dn, mhi, mlo, c0, c1)
        if kind == KIND_PRE:
            if dcur > 2:
                _prepass_choice(f, 2, dn, c2)
            if dcur > 3:
                _prepass_choice(f, 3, dn, c3)
        for x in range(stop - start):
            # prefetch targets of the tuples PF_SLOT / PF_COUNTER ahead (clamped: no branch)
            ss_prefetch_slot(sk, _ug(fps, min(start + x + PF_SLOT, m - 1)))
            fpc = _ug(fps, min(start + x + PF_COUNTER, m - 1))
            ss_prefetch_counter(sk, fpc)
            if kind == KIND_CACHE:
                _prefetch_cache_slot(sk, hc[0], fpc)
            if mode == MODE_D and meta[TOTAL] == nxt_refresh:
                # FINDOPTIMALCHOICES on the sketch after the previous tuple (N_s = nxt_refresh)
                dnew = _refresh_d(sk, theta, eps, n, probs)
                nxt_refresh += refresh
                st[ST_D] = dnew
                st[ST_NEXT] = nxt_refresh
                if _d_kind(dnew, n) != kind or (kind == KIND_PRE and dnew > dcur):
                    return start + x  # (KIND_PRE: the pre-pass of this chunk lacks F_2/F_3)
                dcur = dnew
            fp = _ug(f, x)
            cid = ss_offer(sk, fp)
            total = meta[TOTAL]
            head = total > warmup and (ss_count(sk, cid) - ss_error(sk, cid)) >= theta * total
            if head:
                if mode == MODE_RR:
                    w = st[ST_RR]
                    nxt = w + 1
                    st[ST_RR] = nxt if nxt < n else 0
                elif track:
                    w = np.int64(trailing_zeros(word)) if small else _min_worker(tw, wi)
                elif kind == KIND_PRE:
                    # Greedy-d over F_0..F_{d-1} (d <= PRE_D), ties → lower choice index; when two
                    # of them name the same worker, the cache path draws d distinct choices
                    a0 = _ug(c0, x)
                    a1 = _ug(c1, x)
                    a2 = a0
                    a3 = a0
                    rep = a0 == a1
                    if dcur > 2:
                        a2 = _ug(c2, x)
                        rep = rep | (a2 == a0) | (a2 == a1)
                    if dcur > 3:
                        a3 = _ug(c3, x)
                        rep = rep | (a3 == a0) | (a3 == a1) | (a3 == a2)
                    if rep:
                        w = _dchoices_pick(fp, cid, dcur, a0, a1, loads, st, hc, dn, mhi, mlo, tw)
                    else:
                        w, lw = _keep_less(loads, a0, _ug(loads, a0), a1)
                        if dcur > 2:
                            w, lw = _keep_less(loads, w, lw, a2)
                        if dcur > 3:
                            w, lw = _keep_less(loads, w, lw, a3)
                else:
                    w = _dchoices_pick(
                        fp, cid, dcur, _ug(c0, x), _ug(c1, x), loads, st, hc, dn, mhi, mlo, tw
                    )
            else:
                w = _ug(c0, x)
                cand = _ug(c1, x)
                if _ug(loads, cand) < _ug(loads, w):
                    w = cand
            if track:
                if small:
                    minv, word = _bump_word(loads, w, word, minv)
                else:
                    minv, wi = _bump_tracked(loads, w, tw, minv, wi)
            else:
                _us(loads, w, _ug(loads, w) + 1)
            _us(o, x, w)
    if mode == MODE_D and meta[TOTAL] == nxt_refresh:  # (so that the batch ends with d up to date)
        dcur = _refresh_d(sk, theta, eps, n, probs)
        st[ST_D] = dcur
        st[ST_NEXT] = nxt_refresh + refresh
    return m


@njit(cache=True, inline="always")
def _d_kind(d, n):  # pragma: no cover - compiled
    """How a D-Choices head tuple picks among its d choices (see :func:`_head_body`)."""
    if d >= n:
        return KIND_TRACK
    return KIND_PRE if d <= PRE_D else KIND_CACHE


@njit(cache=True, _nrt=False)
def _head_kernel_d_pre(fps, out, loads, st, sk, hc, theta, eps, warmup, refresh, mhi, mlo, c0, c1, c2, c3, probs, tw):  # pragma: no cover - compiled
    return _head_body(MODE_D, KIND_PRE, fps, out, loads, st, sk, hc, theta, eps, warmup, refresh, mhi, mlo, c0, c1, c2, c3, probs, tw)


@njit(cache=True, _nrt=False)
def _head_kernel_d_cache(fps, out, loads, st, sk, hc, theta, eps, warmup, refresh, mhi, mlo, c0, c1, c2, c3, probs, tw):  # pragma: no cover - compiled
    return _head_body(MODE_D, KIND_CACHE, fps, out, loads, st, sk, hc, theta, eps, warmup, refresh, mhi, mlo, c0, c1, c2, c3, probs, tw)


@njit(cache=True, _nrt=False)
def _head_kernel_d_track(fps, out, loads, st, sk, hc, theta, eps, warmup, refresh, mhi, mlo, c0, c1, c2, c3, probs, tw):  # pragma: no cover - compiled
    return _head_body(MODE_D, KIND_TRACK, fps, out, loads, st, sk, hc, theta, eps, warmup, refresh, mhi, mlo, c0, c1, c2, c3, probs, tw)


@njit(cache=True, _nrt=False)
def _head_kernel_w(fps, out, loads, st, sk, hc, theta, eps, warmup, refresh, mhi, mlo, c0, c1, c2, c3, probs, tw):  # pragma: no cover - compiled
    return _head_body(MODE_W, KIND_TRACK, fps, out, loads, st, sk, hc, theta, eps, warmup, refresh, mhi, mlo, c0, c1, c2, c3, probs, tw)


@njit(cache=True, _nrt=False)
def _head_kernel_rr(fps, out, loads, st, sk, hc, theta, eps, warmup, refresh, mhi, mlo, c0, c1, c2, c3, probs, tw):  # pragma: no cover - compiled
    return _head_body(MODE_RR, KIND_RR, fps, out, loads, st, sk, hc, theta, eps, warmup, refresh, mhi, mlo, c0, c1, c2, c3, probs, tw)


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
        self._c0 = np.zeros(_CHUNK, dtype=np.int64)
        self._c1 = np.zeros(_CHUNK, dtype=np.int64)
        self._c2 = np.zeros(_CHUNK, dtype=np.int64)  # F_2, F_3: D-Choices with d <= PRE_D
        self._c3 = np.zeros(_CHUNK, dtype=np.int64)
        self._reset_loads()

    def _reset_loads(self) -> None:
        self.loads = np.zeros((self.n_sources, self.n_workers), dtype=np.int64)
        self._mhi, self._mlo = _magic(self.n_workers)

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
            _pkg_kernel(fps, out, self.loads[s], self._mhi, self._mlo, self._c0, self._c1)
        return out


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
    "decay", "float", 1.0,
    "recency: every `epoch` tuples of a source its sketch counts (and N) are multiplied by this factor, "
    "so the head follows recent frequencies (FISH-style epoch decay); 1 = counts since the start (paper)",
    low=0.0, high=1.0, low_open=True,
)
_EPOCH = Param(
    "epoch", "int", 0,
    "recency: tuples of a source between two decays of its sketch (with decay < 1); 0 means 5·warmup "
    "= 250n with the default θ",
    low=0, high=10**12,
)
_REFRESH = Param(
    "refresh", "int", 1000,
    "d is recomputed from the source's head every this many tuples (first at the end of warmup)",
    low=1, high=10**12,
)


class _HeadRouter(_SplitKeyRouter):
    """Head/tail split with a SpaceSaving sketch per source; subclasses set ``mode``."""

    mode: ClassVar[int] = 0

    source_state_attrs: ClassVar[tuple[str, ...]] = ("loads", "state", "_hslot", "_cfp", "_cmeta", "_crow")
    #: the SpaceSaving arrays with the source on axis 0 (see engine.sketches.SpaceSaving); the hash
    #: table is derived from them and rebuilt on arrival (SpaceSaving.rebuild_table), not shipped
    _SKETCH_ARRAYS: ClassVar[tuple[str, ...]] = ("cnt", "ring", "ovf", "hot", "meta")

    def source_state(self, source: int) -> dict[str, Any]:
        """Local loads, head state, choice cache and the source's SpaceSaving sketch."""
        out = super().source_state(source)
        out["sketch"] = {a: getattr(self.sketch, a)[source].copy() for a in self._SKETCH_ARRAYS}
        return out

    def set_source_state(self, source: int, state: Mapping[str, Any]) -> None:
        state = dict(state)
        sketch = state.pop("sketch", None)
        super().set_source_state(source, state)
        if sketch:
            for a, value in sketch.items():
                if a in self._SKETCH_ARRAYS:  # (a "table" from an older sender is derived data: rebuilt)
                    getattr(self.sketch, a)[source] = value
            self.sketch.rebuild_table(source)

    def __init__(self, n_workers: int, n_sources: int = 1, seed: int = 0, params: Mapping[str, Any] | None = None):
        super().__init__(n_workers, n_sources, seed, params)
        self.sketch = SpaceSaving(self.p["capacity"], self.n_sources)
        self._probs = np.zeros(self.sketch.capacity, dtype=np.float64)
        self.state = np.zeros((self.n_sources, _NST), dtype=np.int64)
        self._reset_state()

    # ------------------------------------------------------------------ effective parameters
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
        """Effective tuples per source between two decays (``epoch`` or 5 · warmup)."""
        e = int(self.p.get("epoch", 0))
        return e if e > 0 else 5 * self.warmup

    def seen(self, source: int = 0) -> int:
        """Tuples ``source`` has routed (its sketch's N plus what decays took off N)."""
        s = self._source(source)
        return int(self.sketch.meta[s, TOTAL] + self.state[s, ST_LOST])

    def _decay(self, s: int) -> None:
        """Decay source ``s``'s sketch (:meth:`engine.sketches.SpaceSaving.decay`) and shift the
        schedules that count in its N (the next d refresh) by what N lost."""
        lost = self.sketch.decay(float(self.p["decay"]), s)
        st = self.state[s]
        st[ST_LOST] += lost
        st[ST_NEXT] -= lost
        st[ST_EPOCH] += self.epoch

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
        pos = 0
        while pos < fps.size:
            end = fps.size
            if decaying:  # the kernel stops at the next decay (a function of the tuple count only)
                if self.seen(s) == st[ST_EPOCH]:
                    self._decay(s)
                end = min(end, pos + int(st[ST_EPOCH]) - self.seen(s))
            # the warm-up counts tuples seen; the kernel compares it with the (decayed) N
            args = (
                self.loads[s], st, self.sketch.arrays(s), self._cache(s),
                self.theta, float(self.p.get("epsilon", 1e-4)), self.warmup - int(st[ST_LOST]),
                int(self.p.get("refresh", 1)), self._mhi, self._mlo, self._c0, self._c1, self._c2, self._c3,
                self._probs, self._tw,
            )
            while pos < end:  # D-Choices: the kernel stops where a refresh changes the kind of pick
                if self.mode == MODE_D:
                    kind = _d_kind(int(st[ST_D]), self.n_workers)
                else:
                    kind = KIND_TRACK if self.mode == MODE_W else KIND_RR
                pos += _HEAD_KERNELS[(self.mode, kind)](fps[pos:end], out[pos:end], *args)
        if decaying and self.seen(s) == st[ST_EPOCH]:  # (so that the batch ends after its decay)
            self._decay(s)
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
    router_class: ClassVar[type[Router]] = PKGRouter


@register
class DChoicesGrouping(StreamingPlanner):
    name: ClassVar[str] = "dchoices"
    summary: ClassVar[str] = "D-Choices: heavy hitters get d >= 2 distinct hash choices (d from Eq. 3), tail PKG"
    paper: ClassVar[str] = "nasir-icde16 Sec. III-B, IV-A, Alg. 1 (D-Choices)"
    params: ClassVar[tuple[Param, ...]] = (_THETA, _EPSILON, _CAPACITY, _WARMUP, _REFRESH, _DECAY, _EPOCH)
    single_owner: ClassVar[bool] = False
    router_class: ClassVar[type[Router]] = DChoicesRouter


@register
class WChoicesGrouping(StreamingPlanner):
    name: ClassVar[str] = "wchoices"
    summary: ClassVar[str] = "W-Choices: heavy hitters may go to any worker (least loaded), tail PKG"
    paper: ClassVar[str] = "nasir-icde16 Sec. III-B, Alg. 1 (W-Choices)"
    params: ClassVar[tuple[Param, ...]] = (_THETA, _CAPACITY, _WARMUP, _DECAY, _EPOCH)
    single_owner: ClassVar[bool] = False
    router_class: ClassVar[type[Router]] = WChoicesRouter


@register
class RoundRobinHeadGrouping(StreamingPlanner):
    name: ClassVar[str] = "rr-head"
    summary: ClassVar[str] = "Round robin for heavy hitters over all workers, tail PKG"
    paper: ClassVar[str] = "nasir-icde16 Sec. III-B (Round-Robin baseline)"
    params: ClassVar[tuple[Param, ...]] = (_THETA, _CAPACITY, _WARMUP, _DECAY, _EPOCH)
    single_owner: ClassVar[bool] = False
    router_class: ClassVar[type[Router]] = RoundRobinHeadRouter
