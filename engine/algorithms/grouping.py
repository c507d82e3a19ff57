"""The interface every algorithm implements — a :class:`Router` and a :class:`Planner` — and the data
they exchange with the controller.

A grouping decides, for a **batch** of keys emitted by one upstream **source**, which of the ``n``
downstream workers receives each tuple.  Keys arrive as ``uint64`` fingerprints (see
:mod:`skewlab.engine.algorithms.keys`); workers are ``int64`` ids in ``[0, n)``.

Every algorithm is split in two (issue #16), because the two halves run in different places:

* the **router** runs where the sources route (Spark executors): ``route(fps, source)``,
  ``owner(fps)``, per-source state (``source_state`` / ``set_source_state``), ``n_workers``, and
  for rebalancers the base hash/ring and the routing table A.  It is small and picklable: the
  Spark engine pickles it into every micro-batch's routing snapshot.
* the **planner** runs on the driver: ``observe``, ``should_rebalance``, ``plan``, ``apply(plan)``
  (which updates the router it owns, ``planner.router``), ``resize``, ``set_params``,
  ``routing_table_size``, ``describe`` and the class metadata.  Statistics kept only for planning
  (lossy counters, substream histories, plan bookkeeping) live here and never travel.

Two families share the interface:

* **Streaming groupings** (``hash``, ``consistent``, ``shuffle``, ``pkg``, ``dchoices``, ``wchoices``,
  ``rr-head``, ``dkg``) decide per tuple from per-source local state (load estimates, sketches).
  ``route`` updates that state as a side effect, exactly as each source would tuple by tuple.  Their
  whole state is routing state, so their planner (:class:`StreamingPlanner`) only builds the router.
* **Rebalancing groupings** (``llfd`` … ``uhlb``) keep every key on exactly one worker.  Between
  intervals the controller hands them :class:`IntervalStats`; they return a :class:`Plan` (new
  assignment, routing table, keys to migrate, migration cost), which the controller executes through
  the migration protocol and then passes to :meth:`Planner.apply`.

Routers must be picklable (plain attributes, numpy arrays; compiled kernels at module level).
"""

from __future__ import annotations

import copy
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

import numpy as np

from skewlab.engine.algorithms.keys import home as _home
from skewlab.engine.config.params import Param, resolve_params
from skewlab.engine.config.settings import SOURCES, WORKERS, check
from skewlab.engine.algorithms.table_lookup import build_key_index, lookup_keys
from skewlab.shared import copy_as_in_memory

__all__ = [
    "FAMILY_GATE_HELP", "GATE_PARAMS", "family_gate_param", "IntervalStats", "Plan", "Planner", "RebalancingPlanner", "Router", "RoutingTable",
    "StreamingPlanner", "TableRouter", "make_plan",
]


# ---------------------------------------------------------------------------------------------
# Data exchanged with the controller
# ---------------------------------------------------------------------------------------------
@dataclass
class IntervalStats:
    """Per-key statistics of one interval, as the controller hands them to a rebalancer.

    All arrays are aligned and have one entry per key that has state or load (``keys`` unique).

    * ``cost`` — computation cost c(k) in the statistics window (Fang Sec. III; load L(d) of a worker
      is the sum of c(k) over its keys).  Linear cost model: tuples; quadratic (window join): see
      the cost models of :mod:`skewlab.engine.control.controller` (``Controller(cost_model=...)``).
    * ``size`` — window-based state size S(k, w) (Fang Sec. III), the migration cost of moving k.
    * ``count`` — tuples of k in the last interval (frequency; Gedik's lossy counter input).
    * ``worker`` — current owner F(k) (``-1`` for keys without a single owner).
    * ``home`` — h(k) if the caller fixes it (``skewlab plan`` snapshots); ``None``: the grouping
      uses its own base hash.
    * ``key_ids`` — optional runtime-side key ids (:class:`skewlab.engine.algorithms.keys.Vocabulary` indices, int64)
      aligned with ``keys``; set by the controller, which migrates the state of ``key_ids[plan.moved]``.
      Groupings do not read it; ``None`` when the stats do not come from a runtime.
    """

    interval: int
    n_workers: int
    keys: np.ndarray
    cost: np.ndarray
    size: np.ndarray
    count: np.ndarray
    worker: np.ndarray
    home: np.ndarray | None = None
    names: list[str] | None = None
    key_ids: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.keys = np.asarray(self.keys, dtype=np.uint64)
        self.cost = np.asarray(self.cost, dtype=np.float64)
        self.size = np.asarray(self.size, dtype=np.float64)
        self.count = np.asarray(self.count, dtype=np.int64)
        self.worker = np.asarray(self.worker, dtype=np.int64)
        if self.home is not None:
            self.home = np.asarray(self.home, dtype=np.int64)
        if self.key_ids is not None:
            self.key_ids = np.asarray(self.key_ids, dtype=np.int64)
        m = self.keys.size
        for name in ("cost", "size", "count", "worker"):
            if getattr(self, name).size != m:
                raise ValueError(f"IntervalStats.{name} has {getattr(self, name).size} entries, keys has {m}")
        if self.home is not None and self.home.size != m:
            raise ValueError("IntervalStats.home is not aligned with keys")
        if self.key_ids is not None and self.key_ids.size != m:
            raise ValueError("IntervalStats.key_ids is not aligned with keys")

    def loads(self) -> np.ndarray:
        """Current per-worker load L(d) = sum of c(k) over keys owned by d."""
        owned = self.worker >= 0
        return np.bincount(self.worker[owned], weights=self.cost[owned], minlength=self.n_workers)[
            : self.n_workers
        ]


@dataclass
class Plan:
    """The outcome of a rebalancing decision.

    ``assignment[i]`` is the new owner of ``keys[i]``; ``table_keys``/``table_workers`` is the routing
    table A after the plan (keys whose owner differs from their base hash); ``moved`` marks keys whose
    owner changes (their state migrates); ``migration_cost`` = state of moved keys / total state
    (Fang Sec. III, M normalised).  ``feasible`` is False when θmax or Amax could not be met, with
    ``note`` saying why; the plan is then still the best one found and may be applied.
    """

    algorithm: str
    keys: np.ndarray
    assignment: np.ndarray
    previous: np.ndarray
    table_keys: np.ndarray
    table_workers: np.ndarray
    loads: np.ndarray
    moved: np.ndarray
    migration_cost: float
    state_moved: float
    feasible: bool = True
    note: str = ""
    plan_seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def migrated_keys(self) -> int:
        return int(np.count_nonzero(self.moved))

    @property
    def routing_table_size(self) -> int:
        return int(self.table_keys.size)

    def imbalance(self) -> float:
        mean = float(self.loads.mean()) if self.loads.size else 0.0
        return float(self.loads.max() / mean - 1.0) if mean > 0 else 0.0


def make_plan(
    algorithm: str,
    stats: IntervalStats,
    assignment: np.ndarray,
    home: np.ndarray,
    *,
    theta_max: float | None = None,
    amax: int | None = None,
    feasible: bool | None = None,
    note: str = "",
    started: float | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Plan:
    """Build a :class:`Plan` from a new assignment; the one place derived plan fields are computed.

    ``home`` is the base hash of every stats key (h(k)); the routing table is the set of keys whose
    assignment differs from it.  When ``theta_max``/``amax`` are given, feasibility is checked here
    (θ(d) = |L(d) − L̄| / L̄ ≤ θmax for all d, |A| ≤ Amax, Fang Eq. 1–2) and the reasons are appended
    to ``note``; an explicit ``feasible=False`` from the algorithm is kept.
    """
    assignment = np.asarray(assignment, dtype=np.int64)
    home = np.asarray(home, dtype=np.int64)
    n = stats.n_workers
    loads = np.bincount(assignment, weights=stats.cost, minlength=n)[:n] if assignment.size else np.zeros(n)
    in_table = assignment != home
    previous = stats.worker
    moved = (previous >= 0) & (previous != assignment)
    total = float(stats.size.sum())
    state_moved = float(stats.size[moved].sum())
    notes = [note] if note else []
    ok = True if feasible is None else bool(feasible)
    if theta_max is not None and loads.size:
        mean = float(loads.mean())
        if mean > 0:
            worst = float(np.max(np.abs(loads - mean)) / mean)
            if worst > theta_max + 1e-9:
                ok = False
                msg = f"θ={worst:.4f} exceeds θmax={theta_max:g}"
                if not any(msg.split(" exceeds")[0] in s for s in notes):
                    notes.append(msg)
    if amax is not None and int(in_table.sum()) > amax:
        ok = False
        notes.append(f"routing table has {int(in_table.sum())} entries > Amax={amax}")
    order = np.argsort(stats.keys[in_table], kind="stable")
    return Plan(
        algorithm=algorithm,
        keys=stats.keys,
        assignment=assignment,
        previous=previous,
        table_keys=stats.keys[in_table][order],
        table_workers=assignment[in_table][order],
        loads=loads.astype(np.float64),
        moved=moved,
        migration_cost=state_moved / total if total > 0 else 0.0,
        state_moved=state_moved,
        feasible=ok,
        note="; ".join(notes),
        plan_seconds=(time.perf_counter() - started) if started is not None else 0.0,
        extra=dict(extra or {}),
    )


# ---------------------------------------------------------------------------------------------
# Routing table
# ---------------------------------------------------------------------------------------------
class RoutingTable:
    """Explicit routing table A: fingerprint → worker (sorted arrays ``keys``, ``workers``; treat as
    immutable: build a new table to change it).  Lookups go through a hash index built on the first
    lookup (:mod:`skewlab.engine.algorithms.table_lookup`; derived data, not pickled)."""

    __slots__ = ("keys", "workers", "_index")

    def __init__(self, keys: np.ndarray | None = None, workers: np.ndarray | None = None) -> None:
        keys = np.asarray(keys if keys is not None else [], dtype=np.uint64)
        workers = np.asarray(workers if workers is not None else [], dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        self.keys = keys[order]
        self.workers = workers[order]
        self._index = None

    def __deepcopy__(self, memo: dict) -> "RoutingTable":
        return copy_as_in_memory(self, memo)  # no packing, no rebuilt index

    def __getstate__(self) -> tuple:
        return self.keys, self.workers

    def __setstate__(self, state: tuple) -> None:
        self.keys, self.workers = state
        self._index = None

    def __len__(self) -> int:
        return int(self.keys.size)

    def lookup(self, fps: np.ndarray, default: np.ndarray, *, inplace: bool = False) -> np.ndarray:
        """``A[k]`` where k is in the table, else ``default`` (copied, or overwritten if ``inplace``)."""
        if self.keys.size == 0:
            return default if inplace else np.array(default, dtype=np.int64, copy=True)
        if self._index is None:
            self._index = build_key_index(self.keys, self.workers)
        return lookup_keys(self._index, fps, default, inplace=inplace)

    def as_dict(self) -> dict[int, int]:
        return {int(k): int(w) for k, w in zip(self.keys, self.workers)}


# ---------------------------------------------------------------------------------------------
# The interface: a Router for the executors, a Planner for the driver
# ---------------------------------------------------------------------------------------------
def _check_counts(n_workers: int, n_sources: int) -> None:
    """Workers and sources in their declared ranges (:mod:`skewlab.engine.config.settings`); ``ParamError`` otherwise."""
    check(WORKERS, n_workers)
    check(SOURCES, n_sources)


class Router(ABC):
    """The routing half of an algorithm: everything a task needs to route a batch, and nothing else.

    A runtime ships the router (pickled) to wherever the sources route: the Spark engine pickles it
    into every micro-batch's routing snapshot, so it holds only routing state (base hash or ring,
    routing table A, per-source load estimates and sketches) and the parameters routing reads
    (``p``); statistics kept for planning stay on the :class:`Planner`.
    """

    #: attributes holding per-source state with the source on axis 0 (local load estimates,
    #: sketches); a distributed runtime ships ``source_state(s)`` to the task routing source ``s``
    #: and stores what comes back with ``set_source_state``.
    source_state_attrs: ClassVar[tuple[str, ...]] = ()

    def __init__(self, n_workers: int, n_sources: int = 1, seed: int = 0, params: Mapping[str, Any] | None = None):
        _check_counts(n_workers, n_sources)
        self.n_workers = int(n_workers)
        self.n_sources = int(n_sources)
        self.seed = int(seed)
        self.p: dict[str, Any] = dict(params or {})

    @abstractmethod
    def route(self, fps: np.ndarray, source: int = 0) -> np.ndarray:
        """Workers (``int64`` in ``[0, n)``) for a batch of key fingerprints from ``source``.

        Processes the batch in order with the exact semantics of routing tuple by tuple, updating
        the source's local state.  An empty batch returns an empty array.
        """

    def owner(self, fps: np.ndarray) -> np.ndarray | None:
        """For single-owner routing: each key's worker now, without side effects; else ``None``."""
        return None

    def source_state(self, source: int) -> dict[str, Any]:
        """Copy of the state that belongs to ``source`` (see :attr:`source_state_attrs`)."""
        return {a: copy.deepcopy(getattr(self, a)[source]) for a in self.source_state_attrs}

    def set_source_state(self, source: int, state: Mapping[str, Any]) -> None:
        """Install state returned by the task that routed ``source``."""
        for a, value in state.items():
            if a not in self.source_state_attrs:
                raise KeyError(f"{type(self).__name__}: {a!r} is not per-source state")
            getattr(self, a)[source] = value

    def resize(self, n_workers: int) -> None:
        """Change the number of workers between intervals (local estimates restart)."""
        _check_counts(n_workers, self.n_sources)
        self.n_workers = int(n_workers)

    def describe(self) -> dict[str, Any]:
        """Routing details for :meth:`Planner.describe` (e.g. D-Choices' current d); default none."""
        return {}


class Planner(ABC):
    """The driver half of an algorithm: statistics, rebalancing decisions, parameters; owns its router.

    The registry instantiates planners (one class per algorithm).  The controller hands the planner
    :class:`IntervalStats` (:meth:`observe`), asks :meth:`should_rebalance` / :meth:`plan`, executes
    the plan through the migration path and then calls :meth:`apply`, which updates
    :attr:`router`.  Runtimes route with ``planner.router``; only the router travels to executors.

    Class attributes describe the algorithm to the registry, the CLI, the engine and the dashboard:
    ``name`` (registry name), ``summary`` (one line), ``paper`` (reference), ``params`` (declared
    :class:`~skewlab.engine.config.params.Param` tuple), ``single_owner`` (every key lives on one worker at a time;
    False for split-key groupings, which cannot serve a join), ``rebalancing`` (produces plans).
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    params: ClassVar[tuple[Param, ...]] = ()
    single_owner: ClassVar[bool] = True
    rebalancing: ClassVar[bool] = False

    def __init__(
        self,
        n_workers: int,
        n_sources: int = 1,
        seed: int = 0,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        _check_counts(n_workers, n_sources)
        self.seed = int(seed)
        self.p: dict[str, Any] = resolve_params(self.params, params, owner=self.name)
        self.router: Router = self.make_router(int(n_workers), int(n_sources))
        self.reset_planning()

    @abstractmethod
    def make_router(self, n_workers: int, n_sources: int) -> Router:
        """A fresh router for the current parameters (``self.p``, ``self.seed``)."""

    def reset_planning(self) -> None:
        """(Re)initialise the planner's own state from ``self.p``; default: there is none."""

    @property
    def n_workers(self) -> int:
        return self.router.n_workers

    @property
    def n_sources(self) -> int:
        return self.router.n_sources

    # -------------------------------------------------------------- parameters and workers
    def set_params(self, params: Mapping[str, Any]) -> None:
        """Change parameters (merged over the current ones, validated through the declared ``Param``s).

        The planner's state restarts from the new parameters and the router is rebuilt by
        :meth:`rebuild_router` (streaming groupings: fresh local state, as a new grouping would have;
        rebalancers keep their routing table A, so a parameter change forces no migration).  A
        ``ParamError`` leaves the planner unchanged.
        """
        p = resolve_params(self.params, {**self.p, **dict(params)}, owner=self.name)
        self.p = p
        self.router = self.rebuild_router(self.router)
        self.reset_planning()

    def rebuild_router(self, old: Router) -> Router:
        """The router after a parameter change; default: a fresh one for the same workers/sources."""
        return self.make_router(old.n_workers, old.n_sources)

    def resize(self, n_workers: int) -> None:
        """Change the number of workers between intervals (local estimates restart)."""
        self.router.resize(int(n_workers))

    # -------------------------------------------------------------- rebalancing path
    def observe(self, stats: IntervalStats) -> None:
        """Statistics of the interval that just ended (sketches, counters); default: nothing."""

    def should_rebalance(self, stats: IntervalStats) -> bool:
        """Whether the controller should ask for a plan now; default: never."""
        return False

    def plan(self, stats: IntervalStats) -> Plan | None:
        """A rebalancing plan for ``stats`` (rebalancers only); never raises for a hard instance."""
        return None

    def apply(self, plan: Plan) -> None:
        """Adopt ``plan`` after its state has migrated (rebalancers only): updates the router."""

    def routing_table_size(self) -> int:
        return 0

    # -------------------------------------------------------------- description
    def describe(self) -> dict[str, Any]:
        return {
            "algorithm": self.name,
            "workers": self.n_workers,
            "sources": self.n_sources,
            "params": dict(self.p),
            **self.router.describe(),
        }

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.p.items())
        return f"<{type(self).__name__} {self.name} n={self.n_workers} {args}>"


class StreamingPlanner(Planner):
    """Planner of a streaming grouping: its whole state is routing state, so it plans nothing and
    only builds its router (subclasses set :attr:`router_class`); ``single_owner`` groupings answer
    :meth:`Router.owner`."""

    router_class: ClassVar[type[Router]]

    def make_router(self, n_workers: int, n_sources: int) -> Router:
        return self.router_class(n_workers, n_sources, self.seed, self.p)


#: parameters of the controller's migration gate (:mod:`skewlab.engine.control.gate`), declared by every rebalancer
GATE_PARAMS: tuple[Param, ...] = (
    Param("gate", "bool", True,
          "skewlab extension: execute a plan only when gate_horizon · ρ · its predicted imbalance gain exceeds "
          "its migration cost, ρ = share of the earlier plans' predicted gain realised on the next interval "
          "(engine/control/gate.py), and only while the planner's tables have not done worse than the base hash "
          "(else the routing returns to the base hash); skipped plans are recorded (event rebalance_skipped).  On by default: "
          "without it the rebalancers do worse than not rebalancing on the bursty movielens trace "
          "(docs/results/traces.md, \"Real trace\"); false = every plan executed, as in the papers (the Fang family "
          "also plans from decayed costs unless plan_decay=0)"),
    Param("gate_horizon", "int", 1, "gate: intervals over which a plan's predicted gain is counted",
          low=1, high=1000),
    Param("gate_min_persistence", "float", 0.3,
          "gate: a plan passes on its own predicted gain only once the judged plans have kept at least this share "
          "of their predicted gain on the next interval (ρ ≥ it); 0 = the ρ test alone (chosen on the real traces, "
          "docs/results/gate.md \"Defaults chosen on the real traces\")",
          low=0.0, high=1.0),
)


#: help of the gate's parameters whose default is the rebalancer family's (:func:`family_gate_param`)
FAMILY_GATE_HELP: dict[str, str] = {
    "gate_record": "gate: also execute a plan when the planner's tables have beaten the base hash on the record by "
                   "more than the plan's migration cost (gate_horizon · (−E) > cost, E the gate's mean excess over the "
                   "base hash); on by default for the Gedik family only (chosen on the real traces, "
                   "docs/results/gate.md \"Defaults chosen on the real traces\")",
    "gate_forgone": "gate: also execute a plan once the plans skipped in a row have forgone more gain than it costs "
                    "(the ski-rental rule, engine/control/gate.py: a persistent skew whose fix costs more than one "
                    "interval of gain is then rebalanced); on by default for the Fang family only (chosen on the real "
                    "traces, docs/results/gate.md \"The gain forgone by skipping\")",
}


def family_gate_param(name: str, default: bool) -> Param:
    """The gate's boolean parameter ``name`` (a key of :data:`FAMILY_GATE_HELP`) with the family's
    ``default`` (:attr:`RebalancingPlanner.gate_trusts_record`, :attr:`RebalancingPlanner.gate_counts_forgone`)."""
    return Param(name, "bool", bool(default), FAMILY_GATE_HELP[name])


class TableRouter(Router):
    """Routing of a table rebalancer: F(k) = A[k] if k ∈ A else h(k).

    h(k) is ``fp mod n`` (``ring is None``) or ``ring.lookup``: the base hash object of the planner's
    ``base`` parameter (:mod:`skewlab.engine.algorithms.base_hash`: the slot table or the consistent-hash
    ring); ``table`` is the routing table A.  The
    planner (:class:`RebalancingPlanner`) builds the ring and replaces the table when it applies a
    plan; the router itself carries no parameters.
    """

    def __init__(self, n_workers: int, n_sources: int = 1, ring: Any = None, table: RoutingTable | None = None):
        super().__init__(n_workers, n_sources)
        self.ring = ring
        self.table = table if table is not None else RoutingTable()

    def base(self, fps: np.ndarray) -> np.ndarray:
        """Base hash h(k) of the keys for the current workers; a new ``int64`` array (``route``
        writes the routing table's entries into it)."""
        if self.ring is None:
            return _home(fps, self.n_workers)
        return self.ring.lookup(fps)

    def route(self, fps: np.ndarray, source: int = 0) -> np.ndarray:
        fps = np.asarray(fps, dtype=np.uint64)
        return self.table.lookup(fps, self.base(fps), inplace=True)  # base() returns a new array

    def owner(self, fps: np.ndarray) -> np.ndarray:
        return self.route(fps)

    def rehash(self, n_workers: int, ring: Any) -> None:
        """New worker count and base hash; table entries of removed workers are dropped."""
        super().resize(n_workers)
        self.ring = ring
        keep = self.table.workers < self.n_workers
        self.table = RoutingTable(self.table.keys[keep], self.table.workers[keep])


class RebalancingPlanner(Planner):
    """Single-owner planner with base hash + routing table: F(k) = A[k] if k ∈ A else h(k).

    Its router is a :class:`TableRouter` unless a subclass builds another (Guo & Zhou's substream
    table).  Subclasses implement :meth:`compute_plan`.  The base hash h(k) is ``fp mod n`` unless
    the subclass's :meth:`make_ring` returns an object with ``lookup`` (the Fang and Gedik families:
    :func:`skewlab.engine.algorithms.base_hash.make_base`, the slot table by default or the papers'
    consistent-hash ring, Gedik's H_c, Fang Sec. II-A/V); :meth:`base` and :meth:`base_for` are the only places that
    compute h(k) for the planner, the routing and the migration after a resize.
    The controller asks for a plan when the current imbalance max_d θ(d) exceeds ``theta_max``
    (a declared parameter of every rebalancer that has one).  Every subclass that declares
    ``params`` also gets :data:`GATE_PARAMS` and ``gate_record`` with the family's default
    (:func:`family_gate_param`; appended here, so the gate is declared in one place): the
    controller's migration gate (:mod:`skewlab.engine.control.gate`) reads them.
    """

    rebalancing: ClassVar[bool] = True
    single_owner: ClassVar[bool] = True
    #: whether the migration gate, when it skips a plan, returns the routing table's entries the plan
    #: would route differently to the base hash (:meth:`stale_plan`); the Gedik family sets it
    drops_stale_entries: ClassVar[bool] = False
    #: the default of the gate's ``gate_record`` (:func:`family_gate_param`): whether a plan may also pass
    #: the gate on the record of the planner's tables against the base hash; the Gedik family sets it
    gate_trusts_record: ClassVar[bool] = False
    #: the default of the gate's ``gate_forgone`` (:func:`family_gate_param`): whether a plan may also pass
    #: the gate once the skipped plans have forgone more than it costs; the Fang family sets it
    gate_counts_forgone: ClassVar[bool] = False

    #: the worker count the planner was built with: the slot-table base hash is plain hash's
    #: ``fp mod n`` there (:mod:`skewlab.engine.algorithms.base_hash`); ``None`` in a planner pickled
    #: before it existed (those route by a ring or fp mod n, which ignore it)
    base_workers: int | None = None

    def __init__(self, n_workers: int, n_sources: int = 1, seed: int = 0,
                 params: Mapping[str, Any] | None = None) -> None:
        self.base_workers = int(n_workers)
        super().__init__(n_workers, n_sources, seed, params)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "params" in cls.__dict__ and not any(p.name == "gate" for p in cls.params):
            cls.params = tuple(cls.params) + GATE_PARAMS + (family_gate_param("gate_record", cls.gate_trusts_record),
                                                            family_gate_param("gate_forgone", cls.gate_counts_forgone))

    def make_router(self, n_workers: int, n_sources: int) -> Router:
        return TableRouter(n_workers, n_sources, self.make_ring(n_workers))

    def rebuild_router(self, old: Router) -> Router:
        """After a parameter change: the base hash of the new parameters, the routing table kept."""
        new = self.make_router(old.n_workers, old.n_sources)
        if isinstance(new, TableRouter) and isinstance(old, TableRouter):
            new.table = old.table
        return new

    # the routing table A and the ring live in the router (what the executors read)
    @property
    def table(self) -> RoutingTable:
        return self.router.table  # type: ignore[attr-defined]

    @table.setter
    def table(self, table: RoutingTable) -> None:
        self.router.table = table  # type: ignore[attr-defined]

    @property
    def ring(self) -> Any:
        return self.router.ring  # type: ignore[attr-defined]

    def make_ring(self, n_workers: int) -> Any:
        """The consistent-hash ring of the base hash for ``n_workers``; ``None``: h(k) = fp mod n."""
        return None

    def base(self, fps: np.ndarray) -> np.ndarray:
        """Base hash h(k) of the keys for the current workers (the router's)."""
        return self.router.base(fps)  # type: ignore[attr-defined]

    def base_for(self, fps: np.ndarray, n_workers: int) -> np.ndarray:
        """h(k) as it is with ``n_workers`` workers (a plan for statistics of another worker count)."""
        if int(n_workers) == self.n_workers:
            return self.base(fps)
        ring = self.make_ring(int(n_workers))
        return _home(fps, int(n_workers)) if ring is None else ring.lookup(fps)

    def resize(self, n_workers: int) -> None:
        _check_counts(n_workers, self.n_sources)
        self.router.rehash(int(n_workers), self.make_ring(int(n_workers)))  # type: ignore[attr-defined]

    def routing_table_size(self) -> int:
        return len(self.table)

    def home_of(self, stats: IntervalStats) -> np.ndarray:
        """h(k) for the stats keys: the caller's (snapshots) or the grouping's own base hash."""
        return stats.home if stats.home is not None else self.base_for(stats.keys, stats.n_workers)

    def should_rebalance(self, stats: IntervalStats) -> bool:
        theta_max = self.p.get("theta_max")
        if theta_max is None:
            return False
        loads = stats.loads()
        mean = float(loads.mean()) if loads.size else 0.0
        if mean <= 0:
            return False
        return float(np.max(np.abs(loads - mean)) / mean) > float(theta_max)

    def plan(self, stats: IntervalStats) -> Plan:
        started = time.perf_counter()
        plan = self.compute_plan(stats)
        plan.plan_seconds = time.perf_counter() - started
        return plan

    @abstractmethod
    def compute_plan(self, stats: IntervalStats) -> Plan:
        """Algorithm-specific planning; use :func:`make_plan` to build the result."""

    def base_plan(self, stats: IntervalStats) -> Plan:
        """The plan that routes every key by its base hash again (routing table emptied); the
        migration gate's alternative to a table that does worse than no table
        (:mod:`skewlab.engine.control.gate`)."""
        home = self.home_of(stats)
        return make_plan(self.name, stats, home, home, note="back to the base hash")

    def stale_plan(self, stats: IntervalStats, skipped: Plan) -> Plan:
        """The plan that returns to the base hash the routing table's entries the ``skipped`` plan
        would route differently (entries it no longer keeps as they are); every other key keeps its
        owner.  Used by the migration gate for planners with :attr:`drops_stale_entries`
        (:mod:`skewlab.engine.control.gate`)."""
        home = self.home_of(stats)
        current = np.where(stats.worker >= 0, stats.worker, home)
        stale = (current != home) & (np.asarray(skipped.assignment, np.int64) != current)
        return make_plan(self.name, stats, np.where(stale, home, current), home,
                         note="stale entries back to the base hash")

    def apply(self, plan: Plan) -> None:
        self.table = RoutingTable(plan.table_keys, plan.table_workers)
