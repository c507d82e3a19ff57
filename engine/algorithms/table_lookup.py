"""Compiled lookups behind the routing tables and the consistent-hash ring (speed only).

Both structures keep their sorted arrays (the definition, and what is pickled); this module adds
derived indexes so that routing a tuple costs a few nanoseconds instead of a binary search:
``np.searchsorted`` of unsorted queries in a sorted array mispredicts at every level (timings:
docs/design-notes.md, "engine/algorithms/table_lookup.py").

* :func:`build_key_index` / :func:`lookup_keys` — an open-addressing hash index (linear probing,
  power-of-two size >= 2 × entries, Fibonacci hashing of the fingerprint for the home slot, key and
  value side by side in one 16-byte slot, the home slot of the key ``_PREFETCH_AHEAD`` tuples ahead
  prefetched) of the explicit routing table A (Fang et al. Sec. III, Gedik Sec. 3's explicit hash): ``A[k]``
  where k is in the table, else the base hash.  Exact: a key matches only itself.
* :func:`build_ring_index` / :func:`lookup_ring` — for a sorted ring of points, ``start[b]`` = the
  first point at or after ``b · 2^(64 − bits)`` with ``2^bits >= points``, so a key's successor is
  found from its bucket's start by a short forward scan (on average under one step).  The result is
  exactly ``np.searchsorted(points, mix64(fp), side="left")``, wrapping to point 0.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from skewlab.engine.algorithms.keys import mix64_scalar
from skewlab.engine.algorithms.sketches import pow2_bits, prefetch

__all__ = ["build_key_index", "build_ring_index", "lookup_keys", "lookup_ring"]

_FIBONACCI = 0x9E3779B97F4A7C15  # 2^64 / golden ratio: Fibonacci hashing of the home slot
_PREFETCH_AHEAD = 16  # prefetch distance (tuples)


@njit(cache=True, _nrt=False)
def _fill_key_index(keys, values, slots, shift):  # pragma: no cover - compiled
    mask = np.uint64(slots.size // 2 - 1)
    for i in range(keys.size):
        j = (keys[i] * np.uint64(_FIBONACCI)) >> np.uint64(shift)
        while slots[j + j + np.uint64(1)] != 0:
            j = (j + np.uint64(1)) & mask
        slots[j + j] = keys[i]
        slots[j + j + np.uint64(1)] = np.uint64(values[i] + 1)


def build_key_index(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, int]:
    """Hash index of distinct ``uint64`` keys with non-negative ``values``: ``(slots, shift)``; slot j
    is the pair ``slots[2j] = key``, ``slots[2j + 1] = value + 1`` (0 = empty), so a probe reads one
    cache line."""
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    values = np.ascontiguousarray(values, dtype=np.int64)
    if keys.size and values.min() < 0:
        raise ValueError("index values must be >= 0")
    bits = pow2_bits(2 * keys.size)
    slots = np.zeros(2 << bits, dtype=np.uint64)
    if keys.size:
        _fill_key_index(keys, values, slots, 64 - bits)
    return slots, 64 - bits


@njit(cache=True, _nrt=False)
def _lookup_keys(fps, slots, shift, out):  # pragma: no cover - compiled
    mask = np.uint64(slots.size // 2 - 1)
    sh = np.uint64(shift)
    m = fps.size
    for x in range(m):
        # the home slot of the key _PREFETCH_AHEAD tuples ahead (a large table does not fit the caches)
        ahead = fps[min(x + _PREFETCH_AHEAD, m - 1)]
        prefetch(slots, ((ahead * np.uint64(_FIBONACCI)) >> sh) * np.uint64(2))
        fp = fps[x]
        j = (fp * np.uint64(_FIBONACCI)) >> sh
        while True:
            v = slots[j + j + np.uint64(1)]
            if v == 0:
                break
            if slots[j + j] == fp:
                out[x] = np.int64(v) - 1
                break
            j = (j + np.uint64(1)) & mask


def lookup_keys(index: tuple[np.ndarray, int], fps: np.ndarray, default: np.ndarray, *,
                inplace: bool = False) -> np.ndarray:
    """The value of every fingerprint in the index, else ``default``: a new array, or ``default``
    itself overwritten when ``inplace`` (an ``int64`` C-contiguous array the caller owns)."""
    if inplace and default.dtype == np.int64 and default.flags.c_contiguous and default.flags.writeable:
        out = default
    else:
        out = np.array(default, dtype=np.int64, copy=True)
    if out.size:
        slots, shift = index
        _lookup_keys(np.ascontiguousarray(fps, dtype=np.uint64), slots, shift, out)
    return out


def build_ring_index(points: np.ndarray) -> tuple[np.ndarray, int]:
    """``(start, shift)`` for a sorted ``uint64`` ring: ``start[b]`` = first point >= ``b << shift``."""
    points = np.asarray(points, dtype=np.uint64)
    bits = pow2_bits(points.size)
    shift = 64 - bits
    bounds = np.arange(1 << bits, dtype=np.uint64) << np.uint64(shift)
    start = np.searchsorted(points, bounds, side="left").astype(np.int64)
    return start, shift


@njit(cache=True, _nrt=False)
def _lookup_ring(fps, points, owners, start, shift, out):  # pragma: no cover - compiled
    size = points.size
    sh = np.uint64(shift)
    for x in range(fps.size):
        h = mix64_scalar(fps[x])
        p = start[h >> sh]
        while p < size and points[p] < h:
            p += 1
        if p == size:
            p = 0
        out[x] = owners[p]


def lookup_ring(index: tuple[np.ndarray, int], points: np.ndarray, owners: np.ndarray,
                fps: np.ndarray) -> np.ndarray:
    """Owner of the first ring point at or after ``mix64(fp)`` (wrapping), for every fingerprint."""
    fps = np.ascontiguousarray(fps, dtype=np.uint64)
    out = np.empty(fps.size, dtype=np.int64)
    if fps.size:
        start, shift = index
        _lookup_ring(fps, points, owners, start, shift, out)
    return out
