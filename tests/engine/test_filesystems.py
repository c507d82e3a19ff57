"""The filesystem layer (skewlab.shared.filesystems): locations resolved on the driver, URIs kept whole
(no ``hdfs://nn/ck`` -> ``hdfs:/nn/ck``), Spark's scheme for S3, atomic writes, and the engine's
locations (checkpoint, sink, input) resolved before anything reaches an executor."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from skewlab.engine.io.checkpoint import SnapshotStore
from skewlab.engine.runtimes.spark.engine import EngineConfig
from skewlab.engine.runtimes.spark.result_sink import ParquetSink, read_sink, sink_file
from skewlab.engine.runtimes.spark.sources import RouteFiles
from skewlab.shared import filesystems as F
from tests.s3_fixtures import s3_endpoint  # noqa: F401 - pytest fixture


@pytest.mark.parametrize("uri", ["hdfs://nn/ck", "hdfs://nn:8020/user/me/ck", "s3://bucket/a/b", "s3a://bucket/ck",
                                 "gs://b/x"])
def test_uris_are_kept_whole(uri):
    assert F.resolve(uri) == uri
    assert F.join(uri, "spark") == f"{uri}/spark"
    assert not F.is_local(uri)


def test_uri_scheme_is_lower_cased_and_trailing_slash_dropped():
    assert F.resolve("HDFS://nn/ck/") == "hdfs://nn/ck"


def test_relative_paths_become_absolute_on_the_driver(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert F.resolve("data/results/r") == str(tmp_path / "data" / "results" / "r")
    assert F.resolve(tmp_path / "x") == str(tmp_path / "x")
    assert F.resolve(f"file://{tmp_path}/y") == str(tmp_path / "y")
    assert F.is_local(F.resolve("rel"))


def test_file_uri_with_a_host_is_refused():
    with pytest.raises(ValueError, match="file:///ABSOLUTE/PATH"):
        F.resolve("file://otherhost/x")


def test_bare_scheme_is_refused():
    with pytest.raises(ValueError, match="no location"):
        F.resolve("s3://")


@pytest.mark.parametrize("given, spark", [("s3://b/ck", "s3a://b/ck"), ("s3a://b/ck", "s3a://b/ck"),
                                          ("hdfs://nn/ck", "hdfs://nn/ck")])
def test_spark_location_maps_s3_to_hadoop_s3a(given, spark):
    assert F.spark_location(given) == spark


def test_spark_location_of_a_relative_path_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert F.spark_location("ck/spark") == str(tmp_path / "ck" / "spark")


def test_filesystem_splits_uris_as_pyarrow_needs_them(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    fs, path, kind = F.filesystem("s3a://bucket/ck/x")
    assert (path, kind) == ("bucket/ck/x", "s3")
    assert type(fs).__name__ == "S3FileSystem"


@pytest.mark.parametrize("location, split", [
    ("hdfs://nn:8020/user/me/ck", ("hdfs", "nn:8020", "/user/me/ck")),
    ("hdfs://nn/ck/spark", ("hdfs", "nn", "/ck/spark")),
    ("s3://bucket/a/b", ("s3", "bucket", "bucket/a/b")),
    ("s3a://bucket/a/b", ("s3", "bucket", "bucket/a/b")),
    ("/abs/p", ("local", "", "/abs/p")),
    ("file:///abs/p", ("local", "", "/abs/p")),
])
def test_split_location_for_pyarrow(location, split):
    """HDFS cannot run here: what the layer hands pyarrow's HadoopFileSystem is checked instead."""
    assert F.split_location(location) == split


def test_local_write_read_list_remove(tmp_path):
    target = F.join(str(tmp_path), "a", "b.bin")
    F.write_bytes(target, b"hello")
    assert F.read_bytes(target) == b"hello"
    assert F.list_names(str(tmp_path / "a")) == ["b.bin"]  # no temporary file left behind
    assert F.is_file(target) and F.is_dir(str(tmp_path / "a")) and F.exists(target)
    F.remove(target)
    F.remove(target)  # already gone: no error
    assert F.list_names(str(tmp_path / "a")) == []
    assert F.list_names(str(tmp_path / "missing")) == []
    F.remove_tree(str(tmp_path / "a"))
    assert not F.exists(str(tmp_path / "a"))


def test_write_parquet_is_whole_or_absent(tmp_path, monkeypatch):
    table = pa.table({"x": [1, 2, 3]})
    target = str(tmp_path / "batch=0" / "worker-1.parquet")

    def fail(*_a, **_k):
        raise OSError("disk full")

    import pyarrow.parquet as pq

    monkeypatch.setattr(pq, "write_table", fail)
    with pytest.raises(OSError):
        F.write_parquet(target, table)
    assert os.listdir(tmp_path / "batch=0") == []  # neither the target nor a temporary file
    monkeypatch.undo()
    F.write_parquet(target, table)
    assert pq.read_table(target).column("x").to_pylist() == [1, 2, 3]


def test_parquet_files_written_at_once_each_whole_and_their_directory_synced_once(tmp_path, monkeypatch):
    """A batch's merge writes one file per writer: written at once, each synced before its rename, the
    directory synced once after all renames (not once per file: 2 fsyncs per file cost the driver's
    merge ~40 ms per batch, issue 36)."""
    import pyarrow.parquet as pq

    synced: list[str] = []
    real_sync = F._sync_local
    monkeypatch.setattr(F, "_sync_local", lambda path: (synced.append(path), real_sync(path)))
    d = tmp_path / "batch=3"
    tables = {str(d / f"worker-{w}.parquet"): pa.table({"x": [w] * w}) for w in range(1, 6)}
    F.write_parquet_files(tables)
    assert sorted(os.listdir(d)) == sorted(f"worker-{w}.parquet" for w in range(1, 6))  # no temporary file
    assert all(pq.read_table(loc).column("x").to_pylist() == t.column("x").to_pylist() for loc, t in tables.items())
    assert synced.count(str(d)) == 1
    assert sum(os.path.basename(p).startswith(".worker-") for p in synced) == 5  # each file's data before its rename


def test_parquet_files_one_failing_leaves_the_others_whole_and_no_temporary_file(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    real_write = pq.write_table

    def write(table, path, **kw):
        if table.column("x")[0].as_py() == 2:
            raise OSError("disk full")
        return real_write(table, path, **kw)

    monkeypatch.setattr(pq, "write_table", write)
    d = tmp_path / "batch=0"
    with pytest.raises(OSError, match="disk full"):
        F.write_parquet_files({str(d / f"worker-{w}.parquet"): pa.table({"x": [w]}) for w in (1, 2, 3)})
    assert sorted(os.listdir(d)) == ["worker-1.parquet", "worker-3.parquet"]


def test_engine_locations_are_resolved_on_the_driver(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "keys.txt").write_text("a\nb\n")
    cfg = EngineConfig(checkpoint="ck", sink="out", source="file", path="keys.txt")
    cfg.validate()
    assert cfg.checkpoint_dir() == str(tmp_path / "ck")
    assert cfg.sink_spec() == str(tmp_path / "out")
    assert cfg.source_options()[1]["path"] == str(tmp_path / "keys.txt")


def test_default_sink_is_absolute_and_named_after_the_checkpoint(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SKEWLAB_DATA_DIR", raising=False)
    cfg = EngineConfig(run_name="r1")
    assert cfg.checkpoint_dir() == str(tmp_path / "data" / "checkpoints" / "r1")
    assert cfg.sink_spec() == str(tmp_path / "data" / "results" / "r1")


def test_uri_checkpoint_and_sink_are_not_mangled():
    cfg = EngineConfig(checkpoint="hdfs://nn/ck", sink="s3://bucket/results")
    assert cfg.checkpoint_dir() == "hdfs://nn/ck"
    assert cfg.sink_spec() == "s3://bucket/results"
    assert EngineConfig(checkpoint="hdfs://nn/ck").sink_spec().endswith(os.sep + os.path.join("results", "ck"))
    assert EngineConfig(sink="kafka://h:9092/t").sink_spec() == "kafka://h:9092/t"


def test_snapshot_store_route_files_and_parquet_sink_use_the_layer(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = SnapshotStore("ck/skewlab", keep=2)
    assert store.dir == str(tmp_path / "ck" / "skewlab")
    for b in range(4):
        store.save(b, {"b": b})
    assert store.latest() == (3, {"b": 3})
    assert sorted(os.listdir(tmp_path / "ck" / "skewlab")) == ["engine-2.pkl", "engine-3.pkl"]

    routes = RouteFiles("ck/routes")
    assert routes.dir == str(tmp_path / "ck" / "routes")
    routes.publish(5, b"snap", flush=True)
    assert (routes.next_version(), routes.flush_version(), routes.read(5)) == (5, 5, b"snap")
    routes.publish(6, b"snap6")
    assert routes.flush_version() is None

    sink = ParquetSink("res")
    assert sink.url == str(tmp_path / "res")
    from skewlab.engine.runtimes.spark.result_sink import sink_schema

    row = pa.Table.from_pylist([{}], schema=sink_schema())
    sink.write(1, 0, row)
    assert sink_file(sink.url, 1, 0) == str(tmp_path / "res" / "batch=1" / "worker-0.parquet")
    assert read_sink("res").num_rows == 1
    sink.clear(lambda m: None)
    assert read_sink("res").num_rows == 0


# ---------------------------------------------------------------- on an S3-protocol endpoint (moto)
def test_snapshots_route_files_and_sink_on_s3(s3_endpoint):
    """Everything the driver and the executors share can live in a bucket: written under its final
    name (no rename on S3), listed, read back, pruned."""
    base = f"{s3_endpoint}/run"
    store = SnapshotStore(f"{base}/ck/skewlab", keep=2)
    for b in range(4):
        store.save(b, {"b": b})
    assert store.latest() == (3, {"b": 3})
    assert F.list_names(store.dir) == ["engine-2.pkl", "engine-3.pkl"]  # pruned, and no temporary object

    routes = RouteFiles(f"{base}/ck/routes")
    routes.publish(1, b"r1", flush=True)
    routes.publish(2, b"r2")
    assert (routes.next_version(), routes.flush_version(), routes.read(1)) == (2, None, b"r1")

    sink = ParquetSink(f"{base}/results")
    from skewlab.engine.runtimes.spark.result_sink import sink_schema

    row = pa.Table.from_pylist([{}], schema=sink_schema())
    sink.write(0, 1, row)
    sink.write(0, 1, row)  # a replay rewrites the same object
    sink.write(1, 0, row)
    sink.write_many(2, {9: row, 10: row})  # the merge stage's writers, written at once
    assert read_sink(sink.url).num_rows == 4
    assert F.list_names(f"{base}/results/batch=0") == ["worker-1.parquet"]
    assert F.list_names(f"{base}/results/batch=2") == ["worker-10.parquet", "worker-9.parquet"]
    sink.clear(lambda m: None)
    assert read_sink(sink.url).num_rows == 0


def test_key_file_read_from_s3(s3_endpoint):
    from skewlab.engine.workloads.key_file import read_key_file

    F.write_bytes(f"{s3_endpoint}/keys.txt", b"a\nb\na\n")
    assert list(read_key_file(f"{s3_endpoint}/keys.txt").keys) == ["a", "b", "a"]
    from skewlab.engine.config.params import ParamError

    with pytest.raises(ParamError, match="no such file"):
        read_key_file(f"{s3_endpoint}/missing.txt")
