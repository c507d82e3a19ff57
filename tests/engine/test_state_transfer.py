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
