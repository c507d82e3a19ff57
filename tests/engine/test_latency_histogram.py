"""examples/latency_histogram.py: the streaming histogram's partial states, merged over split workers
and batches, against numpy computed directly — exact while a key has at most ``bins`` distinct values
(then the merged histogram equals the unsplit one, bin for bin), within a rank error of the true
quantiles beyond; ``finish`` gives (p99, p50, n)."""

from __future__ import annotations

import numpy as np
import pytest

from examples.latency_histogram import LatencyHistogram, quantile


def _split(op, codes, values, keys: int, workers: int = 3, batches: int = 4, seed: int = 7):
    """Per key: its partial states of every (worker, batch) share that saw it, and of the whole stream."""
    rng = np.random.default_rng(seed)
    worker = rng.integers(0, workers, codes.size)
    batch = rng.integers(0, batches, codes.size)
    shares: dict[int, list] = {k: [] for k in range(keys)}
    for w in range(workers):
        for b in range(batches):
            sel = (worker == w) & (batch == b)
            for k, state in enumerate(op.partials(codes[sel], keys, values[sel])):
                if np.any(codes[sel] == k):
                    shares[k].append(state)
    return shares, op.partials(codes, keys, values)


def _rank_error(values: np.ndarray, estimate: float, q: float) -> float:
    """How far ``estimate`` is from being a ``q``-quantile of ``values``, in rank (fraction of values)."""
    below, at_most = np.mean(values < estimate), np.mean(values <= estimate)
    return max(0.0, below - q, q - at_most)


def test_few_distinct_values_merge_exactly_to_the_unsplit_histogram():
    op = LatencyHistogram()
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 4, 6000)
    values = rng.integers(0, 150, codes.size).astype(np.float64)  # 150 distinct values < bins
    shares, whole = _split(op, codes, values, 4)
    for k in range(4):
        v = values[codes == k]
        merged = op.merge(shares[k])
        uniq, counts = np.unique(v, return_counts=True)
        assert merged == whole[k] == (uniq.tolist(), counts.tolist(), float(v.min()), float(v.max()))
        assert op.merge(shares[k][::-1]) == merged  # any order
        p99, p50, n = op.finish(merged)
        assert n == v.size
        # between two adjacent values the estimate interpolates: off by at most one value's share
        assert _rank_error(v, p99, 0.99) <= counts.max() / v.size and _rank_error(v, p50, 0.5) <= counts.max() / v.size


def test_many_distinct_values_stay_within_the_rank_error_merged_over_split_workers():
    op = LatencyHistogram()
    rng = np.random.default_rng(2)
    codes = rng.integers(0, 3, 30_000)
    values = rng.lognormal(3.0, 1.0, codes.size)  # latency-like, every value distinct
    shares, whole = _split(op, codes, values, 3)
    for k in range(3):
        v = values[codes == k]
        merged = op.merge(shares[k])
        assert len(merged[0]) == op.bins and sum(merged[1]) == v.size
        assert (merged[2], merged[3]) == (v.min(), v.max())
        for state in (merged, whole[k], op.merge([op.merge(shares[k][:5]), op.merge(shares[k][5:])])):
            assert _rank_error(v, quantile(state, 0.99), 0.99) <= 0.002
            assert _rank_error(v, quantile(state, 0.5), 0.5) <= 0.005
        p99, p50, n = op.finish(merged)
        assert n == v.size and p99 == pytest.approx(np.quantile(v, 0.99), rel=0.05)
        assert p50 == pytest.approx(np.quantile(v, 0.5), rel=0.02)


def test_combine_is_commutative_and_a_single_tuple_is_its_own_histogram():
    op = LatencyHistogram()
    a, b = op.partials(np.zeros(500, np.int64), 1, np.random.default_rng(3).lognormal(size=500))[0], \
        op.partials(np.zeros(400, np.int64), 1, np.random.default_rng(4).lognormal(size=400))[0]
    assert op.combine(a, b) == op.combine(b, a)
    (one,) = op.partials(np.zeros(1, np.int64), 1, np.array([42.0]))
    assert one == ([42.0], [1], 42.0, 42.0) and op.finish(one) == (42.0, 42.0, 1)
