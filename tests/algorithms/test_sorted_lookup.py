"""engine/algorithms/sorted_lookup.py: membership of a batch of keys in a sorted array."""

import numpy as np

from skewlab.engine.algorithms.sorted_lookup import find_sorted


def test_find_sorted_hits_present_keys_and_misses_the_rest_on_both_ends():
    hay = np.array([3, 7, 9, 20], dtype=np.uint64)
    needles = np.array([9, 1, 20, 21, 7, 8], dtype=np.uint64)
    pos, hit = find_sorted(hay, needles)
    assert hit.tolist() == [True, False, True, False, True, False]
    assert pos[hit].tolist() == [2, 3, 1]
    assert (pos >= 0).all() and (pos < hay.size).all()  # every position indexes hay


def test_find_sorted_in_an_empty_array_hits_nothing():
    pos, hit = find_sorted(np.zeros(0, dtype=np.int64), np.array([0, 5], dtype=np.int64))
    assert pos.tolist() == [0, 0] and not hit.any()
