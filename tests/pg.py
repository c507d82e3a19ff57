"""pytest fixtures: a throwaway PostgreSQL server started by the tests themselves.

Use by importing the fixtures into a test module::

    from tests.pg import pg_server, pg_url  # noqa: F401  (pytest fixtures)

* ``pg_server`` (session scope) finds ``initdb``/``pg_ctl``/``postgres`` (``$SKEWLAB_PG_BIN``, else the
  newest ``/usr/lib/postgresql/*/bin``, else ``$PATH``), runs ``initdb`` into a fresh temporary directory
  (trust authentication, no fsync), starts the server on a free TCP port of 127.0.0.1 with
  ``unix_socket_directories`` inside the temporary directory (so it never touches
  ``/var/run/postgresql`` nor a system cluster), yields a :class:`PgServer`, then stops it with
  ``pg_ctl stop -m immediate`` and deletes the directory.
* ``pg_url`` (function scope) yields the SQLAlchemy URL of a fresh, empty namespace for one test:
  a new schema in the session's test database, selected by ``search_path`` in the URL
  (``postgresql+psycopg://skewlab@127.0.0.1:<port>/<db>?options=-csearch_path%3D<schema>``); the
  schema is dropped (CASCADE) after the test.  A schema costs milliseconds where ``CREATE DATABASE``
  costs about a second on a loaded machine.

Running as root: ``initdb`` refuses to run as root ("cannot be run as root"), and so does the
``postgres`` server.  When the tests run as root, the binaries are run as the unprivileged
``postgres`` user created by the Debian ``postgresql`` package (override with
``$SKEWLAB_PG_USER``) via ``runuser -u <user> --``; the temporary directory is created directly under
the system temp dir (``/tmp`` is world-traversable, pytest's ``/tmp/pytest-of-root`` is not) and
``chown``-ed to that user.  As a non-root user the binaries run directly.

Missing binaries (or no usable unprivileged user when root): the fixture FAILS with a clear message
when the environment variable ``CI`` is set (so CI cannot silently skip the PostgreSQL tests), and
SKIPS otherwise (a developer machine without PostgreSQL).  Install with
``apt-get install -y postgresql`` (Debian) and ``pip install "psycopg[binary]"``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

__all__ = ["PgServer", "find_pg_bin", "pg_server", "pg_url"]

_SUPERUSER = "skewlab"


def _unavailable(msg: str) -> None:
    """Fail under CI, skip elsewhere."""
    full = f"PostgreSQL test server unavailable: {msg}"
    if os.environ.get("CI"):
        pytest.fail(full + " (CI is set, so this is an error: install postgresql and psycopg[binary])", pytrace=False)
    pytest.skip(full)


def _version_key(path: str) -> tuple:
    ver = Path(path).parent.name
    return tuple(int(p) if p.isdigit() else 0 for p in ver.split("."))


def find_pg_bin() -> Path | None:
    """Directory holding ``initdb``, ``pg_ctl`` and ``postgres``, or None."""
    candidates: list[Path] = []
    env = os.environ.get("SKEWLAB_PG_BIN")
    if env:
        candidates.append(Path(env))
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True):
        candidates.append(Path(d))
    which = shutil.which("pg_ctl")
    if which:
        candidates.append(Path(os.path.realpath(which)).parent)
    for d in candidates:
        if all((d / exe).is_file() and os.access(d / exe, os.X_OK) for exe in ("initdb", "pg_ctl", "postgres")):
            return d
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    """A running throwaway server."""

    bindir: Path
    root: Path
    port: int
    run_as: str | None
    database: str = "postgres"
    _n: int = field(default=0, repr=False)

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    def url(self, database: str = "postgres", schema: str | None = None) -> str:
        base = f"postgresql+psycopg://{_SUPERUSER}@127.0.0.1:{self.port}/{database}"
        return base if schema is None else f"{base}?options=-csearch_path%3D{schema}"

    def _admin(self, database: str = "postgres"):
        import psycopg

        return psycopg.connect(
            host="127.0.0.1", port=self.port, user=_SUPERUSER, dbname=database, autocommit=True, connect_timeout=10
        )

    def new_database(self) -> str:
        """Create a fresh, empty database; returns its name."""
        from psycopg import sql

        self._n += 1
        name = f"skewlab_t{os.getpid()}_{self._n}"
        with self._admin() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))
        return name

    def drop_database(self, name: str) -> None:
        from psycopg import sql

        with self._admin() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def new_schema(self, database: str) -> str:
        """Create a fresh, empty schema in ``database``; returns its name (lowercase identifier)."""
        from psycopg import sql

        self._n += 1
        name = f"t{os.getpid()}_{self._n}"
        with self._admin(database) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        return name

    def drop_schema(self, database: str, name: str) -> None:
        from psycopg import sql

        with self._admin(database) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _cmd(run_as: str | None, argv: list[str]) -> list[str]:
    return (["runuser", "-u", run_as, "--"] if run_as else []) + argv


def _start(bindir: Path) -> PgServer:
    run_as: str | None = None
    if os.geteuid() == 0:
        run_as = os.environ.get("SKEWLAB_PG_USER", "postgres")
        try:
            pw = pwd.getpwnam(run_as)
        except KeyError:
            _unavailable(f"running as root and there is no unprivileged user {run_as!r} to run initdb as")
            raise  # unreachable
        if shutil.which("runuser") is None:
            _unavailable("running as root and `runuser` is not available to drop privileges for initdb")
    root = Path(tempfile.mkdtemp(prefix="skewlab-pg-", dir=tempfile.gettempdir()))
    if run_as:
        os.chown(root, pw.pw_uid, pw.pw_gid)
    datadir = root / "data"
    env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
    try:
        init = subprocess.run(
            _cmd(run_as, [str(bindir / "initdb"), "-D", str(datadir), "-U", _SUPERUSER, "--auth=trust",
                          "--encoding=UTF8", "--no-sync", "--no-instructions"]),
            capture_output=True, text=True, env=env, timeout=120,
        )
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed ({init.returncode}): {init.stderr.strip()[-2000:]}")
        last_err = ""
        for _attempt in range(3):
            port = _free_port()
            opts = (f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={root} "
                    "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=50")
            start = subprocess.run(
                _cmd(run_as, [str(bindir / "pg_ctl"), "-D", str(datadir), "-l", str(root / "server.log"),
                              "-o", opts, "-w", "-t", "60", "start"]),
                capture_output=True, text=True, env=env, timeout=90,
            )
            if start.returncode == 0:
                return PgServer(bindir=bindir, root=root, port=port, run_as=run_as)
            log = (root / "server.log").read_text(errors="replace")[-2000:] if (root / "server.log").exists() else ""
            last_err = f"{start.stderr.strip()[-1000:]}\n{log}"
            time.sleep(0.2)
        raise RuntimeError(f"pg_ctl start failed 3 times: {last_err}")
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def _stop(server: PgServer) -> None:
    try:
        subprocess.run(
            _cmd(server.run_as, [str(server.bindir / "pg_ctl"), "-D", str(server.datadir), "-m", "immediate",
                                 "-w", "stop"]),
            capture_output=True, text=True, timeout=60,
        )
    finally:
        shutil.rmtree(server.root, ignore_errors=True)


@contextlib.contextmanager
def throwaway_server() -> Iterator[PgServer]:
    """Start a private PostgreSQL server with one database; stop and delete it afterwards."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable('the psycopg driver is not installed (pip install "psycopg[binary]")')
    bindir = find_pg_bin()
    if bindir is None:
        _unavailable("initdb/pg_ctl/postgres not found under /usr/lib/postgresql/*/bin, $SKEWLAB_PG_BIN or $PATH")
    server = _start(bindir)
    try:
        server.database = server.new_database()
        yield server
    finally:
        _stop(server)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A throwaway PostgreSQL server for the test session (see the module docstring)."""
    with throwaway_server() as server:
        yield server


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """URL of a fresh empty schema in the session's test database, dropped after the test."""
    schema = pg_server.new_schema(pg_server.database)
    try:
        yield pg_server.url(pg_server.database, schema)
    finally:
        pg_server.drop_schema(pg_server.database, schema)
