"""bench/bench_distinct.py: the distinct operator's merged estimate over split workers and batches."""

from __future__ import annotations

import json

from skewlab.bench.bench_distinct import main


def test_merged_error_is_reported_per_distinct_count(tmp_path, capsys) -> None:
    out = tmp_path / "d.json"
    assert main(["--truth", "3000,30000", "--seeds", "2", "--workers", "4", "--batches", "3", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["distinct"] for r in rows] == [3000, 30000]
    assert all(0 <= r["max_rel_error"] <= 0.02 and len(r["errors"]) == 2 for r in rows)
    assert "target <= 2 %: met" in capsys.readouterr().out
