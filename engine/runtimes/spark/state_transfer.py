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
files of export batches ``<= c - 2`` during batch ``c`` (:func:`prune`).
"""

from __future__ import annotations

import json
import pickle
import re
from dataclasses import asdict, dataclass
from typing import Any

from skewlab.shared import filesystems

__all__ = ["ExportRef", "export_path", "prune", "read_export", "write_export"]

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


def prune(directory: str, before: int) -> list[int]:
    """Remove the export files of every batch ``< before``; returns those batches."""
    removed = []
    for name in filesystems.list_names(directory):
        m = _BATCH_DIR.fullmatch(name)
        if m and int(m.group(1)) < before:
            filesystems.remove_tree(filesystems.join(directory, name))
            removed.append(int(m.group(1)))
    return sorted(removed)
