"""The keyed state of one worker of the Spark engine: a sliding window of per-key tuple counts.

A worker of the ``count`` operator keeps, for every key it owns, the number of its tuples in each of
the last ``window`` micro-batches (one interval = one micro-batch) and emits, for every key that
received tuples in batch ``b``, the key's windowed count over batches ``(b - window, b]``.  One
:class:`WorkerWindow` is the whole state of one worker; the engine keeps it as one binary value in
Spark's state store (one state partition per worker, :mod:`skewlab.engine.runtimes.spark.operator`), so Spark
checkpoints and recovers it with the query's offsets.

The ``join`` operator (a sliding-window self-join on the key, as fang-hpdc17's Stock join) keeps in
addition every tuple's value (its source position) per key and batch; each new tuple of key ``k``
probes all of ``k``'s tuples in the window — those of earlier batches and the earlier ones of its
own batch — and evaluates the join function on every pair (:func:`join_probe`), so the work of a
key is proportional to its window state.  It emits per (batch, key) the number of joined pairs and
the sum of the pairs' join values (a checksum that a test recomputes pair by pair).

Migration (the protocol of fang-hpdc17 Sec. III-C and gedik-vldbj14 Sec. 5, carried through
micro-batches; the steps and their order are in :meth:`WorkerWindow.step`):

* the worker that loses a key **exports** the key's window (its per-batch counts) and forgets it;
* the worker that gains the key **holds** the key's new tuples (they are counted, not emitted) until
  the exported window arrives in the next batch, then **imports** it, adds the held tuples and
  emits their results — so every (batch, key) result is emitted once, by the key's owner, with the
  exact windowed count.

A result is this worker's share of the key: the whole windowed count for a single-owner grouping,
a partial one for a split-key grouping (PKG, D-Choices; downstream sums the workers' shares, as in
nasir-icde15).  A worker that exports a key emits a retraction — share 0 at the export batch — so
"sum over workers of each one's latest share" is the key's result through every migration; with
``changes`` (:meth:`WorkerWindow.step`) a worker also reports a share that changed without tuples
(old batches left the window, state imported), which keeps that sum exact with a finite window.

Storage layout: a dense ``(keys, window)`` ring of counts (column ``b mod window`` holds batch
``b``) and a dict from key to row; serialised sparse (only the non-zero cells), because most keys of
a skewed stream appear in a few batches of the window.  Keys whose window became empty are dropped.
"""

from __future__ import annotations

import pickle
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
from numba import njit

from skewlab.engine.algorithms.keys import fingerprint_keys

__all__ = ["JOIN_MASK", "WorkerWindow", "join_probe", "key_fingerprints"]

#: the join value of a pair of tuples with values a, b: ``(a XOR b) AND JOIN_MASK`` (symmetric, so a
#: batch's pairs give the same sum in any arrival order; masked so sums of 1e14 pairs fit int64)
JOIN_MASK = 0xFFFF


@njit(cache=True)
def join_probe(new, old):  # pragma: no cover - compiled
    """Sum of the join values of every new tuple with every ``old`` tuple and every earlier new one.

    ``new``, ``old``: int64 tuple values of one key.  Work ``len(new) * len(old) + len(new)**2 / 2``."""
    acc = np.int64(0)
    mask = np.int64(JOIN_MASK)
    for i in range(new.size):
        a = new[i]
        for j in range(old.size):
            acc += (a ^ old[j]) & mask
        for j in range(i):
            acc += (a ^ new[j]) & mask
    return acc


def key_fingerprints(keys: Sequence[str]) -> np.ndarray:
    """Fingerprints (:func:`skewlab.engine.algorithms.keys.fingerprint`) of key names, hashed over one Arrow buffer."""
    return fingerprint_keys(pa.array(list(keys), pa.string())) if len(keys) else np.zeros(0, np.uint64)


class WorkerWindow:
    """Sliding-window per-key state of one worker, with export/hold/import for migration.

    ``join=False``: per-key counts (the ``count`` operator).  ``join=True``: also the tuples' values
    per key and batch (the ``join`` operator).  Results are ``(batch, key, count, checksum)``:
    ``count`` the windowed count (count) or the pairs joined (join), ``checksum`` ``None`` (count) or
    the sum of the pairs' join values (join).
    """

    def __init__(self, window: int, join: bool = False) -> None:
        if int(window) < 1:
            raise ValueError(f"window must be >= 1 batch, got {window}")
        self.window = int(window)
        self.join = bool(join)
        self.keys: list[str] = []
        self.index: dict[str, int] = {}
        self.ring = np.zeros((0, self.window), dtype=np.int64)
        #: batch held by each ring column (-1: none yet)
        self.col_batch = np.full(self.window, -1, dtype=np.int64)
        self.last = -1  # the batch the window was last slid to
        #: (join) tuple values: key -> {batch: int64 array}
        self.values: dict[str, dict[int, np.ndarray]] = {}
        #: tuples of keys in flight towards this worker: key -> [(batch, count, values or None), ...]
        self.held: dict[str, list[tuple[int, int, Any]]] = {}
        #: fingerprints of the keys whose state is on its way here (their new tuples are held until it
        #: arrives); the driver names keys by fingerprint (:func:`skewlab.engine.algorithms.keys.fingerprint`)
        self.expect: set[int] = set()
        #: (``changes``) shares not reported while the key's state was on its way here: key -> the
        #: share last reported; the arrival (or a move away) reports the key's new share
        self.quiet: dict[str, int] = {}

    # ------------------------------------------------------------------ reads
    def __len__(self) -> int:
        return len(self.keys)

    def totals(self) -> dict[str, int]:
        """Windowed count per key (held tuples not included: they are not yet applied)."""
        sums = self.ring.sum(axis=1)
        return {k: int(s) for k, s in zip(self.keys, sums)}

    def held_tuples(self) -> int:
        return sum(e[1] for entries in self.held.values() for e in entries)

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
        if self.values:
            low = batch - self.window
            for k in list(self.values):
                per = self.values[k]
                for b in [b for b in per if b <= low]:
                    del per[b]
                if not per:
                    del self.values[k]
        if self.ring.shape[0]:
            alive = self.ring.any(axis=1)
            if not alive.all():
                self._keep(alive)

    def _keep(self, alive: np.ndarray) -> None:
        self.ring = self.ring[alive]
        gone = [k for k, a in zip(self.keys, alive) if not a]
        for k in gone:
            self.values.pop(k, None)
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

    def _window_values(self, key: str, batch: int) -> np.ndarray:
        per = self.values.get(key)
        if not per:
            return np.zeros(0, dtype=np.int64)
        parts = [v for b, v in per.items() if batch - self.window < b <= batch]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def _append_values(self, key: str, batch: int, vals: np.ndarray) -> None:
        per = self.values.setdefault(key, {})
        per[batch] = np.concatenate([per[batch], vals]) if batch in per else np.asarray(vals, dtype=np.int64)

    def _apply(self, keys: list[str], counts: np.ndarray, batch: int, values: Sequence[Any] | None
               ) -> list[tuple[int, str, int, int | None]]:
        """Add tuples of ``batch`` (``keys`` unique) and return their results."""
        if not keys:
            return []
        rows = self._rows(keys)
        if not self.join:
            self._add_at(rows, batch, counts)
            return [(batch, k, int(c), None) for k, c in zip(keys, self._window_sum(rows, batch).tolist())]
        out = []
        for k, v in zip(keys, values):  # type: ignore[arg-type]
            v = np.asarray(v, dtype=np.int64)
            old = self._window_values(k, batch)
            pairs = v.size * old.size + v.size * (v.size - 1) // 2
            out.append((batch, k, int(pairs), int(join_probe(v, old))))
            self._append_values(k, batch, v)
        self._add_at(rows, batch, counts)
        return out

    # ------------------------------------------------------------------ tuples
    def add(self, keys: Sequence[str], counts: np.ndarray, batch: int, values: Sequence[Any] | None = None,
            fps: np.ndarray | None = None) -> list[tuple[int, str, int, int | None]]:
        """Apply one batch's per-key counts (``keys`` unique; ``values``: per key the tuples' values,
        join only; ``fps``: the keys' fingerprints if known) at ``batch`` (the window's current end).
        Tuples of keys whose fingerprint is in :attr:`expect` are held (emitted on import).  Returns
        the results of the others."""
        counts = np.asarray(counts, dtype=np.int64)
        if self.expect and len(keys):
            fps = key_fingerprints(keys) if fps is None else fps
            wait = np.isin(fps, np.fromiter(self.expect, dtype=np.uint64, count=len(self.expect)))
            for i in np.flatnonzero(wait).tolist():
                self.held.setdefault(keys[i], []).append(
                    (int(batch), int(counts[i]), None if values is None else np.asarray(values[i], dtype=np.int64)))
            if wait.any():
                keep = np.flatnonzero(~wait)
                keys = [keys[i] for i in keep.tolist()]
                counts = counts[keep]
                values = None if values is None else [values[i] for i in keep.tolist()]
        return self._apply(list(keys), counts, int(batch), values)

    # ------------------------------------------------------------------ migration
    def export(self, orders: Mapping[int, np.ndarray]) -> dict[int, dict[str, Any]]:
        """Remove the state of the keys ordered away (``orders``: target worker → key fingerprints) and
        return one export blob per target.

        A blob holds ``fps`` (every requested fingerprint, also of keys without state here, so the
        receiver knows the move is complete), ``keys`` (the names of those this worker had: state or
        held tuples), ``present`` (those with state), the non-zero window cells as arrays ``row``
        (index into ``present``), ``col`` (index into ``batches``, the window's batch per column),
        ``count`` (and ``values``, one array per cell, for the join), and ``held`` (``(key, batch,
        count, values)`` of tuples held here).  The state's keys are fingerprinted and the ring
        compacted once for all targets."""
        orders = {int(t): np.unique(np.asarray(f, dtype=np.uint64)) for t, f in orders.items() if len(f)}
        if not orders:
            return {}
        state_fps = key_fingerprints(self.keys) if self.keys else np.zeros(0, np.uint64)
        held_keys = list(self.held)
        held_fps = key_fingerprints(held_keys) if held_keys else np.zeros(0, np.uint64)
        quiet_keys = list(self.quiet)
        quiet_fps = key_fingerprints(quiet_keys) if quiet_keys else np.zeros(0, np.uint64)
        alive = np.ones(len(self.keys), dtype=bool)
        blobs: dict[int, dict[str, Any]] = {}
        for target, fps in orders.items():
            rows = np.flatnonzero(np.isin(state_fps, fps) & alive)
            present = [self.keys[i] for i in rows.tolist()]
            held = [held_keys[i] for i in np.flatnonzero(np.isin(held_fps, fps)).tolist()]
            quiet = [quiet_keys[i] for i in np.flatnonzero(np.isin(quiet_fps, fps)).tolist()]
            for k in quiet:  # its last reported share is retracted with the others
                self.quiet.pop(k, None)
            blob: dict[str, Any] = {"fps": fps, "keys": list(dict.fromkeys(present + held + quiet)), "present": present,
                                    "row": np.zeros(0, np.int32), "batches": self.col_batch.copy(),
                                    "col": np.zeros(0, np.int16), "count": np.zeros(0, np.int32), "values": None}
            if present:
                sub = self.ring[rows]
                r, c = np.nonzero(sub)
                counts = sub[r, c]
                # compact cells: at most `window` distinct batches, counts of one batch fit 32 bits
                blob.update(row=r.astype(np.int32), col=c.astype(np.int16),
                            count=counts.astype(np.int32) if counts.max() < 2**31 else counts)
                if self.join:
                    blob["values"] = [self.values.get(present[i], {}).get(int(self.col_batch[j]))
                                      for i, j in zip(r.tolist(), c.tolist())]
                alive[rows] = False
            blob["held"] = [(k, *e) for k in held if k in self.held for e in self.held.pop(k)]
            self.expect.difference_update(fps.tolist())
            blobs[target] = blob
        if not alive.all():
            self._keep(alive)
        return blobs

    def import_(self, blobs: Sequence[dict[str, Any]]) -> tuple[list[tuple[int, str, int, int | None]], int]:
        """Merge export blobs — a key's blobs from all its old holders, before anything is released —
        then apply the held tuples of their keys (the blobs' and this worker's), whose results are
        emitted now at their own batch: per batch, all keys at once, in batch order.

        Returns (results, window entries dropped because they had left the window)."""
        low = self.last - self.window
        dropped = 0
        window: list[tuple[int, np.ndarray, np.ndarray]] = []  # (batch, ring rows, counts)
        released: dict[int, dict[str, list[Any]]] = {}  # batch -> key -> [count, values...]
        arrived: list[np.ndarray] = []
        for blob in blobs:
            batch, count = blob["batches"][blob["col"]], blob["count"].astype(np.int64)
            inside = batch > low
            dropped += int(np.count_nonzero(~inside))
            if inside.any():
                rows = self._rows(blob["present"])[blob["row"]]
                for b in np.unique(batch[inside]).tolist():
                    sel = inside & (batch == b)
                    window.append((b, rows[sel], count[sel]))
                if self.join:
                    for i in np.flatnonzero(inside).tolist():
                        if blob["values"][i] is not None:
                            self._append_values(blob["present"][blob["row"][i]], int(batch[i]), blob["values"][i])
            for k, b, c, vals in blob.get("held", ()):
                self._hold_release(released, k, b, c, vals)
            arrived.append(np.asarray(blob["fps"], dtype=np.uint64))
        for b, rows, counts in window:
            self._add_at(rows, b, counts)
        fps = np.unique(np.concatenate(arrived)) if arrived else np.zeros(0, np.uint64)
        if self.held and fps.size:
            waiting = list(self.held)
            for i in np.flatnonzero(np.isin(key_fingerprints(waiting), fps)).tolist():
                for b, c, vals in self.held.pop(waiting[i]):
                    self._hold_release(released, waiting[i], b, c, vals)
        self.expect.difference_update(fps.tolist())
        results: list[tuple[int, str, int, int | None]] = []
        for b in sorted(released):
            if b <= low:
                continue  # left the window before it could be applied (never in the protocol)
            per = released[b]
            ks = list(per)
            counts = np.fromiter((per[k][0] for k in ks), dtype=np.int64, count=len(ks))
            values = [np.concatenate(per[k][1:]) if len(per[k]) > 1 else np.zeros(0, np.int64) for k in ks] \
                if self.join else None
            results.extend(self._apply(ks, counts, b, values))
        return results, dropped

    def _hold_release(self, released: dict[int, dict[str, list[Any]]], key: str, batch: int, count: int,
                      values: Any) -> None:
        """Collect a held entry for release: per batch and key, the total count and the values."""
        entry = released.setdefault(int(batch), {}).setdefault(key, [0])
        entry[0] += int(count)
        if values is not None:
            entry.append(np.asarray(values, dtype=np.int64))

    # ------------------------------------------------------------------ one batch
    def step(self, batch: int, keys: Sequence[str], counts: np.ndarray, *, values: Sequence[Any] | None = None,
             fps: np.ndarray | None = None, imports: Sequence[dict[str, Any]] = (),
             exports: dict[int, np.ndarray] | None = None, expect: np.ndarray | Sequence[int] = (),
             changes: bool = False) -> dict[str, Any]:
        """One micro-batch of this worker, in the protocol's order:

        1. slide to ``batch - 1`` (the batch the imported windows and held tuples belong to);
        2. import every blob (all of them before any held tuple is released: a split key arrives from
           several old holders) and emit the released held tuples' results;
        3. slide to ``batch``;
        4. export the keys ordered away (``exports``: target worker → key fingerprints);
        5. start holding the keys whose fingerprints are in ``expect`` (their state arrives in the next
           batch);
        6. apply the batch's tuples and emit their results.

        Import before export: a key still in flight can move again at once.

        ``changes`` (count only): also emit, at ``batch``, the new windowed count of every key whose
        count changed without tuples of its own in this batch — its old batches left the window (0
        when all did).  A split key's shares then stay exact between its tuples: the sum over workers
        of each one's latest share is the key's windowed count at every batch
        (:func:`skewlab.engine.runtimes.spark.operator.merge_latest_shares`).
        Returns ``results`` (list of ``(batch, key, count, checksum)``), ``exports`` (target → blob).
        """
        batch = int(batch)
        if batch <= self.last:
            raise ValueError(f"routing snapshot of batch {batch}, but this worker's state is already at batch "
                             f"{self.last}: the routing files do not match this checkpoint; start a new run with "
                             "--run-name or --checkpoint")
        track = changes and not self.join
        if track:  # the shares that can change without tuples: keys with counts in batches about to leave
            leaving = (self.col_batch >= 0) & (self.col_batch <= batch - self.window)
            rows = np.flatnonzero(self.ring[:, leaving].any(axis=1)) if leaving.any() else np.zeros(0, np.int64)
            reported = dict(zip((self.keys[i] for i in rows.tolist()), self.ring[rows].sum(axis=1).tolist()))
        self.slide(batch - 1)
        results, _ = self.import_(imports) if imports else ([], 0)
        if track and imports:
            results.extend(self._arrived(batch - 1, imports, results, reported))
            reported.update((r[1], r[2]) for r in results)  # in batch order: the latest wins
        self.slide(batch)
        blobs = self.export(exports or {})
        for blob in blobs.values():  # retraction: this worker's share of each key it gave away is now 0
            results.extend((batch, k, 0, 0 if self.join else None) for k in blob["keys"])
        self.expect.update(np.asarray(expect, dtype=np.uint64).tolist())
        results.extend(self.add(list(keys), counts, batch, values, fps=fps))
        if track:
            results.extend(self._expired(batch, reported, {r[1] for r in results if r[0] == batch}))
        if len({(r[0], r[1]) for r in results}) < len(results):  # a key given away and fed again: last wins
            results = list({(r[0], r[1]): r for r in results}.values())
        return {"results": results, "exports": blobs}

    def _arrived(self, batch: int, blobs: Sequence[dict[str, Any]], released: list[tuple[int, str, int, Any]],
                 reported: dict[str, int]) -> list[tuple[int, str, int, None]]:
        """Results at ``batch`` (the export batch) of the keys whose move these blobs complete and that
        had no held tuples to release: this worker's share of them is now their windowed count — the
        imported window plus any it already held, 0 if nothing is left (it did not report them while
        they were expected; ``reported``: the reported shares of keys whose old batches left)."""
        candidates = list(dict.fromkeys(self.keys + list(reported) + list(self.quiet)))
        if not candidates:
            return []
        fps = np.unique(np.concatenate([np.asarray(b["fps"], dtype=np.uint64) for b in blobs]))
        done = {r[1] for r in released}
        hit = np.flatnonzero(np.isin(key_fingerprints(candidates), fps)).tolist()
        for i in hit:
            self.quiet.pop(candidates[i], None)
        keys = [candidates[i] for i in hit if candidates[i] not in done and candidates[i] not in self.held]
        if not keys:
            return []
        get = self.index.get
        rows = np.fromiter((get(k, -1) for k in keys), dtype=np.int64, count=len(keys))
        sums = self._window_sum(np.maximum(rows, 0), batch) if len(self.keys) else np.zeros(len(keys), np.int64)
        return [(batch, k, int(c) if r >= 0 else 0, None) for k, c, r in zip(keys, sums.tolist(), rows.tolist())]

    def _expired(self, batch: int, reported: dict[str, int], emitted: set[str]) -> list[tuple[int, str, int, None]]:
        """Results at ``batch`` of the keys whose windowed count moved away from the share last
        ``reported`` without a result in this step: their old batches left the window (0: all did)."""
        get = self.index.get
        keys = [k for k in reported if k not in emitted and k not in self.held]
        if self.expect and keys:  # a key whose state is arriving reports its share on arrival
            wait = np.isin(key_fingerprints(keys), np.fromiter(self.expect, dtype=np.uint64, count=len(self.expect)))
            for k, w in zip(keys, wait.tolist()):
                if w:
                    self.quiet.setdefault(k, int(reported[k]))
            keys = [k for k, w in zip(keys, wait.tolist()) if not w]
        rows = np.fromiter((get(k, -1) for k in keys), dtype=np.int64, count=len(keys))
        sums = self.ring.sum(axis=1)
        now = np.where(rows >= 0, sums[np.maximum(rows, 0)] if sums.size else 0, 0)
        before = np.fromiter((reported[k] for k in keys), dtype=np.int64, count=len(keys))
        return [(batch, keys[i], int(now[i]), None) for i in np.flatnonzero(now != before).tolist()]

    # ------------------------------------------------------------------ serialisation
    def dumps(self) -> bytes:
        """Sparse serialisation: non-zero (row, column, count) cells, keys, window position, values,
        flights."""
        r, c = np.nonzero(self.ring)
        cells = (r.astype(np.int32), c.astype(np.int16), self.ring[r, c])
        return pickle.dumps((self.window, self.join, self.keys, cells, self.col_batch, self.last, self.values,
                             self.held, self.expect, self.quiet), protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def loads(cls, data: bytes) -> "WorkerWindow":
        window, join, keys, (r, c, v), col_batch, last, values, held, expect, *rest = pickle.loads(data)
        self = cls(window, join)
        self.quiet = rest[0] if rest else {}  # states written before shares were tracked have none
        self.keys = keys
        self.index = {k: i for i, k in enumerate(keys)}
        self.ring = np.zeros((len(keys), window), dtype=np.int64)
        self.ring[r.astype(np.int64), c.astype(np.int64)] = v
        self.col_batch = col_batch
        self.last = last
        self.values = values
        self.held = held
        self.expect = expect
        return self
