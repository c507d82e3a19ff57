"""Baselines: key grouping (``hash``), consistent hashing (``consistent``), round robin (``shuffle``).

* ``hash`` — key grouping: ``h(k) = murmur3(key bytes) mod n`` (see :mod:`skewlab.engine.algorithms.keys`).  The
  baseline of every paper (Nasir et al. "KG", Dalabasmaz & Can "Hash", Fang et al. h(k)).
* ``consistent`` — a hash ring with ``replicas`` virtual points per worker (Karger et al.; the
  consistent-hash half of Gedik's partitioning function, VLDBJ 2014 Sec. 3).  A key goes to the
  first worker point clockwise from its own position.  Adding worker n only inserts n's points, so
  a key either stays or moves to the new worker (≈ 1/(n+1) of the keys move); keys never move
  between existing workers.  Removing a worker hands its arcs to the successors.
* ``shuffle`` — round robin per source (Nasir et al. "SG"): the source's i-th tuple goes to worker
  ``(start + i) mod n`` where ``start = source mod n``; it splits every key over all workers.

Each algorithm is a router (``…Router``: the routing, all of its state) and a registered planner
(``…Grouping``: metadata only, :class:`skewlab.engine.algorithms.grouping.StreamingPlanner`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

import numpy as np

from skewlab.engine.algorithms.grouping import Router, StreamingPlanner
from skewlab.engine.algorithms.keys import home, mix64
from skewlab.engine.config.params import Param
from skewlab.engine.algorithms.registry import register
from skewlab.engine.algorithms.table_lookup import build_ring_index, lookup_ring

__all__ = [
    "ConsistentGrouping", "ConsistentHashRing", "ConsistentRouter", "HashGrouping", "HashRouter", "ShuffleGrouping",
    "ShuffleRouter",
]


class HashRouter(Router):
    """h(k) = murmur3(key) mod n; stateless."""

    def route(self, fps: np.ndarray, source: int = 0) -> np.ndarray:
        return home(fps, self.n_workers)

    def owner(self, fps: np.ndarray) -> np.ndarray:
        return home(fps, self.n_workers)


@register
class HashGrouping(StreamingPlanner):
    name: ClassVar[str] = "hash"
    summary: ClassVar[str] = "Key grouping: murmur3(key) mod n; every key on one worker"
    paper: ClassVar[str] = "baseline (all papers)"
    router_class: ClassVar[type[Router]] = HashRouter


class ConsistentHashRing:
    """A ring of ``replicas`` points per worker; vectorised lookups.

    Point positions are ``mix64(seed_salt ^ (worker << 32 | replica))``: deterministic, independent
    of the number of workers, so resizing only adds or removes the changed workers' points.
    """

    __slots__ = ("points", "owners", "replicas", "salt", "_index")

    def __init__(self, n_workers: int, replicas: int, seed: int = 0) -> None:
        self.replicas = int(replicas)
        self.salt = np.uint64(mix64(np.array([np.uint64(seed) + np.uint64(0xC0FFEE)]))[0])
        w = np.repeat(np.arange(n_workers, dtype=np.uint64), self.replicas)
        r = np.tile(np.arange(self.replicas, dtype=np.uint64), n_workers)
        pts = mix64(((w << np.uint64(32)) | r) ^ self.salt)
        order = np.argsort(pts, kind="stable")
        self.points = pts[order]
        self.owners = w[order].astype(np.int64)
        self._index = None

    def __getstate__(self) -> tuple:
        return self.points, self.owners, self.replicas, self.salt

    def __setstate__(self, state: tuple) -> None:
        self.points, self.owners, self.replicas, self.salt = state
        self._index = None

    def lookup(self, fps: np.ndarray) -> np.ndarray:
        """Worker owning each key: first ring point at or after the key's position ``mix64(fp)``
        (wrapping); through a bucket index built on the first lookup (:mod:`skewlab.engine.algorithms.table_lookup`)."""
        if self._index is None:
            self._index = build_ring_index(self.points)
        return lookup_ring(self._index, self.points, self.owners, fps)


class ConsistentRouter(Router):
    """The ring of ``p["replicas"]`` points per worker; a resize rebuilds it for the new workers."""

    def __init__(self, n_workers: int, n_sources: int = 1, seed: int = 0, params: Mapping[str, Any] | None = None):
        super().__init__(n_workers, n_sources, seed, params)
        self.ring = ConsistentHashRing(self.n_workers, self.p["replicas"], self.seed)

    def route(self, fps: np.ndarray, source: int = 0) -> np.ndarray:
        return self.ring.lookup(fps)

    def owner(self, fps: np.ndarray) -> np.ndarray:
        return self.ring.lookup(fps)

    def resize(self, n_workers: int) -> None:
        super().resize(n_workers)
        self.ring = ConsistentHashRing(self.n_workers, self.p["replicas"], self.seed)


@register
class ConsistentGrouping(StreamingPlanner):
    name: ClassVar[str] = "consistent"
    summary: ClassVar[str] = "Consistent hashing ring; adding a worker moves ~1/N of the keys"
    paper: ClassVar[str] = "gedik-vldbj14 Sec. 3 (consistent hash component)"
    params: ClassVar[tuple[Param, ...]] = (
        Param("replicas", "int", 128, "virtual points per worker on the ring", low=1, high=4096),
    )
    router_class: ClassVar[type[Router]] = ConsistentRouter


class ShuffleRouter(Router):
    """Round robin: ``next[s]`` is the worker of source s's next tuple (per-source state)."""

    source_state_attrs: ClassVar[tuple[str, ...]] = ("next",)

    def __init__(self, n_workers: int, n_sources: int = 1, seed: int = 0, params: Mapping[str, Any] | None = None):
        super().__init__(n_workers, n_sources, seed, params)
        self.next = np.arange(self.n_sources, dtype=np.int64) % self.n_workers

    def route(self, fps: np.ndarray, source: int = 0) -> np.ndarray:
        m = len(fps)
        start = int(self.next[source])
        out = (start + np.arange(m, dtype=np.int64)) % self.n_workers
        self.next[source] = (start + m) % self.n_workers
        return out

    def resize(self, n_workers: int) -> None:
        super().resize(n_workers)
        self.next %= self.n_workers


@register
class ShuffleGrouping(StreamingPlanner):
    name: ClassVar[str] = "shuffle"
    summary: ClassVar[str] = "Round robin per source; splits every key over all workers"
    paper: ClassVar[str] = "baseline (nasir-icde16 SG, dalabasmaz-dkg Shuffle)"
    single_owner: ClassVar[bool] = False
    router_class: ClassVar[type[Router]] = ShuffleRouter
