#!/usr/bin/env python
"""End-to-end Spark throughput: skewlab's engine per grouping vs a Spark-native hash repartition.

Usage::

    python bench/bench_spark.py [--master local[2]] [--batches 8] [--per-batch 1000000]
                                [--workers 8] [--keys 100000] [--zipf 1.0] [--only hash,pkg] [--json PATH|-]

Both sides read the same ``skewlab-generator`` stream (unlimited rate, ``--per-batch`` tuples per
micro-batch, 2 source instances) and run the same keyed operator per worker
(:func:`engine.spark.topology.make_worker`, per-key counts):

* **baseline** — ``df.repartition(n, "key")`` (Spark's own hash partitioning by key) →
  operator → collect, in ``foreachBatch``;
* **skewlab** — :class:`engine.spark.engine.SparkEngine` with the grouping (routing in the executors,
  ``repartitionById``, controller, snapshots and SQLite metrics on the driver; shadows off).

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


def run_baseline(spark, args, tmp) -> dict:
    from engine.spark.topology import AGG_SCHEMA, make_worker

    stamps: list[tuple[float, int]] = []

    def batch(df, batch_id):
        t = df.select("key").withColumnRenamed("key", "key").repartition(args.workers, "key")
        from pyspark.sql import functions as F

        t = t.withColumn("worker", F.spark_partition_id()).withColumn("source", F.lit(0)) \
             .withColumn("state", F.lit(None).cast("binary")).select("key", "worker", "source", "state")
        out = t.mapInArrow(make_worker(), AGG_SCHEMA).toArrow()
        stamps.append((time.perf_counter(), int(sum(out.column("count").to_pylist()))))

    df = spark.readStream.format("skewlab-generator").options(**_gen_opts(args)).load()
    q = (df.writeStream.foreachBatch(batch).option("checkpointLocation", os.path.join(tmp, "base"))
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
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--per-batch", type=int, default=1_000_000)
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
               "args": vars(args), "baseline": run_baseline(spark, args, tmp), "groupings": {}}
    base = results["baseline"]["tuples_per_second"]
    print(f"{'baseline (repartition by key)':<30} {base / 1e3:10.0f} k tuples/s", flush=True)
    for name in names:
        r = run_engine(name, args, tmp)
        r["ratio_vs_baseline"] = r["tuples_per_second"] / base if base else 0.0
        results["groupings"][name] = r
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
