"""Stateful load balancing over substreams: ``elb``, ``clb``, ``uhlb`` (Guo & Zhou, Euro-Par 2017 workshops).

Paper: Y. Guo, Z. Zhou, "Stateful load balancing for parallel stream processing", Euro-Par 2017
workshops.  The text lacks the pseudo-code figures, so Algorithm 1 (ELB) and Algorithm 2 (CLB) are
reconstructed from the prose of Sec. 3 and Sec. 4.

Model (Sec. 2): keys are split into ``p ≫ n`` substreams by ``H(k) = fp mod p``; a plan decides a
substream table ``sub_table[s]`` = worker (initially ``s mod n``).  ``p`` is the ``substreams``
parameter rounded up to a multiple of the starting worker count, so that the initial table is plain
hash's ``fp mod n`` (skewlab's choice, issue 39: the rebalancer starts from, and its gate returns to,
the routing a user would otherwise have; :class:`SubstreamRouter`).  Imbalance is
``var(L)`` (Eq. 1, population variance, ``extra["var_load"]``), state movement ``ψ = Σ x_s d_s``
(Eq. 2, ``extra["substream_state_moved"]``).  Keys go to :func:`skewlab.engine.algorithms.grouping.make_plan` with
``home`` = the worker under the default table (``stats.home`` is ignored); ``plan.extra`` carries
``substream_table``, ``substreams_moved``, ``substream_table_size`` and ``var_load_before`` /
``var_load_static``; :meth:`routing_table_size` counts substreams off their default worker.

* ELB (Sec. 3): every window, phase 1 computes ``π = ⌈2w/(u+v)⌉`` and drains the ``n − π``
  least-loaded instances; phase 2 moves from each overloaded instance its largest substream below
  ``θ = min(l_j − l̄, (u−v)/2)``; phase 3 gives queued substreams, largest first, to the least-loaded
  kept instance.
* CLB (Sec. 4): every ``m`` windows, splits the substreams into ``n`` sets by repeatedly moving the
  partners (correlation ``≥ θ``) of the substream with the largest ω (Σ cov with partners, Eq. 5) to
  a new set, maximising the cross covariance; sets go to the instances already holding most of their
  state.
* UHLB (Sec. 5 baseline): a Carter–Wegman member ``((a·s + b) mod (2³¹−1)) mod n``, starting at
  ``a = 1, b = 0`` (the default table).

Deviations and decisions: ``v``/``u`` are fractions of the mean load and ``n`` is fixed
(``extra["instances_wanted"]`` reports π); zero-load substreams are not moved; ``fill=true``
(skewlab extension) also drains instances above l̄ when one is below ``v``; ELB asks for a plan
only when an instance is outside ``[v, u]``.  CLB follows the prose's "moved to S_r" reading of the
split, tests partners by correlation, defaults ``θ = 0`` and ``m = 30`` (the paper's values are
lost), stops early when no partner is left ("stalled"), and with ``repair=true`` (skewlab extension,
off by default) follows the split with ELB phases 2–3, because the paper's claim after Eq. 4 omits
the mean-load term.  UHLB triggers on ``theta_max`` and adopts a redraw only if it lowers Eq. 1
(``draws > 1``: best of several).  Resize keeps surviving workers' substreams and redistributes
the removed ones with ELB phases 2–3 (UHLB re-evaluates ``(a, b)`` modulo the new ``n``).  The full
reasoning for each point, with the paper's quotes: docs/design-notes.md,
"engine/algorithms/rebalancers/guo_zhou.py".
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from numba import njit

from skewlab.engine.algorithms.grouping import IntervalStats, Plan, RebalancingPlanner, Router, make_plan
from skewlab.engine.algorithms.keys import GOLDEN, mix64
from skewlab.engine.config.params import Param
from skewlab.engine.algorithms.registry import register

__all__ = ["CLB", "ELB", "SUBSTREAM_HASH_INDEX", "SubstreamRouter", "UHLB", "UHLB_PRIME", "elb_assign", "clb_split"]

SUBSTREAM_HASH_INDEX = 977
"""Salt index of the substream hash of a router pickled before ``H(k) = fp mod p``:
``H(k) = mix64(fp + 977 · GOLDEN) mod p``."""

UHLB_PRIME = 2_147_483_647
"""Prime ``P = 2³¹ − 1`` of the Carter–Wegman family used by UHLB."""

_SUBSTREAMS_DEFAULT = 1024  # paper: 100 substreams for n = 5..15 (p/n 7–20); 1024 keeps p/n >= 20 to n = 51
_EPS = 1e-9


def _substreams_param(high: int) -> Param:
    return Param(
        "substreams",
        "int",
        _SUBSTREAMS_DEFAULT,
        "number p of substreams (hash partitions of the key domain, p >> workers; rounded up to a multiple "
        "of the workers); the unit of assignment",
        low=1,
        high=high,
    )


# ---------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _drain(j, y, new, order, in_queue, loads, lbar, cap, limit):  # pragma: no cover - compiled
    """ELB phase 2 for instance ``j``: move to PQ the largest substream of load < θ, repeatedly.

    θ = min(L_j − l̄, cap, limit − taken); one traversal of the substreams in descending load.
    Returns the load moved to PQ.
    """
    taken = 0.0
    theta = min(loads[j] - lbar, cap, limit)
    if theta <= 0.0:
        return 0.0
    for idx in range(order.size):
        s = order[idx]
        if new[s] != j or in_queue[s]:
            continue
        ys = y[s]
        if ys > 0.0 and ys < theta:
            in_queue[s] = True
            loads[j] -= ys
            taken += ys
            theta = min(loads[j] - lbar, cap, limit - taken)
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
    loads = np.zeros(n)
    for s in range(p):
        loads[new[s]] += y[s]
    kept = 0
    for j in range(n):
        if not removed[j]:
            kept += 1
    if kept == 0 or p == 0:
        return new, loads
    w = 0.0
    for j in range(n):
        w += loads[j]
    lbar = w / kept
    order = np.argsort(-y, kind="mergesort")  # descending load, ties by substream id
    in_queue = np.zeros(p, np.bool_)
    pq = 0.0
    # Phase 1: every substream of an instance in R goes to PQ.
    for s in range(p):
        j = new[s]
        if removed[j]:
            in_queue[s] = True
            loads[j] -= y[s]
            pq += y[s]
    # Phase 2: drain the overloaded instances OI (descending load) towards l̄.
    drained = np.zeros(n, np.bool_)
    inst = np.argsort(-loads, kind="mergesort")
    for t in range(n):
        j = inst[t]
        if removed[j] or loads[j] <= u:
            continue
        drained[j] = True
        pq += _drain(j, y, new, order, in_queue, loads, lbar, cap, np.inf)
    # skewlab extension: underloaded instances (< v) whose deficit PQ cannot cover take load from the
    # instances above l̄ (descending), drained by the same rule.
    if fill:
        deficit = 0.0
        for j in range(n):
            if not removed[j] and loads[j] < v:
                deficit += lbar - loads[j]
        if deficit > pq + _EPS * max(w, 1.0):
            inst = np.argsort(-loads, kind="mergesort")
            for t in range(n):
                j = inst[t]
                if removed[j] or drained[j] or loads[j] <= lbar:
                    continue
                pq += _drain(j, y, new, order, in_queue, loads, lbar, cap, deficit - pq)
                if pq >= deficit:
                    break
    # Phase 3: PQ largest first to the least-loaded kept instance (the least-loaded one of UI).
    for idx in range(p):
        s = order[idx]
        if not in_queue[s]:
            continue
        best = -1
        for j in range(n):
            if removed[j]:
                continue
            if best < 0 or loads[j] < loads[best]:
                best = j
        new[s] = best
        loads[best] += y[s]
    return new, loads


@njit(cache=True)
def _clb_partners(cov, stddev, theta):  # pragma: no cover - compiled
    """In place: keep ``cov(i, j)`` where ``corr(i, j) ≥ θ`` (i ≠ j, both σ > 0); else −1 (no partner)."""
    p = cov.shape[0]
    for i in range(p):
        for j in range(p):
            if (
                i == j or stddev[i] <= 0.0 or stddev[j] <= 0.0
                or cov[i, j] < theta * stddev[i] * stddev[j] or cov[i, j] < 0.0
            ):
                cov[i, j] = -1.0


@njit(cache=True)
def _clb_split_kernel(partner_cov, n):  # pragma: no cover - compiled
    """Greedy max-cut splitting (Guo & Zhou Sec. 4, Alg. 2 lines 8–23 reconstructed).

    ``partner_cov[i, j] ≥ 0`` is cov(X_i, X_j) for partners, −1 otherwise.  Returns the set of every substream
    (0 … n_sets−1) and ``n_sets`` (< n when splitting stalled).
    """
    p = partner_cov.shape[0]
    group = np.zeros(p, np.int64)
    omega = np.zeros(p)
    for i in range(p):
        acc = 0.0
        for j in range(p):
            x = partner_cov[i, j]
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
            if i != k and partner_cov[k, i] >= 0.0:
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
                x = partner_cov[i, buf_r[b]]
                if x > 0.0:
                    acc += x
            omega[i] = max(omega[i] - acc, 0.0)
        for b in range(nr):
            i = buf_r[b]
            acc = 0.0
            for a in range(nh):
                x = partner_cov[i, buf_h[a]]
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
    """Guo & Zhou's routing: key → substream ``H(k) = fp mod p`` → worker ``sub_table[H(k)]``.  The
    table is initially ``s mod n``; the planner replaces it.

    ``p`` is the ``substreams`` parameter rounded up to a multiple of the worker count the router is
    built for (1024 → 1030 substreams at 10 workers), so that the initial table routes every key to
    ``fp mod n``, plain hash's worker (issue 39): before a plan, and whenever the migration gate
    returns to the static table, the rebalancer routes exactly as ``hash`` does.  A router pickled
    before this (no ``aligned``) keeps ``H(k) = mix64(fp + 977·GOLDEN) mod p``."""

    #: whether ``H(k) = fp mod p`` (class default: a router pickled before, with the mixed hash)
    aligned: bool = False

    def __init__(self, n_workers: int, n_sources: int, n_substreams: int):
        super().__init__(n_workers, n_sources)
        self.n_substreams = -(-int(n_substreams) // self.n_workers) * self.n_workers
        self.aligned = True
        self.sub_table = np.arange(self.n_substreams, dtype=np.int64) % self.n_workers

    def substream(self, fps: np.ndarray) -> np.ndarray:
        """``H(k)`` in ``[0, p)`` for every fingerprint."""
        fps = np.asarray(fps, dtype=np.uint64)
        if self.aligned:
            return (fps % np.uint64(self.n_substreams)).astype(np.int64)
        with np.errstate(over="ignore"):
            salted = fps + np.uint64(SUBSTREAM_HASH_INDEX) * GOLDEN
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

    def base_plan(self, stats: IntervalStats) -> Plan:
        """Every substream on its default worker again (the static table ``s ↦ s mod n``)."""
        home = self.base(stats.keys)
        return make_plan(self.name, stats, home, home, note="back to the base hash",
                         extra={"substream_table": self.default_table()})

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
