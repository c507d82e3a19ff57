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


def test_a_variant_names_its_grouping_and_parameters():
    from skewlab.bench.bench_spark import variant_of

    assert variant_of("hash") == ("hash", {})
    assert variant_of("dchoices+tail=hash", {"dchoices": {"tail": "pkg", "decay": 1.0}}) == (
        "dchoices", {"tail": "hash", "decay": 1.0})  # inline over --param


def test_rounds_give_each_variant_its_median_speedup_over_hash_of_the_same_round():
    from skewlab.bench.bench_spark import round_summary

    rounds = {"hash": [{"tuples_per_second": 10.0, "max_worker_seconds": 4.0},
                       {"tuples_per_second": 20.0, "max_worker_seconds": 2.0},
                       {"tuples_per_second": 10.0, "max_worker_seconds": 4.0}],
              "dchoices": [{"tuples_per_second": 15.0, "max_worker_seconds": 2.0},
                           {"tuples_per_second": 20.0, "max_worker_seconds": 2.0},
                           {"tuples_per_second": 12.0, "max_worker_seconds": 1.0}]}
    s = round_summary(rounds)
    assert s["dchoices"]["speedup"] == (1.2, 1.0, 1.5)  # 1.5, 1.0, 1.2: per round, not medians' ratio
    assert s["dchoices"]["busiest_gain"] == (2.0, 1.0, 4.0)
    assert s["hash"]["tps_median"] == 10.0 and s["hash"]["speedup"] == (1.0, 1.0, 1.0)


def test_the_bench_waits_for_kernels_and_refuses_batches_routed_by_another_grouping(monkeypatch, tmp_path):
    """Issue 36 item 3: a cold numba cache made the engine route by hash under the name of the grouping
    asked for.  The bench asks the engine to wait for the kernels and refuses a variant whose measured
    batches another grouping routed (here an engine that reports hash for dchoices' batches)."""
    import types

    import skewlab.engine.runtimes.spark.engine as engine_module
    from skewlab.bench import bench_spark

    seen = {}

    class InterimEngine:  # stands in for SparkEngine: routes by the interim grouping, as with cold kernels
        def __init__(self, cfg, log=None, after_batch=None):
            seen["cfg"] = cfg
            self.after_batch = after_batch
            self.snapshot = types.SimpleNamespace(controller=types.SimpleNamespace(
                intervals=[], planner=types.SimpleNamespace(name="hash")))

        def run(self):
            for b in range(3):
                self.snapshot.controller.intervals.append({"tuples": 100, "worker_loads": [50, 50], "max_key_load": 10,
                                                  "algorithm": "hash"})
                self.after_batch(self, b)
            return 0

    monkeypatch.setattr(engine_module, "SparkEngine", InterimEngine)
    args = types.SimpleNamespace(workers=2, per_batch=100, batches=2, warmup=1, keys=10, zipf=1.0, window=2,
                                 master="local[1]", operator="count", service_us=0.0, combine=True, params={})
    with pytest.raises(RuntimeError, match=r"variant dchoices\+tail=hash: its measured batches were routed by \['hash'\]"):
        bench_spark.run_engine("dchoices+tail=hash", args, str(tmp_path))
    assert seen["cfg"].wait_for_kernels and seen["cfg"].algorithm == "dchoices" and seen["cfg"].params == {"tail": "hash"}


def test_ratios_to_a_baseline_pair_each_run_with_the_baselines_run_of_the_same_round_and_block():
    from skewlab.bench.bench_spark import baseline_round_summary

    rounds = {"hash [count]": [{"tuples_per_second": 8.0, "round": 0, "block": 0},
                               {"tuples_per_second": 9.0, "round": 1, "block": 0},
                               {"tuples_per_second": 6.0, "round": 2, "block": 0}],
              "hash [mean]": [{"tuples_per_second": 5.0, "round": 0, "block": 1}]}
    baselines = {"native": [{"tuples_per_second": 10.0, "round": 0, "block": 0},
                            {"tuples_per_second": 10.0, "round": 1, "block": 0},
                            {"tuples_per_second": 5.0, "round": 2, "block": 0},
                            {"tuples_per_second": 20.0, "round": 0, "block": 1}]}
    s = baseline_round_summary(rounds, baselines)
    assert s["hash [count]"]["native"] == (0.9, 0.8, 1.2)  # 0.8, 0.9, 1.2: per round, not the mean's ratio
    assert s["hash [mean]"]["native"] == (0.25, 0.25, 0.25)  # block 1's baseline run, not block 0's


def test_the_floor_baselines_max_over_mean_counts_a_silent_bucket_as_zero_rows():
    from skewlab.bench.bench_spark import floor_max_over_mean

    # batch 0: buckets 0 and 2 of 3 report 30 and 30 rows, bucket 1 none: max 30, mean 20
    # batch 1: 10, 10, 10: max 10, mean 10
    batches = [{"bucket": [2, 0], "rows": [30, 30]}, {"bucket": [0, 1, 2], "rows": [10, 10, 10]}]
    assert floor_max_over_mean(batches, 3) == pytest.approx(40 / 30)
    assert floor_max_over_mean([], 3) is None


def test_the_service_floor_sleeps_the_service_time_of_every_tuple_its_rows_stand_for(monkeypatch):
    import pandas as pd

    from skewlab.bench import bench_spark

    slept: list[float] = []
    monkeypatch.setattr(bench_spark.time, "sleep", slept.append)
    updates: list[tuple] = []
    state = type("State", (), {"update": lambda self, v: updates.append(v)})()
    frames = [pd.DataFrame({"bucket": [3] * 4}), pd.DataFrame({"bucket": [3] * 6})]
    out = list(bench_spark.make_floor_service(40.0)((3,), iter(frames), state))
    # 10 shipped rows, each standing for FLOOR_KEEP tuples of 40 µs
    assert slept == [pytest.approx(10 * bench_spark.FLOOR_KEEP * 40e-6)]
    assert out[0].to_dict("list") == {"bucket": [3], "rows": [10]} and updates == [(bytes(1024),)]
    slept.clear()
    list(bench_spark.make_floor_service(0.0)((3,), iter(frames), state))
    assert slept == []
