"""Stateful load balancing over substreams: ``elb``, ``clb``, ``uhlb`` (Guo & Zhou, Euro-Par 2017 workshops).

Paper: Y. Guo, Z. Zhou, "Stateful load balancing for parallel stream processing", Euro-Par 2017
workshops (``shared/papers/guo-zhou-europar17-elb-clb.txt`` beside the repository).  **The text we have lacks the
pseudo-code figures (Algorithm 1 = ELB, Algorithm 2 = CLB); both are reconstructed from the prose of
Sec. 3 and Sec. 4.**  Every place where the prose is ambiguous, contradictory or silent is listed
below with the decision taken.

Model (Sec. 2.1 – 2.2)
----------------------
* Keys are split into ``p`` substreams (``p ≫ n``) by a hash ``H: D → [p]``.  skewlab uses
  ``H(k) = mix64(fp + 977 · GOLDEN) mod p`` (:data:`SUBSTREAM_HASH_INDEX` = 977; the SplitMix64
  salt of :mod:`engine.keys`), independent of the key-grouping hash ``fp mod n`` and of the
  d-choices hashes ``F_i`` (small i).  H keeps the remainder where the ``F_i`` now use a
  multiply-shift range reduction (a speed change of the routing kernels): the substream layout, and
  with it the published ELB/CLB results, stay as they were.
* An assignment ``F: S → I`` is a **substream table** of ``p`` entries (``sub_table[s]`` = worker).
  Routing is vectorised: ``sub_table[H(k)]``.  The default (static) table, also the initial one of
  all three algorithms, is ``s ↦ s mod n``.
* Per-substream load ``y_s`` of a window = Σ cost(k) over the stats keys of substream ``s``; state
  ``d_s`` = Σ size(k).  Imbalance is the variance of the instance loads ``var(L) = (1/n) Σ (l_i − l̄)²``
  (Eq. 1, population variance; reported as ``extra["var_load"]``), state movement is
  ``ψ = Σ_s x_s d_s`` over substreams whose worker changes (Eq. 2) — identical to the plan's
  ``state_moved`` when ``stats.worker`` agrees with the current table, because every key of a moved
  substream moves with it and no other key moves.

Plans (skewlab contract)
------------------------
Each plan decides a new substream table, then the per-key assignment ``new_table[H(k)]`` goes to
:func:`engine.grouping.make_plan`, whose ``home`` is the key's worker under the **default** table
(:meth:`_SubstreamRebalancer.base`), so the plan's key-level routing table = keys whose worker differs
from the default.  ``stats.home`` is ignored on purpose: in the substream model a key's default worker
is fixed by ``H`` and the default table, and a caller-supplied ``h(k)`` (``skewlab plan`` snapshots fill
in ``fp mod n``) would make every key of a remapped substream look like a table entry.  ``plan.extra`` carries
``substream_table`` (adopted by :meth:`apply`), ``substreams_moved`` (entries changed vs the current
table), ``substream_state_moved`` (ψ of Eq. 2), ``substream_table_size`` (entries off the default
table), ``var_load`` / ``var_load_before`` / ``var_load_static`` (Eq. 1 under the new, the current and
the default table, on the planning loads).  :meth:`routing_table_size` returns the number of
**substreams** off their default worker (the size of the explicit part of the partition function;
the key-level count is ``plan.routing_table_size``).

ELB — eager load balancing (Sec. 3, Algorithm 1 reconstructed)
--------------------------------------------------------------
Runs every statistic window on the latest histogram ``Y_t``:

1. Phase 1: ``L = Aᵀ Y_t``, ``w = Σ y``, ``π = ⌈2w/(u+v)⌉``.  If ``π < n`` the ``n − π``
   least-loaded instances form ``R``; all their substreams go into the priority queue PQ.
   ``l̄ = w/π``.  OI = instances with load above ``u``.
2. Phase 2 (the prose's "Line 15–23"): for each overloaded instance (descending load), traverse its
   substreams in descending load and move to PQ the largest one with load ``< θ = min(l_j − l̄, (u−v)/2)``,
   update ``l_j`` and θ, repeat (one traversal, as the paper notes).
3. Phase 3: take PQ substreams largest first and give each to "the least-loaded instance of UI that
   can hold it" (first-fit).  The least-loaded instance is also the one most able to hold it, so this
   is implemented as: give it to the least-loaded kept instance; if even that one exceeds ``u`` the
   substream still goes there (it must go somewhere) and the plan is marked infeasible.

Decisions where the paper is silent or does not fit skewlab:

* ``v``/``u`` are declared as **fractions of the current mean load** ``w/n`` (skewlab has no
  absolute per-window capacity).  Then ``π = ⌈2n/(v+u)⌉``; with a symmetric range (``v + u = 2``,
  the default 0.8/1.2) ``π = n``.  The paper adds ``π − n`` empty instances when ``π > n``; the
  controller fixes ``n``, so ELB plans on ``n`` instances and reports ``extra["instances_wanted"]``.
  When ``π < n`` the ``R`` instances are drained (they keep their ids, with no substreams).
* Substreams with zero load in the window are never moved by phase 2 (moving them balances nothing
  and costs their state); those of ``R`` are moved regardless.
* The paper only drains OI.  When nothing is above ``u`` but some instance is below ``v`` (e.g. a
  worker added by scale-out), the paper's procedure moves nothing; with ``fill=true`` (default,
  **skewlab extension**) instances above ``l̄`` are drained by the same rule (θ additionally capped
  by the remaining deficit Σ_{l_j < v}(l̄ − l_j)) until the deficit is covered.  ``fill=false`` is the
  paper's procedure only.
* The paper assumes every substream load ``≤ (u−v)/2``; hot substreams above that cap are never
  moved (paper rule) and the plan notes how many violate the assumption.
* Trigger: the paper runs ELB every window; it changes nothing while all instances are within
  ``[v, u]``, so :meth:`ELB.should_rebalance` asks for a plan only when a kept instance is outside
  ``[v, u]`` (or an ``R`` instance still carries load).  ELB therefore declares no ``theta_max``;
  its range plays that role.

CLB — correlation-based load balancing (Sec. 4, Algorithm 2 reconstructed)
--------------------------------------------------------------------------
Runs every ``m`` windows on the load series ``X_s = (y_s1 … y_sm)`` of the last ``m`` windows
(accumulated by :meth:`CLB.observe`):

* Lines 2–7: covariance matrix ``Σ = [cov(X_i, X_j)]`` (population, ``1/m``).
* Lines 8–23: start from one set holding all substreams.  ``s_j`` is a *partner* of ``s_i`` when
  ``corr(X_i, X_j) ≥ θ``.  ``ω_i`` = Σ of ``cov(X_i, X_j)`` over the partners of ``s_i`` in its own set
  (its contribution to the cross covariance of Eq. 5 if split off).  Each run picks ``s_k`` with the
  largest ``ω``, moves the partners of ``s_k`` from its set ``S_h`` to a new set ``S_r`` (``s_k`` stays),
  and updates ``ω`` of the members of ``S_h`` and ``S_r``.  Repeat until ``n`` sets exist.
  Positively correlated substreams (peaks together) are thus separated and negatively correlated ones
  stay together, which is what maximising the cross covariance (a max-cut with weights ``2 cov``) asks.

Decisions:

* The prose's two definitions of the split contradict each other ("S₁ keeps s₁ and any s_i with
  cov ≥ θ" vs. "S₁ = {s₁} ∪ {s_i | cov < θ}" and "each s_i with cov(X_k, X_i) ≥ θ will be moved to
  S_r"); we follow the latter two, which agree with each other and with max-cut.
* ``0 ≤ θ < 1`` only makes sense for a normalised covariance, so the partner test uses the
  correlation coefficient; ω sums covariances (Eq. 5).  Substreams with constant load (σ = 0) have no
  partners.  Default ``θ = 0`` (the paper's value is lost): partners = non-negatively correlated, which
  makes each run roughly a bisection; a high θ peels off tiny sets.
* If no substream has a partner left (ω = 0 everywhere) splitting stops with fewer than ``n`` sets
  ("stalled"); the remaining instances are empty and the plan is marked infeasible unless repaired.
* Which set goes to which instance is not specified; sets are matched to instances greedily by the
  state (then the number of substreams) they already hold there, which minimises state movement
  without changing the imbalance objective.
* The paper claims (after Eq. 4) that minimising Σ_j var(L_j) is equivalent to minimising
  Σ_i var(N_i).  It is not: Σ_j var(L_j) = (m/n)·Σ_i [var(N_i) + η_i²] − Σ_j l̄_j², and the η_i² term
  (differences of mean load between instances) depends on the partition and is ignored by the
  covariance split, which can leave one instance with most of the load.  With ``repair=true``
  (**skewlab extension**, off by default) the split is followed by ELB phases 2–3 on the mean window loads
  with the range ``[1 − repair_range, 1 + repair_range]·l̄`` and without ELB's cap ``(u−v)/2`` (hot
  substreams that the split put together are exactly what must move; a donor still never drops below
  l̄ because θ ≤ l_j − l̄).  ``repair=false`` (the default) is the paper's CLB.
* With fewer than 2 windows of history there is no covariance; the plan keeps the current table.
* Trigger: :meth:`CLB.should_rebalance` is an interval counter, true once ``m`` windows have been
  observed since the last applied CLB plan.  ``m`` default 30: the paper's value is lost from the
  text, but its amortised movement (48.4 % per balancing → 1.6 % per window) implies m ≈ 30.
* Memory: Σ is ``p × p`` float64 (8·p² bytes, 128 MB at p = 4096); ``substreams`` is capped at 8192
  and ``m`` at 1000 for CLB (the load series are an ``m × p`` ring buffer).

UHLB — universal-hash load balancing (Sec. 5 baseline)
------------------------------------------------------
"It returns h(t), where h: [p] → [n] is chosen at random from a family of 2-universal hash
functions."  We use Carter–Wegman ``h_{a,b}(s) = ((a·s + b) mod P) mod n`` with ``P = 2³¹ − 1``,
``a ∈ [1, P)``, ``b ∈ [0, P)``.  The initial member is ``a = 1, b = 0`` (= the default table ``s mod n``,
so all three algorithms start from the same assignment).  The paper says neither when UHLB
rebalances nor what it does with a draw; decisions:

* Trigger: ``theta_max`` through the base class (θ = max |L − L̄|/L̄ of the window above it).
* Redraw: a member drawn at random from the grouping's seeded generator, oblivious of state, is
  **adopted only if it lowers var(L) (Eq. 1) on the planning window** below the current member's;
  otherwise the plan keeps the current member and moves nothing.  The paper's UHLB is a load
  *balancer* under the MCLB objectives (Sec. 2.2: lower Eq. 1, move little, Eq. 2), and a redraw
  that raises Eq. 1 while moving ≈ (n−1)/n of the state is worse on both; its reported movement
  (24.2 % per window at n = 10, Sec. 5.1) is also far below the ≈ 90 % of a redraw in every window,
  which is what adopting every draw does on a stream where θ_max is out of a random member's reach
  (e.g. 100 keys on 10 instances; docs/results.md, Guo & Zhou section).
* ``draws > 1`` (skewlab extension; the paper: 1) draws several members and keeps the best by
  var(L) on the window (then compared with the current member as above).

Resize (all three)
------------------
Worker ids are ``[0, n)``, so shrinking removes ids ``≥ n_new`` (the controller's choice; the paper's
ELB would remove the least-loaded instances).  ELB and CLB keep every substream of a surviving worker
where it is and reassign the removed workers' substreams (plus the surplus of any overloaded worker)
with ELB phases 2–3 (``fill`` on, so that added workers, which start empty, receive substreams from the
most loaded ones), using the last window's substream loads (CLB: the mean over its history; before
any statistics: one unit per substream).  ELB uses its own ``[v, u]``, CLB ``1 ± repair_range``.
UHLB keeps its hash member ``(a, b)`` and re-evaluates it modulo the new ``n`` (state oblivious).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from numba import njit

from engine.grouping import IntervalStats, Plan, RebalancingPlanner, Router, make_plan
from engine.keys import GOLDEN, mix64
from engine.params import Param
from engine.registry import register

__all__ = ["CLB", "ELB", "SUBSTREAM_HASH_INDEX", "SubstreamRouter", "UHLB", "UHLB_PRIME", "elb_assign", "clb_split"]

SUBSTREAM_HASH_INDEX = 977
"""Salt index of ``H`` (key → substream): ``H(k) = mix64(fp + 977 · GOLDEN) mod p``."""

UHLB_PRIME = 2_147_483_647
"""Prime ``P = 2³¹ − 1`` of the Carter–Wegman family used by UHLB."""

_SUBSTREAMS_DEFAULT = 1024  # paper: 100 substreams for n = 5..15 (p/n 7–20); 1024 keeps p/n >= 20 to n = 51
_EPS = 1e-9


def _substreams_param(high: int) -> Param:
    return Param(
        "substreams",
        "int",
        _SUBSTREAMS_DEFAULT,
        "number p of substreams (hash partitions of the key domain, p >> workers); the unit of assignment",
        low=1,
        high=high,
    )


# ---------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _drain(j, y, new, order, inpq, L, lbar, cap, limit):  # pragma: no cover - compiled
    """ELB phase 2 for instance ``j``: move to PQ the largest substream of load < θ, repeatedly.

    θ = min(L_j − l̄, cap, limit − taken); one traversal of the substreams in descending load.
    Returns the load moved to PQ.
    """
    taken = 0.0
    theta = min(L[j] - lbar, cap, limit)
    if theta <= 0.0:
        return 0.0
    for idx in range(order.size):
        s = order[idx]
        if new[s] != j or inpq[s]:
            continue
        ys = y[s]
        if ys > 0.0 and ys < theta:
            inpq[s] = True
            L[j] -= ys
            taken += ys
            theta = min(L[j] - lbar, cap, limit - taken)
            if theta <= 0.0:
                break
    return taken


@njit(cache=True)
def _elb_kernel(y, table, n, v, u, removed, fill, cap):  # pragma: no cover - compiled
    """ELB (Guo & Zhou Sec. 3, Alg. 1 reconstructed) on absolute bounds ``v``, ``u``.

    ``y``: per-substream load; ``table``: current substream → worker (values in [0, n));
    ``removed``: the set R (instances to empty); ``cap``: largest movable substream load (paper:
    (u − v)/2).  Returns the new table and the final loads.
    """
    p = y.size
    new = table.copy()
    L = np.zeros(n)
    for s in range(p):
        L[new[s]] += y[s]
    kept = 0
    for j in range(n):
        if not removed[j]:
            kept += 1
    if kept == 0 or p == 0:
        return new, L
    w = 0.0
    for j in range(n):
        w += L[j]
    lbar = w / kept
    order = np.argsort(-y, kind="mergesort")  # descending load, ties by substream id
    inpq = np.zeros(p, np.bool_)
    pq = 0.0
    # Phase 1: every substream of an instance in R goes to PQ.
    for s in range(p):
        j = new[s]
        if removed[j]:
            inpq[s] = True
            L[j] -= y[s]
            pq += y[s]
    # Phase 2: drain the overloaded instances OI (descending load) towards l̄.
    drained = np.zeros(n, np.bool_)
    inst = np.argsort(-L, kind="mergesort")
    for t in range(n):
        j = inst[t]
        if removed[j] or L[j] <= u:
            continue
        drained[j] = True
        pq += _drain(j, y, new, order, inpq, L, lbar, cap, np.inf)
    # skewlab extension: underloaded instances (< v) whose deficit PQ cannot cover take load from the
    # instances above l̄ (descending), drained by the same rule.
    if fill:
        deficit = 0.0
        for j in range(n):
            if not removed[j] and L[j] < v:
                deficit += lbar - L[j]
        if deficit > pq + _EPS * max(w, 1.0):
            inst = np.argsort(-L, kind="mergesort")
            for t in range(n):
                j = inst[t]
                if removed[j] or drained[j] or L[j] <= lbar:
                    continue
                pq += _drain(j, y, new, order, inpq, L, lbar, cap, deficit - pq)
                if pq >= deficit:
                    break
    # Phase 3: PQ largest first to the least-loaded kept instance (the least-loaded one of UI).
    for idx in range(p):
        s = order[idx]
        if not inpq[s]:
            continue
        best = -1
        for j in range(n):
            if removed[j]:
                continue
            if best < 0 or L[j] < L[best]:
                best = j
        new[s] = best
        L[best] += y[s]
    return new, L


@njit(cache=True)
def _clb_partners(S, sd, theta):  # pragma: no cover - compiled
    """In place: keep ``cov(i, j)`` where ``corr(i, j) ≥ θ`` (i ≠ j, both σ > 0); else −1 (no partner)."""
    p = S.shape[0]
    for i in range(p):
        for j in range(p):
            if i == j or sd[i] <= 0.0 or sd[j] <= 0.0 or S[i, j] < theta * sd[i] * sd[j] or S[i, j] < 0.0:
                S[i, j] = -1.0


@njit(cache=True)
def _clb_split_kernel(W, n):  # pragma: no cover - compiled
    """Greedy max-cut splitting (Guo & Zhou Sec. 4, Alg. 2 lines 8–23 reconstructed).

    ``W[i, j] ≥ 0`` is cov(X_i, X_j) for partners, −1 otherwise.  Returns the set of every substream
    (0 … n_sets−1) and ``n_sets`` (< n when splitting stalled).
    """
    p = W.shape[0]
    group = np.zeros(p, np.int64)
    omega = np.zeros(p)
    for i in range(p):
        acc = 0.0
        for j in range(p):
            x = W[i, j]
            if x > 0.0:
                acc += x
        omega[i] = acc
    buf_h = np.empty(p, np.int64)
    buf_r = np.empty(p, np.int64)
    n_sets = 1
    while n_sets < n:
        k = -1
        best = 0.0
        for i in range(p):
            if omega[i] > best:
                best = omega[i]
                k = i
        if k < 0:
            break
        h = group[k]
        nh = 0
        nr = 0
        for i in range(p):
            if group[i] != h:
                continue
            if i != k and W[k, i] >= 0.0:
                buf_r[nr] = i
                nr += 1
            else:
                buf_h[nh] = i
                nh += 1
        if nr == 0:  # only rounding residue left in ω_k: no partner to split off
            omega[k] = 0.0
            continue
        r = n_sets
        for b in range(nr):
            group[buf_r[b]] = r
        for a in range(nh):
            i = buf_h[a]
            acc = 0.0
            for b in range(nr):
                x = W[i, buf_r[b]]
                if x > 0.0:
                    acc += x
            omega[i] = max(omega[i] - acc, 0.0)
        for b in range(nr):
            i = buf_r[b]
            acc = 0.0
            for a in range(nh):
                x = W[i, buf_h[a]]
                if x > 0.0:
                    acc += x
            omega[i] = max(omega[i] - acc, 0.0)
        n_sets += 1
    return group, n_sets


@njit(cache=True)
def _match_sets(group, n_sets, table, n, d):  # pragma: no cover - compiled
    """Map sets to distinct instances greedily by the state (then substreams) they already hold there."""
    p = group.size
    m = n_sets * n
    st = np.zeros(m)
    cnt = np.zeros(m)
    for s in range(p):
        f = group[s] * n + table[s]
        st[f] += d[s]
        cnt[f] += 1.0
    # sort pairs by state desc, then count desc, then index asc (lexsort by composite via two passes)
    order = np.argsort(-cnt, kind="mergesort")
    order = order[np.argsort(-st[order], kind="mergesort")]
    set_to = np.full(n_sets, -1, np.int64)
    used = np.zeros(n, np.bool_)
    for t in range(m):
        f = order[t]
        if cnt[f] <= 0.0:
            break
        g = f // n
        j = f % n
        if set_to[g] < 0 and not used[j]:
            set_to[g] = j
            used[j] = True
    nxt = 0
    for g in range(n_sets):
        if set_to[g] < 0:
            while used[nxt]:
                nxt += 1
            set_to[g] = nxt
            used[nxt] = True
    out = np.empty(p, np.int64)
    for s in range(p):
        out[s] = set_to[group[s]]
    return out


# ---------------------------------------------------------------------------------------------
# Python wrappers (testable on their own)
# ---------------------------------------------------------------------------------------------
def elb_assign(
    y: np.ndarray,
    table: np.ndarray,
    n: int,
    v: float,
    u: float,
    removed: np.ndarray | None = None,
    fill: bool = True,
    cap: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """ELB phases 1–3 on absolute load bounds ``[v, u]``; returns (new table, final instance loads).

    ``cap`` bounds the load of a substream phase 2 may move; ``None`` = the paper's ``(u − v)/2``.
    """
    y = np.ascontiguousarray(y, dtype=np.float64)
    table = np.ascontiguousarray(table, dtype=np.int64)
    rem = np.zeros(n, dtype=np.bool_) if removed is None else np.ascontiguousarray(removed, dtype=np.bool_)
    c = (float(u) - float(v)) / 2.0 if cap is None else float(cap)
    return _elb_kernel(y, table, int(n), float(v), float(u), rem, bool(fill), c)


def clb_split(X: np.ndarray, n: int, theta: float) -> tuple[np.ndarray, int]:
    """CLB's covariance computation and greedy splitting of ``X`` (windows × substreams) into ≤ n sets."""
    X = np.asarray(X, dtype=np.float64)
    m, p = X.shape
    if m < 2 or p == 0 or n <= 1:
        return np.zeros(p, dtype=np.int64), 1 if p else 0
    Xc = X - X.mean(axis=0)
    S = np.ascontiguousarray(Xc.T @ Xc) / m  # Σ (population covariance), lines 2–7
    sd = np.sqrt(np.maximum(np.diag(S).copy(), 0.0))
    sd[sd < 1e-12 * max(float(sd.max(initial=0.0)), 1e-300)] = 0.0
    _clb_partners(S, sd, float(theta))
    group, n_sets = _clb_split_kernel(S, int(n))
    return group, int(n_sets)


def _var(loads: np.ndarray) -> float:
    return float(np.var(loads)) if loads.size else 0.0


# ---------------------------------------------------------------------------------------------
# Shared machinery
# ---------------------------------------------------------------------------------------------
class SubstreamRouter(Router):
    """Guo & Zhou's routing: key → substream ``H(k)`` (hash, ``p`` substreams) → worker
    ``sub_table[H(k)]``.  The table is initially ``s mod n``; the planner replaces it."""

    def __init__(self, n_workers: int, n_sources: int, n_substreams: int):
        super().__init__(n_workers, n_sources)
        self.n_substreams = int(n_substreams)
        self.sub_table = np.arange(self.n_substreams, dtype=np.int64) % self.n_workers

    def substream(self, fps: np.ndarray) -> np.ndarray:
        """``H(k)`` in ``[0, p)`` for every fingerprint."""
        with np.errstate(over="ignore"):
            salted = np.asarray(fps, dtype=np.uint64) + np.uint64(SUBSTREAM_HASH_INDEX) * GOLDEN
        return (mix64(salted) % np.uint64(self.n_substreams)).astype(np.int64)

    def route(self, fps: np.ndarray, source: int = 0) -> np.ndarray:
        return self.sub_table[self.substream(fps)]

    def owner(self, fps: np.ndarray) -> np.ndarray:
        return self.route(fps)


class _SubstreamRebalancer(RebalancingPlanner):
    """Key → substream (hash) → worker (table of p entries); see the module docstring.

    The substream table lives in the router (:class:`SubstreamRouter`); the window loads observed
    for planning stay here."""

    paper: ClassVar[str] = "guo-zhou-europar17 (Stateful load balancing for parallel stream processing)"

    def make_router(self, n_workers: int, n_sources: int) -> Router:
        return SubstreamRouter(n_workers, n_sources, int(self.p["substreams"]))

    def reset_planning(self) -> None:
        self.last_load: np.ndarray | None = None  # y of the last observed window
        self._last_interval: int | None = None

    # ------------------------------------------------------------------ hashing and routing
    @property
    def n_substreams(self) -> int:
        return self.router.n_substreams  # type: ignore[attr-defined]

    @property
    def sub_table(self) -> np.ndarray:
        """The router's substream table (worker of every substream)."""
        return self.router.sub_table  # type: ignore[attr-defined]

    @sub_table.setter
    def sub_table(self, table: np.ndarray) -> None:
        self.router.sub_table = table  # type: ignore[attr-defined]

    def substream(self, fps: np.ndarray) -> np.ndarray:
        """``H(k)`` in ``[0, p)`` for every fingerprint (the router's hash)."""
        return self.router.substream(fps)  # type: ignore[attr-defined]

    def default_table(self, n: int | None = None) -> np.ndarray:
        """The static table ``s ↦ s mod n``."""
        n = self.n_workers if n is None else int(n)
        return np.arange(self.n_substreams, dtype=np.int64) % n

    def base(self, fps: np.ndarray) -> np.ndarray:
        """A key's worker under the default table (the plans' ``home``)."""
        return self.substream(fps) % self.n_workers

    def routing_table_size(self) -> int:
        """Number of substreams off their default worker ``s mod n``."""
        return int(np.count_nonzero(self.sub_table != self.default_table()))

    # ------------------------------------------------------------------ statistics
    def substream_stats(self, stats: IntervalStats) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(substream of each key, per-substream load y, per-substream state d)."""
        sub = self.substream(stats.keys)
        p = self.n_substreams
        y = np.bincount(sub, weights=stats.cost, minlength=p)[:p].astype(np.float64)
        d = np.bincount(sub, weights=stats.size, minlength=p)[:p].astype(np.float64)
        return sub, y, d

    def observe(self, stats: IntervalStats) -> None:
        _, y, _ = self.substream_stats(stats)
        self.last_load = y
        self._last_interval = int(stats.interval)
        self._on_window(y)

    def _on_window(self, y: np.ndarray) -> None:
        """Hook for per-window accumulation (CLB)."""

    def _ensure_observed(self, stats: IntervalStats) -> None:
        if self._last_interval is None or int(stats.interval) != self._last_interval:
            self.observe(stats)

    def _resize_load(self) -> np.ndarray:
        return self.last_load if self.last_load is not None else np.ones(self.n_substreams)

    # ------------------------------------------------------------------ planning
    def compute_plan(self, stats: IntervalStats) -> Plan:
        if int(stats.n_workers) != self.n_workers:
            self.resize(int(stats.n_workers))
        self._ensure_observed(stats)
        n = self.n_workers
        sub, y, d = self.substream_stats(stats)
        current = self.sub_table
        new_table, feasible, notes, extra = self._decide(stats, y, d)
        new_table = np.asarray(new_table, dtype=np.int64)
        changed = new_table != current
        default = self.default_table()
        extra.update(
            substream_table=new_table.copy(),
            substreams_moved=int(np.count_nonzero(changed)),
            substream_state_moved=float(d[changed].sum()),
            substream_table_size=int(np.count_nonzero(new_table != default)),
            var_load=_var(np.bincount(new_table, weights=y, minlength=n)[:n]),
            var_load_before=_var(np.bincount(current, weights=y, minlength=n)[:n]),
            var_load_static=_var(np.bincount(default, weights=y, minlength=n)[:n]),
        )
        return make_plan(
            self.name,
            stats,
            new_table[sub],
            self.base(stats.keys),
            feasible=feasible,
            theta_max=self.p.get("theta_max"),
            note="; ".join(notes),
            extra=extra,
        )

    def _decide(
        self, stats: IntervalStats, y: np.ndarray, d: np.ndarray
    ) -> tuple[np.ndarray, bool, list[str], dict[str, Any]]:
        raise NotImplementedError

    def apply(self, plan: Plan) -> None:
        """Adopt ``plan.extra["substream_table"]`` (or rebuild it from the per-key assignment)."""
        table = plan.extra.get("substream_table") if plan.extra else None
        n = self.n_workers
        if table is not None:
            table = np.asarray(table, dtype=np.int64)
        if table is None or table.size != self.n_substreams or (table.size and (table.min() < 0 or table.max() >= n)):
            table = self.sub_table.copy()
            assign = np.asarray(plan.assignment, dtype=np.int64)
            ok = (assign >= 0) & (assign < n)
            table[self.substream(plan.keys)[ok]] = assign[ok]
        self.sub_table = table.copy()
        self._after_apply(plan)

    def _after_apply(self, plan: Plan) -> None:
        """Hook (CLB resets its interval counter, UHLB adopts its hash member)."""

    # ------------------------------------------------------------------ resize
    def _elb_resize(self, n_new: int, v: float, u: float) -> None:
        """Keep surviving substreams; reassign removed/overloaded ones with ELB phases 2–3 (see module doc)."""
        n_old = self.n_workers
        y = np.asarray(self._resize_load(), dtype=np.float64)
        table = self.sub_table
        if table.size != y.size or not float(y.sum()) > 0:  # no load seen: one unit per substream
            y = np.ones(table.size)
        n_total = max(n_old, n_new)
        removed = np.arange(n_total) >= n_new
        mean = float(y.sum()) / n_new
        new, _ = elb_assign(y, table, n_total, v * mean, u * mean, removed, fill=True)
        self.sub_table = np.minimum(new, n_new - 1).astype(np.int64)

    def resize(self, n_workers: int) -> None:
        n_old = self.n_workers
        self.router.resize(int(n_workers))
        if self.n_workers != n_old:
            self._resize_table(n_old, self.n_workers)

    def _resize_table(self, n_old: int, n_new: int) -> None:
        raise NotImplementedError


# ---------------------------------------------------------------------------------------------
# ELB
# ---------------------------------------------------------------------------------------------
@register
class ELB(_SubstreamRebalancer):
    name: ClassVar[str] = "elb"
    summary: ClassVar[str] = "Eager load balancing: every window, move substreams from OI to UI into a load range [v,u]"
    params: ClassVar[tuple[Param, ...]] = (
        _substreams_param(1 << 20),
        Param("v", "float", 0.8, "lower load bound v as a fraction of the mean load w/n", low=0.0, high=1.0, high_open=True),
        Param("u", "float", 1.2, "upper load bound u as a fraction of the mean load w/n", low=1.0, high=100.0, low_open=True),
        Param(
            "fill",
            "bool",
            True,
            "skewlab extension: also drain instances above the mean when an instance is below v "
            "and the overloaded ones free too little (false = paper's ELB only)",
        ),
    )

    def _pi(self, n: int) -> int:
        """π = ⌈2w/(u+v)⌉ with u, v fractions of w/n, i.e. ⌈2n/(v+u)⌉."""
        vf, uf = float(self.p["v"]), float(self.p["u"])
        return max(1, int(math.ceil(2.0 * n / (vf + uf) - 1e-9)))

    @staticmethod
    def _removed(L: np.ndarray, count: int) -> np.ndarray:
        n = L.size
        rem = np.zeros(n, dtype=np.bool_)
        if count > 0:
            order = np.lexsort((-np.arange(n), L))  # least loaded first; ties: highest id first
            rem[order[:count]] = True
        return rem

    def should_rebalance(self, stats: IntervalStats) -> bool:
        """True when a kept instance is outside ``[v, u]·w/n`` or an R instance still has load."""
        loads = stats.loads()
        n = loads.size
        w = float(loads.sum())
        if n == 0 or w <= 0:
            return False
        mean = w / n
        lo, hi = float(self.p["v"]) * mean, float(self.p["u"]) * mean
        pi = self._pi(n)
        rem = self._removed(loads, n - pi) if pi < n else np.zeros(n, dtype=np.bool_)
        tol = _EPS * w
        if np.any(loads[rem] > tol):
            return True
        kept = loads[~rem]
        return bool(np.any(kept > hi + tol) or np.any(kept < lo - tol))

    def _decide(self, stats, y, d):
        n = self.n_workers
        w = float(y.sum())
        notes: list[str] = []
        extra: dict[str, Any] = {}
        if w <= 0 or n == 1:
            extra.update(pi=1 if n == 1 else n, removed_instances=[])
            return self.sub_table.copy(), True, notes, extra
        mean = w / n
        v, u = float(self.p["v"]) * mean, float(self.p["u"]) * mean
        L0 = np.bincount(self.sub_table, weights=y, minlength=n)[:n]
        pi = self._pi(n)
        extra["pi"] = pi
        if pi > n:
            extra["instances_wanted"] = pi
            notes.append(f"ELB wants π={pi} instances; the controller fixes n={n}, planned on n")
        rem = self._removed(L0, n - pi) if pi < n else np.zeros(n, dtype=np.bool_)
        extra["removed_instances"] = np.flatnonzero(rem).tolist()
        if rem.any():
            notes.append(f"π={pi} < n={n}: drained the {int(rem.sum())} least-loaded instances (R)")
        new, L = elb_assign(y, self.sub_table, n, v, u, rem, bool(self.p["fill"]))
        kept = L[~rem]
        tol = _EPS * w
        feasible = bool(np.all(kept <= u + tol) and np.all(kept >= v - tol))
        if not feasible:
            notes.append(
                f"load range [v,u]=[{v:.4g},{u:.4g}] not met (instance loads {kept.min():.4g}..{kept.max():.4g})"
            )
        hot = int(np.count_nonzero(y > (u - v) / 2.0 + tol))
        if hot:
            notes.append(f"{hot} substream(s) exceed (u−v)/2={(u - v) / 2:.4g} (paper's assumption); phase 2 cannot move them")
        extra["v_abs"], extra["u_abs"] = v, u
        return new, feasible, notes, extra

    def _resize_table(self, n_old: int, n_new: int) -> None:
        self._elb_resize(n_new, float(self.p["v"]), float(self.p["u"]))


# ---------------------------------------------------------------------------------------------
# CLB
# ---------------------------------------------------------------------------------------------
@register
class CLB(_SubstreamRebalancer):
    name: ClassVar[str] = "clb"
    summary: ClassVar[str] = (
        "Correlation-based load balancing: every m windows, greedy max-cut split of substreams by load covariance"
    )
    params: ClassVar[tuple[Param, ...]] = (
        _substreams_param(8192),
        Param("m", "int", 30, "rebalance every m statistic windows (covariance over the last m windows)", low=2, high=1000),
        Param(
            "theta",
            "float",
            0.0,
            "split threshold θ: substreams with correlation >= θ to the chosen one are split off",
            low=0.0,
            high=1.0,
            high_open=True,
        ),
        Param(
            "repair",
            "bool",
            False,
            "skewlab extension: after the split, fit mean loads into 1 ± repair_range with ELB phases 2-3 "
            "(false, the default = the paper's CLB only)",
        ),
        Param("repair_range", "float", 0.2, "relative load range of the repair step and of resize", low=0.0, high=10.0, low_open=True),
    )

    def reset_planning(self) -> None:
        super().reset_planning()
        m = int(self.p["m"])
        self.history = np.zeros((m, self.n_substreams), dtype=np.float64)  # ring buffer of y_t
        self.history_len = 0
        self.history_pos = 0
        self.windows_since = 0  # windows observed since the last applied CLB plan

    def _on_window(self, y: np.ndarray) -> None:
        self.history[self.history_pos] = y
        self.history_pos = (self.history_pos + 1) % self.history.shape[0]
        self.history_len = min(self.history_len + 1, self.history.shape[0])
        self.windows_since += 1

    def series(self) -> np.ndarray:
        """The load series of the last ``min(m, windows seen)`` windows, oldest first (windows × p)."""
        m = self.history.shape[0]
        if self.history_len < m:
            return self.history[: self.history_len].copy()
        return np.roll(self.history, -self.history_pos, axis=0)

    def should_rebalance(self, stats: IntervalStats) -> bool:
        """True once ``m`` windows were observed since the last applied CLB plan (interval counter)."""
        self._ensure_observed(stats)
        return self.windows_since >= int(self.p["m"])

    def _decide(self, stats, y, d):
        n = self.n_workers
        X = self.series()
        notes: list[str] = []
        extra: dict[str, Any] = {"windows": int(X.shape[0])}
        if X.shape[0] < 2:
            notes.append("CLB needs at least 2 windows of load series; kept the current table")
            extra["sets"] = 0
            return self.sub_table.copy(), True, notes, extra
        if n == 1:
            extra["sets"] = 1
            return np.zeros(self.n_substreams, dtype=np.int64), True, notes, extra
        group, n_sets = clb_split(X, n, float(self.p["theta"]))
        extra["sets"] = n_sets
        table = _match_sets(group, n_sets, self.sub_table, n, np.ascontiguousarray(d))
        feasible = True
        if n_sets < n:
            notes.append(f"correlation splitting stalled at {n_sets} of {n} sets (no partners left)")
        eta = X.mean(axis=0)
        w = float(eta.sum())
        if bool(self.p["repair"]) and w > 0:
            r = float(self.p["repair_range"])
            mean = w / n
            table, L = elb_assign(eta, table, n, (1 - r) * mean, (1 + r) * mean, None, fill=True, cap=np.inf)
            tol = _EPS * w
            if np.any(L > (1 + r) * mean + tol) or np.any(L < (1 - r) * mean - tol):
                feasible = False
                notes.append(
                    f"repair could not fit mean loads into 1±{r:g} of the mean ({L.min() / mean:.3f}..{L.max() / mean:.3f})"
                )
        elif n_sets < n:
            feasible = False
        return table, feasible, notes, extra

    def _after_apply(self, plan: Plan) -> None:
        self.windows_since = 0

    def _resize_load(self) -> np.ndarray:
        if self.history_len:
            return self.series().mean(axis=0)
        return super()._resize_load()

    def _resize_table(self, n_old: int, n_new: int) -> None:
        r = float(self.p["repair_range"])
        self._elb_resize(n_new, 1 - r, 1 + r)


# ---------------------------------------------------------------------------------------------
# UHLB
# ---------------------------------------------------------------------------------------------
@register
class UHLB(_SubstreamRebalancer):
    name: ClassVar[str] = "uhlb"
    summary: ClassVar[str] = "Universal-hash load balancing: on imbalance, draw h: [p]→[n] from a 2-universal family, adopt it if it lowers var(L)"
    params: ClassVar[tuple[Param, ...]] = (
        _substreams_param(1 << 20),
        Param("theta_max", "float", 0.2, "rebalance when max_d |L(d) − L̄|/L̄ exceeds this", low=0.0, high=100.0),
        Param("draws", "int", 1, "random hash members drawn per rebalance, best var(L) kept (paper: 1)", low=1, high=1000),
    )

    def reset_planning(self) -> None:
        super().reset_planning()
        self.hash_a = 1
        self.hash_b = 0
        self.rng = np.random.default_rng([self.seed & 0xFFFFFFFFFFFFFFFF, 0x55484C42])

    def hash_table(self, a: int, b: int, n: int | None = None) -> np.ndarray:
        """``h_{a,b}(s) = ((a·s + b) mod P) mod n`` for every substream ``s``."""
        n = self.n_workers if n is None else int(n)
        s = np.arange(self.n_substreams, dtype=np.int64)
        return ((np.int64(a) * s + np.int64(b)) % UHLB_PRIME) % n

    def _decide(self, stats, y, d):
        """Draw ``draws`` random members; adopt the best by var(L) on ``y`` only if it beats the current one."""
        n = self.n_workers
        best = None
        for _ in range(int(self.p["draws"])):
            a = int(self.rng.integers(1, UHLB_PRIME))
            b = int(self.rng.integers(0, UHLB_PRIME))
            table = self.hash_table(a, b, n)
            var = _var(np.bincount(table, weights=y, minlength=n)[:n])
            if best is None or var < best[0]:
                best = (var, a, b, table)
        var, a, b, table = best
        extra = {"drawn_a": a, "drawn_b": b, "drawn_var_load": var}
        current = _var(np.bincount(self.sub_table, weights=y, minlength=n)[:n])
        if var < current:
            extra.update(hash_a=a, hash_b=b, adopted=True)
            return table, True, [], extra
        extra.update(hash_a=self.hash_a, hash_b=self.hash_b, adopted=False)
        note = f"kept the current hash member: the draw's var(L) {var:.4g} is not below the current {current:.4g}"
        return self.sub_table.copy(), True, [note], extra

    def _after_apply(self, plan: Plan) -> None:
        if "hash_a" in plan.extra and "hash_b" in plan.extra:
            self.hash_a = int(plan.extra["hash_a"])
            self.hash_b = int(plan.extra["hash_b"])

    def _resize_table(self, n_old: int, n_new: int) -> None:
        self.sub_table = self.hash_table(self.hash_a, self.hash_b, n_new)
