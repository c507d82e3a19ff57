"""FISH grouping: "Efficient Time-Evolving Stream Processing at Scale", arXiv 1806.00760 (2018).

Registry name ``fish``.  A split-key grouping (``single_owner = False``) deciding per tuple from the
emitting source's state only, like :mod:`skewlab.engine.algorithms.groupings.split_key`.  What the
paper states (abstract and Sec. 1) and how each part is built here:

* **Epoch-based recent hot-key identification.**  Each source cuts its stream into epochs of
  ``epoch`` tuples.  *Intra-epoch frequency counting* with bounded memory: the source's SpaceSaving
  sketch (:class:`skewlab.engine.algorithms.sketches.SpaceSaving`, ``capacity`` counters).
  *Inter-epoch hotness decaying*: at the end of every epoch the counts are multiplied by ``decay``
  (α), so a key's hotness after epoch e is ``H_k(e) = α·H_k(e−1) + c_k(e)`` with ``c_k(e)`` its count
  in epoch e.  The hot set is recomputed only there (the paper's "suppressing superfluous
  computation"): H = {k : (H_k − error_k) >= θ·Σ_j H_j}, θ = ``head_threshold`` or 1/(5n), and stays
  fixed during the next epoch.  The first epoch of a source has no hot key.
* **Hot keys on more workers, the number growing with the frequency.**  A hot key with relative
  hotness p_k gets ``d_k = min(n, max(2, ceil(spread · p_k · n)))`` candidates: with the default
  ``spread`` = 2 each candidate receives at most half an average worker's load from the key.
* **Consistent hashing for the rest.**  Keys and workers sit on a consistent-hash ring
  (:class:`skewlab.engine.algorithms.groupings.basic.ConsistentHashRing`, ``replicas`` points per
  worker); a cold key goes to its ring owner (one worker, as ``consistent``); a hot key's candidates
  are the first d_k *distinct* workers clockwise from its position, so its ring owner is always one
  of them.
* **Worker load inferred by computation, not communication.**  The source picks the least loaded
  candidate by its own count of tuples sent to each worker (ties → the earlier candidate on the
  ring), as PKG's local load estimation (Nasir et al., ICDE 2015 Sec. IV-B).

Deviations and readings (the full text could not be consulted here; only the abstract and the
introduction were): the formulas for d_k and the hot threshold, the ring walk for the candidates
and the local load count are this module's reading of the abstract, with parameters exposing each
choice; θ's default 1/(5n) is Nasir et al.'s (so FISH, D-Choices and W-Choices share the head
definition in comparisons); head membership uses the guaranteed count (count − error), as
split_key's deviation (2).  Epoch ends depend on the source's tuple count only, so routing does not
depend on how a stream is cut into batches.

``resize(n)``: the ring is rebuilt for n workers, local loads restart at zero, sketches and the
hot set are kept, the hot keys' candidates are recomputed for the new ring.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Mapping

import numpy as np
from numba import njit

from skewlab.engine.algorithms.grouping import Router, StreamingPlanner
from skewlab.engine.algorithms.groupings.basic import ConsistentHashRing
from skewlab.engine.algorithms.keys import mix64
from skewlab.engine.algorithms.registry import register
from skewlab.engine.algorithms.sketches import SketchPerSource, SpaceSaving
from skewlab.engine.algorithms.sorted_lookup import find_sorted
from skewlab.engine.config.params import Param

__all__ = ["FishGrouping", "FishRouter", "fish_choices"]


def fish_choices(p: float, n: int, spread: float) -> int:
    """Number of candidate workers of a hot key with relative hotness ``p`` (module docstring)."""
    return int(min(n, max(2, math.ceil(round(spread * p * n, 9)))))


def ring_candidates(ring: ConsistentHashRing, fp: np.uint64, d: int) -> np.ndarray:
    """The first ``d`` distinct workers on ``ring`` clockwise from the key's position ``mix64(fp)``
    (the first is the key's owner, :meth:`ConsistentHashRing.lookup`)."""
    h = mix64(np.array([fp], dtype=np.uint64))[0]
    size = ring.points.size
    start = int(np.searchsorted(ring.points, h, side="left")) % size
    out: list[int] = []
    for step in range(size):
        w = int(ring.owners[(start + step) % size])
        if w not in out:
            out.append(w)
            if len(out) == d:
                break
    return np.asarray(out, dtype=np.int64)


@njit(cache=True, _nrt=False)
def _fish_kernel(owners, hot_idx, cand, n_cand, loads, out):  # pragma: no cover - compiled
    """Route one epoch segment: cold tuples to their ring owner, hot tuples to the least loaded of
    their candidates ``cand[i, :n_cand[i]]`` (ties → earlier); ``loads`` counts as it goes."""
    for x in range(owners.size):
        i = hot_idx[x]
        if i < 0:
            w = owners[x]
        else:
            w = cand[i, 0]
            best = loads[w]
            for j in range(1, n_cand[i]):
                c = cand[i, j]
                if loads[c] < best:
                    w = c
                    best = loads[c]
        loads[w] += 1
        out[x] = w


class FishRouter(SketchPerSource, Router):
    """Per source: local loads, SpaceSaving hotness sketch, tuple count, the epoch's hot set."""

    source_state_attrs: ClassVar[tuple[str, ...]] = ("loads", "seen", "hot_fps", "hot_p", "hot_cand", "hot_d")

    def __init__(self, n_workers: int, n_sources: int = 1, seed: int = 0, params: Mapping[str, Any] | None = None):
        super().__init__(n_workers, n_sources, seed, params)
        self.sketch = SpaceSaving(int(self.p.get("capacity", 10000)), self.n_sources)
        self.seen = np.zeros(self.n_sources, dtype=np.int64)
        self.hot_fps = [np.zeros(0, np.uint64) for _ in range(self.n_sources)]
        self.hot_p = [np.zeros(0, np.float64) for _ in range(self.n_sources)]
        self.hot_cand = [np.zeros((0, 1), np.int64) for _ in range(self.n_sources)]
        self.hot_d = [np.zeros(0, np.int64) for _ in range(self.n_sources)]
        self._build()

    def _build(self) -> None:
        self.ring = ConsistentHashRing(self.n_workers, int(self.p.get("replicas", 128)), self.seed)
        self.loads = np.zeros((self.n_sources, self.n_workers), dtype=np.int64)

    # ------------------------------------------------------------------ effective parameters
    @property
    def theta(self) -> float:
        """Effective hot threshold θ (``head_threshold`` or 1/(5n))."""
        t = float(self.p.get("head_threshold", 0.0))
        return t if t > 0 else 1.0 / (5.0 * self.n_workers)

    @property
    def epoch(self) -> int:
        """Effective epoch length in tuples per source (``epoch`` or 250n)."""
        e = int(self.p.get("epoch", 0))
        return e if e > 0 else 250 * self.n_workers

    # ------------------------------------------------------------------ per-source state
    def _source(self, source: int) -> int:
        s = int(source)
        if not 0 <= s < self.n_sources:
            raise ValueError(f"source must be in [0, {self.n_sources}), got {source}")
        return s

    # ------------------------------------------------------------------ epochs
    def _end_epoch(self, s: int) -> None:
        """Hot set of the next epoch from the hotness now, then the inter-epoch decay."""
        total = self.sketch.total(s)
        fps = np.zeros(0, np.uint64)
        probs = np.zeros(0, np.float64)
        if total > 0:
            thr = self.theta * total
            f, counts, errs = self.sketch.entries(s, min_count=int(math.floor(thr)))
            g = counts - errs
            keep = g >= thr
            fps, probs = f[keep], g[keep] / total
        self._set_hot(s, fps, probs)
        decay = float(self.p.get("decay", 0.5))
        if decay < 1.0:
            self.sketch.decay(decay, s)

    def _set_hot(self, s: int, fps: np.ndarray, probs: np.ndarray) -> None:
        order = np.argsort(fps)
        fps, probs = fps[order], probs[order]
        spread = float(self.p.get("spread", 2.0))
        d = np.array([fish_choices(p, self.n_workers, spread) for p in probs], dtype=np.int64)
        cand = np.zeros((fps.size, max(1, int(d.max()) if d.size else 1)), dtype=np.int64)
        for i, fp in enumerate(fps):
            cand[i, : d[i]] = ring_candidates(self.ring, fp, int(d[i]))
        self.hot_fps[s], self.hot_p[s], self.hot_cand[s], self.hot_d[s] = fps, probs, cand, d

    # ------------------------------------------------------------------ routing
    def route(self, fps: np.ndarray, source: int = 0) -> np.ndarray:
        s = self._source(source)
        fps = np.ascontiguousarray(fps, dtype=np.uint64).ravel()
        out = np.empty(fps.size, dtype=np.int64)
        pos = 0
        epoch = self.epoch
        while pos < fps.size:
            end = min(fps.size, pos + epoch - int(self.seen[s] % epoch))
            seg = fps[pos:end]
            owners = self.ring.lookup(seg)
            hot = self.hot_fps[s]
            hot_idx = np.full(seg.size, -1, dtype=np.int64)
            i, hit = find_sorted(hot, seg)
            hot_idx[hit] = i[hit]
            _fish_kernel(owners, hot_idx, self.hot_cand[s], self.hot_d[s], self.loads[s], out[pos:end])
            self.sketch.offer(seg, s)
            self.seen[s] += seg.size
            if self.seen[s] % epoch == 0:
                self._end_epoch(s)
            pos = end
        return out

    def resize(self, n_workers: int) -> None:
        """New number of workers: new ring, loads restart, hot set kept with new candidates."""
        super().resize(n_workers)
        self._build()
        for s in range(self.n_sources):
            self._set_hot(s, self.hot_fps[s], self.hot_p[s])

    # ------------------------------------------------------------------ inspection
    def hot(self, source: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Hot keys of ``source``'s current epoch and their candidate counts d_k."""
        s = self._source(source)
        return self.hot_fps[s].copy(), self.hot_d[s].copy()

    def candidates(self, fp: int, source: int = 0) -> np.ndarray:
        """The workers the key may go to now at ``source``: its candidates if hot, else its owner."""
        s = self._source(source)
        hot = self.hot_fps[s]
        i = int(np.searchsorted(hot, np.uint64(fp)))
        if i < hot.size and hot[i] == np.uint64(fp):
            return self.hot_cand[s][i, : self.hot_d[s][i]].copy()
        return self.ring.lookup(np.array([fp], dtype=np.uint64))

    def describe(self) -> dict[str, Any]:
        return {
            "theta": self.theta,
            "epoch_tuples": self.epoch,
            "hot_keys": [int(self.hot_fps[s].size) for s in range(self.n_sources)],
        }


@register
class FishGrouping(StreamingPlanner):
    name: ClassVar[str] = "fish"
    summary: ClassVar[str] = (
        "FISH: recent hot keys (epoch counts, decayed between epochs) on more workers the hotter they are, "
        "consistent hashing for the rest"
    )
    paper: ClassVar[str] = "arXiv 1806.00760 (FISH, time-evolving streams)"
    params: ClassVar[tuple[Param, ...]] = (
        Param("head_threshold", "float", 0.0,
              "θ: a key is hot in the next epoch when its guaranteed decayed count is >= θ · the decayed total; "
              "0 means 1/(5n)", low=0.0, high=1.0),
        Param("epoch", "int", 0, "tuples of a source per epoch (hot set recomputed, then hotness decayed); "
              "0 means 250n", low=0, high=10**12),
        Param("decay", "float", 0.5, "α: hotness multiplied by this at every epoch end (1 = no decay)",
              low=0.0, high=1.0, low_open=True),
        Param("spread", "float", 2.0, "a hot key with relative hotness p gets min(n, max(2, ceil(spread·p·n))) "
              "candidate workers", low=0.0, high=1000.0, low_open=True),
        Param("capacity", "int", 10000, "SpaceSaving counters per source for the epoch counts", low=1, high=1_000_000),
        Param("replicas", "int", 128, "consistent-hash ring points per worker", low=1, high=4096),
    )
    single_owner: ClassVar[bool] = False
    router_class: ClassVar[type[Router]] = FishRouter
