"""Migrated state from the exporting task to the importing task through the checkpoint's filesystem
(skewlab.engine.runtimes.spark.state_transfer): names fixed by (batch, from, to), replays rewrite the
same file, pruning after the import batch is committed, a local directory and S3 (moto)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from skewlab.engine.runtimes.spark.state_transfer import ExportRef, export_path, prune, read_export, write_export
from skewlab.shared import filesystems
from tests.s3_fixtures import s3_endpoint  # noqa: F401 - pytest fixture


def blob(keys):
    return {"keys": list(keys), "fps": np.arange(len(keys), dtype=np.uint64), "held": [], "windows": [b"x" * 100] * len(keys)}


def round_trip(directory: str) -> None:
    ref = write_export(directory, 7, 1, 3, blob(["a", "b"]))
    assert ref == ExportRef(7, 1, 3, export_path(directory, 7, 1, 3), ref.bytes, 2)
    assert ref.path == filesystems.join(directory, "batch=7", "from-1-to-3.blob")
    assert ExportRef.decode(ref.encode()) == ref
    assert read_export(ref)["keys"] == ["a", "b"]
    assert ref.bytes == len(filesystems.read_bytes(ref.path))
    # a replayed batch rewrites the same file with the same content
    again = write_export(directory, 7, 1, 3, blob(["a", "b"]))
    assert again == ref and filesystems.list_names(filesystems.join(directory, "batch=7")) == ["from-1-to-3.blob"]
    write_export(directory, 8, 3, 1, blob(["c"]))
    write_export(directory, 9, 3, 0, blob(["d"]))
    assert prune(directory, 9) == [7, 8]
    assert filesystems.list_names(directory) == ["batch=9"]
    with pytest.raises(RuntimeError, match="from-1-to-3.blob .* is missing"):
        read_export(ref)


def test_export_blob_round_trip_replay_and_prune_on_a_local_directory(tmp_path):
    round_trip(str(tmp_path / "migrations"))
    assert prune(str(tmp_path / "absent"), 10) == []


def test_export_blob_round_trip_replay_and_prune_on_s3(s3_endpoint):  # noqa: F811 - the fixture
    round_trip(filesystems.join(s3_endpoint, "ck", "migrations"))


def test_the_reference_carries_no_state_bytes(tmp_path):
    """What the driver gets (the JSON reference) is small and independent of the state's size."""
    small = write_export(str(tmp_path), 1, 0, 1, blob(["a"]))
    big = write_export(str(tmp_path), 1, 0, 2, blob([f"k{i}" for i in range(5000)]))
    assert big.bytes > 100 * small.bytes
    assert abs(len(big.encode()) - len(small.encode())) < 16
    assert pickle.dumps(big, protocol=pickle.HIGHEST_PROTOCOL).count(b"x" * 100) == 0


def test_migration_files_list_the_directory_once_and_then_prune_what_they_noted(tmp_path, monkeypatch):
    """The engine's pruning: the first prune lists (files of a run before a restart go too), later
    prunes remove the noted export batches without listing the directory again."""
    from skewlab.engine.runtimes.spark.state_transfer import MigrationFiles

    directory = str(tmp_path / "migrations")
    write_export(directory, 3, 0, 1, blob(["old"]))  # left by the run before the restart
    write_export(directory, 5, 1, 0, blob(["a"]))
    listings = []
    real = filesystems.list_names
    monkeypatch.setattr(filesystems, "list_names", lambda d: listings.append(d) or real(d))
    files = MigrationFiles(directory)
    assert files.prune(5) == [3] and len(listings) == 1
    files.note([write_export(directory, 6, 0, 2, blob(["b"])), write_export(directory, 6, 1, 2, blob(["c"]))])
    files.note([])
    assert files.prune(6) == [5] and files.prune(7) == [6] and files.prune(8) == []
    assert len(listings) == 1
    monkeypatch.setattr(filesystems, "list_names", real)
    assert filesystems.list_names(directory) == []
