"""The imbalance chart's lower bound: the best imbalance any grouping could reach in an interval.

With ``n`` workers, ``T`` tuples in the interval and its heaviest key carrying ``h`` of them, a
grouping that gives every key one owner puts at least ``h`` tuples on that key's worker and at least
the mean ``T / n`` on the busiest, so its busiest worker carries at least ``max(T / n, h)``; a grouping
that splits keys over workers can reach the mean.  In the chart's unit (imbalance = max_w L_w / L̄ − 1,
:mod:`skewlab.engine.control.metrics`) the bound is::

    one owner per key:  max(T / n, h) / (T / n) − 1 = max(0, h · n / T − 1)
    keys split:         0

It is the d = 1 case of the condition in Nasir et al., ICDE 2016 (nasir-icde16-dchoices-wchoices,
Sec. III, FINDOPTIMALCHOICES): a key with d workers to choose from can be balanced only if
p_1 ≤ d / n, so a key heavier than 1/n of the stream overloads its single owner.  Whether a grouping gives each
key one owner is its ``single_owner`` flag (:mod:`skewlab.engine.algorithms.registry`); a grouping the
dashboard cannot load (a user's, not importable here) is treated as single-owner, the higher bound.

``h`` is the interval's rank-0 hot key as the engine records it (``hot_keys``,
:meth:`skewlab.storage.store.Store.hottest_keys`).  Deviation: the bound is in tuples, which is the
load unit of the linear cost model; for a run whose operator has another cost model (the join's,
run config ``cost_model``) no bound is drawn rather than one in the wrong unit.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping, Sequence

__all__ = ["bound", "bound_series", "single_owner"]


@lru_cache(maxsize=256)
def single_owner(algorithm: str | None) -> bool:
    """Whether grouping ``algorithm`` gives every key one owner (True for a name the registry does not know)."""
    from skewlab.engine.algorithms import registry

    try:
        return bool(registry.get(str(algorithm)).single_owner)
    except Exception:  # noqa: BLE001 - a user's grouping not importable by the dashboard: the higher bound
        return True


def bound(tuples: Any, n_workers: Any, hottest: Any, one_owner: bool) -> float | None:
    """The best imbalance of an interval (module docstring); None when it cannot be told (no tuples, no
    worker count, or a single-owner grouping's interval without its heaviest key recorded)."""
    if not tuples or not n_workers or int(tuples) <= 0 or int(n_workers) <= 0:
        return None
    if not one_owner:
        return 0.0
    if hottest is None:
        return None
    return max(0.0, float(hottest) * int(n_workers) / float(tuples) - 1.0)


def bound_series(rows: Sequence[Mapping[str, Any]], hottest: Sequence[Mapping[str, Any]],
                 run: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Per interval row (``interval_metrics``): ``bound`` and the hover note ``bound_note`` saying which case
    it is; ``hottest``: :meth:`~skewlab.storage.store.Store.hottest_keys` rows of the same intervals."""
    config = run.get("config") if isinstance(run.get("config"), Mapping) else {}
    linear = (config.get("cost_model") or "linear") == "linear"
    top = {int(h["interval"]): h.get("count") for h in hottest}
    values: list[Any] = []
    notes: list[Any] = []
    for r in rows:
        one = single_owner(r.get("algorithm"))
        b = bound(r.get("tuples"), r.get("n_workers"), top.get(int(r["interval"])), one) if linear else None
        values.append(b)
        if b is None:
            notes.append(None)
        elif one:
            notes.append(f"{r.get('algorithm')}: one owner per key, max(mean, heaviest key "
                         f"{int(top[int(r['interval'])]):,} tuples) over the mean")
        else:
            notes.append(f"{r.get('algorithm')}: keys split, the mean")
    return {"bound": values, "bound_note": notes}
