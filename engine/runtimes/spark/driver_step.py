"""The driver's per-micro-batch logic as one pure step: ``(snapshot, batch output) → (snapshot', decisions)``.

:class:`SparkEngine <skewlab.engine.runtimes.spark.engine.SparkEngine>` runs the query and does the
I/O around this step: it collects the batch's operator output
(:class:`~skewlab.engine.runtimes.spark.messages.BatchOutput`), reads the pending operator commands
and Spark's task times, calls :func:`step`, then carries out the :class:`Decisions` — publishes the
routing snapshot of batch ``b + 1``, queues the interval record and the command marks for the
database, saves the new :class:`DriverSnapshot` and prunes the migration files.  The step itself
touches no file, database, clock or Spark: every input is an argument, every effect is in its
result, and the input snapshot is left unchanged (the controller and shadows it mutates are copied
first, together, so that they keep sharing one key vocabulary).

Per batch ``b`` (issue 24, item 6; the order of :mod:`skewlab.engine.runtimes.spark.engine`'s steps):

1. ``b <= snapshot.last_batch``: a batch the snapshot already applied, replayed by Spark after a
   restart — nothing is applied (:attr:`Decisions.already_applied`);
2. the sources' bookkeeping (offsets consumed, source state of the grouping's router), dead letters;
3. the controller closes the interval from the per-(worker, key fingerprint) counts (rebalancing
   plans, move orders); the workers' summaries (keys, held tuples, state bytes);
4. shadow what-if of the other groupings and the hot keys;
5. migrations followed from their export batch to their import batch (:func:`track_migrations`);
6. the pending operator commands, effective from ``b + 1`` (:func:`apply_commands`);
7. the routing snapshot of ``b + 1``: the grouping's router, every worker's control payload and the
   references to the state blobs exported in ``b`` (:func:`next_route`).

**The grouping asked for joins when its kernels are ready.**  A new run whose grouping's numba
kernels are not compiled yet when Spark is up (a cold cache after a plain ``pip install``) starts
routing by :data:`INTERIM_GROUPING` (its kernels compile in seconds) instead of waiting for them;
:attr:`DriverSnapshot.interim` keeps the grouping asked for, and the first step whose
``kernels_ready`` names it switches to it (step 6, through :func:`apply_commands`, like an
operator's ``set-algorithm`` but without a command row: event ``algorithm`` with ``reason``
:data:`KERNELS_READY`).  An operator's own switch in between supersedes it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

import numpy as np

from skewlab.engine.control.commands import apply_command
from skewlab.engine.control.controller import Controller, compose_orders
from skewlab.engine.control.shadow import ShadowEvaluator
from skewlab.engine.io.interval_record import interval_record, rebalance_events, worker_rows
from skewlab.engine.runtimes.spark.state_transfer import ExportRef
from skewlab.engine.runtimes.spark.messages import BatchOutput, WorkerSummary
from skewlab.engine.runtimes.spark.topology import RoutingSnapshot, control_payloads
from skewlab.storage.records import IntervalRecord

__all__ = ["CommandMark", "Decisions", "DriverSettings", "DriverSnapshot", "InFlightMigration", "RouteDecision",
           "INTERIM_GROUPING", "KERNELS_READY", "StepInput", "already_applied", "apply_commands", "next_route", "step",
           "track_migrations"]

Orders = tuple[np.ndarray, np.ndarray, np.ndarray]

#: the driver forgets the names of hot keys beyond this many (a long run's drifting heads)
MAX_KEY_NAMES = 100_000

#: what a new run routes by while the kernels of the grouping it asked for compile (module docstring)
INTERIM_GROUPING = "hash"
#: the ``reason`` of the switch to that grouping when its kernels are ready
KERNELS_READY = "its routing kernels are compiled"


@dataclass(frozen=True)
class InFlightMigration:
    """A migration whose state is in flight (:func:`track_migrations`): the moves the controller
    ordered (``events``: :meth:`MigrationEvent.to_dict <skewlab.engine.control.controller.MigrationEvent>`
    of each, ``interval_total`` set when their interval closes), published for ``export_batch``, with
    the median latency of the batches before it (``latency_before_ms``) and the planning batch's
    (``latency_plan_ms``).  Set in the export batch: ``bytes_moved`` (the export blobs' bytes), that
    batch's latency (``latency_export_ms``) and its wall-clock end (``export_end``); ``None`` until
    then."""

    export_batch: int
    events: tuple[Mapping[str, Any], ...] = ()
    latency_before_ms: float | None = None
    latency_plan_ms: float | None = None
    bytes_moved: int | None = None
    latency_export_ms: float | None = None
    export_end: float | None = None

    #: the fields a snapshot's dict leaves out while they are ``None``
    _OPTIONAL = ("latency_plan_ms", "bytes_moved", "latency_export_ms", "export_end")

    def to_dict(self) -> dict[str, Any]:
        """The dict the engine snapshot stores: ``export_batch``, ``events`` (a list),
        ``latency_before_ms``, and each of the fields set in the planning and export batches once it
        is set."""
        out: dict[str, Any] = {"export_batch": self.export_batch, "events": [dict(e) for e in self.events],
                               "latency_before_ms": self.latency_before_ms}
        out.update((name, getattr(self, name)) for name in self._OPTIONAL if getattr(self, name) is not None)
        return out

    @classmethod
    def of(cls, stored: Mapping[str, Any]) -> "InFlightMigration":
        """From a snapshot's dict (:meth:`to_dict`; a missing optional field is ``None``)."""
        return cls(**{**stored, "events": tuple(dict(e) for e in stored.get("events", ()))})


@dataclass(frozen=True)
class StepInput:
    """Everything the step reads besides the snapshot: the batch, its output and what the engine
    measured or read around it.  ``started``/``clock``: the batch's start on ``clock`` (seconds; the
    engine's ``time.perf_counter``) — the step reads the clock for the batch's latency after its own
    statistics, as the engine did; ``wall``: the wall-clock time (``time.time``) of the batch's end,
    for the pause of a migration; ``commands``: the pending operator commands (``None``: the
    database could not be read — none this batch); ``task_seconds``: Spark's run time of each
    worker's task; ``kernels_ready``: the groupings whose routing kernels are compiled (``None``:
    all): the waiting shadows among them join, and so does an interim run's grouping;
    ``backpressure``: consumption is paused because the metrics database is down (pause/resume
    commands are then checked against a run that is not paused)."""

    batch_id: int
    output: BatchOutput
    started: float = 0.0
    clock: Callable[[], float] = field(default=lambda: 0.0, compare=False)
    wall: float = 0.0
    commands: tuple[Mapping[str, Any], ...] | None = ()
    task_seconds: Mapping[int, float] = field(default_factory=dict)
    kernels_ready: frozenset[str] | None = None
    backpressure: bool = False


@dataclass(frozen=True)
class DriverSettings:
    """What the step needs of the run's fixed configuration."""

    operator: str
    mergeable: bool
    #: what routed rows carry as value (:data:`skewlab.engine.runtimes.spark.topology.VALUE_KINDS`)
    values: str = "none"
    top_k: int = 10


@dataclass(frozen=True)
class DriverSnapshot:
    """The driver's state after a batch: everything the next step reads.  Its persisted fields are
    the engine snapshot's (:mod:`skewlab.engine.runtimes.spark.engine_snapshot`); ``key_names`` and
    ``carry_events`` live in memory only (names of hot keys; events of commands applied while the
    query was paused, recorded with the next interval)."""

    run_id: int
    controller: Controller
    shadow: ShadowEvaluator | None
    #: state partitions P of the query, fixed for the checkpoint's life
    partitions: int
    last_batch: int = -1
    paused: bool = False
    applied_commands: tuple[int, ...] = ()
    #: source → sequence number consumed up to
    consumed: Mapping[int, int] = field(default_factory=dict)
    dead_total: int = 0
    #: per worker after the last batch: keys in its state, tuples it holds for state in flight, bytes
    worker_keys: Mapping[int, int] = field(default_factory=dict)
    worker_held: Mapping[int, int] = field(default_factory=dict)
    worker_bytes: Mapping[int, int] = field(default_factory=dict)
    #: migrations whose state is in flight: planned, exported, imported (:func:`track_migrations`)
    migrating: tuple[InFlightMigration, ...] = ()
    #: what the next routing snapshot carries besides the grouping: composed move orders (key ids,
    #: holders, targets) and the references to the blobs each worker imports
    next_orders: Orders = field(default_factory=lambda: compose_orders([]))
    next_imports: Mapping[int, tuple[ExportRef, ...]] = field(default_factory=dict)
    #: how many of the controller's migration events are already in ``migrating``
    migrations_seen: int = 0
    #: a grouping that splits keys has run: results go through the merge stage (sticky for the run)
    shares_split: bool = False
    #: the last driver batch latencies (ms), the reference of a migration's latency
    latencies: tuple[float, ...] = ()
    #: the grouping (name, params) the run asked for while it routes by :data:`INTERIM_GROUPING`
    #: until that grouping's kernels are compiled (module docstring), else ``None``
    interim: tuple[str, Mapping[str, Any]] | None = None
    #: the keys held away from their home after the last batch (:func:`split_keys_of`), with the n
    #: their homes were computed for; ``None``: not known (then every key of a split run merges).
    #: Not persisted: after a restart the first batch merges every key.
    off_home: tuple[int, np.ndarray] | None = field(default=None, metadata={"persist": False})
    key_names: Mapping[int, str] = field(default_factory=dict, metadata={"persist": False})
    carry_events: tuple[Mapping[str, Any], ...] = field(default=(), metadata={"persist": False})

    def owned_copy(self) -> "DriverSnapshot":
        """A snapshot whose controller and shadows are copies (one deep copy of the two, so that they
        still share one vocabulary; their in-memory form, not their packed pickles): the step
        mutates those, never the caller's."""
        controller, shadow = copy.deepcopy((self.controller, self.shadow))
        return replace(self, controller=controller, shadow=shadow)


@dataclass(frozen=True)
class CommandMark:
    """An operator command's outcome, to record in the database: it takes effect from ``applied_batch``."""

    command_id: int
    status: str
    reason: str | None
    applied_batch: int


@dataclass(frozen=True)
class RouteDecision:
    """The routing snapshot to publish for ``snapshot.batch_id``; ``flush``: run that batch even
    without tuples (state to export or import)."""

    snapshot: RoutingSnapshot
    flush: bool


@dataclass(frozen=True)
class Decisions:
    """What the engine carries out after a step, in this order: publish ``route``, save the new
    snapshot, prune the migration files of export batches ``< prune_before``, queue ``record``
    with ``marks`` for the database; ``log`` lines for the console.  ``already_applied``: the batch
    was a replay of an applied one; nothing else is set."""

    batch_id: int
    already_applied: bool = False
    route: RouteDecision | None = None
    record: IntervalRecord | None = None
    marks: tuple[CommandMark, ...] = ()
    prune_before: int | None = None
    #: the controller's interval row (for the status line)
    row: Mapping[str, Any] = field(default_factory=dict)
    log: tuple[str, ...] = ()


def already_applied(snapshot: DriverSnapshot, batch_id: int) -> bool:
    """Spark replays a batch the restored snapshot already applied (a crash after our snapshot was
    saved, before Spark committed the batch): its operator must still run, nothing is applied."""
    return batch_id <= snapshot.last_batch


def step(snapshot: DriverSnapshot, data: StepInput, settings: DriverSettings, *, owned: bool = False
         ) -> tuple[DriverSnapshot, Decisions]:
    """One micro-batch of the driver (module docstring); pure: ``snapshot`` is not modified.

    ``owned``: the caller hands ``snapshot`` over and never reads it again, so the step updates its
    controller and shadows in place instead of deep-copying them (:meth:`DriverSnapshot.owned_copy`
    costs a copy of every routing table, sketch and shadow per batch).  The results are the same
    (tested); after an exception the handed-over snapshot may be half-updated, so the caller must not
    go on with it — the engine's query fails and a restart restores the saved snapshot."""
    b = data.batch_id
    if already_applied(snapshot, b):
        return snapshot, Decisions(b, already_applied=True,
                                   log=(f"batch {b} already applied (restored snapshot); operator re-run, nothing applied",))
    u = data.output
    used = {side.route_batch for side in u.states.values()} - {b}
    if used:
        raise RuntimeError(
            f"batch {b} was routed with the snapshot of batch {sorted(used, key=str)[0]} (the routing files do not "
            "match this checkpoint); start a new run with --run-name or --checkpoint")
    s = snapshot if owned else snapshot.owned_copy()
    c = s.controller
    log: list[str] = []
    consumed = dict(s.consumed)
    for src, side in u.states.items():
        if side.source_state:
            c.planner.router.set_source_state(src % c.planner.n_sources, side.router_state())
        if side.consumed >= 0:
            if side.first_seq != consumed.get(src, side.first_seq):
                log.append(f"warning: source {src} batch {b} starts at {side.first_seq}, "
                           f"expected {consumed.get(src)} (gap or overlap in the source)")
            consumed[src] = side.consumed
    dead = u.dead_letters
    key_ids = c.vocab.encode_fps(u.fps)
    key_names = {} if len(s.key_names) > MAX_KEY_NAMES else dict(s.key_names)
    key_names.update(u.names)
    route_seconds = sum(side.route_seconds for side in u.states.values())
    row = c.end_interval(key_ids, u.workers, u.counts, route_seconds=route_seconds)
    worker_keys, worker_held, worker_bytes = dict(s.worker_keys), dict(s.worker_held), dict(s.worker_bytes)
    for w, summary in u.summaries.items():
        worker_keys[w], worker_held[w], worker_bytes[w] = summary.keys, summary.held, summary.state_bytes

    # shadow what-if and hot keys on the interval's per-key counts
    uk, inv = np.unique(key_ids, return_inverse=True) if key_ids.size else (key_ids, key_ids)
    per_key = np.bincount(inv, weights=u.counts, minlength=uk.size).astype(np.int64) if key_ids.size else key_ids
    if s.shadow is not None and s.shadow.waiting:
        joined = s.shadow.join(None if data.kernels_ready is None else set(data.kernels_ready), like=c)
        if joined:
            left = len(s.shadow.waiting)
            log.append(f"batch {b}: shadow grouping(s) {', '.join(joined)} joined ("
                       + (f"{left} still compiling)" if left else "all shadows running)"))
    shadow_rows = s.shadow.evaluate(uk, per_key) if s.shadow is not None else []
    hot = hot_keys(uk, per_key, key_ids, u.workers, row["tuples"], c.vocab.fps, key_names, settings.top_k)

    batch_seconds = data.clock() - data.started
    latency_ms = batch_seconds * 1000.0
    n = c.n_workers
    workers_rows = worker_rows(
        np.bincount(u.workers, weights=u.counts, minlength=n)[:n], np.bincount(u.workers, minlength=n)[:n],
        row["worker_loads"], c.state.per_worker(n), state_bytes=worker_bytes, task_seconds=dict(data.task_seconds))
    migrating, migrations = track_migrations(s.migrating, b, u.exports, latency_ms, data.wall, c.planner.name,
                                                 (row["interval"], row["total_state"]))
    events = [*s.carry_events, *rebalance_events(c.events, row["interval"])]
    s = replace(s, migrating=migrating, consumed=consumed, worker_keys=worker_keys, worker_held=worker_held,
                worker_bytes=worker_bytes, key_names=key_names, carry_events=(), off_home=off_home_of(u.summaries),
                dead_total=s.dead_total + sum(v[0] for v in dead.values()),
                latencies=(*s.latencies[-19:], latency_ms))
    # operator commands take effect from the next batch, whose interval is the controller's next;
    # first the switch to the grouping asked for, once its kernels are compiled
    commands = data.commands
    if s.interim is not None and (data.kernels_ready is None or s.interim[0] in data.kernels_ready):
        commands = (interim_switch(s.interim), *(commands or ()))
    s, marks, cmd_events, cmd_log = apply_commands(s, commands, b + 1, settings, backpressure=data.backpressure)
    log.extend(cmd_log)
    events.extend({**e, "interval": row["interval"] + 1} for e in cmd_events)
    record = interval_record(
        row, b, batch_seconds=batch_seconds, amax=c.planner.p.get("amax"), workers=workers_rows, hot_keys=hot,
        shadow=shadow_rows, migrations=migrations, events=events, dead_letters=dict(dead))
    imports: dict[int, tuple[ExportRef, ...]] = {}
    for ref in u.exports:
        imports[ref.target] = (*imports.get(ref.target, ()), ref)
    s = replace(s, last_batch=b, next_orders=compose_orders([]), next_imports=imports)
    s, route = next_route(s, b + 1, settings, wall_latency_ms=latency_ms)
    # Spark started this batch after committing b - 1, so the imports of b - 1 (the exports of b - 2)
    # will not be replayed: their files go
    return s, Decisions(b, route=route, record=record, marks=marks, prune_before=b - 1, row=row, log=tuple(log))


#: a run with split keys merges every key when more keys than this are held away from home (the
#: snapshot would carry them all to every input partition)
MAX_SPLIT_KEYS = 500_000


def off_home_of(summaries: Mapping[int, WorkerSummary]) -> tuple[int, np.ndarray] | None:
    """The workers' :attr:`~skewlab.engine.runtimes.spark.messages.WorkerSummary.off_home` keys of one
    batch, united, with the n they were computed for; ``None`` when a worker with a control order did
    not compute them or the workers computed them for different n."""
    ns = {sm.home_n for sm in summaries.values() if sm.batch is not None}
    if len(ns) != 1 or 0 in ns:
        return None
    parts = [sm.off_home for sm in summaries.values() if sm.batch is not None and sm.off_home.size]
    return ns.pop(), (np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.uint64))


def split_keys_of(s: "DriverSnapshot", n_workers: int, moving: bool) -> np.ndarray | None:
    """:attr:`RoutingSnapshot.split_keys` of the next batch: the keys held away from home after the
    last one, if known for the same n, no state is moving (``moving``: exports ordered or imports due:
    a moved key's holders change between two reports) and there are at most :data:`MAX_SPLIT_KEYS`;
    else ``None`` (every key merges)."""
    if s.off_home is None or moving:
        return None
    n, keys = s.off_home
    return keys if n == n_workers and keys.size <= MAX_SPLIT_KEYS else None


def next_route(s: DriverSnapshot, batch_id: int, settings: DriverSettings, *, wall_latency_ms: float | None = None
               ) -> tuple[DriverSnapshot, RouteDecision]:
    """The routing snapshot of ``batch_id``: the grouping's router, every worker's control payload
    (exports, keys to expect: the moves the controller ordered since the last publication, composed
    with those already published for this batch) and the references to the blobs each worker imports.
    Workers holding state or tuples get a control row even when no longer among the controller's.
    Mutates ``s.controller`` (drains its orders): call it on an owned snapshot."""
    c = s.controller
    orders = compose_orders([s.next_orders, c.drain_orders()])
    fresh = c.migrations[s.migrations_seen:]
    migrating = s.migrating
    if fresh:
        migrating = (*migrating, InFlightMigration(
            batch_id, tuple(m.to_dict() for m in fresh),
            latency_before_ms=float(np.median(s.latencies[-5:])) if s.latencies else None))
    if wall_latency_ms is not None:  # the planning batch's time (its commands and publication excluded)
        migrating = tuple(replace(m, latency_plan_ms=wall_latency_ms) if m.export_batch == batch_id else m
                          for m in migrating)
    holding = ({w for w, k in s.worker_keys.items() if k} | {w for w, k in s.worker_held.items() if k}
               | set(s.next_imports))
    split = s.shares_split or not c.planner.single_owner  # results through the merge stage (share_merge)
    split_keys = split_keys_of(s, c.n_workers, bool(orders[0].size or s.next_imports)) if split else None
    control = control_payloads(orders, c.vocab.fps, set(range(c.n_workers)) | holding, s.partitions,
                               batch=batch_id, split=split, merge_all=split_keys is None, n_workers=c.n_workers)
    imports = {w: list(refs) for w, refs in s.next_imports.items()}
    route = RouteDecision(RoutingSnapshot(batch_id, c.planner.router, s.partitions, control, imports,
                                          values=settings.values, split_keys=split_keys),
                          flush=bool(imports or orders[0].size))
    return replace(s, next_orders=orders, migrations_seen=len(c.migrations), migrating=tuple(migrating),
                   shares_split=split), route


def track_migrations(migrating: tuple[InFlightMigration, ...], batch_id: int, exports: tuple[ExportRef, ...],
                     latency_ms: float, wall: float, algorithm: str, closed: tuple[int, float] | None = None,
                     ) -> tuple[tuple[InFlightMigration, ...], list[dict[str, Any]]]:
    """Follow each migration through its batches: the export batch (the old workers' state leaves
    their tasks: bytes moved), then the import batch (the new workers merge it and release the held
    tuples).  Returns the migrations still in flight and the storage rows of those that completed
    in ``batch_id`` (``algorithm``: the live one, for events that do not name theirs).

    ``closed``: the interval the controller just closed and its total state — the moves of a command,
    published before their interval closed, learn their interval's total then.  A completed
    migration gives one row per interval its moves belong to (:attr:`MigrationEvent.interval
    <skewlab.engine.control.controller.MigrationEvent>`: a rebalance of interval t and a command in
    effect from t + 1 travel in one export when they are published together), each with
    ``planned_interval`` and ``migration_cost`` = its state moved / that interval's total state, so
    the rows of an interval sum to the interval's ``migration_cost`` (:mod:`skewlab.storage.moves`).
    The export's bytes go on its first row (they cannot be told apart by interval), the hold on every
    row (each row's keys were held that long)."""
    left: list[InFlightMigration] = []
    done: list[dict[str, Any]] = []
    for m in migrating:
        if closed is not None and any(e["interval"] == closed[0] and e.get("interval_total") is None
                                      for e in m.events):
            m = replace(m, events=tuple({**e, "interval_total": closed[1]}
                                        if e["interval"] == closed[0] and e.get("interval_total") is None else e
                                        for e in m.events))
        if m.export_batch == batch_id:
            left.append(replace(m, bytes_moved=sum(ref.bytes for ref in exports), latency_export_ms=latency_ms,
                                export_end=wall))
        elif m.export_batch < batch_id:
            by_interval: dict[int, list[Mapping[str, Any]]] = {}
            for e in m.events:
                by_interval.setdefault(int(e["interval"]), []).append(e)
            first = min(by_interval)
            for interval, events in sorted(by_interval.items()):
                bytes_moved = (0 if m.bytes_moved is None else m.bytes_moved) if interval == first else None
                done.append(_migration_row(m, events, interval, batch_id, wall, latency_ms, algorithm, bytes_moved,
                                           first))
        else:
            left.append(m)
    return tuple(left), done


def _migration_row(m: InFlightMigration, events: list[Mapping[str, Any]], interval: int, batch_id: int,
                   wall: float, latency_ms: float, algorithm: str, bytes_moved: int | None, first: int
                   ) -> dict[str, Any]:
    """The storage row of the moves ``events`` of interval ``interval`` in the migration ``m`` that
    completed in ``batch_id`` (:func:`track_migrations`)."""
    moved = sum(e["state_moved"] for e in events)
    # the interval's total state (a move published before an upgrade may lack it: the state when it ran)
    total = next((e["interval_total"] for e in events if e.get("interval_total") is not None),
                 max((e["total_state"] for e in events), default=0.0))
    detail = {"reason": "+".join(dict.fromkeys(e["reason"] for e in events)), "planned_interval": interval,
              "export_batch": m.export_batch, "import_batch": batch_id,
              "latency_before_ms": m.latency_before_ms, "latency_plan_ms": m.latency_plan_ms,
              "moves": [{"reason": e["reason"], "interval": e["interval"], "keys": e["keys"],
                         "state_moved": e["state_moved"]} for e in events],
              "latency_export_ms": m.latency_export_ms, "latency_import_ms": latency_ms}
    if bytes_moved is None:  # the export also carried the moves of interval ``first``: its bytes are there
        detail["bytes_with_interval"] = first
    return {  # the algorithm that planned it (a later switch may have replaced it since)
        "algorithm": next((e["algorithm"] for e in events if e.get("algorithm")), algorithm),
        "keys_moved": sum(e["keys"] for e in events),
        "state_moved": moved,
        "migration_cost": moved / total if total > 0 else 0.0,
        "planned_interval": interval,
        "bytes_moved": bytes_moved,
        "pause_batches": batch_id - m.export_batch,
        "pause_ms": (wall - m.export_end) * 1000.0 if m.export_end is not None else None,
        "detail": detail,
    }


def apply_commands(s: DriverSnapshot, commands: tuple[Mapping[str, Any], ...] | None, batch_id: int,
                   settings: DriverSettings, *, backpressure: bool = False
                   ) -> tuple[DriverSnapshot, tuple[CommandMark, ...], list[dict[str, Any]], list[str]]:
    """Apply the pending operator commands not applied yet; they take effect from batch ``batch_id``,
    whose interval is the controller's next (:func:`skewlab.engine.control.commands.apply_command`
    validates each).  Returns the snapshot, the marks, the events (without interval) and log lines.
    Mutates ``s.controller`` and ``s.shadow``: call it on an owned snapshot."""
    marks: list[CommandMark] = []
    events: list[dict[str, Any]] = []
    log: list[str] = []
    applied = list(s.applied_commands)
    paused = s.paused
    c = s.controller
    interim = s.interim
    for cmd in commands or ():
        own = cmd.get("id") is None  # the engine's own switch (interim_switch): no command row to mark
        cid = None if own else int(cmd["id"])
        if cid in applied:
            continue
        before = c.planner.name, dict(c.planner.p)
        res = apply_command(c, cmd.get("kind"), cmd.get("payload"), operator=settings.operator,
                            mergeable=settings.mergeable, max_workers=s.partitions,
                            paused=None if backpressure else paused)
        what = f"switch to {cmd['payload']['algorithm']} ({cmd['reason']})" if own else f"command {cid} {cmd.get('kind')}"
        if own:
            interim = None
        else:
            applied.append(cid)
            marks.append(CommandMark(cid, res.status, res.reason or None, batch_id))
        if res.status == "rejected":
            log.append(f"{what} rejected: {res.reason}")
            continue
        if res.action == "switch" and not own:
            interim = None  # the operator chose a grouping: it supersedes the one the run waited for
        if res.action == "pause":
            paused = True
        elif res.action == "resume":
            paused = False
        if res.action == "workers" and s.shadow is not None:
            s.shadow.resize(c.n_workers)
        if res.action == "switch" and s.shadow is not None:  # the what-if keeps every algorithm used
            s.shadow.add(*before, like=c)
        kind = {"switch": "algorithm", "params": "params", "workers": "workers"}.get(res.action, res.action)
        detail = {k: v for k, v in res.event.items() if k not in ("interval", "kind")}
        if own:
            detail["reason"] = cmd["reason"]
        events.append({"kind": kind, "detail": detail, "command_id": cid})
        # numbered as the dashboard and 'skewlab control status' do: the first interval in effect
        log.append(f"{what} applied at interval {c.interval} (batch {batch_id}, {res.action})")
    return (replace(s, applied_commands=tuple(applied[-1000:]), paused=paused, interim=interim), tuple(marks), events,
            log)


def interim_switch(interim: tuple[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The engine's own ``set-algorithm`` to the grouping an interim run asked for (no command id)."""
    name, params = interim
    return {"id": None, "kind": "set-algorithm", "payload": {"algorithm": name, "params": dict(params)},
            "reason": KERNELS_READY}


def hot_keys(uk: np.ndarray, per_key: np.ndarray, key_ids: np.ndarray, workers: np.ndarray, total: int,
             fps: np.ndarray, names: Mapping[int, str], top_k: int) -> list[dict[str, Any]]:
    """The batch's ``top_k`` most frequent keys: name (or ``#fingerprint``), count, share, workers."""
    if uk.size == 0 or total <= 0:
        return []
    top = np.argsort(-per_key, kind="stable")[:top_k]
    out = []
    for rank, i in enumerate(top):
        k = int(uk[i])
        fp = int(fps[k])
        dest = sorted(set(workers[key_ids == k].tolist()))
        out.append({"key": names.get(fp, f"#{fp:016x}"), "fingerprint": fp, "count": int(per_key[i]),
                    "share": float(per_key[i] / total), "workers": dest, "rank": rank})
    return out
