"""examples/value_mean.py and examples/value_variance.py: partial states of a key split over workers
and batches merge to the mean / population variance of all its values (numpy's, computed directly)."""

from __future__ import annotations

import numpy as np
import pytest

from examples.value_mean import ValueMean
from examples.value_variance import ValueVariance


@pytest.mark.parametrize("op, truth", [(ValueMean(), np.mean), (ValueVariance(), np.var)])
def test_split_shares_merge_to_the_truth(op, truth) -> None:
    rng = np.random.default_rng(7)
    codes = rng.integers(0, 5, 4000)
    values = rng.integers(0, 1000, 4000).astype(np.float64)
    worker = rng.integers(0, 3, codes.size)
    batch = rng.integers(0, 4, codes.size)
    shares: dict[int, list] = {k: [] for k in range(5)}
    for w in range(3):
        for b in range(4):
            sel = (worker == w) & (batch == b)
            for k, state in enumerate(op.partials(codes[sel], 5, values[sel])):
                if np.any(codes[sel] == k):
                    shares[k].append(state)
    for k in range(5):
        result, n = op.finish(op.merge(shares[k]))
        assert n == int(np.sum(codes == k)) and result == pytest.approx(truth(values[codes == k]))
