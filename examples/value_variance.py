"""A user-defined mergeable operator whose per-tuple work dominates: the variance of each key's
values over the window, updated tuple by tuple with Welford's online algorithm (Welford,
Technometrics 1962) — the per-record code a user ports from a record-at-a-time engine, one Python
step per tuple, not vectorised.

Run it on the engine (from the repository root)::

    PYTHONPATH=. skewlab engine --operator examples.value_variance:ValueVariance --algorithm dchoices

A key's partial state is ``(n, mean, M2)`` (M2: the sum of squared deviations from the mean); the
window's batches and the shares of a key split over several workers merge with Chan, Golub & LeVeque's
pairwise update (1979), so any grouping may serve it.  The result is the population variance
``M2 / n``; column ``n``: the tuples it covers.  ``bench/bench_spark.py`` runs it to show what balancing
buys when the operator, not the engine, is the work (docs/results/engine.md).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from skewlab.engine.operators import MergeableOperator


class ValueVariance(MergeableOperator):
    """Per-key variance of the values in the window (Welford per tuple, Chan et al. to merge)."""

    name: ClassVar[str] = "value_variance"
    result_type: ClassVar[pa.DataType] = pa.float64()
    columns: ClassVar[tuple[tuple[str, pa.DataType], ...]] = (("n", pa.int64()),)

    def partials(self, codes: np.ndarray, n_keys: int, values: np.ndarray | None) -> list[Any]:
        n = [0] * n_keys
        mean = [0.0] * n_keys
        m2 = [0.0] * n_keys
        for k, x in zip(codes.tolist(), values.tolist()):
            n[k] += 1
            delta = x - mean[k]
            mean[k] += delta / n[k]
            m2[k] += delta * (x - mean[k])
        return list(zip(n, mean, m2))

    def combine(self, a: tuple[int, float, float], b: tuple[int, float, float]) -> tuple[int, float, float]:
        na, ma, qa = a
        nb, mb, qb = b
        n = na + nb
        if n == 0:
            return (0, 0.0, 0.0)
        delta = mb - ma
        return (n, ma + delta * nb / n, qa + qb + delta * delta * na * nb / n)

    def finish(self, state: tuple[int, float, float]) -> tuple:
        n, _, m2 = state
        return (m2 / n if n else float("nan"), int(n))
