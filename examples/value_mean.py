"""A user-defined mergeable operator: the mean of each key's values over the window, written as a
user would write it on skewlab's operator interface (the built-in ``mean`` computes the same).

Run it on the engine (from the repository root; the generator draws seeded values itself, Kafka and
file sources name theirs with ``--value-field``)::

    PYTHONPATH=. skewlab engine --operator examples.value_mean:ValueMean --algorithm dchoices

A key's partial state for a batch is ``(sum, count)`` of its values, computed for the worker's whole
batch with two ``np.bincount``; partial states of the window's batches and of a key split over
several workers merge by adding them, so any grouping may serve it.  ``bench/bench_spark.py
--operator examples.value_mean:ValueMean`` compares it with the same mean in plain PySpark
(docs/results/engine.md).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from skewlab.engine.operators import MergeableOperator


class ValueMean(MergeableOperator):
    """Per-key mean of the values in the window; column ``n``: the tuples averaged."""

    name: ClassVar[str] = "value_mean"
    result_type: ClassVar[pa.DataType] = pa.float64()
    columns: ClassVar[tuple[tuple[str, pa.DataType], ...]] = (("n", pa.int64()),)

    def partials(self, codes: np.ndarray, n_keys: int, values: np.ndarray | None) -> list[Any]:
        sums = np.bincount(codes, weights=values, minlength=n_keys)
        counts = np.bincount(codes, minlength=n_keys)
        return list(zip(sums.tolist(), counts.tolist()))

    def combine(self, a: tuple[float, int], b: tuple[float, int]) -> tuple[float, int]:
        return (a[0] + b[0], a[1] + b[1])

    def finish(self, state: tuple[float, int]) -> tuple:
        total, n = state
        return (total / n, int(n))
