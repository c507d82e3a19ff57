"""bench/bench_state_partitions.py: the per-round ratio of the two partition counts, and usage errors
refused before Spark starts."""

from __future__ import annotations

import pytest

from skewlab.bench import bench_state_partitions as bench


def test_the_ratio_pairs_the_runs_of_one_round():
    runs = [{"round": 0, "partitions": 8, "tuples_per_second": 120.0},
            {"round": 0, "partitions": 16, "tuples_per_second": 100.0},
            {"round": 1, "partitions": 16, "tuples_per_second": 80.0},
            {"round": 1, "partitions": 8, "tuples_per_second": 120.0}]
    s = bench.ratio_summary(runs, 8, 16)
    assert s["rounds"] == 2 and s["ratio"] == pytest.approx((1.35, 1.2, 1.5))
    assert s["tps_median"] == {8: 120.0, 16: 90.0}
    # a round that ran only one of the two has no ratio
    assert bench.ratio_summary(runs[:1], 8, 16) == {"tps_median": {8: 120.0}, "rounds": 0}


@pytest.mark.parametrize("argv, says", [
    (["--workers", "4", "--max-workers", "4"], "--max-workers must be > --workers (4)"),
    (["--rounds", "0"], "must be >= 1"),
    (["--grouping", "nope"], "nope"),
])
def test_usage_errors_exit_2_before_spark(argv, says, capsys, monkeypatch):
    monkeypatch.setattr(bench.bench_spark, "run_engine", lambda *a, **k: pytest.fail("ran the engine"))
    with pytest.raises(SystemExit) as exc:
        bench.main(argv)
    assert exc.value.code == 2 and says in capsys.readouterr().err
