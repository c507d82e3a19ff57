"""Where the Spark engine writes its results: Parquet files or a Kafka topic.

``--sink`` selects it (:func:`parse_sink`): a directory (the default, ``data/results/<checkpoint
name>``) or ``kafka://HOST:PORT[,HOST:PORT...]/TOPIC``.  The sink gets one final row per (batch,
key) (:func:`sink_schema`: ``batch, key, result``, the operator's columns, ``shares``).  Its
*writers* are numbered ``0 .. 2P-1``: writer ``w < P`` is the task of worker ``w``
(:func:`skewlab.engine.runtimes.spark.operator.make_handler`: the results of the keys it alone
holds), writer ``P + w`` the merge stage's output for the split keys of hash bucket ``w``,
``pmod(hash(key), P)`` (:mod:`skewlab.engine.runtimes.spark.share_merge`).  Each
writer calls ``write(batch, w, table)`` once per micro-batch with its rows; ``read()`` returns every
result row of the run in the same columns.  Both sinks are exactly once from the same two facts: a
replayed micro-batch produces the same rows (Spark restores the state version before it), and one
writer owns each (batch, writer) output.

* :class:`ParquetSink`: one file per (batch, writer), written atomically and rewritten identically on
  a replay (:func:`sink_file`, :func:`write_atomic_parquet`).
* :class:`KafkaSink`: writer ``w`` writes to partition ``w mod P`` of the topic (the topic has at
  least P = ``--max-workers`` partitions).  Kafka offers no way to replace records, and a Kafka transaction
  would not commit atomically with Spark's batch, so the task makes its write idempotent itself: the
  rows are put in a canonical order (sorted by row content, since the order of the rows reaching a
  task is not fixed) and numbered ``seq = 0 .. n-1``; before writing, the task reads the tail of its
  partition and writes only the ``seq`` of its (batch, writer) not already there (a replay after a complete
  write writes nothing, one after a crash mid-write completes the batch).  The records of a (batch,
  writer) are at the partition's tail while the task runs (after those of the batch's other writer
  of the partition, the worker's, which writes before the merge stage runs): Spark starts batch ``b + 1``
  only after every task of ``b`` finished, and a task flushes (``acks=all``, idempotent producer)
  before it returns.  A writer without results writes nothing.

Kafka record format: key = the result key (UTF-8), value = JSON ``{"batch", "result", <operator
columns>, "shares", "worker", "out_batch", "seq", "records"}`` — the result row (``batch`` is the row's own batch: held tuples
released after an import report their arrival batch) and its place in the output of micro-batch
``out_batch`` of writer ``worker`` (``seq`` of ``records``).  A reader takes a (out_batch, worker) group once all
its ``records`` are there (:func:`read_kafka_sink`), ignoring duplicates of a ``seq``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

import pyarrow as pa

from skewlab.engine.config.params import ParamError
from skewlab.engine.operators import KeyedOperator
from skewlab.engine.operators.builtin import Count
from skewlab.shared import filesystems

__all__ = ["KafkaSink", "ParquetSink", "open_sink", "parse_sink", "read_kafka_sink", "read_sink",
           "restore_sink", "sink_file", "sink_schema", "write_atomic_parquet"]

KAFKA_SCHEME = "kafka://"


def sink_schema(operator: KeyedOperator | type[KeyedOperator] = Count) -> pa.Schema:
    """The sink's columns for ``operator``: ``batch, key, result`` (the operator's result: the
    windowed count, the pairs joined, the mean, ...), the operator's own columns
    (:attr:`~skewlab.engine.operators.KeyedOperator.columns`: the join's ``checksum``, the mean's
    ``n``), and ``shares`` (how many workers' partial states the row merges: 1 under a single-owner
    grouping, up to the key's choices under a split-key one).  One row per (batch, key)."""
    return pa.schema([pa.field("batch", pa.int64()), pa.field("key", pa.string()), *operator.schema_fields(),
                      pa.field("shares", pa.int32())])


def _order(schema: pa.Schema) -> list[tuple[str, str]]:
    """The canonical row order of a (batch, writer) output: every column."""
    return [(name, "ascending") for name in schema.names]


def sink_file(sink_dir: str, batch: int, worker: int) -> str:
    """Where writer ``worker`` (a worker's task, or a key hash bucket of the merge stage) writes its results of
    micro-batch ``batch``."""
    return filesystems.join(sink_dir, f"batch={int(batch)}", f"worker-{int(worker)}.parquet")


def write_atomic_parquet(path: str, table: pa.Table) -> None:
    """Write ``table`` to ``path`` (a local path or URI) so that readers see the whole file or none:
    a hidden temporary file and a rename, or on an object store the final name directly
    (:func:`skewlab.shared.filesystems.write_parquet`; Parquet readers skip names starting with ``.``)."""
    filesystems.write_parquet(path, table)


def read_sink(sink_dir: str, schema: pa.Schema | None = None) -> pa.Table:
    """Every result row in ``sink_dir`` (columns ``schema``, default :func:`sink_schema` of count)."""
    schema = schema if schema is not None else sink_schema()
    import pyarrow.parquet as pq

    tables = []
    sink_dir = filesystems.resolve(sink_dir)
    for sub in filesystems.list_names(sink_dir):
        d = filesystems.join(sink_dir, sub)
        if not sub.startswith("batch="):
            continue
        for name in filesystems.list_names(d):
            if name.endswith(".parquet") and not name.startswith("."):
                filesystem, path, _ = filesystems.filesystem(filesystems.join(d, name))
                tables.append(pq.read_table(path, schema=schema, filesystem=filesystem))
    return pa.concat_tables(tables) if tables else schema.empty_table()


def parse_sink(spec: str) -> tuple[str, ...]:
    """``("parquet", directory)`` or ``("kafka", bootstrap, topic)`` for a ``--sink`` value;
    :class:`ParamError` (one line) for a malformed Kafka URL."""
    spec = str(spec)
    if not spec.lower().startswith("kafka:"):
        return ("parquet", spec)
    from skewlab.engine.io.kafka_io import _check_args

    url = urlsplit(spec)
    topic = url.path[1:] if url.path.startswith("/") else ""
    if not spec.lower().startswith(KAFKA_SCHEME) or not url.netloc or url.query or url.fragment:
        raise ParamError(f"--sink {spec!r}: expected kafka://HOST:PORT[,HOST:PORT...]/TOPIC")
    try:
        _check_args(url.netloc, topic)
    except ValueError as exc:
        raise ParamError(f"--sink {spec!r}: {exc}") from None
    return ("kafka", url.netloc, topic)


def open_sink(spec: str, partitions: int, *, schema: pa.Schema | None = None,
              log: Callable[[str], None] = lambda m: None, timeout_s: float = 10.0) -> "ParquetSink | KafkaSink":
    """The sink of a new run (rows of ``schema``, default :func:`sink_schema` of count), emptied of an
    earlier run's results (see the module docstring)."""
    kind, *where = parse_sink(spec)
    if kind == "parquet":
        sink = ParquetSink(where[0], schema)
        sink.clear(log)
        return sink
    bootstrap, topic = where
    _check_partitions(bootstrap, topic, partitions, timeout_s, create=True)
    start = _end_offsets(bootstrap, topic, partitions, timeout_s)
    if any(start.values()):
        log(f"new run: results go to kafka topic {topic!r} after the records already there (start offsets {start})")
    return KafkaSink(bootstrap, topic, start, schema=schema)


def restore_sink(spec: str, start: dict[int, int] | None, partitions: int, *, schema: pa.Schema | None = None,
                 timeout_s: float = 10.0) -> "ParquetSink | KafkaSink":
    """The sink of a restored run (``spec`` and ``start`` from its snapshot); a Kafka broker that is
    unreachable or a topic with too few partitions is a :class:`ParamError` before the query starts."""
    kind, *where = parse_sink(spec)
    if kind == "parquet":
        return ParquetSink(where[0], schema)
    bootstrap, topic = where
    _check_partitions(bootstrap, topic, partitions, timeout_s, create=False)
    return KafkaSink(bootstrap, topic, {int(p): int(o) for p, o in (start or {}).items()}, schema=schema)


class ParquetSink:
    """Results as ``DIR/batch=B/worker-W.parquet`` (:func:`sink_file`)."""

    def __init__(self, directory: str, schema: pa.Schema | None = None) -> None:
        self.url = filesystems.resolve(directory)  # on the driver: the executors write where it reads
        self.schema = schema if schema is not None else sink_schema()
        self.start: dict[int, int] | None = None

    def write(self, batch: int, worker: int, table: pa.Table) -> None:

        write_atomic_parquet(sink_file(self.url, batch, worker), table)

    def write_many(self, batch: int, tables: Mapping[int, pa.Table]) -> None:
        """:meth:`write` of each ``writer → table`` of micro-batch ``batch``, the files at once
        (:func:`skewlab.shared.filesystems.write_parquet_files`)."""
        filesystems.write_parquet_files({sink_file(self.url, batch, w): t for w, t in tables.items()})

    def read(self) -> pa.Table:

        return read_sink(self.url, self.schema)

    def clear(self, log: Callable[[str], None]) -> None:
        """Delete the ``batch=N`` directories an earlier run with this sink left."""
        old = [filesystems.join(self.url, name) for name in filesystems.list_names(self.url)
               if re.fullmatch(r"batch=\d+", name)]
        for d in old:
            filesystems.remove_tree(d)
        if old:
            log(f"new run: removed {len(old)} result batch(es) of an earlier run from {self.url}")


class KafkaSink:
    """Results as records of ``topic``, writer ``w`` on partition ``w mod P`` (P = the partitions of
    ``start``), from offsets ``start``."""

    def __init__(self, bootstrap: str, topic: str, start: dict[int, int], *, schema: pa.Schema | None = None,
                 timeout_s: float = 30.0) -> None:
        self.schema = schema if schema is not None else sink_schema()
        clash = sorted(set(self.schema.names) & set(PLACEMENT))
        if clash:
            raise ParamError(f"--sink kafka: the operator's column(s) {', '.join(clash)} clash with the record fields "
                             f"{', '.join(PLACEMENT)}; rename the column(s) or write Parquet results")
        self.bootstrap = bootstrap
        self.topic = topic
        self.start = dict(start)
        self.timeout_s = float(timeout_s)
        self.url = f"{KAFKA_SCHEME}{bootstrap}/{topic}"

    def write(self, batch: int, worker: int, table: pa.Table) -> int:
        """Write the rows of ``table`` (the results of micro-batch ``batch`` on ``worker``) that the
        partition does not hold yet; returns how many records were sent.  Any failure is a one-line
        :class:`RuntimeError` (the task fails, the batch is not committed and is replayed)."""
        from kafka import TopicPartition

        tp = TopicPartition(self.topic, int(worker) % max(1, len(self.start)))
        rows = table.sort_by(_order(self.schema)).to_pydict()
        fields = [f for f in self.schema.names if f not in ("key", "worker")]
        n = len(rows["key"])
        key = (self.bootstrap, self.timeout_s)
        try:
            present = self._present(tp, int(batch), int(worker), n)
            todo = [s for s in range(n) if s not in present]
            if not todo:
                return 0
            producer = _PRODUCERS.get(key, lambda: _producer(self.bootstrap, self.timeout_s))
            failure: list[BaseException] = []
            for s in todo:
                value = json.dumps({**{f: rows[f][s] for f in fields}, "worker": int(worker),
                                    "out_batch": int(batch), "seq": s, "records": n}, separators=(",", ":"))
                producer.send(self.topic, key=rows["key"][s].encode("utf-8"), value=value.encode("ascii"),
                              partition=tp.partition).add_errback(failure.append)
            producer.flush(timeout=self.timeout_s)
            if failure:
                raise failure[0]
            return len(todo)
        except _Refused:
            raise
        except Exception as exc:  # noqa: BLE001 - KafkaTimeoutError, broker errors, a killed send
            _PRODUCERS.drop(key)  # clients in error are not reused
            _CONSUMERS.drop(key)
            raise RuntimeError(f"kafka sink: writing batch {batch} of worker {worker} to {self.topic!r} at "
                               f"{self.bootstrap} failed: {type(exc).__name__}: {exc}") from None

    def write_many(self, batch: int, tables: Mapping[int, pa.Table]) -> int:
        """:meth:`write` of each ``writer → table`` of micro-batch ``batch``, one after the other;
        returns the records sent."""
        return sum(self.write(batch, w, t) for w, t in tables.items())

    def _present(self, tp, batch: int, writer: int, n: int) -> set[int]:
        """The ``seq`` of micro-batch ``batch`` of ``writer`` already in partition ``tp`` after the run's
        start: read the last record, and if it is of ``batch``, back far enough to see where ``batch``
        begins."""
        from skewlab.engine.io.kafka_io import end_offsets, read_records

        consumer = _CONSUMERS.get((self.bootstrap, self.timeout_s), lambda: _consumer(self.bootstrap, self.timeout_s))
        floor = self.start.get(tp.partition, 0)
        end = end_offsets(consumer, [tp], timeout_s=min(self.timeout_s, 5.0))[tp.partition]
        span = 1
        while end > floor:
            lo = max(floor, end - span)
            metas = [_meta(self.topic, tp.partition, r.offset, r.key, r.value)
                     for r in read_records(consumer, tp, lo, end, timeout_s=self.timeout_s)]
            last = metas[-1]["out_batch"] if metas else -1
            if last < batch:
                return set()
            if last > batch:
                raise _Refused(f"kafka sink: partition {tp.partition} of {self.topic!r} already holds results of "
                                   f"batch {last} while writing batch {batch}: another run writes to this topic")
            if lo == floor or metas[0]["out_batch"] < batch:
                return {m["seq"] for m in metas if m["out_batch"] == batch and m["worker"] == writer}
            span = max(2 * span, n + 1)
        return set()

    def read(self) -> pa.Table:
        return read_kafka_sink(self.bootstrap, self.topic, self.start, schema=self.schema, timeout_s=self.timeout_s)


def read_kafka_sink(bootstrap: str, topic: str, start: dict[int, int] | None = None, *,
                    schema: pa.Schema | None = None, timeout_s: float = 30.0) -> pa.Table:
    """Every result row a :class:`KafkaSink` wrote to ``topic`` from offsets ``start`` (default: each
    partition's beginning), in the columns ``schema`` (default :func:`sink_schema` of count): one row per
    (out_batch, worker, seq) of the groups whose ``n`` records are all there; an incomplete group (a
    write cut short, completed by the replay) is left out, like a Parquet file not yet renamed."""
    from skewlab.engine.io.kafka_io import read_topic

    groups: dict[tuple[int, int], dict[int, tuple[str, dict]]] = {}
    for part, recs in read_topic(bootstrap, topic, start=start, timeout_s=timeout_s).items():
        for offset, key, value in recs:
            m = _meta(topic, part, offset, key, value)
            groups.setdefault((m["out_batch"], m["worker"]), {}).setdefault(m["seq"], (key.decode("utf-8"), m))
    schema = schema if schema is not None else sink_schema()
    cols: dict[str, list] = {name: [] for name in schema.names}
    for (_, _), recs in sorted(groups.items()):
        n = _records(next(iter(recs.values()))[1])
        if set(recs) != set(range(n)):
            continue
        for s in range(n):
            key, m = recs[s]
            for name in schema.names:
                cols[name].append(key if name == "key" else m.get(name))
    return pa.table(cols, schema=schema)


#: the record fields that place a result row in its writer's output (an operator column may not take them)
PLACEMENT = ("worker", "out_batch", "seq", "records")


def _records(meta: dict[str, Any]) -> Any:
    """The number of records of a (out_batch, worker) output: ``records``; ``n`` in the records of
    skewlab before, where it hid an operator column named ``n`` (the mean's)."""
    return meta["records"] if "records" in meta else meta.get("n")


class _Refused(RuntimeError):
    """The topic holds records this run must not write after (a later batch, not a skewlab record)."""


def _meta(topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None) -> dict[str, Any]:
    """The decoded value of a result record; :class:`_Refused` for anything else."""
    try:
        m = json.loads(value)
        if not all(isinstance(m.get(f), int) for f in ("out_batch", "seq", "worker", "batch")) or key is None:
            raise ValueError("fields missing")
        if not isinstance(_records(m), int):
            raise ValueError("fields missing")
        return m
    except (ValueError, TypeError, AttributeError):
        raise _Refused(f"kafka sink: record {topic}[{partition}]@{offset} is not a skewlab result "
                           "record: the topic is written by something else") from None


def _check_partitions(bootstrap: str, topic: str, partitions: int, timeout_s: float, *, create: bool) -> int:
    from skewlab.engine.io.kafka_io import ensure_topic

    try:
        if create:
            count = ensure_topic(bootstrap, topic, partitions, timeout_s=timeout_s)
        else:
            count = _partition_count(bootstrap, topic, timeout_s)
    except ValueError as exc:
        raise ParamError(f"--sink kafka: {exc}") from None
    if count < partitions:
        raise ParamError(f"--sink kafka: topic {topic!r} has {count} partition(s), the run needs one per state "
                         f"partition ({partitions}, --max-workers): use another topic or recreate it")
    return count


def _partition_count(bootstrap: str, topic: str, timeout_s: float) -> int:
    from kafka import KafkaConsumer

    from skewlab.engine.io.kafka_io import _client

    consumer = _client(KafkaConsumer, bootstrap, timeout_s, group_id=None, client_id="skewlab-sink-check")
    try:
        return len(consumer.partitions_for_topic(topic) or ())
    finally:
        consumer.close()


def _end_offsets(bootstrap: str, topic: str, partitions: int, timeout_s: float) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    from skewlab.engine.io.kafka_io import _client, end_offsets

    consumer = _client(KafkaConsumer, bootstrap, timeout_s, group_id=None, enable_auto_commit=False,
                       client_id="skewlab-sink-check")
    try:
        return end_offsets(consumer, [TopicPartition(topic, p) for p in range(partitions)], timeout_s=timeout_s)
    except Exception as exc:  # noqa: BLE001 - KafkaTimeoutError, broker errors
        raise ParamError(f"--sink kafka: cannot read the end offsets of {topic!r} at {bootstrap}: "
                         f"{type(exc).__name__}: {exc}") from None
    finally:
        consumer.close()


def _producer(bootstrap: str, timeout_s: float):
    from kafka import KafkaProducer

    from skewlab.engine.io.kafka_io import kafka_config

    ms = int(timeout_s * 1000)
    return KafkaProducer(**kafka_config(
        KafkaProducer, bootstrap_servers=bootstrap, client_id="skewlab-sink", acks="all", enable_idempotence=True,
        linger_ms=5, batch_size=256 * 1024, max_block_ms=ms, request_timeout_ms=min(ms, 30_000),
        delivery_timeout_ms=min(ms, 30_000) + ms + 5, bootstrap_timeout_ms=ms))


def _consumer(bootstrap: str, timeout_s: float):
    from kafka import KafkaConsumer

    from skewlab.engine.io.kafka_io import kafka_config

    ms = int(timeout_s * 1000)
    return KafkaConsumer(**kafka_config(
        KafkaConsumer, bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
        auto_offset_reset="none", fetch_max_wait_ms=20, client_id="skewlab-sink",
        request_timeout_ms=max(ms, 1000), bootstrap_timeout_ms=ms))


class _Clients:
    """Per-process cache of the executors' Kafka clients (one producer and one consumer per broker)."""

    def __init__(self, close: Callable[[Any], None]) -> None:
        self.items: dict[Any, Any] = {}
        self.close = close

    def get(self, key: Any, make: Callable[[], Any]) -> Any:
        if key not in self.items:
            self.items[key] = make()
        return self.items[key]

    def drop(self, key: Any) -> None:
        client = self.items.pop(key, None)
        if client is not None:
            try:
                self.close(client)
            except Exception:  # noqa: BLE001 - closing must not mask the real error
                pass


_PRODUCERS = _Clients(lambda p: p.close(timeout=1))
_CONSUMERS = _Clients(lambda c: c.close())
