"""bench/bench_state_layout.py (issue 36 item 1): every state layout runs as a real Spark streaming
query, computes the same windowed counts, and the bench refuses bad arguments in one line, status 2."""

from __future__ import annotations

import json
import sys

import pytest

from skewlab.bench import bench_state_layout as bench

LAYOUTS = ["none", "blob", "groups-4", "tws-key", "tws-group-4"]
WINDOWED = LAYOUTS[1:]  # none: the batch's counts, no state


@pytest.mark.slow  # ten streaming queries: ~2 min on the shared 2 cores
def test_every_layout_gives_its_batches_and_the_same_counts(spark, tmp_path, capsys):
    pytest.importorskip("google.protobuf")  # the tws-* layouts (skewlab[test] installs it)
    out = tmp_path / "runs.json"
    assert bench.main(["--workers", "2", "--per-batch", "2000", "--keys", "100,1000", "--window", "2",
                       "--warmup", "2", "--batches", "2", "--layouts", ",".join(LAYOUTS), "--jvm-warmup", "0",
                       "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    runs = {(r["layout"], r["keys"]): r for r in res["runs"]}
    assert set(runs) == {(x, k) for x in LAYOUTS for k in (100, 1000)}
    for (layout, keys), r in runs.items():
        assert r["first_batch_ok"] and len(r["batch_seconds"]) == 2 and all(s > 0 for s in r["batch_seconds"])
        assert [b["batch"] for b in r["batches"]] == [2, 3]  # measured after the 2 warm-up batches
        for b in r["batches"]:
            if layout == "none":
                assert b["count_sum"] == 2000 and b["state_keys"] == b["state_bytes"] == 0
                continue
            assert b["results"] > 0 and b["state_keys"] >= b["results"] and b["state_bytes"] > 0
            # one call per worker, or per touched key group (at most 2 workers x 4 groups)
            assert b["calls"] == 2 if layout != "groups-4" else 2 < b["calls"] <= 8
    # the same stream and window: every layout emits the same rows and counts in each batch
    assert res["disagreements"] == [] and res["ok"]
    for k in (100, 1000):
        got = {tuple((b["results"], b["count_sum"]) for b in runs[(x, k)]["batches"]) for x in WINDOWED}
        assert len(got) == 1
        # windowed: a batch's counts sum over the keys' windows, more than the batch's own tuples
        assert all(b["count_sum"] > 2000 for b in runs[("blob", k)]["batches"])
    assert all(res["summary"][x]["ratio"][0] > 0 for x in LAYOUTS)
    assert "results agree across layouts: yes" in capsys.readouterr().out


def test_group_labels_put_every_group_of_a_worker_in_its_partition(spark):
    from pyspark.sql import functions as F

    P, G = 3, 5
    labels = bench.group_labels(P, G)
    assert len(set(labels)) == P * G
    df = spark.createDataFrame([(v, i // G) for i, v in enumerate(labels)], "label int, worker int")
    placed = df.repartition(P, "label").select("worker", F.spark_partition_id().alias("part")).collect()
    assert all(r["worker"] == r["part"] for r in placed) and len(placed) == P * G


@pytest.mark.parametrize("argv, message", [
    (["--layouts", "blob,nope"], "unknown layout 'nope'"),
    (["--layouts", "groups-0"], "G must be >= 1"),
    (["--layouts", "blob,blob"], "expected distinct layouts"),
    (["--keys", "100,x"], "expected comma-separated integers"),
    (["--keys", "100,100"], "expected distinct key counts"),
    (["--window", "10", "--warmup", "9"], "the window would not be full"),
    (["--per-batch", "1001"], "multiple of 2"),
    (["--batches", "0"], "--batches must be >= 1"),
])
def test_bad_arguments_are_one_line_and_status_2(argv, message, capsys):
    assert bench.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_tws_layouts_without_protobuf_are_refused(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "google.protobuf", None)  # import fails as when it is not installed
    assert bench.main(["--layouts", "blob,tws-key"]) == 2
    assert "need protobuf" in capsys.readouterr().err


def test_a_malformed_option_value_is_status_2(capsys):
    assert bench.main(["--batches", "many"]) == 2
    assert "invalid int value" in capsys.readouterr().err
