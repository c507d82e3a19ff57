"""Membership lookups in a sorted array: where each query would sit, and whether it is there.

The pattern ``np.searchsorted`` + clip + equality test recurs wherever a sketch, a routing table or
the controller's statistics hold keys (fingerprints or key ids) in a sorted array and a batch of
keys is looked up in it; :func:`find_sorted` is that pattern once.
"""

from __future__ import annotations

import numpy as np

__all__ = ["find_sorted"]


def find_sorted(hay: np.ndarray, needles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each of ``needles`` looked up in the ascending ``hay``: ``(pos, hit)``; ``hit[i]`` is true where
    ``hay[pos[i]] == needles[i]``, and ``pos`` is the ``np.searchsorted`` position clipped to the last
    entry, so it indexes ``hay`` wherever ``hit`` is true.  An empty ``hay`` gives ``pos`` 0 and no
    hit."""
    needles = np.asarray(needles)
    if hay.size == 0:
        return np.zeros(needles.shape, dtype=np.intp), np.zeros(needles.shape, dtype=bool)
    pos = np.minimum(np.searchsorted(hay, needles), hay.size - 1)
    return pos, hay[pos] == needles
