"""When (nearly) all of a batch's records are dead letters for one reason (issue 38 item 3): the one line
that names the setting it points at (:mod:`skewlab.engine.runtimes.spark.dead_batch`).  The engine's
stop on it: tests/engine/test_engine_records.py."""

from __future__ import annotations

from skewlab.engine.runtimes.spark.dead_batch import MIN_RECORDS, dead_batch_problem, json_field_paths

KAFKA = dict(source="kafka", key_field="user.id", value_field="latency")


def test_json_field_paths_lists_the_leaves_dotted():
    assert json_field_paths(b'{"user": {"id": 7, "geo": {"cc": "it"}}, "latency_ms": 3.5, "tags": []}') == [
        "user.id", "user.geo.cc", "latency_ms", "tags"]
    assert json_field_paths(b"[1, 2]") == [] and json_field_paths(b"{not json") == []


def test_a_batch_of_dead_letters_for_one_reason_names_the_field_and_the_fields_seen():
    line = dead_batch_problem(4, {"missing_value": (5000, ["7b22"])}, 0, fields_seen=["user.id", "latency_ms"], **KAFKA)
    assert line == ("batch 4: 5000 of 5000 records are dead letters 'missing_value': the JSON record has no field "
                    "'latency' of --value-field (fields seen: user.id, latency_ms); stopping "
                    "(--continue-on-dead-letters goes on)")
    line = dead_batch_problem(0, {"missing_key": (995, []), "bad_json": (2, [])}, 3, **KAFKA)
    assert "995 of 1000 records are dead letters 'missing_key'" in line and "'user.id' of --key-field" in line
    line = dead_batch_problem(0, {"no_key": (100, [])}, 0, source="kafka", key_field="", value_field="",
                              fields_seen=["user.id"])
    assert "no Kafka key; name the key's field of the JSON value with --key-field (fields seen: user.id)" in line


def test_a_few_dead_letters_or_a_tiny_batch_go_on():
    assert dead_batch_problem(0, {"missing_value": (980, [])}, 20, **KAFKA) is None  # 98 %: real bad records
    assert dead_batch_problem(0, {"missing_value": (500, []), "bad_json": (500, [])}, 0, **KAFKA) is None  # two reasons
    assert dead_batch_problem(0, {"missing_value": (MIN_RECORDS - 1, [])}, 0, **KAFKA) is None
    assert dead_batch_problem(0, {}, 1000, **KAFKA) is None


def test_the_engine_stops_on_such_a_batch_naming_the_fields_of_the_topics_records(tmp_path, kafka_broker):
    """The engine's side, without Spark: a batch of nothing but ``missing_value`` dead letters sets the
    stop with the line, the fields seen read from the real topic's records; a batch with good tuples, or
    ``--continue-on-dead-letters``, does not stop.  (The run end to end, exit status 2 and the run marked
    failed: tests/engine/test_engine_records.py.)"""
    import json

    from kafka import KafkaProducer

    from skewlab.engine.runtimes.spark.engine import EngineConfig, SparkEngine

    topic = "latencies-typo-driver"
    p = KafkaProducer(bootstrap_servers=kafka_broker)
    for i in range(40):
        p.send(topic, value=json.dumps({"user": {"id": i % 7}, "latency_ms": i}).encode(), partition=i % 2)
    p.flush()
    p.close()
    cfg = EngineConfig(source="kafka", bootstrap=kafka_broker, topic=topic, key_field="user.id", value_field="latency",
                       operator="mean", algorithm="hash", db=f"sqlite:///{tmp_path}/db.sqlite",
                       checkpoint=str(tmp_path / "ckpt"), shadow=[])
    engine = SparkEngine(cfg, log=lambda m: None)
    engine._check_dead_batch(0, {"missing_value": [3, []]}, 500)  # a few bad records: go on
    assert engine.input_refused is None and not engine.lifecycle.stop_requested.is_set()
    engine._check_dead_batch(1, {"missing_value": [200, ["7b22"]]}, 0)
    assert engine.input_refused == (
        "batch 1: 200 of 200 records are dead letters 'missing_value': the JSON record has no field 'latency' of "
        "--value-field (fields seen: user.id, latency_ms); stopping (--continue-on-dead-letters goes on)")
    assert engine.lifecycle.stop_requested.is_set()
