"""Streaming sources of skewlab.engine.runtimes.spark.sources: planning math without Spark, then real streaming
queries on the session-scoped ``local[2]`` SparkSession (and the tansu broker for Kafka).

Fixtures ``spark`` and ``kafka_broker`` come from tests/spark_fixtures.py and
tests/kafka_fixtures.py via tests/conftest.py."""

from __future__ import annotations

from dataclasses import replace
import json
import pickle
import os
import time

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from skewlab.engine.runtimes.spark import sources as S  # noqa: E402
from skewlab.engine.runtimes.spark.messages import SourceSide, decode  # noqa: E402
from skewlab.engine.workloads import create_workload  # noqa: E402

ZIPF = {"keys": 200, "z": 1.1}


# ============================================================================ helpers
def _run(spark, df, checkpoint, trigger=None):
    """Run ``df`` into a foreachBatch sink; returns {batch_id: [row tuples]} (in arrival order)."""
    batches: dict[int, list[tuple]] = {}

    def sink(bdf, batch_id):
        batches[batch_id] = [tuple(r) for r in bdf.collect()]

    writer = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    q = writer.trigger(**(trigger or {"availableNow": True})).start()
    q.awaitTermination(120)
    assert not q.isActive, "query did not finish"
    assert q.exception() is None, q.exception()
    return batches


def _forget_commit(checkpoint, batch_id):
    """Simulate a crash after ``batch_id`` was planned (offset log written) but before it committed."""
    os.remove(checkpoint / "commits" / str(batch_id))
    crc = checkpoint / "commits" / f".{batch_id}.crc"
    if crc.exists():
        os.remove(crc)


def _gen_reader(**opts):
    base = {"workload": "zipf", "params": json.dumps(ZIPF), "seed": "7", "partitions": "3", "chunk": "64"}
    base.update({k: str(v) for k, v in opts.items()})
    return S.GeneratorStreamReader(base)


def _read_keys(reader, instance, start, end):
    part = S._RangePartition(reader.cfg, instance, start, end)
    out = []
    for batch in reader.read(part):
        d = batch.to_pydict()
        assert d["source"] == [instance] * len(d["key"])
        assert d["seq"] == list(range(start + len(out), start + len(out) + len(d["key"])))
        out.extend(d["key"])
    return out


class FakeClock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


# ============================================================================ fair_split
@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=6), st.integers(0, 400))
def test_fair_split_caps_sum_balance_monotone(caps, total):
    c = S.fair_split(total, caps)
    assert sum(c) == min(total, sum(caps))
    assert all(0 <= x <= cap for x, cap in zip(c, caps))
    below = [x for x, cap in zip(c, caps) if x < cap]
    if below:
        assert max(below) - min(below) <= 1
    nxt = S.fair_split(total + 1, caps)
    assert all(b >= a for a, b in zip(c, nxt))  # offsets never go backwards


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 300), st.integers(1, 7), st.data())
def test_fair_split_is_round_robin_dealing(n_lines, parts, data):
    total = data.draw(st.integers(0, n_lines))
    caps = [len(range(p, n_lines, parts)) for p in range(parts)]
    expected = [len(range(p, total, parts)) for p in range(parts)]  # lines i < total with i % P == p
    assert S.fair_split(total, caps) == expected


def test_fair_split_degenerate():
    assert S.fair_split(5, []) == []
    assert S.fair_split(-3, [4]) == [0]
    assert S.fair_split(10, [0, 0]) == [0, 0]


# ============================================================================ pacing
def test_pacer_rate_and_max_per_batch(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(S.time, "monotonic", clock)
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    r = _gen_reader(rate=1000, max_per_batch=300)
    assert r.initialOffset() == {"0": 0, "1": 0, "2": 0}
    limit = r.getDefaultReadLimit()
    assert isinstance(limit, ReadMaxRows) and limit.max_rows == 300
    clock.t += 0.1  # Spark starting the query: the stream is open, tuples arrive
    first = r.latestOffset(r.initialOffset(), limit)
    # counted from the reader's creation: batch 0 carries data (from the first call it was empty)
    assert sum(first.values()) == 100 and sorted(first.values()) == [33, 33, 34]
    clock.t += 0.2
    o = r.latestOffset(first, limit)
    assert sum(o.values()) == 300
    clock.t += 1.0  # 1000 more emitted, but one batch takes at most 300
    o2 = r.latestOffset(o, limit)
    assert sum(o2.values()) == 600
    o3 = r.latestOffset(o2, ReadAllAvailable())  # ReadAllAvailable ignores max_per_batch
    assert sum(o3.values()) == 1300
    assert r.latestOffset(o3, limit) == o3  # nothing new at the same instant


def test_pacer_finite_and_available_now(monkeypatch):
    from pyspark.sql.streaming.datasource import ReadMaxRows

    monkeypatch.setattr(S.time, "monotonic", FakeClock())
    r = _gen_reader(rate=5, messages=1000, max_per_batch=400)
    r.prepareForTriggerAvailableNow()  # rate ignored, whole finite stream in <= 400-tuple batches
    off, totals = r.initialOffset(), []
    for _ in range(5):
        off = r.latestOffset(off, ReadMaxRows(400))
        totals.append(sum(off.values()))
    assert totals == [400, 800, 1000, 1000, 1000]
    inf = _gen_reader(rate=0, max_per_batch=50)
    o = inf.latestOffset(inf.initialOffset(), None)  # unlimited + infinite: still bounded
    assert sum(o.values()) == 50


def test_generator_options_validated():
    with pytest.raises(ValueError, match="unknown workload"):
        _gen_reader(workload="no-such-workload")
    with pytest.raises(ValueError, match="params"):
        _gen_reader(params="{not json")
    with pytest.raises(ValueError):
        _gen_reader(params=json.dumps({"keys": -5}))
    with pytest.raises(ValueError, match="partitions"):
        _gen_reader(partitions=0)
    with pytest.raises(ValueError, match="rate"):
        _gen_reader(rate="fast")


# ============================================================================ generator streams (no Spark)
def test_generator_instance_stream_is_the_seeded_workload():
    r = _gen_reader()
    keys = _read_keys(r, 1, 0, 300)
    wl = create_workload("zipf", S.partition_seed(7, 1), ZIPF)
    ids = np.concatenate(list(wl.batches(300, 64)))
    assert keys == [wl.vocab.names[i] for i in ids]
    assert keys != _read_keys(r, 0, 0, 300)  # instances are independent draws
    assert S.generator_stream_ids(r.cfg, 1, 250, 300) == keys[250:]


def test_generator_piecewise_sequential_and_replay_identical():
    r = _gen_reader()
    whole = _read_keys(r, 2, 0, 1000)
    S._gen_stream.cache_clear()
    pieces = []
    for lo, hi in [(0, 10), (10, 64), (64, 65), (65, 500), (500, 1000)]:  # sequential, cache reuse
        pieces += _read_keys(r, 2, lo, hi)
    assert pieces == whole
    stream = S._gen_stream(r.cfg, 2)  # the cached cursor
    assert stream.base > 0  # the cursor advanced, it was not rebuilt for every range
    assert _read_keys(r, 2, 130, 260) == whole[130:260]  # replay of an earlier range: rebuild + skip
    assert _read_keys(r, 2, 900, 1000) == whole[900:]


def test_generator_stride_mode_is_one_global_stream():
    r = _gen_reader(mode="stride", messages=1000, chunk=100, partitions=3)
    caps = S._generator_caps(1000, 100, 3, "stride")
    assert caps == [400, 300, 300]
    wl = create_workload("zipf", 7, ZIPF)
    chunks = [[wl.vocab.names[i] for i in ids] for ids in wl.batches(1000, 100)]
    for p in range(3):
        mine = [k for c, ks in enumerate(chunks) if c % 3 == p for k in ks]
        assert _read_keys(r, p, 0, caps[p]) == mine
    assert _read_keys(r, 0, caps[0], caps[0] + 10) == []  # finite: nothing past the end


def _simulated_trace(messages=None, interval_messages=100, **params):
    """The key sequence and intervals ``skewlab simulate --workload flights`` routes (same calls)."""
    from skewlab.engine.cli.simulate import stream_messages

    wl = create_workload("flights", 0, params)
    chunks = [[wl.vocab.names[i] for i in ids]
              for ids in wl.batches(stream_messages(messages, wl), interval_messages)]
    return wl, chunks


def test_generator_trace_instances_replay_what_simulate_replays():
    wl, chunks = _simulated_trace(span=60)
    keys = [k for c in chunks for k in c]
    r = _gen_reader(workload="flights", params=json.dumps({"span": 60}), partitions=2, mode="seed")
    assert r.pacer.caps == [wl.length, wl.length]  # a trace ends: one pass per instance
    for p in (0, 1):  # seed mode: every instance replays the whole trace in time order
        assert _read_keys(r, p, 0, 5000) == keys[:5000]
    assert _read_keys(r, 1, wl.length - 10, wl.length + 10) == keys[-10:]  # and ends with it
    assert _read_keys(r, 0, 1234, 2345) == keys[1234:2345]  # any range, any order: same tuples


def test_generator_trace_stride_mode_is_the_simulated_stream():
    wl, chunks = _simulated_trace(messages=3000, span=60)
    r = _gen_reader(workload="flights", params=json.dumps({"span": 60}), partitions=3, mode="stride",
                    messages=3000)
    mine = [[k for c, ks in enumerate(chunks) if c % 3 == p for k in ks] for p in range(3)]
    assert r.pacer.caps == [len(m) for m in mine] and sum(r.pacer.caps) == 3000
    got = [_read_keys(r, p, 0, r.pacer.caps[p] + 5) for p in range(3)]
    assert got == mine
    # dealing the instances' streams back interval by interval gives simulate's sequence
    pos, merged = [0, 0, 0], []
    for c, ks in enumerate(chunks):
        p = c % 3
        merged += got[p][pos[p]:pos[p] + len(ks)]
        pos[p] += len(ks)
    assert merged == [k for c in chunks for k in c]


# ============================================================================ file loader / kafka key rule
def test_load_key_file_modes(tmp_path):
    plain = tmp_path / "keys.txt"
    plain.write_bytes(b"a\nb b\r\n\nc\n")
    keys, errs, raws, _ = S.load_key_file(str(plain))
    assert keys.to_pylist() == ["a", "b b", None, "c"]
    assert errs.to_pylist() == [None, None, "empty_line", None]
    csvf = tmp_path / "k.csv"
    csvf.write_bytes(b'id,word\n1,apple\n2,"x,y"\n3\n4,\xff\n')
    keys, errs, raws, _ = S.load_key_file(str(csvf), "word")
    assert keys.to_pylist() == ["apple", "x,y", None, None]
    assert errs.to_pylist() == [None, None, "missing_column", "bad_utf8"]
    assert raws.to_pylist()[3] == "4,\\xff"
    keys, _, _, _ = S.load_key_file(str(csvf), "0", header=True)
    assert keys.to_pylist() == ["1", "2", "3", None]  # a line must be valid UTF-8 as a whole
    with pytest.raises(ValueError, match="not in the header"):
        S.load_key_file(str(csvf), "nope")
    with pytest.raises(ValueError, match="no such file"):
        S.FileStreamReader({"path": str(tmp_path / "missing")})


def test_kafka_key_rule():
    assert S.parse_kafka_record(b"k1", b"v", "key", 10) == ("k1", None, None)
    assert S.parse_kafka_record(None, b"text", "key", 10) == (None, "no_key", "text")
    assert S.parse_kafka_record(b"\xc3\x28", None, "key", 10) == (None, "bad_utf8", "\\xc3(")
    key, err, raw = S.parse_kafka_record(b"x" * 11, None, "key", 10)
    assert (key, err, raw) == (None, "oversized", "x" * 11)
    assert S.parse_kafka_record(None, "héllo".encode(), "value", 10) == ("héllo", None, None)
    assert S.parse_kafka_record(b"k", None, "value", 10)[1] == "no_value"
    assert S.parse_kafka_record(b"", b"v", "key", 10) == ("", None, None)


# ============================================================================ Spark: session
def test_get_session_is_idempotent_and_configured(spark):
    import sys

    from skewlab.engine.runtimes.spark.session import get_session

    assert get_session() is spark
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    assert spark.conf.get("spark.ui.enabled") == "false"
    assert spark.conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
    from skewlab.engine.runtimes.spark.session import DEFAULT_CONF

    # small by default (an engine query sets its own: one per state partition)
    assert int(DEFAULT_CONF["spark.sql.shuffle.partitions"]) <= 4
    # Int.MaxValue is the one value for which Spark skips its per-row Arrow batch-size check
    assert spark.conf.get("spark.sql.execution.arrow.maxBytesPerBatch").rstrip("b") == "2147483647"
    assert int(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")) >= 10_000
    # no chmod/stat process forks per micro-batch (the checkpoint tests below run with it)
    assert spark.conf.get("spark.sql.streaming.checkpointFileManagerClass").endswith("FileSystemBasedCheckpointFileManager")


def _hang_up_on_accumulator_server(server, payload: bytes) -> None:
    """Connect to the driver's accumulator server like the JVM does, send ``payload``, hang up, and wait
    until the server is done with the connection: its handler returned or its error was reported
    (``socketserver`` calls ``shutdown_request`` last for every request, after ``handle_error``)."""
    import socket
    import threading

    done = threading.Event()
    close = server.shutdown_request

    def shutdown_request(request) -> None:
        try:
            close(request)
        finally:
            done.set()

    server.shutdown_request = shutdown_request
    try:
        with socket.create_connection(server.server_address[:2], timeout=5) as sock:
            sock.sendall(payload)
        assert done.wait(30), "the accumulator server did not finish the connection within 30 s"
    finally:
        server.shutdown_request = close


def test_accumulator_server_hang_up_prints_no_traceback(spark, capfd):
    # SparkContext.stop() stops the JVM before it flags the accumulator server as shut down, so a
    # clean stop could print an EOFError traceback from the handler thread (seen on Ctrl-C of
    # `skewlab engine`).  The session's server is quieted; the behaviour is checked on a fresh
    # pyspark accumulator server (the session's one serves one connection at a time and is held by
    # the JVM once a job has run): authenticate like the JVM, then close the connection.
    from pyspark.accumulators import _start_update_server

    from skewlab.engine.runtimes.spark.session import _quiet_accumulator_server

    assert getattr(spark.sparkContext._accumulatorServer, "_skewlab_quiet", False)
    token = "skewlab-test-token"
    server = _start_update_server(token, False)
    try:
        _quiet_accumulator_server(server)
        capfd.readouterr()
        _hang_up_on_accumulator_server(server, token.encode())
        err = capfd.readouterr().err
        assert "Traceback" not in err and "EOFError" not in err, err
        # any other handler error is still reported: a wrong token makes pyspark raise ValueError
        _hang_up_on_accumulator_server(server, b"x" * len(token))
        err = capfd.readouterr().err
        assert "ValueError" in err and "Traceback" in err, err
    finally:
        server.shutdown()


# ============================================================================ Spark: generator
GEN_OPTS = {"workload": "zipf", "params": json.dumps(ZIPF), "seed": 11, "partitions": 3, "chunk": 500,
            "messages": 10_000, "max_per_batch": 4_000, "rate": 0}


def _gen_df(spark, **over):
    opts = dict(GEN_OPTS, **over)
    reader = spark.readStream.format(S.GENERATOR)
    for k, v in opts.items():
        reader = reader.option(k, str(v))
    return reader.load()


def test_spark_generator_exact_counts_and_deterministic(spark, tmp_path):
    batches = _run(spark, _gen_df(spark), tmp_path / "ck")
    assert [len(batches[b]) for b in sorted(batches)] == [4000, 4000, 2000]
    rows = [r for b in sorted(batches) for r in batches[b]]
    assert all(r[3] is None for r in rows)  # no errors from a generator
    caps = S.fair_split(10_000, [S.UNBOUNDED] * 3)
    r = S.GeneratorStreamReader({k: str(v) for k, v in GEN_OPTS.items()})
    for p in range(3):
        mine = sorted((seq, key) for key, src, seq, _ in rows if src == p)
        assert [s for s, _ in mine] == list(range(caps[p]))  # every tuple exactly once
        # executors (other processes) produced exactly what this process generates
        assert [k for _, k in mine] == _read_keys(r, p, 0, caps[p])


def test_spark_generator_trace_is_the_simulated_stream(spark, tmp_path):
    """Executors (other processes) replay the trace exactly as simulate does."""
    _, chunks = _simulated_trace(messages=2000, interval_messages=250, span=0, column="tailnum")
    df = _gen_df(spark, workload="flights", params=json.dumps({"span": 0, "column": "tailnum"}), partitions=2,
                 mode="stride", chunk=250, messages=2000, max_per_batch=700)
    batches = _run(spark, df, tmp_path / "ck")
    rows = [r for b in sorted(batches) for r in batches[b]]
    assert len(rows) == 2000 and len(chunks) == 8
    for p in range(2):
        mine = [key for key, src, seq, _ in sorted(rows, key=lambda r: r[2]) if src == p]
        assert mine == [k for c, ks in enumerate(chunks) if c % 2 == p for k in ks]


def test_spark_generator_replay_after_failure_is_identical(spark, tmp_path):
    ck = tmp_path / "ck"
    first = _run(spark, _gen_df(spark, messages=3000, max_per_batch=1000), ck)
    assert sorted(first) == [0, 1, 2]
    _forget_commit(ck, 2)
    again = _run(spark, _gen_df(spark, messages=3000, max_per_batch=1000), ck)
    assert list(again) == [2]
    assert again[2] == first[2] and len(again[2]) == 1000


def test_spark_generator_rate_is_respected(spark, tmp_path):
    rate, mpb = 2000, 1500
    batches: dict[int, int] = {}

    def sink(bdf, batch_id):
        batches[batch_id] = bdf.count()

    df = _gen_df(spark, messages="", rate=rate, max_per_batch=mpb)
    t0 = time.monotonic()
    q = (df.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(processingTime="200 milliseconds").start())
    try:
        deadline = t0 + 60
        while time.monotonic() < deadline and (sum(batches.values()) == 0 or len(batches) < 2):
            time.sleep(0.1)
    finally:
        q.stop()
    elapsed = time.monotonic() - t0
    total = sum(batches.values())
    assert total > 0
    assert max(batches.values()) <= mpb
    assert total <= rate * elapsed + 1  # never ahead of the target rate


# ============================================================================ Spark: file
def test_spark_file_source_lines_and_column(spark, tmp_path):
    path = tmp_path / "words.csv"
    words = [f"w{i % 37}" for i in range(1001)]
    path.write_text("n,word\n" + "".join(f"{i},{w}\n" for i, w in enumerate(words)) + "bad-line\n")
    df = (spark.readStream.format(S.FILE).option("path", str(path)).option("column", "word")
          .option("partitions", 4).option("max_per_batch", 400).load())
    batches = _run(spark, df, tmp_path / "ck")
    assert [len(batches[b]) for b in sorted(batches)] == [400, 400, 202]
    rows = [r for b in batches.values() for r in b]
    good = sorted((seq * 4 + src, key) for key, src, seq, err, raw in rows if err is None)
    assert good == list(enumerate(words))  # data line i = seq * P + source
    bad = [r for r in rows if r[3] is not None]
    assert bad == [(None, 1001 % 4, 1001 // 4, "missing_column", "bad-line")]


def test_spark_file_source_one_key_per_line(spark, tmp_path):
    path = tmp_path / "keys.txt"
    path.write_text("".join(f"key {i}\n" for i in range(50)))
    df = spark.readStream.format(S.FILE).option("path", str(path)).load()
    rows = [r for b in _run(spark, df, tmp_path / "ck").values() for r in b]
    assert sorted((r[2], r[0]) for r in rows) == [(i, f"key {i}") for i in range(50)]


# ============================================================================ Spark: kafka
def _kafka_df(spark, broker, topic, **opts):
    reader = spark.readStream.format(S.KAFKA).option("bootstrap", broker).option("topic", topic)
    for k, v in opts.items():
        reader = reader.option(k, str(v))
    return reader.load()


def test_spark_kafka_reads_exactly_what_was_produced(spark, kafka_broker, tmp_path):
    from kafka import KafkaProducer

    from skewlab.engine.io import kafka_io

    topic = "src-exact"
    kafka_io.produce(kafka_broker, topic, "zipf", ZIPF, 3, 0, 3001, partitions=3)
    producer = KafkaProducer(bootstrap_servers=kafka_broker)
    producer.send(topic, key=None, value=b"no key here", partition=0)
    producer.send(topic, key=b"\xff\xfe", value=b"v", partition=1)
    producer.send(topic, key=b"k" * 300, value=b"v", partition=2)
    producer.send(topic, key=b"after-bad", value=b"v", partition=2)
    producer.flush()
    producer.close()
    truth = kafka_io.read_topic(kafka_broker, topic)
    assert sum(len(v) for v in truth.values()) == 3005

    ck = tmp_path / "ck"
    batches = _run(spark, _kafka_df(spark, kafka_broker, topic, max_per_batch=1200, max_key_bytes=200), ck)
    assert [len(batches[b]) for b in sorted(batches)] == [1200, 1200, 605]
    rows = sorted((r[1], r[2]) + r for b in batches.values() for r in b)
    got = [(src, seq) for src, seq, *_ in rows]
    assert got == sorted((p, off) for p, recs in truth.items() for off, _, _ in recs)  # each exactly once
    good = {(r[3], r[4]): r[2] for r in rows if r[5] is None}
    expected_good = {(p, off): k.decode() for p, recs in truth.items() for off, k, _ in recs
                     if k is not None and k != b"\xff\xfe" and len(k) <= 200}
    assert good == expected_good
    errors = sorted((r[3], r[5]) for r in rows if r[5] is not None)
    assert errors == [(0, "no_key"), (1, "bad_utf8"), (2, "oversized")]
    assert all(r[2] is None for r in rows if r[5] is not None)

    # replay: forget that the last batch committed; the restart re-reads exactly its offset range
    last = max(batches)
    _forget_commit(ck, last)
    again = _run(spark, _kafka_df(spark, kafka_broker, topic, max_per_batch=1200, max_key_bytes=200), ck)
    assert list(again) == [last]
    order = lambda r: (r[1], r[2])  # noqa: E731
    assert sorted(again[last], key=order) == sorted(batches[last], key=order)


def test_spark_kafka_missing_topic_fails_clearly(spark, kafka_broker, tmp_path):
    df = _kafka_df(spark, kafka_broker, "no-such-topic-xyz")
    q = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
    with pytest.raises(Exception, match="no-such-topic-xyz"):
        q.awaitTermination(60)


def test_kafka_reader_offsets_budget_and_exact_range_without_spark(kafka_broker):
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    from skewlab.engine.io import kafka_io

    topic = "src-offsets"
    kafka_io.produce(kafka_broker, topic, "zipf", ZIPF, 9, 0, 1000, partitions=2)
    truth = kafka_io.read_topic(kafka_broker, topic)
    opts = {"bootstrap": kafka_broker, "topic": topic}
    r = S.KafkaStreamReader(opts)
    try:
        init = r.initialOffset()
        assert init == {"0": 0, "1": 0}
        assert r.latestOffset(init, ReadAllAvailable()) == {"0": 500, "1": 500}
        assert r.latestOffset(init, ReadMaxRows(301)) == {"0": 151, "1": 150}  # water-filled budget
        assert r.latestOffset({"0": 480, "1": 0}, ReadMaxRows(100)) == {"0": 500, "1": 80}
        parts = r.partitions({"0": 100, "1": 500}, {"0": 200, "1": 500})
        assert [(p.kpart, p.start, p.end) for p in parts] == [(0, 100, 200)]  # empty ranges dropped
        rows = [row for b in r.read(parts[0]) for row in zip(*b.to_pydict().values())]
        assert [(seq, key) for key, src, seq, *_ in rows] == [(o, k.decode()) for o, k, _ in truth[0][100:200]]
    finally:
        r.stop()
    latest = S.KafkaStreamReader(dict(opts, starting="latest"))
    try:
        assert latest.initialOffset() == {"0": 500, "1": 500}
    finally:
        latest.stop()
    listed_only = S.KafkaStreamReader(dict(opts, probe_highwater="false"))
    try:  # ListOffsets alone may lag behind (tansu answers per batch), never run ahead
        assert all(v <= 500 for v in listed_only.latestOffset(init, ReadAllAvailable()).values())
    finally:
        listed_only.stop()


# ============================================================================ routing in the source
def _route_bytes(batch_id, algorithm="pkg", n=4, sources=3):
    from skewlab.engine.algorithms import registry
    from skewlab.engine.runtimes.spark.topology import RoutingSnapshot

    return RoutingSnapshot(batch_id, registry.create(algorithm, n, sources, seed=0).router).dumps()


def test_route_files_publish_read_next_and_prune(tmp_path):
    routes = S.RouteFiles(tmp_path / "routes", keep=3)
    with pytest.raises(ValueError, match="no routing snapshot published"):
        routes.next_version()
    for v in range(6):
        routes.publish(v, f"snap{v}".encode())
    assert routes.next_version() == 5 and routes.read(5) == b"snap5" and routes.read(3) == b"snap3"
    with pytest.raises(ValueError, match="routing snapshot 2 is missing"):
        routes.read(2)  # pruned: only the last 3 versions stay
    assert sorted(p.name for p in (tmp_path / "routes").iterdir()) == ["NEXT", "route-3.snap", "route-4.snap",
                                                                       "route-5.snap"]


def test_offsets_carry_the_route_only_with_new_data(tmp_path):
    routes = S.RouteFiles(tmp_path)
    routes.publish(7, b"x")
    assert S._with_route(None, {"0": 5}, {"0": 1}) == {"0": 5}  # no route_dir: untouched
    assert S._with_route(routes, {"0": 5, "1": 2}, {"0": 1, "1": 2, "route": 6}) == {"0": 5, "1": 2, "route": 7}
    assert S._with_route(routes, {"0": 5}, None) == {"0": 5, "route": 7}
    # nothing new: the start offset itself (its old route), so Spark plans no empty batch
    assert S._with_route(routes, {"0": 1, "1": 2}, {"0": 1, "1": 2, "route": 6}) == {"0": 1, "1": 2, "route": 6}
    assert S._with_route(routes, {"0": 0}, {"0": 0}) == {"0": 0}
    # a new Kafka partition is new data even when the known ones did not move
    assert S._with_route(routes, {"0": 1, "1": 0}, {"0": 1, "route": 6})["route"] == 7
    with pytest.raises(ValueError, match="has no 'route' field"):
        S._snapshot_for(routes, {"0": 5})
    assert S._snapshot_for(routes, {"0": 5, "route": 7}) == b"x" and S._snapshot_for(None, {"0": 5}) is None


def test_generator_reader_routes_its_partition_like_make_router(tmp_path):
    from skewlab.engine.runtimes.spark.topology import make_router

    routes = S.RouteFiles(tmp_path / "r")
    routes.publish(3, _route_bytes(3))
    plain = _gen_reader()
    routed = _gen_reader(route_dir=str(routes.dir))
    assert S.GeneratorDataSource({"route_dir": "x"}).schema() == "key string, worker int, msg binary"
    assert S.GeneratorDataSource({}).schema() == S.SCHEMAS[S.GENERATOR]
    start = routed.initialOffset()
    end = {"0": 100, "1": 0, "2": 40, "route": 3}
    parts = routed.partitions(start, end)
    assert [(p.instance, p.start, p.end) for p in parts] == [(0, 0, 100), (2, 0, 40)]  # idle instance 1 dropped
    for p in parts:
        got = pa.Table.from_batches(list(routed.read(p))).to_pydict()
        raw = S._RangePartition(plain.cfg, p.instance, p.start, p.end)
        want = pa.Table.from_batches(list(make_router(_route_bytes(3))(plain.read(raw)))).to_pydict()
        m = p.end - p.start  # data rows, then the instance's side row (its timing differs run to run)
        assert got["worker"] == want["worker"] and got["key"][:m] == want["key"][:m]
        side, want_side = (decode(x["msg"][m], SourceSide) for x in (got, want))
        assert side.route_seconds >= 0 and want_side.route_seconds >= 0
        state, want_state = side.router_state(), want_side.router_state()
        assert pickle.dumps(state) == pickle.dumps(want_state) and state["loads"].sum() == m  # pkg's local loads
        assert replace(side, route_seconds=0, source_state=b"") == replace(want_side, route_seconds=0, source_state=b"")
        assert side.route_batch == 3 and side.consumed == p.end
        assert got["key"][:m] == _read_keys(plain, p.instance, p.start, p.end) and len(got["key"]) == m + 1
        assert all(0 <= w < 4 for w in got["worker"][:m]) and got["worker"][m:] == [p.instance % 4]
        assert got["msg"][:m] == [None] * m and got["key"][m:] == [None]
    assert routed.partitions(end, end) == []  # no data: the route file is not even needed


def test_kafka_offsets_with_route_field(tmp_path, kafka_broker):
    from skewlab.engine.io import kafka_io

    topic = "src-routed"
    kafka_io.produce(kafka_broker, topic, "zipf", ZIPF, 9, 0, 200, partitions=2)
    routes = S.RouteFiles(tmp_path / "r")
    routes.publish(0, _route_bytes(0, sources=2))
    r = S.KafkaStreamReader({"bootstrap": kafka_broker, "topic": topic, "route_dir": str(routes.dir)})
    try:
        init = r.initialOffset()
        end = r.latestOffset(init, None)
        assert end == {"0": 100, "1": 100, "route": 0}
        assert r.latestOffset(end, None) == end  # nothing new: the same offset, no batch
        parts = r.partitions(init, end)
        assert [(p.kpart, p.start, p.end) for p in parts] == [(0, 0, 100), (1, 0, 100)]
        rows = pa.Table.from_batches(list(r.read(parts[1]))).to_pydict()
        assert len(rows["key"]) == 101 and rows["worker"][-1] == 1 and max(rows["worker"][:100]) < 4
        assert rows["key"][-1] is None and decode(rows["msg"][-1], SourceSide).source == 1
        assert rows["msg"][:100] == [None] * 100
    finally:
        r.stop()
