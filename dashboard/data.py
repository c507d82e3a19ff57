"""The dashboard's queries: incremental reads through :class:`storage.Store` and a small cache.

Everything the dashboard shows comes from the reader API of :mod:`skewlab.storage.store`; the only write is
:meth:`skewlab.storage.store.Store.submit_command` (in :mod:`skewlab.dashboard.controls`).

Incremental protocol (one browser tab = one *cursor*)
----------------------------------------------------
A cursor is ``{"run_id", "last_interval", "last_event_id", "points"}``.  :meth:`DashboardData.load`
with no cursor (or a cursor of another run, or one whose figures grew past ``2 × window`` points)
returns a **reset**: the last ``window`` intervals of every series.  With a cursor it returns a
**delta**: only the intervals after ``last_interval`` and the events after ``last_event_id``, read
with the indexed ``since_interval`` / ``since_id`` queries, so a tick costs a handful of index seeks
whatever the size of the run.  The figures are then *extended* in the browser (``dash.Patch``), not
redrawn.

Consistency: ``interval_metrics`` is read first; its newest interval is the *upper bound* of the
tick, and rows of the other per-interval tables beyond it (written by the engine between two of our
queries) are dropped, to be read by the next tick — the engine writes all rows of a batch in one
transaction, so nothing is seen half-written.

Shared per-run state (:class:`skewlab.storage.run_state.RunState`, one per run and process, behind a lock): the parameters in
force (the run row keeps the *start* configuration; algorithm and parameter changes are events), the
operator events and recent rebalances (events are ordered by id, not by interval, so they are scanned
once and then followed with ``since_id``).

Window: ``window`` intervals on the time axes (default 600), reduced for many workers so the initial
read of per-worker rows stays below ``MAX_WORKER_ROWS`` (about 40k rows: 600 intervals at 64 workers,
312 at 128).
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Hashable, Mapping, Sequence

import numpy as np

from skewlab.dashboard.imbalance_bound import bound_series
from skewlab.storage.moves import planned_interval, recent_moves
from skewlab.storage.run_state import OPERATOR_EVENT_KINDS, RunState, current_run

__all__ = [
    "DEFAULT_THETA",
    "DEFAULT_WINDOW",
    "DashboardData",
    "MAX_WORKER_ROWS",
    "OPERATOR_EVENT_KINDS",
    "RunState",
    "SERIES_FIELDS",
    "TTLCache",
    "load_bands",
    "window_for",
]

DEFAULT_WINDOW = 600
MAX_WORKER_ROWS = 40_000
SHADOW_INTERVALS = 5
#: Cells of the worker × interval heat map drawn on a reset (later ticks append theirs).
HEAT_CELLS = 3_000
MIGRATION_TABLE_ROWS = 15
DEFAULT_THETA = 0.08  # Fang et al.'s default θmax: the tolerance line of algorithms without one

#: Run-metric columns the dashboard reads per interval.
SERIES_FIELDS: tuple[str, ...] = (
    "interval", "batch_id", "wall_time", "algorithm", "n_workers", "tuples", "imbalance",
    "theta_max_observed", "seeds_imbalance", "replication", "routing_table_size", "migration_cost",
    "throughput", "batch_latency_ms", "plan_seconds", "load_stddev",
)


#: Metrics of an interval's load that a batch without tuples does not have (not "perfect balance"):
#: drawn as gaps, left out of the comparison's statistics.
LOAD_METRICS: tuple[str, ...] = ("imbalance", "theta_max_observed", "seeds_imbalance", "replication", "load_stddev")


def _empty_batch(row: Mapping[str, Any]) -> bool:
    """A batch that carried no tuple (batch 0 while the source starts, the batch after a resume)."""
    return row.get("tuples") is not None and int(row["tuples"]) == 0


def interval_series(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Columns :data:`SERIES_FIELDS` of interval rows, with None for the :data:`LOAD_METRICS` of empty batches."""
    series = {k: [r.get(k) for r in rows] for k in SERIES_FIELDS}
    for i, r in enumerate(rows):
        if _empty_batch(r):
            for k in LOAD_METRICS:
                series[k][i] = None
    return series


def interval_param(row: Mapping[str, Any], st: RunState, name: str) -> Any:
    """Parameter ``name`` of the algorithm that routed the interval ``row``: as recorded with the row
    (schema 3), else — older rows — as the run's events say it was in force at that interval."""
    recorded = row.get("params")
    if isinstance(recorded, Mapping):
        return recorded.get(name)
    return st.param_at(int(row["interval"]), name)


def window_for(n_workers: int | None, window: int = DEFAULT_WINDOW) -> int:
    """Intervals shown on the time axes for ``n_workers`` workers (see module docstring)."""
    n = max(int(n_workers or 1), 1)
    return int(max(min(window, MAX_WORKER_ROWS // n), min(window, 60)))


def _num(v: Any) -> float | None:
    """A finite float or None (JSON-friendly)."""
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _int(v: Any) -> int | None:
    """An int or None (JSON-friendly; NULL columns stay None)."""
    return None if v is None else int(v)


def _total(values: Sequence[Any]) -> int | None:
    """Sum of the reported (not None) values, None when none was reported."""
    got = [int(v) for v in values if v is not None]
    return sum(got) if got else None


def _mean(values: Sequence[Any]) -> float | None:
    vals = [x for x in (_num(v) for v in values) if x is not None]
    return sum(vals) / len(vals) if vals else None


def _replication(v: Any) -> float | None:
    """A replication value, or None for an interval without keys (stored as 0 by older engines: the
    mean number of workers per key is at least 1 whenever it is defined)."""
    f = _num(v)
    return f if f is not None and f >= 1.0 else None


def _load(row: Mapping[str, Any]) -> float:
    """L_w of a worker row: ``cost`` (the cost model's load), else ``tuples``."""
    c = _num(row.get("cost"))
    return c if c is not None else float(row.get("tuples") or 0)


def load_bands(worker_rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Per interval: min / p25 / median / p75 / max / mean of the worker loads L_w (columns)."""
    out: dict[str, list[Any]] = {k: [] for k in ("interval", "min", "p25", "median", "p75", "max", "mean")}
    if not worker_rows:
        return out
    iv = np.fromiter((int(r["interval"]) for r in worker_rows), dtype=np.int64, count=len(worker_rows))
    ld = np.fromiter((_load(r) for r in worker_rows), dtype=np.float64, count=len(worker_rows))
    order = np.lexsort((ld, iv))
    iv, ld = iv[order], ld[order]
    starts = np.flatnonzero(np.r_[True, iv[1:] != iv[:-1]])
    counts = np.diff(np.r_[starts, iv.size])
    out["interval"] = iv[starts].tolist()
    # numpy's default ("linear") quantile of every group at once: the loads are sorted within each
    # interval, so quantile q of a group of n is ld[s + h] + frac·(ld[s + h + 1] - ld[s + h]),
    # h = floor(q·(n-1)) — the same numbers as np.quantile per group, without a Python-level loop.
    for k, q in (("min", 0.0), ("p25", 0.25), ("median", 0.5), ("p75", 0.75), ("max", 1.0)):
        pos = q * (counts - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, counts - 1)
        a, b = ld[starts + lo], ld[starts + hi]
        out[k] = (a + (pos - lo) * (b - a)).tolist()
    out["mean"] = (np.add.reduceat(ld, starts) / counts).tolist()
    return out


class TTLCache:
    """A tiny thread-safe cache with a time-to-live per entry and a bounded size.

    Hand-written because :func:`functools.lru_cache` has no expiry and the callers give a time to live
    per lookup; a library (``cachetools.TLRUCache``) would add a dependency for these few lines."""

    def __init__(self, ttl: float, max_entries: int = 64, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = float(ttl)
        self.max_entries = int(max_entries)
        self.clock = clock
        self._data: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], Any], ttl: float | None = None) -> Any:
        now = self.clock()
        with self._lock:
            hit = self._data.get(key)
            if hit is not None and hit[0] > now:
                return hit[1]
        value = compute()
        with self._lock:
            self._data[key] = (now + (self.ttl if ttl is None else ttl), value)
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


class DashboardData:
    """Read side of the dashboard over one :class:`storage.Store` (thread-safe)."""

    def __init__(self, store: Any, *, window: int = DEFAULT_WINDOW, ttl: float = 0.5) -> None:
        self.store = store
        self.window = int(window)
        self.cache = TTLCache(ttl)
        self._states: dict[int, RunState] = {}
        self._states_lock = threading.Lock()

    # ------------------------------------------------------------------ runs
    def runs(self, limit: int = 200) -> list[dict[str, Any]]:
        """Runs, newest first, with progress (cached for a few seconds: it aggregates every interval)."""
        return self.cache.get(("runs", limit), lambda: self.store.list_runs(limit=limit), ttl=3.0)

    def algorithm_switches(self, runs: Sequence[Mapping[str, Any]]) -> dict[int, list[dict[str, Any]]]:
        """The ``algorithm`` events of ``runs`` (:meth:`skewlab.storage.store.Store.algorithm_events`), cached
        like :meth:`runs`."""
        ids = tuple(int(r["id"]) for r in runs)
        return self.cache.get(("switches", ids), lambda: self.store.algorithm_events(ids), ttl=3.0)

    def run(self, run_id: int) -> dict[str, Any] | None:
        return self.cache.get(("run", int(run_id)), lambda: self.store.get_run(int(run_id)), ttl=1.0)

    def default_run_id(self) -> int | None:
        """The newest running run, else the newest run, else None."""
        run = current_run(self.runs())
        return None if run is None else int(run["id"])

    def state(self, run_id: int) -> RunState | None:
        """The run's :class:`RunState`, brought up to date with the events recorded since last time."""
        run_id = int(run_id)
        with self._states_lock:
            st = self._states.get(run_id)
            if st is None:
                run = self.run(run_id)
                if run is None:
                    return None
                st = RunState.of_run(run)
                self._states[run_id] = st
        with st.lock:
            st.catch_up(self.store)
        return st

    # ------------------------------------------------------------------ live view
    def load(self, run_id: int, cursor: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A reset or a delta for ``run_id`` (see the module docstring); cached for ``ttl`` seconds."""
        run_id = int(run_id)
        reset = (
            not cursor
            or cursor.get("run_id") != run_id
            or cursor.get("last_interval") is None
            or int(cursor.get("points") or 0) >= 2 * self.window
        )
        key = ("load", run_id, None if reset else int(cursor["last_interval"]),
               None if reset else int(cursor.get("last_event_id") or 0))
        return self.cache.get(key, lambda: self._load(run_id, None if reset else cursor))

    def _load(self, run_id: int, cursor: Mapping[str, Any] | None) -> dict[str, Any]:
        store = self.store
        run = self.run(run_id)
        if run is None:
            return {"missing": True, "run_id": run_id}
        if cursor is not None:
            since = int(cursor["last_interval"])
            rows = store.interval_metrics(run_id, since_interval=since, limit=self.window + 1)
            if len(rows) > self.window:  # fell far behind (tab asleep): start over
                return self._load(run_id, None)
            reset = False
        else:
            latest = store.interval_metrics(run_id, limit=1, latest=True)
            n = (latest[0].get("n_workers") if latest else None) or run.get("n_workers") or 1
            rows = store.interval_metrics(run_id, limit=window_for(n, self.window), latest=True)
            since = int(rows[0]["interval"]) - 1 if rows else None
            reset = True
        st = self.state(run_id)
        assert st is not None
        out: dict[str, Any] = {
            "missing": False,
            "reset": reset,
            "run_id": run_id,
            "run": _run_summary(run),
            "algorithm": rows[-1]["algorithm"] if rows else st.algorithm,
            "params": dict(st.params),
            "n_workers": (rows[-1].get("n_workers") if rows else None) or st.n_workers,
            "new": bool(rows),
        }
        first_event = int(cursor.get("last_event_id") or 0) if cursor is not None else 0
        min_iv = int(rows[0]["interval"]) if (reset and rows) else None
        out["events"] = st.events_since(first_event, min_iv)
        out["last_event_id"] = max(st.last_event_id, first_event)
        if not rows:
            out["last_interval"] = None if reset else int(cursor["last_interval"])  # type: ignore[index]
            out["series"] = {k: [] for k in SERIES_FIELDS + ("theta_max", "bound", "bound_note")}
            out["first_interval"] = None
            return out
        upper = int(rows[-1]["interval"])
        if rows[-1].get("n_workers"):
            st.n_workers = int(rows[-1]["n_workers"])
        out["last_interval"] = upper
        out["first_interval"] = int(rows[0]["interval"])
        series = interval_series(rows)
        series["theta_max"] = [_num(interval_param(r, st, "theta_max")) for r in rows]
        series.update(bound_series(rows, [h for h in store.hottest_keys(run_id, since_interval=since)
                                          if int(h["interval"]) <= upper], run))
        out["series"] = series

        def upto(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [r for r in items if int(r["interval"]) <= upper]

        workers = upto(store.worker_metrics(run_id, since_interval=since))
        out["bands"] = load_bands(workers)
        latest_workers = [r for r in workers if int(r["interval"]) == upper]
        out["workers"] = [
            {"worker": int(r["worker"]), "load": _load(r), "tuples": int(r.get("tuples") or 0),
             "distinct_keys": int(r.get("distinct_keys") or 0), "state_size": _num(r.get("state_size")),
             "processing_seconds": _num(r.get("processing_seconds"))}
            for r in sorted(latest_workers, key=lambda r: int(r["worker"]))
        ]
        # the newest interval's own settings (not those in force now: a command may have changed them since)
        theta_now = _num(interval_param(rows[-1], st, "theta_max"))
        out["theta_now"] = theta_now
        out["amax_now"] = _num(interval_param(rows[-1], st, "amax"))
        out["heat"] = worker_heat(workers, out["bands"], HEAT_CELLS if reset else None)
        plans = [e for e in st.rebalances if e["kind"] == "rebalance" and e["interval"] is not None and e["interval"] <= upper]
        out["plan"] = ({"interval": plans[-1]["interval"], "feasible": plans[-1]["detail"].get("feasible"),
                        "note": str(plans[-1]["detail"].get("note") or "")} if plans else None)

        routing = upto(store.routing_sizes(run_id, since_interval=since))
        out["routing"] = {
            "interval": [int(r["interval"]) for r in routing],
            "entries": [int(r.get("entries") or 0) for r in routing],
            "amax": [r.get("amax") for r in routing],
        }

        migs = upto(store.migration_events(run_id, since_interval=since))
        out["migrations"] = migration_series(migs, series["interval"], int(rows[0]["interval"]) if reset else None)
        # the moves, each under the interval that planned it with that interval's figure (storage.moves): read
        # again whenever a migration row arrives, since a move's rows arrive over several intervals
        out["migration_rows"] = recent_moves(store, run_id, upper, MIGRATION_TABLE_ROWS) if (reset or migs) else None

        out["hot_keys"] = [
            {"rank": int(h["rank"]), "key": str(h.get("key") or h.get("fingerprint") or ""),
             "count": int(h.get("count") or 0), "share": _num(h.get("share")) or 0.0,
             "workers": [int(w) for w in (h.get("workers") or [])]}
            for h in store.hot_keys(run_id, interval=upper)
        ]

        # what-if: mean of the last SHADOW_INTERVALS intervals, live algorithm included
        lo = upper - SHADOW_INTERVALS
        shadow = upto(store.shadow_results(run_id, since_interval=lo))
        live_rows = [r for r in rows if int(r["interval"]) > lo]
        if len(live_rows) < SHADOW_INTERVALS and not reset:
            live_rows = [r for r in store.interval_metrics(run_id, limit=SHADOW_INTERVALS, latest=True)
                         if lo < int(r["interval"]) <= upper]
        out["shadow"] = shadow_summary(shadow, live_rows)
        return out

    def worker_history(self, run_id: int, worker: int, last_interval: int | None, intervals: int = 120) -> dict[str, Any]:
        """Drill-down: one worker's load, keys, state and time over the last ``intervals``, with the mean."""
        since = None if last_interval is None else int(last_interval) - int(intervals)
        rows = self.store.worker_metrics(int(run_id), since_interval=since)
        if last_interval is not None:
            rows = [r for r in rows if int(r["interval"]) <= int(last_interval)]
        bands = load_bands(rows)
        mine = [r for r in rows if int(r["worker"]) == int(worker)]
        mean_by = dict(zip(bands["interval"], bands["mean"]))
        return {
            "worker": int(worker),
            "interval": [int(r["interval"]) for r in mine],
            "load": [_load(r) for r in mine],
            "mean": [mean_by.get(int(r["interval"])) for r in mine],
            "tuples": [int(r.get("tuples") or 0) for r in mine],
            "distinct_keys": [int(r.get("distinct_keys") or 0) for r in mine],
            "state_size": [_num(r.get("state_size")) for r in mine],
            "processing_seconds": [_num(r.get("processing_seconds")) for r in mine],
        }

    # ------------------------------------------------------------------ commands
    def commands(self, run_id: int, limit: int = 8) -> list[dict[str, Any]]:
        """Recent commands of the run (and global ones), newest first, with the interval from which each is
        in effect (:meth:`skewlab.storage.store.Store.recent_commands`: the numbering ``skewlab control status`` uses)."""
        rows = self.store.recent_commands(limit, run_id=int(run_id))
        out = []
        for c in rows:
            iv = c.get("applied_interval")
            out.append({
                "id": int(c["id"]), "kind": c["kind"], "payload": c.get("payload") or {}, "status": c["status"],
                "reason": c.get("reason") or "", "applied_batch": c.get("applied_batch"), "interval": iv,
                "created_at": c.get("created_at"),
            })
        return out

    # ------------------------------------------------------------------ history and comparison
    def run_series(self, run_id: int, limit: int = 5_000) -> dict[str, Any]:
        """The last ``limit`` intervals of a run and summary statistics (for run comparison)."""
        rows = self.store.interval_metrics(int(run_id), limit=limit, latest=True)
        series = interval_series(rows)
        return {"run_id": int(run_id), "series": series, "summary": summarize(rows),
                "throughput_kind": throughput_kind(self.run(int(run_id)) or {})}


def throughput_kind(run: Mapping[str, Any]) -> str:
    """What a run's ``throughput`` measures: ``"routing"`` for a ``skewlab simulate`` run (the local
    runtime: tuples routed per second of routing, no Spark), ``"engine"`` otherwise (tuples per second
    of whole micro-batches)."""
    config = run.get("config") if isinstance(run.get("config"), Mapping) else {}
    return "routing" if config.get("runtime") == "local" else "engine"


def status_text(run: Mapping[str, Any]) -> str:
    """A run's status as the operator reads it: a failed run carries its reason ("failed: …")."""
    status = str(run.get("status") or "")
    note = str(run.get("note") or "").strip()
    return f"{status}: {note}" if status == "failed" and note else status


def waiting_message(d: Mapping[str, Any]) -> str | None:
    """What the live view says instead of charts while a run has no tuple in its loaded window, or
    ``None`` once it has data: waiting for the first batch (Spark is starting), batches without
    tuples (the source has sent nothing yet), a run that ended without data, or why it failed."""
    series = d.get("series") or {}
    if any((t or 0) > 0 for t in series.get("tuples") or []):
        return None
    run = d.get("run") or {}
    rid, status, batches = run.get("id"), run.get("status") or "", len(series.get("interval") or [])
    if status == "failed":
        return f"run {rid} {status_text(run)}"
    if status in ("finished", "stopped"):
        return f"run {rid} {status} without data ({batches} batch(es), no tuples)"
    if batches == 0:
        return f"waiting for the first batch of run {rid}: the engine is starting Spark"
    return f"run {rid}: {batches} batch(es) so far, no tuples yet — waiting for data from the source"


#: built-in operators of values, for a run recorded before its configuration stored ``value_kind``
_VALUE_OPERATORS = ("sum", "mean", "min", "max", "distinct")


def operator_label(config: Mapping[str, Any]) -> str:
    """The run's keyed operator as the dashboard names it, from its stored configuration: the operator
    and the field of the records it reads, ``mean(amount)`` (``--value-field``); an operator of values
    (the run's ``value_kind`` is ``field``: a built-in or the user's) on the generator reads its seeded
    values, ``mean(generated values)``; operators of keys alone or of positions (``count``, ``join``)
    are their name."""
    name = str(config.get("operator") or "count")
    value_field = str(config.get("value_field") or "").strip()
    if value_field:
        return f"{name}({value_field})"
    kind = config.get("value_kind")
    of_values = kind == "field" if kind is not None else name in _VALUE_OPERATORS
    if of_values and (config.get("source") or "generator") == "generator":
        return f"{name}(generated values)"
    return name


def _run_summary(run: Mapping[str, Any]) -> dict[str, Any]:
    config = run.get("config") if isinstance(run.get("config"), Mapping) else {}
    return {
        "id": int(run["id"]), "name": run.get("name") or "", "status": run.get("status") or "",
        "status_text": status_text(run), "note": run.get("note") or "", "algorithm": run.get("algorithm") or "", "n_workers": run.get("n_workers"),
        "workload": run.get("workload") or "", "interval_seconds": _num(config.get("interval")),
        "operator": config.get("operator") or "count", "operator_label": operator_label(config),
        "created_at": run.get("created_at"),
        "max_workers": _num(config.get("max_workers")),
    }


def shadow_summary(shadow_rows: Sequence[Mapping[str, Any]], live_rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Mean imbalance / replication / migration cost per algorithm; the live one marked ``live``.

    The live algorithm is listed once, with its own (live) metrics: a shadow of the same name (the
    engine keeps shadowing an algorithm after the run switched to it) is left out.
    """
    live = str(live_rows[-1].get("algorithm")) if live_rows else None
    by: OrderedDict[str, list[Mapping[str, Any]]] = OrderedDict()
    for r in shadow_rows:
        if str(r["algorithm"]) != live:
            by.setdefault(str(r["algorithm"]), []).append(r)
    groups = ([(live, True, live_rows)] if live_rows else []) + [(name, False, rs) for name, rs in by.items()]
    return [{
        "algorithm": name, "live": is_live, "intervals": len(rs),
        "imbalance": _mean([r.get("imbalance") for r in rs]),
        "replication": _mean([_replication(r.get("replication")) for r in rs]),
        "migration_cost": _mean([r.get("migration_cost") for r in rs]),
    } for name, is_live, rs in groups]


def migration_series(migs: Sequence[Mapping[str, Any]], intervals: Sequence[Any],
                     first: int | None = None) -> dict[str, list[Any]]:
    """Per interval (every one of ``intervals``, and any other a migration row belongs to): the state
    moved, keys moved and pause (ms) summed over the migrations that belong to the interval (0 without
    one), the serialized bytes moved (summed) and the micro-batches the moved keys were held (the longest
    hold), None where none of them reported it; ``imported``: the interval the last of them was recorded
    in (its import completed; None without one).

    A migration belongs to the interval that planned it (:func:`skewlab.storage.moves.planned_interval`,
    the numbering of the migration table, the KPI card and "applied at interval N"), although the Spark
    engine records it one or two intervals later: a delta's rows of an interval drawn before come as a
    further bar at that interval, which the figure stacks on the one drawn (``barmode="stack"``).
    ``first``: rows of intervals before it (outside the window drawn) are left out."""
    # every interval gets a (possibly zero) bar, so the axis matches the other time figures
    per: OrderedDict[int, list[Mapping[str, Any]]] = OrderedDict((int(iv), []) for iv in intervals)
    for m in migs:
        iv = planned_interval(m)
        if first is None or iv >= first:
            per.setdefault(iv, []).append(m)
    held = [[m.get("pause_batches") for m in ms if m.get("pause_batches") is not None] for ms in per.values()]
    return {
        "interval": list(per.keys()),
        "imported": [max(int(m["interval"]) for m in ms) if ms else None for ms in per.values()],
        "state_moved": [sum((_num(m.get("state_moved")) or 0.0 for m in ms), 0.0) for ms in per.values()],
        "keys_moved": [sum(int(m.get("keys_moved") or 0) for m in ms) for ms in per.values()],
        "pause_ms": [sum((_num(m.get("pause_ms")) or 0.0 for m in ms), 0.0) for ms in per.values()],
        "bytes_moved": [_total([m.get("bytes_moved") for m in ms]) for ms in per.values()],
        "pause_batches": [max(h) if h else None for h in held],
    }


def worker_heat(worker_rows: Sequence[Mapping[str, Any]], bands: Mapping[str, list[Any]],
                max_cells: int | None = None) -> dict[str, list[Any]]:
    """Worker × interval cells (columns): the load L_w and the worker's task time (``processing_seconds``,
    None where the engine did not report it), each also relative to the interval's mean over the workers,
    and the serialized bytes of the worker's keyed state (``state_bytes``, None where not reported).

    ``max_cells`` keeps only the latest intervals whose cells fit (at least one interval).
    """
    rows = list(worker_rows)
    if max_cells is not None and rows:
        per = max(len({int(r["worker"]) for r in rows if int(r["interval"]) == int(rows[-1]["interval"])}), 1)
        keep = set(sorted({int(r["interval"]) for r in rows})[-max(max_cells // per, 1):])
        rows = [r for r in rows if int(r["interval"]) in keep]
    intervals = [int(r["interval"]) for r in rows]
    loads = [_load(r) for r in rows]
    secs = [_num(r.get("processing_seconds")) for r in rows]
    mean_load = dict(zip(bands.get("interval", []), bands.get("mean", [])))
    timed: dict[int, list[float]] = {}
    for iv, t in zip(intervals, secs):
        if t is not None:
            timed.setdefault(iv, []).append(t)
    mean_time = {iv: sum(ts) / len(ts) for iv, ts in timed.items()}

    def rel(v: float | None, m: float | None) -> float | None:
        return v / m if v is not None and m else None

    return {
        "interval": intervals,
        "worker": [int(r["worker"]) for r in rows],
        "load": loads,
        "relative": [rel(ld, mean_load.get(iv)) for ld, iv in zip(loads, intervals)],
        "seconds": secs,
        "time_relative": [rel(t, mean_time.get(iv)) for t, iv in zip(secs, intervals)],
        "state_bytes": [_int(r.get("state_bytes")) for r in rows],
    }


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Summary of interval rows: means and tails of the headline metrics."""

    def vals(k: str) -> np.ndarray:
        of = [r for r in rows if not _empty_batch(r)] if k in LOAD_METRICS else rows
        return np.array([x for x in (_num(r.get(k)) for r in of) if x is not None], dtype=np.float64)

    def stat(k: str, fn: Callable[[np.ndarray], float]) -> float | None:
        v = vals(k)
        return float(fn(v)) if v.size else None

    return {
        "intervals": len(rows),
        "first_interval": int(rows[0]["interval"]) if rows else None,
        "last_interval": int(rows[-1]["interval"]) if rows else None,
        "tuples": int(sum(int(r.get("tuples") or 0) for r in rows)),
        "imbalance_mean": stat("imbalance", np.mean),
        "imbalance_p95": stat("imbalance", lambda v: np.quantile(v, 0.95)),
        "theta_observed_max": stat("theta_max_observed", np.max),
        "replication_mean": _mean([_replication(r.get("replication")) for r in rows if not _empty_batch(r)]),
        "migration_cost_mean": stat("migration_cost", np.mean),
        "routing_table_max": stat("routing_table_size", np.max),
        "throughput_mean": stat("throughput", np.mean),
        "latency_p95_ms": stat("batch_latency_ms", lambda v: np.quantile(v, 0.95)),
        "algorithms": sorted({str(r.get("algorithm")) for r in rows}),
    }
