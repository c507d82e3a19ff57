#!/usr/bin/env python
"""Driver memory of ``skewlab engine`` against the number of distinct keys.

Usage::

    python bench/bench_driver_memory.py [--keys 10000,1000000] [--per-batch 500000] [--batches 5]
                                        [--algorithm mixed] [--workers 8] [--migrate-after B]
                                        [--jvm-memory SIZE] [--json PATH|-]

For every ``--keys`` value one engine run in a fresh Python process (so one run's memory never
counts in the next): :class:`skewlab.engine.runtimes.spark.engine.SparkEngine` on the ``skewlab-generator`` stream
(uniform keys, Zipf z = 0, so nearly every key appears: 5 batches of 500,000 tuples over 1e6 keys
touch ~92 % of them), ``--algorithm`` on ``--workers`` workers (= state partitions), window 10,
shadows off, ``local[2]``.  After every batch the driver process's resident set (``VmRSS`` in
``/proc/self/status``) and the keys the controller knows are recorded; at the end the peak
(``VmHWM``).  The figures are taken after each batch's work, when its temporaries are freed; the peak
includes them.  The driver process is the Python process: the JVM and the Python workers of the
executors are other processes and not counted.

Issue #14's target: driver RSS at 1e6 keys ≤ 1.5× its RSS at 1e4 keys (reported, not asserted).

``--migrate-after B``: after batch ``B`` of each run the bench submits ``set-workers workers − 1``
(``skewlab control``'s command): under ``--algorithm hash`` nearly every key changes its worker, so
the next batches migrate ~(workers−1)/workers of the keys in the window between the executors.  Each
batch's row then also holds ``peak_mib``, the driver's peak resident set *within* that batch (``VmHWM``
reset through ``/proc/self/clear_refs`` after every batch), and the run's keys moved per batch
(``migration_events``).  Reported: RSS and peak of the batches from the command on against those of
batch ``B`` (steady).  Issue 24's target: driver RSS while migrating 1e6 keys ≤ 1.2× its steady RSS.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

from skewlab.bench.common import write_json


def _status() -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of this process in MiB."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                out[name] = int(value.split()[0]) // 1024
    return out


def _reset_peak() -> bool:
    """Reset this process's ``VmHWM`` to its current RSS (Linux ``clear_refs`` 5); False if refused."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def run_one(keys: int, args: argparse.Namespace) -> dict[str, Any]:
    """One engine run in this process; returns per-batch RSS and the peak (with ``--migrate-after``:
    per batch its own peak and the keys migrated)."""
    from skewlab.engine.runtimes.spark.engine import EngineConfig, SparkEngine

    tmp = tempfile.mkdtemp(prefix="skewlab-mem-")
    batches: list[dict[str, Any]] = []
    migrate_after = getattr(args, "migrate_after", None)
    per_batch_peak = migrate_after is not None and _reset_peak()

    def after(engine: Any, batch: int) -> None:
        status = _status()
        row = {"batch": int(batch), "keys_known": len(engine.snapshot.controller.vocab), **status}
        if per_batch_peak:
            row["peak_mib"] = status["VmHWM"]
            _reset_peak()
        batches.append(row)
        if migrate_after is not None and int(batch) == migrate_after:
            engine.store.submit_command("set-workers", {"workers": args.workers - 1})

    settings = dict(
        source="generator", db=f"sqlite:///{tmp}/m.sqlite", checkpoint=os.path.join(tmp, "ckpt"),
        sink=os.path.join(tmp, "sink"), algorithm=args.algorithm, workers=args.workers, max_workers=args.workers,
        sources=2, interval=0.001, rate=0, max_per_batch=args.per_batch, window=10, workload="zipf",
        workload_params={"keys": keys, "z": 0.0}, shadow=[], max_batches=args.batches, master=args.master,
        spark_conf={"spark.driver.memory": args.jvm_memory} if getattr(args, "jvm_memory", "") else {},
    )
    known = {f.name for f in dataclasses.fields(EngineConfig)}  # an older checkout (for comparisons) lacks some
    cfg = EngineConfig(**{k: v for k, v in settings.items() if k in known})
    started = time.monotonic()
    engine = SparkEngine(cfg, log=lambda m: None, after_batch=after)
    engine.run()
    out = {"keys": keys, "batches": batches, "peak_mib": _status()["VmHWM"], "seconds": time.monotonic() - started}
    if migrate_after is not None:
        moved: dict[int, int] = {}
        for m in engine.store.migration_events(engine.snapshot.run_id):
            moved[int(m["batch_id"])] = moved.get(int(m["batch_id"]), 0) + int(m["keys_moved"] or 0)
        for row in batches:
            row["keys_moved"] = moved.get(row["batch"], 0)
        out["peak_mib"] = max((r.get("peak_mib", 0) for r in batches), default=out["peak_mib"]) if per_batch_peak else None
    return out


def migration_report(run: dict[str, Any], migrate_after: int) -> dict[str, Any]:
    """Steady (batch ``migrate_after``) against migrating (every later batch): RSS after each batch and
    peak within each batch, their ratios and the keys moved."""
    steady = next(r for r in run["batches"] if r["batch"] == migrate_after)
    later = [r for r in run["batches"] if r["batch"] > migrate_after]
    out = {"steady_rss_mib": steady["VmRSS"], "steady_peak_mib": steady.get("peak_mib"),
           "keys_moved": sum(r.get("keys_moved", 0) for r in later),
           "migrating_rss_mib": max((r["VmRSS"] for r in later), default=None),
           "migrating_peak_mib": max((r.get("peak_mib") or 0 for r in later), default=None) or None}
    out["rss_ratio"] = out["migrating_rss_mib"] / out["steady_rss_mib"] if later else None
    out["peak_over_steady_rss"] = (out["migrating_peak_mib"] / out["steady_rss_mib"]
                                   if out["migrating_peak_mib"] else None)
    out["peak_ratio"] = (out["migrating_peak_mib"] / out["steady_peak_mib"]
                         if out["migrating_peak_mib"] and out["steady_peak_mib"] else None)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", default="10000,1000000", help="comma-separated key-space sizes")
    ap.add_argument("--per-batch", type=int, default=500_000)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--algorithm", default="mixed")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--jvm-memory", default="", metavar="SIZE",
                    help="spark.driver.memory of the local JVM, e.g. 4g (default: Spark's 1g)")
    ap.add_argument("--migrate-after", type=int, default=None, metavar="B",
                    help="submit set-workers WORKERS-1 after batch B (measure the driver while keys migrate)")
    ap.add_argument("--json", help="write the results as JSON to PATH (- = stdout)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: run one size in this process
    args = ap.parse_args(argv)
    if args.one is not None:
        print(json.dumps(run_one(args.one, args)))
        return 0
    results = []
    for keys in (int(k) for k in args.keys.split(",")):
        print(f"{keys} keys ...", file=sys.stderr, flush=True)
        cmd = [sys.executable, os.path.abspath(__file__), "--one", str(keys), "--per-batch", str(args.per_batch),
               "--batches", str(args.batches), "--algorithm", args.algorithm, "--workers", str(args.workers),
               "--master", args.master, "--jvm-memory", args.jvm_memory] + ([] if args.migrate_after is None else ["--migrate-after", str(args.migrate_after)])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode:
            print(done.stderr[-2000:], file=sys.stderr)
            return 1
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    base = results[0]["batches"][-1]["VmRSS"]
    print(f"{'keys':>9} {'known':>9} {'RSS MiB':>8} {'peak MiB':>9} {'× first':>8}")
    for r in results:
        last = r["batches"][-1]
        r["ratio"] = last["VmRSS"] / base
        print(f"{r['keys']:>9} {last['keys_known']:>9} {last['VmRSS']:>8} {r['peak_mib']:>9} {r['ratio']:>8.2f}")
    if args.migrate_after is not None:
        print(f"{'keys':>9} {'batch':>5} {'known':>9} {'moved':>9} {'RSS MiB':>8} {'peak MiB':>9}")
        for r in results:
            for b in r["batches"]:
                print(f"{r['keys']:>9} {b['batch']:>5} {b['keys_known']:>9} {b.get('keys_moved', 0):>9} "
                      f"{b['VmRSS']:>8} {b.get('peak_mib') or '-':>9}")
            m = r["migration"] = migration_report(r, args.migrate_after)
            print(f"{r['keys']} keys: {m['keys_moved']:,} keys moved after batch {args.migrate_after}; RSS "
                  f"{m['steady_rss_mib']} -> {m['migrating_rss_mib']} MiB ({m['rss_ratio']:.2f}x), peak within a batch "
                  f"{m['steady_peak_mib']} -> {m['migrating_peak_mib']} MiB; migrating peak / steady RSS "
                  f"{m['peak_over_steady_rss'] or 0:.2f}x (target <= 1.2x)")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
