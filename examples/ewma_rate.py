"""A user-defined keyed operator: the exponentially weighted moving average (EWMA) of each key's
tuples per micro-batch, over the batches in the window in which the key had tuples.

Run it on the engine (from the repository root)::

    PYTHONPATH=. skewlab engine --operator examples.ewma_rate:EwmaRate --algorithm mixed

The partial state of a key in a batch is its tuple count (vectorised over the worker's batch:
one ``np.bincount``); the result folds the window's counts oldest first,
``m = alpha * count + (1 - alpha) * m``.  The fold depends on the order of the batches, so the
operator is not mergeable: a split-key grouping (pkg, dchoices, ...) is refused for it.

It combines (``combined = ()``): the source task ships one row per (key, worker) carrying the tuple
count, and the worker's partial state of a key is the sum of its rows' counts.

Its partial state *is* the key's tuple count, and it says so (``partial_is_tuple_count = True``, the
capability ``count`` declares too): the worker then keeps its window as integer counts in its dense
ring, with no partial states to store, pickle or move, and calls :meth:`EwmaRate.emit` with the key's
non-zero counts of the window.  The engine checks the declaration on a sample batch at start-up.
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

import numpy as np
import pyarrow as pa

from skewlab.engine.operators import KeyedOperator

#: the weight of the newest batch
ALPHA = 0.5


class EwmaRate(KeyedOperator):
    """Per-key EWMA of tuples per batch (key-only: reads no value)."""

    name: ClassVar[str] = "ewma_rate"
    needs_value: ClassVar[bool] = False
    result_type: ClassVar[pa.DataType] = pa.float64()
    combined: ClassVar[tuple] = ()  # a combined row needs only the engine's tuple count
    partial_is_tuple_count: ClassVar[bool] = True  # the window is kept as counts in the engine's ring

    def partials(self, codes: np.ndarray, n_keys: int, values: np.ndarray | None) -> list[Any]:
        return np.bincount(codes, minlength=n_keys).tolist()

    def pre_aggregate(self, codes: np.ndarray, n_groups: int, values: np.ndarray | None) -> list[np.ndarray]:
        return []

    def partials_combined(self, codes: np.ndarray, n_keys: int, tuples: np.ndarray,
                          columns: Sequence[np.ndarray]) -> list[Any]:
        return np.bincount(codes, weights=tuples, minlength=n_keys).astype(np.int64).tolist()

    def concat(self, first: int, then: int) -> int:
        return first + then

    def emit(self, window: Sequence[int], new: int) -> tuple:
        m = None
        for count in [*window, new]:
            m = float(count) if m is None else ALPHA * count + (1 - ALPHA) * m
        return (m,)
