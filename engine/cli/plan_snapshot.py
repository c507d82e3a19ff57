"""Snapshots of one interval's key statistics for ``skewlab plan``, and plans as JSON.

A snapshot is a JSON object::

    {"workers": 2,
     "keys": [{"key": "k1", "cost": 7, "size": 7, "home": 0, "worker": 0}, ...]}

Per key (Fang et al. HPDC 2017, Sec. II-A notation):

* ``key`` (required, non-empty string, unique) — the key; its fingerprint is
  :func:`skewlab.engine.algorithms.keys.fingerprints` of the name, the name is kept in ``IntervalStats.names``.
* ``cost`` (required, finite number ≥ 0) — computation cost c(k) in the statistics window.
* ``size`` (optional, finite number ≥ 0) — window state size S(k, w), the migration cost of the key.
  **Default: the cost** (Fang's examples use S(k, w) = c(k) with w = 1).
* ``home`` (optional, integer in [0, workers)) — h(k).  **Default: the base hash of the planning
  algorithm** (``base`` argument; ``skewlab plan`` passes the chosen algorithm's
  :meth:`~skewlab.engine.algorithms.grouping.RebalancingPlanner.base`, e.g. the consistent-hash ring of the Fang and
  Gedik rebalancers), else h(k) = fingerprint mod workers (:func:`skewlab.engine.algorithms.keys.home`).
* ``worker`` (optional, integer in [0, workers)) — the current owner F(k).  **Default: home**
  (the key is not in the routing table).
* ``count`` (optional, integer ≥ 0) — tuples of the key in the interval.  **Default: the cost
  rounded to an integer** (the linear cost model: one unit of cost per tuple).

Top level: ``workers`` (required, integer ≥ 1 and ≤ 1,000,000), ``keys`` (required, a list, may
be empty), ``interval`` (optional, integer ≥ 0, default 0) and ``comment`` (optional, any string).
Integers may be written as integral floats (``2.0``); booleans are never numbers.  Unknown fields,
duplicate fields in one object, ``NaN``/``Infinity`` and duplicate key names are errors.

Every problem raises :class:`SnapshotError` (a ``ValueError``) with a one-line message that names
the problem and the key (name and index) it concerns.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

from skewlab.engine.algorithms.grouping import IntervalStats, Plan
from skewlab.engine.algorithms.keys import fingerprints
from skewlab.engine.algorithms.keys import home as _home

__all__ = ["SnapshotError", "load_snapshot", "parse_snapshot", "plan_to_json"]

MAX_WORKERS = 1_000_000
_TOP_FIELDS = ("workers", "keys", "interval", "comment")
_KEY_FIELDS = ("key", "cost", "size", "home", "worker", "count")


class SnapshotError(ValueError):
    """A snapshot is malformed; the message is one line naming the problem."""


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _show(value: Any) -> str:
    text = _one_line(repr(value))
    return text if len(text) <= 40 else text[:37] + "..."


def _reject_constant(name: str) -> float:
    raise SnapshotError(f"snapshot: {name} is not a valid number (numbers must be finite)")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise SnapshotError(f"snapshot: duplicate field {_show(k)} in one object")
        out[k] = v
    return out


def _read(source: Any) -> Any:
    """Parsed JSON of ``source``: a dict (used as is), JSON text, bytes, a path, or ``"-"`` (stdin)."""
    if isinstance(source, dict):
        return source
    if isinstance(source, (bytes, bytearray)):
        try:
            source = bytes(source).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SnapshotError(f"snapshot: not UTF-8 text ({_one_line(str(exc))})") from None
    text: str
    if isinstance(source, str) and source.strip() == "-":
        try:
            return _parse_text(sys.stdin.read())
        except (OSError, UnicodeDecodeError) as exc:
            raise SnapshotError(f"snapshot: cannot read standard input: {_one_line(str(exc))}") from None
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not source.lstrip().startswith(("{", "["))):
        path = Path(source)
        if isinstance(source, str) and not source.strip():
            raise SnapshotError("snapshot: empty input (expected a JSON object or a file path)")
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise SnapshotError(f"snapshot: file not found: {_show(str(path))}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise SnapshotError(f"snapshot: cannot read {_show(str(path))}: {_one_line(str(exc))}") from None
    elif isinstance(source, str):
        text = source
    else:
        raise SnapshotError(f"snapshot: expected a path, JSON text or a dict, got {type(source).__name__}")
    return _parse_text(text)


def _parse_text(text: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise SnapshotError(f"snapshot: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise SnapshotError("snapshot: invalid JSON (nested too deeply)") from None


def _number(value: Any, where: str, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SnapshotError(f"{where}: {field} must be a number, got {_show(value)}")
    x = float(value)
    if not math.isfinite(x):
        raise SnapshotError(f"{where}: {field} must be finite, got {_show(value)}")
    if x < 0:
        raise SnapshotError(f"{where}: {field} must be >= 0, got {_show(value)}")
    return x


def _integer(value: Any, where: str, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SnapshotError(f"{where}: {field} must be an integer, got {_show(value)}")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise SnapshotError(f"{where}: {field} must be an integer, got {_show(value)}")
        value = int(value)
    return int(value)


def parse_snapshot(data: Any, base: Callable[[np.ndarray, int], np.ndarray] | None = None) -> IntervalStats:
    """:class:`IntervalStats` from an already parsed snapshot object (see the module docstring);
    ``base(fps, workers)`` gives h(k) of the keys without a ``home`` field (default fp mod workers)."""
    if not isinstance(data, dict):
        raise SnapshotError(f"snapshot: expected a JSON object at the top level, got {type(data).__name__}")
    unknown = [k for k in data if k not in _TOP_FIELDS]
    if unknown:
        raise SnapshotError(f"snapshot: unknown field {_show(unknown[0])} (known: {', '.join(_TOP_FIELDS)})")
    if "workers" not in data:
        raise SnapshotError("snapshot: missing field 'workers'")
    n = _integer(data["workers"], "snapshot", "workers")
    if n < 1 or n > MAX_WORKERS:
        raise SnapshotError(f"snapshot: workers must be in [1, {MAX_WORKERS}], got {n}")
    interval = 0
    if "interval" in data:
        interval = _integer(data["interval"], "snapshot", "interval")
        if interval < 0:
            raise SnapshotError(f"snapshot: interval must be >= 0, got {interval}")
    if "comment" in data and not isinstance(data["comment"], str):
        raise SnapshotError(f"snapshot: comment must be a string, got {_show(data['comment'])}")
    if "keys" not in data:
        raise SnapshotError("snapshot: missing field 'keys'")
    items = data["keys"]
    if not isinstance(items, list):
        raise SnapshotError(f"snapshot: keys must be a list, got {type(items).__name__}")

    m = len(items)
    names: list[str] = []
    cost = np.empty(m, dtype=np.float64)
    size = np.empty(m, dtype=np.float64)
    count = np.empty(m, dtype=np.int64)
    home = np.full(m, -1, dtype=np.int64)
    worker = np.full(m, -1, dtype=np.int64)
    has_home = np.zeros(m, dtype=bool)
    has_worker = np.zeros(m, dtype=bool)
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise SnapshotError(f"key at index {i}: expected an object, got {type(item).__name__}")
        if "key" not in item:
            raise SnapshotError(f"key at index {i}: missing field 'key'")
        name = item["key"]
        if not isinstance(name, str):
            raise SnapshotError(f"key at index {i}: key must be a string, got {_show(name)}")
        if not name:
            raise SnapshotError(f"key at index {i}: key must not be empty")
        where = f"key {_show(name)} (index {i})"
        unknown = [k for k in item if k not in _KEY_FIELDS]
        if unknown:
            raise SnapshotError(f"{where}: unknown field {_show(unknown[0])} (known: {', '.join(_KEY_FIELDS)})")
        if name in seen:
            raise SnapshotError(f"{where}: duplicate key (first at index {seen[name]})")
        seen[name] = i
        names.append(name)
        if "cost" not in item:
            raise SnapshotError(f"{where}: missing field 'cost'")
        cost[i] = _number(item["cost"], where, "cost")
        size[i] = _number(item["size"], where, "size") if "size" in item else cost[i]
        if "count" in item:
            c = _integer(item["count"], where, "count")
            if c < 0:
                raise SnapshotError(f"{where}: count must be >= 0, got {c}")
            count[i] = c
        else:
            count[i] = int(round(cost[i])) if cost[i] < 2**62 else 2**62
        for field, arr, flag in (("home", home, has_home), ("worker", worker, has_worker)):
            if field in item:
                w = _integer(item[field], where, field)
                if w < 0 or w >= n:
                    raise SnapshotError(f"{where}: {field} {w} out of range [0, {n - 1}]")
                arr[i] = w
                flag[i] = True
    fps = fingerprints(names) if m else np.empty(0, dtype=np.uint64)
    if m and np.unique(fps).size != m:
        order = np.argsort(fps, kind="stable")
        dup = np.flatnonzero(fps[order][1:] == fps[order][:-1])[0]
        a, b = int(order[dup]), int(order[dup + 1])
        raise SnapshotError(f"keys {_show(names[a])} and {_show(names[b])} have the same 64-bit fingerprint")
    if m and not has_home.all():
        home[~has_home] = (base or _home)(fps[~has_home], n)
    worker[~has_worker] = home[~has_worker]
    return IntervalStats(
        interval=interval,
        n_workers=n,
        keys=fps,
        cost=cost,
        size=size,
        count=count,
        worker=worker,
        home=home,
        names=names,
    )


def load_snapshot(path_or_text: Any, base: Callable[[np.ndarray, int], np.ndarray] | None = None) -> IntervalStats:
    """:class:`IntervalStats` from a snapshot file path (``"-"``: standard input), JSON text (starting
    with ``{``), bytes or an already parsed dict; ``base`` as for :func:`parse_snapshot`.

    Raises :class:`SnapshotError` (one line) for any malformed input.
    """
    return parse_snapshot(_read(path_or_text), base)


def _names(stats: IntervalStats) -> list[str]:
    if stats.names is not None and len(stats.names) == stats.keys.size:
        return [str(x) for x in stats.names]
    return [str(int(k)) for k in stats.keys]


def plan_to_json(plan: Plan, stats: IntervalStats) -> dict[str, Any]:
    """The plan as a JSON-ready dict with exactly these fields:

    ``algorithm``; ``feasible`` (bool); ``note`` (always present, ``""`` when there is nothing to
    say); ``assignment`` (key name → new worker, every key, in snapshot order); ``routing_table`` (key
    name → worker for the keys whose new worker differs from their home, i.e. the table A after the
    plan); ``loads`` (new load per worker); ``migrated_keys`` (names of the keys whose owner changes,
    in snapshot order) and ``migrated_count``; ``migration_cost`` (state of the moved keys / total
    state, Fang Eq. 2 normalised); ``plan_seconds``; ``imbalance`` (max_d L(d) / mean_d L(d) − 1).

    Keys without names (stats not from a snapshot) are named by their decimal fingerprint.
    """
    names = _names(stats)
    assignment = np.asarray(plan.assignment, dtype=np.int64)
    index = {int(k): i for i, k in enumerate(stats.keys)} if plan.table_keys.size else {}
    table = {}
    for k, w in zip(plan.table_keys, plan.table_workers):
        i = index.get(int(k))
        table[names[i] if i is not None else str(int(k))] = int(w)
    # snapshot order for the table too
    order = {name: i for i, name in enumerate(names)}
    table = dict(sorted(table.items(), key=lambda kv: order.get(kv[0], len(order))))
    moved = np.flatnonzero(np.asarray(plan.moved, dtype=bool))
    return {
        "algorithm": str(plan.algorithm),
        "feasible": bool(plan.feasible),
        "note": str(plan.note or ""),
        "assignment": {names[i]: int(assignment[i]) for i in range(assignment.size)},
        "routing_table": table,
        "loads": [float(x) for x in np.asarray(plan.loads, dtype=np.float64)],
        "migrated_keys": [names[i] for i in moved],
        "migrated_count": int(moved.size),
        "migration_cost": float(plan.migration_cost),
        "plan_seconds": float(plan.plan_seconds),
        "imbalance": float(plan.imbalance()),
    }
