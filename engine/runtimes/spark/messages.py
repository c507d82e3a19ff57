"""The driver↔executor messages of the Spark engine: declared record types, each with one codec.

Every message that is not a routed tuple or a per-key statistic travels as one encoded value:

* to the workers, as the raw bytes of a *message row*'s ``msg`` column (binary; the row's ``key`` is
  NULL, its ``worker`` the worker ``w`` it goes to, as a data row's: :data:`skewlab.engine.runtimes.
  spark.topology.ROUTED_SCHEMA`; a data row has ``msg`` NULL):
  :class:`ControlOrder` (the batch's migration orders of one worker), :class:`ImportOrder` (a reference to
  a state blob the worker imports), :class:`TouchedKeys` (in a split-key run: the keys an input
  partition routed elsewhere in the batch) and :class:`SourceSide` (one source's bookkeeping, which the
  worker passes through to the driver unchanged);
* to the driver, in the ``data`` column of the handler's output (:data:`skewlab.engine.runtimes.spark.
  operator.OUT_SCHEMA`): :class:`SourceSide`, :class:`ExportNotice` (a blob a worker wrote),
  :class:`WorkerSummary` and :class:`KeyCounts` (the per-key tuple counts of the batch as arrays; one
  of each per worker and batch).  :class:`KeyStats` is the driver's column-wise view of all the
  workers' :class:`KeyCounts`; :class:`BatchOutput`, the driver's view of all of a batch's messages.

**Codec.** One MessagePack array ``[type tag, version, {field: value}]`` per message; the fields are
the ones its class declares, each with its wire type (:func:`wire_fields`), nothing else: integers, floats, booleans,
text, ``[str]``, ``u64[]`` (a numpy ``uint64`` array as its raw little-endian bytes), ``{int: u64[]}``, the
dead-letter map and an :class:`~skewlab.engine.runtimes.spark.state_transfer.ExportRef` as a map of
its fields.  :func:`decode` refuses, with one line (:class:`MessageError`), bytes that are not a
message, an unknown tag, a version newer than this code reads, and missing, extra or mistyped fields.
One exception, said here: :attr:`SourceSide.source_state` is the grouping router's per-source state
(:meth:`skewlab.engine.algorithms.grouping.Router.source_state`: per-grouping objects — arrays,
estimators — with no serialisation of their own), carried as an opaque pickle the router's own code
produces and reads (:func:`SourceSide.router_state`); it never leaves the engine's own processes.
"""

from __future__ import annotations

import functools
import pickle
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable, ClassVar, Mapping, Sequence

import msgpack
import numpy as np
import pyarrow as pa

from skewlab.engine.runtimes.spark.state_transfer import ExportRef

__all__ = ["MESSAGES", "BatchOutput", "ControlOrder", "ExportNotice", "ImportOrder", "KeyCounts", "KeyStats", "MessageError",
           "SourceSide", "TouchedKeys", "WorkerSummary", "decode", "wire_fields"]


class MessageError(ValueError):
    """Bytes that are not a message this code reads (one line: what and why)."""


def _u64(value: Any) -> bytes:
    return np.ascontiguousarray(value, dtype="<u8").tobytes()


def _from_u64(data: Any) -> np.ndarray:
    if not isinstance(data, bytes) or len(data) % 8:
        raise TypeError("not a uint64 array")
    return np.frombuffer(data, dtype="<u8").astype(np.uint64)


def _check(kind: type | tuple[type, ...]) -> Callable[[Any], Any]:
    def read(value: Any) -> Any:
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise TypeError(f"not {getattr(kind, '__name__', kind)}")
        return value
    return read


def _opt_int(value: Any) -> int | None:
    return None if value is None else _check(int)(value)


def _exports(data: Any) -> dict[int, np.ndarray]:
    if not isinstance(data, dict):
        raise TypeError("not a map")
    return {_check(int)(t): _from_u64(ks) for t, ks in data.items()}


def _dead_letters(data: Any) -> dict[str, tuple[int, tuple[str, ...]]]:
    if not isinstance(data, dict):
        raise TypeError("not a map")
    out = {}
    for reason, entry in data.items():
        count, samples = entry
        out[_check(str)(reason)] = (_check(int)(count), tuple(_check(str)(x) for x in samples))
    return out


def _texts(data: Any) -> list[str]:
    if not isinstance(data, list):
        raise TypeError("not a list")
    return [_check(str)(x) for x in data]


def _ref(data: Any) -> ExportRef:
    if not isinstance(data, dict):
        raise TypeError("not a map")
    return ExportRef(**data)


#: wire type → (to the wire, from the wire: raises TypeError/ValueError on a mistyped value)
_WIRE: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "int": (int, _check(int)),
    "int?": (lambda v: None if v is None else int(v), _opt_int),
    "float": (float, _check((float, int))),
    "bool": (bool, _check(bool)),
    "bytes": (bytes, _check(bytes)),
    "[str]": (lambda v: [str(x) for x in v], _texts),
    "u64[]": (_u64, _from_u64),
    "{int: u64[]}": (lambda m: {int(t): _u64(ks) for t, ks in m.items()}, _exports),
    "{str: (int, [str])}": (lambda m: {str(r): [int(c), [str(x) for x in s]] for r, (c, s) in m.items()}, _dead_letters),
    "ExportRef": (lambda r: {f.name: getattr(r, f.name) for f in fields(ExportRef)}, _ref),
}


def _field(wire: str, default: Any = MISSING, factory: Any = MISSING, since: int = 1) -> Any:
    """A message field of wire type ``wire`` (a key of :data:`_WIRE`), added in message version
    ``since`` (a message of an older version gets its default)."""
    if wire not in _WIRE:
        raise TypeError(f"unknown wire type {wire!r}")
    return field(default=default, default_factory=factory, metadata={"wire": wire, "since": since})


def _added_since(cls: type, version: int) -> dict[str, Any]:
    """The fields of message class ``cls`` added after ``version``, with their defaults."""
    return {f.name: f.default_factory() if f.default_factory is not MISSING else f.default
            for f in fields(cls) if f.metadata["since"] > version}


@functools.cache
def wire_fields(cls: type) -> dict[str, str]:
    """Field name → wire type of a message class, in declaration order."""
    return {f.name: f.metadata["wire"] for f in fields(cls)}


class _Message:
    """Base of the declared messages: ``TAG`` (unique), ``VERSION`` (raised when the fields change);
    every field is declared with its wire type (:func:`_field`, :func:`wire_fields`)."""

    TAG: ClassVar[str]
    VERSION: ClassVar[int]

    def encode(self) -> bytes:
        """The message's bytes: ``[TAG, VERSION, {field: wire value}]`` in MessagePack."""
        body = {name: _WIRE[wire][0](getattr(self, name)) for name, wire in wire_fields(type(self)).items()}
        return msgpack.packb([self.TAG, self.VERSION, body], use_bin_type=True)


@dataclass(frozen=True)
class ControlOrder(_Message):
    """The orders of one worker for ``batch``: ``exports`` (target worker → fingerprints of the keys
    whose state it sends there), ``expect`` (fingerprints of the keys whose state arrives in the next
    batch: their tuples are held until then) and ``split`` (a run with split keys: results of keys
    held by several workers go through the merge stage, :mod:`skewlab.engine.runtimes.spark.share_merge`).
    ``merge_all`` (with ``split``): every key of the batch goes through the merge stage (the driver
    does not know which keys are held away from home, see
    :attr:`skewlab.engine.runtimes.spark.topology.RoutingSnapshot.split_keys`); without it only the
    keys named by the batch's :class:`TouchedKeys` do, and the worker writes the others' results
    itself.  ``workers``: the number of active workers n of the batch, the ``home`` of a key being
    ``fp mod n`` (:func:`skewlab.engine.algorithms.keys.home`); 0: not known.  A worker without a
    control order in a batch gets no tuples."""

    TAG: ClassVar[str] = "control"
    VERSION: ClassVar[int] = 2

    batch: int = _field("int")
    exports: Mapping[int, np.ndarray] = _field("{int: u64[]}", factory=dict)
    expect: np.ndarray = _field("u64[]", factory=lambda: np.zeros(0, np.uint64))
    split: bool = _field("bool", False)
    merge_all: bool = _field("bool", True, since=2)
    workers: int = _field("int", 0, since=2)


@dataclass(frozen=True)
class ImportOrder(_Message):
    """A state blob the worker reads in this batch (written by ``ref.source`` in the previous batch)."""

    TAG: ClassVar[str] = "import"
    VERSION: ClassVar[int] = 1

    ref: ExportRef = _field("ExportRef")


@dataclass(frozen=True)
class TouchedKeys(_Message):
    """In a run with split keys (:attr:`ControlOrder.split`): fingerprints of keys one input
    partition routed in ``batch`` (:func:`skewlab.engine.runtimes.spark.topology.touch_rows`).  With
    :attr:`ControlOrder.merge_all`, the keys it routed to workers other than the one this message
    goes to; without, the keys of the partition whose result is merged (routed away from their home,
    or held away from home: :attr:`skewlab.engine.runtimes.spark.topology.RoutingSnapshot.split_keys`),
    the same set for every worker.  The worker sends its share of a key it holds only when the key is
    in one of these (:func:`skewlab.engine.runtimes.spark.operator.merge_stage_rows`): the merge
    stage writes only the keys that had tuples in the batch."""

    TAG: ClassVar[str] = "touched"
    VERSION: ClassVar[int] = 1

    batch: int = _field("int")
    keys: np.ndarray = _field("u64[]", factory=lambda: np.zeros(0, np.uint64))


@dataclass(frozen=True)
class SourceSide(_Message):
    """One source's bookkeeping of a batch, from the task that routed it: ``rows`` read, ``consumed``
    (max ``seq`` + 1, -1 without positions), ``first_seq``, ``route_seconds``, ``dead_letters``
    (reason → (count, samples)), ``route_batch`` (the routing snapshot's batch: the engine refuses a
    batch routed with another batch's snapshot) and ``source_state`` (the router's per-source state,
    pickled: see the module docstring)."""

    TAG: ClassVar[str] = "source-side"
    VERSION: ClassVar[int] = 1

    source: int = _field("int")
    route_batch: int = _field("int")
    rows: int = _field("int", 0)
    consumed: int = _field("int", -1)
    first_seq: int | None = _field("int?", None)
    route_seconds: float = _field("float", 0.0)
    dead_letters: Mapping[str, tuple[int, tuple[str, ...]]] = _field("{str: (int, [str])}", factory=dict)
    source_state: bytes = _field("bytes", b"")

    @staticmethod
    def pack_router_state(state: Mapping[str, Any]) -> bytes:
        """``Router.source_state(s)`` as the bytes of :attr:`source_state`."""
        return pickle.dumps(dict(state), protocol=pickle.HIGHEST_PROTOCOL)

    def router_state(self) -> dict[str, Any]:
        """The router's per-source state (for ``Router.set_source_state``); empty if none was sent."""
        return pickle.loads(self.source_state) if self.source_state else {}


@dataclass(frozen=True)
class ExportNotice(_Message):
    """A worker wrote the state of ``ref.keys`` keys for worker ``ref.target`` (the blob's reference,
    never its bytes: :mod:`skewlab.engine.runtimes.spark.state_transfer`)."""

    TAG: ClassVar[str] = "export"
    VERSION: ClassVar[int] = 1

    ref: ExportRef = _field("ExportRef")


@dataclass(frozen=True)
class WorkerSummary(_Message):
    """One worker after a batch (``batch`` ``None``: it ran without a control order): ``keys`` and
    ``state_bytes`` of its state, tuples ``held`` for state in flight, what it exported and imported,
    result rows written, rows sent to the merge stage (``shares``), tuples ``applied`` and the
    handler's ``seconds``; ``off_home``: the fingerprints of the keys in its state whose home
    (``fp mod home_n``) is another worker (``home_n`` 0: not computed, the batch had no ``workers``)."""

    TAG: ClassVar[str] = "summary"
    VERSION: ClassVar[int] = 2

    batch: int | None = _field("int?")
    keys: int = _field("int", 0)
    state_bytes: int = _field("int", 0)
    held: int = _field("int", 0)
    export_bytes: int = _field("int", 0)
    exported_keys: int = _field("int", 0)
    imported_keys: int = _field("int", 0)
    results: int = _field("int", 0)
    shares: int = _field("int", 0)
    applied: int = _field("int", 0)
    seconds: float = _field("float", 0.0)
    off_home: np.ndarray = _field("u64[]", factory=lambda: np.zeros(0, np.uint64), since=2)
    home_n: int = _field("int", 0, since=2)


@dataclass(frozen=True)
class KeyCounts(_Message):
    """One worker's per-key statistics of a batch, as arrays in one message: ``fps`` (the key
    fingerprints), ``tuples`` (each key's tuples in the batch) and ``names``: the names of the first
    ``len(names)`` keys (the worker's most frequent keys of the batch, the dashboard's hot keys; the
    others travel by fingerprint only).  One message instead of a row per key: every output row of
    ``applyInPandasWithState`` costs a pandas row, PySpark's padding of its state column to as many
    rows, an Arrow conversion and a JVM row (docs/results/engine.md, issue 36's attribution)."""

    TAG: ClassVar[str] = "key-counts"
    VERSION: ClassVar[int] = 1

    fps: np.ndarray = _field("u64[]", factory=lambda: np.zeros(0, np.uint64))
    tuples: np.ndarray = _field("u64[]", factory=lambda: np.zeros(0, np.uint64))
    names: list[str] = _field("[str]", factory=list)

    def __post_init__(self) -> None:
        if len(self.fps) != len(self.tuples) or len(self.names) > len(self.fps):
            raise MessageError(f"key-counts message: {len(self.fps)} fingerprints, {len(self.tuples)} counts, "
                               f"{len(self.names)} names")


#: every declared message by its tag
MESSAGES: dict[str, type[_Message]] = {m.TAG: m for m in (ControlOrder, ImportOrder, TouchedKeys, SourceSide, ExportNotice,
                                                           WorkerSummary, KeyCounts)}


def decode(data: bytes, expect: type[_Message] | tuple[type[_Message], ...] | None = None) -> Any:
    """The message ``data`` holds (:meth:`_Message.encode`), optionally only of the types ``expect``.
    Raises :class:`MessageError` for anything else."""
    try:
        tag, version, body = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except (ValueError, TypeError, msgpack.UnpackException):
        raise MessageError(f"not a skewlab message ({len(data)} bytes starting {bytes(data[:8])!r}): "
                           "written by another skewlab version?") from None
    cls = MESSAGES.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise MessageError(f"unknown message type {tag!r} (this skewlab reads {', '.join(sorted(MESSAGES))})")
    if not isinstance(version, int) or version > cls.VERSION or version < 1:
        raise MessageError(f"{tag} message version {version!r}: this skewlab reads version {cls.VERSION} "
                           "(driver and executors run different skewlab versions?)")
    if expect is not None and not issubclass(cls, expect):
        names = ", ".join(c.TAG for c in (expect if isinstance(expect, tuple) else (expect,)))
        raise MessageError(f"a {tag} message where {names} was expected")
    declared = wire_fields(cls)
    sent = body
    if isinstance(body, dict) and version < cls.VERSION:  # the fields added since: their defaults
        body = {**{n: _WIRE[declared[n]][0](v) for n, v in _added_since(cls, version).items()}, **body}
    if not isinstance(body, dict) or set(body) != set(declared):
        got = sorted(sent) if isinstance(sent, dict) else type(sent).__name__
        raise MessageError(f"{tag} message v{version} has fields {got}, expected {sorted(declared)}")
    values = {}
    for name, wire in declared.items():
        try:
            values[name] = _WIRE[wire][1](body[name])
        except (TypeError, ValueError) as exc:
            raise MessageError(f"{tag} message: field {name!r} is not {wire} ({exc})") from None
    return cls(**values)


@dataclass(frozen=True)
class KeyStats:
    """All workers' :class:`KeyCounts` of a batch, column-wise: per (worker, key fingerprint) the
    key's ``tuples`` in the batch, and ``names`` (fingerprint → name) of the keys a worker reported by
    name."""

    workers: np.ndarray
    fps: np.ndarray
    tuples: np.ndarray
    names: Mapping[int, str]

    @classmethod
    def of(cls, counts: Sequence[tuple[int, KeyCounts]]) -> "KeyStats":
        """From the workers' :class:`KeyCounts` (``(worker, message)`` pairs)."""
        items = list(counts)
        names: dict[int, str] = {}
        for _, c in items:
            names.update(zip(c.fps[:len(c.names)].tolist(), c.names))
        if not items:
            return cls(np.zeros(0, np.int64), np.zeros(0, np.uint64), np.zeros(0, np.int64), names)
        return cls(np.concatenate([np.full(len(c.fps), w, np.int64) for w, c in items]),
                   np.concatenate([c.fps for _, c in items]).astype(np.uint64, copy=False),
                   np.concatenate([c.tuples for _, c in items]).astype(np.int64), names)


@dataclass(frozen=True)
class BatchOutput:
    """One batch's collected operator output, as
    :func:`skewlab.engine.runtimes.spark.operator.unpack_output` gives it: ``workers``/``fps``/``counts``
    (one entry per (worker, key fingerprint): the key's tuples in the batch), ``names`` (fingerprint →
    name of the keys reported by name), ``states`` (source → its :class:`SourceSide`: offsets, source
    state, dead letters, the batch it was routed for), ``dead_letters`` (reason → [count, samples]),
    ``exports`` (references to the blobs the workers exported) and ``summaries`` (worker → its
    :class:`WorkerSummary`: keys, held tuples and bytes of its state)."""

    workers: np.ndarray
    fps: np.ndarray
    counts: np.ndarray
    names: Mapping[int, str] = field(default_factory=dict)
    states: Mapping[int, SourceSide] = field(default_factory=dict)
    dead_letters: Mapping[str, list] = field(default_factory=dict)
    exports: tuple[ExportRef, ...] = ()
    summaries: Mapping[int, WorkerSummary] = field(default_factory=dict)
