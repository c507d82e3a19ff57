"""The base hash h(k) of the table rebalancers: the worker of a key outside the routing table.

Fang et al. (HPDC 2017, Sec. II-A and V) and Gedik (VLDBJ 2014, Sec. 3, H_c) route every key outside
their routing table by consistent hashing, so that a change of the worker count moves few keys.  The
``base`` parameter of both families (:func:`base_param`) chooses how:

* ``slots`` (default) — a slot table aligned with plain hash: for a planner built with n₀ workers there
  are S = n₀·⌈2^16/n₀⌉ slots (:func:`slot_count`), a key's slot is ``fp mod S`` and the table for n₀
  workers gives slot s to worker ``s mod n₀``; since n₀ divides S, a key's worker is then exactly
  ``fp mod n₀``, plain ``hash``'s (:func:`slot_table`).  The table for another worker count is reached
  one worker at a time: from m to m + 1 workers the new worker takes ⌊S/(m+1)⌋ slots, each from the
  worker holding most slots at that moment (its slot received last); from m + 1 to m workers worker m's
  slots go, in slot order, each to the worker holding fewest.  So from n to n + 1 workers only slots
  of the new worker change hands (≈ 1/(n+1) of the keys) and from n + 1 to n only the removed worker's,
  and the workers' slot counts differ by at most one (1/S of the keys; checked for every n ≤ 1024, the
  most workers a run may have).  Keys per worker are as even as ``fp mod n`` at every n.  The
  construction is the fixed-slot scheme of Redis Cluster and of Dynamo's "strategy 3" (Q/S
  equal-sized partitions, DeCandia et al., SOSP 2007, Sec. 6.2), made canonical: the table is a
  function of (n₀, n) alone (built once per process, never shipped: a router pickles the two numbers).
* ``consistent`` — the ring of :class:`skewlab.engine.algorithms.groupings.basic.ConsistentHashRing`
  with ``replicas`` points per worker, the papers' construction (their reproductions pin it).
* ``mod`` — ``fp mod n`` (plain hash); a resize re-homes ~n/(n+1) of the keys.

Deviation from both papers: the default is ``slots``, not a ring, because a rebalancer should start
no less even than plain ``hash`` (issue 39; the ring of 1000 points per worker left the busiest of 10
workers ~3.5 % above the mean on uniform keys where hash is within ~0.5 %, and the measurements
behind the choice, jump consistent hash included, are in docs/results/traces-vs-hash.md).  The slots
follow ``fp mod S`` rather than a salted hash of the key so that before any plan (and whenever the
migration gate returns a rebalancer to its base) the routing *is* plain hash's, not another draw of
the same evenness: on a trace where a few keys carry most of an interval, two equally even hashes
differ by where those keys land, and a salted base lost that lottery to plain hash on 4 of 8 traces
(docs/results/traces-vs-hash.md).  The plans,
the gate and the migration after a resize or a change of ``base`` are the same for every choice (the
router's base object has one method, ``lookup``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from skewlab.engine.algorithms.groupings.basic import ConsistentHashRing
from skewlab.engine.config.params import Param

__all__ = ["BASES", "MIN_SLOTS", "SlotTable", "base_param", "make_base", "slot_count", "slot_table"]

#: the values of the ``base`` parameter
BASES = ("slots", "consistent", "mod")
#: the slot table has at least this many slots (S = n₀·⌈MIN_SLOTS/n₀⌉)
MIN_SLOTS = 1 << 16


def slot_count(origin: int) -> int:
    """S, the number of slots of the table aligned with ``fp mod origin``: the least multiple of
    ``origin`` that is at least :data:`MIN_SLOTS`."""
    origin = int(origin)
    if origin < 1:
        raise ValueError(f"the worker count must be at least 1, got {origin}")
    return -(-MIN_SLOTS // origin) * origin


@njit(cache=True)
def _build_slot_table(origin, n, table, rank):  # pragma: no cover - compiled
    """The canonical table for ``n`` workers from the one aligned with ``fp mod origin`` (see
    :func:`slot_table`); ``rank[s]`` is slot s's place among its owner's slots (0 = received first)."""
    size = table.size
    count = np.zeros(max(origin, n) + 1, np.int64)
    for s in range(size):
        table[s] = s % origin
        rank[s] = s // origin
        count[s % origin] += 1
    for m in range(origin, n):  # m -> m + 1 workers: worker m takes ⌊S/(m+1)⌋ slots from the fullest
        give = np.zeros(m, np.int64)
        left = count[:m].copy()
        for _ in range(size // (m + 1)):
            w = 0
            for v in range(1, m):
                if left[v] > left[w]:
                    w = v
            left[w] -= 1
            give[w] += 1
        taken = 0
        for s in range(size):
            w = table[s]
            if rank[s] >= left[w]:  # among the last ``give[w]`` slots w received
                table[s] = m
                rank[s] = taken
                taken += 1
        count[:m] = left
        count[m] = taken
    for m in range(origin - 1, n - 1, -1):  # m + 1 -> m workers: worker m's slots to the emptiest
        for s in range(size):
            if table[s] == m:
                w = 0
                for v in range(1, m):
                    if count[v] < count[w]:
                        w = v
                table[s] = w
                rank[s] = count[w]
                count[w] += 1
        count[m] = 0


_TABLES: dict[tuple[int, int], np.ndarray] = {}


def slot_table(n_workers: int, origin: int | None = None) -> np.ndarray:
    """Worker (``int64``) of each of the :func:`slot_count` (``origin``) slots with ``n_workers``
    workers, for the table aligned with ``fp mod origin`` (default ``origin = n_workers``).

    With ``origin`` workers slot s is worker ``s mod origin``'s; going from m to m + 1 workers the new
    worker takes ⌊S/(m+1)⌋ slots, one at a time from the worker holding most (lowest id on ties), the
    slot that worker received last; going from m + 1 to m workers worker m's slots go in slot order,
    each to the worker holding fewest (lowest id on ties).  Cached per process (read only)."""
    n = int(n_workers)
    o = n if origin is None else int(origin)
    table = _TABLES.get((o, n))
    if table is None:
        if n < 1:
            raise ValueError(f"n_workers must be at least 1, got {n}")
        table = np.empty(slot_count(o), dtype=np.int64)
        _build_slot_table(o, n, table, np.empty(table.size, dtype=np.int64))
        table.setflags(write=False)
        _TABLES[(o, n)] = table
    return table


@njit(cache=True)
def _lookup_slots(fps, size, table, out):  # pragma: no cover - compiled
    for x in range(fps.size):
        out[x] = table[fps[x] % size]


class SlotTable:
    """The ``slots`` base hash for ``n_workers`` of a planner built with ``origin`` workers (default
    ``n_workers``: then every key's worker is ``fp mod n``; see the module docstring); pickles as the
    two numbers (the table is rebuilt, or found in the process's cache, on the first lookup)."""

    __slots__ = ("n_workers", "origin", "_table")

    def __init__(self, n_workers: int, origin: int | None = None) -> None:
        self.n_workers = int(n_workers)
        self.origin = self.n_workers if origin is None else int(origin)
        slot_count(self.origin)  # checks it
        self._table: np.ndarray | None = None

    def __getstate__(self) -> tuple[int, int]:
        return self.n_workers, self.origin

    def __setstate__(self, state: tuple[int, int]) -> None:
        self.n_workers, self.origin = int(state[0]), int(state[1])
        self._table = None

    def lookup(self, fps: np.ndarray) -> np.ndarray:
        """Worker (``int64``) of every fingerprint: the owner of slot ``fp mod S``."""
        if self._table is None:
            self._table = slot_table(self.n_workers, self.origin)
        fps = np.ascontiguousarray(fps, dtype=np.uint64)
        out = np.empty(fps.size, dtype=np.int64)
        if fps.size:
            _lookup_slots(fps, np.uint64(self._table.size), self._table, out)
        return out


def base_param(default: str = "slots") -> Param:
    """The ``base`` parameter of a table rebalancer (see the module docstring)."""
    return Param(
        "base", "choice", default,
        "base hash h(k) of keys outside the routing table: 'slots' (fp mod S slots dealt evenly to the "
        "workers, plain hash's placement at the starting worker count; a worker added takes 1/(n+1) of the keys), the papers' 'consistent'-hash "
        "ring of `replicas` points per worker (Fang Sec. II-A/V, Gedik Sec. 3), or 'mod' = fp mod n "
        "(a resize re-homes most keys)",
        choices=BASES,
    )


def make_base(p: dict[str, Any], n_workers: int, seed: int,
              origin: int | None = None) -> SlotTable | ConsistentHashRing | None:
    """The base hash of parameters ``p`` for ``n_workers``: a :class:`SlotTable` aligned with
    ``fp mod origin`` (the worker count the planner was built with; default ``n_workers``), a ring
    (``p["replicas"]`` points per worker, placed by ``seed``) or ``None`` for ``fp mod n``.  A planner
    pickled before ``base`` existed (no ``base`` in ``p``) keeps the ring it was built with."""
    kind = p.get("base", "consistent")
    if kind == "slots":
        return SlotTable(n_workers, origin)
    if kind == "consistent":
        return ConsistentHashRing(n_workers, int(p["replicas"]), seed)
    return None
