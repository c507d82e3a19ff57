"""A user-defined grouping: consistent hashing with bounded loads, as a skewlab rebalancer.

Source: V. Mirrokni, M. Thorup, M. Zadimoghaddam, "Consistent Hashing with Bounded Loads", SODA 2018
(arXiv:1608.01350).  Balls (here: keys) and bins (workers, each as ``replicas`` points) are hashed onto
a ring; every bin has the capacity ⌈(1 + ε)·m/n⌉, and a ball goes to the first bin clockwise from its
own position that is not full.  The paper shows that no bin then holds more than (1 + ε) times the
average, while a ball moves only when bins fill or empty around it.  None of the five papers skewlab
implements has it (they rebalance with explicit routing tables: Gedik, Fang, Guo & Zhou; or split keys:
Nasir, Dalabasmaz & Can).

Run it like a built-in (from the repository root)::

    PYTHONPATH=. skewlab simulate --algorithm examples.bounded_loads:BoundedLoads --param epsilon=0.1
    PYTHONPATH=. skewlab engine --algorithm examples.bounded_loads:BoundedLoads
    PYTHONPATH=. skewlab control set-algorithm examples.bounded_loads:BoundedLoads epsilon=0.1

How it maps onto skewlab's interface (engine/algorithms/grouping.py, docs/add-a-grouping.md): a
:class:`~skewlab.engine.algorithms.grouping.RebalancingPlanner` whose base hash h(k) is the ring
(:meth:`make_ring`), so every key is on exactly one worker and its router is the built-in
:class:`~skewlab.engine.algorithms.grouping.TableRouter` (the keys the bounded placement moves off
their ring position are the routing table A).  The controller asks for a plan when the interval's
imbalance max θ(d) exceeds ``theta_max``; :meth:`compute_plan` then places the interval's keys.

Deviations from the paper, and why:

* Keys are weighted: a ball weighs the key's cost c(k) in the statistics window (its tuples), and a
  worker's capacity is (1 + ε)·L/n on load, L the total cost — skewlab balances load, not key counts.
* Keys are placed heaviest first (ties by fingerprint), not in arrival order (which the driver does
  not see): heavy keys, the ones worth keeping still, keep their ring position.  A key that fits in
  no worker (heavier than a capacity) goes to the least loaded one.
* The placement is recomputed from the interval's statistics at each plan, not maintained ball by
  ball; keys whose worker changes migrate with their state (skewlab's migration gate, on by default,
  skips a plan whose predicted gain does not pay for its migration).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from skewlab.engine.algorithms.grouping import IntervalStats, Plan, RebalancingPlanner, make_plan
from skewlab.engine.algorithms.groupings.basic import ConsistentHashRing
from skewlab.engine.algorithms.keys import mix64
from skewlab.engine.config.params import Param

__all__ = ["BoundedLoads", "bounded_placement"]


def bounded_placement(ring: ConsistentHashRing, keys: np.ndarray, cost: np.ndarray, n_workers: int,
                      epsilon: float) -> np.ndarray:
    """The worker of every key: the first worker clockwise from the key's ring position whose load
    stays within (1 + ``epsilon``)·(total cost)/``n_workers`` with the key, keys taken heaviest first;
    the least loaded worker for a key that fits nowhere."""
    keys = np.asarray(keys, dtype=np.uint64)
    cost = np.asarray(cost, dtype=np.float64)
    out = np.empty(keys.size, dtype=np.int64)
    if keys.size == 0:
        return out
    capacity = (1.0 + epsilon) * float(cost.sum()) / n_workers
    size = ring.points.size
    # the first ring point at or after the key's position (wrapping): where ring.lookup puts the key
    first = np.searchsorted(ring.points, mix64(keys), side="left") % size
    owners = ring.owners.tolist()
    load = [0.0] * n_workers
    for i in np.lexsort((keys, -cost)).tolist():
        c = float(cost[i])
        p = int(first[i])
        for _ in range(size):
            w = owners[p]
            if load[w] + c <= capacity:
                break
            p = p + 1 if p + 1 < size else 0
        else:
            w = int(np.argmin(load))
        out[i] = w
        load[w] += c
    return out


class BoundedLoads(RebalancingPlanner):
    """Consistent hashing with bounded loads (Mirrokni et al., SODA 2018), weighted by key cost."""

    name: ClassVar[str] = "bounded-loads"
    summary: ClassVar[str] = "Consistent hashing with bounded loads: first worker clockwise with room"
    paper: ClassVar[str] = "Mirrokni, Thorup, Zadimoghaddam, SODA 2018 (examples/bounded_loads.py)"
    params: ClassVar[tuple[Param, ...]] = (
        Param("epsilon", "float", 0.25, "capacity of a worker: (1 + epsilon) times the mean load",
              low=0.0, high=10.0, low_open=True),
        Param("replicas", "int", 64, "ring points per worker", low=1, high=4096),
        Param("theta_max", "float", 0.1, "plan when an interval's imbalance max θ(d) exceeds this",
              low=0.0, high=10.0, low_open=True),
    )

    def make_ring(self, n_workers: int) -> ConsistentHashRing:
        return ConsistentHashRing(n_workers, self.p["replicas"], self.seed)

    def compute_plan(self, stats: IntervalStats) -> Plan:
        ring = self.make_ring(stats.n_workers)
        assignment = bounded_placement(ring, stats.keys, stats.cost, stats.n_workers, self.p["epsilon"])
        return make_plan(self.name, stats, assignment, self.home_of(stats))
