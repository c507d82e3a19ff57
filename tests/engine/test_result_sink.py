"""skewlab.engine.runtimes.spark.result_sink: the Kafka result sink's exactly-once writes against a real Kafka-protocol
broker (tansu, fixture ``kafka_broker``) — a replayed batch writes nothing, a batch cut short is
completed from the records already there, a worker without results writes nothing, workers keep to
their partitions — and the start-up checks (URL, broker, partitions, earlier runs' records)."""

from __future__ import annotations

import json
import random
import socket
import time

import pyarrow as pa
import pytest

from skewlab.engine.io import kafka_io
from skewlab.engine.config.params import ParamError
from skewlab.engine.runtimes.spark import result_sink as R
from skewlab.engine.runtimes.spark.result_sink import open_sink, sink_schema


def results(batch: int, worker: int, keys: list[str], counts: list[int] | None = None) -> pa.Table:
    n = len(keys)
    return pa.table({"batch": pa.array([batch] * n, pa.int64()), "key": pa.array(keys, pa.string()),
                     "result": pa.array(counts or list(range(1, n + 1)), pa.int64()),
                     "shares": pa.array([worker + 1] * n, pa.int32())},  # tells the writers' rows apart
                    schema=sink_schema())


def rows_of(table: pa.Table) -> list[tuple]:
    t = table.to_pydict()
    return sorted(zip(t["batch"], t["key"], t["result"], t["shares"]))


def raw(broker: str, topic: str) -> dict[int, list[dict]]:
    """Every record of the topic, decoded, per partition (duplicates included)."""
    return {p: [json.loads(v) for _, _, v in recs] for p, recs in kafka_io.read_topic(broker, topic).items()}


class CrashAfter:
    """A producer that flushes and then raises at the ``k``-th send: a task killed mid-write, with the
    first ``k`` records on the broker."""

    def __init__(self, producer, k: int) -> None:
        self.producer, self.k = producer, k

    def send(self, *args, **kw):
        if self.k == 0:
            self.producer.flush()
            raise RuntimeError("task killed")
        self.k -= 1
        return self.producer.send(*args, **kw)

    def __getattr__(self, name):
        return getattr(self.producer, name)


def _dead_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_parse_sink_urls():
    assert R.parse_sink("data/results/x") == ("parquet", "data/results/x")
    assert R.parse_sink("kafka://127.0.0.1:9092/out") == ("kafka", "127.0.0.1:9092", "out")
    assert R.parse_sink("kafka://a:1,b:2/out.x") == ("kafka", "a:1,b:2", "out.x")
    for bad, fragment in [("kafka://host/out", "bad bootstrap"), ("kafka://h:1/", "bad topic"),
                          ("kafka:/h:1/t", "expected kafka://"), ("kafka://h:1/a b", "bad topic"),
                          ("kafka://h:1/t?x=1", "expected kafka://")]:
        with pytest.raises(ParamError, match=fragment) as err:
            R.parse_sink(bad)
        assert "\n" not in str(err.value)


def test_replayed_and_cut_short_batches_are_written_exactly_once(kafka_broker):
    sink = R.open_sink(f"kafka://{kafka_broker}/rs-exact", 2)
    keys = [f"k{i}" for i in range(50)]
    assert sink.write(0, 1, results(0, 1, keys)) == 50
    assert sink.write(0, 1, results(0, 1, keys)) == 0  # a replay of a complete batch writes nothing
    # batch 1 is cut short after 20 of its 30 records: the reader leaves the group out ...
    keys1 = [f"j{i}" for i in range(30)]
    key = (sink.bootstrap, sink.timeout_s)
    R._PRODUCERS.items[key] = CrashAfter(R._PRODUCERS.get(key, lambda: R._producer(*key)), 20)
    with pytest.raises(RuntimeError, match="writing batch 1 of worker 1"):
        sink.write(1, 1, results(1, 1, keys1))
    assert key not in R._PRODUCERS.items  # the failed producer is not reused
    assert rows_of(sink.read()) == rows_of(results(0, 1, keys))
    # ... and the replay, whose rows arrive in another order, writes the 10 missing ones
    shuffled = keys1[:]
    random.Random(1).shuffle(shuffled)
    counts = [int(k[1:]) + 1 for k in shuffled]
    assert sink.write(1, 1, results(1, 1, shuffled, counts)) == 10
    assert sink.write(1, 1, results(1, 1, shuffled, counts)) == 0
    want = rows_of(results(0, 1, keys)) + rows_of(results(1, 1, keys1))
    assert rows_of(sink.read()) == sorted(want)
    records = raw(kafka_broker, "rs-exact")
    assert records[0] == [] and len(records[1]) == 80  # worker 1's partition only, no record twice
    assert len({(m["out_batch"], m["seq"]) for m in records[1]}) == 80


def test_empty_batches_and_workers_keep_to_their_partitions(kafka_broker):
    sink = R.open_sink(f"kafka://{kafka_broker}/rs-workers", 3)
    assert sink.write(0, 0, results(0, 0, ["a", "b"])) == 2
    assert sink.write(0, 2, results(0, 2, ["c"])) == 1
    assert sink.write(1, 0, results(1, 0, [])) == 0  # no results: nothing written
    assert sink.write(2, 0, results(2, 0, ["a"])) == 1  # after an empty batch
    assert sink.write(2, 2, results(2, 2, ["c", "d"])) == 2  # another worker's tail is not this one's
    assert sink.write(2, 0, results(2, 0, ["a"])) == 0
    got = rows_of(sink.read())
    assert got == sorted(rows_of(results(0, 0, ["a", "b"])) + rows_of(results(0, 2, ["c"]))
                         + rows_of(results(2, 0, ["a"])) + rows_of(results(2, 2, ["c", "d"], [1, 2])))
    records = raw(kafka_broker, "rs-workers")
    assert [len(records[p]) for p in range(3)] == [3, 0, 3]
    assert {m["worker"] for m in records[2]} == {2}
    # a later batch already in the partition: another run writes here
    with pytest.raises(RuntimeError, match="another run writes to this topic"):
        sink.write(1, 2, results(1, 2, ["x"]))


def test_a_new_run_starts_after_an_earlier_runs_records(kafka_broker):
    first = R.open_sink(f"kafka://{kafka_broker}/rs-runs", 2)
    assert first.start == {0: 0, 1: 0}
    first.write(0, 0, results(0, 0, ["a", "b", "c"]))
    first.write(5, 1, results(5, 1, ["z"]))
    logged: list[str] = []
    second = R.open_sink(f"kafka://{kafka_broker}/rs-runs", 2, log=logged.append)
    assert second.start == {0: 3, 1: 1} and "start offsets" in logged[0]
    assert second.write(0, 0, results(0, 0, ["a", "b", "c"])) == 3  # not taken for the earlier run's batch 0
    assert second.write(1, 1, results(1, 1, ["y"])) == 1  # the earlier run's batch 5 is not looked at
    assert rows_of(second.read()) == sorted(rows_of(results(0, 0, ["a", "b", "c"])) + rows_of(results(1, 1, ["y"])))
    # from the beginning the two runs' batch 0 of worker 0 read as one group written twice: why a run
    # reads from its own start offsets
    assert len(rows_of(R.read_kafka_sink(kafka_broker, "rs-runs"))) == 5
    # the restored run keeps its start offsets (from the engine's snapshot)
    again = R.restore_sink(second.url, second.start, 2)
    assert rows_of(again.read()) == rows_of(second.read())


def test_start_up_checks_are_one_line_param_errors(kafka_broker):
    kafka_io.ensure_topic(kafka_broker, "rs-small", 2)
    with pytest.raises(ParamError, match=r"'rs-small' has 2 partition\(s\), the run needs one per state partition \(4"):
        R.open_sink(f"kafka://{kafka_broker}/rs-small", 4)
    with pytest.raises(ParamError, match="has 2 partition"):
        R.restore_sink(f"kafka://{kafka_broker}/rs-small", {}, 3)
    assert R.open_sink(f"kafka://{kafka_broker}/rs-small", 1).start == {0: 0}  # more partitions than needed: fine
    assert R.open_sink(f"kafka://{kafka_broker}/rs-new", 5).start == {p: 0 for p in range(5)}  # created
    dead = _dead_address()
    for call in (lambda: R.open_sink(f"kafka://{dead}/t", 2, timeout_s=1.0),
                 lambda: R.restore_sink(f"kafka://{dead}/t", {}, 2, timeout_s=1.0)):
        t0 = time.monotonic()
        with pytest.raises(ParamError, match="cannot reach broker") as err:
            call()
        assert "\n" not in str(err.value) and time.monotonic() - t0 < 5.0


def test_foreign_records_are_refused(kafka_broker):
    sink = R.open_sink(f"kafka://{kafka_broker}/rs-foreign", 1)
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=kafka_broker)
    p.send("rs-foreign", key=b"k", value=b"not json", partition=0)
    p.flush()
    p.close()
    with pytest.raises(RuntimeError, match=r"rs-foreign\[0\]@0 is not a skewlab result record"):
        sink.write(0, 0, results(0, 0, ["a"]))


def test_parquet_sink_is_cleared_for_a_new_run(tmp_path):
    sink = R.open_sink(str(tmp_path), 2)
    sink.write(3, 1, results(3, 1, ["a"]))
    assert rows_of(sink.read()) == rows_of(results(3, 1, ["a"]))
    logged: list[str] = []
    assert R.open_sink(str(tmp_path), 2, log=logged.append).read().num_rows == 0
    assert "removed 1 result batch" in logged[0]
    assert R.restore_sink(str(tmp_path), None, 2).url == str(tmp_path)


def test_an_operator_column_named_n_survives_the_kafka_sink_and_placement_names_are_refused(kafka_broker):
    """The mean's column ``n`` (the tuples it averages) was overwritten by the record count of the
    writer's output, which the records carried as ``n``: now ``records``; records written before
    (with ``n``) are still read.  An operator column named like a placement field is refused."""
    from skewlab.engine.operators.builtin import Mean

    schema = sink_schema(Mean())
    sink = open_sink(f"kafka://{kafka_broker}/rs-mean-n", 2, schema=schema)
    table = pa.table({"batch": pa.array([0, 0], pa.int64()), "key": ["a", "b"], "result": [1.5, 2.0],
                      "n": pa.array([7, 9], pa.int64()), "shares": pa.array([1, 1], pa.int32())}, schema=schema)
    assert sink.write(0, 1, table) == 2
    got = sink.read().to_pydict()
    assert sorted(zip(got["key"], got["n"])) == [("a", 7), ("b", 9)]
    assert all(m["records"] == 2 for m in raw(kafka_broker, "rs-mean-n")[1])
    clash = pa.schema([*schema, pa.field("seq", pa.int64())])
    with pytest.raises(ParamError, match=r"column\(s\) seq clash with the record fields"):
        open_sink(f"kafka://{kafka_broker}/rs-mean-n", 2, schema=clash)
