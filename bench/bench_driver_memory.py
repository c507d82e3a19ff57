#!/usr/bin/env python
"""Driver memory of ``skewlab engine`` against the number of distinct keys.

Usage::

    python bench/bench_driver_memory.py [--keys 10000,1000000] [--per-batch 500000] [--batches 5]
                                        [--algorithm mixed] [--workers 8] [--json PATH|-]

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


def run_one(keys: int, args: argparse.Namespace) -> dict[str, Any]:
    """One engine run in this process; returns per-batch RSS and the peak."""
    from skewlab.engine.runtimes.spark.engine import EngineConfig, SparkEngine

    tmp = tempfile.mkdtemp(prefix="skewlab-mem-")
    batches: list[dict[str, Any]] = []

    def after(engine: Any, batch: int) -> None:
        batches.append({"batch": int(batch), "keys_known": len(engine.controller.vocab), **_status()})

    settings = dict(
        source="generator", db=f"sqlite:///{tmp}/m.sqlite", checkpoint=os.path.join(tmp, "ckpt"),
        sink=os.path.join(tmp, "sink"), algorithm=args.algorithm, workers=args.workers, max_workers=args.workers,
        sources=2, interval=0.001, rate=0, max_per_batch=args.per_batch, window=10, workload="zipf",
        workload_params={"keys": keys, "z": 0.0}, shadow=[], max_batches=args.batches, master=args.master,
    )
    known = {f.name for f in dataclasses.fields(EngineConfig)}  # an older checkout (for comparisons) lacks some
    cfg = EngineConfig(**{k: v for k, v in settings.items() if k in known})
    started = time.monotonic()
    SparkEngine(cfg, log=lambda m: None, after_batch=after).run()
    return {"keys": keys, "batches": batches, "peak_mib": _status()["VmHWM"], "seconds": time.monotonic() - started}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", default="10000,1000000", help="comma-separated key-space sizes")
    ap.add_argument("--per-batch", type=int, default=500_000)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--algorithm", default="mixed")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--master", default="local[2]")
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
               "--master", args.master]
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
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
