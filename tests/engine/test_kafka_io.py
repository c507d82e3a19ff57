"""skewlab.engine.io.kafka_io against a real Kafka-protocol broker (tansu; fixture ``kafka_broker`` from
tests/kafka_fixtures.py via tests/conftest.py)."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from skewlab.engine.io import kafka_io
from skewlab.engine.workloads import create_workload

ZIPF = {"keys": 100, "z": 1.0}


def _dead_address() -> str:
    """A loopback port nobody listens on (bound then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_ensure_topic_creates_and_is_idempotent(kafka_broker):
    assert kafka_io.ensure_topic(kafka_broker, "io-topic", 3) == 3
    assert kafka_io.ensure_topic(kafka_broker, "io-topic", 3) == 3
    assert kafka_io.ensure_topic(kafka_broker, "io-topic", 5) == 3  # existing topics are not resized
    with pytest.raises(ValueError, match="partitions"):
        kafka_io.ensure_topic(kafka_broker, "io-other", 0)


def test_produce_replays_the_workload_round_robin(kafka_broker):
    seen = []
    stats = kafka_io.produce(kafka_broker, "io-replay", "zipf", ZIPF, 5, 0, 2501, partitions=2,
                             progress=lambda done, total: seen.append((done, total)), chunk=1000)
    assert stats["messages"] == 2501 and stats["partitions"] == 2
    assert seen[0] == (0, 2501) and seen[-1] == (2501, 2501)
    wl = create_workload("zipf", 5, ZIPF)
    keys = [wl.vocab.names[i] for i in np.concatenate(list(wl.batches(2501, 1000)))]
    records = kafka_io.read_topic(kafka_broker, "io-replay")
    assert sorted(records) == [0, 1]
    for p, recs in records.items():
        assert [off for off, _, _ in recs] == list(range(len(recs)))
        # message i went to partition i mod 2 with value i and the workload's i-th key
        idx = [int(v) for _, _, v in recs]
        assert idx == list(range(p, 2501, 2))
        assert [k.decode() for _, k, _ in recs] == [keys[i] for i in idx]


def test_produce_key_placement_keeps_each_key_in_one_partition(kafka_broker):
    kafka_io.produce(kafka_broker, "io-keyed", "zipf", ZIPF, 1, 0, 600, partitions=3, placement="key")
    records = kafka_io.read_topic(kafka_broker, "io-keyed")
    where: dict[bytes, set[int]] = {}
    for p, recs in records.items():
        for _, k, _ in recs:
            where.setdefault(k, set()).add(p)
    assert sum(len(r) for r in records.values()) == 600
    assert all(len(ps) == 1 for ps in where.values())
    assert len({p for ps in where.values() for p in ps}) > 1


def test_produce_rate_is_roughly_respected(kafka_broker):
    rate, n = 2000.0, 800  # 0.4 s at the target rate
    stats = kafka_io.produce(kafka_broker, "io-rate", "zipf", ZIPF, 2, rate, n, partitions=1)
    assert stats["messages"] == n
    assert stats["seconds"] >= 0.8 * n / rate  # pacing holds it back
    assert stats["rate"] <= 1.25 * rate
    unpaced = kafka_io.produce(kafka_broker, "io-rate", "zipf", ZIPF, 2, 0, n)
    assert unpaced["seconds"] < stats["seconds"]


def test_unreachable_broker_is_a_quick_value_error():
    dead = _dead_address()
    for call in (
        lambda: kafka_io.produce(dead, "t", "zipf", ZIPF, 0, 0, 10, timeout_s=1.0),
        lambda: kafka_io.ensure_topic(dead, "t", 2, timeout_s=1.0),
        lambda: kafka_io.read_topic(dead, "t", timeout_s=1.0),
    ):
        t0 = time.monotonic()
        with pytest.raises(ValueError, match="cannot reach broker"):
            call()
        assert time.monotonic() - t0 < 5.0


def test_bad_arguments_are_value_errors(kafka_broker):
    with pytest.raises(ValueError, match="bootstrap"):
        kafka_io.produce("no-port", "t", "zipf", ZIPF, 0, 0, 10)
    with pytest.raises(ValueError, match="topic"):
        kafka_io.produce(kafka_broker, "bad topic!", "zipf", ZIPF, 0, 0, 10)
    with pytest.raises(ValueError, match="workload"):
        kafka_io.produce(kafka_broker, "t", "no-such-workload", {}, 0, 0, 10)
    with pytest.raises(ValueError, match="messages"):
        kafka_io.produce(kafka_broker, "t", "zipf", ZIPF, 0, 0, -1)


def test_produce_cli(kafka_broker, capsys):
    from skewlab.cli import main

    assert main(["produce", "--bootstrap", kafka_broker, "--topic", "cli-produce", "--messages", "500",
                 "--rate", "0", "--partitions", "2", "--keys", "20"]) == 0
    assert "produced 500 messages to cli-produce (2 partitions)" in capsys.readouterr().out
    assert main(["produce", "--bootstrap", "127.0.0.1:1", "--topic", "t", "--messages", "5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("skewlab: error:") and err.count("\n") == 1
    assert main(["produce", "--bootstrap", kafka_broker, "--topic", "t", "--workload", "zipf", "--zipf", "-1"]) == 2


def test_produce_cli_stops_cleanly_on_sigterm(kafka_broker):
    """``docker compose stop`` sends SIGTERM to ``skewlab produce``: it stops sending, flushes what it
    sent (all of it is in the topic) and exits 0 (not 143, which ``restart: on-failure`` would restart)."""
    import re
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "skewlab", "produce", "--bootstrap", kafka_broker, "--topic", "cli-sigterm",
         "--messages", "10000000", "--rate", "2000", "--partitions", "2", "--keys", "50"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if sum(len(r) for r in kafka_io.read_topic(kafka_broker, "cli-sigterm").values()) >= 1000:
                    break
            except ValueError:  # the producer has not created the topic yet
                pass
            time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    m = re.search(r"stopped by SIGTERM after (\d+) messages to cli-sigterm \(2 partitions\)", out)
    assert m, out
    sent = int(m.group(1))
    assert 1000 <= sent < 10_000_000
    assert sum(len(r) for r in kafka_io.read_topic(kafka_broker, "cli-sigterm").values()) == sent

