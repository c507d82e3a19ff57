"""Exactly-once with the Parquet sink in an object store: the engine writes its results to ``s3://`` on
an S3-protocol endpoint started by the test (moto, tests/s3_fixtures.py), is killed with ``kill -9``
twice (after a batch's snapshot, before Spark's commit, so that batch is replayed; and at a random
moment) and restarted with the same checkpoint; every (batch, key) result in the bucket equals the
windowed count recomputed from Spark's offset log, once.  Spark's own checkpoint stays on a local path:
on ``s3a://`` it needs the hadoop-aws jars, which this test machine cannot fetch."""

from __future__ import annotations

import pytest

from skewlab.shared import filesystems
from tests.end_to_end.test_exactly_once import kill_and_restart, write_stream
from tests.s3_fixtures import s3_endpoint  # noqa: F401 - pytest fixture
from tests.spark_truth import batch_keys, only, sink_results, windowed_truth

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_s3_sink_is_exact_across_kill_9_and_replay(tmp_path, s3_endpoint, monkeypatch):  # noqa: F811 - fixture
    monkeypatch.chdir(tmp_path)  # the engine runs here: nothing named after the URI may appear
    keys, data = write_stream(tmp_path, 16_000)
    sink = f"{s3_endpoint}/results/run-1"
    kills, text = kill_and_restart(tmp_path, data, ["saved:{}", None], sink=sink, progress_timeout=600)
    assert kills == 2, text[-3000:]
    assert not list(tmp_path.glob("s3*")), "a local directory named after the URI"
    assert any(n.startswith("batch=") for n in filesystems.list_names(sink))
    per_batch = batch_keys(tmp_path / "ckpt", lambda p, s, e: [keys[j * 2 + p] for j in range(s, e)])
    assert sum(sum(c.values()) for c in per_batch.values()) == len(keys)
    got, rows, distinct = sink_results(sink)
    assert rows == distinct, "a worker wrote a result twice"
    truth = windowed_truth(per_batch, 3)
    assert only(got, truth) == truth
