"""bench/bench_routing.py: both starting points route the same stream to the same workers."""

from __future__ import annotations

import json

from skewlab.bench import bench_routing


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


def test_repeats_are_interleaved_rounds_and_the_best_round_is_kept(capsys, monkeypatch):
    calls = []
    real = bench_routing.measure
    times = iter([0.5, 0.9, 0.2, 0.4, 0.3, 0.1, 0.6, 0.8])  # (fps, keys) per (round, grouping)

    def fake(name, fps, ranks, args, **kw):
        assert args.repeat == 1
        calls.append((name, "keys" in kw))
        row = real(name, fps, ranks, args, **kw)
        row["seconds"] = next(times)
        row["keys_per_s"] = fps.size / row["seconds"]
        return row

    monkeypatch.setattr(bench_routing, "measure", fake)
    assert bench_routing.main(["--messages", "2000", "--keys", "100", "--workers", "5", "--repeat", "2",
                               "--batch", "500", "--only", "pkg", "--json", "-"]) == 0
    assert calls == [("hash", False), ("hash", True), ("pkg", False), ("pkg", True)] * 2
    cap = capsys.readouterr()
    assert cap.err.count("# round") == 2
    rows = {r["algorithm"]: r for r in json.loads(cap.out)["results"]}
    # best round per grouping and column: hash 0.5/0.3 → 0.3, 0.9/0.1 → 0.1; pkg 0.2/0.6, 0.4/0.8
    assert rows["hash"]["seconds"] == 0.3 and rows["hash"]["seconds_from_keys"] == 0.1
    assert rows["pkg"]["seconds"] == 0.2 and rows["pkg"]["seconds_from_keys"] == 0.4
    assert rows["pkg"]["keys_per_s"] == 2000 / 0.2 and rows["pkg"]["keys_per_s_from_keys"] == 2000 / 0.4
    assert rows["pkg"]["ratio_vs_hash"] == (2000 / 0.2) / (2000 / 0.3)


def test_same_routing_from_either_start():
    """measure() from key strings checks fingerprint_keys against the Vocabulary fingerprints and, the
    grouping being deterministic, yields the imbalance and replication of the fingerprint start."""
    import argparse

    import numpy as np
    import pyarrow as pa

    from skewlab.engine.algorithms.keys import Vocabulary

    args = argparse.Namespace(workers=5, sources=2, batch=1000, repeat=1, seed=3, clock="wall")
    ranks = bench_routing.zipf_ranks(8000, 300, 1.2, 0)
    names = [str(i) for i in range(300)]
    fps = Vocabulary(names).fps[ranks]
    keys = pa.array(np.array(names, dtype=object)[ranks], pa.string())
    for name in ("hash", "pkg", "dchoices", "dkg"):
        a = bench_routing.measure(name, fps, ranks, args)
        b = bench_routing.measure(name, fps, ranks, args, keys=keys)
        assert (a["imbalance"], a["replication"]) == (b["imbalance"], b["replication"]), name


def test_rebalancers_named_in_only_route_with_a_plan_applied(capsys):
    assert bench_routing.main(["--messages", "20000", "--keys", "2000", "--workers", "6", "--repeat", "1",
                               "--batch", "5000", "--only", "llfd,scan", "--json", "-"]) == 0
    rows = {r["algorithm"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert set(rows) == {"hash", "llfd", "scan"}
    assert rows["llfd"]["table"] > 0 and rows["llfd"]["in_range"]  # the plan's routing table is in use
    assert rows["llfd"]["imbalance"] < rows["hash"]["imbalance"]


def test_unknown_name_in_only_is_a_usage_error(capsys, monkeypatch):
    """Refused in one line before the stream is generated (1e7 keys at the defaults: seconds)."""
    import pytest

    monkeypatch.setattr(bench_routing, "zipf_ranks", lambda *a: pytest.fail("the stream was generated first"))
    with pytest.raises(SystemExit) as exc:
        bench_routing.main(["--only", "llfd,nope"])
    assert exc.value.code == 2 and "unknown algorithm(s) in --only: nope" in capsys.readouterr().err
