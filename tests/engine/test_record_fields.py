"""The user's records (issue 24, item 1): keys and values from JSON fields (dotted paths) and CSV columns,
a missing or wrongly typed field a dead letter, the generator's seeded values, and the engine's
one-line refusals of fields that do not fit the source or the operator."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from skewlab.engine.config.params import ParamError
from skewlab.engine.workloads.key_file import read_key_file
from skewlab.engine.workloads.record_fields import json_fields, parse_path, parse_value


def test_dotted_paths():
    assert parse_path("user.id") == ("user", "id")
    assert parse_path(" amount ") == ("amount",)
    assert parse_path("") == ()
    for bad in ("user..id", ".id", "id."):
        with pytest.raises(ParamError, match="dotted field path"):
            parse_path(bad, "--key-field")


@pytest.mark.parametrize("record, expected", [
    ({"user": {"id": "u7"}, "amount": 2.5}, ("u7", 2.5, None)),
    ({"user": {"id": 42}, "amount": 3}, ("42", 3.0, None)),  # an integer key is its decimal text
    ({"user": {}, "amount": 1}, (None, None, "missing_key")),
    ({"user": "u7", "amount": 1}, (None, None, "missing_key")),  # the path goes through a non-object
    ({"user": {"id": None}, "amount": 1}, (None, None, "missing_key")),
    ({"user": {"id": 1.5}, "amount": 1}, (None, None, "bad_key_type")),
    ({"user": {"id": True}, "amount": 1}, (None, None, "bad_key_type")),
    ({"user": {"id": ["a"]}, "amount": 1}, (None, None, "bad_key_type")),
    ({"user": {"id": "  "}, "amount": 1}, (None, None, "empty_key")),
    ({"user": {"id": "u7"}}, (None, None, "missing_value")),
    ({"user": {"id": "u7"}, "amount": "12"}, (None, None, "bad_value_type")),  # a string is not a number
    ({"user": {"id": "u7"}, "amount": False}, (None, None, "bad_value_type")),
    ({"user": {"id": "u7"}, "amount": {"eur": 1}}, (None, None, "bad_value_type")),
])
def test_json_fields_by_dotted_path(record, expected):
    assert json_fields(json.dumps(record).encode(), ("user", "id"), ("amount",)) == expected


def test_json_fields_bad_json_and_non_finite():
    assert json_fields(b"not json", ("k",), ("v",))[2] == "bad_json"
    assert json_fields(b"[1, 2]", ("k",), ("v",))[2] == "bad_json"
    assert json_fields(b"\xff\xfe", ("k",), ())[2] == "bad_json"
    assert json_fields(b'{"k": "a", "v": NaN}', ("k",), ("v",))[2] == "bad_value_type"
    assert json_fields(b'{"k": "a", "v": 1e400}', ("k",), ("v",))[2] == "bad_value_type"  # inf
    assert json_fields(b'{"v": 4}', (), ("v",)) == (None, 4.0, None)  # key not read here


def test_kafka_fields_key_from_record_key_or_json():
    from skewlab.engine.runtimes.spark.sources import parse_kafka_fields

    v = json.dumps({"user": {"id": "u1"}, "amount": 7}).encode()
    assert parse_kafka_fields(b"k", v, "key", 100, (), ("amount",)) == ("k", 7.0, None, None)
    assert parse_kafka_fields(b"k", v, "key", 100, ("user", "id"), ("amount",)) == ("u1", 7.0, None, None)
    assert parse_kafka_fields(None, v, "key", 100, (), ("amount",))[2] == "no_key"
    assert parse_kafka_fields(b"k", None, "key", 100, (), ("amount",))[2] == "no_value"
    key, value, err, raw = parse_kafka_fields(b"k", b'{"amount": "x"}', "key", 100, (), ("amount",))
    assert (key, value, err) == (None, None, "bad_value_type") and raw == '{"amount": "x"}'
    assert parse_kafka_fields(b"k", v, "key", 1, ("user", "id"), ())[2] == "oversized"
    assert parse_kafka_fields(b"k", b"x", "key", 100) == ("k", None, None, None)  # bare keys as before


def test_csv_value_column_and_its_dead_letters(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("user,amount\nu1,2.5\nu2,\nu3,abc\nu4\n,3\nu1,-1\nu5,nan\n")
    rec = read_key_file(str(f), "user", value_column="amount")
    assert rec.keys == ["u1", None, None, None, None, "u1", None]
    assert rec.values == [2.5, None, None, None, None, -1.0, None]
    assert rec.errors == [None, "empty_value", "bad_value_type", "missing_column", "empty_key", None,
                          "bad_value_type"]
    by_index = read_key_file(str(f), "0", header=True, value_column="1")
    assert by_index.values == rec.values
    with pytest.raises(ParamError, match="unknown column 'price'"):
        read_key_file(str(f), "user", value_column="price")
    with pytest.raises(ParamError, match="needs a key column"):
        read_key_file(str(f), "", value_column="amount")


def test_spark_file_source_emits_values(tmp_path):
    from skewlab.engine.runtimes.spark import sources as S

    f = tmp_path / "t.csv"
    f.write_text("user,amount\nu1,2.5\nu2,x\nu3,4\n")
    keys, errors, _, values = S.load_key_file(str(f), "user", value_column="amount")
    assert keys.to_pylist() == ["u1", None, "u3"] and values.to_pylist() == [2.5, None, 4.0]
    assert errors.to_pylist() == [None, "bad_value_type", None]
    assert S.has_values(S.FILE, {"value_column": "amount"}) and not S.has_values(S.FILE, {"column": "user"})
    assert S._schema(S.FILE, {"value_column": "amount"}).endswith("value DOUBLE")


def test_generator_values_are_a_pure_function_of_seed_instance_and_position():
    from skewlab.engine.runtimes.spark.sources import VALUE_RANGE, generator_values

    seqs = np.arange(0, 10_000)
    a = generator_values(3, 1, seqs)
    assert np.array_equal(a[500:600], generator_values(3, 1, seqs[500:600]))  # any range, any replay
    assert not np.array_equal(a, generator_values(3, 0, seqs)) and not np.array_equal(a, generator_values(4, 1, seqs))
    assert a.min() >= 0 and a.max() < VALUE_RANGE and np.all(a == np.round(a))
    assert abs(a.mean() - (VALUE_RANGE - 1) / 2) < 15  # spread over the range


@pytest.mark.parametrize("kw, fragment", [
    (dict(source="file", path="x.csv", operator="mean"), "mean reads a value per tuple; name it with --value-field"),
    (dict(source="kafka", bootstrap="h:1", topic="t", operator="sum"), "--value-field (a dotted JSON field"),
    (dict(source="file", path="x.csv", key_field="a", value_field="b"), "operator count reads no value"),
    (dict(source="generator", value_field="amount", operator="mean"), "generator draws its own keys"),
    (dict(source="kafka", bootstrap="h:1", topic="t", key_field="user..id"), "not a dotted field path"),
    (dict(source="file", path="x.csv", operator="mean", value_field="b"), "needs --key-field too"),
    (dict(source="file", path="x.csv", key_field="a", column="b"), "--column is an alias of --key-field"),
])
def test_engine_config_refuses_fields_that_do_not_fit(tmp_path, kw, fragment):
    from skewlab.engine.runtimes.spark.engine import EngineConfig

    if kw.get("path"):
        (tmp_path / kw["path"]).write_text("a,b\nx,1\n")
        kw["path"] = str(tmp_path / kw["path"])
    with pytest.raises(ParamError, match=fragment.replace("(", r"\(")):
        EngineConfig(**kw).validate()


def test_engine_config_accepts_records_of_values(tmp_path):
    from skewlab.engine.runtimes.spark.engine import EngineConfig

    f = tmp_path / "t.csv"
    f.write_text("user,amount\nu1,2\n")
    cfg = EngineConfig(source="file", path=str(f), column="user", value_field="amount", operator="mean")
    cfg.validate()
    assert cfg.value_kind() == "field"
    assert cfg.source_options()[1]["column"] == "user" and cfg.source_options()[1]["value_column"] == "amount"
    gen = EngineConfig(operator="sum")
    gen.validate()
    assert gen.source_options()[1]["values"] == "true" and EngineConfig().source_options()[1]["values"] == "false"
    assert EngineConfig(operator="join").value_kind() == "seq"


def test_cli_value_operator_without_value_field_is_one_line_exit_2(tmp_path):
    """What the user sees: one line on stderr, status 2, before Spark starts."""
    f = tmp_path / "t.csv"
    f.write_text("user,amount\nu1,2\n")
    proc = subprocess.run([sys.executable, "-m", "skewlab", "engine", "--source", "file", "--input", str(f),
                           "--key-field", "user", "--operator", "mean", "--db", f"sqlite:///{tmp_path}/db.sqlite"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--value-field" in lines[0] and "Traceback" not in proc.stderr


def test_simulate_takes_key_and_value_fields_of_a_csv(tmp_path, capsys):
    from skewlab.cli import main

    f = tmp_path / "t.csv"
    f.write_text("user,amount\n" + "".join(f"u{i % 5},{i}\n" for i in range(200)) + "u1,x\nu2,\n")
    code = main(["simulate", "--algorithm", "hash", "--input", str(f), "--key-field", "user",
                 "--value-field", "amount", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["dead_letters"] == {"bad_value_type": 1, "empty_value": 1}
    assert out["messages"] == 200
