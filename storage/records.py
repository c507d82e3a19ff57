"""One typed record per interval, from the controller to storage: :class:`IntervalRecord`.

The engine (Spark, :mod:`skewlab.engine.runtimes.spark.engine`) and the local runtime (``skewlab simulate --db``,
:mod:`skewlab.engine.runtimes.local`) build one :class:`IntervalRecord` per closed interval from the
controller's output; :meth:`skewlab.storage.store.Store.record_interval` writes it in one transaction.
Records are plain dataclasses (picklable: the engine keeps unwritten ones in its checkpoint).

Values are kept as given (numpy scalars, NaN included); the store cleans them on the way in
(:mod:`skewlab.storage.values`: NaN / ±inf → NULL, text bounded).  A field left ``None`` is stored as NULL,
except where a default is stated.  :meth:`IntervalRecord.from_parts` builds a record from loose
mappings (lists of mappings, ``{name: mapping}``, or columns of equal length), naming any unknown
field — for tests, benchmarks and tools that hold rows as dicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping, Sequence

from skewlab.storage.models import INTERVAL_METRIC_COLUMNS
from skewlab.storage.values import as_int, normalise_records

__all__ = [
    "DeadLetterRow",
    "EventRow",
    "HotKeyRow",
    "IntervalRecord",
    "MigrationRow",
    "RoutingRow",
    "ShadowRow",
    "WorkerRow",
]


@dataclass(frozen=True)
class WorkerRow:
    """One worker's part of an interval (table ``worker_metrics``)."""

    worker: int | None = None  #: worker id; None: its position in :attr:`IntervalRecord.workers`
    tuples: int | None = None  #: tuples the worker processed in the interval (None: 0)
    cost: float | None = None  #: its load L(d) under the cost model
    distinct_keys: int | None = None  #: distinct keys it saw in the interval (None: 0)
    state_size: float | None = None  #: the cost model's state S it holds (window tuples)
    processing_seconds: float | None = None  #: its task's run time (Spark task metrics), seconds
    state_bytes: int | None = None  #: serialized size of its keyed state, bytes


@dataclass(frozen=True)
class HotKeyRow:
    """One of the interval's top-k keys (table ``hot_keys``)."""

    rank: int | None = None  #: 0 = hottest; None: its position in :attr:`IntervalRecord.hot_keys`
    key: Any = None  #: the key's text (bounded when stored)
    fingerprint: int | str | None = None  #: uint64 fingerprint (int or hex text), stored as 16 hex digits
    count: int | None = None  #: tuples of the key in the interval (None: 0)
    share: float | None = None  #: count / tuples of the interval
    workers: Sequence[int] | None = None  #: the workers the key was routed to


@dataclass(frozen=True)
class ShadowRow:
    """What another algorithm would have done on the same interval (table ``shadow_results``)."""

    algorithm: str = ""
    imbalance: float | None = None
    replication: float | None = None  #: workers per key
    migration_cost: float | None = None  #: state moved / total state
    theta_max_observed: float | None = None
    routing_table_size: int | None = None  #: entries
    plan_seconds: float | None = None
    feasible: bool | None = None
    note: str = ""


@dataclass(frozen=True)
class MigrationRow:
    """One state migration that completed in the interval (table ``migration_events``)."""

    seq: int | None = None  #: None: its position in :attr:`IntervalRecord.migrations`
    algorithm: str = ""  #: the algorithm that planned it
    keys_moved: int | None = None  #: None: 0
    state_moved: float | None = None  #: state S moved (window tuples)
    #: state moved / total state of the interval it belongs to (``planned_interval``), so that the rows of
    #: an interval sum to its ``migration_cost`` (schema 4; older rows: / the total state when it ran)
    migration_cost: float | None = None
    pause_ms: float | None = None  #: milliseconds the moved keys were held back
    detail: Mapping[str, Any] | None = None  #: JSON object
    wall_time: float | None = None  #: None: the interval's wall time
    bytes_moved: int | None = None
    pause_batches: int | None = None
    #: the interval the migration belongs to (whose plan or command it carried out; schema 4); None: as
    #: ``detail.planned_interval`` says, else the interval it is recorded in (on reading)
    planned_interval: int | None = None


@dataclass(frozen=True)
class RoutingRow:
    """Size of the routing table at the end of the interval (table ``routing_sizes``)."""

    entries: int | None = None  #: None: 0
    memory_bytes: int | None = None
    amax: int | None = None  #: the table's capacity bound, when the algorithm has one


@dataclass(frozen=True)
class EventRow:
    """An event recorded with the interval (table ``events``): rebalance, applied command, …"""

    kind: str = ""  #: ``[a-z][a-z0-9_.-]{0,63}``
    detail: Mapping[str, Any] | None = None  #: JSON object
    command_id: int | None = None  #: the operator command it applies
    wall_time: float | None = None  #: None: the interval's wall time
    interval: int | None = None  #: the interval it belongs to when not this one (a command in effect from the next)


@dataclass(frozen=True)
class DeadLetterRow:
    """Malformed input records of the interval for one reason (table ``dead_letters``, accumulated)."""

    reason: str = ""
    count: int | None = None  #: None: the number of samples
    samples: Sequence[Any] = ()  #: the most recent ones are kept, bounded


@dataclass
class IntervalRecord:
    """Everything one (run, batch) writes: the run metrics of the interval and its child rows.

    The metric fields are the columns :data:`skewlab.storage.models.INTERVAL_METRIC_COLUMNS`; ``algorithm``
    None means the run's current algorithm; ``wall_time`` None means the time of writing.  When
    ``routing`` is None and ``routing_table_size`` is set, a routing row with those entries is written,
    and ``routing_table_size`` None takes ``routing.entries``.
    """

    batch_id: int
    interval: int
    tuples: int | None = None  #: tuples of the interval (None: 0)
    algorithm: str | None = None
    n_workers: int | None = None
    imbalance: float | None = None  #: max load / mean load − 1 (Nasir et al.'s λ)
    theta_max_observed: float | None = None
    seeds_imbalance: float | None = None
    load_variance: float | None = None
    load_stddev: float | None = None
    replication: float | None = None  #: workers per key
    routing_table_size: int | None = None  #: entries
    migration_cost: float | None = None  #: state moved / total state
    plan_seconds: float | None = None
    tuples_per_second: float | None = None  #: routing speed
    throughput: float | None = None  #: tuples / seconds of the whole batch
    batch_latency_ms: float | None = None
    feasible: bool | None = None  #: the rebalancing plan's verdict, when one was made
    note: str = ""
    wall_time: float | None = None  #: seconds since the epoch
    extra: Mapping[str, Any] | None = None  #: JSON object
    #: the parameters of ``algorithm`` in force for this interval (JSON object; None: not recorded)
    params: Mapping[str, Any] | None = None
    workers: list[WorkerRow] = field(default_factory=list)
    hot_keys: list[HotKeyRow] = field(default_factory=list)
    shadow: list[ShadowRow] = field(default_factory=list)
    migrations: list[MigrationRow] = field(default_factory=list)
    routing: RoutingRow | None = None
    events: list[EventRow] = field(default_factory=list)
    dead_letters: list[DeadLetterRow] = field(default_factory=list)

    def metrics(self) -> dict[str, Any]:
        """The metric fields by column name (:data:`skewlab.storage.models.INTERVAL_METRIC_COLUMNS`)."""
        return {name: getattr(self, name) for name in INTERVAL_METRIC_COLUMNS}

    @classmethod
    def from_parts(
        cls,
        batch_id: int,
        interval: int,
        metrics: Mapping[str, Any] | None = None,
        *,
        workers: Any = None,
        hot_keys: Any = None,
        shadow: Any = None,
        migrations: Any = None,
        routing: Any = None,
        events: Any = None,
        dead_letters: Any = None,
        extra: Mapping[str, Any] | None = None,
        wall_time: float | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> "IntervalRecord":
        """A record from loose mappings; ``ValueError`` names any unknown field.

        ``metrics``: keys from :data:`~skewlab.storage.models.INTERVAL_METRIC_COLUMNS` (``wall_time``,
        ``interval``, ``batch_id`` may be repeated there if equal to the arguments).  ``workers``,
        ``hot_keys``, ``migrations``, ``events``: a list of mappings or a mapping of equal-length
        columns.  ``shadow``: ``{algorithm: mapping}`` or a list of mappings.  ``routing``: a mapping
        or an int (entries).  ``dead_letters``: ``{reason: count}``, ``{reason: {count, samples}}`` or
        a list of ``reason, count, samples``.
        """
        batch_id_i, interval_i = as_int(batch_id), as_int(interval)
        if batch_id_i is None or interval_i is None:
            raise ValueError("batch_id and interval are required integers")
        metrics = dict(metrics or {})
        for key, expected in (("batch_id", batch_id_i), ("interval", interval_i)):
            if key in metrics and as_int(metrics.pop(key)) != expected:
                raise ValueError(f"metrics[{key!r}] differs from the {key} argument")
        if "wall_time" in metrics:
            repeated = metrics.pop("wall_time")
            wall_time = wall_time if wall_time is not None else repeated
        unknown = set(metrics) - set(INTERVAL_METRIC_COLUMNS)
        if unknown:
            raise ValueError(
                f"unknown interval metric(s) {sorted(map(str, unknown))}; valid: {', '.join(INTERVAL_METRIC_COLUMNS)}"
            )
        if metrics.get("note") is None:
            metrics.pop("note", None)
        return cls(
            batch_id=batch_id_i,
            interval=interval_i,
            **metrics,
            wall_time=wall_time,
            extra=extra,
            params=params,
            workers=_rows(WorkerRow, workers, "workers"),
            hot_keys=_rows(HotKeyRow, hot_keys, "hot_keys"),
            shadow=_rows(ShadowRow, shadow, "shadow", key_field="algorithm"),
            migrations=_rows(MigrationRow, migrations, "migrations"),
            routing=_routing(routing),
            events=_rows(EventRow, events, "events"),
            dead_letters=_dead_letters(dead_letters),
        )


def _field_names(row_type: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(row_type))


def _rows(row_type: type, obj: Any, what: str, key_field: str | None = None) -> list[Any]:
    """Typed rows from typed rows or loose mappings (:func:`skewlab.storage.values.normalise_records`)."""
    if isinstance(obj, (list, tuple)) and all(isinstance(item, row_type) for item in obj):
        return list(obj)
    return [row_type(**item) for item in normalise_records(obj, _field_names(row_type), what, key_field)]


def _routing(obj: Any) -> RoutingRow | None:
    if obj is None or isinstance(obj, RoutingRow):
        return obj
    if not isinstance(obj, Mapping):
        return RoutingRow(entries=obj)
    bad = set(obj) - set(_field_names(RoutingRow))
    if bad:
        raise ValueError(f"routing: unknown field(s) {sorted(bad)}; valid: {', '.join(_field_names(RoutingRow))}")
    return RoutingRow(**obj)


def _dead_letters(obj: Any) -> list[DeadLetterRow]:
    if obj is None:
        return []
    if isinstance(obj, Mapping):
        items = [{"reason": reason, **v} if isinstance(v, Mapping) else {"reason": reason, "count": v}
                 for reason, v in obj.items()]
    else:
        items = list(obj)
    return _rows(DeadLetterRow, items, "dead_letters")
