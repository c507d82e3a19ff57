"""Exactly-once across kill -9, three engine runs (each restarted with the same --checkpoint after
every kill; 11 engine starts in all, issue 37):

* mixed rebalancing with ``count`` into Parquet, killed at every window of a migration: after a
  batch's state export (operator ran, nothing applied), when the import batch starts (the blobs only
  on disk), after the import batch's operator ran (its replay reads the blobs again), after a
  snapshot but before Spark's commit, and once at a random moment;
* the user's operator (examples/ewma_rate.py) through migrations into the Kafka result sink, killed
  after an exporting batch published the next routing snapshot (its workers' records already in the
  topic, the driver's snapshot not written): the EWMA equals the fold over Spark's offset log and the topic holds every
  result record once (a replayed batch wrote nothing twice);
* dchoices' split keys (results from the merge stage), killed after a batch's operator ran and after
  its snapshot.

At the end of each, every (batch, key) result equals the one recomputed from Spark's offset log and
the input file, exactly once; in the first, every batch was recorded exactly once in the database and
the migration files of imported batches are pruned."""

from __future__ import annotations

import os
import pickle
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from skewlab.engine.runtimes.spark.result_sink import read_sink
from skewlab.storage import connect
from tests.spark_truth import batch_keys, ewma_truth, only, sink_results, windowed_truth

pytestmark = pytest.mark.slow


MIXED = ("--algorithm", "mixed", "--param", "theta_max=0.02")


def engine_cmd(tmp: Path, data: Path, sink: str | None = None, extra: tuple[str, ...] = (),
               grouping: tuple[str, ...] = MIXED, fault: str | None = None) -> list[str]:
    """``skewlab engine`` on ``data``; with ``fault`` (tests/fault_engine.py) killed at that step."""
    launcher = ["tests.fault_engine", fault] if fault else ["skewlab"]
    return [sys.executable, "-m", *launcher, "engine", "--source", "file", "--input", str(data),
            "--db", f"sqlite:///{tmp}/db.sqlite", "--checkpoint", str(tmp / "ckpt"), *grouping, "--workers", "4", "--sources", "2", "--interval", "0.5",
            "--rate", "4000", "--max-per-batch", "3000", "--window", "3", "--shadow", "",
            "--sink", sink or str(tmp / "sink"), *extra]


def snapshots(tmp: Path) -> list[int]:
    d = tmp / "ckpt" / "skewlab"
    if not d.exists():
        return []
    return sorted(int(p.stem.split("-")[1]) for p in d.glob("engine-*.pkl"))


def latest_snapshot(tmp: Path):
    b = snapshots(tmp)[-1]
    with open(tmp / "ckpt" / "skewlab" / f"engine-{b}.pkl", "rb") as fh:
        return pickle.load(fh)


def wait_for_batches(tmp: Path, proc: subprocess.Popen, at_least: int, timeout: float = 120) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            return False
        s = snapshots(tmp)
        if s and s[-1] >= at_least:
            return True
        time.sleep(0.1)
    raise AssertionError(f"engine made no progress past batch {at_least} in {timeout}s")


def write_stream(tmp_path: Path, n: int) -> tuple[list[str], Path]:
    rng = np.random.default_rng(11)
    keys = [f"w{int(x)}" for x in rng.zipf(1.3, n) % 2000]
    data = tmp_path / "stream.txt"
    data.write_text("\n".join(keys) + "\n")
    return keys, data


def kill_and_restart(tmp_path: Path, data: Path, faults: list[str | None], sink: str | None = None,
                     extra: tuple[str, ...] = (), progress_timeout: float = 120,
                     grouping: tuple[str, ...] = MIXED) -> tuple[int, str]:
    """Run the engine once per entry of ``faults`` — killed by fault injection at that step of a batch
    two past the last snapshot, or (``None``) by SIGKILL at a random moment — then to the end of the
    file; returns the number of kills and the engine log."""
    # the repository root on the path: examples/ (a user's operator module) imports on the driver
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    log = open(tmp_path / "engine.log", "ab")
    kills = 0
    rnd = random.Random(3)
    for fault in faults:
        done = snapshots(tmp_path)[-1] if snapshots(tmp_path) else -1
        spec = fault.format(done + 2) if fault else None
        proc = subprocess.Popen(engine_cmd(tmp_path, data, sink, extra, grouping, spec), stdout=log, stderr=log, env=env)
        if fault:
            proc.wait(timeout=max(180, progress_timeout))  # it kills itself at that step of a later batch
            assert proc.returncode == -signal.SIGKILL, (tmp_path / "engine.log").read_text()[-3000:]
            kills += 1
            continue
        assert wait_for_batches(tmp_path, proc, done + 1, progress_timeout), "the file ran out before the planned faults"
        time.sleep(rnd.uniform(0.0, 1.5))  # mid-batch, between batches, during a plan ...
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
    # final run to the end of the file
    proc = subprocess.Popen(engine_cmd(tmp_path, data, sink, extra, grouping), stdout=log, stderr=log, env=env)
    assert proc.wait(timeout=300) == 0, (tmp_path / "engine.log").read_text()[-3000:]
    log.close()
    return kills, (tmp_path / "engine.log").read_text()


def test_kill_9_at_every_window_of_a_migration_then_restart_gives_ground_truth(tmp_path):
    keys, data = write_stream(tmp_path, 40_000)
    faults = ["collected:{}:export", "begun:{}:import", "collected:{}:import", "saved:{}", None]
    kills, text = kill_and_restart(tmp_path, data, faults)
    assert kills >= 5, text[-3000:]
    fired = {phase: text.count(f"fault injection: SIGKILL at {phase}") for phase in ("begun", "collected", "saved")}
    assert fired == {"begun": 1, "collected": 2, "saved": 1}, text[-3000:]

    snap = latest_snapshot(tmp_path)
    assert sum(snap["consumed"].values()) == len(keys)
    assert snap["controller"].planner.name == "mixed"
    assert snap["controller"].migrations, "no migration happened: the test would not exercise export/import"
    # the sink against the input, batch by batch as Spark's offset log cut it
    P = 2
    per_batch = batch_keys(tmp_path / "ckpt", lambda p, s, e: [keys[j * P + p] for j in range(s, e)])
    assert sum(sum(c.values()) for c in per_batch.values()) == len(keys)
    got, rows, distinct = sink_results(tmp_path / "sink")
    assert rows == distinct, "a (batch, key) was written twice"
    truth = windowed_truth(per_batch, 3)
    assert only(got, truth) == truth
    # each batch recorded exactly once in the database, none missing
    store = connect(f"sqlite:///{tmp_path}/db.sqlite")
    runs = store.list_runs()
    assert len(runs) == 1
    rows = store.interval_metrics(runs[0]["id"])
    batch_ids = [r["batch_id"] for r in rows]
    assert batch_ids == sorted(set(batch_ids)) == list(range(len(batch_ids)))
    assert sum(r["tuples"] for r in rows) == len(keys)
    # the migration files (state_transfer) of imported batches are pruned
    last = snapshots(tmp_path)[-1]
    left = [int(p.name.split("=")[1]) for p in (tmp_path / "ckpt" / "migrations").glob("batch=*")]
    assert all(b >= last - 1 for b in left), (left, last)


def test_kill_9_with_a_user_operator_and_the_kafka_sink_then_restart_gives_ground_truth(tmp_path, kafka_broker):
    """The user's operator of examples/ewma_rate.py through migrations (mixed rebalances) into the
    Kafka result sink, killed after an exporting batch published the next routing snapshot (before
    the driver's snapshot; the replay finds the batch's records in the topic): every (batch, key) result equals the EWMA
    folded from Spark's offset log and the input file, exactly once, and the topic holds each
    (batch, worker, seq) record once, on the worker's partition."""
    import json

    from examples.ewma_rate import ALPHA, EwmaRate
    from skewlab.engine.io.kafka_io import read_topic
    from skewlab.engine.runtimes.spark.result_sink import restore_sink, sink_schema

    keys, data = write_stream(tmp_path, 24_000)
    sink = f"kafka://{kafka_broker}/exactly-once"
    kills, text = kill_and_restart(tmp_path, data, ["published:{}:export"], sink,
                                   extra=("--operator", "examples.ewma_rate:EwmaRate"))
    assert kills == 1 and text.count("fault injection: SIGKILL") == 1, text[-3000:]
    snap = latest_snapshot(tmp_path)
    assert sum(snap["consumed"].values()) == len(keys)
    assert snap["controller"].migrations, "no migration happened: the test would not exercise export/import"
    per_batch = batch_keys(tmp_path / "ckpt", lambda p, s, e: [keys[j * 2 + p] for j in range(s, e)])
    results = restore_sink(snap["sink"], snap["sink_start"], snap["partitions"], schema=sink_schema(EwmaRate))
    got, rows, distinct = sink_results(results)
    assert rows == distinct, "a (batch, key) was written twice"
    truth = ewma_truth(per_batch, 3, ALPHA)
    assert only(got, truth) == truth
    assert any(v != int(v) for v in truth.values())
    # the topic itself: each (batch, worker, seq) once, on the worker's partition, and nothing else
    records = [(p, json.loads(v)) for p, recs in read_topic(kafka_broker, "exactly-once").items() for _, _, v in recs]
    assert all(m["worker"] == p for p, m in records)
    assert len({(m["out_batch"], m["worker"], m["seq"]) for _, m in records}) == len(records) == rows


def test_kill_9_with_split_keys_then_restart_gives_ground_truth(tmp_path):
    """dchoices splits the head keys: the results are written by the key-partitioned merge stage
    (share_merge) from the workers' shares.  Killed after a batch's operator ran (its shares sent,
    nothing applied) and after its snapshot but before Spark's commit, then restarted: every (batch, key) has exactly one row, equal to the windowed count recomputed from
    Spark's offset log and the input file."""
    keys, data = write_stream(tmp_path, 24_000)
    kills, text = kill_and_restart(tmp_path, data, ["collected:{}", "saved:{}"],
                                   grouping=("--algorithm", "dchoices"), progress_timeout=600)
    assert kills == 2 and text.count("fault injection: SIGKILL") == 2, text[-3000:]
    snap = latest_snapshot(tmp_path)
    assert sum(snap["consumed"].values()) == len(keys) and snap["controller"].planner.name == "dchoices"
    per_batch = batch_keys(tmp_path / "ckpt", lambda p, s, e: [keys[j * 2 + p] for j in range(s, e)])
    got, rows, distinct = sink_results(tmp_path / "sink")
    assert rows == distinct, "a (batch, key) was written twice"
    truth = windowed_truth(per_batch, 3)
    assert only(got, truth) == truth
    shares = read_sink(str(tmp_path / "sink")).column("shares").to_pylist()
    assert max(shares) > 1  # head keys were split over workers and merged
