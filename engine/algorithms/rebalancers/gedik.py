"""Gedik's partitioning functions: ``scan``, ``redist``, ``readj`` (VLDB J. 2014).

B. Gedik, "Partitioning functions for stateful data parallelism in stream processing",
VLDB Journal 23(4), 2014.

* Partitioning function (Sec. 4.1, Alg. 1): ``p = <H_p, H_c>``; ``H_p`` is the
  :class:`~skewlab.engine.algorithms.grouping.RoutingTable`, ``H_c`` the ``base`` parameter
  (:mod:`skewlab.engine.algorithms.base_hash`, rebuilt on :meth:`resize`): the paper's ring
  (``base=consistent``, :class:`skewlab.engine.algorithms.groupings.basic.ConsistentHashRing`, ``replicas`` points
  per channel) or, by default (deviation, issue 39), ``base=slots``, as consistent and as even as fp mod n.
  Keys of ``H_p`` that map to their H_c home are not stored (same routing).
* Frequencies (Sec. 4.1.2): :class:`~skewlab.engine.algorithms.rebalancers.lossy_counting.SlidingLossyCounter` fed by
  :meth:`observe`; ``D_p^(t+1) = {d : c_a(d) >= (δ − ε)·M}`` are the candidates of ``H_p``;
  ε = ``epsilon_ratio``·δ.
* Resource functions (Sec. 3.1, 4.4, Table 1): ``resources = XYZ`` from ``{C,L,Q}{C,L,Q}L``
  (default LCL); ρ is the geometric mean over the non-constant resources (Eq. 20 with 1/K).
* δ (Sec. 4.1.3): θ_k of Eq. 15, δ_k of Eq. 17, δ = min_k δ_k, with the quadratic post-step of
  Eq. 16.
* Construction (Sec. 4.2, Alg. 2–4): scan, redist and readj; readj applies at most ``max_moves``
  moves per item (the paper's c).
* Reported in ``plan.extra``: ``b`` (Eq. 11) with ``b_s``, ``b_c``, ``b_n``; ``m`` (Eq. 12) and
  ``m_state`` (Eq. 12 with measured sizes); δ, ε, θ, ``explicit`` = |H_p|, ρ, γ, readj's steps.
* Trigger: ``theta_max`` (default 0.2, near the paper's θ_k of Eq. 15 for α = 1.2, N = 10).

Decisions and deviations (the reasoning, with the paper's quotes: docs/design-notes.md,
"engine/algorithms/rebalancers/gedik.py"): the per-key load of resource k is ``β_k(f(d))`` (Eq. 1, 5, 16, 17),
not Eq. 3's ``f(d)·β_c(f(d))``; the quadratic post-step divides by N (only then does I = ∅ give
back Eq. 17); |D| is the number of distinct keys known; the initial migration sums over
``D_p^(t) \\ D_p^(t+1)`` and the ideal migration over ``D_p^(t) ∪ D_p^(t+1)`` (Eq. 18, the prose);
readj starts from the utility of the current explicit hash, reads "break" as *continue*, applies the
best gain even if negative unless ``readj_stop=utility``; ties follow scan order within a relative
1e-9.  Known property of Eq. 19 + Alg. 4: readj can stall when several channels tie for the
extreme load (docs/results/gedik.md, Gedik section, Fig. 7a).  Degenerate input never raises (the plan is
``feasible=False`` with a note); more than ``max_tracked`` candidates keeps the most frequent.
"""

from __future__ import annotations

import itertools
import math
import time
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np
from numba import njit

from skewlab.engine.algorithms.grouping import IntervalStats, Plan, RebalancingPlanner, make_plan
from skewlab.engine.algorithms.base_hash import SlotTable, base_param, make_base
from skewlab.engine.algorithms.groupings.basic import ConsistentHashRing
from skewlab.engine.config.params import Param
from skewlab.engine.algorithms.registry import register
from skewlab.engine.algorithms.rebalancers.lossy_counting import LossyCounter, SlidingLossyCounter
from skewlab.engine.algorithms.sorted_lookup import find_sorted

__all__ = [
    "GedikGrouping",
    "ReadjGrouping",
    "RedistGrouping",
    "ScanGrouping",
    "UTILITIES",
    "RESOURCE_CHOICES",
    "beta",
    "delta_thresholds",
    "quadratic_post_delta",
    "relative_imbalance",
    "relative_migration",
    "theta_k",
    "utility",
]

UTILITIES: tuple[str, ...] = ("A", "APM", "APLM", "ATM", "ATLM")
RESOURCE_CHOICES: tuple[str, ...] = tuple(f"{s}{c}L" for s, c in itertools.product("CLQ", repeat=2))
_RESOURCE_NAMES = ("s", "c", "n")


# ---------------------------------------------------------------------------------------------
# Formulas (pure, vectorised)
# ---------------------------------------------------------------------------------------------
def beta(kind: str, f: np.ndarray | float) -> np.ndarray:
    """Resource function β (Sec. 3.1): ``C`` → 1, ``L`` → x, ``Q`` → x²."""
    x = np.asarray(f, dtype=np.float64)
    if kind == "C":
        return np.ones_like(x)
    if kind == "L":
        return x.copy()
    if kind == "Q":
        return x * x
    raise ValueError(f"unknown resource function {kind!r}")


def theta_k(alpha: float, n: int) -> float:
    """Eq. 15: θ_k = (α − 1)·(1 + α/(N − 1))⁻¹; 0 for N = 1 (the N → 1 limit)."""
    if n <= 1:
        return 0.0
    return (float(alpha) - 1.0) / (1.0 + float(alpha) / (n - 1.0))


def delta_thresholds(resources: str, alpha: float, sigma: float, n: int, domain: int) -> dict[str, float]:
    """Eq. 17 per resource (before the quadratic post-step): ``{"s": δ_s, "c": δ_c, "n": δ_n}``."""
    th = theta_k(alpha, n)
    out = {}
    for name, kind in zip(_RESOURCE_NAMES, resources):
        if kind == "C":
            out[name] = 1.0
        elif kind == "L":
            out[name] = sigma * th / n
        else:
            out[name] = math.sqrt(sigma * th / (max(int(domain), 1) * n))
    return out


def quadratic_post_delta(f_tracked: np.ndarray, domain: int, alpha: float, sigma: float, n: int) -> float:
    """Sec. 4.1.3 post-step for β = x²: δ' = sqrt(σθ·L̄) with L̄ predicted from the tracked items I.

    ``L̄ = [Σ_I f² + (|D| − |I|)·((1 − Σ_I f)/(|D| − |I|))²] / N`` (see the module docstring for /N).
    """
    f = np.asarray(f_tracked, dtype=np.float64)
    size = f.size
    rest_keys = max(int(domain) - size, 0)
    rest_mass = max(1.0 - float(f.sum()), 0.0)
    total = float(np.sum(f * f))
    if rest_keys > 0:
        total += rest_keys * (rest_mass / rest_keys) ** 2
    return math.sqrt(sigma * theta_k(alpha, n) * total / n)


def utility(name: str, rho: float, gamma: float) -> float:
    """U^A, U^APM, U^APLM, U^ATM, U^ATLM (Sec. 4.3); lower is better."""
    return float(_utility(UTILITIES.index(name), float(rho), float(gamma)))


def relative_imbalance(
    assignment: np.ndarray, freq: np.ndarray, n: int, resources: str, alpha: float
) -> tuple[float, dict[str, float]]:
    """Eq. 11: b = (Π_k b_k)^(1/3), b_k = r_k/α_k, r_k = max_i L_k(i)/min_i L_k(i) (Eq. 2/4/6).

    L_k(i) = Σ_{p(d)=i} β_k(f(d)) over the given keys.  r_k = 1 when no channel has load of
    resource k, ``inf`` when some (but not all) channels have none.
    """
    assignment = np.asarray(assignment, dtype=np.int64)
    bk: dict[str, float] = {}
    for name, kind in zip(_RESOURCE_NAMES, resources):
        loads = np.bincount(assignment, weights=beta(kind, freq), minlength=n)[:n]
        hi, lo = float(loads.max()), float(loads.min())
        if hi <= 0:
            r = 1.0
        elif lo <= 0:
            r = math.inf
        else:
            r = hi / lo
        bk[name] = r / float(alpha)
    vals = list(bk.values())
    if any(math.isinf(v) for v in vals):
        return math.inf, bk
    return float(np.prod(vals) ** (1.0 / len(vals))), bk


def relative_migration(moved: np.ndarray, weight: np.ndarray, n: int) -> float:
    """Eq. 12: m = M / L̄_s with M = Σ_moved w and L̄_s = Σ w / N (Eq. 10)."""
    weight = np.asarray(weight, dtype=np.float64)
    total = float(weight.sum())
    if total <= 0:
        return 0.0
    return float(weight[np.asarray(moved, dtype=bool)].sum()) / (total / n)


# ---------------------------------------------------------------------------------------------
# Compiled kernels (module level, operate on numpy arrays).  Arguments carry the paper's symbols
# (Sec. 4.2): ``w[k, i]`` load β_k(f) of tracked item i for resource k; ``f`` item frequencies;
# ``L[k, c]`` load of channel c; ``theta[k]`` θ_k (Eq. 15); ``ms[i]`` migration cost β_s(f) of item i
# (0 without an owner); ``h[i]`` the item's current channel p^(t)(d); ``m0`` initial migration m and
# ``mbar`` ideal migration m̄ (Eq. 18); ``n`` channels N; ``utility_code`` index into UTILITIES.
# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _utility(code, rho, gamma):  # pragma: no cover - compiled
    if code == 0:
        return rho
    if code == 1:
        return rho + gamma
    if code == 2:
        return rho + np.log1p(gamma)
    if code == 3:
        return rho * (1.0 + gamma)
    return rho * (1.0 + np.log1p(gamma))


_TIE = 1e-9  # relative margin: candidates within it of the best count as ties (first one wins)


@njit(cache=True)
def _better_low(x, best):  # pragma: no cover - compiled
    """``x`` beats ``best`` (lower is better) by more than the relative tie margin."""
    if best == np.inf:
        return x < best
    return x < best - _TIE * (abs(best) if abs(best) > 1.0 else 1.0)


@njit(cache=True)
def _better_high(x, best):  # pragma: no cover - compiled
    """``x`` beats ``best`` (higher is better) by more than the relative tie margin."""
    if best == -np.inf:
        return x > best
    return x > best + _TIE * (abs(best) if abs(best) > 1.0 else 1.0)


@njit(cache=True)
def _rho_full(L, tot, theta, n):  # pragma: no cover - compiled
    """ρ (Eq. 19–20) of the loads ``L[k, i]`` with totals ``tot[k]``."""
    K = L.shape[0]
    r = 1.0
    for k in range(K):
        if tot[k] <= 0.0:
            return 0.0
        hi = L[k, 0]
        lo = L[k, 0]
        for i in range(1, n):
            v = L[k, i]
            if v > hi:
                hi = v
            if v < lo:
                lo = v
        r *= (hi - lo) / (theta[k] * tot[k] / n)
    if r <= 0.0:
        return 0.0
    return r ** (1.0 / K)


@njit(cache=True)
def _top2(L, max1, max1_channel, max2, min1, min1_channel, min2):  # pragma: no cover - compiled
    """Per resource: largest, its channel, second largest; smallest, its channel, second smallest."""
    K, n = L.shape
    for k in range(K):
        a1 = -np.inf
        a1i = -1
        a2 = -np.inf
        b1 = np.inf
        b1i = -1
        b2 = np.inf
        for i in range(n):
            v = L[k, i]
            if v > a1:
                a2 = a1
                a1 = v
                a1i = i
            elif v > a2:
                a2 = v
            if v < b1:
                b2 = b1
                b1 = v
                b1i = i
            elif v < b2:
                b2 = v
        max1[k] = a1
        max1_channel[k] = a1i
        max2[k] = a2
        min1[k] = b1
        min1_channel[k] = b1i
        min2[k] = b2


@njit(cache=True)
def _rho_add(L, tot, theta, n, w, d, l, max1, max1_channel, max2, min1, min1_channel, min2):  # pragma: no cover
    """ρ(H_p ∪ {d ⇒ l}) in O(K) from the top-2 / bottom-2 summaries of ``L``."""
    K = L.shape[0]
    r = 1.0
    for k in range(K):
        x = w[k, d]
        t = tot[k] + x
        if t <= 0.0:
            return 0.0
        nv = L[k, l] + x
        other_hi = max2[k] if l == max1_channel[k] else max1[k]
        other_lo = min2[k] if l == min1_channel[k] else min1[k]
        hi = nv if nv > other_hi else other_hi
        lo = nv if nv < other_lo else other_lo
        r *= (hi - lo) / (theta[k] * t / n)
    if r <= 0.0:
        return 0.0
    return r ** (1.0 / K)


@njit(cache=True)
def _scan_kernel(w, theta, ms, h, m0, mbar, n, utility_code):  # pragma: no cover - compiled
    """Alg. 2 (SCAN) over items already sorted by decreasing frequency; returns the placements."""
    K, R = w.shape
    L = np.zeros((K, n))
    tot = np.zeros(K)
    max1 = np.empty(K)
    max2 = np.empty(K)
    min1 = np.empty(K)
    min2 = np.empty(K)
    max1_channel = np.empty(K, dtype=np.int64)
    min1_channel = np.empty(K, dtype=np.int64)
    out = np.empty(R, dtype=np.int64)
    m = m0
    for d in range(R):
        _top2(L, max1, max1_channel, max2, min1, min1_channel, min2)
        j = -1
        u = np.inf
        hd = h[d]
        for l in range(n):
            a = _rho_add(L, tot, theta, n, w, d, l, max1, max1_channel, max2, min1, min1_channel, min2)
            mig = m + (ms[d] if l != hd else 0.0)
            g = mig / mbar if mbar > 0.0 else 0.0
            uu = _utility(utility_code, a, g)
            if _better_low(uu, u):
                j = l
                u = uu
        if j < 0:  # only with NaN utilities; keep the old channel or 0
            j = hd if 0 <= hd < n else 0
        if j != hd:
            m += ms[d]
        out[d] = j
        for k in range(K):
            L[k, j] += w[k, d]
            tot[k] += w[k, d]
    return out


@njit(cache=True)
def _redist_kernel(w, f, theta, ms, h, m0, mbar, n, utility_code):  # pragma: no cover - compiled
    """Alg. 3 (REDIST); returns the placements and the order in which items were placed."""
    K, R = w.shape
    L = np.zeros((K, n))
    tot = np.zeros(K)
    max1 = np.empty(K)
    max2 = np.empty(K)
    min1 = np.empty(K)
    min2 = np.empty(K)
    max1_channel = np.empty(K, dtype=np.int64)
    min1_channel = np.empty(K, dtype=np.int64)
    out = np.full(R, -1, dtype=np.int64)
    placed_order = np.empty(R, dtype=np.int64)
    todo = np.ones(R, dtype=np.bool_)
    m = m0
    for step in range(R):
        _top2(L, max1, max1_channel, max2, min1, min1_channel, min2)
        j = -1
        best_d = -1
        u = np.inf
        for c in range(R):
            if not todo[c]:
                continue
            hc = h[c]
            fc = f[c] if f[c] > 0.0 else 1e-300
            for l in range(n):
                a = _rho_add(L, tot, theta, n, w, c, l, max1, max1_channel, max2, min1, min1_channel, min2)
                mig = m + (ms[c] if l != hc else 0.0)
                g = mig / mbar if mbar > 0.0 else 0.0
                uu = _utility(utility_code, a, g) / fc
                if _better_low(uu, u):
                    j = l
                    best_d = c
                    u = uu
        if best_d < 0:  # only with NaN utilities: place the first unplaced item where it is
            for c in range(R):
                if todo[c]:
                    best_d = c
                    break
            j = h[best_d] if 0 <= h[best_d] < n else 0
        if j != h[best_d]:
            m += ms[best_d]
        out[best_d] = j
        todo[best_d] = False
        placed_order[step] = best_d
        for k in range(K):
            L[k, j] += w[k, best_d]
            tot[k] += w[k, best_d]
    return out, placed_order


@njit(cache=True)
def _top3(L, hi_v, hi_i, lo_v, lo_i):  # pragma: no cover - compiled
    """Per resource: the 3 largest and 3 smallest loads with their channels (−1 when N < 3)."""
    K, n = L.shape
    for k in range(K):
        for s in range(3):
            hi_v[k, s] = -np.inf
            hi_i[k, s] = -1
            lo_v[k, s] = np.inf
            lo_i[k, s] = -1
        for i in range(n):
            v = L[k, i]
            if v > hi_v[k, 2]:
                if v > hi_v[k, 1]:
                    hi_v[k, 2] = hi_v[k, 1]
                    hi_i[k, 2] = hi_i[k, 1]
                    if v > hi_v[k, 0]:
                        hi_v[k, 1] = hi_v[k, 0]
                        hi_i[k, 1] = hi_i[k, 0]
                        hi_v[k, 0] = v
                        hi_i[k, 0] = i
                    else:
                        hi_v[k, 1] = v
                        hi_i[k, 1] = i
                else:
                    hi_v[k, 2] = v
                    hi_i[k, 2] = i
            if v < lo_v[k, 2]:
                if v < lo_v[k, 1]:
                    lo_v[k, 2] = lo_v[k, 1]
                    lo_i[k, 2] = lo_i[k, 1]
                    if v < lo_v[k, 0]:
                        lo_v[k, 1] = lo_v[k, 0]
                        lo_i[k, 1] = lo_i[k, 0]
                        lo_v[k, 0] = v
                        lo_i[k, 0] = i
                    else:
                        lo_v[k, 1] = v
                        lo_i[k, 1] = i
                else:
                    lo_v[k, 2] = v
                    lo_i[k, 2] = i


@njit(cache=True)
def _rho_pair(tot, theta, n, i, li, j, lj, hi_v, hi_i, lo_v, lo_i):  # pragma: no cover
    """ρ after channels ``i`` and ``j`` take the loads ``li[k]``, ``lj[k]`` (others unchanged)."""
    K = tot.shape[0]
    r = 1.0
    for k in range(K):
        if tot[k] <= 0.0:
            return 0.0
        hi = li[k] if li[k] > lj[k] else lj[k]
        lo = li[k] if li[k] < lj[k] else lj[k]
        for s in range(3):
            c = hi_i[k, s]
            if c >= 0 and c != i and c != j:
                if hi_v[k, s] > hi:
                    hi = hi_v[k, s]
                break
        for s in range(3):
            c = lo_i[k, s]
            if c >= 0 and c != i and c != j:
                if lo_v[k, s] < lo:
                    lo = lo_v[k, s]
                break
        r *= (hi - lo) / (theta[k] * tot[k] / n)
    if r <= 0.0:
        return 0.0
    return r ** (1.0 / K)


@njit(cache=True)
def _readj_kernel(w, f, theta, ms, h, init, m0, mbar, n, utility_code, max_moves, stop_on_utility):  # pragma: no cover
    """Alg. 4 (READJ): moves and swaps that lower ρ, best gain (u − u')/|f(d1) − f(d2)| first.

    Returns (placements, steps, moves applied, swaps applied).
    """
    K, R = w.shape
    assign = init.copy()
    moved = np.zeros(R, dtype=np.int64)
    L = np.zeros((K, n))
    tot = np.zeros(K)
    for d in range(R):
        for k in range(K):
            L[k, assign[d]] += w[k, d]
            tot[k] += w[k, d]
    hi_v = np.empty((K, 3))
    lo_v = np.empty((K, 3))
    hi_i = np.empty((K, 3), dtype=np.int64)
    lo_i = np.empty((K, 3), dtype=np.int64)
    li = np.empty(K)
    lj = np.empty(K)
    m = m0
    rho_cur = _rho_full(L, tot, theta, n)
    u_cur = _utility(utility_code, rho_cur, m / mbar if mbar > 0.0 else 0.0)
    steps = 0
    n_moves = 0
    n_swaps = 0
    tol = 1e-12
    ext = np.zeros(n, dtype=np.bool_)
    while True:
        _top3(L, hi_v, hi_i, lo_v, lo_i)
        limit = rho_cur - tol * (1.0 if rho_cur < 1.0 else rho_cur)
        # Exact pruning: a readjustment that touches no channel holding a max or min load (of any
        # resource) leaves every max and min unchanged or widens them, so it cannot lower ρ.
        for c in range(n):
            e = False
            for k in range(K):
                if L[k, c] >= hi_v[k, 0] or L[k, c] <= lo_v[k, 0]:
                    e = True
                    break
            ext[c] = e
        best_g = 0.0 if stop_on_utility else -np.inf
        b1 = -1
        b2 = -1
        bj = -1
        b_rho = 0.0
        b_u = 0.0
        b_dm = 0.0
        # moves <i, d1, j, ∅>
        for d1 in range(R):
            if moved[d1] >= max_moves or f[d1] <= 0.0:
                continue
            i = assign[d1]
            for j in range(n):
                if j == i or not (ext[i] or ext[j]):
                    continue
                for k in range(K):
                    li[k] = L[k, i] - w[k, d1]
                    lj[k] = L[k, j] + w[k, d1]
                a = _rho_pair(tot, theta, n, i, li, j, lj, hi_v, hi_i, lo_v, lo_i)
                if a >= limit:
                    continue
                dm = 0.0
                if h[d1] == i:
                    dm += ms[d1]
                if h[d1] == j:
                    dm -= ms[d1]
                uu = _utility(utility_code, a, (m + dm) / mbar if mbar > 0.0 else 0.0)
                g = (u_cur - uu) / f[d1]
                if _better_high(g, best_g):
                    best_g = g
                    b1 = d1
                    b2 = -1
                    bj = j
                    b_rho = a
                    b_u = uu
                    b_dm = dm
        # swaps <i, d1, j, d2> (each unordered pair once; <j, d2, i, d1> is the same readjustment)
        for d1 in range(R):
            if moved[d1] >= max_moves:
                continue
            i = assign[d1]
            for d2 in range(d1 + 1, R):
                j = assign[d2]
                if j == i or moved[d2] >= max_moves or not (ext[i] or ext[j]):
                    continue
                df = abs(f[d1] - f[d2])
                if df <= 0.0:
                    continue
                for k in range(K):
                    li[k] = L[k, i] - w[k, d1] + w[k, d2]
                    lj[k] = L[k, j] - w[k, d2] + w[k, d1]
                a = _rho_pair(tot, theta, n, i, li, j, lj, hi_v, hi_i, lo_v, lo_i)
                if a >= limit:
                    continue
                dm = 0.0
                if h[d1] == i:
                    dm += ms[d1]
                if h[d1] == j:
                    dm -= ms[d1]
                if h[d2] == j:
                    dm += ms[d2]
                if h[d2] == i:
                    dm -= ms[d2]
                uu = _utility(utility_code, a, (m + dm) / mbar if mbar > 0.0 else 0.0)
                g = (u_cur - uu) / df
                if _better_high(g, best_g):
                    best_g = g
                    b1 = d1
                    b2 = d2
                    bj = j
                    b_rho = a
                    b_u = uu
                    b_dm = dm
        if b1 < 0:
            break
        i = assign[b1]
        for k in range(K):
            L[k, i] -= w[k, b1]
            L[k, bj] += w[k, b1]
        assign[b1] = bj
        moved[b1] += 1
        if b2 >= 0:
            for k in range(K):
                L[k, bj] -= w[k, b2]
                L[k, i] += w[k, b2]
            assign[b2] = i
            moved[b2] += 1
            n_swaps += 1
        else:
            n_moves += 1
        m += b_dm
        rho_cur = b_rho
        u_cur = b_u
        steps += 1
    return assign, steps, n_moves, n_swaps


# ---------------------------------------------------------------------------------------------
# The groupings
# ---------------------------------------------------------------------------------------------
_COMMON_PARAMS: tuple[Param, ...] = (
    Param("alpha", "float", 1.2,
          "imbalance tolerance α_k = max/min channel load tolerated (Eq. 2/4/6; same for s, c, n)",
          low=1.0, high=4.0, low_open=True),
    Param("sigma", "float", 0.1,
          "frequency threshold scaler σ: untracked keys may cause σ·θ_k·L̄_k imbalance (Eq. 16)",
          low=0.0, high=1.0, low_open=True),
    Param("resources", "choice", "LCL",
          "resource functions β_s β_c β_n: C constant, L linear, Q quadratic (β_n linear)",
          choices=RESOURCE_CHOICES),
    Param("utility", "choice", "APM",
          "utility U(ρ, γ): A=ρ, APM=ρ+γ, APLM=ρ+log(1+γ), ATM=ρ(1+γ), ATLM=ρ(1+log(1+γ))",
          choices=UTILITIES),
    Param("theta_max", "float", 0.2,
          "trigger: ask for a plan when max_d |L(d)−L̄|/L̄ of the measured loads exceeds it",
          low=0.0, high=100.0),
    base_param(),
    Param("replicas", "int", 1000, "consistent-hash ring points per channel with base=consistent (paper Sec. 5.5: 1000)",
          low=1, high=4096),
    Param("lc_step", "int", 1,
          "tumbling step of the 3 lossy counters, in intervals (sliding window W = 2·step)",
          low=1, high=10_000),
    Param("epsilon_ratio", "float", 0.1, "lossy-counting error ε as a fraction of the frequency threshold δ",
          low=0.0, high=1.0, low_open=True, high_open=True),
    Param("max_tracked", "int", 1000, "at most this many tracked keys (most frequent) enter the explicit hash",
          low=1, high=100_000),
)


class GedikGrouping(RebalancingPlanner):
    """``p = <explicit hash, consistent hash>`` with a sliding lossy counter; subclasses build H_p."""

    paper: ClassVar[str] = "gedik-vldbj14 (VLDB J. 2014) Sec. 4"
    params: ClassVar[tuple[Param, ...]] = _COMMON_PARAMS
    #: With the migration gate on (a skewlab extension, engine/control/gate.py), a skipped construction
    #: still drops the explicit-hash entries it would place differently: they go back to H_c.  In the
    #: paper every construction (Alg. 2–4) replaces the partitioning function (Sec. 4.1), so no entry
    #: outlives the construction that disagrees with it; the gate keeps the old function in force, and
    #: on the drifting stream its entries for an older hot set did worse than H_c (docs/results/gate.md,
    #: "Recency and the migration gate").  Deviation: only the disagreeing entries are dropped, the
    #: others stay, and the new construction's placements are not applied.
    drops_stale_entries: ClassVar[bool] = True
    #: the gate may also pass a plan on the record of the tables (``gate_record``, engine/control/gate.py):
    #: on the drifting stream this family's plans pay as a sequence, not one by one
    gate_trusts_record: ClassVar[bool] = True

    def reset_planning(self) -> None:
        """Planner state (never shipped to executors): the lossy counters, D_p of the applied plan."""
        self.counter = SlidingLossyCounter(step=self.p["lc_step"], counters=3)
        self.tracked = np.empty(0, dtype=np.uint64)  # D_p^(t): explicit-hash keys of the applied plan
        self._pending: tuple[int, np.ndarray] | None = None
        self._serial = 0

    # -------------------------------------------------------------- the consistent hash H_c
    def make_ring(self, n_workers: int) -> SlotTable | ConsistentHashRing | None:
        """H_c by the ``base`` parameter (:func:`skewlab.engine.algorithms.base_hash.make_base`): the slot
        table (default, a deviation: issue 39), the paper's ring or fp mod n."""
        return make_base(self.p, n_workers, self.seed, self.base_workers)

    # -------------------------------------------------------------- frequencies
    def _delta(self, n: int, domain: int) -> float:
        d = delta_thresholds(self.p["resources"], self.p["alpha"], self.p["sigma"], n, domain)
        return min(d.values())

    def observe(self, stats: IntervalStats) -> None:
        """Feed the interval's per-key tuple counts to the 3 lossy counters (one tumbling step)."""
        eps = self.p["epsilon_ratio"] * self._delta(max(self.n_workers, 2), max(int(stats.keys.size), 1))
        self.counter.observe(stats.keys, stats.count, eps)

    def _frequency_source(self, stats: IntervalStats, n: int) -> tuple[LossyCounter | None, str]:
        current = self.counter.current()
        if current is not None and current.n > 0:
            return current, "sliding lossy counter"
        # No observed history (e.g. a snapshot planned directly): count this interval alone.
        weights, what = stats.count.astype(np.float64), "interval counts"
        if weights.sum() <= 0:
            weights, what = stats.cost, "interval costs (no tuple counts)"
        if weights.sum() <= 0:
            return None, "no tuples"
        eps = self.p["epsilon_ratio"] * self._delta(max(n, 2), max(int(stats.keys.size), 1))
        temp = LossyCounter(eps)
        temp.update(stats.keys, weights)
        return temp, what

    # -------------------------------------------------------------- apply
    def apply(self, plan: Plan) -> None:
        super().apply(plan)
        pending = self._pending
        if pending is not None and plan.extra.get("gedik_plan") == pending[0]:
            self.tracked = pending[1]
        else:
            self.tracked = np.asarray(plan.table_keys, dtype=np.uint64).copy()
        self._pending = None

    # -------------------------------------------------------------- planning
    @abstractmethod
    def _construct(self, ctx: dict[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
        """Build H_p for the tracked items of ``ctx`` (Alg. 2, 3 or 4): placements and extra info."""

    def compute_plan(self, stats: IntervalStats) -> Plan:
        started = time.perf_counter()
        n = int(stats.n_workers)
        keys = stats.keys
        prev = stats.worker
        theta_max = float(self.p["theta_max"])
        resources = self.p["resources"]
        alpha = float(self.p["alpha"])
        sigma = float(self.p["sigma"])
        self._serial += 1
        serial = self._serial
        extra: dict[str, Any] = {
            "gedik_plan": serial,
            "resources": resources,
            "utility": self.p["utility"],
            "theta": theta_k(alpha, n),
        }
        notes: list[str] = []

        def finish(assignment: np.ndarray, home: np.ndarray, tracked: np.ndarray, feasible: bool | None) -> Plan:
            self._add_paper_metrics(stats, assignment, n, extra)
            cost = stats.cost
            if cost.size and n > 1:
                mean = float(cost.sum()) / n
                top = float(cost.max())
                if mean > 0 and top > (1.0 + theta_max) * mean + 1e-12:
                    notes.append(
                        f"hottest key alone (cost {top:g}) exceeds (1+θmax)·L̄ = {(1.0 + theta_max) * mean:g}"
                    )
                    feasible = False
            self._pending = (serial, np.sort(tracked.astype(np.uint64)))
            return make_plan(
                self.name, stats, assignment, home, theta_max=theta_max, feasible=feasible,
                note="; ".join(notes), started=started, extra=extra,
            )

        empty_u64 = np.empty(0, dtype=np.uint64)
        if keys.size == 0:
            notes.append("empty interval: no keys")
            return finish(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), empty_u64, False)
        home = self.home_of(stats)
        if n == 1:
            notes.append("one channel: every key on channel 0 (θ = 0 is met trivially)")
            extra.update(explicit=0, delta=1.0)
            return finish(np.zeros(keys.size, dtype=np.int64), home, empty_u64, None)

        source, source_name = self._frequency_source(stats, n)
        extra["frequency_source"] = source_name
        current = np.where((prev >= 0) & (prev < n), prev, home)
        if source is None:
            notes.append("empty interval: no tuples to estimate frequencies; owners kept")
            return finish(current, home, self.tracked, False)

        # ---- δ (Eq. 15–17) and the tracked set D_p^(t+1) (Sec. 4.1.2–4.1.3)
        domain = max(int(keys.size), len(source), 1)
        deltas = delta_thresholds(resources, alpha, sigma, n, domain)
        delta = min(deltas.values())
        cand_keys, cand_ca = source.frequent(delta)
        total = source.n
        cand_f = cand_ca / total
        if "Q" in resources and cand_keys.size:
            delta_q = quadratic_post_delta(cand_f, domain, alpha, sigma, n)
            delta = min([v for r, v in zip(resources, deltas.values()) if r != "Q"] + [delta_q])
            keep = cand_ca >= (delta - source.epsilon) * total - 1e-9 * total
            cand_keys, cand_f = cand_keys[keep], cand_f[keep]
        extra.update(delta=delta, epsilon=source.epsilon, counter_entries=len(source),
                     counter_history=self.counter.history(), candidates=int(cand_keys.size))

        # restrict to keys the statistics know (keys without state or load cannot be placed)
        order_k = np.argsort(keys, kind="stable")
        sk = keys[order_k]
        pos, hit = find_sorted(sk, cand_keys)
        t_idx = order_k[pos[hit]]
        t_f = cand_f[hit]
        # decreasing frequency, then fingerprint (deterministic scan order)
        o = np.lexsort((keys[t_idx], -t_f))
        t_idx, t_f = t_idx[o], t_f[o]
        if t_idx.size > int(self.p["max_tracked"]):
            notes.append(f"{t_idx.size} tracked keys truncated to max_tracked={self.p['max_tracked']}")
            t_idx, t_f = t_idx[: self.p["max_tracked"]], t_f[: self.p["max_tracked"]]
        tracked_keys = keys[t_idx]
        extra["explicit"] = int(t_idx.size)
        if t_idx.size == 0:
            notes.append("no key above δ: consistent hash only")

        # ---- D_o = D_p^(t) \ D_p^(t+1) (within the statistics keys), m and m̄ (Eq. 18)
        in_prev = np.isin(keys, self.tracked)
        in_next = np.zeros(keys.size, dtype=bool)
        in_next[t_idx] = True
        old_idx = np.flatnonzero(in_prev & ~in_next)
        f_old = source.estimate(keys[old_idx]) / total
        beta_s = resources[0]
        ms_old = np.where(prev[old_idx] >= 0, beta(beta_s, f_old), 0.0)
        m0 = float(ms_old[prev[old_idx] != home[old_idx]].sum())
        ms = np.where(prev[t_idx] >= 0, beta(beta_s, t_f), 0.0)
        mbar = (float(beta(beta_s, f_old).sum()) + float(beta(beta_s, t_f).sum())) / n

        ctx = {
            "n": n,
            "f": np.ascontiguousarray(t_f),
            "w": self._loads_matrix(t_f),
            "theta": None,
            "ms": np.ascontiguousarray(ms),
            "h": np.ascontiguousarray(prev[t_idx]),
            "ring": np.ascontiguousarray(home[t_idx]),
            "m0": m0,
            "mbar": mbar,
            "ucode": UTILITIES.index(self.p["utility"]),
        }
        ctx["theta"] = np.full(ctx["w"].shape[0], theta_k(alpha, n))
        if t_idx.size:
            placed, info = self._construct(ctx)
        else:
            placed, info = np.empty(0, dtype=np.int64), {}
        extra.update(info)
        assignment = home.copy()
        assignment[t_idx] = placed

        # ρ and γ of the final explicit hash (Eq. 18–20)
        if t_idx.size:
            w = ctx["w"]
            L = np.zeros((w.shape[0], n))
            for k in range(w.shape[0]):
                L[k] = np.bincount(placed, weights=w[k], minlength=n)[:n]
            extra["rho"] = float(_rho_full(L, w.sum(axis=1), ctx["theta"], n))
            mig = m0 + float(ms[placed != prev[t_idx]].sum())
            extra["gamma"] = mig / mbar if mbar > 0 else 0.0
        if n > keys.size:
            notes.append(f"more channels ({n}) than keys ({keys.size})")
        return finish(assignment, home, tracked_keys, None)

    def _loads_matrix(self, f: np.ndarray) -> np.ndarray:
        """Rows β_k(f) for the non-constant resources (Sec. 4.4); β_n is linear so K >= 1."""
        rows = [beta(kind, f) for kind in self.p["resources"] if kind != "C"]
        return np.ascontiguousarray(np.vstack(rows)) if f.size else np.zeros((len(rows), 0))

    def _add_paper_metrics(self, stats: IntervalStats, assignment: np.ndarray, n: int, extra: dict[str, Any]) -> None:
        """b (Eq. 11), b_k, m (Eq. 12) over all statistics keys with f = count / Σ count."""
        counts = stats.count.astype(np.float64)
        tot = float(counts.sum())
        if assignment.size == 0 or tot <= 0:
            extra.update(b=None, b_s=None, b_c=None, b_n=None, m=None, m_state=None)
            return
        f = counts / tot
        b, bk = relative_imbalance(assignment, f, n, self.p["resources"], self.p["alpha"])
        moved = (stats.worker >= 0) & (stats.worker != assignment)
        extra.update(b=b, b_s=bk["s"], b_c=bk["c"], b_n=bk["n"],
                     m=relative_migration(moved, beta(self.p["resources"][0], f), n),
                     m_state=relative_migration(moved, stats.size, n))


@register
class ScanGrouping(GedikGrouping):
    """Alg. 2 (SCAN): items in decreasing frequency, each to the channel of best utility."""

    name: ClassVar[str] = "scan"
    summary: ClassVar[str] = "Gedik scan: explicit hash of frequent keys + consistent hash; items by decreasing frequency"
    paper: ClassVar[str] = "gedik-vldbj14 Sec. 4.2.2, Alg. 2"

    def _construct(self, ctx: dict[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
        placed = _scan_kernel(ctx["w"], ctx["theta"], ctx["ms"], ctx["h"], ctx["m0"], ctx["mbar"],
                              ctx["n"], ctx["ucode"])
        return placed, {}


@register
class RedistGrouping(GedikGrouping):
    """Alg. 3 (REDIST): at each step the (item, channel) of best utility per unit frequency."""

    name: ClassVar[str] = "redist"
    summary: ClassVar[str] = "Gedik redist: places the (key, channel) of best utility per frequency at each step"
    paper: ClassVar[str] = "gedik-vldbj14 Sec. 4.2.3, Alg. 3"

    def _construct(self, ctx: dict[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
        placed, _order = _redist_kernel(ctx["w"], ctx["f"], ctx["theta"], ctx["ms"], ctx["h"], ctx["m0"],
                                        ctx["mbar"], ctx["n"], ctx["ucode"])
        return placed, {}


@register
class ReadjGrouping(GedikGrouping):
    """Alg. 4 (READJ): start from the current placement, apply the best ρ-lowering move/swap."""

    name: ClassVar[str] = "readj"
    summary: ClassVar[str] = "Gedik readj: readjusts the current placement with moves and swaps of frequent keys"
    paper: ClassVar[str] = "gedik-vldbj14 Sec. 4.2.4, Alg. 4"
    params: ClassVar[tuple[Param, ...]] = _COMMON_PARAMS + (
        Param("max_moves", "int", 5, "readj: times one key may be moved or swapped (the paper's c, Sec. 4.2.4)",
              low=1, high=1000),
        Param("readj_stop", "choice", "balance",
              "readj: balance = apply the best gain while ρ can be lowered (Alg. 4, g ← −∞); "
              "utility = stop when no readjustment lowers the utility",
              choices=("balance", "utility")),
    )

    def _construct(self, ctx: dict[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
        n = ctx["n"]
        h = ctx["h"]
        # tracked items stay put (p^(t)); items of removed channels or without owner: new ring home
        init = np.where((h >= 0) & (h < n), h, ctx["ring"]).astype(np.int64)
        m0 = ctx["m0"] + float(ctx["ms"][(h >= n)].sum())
        placed, steps, moves, swaps = _readj_kernel(
            ctx["w"], ctx["f"], ctx["theta"], ctx["ms"], h, init, m0, ctx["mbar"], n, ctx["ucode"],
            int(self.p["max_moves"]), self.p["readj_stop"] == "utility",
        )
        return placed, {"readj_steps": int(steps), "readj_moves": int(moves), "readj_swaps": int(swaps)}
