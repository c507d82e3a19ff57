"""What the engine needs outside Python, checked before Spark starts, through the real CLI: a missing or
too old Java, an unreachable Kafka broker or a missing topic, an unreachable PostgreSQL — each one
line on stderr naming the cause, exit status 2, no traceback (issue 26, items 2-4)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from skewlab.engine.runtimes.spark.java import java_major, java_problem
from tests.pg import pg_server  # noqa: F401 - pytest fixture


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _skewlab(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, SKEWLAB_DATA_DIR=str(tmp_path / "data"), **(env or {}))
    return subprocess.run([sys.executable, "-m", "skewlab", *args], cwd=tmp_path, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def _one_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def _fake_java(tmp_path: Path, version_line: str) -> Path:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(0o755)
    return home


def test_java_major_parses_old_and_new_version_strings():
    assert java_major('openjdk version "17.0.15" 2025-04-15') == 17
    assert java_major('java version "1.8.0_392"') == 8
    assert java_major('openjdk version "21" 2023-09-19') == 21
    assert java_major("no version here") is None


def test_too_old_java_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path, 'openjdk version "11.0.2" 2019-01-15')))
    assert "is Java 11" in java_problem()


@pytest.mark.parametrize("command", [["engine", "--max-batches", "1"], ["demo", "--port", "0", "--duration", "5"]])
def test_missing_java_one_line_exit_2(tmp_path, command):
    line = _one_line(_skewlab(tmp_path, *command, env={"JAVA_HOME": str(tmp_path / "nonexistent")}))
    assert "Java 17" in line and "JAVA_HOME=" in line and "openjdk-17" in line
    assert not (tmp_path / "data" / "logs" / "demo-engine.log").exists()  # nothing was started


def test_engine_with_unreachable_kafka_one_line_exit_2_before_spark(tmp_path):
    port = _free_port()
    proc = _skewlab(tmp_path, "engine", "--source", "kafka", "--bootstrap", f"127.0.0.1:{port}", "--topic", "keys")
    line = _one_line(proc)
    assert f"cannot reach broker at 127.0.0.1:{port}" in line and "replayed" not in line
    assert not (tmp_path / "data" / "logs").exists()  # Spark was not started (it logs there)


def test_engine_with_missing_topic_one_line_exit_2(tmp_path, kafka_broker):
    line = _one_line(_skewlab(tmp_path, "engine", "--source", "kafka", "--bootstrap", kafka_broker,
                              "--topic", "no-such-topic-26"))
    assert "topic 'no-such-topic-26' does not exist" in line and "start your producer first" in line
    assert "skewlab produce" not in line  # issue 38 item 7: it would fill the user's topic with synthetic data


def test_unreachable_postgresql_shows_the_driver_reason(tmp_path):
    port = _free_port()
    proc = _skewlab(tmp_path, "simulate", "--messages", "100", "--db", f"postgresql+psycopg://skewlab@127.0.0.1:{port}/skewlab")
    line = _one_line(proc)
    assert "Connection refused" in line and f"port {port}" in line


def test_missing_postgresql_database_shows_the_driver_reason(tmp_path, pg_server):
    proc = _skewlab(tmp_path, "simulate", "--messages", "100", "--db", pg_server.url("no_such_db_26"))
    assert 'database "no_such_db_26" does not exist' in _one_line(proc)
