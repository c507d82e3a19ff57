"""One filesystem layer for every location the Spark driver and its executors share: the checkpoint
(driver snapshots, route files), the Parquet sink and the file source's input.

A location is resolved ONCE, on the driver (:func:`resolve`): a URI with a scheme (``s3://``,
``s3a://``, ``hdfs://``, ...) is kept as it is, ``file://`` URIs and plain paths become absolute local
paths.  Executors receive the resolved string, so a relative ``--sink`` no longer lands in each
executor's own work directory.  Reading and writing goes through pyarrow's filesystems
(:mod:`pyarrow.fs`, a dependency of skewlab already): ``LocalFileSystem`` for paths,
``S3FileSystem`` for ``s3://``/``s3a://``, ``HadoopFileSystem`` for ``hdfs://`` (needs libhdfs and a
Hadoop client on the node, as pyarrow documents).

S3 settings come from the standard AWS environment variables that Arrow's S3 client reads
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_DEFAULT_REGION``/``AWS_REGION``, ...) plus
``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` for an S3-compatible endpoint (MinIO, moto, ...).
The executors need the same variables (e.g. ``--conf spark.executorEnv.AWS_ENDPOINT_URL=...``).

Atomic writes (:func:`write_bytes`, :func:`write_parquet`): where the filesystem has an atomic rename
(local disks, HDFS) the data is written to a temporary name and renamed; an object store has no
rename, but an object appears only once its upload completes, so it is written under its final name
directly.  Every caller writes under a name fixed by what it holds (batch, worker, version), so a
replay overwrites the same object with the same contents.

Spark's own checkpoint uses Hadoop's filesystems, which name S3 ``s3a://``: :func:`spark_location`
maps ``s3://`` to ``s3a://`` (Spark then needs the hadoop-aws jars on its classpath).
"""

from __future__ import annotations

import os
import posixpath
import re
import threading
import uuid
from typing import Any, Mapping
from urllib.parse import urlsplit

__all__ = ["exists", "filesystem", "split_location", "is_dir", "is_file", "is_local", "join", "list_names", "makedirs",
           "read_bytes", "remove", "remove_tree", "resolve", "spark_location", "write_bytes",
           "write_parquet", "write_parquet_files"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
#: pyarrow's scheme for a scheme Spark/Hadoop users write
_ARROW_SCHEME = {"s3a": "s3", "s3n": "s3"}
#: Hadoop's scheme for a scheme pyarrow users write (Spark's checkpointLocation)
_HADOOP_SCHEME = {"s3": "s3a"}
#: filesystems whose rename is atomic, so a write goes to a temporary name first
_RENAMES_ATOMICALLY = {"local", "hdfs"}

#: environment variables that select the S3 endpoint and region (the credentials Arrow reads itself)
_S3_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION")
_FILESYSTEMS: dict[tuple[str, str], Any] = {}
_LOCK = threading.Lock()


def _scheme(location: str) -> str | None:
    m = _SCHEME.match(location)
    return m.group(1).lower() if m else None


def resolve(location: str | os.PathLike) -> str:
    """The absolute form of ``location``, as the driver sees it: URIs keep their scheme (lower-cased)
    and everything after it; ``file://`` URIs and paths become absolute local paths."""
    text = os.fspath(location)
    scheme = _scheme(text)
    if scheme is None:
        return os.path.abspath(os.path.expanduser(text))
    if scheme == "file":
        parts = urlsplit(text)
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"{text!r}: a file:// URI names a local path (file:///ABSOLUTE/PATH)")
        return os.path.abspath(parts.path or "/")
    rest = text[len(scheme) + 3:]
    if not rest.strip("/"):
        raise ValueError(f"{text!r}: no location after {scheme}://")
    return f"{scheme}://{rest.rstrip('/') or rest}"


def is_local(location: str) -> bool:
    """True for a local path (no URI scheme, or ``file://``)."""
    return _scheme(location) in (None, "file")


def join(location: str, *names: str) -> str:
    """``location`` / ``names`` (``/``-separated for URIs, ``os.path.join`` for local paths)."""
    if is_local(location):
        return os.path.join(location, *names)
    return posixpath.join(location, *names)


def spark_location(location: str | os.PathLike) -> str:
    """The resolved ``location`` as Spark's Hadoop filesystems name it (``s3://`` becomes ``s3a://``)."""
    text = resolve(location)
    scheme = _scheme(text)
    if scheme in _HADOOP_SCHEME:
        return _HADOOP_SCHEME[scheme] + text[len(scheme):]
    return text


def _s3_filesystem():
    from pyarrow import fs

    options: dict[str, Any] = {}
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        options.update(endpoint_override=parts.netloc, scheme=parts.scheme)
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        options["region"] = region
    return fs.S3FileSystem(**options)


def split_location(location: str) -> tuple[str, str, str]:
    """``(pyarrow scheme, host, path inside that filesystem)`` of a location: ``("local", "", abs path)``
    for paths, ``("s3", bucket, "bucket/key")`` for ``s3://``/``s3a://`` (pyarrow's S3 paths start with
    the bucket), ``("hdfs", "nn:8020", "/path")`` for ``hdfs://nn:8020/path``."""
    scheme = _scheme(location)
    if scheme in (None, "file"):
        return "local", "", resolve(location)
    scheme = _ARROW_SCHEME.get(scheme, scheme)
    parts = urlsplit(location)
    path = f"{parts.netloc}{parts.path}" if scheme == "s3" else parts.path
    return scheme, parts.netloc, path


def filesystem(location: str) -> tuple[Any, str, str]:
    """``(pyarrow filesystem, path inside it, kind)`` for a resolved ``location``; ``kind`` is
    ``"local"``, ``"s3"``, ``"hdfs"`` or another pyarrow scheme.  Filesystems are cached per
    scheme and host (one S3 client per endpoint, not one per call)."""
    from pyarrow import fs

    scheme, host, path = split_location(location)
    key = (scheme, host)
    if scheme == "s3":  # one client per endpoint and region the environment names
        key = (scheme, "|".join(os.environ.get(v, "") for v in _S3_VARIABLES))
    with _LOCK:
        filesystem_ = _FILESYSTEMS.get(key)
        if filesystem_ is None:
            if key[0] == "local":
                filesystem_ = fs.LocalFileSystem()
            elif key[0] == "s3":
                filesystem_ = _s3_filesystem()
            else:
                filesystem_ = fs.FileSystem.from_uri(f"{scheme}://{host}/")[0]
            _FILESYSTEMS[key] = filesystem_
    return filesystem_, path.rstrip("/") or path, key[0]


def _info(location: str):
    filesystem_, path, _ = filesystem(location)
    return filesystem_.get_file_info(path)


def exists(location: str) -> bool:
    from pyarrow import fs

    return _info(location).type != fs.FileType.NotFound


def is_file(location: str) -> bool:
    from pyarrow import fs

    return _info(location).type == fs.FileType.File


def is_dir(location: str) -> bool:
    """True for a directory (on an object store: a prefix holding at least one object)."""
    from pyarrow import fs

    return _info(location).type == fs.FileType.Directory


def makedirs(location: str) -> None:
    filesystem_, path, _ = filesystem(location)
    filesystem_.create_dir(path, recursive=True)


def list_names(location: str) -> list[str]:
    """Names of the entries directly in directory ``location`` (empty when it does not exist)."""
    from pyarrow import fs

    filesystem_, path, _ = filesystem(location)
    try:
        infos = filesystem_.get_file_info(fs.FileSelector(path, allow_not_found=True))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(posixpath.basename(i.path.rstrip("/")) for i in infos)


def read_bytes(location: str) -> bytes:
    """The contents of file ``location`` (FileNotFoundError / OSError as the filesystem raises them)."""
    filesystem_, path, _ = filesystem(location)
    with filesystem_.open_input_stream(path) as fh:
        return fh.read()


def _sync_local(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(location: str, write, *, sync_parent: bool = True) -> str | None:
    """Call ``write(filesystem, path)`` so that ``location`` appears whole or not at all.  On a local
    disk the rename is made durable by syncing the parent directory, or, with ``sync_parent=False``,
    left to the caller: the parent is returned, to be synced once for several files."""
    filesystem_, path, kind = filesystem(location)
    parent = posixpath.dirname(path) if kind != "local" else os.path.dirname(path)
    if parent:
        filesystem_.create_dir(parent, recursive=True)
    if kind not in _RENAMES_ATOMICALLY:
        write(filesystem_, path)
        return None
    tmp = posixpath.join(parent, f".{posixpath.basename(path)}.{uuid.uuid4().hex}.tmp")
    try:
        write(filesystem_, tmp)
        if kind == "local":
            _sync_local(tmp)  # the data is durable before the rename makes it visible
        filesystem_.move(tmp, path)
    except BaseException:
        try:
            filesystem_.delete_file(tmp)
        except OSError:
            pass
        raise
    if kind != "local":
        return None
    if not sync_parent:
        return parent
    _sync_parent(parent)
    return None


def _sync_parent(parent: str) -> None:
    try:  # the rename itself survives a crash
        _sync_local(parent)
    except OSError:
        pass


def write_bytes(location: str, data: bytes) -> None:
    """Write ``data`` to ``location`` atomically (see the module docstring)."""
    def write(filesystem_, path):
        with filesystem_.open_output_stream(path) as fh:
            fh.write(data)

    _write_atomically(location, write)


def write_parquet(location: str, table) -> None:
    """Write the Arrow ``table`` as Parquet to ``location`` atomically."""
    import pyarrow.parquet as pq

    _write_atomically(location, lambda filesystem_, path: pq.write_table(table, path, filesystem=filesystem_))


def write_parquet_files(tables: Mapping[str, Any]) -> None:
    """Write each ``location → table`` of ``tables`` as :func:`write_parquet` does, the files at once
    (threads: Parquet's encoding and the fsyncs release the GIL) and each local directory synced once
    after its renames instead of once per file.  Each file appears whole or not at all; the first
    failure is raised once every write has ended (a crash may leave some of the files written, which
    a replay overwrites with the same contents)."""
    import pyarrow.parquet as pq
    from concurrent.futures import ThreadPoolExecutor

    def one(item: tuple[str, Any]) -> str | None:
        location, table = item
        return _write_atomically(location, lambda filesystem_, path: pq.write_table(table, path, filesystem=filesystem_),
                                 sync_parent=False)

    items = list(tables.items())
    if len(items) <= 1:
        parents = [one(i) for i in items]
    else:
        with ThreadPoolExecutor(max_workers=min(8, len(items)), thread_name_prefix="write-parquet") as pool:
            parents = list(pool.map(one, items))
    for parent in dict.fromkeys(p for p in parents if p):
        _sync_parent(parent)


def remove(location: str) -> None:
    """Delete file ``location``; no error when it is already gone."""
    filesystem_, path, _ = filesystem(location)
    try:
        filesystem_.delete_file(path)
    except FileNotFoundError:
        pass


def remove_tree(location: str) -> None:
    """Delete directory ``location`` and everything in it; no error when it is already gone."""
    filesystem_, path, _ = filesystem(location)
    try:
        filesystem_.delete_dir(path)
    except FileNotFoundError:
        pass
