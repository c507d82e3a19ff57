"""The local runtime: S sources → grouping → n workers, one interval at a time, in one process.

Every interval's tuples are dealt to the S sources round robin and each source routes its
sub-sequence in stream order (:func:`skewlab.engine.algorithms.source_routing.route_sources`).  Workers then apply the
keyed operator (windowed count) and the :class:`~skewlab.engine.control.controller.Controller` closes the interval
(state, metrics, rebalancing).

Routing time excludes numba's one-off work.  The first call of a compiled kernel in a process
compiles it or loads it from numba's on-disk cache (and types its arguments), so before a router
routes its first interval (at the start and after every algorithm switch or parameter change) a
throw-away copy of it
routes the interval's first :data:`WARMUP_KEYS` keys; a kernel first needed later (another code
path) is compiled or loaded inside ``route``, and :class:`CompileClock` takes that time (numba's
compiler lock held) out of the routing time.  Both are reported as ``warmup_seconds``, so
``tuples_per_second`` is the routing speed of the kernels themselves.

Changes between intervals (algorithm switch, parameter change, worker count) are operator commands
(:class:`~skewlab.engine.control.commands.ScheduledCommand`, the kinds and payloads of :mod:`skewlab.engine.control.commands`) applied
by :func:`~skewlab.engine.control.commands.apply_command`, the function the Spark engine applies its commands with;
they go through the controller's migration path.  The local runtime has no pause: it processes a
given sequence of batches, so ``pause``/``resume`` are refused.

With ``record`` (``skewlab simulate --db``), every interval is also handed over as the
:class:`~skewlab.storage.records.IntervalRecord` the Spark engine would store for it
(:mod:`skewlab.engine.io.interval_record`): batch id = interval number, throughput and latency over the whole
step (routing + controller), migrations complete within the interval they are planned in.
"""

from __future__ import annotations

import copy
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import numpy as np

from skewlab.engine.control.commands import CommandError, ScheduledCommand, apply_command
from skewlab.engine.control.controller import Controller
from skewlab.engine.algorithms.grouping import Planner, Router
from skewlab.engine.algorithms.keys import Vocabulary
from skewlab.engine.algorithms.source_routing import route_sources
from skewlab.engine.config.settings import MAX_WORKERS

if TYPE_CHECKING:
    from skewlab.storage.records import IntervalRecord

__all__ = ["CompileClock", "LocalRuntime", "WARMUP_KEYS"]

#: keys a throw-away copy of a new grouping routes before its first interval (see the module docstring)
WARMUP_KEYS = 4096

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


class LocalRuntime:
    """Drives a :class:`Controller` over a stream of key-id batches (one per interval)."""

    def __init__(
        self,
        grouping: Planner,
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
        self._warmed: Router | None = None
        self._offset = 0

    @property
    def planner(self) -> Planner:
        return self.controller.planner

    def apply(self, command: ScheduledCommand) -> dict[str, Any]:
        """Apply one operator command with :func:`~skewlab.engine.control.commands.apply_command`; returns the
        controller's event (empty for a command already in effect).  Raises
        :class:`~skewlab.engine.control.commands.CommandError` (one line) for a command the runtime cannot apply."""
        res = apply_command(self.controller, command.kind, command.payload, max_workers=MAX_WORKERS)
        if res.status == "rejected":
            raise CommandError(res.reason)
        if res.action in ("pause", "resume"):
            raise CommandError(f"{command.kind}: the local runtime processes a given stream and has no pause")
        return res.event

    def step(self, key_ids: np.ndarray) -> dict[str, Any]:
        """Route and process one interval of key ids; returns the interval's metrics, with
        ``warmup_seconds``: numba compilation / cache loading inside ``route`` (not routing time)."""
        return self._step(np.asarray(key_ids, dtype=np.int64))[0]

    def _step(self, key_ids: np.ndarray) -> tuple[dict[str, Any], np.ndarray]:
        """:meth:`step` on int64 key ids; also the worker of every tuple."""
        fps = self.vocab.fps[key_ids]
        router = self.planner.router
        warmup = self._warm_up(fps) if self._warmed is not router else 0.0
        with CompileClock() as clock:
            workers, spent = route_sources(router, fps, router.n_sources, self._offset)
        self._offset = (self._offset + key_ids.size) % self.planner.n_sources
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
        from skewlab.engine.io.interval_record import interval_record, rebalance_events, worker_rows

        c = self.controller
        n = int(row["workers"])
        pairs = np.unique(key_ids * n + workers) if key_ids.size else key_ids
        workers_rows = worker_rows(np.bincount(workers, minlength=n)[:n], np.bincount(pairs % n, minlength=n)[:n],
                                   row["worker_loads"], c.state.per_worker(n))
        # each migration with the interval whose metric counts it and its share of that metric
        # (skewlab.storage.moves): the rows of an interval sum to the interval's migration_cost
        migrations = [
            {"algorithm": row["algorithm"], "keys_moved": m.keys, "state_moved": m.state_moved,
             "migration_cost": m.interval_cost, "planned_interval": m.interval, "pause_ms": m.pause_seconds * 1000.0,
             "detail": {"reason": m.reason, "total_state": m.total_state}}
            for m in c.migrations if m.interval == row["interval"]
        ]
        return interval_record(row, int(row["interval"]), batch_seconds=seconds, amax=self.planner.p.get("amax"),
                               workers=workers_rows, migrations=migrations,
                               events=rebalance_events(c.events, row["interval"]))

    def _warm_up(self, fps: np.ndarray) -> float:
        """Route the first :data:`WARMUP_KEYS` of ``fps`` with a copy of the router; its seconds."""
        started = time.perf_counter()
        router = self.planner.router
        self._warmed = router
        if fps.size:
            route_sources(copy.deepcopy(router), fps[:WARMUP_KEYS], router.n_sources, self._offset)
        return time.perf_counter() - started

    def run(
        self,
        batches: Iterable[np.ndarray],
        changes: Iterable[ScheduledCommand] = (),
        progress: Callable[[int, int], None] | None = None,
        record: Callable[["IntervalRecord"], None] | None = None,
    ) -> dict[str, Any]:
        """Process every batch; apply the scheduled commands; return the run summary with its intervals.

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
