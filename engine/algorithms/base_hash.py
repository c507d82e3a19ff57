"""The base hash h(k) of the table rebalancers: the worker of a key outside the routing table.

Fang et al. (HPDC 2017, Sec. II-A and V) and Gedik (VLDBJ 2014, Sec. 3, H_c) route every key outside
their routing table by consistent hashing, so that a change of the worker count moves few keys.  The
``base`` parameter of both families (:func:`base_param`) chooses how:

* ``slots`` (default) — a slot table: a key's slot is the top :data:`SLOT_BITS` bits of
  ``mix64(fp XOR salt)``, the salt drawn from the grouping's seed (0 for seed 0: then the slot is the
  top of the key's ring position), as the ring's points are; and the table gives every worker ⌊S/n⌋ or ⌈S/n⌉ of
  the S = 2^16 slots (:func:`slot_table`).  The table for n + 1 workers is the table for n with, from
  every worker, the slots above its new quota (the last ones, by slot number) handed to worker n; so
  from n to n + 1 workers only slots of the new worker change hands (≈ 1/(n+1) of the keys) and from
  n + 1 to n only the removed worker's.  Keys per worker are as even as ``fp mod n``: a uniform hash
  into S slots, and the workers' slot counts differ by at most one (1/S of the keys; checked for every
  n ≤ 1024, the most workers a run may have).  The construction is the fixed-slot scheme of Redis Cluster and of Dynamo's "strategy 3"
  (Q/S equal-sized partitions, DeCandia et al., SOSP 2007, Sec. 6.2), made canonical: the table is a
  function of n alone (built once per process and n, never shipped: a router pickles n only).
* ``consistent`` — the ring of :class:`skewlab.engine.algorithms.groupings.basic.ConsistentHashRing`
  with ``replicas`` points per worker, the papers' construction (their reproductions pin it).
* ``mod`` — ``fp mod n`` (plain hash); a resize re-homes ~n/(n+1) of the keys.

Deviation from both papers: the default is ``slots``, not a ring, because a rebalancer should start
no less even than plain ``hash`` (issue 39; the ring of 1000 points per worker left the busiest of 10
workers ~3.5 % above the mean on uniform keys where hash is within ~0.5 %, and the measurements
behind the choice, jump consistent hash included, are in docs/results/traces-vs-hash.md).  The plans,
the gate and the migration after a resize or a change of ``base`` are the same for every choice (the
router's base object has one method, ``lookup``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from skewlab.engine.algorithms.groupings.basic import ConsistentHashRing
from skewlab.engine.algorithms.keys import mix64, mix64_scalar
from skewlab.engine.config.params import Param

__all__ = ["BASES", "SLOT_BITS", "SlotTable", "base_param", "make_base", "slot_table"]

#: the values of the ``base`` parameter
BASES = ("slots", "consistent", "mod")
#: S = 2^SLOT_BITS slots of the slot table
SLOT_BITS = 16


@njit(cache=True)
def _build_slot_table(n, table, rank):  # pragma: no cover - compiled
    """The canonical table for ``n`` workers, grown one worker at a time (see :func:`slot_table`)."""
    size = table.size
    for s in range(size):
        table[s] = 0
        rank[s] = s
    for m in range(1, n):  # m workers -> m + 1: worker m takes every slot above its owner's new quota
        base = size // (m + 1)
        extra = size % (m + 1)
        taken = 0
        for s in range(size):
            w = table[s]
            quota = base + 1 if w < extra else base
            if rank[s] >= quota:
                table[s] = m
                rank[s] = taken
                taken += 1


_TABLES: dict[int, np.ndarray] = {}


def slot_table(n_workers: int) -> np.ndarray:
    """Worker (``int64``) of each of the 2^:data:`SLOT_BITS` slots with ``n_workers`` workers.

    With one worker every slot is worker 0's; going from m to m + 1 workers, worker w < m keeps its
    first ⌊S/(m+1)⌋ slots (one more when w < S mod (m+1)) in the order it got them and worker m takes
    the rest.  Cached per process (read only)."""
    n = int(n_workers)
    table = _TABLES.get(n)
    if table is None:
        if n < 1:
            raise ValueError(f"n_workers must be at least 1, got {n}")
        table = np.empty(1 << SLOT_BITS, dtype=np.int64)
        _build_slot_table(n, table, np.empty(table.size, dtype=np.int64))
        table.setflags(write=False)
        _TABLES[n] = table
    return table


@njit(cache=True)
def _lookup_slots(fps, salt, table, out):  # pragma: no cover - compiled
    shift = np.uint64(64 - SLOT_BITS)
    for x in range(fps.size):
        out[x] = table[mix64_scalar(fps[x] ^ salt) >> shift]


class SlotTable:
    """The ``slots`` base hash for ``n_workers`` and ``seed`` (see the module docstring); pickles as
    the two numbers (the table is rebuilt, or found in the process's cache, on the first lookup)."""

    __slots__ = ("n_workers", "salt", "_table")

    def __init__(self, n_workers: int, seed: int = 0) -> None:
        self.n_workers = int(n_workers)
        self.salt = int(mix64(np.array([seed], dtype=np.uint64))[0])  # SplitMix64 finaliser: 0 for seed 0
        self._table: np.ndarray | None = None

    def __getstate__(self) -> tuple[int, int]:
        return self.n_workers, self.salt

    def __setstate__(self, state: tuple[int, int]) -> None:
        self.n_workers, self.salt = int(state[0]), int(state[1])
        self._table = None

    def lookup(self, fps: np.ndarray) -> np.ndarray:
        """Worker (``int64``) of every fingerprint: the owner of slot
        ``mix64(fp XOR salt) >> (64 − SLOT_BITS)``."""
        if self._table is None:
            self._table = slot_table(self.n_workers)
        fps = np.ascontiguousarray(fps, dtype=np.uint64)
        out = np.empty(fps.size, dtype=np.int64)
        if fps.size:
            _lookup_slots(fps, np.uint64(self.salt), self._table, out)
        return out


def base_param(default: str = "slots") -> Param:
    """The ``base`` parameter of a table rebalancer (see the module docstring)."""
    return Param(
        "base", "choice", default,
        "base hash h(k) of keys outside the routing table: 'slots' (2^16 hash slots dealt evenly to the "
        "workers; as even as hash, a worker added takes 1/(n+1) of the keys), the papers' 'consistent'-hash "
        "ring of `replicas` points per worker (Fang Sec. II-A/V, Gedik Sec. 3), or 'mod' = fp mod n "
        "(a resize re-homes most keys)",
        choices=BASES,
    )


def make_base(p: dict[str, Any], n_workers: int, seed: int) -> SlotTable | ConsistentHashRing | None:
    """The base hash of parameters ``p`` for ``n_workers``: a :class:`SlotTable` (salted by ``seed``), a
    ring (``p["replicas"]`` points per worker, placed by ``seed``) or ``None`` for ``fp mod n``.  A planner
    pickled before ``base`` existed (no ``base`` in ``p``) keeps the ring it was built with."""
    kind = p.get("base", "consistent")
    if kind == "slots":
        return SlotTable(n_workers, seed)
    if kind == "consistent":
        return ConsistentHashRing(n_workers, int(p["replicas"]), seed)
    return None
