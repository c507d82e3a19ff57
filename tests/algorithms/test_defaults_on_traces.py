"""Default parameters on a bursty real trace (issue 25): the ``movielens`` ratings keyed by user, where
users rate in sessions, run as a user runs it (10 workers, 2 sources, 5,000-tuple intervals, the first
50,000 ratings).  A change of a default that makes a rebalancer worse than not rebalancing fails here."""

from __future__ import annotations

import numpy as np
import pytest

from skewlab.bench.common import simulate
from skewlab.engine.algorithms import registry
from skewlab.engine.cli.simulate import SimulationConfig

MESSAGES, WORKERS, INTERVAL = 50_000, 10, 5_000


def per_interval(algorithm: str, plans_on: bool = True, **params) -> tuple[float, float]:
    """Median and p90 of the per-interval imbalance (max/mean − 1)."""
    cfg = SimulationConfig(algorithm=algorithm, workers=WORKERS, sources=2, workload="movielens",
                           workload_params={"column": "userId"}, messages=MESSAGES, interval_messages=INTERVAL,
                           seed=0, params=params)
    imb = np.array([i["imbalance"] for i in simulate(cfg, plans_on=plans_on)["intervals"]])
    assert imb.size == MESSAGES // INTERVAL
    return float(np.median(imb)), float(np.percentile(imb, 90))


@pytest.mark.parametrize("algorithm", [a for a in registry.names() if registry.get(a).rebalancing])
def test_rebalancer_defaults_are_never_worse_than_not_rebalancing(algorithm):
    median, p90 = per_interval(algorithm)
    base_median, base_p90 = per_interval(algorithm, plans_on=False)  # its own base hash, no plan executed
    assert median <= base_median + 1e-12 and p90 <= 1.05 * base_p90 + 1e-12, (median, p90, base_median, base_p90)

