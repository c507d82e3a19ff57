"""bench/bench_driver_memory.py: the migration report compares the batches from the command on with
the steady batch."""

from __future__ import annotations

import pytest

from skewlab.bench.bench_driver_memory import migration_report


def test_migration_report_against_the_steady_batch() -> None:
    run = {"batches": [{"batch": 0, "VmRSS": 90, "peak_mib": 120, "keys_moved": 0},
                       {"batch": 1, "VmRSS": 100, "peak_mib": 110, "keys_moved": 0},
                       {"batch": 2, "VmRSS": 130, "peak_mib": 160, "keys_moved": 0},
                       {"batch": 3, "VmRSS": 115, "peak_mib": 140, "keys_moved": 700}]}
    m = migration_report(run, 1)
    assert (m["steady_rss_mib"], m["migrating_rss_mib"], m["keys_moved"]) == (100, 130, 700)
    assert m["rss_ratio"] == pytest.approx(1.3) and m["peak_over_steady_rss"] == pytest.approx(1.6)
    assert m["peak_ratio"] == pytest.approx(160 / 110)
