#!/usr/bin/env python
"""Throughput of ``skewlab engine`` in one fresh process, for comparisons across checkouts.

Usage (from the root of the checkout to measure)::

    python bench/bench_engine_rate.py ALGORITHM [--keys 100000] [--zipf 1.2] [--per-batch 200000]
                                      [--warmup 2] [--batches 4] [--workers 8]

One :class:`skewlab.engine.runtimes.spark.engine.SparkEngine` run on the ``skewlab-generator`` stream (2 source
instances, unlimited rate), window 10, shadows off, ``local[2]``; prints one JSON line with the
tuples/s over the measured batches (from the end of the last warm-up batch to the end of the last
one).  Settings an older checkout's ``EngineConfig`` lacks are left out, so the same file measures an
earlier engine (copy it into that checkout): run both alternately and compare within one session.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time

ROOT = os.getcwd()
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("algorithm")
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--zipf", type=float, default=1.2)
    ap.add_argument("--per-batch", type=int, default=200_000)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--workers", type=int, default=8)
    args = ap.parse_args(argv)
    if args.warmup < 1 or args.batches < 1:
        ap.error("--warmup and --batches must be >= 1")
    from skewlab.engine.runtimes.spark.engine import EngineConfig, SparkEngine

    tmp = tempfile.mkdtemp(prefix="skewlab-rate-")
    settings = dict(
        source="generator", db=f"sqlite:///{tmp}/m.sqlite", checkpoint=os.path.join(tmp, "ckpt"),
        sink=os.path.join(tmp, "sink"), algorithm=args.algorithm, workers=args.workers, max_workers=args.workers,
        sources=2, interval=0.001, rate=0, max_per_batch=args.per_batch, window=10, workload="zipf",
        workload_params={"keys": args.keys, "z": args.zipf}, shadow=[], max_batches=args.warmup + args.batches,
        master="local[2]",
    )
    known = {f.name for f in dataclasses.fields(EngineConfig)}
    stamps: list[tuple[float, int]] = []

    def after(engine, batch):
        stamps.append((time.perf_counter(), int(engine.snapshot.controller.intervals[-1]["tuples"])))

    SparkEngine(EngineConfig(**{k: v for k, v in settings.items() if k in known}), log=lambda m: None,
                after_batch=after).run()
    start = stamps[args.warmup - 1][0]
    measured = stamps[args.warmup:]
    tuples = sum(n for _, n in measured)
    print(json.dumps({"algorithm": args.algorithm, "tuples_per_second": tuples / (measured[-1][0] - start),
                      "batches": len(measured), "load": os.getloadavg()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
