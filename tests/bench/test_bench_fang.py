"""``skewlab bench fang``: what "imbalance after plan" measures."""

from __future__ import annotations

import math

from skewlab.bench import repro_fang
from skewlab.bench.common import Context


def test_imbalance_after_plan_is_routed_on_the_next_interval():
    intervals = [{"interval": i, "imbalance": x} for i, x in enumerate([0.6, 0.2, 0.5, 0.3])]
    plans = [{"interval": 0, "imbalance": 0.01}, {"interval": 1, "imbalance": 0.02}, {"interval": 3, "imbalance": 0.0}]
    # plans of intervals 0 and 1 route intervals 1 and 2; the plan of the last interval routes nothing
    assert math.isclose(repro_fang._imbalance_after_plans(intervals, plans), (0.2 + 0.5) / 2)
    # no plan: the routed imbalance of the intervals after the first
    assert math.isclose(repro_fang._imbalance_after_plans(intervals, []), (0.2 + 0.5 + 0.3) / 3)


def test_a_fang_run_reports_the_next_interval_not_the_plans_own_imbalance(tmp_path):
    runner = repro_fang._Runner(Context(tmp_path, quick=True, n_seeds=1), repro_fang.sizes(True))
    row = runner.run("mixed", 10, 0.08, 2_000, 1.0, 3000, seed=0, intervals=4, per=20_000)
    # with f = 1 every interval surges a different instance: the plan meets θmax on the interval it was made
    # from, the next interval does not
    assert row["plan_imbalance"] <= 0.08 + 1e-9
    assert row["imbalance_after"] > row["plan_imbalance"]
