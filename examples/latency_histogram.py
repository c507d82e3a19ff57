"""A user-defined mergeable operator whose per-tuple work dominates: per-key latency quantiles (p99,
p50) over the window from a *streaming histogram* (Ben-Haim & Tom-Tov, "A Streaming Parallel Decision
Tree Algorithm", JMLR 11, 2010, Sec. 2.1) — the histogram behind Hive's ``histogram_numeric()`` and
Druid's approximate histogram.

Run it on the engine (from the repository root; the generator draws seeded values, integers in
[0, 1000): read them as latencies in ms; Kafka and file sources name theirs with ``--value-field``)::

    PYTHONPATH=. skewlab engine --operator examples.latency_histogram:LatencyHistogram --algorithm dchoices

**The per-tuple work** is the paper's *Update* procedure, one Python step per tuple in arrival order:
insert the value as a bin of count 1 (a ``bisect`` into the key's sorted centroids; a value equal to a
centroid only adds to its count) and, once the key has more than :attr:`LatencyHistogram.bins` bins,
find the two closest adjacent centroids by a linear scan of the bins' gaps and replace them by their
count-weighted mean — as Hive's ``NumericHistogram`` does per value.  That is O(bins) per tuple; at
``bins = 200`` (p99 needs bins much finer than 1 % of a key's values) it costs 13–22 µs per tuple of
a key whose histogram is full on the shared 2-core VM under load 3–5 (``python
examples/latency_histogram.py`` times it), several times the engine's own per-tuple cost on a worker
(docs/results/engine.md, "Balancing with a real operator: a streaming histogram").  Most tuples are such tuples under skew: the hot keys fill
their histograms first.  The operator does not combine in the source scan
(:attr:`~skewlab.engine.operators.KeyedOperator.combined` is ``None``): the histogram's work stays on
the workers, where the grouping balances it.

A key's partial state is ``(centroids, counts, lo, hi)``: ≤ ``bins`` sorted centroids, their counts,
and the exact smallest and largest value.  The paper's *Merge* (the union of the bins, then the
closest pairs merged until ``bins`` are left) combines the window's batches and the shares of a key
split over several workers, so any grouping may serve it.  It is commutative; it is associative
exactly while a key has at most ``bins`` distinct values (no bin is merged, the histogram is the
exact one), and up to the histogram's approximation beyond (as for every lossy sketch's merge).
:meth:`LatencyHistogram.merge` merges a key's window in one union and one pass of merges.  Quantiles
come from the bins by the paper's *Sum* idea: half of a bin's count lies on each side of its
centroid, linear between centroids, ``lo`` and ``hi`` at the ends.  The result is the p99; columns
``p50`` and ``n`` (the tuples covered).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from typing import Any, ClassVar, Sequence

import numpy as np
import pyarrow as pa

from skewlab.engine.operators import MergeableOperator

#: a partial state: sorted centroids, their counts, the exact minimum and maximum
State = tuple[list[float], list[int], float, float]


def _shrink(p: list[float], m: list[int], bins: int) -> tuple[list[float], list[int]]:
    """The sorted bins ``p``/``m`` (changed in place) with closest adjacent centroids merged until
    ``bins`` are left: the paper's Merge, the smallest gap first (ties: the leftmost), a heap of gaps."""
    n = len(p)
    if n <= bins:
        return p, m
    alive = [True] * n
    nxt = list(range(1, n + 1))
    prv = list(range(-1, n - 1))
    heap = [(p[i + 1] - p[i], i, i + 1) for i in range(n - 1)]
    heapq.heapify(heap)
    left = n
    while left > bins:
        _, i, j = heapq.heappop(heap)
        if not (alive[i] and alive[j]) or nxt[i] != j:
            continue  # a stale gap: one side was merged since
        c = m[i] + m[j]
        p[i] = (p[i] * m[i] + p[j] * m[j]) / c
        m[i] = c
        alive[j] = False
        nxt[i] = nxt[j]
        if nxt[j] < n:
            prv[nxt[j]] = i
        left -= 1
        if prv[i] >= 0:
            heapq.heappush(heap, (p[i] - p[prv[i]], prv[i], i))
        if nxt[i] < n:
            heapq.heappush(heap, (p[nxt[i]] - p[i], i, nxt[i]))
    keep = [i for i in range(n) if alive[i]]
    return [p[i] for i in keep], [m[i] for i in keep]


class LatencyHistogram(MergeableOperator):
    """Per-key p99 (and p50) of the window's values from a Ben-Haim–Tom-Tov streaming histogram."""

    name: ClassVar[str] = "latency_histogram"
    result_type: ClassVar[pa.DataType] = pa.float64()
    columns: ClassVar[tuple[tuple[str, pa.DataType], ...]] = (("p50", pa.float64()), ("n", pa.int64()))
    #: the histogram's bins per key
    bins: ClassVar[int] = 200

    # ------------------------------------------------------------------ per tuple
    def partials(self, codes: np.ndarray, n_keys: int, values: np.ndarray | None) -> list[State]:
        order = np.argsort(codes, kind="stable")  # each key's tuples, in arrival order
        cut = np.searchsorted(codes[order], np.arange(n_keys + 1)).tolist()
        vals = values[order].tolist()
        bins = self.bins
        out: list[State] = []
        for k in range(n_keys):
            xs = vals[cut[k]:cut[k + 1]]
            p: list[float] = []
            m: list[int] = []
            for x in xs:  # the paper's Update, one tuple at a time
                i = bisect_left(p, x)
                if i < len(p) and p[i] == x:
                    m[i] += 1
                    continue
                p.insert(i, x)
                m.insert(i, 1)
                if len(p) > bins:
                    gaps = [b - a for a, b in zip(p, p[1:])]
                    j = gaps.index(min(gaps))
                    c = m[j] + m[j + 1]
                    p[j] = (p[j] * m[j] + p[j + 1] * m[j + 1]) / c
                    m[j] = c
                    del p[j + 1], m[j + 1]
            out.append((p, m, min(xs), max(xs)))
        return out

    # ------------------------------------------------------------------ merge
    def combine(self, a: State, b: State) -> State:
        return self.merge([a, b])

    def merge(self, states: Sequence[State]) -> State:
        """The paper's Merge of several histograms at once: the union of their bins (equal centroids
        add their counts), then the closest pairs merged until :attr:`bins` are left."""
        if len(states) == 1:
            return states[0]
        union: dict[float, int] = {}
        for p, m, _, _ in states:
            for x, c in zip(p, m):
                union[x] = union.get(x, 0) + c
        xs = sorted(union)
        p, m = _shrink(xs, [union[x] for x in xs], self.bins)
        return (p, m, min(s[2] for s in states), max(s[3] for s in states))

    def finish(self, state: State) -> tuple:
        n = int(sum(state[1]))
        return (quantile(state, 0.99), quantile(state, 0.5), n)


def quantile(state: State, q: float) -> float:
    """The ``q``-quantile of a histogram: bin ``i``'s count ``m_i`` is spread half below and half
    above its centroid, the rank runs linearly between adjacent centroids, and from ``lo`` to the
    first centroid and from the last to ``hi`` (their counts' outer halves)."""
    p, m, lo, hi = state
    n = sum(m)
    target = q * n
    # positions: (rank, value) at lo, at each centroid (its bins before it plus half its own), at hi
    rank = m[0] / 2.0
    if target <= rank:
        return lo + (p[0] - lo) * (target / rank if rank else 0.0)
    for i in range(1, len(p)):
        nxt = rank + (m[i - 1] + m[i]) / 2.0
        if target <= nxt:
            return p[i - 1] + (p[i] - p[i - 1]) * (target - rank) / (nxt - rank)
        rank = nxt
    tail = n - rank
    return p[-1] + (hi - p[-1]) * ((target - rank) / tail if tail else 0.0)


if __name__ == "__main__":  # the per-tuple cost: one hot key's batch of generator-like values
    import time

    rng = np.random.default_rng(0)
    op = LatencyHistogram()
    for n in (20_000, 100_000):
        v = rng.integers(0, 1000, n).astype(np.float64)
        t = time.perf_counter()
        op.partials(np.zeros(n, np.int64), 1, v)
        print(f"{n} tuples of one key, bins {op.bins}: {(time.perf_counter() - t) / n * 1e6:.1f} µs per tuple")
