"""bench/bench_task_costs.py: Spark's rendering of a timing SQL metric is parsed into seconds."""

from __future__ import annotations

import pytest

from skewlab.bench.bench_task_costs import parse_timing


def test_parses_total_min_median_max_in_their_units():
    text = "total (min, med, max (stageId: taskId))\n1.9 s (78 ms, 282 ms, 1.2 s (stage 7.0: task 32))"
    assert parse_timing(text) == pytest.approx({"total": 1.9, "min": 0.078, "med": 0.282, "max": 1.2})
    assert parse_timing("2.5 m (1,204 ms, 3 s, 1.0 h (stage 1.0: task 3))")["min"] == pytest.approx(1.204)


def test_non_timing_metrics_are_not_parsed():
    assert parse_timing("total (min, med, max)\n8.0 MiB (1026.1 KiB, 1026.1 KiB, 1026.1 KiB (stage 7.0") is None
    assert parse_timing("1,771") is None
