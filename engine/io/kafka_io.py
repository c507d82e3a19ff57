"""Kafka input for the Spark engine: create topics and replay any workload into Kafka.

* :func:`ensure_topic` — create a topic with ``P`` partitions if it does not exist.
* :func:`topic_partitions` — the broker answers and the topic exists (the engine checks it before Spark).
* :func:`produce` — replay ``skewlab.engine.workloads`` workload ``workload`` into a topic at a target
  rate: record key = the workload key string as UTF-8, value = the message's global index as
  ASCII digits (a small payload that lets a consumer check order and completeness).
* :func:`read_topic` — read a whole topic back with ``assign`` + ``seek`` (tests, debugging).
* :func:`end_offsets` — the true end offset of partitions (ListOffsets raised to a Fetch's high
  watermark; the Kafka source and the Kafka result sink use it).
* :func:`read_records` — the records of one partition in an offset range.
* :func:`first_values` — the values of the first records of each partition (what the records hold).

Every function talks to the broker with bounded timeouts and turns "cannot reach the broker",
"topic missing", "send failed" into a one-line :class:`ValueError`; nothing hangs.

Record placement (``placement``): ``roundrobin`` (default) sends message ``i`` to partition
``i mod P``, so every Kafka partition — one source instance of the ``skewlab-kafka`` Spark
source — carries an equal share of one i.i.d. stream, like the instances of the generator source;
``key`` leaves it to Kafka's default partitioner (murmur2 of the key), i.e. key grouping already
at the source.

Topic creation with the test broker (tansu 0.6, see ``tests/kafka_fixtures.py``):
``KafkaAdminClient.create_topics`` works; the broker also auto-creates an unknown topic (with 4
partitions) on a producer's metadata request, so ``produce(..., partitions=None)`` to a new topic
works there but not on a Kafka with ``auto.create.topics.enable=false``: pass ``partitions`` to
be explicit.  ``CreatePartitions`` is not supported by tansu; existing topics are never resized
here (the actual partition count is returned and used).
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any, Mapping

__all__ = ["end_offsets", "ensure_topic", "first_values", "produce", "read_records", "read_topic", "topic_partitions"]

_TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def kafka_config(cls, **config) -> dict:
    """Keep only the settings this kafka-python version knows (2.x and 3.x differ in names)."""
    known = getattr(cls, "DEFAULT_CONFIG", {})
    out = {k: v for k, v in config.items() if k in known}
    if "bootstrap_timeout_ms" in config and "bootstrap_timeout_ms" not in known:
        if "api_version_auto_timeout_ms" in known:  # kafka-python 2.x
            out["api_version_auto_timeout_ms"] = config["bootstrap_timeout_ms"]
    return out


def _check_args(bootstrap: str, topic: str) -> None:
    if not bootstrap or not isinstance(bootstrap, str):
        raise ValueError("kafka: bootstrap must be 'host:port[,host:port...]'")
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"kafka: bad bootstrap server {server!r}; expected host:port")
    if not _TOPIC_RE.match(str(topic)):
        raise ValueError(f"kafka: bad topic name {topic!r}; use 1-249 of [A-Za-z0-9._-]")


def _client(cls, bootstrap: str, timeout_s: float, **extra):
    ms = max(int(timeout_s * 1000), 100)
    cfg = kafka_config(cls, bootstrap_servers=bootstrap, bootstrap_timeout_ms=ms,
                  request_timeout_ms=max(ms, 1000), **extra)
    try:
        return cls(**cfg)
    except Exception as exc:  # noqa: BLE001 - NoBrokersAvailable, KafkaTimeoutError, config errors
        raise ValueError(f"kafka: cannot reach broker at {bootstrap} within {timeout_s:g}s: "
                         f"{type(exc).__name__}: {exc}") from None


def topic_partitions(bootstrap: str, topic: str, *, timeout_s: float = 10.0) -> int:
    """Partition count of the existing ``topic``: checks that the broker answers and the topic is there
    (before the engine starts Spark).  :class:`ValueError` (one line) when either is not the case."""
    from kafka import KafkaConsumer

    _check_args(bootstrap, topic)
    consumer = _client(KafkaConsumer, bootstrap, timeout_s, group_id=None, enable_auto_commit=False,
                       client_id="skewlab-check")
    try:
        parts = consumer.partitions_for_topic(topic)
    except Exception as exc:  # noqa: BLE001 - KafkaTimeoutError, broker errors
        raise ValueError(f"kafka: cannot read topic {topic!r} at {bootstrap}: {type(exc).__name__}: {exc}") from None
    finally:
        consumer.close()
    if not parts:
        # not `skewlab produce`: it would fill the user's topic with synthetic keys
        raise ValueError(f"kafka: topic {topic!r} does not exist at {bootstrap}: create it (kafka-topics.sh "
                         f"--create --topic {topic}) or start your producer first, then the engine")
    return len(parts)


def _partition_count(admin, topic: str) -> int:
    desc = admin.describe_topics([topic])
    for entry in desc:
        if entry.get("name") == topic and not entry.get("error_code"):
            return len(entry.get("partitions") or [])
    return 0


def ensure_topic(bootstrap: str, topic: str, partitions: int, *, timeout_s: float = 10.0) -> int:
    """Create ``topic`` with ``partitions`` partitions (replication 1) unless it exists.

    Returns the topic's actual partition count (an existing topic is left as it is, even with a
    different count).  :class:`ValueError` when the broker is unreachable or refuses.
    """
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    _check_args(bootstrap, topic)
    partitions = int(partitions)
    if partitions < 1:
        raise ValueError(f"kafka: partitions must be >= 1, got {partitions}")
    admin = _client(KafkaAdminClient, bootstrap, timeout_s, client_id="skewlab-admin")
    try:
        if topic not in set(admin.list_topics()):
            try:
                admin.create_topics([NewTopic(topic, partitions, 1)])
            except TopicAlreadyExistsError:
                pass
        deadline = time.monotonic() + timeout_s
        while True:  # metadata can lag creation by a moment
            count = _partition_count(admin, topic)
            if count > 0 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if count <= 0:
            raise ValueError(f"kafka: topic {topic!r} at {bootstrap} has no partitions after creation")
        return count
    except ValueError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise ValueError(f"kafka: cannot create topic {topic!r} at {bootstrap}: {type(exc).__name__}: {exc}") from None
    finally:
        admin.close()


def _report(progress: Any, done: int, total: int) -> None:
    if progress is None:
        return
    if hasattr(progress, "update"):
        progress.update(done)
    else:
        progress(done, total)


def produce(
    bootstrap: str,
    topic: str,
    workload: Any,
    params: Mapping[str, Any] | None,
    seed: int,
    rate: float,
    messages: int,
    partitions: int | None = None,
    progress: Any = None,
    *,
    chunk: int = 10_000,
    placement: str = "roundrobin",
    timeout_s: float = 10.0,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Replay ``messages`` tuples of a workload into ``topic`` at about ``rate`` tuples/s.

    ``workload``: a name of ``skewlab.engine.workloads.workload_names()`` (built with ``seed`` and
    ``params``) or a ready :class:`~skewlab.engine.workloads.Workload` instance (``params``/``seed``
    ignored).  ``rate <= 0`` = as fast as the client goes.  ``partitions``: ensure the topic
    exists with that many partitions first (:func:`ensure_topic`); ``None`` = use the topic as it
    is.  ``chunk`` is the workload's ``interval_messages``.  ``progress``: a callable
    ``progress(done, total)`` or an object with ``update(done)`` (:class:`skewlab.engine.cli.progress.Progress`).

    ``stop``: when set (checked after every block of messages), stop sending early; what was sent is
    still flushed and the result counts only those messages, with ``"stopped": True``.

    Pacing: after every block of ``max(1, min(1000, rate/50))`` messages the producer sleeps until
    ``t0 + sent/rate``, so the long-run rate is ``rate`` (bursts of at most one block; the client
    batches sends with ``linger_ms=5``).  Returns ``{"topic", "messages", "partitions",
    "seconds", "rate"}`` after every record is acknowledged (``acks=1``).
    """
    from kafka import KafkaProducer

    from skewlab.engine.workloads import Workload, create_workload

    _check_args(bootstrap, topic)
    messages = int(messages)
    if messages < 0:
        raise ValueError(f"kafka: messages must be >= 0, got {messages}")
    if placement not in ("roundrobin", "key"):
        raise ValueError(f"kafka: placement must be roundrobin|key, got {placement!r}")
    rate = float(rate)
    if rate != rate:  # NaN
        raise ValueError("kafka: rate must be a number")
    wl = workload if isinstance(workload, Workload) else create_workload(str(workload), int(seed), params)
    if partitions is not None:
        ensure_topic(bootstrap, topic, partitions, timeout_s=timeout_s)
    producer = _client(KafkaProducer, bootstrap, timeout_s, client_id="skewlab-producer",
                       acks=1, enable_idempotence=False, linger_ms=5, batch_size=256 * 1024, retries=3,
                       max_block_ms=int(timeout_s * 1000), delivery_timeout_ms=max(int(timeout_s * 1000) * 3, 30_000))
    failure: list[BaseException] = []

    def on_error(exc: BaseException) -> None:
        if not failure:
            failure.append(exc)

    try:
        try:
            parts = producer.partitions_for(topic)
        except Exception as exc:  # noqa: BLE001 - KafkaTimeoutError when the topic is unknown
            raise ValueError(f"kafka: topic {topic!r} not available at {bootstrap}: "
                             f"{type(exc).__name__}: {exc}") from None
        if not parts:
            raise ValueError(f"kafka: topic {topic!r} has no partitions at {bootstrap}")
        part_ids = sorted(parts)
        n_parts = len(part_ids)
        block = max(1, min(1000, int(rate / 50))) if rate > 0 else 1000
        key_bytes: list[bytes] = []
        names = wl.vocab.names
        sent = 0
        t0 = time.perf_counter()
        _report(progress, 0, messages)
        stopped = False
        for ids in wl.batches(messages, chunk):
            if len(key_bytes) < len(names):  # vocabularies only grow
                key_bytes.extend(n.encode("utf-8") for n in names[len(key_bytes):])
            for kid in ids.tolist():
                part = part_ids[sent % n_parts] if placement == "roundrobin" else None
                producer.send(topic, key=key_bytes[kid], value=b"%d" % sent, partition=part).add_errback(on_error)
                sent += 1
                if sent % block == 0:
                    if failure:
                        raise ValueError(f"kafka: send to {topic!r} failed: {type(failure[0]).__name__}: {failure[0]}")
                    if stop is not None and stop.is_set():
                        stopped = True
                        break
                    if rate > 0:
                        wait = t0 + sent / rate - time.perf_counter()
                        if wait > 0:
                            if stop is not None:
                                stop.wait(wait)
                            else:
                                time.sleep(wait)
            _report(progress, sent, messages)
            if stopped:
                break
        try:
            producer.flush(timeout=max(timeout_s * 3, 30.0))
        except Exception as exc:  # noqa: BLE001 - KafkaTimeoutError
            raise ValueError(f"kafka: flushing to {topic!r} at {bootstrap} failed: "
                             f"{type(exc).__name__}: {exc}") from None
        if failure:
            raise ValueError(f"kafka: send to {topic!r} failed: {type(failure[0]).__name__}: {failure[0]}")
        seconds = time.perf_counter() - t0
        return {"topic": topic, "messages": sent, "partitions": n_parts, "seconds": seconds,
                "rate": sent / seconds if seconds > 0 else float("inf"), "stopped": stopped}
    finally:
        try:
            producer.close(timeout=1)
        except Exception:  # noqa: BLE001 - closing must not mask the real error
            pass


def _reader(bootstrap: str, topic: str, timeout_s: float, client_id: str) -> Any:
    """A consumer without a group that reads ``topic`` from assigned offsets."""
    from kafka import KafkaConsumer

    _check_args(bootstrap, topic)
    return _client(KafkaConsumer, bootstrap, timeout_s, group_id=None, enable_auto_commit=False,
                   auto_offset_reset="earliest", fetch_max_wait_ms=50, client_id=client_id)


def _partition_bounds(consumer: Any, bootstrap: str, topic: str, timeout_s: float) -> tuple[list, dict, dict]:
    """``topic``'s partitions (sorted), their first and their end offsets; :class:`ValueError` (one
    line) when the topic does not exist."""
    from kafka import TopicPartition

    parts = consumer.partitions_for_topic(topic)
    if not parts:
        raise ValueError(f"kafka: topic {topic!r} does not exist at {bootstrap}")
    tps = [TopicPartition(topic, p) for p in sorted(parts)]
    begin = {tp.partition: int(off) for tp, off in consumer.beginning_offsets(tps).items()}
    return tps, begin, end_offsets(consumer, tps, timeout_s=min(timeout_s, 5.0))


def read_topic(
    bootstrap: str, topic: str, *, start: Mapping[int, int] | None = None, timeout_s: float = 10.0
) -> dict[int, list[tuple[int, bytes | None, bytes | None]]]:
    """All records of ``topic`` as ``{partition: [(offset, key, value), ...]}`` (assign + seek), from
    the offsets ``start`` (default: each partition's beginning) to the end (:func:`end_offsets`)."""
    consumer = _reader(bootstrap, topic, timeout_s, "skewlab-reader")
    try:
        tps, begin, ends = _partition_bounds(consumer, bootstrap, topic, timeout_s)
        out: dict[int, list] = {}
        for tp in tps:
            lo = max(begin[tp.partition], int((start or {}).get(tp.partition, 0)))
            recs = read_records(consumer, tp, lo, ends[tp.partition], timeout_s=timeout_s)
            out[tp.partition] = [(r.offset, r.key, r.value) for r in recs]
        return out
    finally:
        consumer.close()


def first_values(bootstrap: str, topic: str, n: int = 5, *, timeout_s: float = 10.0) -> list[bytes]:
    """The values of up to ``n`` records from the start of each partition of ``topic`` (a look at what
    the records hold, e.g. their JSON fields); :class:`ValueError` (one line) when the broker or the
    topic cannot be read."""
    consumer = _reader(bootstrap, topic, timeout_s, "skewlab-peek")
    try:
        tps, begin, ends = _partition_bounds(consumer, bootstrap, topic, timeout_s)
        out: list[bytes] = []
        for tp in tps:
            lo = begin[tp.partition]
            for rec in read_records(consumer, tp, lo, min(lo + n, ends[tp.partition]), timeout_s=timeout_s):
                if rec.value is not None:
                    out.append(bytes(rec.value))
        return out
    except RuntimeError as exc:
        raise ValueError(str(exc)) from None
    finally:
        consumer.close()


def end_offsets(consumer, tps: list, *, probe: bool = True, timeout_s: float = 5.0) -> dict[int, int]:
    """``{partition: end offset}`` of the :class:`kafka.TopicPartition` list ``tps`` (one topic).

    ListOffsets ``latest`` raised, with ``probe``, to the high watermark seen in a Fetch response:
    some Kafka-protocol brokers (tansu 0.6, used by the tests) answer ListOffsets with the base offset
    of the last record *batch* + 1; the high watermark of a Fetch is right on them and equals the
    ListOffsets answer on Apache Kafka, where the probe costs one tiny fetch per partition.  The
    consumer is assigned ``tps`` for the probe and unsubscribed afterwards.
    """
    ends = {tp.partition: int(off) for tp, off in consumer.end_offsets(list(tps)).items()}
    if not probe:
        return ends
    consumer.assign(list(tps))
    try:
        waiting = set()
        for tp in tps:
            listed = ends[tp.partition]
            consumer.seek(tp, max(listed - 1, 0))
            if listed > 0:
                waiting.add(tp)
        deadline = time.monotonic() + timeout_s
        while waiting and time.monotonic() < deadline:
            got = consumer.poll(timeout_ms=50, max_records=100_000)
            for tp, recs in got.items():
                if recs:
                    ends[tp.partition] = max(ends[tp.partition], recs[-1].offset + 1)
                    waiting.discard(tp)
        for tp in tps:  # the high watermark never exceeds the real end: always safe to use
            hw = consumer.highwater(tp)
            if hw is not None:
                ends[tp.partition] = max(ends[tp.partition], int(hw))
    finally:
        consumer.unsubscribe()  # stop fetching and drop anything prefetched
    return ends


def read_records(consumer, tp, start: int, end: int, *, timeout_s: float = 10.0) -> list:
    """The records of partition ``tp`` with offsets in ``[start, end)`` (``assign`` + ``seek``).

    Offsets without a record (compaction, transaction markers) are skipped by the consumer's
    position.  :class:`RuntimeError` when the range cannot be read within ``timeout_s`` of no
    progress (records deleted by retention, broker gone).
    """
    out: list = []
    if end <= start:
        return out
    consumer.assign([tp])
    try:
        consumer.seek(tp, start)
        pos = start
        deadline = time.monotonic() + timeout_s
        while pos < end:
            progressed = False
            for rec in consumer.poll(timeout_ms=200, max_records=min(end - pos, 50_000)).get(tp, []):
                if start <= rec.offset < end and rec.offset >= pos:
                    out.append(rec)
                    pos = rec.offset + 1
                    progressed = True
            position = consumer.position(tp)
            if pos < end and position is not None and position > pos:
                pos = min(int(position), end)
                progressed = True
            if progressed:
                deadline = time.monotonic() + timeout_s
            elif time.monotonic() > deadline:
                raise RuntimeError(f"kafka: {tp.topic}[{tp.partition}] stuck at offset {pos} of [{start}, {end}) "
                                   f"after {timeout_s:g} s (records deleted or broker unreachable)")
    finally:
        consumer.unsubscribe()
    return out
