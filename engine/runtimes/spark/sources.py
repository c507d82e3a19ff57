"""Streaming sources of the Spark engine, as PySpark Python Data Sources (``pyspark.sql.datasource``;
no JAR, no Scala).

Three sources, registered on a session by :func:`register` (``skewlab.engine.runtimes.spark.session.get_session``
does it): ``skewlab-generator`` (a seeded workload of :mod:`skewlab.engine.workloads` replayed at a target
rate by ``partitions`` parallel source instances), ``skewlab-file`` (a text/CSV file replayed at a
target rate; line ``i`` belongs to instance ``i mod P``) and ``skewlab-kafka`` (one instance per
Kafka partition; offsets carried in Spark's checkpoint).

One Spark input partition of a micro-batch is one upstream *source instance* (column ``source``),
and a micro-batch is a half-open offset range ``[start, end)`` per instance; every ``read`` returns
exactly the records of its range, so a replayed micro-batch yields identical records.  Columns
(:data:`SCHEMAS`): ``key`` (NULL exactly when ``error`` is set), ``source``, ``seq`` (position in
the instance's stream; Kafka offset), ``error`` (dead-letter reason: ``no_key``, ``bad_utf8``,
``oversized``, and for files ``empty_line``, ``missing_column``, ``empty_key`` by the rules of
:mod:`skewlab.engine.workloads.key_file`; for the records' fields those of
:mod:`skewlab.engine.workloads.record_fields`), ``raw`` (file, kafka: the first bytes of a bad record
as readable text, :func:`skewlab.engine.workloads.key_file.raw_text`) and ``ts`` (kafka: record timestamp, ms), and with values (:func:`has_values`: a
file's ``value_column``, Kafka's ``value_field``, the generator's ``values``) ``value`` (DOUBLE,
NULL exactly when ``error`` is set).  Bad records are emitted, never raised.

Admission control (generator and file): offsets are JSON ``{"0": n0, ...}``, tuples consumed per
instance; at time ``t`` the source has emitted ``total0 + ⌊rate · (t − t0)⌋`` tuples
(``rate <= 0``: unlimited), and ``latestOffset`` admits at most the engine's read limit
(``max_per_batch``) more, so a backlog drains as from a real queue.  ``t0`` is the reader's creation
(Spark creates it when it starts the query's source, shortly before planning batch 0) and ``total0``
the start offset of the first batch it plans: counted from the first ``latestOffset`` call instead,
batch 0 would be empty and the first data would wait a whole batch (docs/results/first-batch.md, "First batch on
a cold numba cache").  A total is split over the instances by :func:`fair_split` (water-filling).
``Trigger.AvailableNow`` ignores ``rate``.

Routing inside the source (option ``route_dir``, set by the engine): each instance routes its own
tuples through :func:`skewlab.engine.runtimes.spark.topology.make_router`, as the sources of the papers do (Nasir
et al. Sec. II), and emits :data:`skewlab.engine.runtimes.spark.topology.ROUTED_SCHEMA` (or
:data:`~skewlab.engine.runtimes.spark.topology.ROUTED_VALUES_SCHEMA` with ``route_values=true``; with
``route_combined``, the combined rows of :func:`~skewlab.engine.runtimes.spark.topology.combined_schema`).  The routing
snapshot of batch ``v`` is the file ``route-<v>.snap`` named in ``route_dir/NEXT``
(:class:`RouteFiles`); ``route_values`` (``none`` | ``seq`` | ``field``) names the value routed rows carry
(:data:`~skewlab.engine.runtimes.spark.topology.VALUE_KINDS`); ``route_combiner`` names the file in ``route_dir``
of the operator whose rows the routing combines, fixed for the query's life: written once when the query
starts (:meth:`RouteFiles.publish_combiner`) and read once per executor process
(:meth:`RouteFiles.combiner_operator`), not carried by every batch's snapshot; ``latestOffset`` records ``v`` in the batch's end offset, so a replayed batch
uses the snapshot it was planned with.  Executor-side caches (the generator's iterator, the file's
parsed keys) live across micro-batches in reused Python workers.  Details of each of these
mechanisms: docs/design-notes.md, "engine/runtimes/spark/sources.py".

Options: each source declares its options as :class:`~skewlab.engine.config.params.Param` (:data:`GENERATOR_OPTIONS`,
:data:`FILE_OPTIONS`, :data:`KAFKA_OPTIONS`; run settings among them from :mod:`skewlab.engine.config.settings`)
and parses them with :func:`source_options`, with the CLI's ranges and one-line messages.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import threading
import time
from dataclasses import replace
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from skewlab.engine.config import settings
from skewlab.engine.config.params import Param, ParamError, resolve_params
from skewlab.engine.workloads.key_file import parse_separator, raw_text, read_key_file
from skewlab.engine.workloads.record_fields import json_fields, parse_path
from skewlab.shared import filesystems

try:  # Spark >= 4.2: admission control API
    from pyspark.sql.streaming.datasource import ReadMaxRows, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - older pyspark: no read limits, no availableNow
    ReadMaxRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

__all__ = [
    "ARROW_SCHEMAS",
    "FILE",
    "FILE_OPTIONS",
    "GENERATOR",
    "GENERATOR_OPTIONS",
    "KAFKA",
    "KAFKA_OPTIONS",
    "SCHEMAS",
    "FileDataSource",
    "GeneratorDataSource",
    "KafkaDataSource",
    "UNBOUNDED",
    "fair_split",
    "generator_stream_ids",
    "generator_values",
    "has_values",
    "load_key_file",
    "parse_kafka_fields",
    "partition_seed",
    "register",
    "source_options",
]

GENERATOR = "skewlab-generator"
FILE = "skewlab-file"
KAFKA = "skewlab-kafka"

#: Length used for an unbounded stream (2^62 tuples: never reached, still a JSON/int64 number).
UNBOUNDED = 1 << 62

SCHEMAS: dict[str, str] = {
    GENERATOR: "key STRING, source INT, seq BIGINT, error STRING",
    FILE: "key STRING, source INT, seq BIGINT, error STRING, raw STRING",
    KAFKA: "key STRING, source INT, seq BIGINT, error STRING, raw STRING, ts BIGINT",
}
_ARROW_TYPES = {
    "key": pa.string(), "source": pa.int32(), "seq": pa.int64(), "error": pa.string(),
    "raw": pa.string(), "ts": pa.int64(),
}
ARROW_SCHEMAS: dict[str, pa.Schema] = {
    name: pa.schema([(col.split()[0], _ARROW_TYPES[col.split()[0]]) for col in ddl.split(", ")])
    for name, ddl in SCHEMAS.items()
}
#: the column a source with values adds after its own (:func:`has_values`)
VALUE_COLUMN = "value DOUBLE"
_VALUE_FIELD = pa.field("value", pa.float64())


def has_values(fmt: str, options: Mapping[str, Any]) -> bool:
    """Does source ``fmt`` with ``options`` emit each record's value (column ``value``)?"""
    given = {str(k).lower(): v for k, v in dict(options).items()}
    if fmt == GENERATOR:
        return str(given.get("values", "")).strip().lower() in ("true", "1", "yes")
    name = "value_column" if fmt == FILE else "value_field"
    return bool(str(given.get(name) or "").strip())


def _arrow_schema(fmt: str, values: bool) -> pa.Schema:
    return ARROW_SCHEMAS[fmt].append(_VALUE_FIELD) if values else ARROW_SCHEMAS[fmt]


def register(spark) -> None:
    """Register the three sources on ``spark`` (idempotent)."""
    for cls in (GeneratorDataSource, FileDataSource, KafkaDataSource):
        spark.dataSource.register(cls)


def _schema(fmt: str, options: Mapping[str, Any]) -> str:
    """The DDL a source produces: its own columns, or the routed ones with ``route_dir``."""
    if options.get("route_dir"):
        from skewlab.engine.runtimes.spark.topology import ROUTED_FIELD_SCHEMA, ROUTED_SCHEMA, ROUTED_VALUES_SCHEMA

        route = source_options(options, fmt, _ROUTE_OPTIONS)
        routed_values = route["route_values"]
        if routed_values == "field" and not has_values(fmt, options):
            raise ParamError(f"{fmt}: route_values=field needs a source with values "
                             "(value_column, value_field, values=true)")
        if route["route_combined"]:  # an operator that combines: a row per (key, worker) (topology.combined_schema)
            return route["route_combined"]
        return {"seq": ROUTED_VALUES_SCHEMA, "field": ROUTED_FIELD_SCHEMA}.get(routed_values, ROUTED_SCHEMA)
    return f"{SCHEMAS[fmt]}, {VALUE_COLUMN}" if has_values(fmt, options) else SCHEMAS[fmt]


# ============================================================================ routing snapshots
ROUTE_FIELD = "route"  # end-offset field: the routing snapshot version of the micro-batch


class RouteFiles:
    """Routing snapshots the engine publishes for routing inside the sources (see the module docstring).

    ``route-<v>.snap`` holds the pickled :class:`skewlab.engine.runtimes.spark.topology.RoutingSnapshot` for
    micro-batch ``v``; ``NEXT`` holds the version the next planned batch uses.  Both are written
    atomically through :mod:`skewlab.shared.filesystems` (a local path or a URI the executors can
    read), so a reader sees a whole file or the previous one.
    The last ``keep`` versions stay on disk: a batch that was applied but not yet committed by Spark
    when the engine died is re-planned, with its own version, on the next start.
    """

    NEXT = "NEXT"
    FLUSH = "FLUSH"

    def __init__(self, directory: str | os.PathLike, keep: int = 4, combiner: str = "") -> None:
        self.dir = filesystems.resolve(directory)
        self.keep = max(int(keep), 2)
        #: the file in ``dir`` of the query's pickled combiner (option ``route_combiner``), ``""``: none
        self.combiner = combiner

    def publish_combiner(self, data: bytes) -> str:
        """Write the query's combiner (the operator pickled for the source tasks,
        :func:`skewlab.engine.runtimes.spark.topology.combiner_bytes`) once, under a name of its content
        (so a process's cache of it can never be stale); returns the name, the ``route_combiner`` option."""
        name = f"combiner-{hashlib.sha256(data).hexdigest()[:20]}.pkl"
        filesystems.makedirs(self.dir)
        filesystems.write_bytes(filesystems.join(self.dir, name), data)
        return name

    def combiner_operator(self) -> Any:
        """The query's combiner operator (:attr:`combiner`), unpickled once per process; ``None``: none."""
        return _load_combiner(filesystems.join(self.dir, self.combiner)) if self.combiner else None

    def path(self, version: int) -> str:
        return filesystems.join(self.dir, f"route-{int(version)}.snap")

    def publish(self, version: int, data: bytes, flush: bool = False) -> None:
        """Make ``data`` the snapshot of batch ``version`` and ``version`` the next one.  ``flush``: the
        batch must run even if no new tuple arrives (state in flight between workers: see
        :func:`_with_route`)."""
        filesystems.makedirs(self.dir)
        version = int(version)
        filesystems.write_bytes(self.path(version), data)
        flush_path = filesystems.join(self.dir, self.FLUSH)
        if flush:
            filesystems.write_bytes(flush_path, str(version).encode("ascii"))
        else:
            filesystems.remove(flush_path)
        filesystems.write_bytes(filesystems.join(self.dir, self.NEXT), str(version).encode("ascii"))
        for name in filesystems.list_names(self.dir):
            m = re.fullmatch(r"route-(\d+)\.snap", name)
            if m and int(m.group(1)) <= version - self.keep:
                try:
                    filesystems.remove(filesystems.join(self.dir, name))
                except OSError:
                    pass

    def _read_number(self, name: str) -> int:
        return int(filesystems.read_bytes(filesystems.join(self.dir, name)).decode("ascii").strip())

    def next_version(self) -> int:
        try:
            return self._read_number(self.NEXT)
        except (OSError, ValueError):
            raise ValueError(f"no routing snapshot published in {self.dir} (route_dir is set by the skewlab "
                             "engine, which publishes one before it starts a query)") from None

    def flush_version(self) -> int | None:
        """The version that must run even without new data, if any."""
        try:
            return self._read_number(self.FLUSH)
        except (OSError, ValueError):
            return None

    def read(self, version: int) -> bytes:
        try:
            return filesystems.read_bytes(self.path(version))
        except OSError:
            raise ValueError(f"routing snapshot {int(version)} is missing in {self.dir}: the checkpoint "
                             "directory was changed or pruned while a batch was pending") from None


@functools.lru_cache(maxsize=8)
def _load_combiner(path: str) -> Any:
    """The combiner written by :meth:`RouteFiles.publish_combiner` (its name is its content's hash)."""
    import pickle

    return pickle.loads(filesystems.read_bytes(path))


def _route_files(options: Mapping[str, Any]) -> RouteFiles | None:
    route_dir = options["route_dir"]
    return RouteFiles(route_dir, combiner=options["route_combiner"]) if route_dir else None


def _with_route(routes: RouteFiles | None, out: dict, start: Mapping[str, Any] | None) -> dict:
    """``out`` (a new end offset) with the routing version of the batch it ends.

    No new data (the same positions as ``start``): ``start`` itself, so Spark sees no new offset
    and plans no batch (a fresh ``route`` field alone would start an empty batch per trigger) —
    unless the engine flagged the next version ``flush`` (migrated state waits to be imported, or
    exported): then the positions stay and only ``route`` changes, once, and that batch runs on
    the lead partition alone.
    """
    if routes is None:
        return out
    if start is not None and all(start.get(k) == v for k, v in out.items()) and \
            all(k in out or k == ROUTE_FIELD for k in start):
        version = routes.next_version()
        if routes.flush_version() == version and start.get(ROUTE_FIELD) != version:
            return {**start, ROUTE_FIELD: version}
        return dict(start)
    out = dict(out)
    out[ROUTE_FIELD] = routes.next_version()
    return out


def _flushing(start: Mapping[str, Any] | None, end: Mapping[str, Any]) -> bool:
    """A batch without new tuples planned only to move state (see :func:`_with_route`)."""
    return ROUTE_FIELD in end and (start is None or start.get(ROUTE_FIELD) != end[ROUTE_FIELD])


def _snapshot_for(routes: RouteFiles | None, end: Mapping[str, Any]) -> bytes | None:
    """The routing snapshot named by a batch's end offset (``None`` without ``route_dir``)."""
    if routes is None:
        return None
    if ROUTE_FIELD not in end:
        raise ValueError(f"offset {dict(end)} has no {ROUTE_FIELD!r} field: this checkpoint was written without "
                         "routing in the source; resume it with the skewlab version that wrote it, or start a new run")
    return routes.read(int(end[ROUTE_FIELD]))


def _routed(route: bytes | None, batches: Iterator[pa.RecordBatch], lead: bool = False,
            routes: RouteFiles | None = None) -> Iterator[pa.RecordBatch]:
    """``batches`` as they are, or routed by the snapshot ``route`` (:func:`make_router`; the ``lead``
    partition of a batch also emits its control and import rows), combined by the query's combiner
    (``routes``: :meth:`RouteFiles.combiner_operator`)."""
    if route is None:
        yield from batches
        return
    from skewlab.engine.runtimes.spark.topology import make_router

    combiner = routes.combiner_operator() if routes is not None else None
    yield from make_router(route, lead=lead, combiner=combiner)(batches)


# ============================================================================ shared helpers
_ROUTE_OPTIONS = (
    Param("route_dir", "str", "", "directory of the engine's routing snapshots (set by the engine)"),
    Param("route_values", "choice", "none", "the value routed rows carry: none, the tuple's seq (join operator) "
          "or its value field", choices=("none", "seq", "field")),
    Param("route_combined", "str", "", "DDL of the combined rows the routing emits for an operator that combines "
          "(topology.combined_schema; set by the engine); empty: a row per tuple"),
    Param("route_combiner", "str", "", "file in route_dir of the pickled operator whose rows the routing combines "
          "(RouteFiles.publish_combiner; set by the engine); empty: none"),
)
#: Options of ``skewlab-generator`` (see :class:`GeneratorDataSource`); run settings from :mod:`skewlab.engine.config.settings`.
GENERATOR_OPTIONS: tuple[Param, ...] = (
    Param("workload", "str", "zipf", "workload name (skewlab.engine.workloads.workload_names())", high=64),
    Param("params", "str", "{}", "JSON object of workload parameters", high=1 << 20),
    settings.SEED,
    replace(settings.SOURCES, name="partitions", default=2, help="source instances"),
    Param("chunk", "int", 10_000, "the workload's interval_messages", low=1, high=10_000_000),
    Param("messages", "int", None, "total tuples over all instances (empty/inf/none: unbounded)", low=0,
          high=UNBOUNDED),
    Param("mode", "choice", "seed", "seed: independent draws per instance; stride: one global stream",
          choices=("seed", "stride")),
    Param("values", "bool", False, "emit a seeded value beside each key (generator_values)"),
    replace(settings.MAX_PER_BATCH, default=500_000),
    replace(settings.RATE, default=100_000.0),
    *_ROUTE_OPTIONS,
)
#: Options of ``skewlab-file`` (see :class:`FileDataSource`).
FILE_OPTIONS: tuple[Param, ...] = (
    Param("path", "str", None, "the key file (required)"),
    Param("column", "str", "", "CSV column name or 0-based index; empty = one key per line", high=256),
    Param("value_column", "str", "", "CSV column (name or 0-based index) of each record's value; empty = none",
          high=256),
    Param("sep", "str", ",", "CSV separator: one character, or 'tab'", high=3),
    Param("header", "bool", None, "the file has a header line (default: iff column is a name)"),
    replace(settings.SOURCES, name="partitions", default=1, help="source instances"),
    replace(settings.MAX_PER_BATCH, default=500_000),
    replace(settings.RATE, default=0.0),
    *_ROUTE_OPTIONS,
)
#: Options of ``skewlab-kafka`` (see :class:`KafkaDataSource`).
KAFKA_OPTIONS: tuple[Param, ...] = (
    Param("bootstrap", "str", None, "Kafka bootstrap host:port[,host:port] (required)"),
    Param("topic", "str", None, "topic (required)", high=255),
    replace(settings.MAX_PER_BATCH, default=100_000),
    Param("starting", "choice", "earliest", "where a new query starts", choices=("earliest", "latest")),
    Param("timeout_ms", "int", 30_000, "broker requests and one read, ms", low=100, high=3_600_000),
    Param("probe_highwater", "bool", True, "raise end offsets to the high watermark of a Fetch"),
    Param("key_from", "choice", "key", "the grouping key is the record's key or value", choices=("key", "value")),
    Param("key_field", "str", "", "dotted path of the key in the record's JSON value (empty: key_from)", high=256),
    Param("value_field", "str", "", "dotted path of the value in the record's JSON value (empty: none)", high=256),
    Param("max_key_bytes", "int", 1024, "longer keys are dead letters 'oversized'", low=1),
    *_ROUTE_OPTIONS,
)


def source_options(options: Mapping[str, Any], source: str, declared: Sequence[Param]) -> dict[str, Any]:
    """The ``declared`` options of data source ``source``: given values (names case-insensitive; others
    ignored) parsed by their :class:`~skewlab.engine.config.params.Param`, else the defaults.  A declaration with
    default ``None`` and kind ``str`` is required.  Raises ParamError (a ValueError) with one line."""
    given = {str(k).lower(): v for k, v in dict(options).items()}
    names = {p.name for p in declared}
    try:
        values = resolve_params(declared, {k: v for k, v in given.items() if k in names})
    except ParamError as exc:
        raise ParamError(f"{source}: {exc}") from None
    for p in declared:
        if p.kind == "str" and values[p.name] is None:
            raise ParamError(f"{source}: option {p.name!r} is required")
    return values


def fair_split(total: int, caps: Sequence[int]) -> list[int]:
    """Split ``total`` units over instances with capacities ``caps`` by water-filling.

    Result ``c`` satisfies ``c[p] <= caps[p]``, ``sum(c) = min(total, sum(caps))``, counts differ
    by at most one among instances below their cap, and the extra units go to the lowest indices.
    It equals the greedy "next unit to the least-filled instance, lowest index first", hence is
    monotone in ``total`` (offsets never go backwards) and, with caps ``len(range(p, N, P))``, it is
    exactly the per-instance count of the first ``total`` lines dealt round-robin.
    """
    caps = [max(int(c), 0) for c in caps]
    if not caps:
        return []
    total = max(0, min(int(total), sum(caps)))
    lo, hi = 0, max(caps)  # largest level L with sum(min(c, L)) <= total
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(c, mid) for c in caps) <= total:
            lo = mid
        else:
            hi = mid - 1
    counts = [min(c, lo) for c in caps]
    rest = total - sum(counts)
    for p, c in enumerate(caps):
        if rest <= 0:
            break
        if c > lo:
            counts[p] += 1
            rest -= 1
    return counts


def _encode_offsets(counts: Sequence[int]) -> dict:
    return {str(p): int(c) for p, c in enumerate(counts)}


def _decode_offsets(offset: Mapping[str, Any] | None, n: int) -> list[int]:
    offset = offset or {}
    return [int(offset.get(str(p), 0)) for p in range(n)]


def _max_rows(limit: Any) -> int | None:
    """``ReadMaxRows(n)`` → n; ``ReadAllAvailable``/None/others → None."""
    value = getattr(limit, "max_rows", None)
    return None if value is None else max(int(value), 0)


def _is_read_all(limit: Any) -> bool:
    return type(limit).__name__ == "ReadAllAvailable"


def _default_limit(max_per_batch: int):
    if ReadMaxRows is None:  # pragma: no cover - old pyspark
        return None
    return ReadMaxRows(int(max_per_batch))


class _Pacer:
    """Driver-side admission control of the generator and file sources (see module docstring)."""

    def __init__(self, rate: float, max_per_batch: int, caps: Sequence[int], opened: float | None = None) -> None:
        """``opened``: ``time.monotonic()`` at which the stream opened (default: now); the rate counts from it."""
        self.opened = time.monotonic() if opened is None else float(opened)
        self.rate = float(rate)
        self.max_per_batch = int(max_per_batch)
        self.caps = [int(c) for c in caps]
        self.total_cap = sum(self.caps)
        self.finite = all(c < UNBOUNDED for c in self.caps)
        self._anchor: tuple[float, int] | None = None
        self._available_now = False
        self._target: int | None = None

    def prepare_available_now(self) -> None:
        self._available_now = True
        self._target = None

    def next_counts(self, start: list[int], limit: Any) -> list[int]:
        done = sum(start)
        if self._available_now:
            if self._target is None:
                self._target = self.total_cap if self.finite else done + self.max_per_batch
            emitted = self._target
        elif self.rate > 0:
            now = time.monotonic()
            if self._anchor is None:
                self._anchor = (min(self.opened, now), done)
            t0, d0 = self._anchor
            emitted = d0 + int(self.rate * (now - t0))
        else:
            emitted = self.total_cap
        emitted = min(emitted, self.total_cap)
        rows = _max_rows(limit)
        if rows is not None:
            cap = done + rows
        elif _is_read_all(limit) and (self.finite or self.rate > 0 or self._available_now):
            cap = emitted
        else:  # unlimited rate, infinite stream, no explicit limit: one batch of max_per_batch
            cap = done + self.max_per_batch
        new_total = max(done, min(emitted, cap))
        counts = fair_split(new_total, self.caps)
        return [max(s, c) for s, c in zip(start, counts)]


def _raw(data: bytes | None) -> str | None:
    return None if data is None else raw_text(data)


# ============================================================================ generator
def partition_seed(seed: int, instance: int) -> int:
    """Workload seed of source instance ``instance``: ``SeedSequence([seed mod 2^64, instance])``.

    Independent, well-mixed 63-bit seeds per instance; a pure function, so every executor and every
    replay derives the same seed.
    """
    ss = np.random.SeedSequence([int(seed) % (1 << 64), int(instance)])
    return int(ss.generate_state(1, np.uint64)[0] >> np.uint64(1))


#: the generator's values are integers in ``[0, VALUE_RANGE)`` (exact in float64 sums of any order)
VALUE_RANGE = 1000


def generator_values(seed: int, instance: int, seqs: np.ndarray) -> np.ndarray:
    """The seeded value (float64, an integer in ``[0, VALUE_RANGE)``) of the tuples at positions ``seqs``
    of source instance ``instance``: SplitMix64 (Steele et al., OOPSLA 2014) of the instance's seed
    (:func:`partition_seed`) plus ``seq`` times its odd increment, a pure function of (seed, instance,
    seq), so every replay, any range and the tests' ground truth draw the same values."""
    with np.errstate(over="ignore"):
        z = np.uint64(partition_seed(seed, instance)) + np.asarray(seqs, np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z % np.uint64(VALUE_RANGE)).astype(np.float64)


def _stride_caps(messages: int, chunk: int, instances: int) -> list[int]:
    full, rest = divmod(int(messages), int(chunk))
    caps = []
    for p in range(instances):
        n = len(range(p, full, instances)) * chunk
        if rest and full % instances == p:
            n += rest
        caps.append(n)
    return caps


def _generator_caps(messages: int | None, chunk: int, instances: int, mode: str) -> list[int]:
    if messages is None:
        return [UNBOUNDED] * instances
    if mode == "stride":
        return _stride_caps(messages, chunk, instances)
    return fair_split(messages, [UNBOUNDED] * instances)


def _trace_caps(name: str, params: dict, seed: int, messages: int | None, chunk: int, instances: int,
                mode: str) -> list[int]:
    """Per-instance stream lengths of a ``finite`` workload (a trace such as ``flights``).

    ``seed`` mode: every instance replays the trace from its start (a trace does not use the seed),
    the whole of it, or its share of ``messages`` (:func:`fair_split`, as for any workload).
    ``stride`` mode: instance p gets intervals p, p+S, … of the trace's first ``messages`` tuples;
    their sizes come from the trace's interval boundaries (they may differ: spans of trace time).
    """
    from skewlab.engine.workloads import create_workload

    wl = create_workload(name, seed, params)
    if mode == "stride":
        sizes = np.diff(wl.boundaries(wl.length if messages is None else messages, chunk))
        return [int(sizes[p::instances].sum()) for p in range(instances)]
    if messages is None:
        return [wl.length] * instances
    return fair_split(messages, [wl.length] * instances)


class _GenStream:
    """Executor-side cursor over one instance's infinite (or ``cap``-long) id stream."""

    def __init__(self, cfg: tuple, instance: int) -> None:
        self.cfg = cfg
        self.instance = instance
        self.lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        from skewlab.engine.workloads import create_workload

        name, params_json, seed, instances, chunk, mode, messages = self.cfg
        params = json.loads(params_json)
        p = self.instance
        if mode == "seed":
            cap = _generator_caps(messages, chunk, instances, mode)[p]
            self.workload = create_workload(name, partition_seed(seed, p), params)
            self.it: Iterator[np.ndarray] = iter(self.workload.batches(cap, chunk))
        else:  # stride: chunks p, p+S, p+2S, ... of one global stream seeded with `seed`
            total = UNBOUNDED if messages is None else int(messages)
            self.workload = create_workload(name, seed, params)
            glob = self.workload.batches(total, chunk)
            self.it = (ids for c, ids in enumerate(glob) if c % instances == p)
        self.base = 0  # stream index of buf[0]
        self.buf = np.empty(0, dtype=np.int64)
        self.names = pa.array([], type=pa.string())

    def _key_strings(self, ids: np.ndarray) -> pa.Array:
        names = self.workload.vocab.names
        if len(names) != len(self.names):  # vocabularies only grow; append the new names
            new = pa.array(names[len(self.names):], type=pa.string())
            self.names = pa.concat_arrays([self.names, new]) if len(self.names) else new
        return self.names.take(pa.array(ids, type=pa.int64()))

    def read(self, start: int, end: int) -> Iterator[tuple[int, pa.Array]]:
        """Yield ``(first stream index, key strings)`` slices covering ``[start, end)``."""
        with self.lock:
            if start < self.base:
                self._reset()  # replay / out-of-order range: regenerate from tuple 0
            pos = start
            while pos < end:
                while self.base + self.buf.size <= pos:
                    nxt = next(self.it, None)
                    if nxt is None:  # finite workload ended before `end`: nothing more to emit
                        return
                    self.base += self.buf.size
                    self.buf = np.asarray(nxt, dtype=np.int64)
                lo = pos - self.base
                hi = min(self.buf.size, end - self.base)
                yield pos, self._key_strings(self.buf[lo:hi])
                pos += hi - lo


@functools.lru_cache(maxsize=64)
def _gen_stream(cfg: tuple, instance: int) -> _GenStream:
    """The executor's cursor over instance ``instance`` of generator configuration ``cfg`` (cached per
    worker process; two threads missing at once may build two cursors: both are correct)."""
    return _GenStream(cfg, instance)


def generator_stream_ids(cfg: tuple, instance: int, start: int, end: int) -> list[str]:
    """Keys ``[start, end)`` of instance ``instance`` (uses the same cache as the source)."""
    stream = _gen_stream(cfg, instance)
    out: list[str] = []
    for _, keys in stream.read(start, end):
        out.extend(keys.to_pylist())
    return out


class _RangePartition(InputPartition):
    """One source instance's half-open range ``[start, end)`` in a micro-batch."""

    def __init__(self, cfg: tuple, instance: int, start: int, end: int, route: bytes | None = None,
                 lead: bool = False) -> None:
        super().__init__((instance, start, end))
        self.cfg = cfg
        self.route = route  # routing snapshot (route_dir set) or None
        self.lead = lead  # emits the batch's control and import rows (one partition per batch)
        self.instance = int(instance)
        self.start = int(start)
        self.end = int(end)


class GeneratorDataSource(DataSource):
    """``skewlab-generator``: a seeded :mod:`skewlab.engine.workloads` stream from ``partitions`` instances.

    Options: ``workload`` (a name of ``skewlab.engine.workloads.workload_names()``, default ``zipf``),
    ``params`` (JSON object of workload parameters, default ``{}``), ``seed`` (default 0),
    ``partitions`` (source instances S, default 2), ``rate`` (target tuples/s over all instances,
    ``0`` = unlimited, default 100000), ``max_per_batch`` (tuples per micro-batch over all
    instances, default 500000), ``chunk`` (the workload's ``interval_messages``, default 10000),
    ``messages`` (total tuples over all instances, default unbounded), ``mode`` (``seed`` or
    ``stride``, default ``seed``).

    Streams.  ``mode=seed`` (the default): instance p replays
    ``create_workload(workload, partition_seed(seed, p), params).batches(len_p, chunk)``
    concatenated, an independent draw of the same workload.  Workloads whose *distribution
    evolves* randomly (Fang's fluctuation ``f``, Gaussian substream loads) then evolve
    independently per instance, which averages the change over instances; ``mode=stride`` keeps
    one global process instead: instance p emits chunks ``p, p+S, p+2S, …`` of the single stream
    ``create_workload(workload, seed, params).batches(messages, chunk)`` — the union is the
    workload exactly, at S times the generation cost per instance.  ``chunk`` is part of the
    stream's identity (it is the workload's interval, the unit at which distributions evolve).
    A workload whose behaviour depends on the total ``messages`` (``country-skew`` with ``half``)
    needs the ``messages`` option; unbounded, the "second half" never comes.  A trace (a ``finite``
    workload: ``flights``) ends: without ``messages`` each instance's stream is one pass; in
    ``seed`` mode every instance replays the whole trace in time order (a trace ignores the seed),
    in ``stride`` mode the instances share it interval by interval (with ``span > 0`` an interval
    is a span of trace time and ``chunk`` has no effect).

    Offsets: JSON ``{instance: tuples consumed}``; ``seq`` = tuple index within the instance.
    """

    @classmethod
    def name(cls) -> str:
        return GENERATOR

    def schema(self) -> str:
        return _schema(GENERATOR, self.options)

    def streamReader(self, schema) -> "GeneratorStreamReader":
        return GeneratorStreamReader(self.options)


class _PacedRangeReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver side shared by the generator and file readers: per-instance tuple-count offsets,
    paced by a :class:`_Pacer` (``self.pacer``), one :class:`_RangePartition` per instance with work.

    Subclasses set ``instances``, ``max_per_batch``, ``cfg``, ``_last``, ``routes`` and provide
    ``pacer`` and ``_records`` (the executor side: the partition's record batches, unrouted).
    """

    routes: RouteFiles | None = None

    def read(self, partition: _RangePartition) -> Iterator[pa.RecordBatch]:
        return _routed(partition.route, self._records(partition), partition.lead, self.routes)

    def initialOffset(self) -> dict:
        return _encode_offsets([0] * self.instances)

    def getDefaultReadLimit(self):
        return _default_limit(self.max_per_batch)

    def prepareForTriggerAvailableNow(self) -> None:
        self.pacer.prepare_available_now()

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        begin = self._last if start is None else _decode_offsets(start, self.instances)
        counts = self.pacer.next_counts(begin, limit)
        self._last = counts
        return _with_route(self.routes, _encode_offsets(counts), start)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        s = _decode_offsets(start, self.instances)
        e = _decode_offsets(end, self.instances)
        busy = [p for p in range(self.instances) if e[p] > s[p]]
        if not busy and _flushing(start, end):
            busy = [0]  # no tuples: the lead partition carries the batch's control and import rows
        route = _snapshot_for(self.routes, end) if busy else None
        return [_RangePartition(self.cfg, p, s[p], e[p], route, lead=i == 0) for i, p in enumerate(busy)]

    def commit(self, end: dict) -> None:
        """Nothing to release: the stream is a pure function of the configuration (and the file)."""


class GeneratorStreamReader(_PacedRangeReader):
    """Driver side of :class:`GeneratorDataSource` (planning) and executor side (``read``)."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        from skewlab.engine.workloads import workload_class

        opened = time.monotonic()  # the pacer's t0 (module docstring)
        given = {str(k).lower(): v for k, v in dict(options).items()}
        if str(given.get("messages", "")).strip().lower() in ("", "inf", "none"):
            given.pop("messages", None)  # unbounded
        o = source_options(given, GENERATOR, GENERATOR_OPTIONS)
        name = o["workload"]
        try:
            workload = workload_class(name)
        except ParamError as exc:
            raise ParamError(f"{GENERATOR}: {exc}") from None
        try:
            params = json.loads(o["params"] or "{}")
        except json.JSONDecodeError as exc:
            raise ValueError(f"{GENERATOR}: option params is not valid JSON: {exc}") from None
        if not isinstance(params, dict):
            raise ValueError(f"{GENERATOR}: option params must be a JSON object, got {type(params).__name__}")
        seed = o["seed"]
        # Validate the parameters now without building a vocabulary (ParamError is a ValueError).
        resolve_params(workload.params, params, owner=f"workload {name}")
        self.instances = o["partitions"]
        chunk, messages, mode = o["chunk"], o["messages"], o["mode"]
        self.max_per_batch = o["max_per_batch"]
        self.cfg = (name, json.dumps(params, sort_keys=True), seed, self.instances, chunk, mode, messages)
        if workload.finite:
            caps = _trace_caps(name, params, seed, messages, chunk, self.instances, mode)
        else:
            caps = _generator_caps(messages, chunk, self.instances, mode)
        self.pacer = _Pacer(o["rate"], self.max_per_batch, caps, opened=opened)
        self._last = [0] * self.instances
        self.routes = _route_files(o)
        self.values = o["values"]

    # ---------------------------------------------------------------- executor
    def _records(self, partition: _RangePartition) -> Iterator[pa.RecordBatch]:
        schema = _arrow_schema(GENERATOR, self.values)
        cfg, p = partition.cfg, partition.instance
        stream = _gen_stream(cfg, p)
        for first, keys in stream.read(partition.start, partition.end):
            n = len(keys)
            seqs = np.arange(first, first + n, dtype=np.int64)
            cols = [keys, pa.array(np.full(n, p, dtype=np.int32)), pa.array(seqs), pa.nulls(n, pa.string())]
            if self.values:
                cols.append(pa.array(generator_values(cfg[2], p, seqs)))
            yield pa.RecordBatch.from_arrays(cols, schema=schema)


# ============================================================================ file
def _file_identity(path: str) -> tuple:
    location = filesystems.resolve(path)
    filesystem, inside, _ = filesystems.filesystem(location)
    info = filesystem.get_file_info(inside)
    return (location, info.size, info.mtime_ns)


def load_key_file(path: str, column: str = "", sep: str = ",", header: bool | None = None, value_column: str = ""):
    """The records of a key file as ``(keys, errors, raws, values)`` Arrow arrays (strings; values
    float64), one entry per data line.

    Read by :func:`skewlab.engine.workloads.key_file.read_key_file` (the reader ``skewlab simulate --input``
    uses too; its docstring states the rules); a line without a key has ``key = NULL`` and
    ``error`` = ``bad_utf8`` | ``empty_line`` | ``missing_column`` | ``empty_key`` | ``bad_quote`` and,
    with ``value_column``, ``empty_value`` | ``bad_value_type``.  ``values`` is all NULL without
    ``value_column``.
    """
    records = read_key_file(path, column, sep, header, value_column=value_column, owner=FILE)
    return (pa.array(records.keys, type=pa.string()), pa.array(records.errors, type=pa.string()),
            pa.array(records.raws, type=pa.string()), pa.array(records.values, type=pa.float64()))


@functools.lru_cache(maxsize=4)
def _key_file_of(identity: tuple, column: str, sep: str, header: bool | None, value_column: str):
    """:func:`load_key_file` per file version ``identity`` (path, size, mtime) and reading rules."""
    return load_key_file(identity[0], column, sep, header, value_column)


def _cached_key_file(path: str, column: str, sep: str, header: bool | None, value_column: str = ""):
    return _key_file_of(_file_identity(path), column, sep, header, value_column)


class FileDataSource(DataSource):
    """``skewlab-file``: replay a text/CSV file of keys at a target rate.

    Options: ``path`` (required; a path or URI the executors can read — local mode, a shared file
    system or an object store: :mod:`skewlab.shared.filesystems`), ``column`` (``""`` = one key per line (default); digits = 0-based CSV column;
    a name = CSV column by header), ``value_column`` (the CSV column of each record's value, by name
    or index; default none), ``sep`` (default ``,``; ``tab`` = a tab), ``header`` (default:
    true iff ``column`` is a name); the file is read by :func:`skewlab.engine.workloads.key_file.read_key_file`
    (the reader of ``skewlab simulate --input`` too), ``partitions`` (source instances P, default 1), ``rate`` (lines/s over
    all instances, ``0`` = unlimited (default)), ``max_per_batch`` (default 500000).

    Data line ``i`` (0-based, header excluded) goes to instance ``i mod P``; offsets = lines
    consumed per instance; ``seq`` = ``i div P``, the line's position in its instance's stream
    (as for the other sources), so line ``i = seq·P + source``.  Finite: the query sees no new data once the file is
    consumed (``Trigger.AvailableNow`` terminates).
    """

    @classmethod
    def name(cls) -> str:
        return FILE

    def schema(self) -> str:
        return _schema(FILE, self.options)

    def streamReader(self, schema) -> "FileStreamReader":
        return FileStreamReader(self.options)


class FileStreamReader(_PacedRangeReader):
    def __init__(self, options: Mapping[str, Any]) -> None:
        self._opened = time.monotonic()  # the pacer's t0 (module docstring), though the pacer is built later
        o = source_options(options, FILE, FILE_OPTIONS)
        path = o["path"]
        if not filesystems.is_file(filesystems.resolve(path)):
            raise ValueError(f"{FILE}: no such file: {path}")
        column, header = o["column"].strip(), o["header"]
        sep = parse_separator(o["sep"], FILE)
        self.instances = o["partitions"]
        self.max_per_batch = o["max_per_batch"]
        self.rate = o["rate"]
        self.cfg = (filesystems.resolve(path), column, sep, header, self.instances, o["value_column"].strip())
        self._pacer: _Pacer | None = None  # built on first use: parsing the file is the costly part
        self._last = [0] * self.instances
        self.routes = _route_files(o)

    @property
    def pacer(self) -> _Pacer:
        if self._pacer is None:
            path, column, sep, header, instances, value_column = self.cfg
            lines = len(_cached_key_file(path, column, sep, header, value_column)[0])
            caps = [len(range(p, lines, instances)) for p in range(instances)]
            self._pacer = _Pacer(self.rate, self.max_per_batch, caps, opened=self._opened)
        return self._pacer

    def _records(self, partition: _RangePartition) -> Iterator[pa.RecordBatch]:
        path, column, sep, header, instances, value_column = partition.cfg
        keys, errors, raws, values = _cached_key_file(path, column, sep, header, value_column)
        schema = _arrow_schema(FILE, bool(value_column))
        p = partition.instance
        step = 65_536
        for lo in range(partition.start, partition.end, step):
            hi = min(partition.end, lo + step)
            pos = np.arange(lo, hi, dtype=np.int64)
            lines = pos * instances + p
            keep = lines < len(keys)  # the file shrank under us: emit what exists
            pos, lines = pos[keep], lines[keep]
            take = pa.array(lines)
            cols = [keys.take(take), pa.array(np.full(lines.size, p, dtype=np.int32)), pa.array(pos),
                    errors.take(take), raws.take(take)]
            if value_column:
                cols.append(values.take(take))
            yield pa.RecordBatch.from_arrays(cols, schema=schema)


# ============================================================================ kafka
def _consumer(bootstrap: str, timeout_ms: int, **extra):
    from kafka import KafkaConsumer

    from skewlab.engine.io.kafka_io import kafka_config

    cfg = kafka_config(
        KafkaConsumer,
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="none",
        bootstrap_timeout_ms=min(timeout_ms, 10_000),
        request_timeout_ms=max(timeout_ms, 1000),
        client_id="skewlab-source",
        **extra,
    )
    return KafkaConsumer(**cfg)


@functools.lru_cache(maxsize=8)
def _read_consumer(bootstrap: str, timeout_ms: int):
    """The executor's Kafka consumer for reading ranges (one per broker and timeout per worker process)."""
    return _consumer(bootstrap, timeout_ms, max_poll_records=50_000, fetch_max_wait_ms=100)


class _KafkaPartition(InputPartition):
    """Kafka partition ``kpart`` records with offsets in ``[start, end)``."""

    def __init__(self, cfg: tuple, kpart: int, start: int, end: int, route: bytes | None = None,
                 lead: bool = False) -> None:
        super().__init__((kpart, start, end))
        self.cfg = cfg
        self.route = route  # routing snapshot (route_dir set) or None
        self.lead = lead  # emits the batch's control and import rows (one partition per batch)
        self.kpart = int(kpart)
        self.start = int(start)
        self.end = int(end)


def parse_kafka_record(key: bytes | None, value: bytes | None, key_from: str, max_key_bytes: int):
    """``(key, error, raw)`` for one record under the key rule of :class:`KafkaDataSource`."""
    data = key if key_from == "key" else value
    if data is None:
        return None, ("no_key" if key_from == "key" else "no_value"), _raw(value if key_from == "key" else key)
    if len(data) > max_key_bytes:
        return None, "oversized", _raw(data)
    try:
        return bytes(data).decode("utf-8"), None, None
    except UnicodeDecodeError:
        return None, "bad_utf8", _raw(data)


def parse_kafka_fields(key: bytes | None, value: bytes | None, key_from: str, max_key_bytes: int,
                       key_path: Sequence[str] = (), value_path: Sequence[str] = ()):
    """``(key, value, error, raw)`` for one record: the key by :func:`parse_kafka_record`, or with
    ``key_path`` from that field of the record's JSON value; with ``value_path`` the value from that
    field (else ``None``); the fields' rules and dead-letter reasons are those of
    :mod:`skewlab.engine.workloads.record_fields`.  ``raw``: the value's first bytes as text for a bad field."""
    if not key_path and not value_path:
        k, err, raw = parse_kafka_record(key, value, key_from, max_key_bytes)
        return k, None, err, raw
    if key_path:
        if value is None:
            return None, None, "no_value", _raw(key)
    else:
        k, err, raw = parse_kafka_record(key, value, key_from, max_key_bytes)
        if err:
            return None, None, err, raw
        if value is None:
            return None, None, "no_value", _raw(key)
    field_key, number, err = json_fields(value, key_path, value_path)
    if err:
        return None, None, err, _raw(value)
    if key_path:
        if len(field_key.encode("utf-8")) > max_key_bytes:
            return None, None, "oversized", _raw(value)
        k = field_key
    return k, number, None, None


class KafkaDataSource(DataSource):
    """``skewlab-kafka``: a Kafka topic, one source instance per Kafka partition.

    Options: ``bootstrap`` (``host:port[,host:port]``, required), ``topic`` (required),
    ``max_per_batch`` (records per micro-batch over all partitions, default 100000; split over
    the partitions' backlogs by water-filling), ``starting`` (``earliest`` (default) |
    ``latest``: where a new query starts), ``max_key_bytes`` (default 1024), ``key_from``
    (``key`` (default) | ``value``), ``key_field`` / ``value_field`` (dotted paths into the record's
    JSON value: the key, instead of ``key_from``, and the value (column ``value``): :func:`parse_kafka_fields`), ``timeout_ms`` (broker requests and the completion of one
    ``read``, default 30000), ``probe_highwater`` (default true).

    Key rule (one rule per query, never a per-record guess): with ``key_from=key`` the record
    key's UTF-8 text is the grouping key and a record without key is a dead letter ``no_key``
    (the value is *not* used as a fallback: a keyed stream whose producer forgot the key is an
    error to count, not a different key); ``key_from=value`` takes the value's text instead (for
    topics written by tools that only write values), ``no_value`` when it is null.  Keys longer
    than ``max_key_bytes`` → ``oversized``; not valid UTF-8 → ``bad_utf8``.  ``raw`` holds the first
    bytes of the offending record as text (for ``no_key``: of the value; :func:`~skewlab.engine.workloads.key_file.raw_text`).

    Offsets: JSON ``{kafka partition: next offset}``.  ``latestOffset`` = the broker's end offsets
    (ListOffsets ``latest``) raised to the high watermark seen in a Fetch response
    (``probe_highwater``): some Kafka-protocol brokers (tansu 0.6, used by the tests) answer
    ListOffsets with the base offset of the last record *batch* + 1, which would leave the rest of
    that batch unread until more data arrives; the high watermark of a Fetch is right on them and
    equals the ListOffsets answer on Apache Kafka, where the probe costs one tiny fetch per
    partition and trigger.  Partitions added to the topic later join from their earliest offset.
    ``read`` assigns the partition, ``seek(start)`` and polls until the position reaches ``end``,
    dropping records at or beyond ``end``, so replays are exact.  If the range cannot be completed
    within ``timeout_ms`` (records deleted by retention, broker gone) the task fails with a clear
    message rather than returning a partial batch; Spark retries it.
    """

    @classmethod
    def name(cls) -> str:
        return KAFKA

    def schema(self) -> str:
        return _schema(KAFKA, self.options)

    def streamReader(self, schema) -> "KafkaStreamReader":
        return KafkaStreamReader(self.options)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Mapping[str, Any]) -> None:
        o = source_options(options, KAFKA, KAFKA_OPTIONS)
        self.bootstrap = o["bootstrap"]
        self.topic = o["topic"]
        self.max_per_batch = o["max_per_batch"]
        self.starting = o["starting"]
        self.timeout_ms = o["timeout_ms"]
        self.probe = o["probe_highwater"]
        key_from = o["key_from"]
        max_key_bytes = o["max_key_bytes"]
        key_path = parse_path(o["key_field"], f"{KAFKA}: key_field")
        value_path = parse_path(o["value_field"], f"{KAFKA}: value_field")
        self.cfg = (self.bootstrap, self.topic, key_from, max_key_bytes, self.timeout_ms, key_path, value_path)
        self._client = None
        self._earliest: dict[int, int] = {}
        self._target: dict[int, int] | None = None
        self._available_now = False
        self._last: dict | None = None
        self.routes = _route_files(o)

    # ---------------------------------------------------------------- driver helpers
    def _meta(self):
        if self._client is None:
            try:
                self._client = _consumer(self.bootstrap, self.timeout_ms, fetch_max_wait_ms=20,
                                         max_partition_fetch_bytes=1)
            except Exception as exc:  # noqa: BLE001 - NoBrokersAvailable, KafkaTimeoutError, ...
                raise ValueError(f"{KAFKA}: cannot reach Kafka at {self.bootstrap}: {exc}") from None
        return self._client

    def _partitions(self) -> list[int]:
        parts = self._meta().partitions_for_topic(self.topic)
        if not parts:
            raise ValueError(f"{KAFKA}: topic {self.topic!r} does not exist at {self.bootstrap}")
        return sorted(int(p) for p in parts)

    def _earliest_of(self, parts: list[int]) -> dict[int, int]:
        from kafka import TopicPartition

        missing = [p for p in parts if p not in self._earliest]
        if missing:
            res = self._meta().beginning_offsets([TopicPartition(self.topic, p) for p in missing])
            for tp, off in res.items():
                self._earliest[tp.partition] = int(off)
        return {p: self._earliest[p] for p in parts}

    def _end_offsets(self, parts: list[int]) -> dict[int, int]:
        from kafka import TopicPartition

        from skewlab.engine.io.kafka_io import end_offsets

        return end_offsets(self._meta(), [TopicPartition(self.topic, p) for p in parts], probe=self.probe,
                           timeout_s=min(self.timeout_ms, 5000) / 1000.0)

    # ---------------------------------------------------------------- driver
    def initialOffset(self) -> dict:
        parts = self._partitions()
        offs = self._earliest_of(parts) if self.starting == "earliest" else self._end_offsets(parts)
        return {str(p): int(offs[p]) for p in parts}

    def getDefaultReadLimit(self):
        return _default_limit(self.max_per_batch)

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = True
        self._target = None

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        if start is None:
            start = self._last if self._last is not None else self.initialOffset()
        parts = self._partitions()
        begin = {int(k): int(v) for k, v in start.items() if k != ROUTE_FIELD}
        new = [p for p in parts if p not in begin]
        if new:
            begin.update(self._earliest_of(new))
        if self._available_now:
            if self._target is None:
                self._target = self._end_offsets(sorted(begin))
            ends = dict(self._target)
        else:
            ends = self._end_offsets(sorted(begin))
        order = sorted(begin)
        backlog = [max(ends.get(p, begin[p]) - begin[p], 0) for p in order]
        rows = _max_rows(limit)
        budget = sum(backlog) if rows is None else rows
        if rows is None and not _is_read_all(limit):
            budget = min(budget, self.max_per_batch)
        take = fair_split(budget, backlog)
        out = _with_route(self.routes, {str(p): begin[p] + t for p, t in zip(order, take)}, start)
        self._last = out
        return out

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        busy = []
        for key, e in sorted(((k, v) for k, v in end.items() if k != ROUTE_FIELD), key=lambda kv: int(kv[0])):
            p = int(key)
            s = start.get(key)
            if s is None:
                s = self._earliest_of([p])[p]
            if int(e) > int(s):
                busy.append((p, int(s), int(e)))
        if not busy and _flushing(start, end):
            first = min((k for k in end if k != ROUTE_FIELD), key=int, default=None)
            if first is not None:
                busy = [(int(first), int(end[first]), int(end[first]))]  # lead partition, no tuples
        route = _snapshot_for(self.routes, end) if busy else None
        return [_KafkaPartition(self.cfg, p, s, e, route, lead=i == 0) for i, (p, s, e) in enumerate(busy)]

    def commit(self, end: dict) -> None:
        """Offsets live in Spark's checkpoint; nothing is committed to Kafka."""

    def stop(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            finally:
                self._client = None

    # ---------------------------------------------------------------- executor
    def read(self, partition: _KafkaPartition) -> Iterator[pa.RecordBatch]:
        from kafka import TopicPartition

        bootstrap, topic, timeout_ms = partition.cfg[0], partition.cfg[1], partition.cfg[4]
        consumer = _read_consumer(bootstrap, timeout_ms)
        tp = TopicPartition(topic, partition.kpart)
        consumer.assign([tp])
        try:
            yield from _routed(partition.route, self._read_range(consumer, tp, partition), partition.lead, self.routes)
        finally:
            consumer.unsubscribe()  # drop prefetched records; the worker's next task reassigns

    def _read_range(self, consumer, tp, partition: _KafkaPartition) -> Iterator[pa.RecordBatch]:
        topic = tp.topic
        timeout_ms = partition.cfg[4]
        key_from, max_key_bytes = partition.cfg[2], partition.cfg[3]
        key_path, value_path = partition.cfg[5], partition.cfg[6]
        start, end = partition.start, partition.end
        consumer.seek(tp, start)
        pos = start
        deadline = time.monotonic() + timeout_ms / 1000.0
        cols: dict[str, list] = {"key": [], "seq": [], "error": [], "raw": [], "ts": []}
        if value_path:
            cols["value"] = []
        while pos < end:
            got = consumer.poll(timeout_ms=200, max_records=min(end - pos, 50_000)).get(tp, [])
            progressed = False
            for rec in got:
                if rec.offset < pos:
                    continue
                if rec.offset >= end:
                    pos = end
                    break
                key, value, err, raw = parse_kafka_fields(rec.key, rec.value, key_from, max_key_bytes,
                                                          key_path, value_path)
                cols["key"].append(key)
                if value_path:
                    cols["value"].append(value)
                cols["seq"].append(rec.offset)
                cols["error"].append(err)
                cols["raw"].append(raw)
                cols["ts"].append(rec.timestamp)
                pos = rec.offset + 1
                progressed = True
            if pos < end:  # gaps (compaction, transaction markers) move the position, not records
                position = consumer.position(tp)
                if position is not None and position > pos:
                    pos = min(int(position), end)
                    progressed = True
            if progressed:
                deadline = time.monotonic() + timeout_ms / 1000.0
            elif time.monotonic() > deadline:
                raise RuntimeError(
                    f"{KAFKA}: {topic}[{partition.kpart}] stuck at offset {pos} of [{start}, {end}) "
                    f"after {timeout_ms} ms (records deleted or broker unreachable)"
                )
            if len(cols["key"]) >= 65_536 or (pos >= end and cols["key"]):
                yield self._batch(cols, partition.kpart)
                cols = {name: [] for name in cols}
        if cols["key"]:
            yield self._batch(cols, partition.kpart)

    @staticmethod
    def _batch(cols: dict[str, list], kpart: int) -> pa.RecordBatch:
        n = len(cols["key"])
        arrays = [
            pa.array(cols["key"], type=pa.string()),
            pa.array(np.full(n, kpart, dtype=np.int32)),
            pa.array(cols["seq"], type=pa.int64()),
            pa.array(cols["error"], type=pa.string()),
            pa.array(cols["raw"], type=pa.string()),
            pa.array(cols["ts"], type=pa.int64()),
        ]
        if "value" in cols:
            arrays.append(pa.array(cols["value"], type=pa.float64()))
        return pa.RecordBatch.from_arrays(arrays, schema=_arrow_schema(KAFKA, "value" in cols))
