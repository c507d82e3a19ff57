"""One move, one interval, one figure (issue 26 item 10): :mod:`skewlab.storage.moves` and what
``skewlab control status`` prints from it.

The stored run is what the Spark engine writes for a switch applied for interval 8 whose moves and
interval 8's rebalance travel as two migrations, imported at intervals 10 and 11: each row carries its
own figure (state moved over the total state when it was planned, 0.693 and 0.167) and interval 8's
metric the interval's (its state moved over its total state, 0.897).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from skewlab.storage import IntervalRecord, MigrationRow, connect
from skewlab.storage.moves import cost_text, moves, recent_moves


def _record(i: int, cost: float = 0.0, migrations=()) -> IntervalRecord:
    return IntervalRecord.from_parts(i, i, {"tuples": 100, "n_workers": 4, "imbalance": 0.1, "migration_cost": cost},
                                     migrations=list(migrations))


@pytest.fixture()
def db(tmp_path):
    url = f"sqlite:///{tmp_path}/db.sqlite"
    store = connect(url)
    run = store.create_run("mixed", {}, n_workers=4, name="live")
    cid = store.submit_command("set-algorithm", {"algorithm": "hash", "params": {}}, run_id=run)
    for i in range(12):
        migs = []
        if i == 10:
            migs = [MigrationRow(algorithm="mixed", keys_moved=40, state_moved=693.0, migration_cost=0.693,
                                 detail={"reason": "algorithm", "planned_interval": 8})]
        if i == 11:
            migs = [MigrationRow(algorithm="hash", keys_moved=9, state_moved=167.0, migration_cost=0.167,
                                 detail={"reason": "rebalance", "planned_interval": 8})]
        store.record_interval(run, _record(i, 0.897 if i == 8 else 0.0, migs))
        if i == 7:  # applied at the end of batch 7: in effect from batch (= interval) 8
            store.mark_command(cid, "applied", applied_batch=8, run_id=run)
    store.close()
    return url, run, cid


def test_a_move_is_its_interval_with_the_interval_metric(db):
    url, run, _ = db
    store = connect(url)
    try:
        got = recent_moves(store, run)
    finally:
        store.close()
    assert len(got) == 1
    move = got[0]
    assert (move["interval"], move["imported"], move["keys_moved"]) == (8, 11, 49)
    assert move["reason"] == "algorithm+rebalance" and move["state_moved"] == pytest.approx(860.0)
    assert move["migration_cost"] == pytest.approx(0.897)  # the interval's figure, not 0.693 + 0.167


def test_rows_without_a_stored_interval_metric_keep_their_own_figures():
    rows = [{"interval": 3, "migration_cost": 0.25, "keys_moved": 2, "state_moved": 5.0, "detail": {"reason": "rebalance"}}]
    assert moves(rows, {})[0]["migration_cost"] == pytest.approx(0.25)
    assert moves(rows, {3: 0.5})[0]["migration_cost"] == pytest.approx(0.5)
    assert cost_text(0.897) == "0.897" and cost_text(None) == "—"


def test_control_status_prints_the_moves_interval_and_figure(db):
    url, _, cid = db
    out = subprocess.run([sys.executable, "-m", "skewlab", "control", "--db", url, "status"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith(f"#{cid} "))
    assert "applied at interval 8, migration cost 0.897" in line, out.stdout


def test_a_recorded_run_gives_each_interval_its_own_moves_and_figure(tmp_path):
    """A run recorded by the engine's driver step (tests/migration_run.py): the rebalance of interval 3
    and the switch in effect from interval 4 leave in one export; interval 4's rebalance follows.
    Each move holds exactly the state its interval's metric counts, its rows' figures sum to that
    metric, and the command's interval ("applied at interval 4") is the switch's move.  Before the
    rows were recorded per interval, the switch was listed under interval 3 (state 172,499 against
    interval 3's figure 0.2812, which counts 56,036) and interval 4's move held 41,352 of its 157,815."""
    from tests.migration_run import record_run

    url = f"sqlite:///{tmp_path}/run.sqlite"
    run, cid, rows = record_run(url)
    store = connect(url)
    try:
        got = {m["interval"]: m for m in recent_moves(store, run)}
        stored = store.migration_events(run)
        (command,) = [c for c in store.recent_commands(5, run_id=run) if c["id"] == cid]
    finally:
        store.close()
    moved = {r["interval"]: r for r in rows if r["state_moved"]}
    assert sorted(got) == sorted(i for i in moved if i <= 4)  # interval 5's import lands in batch 7
    for iv, move in got.items():
        assert move["state_moved"] == pytest.approx(moved[iv]["state_moved"]), iv
        assert move["migration_cost"] == pytest.approx(moved[iv]["migration_cost"]), iv
        own = [m["migration_cost"] for m in stored if m["planned_interval"] == iv]
        assert sum(own) == pytest.approx(move["migration_cost"]), iv  # the rows' shares sum to the metric
    assert command["applied_interval"] == 4
    assert "switch" in got[4]["reason"] and "switch" not in got[3]["reason"]
    # the switch's row and interval 3's left in one export: its bytes are on interval 3's row
    switch = next(m for m in stored if m["planned_interval"] == 4 and m["detail"]["reason"] == "switch")
    assert switch["bytes_moved"] is None and switch["detail"]["bytes_with_interval"] == 3
    assert cost_text(got[4]["migration_cost"]) == cost_text(rows[4]["migration_cost"]) == "0.9406"
    out = subprocess.run([sys.executable, "-m", "skewlab", "control", "--db", url, "status"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "applied at interval 4, migration cost 0.9406" in out.stdout, out.stdout
