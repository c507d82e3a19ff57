"""The tests' ground truths (tests/spark_truth.py) against a brute-force definition: the key's
tuples of every batch id ``b - window + 1 .. b`` summed one id at a time, for windows shorter and
longer than the run and with gaps between committed batches."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from tests.spark_truth import ewma_truth, window_batches, windowed_truth


def _per_batch(seed: int) -> dict[int, Counter]:
    rng = random.Random(seed)
    ids = sorted(rng.sample(range(40), 15))  # gaps: batches that committed nothing are absent
    return {b: Counter(rng.choice("abcdef") for _ in range(rng.randint(1, 12))) for b in ids}


@pytest.mark.parametrize("window", [1, 2, 5, 17, 100_000])
@pytest.mark.parametrize("seed", [0, 1])
def test_windowed_truth_is_the_brute_force_window_sum(window, seed):
    pb = _per_batch(seed)
    brute = {(b, k): sum(pb.get(j, Counter())[k] for j in range(max(b - window + 1, -1), b + 1))
             for b, c in pb.items() for k in c}
    assert windowed_truth(pb, window) == brute


@pytest.mark.parametrize("window", [1, 3, 100_000])
def test_ewma_truth_folds_the_window_oldest_first(window):
    pb = _per_batch(2)
    alpha = 0.3
    brute = {}
    for b, c in pb.items():
        for k in c:
            m = None
            for j in range(max(b - window + 1, -1), b + 1):
                x = pb.get(j, Counter())[k]
                if x:
                    m = float(x) if m is None else alpha * x + (1 - alpha) * m
            brute[(b, k)] = m
    assert ewma_truth(pb, window, alpha) == brute


def test_window_batches_excludes_the_batch_itself_on_request():
    pb = {0: 1, 3: 1, 4: 1, 9: 1}
    assert window_batches(pb, 4, 2) == [3, 4]
    assert window_batches(pb, 4, 2, own=False) == [3]
    assert window_batches(pb, 9, 100_000) == [0, 3, 4, 9]
