"""A checkpoint belongs to one stream: restarting it with other stream settings is refused with one
line; other settings of a restarted run are reported, not silently dropped (no Spark needed)."""

from __future__ import annotations

import pytest

from skewlab.engine.io.checkpoint import STREAM_FIELDS, stream_mismatch
from skewlab.engine.config.params import ParamError
from skewlab.engine.runtimes.spark.engine import EngineConfig, SparkEngine


def _engine(tmp_path, logs, **kw):
    cfg = EngineConfig(db=f"sqlite:///{tmp_path / 'm.db'}", checkpoint=str(tmp_path / "ckpt"), workers=4,
                       algorithm="pkg", shadow=[], **kw)
    return SparkEngine(cfg, log=logs.append)


def test_stream_mismatch_lists_changed_stream_settings_only():
    saved = {k: None for k in STREAM_FIELDS} | {"operator": "count", "source": "file", "path": "a.txt"}
    assert stream_mismatch(saved, dict(saved)) == []
    assert stream_mismatch(None, saved) == []  # snapshots written before settings were recorded
    assert stream_mismatch(saved, saved | {"operator": "join", "path": "b.txt"}) == [
        "operator: 'count' -> 'join'", "path: 'a.txt' -> 'b.txt'"]


def test_restart_with_the_same_stream_resumes_and_reports_ignored_grouping_settings(tmp_path):
    logs: list[str] = []
    first = _engine(tmp_path, logs)
    first.driver.save(0)
    again = _engine(tmp_path, logs)
    assert again.snapshot.run_id == first.snapshot.run_id and any("restored run" in m for m in logs)
    assert not any("continues with its own grouping" in m for m in logs)
    logs.clear()
    other = SparkEngine(EngineConfig(db=f"sqlite:///{tmp_path / 'm.db'}", checkpoint=str(tmp_path / "ckpt"),
                                     workers=6, algorithm="hash", shadow=[]), log=logs.append)
    assert other.snapshot.run_id == first.snapshot.run_id and other.snapshot.controller.planner.name == "pkg"
    assert any("continues with its own grouping (pkg on 4 workers)" in m for m in logs), logs


@pytest.mark.parametrize("change", [{"operator": "join", "algorithm": "mixed"}, {"seed": 7},
                                    {"workload": "drift"}, {"window": 3}])
def test_restart_on_another_stream_is_refused(tmp_path, change):
    logs: list[str] = []
    _engine(tmp_path, logs).driver.save(0)
    kw = {"algorithm": "pkg", **change}
    with pytest.raises(ParamError) as err:
        SparkEngine(EngineConfig(db=f"sqlite:///{tmp_path / 'm.db'}", checkpoint=str(tmp_path / "ckpt"), workers=4,
                                 shadow=[], **kw), log=logs.append)
    msg = str(err.value)
    assert "belongs to run 1 on another stream" in msg and "--run-name" in msg and "\n" not in msg
    assert next(iter(change)) in msg


def test_restart_against_another_database_is_refused(tmp_path):
    logs: list[str] = []
    _engine(tmp_path, logs).driver.save(0)
    with pytest.raises(ParamError, match="db: "):
        SparkEngine(EngineConfig(db=f"sqlite:///{tmp_path / 'other.db'}", checkpoint=str(tmp_path / "ckpt"),
                                 workers=4, algorithm="pkg", shadow=[]), log=logs.append)


def test_a_restored_run_records_a_restart_event_at_the_interval_it_resumes_with(tmp_path):
    """Issue 38 item 7: a kill -9 and restart leaves a ``restart`` event on the run's timeline (one per
    restart, at the controller's next interval); a new run records none."""
    from skewlab.storage import connect

    logs: list[str] = []
    first = _engine(tmp_path, logs)
    first.snapshot.controller.interval = 5  # as after five closed intervals
    first.driver.save(4)
    store = connect(f"sqlite:///{tmp_path / 'm.db'}")
    try:
        assert store.events(first.snapshot.run_id) == []
        again = _engine(tmp_path, logs)
        (ev,) = store.events(first.snapshot.run_id)
        assert (ev["kind"], ev["interval"], ev["detail"]) == ("restart", 5, {"after_batch": 4})
        again.driver.save(4)
        _engine(tmp_path, logs)
        assert [e["kind"] for e in store.events(first.snapshot.run_id)] == ["restart", "restart"]
    finally:
        store.close()
