"""Per-worker keyed state of the stateful operator, and where every key's state lives.

The operator keeps, for every (key, worker) pair, a windowed count: the tuples of that key the worker
processed in the last ``window`` intervals (Fang et al. Sec. III: window-based state S(k, w)).  The
state is stored as ``window`` interval slots; each slot is a sorted array of pair codes
``key_id << WORKER_BITS | worker`` with their counts.  Sliding the window drops the oldest slot.

Migration (:meth:`KeyedWindowState.move`) relabels the worker of every slot entry of the moved keys,
so the state travels with all its history and nothing is lost: the merged per-key result (sum over
workers) is invariant under routing, migration, worker-count changes and algorithm switches.  That
invariant is what the tests check against the ground truth.
"""

from __future__ import annotations

from collections import deque

import numpy as np

__all__ = ["KeyedWindowState", "WORKER_BITS", "aggregate_pairs", "decode", "encode"]

WORKER_BITS = 20
_WMASK = np.int64((1 << WORKER_BITS) - 1)


def encode(key_ids: np.ndarray, workers: np.ndarray) -> np.ndarray:
    """Pair codes ``key << WORKER_BITS | worker``."""
    return (np.asarray(key_ids, dtype=np.int64) << WORKER_BITS) | np.asarray(workers, dtype=np.int64)


def decode(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`encode`: ``(key_ids, workers)``."""
    codes = np.asarray(codes, dtype=np.int64)
    return codes >> WORKER_BITS, codes & _WMASK


def aggregate_pairs(codes: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sum ``weights`` (default 1 per code) per distinct code; returns sorted unique codes and sums."""
    codes = np.asarray(codes, dtype=np.int64)
    if codes.size == 0:
        return codes.copy(), np.zeros(0, dtype=np.int64)
    uniq, inverse = np.unique(codes, return_inverse=True)
    if weights is None:
        sums = np.bincount(inverse, minlength=uniq.size).astype(np.int64)
    else:
        sums = np.bincount(inverse, weights=np.asarray(weights), minlength=uniq.size).astype(np.int64)
    return uniq, sums


class KeyedWindowState:
    """Windowed per-(key, worker) counts over the last ``window`` intervals."""

    def __init__(self, window: int) -> None:
        if int(window) < 1:
            raise ValueError(f"window must be >= 1 interval, got {window}")
        self.window = int(window)
        self.slots: deque[tuple[np.ndarray, np.ndarray]] = deque()
        self._merged: tuple[np.ndarray, np.ndarray] | None = None

    # ------------------------------------------------------------------ updates
    def add_interval(self, codes: np.ndarray, counts: np.ndarray) -> None:
        """Append one interval's aggregated (pair code, count) and slide the window."""
        codes, counts = aggregate_pairs(codes, counts)
        self.slots.append((codes, counts))
        while len(self.slots) > self.window:
            self.slots.popleft()
        self._merged = None

    def move(self, key_ids: np.ndarray, targets: np.ndarray) -> tuple[float, int]:
        """Move all state of ``key_ids[i]`` to worker ``targets[i]``.

        Returns ``(state units moved, number of keys that had state elsewhere)``.
        """
        key_ids = np.asarray(key_ids, dtype=np.int64)
        targets = np.asarray(targets, dtype=np.int64)
        if key_ids.size == 0 or not self.slots:
            return 0.0, 0
        order = np.argsort(key_ids, kind="stable")
        sk, st = key_ids[order], targets[order]
        moved_units = 0.0
        moved_keys: list[np.ndarray] = []
        new_slots = deque()
        for codes, counts in self.slots:
            keys, workers = decode(codes)
            pos = np.searchsorted(sk, keys)
            pos[pos == sk.size] = 0
            hit = sk[pos] == keys
            new_workers = workers.copy()
            new_workers[hit] = st[pos[hit]]
            changed = new_workers != workers
            if changed.any():
                moved_units += float(counts[changed].sum())
                moved_keys.append(keys[changed])
                codes, counts = aggregate_pairs(encode(keys, new_workers), counts)
            new_slots.append((codes, counts))
        self.slots = new_slots
        self._merged = None
        n_keys = int(np.unique(np.concatenate(moved_keys)).size) if moved_keys else 0
        return moved_units, n_keys

    # ------------------------------------------------------------------ reads
    def merged(self) -> tuple[np.ndarray, np.ndarray]:
        """Window totals per (key, worker) pair: sorted codes and counts."""
        if self._merged is None:
            if not self.slots:
                self._merged = (np.zeros(0, np.int64), np.zeros(0, np.int64))
            else:
                self._merged = aggregate_pairs(
                    np.concatenate([c for c, _ in self.slots]), np.concatenate([n for _, n in self.slots])
                )
        return self._merged

    def per_key(self) -> tuple[np.ndarray, np.ndarray]:
        """Merged per-key results (sum over workers): sorted key ids and window counts."""
        codes, counts = self.merged()
        keys, _ = decode(codes)
        return aggregate_pairs(keys, counts)

    def per_worker(self, n_workers: int) -> np.ndarray:
        """State units held by each worker."""
        codes, counts = self.merged()
        _, workers = decode(codes)
        return np.bincount(workers, weights=counts, minlength=n_workers).astype(np.int64)

    def total(self) -> float:
        return float(self.merged()[1].sum())
