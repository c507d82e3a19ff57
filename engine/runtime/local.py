"""The local runtime: S sources → grouping → n workers, one interval at a time, in one process.

Every interval's tuples are dealt to the S sources round robin (tuple i of the stream belongs to
source i mod S, the usual simulation set-up of Nasir et al. Sec. V with several sources, each with its
own local view).  Each source routes its sub-sequence in stream order with ``grouping.route``; the
sources' states are independent, so routing each source's batch in one call has exactly the
semantics of interleaving them tuple by tuple.  Workers then apply the keyed operator (windowed count)
and the :class:`~engine.controller.Controller` closes the interval (state, metrics, rebalancing).

Changes between intervals (algorithm switch, parameter change, worker count) are given as a schedule
of :class:`Change` and go through the controller's migration path, as operator commands do in the
Spark engine.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from engine.controller import Controller
from engine.grouping import Grouping
from engine.keys import Vocabulary

__all__ = ["Change", "LocalRuntime", "route_sources"]


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
        """Route and process one interval of key ids; returns the interval's metrics."""
        key_ids = np.asarray(key_ids, dtype=np.int64)
        fps = self.vocab.fps[key_ids]
        workers, spent = route_sources(self.grouping, fps, self.grouping.n_sources, self._offset)
        self._offset = (self._offset + key_ids.size) % self.grouping.n_sources
        return self.controller.end_interval(key_ids, workers, route_seconds=spent, rebalance=self.rebalance)

    def run(
        self,
        batches: Iterable[np.ndarray],
        changes: Iterable[Change] = (),
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Process every batch; apply scheduled changes; return the run summary with its intervals."""
        schedule = sorted(changes, key=lambda ch: ch.at)
        started = time.perf_counter()
        seen = 0
        for i, batch in enumerate(batches):
            while schedule and schedule[0].at <= i:
                self.apply(schedule.pop(0))
            self.step(batch)
            seen += len(batch)
            if progress is not None:
                progress(i + 1, seen)
        out = self.controller.summary()
        out["intervals"] = self.controller.intervals
        out["events"] = self.controller.events
        out["migration_events"] = [m.to_dict() for m in self.controller.migrations]
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
