"""Snapshot loader (``skewlab plan --snapshot``) and the plan's JSON form."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewlab.engine.algorithms import registry
from skewlab.engine.algorithms.keys import fingerprints, home
from skewlab.engine.cli.plan_snapshot import SnapshotError, load_snapshot, parse_snapshot, plan_to_json

FIG4 = {
    "workers": 2,
    "keys": [
        {"key": "k1", "cost": 7, "size": 7, "home": 0, "worker": 0},
        {"key": "k2", "cost": 4, "size": 4, "home": 0, "worker": 0},
        {"key": "k3", "cost": 2, "size": 2, "home": 0, "worker": 1},
        {"key": "k4", "cost": 1, "size": 1, "home": 1, "worker": 1},
        {"key": "k5", "cost": 5, "size": 5, "home": 1, "worker": 0},
        {"key": "k6", "cost": 1, "size": 1, "home": 1, "worker": 1},
    ],
}

PLAN_FIELDS = {
    "algorithm", "feasible", "note", "assignment", "routing_table", "loads", "migrated_keys",
    "migrated_count", "migration_cost", "plan_seconds", "imbalance",
}


def test_load_full_snapshot_from_text_path_dict_bytes(tmp_path):
    text = json.dumps(FIG4)
    path = tmp_path / "snap.json"
    path.write_text(text)
    for source in (text, str(path), path, FIG4, text.encode()):
        stats = load_snapshot(source)
        assert stats.n_workers == 2 and stats.names == ["k1", "k2", "k3", "k4", "k5", "k6"]
        assert np.array_equal(stats.keys, fingerprints(stats.names))
        assert list(stats.cost) == [7, 4, 2, 1, 5, 1]
        assert list(stats.home) == [0, 0, 0, 1, 1, 1]
        assert list(stats.worker) == [0, 0, 1, 1, 0, 1]
        assert list(stats.loads()) == [16, 4]


def test_defaults_for_optional_fields():
    stats = load_snapshot({"workers": 3, "keys": [{"key": "a", "cost": 2.6}, {"key": "b", "cost": 4, "home": 2}]})
    assert list(stats.size) == [2.6, 4.0]  # size defaults to cost
    assert stats.home[0] == home(fingerprints(["a"]), 3)[0]  # home defaults to the base hash
    assert stats.home[1] == 2
    assert list(stats.worker) == list(stats.home)  # worker defaults to home
    assert list(stats.count) == [3, 4]  # count defaults to the rounded cost
    assert stats.interval == 0
    empty = load_snapshot('{"workers": 1, "keys": [], "interval": 4, "comment": "nothing"}')
    assert empty.keys.size == 0 and empty.interval == 4


BAD = [
    ("{not json", "invalid JSON at line 1"),
    ("[1, 2]", "expected a JSON object"),
    ({"keys": []}, "missing field 'workers'"),
    ({"workers": 2}, "missing field 'keys'"),
    ({"workers": 0, "keys": []}, "workers must be in [1,"),
    ({"workers": True, "keys": []}, "workers must be an integer"),
    ({"workers": 2.5, "keys": []}, "workers must be an integer"),
    ({"workers": 2, "keys": {}}, "keys must be a list"),
    ({"workers": 2, "keys": [], "color": 1}, "unknown field 'color'"),
    ({"workers": 2, "keys": [7]}, "key at index 0: expected an object"),
    ({"workers": 2, "keys": [{"cost": 1}]}, "key at index 0: missing field 'key'"),
    ({"workers": 2, "keys": [{"key": 5, "cost": 1}]}, "key at index 0: key must be a string"),
    ({"workers": 2, "keys": [{"key": "", "cost": 1}]}, "key at index 0: key must not be empty"),
    ({"workers": 2, "keys": [{"key": "a"}]}, "key 'a' (index 0): missing field 'cost'"),
    ({"workers": 2, "keys": [{"key": "a", "cost": -1}]}, "key 'a' (index 0): cost must be >= 0"),
    ({"workers": 2, "keys": [{"key": "a", "cost": "7"}]}, "key 'a' (index 0): cost must be a number"),
    ({"workers": 2, "keys": [{"key": "a", "cost": False}]}, "cost must be a number"),
    ({"workers": 2, "keys": [{"key": "a", "cost": 1, "size": -2}]}, "size must be >= 0"),
    ({"workers": 2, "keys": [{"key": "a", "cost": 1, "home": 2}]}, "key 'a' (index 0): home 2 out of range [0, 1]"),
    ({"workers": 2, "keys": [{"key": "a", "cost": 1, "worker": -1}]}, "worker -1 out of range"),
    ({"workers": 2, "keys": [{"key": "a", "cost": 1, "home": 0.5}]}, "home must be an integer"),
    ({"workers": 2, "keys": [{"key": "a", "cost": 1, "count": -3}]}, "count must be >= 0"),
    ({"workers": 2, "keys": [{"key": "a", "cost": 1, "wroker": 1}]}, "unknown field 'wroker'"),
    (
        {"workers": 2, "keys": [{"key": "a", "cost": 1}, {"key": "b", "cost": 1}, {"key": "a", "cost": 2}]},
        "key 'a' (index 2): duplicate key (first at index 0)",
    ),
    ('{"workers": 2, "keys": [{"key": "a", "cost": NaN}]}', "not a valid number"),
    ('{"workers": 2, "keys": [{"key": "a", "cost": Infinity}]}', "not a valid number"),
    ('{"workers": 2, "workers": 3, "keys": []}', "duplicate field 'workers'"),
    ({"workers": 2, "keys": [], "interval": -1}, "interval must be >= 0"),
    ({"workers": 2, "keys": [], "comment": 3}, "comment must be a string"),
    ("", "empty input"),
]


@pytest.mark.parametrize("source,message", BAD)
def test_malformed_snapshots_raise_one_line_errors(source, message):
    with pytest.raises(SnapshotError) as info:
        load_snapshot(source)
    text = str(info.value)
    assert message in text
    assert "\n" not in text
    assert isinstance(info.value, ValueError)


def test_stdin_dash(monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(FIG4)))
    assert load_snapshot("-").names[0] == "k1"
    monkeypatch.setattr("sys.stdin", io.StringIO("{"))
    with pytest.raises(SnapshotError, match="invalid JSON"):
        load_snapshot("-")


def test_file_errors_and_weird_names(tmp_path):
    with pytest.raises(SnapshotError, match="file not found"):
        load_snapshot(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe{")
    with pytest.raises(SnapshotError, match="cannot read"):
        load_snapshot(bad)
    # a key name with a newline still gives a one-line message
    with pytest.raises(SnapshotError) as info:
        load_snapshot({"workers": 1, "keys": [{"key": "a\nb", "cost": -1}]})
    assert "\n" not in str(info.value) and "index 0" in str(info.value)
    with pytest.raises(SnapshotError, match="expected a path"):
        load_snapshot(42)
    with pytest.raises(SnapshotError, match="expected a JSON object"):
        parse_snapshot([])


def test_plan_to_json_on_fig4_mintable():
    stats = load_snapshot(FIG4)
    g = registry.create("mintable", 2, params={"theta_max": 0.0, "amax": 2})
    plan = g.plan(stats)
    out = plan_to_json(plan, stats)
    assert set(out) == PLAN_FIELDS
    json.dumps(out)  # JSON-serialisable as is
    assert out["algorithm"] == "mintable" and out["feasible"] is True and out["note"] == ""
    assert out["assignment"] == {"k1": 0, "k2": 1, "k3": 0, "k4": 0, "k5": 1, "k6": 1}
    assert out["routing_table"] == {"k2": 1, "k4": 0}
    assert out["loads"] == [10.0, 10.0]
    assert out["migrated_keys"] == ["k2", "k3", "k4", "k5"] and out["migrated_count"] == 4
    assert out["migration_cost"] == pytest.approx(12 / 20)
    assert out["imbalance"] == 0.0 and out["plan_seconds"] >= 0.0


def test_plan_to_json_infeasible_has_note_and_llfd_table():
    stats = load_snapshot(FIG4)
    plan = registry.create("llfd", 2, params={"theta_max": 0.0, "amax": 2}).plan(stats)
    out = plan_to_json(plan, stats)
    assert out["feasible"] is False and "Amax=2" in out["note"]
    assert out["routing_table"] == {"k1": 1, "k3": 1, "k4": 0, "k5": 0}
    assert out["migrated_keys"] == ["k1", "k4"]


def test_plan_to_json_without_names_uses_fingerprints():
    stats = load_snapshot(FIG4)
    stats.names = None
    plan = registry.create("llfd", 2, params={"theta_max": 0.0}).plan(stats)
    out = plan_to_json(plan, stats)
    assert set(out["assignment"]) == {str(int(k)) for k in stats.keys}


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 5),
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(0, 4)), max_size=25),
    st.sampled_from(["llfd", "mintable", "minmig", "mixed", "mixed-bf"]),
)
def test_random_snapshots_round_trip(n, rows, name):
    snap = {
        "workers": n,
        "keys": [{"key": f"key-{i}", "cost": c, "size": s, "worker": w % n} for i, (c, s, w) in enumerate(rows)],
    }
    stats = load_snapshot(json.dumps(snap))
    plan = registry.create(name, n).plan(stats)
    out = json.loads(json.dumps(plan_to_json(plan, stats)))
    assert set(out) == PLAN_FIELDS
    assert list(out["assignment"]) == [f"key-{i}" for i in range(len(rows))]
    assert all(0 <= w < n for w in out["assignment"].values())
    for name_, w in out["routing_table"].items():
        assert w == out["assignment"][name_] and w != stats.home[stats.names.index(name_)]
    assert out["migrated_count"] == len(out["migrated_keys"])
    moved = {f"key-{i}" for i, (c, s, w) in enumerate(rows) if out["assignment"][f"key-{i}"] != w % n}
    assert set(out["migrated_keys"]) == moved
    total = sum(s for _, s, _ in rows)
    want = sum(rows[int(k.split("-")[1])][1] for k in moved) / total if total else 0.0
    assert out["migration_cost"] == pytest.approx(want)
    assert len(out["loads"]) == n and sum(out["loads"]) == pytest.approx(sum(c for c, _, _ in rows))
