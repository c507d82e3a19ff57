"""skewlab.engine.algorithms.table_lookup: the compiled routing-table and ring lookups equal the binary searches they
replace, at the edges (empty table, one entry, one ring point, keys past the last point), and the
derived indexes are rebuilt after unpickling, also from pickles written before they existed."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from skewlab.engine.algorithms.grouping import RoutingTable
from skewlab.engine.algorithms.groupings.basic import ConsistentHashRing
from skewlab.engine.algorithms.keys import mix64


def _reference_table(t: RoutingTable, fps: np.ndarray, default: np.ndarray) -> np.ndarray:
    out = default.copy()
    if t.keys.size:
        pos = np.searchsorted(t.keys, fps)
        pos[pos == t.keys.size] = 0
        hit = t.keys[pos] == fps
        out[hit] = t.workers[pos[hit]]
    return out


@pytest.mark.parametrize("size", [0, 1, 2, 7, 1000, 6000])
def test_routing_table_lookup_equals_the_binary_search(size):
    rng = np.random.default_rng(size)
    keys = np.unique(rng.integers(0, 2**64, size, dtype=np.uint64))
    if size >= 2:  # adjacent fingerprints and the extremes collide in the home slot / wrap around
        keys = np.unique(np.concatenate([keys, np.array([0, 1, 2, 2**64 - 1], dtype=np.uint64)]))
    t = RoutingTable(keys, rng.integers(0, 50, keys.size))
    fps = np.concatenate([keys, keys[:3], rng.integers(0, 2**64, 4000, dtype=np.uint64)]).astype(np.uint64)
    rng.shuffle(fps)
    default = rng.integers(0, 50, fps.size)
    before = default.copy()
    got = t.lookup(fps, default)
    assert np.array_equal(got, _reference_table(t, fps, default))
    assert np.array_equal(default, before)  # the default is copied, not written
    assert t.lookup(fps[:0], default[:0]).size == 0
    clone = pickle.loads(pickle.dumps(t))
    assert clone._index is None and np.array_equal(clone.lookup(fps, default), got)


def _unmix64(h: int) -> int:
    """Inverse of the SplitMix64 finaliser ``skewlab.engine.algorithms.keys.mix64`` (each step is invertible)."""
    m = 2**64 - 1
    h ^= (h >> 31) ^ (h >> 62)
    h = (h * pow(0x94D049BB133111EB, -1, 2**64)) & m
    h ^= (h >> 27) ^ (h >> 54)
    h = (h * pow(0xBF58476D1CE4E5B9, -1, 2**64)) & m
    h ^= (h >> 30) ^ (h >> 60)
    return h


@pytest.mark.parametrize("n,replicas", [(1, 1), (2, 1), (3, 7), (50, 128), (50, 1000)])
def test_ring_lookup_equals_the_binary_search(n, replicas):
    ring = ConsistentHashRing(n, replicas, seed=3)
    rng = np.random.default_rng(n * replicas)
    # random keys, and keys whose position is exactly on a point, one past it, or past the last
    # point (wraps to point 0)
    pts = [int(p) for p in ring.points[[0, -1]]] + [int(p) for p in rng.choice(ring.points, 5)]
    edge = [_unmix64(p) for p in pts] + [_unmix64((p + 1) % 2**64) for p in pts] + [_unmix64(2**64 - 1)]
    fps = np.concatenate([rng.integers(0, 2**64, 20000, dtype=np.uint64), np.array(edge, dtype=np.uint64)])
    h = mix64(fps)
    assert set(int(p) for p in ring.points[[0, -1]]) <= set(int(x) for x in h)
    pos = np.searchsorted(ring.points, h, side="left")
    pos[pos == ring.points.size] = 0
    want = ring.owners[pos]
    assert np.array_equal(ring.lookup(fps), want)
    clone = pickle.loads(pickle.dumps(ring))
    assert clone._index is None and np.array_equal(clone.lookup(fps), want)
