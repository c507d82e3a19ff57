"""bench/bench_routing.py: both starting points route the same stream to the same workers."""

from __future__ import annotations

import json

from bench import bench_routing


def test_routing_bench_from_fingerprints_and_from_key_strings(capsys):
    assert bench_routing.main(["--messages", "20000", "--keys", "500", "--workers", "7", "--repeat", "1",
                               "--batch", "3000", "--only", "pkg,dchoices", "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["config"]["start"] == "both"
    rows = {r["algorithm"]: r for r in doc["results"]}
    assert set(rows) == {"hash", "pkg", "dchoices"}
    for r in rows.values():
        assert "error" not in r, r
        assert r["keys_per_s"] > 0 and r["keys_per_s_from_keys"] > 0
        assert r["ratio_vs_hash"] > 0 and r["ratio_vs_hash_from_keys"] > 0
    assert rows["hash"]["ratio_vs_hash"] == rows["hash"]["ratio_vs_hash_from_keys"] == 1.0


def test_same_routing_from_either_start():
    """measure() from key strings checks fingerprint_keys against the Vocabulary fingerprints and, the
    grouping being deterministic, yields the imbalance and replication of the fingerprint start."""
    import argparse

    import numpy as np
    import pyarrow as pa

    from engine.keys import Vocabulary

    args = argparse.Namespace(workers=5, sources=2, batch=1000, repeat=1, seed=3, clock="wall")
    ranks = bench_routing.zipf_ranks(8000, 300, 1.2, 0)
    names = [str(i) for i in range(300)]
    fps = Vocabulary(names).fps[ranks]
    keys = pa.array(np.array(names, dtype=object)[ranks], pa.string())
    for name in ("hash", "pkg", "dchoices", "dkg"):
        a = bench_routing.measure(name, fps, ranks, args)
        b = bench_routing.measure(name, fps, ranks, args, keys=keys)
        assert (a["imbalance"], a["replication"]) == (b["imbalance"], b["replication"]), name
