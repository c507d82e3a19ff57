"""The engine on a Spark standalone cluster whose worker is another host (its own network namespace,
tests/cluster_fixtures.py), run with the README's "Run on a cluster" command:

* a driver advertising 127.0.0.1 is refused in one line (exit 2), and so are executors whose Python
  lacks skewlab;
* the README command, with relative ``--checkpoint``/``--sink``/``--input`` resolved on the driver,
  runs with ``set-algorithm`` and ``set-workers`` migrations, a ``kill -9`` of the executor while the
  query runs and a ``kill -9`` of the driver, restarted with the same checkpoint; every (batch, key)
  result equals the windowed count recomputed from Spark's offset log and the input, and no result
  landed in an executor's work directory.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.cluster_fixtures import netns_cluster  # noqa: F401 - pytest fixture
from tests.end_to_end.test_readme import readme
from tests.spark_truth import batch_keys, only, sink_results, windowed_truth

pytestmark = pytest.mark.slow

README_CLUSTER = ("skewlab engine --master spark://MASTER_HOST:7077 --conf spark.driver.host=DRIVER_IP "
                  "--conf spark.driver.bindAddress=DRIVER_IP --conf spark.pyspark.python=/opt/skewlab/bin/python "
                  "--checkpoint ck --sink results --db sqlite:///skewlab.db --source file --input keys.txt")
#: the test's pace: small batches so that the run is short and several batches pass between events
PACE = ["--algorithm", "mixed", "--param", "theta_max=0.02", "--workers", "4", "--sources", "2", "--interval", "0.5",
        "--rate", "2500", "--max-per-batch", "1500", "--window", "3", "--shadow", ""]
SOURCES = 2


def readme_argv(cluster, driver_ip: str) -> list[str]:
    cmd = readme(README_CLUSTER)
    for placeholder, value in (("MASTER_HOST:7077", cluster.master.split("://")[1]), ("DRIVER_IP", driver_ip),
                               ("/opt/skewlab/bin/python", sys.executable)):
        cmd = cmd.replace(placeholder, value)
    argv = cmd.split()
    return [sys.executable, "-m", "skewlab", *argv[1:]]


def snapshots(ck: Path) -> list[int]:
    d = ck / "skewlab"
    return sorted(int(p.stem.split("-")[1]) for p in d.glob("engine-*.pkl")) if d.exists() else []


def latest(ck: Path):
    for b in reversed(snapshots(ck)):
        try:
            with open(ck / "skewlab" / f"engine-{b}.pkl", "rb") as fh:
                return b, pickle.load(fh)
        except (OSError, EOFError, pickle.UnpicklingError):
            continue
    return -1, None


def wait_until(proc: subprocess.Popen, ck: Path, what: str, ok, log: Path, timeout: float = 600):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert proc.poll() is None, f"engine exited ({proc.returncode}) waiting for {what}:\n{log.read_text()[-4000:]}"
        b, snap = latest(ck)
        if snap is not None and ok(b, snap):
            return b, snap
        time.sleep(0.2)
    raise AssertionError(f"no {what} in {timeout:.0f} s:\n{log.read_text()[-4000:]}")


def control(tmp: Path, *args: str) -> None:
    r = subprocess.run([sys.executable, "-m", "skewlab", "control", "--db", f"sqlite:///{tmp}/skewlab.db", *args],
                       capture_output=True, text=True, timeout=60, cwd=tmp)
    assert r.returncode == 0, r.stderr


def one_line_error(r: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("skewlab: error:")]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    return lines[0]


@pytest.mark.timeout(2400)  # about 5 min on a quiet 2-core machine; generous for a loaded one
def test_engine_on_a_cluster_with_another_host(tmp_path, netns_cluster):  # noqa: F811 - fixture
    cluster = netns_cluster
    rng = np.random.default_rng(5)
    keys = [f"w{int(x)}" for x in rng.zipf(1.3, 30_000) % 1500]
    (tmp_path / "keys.txt").write_text("\n".join(keys) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_LOCAL_IP", "PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR")}
    env.update(PYTHONUNBUFFERED="1", SKEWLAB_EXECUTOR_CHECK_TIMEOUT="300")

    # 1. a driver that advertises loopback: the executor in the other namespace could never reach it
    elsewhere = ["--checkpoint", "ck-refused", "--db", f"sqlite:///{tmp_path}/refused.db"]  # kept apart from the run
    r = subprocess.run(readme_argv(cluster, "127.0.0.1") + PACE + elsewhere, capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=300)
    assert "loopback" in one_line_error(r)
    # 2. executors whose Python has no skewlab (the Debian interpreter): one line, not a hung query
    system_python = "/usr/bin/python3"
    if os.path.exists(system_python) and subprocess.run([system_python, "-c", "import skewlab"],
                                                        capture_output=True).returncode != 0:
        argv = readme_argv(cluster, cluster.host_ip) + PACE + ["--conf", f"spark.pyspark.python={system_python}",
                                                                *elsewhere]
        r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert "executors cannot run skewlab" in one_line_error(r)

    # 3. the README command: relative paths, migrations, kill -9 of the executor and of the driver
    ck = tmp_path / "ck"
    argv = readme_argv(cluster, cluster.host_ip) + PACE
    log = tmp_path / "engine.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=out, env=env, cwd=tmp_path)
        try:
            wait_until(proc, ck, "batch 3", lambda b, s: b >= 3, log)
            control(tmp_path, "set-algorithm", "hash")
            b_alg, _ = wait_until(proc, ck, "the switch to hash", lambda b, s: s["controller"].planner.name == "hash", log)
            executors = cluster.executor_pids()
            assert executors, "no executor runs on the worker"
            os.kill(executors[0], signal.SIGKILL)  # the query runs continuously: mid-task or between tasks
            wait_until(proc, ck, "batches after the executor's death", lambda b, s: b >= b_alg + 3, log)
            assert cluster.executor_pids() and cluster.executor_pids() != executors, "no new executor"
            control(tmp_path, "set-workers", "6")
            wait_until(proc, ck, "6 workers", lambda b, s: s["controller"].n_workers == 6, log)
            time.sleep(0.3)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        restarted = subprocess.run(argv, stdout=out, stderr=out, env=env, cwd=tmp_path, timeout=600)
    text = log.read_text()
    assert restarted.returncode == 0, text[-4000:]
    assert "input file fully replayed" in text

    _, snap = latest(ck)
    assert sum(snap["consumed"].values()) == len(keys)
    controller = snap["controller"]
    assert controller.planner.name == "hash" and controller.n_workers == 6
    assert len(controller.migrations) >= 2, "the switch and the worker change should each migrate keys"
    per_batch = batch_keys(ck, lambda p, s, e: [keys[j * SOURCES + p] for j in range(s, e)])
    assert sum(sum(c.values()) for c in per_batch.values()) == len(keys)
    got, rows, distinct = sink_results(tmp_path / "results")
    assert rows == distinct, "a worker wrote a result twice"
    truth = windowed_truth(per_batch, 3)
    assert only(got, truth) == truth
    # the executors wrote where the driver resolved the paths, not into their own work directory
    assert not [p for p in cluster.work_dir.rglob("batch=*")], "results in an executor's work directory"
    print(f"cluster run: {len(per_batch)} batches, {len(keys)} tuples, {len(truth)} (batch, key) results exact; "
          f"migrations {len(controller.migrations)}; executor killed once, driver killed once")
