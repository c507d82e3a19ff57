"""A user's grouping on the Spark engine, exactly once: a run starts on ``hash``; ``skewlab control
set-algorithm examples.bounded_loads:BoundedLoads`` switches it mid-run (its state follows the new
owners through the migration path); the driver is killed with SIGKILL once the switch is in force, then
again between a batch's state export and its import, and restarted with the same checkpoint each time.
Every (batch, key) result in the sink equals the windowed count recomputed from Spark's offset log and
the input file, exactly once (the machinery of tests/end_to_end/test_exactly_once.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from skewlab.storage import connect
from tests.end_to_end.test_exactly_once import (engine_cmd, kill_and_restart, latest_snapshot, snapshots,
                                                wait_for_batches, write_stream)
from tests.spark_truth import batch_keys, only, sink_results, windowed_truth

pytestmark = pytest.mark.slow

SPEC = "examples.bounded_loads:BoundedLoads"
HASH = ("--algorithm", "hash")
ROOT = Path(__file__).resolve().parents[2]


def _wait_for_planner(tmp: Path, proc: subprocess.Popen, name: str, timeout: float = 300) -> None:
    """Until the engine's latest snapshot routes by ``name`` and has migrated state since."""
    end = time.time() + timeout
    while time.time() < end:
        assert proc.poll() is None, (tmp / "engine.log").read_text()[-3000:]
        if snapshots(tmp):
            try:
                snap = latest_snapshot(tmp)
            except (EOFError, OSError):  # being written
                snap = None
            if snap and snap["controller"].planner.name == name and snap["controller"].migrations:
                return
        time.sleep(0.2)
    raise AssertionError(f"the engine did not switch to {name} in {timeout}s")


def test_switch_to_a_user_grouping_then_kill_9_and_restart_gives_ground_truth(tmp_path):
    keys, data = write_stream(tmp_path, 40_000)
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    db = f"sqlite:///{tmp_path}/db.sqlite"
    with open(tmp_path / "engine.log", "ab") as log:
        proc = subprocess.Popen(engine_cmd(tmp_path, data, grouping=HASH), stdout=log, stderr=log, env=env)
        try:
            assert wait_for_batches(tmp_path, proc, 1, 300), "the file ran out before the switch"
            control = subprocess.run([sys.executable, "-m", "skewlab", "control", "--db", db, "set-algorithm", SPEC,
                                      "gate=false", "theta_max=0.02", "epsilon=0.05"],
                                     capture_output=True, text=True, env=env, timeout=120)
            assert control.returncode == 0, control.stderr
            _wait_for_planner(tmp_path, proc, SPEC)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the engine ended before it was killed"
    # restarted with --algorithm hash: the run goes on with its own grouping, the user's; killed between a
    # plan's export and its import, then run to the end of the file
    kills, text = kill_and_restart(tmp_path, data, ["collected:{}:export"], grouping=HASH, progress_timeout=300)
    assert kills == 1 and text.count("fault injection: SIGKILL") == 1, text[-3000:]
    assert f"continues with its own grouping ({SPEC}" in text

    snap = latest_snapshot(tmp_path)
    assert sum(snap["consumed"].values()) == len(keys)
    assert snap["controller"].planner.name == SPEC and snap["controller"].planner.p["epsilon"] == 0.05
    assert snap["controller"].planner.routing_table_size() > 0
    per_batch = batch_keys(tmp_path / "ckpt", lambda p, s, e: [keys[j * 2 + p] for j in range(s, e)])
    got, rows, distinct = sink_results(tmp_path / "sink")
    assert rows == distinct, "a (batch, key) was written twice"
    truth = windowed_truth(per_batch, 3)
    assert only(got, truth) == truth
    # the database: the command applied, the switch recorded, every batch once
    store = connect(db)
    (run,) = store.list_runs()
    (command,) = store.recent_commands(10, run_id=run["id"])
    assert command["status"] == "applied" and command["payload"]["algorithm"] == SPEC
    rows = store.interval_metrics(run["id"])
    assert [r["batch_id"] for r in rows] == list(range(len(rows)))
    assert sum(r["tuples"] for r in rows) == len(keys)
    algorithms = [r["algorithm"] for r in rows]
    assert algorithms[0] == "hash" and algorithms[-1] == SPEC
