"""The user's own records on the Spark engine (issue 24, item 1): ``mean`` of a CSV column and ``sum`` of a
field of Kafka JSON records, each (batch, key) result in the sink equal to the windowed value recomputed
in plain Python from the input (the file's text, the topic's records read back) over the batches in
Spark's offset log; bad records are dead letters, never a crash."""

from __future__ import annotations

import csv
import io
import json
import math
import random

import pytest

pytest.importorskip("pyspark")

from skewlab.engine.runtimes.spark.engine import EngineConfig, SparkEngine  # noqa: E402
from skewlab.storage import connect  # noqa: E402
from tests.spark_truth import committed_ranges, window_batches  # noqa: E402


def _cfg(tmp_path, **kw):
    # max_workers: the most a run here grows to (each state partition is a task of every batch)
    base = dict(db=f"sqlite:///{tmp_path}/db.sqlite", checkpoint=str(tmp_path / "ckpt"), workers=3, max_workers=4, sources=2,
                interval=0.3, rate=0, max_per_batch=1000, window=2, seed=5, shadow=[], max_batches=3)
    base.update(kw)
    return EngineConfig(**base)


def _skewed_users(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    users = [f"u{i}" for i in range(40)]
    return rng.choices(users, weights=[1 / (i + 1) ** 1.3 for i in range(40)], k=n)


def _per_batch(checkpoint, records_of) -> dict[int, dict[str, list[float]]]:
    """Committed batch → key → the values of its good records; ``records_of(instance, start, end)`` lists
    a range's records as ``(key, value)`` or ``None`` (a dead letter)."""
    out = {}
    for b, (start, end) in committed_ranges(checkpoint).items():
        per: dict[str, list[float]] = {}
        for p in end:
            for rec in records_of(p, start.get(p, 0), end[p]):
                if rec is not None:
                    per.setdefault(rec[0], []).append(rec[1])
        out[b] = per
    return out


def _windowed(per_batch, window: int, agg) -> dict[tuple[int, str], float]:
    return {(b, k): agg([v for j in window_batches(per_batch, b, window) for v in per_batch[j].get(k, [])])
            for b, per in per_batch.items() for k in per}


def _before_last(results: dict, checkpoint) -> dict:
    last = max(committed_ranges(checkpoint))  # the last batch's moved keys' tuples wait for the next import
    return {k: v for k, v in results.items() if k[0] < last}


def test_mean_of_a_csv_column_equals_the_files_truth(spark, tmp_path):
    """``--source file --key-field user --value-field amount --operator mean`` through a worker change
    (keys' partial states move between tasks): each key's mean over the window equals the one computed
    from the file's text; rows with a blank or non-numeric amount are dead letters."""
    users = _skewed_users(3000, 1)
    rng = random.Random(2)
    lines, records = [], []
    for i, u in enumerate(users):
        if i % 97 == 5:
            lines.append(f"{u},")
            records.append(None)
        elif i % 89 == 7:
            lines.append(f"{u},n/a")
            records.append(None)
        else:
            amount = round(rng.uniform(-50, 150), 2)
            lines.append(f"{u},{amount}")
            records.append((u, amount))
    f = tmp_path / "payments.csv"
    f.write_text("user,amount\n" + "\n".join(lines) + "\n")
    parsed = [r for r in csv.reader(io.StringIO(f.read_text()))][1:]  # the truth reads the file itself
    assert [(k, float(v)) if v and v != "n/a" else None for k, v in parsed] == records
    cfg = _cfg(tmp_path, source="file", path=str(f), key_field="user", value_field="amount", operator="mean",
               algorithm="mixed", params={"theta_max": 0.05}, max_batches=4, max_per_batch=800)

    def after(engine, batch_id):
        if batch_id == 1:
            engine.store.submit_command("set-workers", {"workers": 4})

    engine = SparkEngine(cfg, after_batch=after, log=lambda m: None)
    assert engine.run() == 0 and engine.snapshot.controller.n_workers == 4
    assert engine.store.migration_events(engine.snapshot.run_id)
    P = cfg.sources
    per_batch = _per_batch(tmp_path / "ckpt", lambda p, s, e: [records[q * P + p] for q in range(s, e)])
    truth = _before_last(_windowed(per_batch, cfg.window, lambda vs: (sum(vs) / len(vs), len(vs))), tmp_path / "ckpt")
    t = engine.results.read().to_pydict()
    got: dict = {}
    for b, k, mean, n in zip(t["batch"], t["key"], t["result"], t["n"]):
        assert (b, k) not in got, f"two rows of {k} at batch {b}"  # one final row per (batch, key)
        got[(b, k)] = (mean, n)
    got = {bk: v for bk, v in got.items() if bk in truth}
    assert got.keys() == truth.keys() and len(truth) > 40
    assert all(got[bk][1] == truth[bk][1] and math.isclose(got[bk][0], truth[bk][0], rel_tol=1e-9, abs_tol=1e-9)
               for bk in truth), [(bk, got[bk], truth[bk]) for bk in truth if got[bk] != truth[bk]][:3]
    dead = {d["reason"]: d["count"] for d in connect(cfg.db).dead_letters(engine.snapshot.run_id)}
    lines_read = {q * P + p for p, n in engine.snapshot.consumed.items() for q in range(n)}
    assert dead == {"empty_value": sum(1 for i in lines_read if lines[i].endswith(",")),
                    "bad_value_type": sum(1 for i in lines_read if lines[i].endswith("n/a"))}


def test_sum_of_a_kafka_json_field_split_over_workers_equals_the_topics_truth(spark, tmp_path, kafka_broker):
    """``--source kafka --key-field user.id --value-field amount --operator sum`` under dchoices (head
    keys split over workers): one final row per (batch, key), the workers' shares merged in Spark, equal to the windowed sum
    recomputed from the records read back from the topic; records without the field, with a string
    amount or that are not JSON are dead letters."""
    from kafka import KafkaProducer

    from skewlab.engine.io.kafka_io import read_topic

    topic = "payments-json"
    users = _skewed_users(3000, 3)
    p = KafkaProducer(bootstrap_servers=kafka_broker)
    for i, u in enumerate(users):
        if i % 101 == 3:
            value = json.dumps({"user": {"id": u}}).encode()  # no amount
        elif i % 103 == 4:
            value = json.dumps({"user": {"id": u}, "amount": "12"}).encode()  # a string amount
        elif i % 107 == 5:
            value = b"{not json"
        else:
            value = json.dumps({"user": {"id": u}, "amount": (i * 7) % 50, "note": "x"}).encode()
        p.send(topic, key=None, value=value, partition=i % 2)
    p.flush()
    p.close()
    cfg = _cfg(tmp_path, source="kafka", bootstrap=kafka_broker, topic=topic, key_field="user.id",
               value_field="amount", operator="sum", algorithm="dchoices", window=100_000, max_batches=3,
               max_per_batch=1000, workload_params={})
    engine = SparkEngine(cfg, log=lambda m: None)
    assert engine.run() == 0 and engine.snapshot.shares_split

    topic_records = read_topic(kafka_broker, topic)

    def parse(value: bytes):  # the truth's own reading of the records, plain json
        try:
            obj = json.loads(value)
        except ValueError:
            return None
        amount = obj.get("amount")
        return (obj["user"]["id"], float(amount)) if isinstance(amount, (int, float)) else None

    by_offset = {part: {off: parse(v) for off, _, v in recs} for part, recs in topic_records.items()}
    per_batch = _per_batch(tmp_path / "ckpt", lambda part, s, e: [by_offset[part][o] for o in range(s, e)])
    truth = _before_last(_windowed(per_batch, cfg.window, sum), tmp_path / "ckpt")
    rows = engine.results.read().to_pydict()
    assert len(set(zip(rows["batch"], rows["key"]))) == len(rows["key"])  # one final row per (batch, key)
    got = {(b, k): float(r) for b, k, r in zip(rows["batch"], rows["key"], rows["result"]) if (b, k) in truth}
    assert got == truth and len(truth) > 40
    assert any(n > 1 for k, n in zip(rows["key"], rows["shares"]) if k in {"u0", "u1"})  # head keys were split
    dead = {d["reason"]: d["count"] for d in connect(cfg.db).dead_letters(engine.snapshot.run_id)}
    consumed = [(part, o) for part, n in engine.snapshot.consumed.items() for o in range(n)]
    bad = [by_offset[part][o] for part, o in consumed].count(None)
    assert sum(dead.values()) == bad and set(dead) == {"missing_value", "bad_value_type", "bad_json"}


def test_max_of_the_generators_seeded_values_equals_their_truth(spark, tmp_path):
    """``--operator max`` on the generator: its seeded values (``generator_values``, a pure function of
    seed, source instance and position) recomputed beside the keys regenerated from the offset log
    give each key's windowed maximum."""
    import numpy as np

    from skewlab.engine.runtimes.spark import sources as S

    cfg = _cfg(tmp_path, source="generator", workload="zipf", workload_params={"keys": 60, "z": 1.2},
               operator="max", algorithm="hash", max_batches=3, max_per_batch=1500)
    engine = SparkEngine(cfg, log=lambda m: None)
    assert engine.run() == 0
    reader = S.GeneratorStreamReader(dict(cfg.source_options()[1]))

    def records_of(p, start, end):
        keys = S.generator_stream_ids(reader.cfg, p, start, end)
        return list(zip(keys, S.generator_values(cfg.seed, p, np.arange(start, end)).tolist()))

    truth = _windowed(_per_batch(tmp_path / "ckpt", records_of), cfg.window, max)
    t = engine.results.read().to_pydict()
    got = {(b, k): r for b, k, r in zip(t["batch"], t["key"], t["result"]) if (b, k) in truth}
    assert got == truth and len(truth) > 40 and len(set(truth.values())) > 5


def test_a_misspelt_value_field_stops_the_run_at_its_first_batch(spark, tmp_path, kafka_broker):
    """Issue 38 item 3: ``--value-field latency`` on records whose field is ``latency_ms`` made every record a
    dead letter and ran on (exit 0).  Now the first batch stops the run with one line naming the field
    and the fields the records have (exit status 2 through the CLI), the run is marked failed with that
    reason; ``--continue-on-dead-letters`` goes on and counts them."""
    from kafka import KafkaProducer

    from skewlab.shared import UsageError

    topic = "latencies-typo"
    p = KafkaProducer(bootstrap_servers=kafka_broker)
    for i, u in enumerate(_skewed_users(600, 4)):
        p.send(topic, value=json.dumps({"user": {"id": u}, "latency_ms": i % 90}).encode(), partition=i % 2)
    p.flush()
    p.close()
    cfg = _cfg(tmp_path, source="kafka", bootstrap=kafka_broker, topic=topic, key_field="user.id",
               value_field="latency", operator="mean", algorithm="hash", max_batches=3, max_per_batch=200)
    engine = SparkEngine(cfg, log=lambda m: None)
    with pytest.raises(UsageError) as err:
        engine.run()
    line = str(err.value)
    import re

    assert re.match(r"batch 0: (\d+) of \1 records are dead letters 'missing_value'", line), line
    assert "has no field 'latency' of --value-field (fields seen: user.id, latency_ms)" in line, line
    assert "--continue-on-dead-letters" in line and "\n" not in line
    assert engine.driver.batches_done == 1
    run = connect(cfg.db).get_run(engine.snapshot.run_id)
    assert run["status"] == "failed" and run["note"] == line
    go_on = _cfg(tmp_path / "on", source="kafka", bootstrap=kafka_broker, topic=topic, key_field="user.id",
                 value_field="latency", operator="mean", algorithm="hash", max_batches=3, max_per_batch=200,
                 continue_on_dead_letters=True)
    engine = SparkEngine(go_on, log=lambda m: None)
    assert engine.run() == 0 and engine.driver.batches_done == 3
    dead = connect(go_on.db).dead_letters(engine.snapshot.run_id)
    assert sum(d["count"] for d in dead if d["reason"] == "missing_value") == 600
