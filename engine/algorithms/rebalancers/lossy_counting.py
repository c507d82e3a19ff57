"""Lossy counting (Manku & Motwani, VLDB 2002) and Gedik's sliding-window emulation with 3 counters.

Gedik, "Partitioning functions for stateful data parallelism in stream processing", VLDB J. 2014,
Sec. 4.1.2 ("Keeping track of frequencies", "Lossy counting", "Handling changes", Fig. 2).

:class:`LossyCounter` — one lossy counter.  Every entry keeps an appearance count ``c_a`` and an
error count ``c_e``; the stream is cut into buckets of ``w = 1/ε`` items.  A key not in memory is
inserted with ``c_a`` = its count and ``c_e`` = the number of completed buckets; at a bucket boundary
entries with ``c_a + c_e <= b`` (``b`` = completed buckets) are evicted; ``frequent(δ)`` returns
the entries with ``c_a >= (δ − ε)·M`` (``M`` = items counted).  Guarantees (Manku & Motwani
Sec. 4.2, kept by the batched variant below): ``f − ε·M <= c_a <= f`` for every key of true
count ``f`` (``c_a = 0`` when evicted), so every key with ``f >= δ·M`` is returned and nothing
below ``(δ − ε)·M`` is.

**Batched (weighted) updates.**  skewlab feeds the counter from ``observe(stats)`` with one
aggregated ``(keys, count)`` pair per interval, not tuple by tuple, so the counter takes a whole
batch at once: keys of the batch already in memory add their count to ``c_a``; new keys get
``c_a`` = count and ``c_e = floor(ε·M_before)`` (completed buckets before the batch, the
``i − 1`` of the paper); the eviction rule runs once after the batch with ``b = floor(ε·M_after)``.
The invariant ``f − c_a <= c_e <= ε·M`` holds by the same induction as in the per-tuple
algorithm (a key evicted with bucket ``b_del`` had ``f <= c_a + c_e <= b_del``; it is re-inserted
later with ``c_e >= b_del``), so the error bound is unchanged.  Memory can briefly hold every key
of one batch (those are already in the caller's statistics); after eviction it is back to the
lossy-counting bound.  Weights may be non-integral (float64 counts).

Lossy counting never over-estimates (``c_a <= f``), so the known pitfall of heavy-hitter sketches
that flag a key "hot" from over-estimated early counts (SpaceSaving) does not arise; early in the
stream the relative frequency ``c_a / M`` is computed over few items, which Gedik's emulation
mitigates by always answering from the *oldest* live counter (the one with the most history).

:class:`SlidingLossyCounter` — Gedik's emulation of a sliding window with ``x = 3`` lossy
counters over tumbling windows (Fig. 2): counters are started every ``step`` intervals and each
lives ``3·step`` intervals; the one in use is the oldest live counter, which has been built over
between ``W = 2·step`` and ``1.5·W`` intervals ("between W and 3/2·W items", generally
``(1 + 1/(x−1))·W``).  **Decision:** one skewlab interval (one ``observe`` call) is the time unit,
and the tumbling step is ``step`` intervals (default 1, so the counter in use covers the last
3 intervals, 2 < covered <= 3).  Windows are in intervals rather than tuples because skewlab's
statistics arrive per interval; with equal-sized intervals this is the paper's item-based scheme.
During start-up the in-use counter has less history (the paper's footnote 2).  Each counter's
``ε`` is fixed when it is started (the caller passes the current ε, which depends on N).
"""

from __future__ import annotations

import math

import numpy as np

from skewlab.engine.algorithms.sorted_lookup import find_sorted

__all__ = ["LossyCounter", "SlidingLossyCounter"]


def _aggregate(keys: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique sorted keys with summed positive weights."""
    keys = np.asarray(keys, dtype=np.uint64).ravel()
    weights = np.asarray(weights, dtype=np.float64).ravel()
    if keys.size != weights.size:
        raise ValueError(f"keys ({keys.size}) and weights ({weights.size}) are not aligned")
    if keys.size == 0:
        return keys, weights
    uniq, inv = np.unique(keys, return_inverse=True)
    summed = np.bincount(inv.ravel(), weights=weights, minlength=uniq.size)
    keep = summed > 0
    return uniq[keep], summed[keep]


class LossyCounter:
    """One lossy counter with error parameter ``epsilon`` (bucket width ``w = 1/ε``).

    Entries are kept as sorted ``uint64`` keys with aligned ``float64`` ``ca`` / ``ce`` arrays
    (picklable, vectorised merges).  ``epsilon = 0`` degenerates to exact counting.
    """

    __slots__ = ("epsilon", "n", "keys", "ca", "ce")

    def __init__(self, epsilon: float) -> None:
        eps = float(epsilon)
        if not (eps >= 0.0 and math.isfinite(eps)):
            raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
        self.epsilon = min(eps, 1.0)
        self.n = 0.0
        self.keys = np.empty(0, dtype=np.uint64)
        self.ca = np.empty(0, dtype=np.float64)
        self.ce = np.empty(0, dtype=np.float64)

    def __len__(self) -> int:
        return int(self.keys.size)

    def buckets(self, n: float | None = None) -> float:
        """Completed buckets ``floor(ε·M)`` after ``n`` items (default: now)."""
        return float(math.floor(self.epsilon * (self.n if n is None else n) + 1e-9))

    def update(self, keys: np.ndarray, weights: np.ndarray) -> None:
        """Count one batch of ``keys`` with ``weights`` (duplicates are summed), then evict."""
        uk, uw = _aggregate(keys, weights)
        if uk.size == 0:
            return
        done_before = self.buckets()
        pos, present = find_sorted(self.keys, uk)
        np.add.at(self.ca, pos[present], uw[present])
        new = ~present
        if new.any():
            keys_all = np.concatenate([self.keys, uk[new]])
            ca_all = np.concatenate([self.ca, uw[new]])
            ce_all = np.concatenate([self.ce, np.full(int(new.sum()), done_before)])
            order = np.argsort(keys_all, kind="stable")
            self.keys, self.ca, self.ce = keys_all[order], ca_all[order], ce_all[order]
        self.n += float(uw.sum())
        done = self.buckets()
        keep = self.ca + self.ce > done
        if not keep.all():
            self.keys, self.ca, self.ce = self.keys[keep], self.ca[keep], self.ce[keep]

    def estimate(self, keys: np.ndarray) -> np.ndarray:
        """``c_a`` of every key (0 for keys not in memory); never above the true count."""
        keys = np.asarray(keys, dtype=np.uint64)
        out = np.zeros(keys.size, dtype=np.float64)
        if self.keys.size == 0 or keys.size == 0:
            return out
        pos, hit = find_sorted(self.keys, keys)
        out[hit] = self.ca[pos[hit]]
        return out

    def frequent(self, support: float) -> tuple[np.ndarray, np.ndarray]:
        """Keys with ``c_a >= (support − ε)·M`` (and ``c_a > 0``) and their ``c_a``, sorted by key."""
        if self.keys.size == 0 or self.n <= 0:
            return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.float64)
        threshold = (float(support) - self.epsilon) * self.n
        hit = (self.ca >= threshold - 1e-9 * self.n) & (self.ca > 0)
        return self.keys[hit], self.ca[hit]


class SlidingLossyCounter:
    """Sliding window emulated with ``counters`` lossy counters over tumbling windows (Gedik Fig. 2).

    A new counter starts every ``step`` observed intervals; a counter is dropped once it has been
    built over ``counters·step`` intervals; every live counter counts every interval; queries use
    the oldest live counter (built over ``((counters−1)·step, counters·step]`` intervals once warm,
    i.e. between ``W`` and ``(1 + 1/(counters−1))·W`` with ``W = (counters−1)·step``).
    """

    __slots__ = ("step", "n_counters", "t", "live", "starts")

    def __init__(self, step: int = 1, counters: int = 3) -> None:
        if int(step) < 1 or int(counters) < 2:
            raise ValueError("step must be >= 1 and counters >= 2")
        self.step = int(step)
        self.n_counters = int(counters)
        self.t = 0  # intervals observed so far
        self.live: list[LossyCounter] = []
        self.starts: list[int] = []  # interval at which each live counter was started

    @property
    def window(self) -> int:
        """``W`` in intervals: the lower end of the in-use counter's history once warm."""
        return (self.n_counters - 1) * self.step

    def observe(self, keys: np.ndarray, weights: np.ndarray, epsilon: float) -> None:
        """One interval: rotate counters (drop the exhausted one, start one every ``step``), count."""
        life = self.n_counters * self.step
        while self.live and self.t - self.starts[0] >= life:
            self.live.pop(0)
            self.starts.pop(0)
        if self.t % self.step == 0 or not self.live:
            self.live.append(LossyCounter(epsilon))
            self.starts.append(self.t)
        for counter in self.live:
            counter.update(keys, weights)
        self.t += 1

    def current(self) -> LossyCounter | None:
        """The counter in use (oldest live), or ``None`` before the first interval."""
        return self.live[0] if self.live else None

    def history(self) -> int:
        """Intervals the counter in use has been built over."""
        return self.t - self.starts[0] if self.live else 0

    def entries(self) -> int:
        """Total entries held by all live counters (the space the emulation costs)."""
        return sum(len(c) for c in self.live)
