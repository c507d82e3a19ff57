"""``skewlab demo`` with bad input, as the user sees it (issue 26 item 7): flags refused before anything
starts, a port in use named as such, and a failure report that quotes this attempt's log lines only."""

import os
import socket
import subprocess
import sys

import pytest


def demo(tmp_path, *argv, env=None, timeout=180):
    full = dict(os.environ, SKEWLAB_DATA_DIR=str(tmp_path / "data"), **(env or {}))
    full.pop("SKEWLAB_DB_URL", None)
    return subprocess.run([sys.executable, "-m", "skewlab", "demo", *argv], capture_output=True, text=True,
                          cwd=tmp_path, env=full, timeout=timeout)


def one_line_exit_2(proc, fragment):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert fragment in proc.stderr, proc.stderr


@pytest.mark.parametrize("argv, fragment", [
    (["--workers", "0"], "workers: 0 is out of range"),
    (["--algorithm", "nosuch"], "unknown algorithm"),
    (["--interval", "0"], "interval"),
])
def test_demo_refuses_bad_engine_flags_before_starting_anything(tmp_path, argv, fragment):
    proc = demo(tmp_path, "--port", "0", *argv)
    one_line_exit_2(proc, fragment)
    assert proc.stdout == ""  # no URL printed, no engine started
    assert not (tmp_path / "data" / "logs").exists()


def test_demo_says_the_port_is_in_use(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        proc = demo(tmp_path, "--port", str(port))
    one_line_exit_2(proc, f"port {port} is in use")
    assert proc.stdout == ""


def test_demo_failure_quotes_only_this_attempts_log_lines(tmp_path):
    """The engine log is appended to; an earlier attempt's lines are not this failure's cause.

    The engine is made to fail at once with one line (a ``sitecustomize`` on its path that acts only in
    the engine's process, recognised by the ``$SKEWLAB_DB_URL`` the demo hands it), so that the last
    lines of the file would be mostly the earlier attempt's.
    """
    log = tmp_path / "data" / "logs" / "demo-engine.log"
    log.parent.mkdir(parents=True)
    log.write_text("".join(f"STALE line {i} of an earlier attempt\n" for i in range(40)))
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import os, sys\n"
        "if os.environ.get('SKEWLAB_DB_URL'):\n"
        "    print('engine failed in this attempt', flush=True)\n"
        "    os._exit(1)\n")
    proc = demo(tmp_path, "--port", "0", "--duration", "60", env={"PYTHONPATH": str(site)})
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "the engine exited with status 1" in proc.stderr, proc.stderr
    assert "engine failed in this attempt" in proc.stderr and "STALE" not in proc.stderr, proc.stderr
    assert log.read_text().startswith("STALE line 0")  # the log itself is kept
