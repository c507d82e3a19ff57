#!/usr/bin/env python
"""End-to-end Spark throughput: skewlab's engine per grouping vs a Spark-native hash repartition.

Usage::

    python bench/bench_spark.py [--master local[2]] [--batches 6] [--per-batch 2000000]
                                [--workers 8] [--keys 100000] [--zipf 1.0] [--only hash,pkg] [--json PATH|-]

Both sides read the same ``skewlab-generator`` stream (unlimited rate, ``--per-batch`` tuples per
micro-batch, 2 source instances) and run the same keyed operator per worker
(:func:`engine.spark.topology.make_worker`, per-key counts):

* **baseline** — ``df.repartition(n, "key")`` (Spark's own hash partitioning by key) →
  operator → collect, in ``foreachBatch``; run before and after the groupings (a cold JVM slows
  whatever runs first), their mean is the reference of the ratios;
* **skewlab** — :class:`engine.spark.engine.SparkEngine` with the grouping (routing in the executors
  inside each source instance's scan, ``repartitionById``, controller, snapshots and SQLite metrics on
  the driver; shadows off).

Tuples/s = tuples processed / wall time of the measured batches (the first ``--warmup`` batches,
which include Python worker start-up and JIT compilation, are excluded).  Issue targets: >= 500k
tuples/s on local[2] with ``hash``; every grouping >= 0.8x the baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def run_baseline(spark, args, tmp, tag: str = "base") -> dict:
    from engine.spark.topology import AGG_SCHEMA, make_worker

    stamps: list[tuple[float, int]] = []

    def batch(df, batch_id):
        from pyspark.sql import functions as F

        t = df.select("key").repartition(args.workers, "key")
        t = t.select("key", F.spark_partition_id().cast("int").alias("worker"))  # ROUTED_SCHEMA
        out = t.mapInArrow(make_worker(args.workers), AGG_SCHEMA).toArrow()
        stamps.append((time.perf_counter(), int(sum(out.column("count").to_pylist()))))

    df = spark.readStream.format("skewlab-generator").options(**_gen_opts(args)).load()
    q = (df.writeStream.foreachBatch(batch).option("checkpointLocation", os.path.join(tmp, tag))
         .trigger(processingTime="0 seconds").start())
    while len(stamps) < args.batches + args.warmup:
        time.sleep(0.05)
        if not q.isActive:
            raise RuntimeError(str(q.exception()))
    q.stop()
    return _rate(stamps, args.warmup)


def run_engine(name, args, tmp) -> dict:
    from engine.spark.engine import EngineConfig, SparkEngine

    stamps: list[tuple[float, int]] = []
    cfg = EngineConfig(
        source="generator", db=f"sqlite:///{tmp}/{name}.sqlite", checkpoint=os.path.join(tmp, name),
        algorithm=name, workers=args.workers, sources=2, interval=0.001, rate=0, max_per_batch=args.per_batch,
        workload="zipf", workload_params={"keys": args.keys, "z": args.zipf}, shadow=[],
        max_batches=args.batches + args.warmup, master=args.master,
    )
    engine = SparkEngine(cfg, log=lambda m: None,
                         after_batch=lambda e, b: stamps.append((time.perf_counter(), e.controller.intervals[-1]["tuples"])))
    engine.run()
    return _rate(stamps, args.warmup)


def _gen_opts(args) -> dict:
    return {"workload": "zipf", "params": json.dumps({"keys": args.keys, "z": args.zipf}), "seed": "0",
            "partitions": "2", "rate": "0", "max_per_batch": str(args.per_batch)}


def _rate(stamps, warmup) -> dict:
    measured = stamps[warmup:]
    t0 = stamps[warmup - 1][0] if warmup > 0 else measured[0][0]
    tuples = sum(n for _, n in measured)
    seconds = measured[-1][0] - t0
    return {"tuples": tuples, "seconds": seconds, "tuples_per_second": tuples / seconds if seconds > 0 else 0.0}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--master", default="local[2]")
    p.add_argument("--batches", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--per-batch", type=int, default=2_000_000,
                   help="tuples per micro-batch (default: the engine's own default cap, 2M)")
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--keys", type=int, default=100_000)
    p.add_argument("--zipf", type=float, default=1.0)
    p.add_argument("--only", default="")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    from engine import registry
    from engine.spark.session import get_session

    spark = get_session(args.master, "skewlab-bench")
    names = [n for n in args.only.split(",") if n] or registry.names()
    tmp = tempfile.mkdtemp(prefix="skewlab-bench-spark-")
    results = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "master": args.master},
               "args": vars(args), "groupings": {}}
    # The baseline runs first (on a JVM that has not JIT-compiled anything yet) AND last; the
    # ratios use the mean of both, so neither side profits from running on a warmer JVM.
    first = run_baseline(spark, args, tmp)
    print(f"{'baseline (repartition by key)':<30} {first['tuples_per_second'] / 1e3:10.0f} k tuples/s  (first run)", flush=True)
    for name in names:
        results["groupings"][name] = run_engine(name, args, tmp)
        print(f"{name:<30} {results['groupings'][name]['tuples_per_second'] / 1e3:10.0f} k tuples/s", flush=True)
    last = run_baseline(spark, args, tmp, tag="base2")
    print(f"{'baseline (repartition by key)':<30} {last['tuples_per_second'] / 1e3:10.0f} k tuples/s  (last run)", flush=True)
    base = (first["tuples_per_second"] + last["tuples_per_second"]) / 2
    results["baseline"] = {"tuples_per_second": base, "runs": [first, last]}
    print(f"{'baseline mean':<30} {base / 1e3:10.0f} k tuples/s", flush=True)
    for name, r in results["groupings"].items():
        r["ratio_vs_baseline"] = r["tuples_per_second"] / base if base else 0.0
        print(f"{name:<30} {r['tuples_per_second'] / 1e3:10.0f} k tuples/s  {r['ratio_vs_baseline']:.2f}x", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        text = json.dumps(results, indent=2)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as fh:
                fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
