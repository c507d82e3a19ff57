"""The built-in keyed operators, all on :mod:`skewlab.engine.operators.base`: ``count``, ``sum``,
``mean``, ``min``, ``max`` of the tuples' value, ``distinct`` (approximate distinct values per key,
Apache DataSketches HLL) and ``join`` (a sliding-window self-join on the key).

Each is windowed over the engine's ``window`` micro-batches: the result of key ``k`` at batch ``b``
covers ``k``'s tuples of batches ``(b - window, b]``.  All but ``join`` are mergeable.  ``count``,
``sum``, ``mean``, ``min`` and ``max`` combine in the source task (:attr:`KeyedOperator.combined`):
a row per (key, worker) with the tuples' count and their sum, minimum or maximum; ``distinct`` and
``join`` ship a row per tuple.  Their capabilities are declared like a user's
(:mod:`skewlab.engine.operators.base`): ``count``'s partial state is its tuple count
(:attr:`~KeyedOperator.partial_is_tuple_count`: the ring path), ``join``'s values are the tuples'
positions (:attr:`~KeyedOperator.values_are_positions`); ``count``, ``sum``, ``min`` and ``max``
declare a scalar :attr:`~KeyedOperator.share_type`, so a split key's shares merge as one column
(:meth:`~MergeableOperator.merge_shares`: ``numpy.ufunc.at`` in row order, the same numbers as ``combine``
folded over the rows).
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

import numpy as np
import pyarrow as pa
from numba import njit

from skewlab.engine.operators.base import KeyedOperator, MergeableOperator

__all__ = ["BUILTINS", "Count", "Distinct", "JOIN_MASK", "Join", "Max", "Mean", "Min", "Sum", "join_probe"]


def _groups(codes: np.ndarray, n_keys: int, values: np.ndarray) -> list[np.ndarray]:
    """The values of each key, in arrival order (one stable sort for the batch)."""
    order = np.argsort(codes, kind="stable")
    bounds = np.cumsum(np.bincount(codes, minlength=n_keys))[:-1]
    return np.split(values[order], bounds)


def _tuple_counts(codes: np.ndarray, n_keys: int, tuples: np.ndarray) -> np.ndarray:
    """Tuples per key of combined rows (``tuples[i]``: the tuples row ``i`` stands for), int64."""
    return np.bincount(codes, weights=tuples, minlength=n_keys).astype(np.int64)


def _fold_shares(groups: np.ndarray, n_groups: int, shares: pa.Array, ufunc: np.ufunc, start: float | int,
                 dtype: type) -> np.ndarray:
    """Each key's shares folded by ``ufunc`` in row order from ``start``
    (:meth:`~skewlab.engine.operators.MergeableOperator.merge_shares` of a scalar share): the same
    numbers as ``combine`` folded left over the key's rows."""
    out = np.full(n_groups, start, dtype=dtype)
    ufunc.at(out, groups, shares.to_numpy(zero_copy_only=False).astype(dtype, copy=False))
    return out


class Count(MergeableOperator):
    """Tuples per key in the window (the windowed word count of the papers)."""

    name: ClassVar[str] = "count"
    needs_value: ClassVar[bool] = False
    result_type: ClassVar[pa.DataType] = pa.int64()
    partial_is_tuple_count: ClassVar[bool] = True  # the window is the ring of counts
    share_type: ClassVar[pa.DataType | None] = pa.int64()  # a split key's shares merge as a column

    combined: ClassVar[tuple[tuple[str, pa.DataType], ...] | None] = ()  # the engine's ``tuples`` is all

    def partials(self, codes: np.ndarray, n_keys: int, values: np.ndarray | None) -> list[Any]:
        return np.bincount(codes, minlength=n_keys).tolist()

    def pre_aggregate(self, codes: np.ndarray, n_groups: int, values: np.ndarray | None) -> list[np.ndarray]:
        return []

    def partials_combined(self, codes: np.ndarray, n_keys: int, tuples: np.ndarray,
                          columns: Sequence[np.ndarray]) -> list[Any]:
        return _tuple_counts(codes, n_keys, tuples).tolist()

    def combine(self, a: int, b: int) -> int:
        return a + b

    def finish(self, state: int) -> tuple:
        return (int(state),)

    def merge_shares(self, groups: np.ndarray, n_groups: int, shares: pa.Array) -> list[np.ndarray]:
        return [_fold_shares(groups, n_groups, shares, np.add, 0, np.int64)]


class Sum(MergeableOperator):
    """Sum of the value per key in the window."""

    name: ClassVar[str] = "sum"
    combined: ClassVar[tuple[tuple[str, pa.DataType], ...] | None] = (("sum", pa.float64()),)
    share_type: ClassVar[pa.DataType | None] = pa.float64()

    def partials(self, codes: np.ndarray, n_keys: int, values: np.ndarray | None) -> list[Any]:
        return np.bincount(codes, weights=values, minlength=n_keys).tolist()

    def pre_aggregate(self, codes: np.ndarray, n_groups: int, values: np.ndarray | None) -> list[np.ndarray]:
        return [np.bincount(codes, weights=values, minlength=n_groups)]

    def partials_combined(self, codes: np.ndarray, n_keys: int, tuples: np.ndarray,
                          columns: Sequence[np.ndarray]) -> list[Any]:
        return np.bincount(codes, weights=columns[0], minlength=n_keys).tolist()

    def combine(self, a: float, b: float) -> float:
        return a + b

    def finish(self, state: float) -> tuple:
        return (float(state),)

    def merge_shares(self, groups: np.ndarray, n_groups: int, shares: pa.Array) -> list[np.ndarray]:
        return [_fold_shares(groups, n_groups, shares, np.add, 0.0, np.float64)]


class Mean(MergeableOperator):
    """Mean of the value per key in the window; column ``n``: the tuples it averages."""

    name: ClassVar[str] = "mean"
    columns: ClassVar[tuple[tuple[str, pa.DataType], ...]] = (("n", pa.int64()),)

    combined: ClassVar[tuple[tuple[str, pa.DataType], ...] | None] = (("sum", pa.float64()),)

    def partials(self, codes: np.ndarray, n_keys: int, values: np.ndarray | None) -> list[Any]:
        sums = np.bincount(codes, weights=values, minlength=n_keys)
        counts = np.bincount(codes, minlength=n_keys)
        return list(zip(sums.tolist(), counts.tolist()))

    def pre_aggregate(self, codes: np.ndarray, n_groups: int, values: np.ndarray | None) -> list[np.ndarray]:
        return [np.bincount(codes, weights=values, minlength=n_groups)]

    def partials_combined(self, codes: np.ndarray, n_keys: int, tuples: np.ndarray,
                          columns: Sequence[np.ndarray]) -> list[Any]:
        sums = np.bincount(codes, weights=columns[0], minlength=n_keys)
        return list(zip(sums.tolist(), _tuple_counts(codes, n_keys, tuples).tolist()))

    def combine(self, a: tuple[float, int], b: tuple[float, int]) -> tuple[float, int]:
        return (a[0] + b[0], a[1] + b[1])

    def finish(self, state: tuple[float, int]) -> tuple:
        return (state[0] / state[1] if state[1] else float("nan"), int(state[1]))


class Min(MergeableOperator):
    """Smallest value per key in the window."""

    name: ClassVar[str] = "min"

    combined: ClassVar[tuple[tuple[str, pa.DataType], ...] | None] = (("min", pa.float64()),)
    share_type: ClassVar[pa.DataType | None] = pa.float64()

    def partials(self, codes: np.ndarray, n_keys: int, values: np.ndarray | None) -> list[Any]:
        return self.pre_aggregate(codes, n_keys, values)[0].tolist()

    def pre_aggregate(self, codes: np.ndarray, n_groups: int, values: np.ndarray | None) -> list[np.ndarray]:
        out = np.full(n_groups, np.inf)
        np.minimum.at(out, codes, values)
        return [out]

    def partials_combined(self, codes: np.ndarray, n_keys: int, tuples: np.ndarray,
                          columns: Sequence[np.ndarray]) -> list[Any]:
        return self.pre_aggregate(codes, n_keys, columns[0])[0].tolist()

    def combine(self, a: float, b: float) -> float:
        return min(a, b)

    def finish(self, state: float) -> tuple:
        return (float(state),)

    def merge_shares(self, groups: np.ndarray, n_groups: int, shares: pa.Array) -> list[np.ndarray]:
        return [_fold_shares(groups, n_groups, shares, np.minimum, np.inf, np.float64)]


class Max(MergeableOperator):
    """Largest value per key in the window."""

    name: ClassVar[str] = "max"

    combined: ClassVar[tuple[tuple[str, pa.DataType], ...] | None] = (("max", pa.float64()),)
    share_type: ClassVar[pa.DataType | None] = pa.float64()

    def partials(self, codes: np.ndarray, n_keys: int, values: np.ndarray | None) -> list[Any]:
        return self.pre_aggregate(codes, n_keys, values)[0].tolist()

    def pre_aggregate(self, codes: np.ndarray, n_groups: int, values: np.ndarray | None) -> list[np.ndarray]:
        out = np.full(n_groups, -np.inf)
        np.maximum.at(out, codes, values)
        return [out]

    def partials_combined(self, codes: np.ndarray, n_keys: int, tuples: np.ndarray,
                          columns: Sequence[np.ndarray]) -> list[Any]:
        return self.pre_aggregate(codes, n_keys, columns[0])[0].tolist()

    def combine(self, a: float, b: float) -> float:
        return max(a, b)

    def finish(self, state: float) -> tuple:
        return (float(state),)

    def merge_shares(self, groups: np.ndarray, n_groups: int, shares: pa.Array) -> list[np.ndarray]:
        return [_fold_shares(groups, n_groups, shares, np.maximum, -np.inf, np.float64)]


class Distinct(MergeableOperator):
    """Approximate number of distinct values per key in the window: an Apache DataSketches HLL
    sketch (Flajolet et al.'s HyperLogLog as DataSketches implements it) per key and batch, merged
    by an HLL union over the window's batches and over the workers of a split key.

    ``lg_k``: log2 of the sketch's registers; relative standard error ≈ 1.04 / sqrt(2**lg_k)
    (0.8 % at the default 14).  A partial state is the sketch's compact serialisation (bytes: the
    sketch objects themselves do not pickle); a key with few values stays in the sketch's sparse
    list mode, a few bytes."""

    name: ClassVar[str] = "distinct"

    def __init__(self, lg_k: int = 14) -> None:
        if not 4 <= int(lg_k) <= 21:
            raise ValueError(f"distinct: lg_k must be in [4, 21], got {lg_k}")
        self.lg_k = int(lg_k)

    def partials(self, codes: np.ndarray, n_keys: int, values: np.ndarray | None) -> list[Any]:
        import datasketches as ds

        out = []
        for vals in _groups(codes, n_keys, np.asarray(values)):
            sketch = ds.hll_sketch(self.lg_k, ds.tgt_hll_type.HLL_8)
            for v in np.unique(vals).tolist():  # one update per distinct value of the batch
                sketch.update(v)
            out.append(sketch.serialize_compact())
        return out

    def combine(self, a: bytes, b: bytes) -> bytes:
        import datasketches as ds

        union = ds.hll_union(self.lg_k)
        union.update(ds.hll_sketch.deserialize(a))
        union.update(ds.hll_sketch.deserialize(b))
        return union.get_result(ds.tgt_hll_type.HLL_8).serialize_compact()

    def merge(self, states: Sequence[bytes]) -> bytes:
        import datasketches as ds

        union = ds.hll_union(self.lg_k)
        for s in states:
            union.update(ds.hll_sketch.deserialize(s))
        return union.get_result(ds.tgt_hll_type.HLL_8).serialize_compact()

    def finish(self, state: bytes) -> tuple:
        import datasketches as ds

        return (float(ds.hll_sketch.deserialize(state).get_estimate()),)


#: the join value of a pair of tuples with values a, b: ``(a XOR b) AND JOIN_MASK`` (symmetric, so a
#: batch's pairs give the same sum in any arrival order; masked so sums of 1e14 pairs fit int64)
JOIN_MASK = 0xFFFF


@njit(cache=True)
def join_probe(new, old):  # pragma: no cover - compiled
    """Sum of the join values of every new tuple with every ``old`` tuple and every earlier new one.

    ``new``, ``old``: int64 tuple values of one key.  Work ``len(new) * len(old) + len(new)**2 / 2``."""
    acc = np.int64(0)
    mask = np.int64(JOIN_MASK)
    for i in range(new.size):
        a = new[i]
        for j in range(old.size):
            acc += (a ^ old[j]) & mask
        for j in range(i):
            acc += (a ^ new[j]) & mask
    return acc


class Join(KeyedOperator):
    """A sliding-window self-join on the key (fang-hpdc17's Stock join): each new tuple of key ``k``
    probes all of ``k``'s tuples in the window — earlier batches and the earlier ones of its own
    batch — and evaluates the join function on every pair (:func:`join_probe`), so a key's work grows
    with its window.  Result: the pairs joined; column ``checksum``: the sum of their join values.

    Not mergeable: the pairs of a key's tuples on two workers are never formed."""

    name: ClassVar[str] = "join"
    result_type: ClassVar[pa.DataType] = pa.int64()
    columns: ClassVar[tuple[tuple[str, pa.DataType], ...]] = (("checksum", pa.int64()),)
    cost_model: ClassVar[str] = "join"
    values_are_positions: ClassVar[bool] = True  # a tuple's value is its position: pairs are told apart by it

    def partials(self, codes: np.ndarray, n_keys: int, values: np.ndarray | None) -> list[Any]:
        return _groups(codes, n_keys, np.asarray(values, dtype=np.int64))

    def concat(self, first: np.ndarray, then: np.ndarray) -> np.ndarray:
        return np.concatenate([first, then])

    def emit(self, window: Sequence[np.ndarray], new: np.ndarray) -> tuple:
        old = np.concatenate(window) if len(window) else np.zeros(0, np.int64)
        pairs = new.size * old.size + new.size * (new.size - 1) // 2
        return (int(pairs), int(join_probe(new, old)))


#: the built-in operators by name
BUILTINS: dict[str, type[KeyedOperator]] = {c.name: c for c in (Count, Sum, Mean, Min, Max, Distinct, Join)}
