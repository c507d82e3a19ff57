"""The keyed state of one worker of the Spark engine: a sliding window of per-key tuple counts.

A worker of the ``count`` operator keeps, for every key it owns, the number of its tuples in each of
the last ``window`` micro-batches (one interval = one micro-batch) and emits, for every key that
received tuples in batch ``b``, the key's windowed count over batches ``(b - window, b]``.  One
:class:`WorkerWindow` is the whole state of one worker; the engine keeps it as one binary value in
Spark's state store (one state partition per worker, :mod:`engine.spark.operator`), so Spark
checkpoints and recovers it with the query's offsets.

Migration (the protocol of fang-hpdc17 Sec. III-C and gedik-vldbj14 Sec. 5, carried through
micro-batches; the steps and their order are in :meth:`WorkerWindow.step`):

* the worker that loses a key **exports** the key's window (its per-batch counts) and forgets it;
* the worker that gains the key **holds** the key's new tuples (they are counted, not emitted) until
  the exported window arrives in the next batch, then **imports** it, adds the held tuples and
  emits their results — so every (batch, key) result is emitted once, by the key's owner, with the
  exact windowed count.

Storage layout: a dense ``(keys, window)`` ring of counts (column ``b mod window`` holds batch
``b``) and a dict from key to row; serialised sparse (only the non-zero cells), because most keys of
a skewed stream appear in a few batches of the window.  Keys whose window became empty are dropped.
"""

from __future__ import annotations

import pickle
from typing import Any, Iterable, Sequence

import numpy as np

__all__ = ["WorkerWindow"]


class WorkerWindow:
    """Sliding-window per-key counts of one worker, with export/hold/import for migration."""

    def __init__(self, window: int) -> None:
        if int(window) < 1:
            raise ValueError(f"window must be >= 1 batch, got {window}")
        self.window = int(window)
        self.keys: list[str] = []
        self.index: dict[str, int] = {}
        self.ring = np.zeros((0, self.window), dtype=np.int64)
        #: batch held by each ring column (-1: none yet)
        self.col_batch = np.full(self.window, -1, dtype=np.int64)
        self.last = -1  # the batch the window was last slid to
        #: tuples of keys in flight towards this worker: key -> [(batch, count), ...]
        self.held: dict[str, list[tuple[int, int]]] = {}
        #: keys whose state is on its way here (their new tuples are held until it arrives)
        self.expect: set[str] = set()

    # ------------------------------------------------------------------ reads
    def __len__(self) -> int:
        return len(self.keys)

    def totals(self) -> dict[str, int]:
        """Windowed count per key (held tuples not included: they are not yet applied)."""
        sums = self.ring.sum(axis=1)
        return {k: int(s) for k, s in zip(self.keys, sums)}

    def held_tuples(self) -> int:
        return sum(c for entries in self.held.values() for _, c in entries)

    # ------------------------------------------------------------------ window
    def slide(self, batch: int) -> None:
        """Advance the window to end at ``batch``: columns of batches ``<= batch - window`` are emptied
        and keys with an empty window are dropped.  Never moves backwards."""
        batch = int(batch)
        if batch <= self.last:
            return
        if batch - self.last >= self.window or self.last < 0:
            self.ring[:] = 0
            self.col_batch[:] = -1
        else:
            for b in range(self.last + 1, batch + 1):
                self.ring[:, b % self.window] = 0
                self.col_batch[b % self.window] = -1
        self.last = batch
        if self.ring.shape[0]:
            alive = self.ring.any(axis=1)
            if not alive.all():
                self._keep(alive)

    def _keep(self, alive: np.ndarray) -> None:
        self.ring = self.ring[alive]
        self.keys = [k for k, a in zip(self.keys, alive) if a]
        self.index = {k: i for i, k in enumerate(self.keys)}

    def _rows(self, keys: Sequence[str]) -> np.ndarray:
        """Ring rows of ``keys`` (unique), appending rows for unknown keys."""
        get = self.index.get
        rows = np.fromiter((get(k, -1) for k in keys), dtype=np.int64, count=len(keys))
        new = np.flatnonzero(rows < 0)
        if new.size:
            start = len(self.keys)
            for j, i in enumerate(new):
                k = keys[i]
                self.keys.append(k)
                self.index[k] = start + j
            rows[new] = np.arange(start, start + new.size)
            self.ring = np.vstack([self.ring, np.zeros((new.size, self.window), dtype=np.int64)])
        return rows

    def _add_at(self, rows: np.ndarray, batch: int, counts: np.ndarray) -> None:
        col = int(batch) % self.window
        if self.col_batch[col] not in (-1, batch):
            raise ValueError(f"batch {batch} is outside the window ending at {self.last}")
        self.col_batch[col] = batch
        np.add.at(self.ring[:, col], rows, counts)

    def _window_sum(self, rows: np.ndarray, batch: int) -> np.ndarray:
        """Windowed count of ``rows`` over batches ``(batch - window, batch]``."""
        cols = (self.col_batch > batch - self.window) & (self.col_batch <= batch)
        return self.ring[rows][:, cols].sum(axis=1)

    # ------------------------------------------------------------------ tuples
    def add(self, keys: Sequence[str], counts: np.ndarray, batch: int) -> tuple[list[str], np.ndarray, list[tuple[int, int]]]:
        """Apply one batch's per-key counts (``keys`` unique) at ``batch`` (the window's current end).

        Tuples of keys in :attr:`expect` are held.  Returns the emitted results: keys, their windowed
        counts, and for the held tuples ``[]`` (they are emitted on import)."""
        counts = np.asarray(counts, dtype=np.int64)
        if self.expect:
            keep = [i for i, k in enumerate(keys) if k not in self.expect]
            for i in range(len(keys)):
                if keys[i] in self.expect:
                    self.held.setdefault(keys[i], []).append((int(batch), int(counts[i])))
            keys = [keys[i] for i in keep]
            counts = counts[keep]
        if not len(keys):
            return [], np.zeros(0, np.int64), []
        rows = self._rows(keys)
        self._add_at(rows, batch, counts)
        return list(keys), self._window_sum(rows, batch), []

    # ------------------------------------------------------------------ migration
    def export(self, keys: Iterable[str]) -> dict[str, Any]:
        """Remove ``keys``' state (window counts and any held tuples) and return it as an export blob.

        The blob lists every requested key, also those without state here, so the receiver knows the
        move is complete."""
        keys = list(dict.fromkeys(keys))
        present = [k for k in keys if k in self.index]
        entries: list[tuple[str, int, int]] = []
        if present:
            rows = np.fromiter((self.index[k] for k in present), dtype=np.int64, count=len(present))
            r, c = np.nonzero(self.ring[rows])
            for i, j in zip(r.tolist(), c.tolist()):
                entries.append((present[i], int(self.col_batch[j]), int(self.ring[rows[i], j])))
            alive = np.ones(len(self.keys), dtype=bool)
            alive[rows] = False
            self._keep(alive)
        held = [(k, b, c) for k in keys for b, c in self.held.pop(k, [])]
        for k in keys:
            self.expect.discard(k)
        return {"keys": keys, "entries": entries, "held": held}

    def import_(self, blob: dict[str, Any]) -> tuple[list[tuple[int, str, int]], int]:
        """Merge an export blob: window entries inside the window, then the held tuples of its keys
        (the blob's and this worker's), each emitted as ``(batch, key, windowed count)``.

        Returns (results, window entries dropped because they had left the window)."""
        dropped = 0
        entries = [e for e in blob.get("entries", ()) if e[1] > self.last - self.window]
        dropped = len(blob.get("entries", ())) - len(entries)
        for b in sorted({e[1] for e in entries}):
            part = [(k, c) for k, bb, c in entries if bb == b]
            agg: dict[str, int] = {}
            for k, c in part:
                agg[k] = agg.get(k, 0) + c
            ks = list(agg)
            self._add_at(self._rows(ks), b, np.fromiter(agg.values(), dtype=np.int64, count=len(ks)))
        pending: dict[str, list[tuple[int, int]]] = {}
        for k, b, c in blob.get("held", ()):
            pending.setdefault(k, []).append((b, c))
        for k in blob.get("keys", ()):
            pending.setdefault(k, []).extend(self.held.pop(k, []))
            self.expect.discard(k)
        results: list[tuple[int, str, int]] = []
        for k, items in pending.items():
            for b, c in sorted(items):
                if b <= self.last - self.window:
                    continue  # left the window before it could be applied (never in the protocol)
                rows = self._rows([k])
                self._add_at(rows, b, np.array([c], dtype=np.int64))
                results.append((b, k, int(self._window_sum(rows, b)[0])))
        return results, dropped

    # ------------------------------------------------------------------ one batch
    def step(self, batch: int, keys: Sequence[str], counts: np.ndarray, *,
             imports: Sequence[dict[str, Any]] = (), exports: dict[int, list[str]] | None = None,
             expect: Iterable[str] = ()) -> dict[str, Any]:
        """One micro-batch of this worker, in the protocol's order:

        1. slide to ``batch - 1`` (the batch the imported windows and held tuples belong to);
        2. import every blob and emit the released held tuples' results;
        3. slide to ``batch``;
        4. export the keys ordered away (``exports``: target worker → keys);
        5. start holding the keys in ``expect`` (their state arrives in the next batch);
        6. apply the batch's tuples and emit their results.

        Import before export: a key still in flight can move again at once.
        Returns ``results`` (list of ``(batch, key, window count)``), ``exports`` (target → blob).
        """
        batch = int(batch)
        if batch <= self.last:
            raise ValueError(f"routing snapshot of batch {batch}, but this worker's state is already at batch "
                             f"{self.last}: the routing files do not match this checkpoint; start a new run with "
                             "--run-name or --checkpoint")
        self.slide(batch - 1)
        results: list[tuple[int, str, int]] = []
        for blob in imports:
            res, _ = self.import_(blob)
            results.extend(res)
        self.slide(batch)
        blobs = {int(t): self.export(ks) for t, ks in (exports or {}).items() if ks}
        self.expect.update(expect)
        out_keys, sums, _ = self.add(list(keys), counts, batch)
        results.extend((batch, k, int(s)) for k, s in zip(out_keys, sums.tolist()))
        return {"results": results, "exports": blobs}

    # ------------------------------------------------------------------ serialisation
    def dumps(self) -> bytes:
        """Sparse serialisation: non-zero (row, column, count) cells, keys, window position, flights."""
        r, c = np.nonzero(self.ring)
        cells = (r.astype(np.int32), c.astype(np.int16), self.ring[r, c])
        return pickle.dumps((self.window, self.keys, cells, self.col_batch, self.last, self.held, self.expect),
                            protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def loads(cls, data: bytes) -> "WorkerWindow":
        window, keys, (r, c, v), col_batch, last, held, expect = pickle.loads(data)
        self = cls(window)
        self.keys = keys
        self.index = {k: i for i, k in enumerate(keys)}
        self.ring = np.zeros((len(keys), window), dtype=np.int64)
        self.ring[r.astype(np.int64), c.astype(np.int64)] = v
        self.col_batch = col_batch
        self.last = last
        self.held = held
        self.expect = expect
        return self
