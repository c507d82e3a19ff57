"""Migration gate: execute a rebalancing plan only when its predicted gain pays for its migration.

skewlab extension (issue #15), not in any of the papers: the rebalancers (Fang, Gedik, Guo & Zhou)
plan from the interval that just ended and move state whenever the imbalance exceeds their trigger,
so on bursty keys they move state after every burst, and the keys they moved are no longer the hot
ones in the next interval: the run pays the migration and gains nothing.  The gate is one check in the
controller, for every rebalancer (declared parameter ``gate`` of :class:`engine.grouping.RebalancingGrouping`):

* predicted cost of the next interval per key, ``ĉ(k) = min(c_i(k), c_{i−1}(k))`` — the part of the
  key's cost that persisted over the last two intervals (a key that burst in interval i only, or that
  cooled, predicts ~0; a key that stays hot predicts its cost);
* predicted gain = ``imbalance(L_now) − imbalance(L_plan)`` with ``L_now``/``L_plan`` the per-worker
  sums of ĉ under the current owners and under the plan's assignment (imbalance = max/mean − 1, the
  headline metric of :mod:`engine.metrics`);
* the plan is executed iff ``horizon · gain > migration_cost`` (state moved / total state, the
  plan's own :attr:`~engine.grouping.Plan.migration_cost`), ``horizon`` = ``gate_horizon`` intervals
  over which a gain is expected to last.  Both terms are in the units of the per-interval record
  (``imbalance`` and ``migration_cost``), whose sum over the run is what the gate tries to keep at or
  below that of not rebalancing.

The first interval of a run (no previous interval) predicts no gain: no plan passes before a skew
has persisted for two intervals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.grouping import IntervalStats, Plan
from engine.metrics import load_metrics
from engine.state import searchsorted_ascending

__all__ = ["GateVerdict", "judge"]


@dataclass(frozen=True)
class GateVerdict:
    """Outcome of :func:`judge`: ``gain`` (predicted imbalance reduction per interval), ``cost``
    (migration cost of the plan), ``horizon`` and whether the plan pays."""

    gain: float
    cost: float
    horizon: int
    pays: bool

    def to_dict(self) -> dict[str, float]:
        return {"gate_gain": self.gain, "gate_cost": self.cost, "gate_horizon": self.horizon}


def persistent_cost(stats: IntervalStats, prev_key_ids: np.ndarray | None, prev_cost: np.ndarray | None) -> np.ndarray:
    """``min(c_i(k), c_{i−1}(k))`` for the stats keys; ``prev_key_ids`` ascending (the controller's
    previous :class:`IntervalStats`), keys absent from it had cost 0."""
    out = np.zeros(stats.cost.size, dtype=np.float64)
    if prev_key_ids is None or prev_cost is None or prev_key_ids.size == 0 or stats.key_ids is None:
        return out
    ids = stats.key_ids
    pos = np.minimum(searchsorted_ascending(prev_key_ids, ids), prev_key_ids.size - 1)
    hit = prev_key_ids[pos] == ids
    out[hit] = np.minimum(stats.cost[hit], prev_cost[pos[hit]])
    return out


def judge(stats: IntervalStats, plan: Plan, prev_key_ids: np.ndarray | None, prev_cost: np.ndarray | None,
          horizon: int) -> GateVerdict:
    """Whether ``plan`` pays (see the module docstring)."""
    n = stats.n_workers
    c = persistent_cost(stats, prev_key_ids, prev_cost)
    owned = stats.worker >= 0
    now = np.bincount(stats.worker[owned], weights=c[owned], minlength=n)[:n]
    new = np.bincount(np.asarray(plan.assignment, dtype=np.int64), weights=c, minlength=n)[:n]
    gain = load_metrics(now)["imbalance"] - load_metrics(new)["imbalance"]
    cost = float(plan.migration_cost)
    return GateVerdict(float(gain), cost, int(horizon), bool(horizon * gain > cost))
