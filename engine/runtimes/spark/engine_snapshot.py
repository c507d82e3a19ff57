"""The engine's snapshot after a batch, declared once: :class:`EngineSnapshot` and its codec.

The snapshot is the driver's state (:class:`~skewlab.engine.runtimes.spark.driver_step.DriverSnapshot`:
every field except those marked ``persist=False``) plus what the engine keeps beside the step: the
stream's identifying settings, the result sink and its start offsets, and the metric intervals not
yet written to the database.  :meth:`EngineSnapshot.encode` gives the payload
:class:`~skewlab.engine.io.checkpoint.SnapshotStore` pickles to ``engine-<batch>.pkl``; the batch is
the file's name, not a field.

Format :data:`FORMAT` = 2: a dict with ``format: 2``, the driver's persisted fields under their own
names, and ``stream``, ``sink``, ``sink_start``, ``pending``.  Format 1, the unversioned dict written
by engines before the format was declared, has the same keys without ``format`` (fields added later
are missing in older ones and take their defaults): it is read as is.  A snapshot of a later format
is refused with one line that names both versions; so are snapshots of engines that kept the state
or key names in the driver or carried migrated state through it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from skewlab.engine.algorithms.keys import FingerprintVocabulary
from skewlab.engine.control.controller import compose_orders
from skewlab.engine.runtimes.spark.driver_step import DriverSnapshot, InFlightMigration
from skewlab.engine.runtimes.spark.state_transfer import ExportRef

__all__ = ["FORMAT", "EngineSnapshot", "SnapshotRefused"]

#: the snapshot format this engine writes; it reads every format up to this one
FORMAT = 2

#: the driver's fields a snapshot keeps (the others live in memory only)
PERSISTED = tuple(f.name for f in fields(DriverSnapshot) if f.metadata.get("persist", True) and f.name != "last_batch")

#: how a field is written (plain lists and dicts in the pickle) and read back into the dataclass;
#: migrations in flight as the dicts of :meth:`InFlightMigration.to_dict`
_ENCODE = {
    "applied_commands": list, "consumed": dict, "worker_keys": dict, "worker_held": dict, "worker_bytes": dict,
    "migrating": lambda ms: [m.to_dict() for m in ms],
    "next_imports": lambda imports: {w: list(refs) for w, refs in imports.items()},
    "latencies": lambda xs: list(xs[-20:]),
}
_DECODE = {
    "applied_commands": tuple, "consumed": dict, "worker_keys": dict, "worker_held": dict, "worker_bytes": dict,
    "migrating": lambda ms: tuple(InFlightMigration.of(m) for m in ms),
    "next_imports": lambda imports: {int(w): tuple(refs) for w, refs in imports.items()},
    "latencies": tuple, "partitions": int, "shares_split": bool,
}
#: defaults of fields a format-1 snapshot may lack (``migrations_seen``: the controller's count)
_DEFAULTS = {"paused": False, "applied_commands": [], "consumed": {}, "dead_total": 0, "worker_keys": {},
             "worker_held": {}, "worker_bytes": {}, "migrating": [], "next_imports": {}, "shares_split": False,
             "latencies": [], "interim": None}


class SnapshotRefused(ValueError):
    """This engine cannot resume from the snapshot; the message is one line (what wrote it)."""


@dataclass(frozen=True)
class EngineSnapshot:
    """What ``engine-<batch>.pkl`` holds: the driver's state after ``driver.last_batch`` and the engine's."""

    driver: DriverSnapshot
    #: the settings that identify the run's stream (:data:`skewlab.engine.io.checkpoint.STREAM_FIELDS`)
    stream: Mapping[str, Any] = field(default_factory=dict)
    #: the result sink's URL and, for Kafka, each partition's offset when the run was created
    sink: str = ""
    sink_start: Any = None
    #: metric intervals (:class:`~skewlab.engine.io.metrics_sink.PendingInterval`) not yet in the database
    pending: tuple[Any, ...] = ()

    def encode(self) -> dict[str, Any]:
        """The payload to pickle (format :data:`FORMAT`)."""
        out: dict[str, Any] = {"format": FORMAT}
        for name in PERSISTED:
            value = getattr(self.driver, name)
            out[name] = _ENCODE.get(name, _same)(value)
        out.update(stream=dict(self.stream), sink=self.sink, sink_start=self.sink_start, pending=list(self.pending))
        return out

    @staticmethod
    def decode(payload: Mapping[str, Any], batch: int) -> "EngineSnapshot":
        """The snapshot of ``batch`` from a payload of any format up to :data:`FORMAT`;
        :class:`SnapshotRefused` for one this engine cannot resume from."""
        version = payload.get("format", 1)
        if not isinstance(version, int) or version > FORMAT:
            raise SnapshotRefused(f"was written by a later engine (snapshot format {version}; this engine reads "
                                  f"formats up to {FORMAT})")
        if payload.get("partitions") is None:
            raise SnapshotRefused("was written by an engine that kept the state in the driver")
        if not isinstance(payload["controller"].vocab, FingerprintVocabulary):
            raise SnapshotRefused("was written by an engine version whose driver kept key names")
        if any(not isinstance(r, ExportRef) for refs in payload.get("next_imports", {}).values() for r in refs):
            raise SnapshotRefused("was written by an engine version that carried migrated state through the driver")
        values: dict[str, Any] = {}
        for name in PERSISTED:
            if name in payload:
                raw = payload[name]
            elif name == "migrations_seen":
                raw = len(payload["controller"].migrations)
            elif name == "next_orders":
                raw = compose_orders([])
            else:
                raw = _DEFAULTS[name]
            values[name] = _DECODE.get(name, _same)(raw)
        return EngineSnapshot(DriverSnapshot(last_batch=int(batch), **values), stream=payload.get("stream") or {},
                              sink=payload["sink"], sink_start=payload.get("sink_start"),
                              pending=tuple(payload.get("pending", ())))


def _same(value: Any) -> Any:
    return value
