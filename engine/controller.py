"""The controller: statistics, rebalancing, the migration path and run metrics.

One controller serves both runtimes.  The local runtime (:mod:`engine.runtime.local`) and the Spark
runtime hand it, at the end of every interval, the per-(worker, key) aggregates the workers produced;
the controller

1. merges them into the per-worker keyed state (:class:`~engine.state.KeyedWindowState`);
2. computes the interval's per-worker loads under the cost model and every metric of
   :mod:`engine.metrics`;
3. builds :class:`~engine.grouping.IntervalStats` (c(k), S(k, w), frequency, current owner) and, for a
   rebalancing grouping whose ``should_rebalance`` says so (imbalance above θmax), asks for a plan and
   executes it through the migration path;
4. handles algorithm switches, parameter changes and worker-count changes through the **same**
   migration path (:meth:`Controller.migrate_to_owners`): every key's state is moved to where the
   (new) grouping will send the key, and the state moved is counted as migration.

Cost models (Fang Sec. III/V): ``linear`` — a tuple costs 1, so c(k) = tuples of k in the interval
and L(d) = tuples processed by d; ``join`` — a sliding-window self-join, where a tuple of k costs the
number of k's tuples in the window state it probes, so a (key, worker) pair with n tuples in the
interval and s units of window state costs n·s (quadratic in the key's frequency).

Migration rule after a change: for a single-owner grouping, target = ``grouping.owner(k)``; for a
split-key grouping, state stays where it is (it may legitimately be split) unless its worker no longer
exists, in which case it goes to h(k) = fp mod n.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from engine import registry
from engine.grouping import Grouping, IntervalStats, Plan
from engine.keys import Vocabulary, home
from engine.metrics import load_metrics
from engine.params import ParamError
from engine.state import KeyedWindowState, aggregate_pairs, decode, encode

__all__ = ["COST_MODELS", "Controller", "MigrationEvent"]

COST_MODELS = ("linear", "join")


@dataclass
class MigrationEvent:
    """One execution of the migration path (pause moved keys → move state → resume)."""

    interval: int
    reason: str  # "rebalance", "switch", "params", "workers"
    keys: int
    state_moved: float
    total_state: float
    pause_seconds: float
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def migration_cost(self) -> float:
        return self.state_moved / self.total_state if self.total_state > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "interval": self.interval,
            "reason": self.reason,
            "keys": self.keys,
            "state_moved": self.state_moved,
            "total_state": self.total_state,
            "migration_cost": self.migration_cost,
            "pause_seconds": self.pause_seconds,
            **self.detail,
        }


class Controller:
    """Keeps state, statistics and the grouping of one run (see module docstring)."""

    def __init__(
        self,
        grouping: Grouping,
        vocab: Vocabulary,
        *,
        window: int = 10,
        cost_model: str = "linear",
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        if cost_model not in COST_MODELS:
            raise ParamError(f"cost model must be one of {'|'.join(COST_MODELS)}, got {cost_model!r}")
        self.grouping = grouping
        self.vocab = vocab
        self.window = int(window)
        self.cost_model = cost_model
        self.state = KeyedWindowState(self.window)
        self.interval = 0
        self.cum_loads = np.zeros(grouping.n_workers, dtype=np.float64)
        self.cum_tuples = 0
        self.cum_route_seconds = 0.0
        self.cum_plan_seconds = 0.0
        self.cum_state_moved = 0.0
        self.cum_state_total = 0.0
        self._pair_log: list[np.ndarray] = []  # distinct (key, worker) codes per interval, compacted lazily
        self.migrations: list[MigrationEvent] = []
        self.events: list[dict[str, Any]] = []
        self.intervals: list[dict[str, Any]] = []
        self._pending_moved = 0.0
        self._pending_keys = 0
        self._on_event = on_event

    # ------------------------------------------------------------------ helpers
    @property
    def n_workers(self) -> int:
        return self.grouping.n_workers

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
        keys_w, workers_w = decode(codes)
        key_ids, size = aggregate_pairs(keys_w, window_counts)
        if interval_codes is None:
            interval_codes = np.zeros(0, np.int64)
            interval_counts = np.zeros(0, np.int64)
        ik, _ = decode(interval_codes)
        count = np.zeros(key_ids.size, dtype=np.int64)
        if ik.size:
            pos = np.searchsorted(key_ids, ik)
            np.add.at(count, pos, interval_counts)
        if self.cost_model == "linear":
            cost = count.astype(np.float64)
        else:
            cost = np.zeros(key_ids.size, dtype=np.float64)
            if ik.size:
                # n tuples of (k, d) in the interval probe s units of (k, d)'s window state.
                s_pair = window_counts[np.searchsorted(codes, interval_codes)]
                np.add.at(cost, np.searchsorted(key_ids, ik), interval_counts * s_pair.astype(np.float64))
        fps = self.vocab.fps[key_ids]
        owner = self.grouping.owner(fps) if self.grouping.single_owner else None
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
            w = counts * merged_counts[np.searchsorted(merged_codes, codes)]
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
        codes = encode(key_ids, workers)
        self.state.add_interval(codes, counts)
        codes, counts = aggregate_pairs(codes, np.asarray(counts, dtype=np.int64))
        tuples = int(counts.sum())
        loads = self.interval_loads(codes, counts)
        self._grow_cum_loads()
        self.cum_loads[: loads.size] += loads
        self.cum_tuples += tuples
        self.cum_route_seconds += route_seconds
        self._pair_log.append(codes)
        if len(self._pair_log) >= 32:
            self._pair_log = [np.unique(np.concatenate(self._pair_log))]

        ik, _ = decode(codes)
        n_keys = int(np.unique(ik).size)
        row: dict[str, Any] = {
            "interval": self.interval,
            "algorithm": self.grouping.name,
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
        self.grouping.observe(stats)
        plan: Plan | None = None
        moved = self._pending_moved
        moved_keys = self._pending_keys
        self._pending_moved, self._pending_keys = 0.0, 0
        plan_seconds = 0.0
        if rebalance and self.grouping.rebalancing and stats.keys.size and self.grouping.should_rebalance(stats):
            plan = self.grouping.plan(stats)
            plan_seconds = plan.plan_seconds
            ev = self._execute_plan(stats, plan)
            moved += ev.state_moved
            moved_keys += ev.keys
        self.cum_plan_seconds += plan_seconds
        self.cum_state_moved += moved
        self.cum_state_total += total_state
        row.update(
            {
                "routing_table_size": self.grouping.routing_table_size(),
                "migration_cost": moved / total_state if total_state > 0 else 0.0,
                "state_moved": moved,
                "migrated_keys": moved_keys,
                "total_state": total_state,
                "plan_seconds": plan_seconds,
                "rebalanced": plan is not None,
            }
        )
        if plan is not None:
            row["plan_feasible"] = plan.feasible
            if plan.note:
                row["plan_note"] = plan.note
        self.intervals.append(row)
        self.interval += 1
        return row

    # ------------------------------------------------------------------ migration path
    def _move(self, key_ids: np.ndarray, targets: np.ndarray, reason: str, **detail: Any) -> MigrationEvent:
        total = self.state.total()
        t0 = time.perf_counter()
        moved, n_keys = self.state.move(key_ids, targets)
        ev = MigrationEvent(self.interval, reason, n_keys, moved, total, time.perf_counter() - t0, detail)
        if n_keys:
            self.migrations.append(ev)
        return ev

    def _execute_plan(self, stats: IntervalStats, plan: Plan) -> MigrationEvent:
        if stats.key_ids is None:
            raise ValueError("IntervalStats.key_ids is required to execute a plan (stats from Controller.stats)")
        ev = self._move(
            stats.key_ids[plan.moved],
            plan.assignment[plan.moved],
            "rebalance",
            feasible=plan.feasible,
            note=plan.note,
            plan_seconds=plan.plan_seconds,
        )
        self.grouping.apply(plan)
        self._event(
            "rebalance",
            algorithm=self.grouping.name,
            keys=ev.keys,
            state_moved=ev.state_moved,
            migration_cost=ev.migration_cost,
            feasible=plan.feasible,
            note=plan.note,
        )
        return ev

    def migrate_to_owners(self, reason: str, **detail: Any) -> MigrationEvent:
        """Move every key's state to where the current grouping sends it (see module docstring)."""
        codes, _ = self.state.merged()
        keys, workers = decode(codes)
        if keys.size == 0:
            return MigrationEvent(self.interval, reason, 0, 0.0, 0.0, 0.0, dict(detail))
        if self.grouping.single_owner:
            uk = np.unique(keys)
            targets = self.grouping.owner(self.vocab.fps[uk])
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

        Changing only parameters of the current algorithm keeps its routing table (no forced
        migration); a different algorithm starts from its own base routing.
        """
        old = self.grouping
        new = registry.create(name, old.n_workers, old.n_sources, old.seed, params)
        same = name == old.name
        if same and old.rebalancing and hasattr(old, "table") and hasattr(new, "table"):
            new.table = old.table  # type: ignore[attr-defined]
        self.grouping = new
        reason = "params" if same else "switch"
        ev = self.migrate_to_owners(reason, algorithm=name)
        return self._event(
            reason,
            previous=old.name,
            algorithm=name,
            params=dict(new.p),
            keys=ev.keys,
            state_moved=ev.state_moved,
            migration_cost=ev.migration_cost,
        )

    def set_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Change parameters of the current algorithm (validated against its declaration)."""
        merged = {**self.grouping.p, **dict(params)}
        return self.switch(self.grouping.name, merged)

    def resize(self, n_workers: int) -> dict[str, Any]:
        """Change the number of workers; state on removed workers and re-homed keys migrates."""
        if int(n_workers) < 1:
            raise ParamError(f"workers must be >= 1, got {n_workers}")
        previous = self.n_workers
        self.grouping.resize(int(n_workers))
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

    # ------------------------------------------------------------------ results
    def results(self) -> dict[str, int]:
        """Merged per-key windowed results: key name → count over the last ``window`` intervals."""
        key_ids, counts = self.state.per_key()
        names = self.vocab.names
        return {names[int(k)]: int(c) for k, c in zip(key_ids, counts)}

    def summary(self) -> dict[str, Any]:
        """Cumulative metrics of the run so far (same names as the per-interval rows)."""
        loads = self.cum_loads[: self.n_workers] if self.cum_loads.size >= self.n_workers else self.cum_loads
        pairs = np.unique(np.concatenate(self._pair_log)) if self._pair_log else np.zeros(0, np.int64)
        self._pair_log = [pairs]
        keys, _ = decode(pairs)
        n_keys = int(np.unique(keys).size)
        return {
            "algorithm": self.grouping.name,
            "workers": self.n_workers,
            "messages": self.cum_tuples,
            "worker_loads": self.cum_loads.tolist(),
            **load_metrics(loads if loads.size else self.cum_loads),
            "replication": float(pairs.size / n_keys) if n_keys else 0.0,
            "routing_table_size": self.grouping.routing_table_size(),
            "migration_cost": self.cum_state_moved / self.cum_state_total if self.cum_state_total > 0 else 0.0,
            "state_moved": self.cum_state_moved,
            "migrations": len(self.migrations),
            "plan_seconds": self.cum_plan_seconds,
            "tuples_per_second": self.cum_tuples / self.cum_route_seconds if self.cum_route_seconds > 0 else 0.0,
        }

