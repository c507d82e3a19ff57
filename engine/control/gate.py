"""Migration gate: execute a rebalancing plan only when its expected gain pays for its migration.

skewlab extension (issue #15), not in any of the papers: the rebalancers (Fang, Gedik, Guo & Zhou)
plan from the interval that just ended and move state whenever the imbalance exceeds their trigger.
On bursty keys the keys a plan moves are no longer the hot ones when the plan is in force: the run
pays the migration and gains nothing (or loses: a plan that offsets a burst unbalances the rest).
The gate is one check in the controller for every rebalancer (declared parameters ``gate`` and
``gate_horizon`` of :class:`skewlab.engine.algorithms.grouping.RebalancingPlanner`).  It learns, from the stream
itself, how much of a plan's gain survives into the next interval:

* **predicted gain** of a plan made after interval i: ``imbalance(L_i under the current owners) −
  imbalance(L_i under the plan)``, both on interval i's key costs c_i (the interval the rebalancer
  planned for; imbalance = max/mean − 1, the headline metric of :mod:`skewlab.engine.control.metrics`);
* **realised gain**, measured after interval i+1 for *every* plan, executed or skipped: the same
  difference on c_{i+1}, between the owners with the plan's moves and without them (so a skipped
  plan is judged too, and the gate can learn that plans became useful again);
* **persistence** ρ = R / P with R, P the realised and predicted gains of the judged plans summed
  with weight :data:`FORGET` = 0.9 per judged plan of age (recent plans count most, a large plan
  more than a small one; with 0.5 a single lucky coincidence — a skipped plan whose unloaded worker
  happened to receive the next burst — turned ρ positive on the burst stream of the tests); ρ = 0
  before any plan was judged;
* the plan is executed iff ``gate_horizon · ρ · predicted gain > migration cost`` (state moved /
  total state, :attr:`~skewlab.engine.algorithms.grouping.Plan.migration_cost`).  Both sides are in the units of the
  per-interval record (``imbalance``, ``migration_cost``): the gate moves state only when the gain it
  expects from the evidence so far exceeds what the move costs (and ρ is at least
  ``gate_min_persistence``, below).

So the first plan of a run is always skipped (no evidence yet) and judged on the next interval; on
a persistent skew ρ ≈ 1 and plans pass from the second one on; on keys that burst and vanish the
realised gains are ~0 or negative and every plan is skipped, which is exactly not rebalancing.

**Judged against the base hash too** (issue 25, also an extension): ρ judges a plan against the
owners it replaced, not against the base hash h(k), so plans that each pay a little on the next
interval can add up to a routing table that does worse than no table at all (single seeds of llfd
and readj on the bursty ``movielens`` users; scan and redist on ``flights`` by tailnum).  The gate
therefore also keeps the *excess over the base hash*: after every interval i+1, ``imbalance(c_{i+1}
under the owners the last plan chose) − imbalance(c_{i+1} under h)`` — for an executed plan the
owners in force, for a skipped one the owners it would have set (so a planner at h keeps being
judged) — and, when no plan is pending, the same for the owners in force if they are not h's;
summed with the weight :data:`FORGET` per interval of age, E its weighted mean.  While E > 0 (the
planner's tables lose to h on the record) no plan is executed, and at the end of every interval
without an executed plan the controller returns to h
(:meth:`~skewlab.engine.algorithms.grouping.RebalancingPlanner.base_plan`: routing table emptied).
That return is not weighed against its migration cost, deliberately: it moves back only keys the
gate's own plans moved away, and weighed (``gate_horizon · E > cost``) it was too late on those
traces to keep the p90 within the issue's 5 % of h's (docs/results/gate.md, "Recency and the migration
gate").  On a stream where the plans beat h the excess stays negative and nothing changes.

**A least persistence** (issue 25, an extension; parameter ``gate_min_persistence``, default 0.3): a
plan's own gain counts only while ρ ≥ it.  Reason: on bursty keys ρ stays near 0, yet now and then
a plan with a large predicted gain and a small migration passed ``ρ · gain > cost`` on that weak
evidence and lost on the next interval, enough on a short trace to lift the run's median or p90 above
its base's (docs/results/gate.md, "Defaults chosen on the real traces").  With the floor a stream has to
have shown that plans persist before a plan's predicted gain is believed; on persistent skews ρ ≈ 1
and nothing changes.

**On the record of the tables** (issue 25, an extension; parameter ``gate_record``): ρ judges each
plan by its own next interval, but a planner's plans may pay only as a sequence — one plan's table
loses on the next interval and the following plan corrects it.  On a stream whose hot ranks move
on every interval the Gedik family's plans realise a small share of their predicted gain one by one,
so the gate skipped most of them and ran worse than executing every plan, and on some seeds worse
than not rebalancing.  With ``gate_record`` a plan also pays when ``gate_horizon · (−E)
> cost``: the planner's tables have beaten the base hash per interval, on the record, by more than
the plan costs.  It is the same test with the record's gain in place of the plan's own expected
gain; E > 0 still blocks every plan.  On by default for the Gedik family only
(:attr:`~skewlab.engine.algorithms.grouping.RebalancingPlanner.gate_trusts_record`): on Fang's it let
single plans through on the bursty ``movielens`` users that then lost to the base hash, on Guo &
Zhou's it left the same case worse than the base (docs/results/gate.md, "Defaults chosen on the real
traces").

**The gain forgone by skipping** (issue 36, an extension; the rule of ski rental: rent until the rent
paid equals the price, then buy — Karlin, Manasse, McGeoch & Owicki, "Competitive randomized algorithms
for nonuniform problems", Algorithmica 11, 1994): every skipped plan is judged on its next interval like
an executed one, and its realised gain is what not executing it cost.  The gate keeps F, the sum of the
realised gains of the plans skipped in a row (at least 0; back to 0 when a plan is executed or the owners
change otherwise), and with ``gate_forgone`` a plan also pays when F > cost (with ρ ≥
``gate_min_persistence``, as for its own gain).  Reason: with ``gate_horizon`` 1 a plan pays only if one interval of its gain covers its
migration, so a persistent skew whose fix costs more than one interval of gain was never rebalanced
(``mixed`` at 2 workers on Zipf 1.2 kept its imbalance of 0.20 forever; a plan moving 28 % of the
state for a gain of 0.18 per interval).  Now it is rebalanced once the skipped plans have forgone more
than a plan costs, which costs at most twice the best choice in hindsight for a skew that persists.  On
keys that burst and vanish the skipped plans realise ~0 or less and F stays small.

**Stale entries of a skipped plan** (issue 25, an extension): for planners that declare
``drops_stale_entries`` (Gedik's, whose every construction replaces the whole partitioning function,
Sec. 4.1), the controller returns to h the table entries a skipped plan would route differently
(:meth:`~skewlab.engine.algorithms.grouping.RebalancingPlanner.stale_plan`), without weighing their
migration, and the skipped plan is not judged (the owners it was made against changed).  On the
``drift`` stream the table of an executed plan otherwise stayed in force while later plans were
skipped, and lost to h once its hot set had moved on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from skewlab.engine.algorithms.grouping import IntervalStats, Plan
from skewlab.engine.control.metrics import load_metrics
from skewlab.engine.control.state import searchsorted_ascending

__all__ = ["GateVerdict", "MigrationGate"]

#: weight of a judged plan per judged plan of age in the persistence estimate
FORGET = 0.9


@dataclass(frozen=True)
class GateVerdict:
    """A plan's predicted ``gain``, migration ``cost``, the persistence ``rho``, ``horizon``, mean
    excess over the base hash ``excess`` (E) and least persistence ``min_persistence`` it was judged
    with, the gain ``forgone`` by the plans skipped in a row before it (F; 0 when the planner does not
    count it, ``gate_forgone`` off), and whether it pays
    (``horizon · rho · gain > cost`` or ``forgone > cost``, with ``rho ≥ min_persistence``, or by the
    record; and E ≤ 0)."""

    gain: float
    cost: float
    rho: float
    horizon: int
    pays: bool
    excess: float = 0.0
    min_persistence: float = 0.0
    forgone: float = 0.0

    def to_dict(self) -> dict[str, float]:
        return {"gate_gain": self.gain, "gate_cost": self.cost, "gate_persistence": self.rho,
                "gate_horizon": self.horizon, "gate_excess": self.excess,
                "gate_min_persistence": self.min_persistence, "gate_forgone": self.forgone}


def _imbalance(workers: np.ndarray, cost: np.ndarray, n: int) -> float:
    owned = workers >= 0
    return load_metrics(np.bincount(workers[owned], weights=cost[owned], minlength=n)[:n])["imbalance"]


class MigrationGate:
    """State of the gate of one controller (plain floats and arrays: picklable)."""

    #: class defaults: a gate pickled in a checkpoint before issue 25 has no excess record yet
    excess = 0.0
    excess_weight = 0.0
    forgone = 0.0  # (and none forgone before issue 36)

    def __init__(self) -> None:
        self.realised = 0.0  # R
        self.predicted = 0.0  # P
        #: the last plan, to be judged on the next interval: (n, moved key ids ascending, their
        #: owners before the plan, their targets, predicted gain, whether it was skipped)
        self._pending: tuple[int, np.ndarray, np.ndarray, np.ndarray, float, bool] | None = None
        self.excess = 0.0  # weighted sum of the realised excess over the base hash
        self.excess_weight = 0.0  # the sum of its weights
        self.forgone = 0.0  # F: the realised gains of the plans skipped in a row

    @property
    def mean_excess(self) -> float:
        """E: weighted mean of how much the planner's routing did worse than the base hash on the
        intervals judged (0 while nothing was judged; negative when its tables beat the base hash)."""
        return self.excess / self.excess_weight if self.excess_weight > 0 else 0.0

    @property
    def tables_lose(self) -> bool:
        """Whether the planner's routing did worse than the base hash on the record (E > 0)."""
        return self.mean_excess > 0

    @property
    def persistence(self) -> float:
        """ρ = R / P (0 while nothing was judged; may be negative when plans made things worse)."""
        return self.realised / self.predicted if self.predicted > 0 else 0.0

    def forget_pending(self) -> None:
        """Drop the plan awaiting judgement (its owners were changed by an operator action, a return to
        the base hash or dropped stale entries), and the gain forgone so far (it was judged against
        owners that changed)."""
        self._pending = None
        self.forgone = 0.0

    def _add_excess(self, excess: float) -> None:
        self.excess = FORGET * self.excess + excess
        self.excess_weight = FORGET * self.excess_weight + 1.0

    def observe(self, stats: IntervalStats, home: np.ndarray | None = None) -> None:
        """Judge the pending plan on the interval of ``stats`` (before any new plan); with ``home``
        (the base hash of the stats keys) also the excess over the base hash of the owners the
        pending plan chose (executed or not) or, without a pending plan, of the owners in force
        when they are not the base hash's."""
        pending, self._pending = self._pending, None
        n = stats.n_workers
        if pending is None or stats.key_ids is None or pending[0] != n:
            if home is not None and np.any(np.asarray(home) != stats.worker):
                self._add_excess(_imbalance(stats.worker, stats.cost, n) - _imbalance(np.asarray(home, np.int64), stats.cost, n))
            return
        _, keys, before, after, gain, skipped = pending[:5] + (pending[5:] or (False,))
        ids = stats.key_ids
        with_plan = stats.worker.copy()
        without = stats.worker.copy()
        if keys.size and ids.size:
            pos = np.minimum(searchsorted_ascending(ids, keys), ids.size - 1)
            hit = ids[pos] == keys
            with_plan[pos[hit]] = after[hit]
            without[pos[hit]] = before[hit]
        planned = _imbalance(with_plan, stats.cost, n)
        realised = _imbalance(without, stats.cost, n) - planned
        self.realised = FORGET * self.realised + realised
        self.predicted = FORGET * self.predicted + gain
        if skipped:
            self.forgone = max(0.0, self.forgone + realised)
        if home is not None:
            self._add_excess(planned - _imbalance(np.asarray(home, np.int64), stats.cost, n))

    def judge(self, stats: IntervalStats, plan: Plan, horizon: int, record: bool = False,
              min_persistence: float = 0.0, forgone: bool = False) -> GateVerdict:
        """The verdict on ``plan`` (see the module docstring; ``min_persistence``: the planner's
        ``gate_min_persistence``, the least ρ under which the plan's own gain counts; ``record``: its
        ``gate_record``, the plan also pays when ``horizon · (−E) > cost``; ``forgone``: its
        ``gate_forgone``, the plan also pays when F > cost); the plan is kept for judgement on the next
        interval whatever the verdict."""
        n = stats.n_workers
        gain = _imbalance(stats.worker, stats.cost, n) - _imbalance(np.asarray(plan.assignment, np.int64), stats.cost, n)
        rho = self.persistence
        cost = float(plan.migration_cost)
        own = rho * gain if rho >= min_persistence else 0.0
        expected = max(own, -self.mean_excess) if record else own
        forgone_gain = self.forgone
        by_forgone = forgone and rho >= min_persistence and forgone_gain > cost
        pays = (horizon * expected > cost or by_forgone) and not self.tables_lose
        if pays:
            self.forgone = 0.0
        if stats.key_ids is not None:
            moved = np.asarray(plan.moved, dtype=bool)
            self._pending = (n, stats.key_ids[moved], stats.worker[moved], np.asarray(plan.assignment, np.int64)[moved],
                             max(float(gain), 0.0), not pays)
        return GateVerdict(float(gain), cost, float(rho), int(horizon), bool(pays), float(self.mean_excess),
                           float(min_persistence), float(forgone_gain) if forgone else 0.0)
