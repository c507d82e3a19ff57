"""The local runtime: S sources → grouping → n workers, one interval at a time, in one process.

Every interval's tuples are dealt to the S sources round robin (tuple i of the stream belongs to
source i mod S, the usual simulation set-up of Nasir et al. Sec. V with several sources, each with its
own local view).  Each source routes its sub-sequence in stream order with ``grouping.route``; the
sources' states are independent, so routing each source's batch in one call has exactly the
semantics of interleaving them tuple by tuple.  Workers then apply the keyed operator (windowed count)
and the :class:`~engine.controller.Controller` closes the interval (state, metrics, rebalancing).

Routing time excludes numba's one-off work.  The first call of a compiled kernel in a process
compiles it or loads it from numba's on-disk cache (and types its arguments), so before a grouping
routes its first interval (at the start and after every algorithm switch) a throw-away copy of it
routes the interval's first :data:`WARMUP_KEYS` keys; a kernel first needed later (another code
path) is compiled or loaded inside ``route``, and :class:`CompileClock` takes that time (numba's
compiler lock held) out of the routing time.  Both are reported as ``warmup_seconds``, so
``tuples_per_second`` is the routing speed of the kernels themselves.

Changes between intervals (algorithm switch, parameter change, worker count) are given as a schedule
of :class:`Change` and go through the controller's migration path, as operator commands do in the
Spark engine.

With ``record`` (``skewlab simulate --db``), every interval is also handed over as the
:class:`~storage.records.IntervalRecord` the Spark engine would store for it
(:mod:`engine.interval_record`): batch id = interval number, throughput and latency over the whole
step (routing + controller), migrations complete within the interval they are planned in.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import numpy as np

from engine.controller import Controller
from engine.grouping import Grouping
from engine.keys import Vocabulary

if TYPE_CHECKING:
    from storage.records import IntervalRecord

__all__ = ["Change", "CompileClock", "LocalRuntime", "WARMUP_KEYS", "route_sources"]

#: keys a throw-away copy of a new grouping routes before its first interval (see the module docstring)
WARMUP_KEYS = 4096


@dataclass(frozen=True)
class Change:
    """An operator action applied before interval ``at`` starts.

    ``kind``: ``"workers"`` (value: int), ``"algorithm"`` (value: name, params: dict) or ``"params"``
    (params: dict).
    """

    at: int
    kind: str
    value: Any = None
    params: dict | None = None


class CompileClock:
    """``with CompileClock() as clock: ...``; then ``clock.seconds``: the time numba held its compiler
    lock inside the block (compiling kernels or loading them from its on-disk cache)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __enter__(self) -> "CompileClock":
        from numba.core import event

        self._listener = event.TimingListener()
        self._installed = event.install_listener("numba:compiler_lock", self._listener)
        self._installed.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._installed.__exit__(*exc)
        self.seconds = float(self._listener.duration) if self._listener.done else 0.0


def route_sources(grouping: Grouping, fps: np.ndarray, n_sources: int, offset: int = 0) -> tuple[np.ndarray, float]:
    """Route one interval's fingerprints; tuple i belongs to source ``(offset + i) mod n_sources``.

    Returns the workers and the seconds spent inside ``grouping.route`` (routing throughput).
    """
    m = fps.size
    workers = np.empty(m, dtype=np.int64)
    spent = 0.0
    for s in range(n_sources):
        first = (s - offset) % n_sources
        sel = slice(first, None, n_sources)
        part = fps[sel]
        t0 = time.perf_counter()
        routed = grouping.route(part, s)
        spent += time.perf_counter() - t0
        workers[sel] = routed
    return workers, spent


class LocalRuntime:
    """Drives a :class:`Controller` over a stream of key-id batches (one per interval)."""

    def __init__(
        self,
        grouping: Grouping,
        vocab: Vocabulary,
        *,
        window: int = 10,
        cost_model: str = "linear",
        rebalance: bool = True,
    ) -> None:
        self.controller = Controller(grouping, vocab, window=window, cost_model=cost_model)
        self.vocab = vocab
        self.rebalance = rebalance
        self.warmup_seconds = 0.0
        self._warmed: Grouping | None = None
        self._offset = 0

    @property
    def grouping(self) -> Grouping:
        return self.controller.grouping

    def apply(self, change: Change) -> dict[str, Any]:
        c = self.controller
        if change.kind == "workers":
            return c.resize(int(change.value))
        if change.kind == "algorithm":
            return c.switch(str(change.value), change.params or {})
        if change.kind == "params":
            return c.set_params(change.params or {})
        raise ValueError(f"unknown change kind {change.kind!r}")

    def step(self, key_ids: np.ndarray) -> dict[str, Any]:
        """Route and process one interval of key ids; returns the interval's metrics, with
        ``warmup_seconds``: numba compilation / cache loading inside ``route`` (not routing time)."""
        return self._step(np.asarray(key_ids, dtype=np.int64))[0]

    def _step(self, key_ids: np.ndarray) -> tuple[dict[str, Any], np.ndarray]:
        """:meth:`step` on int64 key ids; also the worker of every tuple."""
        fps = self.vocab.fps[key_ids]
        warmup = self._warm_up(fps) if self._warmed is not self.grouping else 0.0
        with CompileClock() as clock:
            workers, spent = route_sources(self.grouping, fps, self.grouping.n_sources, self._offset)
        self._offset = (self._offset + key_ids.size) % self.grouping.n_sources
        warmup += clock.seconds
        self.warmup_seconds += warmup
        row = self.controller.end_interval(key_ids, workers, route_seconds=max(spent - clock.seconds, 0.0),
                                           rebalance=self.rebalance)
        row["warmup_seconds"] = warmup
        return row, workers

    def interval_record(self, row: dict[str, Any], key_ids: np.ndarray, workers: np.ndarray,
                        seconds: float) -> "IntervalRecord":
        """The record of the interval :meth:`step` just closed (``row``), its tuples' ``key_ids`` and
        ``workers``, and the step's ``seconds``."""
        from engine.interval_record import interval_record, rebalance_events, worker_rows

        c = self.controller
        n = int(row["workers"])
        pairs = np.unique(key_ids * n + workers) if key_ids.size else key_ids
        workers_rows = worker_rows(np.bincount(workers, minlength=n)[:n], np.bincount(pairs % n, minlength=n)[:n],
                                   row["worker_loads"], c.state.per_worker(n))
        migrations = [
            {"algorithm": row["algorithm"], "keys_moved": m.keys, "state_moved": m.state_moved,
             "migration_cost": m.migration_cost, "pause_ms": m.pause_seconds * 1000.0,
             "detail": {"reason": m.reason, "total_state": m.total_state}}
            for m in c.migrations if m.interval == row["interval"]
        ]
        return interval_record(row, int(row["interval"]), batch_seconds=seconds, amax=self.grouping.p.get("amax"),
                               workers=workers_rows, migrations=migrations,
                               events=rebalance_events(c.events, row["interval"]))

    def _warm_up(self, fps: np.ndarray) -> float:
        """Route the first :data:`WARMUP_KEYS` of ``fps`` with a copy of the grouping; its seconds."""
        started = time.perf_counter()
        self._warmed = self.grouping
        if fps.size:
            route_sources(copy.deepcopy(self.grouping), fps[:WARMUP_KEYS], self.grouping.n_sources, self._offset)
        return time.perf_counter() - started

    def run(
        self,
        batches: Iterable[np.ndarray],
        changes: Iterable[Change] = (),
        progress: Callable[[int, int], None] | None = None,
        record: Callable[["IntervalRecord"], None] | None = None,
    ) -> dict[str, Any]:
        """Process every batch; apply scheduled changes; return the run summary with its intervals.

        ``record`` is called with each interval's :meth:`interval_record` (``skewlab simulate --db``).
        """
        schedule = sorted(changes, key=lambda ch: ch.at)
        started = time.perf_counter()
        seen = 0
        for i, batch in enumerate(batches):
            while schedule and schedule[0].at <= i:
                self.apply(schedule.pop(0))
            key_ids = np.asarray(batch, dtype=np.int64)
            t0 = time.perf_counter()
            row, workers = self._step(key_ids)
            if record is not None:
                seconds = max(time.perf_counter() - t0 - row["warmup_seconds"], 0.0)  # without numba's one-off work
                record(self.interval_record(row, key_ids, workers, seconds))
            seen += len(batch)
            if progress is not None:
                progress(i + 1, seen)
        out = self.controller.summary()
        out["intervals"] = self.controller.intervals
        out["events"] = self.controller.events
        out["migration_events"] = [m.to_dict() for m in self.controller.migrations]
        out["warmup_seconds"] = self.warmup_seconds
        out["elapsed_seconds"] = time.perf_counter() - started
        return out


def ground_truth(batches: Iterator[np.ndarray] | list[np.ndarray], window: int) -> dict[int, int]:
    """Per-key counts over the last ``window`` batches, computed directly (for tests)."""
    batches = list(batches)[-window:] if window else []
    if not batches:
        return {}
    ids = np.concatenate([np.asarray(b, dtype=np.int64) for b in batches])
    keys, counts = np.unique(ids, return_counts=True)
    return {int(k): int(c) for k, c in zip(keys, counts)}
