"""Compact key statistics for the Fang et al. rebalancers (HPDC 2017, Sec. IV, IV-A and IV-B).

Fang et al. replace the per-key statistics the controller receives (millions of keys) by a
**compact 6-dimensional representation** ``(d', d, d_h, v_c, v_S, #)`` (Sec. IV): ``d'`` the worker
a key will be assigned to next, ``d = F(k)`` its current worker, ``d_h = h(k)`` its home,
``v_c`` its (discretised) computation cost, ``v_S`` its (discretised) window state size and ``#``
the number of keys sharing the five other values.  The planner then moves *numbers of keys*
between records instead of individual keys (Sec. IV-A) and finally picks concrete keys for every
record that was split (Sec. IV-A, Phase III (i)–(iii)).

Here a :class:`CompactStats` holds the records ``(d, d_h, v_c, v_S, #)`` built from the per-key
arrays; ``d'`` is not stored in the records themselves: the planner (:mod:`skewlab.engine.algorithms.rebalancers.fang`)
keeps ``d'`` per *group* (a record, or part of one after a split), exactly the paper's rewriting of
``d'`` with merging of equal records.  :func:`expand_assignment` turns the planner's per-record
outcome back into one worker per key.

**HLHE discretisation** (Sec. IV-B, Fig. 6).  Values are normalised so that the smallest positive
value is 1 (divided by it; zeros stay 0 and are represented exactly).  With degree ``R = 2^r`` the
representative values are ``y_1 = s·R > … > y_s = R`` (linear part, ``s = ⌊max/R⌋``) and
``R/2, …, 2, 1`` (exponential part), ``m = r + s`` values.  Values are visited in non-increasing
order keeping the accumulated deviation ``δ = Σ (x_i − φ(x_i))``; a value ``x ≥ y_1`` is represented
by ``y_1``; otherwise its two candidates are ``y_{j−1} > x ≥ y_j``.

Decisions where the paper is ambiguous or silent (tested in ``tests/algorithms/test_fang.py``):

* **Which candidate.**  The paper states the principle ("the total deviation |δ| is minimized")
  and then a shortcut ("if the current accumulated deviation is positive, x_i is represented by the
  larger value").  The shortcut does not reproduce the paper's own example (c = 8, 6, 3, 2, 2, 1, 1,
  1, 1, 1 with R = 4 ends with |δ| = 1, not the stated 0).  skewlab applies the principle: take
  the candidate that makes the new accumulated deviation smallest in absolute value, the smaller
  candidate on a tie.  On the example this gives φ = 8, 4, 4, 2, 2, 2, 1, 1, 1, 1: δ = 2 after k1,
  k2, φ(k3) = 4 (δ drops by 1) and a final δ = 0, as in Fig. 6(b).  (The two rules differ when
  δ ≤ 0 and x is nearer its larger candidate: the principle then takes the larger one.)
* When ``⌊max/R⌋ = 0`` there is no linear part and ``y_1 = R/2`` (the largest exponential value).
* Ties in the visiting order (equal values) are broken by key index, so the result does not depend
  on the sort implementation.

**Record values (deviation, parameter ``compact_values``).**  The paper accounts a record's keys
at the representative values φ(c), φ(S); the per-worker load estimate is then off by the
discretisation error of the keys on that worker.  skewlab's default ``"mean"`` still groups keys by
their HLHE levels (so the records and their number are the paper's) but accounts each record at the
mean exact cost and size of its keys, which makes the estimate exact until a record is split;
``"representative"`` is the paper's accounting.  Keys of a split record (Phase III step (ii)) are
handed out so that every part's true cost matches its estimate (:func:`expand_assignment`) instead of by ψ,
which would systematically move the costliest keys of every record and bias the estimate
(measurement: docs/design-notes.md, "engine/algorithms/rebalancers/compact.py").

The **load-estimation error** (Sec. V, Fig. 11(b): "the percentage of divergence between actual
workload of a task instance and the estimated workload based on the discretised workload") is
:func:`load_error`: ``max_d |L̂(d) − L(d)| / L̄``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

__all__ = [
    "CompactStats",
    "build_compact",
    "desc_order",
    "expand_assignment",
    "hlhe_discretize",
    "hlhe_representatives",
    "load_error",
]


# ---------------------------------------------------------------------------------------------
# Deterministic descending order (ties by index)
# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _profile(values):  # pragma: no cover - compiled
    """(all finite, all integral, min, max) of a float array in one pass."""
    ok = True
    lo = np.inf
    hi = -np.inf
    for i in range(values.size):
        x = values[i]
        if not np.isfinite(x):
            return False, False, 0.0, 0.0
        if ok and x != math.floor(x):
            ok = False
        if x < lo:
            lo = x
        if x > hi:
            hi = x
    return True, ok, lo, hi


@njit(cache=True)
def _counting_desc(values, vmin, vmax):  # pragma: no cover - compiled
    """Counting sort of integral values, non-increasing, ties by index (stable)."""
    span = int(vmax - vmin) + 1
    counts = np.zeros(span + 1, dtype=np.int64)
    for i in range(values.size):
        counts[int(vmax - values[i]) + 1] += 1
    for j in range(span):
        counts[j + 1] += counts[j]
    order = np.empty(values.size, dtype=np.int64)
    for i in range(values.size):
        b = int(vmax - values[i])
        order[counts[b]] = i
        counts[b] += 1
    return order


@njit(cache=True)
def _fix_ties(order, sorted_vals):  # pragma: no cover - compiled
    """Sort the indices inside every run of equal values ascending (in place)."""
    n = order.size
    i = 0
    while i < n:
        j = i + 1
        v = sorted_vals[i]
        while j < n and sorted_vals[j] == v:
            j += 1
        if j - i > 1:
            order[i:j] = np.sort(order[i:j])
        i = j
    return order


def desc_order(values: np.ndarray) -> np.ndarray:
    """Indices sorting ``values`` in non-increasing order, ties by ascending index.

    Equal to ``np.argsort(-values, kind="stable")``, computed faster: for integral values (tuple
    counts, the usual cost and size measures) a counting sort when their range is at most a few
    times the number of values, else a plain argsort of the unique codes ``(max − v)·K + index``;
    for other finite values numpy's (unstable, SIMD) argsort followed by sorting every run of equal
    values by index.
    """
    values = np.ascontiguousarray(values, dtype=np.float64)
    K = values.size
    if K == 0:
        return np.empty(0, dtype=np.int64)
    finite, integral, lo, hi = _profile(values)
    if finite and integral:
        span = hi - lo
        if span <= 4 * K + 1024:
            return _counting_desc(values, lo, hi)
        if span * K < 2.0**62:
            code = (hi - values).astype(np.int64) * np.int64(K) + np.arange(K, dtype=np.int64)
            return np.argsort(code).astype(np.int64)
    if finite:
        # non-integral values rarely tie: fast unstable argsort, then order the (short) tie runs
        order = np.argsort(-values).astype(np.int64)
        return _fix_ties(order, values[order])
    return np.argsort(-values, kind="stable").astype(np.int64)


# ---------------------------------------------------------------------------------------------
# HLHE discretisation (Sec. IV-B)
# ---------------------------------------------------------------------------------------------
def hlhe_representatives(max_value: float, degree: int) -> np.ndarray:
    """The representative values ``y_1 > … > y_m`` for normalised values up to ``max_value``.

    For inspection and tests: the discretisation computes the candidates arithmetically, so ``m``
    may be large without ever being materialised.
    """
    R = _check_degree(degree)
    r = R.bit_length() - 1
    s = int(math.floor(max_value / R)) if max_value >= 1 else 0
    linear = [float(j * R) for j in range(s, 0, -1)]
    expo = [float(2**e) for e in range(r - 1, -1, -1)]
    return np.asarray(linear + expo, dtype=np.float64)


def _check_degree(degree: int) -> int:
    R = int(degree)
    if R < 1 or R & (R - 1):
        raise ValueError(f"HLHE degree must be a power of two, got {degree}")
    return R


@njit(cache=True)
def _hlhe_greedy(xn, order, R, r, top):  # pragma: no cover - compiled
    """Greedy choice of Sec. IV-B over normalised values ``xn`` visited in ``order``.

    Returns (φ per value, level id per value, accumulated deviation).  Level ids: 0 for 0,
    ``1 + e`` for φ = 2^e < R, ``r + j`` for φ = j·R.
    """
    n = xn.size
    phi_out = np.empty(n, dtype=np.float64)
    lid_out = np.empty(n, dtype=np.int64)
    acc = 0.0
    for i in range(n):
        k = order[i]
        x = xn[k]
        if x <= 0.0:
            phi = 0.0
            lid = 0
        elif x >= top:
            phi = top
            lid = r + int(top / R) if top >= R else r
        elif x >= R:  # linear part: candidates j·R and (j+1)·R
            j = math.floor(x / R)
            lower = j * R
            upper = lower + R
            # the candidate that keeps the accumulated deviation smallest; ties: the smaller
            if abs(acc + x - upper) < abs(acc + x - lower):
                phi = upper
                lid = r + int(j) + 1
            else:
                phi = lower
                lid = r + int(j)
        else:  # exponential part: candidates 2^e and 2^(e+1), e = ⌊log2 x⌋ (exact via frexp)
            e = math.frexp(x)[1] - 1
            lower = math.ldexp(1.0, e)
            upper = 2.0 * lower
            if abs(acc + x - upper) < abs(acc + x - lower):
                phi = upper
                lid = e + 2
            else:
                phi = lower
                lid = e + 1
        acc += x - phi
        phi_out[k] = phi
        lid_out[k] = lid
    return phi_out, lid_out, acc


def _hlhe(values: np.ndarray, degree: int) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(φ normalised, level ids, scale, deviation in original units) of ``values`` (cleaned ≥ 0)."""
    R = _check_degree(degree)
    x = np.ascontiguousarray(values, dtype=np.float64)
    if x.size == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64), 1.0, 0.0
    if not np.isfinite(x).all() or x.min() < 0:
        x = np.maximum(np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0), 0.0)
    positive_min = float(np.min(x, where=x > 0, initial=np.inf))
    if not np.isfinite(positive_min):
        return np.zeros(x.size), np.zeros(x.size, dtype=np.int64), 1.0, 0.0
    scale = positive_min
    xn = x / scale if scale != 1.0 else x
    xmax = float(xn.max())
    s = math.floor(xmax / R)
    r = R.bit_length() - 1
    top = float(s * R) if s >= 1 else float(2 ** (r - 1))
    order = desc_order(xn)
    phi, lid, acc = _hlhe_greedy(xn, order, float(R), r, top)
    return phi, lid, scale, float(acc * scale)


def hlhe_discretize(values: np.ndarray, degree: int) -> tuple[np.ndarray, float]:
    """HLHE discretisation φ of ``values`` with degree ``R = degree`` (a power of two).

    Returns ``(phi, deviation)``: ``phi`` aligned with ``values`` (original units) and the total
    deviation ``Σ (x − φ(x))`` in original units.  Negative or non-finite values count as 0.
    """
    phi, _, scale, dev = _hlhe(np.asarray(values, dtype=np.float64), degree)
    return phi * scale, dev


# ---------------------------------------------------------------------------------------------
# The compact representation (Sec. IV, IV-A)
# ---------------------------------------------------------------------------------------------
@dataclass
class CompactStats:
    """Records ``(d, d_h, v_c, v_S, #)`` of the compact representation and the key → record map.

    ``key_rec[i]`` is the record of key ``i``; ``rec_*`` are aligned per record (``rec_c``/``rec_s``
    the per-key cost and size the planner uses for the record, see ``values``).
    ``deviation_cost``/``deviation_size`` are the total HLHE deviations Σ (x − φ(x)).
    """

    key_rec: np.ndarray
    rec_cur: np.ndarray
    rec_home: np.ndarray
    rec_c: np.ndarray
    rec_s: np.ndarray
    rec_cnt: np.ndarray
    deviation_cost: float
    deviation_size: float
    degree: int
    values: str

    @property
    def n_records(self) -> int:
        return int(self.rec_cnt.size)


@njit(cache=True)
def _group_sorted(order, code):  # pragma: no cover - compiled
    """Record id per key from keys sorted by ``code``; first key index of every record."""
    n = order.size
    key_rec = np.empty(n, dtype=np.int64)
    first = np.empty(n, dtype=np.int64)
    nrec = 0
    prev = 0
    for i in range(n):
        k = order[i]
        c = code[k]
        if i == 0 or c != prev:
            first[nrec] = k
            nrec += 1
            prev = c
        key_rec[k] = nrec - 1
    return key_rec, first[:nrec]


@njit(cache=True)
def _group_dense(code, space):  # pragma: no cover - compiled
    """Record id per key for codes in ``[0, space)`` (records numbered by code); first key of each."""
    rec_of = np.full(space, -1, dtype=np.int64)
    for k in range(code.size):
        rec_of[code[k]] = 0
    nrec = 0
    for c in range(space):
        if rec_of[c] == 0:
            rec_of[c] = nrec
            nrec += 1
    key_rec = np.empty(code.size, dtype=np.int64)
    first = np.full(nrec, -1, dtype=np.int64)
    for k in range(code.size):
        r = rec_of[code[k]]
        key_rec[k] = r
        if first[r] < 0:
            first[r] = k
    return key_rec, first


def _compress(ids: np.ndarray) -> tuple[np.ndarray, int]:
    """Map ids onto ``0..u-1`` (u distinct ids, order kept); dense when the ids are small."""
    if ids.size == 0:
        return ids.astype(np.int64), 0
    top = int(ids.max())
    if top < 4 * ids.size + 1024:
        present = np.zeros(top + 1, dtype=np.int64)
        present[ids] = 1
        rank = np.cumsum(present) - 1
        return rank[ids], int(rank[-1]) + 1
    uniq, inv = np.unique(ids, return_inverse=True)
    return inv.astype(np.int64).reshape(-1), int(uniq.size)


def build_compact(
    cur: np.ndarray,
    home: np.ndarray,
    cost: np.ndarray,
    size: np.ndarray,
    n_workers: int,
    degree: int,
    values: str = "mean",
) -> CompactStats:
    """Compact representation of per-key statistics (Sec. IV) with HLHE-discretised c and S.

    ``cur`` is F(k), ``home`` is h(k), both in ``[0, n_workers)``; ``cost``/``size`` must be finite
    and ≥ 0.  Keys with equal ``(F(k), h(k), φ(c(k)), φ(S(k, w)))`` share one record.
    ``values``: ``"mean"`` (record cost/size = mean over its keys) or ``"representative"`` (φ).
    """
    cur = np.asarray(cur, dtype=np.int64)
    home = np.asarray(home, dtype=np.int64)
    cost = np.asarray(cost, dtype=np.float64)
    size = np.asarray(size, dtype=np.float64)
    K = cur.size
    n = int(n_workers)
    phic, idc, scale_c, dev_c = _hlhe(cost, degree)
    same = size is cost or np.array_equal(size, cost)
    if same:
        phis, ids, scale_s, dev_s = phic, idc, scale_c, dev_c
    else:
        phis, ids, scale_s, dev_s = _hlhe(size, degree)
    if K == 0:
        e_i = np.empty(0, dtype=np.int64)
        e_f = np.empty(0, dtype=np.float64)
        return CompactStats(e_i, e_i, e_i, e_f, e_f, e_i, 0.0, 0.0, int(degree), values)
    idc, lc = _compress(idc)
    if same:
        ids, ls = np.zeros(K, dtype=np.int64), 1
    else:
        ids, ls = _compress(ids)
    if n * n <= 4 * K + 1024:
        pair, npair = _compress(cur * n + home)
    else:  # very many workers: pairs by sorting
        pair, npair = _compress_sorted(cur * n + home)
    space = npair * lc * ls
    if space <= 8 * K + 4096:
        code = (pair * lc + idc) * ls + ids
        key_rec, first = _group_dense(code, int(space))
    elif space < 2**62:
        code = (pair * lc + idc) * ls + ids
        key_rec, first = _group_sorted(np.argsort(code).astype(np.int64), code)
    else:  # pragma: no cover - only for absurd sizes
        order = np.lexsort((ids, idc, pair)).astype(np.int64)
        cols = np.stack([pair[order], idc[order], ids[order]])
        change = np.concatenate([[True], np.any(cols[:, 1:] != cols[:, :-1], axis=0)])
        code = np.empty(K, dtype=np.int64)
        code[order] = np.cumsum(change) - 1
        key_rec, first = _group_sorted(order, code)
    rec_cnt = np.bincount(key_rec, minlength=first.size).astype(np.int64)
    if values == "representative":
        rec_c = phic[first] * scale_c
        rec_s = phis[first] * scale_s
    else:
        rec_c = np.bincount(key_rec, weights=cost, minlength=first.size) / rec_cnt
        rec_s = rec_c if same else np.bincount(key_rec, weights=size, minlength=first.size) / rec_cnt
    return CompactStats(
        key_rec=key_rec,
        rec_cur=cur[first],
        rec_home=home[first],
        rec_c=rec_c,
        rec_s=rec_s,
        rec_cnt=rec_cnt,
        deviation_cost=dev_c,
        deviation_size=dev_s,
        degree=int(degree),
        values=values,
    )


def _compress_sorted(ids: np.ndarray) -> tuple[np.ndarray, int]:
    uniq, inv = np.unique(ids, return_inverse=True)
    return inv.astype(np.int64).reshape(-1), int(uniq.size)


# ---------------------------------------------------------------------------------------------
# Back from records to keys (Sec. IV-A, Phase III (i)-(iii))
# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _closest_desc(costs, target):  # pragma: no cover - compiled
    """Index of the value closest to ``target`` in a non-increasing array (first on ties)."""
    lo = 0
    hi = costs.size
    while lo < hi:  # first index with costs[i] <= target
        mid = (lo + hi) // 2
        if costs[mid] > target:
            lo = mid + 1
        else:
            hi = mid
    if lo == costs.size:
        return costs.size - 1
    if lo > 0 and abs(costs[lo - 1] - target) <= abs(costs[lo] - target):
        return lo - 1
    return lo


@njit(cache=True)
def _assign_split(  # pragma: no cover - compiled
    members, member_rec, member_cost, rec_ptr, dest_w, dest_cnt, rec_c, rec_cur, n_workers, out
):
    """Hand the members of every split record to its destinations, matching estimated loads.

    ``members`` are grouped by record and sorted by decreasing true cost.  Per record, the
    destinations are served from the fewest keys to the most; the one with the most keys (the
    current worker on a tie) takes the rest.  A destination receiving one key gets the key whose
    cost is closest to its target; one receiving several gets evenly spaced keys of the sorted
    remainder (a stratified sample, whose sum is close to its share).  The target of worker w is its
    estimated share plus the surplus ``carry[w]`` (estimate − truth) left by records handled before,
    so errors do not accumulate on a worker across records.
    """
    m = members.size
    carry = np.zeros(n_workers, dtype=np.float64)
    i = 0
    while i < m:
        r = member_rec[i]
        j = i
        while j < m and member_rec[j] == r:
            j += 1
        a = rec_ptr[r]
        b = rec_ptr[r + 1]
        nd = b - a
        # serving order: fewest keys first; the destination with most keys (current on ties) last
        last = a
        for t in range(a, b):
            if dest_cnt[t] > dest_cnt[last] or (dest_cnt[t] == dest_cnt[last] and dest_w[t] == rec_cur[r]):
                last = t
        serve = np.empty(nd - 1, dtype=np.int64)
        q = 0
        for t in range(a, b):
            if t != last:
                serve[q] = t
                q += 1
        keys = np.arange(nd - 1)  # stable insertion sort of the served destinations by count
        for u in range(1, nd - 1):
            x = keys[u]
            v = u - 1
            while v >= 0 and dest_cnt[serve[keys[v]]] > dest_cnt[serve[x]]:
                keys[v + 1] = keys[v]
                v -= 1
            keys[v + 1] = x
        pool = members[i:j].copy()
        pcost = member_cost[i:j].copy()
        size = j - i
        for qi in range(nd - 1):
            t = serve[keys[qi]]
            w = dest_w[t]
            need = dest_cnt[t]
            if need <= 0 or size == 0:
                continue
            if need > size:
                need = size
            target = need * rec_c[r] + carry[w]
            taken = np.zeros(size, dtype=np.bool_)
            got = 0.0
            if need == 1:
                p = _closest_desc(pcost[:size], target)
                taken[p] = True
                got = pcost[p]
            else:
                for u in range(need):
                    p = int((u + 0.5) * size / need)
                    if p >= size:
                        p = size - 1
                    while taken[p]:  # cannot collide when need <= size; be safe
                        p = (p + 1) % size
                    taken[p] = True
                    got += pcost[p]
            carry[w] = target - got
            z = 0
            for p in range(size):
                if taken[p]:
                    out[pool[p]] = w
                else:
                    pool[z] = pool[p]
                    pcost[z] = pcost[p]
                    z += 1
            size = z
        w = dest_w[last]
        got = 0.0
        for p in range(size):
            out[pool[p]] = w
            got += pcost[p]
        carry[w] += dest_cnt[last] * rec_c[r] - got
        i = j
    return out


def expand_assignment(
    comp: CompactStats,
    out_rec: np.ndarray,
    out_w: np.ndarray,
    out_cnt: np.ndarray,
    key_cost: np.ndarray,
) -> np.ndarray:
    """One worker per key from the planner's per-record outcome rows ``(record, worker, count)``.

    Records whose keys all end on one worker map directly; the keys of a split record are handed
    out so that every destination's true load matches the planner's estimate (see the module
    docstring).  ``key_cost`` are the exact per-key costs.
    """
    K = comp.key_rec.size
    R = comp.n_records
    out = np.empty(K, dtype=np.int64)
    if K == 0:
        return out
    out_rec = np.asarray(out_rec, dtype=np.int64)
    out_w = np.asarray(out_w, dtype=np.int64)
    out_cnt = np.asarray(out_cnt, dtype=np.int64)
    keep = out_cnt > 0
    out_rec, out_w, out_cnt = out_rec[keep], out_w[keep], out_cnt[keep]
    order = np.lexsort((out_w, out_rec))
    rr, ww, cc = out_rec[order], out_w[order], out_cnt[order]
    new = np.ones(rr.size, dtype=bool)
    new[1:] = (rr[1:] != rr[:-1]) | (ww[1:] != ww[:-1])
    grp = np.cumsum(new) - 1
    dest_rec = rr[new]
    dest_w = ww[new]
    dest_cnt = np.bincount(grp, weights=cc).astype(np.int64)
    n_dest = np.bincount(dest_rec, minlength=R)
    rec_ptr = np.zeros(R + 1, dtype=np.int64)
    np.cumsum(n_dest, out=rec_ptr[1:])
    single = comp.rec_cur.copy()  # records absent from the outcome (cannot happen) stay put
    one = n_dest[dest_rec] == 1
    single[dest_rec[one]] = dest_w[one]
    out[:] = single[comp.key_rec]
    split = n_dest > 1
    if split.any():
        members = np.flatnonzero(split[comp.key_rec])
        mrec = comp.key_rec[members]
        mcost = np.asarray(key_cost, dtype=np.float64)[members]
        o = np.lexsort((members, -mcost, mrec))
        _assign_split(
            members[o].astype(np.int64), mrec[o].astype(np.int64), mcost[o], rec_ptr, dest_w, dest_cnt,
            np.asarray(comp.rec_c, dtype=np.float64), comp.rec_cur, int(max(dest_w.max(), comp.rec_cur.max())) + 1, out,
        )
    return out


def load_error(estimated: np.ndarray, actual: np.ndarray) -> float:
    """``max_d |L̂(d) − L(d)| / L̄`` (L̄ the mean actual load); 0 for an empty/zero-load interval."""
    actual = np.asarray(actual, dtype=np.float64)
    estimated = np.asarray(estimated, dtype=np.float64)
    mean = float(actual.mean()) if actual.size else 0.0
    if mean <= 0:
        return 0.0
    return float(np.max(np.abs(estimated - actual)) / mean)
