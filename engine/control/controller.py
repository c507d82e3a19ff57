"""The controller: statistics, rebalancing, the migration path and run metrics.

One controller serves both runtimes.  The local runtime (:mod:`skewlab.engine.runtimes.local`) and the Spark
runtime hand it, at the end of every interval, the per-(worker, key) aggregates the workers produced;
the controller

1. merges them into per-(key, worker) window counts (:class:`~skewlab.engine.control.state.KeyedWindowState`): the
   local runtime's operator state; in the Spark runtime, whose workers keep their state in Spark's
   state store, the driver's statistics of where each key's window is (the move orders of a
   migration are computed from them: :meth:`Controller.drain_orders`);
2. computes the interval's per-worker loads under the cost model and every metric of
   :mod:`skewlab.engine.control.metrics`;
3. builds :class:`~skewlab.engine.algorithms.grouping.IntervalStats` (c(k), S(k, w), frequency, current owner) and, for a
   rebalancing grouping whose ``should_rebalance`` says so (imbalance above θmax), asks for a plan and
   executes it through the migration path — unless the grouping's parameter ``gate`` is on and the
   migration gate (:mod:`skewlab.engine.control.gate`) predicts that the plan does not pay for its migration: the plan
   is then skipped and recorded as such (interval row ``rebalance_skipped``, event
   ``rebalance_skipped``); with the gate on, an interval without an executed plan returns to the
   base hash when the gate finds the planner's routing worse than it (row ``back_to_base``, a
   ``rebalance`` event and migration noted "back to the base hash"); for planners with
   ``drops_stale_entries`` (the Gedik family) a skipped plan first returns to the base hash the table
   entries it would route differently (a ``rebalance`` event noted "stale entries back to the base hash");
4. handles algorithm switches, parameter changes and worker-count changes through the **same**
   migration path (:meth:`Controller.migrate_to_owners`): every key's state is moved to where the
   (new) grouping will send the key, and the state moved is counted as migration.

Cost models (Fang Sec. III/V): ``linear`` — a tuple costs 1, so c(k) = tuples of k in the interval
and L(d) = tuples processed by d; ``join`` — a sliding-window self-join, where a tuple of k costs the
number of k's tuples in the window state it probes, so a (key, worker) pair with n tuples in the
interval and s units of window state costs n·s (quadratic in the key's frequency).

Driver cost (issue #4: in the Spark engine :meth:`Controller.end_interval` runs on the driver once
per micro-batch while every executor waits, with ~100k-200k (key, worker) aggregates).  Everything
per interval is linear in the number of pairs, without re-sorting the window: the aggregates are
sorted once (:func:`skewlab.engine.control.state.aggregate_pairs`, a counting sort on the dense key ids) and handed
to the state as they are; the window totals are maintained
incrementally by the state; per-key sums are run-length sums over the sorted codes
(:func:`skewlab.engine.control.state.segment_sums`) and positions are found by linear merge walks
(:func:`skewlab.engine.control.state.searchsorted_ascending`) instead of ``np.unique``/binary searches; the pair log
(distinct (key, worker) pairs of the run, for the summary's replication) is one sorted array merged
with each interval's codes instead of a list of per-interval arrays re-sorted every 32 intervals; the
distinct-key count of an interval is the number of key runs; per-tuple ``counts`` are converted to
int64 before aggregation (history: docs/design-notes.md, "engine/control/controller.py").  A
pickled controller (the engine's snapshot, every batch) stores the pair log packed
(:func:`skewlab.engine.control.state.pack_codes`).

Migration rule after a change: for a single-owner grouping, target = ``grouping.router.owner(k)``; for a
split-key grouping, state stays where it is (it may legitimately be split) unless its worker no longer
exists, in which case it goes to h(k) = fp mod n.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from skewlab.engine.algorithms import registry
from skewlab.engine.control.gate import GateVerdict, MigrationGate
from skewlab.engine.algorithms.grouping import IntervalStats, Plan, Planner
from skewlab.engine.algorithms.keys import Vocabulary, home
from skewlab.engine.algorithms.sorted_lookup import find_sorted
from skewlab.engine.control.metrics import load_metrics
from skewlab.engine.config.params import ParamError
from skewlab.engine.config.settings import WORKERS, check
from skewlab.engine.control.state import (WORKER_BITS, KeyedWindowState, aggregate_pairs, decode, encode, pack_codes,
                          searchsorted_ascending, segment_sums, union_sorted, unpack_codes)
from skewlab.shared import copy_as_in_memory

__all__ = ["COST_MODELS", "Controller", "MigrationEvent", "compose_orders"]


def compose_orders(moves: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Compose moves ``(key ids, holders, targets)``, applied in list order, into one step: a row per
    (key, holder) with the key's *last* target, without the rows whose holder is that target.  A key
    moved twice in one step goes once, from every worker that held some of it to where it ends up;
    composing already composed orders with later moves gives the same as composing all the moves."""
    empty = np.zeros(0, dtype=np.int64)
    if not moves:
        return empty, empty, empty
    keys = np.concatenate([np.asarray(m[0], dtype=np.int64) for m in moves])
    holders = np.concatenate([np.asarray(m[1], dtype=np.int64) for m in moves])
    targets = np.concatenate([np.asarray(m[2], dtype=np.int64) for m in moves])
    if keys.size == 0:
        return empty, empty, empty
    uk, last_rev = np.unique(keys[::-1], return_index=True)
    final = targets[::-1][last_rev][np.searchsorted(uk, keys)]
    keep = holders != final
    k, h, t = keys[keep], holders[keep], final[keep]
    order = np.lexsort((h, k))  # distinct (key, holder) rows (a key's target is the same in all its rows)
    k, h, t = k[order], h[order], t[order]
    first = np.ones(k.size, dtype=bool)
    first[1:] = (k[1:] != k[:-1]) | (h[1:] != h[:-1])
    return k[first], h[first], t[first]

COST_MODELS = ("linear", "join")


@dataclass
class MigrationEvent:
    """One execution of the migration path (pause moved keys → move state → resume).

    ``interval`` is the interval the migration belongs to: the one whose metric ``migration_cost``
    counts it — a rebalance, the interval that planned it; a command, the first interval it is in
    effect for (the numbering of "applied at interval N").  ``interval_total`` is that interval's total
    state, set when the interval closes (:meth:`Controller.end_interval`); :attr:`interval_cost` is the
    migration's share of the interval's metric, so the shares of an interval's migrations sum to it.
    ``migration_cost`` divides by the total state when the migration ran (the plan's own figure).
    """

    interval: int
    reason: str  # "rebalance", "switch", "params", "workers"
    keys: int
    state_moved: float
    total_state: float
    pause_seconds: float
    detail: dict[str, Any] = field(default_factory=dict)
    interval_total: float | None = None

    @property
    def migration_cost(self) -> float:
        return self.state_moved / self.total_state if self.total_state > 0 else 0.0

    @property
    def interval_cost(self) -> float | None:
        """State moved / total state of the interval it belongs to (None before that interval closed)."""
        if self.interval_total is None:
            return None
        return self.state_moved / self.interval_total if self.interval_total > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "interval": self.interval,
            "reason": self.reason,
            "keys": self.keys,
            "state_moved": self.state_moved,
            "total_state": self.total_state,
            "migration_cost": self.migration_cost,
            "interval_total": self.interval_total,
            "pause_seconds": self.pause_seconds,
            **self.detail,
        }


class Controller:
    """Keeps state, statistics and the grouping of one run (see module docstring).

    ``grouping`` is the algorithm's :class:`~skewlab.engine.algorithms.grouping.Planner`; runtimes route with its
    ``grouping.router`` (the only part a distributed runtime ships to its tasks).
    """

    def __init__(
        self,
        planner: Planner,
        vocab: Vocabulary,
        *,
        window: int = 10,
        cost_model: str = "linear",
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        if cost_model not in COST_MODELS:
            raise ParamError(f"cost model must be one of {'|'.join(COST_MODELS)}, got {cost_model!r}")
        self.planner = planner
        self.vocab = vocab
        self.window = int(window)
        self.cost_model = cost_model
        self.state = KeyedWindowState(self.window)
        self.interval = 0
        self.cum_loads = np.zeros(planner.n_workers, dtype=np.float64)
        self.cum_tuples = 0
        self.cum_route_seconds = 0.0
        self.cum_plan_seconds = 0.0
        self.cum_state_moved = 0.0
        self.cum_state_total = 0.0
        # every distinct (key, worker) code so far, one sorted array (merged each interval: linear)
        self._pair_log: list[np.ndarray] = []
        self.migrations: list[MigrationEvent] = []
        self.events: list[dict[str, Any]] = []
        self.intervals: list[dict[str, Any]] = []
        self._pending_moved = 0.0
        self._pending_keys = 0
        #: the migration gate (used when the grouping's parameter ``gate`` is on)
        self.gate = MigrationGate()
        self.skipped_plans = 0
        self._on_event = on_event
        #: record move orders for a runtime whose state lives elsewhere (the Spark engine's workers)
        self.track_orders = False
        self._orders: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    # ------------------------------------------------------------------ helpers
    @property
    def n_workers(self) -> int:
        return self.planner.n_workers

    def _event(self, kind: str, **detail: Any) -> dict[str, Any]:
        ev = {"interval": self.interval, "kind": kind, **detail}
        self.events.append(ev)
        if self._on_event is not None:
            self._on_event(ev)
        return ev

    def _grow_cum_loads(self) -> None:
        n = self.n_workers
        if self.cum_loads.size < n:
            self.cum_loads = np.concatenate([self.cum_loads, np.zeros(n - self.cum_loads.size)])

    # ------------------------------------------------------------------ statistics
    def stats(self, interval_codes: np.ndarray | None = None, interval_counts: np.ndarray | None = None) -> IntervalStats:
        """Per-key statistics over the keys that hold state (see :class:`IntervalStats`)."""
        codes, window_counts = self.state.merged()
        key_ids, size = segment_sums(codes >> WORKER_BITS, window_counts)  # codes sorted: keys ascending
        if interval_codes is None:
            interval_codes = np.zeros(0, np.int64)
            interval_counts = np.zeros(0, np.int64)
        interval_codes = np.asarray(interval_codes, dtype=np.int64)
        ik = interval_codes >> WORKER_BITS
        count = np.zeros(key_ids.size, dtype=np.int64)
        if ik.size:
            pos = searchsorted_ascending(key_ids, ik)
            np.add.at(count, pos, interval_counts)
        if self.cost_model == "linear":
            cost = count.astype(np.float64)
        else:
            cost = np.zeros(key_ids.size, dtype=np.float64)
            if ik.size:
                # n tuples of (k, d) in the interval probe s units of (k, d)'s window state.
                s_pair = window_counts[searchsorted_ascending(codes, interval_codes)]
                np.add.at(cost, pos, interval_counts * s_pair.astype(np.float64))
        fps = self.vocab.fps[key_ids]
        owner = self.planner.router.owner(fps) if self.planner.single_owner else None
        worker = owner if owner is not None else np.full(key_ids.size, -1, dtype=np.int64)
        return IntervalStats(
            interval=self.interval,
            n_workers=self.n_workers,
            keys=fps,
            cost=cost,
            size=size.astype(np.float64),
            count=count,
            worker=worker,
            key_ids=key_ids,
        )

    def interval_loads(self, codes: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Per-worker load of one interval under the cost model."""
        _, workers = decode(codes)
        if self.cost_model == "linear":
            w = counts
        else:
            merged_codes, merged_counts = self.state.merged()
            w = counts * merged_counts[searchsorted_ascending(merged_codes, codes)]
        return np.bincount(workers, weights=w, minlength=self.n_workers)[: self.n_workers].astype(np.float64)

    # ------------------------------------------------------------------ the interval
    def end_interval(
        self,
        key_ids: np.ndarray,
        workers: np.ndarray,
        counts: np.ndarray | None = None,
        *,
        route_seconds: float = 0.0,
        rebalance: bool = True,
    ) -> dict[str, Any]:
        """Close one interval given per-tuple or per-pair (key, worker[, count]) aggregates.

        Returns the interval's metrics (also appended to :attr:`intervals`).
        """
        key_ids = np.asarray(key_ids, dtype=np.int64)
        workers = np.asarray(workers, dtype=np.int64)
        if workers.size and (workers.min() < 0 or workers.max() >= self.n_workers):
            raise ValueError("a tuple was routed outside [0, n_workers)")
        if counts is None:
            counts = np.ones(key_ids.size, dtype=np.int64)
        # aggregate once (sorted unique codes); the state takes them as they are
        codes, counts = aggregate_pairs(encode(key_ids, workers), np.asarray(counts, dtype=np.int64))
        self.state.add_interval(codes, counts)
        tuples = int(counts.sum())
        loads = self.interval_loads(codes, counts)
        self._grow_cum_loads()
        self.cum_loads[: loads.size] += loads
        self.cum_tuples += tuples
        self.cum_route_seconds += route_seconds
        self._pair_log = [union_sorted(self._pair_log[0], codes) if self._pair_log else codes]

        ik = codes >> WORKER_BITS  # ascending: distinct keys are the runs
        n_keys = int(np.count_nonzero(ik[1:] != ik[:-1])) + 1 if ik.size else 0
        row: dict[str, Any] = {
            "interval": self.interval,
            "algorithm": self.planner.name,
            "params": dict(self.planner.p),  # in force for this interval (a command may change them next)
            "workers": self.n_workers,
            "tuples": tuples,
            "worker_loads": loads.tolist(),
            **load_metrics(loads),
            "replication": float(codes.size / n_keys) if n_keys else 0.0,
            "distinct_keys": n_keys,
            "tuples_per_second": tuples / route_seconds if route_seconds > 0 else 0.0,
        }

        stats = self.stats(codes, counts)
        total_state = float(stats.size.sum())
        # the heaviest key's load this interval: no single-owner grouping can put less on one worker
        row["max_key_load"] = float(stats.cost.max()) if stats.cost.size else 0.0
        self.planner.observe(stats)
        plan: Plan | None = None
        moved = self._pending_moved
        moved_keys = self._pending_keys
        self._pending_moved, self._pending_keys = 0.0, 0
        plan_seconds = 0.0
        verdict: GateVerdict | None = None
        gated = self.planner.rebalancing and bool(self.planner.p.get("gate"))
        if gated:
            self.gate.observe(stats, self.planner.home_of(stats))  # judge the previous plan on this interval
        if rebalance and self.planner.rebalancing and stats.keys.size and self.planner.should_rebalance(stats):
            plan = self.planner.plan(stats)
            plan_seconds = plan.plan_seconds
            if gated:
                verdict = self.gate.judge(stats, plan, int(self.planner.p.get("gate_horizon", 1)),
                                          bool(self.planner.p.get("gate_record", False)),
                                          float(self.planner.p.get("gate_min_persistence", 0.0)),
                                          bool(self.planner.p.get("gate_forgone", False)))
            if verdict is None or verdict.pays:
                ev = self._execute_plan(stats, plan, verdict)
                moved += ev.state_moved
                moved_keys += ev.keys
            else:
                self._skip_plan(plan, verdict)
                ev = self._drop_stale_entries(stats, plan) if self.planner.drops_stale_entries else None
                if ev is not None:
                    moved += ev.state_moved
                    moved_keys += ev.keys
        skipped = plan is not None and verdict is not None and not verdict.pays
        back_to_base = False
        if gated and rebalance and stats.keys.size and (plan is None or skipped):
            ev = self._back_to_base(stats)
            if ev is not None:
                back_to_base = True
                moved += ev.state_moved
                moved_keys += ev.keys
        for m in reversed(self.migrations):  # this interval's migrations (commands' and plans'): their share
            if m.interval != self.interval:
                break
            m.interval_total = total_state
        self.cum_plan_seconds += plan_seconds
        self.cum_state_moved += moved
        self.cum_state_total += total_state
        row.update(
            {
                "routing_table_size": self.planner.routing_table_size(),
                "migration_cost": moved / total_state if total_state > 0 else 0.0,
                "state_moved": moved,
                "migrated_keys": moved_keys,
                "total_state": total_state,
                "plan_seconds": plan_seconds,
                "rebalanced": plan is not None and not skipped,
                "back_to_base": back_to_base,
            }
        )
        if plan is not None:
            row["plan_feasible"] = plan.feasible
            if plan.note:
                row["plan_note"] = plan.note
        if verdict is not None:
            row["rebalance_skipped"] = skipped
            row.update(verdict.to_dict())
        self.intervals.append(row)
        self.interval += 1
        return row

    # ------------------------------------------------------------------ migration path
    def _move(self, key_ids: np.ndarray, targets: np.ndarray, reason: str, **detail: Any) -> MigrationEvent:
        total = self.state.total()
        if self.track_orders:
            self._record_orders(np.asarray(key_ids, dtype=np.int64), np.asarray(targets, dtype=np.int64))
        t0 = time.perf_counter()
        moved, n_keys = self.state.move(key_ids, targets)
        ev = MigrationEvent(self.interval, reason, n_keys, moved, total, time.perf_counter() - t0, detail)
        if n_keys:
            self.migrations.append(ev)
        return ev

    def _record_orders(self, key_ids: np.ndarray, targets: np.ndarray) -> None:
        """The (key, holder, target) triples of a move: every worker whose window holds state of a
        moved key, other than the key's target."""
        codes, _ = self.state.merged()
        keys, workers = decode(codes)
        if keys.size == 0 or key_ids.size == 0:
            return
        order = np.argsort(key_ids, kind="stable")
        sk, st = key_ids[order], targets[order]
        pos, hit = find_sorted(sk, keys)
        hit &= st[pos] != workers
        if hit.any():
            self._orders.append((keys[hit], workers[hit], st[pos[hit]]))

    def drain_orders(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The moves recorded since the last call, composed (:func:`compose_orders`)."""
        out = compose_orders(self._orders)
        self._orders = []
        return out

    def _back_to_base(self, stats: IntervalStats) -> MigrationEvent | None:
        """Route every key by the base hash again when the gate finds that the planner's routing did
        worse than it (:attr:`MigrationGate.tables_lose`); the migration, or None."""
        if not self.gate.tables_lose:
            return None
        plan = self.planner.base_plan(stats)
        if not plan.migrated_keys:
            return None
        ev = self._move(stats.key_ids[plan.moved], plan.assignment[plan.moved], "back_to_base",
                        algorithm=self.planner.name, excess=self.gate.mean_excess)
        self.planner.apply(plan)
        self._event("rebalance", algorithm=self.planner.name, keys=ev.keys, state_moved=ev.state_moved,
                    migration_cost=ev.migration_cost, feasible=plan.feasible, note=plan.note,
                    gate_excess=self.gate.mean_excess)
        self.gate.forget_pending()  # the owners are the base hash's again: no plan left to judge
        return ev

    def _drop_stale_entries(self, stats: IntervalStats, skipped: Plan) -> MigrationEvent | None:
        """Return to the base hash the table entries the skipped plan would route differently
        (:meth:`~skewlab.engine.algorithms.grouping.RebalancingPlanner.stale_plan`); the migration,
        or None when there is none."""
        part = self.planner.stale_plan(stats, skipped)
        if not part.migrated_keys:
            return None
        ev = self._move(stats.key_ids[part.moved], part.assignment[part.moved], "stale_entries",
                        algorithm=self.planner.name)
        self.planner.apply(part)
        self._event("rebalance", algorithm=self.planner.name, keys=ev.keys, state_moved=ev.state_moved,
                    migration_cost=ev.migration_cost, feasible=part.feasible, note=part.note)
        self.gate.forget_pending()  # the owners the skipped plan was judged against changed
        return ev

    def _skip_plan(self, plan: Plan, verdict: GateVerdict) -> None:
        """Record a plan the gate skipped: nothing moves, the grouping keeps its routing."""
        self.skipped_plans += 1
        self._event(
            "rebalance_skipped",
            algorithm=self.planner.name,
            keys=plan.migrated_keys,
            state_moved=plan.state_moved,
            migration_cost=plan.migration_cost,
            feasible=plan.feasible,
            note=plan.note,
            **verdict.to_dict(),
        )

    def _execute_plan(self, stats: IntervalStats, plan: Plan, verdict: GateVerdict | None = None) -> MigrationEvent:
        if stats.key_ids is None:
            raise ValueError("IntervalStats.key_ids is required to execute a plan (stats from Controller.stats)")
        ev = self._move(
            stats.key_ids[plan.moved],
            plan.assignment[plan.moved],
            "rebalance",
            algorithm=self.planner.name,
            feasible=plan.feasible,
            note=plan.note,
            plan_seconds=plan.plan_seconds,
        )
        self.planner.apply(plan)
        self._event(
            "rebalance",
            algorithm=self.planner.name,
            keys=ev.keys,
            state_moved=ev.state_moved,
            migration_cost=ev.migration_cost,
            feasible=plan.feasible,
            note=plan.note,
            **(verdict.to_dict() if verdict is not None else {}),
        )
        return ev

    def migrate_to_owners(self, reason: str, **detail: Any) -> MigrationEvent:
        """Move every key's state to where the current grouping sends it (see module docstring)."""
        self.gate.forget_pending()  # owners change: the last plan cannot be judged
        codes, _ = self.state.merged()
        keys, workers = decode(codes)
        if keys.size == 0:
            return MigrationEvent(self.interval, reason, 0, 0.0, 0.0, 0.0, dict(detail))
        if self.planner.single_owner:
            uk = np.unique(keys)
            targets = self.planner.router.owner(self.vocab.fps[uk])
        else:
            stray = workers >= self.n_workers
            uk = np.unique(keys[stray])
            targets = home(self.vocab.fps[uk], self.n_workers)
        ev = self._move(uk, targets, reason, **detail)
        self._pending_moved += ev.state_moved
        self._pending_keys += ev.keys
        return ev

    # ------------------------------------------------------------------ operator actions
    def switch(self, name: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Switch to algorithm ``name`` (validated); state follows through the migration path.

        A different algorithm is a new planner that starts from its own base routing.  Naming the
        current algorithm sets its parameters to ``params`` (missing ones: defaults) through
        :meth:`set_params`, which keeps a rebalancer's routing table (no forced migration).
        """
        old = self.planner
        if name == old.name:
            return self.set_params(registry.validate_params(name, params))
        self.planner = registry.create(name, old.n_workers, old.n_sources, old.seed, params)
        return self._reconfigured("switch", old.name)

    def set_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Change parameters of the current algorithm (merged over the current ones, validated against
        its declaration by :meth:`skewlab.engine.algorithms.grouping.Planner.set_params`); state follows its router."""
        self.planner.set_params(params)
        return self._reconfigured("params", self.planner.name)

    def _reconfigured(self, reason: str, previous: str) -> dict[str, Any]:
        """Migrate every key to its owner under the changed grouping and record the event."""
        name = self.planner.name
        ev = self.migrate_to_owners(reason, algorithm=name)
        return self._event(
            reason,
            previous=previous,
            algorithm=name,
            params=dict(self.planner.p),
            keys=ev.keys,
            state_moved=ev.state_moved,
            migration_cost=ev.migration_cost,
        )

    def resize(self, n_workers: int) -> dict[str, Any]:
        """Change the number of workers; state on removed workers and re-homed keys migrates."""
        check(WORKERS, n_workers)
        previous = self.n_workers
        self.planner.resize(int(n_workers))
        self._grow_cum_loads()
        ev = self.migrate_to_owners("workers", workers=int(n_workers))
        return self._event(
            "workers",
            previous=previous,
            workers=int(n_workers),
            keys=ev.keys,
            state_moved=ev.state_moved,
            migration_cost=ev.migration_cost,
        )

    # ------------------------------------------------------------------ pickling
    def __deepcopy__(self, memo: dict) -> "Controller":
        return copy_as_in_memory(self, memo)  # no packing, no rebuilt index

    def __getstate__(self) -> dict[str, Any]:
        """Everything as is, except the pair log: packed (:func:`skewlab.engine.control.state.pack_codes`, ~2 bytes per
        code instead of 8) because a snapshot pickles the controller every micro-batch."""
        state = dict(self.__dict__)
        state["_pair_log"] = [pack_codes(a) for a in self._pair_log]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        state["_pair_log"] = [unpack_codes(p) for p in state["_pair_log"]]
        self.__dict__.update(state)

    # ------------------------------------------------------------------ results
    def results(self) -> dict[str, int]:
        """Merged per-key windowed results: key name → count over the last ``window`` intervals."""
        key_ids, counts = self.state.per_key()
        names = self.vocab.names
        return {names[int(k)]: int(c) for k, c in zip(key_ids, counts)}

    def summary(self) -> dict[str, Any]:
        """Cumulative metrics of the run so far (same names as the per-interval rows)."""
        loads = self.cum_loads[: self.n_workers] if self.cum_loads.size >= self.n_workers else self.cum_loads
        pairs = self._pair_log[0] if len(self._pair_log) == 1 else (
            np.unique(np.concatenate(self._pair_log)) if self._pair_log else np.zeros(0, np.int64))
        self._pair_log = [pairs]
        keys = pairs >> WORKER_BITS
        n_keys = int(np.count_nonzero(keys[1:] != keys[:-1])) + 1 if keys.size else 0
        return {
            "algorithm": self.planner.name,
            "workers": self.n_workers,
            "messages": self.cum_tuples,
            "worker_loads": self.cum_loads.tolist(),
            **load_metrics(loads if loads.size else self.cum_loads),
            "replication": float(pairs.size / n_keys) if n_keys else 0.0,
            "routing_table_size": self.planner.routing_table_size(),
            "migration_cost": self.cum_state_moved / self.cum_state_total if self.cum_state_total > 0 else 0.0,
            "state_moved": self.cum_state_moved,
            "migrations": len(self.migrations),
            "skipped_plans": self.skipped_plans,
            "plan_seconds": self.cum_plan_seconds,
            "tuples_per_second": self.cum_tuples / self.cum_route_seconds if self.cum_route_seconds > 0 else 0.0,
        }

