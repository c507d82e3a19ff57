"""Mixed routing rebalancers of Fang et al., "Parallel Stream Processing Against Workload Skewness
and Variance", HPDC 2017: ``llfd``, ``mintable``, ``minmig``, ``mixed``, ``mixed-bf``.

Routing is F(k) = A[k] if k ∈ A else h(k) (Eq. 1, :class:`~skewlab.engine.algorithms.grouping.TableRouter`); h is the
``base`` parameter (:mod:`skewlab.engine.algorithms.base_hash`): the paper's consistent hashing (Sec. II-A, V;
``base=consistent``, the ring of :class:`skewlab.engine.algorithms.groupings.basic.ConsistentHashRing`), ``base=mod``
(fp mod n), or by default (deviation, issue 39) ``base=slots``, as consistent as the ring and as even as fp mod n.  A plan solves Eq. 3, min M = Σ_{k moved} S(k, w) s.t.
θ(d) = |L(d) − L̄|/L̄ ≤ θmax and |A| ≤ Amax, heuristically in three phases (Sec. III):

* Phase I (cleaning): move table entries back home: none (LLFD, MinMig), all (MinTable, Alg. 2),
  or the n with the smallest S(k, w) (Mixed, Alg. 4, criterion η).
* Phase II (preparing): disassociate keys from every worker above Lmax = (1 + θmax)·L̄ in ψ order
  (highest c(k) for LLFD/MinTable, highest γ = c(k)^β / S(k, w) for MinMig/Mixed, Alg. 3) into C.
* Phase III (assigning, LLFD, Alg. 1): keys of C by descending c(k) to the least-loaded worker where
  ``Adjust`` succeeds, directly or by displacing an exchangeable set E of cheaper keys.

``llfd`` = Phases II + III with ψ = cost; ``mintable`` (Alg. 2); ``minmig`` (Alg. 3); ``mixed``
(Alg. 4); ``mixed-bf`` (MixedBF: every n).  Above ``compact_threshold`` keys the phases run over
the HLHE records of :mod:`skewlab.engine.algorithms.rebalancers.compact` (Sec. IV), aiming at (1 − 0.02)·θmax
(``extra["theta_plan"]``) and reporting ``load_error`` and ``discretisation_error``.

Decisions where the paper is ambiguous (each tested in ``tests/algorithms/test_fang.py``; the reasoning is in
docs/design-notes.md, "engine/algorithms/rebalancers/fang.py"):

1. Adjust tests ``L(d) + c(k) ≤ Lmax`` (Alg. 1 line 12 writes ``<``; text and Fig. 4 need ``≤``).
2. Workers are ordered by the running estimate L̂(d), ties by id.
3. Phase II stops once a worker is not overloaded; a key costing more than Lmax alone never moves
   (the plan is infeasible and names it).
4. E only holds keys that were on d when Phase III began, never cost-0 keys; a key no worker can
   take goes to the least-loaded one (infeasible).
5. ``fill_underloaded`` (extension, default on) also sheds keys from the most-loaded workers until
   C covers the deficit of workers below (1 − θmax)·L̄.
6. Mixed accumulates ``n ← min(n + (N_A' − Amax), N_A)`` (read literally, Alg. 4 line 10 can cycle).
7. MixedBF tries n = 0 … N_A (or ``bf_max_trials`` values).
8. A key with no current owner is at its home; negative or non-finite costs/sizes count as 0.
9. γ with S = 0 is +∞ when c > 0, else 0.
10. Degenerate intervals return the current assignment with a note; never raises.
11. Amax is a hard limit of Mixed and MixedBF (θmax gives way, the note says so) unless
    ``bound_priority=theta_max``.
12. ``plan_decay`` (extension, default 0.4): the phases see the decayed key costs
    c(k) + a·c'(k) + a²·c''(k) + … of the intervals observed so far (:meth:`FangRebalancer.planning_stats`),
    not the last interval's alone (the paper's, Sec. III; ``plan_decay=0``).  On keys that arrive in
    sessions a plan built on one interval's hot keys moves state for keys that are gone in the next.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import numpy as np
from numba import njit

from skewlab.engine.algorithms.base_hash import SlotTable, base_param, make_base
from skewlab.engine.algorithms.grouping import IntervalStats, Plan, RebalancingPlanner, make_plan
from skewlab.engine.algorithms.groupings.basic import ConsistentHashRing
from skewlab.engine.config.params import Param
from skewlab.engine.algorithms.rebalancers.compact import CompactStats, build_compact, desc_order, expand_assignment, load_error
from skewlab.engine.algorithms.registry import register
from skewlab.engine.algorithms.sorted_lookup import find_sorted

__all__ = ["FangRebalancer", "LLFD", "MinTable", "MinMig", "Mixed", "MixedBF", "rebalance_groups"]

PAPER = "fang-hpdc17"
COMPACT_MARGIN = 0.02  # compact plans aim at (1 − margin)·θmax (see the module docstring)


# ---------------------------------------------------------------------------------------------
# numba kernels: Phase II + Phase III (LLFD with Adjust) over groups of identical keys
# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _heap_less(a, b, p_rec, rec_c):  # pragma: no cover - compiled
    """Heap order of pool entries: higher cost first, then earlier entry (FIFO)."""
    ca = rec_c[p_rec[a]]
    cb = rec_c[p_rec[b]]
    if ca != cb:
        return ca > cb
    return a < b


@njit(cache=True)
def _heap_push(heap, size, item, p_rec, rec_c):  # pragma: no cover - compiled
    i = size
    heap[i] = item
    while i > 0:
        parent = (i - 1) // 2
        if _heap_less(heap[i], heap[parent], p_rec, rec_c):
            tmp = heap[i]
            heap[i] = heap[parent]
            heap[parent] = tmp
            i = parent
        else:
            break
    return size + 1


@njit(cache=True)
def _heap_pop(heap, size, p_rec, rec_c):  # pragma: no cover - compiled
    top = heap[0]
    size -= 1
    heap[0] = heap[size]
    i = 0
    while True:
        left = 2 * i + 1
        right = left + 1
        best = i
        if left < size and _heap_less(heap[left], heap[best], p_rec, rec_c):
            best = left
        if right < size and _heap_less(heap[right], heap[best], p_rec, rec_c):
            best = right
        if best == i:
            break
        tmp = heap[i]
        heap[i] = heap[best]
        heap[best] = tmp
        i = best
    return top, size


@njit(cache=True)
def _grow_i(a, need):  # pragma: no cover - compiled
    """``a`` (int64) with room for at least ``need`` entries (amortised doubling)."""
    if need <= a.size:
        return a
    size = 2 * a.size + 16
    if size < need:
        size = need
    out = np.empty(size, dtype=np.int64)
    for i in range(a.size):
        out[i] = a[i]
    return out


@njit(cache=True)
def _ascending(loads):  # pragma: no cover - compiled
    """Workers by ascending load, ties by worker id (bottom-up stable merge sort)."""
    n = loads.size
    a = np.arange(n)
    b = np.empty(n, dtype=np.int64)
    width = 1
    while width < n:
        lo = 0
        while lo < n:
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            k = lo
            while i < mid and j < hi:
                if loads[a[j]] < loads[a[i]]:
                    b[k] = a[j]
                    j += 1
                else:
                    b[k] = a[i]
                    i += 1
                k += 1
            while i < mid:
                b[k] = a[i]
                i += 1
                k += 1
            while j < hi:
                b[k] = a[j]
                j += 1
                k += 1
            lo = hi
        a, b = b, a
        width *= 2
    return a


@njit(cache=True, inline="always")
def _to_pool(g, t, w, cnt, loads, displaceable, g_rec, rec_c, p_rec, p_cnt, heap, n_pool, h_size):  # pragma: no cover
    """Disassociate ``t`` keys of group ``g`` from worker ``w`` into the candidate pool C.

    Lowers ``cnt[g]``, ``loads[w]`` and ``displaceable[w]`` in place, appends the pool row (record of
    g, t keys) and pushes it on the max-heap by cost.  The arrays may be reallocated, so the caller
    takes back ``(p_rec, p_cnt, heap, n_pool, h_size)``.  Used by Phase II, the fill extension and
    Adjust's exchangeable set E (put back into C).
    """
    c = rec_c[g_rec[g]]
    cnt[g] -= t
    loads[w] -= t * c
    displaceable[w] -= t * c
    p_rec = _grow_i(p_rec, n_pool + 1)
    p_cnt = _grow_i(p_cnt, n_pool + 1)
    heap = _grow_i(heap, n_pool + 1)
    p_rec[n_pool] = g_rec[g]
    p_cnt[n_pool] = t
    h_size = _heap_push(heap, h_size, n_pool, p_rec, rec_c)
    return p_rec, p_cnt, heap, n_pool + 1, h_size


@njit(cache=True)
def _find_exchange(d, c, need, lst, start, head, g_rec, cnt, rec_c, e_g, e_t, eps):  # pragma: no cover
    """Greedy exchangeable set E on worker ``d`` for a key of cost ``c`` (Alg. 1 line 14).

    Walks d's original keys in ψ order taking keys of cost strictly below ``c`` (condition (ii))
    until ``need`` = L̂(d) + c − Lmax is covered (condition (iii)).  Returns the number of entries
    written to ``e_g``/``e_t`` (group, keys taken) or −1 when no such E exists.
    """
    n_e = 0
    rem = need
    for j in range(head[d], start[d + 1]):
        g = lst[j]
        m = cnt[g]
        if m <= 0:
            continue
        cg = rec_c[g_rec[g]]
        if cg <= 0.0 or cg >= c:
            continue
        t = math.ceil((rem - eps) / cg)
        if t < 1:
            t = 1
        if t > m:
            t = m
        e_g[n_e] = g
        e_t[n_e] = t
        n_e += 1
        rem -= t * cg
        if rem <= eps:
            return n_e
    return -1


@njit(cache=True)
def rebalance_groups(g_rec, g_w, g_cnt, rec_c, n, lmax, lmin, eps, fill):  # pragma: no cover - compiled
    """Phases II and III of Fang et al. over groups of identical keys.

    ``g_rec[g]``/``g_w[g]``/``g_cnt[g]``: record, worker after Phase I, number of keys of group g;
    groups must be given in ψ order (highest priority first).  ``rec_c``: cost of one key of each
    record.  Returns ``(out_rec, out_w, out_cnt, loads, counters)`` where the output rows give the
    final worker of every key (``out_cnt`` keys of record ``out_rec`` on ``out_w``; rows may repeat)
    and ``counters`` = [keys shed in Phase II, keys shed for underloaded workers, keys displaced by
    Adjust (|E| total), keys placed despite Adjust failing everywhere, placements].
    """
    G = g_rec.size
    loads = np.zeros(n, dtype=np.float64)
    displaceable = np.zeros(n, dtype=np.float64)
    cnt = g_cnt.copy()
    for g in range(G):
        c = rec_c[g_rec[g]]
        loads[g_w[g]] += c * cnt[g]
        if c <= lmax + eps:
            displaceable[g_w[g]] += c * cnt[g]
    # per-worker lists of groups in ψ order (stable bucket sort by worker)
    start = np.zeros(n + 1, dtype=np.int64)
    for g in range(G):
        start[g_w[g] + 1] += 1
    for w in range(n):
        start[w + 1] += start[w]
    lst = np.empty(G, dtype=np.int64)
    fillpos = start[:n].copy()
    for g in range(G):
        w = g_w[g]
        lst[fillpos[w]] = g
        fillpos[w] += 1
    head = start[:n].copy()  # first list entry that may still hold keys

    # candidate pool C (rows: record, keys) and its max-heap by cost
    p_rec = np.empty(64, dtype=np.int64)
    p_cnt = np.empty(64, dtype=np.int64)
    heap = np.empty(64, dtype=np.int64)
    n_pool = 0
    h_size = 0
    pool_load = 0.0
    counters = np.zeros(5, dtype=np.int64)

    # ---------------- Phase II: shed keys from overloaded workers in ψ order
    for w in range(n):
        if loads[w] <= lmax + eps:
            continue
        for j in range(start[w], start[w + 1]):
            if loads[w] <= lmax + eps:
                break
            g = lst[j]
            m = cnt[g]
            c = rec_c[g_rec[g]]
            if m <= 0 or c <= 0.0 or c > lmax + eps:
                continue
            t = math.ceil((loads[w] - lmax - eps) / c)
            if t < 1:
                t = 1
            if t > m:
                t = m
            p_rec, p_cnt, heap, n_pool, h_size = _to_pool(g, t, w, cnt, loads, displaceable, g_rec, rec_c,
                                                          p_rec, p_cnt, heap, n_pool, h_size)
            pool_load += t * c
            counters[0] += t

    # ---------------- extension: make the candidates cover the deficit of underloaded workers
    if fill:
        deficit = 0.0
        for w in range(n):
            if loads[w] < lmin - eps:
                deficit += lmin - loads[w]
        cursor = start[:n].copy()
        while pool_load < deficit - eps:
            best = -1
            for w in range(n):
                if cursor[w] < start[w + 1] and loads[w] > lmin + eps:
                    if best < 0 or loads[w] > loads[best]:
                        best = w
            if best < 0:
                break
            w = best
            g = lst[cursor[w]]
            m = cnt[g]
            c = rec_c[g_rec[g]]
            t = 0
            if m > 0 and c > 0.0 and c <= lmax + eps:
                t = math.floor((loads[w] - lmin + eps) / c)
                t2 = math.ceil((deficit - pool_load - eps) / c)
                if t2 < 1:
                    t2 = 1
                if t > t2:
                    t = t2
                if t > m:
                    t = m
            if t <= 0:
                cursor[w] += 1
                continue
            p_rec, p_cnt, heap, n_pool, h_size = _to_pool(g, t, w, cnt, loads, displaceable, g_rec, rec_c,
                                                          p_rec, p_cnt, heap, n_pool, h_size)
            pool_load += t * c
            counters[1] += t
            if cnt[g] == 0:
                cursor[w] += 1

    # ---------------- Phase III: LLFD with Adjust
    o_rec = np.empty(G + 64, dtype=np.int64)
    o_w = np.empty(G + 64, dtype=np.int64)
    o_cnt = np.empty(G + 64, dtype=np.int64)
    n_out = 0
    e_g = np.empty(G + 1, dtype=np.int64)
    e_t = np.empty(G + 1, dtype=np.int64)
    while h_size > 0:
        pi, h_size = _heap_pop(heap, h_size, p_rec, rec_c)
        r = p_rec[pi]
        m = p_cnt[pi]
        c = rec_c[r]
        while m > 0:
            chosen = -1
            n_e = 0
            dmin = 0
            for w in range(1, n):
                if loads[w] < loads[dmin]:
                    dmin = w
            # Adjust on the least-loaded worker first, then the others in ascending L̂(d)
            if loads[dmin] + c <= lmax + eps:
                chosen = dmin
            else:
                order = _ascending(loads)
                for oi in range(n):
                    d = order[oi]
                    if loads[d] + c <= lmax + eps:
                        chosen = d
                        break
                    need = loads[d] + c - lmax
                    if need > displaceable[d] + eps:
                        continue
                    while head[d] < start[d + 1] and cnt[lst[head[d]]] <= 0:
                        head[d] += 1
                    n_e = _find_exchange(d, c, need, lst, start, head, g_rec, cnt, rec_c, e_g, e_t, eps)
                    if n_e >= 0:
                        chosen = d
                        break
                    n_e = 0
            if chosen < 0:
                chosen = dmin
                counters[3] += 1
            d = chosen
            for q in range(n_e):
                g = e_g[q]
                t = e_t[q]
                p_rec, p_cnt, heap, n_pool, h_size = _to_pool(g, t, d, cnt, loads, displaceable, g_rec, rec_c,
                                                              p_rec, p_cnt, heap, n_pool, h_size)
                counters[2] += t
            loads[d] += c
            counters[4] += 1
            if n_out > 0 and o_rec[n_out - 1] == r and o_w[n_out - 1] == d:
                o_cnt[n_out - 1] += 1
            else:
                o_rec = _grow_i(o_rec, n_out + 1)
                o_w = _grow_i(o_w, n_out + 1)
                o_cnt = _grow_i(o_cnt, n_out + 1)
                o_rec[n_out] = r
                o_w[n_out] = d
                o_cnt[n_out] = 1
                n_out += 1
            m -= 1

    # ---------------- keys that never left their group
    total = n_out
    for g in range(G):
        if cnt[g] > 0:
            total += 1
    rr = np.empty(total, dtype=np.int64)
    ww = np.empty(total, dtype=np.int64)
    kk = np.empty(total, dtype=np.int64)
    rr[:n_out] = o_rec[:n_out]
    ww[:n_out] = o_w[:n_out]
    kk[:n_out] = o_cnt[:n_out]
    i = n_out
    for g in range(G):
        if cnt[g] > 0:
            rr[i] = g_rec[g]
            ww[i] = g_w[g]
            kk[i] = cnt[g]
            i += 1
    return rr, ww, kk, loads, counters


# ---------------------------------------------------------------------------------------------
# Python orchestration
# ---------------------------------------------------------------------------------------------
def _clean(x: np.ndarray) -> np.ndarray:
    """Costs/sizes as float64 with negative or non-finite entries set to 0 (no copy when clean)."""
    x = np.asarray(x, dtype=np.float64)
    if x.size and not (np.isfinite(x).all() and x.min() >= 0):
        x = np.maximum(np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0), 0.0)
    return x


_THETA = Param(
    "theta_max", "float", 0.08,
    "θmax: tolerated imbalance |L(d) − L̄|/L̄ of every worker (Fang Eq. 3; Table II default 0.08)",
    low=0.0, high=100.0,
)
_AMAX = Param(
    "amax", "int", 3000,
    "Amax: maximal routing-table size N_A (Fang Eq. 3; Table II default 3·10^3); 0 allowed; a hard "
    "limit unless bound_priority=theta_max",
    low=0, high=None,
)
_AMAX_REPORTED = Param(
    "amax", "int", 3000,
    "Amax: maximal routing-table size N_A (Fang Eq. 3; default 3·10^3); this algorithm does not control "
    "the table, a violation is only reported (plan infeasible) — Mixed and MixedBF enforce it",
    low=0, high=None,
)
_BETA = Param(
    "beta", "float", 1.5,
    "β of the migration priority γ(k) = c(k)^β / S(k,w) (Fang Alg. 3; default 1.5, Sec. V)",
    low=0.0, high=10.0,
)
_DEGREE = Param(
    "hlhe_degree", "choice", "8",
    "R = 2^r, degree of the HLHE discretisation of the compact representation (Fang Sec. IV-B; "
    "Table II r ∈ 0..8; Fig. 11 quotes R = 8)",
    choices=("1", "2", "4", "8", "16", "32", "64", "128", "256"),
)
_COMPACT = Param(
    "compact_threshold", "int", 100_000,
    "use the compact 6-dimensional representation (Fang Sec. IV) when the interval has more keys than this",
    low=0, high=None,
)
_VALUES = Param(
    "compact_values", "choice", "mean",
    "cost/size of a compact record: 'mean' of its keys (skewlab; exact loads until a record is split) "
    "or the HLHE 'representative' value (Fang Sec. IV-B)",
    choices=("mean", "representative"),
)
_FILL = Param(
    "fill_underloaded", "bool", True,
    "extension: also free keys from the most-loaded workers when underloaded workers cannot reach "
    "(1 − θmax)·L̄ otherwise (θ is two-sided; the paper's Phase II only looks at overloaded workers)",
)
_BASE = base_param()
_REPLICAS = Param(
    "replicas", "int", 1000,
    "consistent-hash ring points per worker with base=consistent (Gedik Sec. 5.5: 1000)",
    low=1, high=4096,
)
_PRIORITY = Param(
    "bound_priority", "choice", "amax",
    "which bound holds when θmax and Amax cannot both be met: 'amax' (the table's memory bound; "
    "θmax gives way, table entries go home) or 'theta_max' (the table may exceed Amax); "
    "the plan is infeasible either way and its note names the bound that gave way",
    choices=("amax", "theta_max"),
)
#: a decayed key cost below this (1 % of one tuple's) is dropped from the planner's state
_FORGOTTEN = 0.01
_PLAN_DECAY = Param(
    "plan_decay", "float", 0.4,
    "extension: plan from the decayed key costs c(k) + a·c'(k) + a²·c''(k) + … of the intervals so far "
    "(the one that just ended first) instead of the last interval's alone; 0 = the paper's single "
    "interval.  Default 0.4, chosen on the bursty movielens users (docs/results/gate.md, \"Planning from "
    "decayed costs\")",
    low=0.0, high=1.0, high_open=True,
)
_BF_TRIALS = Param(
    "bf_max_trials", "int", 0,
    "MixedBF: number of values of n tried (evenly spaced over 0..N_A); 0 = every n as in the paper",
    low=0, high=None,
)


class _Trial:
    """Outcome of one run of Phases I–III (in the planner's domain: keys or compact records)."""

    __slots__ = ("n_clean", "rec", "w", "cnt", "loads", "counters", "table", "moved_state", "theta", "moved_back")

    def __init__(self, n_clean, rec, w, cnt, loads, counters, table, moved_state, theta, moved_back):
        self.n_clean = n_clean
        self.rec = rec
        self.w = w
        self.cnt = cnt
        self.loads = loads
        self.counters = counters
        self.table = table
        self.moved_state = moved_state
        self.theta = theta
        self.moved_back = moved_back


_WARM = False


def _warm_up() -> None:
    """Load (or compile) the numba kernels once per process, outside any timed plan."""
    global _WARM
    if _WARM:
        return
    _WARM = True
    rebalance_groups(
        np.array([2, 0, 1]), np.array([0, 0, 0]), np.array([1, 1, 1]), np.array([6.0, 4.0, 10.0]),
        2, 10.0, 10.0, 1e-9, True,
    )
    cost = np.array([3.0, 3.0, 1.0, 2.0])
    comp = build_compact(np.zeros(4, dtype=np.int64), np.zeros(4, dtype=np.int64), cost, cost, 2, 4)
    r = int(comp.key_rec[0])
    expand_assignment(comp, np.array([r, r]), np.array([0, 1]), np.array([1, 1]), cost)


class FangRebalancer(RebalancingPlanner):
    """Shared machinery of the five Fang et al. algorithms (see the module docstring).

    Subclasses set ``psi`` (``"cost"``: highest c(k) first; ``"gamma"``: highest c^β/S first) and
    implement :meth:`_search` (which Phase-I cleaning amounts n to try).  Constructing the first
    instance in a process loads the compiled kernels, so that ``plan_seconds`` measures planning.
    """

    paper: ClassVar[str] = PAPER
    psi: ClassVar[str] = "cost"
    #: the gate may also pass a plan once the plans skipped in a row forwent more than it costs
    #: (``gate_forgone``, engine/control/gate.py): on the traces it made no case worse than its base for
    #: this family and lifted the mean gain over the base by 0.09-0.11 (docs/results/gate.md)
    gate_counts_forgone: ClassVar[bool] = True

    def __init__(self, n_workers: int, n_sources: int = 1, seed: int = 0, params: Any = None):
        super().__init__(n_workers, n_sources, seed, params)
        _warm_up()

    #: the decayed costs of :meth:`observe` (class default: a planner pickled before ``plan_decay``)
    _decayed: tuple[np.ndarray, np.ndarray] | None = None

    def reset_planning(self) -> None:
        """Planner state (never shipped to executors): the decayed key costs (:meth:`observe`)."""
        self._decayed = None

    def observe(self, stats: IntervalStats) -> None:
        """Decay the key costs by ``plan_decay`` and add the interval's (see :meth:`planning_stats`);
        keys no longer in ``stats`` (no state left on any worker) or decayed below :data:`_FORGOTTEN`
        are dropped (16 bytes per key kept, in the controller's snapshot)."""
        decay = float(self.p.get("plan_decay", 0.0))
        if decay <= 0.0:
            self._decayed = None
            return
        cost = _clean(stats.cost).copy()
        if self._decayed is not None and self._decayed[0].size and stats.keys.size:
            old_keys, old_cost = self._decayed
            pos, hit = find_sorted(old_keys, stats.keys)
            cost[hit] += decay * old_cost[pos[hit]]
        keep = cost >= _FORGOTTEN  # a key decays out after ~log(0.01)/log(a) intervals without tuples
        order = np.argsort(stats.keys[keep], kind="stable")
        self._decayed = (stats.keys[keep][order], cost[keep][order])

    def planning_stats(self, stats: IntervalStats) -> IntervalStats:
        """``stats`` with the decayed key costs of :meth:`observe` as ``cost`` when ``plan_decay`` > 0
        (skewlab extension, not in Fang et al., whose planner sees the last interval alone, Sec. III):
        on keys that arrive in sessions the last interval's hot keys are often gone in the next, so a
        plan built on them moves state for nothing and unbalances the rest; the decayed costs favour
        keys that stayed hot.  The trigger (:meth:`should_rebalance`) and the gate still judge the last
        interval's loads.  Keys without a decayed cost keep their interval cost; without an observed
        history (a snapshot planned directly) ``stats`` as it is."""
        decayed = self._decayed
        if decayed is None or float(self.p.get("plan_decay", 0.0)) <= 0.0 or not stats.keys.size:
            return stats
        keys, cost = decayed
        if not keys.size:
            return stats
        pos, hit = find_sorted(keys, stats.keys)
        return dataclasses.replace(stats, cost=np.where(hit, cost[pos], _clean(stats.cost)))

    def make_ring(self, n_workers: int) -> SlotTable | ConsistentHashRing | None:
        """h(k) by the ``base`` parameter (:func:`skewlab.engine.algorithms.base_hash.make_base`): the slot
        table, the consistent-hash ring (Fang Sec. II-A/V) or ``None`` for fp mod n."""
        return make_base(self.p, n_workers, self.seed, self.base_workers)

    # ------------------------------------------------------------------ entry point
    def compute_plan(self, stats: IntervalStats) -> Plan:
        import time

        started = time.perf_counter()
        stats = self.planning_stats(stats)
        n = int(stats.n_workers)
        theta_max = float(self.p["theta_max"])
        amax = int(self.p["amax"])
        K = int(stats.keys.size)
        home = np.asarray(self.home_of(stats), dtype=np.int64)
        if K:
            bad = (home < 0) | (home >= n)
            if bad.any():
                home = home.copy()
                home[bad] = self.base_for(stats.keys[bad], n)
        cur = stats.worker.copy()
        invalid = (cur < 0) | (cur >= n)
        cur[invalid] = home[invalid]
        cost = _clean(stats.cost)
        size = cost if stats.size is stats.cost else _clean(stats.size)
        total = float(cost.sum())
        extra: dict[str, Any] = {"compact": False, "theta_max": theta_max, "amax": amax}

        def finish(assignment, note="", feasible=None):
            return make_plan(
                self.name, stats, assignment, home, theta_max=theta_max, amax=amax,
                feasible=feasible, note=note, started=started, extra=extra,
            )

        if K == 0:
            return finish(cur, "empty interval: no keys, nothing to rebalance")
        if total <= 0:
            return finish(cur, "empty interval: total cost is 0, nothing to rebalance")
        if n == 1:
            return finish(cur, "one worker: nothing to rebalance")

        mean = total / n
        lmax = (1.0 + theta_max) * mean
        notes: list[str] = []
        hot = int(np.argmax(cost))
        if cost[hot] > lmax * (1 + 1e-12):
            notes.append(
                f"hottest key {self._key_name(stats, hot)} alone (c={cost[hot]:g}) exceeds "
                f"(1+θmax)·L̄={lmax:g}: θmax cannot be met; it stays on its worker, which sheds its other keys"
            )

        use_compact = K > int(self.p["compact_threshold"])
        comp: CompactStats | None = None
        if use_compact:
            degree = int(self.p["hlhe_degree"])
            comp = build_compact(cur, home, cost, size, n, degree, str(self.p["compact_values"]))
            rec_cur, rec_home, rec_c, rec_s, rec_cnt = comp.rec_cur, comp.rec_home, comp.rec_c, comp.rec_s, comp.rec_cnt
            rec_psi = self._priority(rec_c, rec_s)
        else:
            rec_cur, rec_home, rec_c, rec_s = cur, home, cost, size
            rec_cnt = np.ones(K, dtype=np.int64)
            rec_psi = self._priority(cost, size)
        est_total = float(np.dot(rec_c, rec_cnt))
        est_mean = est_total / n
        # compact plans aim at 98 % of θmax: the margin absorbs the load-estimation error
        theta_plan = theta_max * (1.0 - COMPACT_MARGIN) if comp is not None else theta_max
        extra["theta_plan"] = theta_plan
        ctx = _Context(
            n=n,
            rec_cur=rec_cur,
            rec_home=rec_home,
            rec_c=np.ascontiguousarray(rec_c, dtype=np.float64),
            rec_s=rec_s,
            rec_cnt=rec_cnt,
            order=desc_order(rec_psi),
            lmax=(1.0 + theta_plan) * est_mean,
            lmin=max(0.0, (1.0 - theta_plan) * est_mean),
            eps=1e-9 * est_mean,
            mean=est_mean,
            fill=bool(self.p.get("fill_underloaded", True)),
            theta_max=theta_plan,
            amax=amax,
            amax_first=self.p.get("bound_priority") == "amax",
        )
        trials = self._search(ctx)
        best = self._choose(trials, ctx)

        if comp is None:
            assignment = np.empty(K, dtype=np.int64)
            assignment[best.rec] = best.w
        else:
            assignment = expand_assignment(comp, best.rec, best.w, best.cnt, cost)
            true_loads = np.bincount(assignment, weights=cost, minlength=n)[:n]
            est_initial = np.bincount(rec_cur, weights=rec_c * rec_cnt, minlength=n)[:n]
            init_loads = np.bincount(cur, weights=cost, minlength=n)[:n]
            extra.update(
                compact=True,
                records=comp.n_records,
                hlhe_degree=comp.degree,
                compact_values=comp.values,
                load_error=load_error(best.loads, true_loads),
                loads_estimated=[float(x) for x in best.loads],
                load_error_initial=load_error(est_initial, init_loads),
                discretisation_error=abs(comp.deviation_cost) / total,
            )
        notes += self._bound_notes(assignment, home, cur, cost, size, trials, ctx, theta_max, extra)
        c = best.counters
        extra.update(
            keys=K,
            lmax=lmax,
            mean_load=mean,
            shed_phase2=int(c[0]),
            shed_underloaded=int(c[1]),
            displaced=int(c[2]),
            overflow=int(c[3]),
            moved_back=int(best.moved_back),
            n_clean=int(best.n_clean),
            trials=len(trials),
            trial_n=[int(t.n_clean) for t in trials[:64]],
            trial_table=[int(t.table) for t in trials[:64]],
        )
        if c[3]:
            notes.append(f"{int(c[3])} key(s) placed on the least-loaded worker although Adjust failed everywhere")
        return finish(assignment, "; ".join(notes))

    # ------------------------------------------------------------------ the two bounds
    def _bound_notes(self, assignment, home, cur, cost, size, trials, ctx, theta_max, extra) -> list[str]:
        """Keep Amax or θmax when both cannot hold (Mixed, MixedBF: ``bound_priority``); say which gave way.

        ``amax`` (default): when the chosen trial's table still exceeds Amax (even n = N_A overuses
        it), table entries go back to their home h(k) until |A| = Amax (``assignment`` is changed in
        place): first those whose return adds no migration to the plan (the key is not already on
        its planned worker ``cur``), then the others; within each, least cost c(k) first (they do
        the least balancing), ties by least S(k, w), then key order (Eq. 3 minimises migration:
        sending home an entry the key already holds would migrate its state).  ``theta_max``: the trial is kept as it is.  The other algorithms do not
        control the table (a violation is only reported by :func:`make_plan`).
        """
        priority = self.p.get("bound_priority")
        if priority is None:
            return []
        amax = ctx.amax
        in_table = np.flatnonzero(assignment != home)
        balanced_somewhere = any(t.theta <= ctx.theta_max + 1e-9 for t in trials)
        extra["bound_priority"] = priority
        if priority == "theta_max":
            if in_table.size > amax:
                return [f"θmax and Amax cannot both hold: θmax holds, Amax={amax} gives way "
                        f"(|A|={in_table.size}, bound_priority=theta_max)"]
            return []
        over = int(in_table.size) - amax
        extra["amax_sent_home"] = max(over, 0)
        if over > 0:
            costs_migration = cur[in_table] == assignment[in_table]
            order = np.lexsort((in_table, size[in_table], cost[in_table], costs_migration))
            back = in_table[order[:over]]
            assignment[back] = home[back]
        n = ctx.n
        loads = np.bincount(assignment, weights=cost, minlength=n)[:n]
        mean = float(loads.mean())
        theta = float(np.max(np.abs(loads - mean)) / mean) if mean > 0 else 0.0
        if over > 0 or (theta > theta_max + 1e-9 and balanced_somewhere):
            sent = f": {over} table entries sent back home" if over > 0 else ""
            return [f"θmax and Amax cannot both hold: Amax={amax} holds, θmax gives way "
                    f"(bound_priority=amax){sent}"]
        return []

    # ------------------------------------------------------------------ pieces
    def _priority(self, c: np.ndarray, s: np.ndarray) -> np.ndarray:
        """ψ as a number (higher = chosen first): c(k), or γ(k, w) = c(k)^β / S(k, w)."""
        if self.psi == "cost":
            return np.asarray(c, dtype=np.float64)
        beta = float(self.p["beta"])
        c = np.asarray(c, dtype=np.float64)
        s = np.asarray(s, dtype=np.float64)
        num = np.power(c, beta)
        out = np.zeros_like(num)
        pos = s > 0
        np.divide(num, s, out=out, where=pos)
        out[~pos & (c > 0)] = np.inf
        return out

    @staticmethod
    def _key_name(stats: IntervalStats, i: int) -> str:
        if stats.names is not None and i < len(stats.names):
            return repr(str(stats.names[i])[:60])
        return f"#{int(stats.keys[i])}"

    def _search(self, ctx: "_Context") -> list[_Trial]:
        """The trials (Phases I–III with some cleaning amount n) this algorithm runs."""
        return [ctx.trial(0)]

    def _choose(self, trials: list[_Trial], ctx: "_Context") -> _Trial:
        """The trial returned: the best by :meth:`_Context.rank`."""
        return min(trials, key=ctx.rank)


class _Context:
    """Everything one plan's trials share (sorted orders, bounds); :meth:`trial` runs Phases I–III."""

    def __init__(self, *, n, rec_cur, rec_home, rec_c, rec_s, rec_cnt, order, lmax, lmin, eps, mean, fill,
                 theta_max, amax, amax_first=False):
        self.n = n
        self.rec_cur = np.asarray(rec_cur, dtype=np.int64)
        self.rec_home = np.asarray(rec_home, dtype=np.int64)
        self.rec_c = rec_c
        self.rec_s = np.asarray(rec_s, dtype=np.float64)
        self.rec_cnt = np.asarray(rec_cnt, dtype=np.int64)
        self.order = order
        self.lmax, self.lmin, self.eps, self.mean, self.fill = lmax, lmin, eps, mean, fill
        self.theta_max, self.amax, self.amax_first = theta_max, amax, amax_first
        in_table = self.rec_cur != self.rec_home
        tbl = np.flatnonzero(in_table)
        # η: smallest S(k, w) first (Alg. 4 line 1), ties by record index
        self.tbl = tbl[np.argsort(self.rec_s[tbl], kind="stable")]
        self.tbl_cum = np.cumsum(self.rec_cnt[self.tbl])
        self.n_table = int(self.tbl_cum[-1]) if self.tbl.size else 0
        self.pos = np.empty(self.rec_cur.size, dtype=np.int64)
        self.pos[order] = np.arange(order.size)

    def trial(self, n_clean: int) -> _Trial:
        """Phase I with the n table entries of smallest S moved back (n ≥ N_A: all), then II–III."""
        n_clean = int(max(0, min(n_clean, self.n_table)))
        order = self.order
        g_rec = order
        g_w = self.rec_cur[order]
        g_cnt = self.rec_cnt[order]
        moved_back = 0
        if n_clean > 0:
            full = int(np.searchsorted(self.tbl_cum, n_clean, side="right"))
            back = self.tbl[:full]
            g_w = g_w.copy()
            g_w[self.pos[back]] = self.rec_home[back]
            moved_back = int(self.tbl_cum[full - 1]) if full else 0
            if moved_back < n_clean and full < self.tbl.size:
                # split one compact record: part of its keys go home (a new group right after it)
                r = int(self.tbl[full])
                take = n_clean - moved_back
                p = int(self.pos[r])
                g_cnt = g_cnt.copy()
                g_cnt[p] -= take
                g_rec = np.insert(g_rec, p + 1, r)
                g_w = np.insert(g_w, p + 1, self.rec_home[r])
                g_cnt = np.insert(g_cnt, p + 1, take)
                moved_back = n_clean
        rr, ww, kk, loads, counters = rebalance_groups(
            np.ascontiguousarray(g_rec), np.ascontiguousarray(g_w), np.ascontiguousarray(g_cnt),
            self.rec_c, self.n, self.lmax, self.lmin, self.eps, self.fill,
        )
        table = int(kk[ww != self.rec_home[rr]].sum())
        moved_state = float(np.dot(kk[ww != self.rec_cur[rr]], self.rec_s[rr[ww != self.rec_cur[rr]]]))
        theta = float(np.max(np.abs(loads - self.mean)) / self.mean) if self.mean > 0 else 0.0
        return _Trial(n_clean, rr, ww, kk, loads, counters, table, moved_state, theta, moved_back)

    def rank(self, t: _Trial) -> tuple:
        """Sort key of trials: feasible first, then balanced before smallest table overuse (or, with
        ``amax_first``, smallest overuse before balanced), then migration, then n."""
        balanced = t.theta <= self.theta_max + 1e-9
        overuse = max(0, t.table - self.amax)
        if self.amax_first:
            return (not (balanced and overuse == 0), overuse, not balanced, t.moved_state, t.n_clean)
        return (not (balanced and overuse == 0), not balanced, overuse, t.moved_state, t.n_clean)


# ---------------------------------------------------------------------------------------------
# The five registered algorithms
# ---------------------------------------------------------------------------------------------
_COMMON = (_THETA, _AMAX, _PRIORITY, _BASE, _REPLICAS, _DEGREE, _COMPACT, _VALUES, _FILL, _PLAN_DECAY)
_UNCONTROLLED = (_THETA, _AMAX_REPORTED, _BASE, _REPLICAS, _DEGREE, _COMPACT, _VALUES, _FILL, _PLAN_DECAY)


@register
class LLFD(FangRebalancer):
    """LLFD alone (Fang Alg. 1, left example of Fig. 4): Phase II + LLFD, ψ = highest cost, no cleaning."""

    name: ClassVar[str] = "llfd"
    summary: ClassVar[str] = "Least-Load Fit Decreasing with Adjust; no table cleaning (table size uncontrolled)"
    params: ClassVar[tuple[Param, ...]] = _UNCONTROLLED
    psi: ClassVar[str] = "cost"


@register
class MinTable(FangRebalancer):
    """MinTable (Fang Alg. 2): move back every table entry, then Phase II + LLFD with ψ = highest cost."""

    name: ClassVar[str] = "mintable"
    summary: ClassVar[str] = "Clear the routing table, then LLFD on the heaviest keys (smallest table)"
    params: ClassVar[tuple[Param, ...]] = _UNCONTROLLED
    psi: ClassVar[str] = "cost"

    def _search(self, ctx: _Context) -> list[_Trial]:
        return [ctx.trial(ctx.n_table)]


@register
class MinMig(FangRebalancer):
    """MinMig (Fang Alg. 3): no cleaning, Phase II + LLFD with ψ = highest γ = c^β/S first."""

    name: ClassVar[str] = "minmig"
    summary: ClassVar[str] = "Keep the routing table, move keys of highest c^β/S (least migration)"
    params: ClassVar[tuple[Param, ...]] = _UNCONTROLLED[:2] + (_BETA,) + _UNCONTROLLED[2:]
    psi: ClassVar[str] = "gamma"


@register
class Mixed(FangRebalancer):
    """Mixed (Fang Alg. 4): MinMig after moving back n entries of smallest S, n grown by the overuse."""

    name: ClassVar[str] = "mixed"
    summary: ClassVar[str] = ("Mix of MinTable and MinMig: move back n table entries (smallest state first), "
                              "then MinMig; n grows until |A| ≤ Amax")
    params: ClassVar[tuple[Param, ...]] = _COMMON[:3] + (_BETA,) + _COMMON[3:]
    psi: ClassVar[str] = "gamma"

    def _search(self, ctx: _Context) -> list[_Trial]:
        trials = [ctx.trial(0)]  # n = 0: MinMig (Alg. 4 line 3)
        n_clean = 0
        while trials[-1].table > ctx.amax and n_clean < ctx.n_table:  # line 11: while n > 0
            # line 10, accumulated (module docstring, decision 6)
            n_clean = min(ctx.n_table, n_clean + (trials[-1].table - ctx.amax))
            trials.append(ctx.trial(n_clean))
        return trials

    def _choose(self, trials: list[_Trial], ctx: _Context) -> _Trial:
        """Alg. 4 line 12 returns the trial that ended the loop when it fits Amax, else the best one."""
        if trials[-1].table <= ctx.amax:
            return trials[-1]
        return super()._choose(trials, ctx)


@register
class MixedBF(FangRebalancer):
    """MixedBF (Fang Sec. III-C): Mixed's trial for every n = 0..N_A, keep the best (n*)."""

    name: ClassVar[str] = "mixed-bf"
    summary: ClassVar[str] = "Brute-force Mixed: try every number n of moved-back entries, keep the best"
    params: ClassVar[tuple[Param, ...]] = _COMMON[:3] + (_BETA,) + _COMMON[3:] + (_BF_TRIALS,)
    psi: ClassVar[str] = "gamma"

    def _search(self, ctx: _Context) -> list[_Trial]:
        limit = int(self.p["bf_max_trials"])
        if limit > 0 and ctx.n_table + 1 > limit:
            values = np.unique(np.rint(np.linspace(0, ctx.n_table, limit)).astype(np.int64))
        else:
            values = np.arange(ctx.n_table + 1)
        return [ctx.trial(int(v)) for v in values]
