"""The keyed state of one worker of the Spark engine: a sliding window of a keyed operator's
per-key partial states.

A worker keeps, for every key it owns, the number of its tuples in each of the last ``window``
micro-batches (one interval = one micro-batch) and, for every operator but ``count``, the key's
partial state of each of those batches (:class:`skewlab.engine.operators.KeyedOperator`); for every
key that received tuples in batch ``b`` it emits the operator's result over batches
``(b - window, b]`` (:meth:`~skewlab.engine.operators.KeyedOperator.emit`).  ``count``'s partial
state is the tuple count itself, so its results are the ring's window sums (the same numbers as
``Count.emit``, vectorised over all keys).  One :class:`WorkerWindow` is the whole state of one
worker; the engine keeps it as one binary value in Spark's state store (one state partition per
worker, :mod:`skewlab.engine.runtimes.spark.operator`), so Spark checkpoints and recovers it with the
query's offsets.

Migration (the protocol of fang-hpdc17 Sec. III-C and gedik-vldbj14 Sec. 5, carried through
micro-batches; the steps and their order are in :meth:`WorkerWindow.step`):

* the worker that loses a key **exports** the key's window (its per-batch counts) and forgets it;
* the worker that gains the key **holds** the key's new tuples (they are counted, not emitted) until
  the exported window arrives in the next batch, then **imports** it, adds the held tuples and
  emits their results — so every (batch, key) result is emitted once, by the key's owner, with the
  exact windowed count.

A result is the key's whole result under a single-owner grouping.  Under a split-key grouping
(PKG, D-Choices) it covers only this worker's share of the key; the engine then writes the key's
result from every holder's :meth:`WorkerWindow.shares`, merged in Spark
(:mod:`skewlab.engine.runtimes.spark.share_merge`).

Storage layout: a dense ``(keys, width)`` ring of counts (column ``b mod width`` holds batch ``b``)
and a dict from key to row.  ``width`` starts at ``min(window, 16)`` and doubles, up to ``window``,
when the batches alive in the window span more columns than the ring has: a window far longer than
the run (or than its keys' lives) costs the columns its batches use, not ``window`` of them per key
(measured in docs/results/engine.md, "A long window").  The ring is serialised sparse (only the non-zero cells), because most keys of
a skewed stream appear in a few batches of the window.  Keys whose window became empty are dropped.
The operator's partial states are kept batch-major (batch → key → state): a batch leaving the window
is dropped whole, and an operator whose ``dumps`` is the interface's default pickle has its states
pickled as they are, in the window's one pickle, with no call per state.
"""

from __future__ import annotations

import pickle
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa

from skewlab.engine.algorithms.keys import fingerprint_keys
from skewlab.engine.operators import KeyedOperator
from skewlab.engine.operators.builtin import Count

__all__ = ["WorkerWindow", "key_fingerprints"]

#: the ring's first width in columns (batches), doubled as the window's live batches need
_FIRST_WIDTH = 16

#: layouts of a serialised window's partial states: batch-major with the states as they are (an
#: operator that pickles itself) or as the operator's bytes; key-major bytes (states written before)
_LAYOUT_RAW, _LAYOUT_BYTES, _LAYOUT_KEY_MAJOR = "batch-major", "batch-major-bytes", "key-major-bytes"


def key_fingerprints(keys: Sequence[str]) -> np.ndarray:
    """Fingerprints (:func:`skewlab.engine.algorithms.keys.fingerprint`) of key names, hashed over one Arrow buffer."""
    return fingerprint_keys(pa.array(list(keys), pa.string())) if len(keys) else np.zeros(0, np.uint64)


class WorkerWindow:
    """Sliding-window per-key state of one worker, with export/hold/import for migration.

    ``operator``: the keyed operator (default ``count``).  Results are ``(batch, key, *row)``, ``row``
    the operator's result tuple (:meth:`~skewlab.engine.operators.KeyedOperator.emit`: ``(count,)``,
    ``(pairs, checksum)`` of the join, ...).
    """

    def __init__(self, window: int, operator: KeyedOperator | None = None) -> None:
        if int(window) < 1:
            raise ValueError(f"window must be >= 1 batch, got {window}")
        self.window = int(window)
        self.operator = operator if operator is not None else Count()
        #: an operator whose partial state is the tuple count (count's capability,
        #: :attr:`KeyedOperator.partial_is_tuple_count`): the ring's cells are its partial states, no others are kept
        self.ring_only = bool(self.operator.partial_is_tuple_count)
        self.keys: list[str] = []
        #: the keys' fingerprints (:func:`key_fingerprints`), row by row: hashed once, when a key arrives
        self.fps = np.zeros(0, dtype=np.uint64)
        self.index: dict[str, int] = {}
        self.ring = np.zeros((0, min(self.window, _FIRST_WIDTH)), dtype=np.int64)
        #: batch held by each ring column (-1: none yet); its length is the ring's width
        self.col_batch = np.full(self.ring.shape[1], -1, dtype=np.int64)
        self.last = -1  # the batch the window was last slid to
        #: the operator's partial states (all operators but count), batch-major: batch -> {key: partial
        #: state}, so a batch that leaves the window is dropped whole
        self.partials: dict[int, dict[str, Any]] = {}
        #: tuples of keys in flight towards this worker: key -> [(batch, count, partial or None), ...]
        self.held: dict[str, list[tuple[int, int, Any]]] = {}
        #: fingerprints of the keys whose state is on its way here (their new tuples are held until it
        #: arrives); the driver names keys by fingerprint (:func:`skewlab.engine.algorithms.keys.fingerprint`)
        self.expect: set[int] = set()

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
            left = (self.col_batch >= 0) & (self.col_batch <= batch - self.window)
            self.ring[:, left] = 0
            self.col_batch[left] = -1
            self._make_room(batch, batch)
        self.last = batch
        if self.partials:
            low = batch - self.window
            for b in [b for b in self.partials if b <= low]:
                del self.partials[b]
        if self.ring.shape[0]:
            alive = self.ring.any(axis=1)
            if not alive.all():
                self._keep(alive)

    @property
    def width(self) -> int:
        """The ring's columns: batches it can hold at once (at most ``window``)."""
        return len(self.col_batch)

    def _make_room(self, end: int, batch: int) -> None:
        """Widen the ring so that ``batch`` and every batch it holds, up to ``end``, have columns of
        their own."""
        live = self.col_batch[self.col_batch >= 0]
        oldest = min(int(batch), int(live.min())) if live.size else int(batch)
        self._widen(end - oldest + 1)

    def _widen(self, span: int) -> None:
        """Make the ring at least ``span`` columns wide (capped at ``window``), doubling: each batch
        it holds moves to its column ``b mod width`` of the wider ring."""
        if span <= self.width:
            return
        width = min(self.window, max(span, 2 * self.width))
        ring = np.zeros((self.ring.shape[0], width), dtype=np.int64)
        col_batch = np.full(width, -1, dtype=np.int64)
        held = np.flatnonzero(self.col_batch >= 0)
        to = self.col_batch[held] % width
        ring[:, to] = self.ring[:, held]
        col_batch[to] = self.col_batch[held]
        self.ring, self.col_batch = ring, col_batch

    def _keep(self, alive: np.ndarray) -> None:
        self.ring = self.ring[alive]
        if self.partials:
            gone = [self.keys[i] for i in np.flatnonzero(~alive).tolist()]
            for per in self.partials.values():
                for k in gone:
                    per.pop(k, None)
        self.keys = [k for k, a in zip(self.keys, alive) if a]
        self.fps = self.fps[alive]
        self.index = {k: i for i, k in enumerate(self.keys)}

    def _rows(self, keys: Sequence[str], fps: np.ndarray | None = None) -> np.ndarray:
        """Ring rows of ``keys`` (unique; ``fps``: their fingerprints if known), appending rows for
        unknown keys."""
        get = self.index.get
        rows = np.fromiter((get(k, -1) for k in keys), dtype=np.int64, count=len(keys))
        new = np.flatnonzero(rows < 0)
        if new.size:
            start = len(self.keys)
            added = [keys[i] for i in new.tolist()]
            for j, k in enumerate(added):
                self.keys.append(k)
                self.index[k] = start + j
            self.fps = np.concatenate([self.fps, key_fingerprints(added) if fps is None
                                       else np.asarray(fps, np.uint64)[new]])
            rows[new] = np.arange(start, start + new.size)
            self.ring = np.vstack([self.ring, np.zeros((new.size, self.width), dtype=np.int64)])
        return rows

    def _add_at(self, rows: np.ndarray, batch: int, counts: np.ndarray) -> None:
        if self.last - self.window < batch <= self.last:
            self._make_room(self.last, batch)
        col = int(batch) % self.width
        if self.col_batch[col] not in (-1, batch):
            raise ValueError(f"batch {batch} is outside the window ending at {self.last}")
        self.col_batch[col] = batch
        np.add.at(self.ring[:, col], rows, counts)

    def _window_sum(self, rows: np.ndarray, batch: int) -> np.ndarray:
        """Windowed count of ``rows`` over batches ``(batch - window, batch]``."""
        cols = (self.col_batch > batch - self.window) & (self.col_batch <= batch)
        return self.ring[rows][:, cols].sum(axis=1)

    def _emit_counts(self, keys: list[str], rows: np.ndarray, sel: np.ndarray, batch: int) -> list[tuple]:
        """Results of a non-mergeable operator whose partial state is the tuple count: :meth:`emit` of
        each selected key's non-zero counts of the window's earlier batches (oldest first) and of ``batch``."""
        older = [c for c in np.argsort(self.col_batch).tolist() if batch - self.window < self.col_batch[c] < batch]
        now = int(batch) % self.width
        cells = self.ring[rows[sel]]
        emit = self.operator.emit
        return [(batch, keys[i], *emit([c for c in row[older].tolist() if c], int(row[now])))
                for i, row in zip(sel.tolist(), cells)]

    def _window_batches(self, batch: int) -> list[dict[str, Any]]:
        """The per-batch partial states (key -> partial) of the window ending at ``batch``, oldest first."""
        return [self.partials[b] for b in sorted(self.partials) if batch - self.window < b <= batch]

    def _store_partial(self, key: str, batch: int, partial: Any) -> None:
        per = self.partials.setdefault(batch, {})
        per[key] = self.operator.concat(per[key], partial) if key in per else partial

    def _apply(self, keys: list[str], counts: np.ndarray, batch: int, partials: Sequence[Any] | None,
               emit: bool | np.ndarray = True, fps: np.ndarray | None = None) -> list[tuple]:
        """Add tuples of ``batch`` (``keys`` unique; ``partials``: their partial states, not for
        count; ``fps``: their fingerprints if known) and return the results of the keys ``emit``
        selects (all, none, or a boolean mask over ``keys``)."""
        if not keys:
            return []
        rows = self._rows(keys, fps)
        mask = np.broadcast_to(np.asarray(emit, dtype=bool), (len(keys),))
        if self.ring_only:
            self._add_at(rows, batch, counts)
            if not mask.any():
                return []
            sel = np.flatnonzero(mask)
            if self.operator.mergeable:  # finish of the window's count, summed over all keys at once
                finish = self.operator.finish  # type: ignore[attr-defined]
                return [(batch, keys[i], *finish(c)) for i, c in zip(sel.tolist(), self._window_sum(rows[sel], batch).tolist())]
            return self._emit_counts(keys, rows, sel, batch)
        out = []
        result = self.operator.emit
        window = self._window_batches(batch) if mask.any() else []
        for k, p, e in zip(keys, partials, mask.tolist()):  # type: ignore[arg-type]
            if e:
                out.append((batch, k, *result([per[k] for per in window if k in per], p)))
            self._store_partial(k, batch, p)
        self._add_at(rows, batch, counts)
        return out

    # ------------------------------------------------------------------ tuples
    def add(self, keys: Sequence[str], counts: np.ndarray, batch: int, partials: Sequence[Any] | None = None,
            fps: np.ndarray | None = None, emit: bool | np.ndarray = True) -> list[tuple]:
        """Apply one batch's per-key counts (``keys`` unique; ``partials``: per key the operator's
        partial state of the batch, not for count; ``fps``: the keys' fingerprints if known) at
        ``batch`` (the window's current end).
        Tuples of keys whose fingerprint is in :attr:`expect` are held (emitted on import).  Returns
        the results of the others that ``emit`` selects (all, none, or a boolean mask over ``keys``:
        the result of the others is made elsewhere, from :meth:`shares`)."""
        counts = np.asarray(counts, dtype=np.int64)
        if self.expect and len(keys):
            fps = key_fingerprints(keys) if fps is None else fps
            wait = np.isin(fps, np.fromiter(self.expect, dtype=np.uint64, count=len(self.expect)))
            for i in np.flatnonzero(wait).tolist():
                self.held.setdefault(keys[i], []).append(
                    (int(batch), int(counts[i]), None if partials is None else partials[i]))
            if wait.any():
                keep = np.flatnonzero(~wait)
                keys = [keys[i] for i in keep.tolist()]
                counts = counts[keep]
                fps = fps[keep]
                partials = None if partials is None else [partials[i] for i in keep.tolist()]
                if np.ndim(emit):
                    emit = np.asarray(emit, dtype=bool)[keep]
        return self._apply(list(keys), counts, int(batch), partials, emit, fps)

    # ------------------------------------------------------------------ migration
    def export(self, orders: Mapping[int, np.ndarray]) -> dict[int, dict[str, Any]]:
        """Remove the state of the keys ordered away (``orders``: target worker → key fingerprints) and
        return one export blob per target.

        A blob holds ``fps`` (every requested fingerprint, also of keys without state here, so the
        receiver knows the move is complete), ``keys`` (the names of those this worker had: state or
        held tuples), ``present`` (those with state), the non-zero window cells as arrays ``row``
        (index into ``present``), ``col`` (index into ``batches``, the window's batch per column),
        ``count`` (and ``partials``, the operator's partial state of each cell as bytes, not for
        count), and ``held`` (``(key, batch, count, partial)`` of tuples held here).  The state's keys are fingerprinted and the ring
        compacted once for all targets."""
        orders = {int(t): np.unique(np.asarray(f, dtype=np.uint64)) for t, f in orders.items() if len(f)}
        if not orders:
            return {}
        state_fps = self.fps
        held_keys = list(self.held)
        held_fps = key_fingerprints(held_keys) if held_keys else np.zeros(0, np.uint64)
        alive = np.ones(len(self.keys), dtype=bool)
        blobs: dict[int, dict[str, Any]] = {}
        for target, fps in orders.items():
            rows = np.flatnonzero(np.isin(state_fps, fps) & alive)
            present = [self.keys[i] for i in rows.tolist()]
            held = [held_keys[i] for i in np.flatnonzero(np.isin(held_fps, fps)).tolist()]
            blob: dict[str, Any] = {"fps": fps, "keys": list(dict.fromkeys(present + held)), "present": present,
                                    "row": np.zeros(0, np.int32), "batches": self.col_batch.copy(),
                                    "col": np.zeros(0, np.int16), "count": np.zeros(0, np.int32), "partials": None}
            if present:
                sub = self.ring[rows]
                r, c = np.nonzero(sub)
                counts = sub[r, c]
                # compact cells: at most `width` distinct batches, counts of one batch fit 32 bits
                blob.update(row=r.astype(np.int32), col=c.astype(_column_type(self.width)),
                            count=counts.astype(np.int32) if counts.max() < 2**31 else counts)
                if not self.ring_only:
                    dumps = self.operator.dumps
                    cells = (self.partials.get(int(self.col_batch[j]), {}).get(present[i])
                             for i, j in zip(r.tolist(), c.tolist()))
                    blob["partials"] = [None if p is None else dumps(p) for p in cells]
                alive[rows] = False
            blob["held"] = [(k, *e) for k in held if k in self.held for e in self.held.pop(k)]
            self.expect.difference_update(fps.tolist())
            blobs[target] = blob
        if not alive.all():
            self._keep(alive)
        return blobs

    def import_(self, blobs: Sequence[dict[str, Any]]) -> tuple[list[tuple], int]:
        """Merge export blobs — a key's blobs from all its old holders, before anything is released —
        then apply the held tuples of their keys (the blobs' and this worker's), whose results are
        emitted now at their own batch: per batch, all keys at once, in batch order.

        Returns (results, window entries dropped because they had left the window)."""
        low = self.last - self.window
        dropped = 0
        window: list[tuple[int, np.ndarray, np.ndarray]] = []  # (batch, ring rows, counts)
        released: dict[int, dict[str, list[Any]]] = {}  # batch -> key -> [count, partial or None]
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
                if not self.ring_only:
                    loads = self.operator.loads
                    for i in np.flatnonzero(inside).tolist():
                        if blob["partials"][i] is not None:
                            self._store_partial(blob["present"][blob["row"][i]], int(batch[i]), loads(blob["partials"][i]))
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
        results: list[tuple] = []
        for b in sorted(released):
            if b <= low:
                continue  # left the window before it could be applied (never in the protocol)
            per = released[b]
            ks = list(per)
            counts = np.fromiter((per[k][0] for k in ks), dtype=np.int64, count=len(ks))
            partials = None if self.ring_only else [per[k][1] for k in ks]
            results.extend(self._apply(ks, counts, b, partials))
        return results, dropped

    def _hold_release(self, released: dict[int, dict[str, list[Any]]], key: str, batch: int, count: int,
                      partial: Any) -> None:
        """Collect a held entry for release: per batch and key, the total count and the partial
        state of the held tuples, in their arrival order."""
        entry = released.setdefault(int(batch), {}).setdefault(key, [0, None])
        entry[0] += int(count)
        if partial is not None:
            entry[1] = partial if entry[1] is None else self.operator.concat(entry[1], partial)

    # ------------------------------------------------------------------ one batch
    def step(self, batch: int, keys: Sequence[str], counts: np.ndarray, *, partials: Sequence[Any] | None = None,
             fps: np.ndarray | None = None, imports: Sequence[dict[str, Any]] = (),
             exports: dict[int, np.ndarray] | None = None, expect: np.ndarray | Sequence[int] = (),
             split: bool = False, final: np.ndarray | None = None) -> dict[str, Any]:
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

        ``split`` (a run whose results are merged from the workers' shares,
        :mod:`skewlab.engine.runtimes.spark.share_merge`): nothing is held — a key may have several
        holders, so the new holder applies its tuples at once as a share of its own — and the shares
        of the exported keys at ``batch`` are returned as ``export_shares`` (the state leaves this
        worker but still belongs to the key's result at ``batch``; the importer merges it into its
        share from the next batch on).  Deviation from the hold protocol of fang-hpdc17 Sec. III-C,
        which assumes one owner per key: with other holders receiving the key's tuples meanwhile, a
        held result would miss their parts.

        Returns ``results`` (list of ``(batch, key, *row)``), ``exports`` (target → blob) and, when
        ``split``, ``export_shares`` (``(keys, states)`` as :meth:`shares`).  With ``split`` the
        batch's own tuples emit no result here (only released held tuples do): the key's result is
        the merge of every holder's share, and emitting this worker's part would merge its window
        partials once more for nothing — except for the keys ``final`` selects (with ``split``, a
        boolean mask over ``keys``: keys no other worker holds, whose result is final here).
        """
        batch = int(batch)
        if batch <= self.last:
            raise ValueError(f"routing snapshot of batch {batch}, but this worker's state is already at batch "
                             f"{self.last}: the routing files do not match this checkpoint; start a new run with "
                             "--run-name or --checkpoint")
        self.slide(batch - 1)
        results, _ = self.import_(imports) if imports else ([], 0)
        self.slide(batch)
        out: dict[str, Any] = {}
        if split:
            ordered = [np.asarray(f, dtype=np.uint64) for f in (exports or {}).values() if len(f)]
            out["export_shares"] = self.shares(batch, np.concatenate(ordered)) if ordered else ([], [])
        blobs = self.export(exports or {})
        if not split:
            self.expect.update(np.asarray(expect, dtype=np.uint64).tolist())
        emit: bool | np.ndarray = (not split) if final is None else final
        results.extend(self.add(list(keys), counts, batch, partials, fps=fps, emit=emit))
        return {"results": results, "exports": blobs, **out}

    # ------------------------------------------------------------------ shares
    def shares(self, batch: int, fps: np.ndarray | None = None) -> tuple[list[str], list[Any]]:
        """This worker's *share* of every key in its window at ``batch`` (the window's current end),
        or of the keys whose fingerprints are in ``fps``:
        the key's partial states of batches ``(batch - window, batch]`` merged
        (:meth:`~skewlab.engine.operators.MergeableOperator.merge`; count: the window's tuple count).
        Under a split-key grouping a key's result is the merge of all workers' shares
        (:mod:`skewlab.engine.runtimes.spark.share_merge`).  Held tuples are not in a share (they are
        applied, and emitted, when their key's state arrives)."""
        if int(batch) != self.last:
            raise ValueError(f"shares of batch {batch} asked of a window that ends at batch {self.last}")
        if not self.keys:
            return [], []
        rows = (np.arange(len(self.keys)) if fps is None
                else np.flatnonzero(np.isin(self.fps, np.asarray(fps, dtype=np.uint64))))
        if self.ring_only:
            sums = self.ring[rows].sum(axis=1)  # the slide emptied the columns of batches that left the window
            live = np.flatnonzero(sums)
            return [self.keys[i] for i in rows[live].tolist()], sums[live].tolist()
        merge = self.operator.merge  # type: ignore[attr-defined]  # mergeable operators only
        keys, states = [], []
        window = self._window_batches(batch)
        for k in (self.keys[i] for i in rows.tolist()):
            parts = [per[k] for per in window if k in per]
            if parts:
                keys.append(k)
                states.append(merge(parts))
        return keys, states

    def off_home(self, worker: int, n: int) -> np.ndarray:
        """Fingerprints of the keys in this window whose home (``fp mod n``,
        :func:`skewlab.engine.algorithms.keys.home`) is not ``worker``, sorted: the keys whose result
        their home worker cannot write alone."""
        return np.sort(self.fps[(self.fps % np.uint64(n)) != np.uint64(worker)])

    # ------------------------------------------------------------------ serialisation
    def _pickles_itself(self) -> bool:
        """Whether the operator's ``dumps``/``loads`` are the interface's default (pickle): then its
        partial states are pickled as they are, with the window, in one ``pickle.dumps`` call."""
        cls = type(self.operator)
        return cls.dumps is KeyedOperator.dumps and cls.loads is KeyedOperator.loads

    def dumps(self) -> bytes:
        """Sparse serialisation: non-zero (row, column, count) cells, keys, window position, the
        partial states (batch-major; by the operator's ``dumps`` unless it is the default pickle,
        whose states go into the one pickle as they are), flights, and the layout's name."""
        r, c = np.nonzero(self.ring)
        cells = (r.astype(np.int32), c.astype(_column_type(self.width)), self.ring[r, c])
        if self._pickles_itself():
            layout, partials, held = _LAYOUT_RAW, self.partials, self.held
        else:
            dumps = self.operator.dumps
            layout = _LAYOUT_BYTES
            partials = {b: {k: dumps(p) for k, p in per.items()} for b, per in self.partials.items()}
            held = {k: [(b, n, None if p is None else dumps(p)) for b, n, p in entries]
                    for k, entries in self.held.items()}
        return pickle.dumps((self.window, self.operator.name, self.keys, cells, self.col_batch, self.last, partials,
                             held, self.expect, layout, self.fps), protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def loads(cls, data: bytes, operator: KeyedOperator | None = None) -> "WorkerWindow":
        """The state :meth:`dumps` wrote, of ``operator`` (default count); also the key-major layout
        of states written before the batch-major one (no layout name)."""
        fields = pickle.loads(data)
        window, name, keys, (r, c, v), col_batch, last, partials, held, expect = fields[:9]
        layout = fields[9] if len(fields) > 9 else _LAYOUT_KEY_MAJOR
        self = cls(window, operator)
        if name != self.operator.name:
            raise ValueError(f"this worker's state belongs to operator {name}, not {self.operator.name}; "
                             "start a new run with --run-name or --checkpoint")
        if layout != _LAYOUT_RAW:
            loads = self.operator.loads
            if layout == _LAYOUT_KEY_MAJOR:  # key -> {batch: bytes}
                by_batch: dict[int, dict[str, Any]] = {}
                for k, per in partials.items():
                    for b, p in per.items():
                        by_batch.setdefault(b, {})[k] = p
                partials = {b: by_batch[b] for b in sorted(by_batch)}
            partials = {b: {k: loads(p) for k, p in per.items()} for b, per in partials.items()}
            held = {k: [(b, n, None if p is None else loads(p)) for b, n, p in entries] for k, entries in held.items()}
        self.keys = keys
        self.fps = fields[10] if len(fields) > 10 else key_fingerprints(keys)  # (a state written before fps were kept)
        self.index = {k: i for i, k in enumerate(keys)}
        self.ring = np.zeros((len(keys), len(col_batch)), dtype=np.int64)  # (a state written before: window wide)
        self.ring[r.astype(np.int64), c.astype(np.int64)] = v
        self.col_batch = col_batch
        self.last = last
        self.partials = partials
        self.held = held
        self.expect = expect
        return self


def _column_type(width: int) -> type:
    """The smallest integer type of a column index of a ring ``width`` wide."""
    return np.int16 if width <= np.iinfo(np.int16).max + 1 else np.int32
