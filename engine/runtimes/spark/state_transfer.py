"""Migrated key state from the exporting task to the importing task, through the checkpoint's filesystem.

A worker that exports keys in batch ``b`` writes one *export blob* per target worker (the pickled
dict of :meth:`skewlab.engine.runtimes.spark.window_state.WorkerWindow.step`'s ``exports``: the keys'
windows and held tuples) to ``<directory>/batch=<b>/from-<worker>-to-<target>.blob`` through
:mod:`skewlab.shared.filesystems` (a local path or a URI the executors share, atomically: a reader
sees the whole file or none).  Its output to the driver is only an :class:`ExportRef` — where the
blob is, its bytes and key count — which the driver passes in the routing snapshot of ``b + 1``;
the importing task of ``b + 1`` reads the file.  The driver never holds the state's bytes.

Exactly once: the name is a pure function of ``(b, from, to)``, and a replayed batch ``b`` restores
the same state version and gets the same routing snapshot, so it rewrites the same file with the same
keys.  A file is needed until the import batch ``b + 1`` is committed by Spark (a replay of ``b + 1``
reads it again); Spark starts batch ``c`` only after committing ``c - 1``, so the driver removes the
files of export batches ``<= c - 2`` during batch ``c`` (:func:`prune`; the engine's
:class:`MigrationFiles` lists the directory once per process and then removes only the batches it saw
exports of).
"""

from __future__ import annotations

import json
import pickle
import re
from dataclasses import asdict, dataclass
from typing import Any

from skewlab.shared import filesystems

__all__ = ["ExportRef", "MigrationFiles", "export_batches", "export_path", "prune", "read_export", "write_export"]

_BATCH_DIR = re.compile(r"batch=(\d+)")


@dataclass(frozen=True)
class ExportRef:
    """Where the keys ``source`` exported to ``target`` in ``batch`` are: ``path`` (a file written by
    :func:`write_export`), its size ``bytes`` and the number of ``keys`` it holds."""

    batch: int
    source: int
    target: int
    path: str
    bytes: int
    keys: int

    def encode(self) -> bytes:
        """The reference as UTF-8 JSON (what the exporting task returns to the driver)."""
        return json.dumps(asdict(self), sort_keys=True).encode("utf-8")

    @staticmethod
    def decode(data: bytes) -> "ExportRef":
        return ExportRef(**json.loads(data))


def export_path(directory: str, batch: int, source: int, target: int) -> str:
    """The file of the keys ``source`` exports to ``target`` in ``batch`` (a pure function of the three)."""
    return filesystems.join(directory, f"batch={int(batch)}", f"from-{int(source)}-to-{int(target)}.blob")


def write_export(directory: str, batch: int, source: int, target: int, blob: dict[str, Any]) -> ExportRef:
    """Write ``blob`` (an export of :meth:`WorkerWindow.step`) atomically; returns its reference."""
    path = export_path(directory, batch, source, target)
    data = pickle.dumps(blob, protocol=pickle.HIGHEST_PROTOCOL)
    filesystems.makedirs(filesystems.join(directory, f"batch={int(batch)}"))
    filesystems.write_bytes(path, data)
    return ExportRef(int(batch), int(source), int(target), path, len(data), len(blob.get("keys", ())))


def read_export(ref: ExportRef) -> dict[str, Any]:
    """The export blob ``ref`` names (one line naming the file when it is missing)."""
    try:
        data = filesystems.read_bytes(ref.path)
    except OSError:
        raise RuntimeError(f"migrated state {ref.path} (batch {ref.batch}, worker {ref.source} → {ref.target}) is "
                           "missing: the checkpoint directory was changed or pruned while it was in flight") from None
    return pickle.loads(data)


def export_batches(directory: str) -> list[int]:
    """The export batches that have a directory under ``directory`` (one listing)."""
    return sorted(int(m.group(1)) for m in map(_BATCH_DIR.fullmatch, filesystems.list_names(directory)) if m)


def _remove_batch(directory: str, batch: int) -> None:
    filesystems.remove_tree(filesystems.join(directory, f"batch={int(batch)}"))


def prune(directory: str, before: int) -> list[int]:
    """Remove the export files of every batch ``< before``; returns those batches."""
    removed = [b for b in export_batches(directory) if b < before]
    for b in removed:
        _remove_batch(directory, b)
    return removed


class MigrationFiles:
    """The driver's pruning of ``directory`` without a listing per batch (on an object store a LIST
    request each micro-batch): the first :meth:`prune` of the process lists the directory (files of
    the run before a restart), later ones remove only the export batches :meth:`note` saw in the
    batches' outputs."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._batches: set[int] | None = None  # export batches with files; None: not listed yet

    def note(self, refs: tuple[ExportRef, ...] | list[ExportRef]) -> None:
        """Exports a batch wrote (before the first prune, the listing finds them anyway)."""
        if self._batches is not None:
            self._batches.update(int(r.batch) for r in refs)

    def prune(self, before: int) -> list[int]:
        """Remove the export files of every batch ``< before``; returns those batches."""
        if self._batches is None:
            self._batches = set(export_batches(self.directory))
        removed = sorted(b for b in self._batches if b < before)
        for b in removed:
            _remove_batch(self.directory, b)
        self._batches.difference_update(removed)
        return removed
