"""``bench/gate_cases.py``: the count of rebalancer cases worse than their base (issue 25 item 2)."""

from __future__ import annotations

import numpy as np
import pytest

from skewlab.bench import gate_cases
from skewlab.bench.common import simulate
from skewlab.engine.cli.simulate import SimulationConfig


def _independent(seed: int, plans_on: bool) -> tuple[float, float]:
    cfg = SimulationConfig(algorithm="scan", workers=10, sources=2, workload="drift", workload_params={},
                           messages=200_000, interval_messages=5_000, seed=seed)
    imb = np.array([i["imbalance"] for i in simulate(cfg, plans_on=plans_on)["intervals"]])
    return float(np.median(imb)), float(np.percentile(imb, 90))


def test_worse_cases_are_those_of_independent_runs():
    """scan on drift, seeds 0–7: the bench reports exactly the seeds whose run, computed here
    without the bench, has a median above its plans-off run's or a p90 above 1.05 × it."""
    out = gate_cases.count_cases(8, {}, 1, algorithms=["scan"], traces=["drift (synthetic)"])
    expected = []
    for seed in range(8):
        (m, p), (bm, bp) = _independent(seed, True), _independent(seed, False)
        if m > bm + 1e-12 or p > 1.05 * bp + 1e-12:
            expected.append(seed)
    assert out["cases"] == 8
    assert [w["seed"] for w in out["worse"]] == expected
    assert all(w["algorithm"] == "scan" and w["trace"] == "drift (synthetic)" for w in out["worse"])


def test_bad_parameter_is_one_line_and_exit_2(capsys):
    assert gate_cases.main(["--param", "no_such=1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "unknown parameter 'no_such'" in err
    assert gate_cases.main(["--param", "gate"]) == 2
    assert gate_cases.main(["--seeds", "0"]) == 2


def test_unknown_trace_or_algorithm_is_refused_not_an_empty_count():
    with pytest.raises(ValueError, match="drift \\(typo\\)"):
        gate_cases.count_cases(1, {}, 1, traces=["drift (typo)"])
    with pytest.raises(ValueError, match="hash"):
        gate_cases.count_cases(1, {}, 1, algorithms=["hash"])


def test_every_case_is_also_judged_against_plain_hash():
    """clb on pizza, seed 0 (issue 39): the bench reports plain hash's median of an independent run and
    counts the case above hash exactly when its median exceeds 1.02 × it; the table shows the three."""
    out = gate_cases.count_cases(1, {}, 1, algorithms=["clb"], traces=["pizza by name"])
    cfg = SimulationConfig(algorithm="hash", workers=10, sources=2, workload="pizza",
                           workload_params={"column": "name"}, interval_messages=5_000, seed=0)
    hashed = float(np.median([i["imbalance"] for i in simulate(cfg)["intervals"]]))
    (row,) = out["rows"]
    assert row["hash_median"] == hashed
    assert (row in out["above_hash"]) == (row["median"] > 1.02 * hashed + 1e-12)
    table = gate_cases.markdown_table(out)
    assert "| clb |" in table and f"{hashed:.3f}" in table and f"{row['base_median']:.3f}" in table
