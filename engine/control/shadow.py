"""Shadow "what-if": the same stream under other groupings, evaluated beside the live one.

Every interval the live controller knows the per-key tuple counts of the interval (in Spark: the
per-(worker, key) aggregates the workers returned, summed over workers).  For each shadow algorithm
the evaluator keeps a complete :class:`~skewlab.engine.control.controller.Controller` of its own (its own grouping,
keyed state, rebalancing and migration accounting) and replays the interval into it: the per-key
counts are expanded into a tuple sequence in a seeded random order and routed with
:func:`~skewlab.engine.algorithms.source_routing.route_sources`, the local runtime's routing step.  So a shadow's
imbalance, replication and migration cost are computed by exactly the code that computes the live ones.

Deviation, documented: the live stream's tuple *order* inside an interval is not known to the driver
(only aggregates travel back), so order-sensitive groupings (PKG, D-Choices, DKG, ...) see a random
interleaving with the same per-key counts.  Intervals larger than ``max_tuples`` are scaled down
proportionally (randomised rounding, seeded) to bound the driver's work; metrics that are ratios
(imbalance, replication, migration cost) are insensitive to that scaling up to sampling noise.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from skewlab.engine.algorithms import registry
from skewlab.engine.control.controller import Controller
from skewlab.engine.algorithms.keys import Vocabulary
from skewlab.engine.algorithms.source_routing import route_sources
from skewlab.engine.operators import is_mergeable, split_key_refusal

__all__ = ["ShadowEvaluator", "default_shadow_names"]


def default_shadow_names(live: str, operator: str = "count", mergeable: bool | None = None) -> list[str]:
    """Every registered grouping except the live one that can serve the run's operator (named
    ``operator``; ``mergeable``: its declaration, ``None``: :func:`skewlab.engine.operators.is_mergeable`
    of the name) by :func:`skewlab.engine.operators.split_key_refusal`."""
    mergeable = is_mergeable(operator, mergeable)
    return [name for name in registry.names()
            if name != live and split_key_refusal(operator, mergeable, name, registry.get(name).single_owner) is None]


class ShadowEvaluator:
    """Keeps one shadow :class:`Controller` per algorithm and feeds it every interval."""

    #: algorithms that join later (:meth:`join`); the class default covers snapshots written without it
    waiting: list[str] = []  # noqa: RUF012 - replaced per instance, never mutated while empty

    def __init__(
        self,
        names: Iterable[str],
        vocab: Vocabulary,
        *,
        n_workers: int,
        n_sources: int = 1,
        seed: int = 0,
        window: int = 10,
        cost_model: str = "linear",
        max_tuples: int = 200_000,
        waiting: Iterable[str] = (),
    ) -> None:
        """``names`` are shadowed from the start; ``waiting`` ones from the interval :meth:`join` admits
        them (the Spark engine lets a shadow join once its numba kernels are compiled, so compiling
        them does not hold the first batches)."""
        self.vocab = vocab
        self.waiting: list[str] = [n for n in waiting if n not in names]
        self.n_sources = int(n_sources)
        self.max_tuples = int(max_tuples)
        self.rng = np.random.default_rng(seed + 7919)
        self.controllers: dict[str, Controller] = {}
        for name in names:
            grouping = registry.create(name, n_workers, n_sources, seed)
            self.controllers[name] = Controller(grouping, vocab, window=window, cost_model=cost_model)

    @property
    def names(self) -> list[str]:
        return list(self.controllers)

    def add(self, name: str, params: Any, like: Controller) -> bool:
        """Shadow ``name`` (with ``params``) from now on, set up like the live controller ``like``
        (workers, sources, seed, window, cost model); False if it is shadowed already.

        The engine calls this for the algorithm a run switches away from, so the what-if keeps
        comparing every algorithm the run has used.  The new shadow starts with empty state.
        """
        if name in self.controllers:
            return False
        if name in self.waiting:
            self.waiting.remove(name)
        g = like.planner
        grouping = registry.create(name, g.n_workers, g.n_sources, g.seed, params)
        self.controllers[name] = Controller(grouping, self.vocab, window=like.window, cost_model=like.cost_model)
        return True

    def join(self, ready: Iterable[str] | None, like: Controller) -> list[str]:
        """Start shadowing the waiting algorithms in ``ready`` (``None``: all of them), set up like the
        live controller ``like`` (:meth:`add`), with empty state from this interval on; returns their names."""
        ready_set = None if ready is None else set(ready)
        joined = [n for n in self.waiting if ready_set is None or n in ready_set]
        for name in joined:
            self.add(name, None, like)
        return joined

    def resize(self, n_workers: int) -> None:
        for c in self.controllers.values():
            c.resize(n_workers)

    def _expand(self, key_ids: np.ndarray, counts: np.ndarray) -> np.ndarray:
        counts = np.asarray(counts, dtype=np.int64)
        total = int(counts.sum())
        if total > self.max_tuples > 0:
            scaled = counts * (self.max_tuples / total)
            counts = np.floor(scaled).astype(np.int64)
            counts += (self.rng.random(counts.size) < (scaled - counts)).astype(np.int64)
        seq = np.repeat(np.asarray(key_ids, dtype=np.int64), counts)
        self.rng.shuffle(seq)
        return seq

    def evaluate(self, key_ids: np.ndarray, counts: np.ndarray) -> list[dict[str, Any]]:
        """Replay one interval (per-key counts) into every shadow; one result row per shadow."""
        seq = self._expand(key_ids, counts)
        fps = self.vocab.fps[seq]
        rows = []
        for name, c in self.controllers.items():
            workers, spent = route_sources(c.planner.router, fps, c.planner.n_sources)
            row = c.end_interval(seq, workers, route_seconds=spent)
            rows.append(
                {
                    "algorithm": name,
                    "imbalance": row["imbalance"],
                    "theta_max_observed": row["theta_max_observed"],
                    "replication": row["replication"] if row["tuples"] else None,  # no keys: undefined
                    "migration_cost": row["migration_cost"],
                    "routing_table_size": row["routing_table_size"],
                }
            )
        return rows
