"""What a run's recorded events say is in force: algorithm, parameters, workers, operator events.

The ``runs`` row keeps a run's *start* configuration; the engine records every operator change
(algorithm, parameters, workers, pause, resume) and every rebalance as an event.  :class:`RunState`
folds those events, in id order, into the settings in force; :meth:`RunState.catch_up` reads only the
events recorded since the last call, so a reader (the dashboard, ``skewlab control``) scans a long
run's history once and then follows it.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

__all__ = ["LIVE_STATUSES", "OPERATOR_EVENT_KINDS", "REBALANCE_EVENT_KINDS", "RunState", "current_run"]

#: Operator actions among the event kinds, and the engine's restarts from its checkpoint: the events
#: marked on a run's timeline (rebalances are the other kind a run records).
OPERATOR_EVENT_KINDS = ("algorithm", "params", "workers", "pause", "resume", "restart")
#: Rebalances: executed plans, and plans the controller's migration gate skipped (skewlab.engine.control.gate).
REBALANCE_EVENT_KINDS = ("rebalance", "rebalance_skipped")
#: Run statuses of an engine that is still there to apply operator commands.
LIVE_STATUSES = ("running", "paused")
_REBALANCE_KEEP = 5_000
_PAGE = 5_000


def current_run(runs: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The run operator commands act on: the newest running or paused one, else the newest (``runs``
    newest first, as :meth:`skewlab.storage.store.Store.list_runs` returns them)."""
    return next((r for r in runs if r.get("status") in LIVE_STATUSES), runs[0] if runs else None)


@dataclass
class RunState:
    """The settings in force in one run, derived from its events (see the module docstring)."""

    run_id: int
    start_algorithm: str
    start_params: dict[str, Any]
    last_event_id: int = 0
    n_workers: int | None = None
    algorithm: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    #: (from interval, algorithm, params) in force, oldest first
    history: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    op_events: list[dict[str, Any]] = field(default_factory=list)
    rebalances: deque = field(default_factory=lambda: deque(maxlen=_REBALANCE_KEEP))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.algorithm = self.algorithm or self.start_algorithm
        self.params = dict(self.params or self.start_params)
        if not self.history:
            self.history.append((-(2**62), self.start_algorithm, dict(self.start_params)))

    def absorb(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Fold events (in id order) into the state."""
        for ev in events:
            self.last_event_id = max(self.last_event_id, int(ev["id"]))
            kind = ev.get("kind")
            detail = ev.get("detail") if isinstance(ev.get("detail"), Mapping) else {}
            interval = ev.get("interval")
            slim = {"id": int(ev["id"]), "interval": interval, "kind": kind, "detail": dict(detail),
                    "command_id": ev.get("command_id")}
            if kind in ("algorithm", "params"):
                algo = str(detail.get("algorithm") or self.algorithm)
                params = detail.get("params") if isinstance(detail.get("params"), Mapping) else self.params
                slim["changed"] = {k: v for k, v in params.items() if self.params.get(k) != v} if kind == "params" else {}
                slim["previous"] = self.algorithm
                self.algorithm, self.params = algo, dict(params)
                self.history.append((int(interval if interval is not None else 0), algo, dict(params)))
            if kind == "workers" and detail.get("workers") is not None:
                self.n_workers = int(detail["workers"])
            if kind in OPERATOR_EVENT_KINDS:
                self.op_events.append(slim)
            elif kind in REBALANCE_EVENT_KINDS:
                self.rebalances.append(slim)

    def param_at(self, interval: int, name: str) -> Any:
        """The value of parameter ``name`` in force at ``interval`` (None if the algorithm has none)."""
        value = None
        for start, _, params in self.history:
            if start <= interval:
                value = params.get(name)
            else:
                break
        return value

    def events_since(self, event_id: int, min_interval: int | None = None) -> list[dict[str, Any]]:
        """Operator events and rebalances with id > ``event_id`` (and interval ≥ ``min_interval``)."""
        out = [e for e in self.op_events if e["id"] > event_id]
        out += [e for e in self.rebalances if e["id"] > event_id]
        if min_interval is not None:
            out = [e for e in out if e["interval"] is None or e["interval"] >= min_interval]
        out.sort(key=lambda e: e["id"])
        return out

    @classmethod
    def of_run(cls, run: Mapping[str, Any]) -> "RunState":
        """The state at the start of ``run`` (a ``runs`` row), before any event is folded in."""
        params = run.get("params") if isinstance(run.get("params"), Mapping) else {}
        return cls(int(run["id"]), str(run.get("algorithm") or ""), dict(params), n_workers=run.get("n_workers"))

    def catch_up(self, store: Any) -> "RunState":
        """Fold in the events ``store`` recorded for this run since the last call (in pages)."""
        while True:
            batch = store.events(self.run_id, since_id=self.last_event_id or None, limit=_PAGE)
            self.absorb(batch)
            if len(batch) < _PAGE:
                return self

