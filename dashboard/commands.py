"""``skewlab dashboard`` and ``skewlab demo``: :func:`add_commands` adds both to skewlab's parser.

``skewlab dashboard [--db URL] [--host H] [--port N] [--token T] [--read-only]`` serves the dashboard
alone over any database the engine writes (default 127.0.0.1:8050).  The operator token may also come
from ``$SKEWLAB_DASHBOARD_TOKEN`` (preferred: a command-line argument is visible in ``ps``); bound to
a non-loopback address without one, the dashboard is read-only and says so.  The token is never
printed.

``skewlab demo [--port N] [--db URL] [--duration S] [--new-run]`` first checks its flags as the engine
would (``--workers 0``, an unknown algorithm: one line, exit 2) and that the port is free ("port N is
in use"), then starts the dashboard on 127.0.0.1 and prints its URL as soon as it listens, then
``skewlab engine`` as a subprocess (generator source, SQLite under the data directory, checkpoint
``data/checkpoints/demo``; its log is appended to ``data/logs/demo-engine.log``, and a failure quotes
the last lines this attempt wrote), says when data flows, and on Ctrl-C / SIGTERM asks the engine to stop
(SIGTERM: it finishes its batch and flushes its metrics), waits for it, then stops the web server.
When the demo's checkpoint holds a run, the demo resumes it and says so on the terminal (run id,
algorithm, workers); ``--new-run`` clears that checkpoint and starts a new run (earlier runs stay in
the database); ``--algorithm``/``--workers`` that differ from the resumed run's are refused with the
way to start fresh, never silently ignored.  A second Ctrl-C forwards SIGINT (the engine stops at once), a
third kills it.  The database URL reaches the engine through ``$SKEWLAB_DB_URL``, not its command line.
Before anything starts, a missing or too old Java is one line (:mod:`skewlab.engine.runtimes.spark.java`).

``--source kafka`` starts the local tansu broker (:mod:`skewlab.engine.io.local_broker`, in memory), creates
topic ``keys`` and runs ``skewlab produce`` into it (logs ``data/logs/demo-broker.log``,
``demo-producer.log``), then the engine on that topic; always a new run (checkpoint
``data/checkpoints/demo-kafka``: the broker's topic does not outlive it).  They are stopped after the engine.

For production, serve ``app.server`` with gunicorn instead (``dashboard/README.md``).
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from skewlab.engine.config import settings
from skewlab.shared import UsageError
from skewlab.engine.config.params import ParamError, parse_assignments

__all__ = ["add_commands", "cmd_dashboard", "cmd_demo"]

DEFAULT_PORT = 8050
#: ``demo --source kafka``: the topic the demo's producer feeds, its partitions (= source instances) and
#: the producer's rate in messages/s when ``--rate`` is not given
DEMO_TOPIC = "keys"
DEMO_PARTITIONS = 2
DEMO_KAFKA_RATE = 20_000


def add_commands(subparsers: Any) -> None:
    """Add ``dashboard`` and ``demo`` to ``skewlab``'s argparse subparsers."""
    from skewlab.dashboard.controls import TOKEN_ENV

    d = subparsers.add_parser("dashboard", help="serve the live dashboard over a metrics database")
    d.add_argument("--db", default=None, help="database URL (default: $SKEWLAB_DB_URL or SQLite data/skewlab.db)")
    d.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    d.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 = any free port)")
    d.add_argument("--token", default=None,
                   help=f"operator token required for control actions (or ${TOKEN_ENV}); without one, a "
                        "dashboard bound to a non-loopback address is read-only")
    d.add_argument("--read-only", action="store_true", help="disable every control action")
    d.add_argument("--window", type=int, default=600, help="intervals shown on the time axes (default 600)")
    d.set_defaults(func=cmd_dashboard)

    m = subparsers.add_parser(
        "demo", help="start the engine (generator, SQLite) and the dashboard together",
        description="Start the live dashboard and the Spark engine on the embedded default (generator source, "
                    "SQLite under the data directory). A second start resumes the demo's run; --new-run starts a "
                    "new one. Ctrl-C stops both cleanly.")
    m.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"dashboard port (default {DEFAULT_PORT}; 0 = any free)")
    m.add_argument("--db", default=None, help="database URL (default: $SKEWLAB_DB_URL or SQLite data/skewlab.db)")
    m.add_argument("--duration", type=float, default=None, help="stop both after this many seconds")
    m.add_argument("--algorithm", default=None, help=f"engine algorithm (default: the engine's for its count operator, {settings.DEFAULT_ALGORITHM})")
    m.add_argument("--workers", type=int, default=None, help="engine workers (default: the engine's, 8)")
    m.add_argument("--interval", type=float, default=None, help="seconds per interval (default: the engine's, 2)")
    m.add_argument("--rate", type=float, default=None, help="generator tuples/s (default: the engine's)")
    m.add_argument("--conf", action="append", metavar="KEY=VALUE", default=None,
                   help="Spark setting for the engine (repeatable), passed to `skewlab engine --conf`")
    m.add_argument("--source", choices=("generator", "kafka"), default="generator",
                   help="generator (default) or kafka: a local in-memory Kafka-protocol broker (tansu, from "
                        "skewlab[kafka-demo]) with a producer feeding topic 'keys'; always a new run")
    m.add_argument("--new-run", action="store_true",
                   help="start a new run instead of resuming the demo's last one (its metrics stay in the database)")
    m.set_defaults(func=cmd_demo)


# ------------------------------------------------------------------------------------ helpers
def _check_port(port: int) -> None:
    if not 0 <= int(port) <= 65535:
        raise UsageError(f"--port must be in [0, 65535], got {port}")


def _open_store(db: str | None) -> Any:
    """:func:`storage.open_store` with its one-line error as a :class:`UsageError` (exit status 2)."""
    from skewlab.storage import open_store

    try:
        return open_store(db)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _check_listen(host: str, port: int) -> None:
    """One-line :class:`UsageError` if ``host:port`` cannot be listened on (say, the port is in use).

    Probed with a socket of our own (closed at once, ``SO_REUSEADDR`` like the server's) because werkzeug
    reports a failed bind on stderr in its own words and exits with status 1.
    """
    import errno
    import socket

    from werkzeug.serving import select_address_family

    family = select_address_family(host, int(port))
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, int(port)))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(f"port {port} is in use on {host} (another dashboard or demo?); choose another "
                             "with --port, or --port 0 for any free one") from None
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def _make_server(app: Any, host: str, port: int) -> Any:
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no request log lines per tick
    _check_listen(host, port)
    try:
        return make_server(host, int(port), app.server, threaded=True)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    except (SystemExit, ValueError):  # werkzeug exits when the bind fails (taken since the probe above)
        raise UsageError(f"cannot listen on {host}:{port} (taken by another program since it was checked)") from None


def _warm_up(app: Any) -> None:
    """Answer one page request in-process before the URL is printed (issue #5, "Speed").

    Dash's first request sets the server up (assets, a first evaluation of the layout), the figures'
    subplot grids are computed once, and the newest run's event history is scanned once: ~1 s with
    1e5 stored intervals that the operator's first page load would otherwise wait for.  A failure
    here (say, the database is briefly unavailable) is left for the real request to report.
    """
    try:
        app.server.test_client().get(app.config.requests_pathname_prefix)
    except Exception as exc:  # noqa: BLE001 - best effort; the page request shows the real error
        logging.getLogger(__name__).debug("dashboard warm-up failed: %r", exc)


def _url(host: str, port: int) -> str:
    shown = host if host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/"


# ------------------------------------------------------------------------------------ dashboard
def cmd_dashboard(args: argparse.Namespace) -> int:
    from skewlab.dashboard.app import create_app
    from skewlab.dashboard.controls import TOKEN_ENV, is_loopback
    from skewlab.storage import safe_url

    _check_port(args.port)
    if args.window < 10:
        raise UsageError(f"--window must be >= 10 intervals, got {args.window}")
    token = args.token or os.environ.get(TOKEN_ENV) or None
    store = _open_store(args.db)
    app = create_app(store=store, token=token, read_only=True if args.read_only else None, host=args.host,
                     window=args.window)
    srv = _make_server(app, args.host, args.port)
    _warm_up(app)
    if app.skewlab.read_only:
        mode = "read-only" + ("" if args.read_only else f" (no operator token; set --token or ${TOKEN_ENV})")
    elif token:
        mode = "control actions need the operator token"
    else:
        mode = "control actions enabled" + (" (loopback only)" if is_loopback(args.host) else "")
    print(f"skewlab dashboard: {_url(args.host, srv.server_port)} — database {safe_url(args.db)}; {mode}. "
          "Ctrl-C stops it.", flush=True)
    previous = _on_signals({signal.SIGTERM: _raise_interrupt})
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
        _restore(previous)
        store.close()
    print("skewlab dashboard: stopped", flush=True)
    return 0


def _raise_interrupt(*_: Any) -> None:
    raise KeyboardInterrupt


def _on_signals(handlers: dict[int, Callable[..., Any]]) -> dict[int, Any]:
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, h) for sig, h in handlers.items()}


def _restore(previous: dict[int, Any]) -> None:
    for sig, h in previous.items():
        signal.signal(sig, h)


# ------------------------------------------------------------------------------------ demo
def _data_dir() -> Path:
    return Path(os.environ.get("SKEWLAB_DATA_DIR") or "data")


def _demo_checkpoint(db: str | None, url: str) -> Path:
    """``data/checkpoints/demo`` for the default database; one per database otherwise (a checkpoint
    belongs to the run of one database)."""
    from skewlab.storage import normalize_url

    if db is None and not os.environ.get("SKEWLAB_DB_URL"):
        return _data_dir() / "checkpoints" / "demo"
    digest = hashlib.sha1(normalize_url(url).render_as_string(hide_password=False).encode()).hexdigest()[:10]
    return _data_dir() / "checkpoints" / f"demo-{digest}"


def _tail(path: Path, lines: int = 15, since: int = 0) -> str:
    """The last ``lines`` lines of ``path`` written after byte offset ``since`` (this attempt's part of an
    appended log)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(since)
            text = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _check_engine_flags(args: argparse.Namespace) -> None:
    """The engine's own validation of the flags the demo passes on, before anything starts (one line)."""
    from skewlab.engine.runtimes.spark.engine import EngineConfig

    given = {"algorithm": args.algorithm, "workers": args.workers, "interval": args.interval, "rate": args.rate,
             "duration": args.duration}
    EngineConfig(**{name: value for name, value in given.items() if value is not None}).validate()


def cmd_demo(args: argparse.Namespace) -> int:
    from skewlab.dashboard.app import create_app
    from skewlab.engine.runtimes.spark.java import java_problem
    from skewlab.storage import default_url, safe_url

    _check_port(args.port)
    if args.duration is not None and args.duration <= 0:
        raise UsageError(f"--duration must be > 0 seconds, got {args.duration}")
    try:
        parse_assignments(args.conf or [])  # a malformed --conf fails here, not in the engine's log
    except ParamError as exc:
        raise UsageError(f"--conf: {exc}") from None
    _check_engine_flags(args)  # e.g. --workers 0: refused before the URL is printed or the engine starts
    problem = java_problem()  # before anything starts: one line instead of Spark's traceback in the log
    if problem is not None:
        raise UsageError(problem)
    kafka = args.source == "kafka"
    tansu = _find_broker() if kafka else None
    url = args.db or default_url()
    checkpoint = _demo_checkpoint(args.db, url)
    if kafka:  # the broker keeps its topic in memory: nothing to resume, a new run every time
        checkpoint = checkpoint.with_name(checkpoint.name + "-kafka")
        args.new_run = True
    resumed = None if args.new_run else _resumable_run(checkpoint)
    if resumed is not None:
        _refuse_conflicting_flags(args, resumed, checkpoint)
    store = _open_store(args.db)  # None: the default database, whose directory is created
    app = create_app(store=store, host="127.0.0.1")
    srv = _make_server(app, "127.0.0.1", args.port)  # fails before the engine starts if the port is taken
    _warm_up(app)
    if args.new_run and checkpoint.exists():
        shutil.rmtree(checkpoint)
    log_path = _data_dir() / "logs" / "demo-engine.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "skewlab", "engine", "--checkpoint", str(checkpoint), "--run-name", "demo"]
    for flag, value in (("--algorithm", args.algorithm), ("--workers", args.workers), ("--interval", args.interval),
                        ("--rate", args.rate), ("--duration", args.duration)):
        if value is not None:
            cmd += [flag, str(value)]
    for setting in args.conf or []:
        cmd += ["--conf", setting]
    env = dict(os.environ, SKEWLAB_DB_URL=url, PYTHONUNBUFFERED="1")
    helpers: list[subprocess.Popen] = []  # the demo's broker and producer (--source kafka)

    thread = threading.Thread(target=srv.serve_forever, name="skewlab-dashboard", daemon=True)
    signals = {"count": 0}
    engine: dict[str, subprocess.Popen] = {}

    def forward(_signum: int, _frame: Any) -> None:
        signals["count"] += 1
        proc = engine.get("proc")
        if proc is None or proc.poll() is not None:
            return  # not started yet (it will not be) or already gone
        if signals["count"] == 1:
            print("skewlab demo: stopping — the engine finishes its batch and flushes its metrics "
                  "(Ctrl-C again to force)", flush=True)
        # First signal: SIGTERM, the engine's graceful stop (pyspark replaces the engine's SIGINT handler
        # with its own, which interrupts the batch); second: SIGINT (stop now); third: SIGKILL.
        sig = {1: signal.SIGTERM, 2: signal.SIGINT}.get(signals["count"], signal.SIGKILL)
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass

    # Installed before anything starts: a Ctrl-C at any moment from here on stops both cleanly.
    previous = _on_signals({signal.SIGINT: forward, signal.SIGTERM: forward})
    rc = 0
    log_start = 0
    try:
        thread.start()
        started = time.time()
        print(f"skewlab demo: dashboard at {_url('127.0.0.1', srv.server_port)} — Ctrl-C stops the engine and the "
              "dashboard.", flush=True)
        if resumed is not None:
            print(f"skewlab demo: resuming run {resumed['run_id']} ({resumed['algorithm']} on {resumed['workers']} "
                  f"workers, after batch {resumed['batch']}) from {checkpoint}; 'skewlab demo --new-run' starts a "
                  "new run", flush=True)
        if kafka and signals["count"] == 0:
            cmd += _start_kafka(tansu, args.rate, helpers)
        if signals["count"] == 0:
            print(f"skewlab demo: starting the Spark engine (log {log_path}; database {safe_url(url)}) …", flush=True)
            with open(log_path, "ab") as log:
                log_start = log.tell()  # the report below quotes this attempt's lines only
                engine["proc"] = subprocess.Popen(  # own session: Ctrl-C reaches the demo only; it forwards it
                    cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                    start_new_session=True)
        proc = engine.get("proc")
        if proc is not None and signals["count"]:  # Ctrl-C came while it was being started
            proc.send_signal(signal.SIGTERM)
        announced = False
        while proc is not None and proc.poll() is None:
            time.sleep(0.5)
            flowing = None if announced or signals["count"] else _data_flows(store, started)
            if flowing is not None:
                announced = True
                print(f"skewlab demo: data is flowing (run {flowing}); see {_url('127.0.0.1', srv.server_port)}",
                      flush=True)
        rc = proc.returncode if proc is not None else 0
    finally:
        proc = engine.get("proc")
        if proc is not None and proc.poll() is None:  # an exception in this loop: never leave the engine behind
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        _stop_helpers(helpers)
        if thread.is_alive():
            srv.shutdown()
            thread.join(timeout=10)
        srv.server_close()
        _restore(previous)
        store.close()
    if rc != 0 and signals["count"] == 0:
        print(f"skewlab demo: the engine exited with status {rc}; last lines of {log_path}:", file=sys.stderr)
        print(_tail(log_path, since=log_start), file=sys.stderr, flush=True)
        return 2 if rc == 2 else 1
    print(f"skewlab demo: stopped (engine exit status {rc})", flush=True)
    return 0 if rc == 0 or signals["count"] > 0 else 1


def _find_broker() -> str:
    """The tansu binary for ``--source kafka``; a one-line :class:`UsageError` when it is not installed."""
    from skewlab.engine.io.local_broker import INSTALL_HINT, find_tansu

    binary = find_tansu()
    if binary is None:
        raise UsageError(f"--source kafka needs the local broker: {INSTALL_HINT}; or run the engine against "
                         "your own Kafka: skewlab engine --source kafka --bootstrap HOST:PORT --topic NAME")
    return binary


def _start_kafka(binary: str, rate: float | None, helpers: list[subprocess.Popen]) -> list[str]:
    """Start the local broker, create topic :data:`DEMO_TOPIC` and start ``skewlab produce`` into it
    (both appended to ``helpers``, logs under ``data/logs``); returns the engine's source flags."""
    from skewlab.engine.io.kafka_io import ensure_topic
    from skewlab.engine.io.local_broker import start_tansu

    logs = _data_dir() / "logs"
    try:
        proc, address = start_tansu(binary, logs / "demo-broker.log", new_session=True)
    except RuntimeError as exc:
        raise UsageError(f"--source kafka: {exc} (log {logs / 'demo-broker.log'})") from None
    helpers.append(proc)
    try:
        ensure_topic(address, DEMO_TOPIC, DEMO_PARTITIONS)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    produce = [sys.executable, "-m", "skewlab", "produce", "--bootstrap", address, "--topic", DEMO_TOPIC,
               "--rate", str(rate if rate is not None else DEMO_KAFKA_RATE), "--messages", str(10**12)]
    with open(logs / "demo-producer.log", "ab") as log:
        helpers.append(subprocess.Popen(produce, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True))
    print(f"skewlab demo: Kafka-protocol broker (tansu, in memory) at {address}, topic {DEMO_TOPIC!r} fed by "
          f"skewlab produce (logs {logs / 'demo-broker.log'}, {logs / 'demo-producer.log'})", flush=True)
    return ["--source", "kafka", "--bootstrap", address, "--topic", DEMO_TOPIC, "--sources", str(DEMO_PARTITIONS)]


def _stop_helpers(helpers: list[subprocess.Popen]) -> None:
    """Stop the producer, then the broker (after the engine has stopped)."""
    from skewlab.engine.io.local_broker import stop_tansu

    for proc in reversed(helpers[1:]):
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    if helpers:
        stop_tansu(helpers[0])


def _data_flows(store: Any, since: float) -> int | None:
    """The id of the run that has written an interval with tuples after ``since`` (new or resumed
    run), or ``None`` while there is none (batch 0 of a stream often has no tuples)."""
    try:
        for r in store.list_runs(limit=5):
            if (r.get("last_wall_time") or 0) >= since - 1 and any(
                    (m.get("tuples") or 0) > 0 and (m.get("wall_time") or 0) >= since - 1
                    for m in store.interval_metrics(r["id"], limit=5, latest=True)):
                return int(r["id"])
    except Exception:  # noqa: BLE001 - the engine may be creating the schema
        return None
    return None


def _resumable_run(checkpoint: Path) -> dict[str, Any] | None:
    """The run the demo's checkpoint would resume: id, algorithm, workers, last batch; ``None`` when
    the checkpoint holds no engine snapshot (a new run starts)."""
    from skewlab.engine.io.checkpoint import SnapshotStore

    latest = SnapshotStore(checkpoint / "skewlab").latest() if (checkpoint / "skewlab").is_dir() else None
    if latest is None:
        return None
    batch, snap = latest
    controller = snap["controller"]
    return {"run_id": snap["run_id"], "algorithm": controller.planner.name, "workers": controller.n_workers,
            "batch": batch}


def _refuse_conflicting_flags(args: argparse.Namespace, run: dict[str, Any], checkpoint: Path) -> None:
    """``--algorithm``/``--workers`` set up new runs only: refuse values the resumed run does not have."""
    asked = {"--algorithm": (args.algorithm, run["algorithm"]), "--workers": (args.workers, run["workers"])}
    differ = [f"{flag} {want}" for flag, (want, have) in asked.items() if want is not None and str(want) != str(have)]
    if differ:
        raise UsageError(
            f"{checkpoint} holds run {run['run_id']} ({run['algorithm']} on {run['workers']} workers), which the "
            f"demo resumes; {' and '.join(differ)} would need a new run: add --new-run (run {run['run_id']} stays "
            "in the database), or drop them to resume it (change a running one from the dashboard)")

