"""bench/bench_spark.py's per-worker figures from the engine's worker rows: straggler ratio,
one-core-per-worker throughput and the tuple latency percentiles of Nasir et al. Fig. 14."""

from __future__ import annotations

import pytest

from skewlab.bench.bench_spark import worker_figures, worker_latency


def test_latency_percentiles_weigh_each_task_by_the_tuples_it_applied():
    # one batch, three workers: half the tuples wait 1 s, 44 % wait 2 s, 6 % wait 4 s
    lat = worker_latency({0: [1.0, 2.0, 4.0]}, {0: [50, 44, 6]})
    assert lat == {"max_mean": 4.0, "mean": pytest.approx(1.62), "max": 4.0, "p50": 1.0, "p95": 4.0, "p99": 4.0}
    # a task without tuples is no tuple's latency
    assert worker_latency({0: [1.0, 9.0]}, {0: [5, 0]})["max"] == 1.0
    # per-worker means over batches: worker 1 averages (2 + 6) / 2 = 4
    assert worker_latency({0: [1.0, 2.0], 1: [3.0, 6.0]}, {0: [1, 1], 1: [1, 1]})["max_mean"] == 4.0
    assert worker_latency({0: [0.0]}, {0: [0]}) is None


def test_worker_figures_from_rows():
    rows = [{"batch_id": 0, "worker": 0, "processing_seconds": 1.0, "tuples": 10},
            {"batch_id": 0, "worker": 1, "processing_seconds": 3.0, "tuples": 30},
            {"batch_id": 1, "worker": 0, "processing_seconds": 2.0, "tuples": 20}]  # worker 1 idle: 0 s
    f = worker_figures(rows, tuples=60, n_workers=2)
    assert f["max_worker_seconds"] == 5.0 and f["mean_worker_seconds"] == 3.0
    assert f["straggler"] == pytest.approx(5 / 3) and f["one_core_per_worker_tps"] == 12.0
    assert f["tuple_max_over_mean"] == pytest.approx(50 / 30)
    assert f["latency"]["max_mean"] == 1.5 and f["latency"]["p50"] == 2.0 and f["latency"]["p99"] == 3.0
    assert worker_figures([], 0, 2)["latency"] is None
