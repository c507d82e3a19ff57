#!/usr/bin/env python
"""Where a micro-batch's wall time goes in the Spark engine, on the driver's clock.

Usage::

    PYTHONPATH=. python bench/bench_engine_split.py [--operator count] [--per-batch 200000] [--batches 4]
                                                    [--warmup 2] [--keys 100000] [--zipf 1.2] [--workers 8]

Runs :class:`skewlab.engine.runtimes.spark.engine.SparkEngine` as ``bench/bench_spark.py`` does
(:func:`bench.bench_spark.run_engine`: generator source, grouping ``hash``, ``local[2]``, combiner
on) with timers wrapped around the driver's per-batch calls
(:class:`skewlab.engine.runtimes.spark.batch_driver.BatchDriver`): ``collect`` (the whole
Spark job — source scan, shuffle, the workers' handlers, ``toArrow`` of their output), ``task_times``
(``_task_seconds``), ``driver_step`` (:func:`skewlab.engine.runtimes.spark.driver_step.step`),
``publish`` (the next batch's routing file), ``save`` (the engine snapshot) and ``metrics``
(the SQLite sink's flush), and ``spark_between`` = the wall time between the end of one
``process_batch`` and the start of the next (Spark's trigger: offsets and commit logs, planning,
the state store's commit).  Prints milliseconds per measured batch.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from typing import Any, Callable

from skewlab.bench import bench_spark  # noqa: E402

PARTS = ("collect", "task_times", "driver_step", "publish", "save", "metrics", "process_batch", "spark_between")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--operator", default="count")
    ap.add_argument("--per-batch", type=int, default=200_000)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--zipf", type=float, default=1.2)
    ap.add_argument("--workers", type=int, default=8)
    args = ap.parse_args(argv)

    from skewlab.engine.io.metrics_sink import MetricsSink
    from skewlab.engine.runtimes.spark import batch_driver as driver_mod
    from skewlab.engine.runtimes.spark.batch_driver import BatchDriver
    from skewlab.engine.runtimes.spark.engine import SparkEngine
    from skewlab.engine.runtimes.spark.sources import RouteFiles

    spent: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    current = {"batch": -1, "ended": None}

    def timed(part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent[current["batch"]][part] += time.perf_counter() - t0
        return wrapper

    process = SparkEngine.process_batch

    def process_batch(self: Any, df: Any, batch_id: int) -> None:
        t0 = time.perf_counter()
        if current["ended"] is not None:
            spent[batch_id]["spark_between"] += t0 - current["ended"]
        current["batch"] = batch_id
        try:
            process(self, df, batch_id)
        finally:
            current["ended"] = time.perf_counter()
            spent[batch_id]["process_batch"] += current["ended"] - t0

    SparkEngine.process_batch = process_batch  # type: ignore[method-assign]
    BatchDriver.collect = timed("collect", BatchDriver.collect)  # type: ignore[method-assign]
    BatchDriver._task_seconds = timed("task_times", BatchDriver._task_seconds)  # type: ignore[method-assign]
    BatchDriver.save = timed("save", BatchDriver.save)  # type: ignore[method-assign]
    driver_mod.step = timed("driver_step", driver_mod.step)
    RouteFiles.publish = timed("publish", RouteFiles.publish)  # type: ignore[method-assign]
    MetricsSink.flush = timed("metrics", MetricsSink.flush)

    ns = argparse.Namespace(per_batch=args.per_batch, batches=args.batches, warmup=args.warmup, keys=args.keys,
                            zipf=args.zipf, workers=args.workers, operator=args.operator, params={})
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-engine-split-") as tmp:
        out = bench_spark.run_engine("hash", ns, tmp)
    # the batches the engine processed (the query's last trigger, refused as the engine stops, has no collect)
    measured = sorted(b for b in spent if "collect" in spent[b])[-args.batches:]
    n = len(measured)
    print(f"# operator {args.operator}, {args.per_batch} tuples/batch, {args.keys} keys, zipf {args.zipf}, "
          f"{args.workers} workers, hash, combiner on; batches {measured}; load {load0:.2f} -> {os.getloadavg()[0]:.2f}")
    print(f"engine rate {out['tuples_per_second'] / 1e3:.0f} k tuples/s")
    for part in PARTS:
        print(f"  {part:14s} {1e3 * sum(spent[b][part] for b in measured) / n:8.0f} ms/batch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
