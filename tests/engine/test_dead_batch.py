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
    """The engine's side, without Spark: the refusal of a batch of nothing but ``missing_value`` dead letters
    names the fields seen in the real topic's records, a batch with good tuples is not refused, and a batch
    the driver refuses stops the run after it.  (The run end to end, exit status 2 and the run marked
    failed, and ``--continue-on-dead-letters``: tests/engine/test_engine_records.py.)"""
    import json

    from kafka import KafkaProducer

    from skewlab.engine.runtimes.spark.dead_batch import input_refusal
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
    assert input_refusal(cfg, 0, {"missing_value": [3, []]}, 500) is None  # a few bad records: go on
    refusal = input_refusal(cfg, 1, {"missing_value": [200, ["7b22"]]}, 0)
    assert refusal == (
        "batch 1: 200 of 200 records are dead letters 'missing_value': the JSON record has no field 'latency' of "
        "--value-field (fields seen: user.id, latency_ms); stopping (--continue-on-dead-letters goes on)")
    engine = SparkEngine(cfg, log=lambda m: None)
    try:
        engine.driver.apply = lambda df, batch_id: True  # an applied batch the driver did not refuse
        engine.process_batch(None, 0)
        assert not engine.lifecycle.stop_requested.is_set()

        def refused(df, batch_id):
            engine.driver.input_refused = refusal
            return True

        engine.driver.apply = refused
        engine.process_batch(None, 1)
        assert engine.lifecycle.stop_requested.is_set()
    finally:
        engine.store.close()
