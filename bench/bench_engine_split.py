#!/usr/bin/env python
"""Where a micro-batch's wall time goes in the Spark engine, on the driver's clock, per grouping.

Usage::

    PYTHONPATH=. python bench/bench_engine_split.py [--only hash,dchoices] [--rounds 1] [--master local[2]]
                                                    [--service-us 0] [--operator count] [--per-batch 200000]
                                                    [--batches 4] [--warmup 2] [--keys 100000] [--zipf 1.2]
                                                    [--workers 8]

Runs :class:`skewlab.engine.runtimes.spark.engine.SparkEngine` as ``bench/bench_spark.py`` does
(:func:`bench.bench_spark.run_engine`: generator source, combiner on) once per grouping of ``--only`` and
round (the groupings in alternating order: forward, backward, ...), with timers wrapped around the
driver's per-batch calls (:class:`skewlab.engine.runtimes.spark.batch_driver.BatchDriver`): ``collect``
(the whole Spark job — source scan, shuffle, the workers' handlers, ``toArrow`` of their output — and
the merge stage), of which ``merge`` is the merge stage of a run with split keys (on the driver,
:func:`skewlab.engine.runtimes.spark.share_merge.merge_on_driver`, or as its own Spark job,
:func:`skewlab.engine.runtimes.spark.share_merge.merge_in_spark`; writing the merged results included); ``task_times`` (``_task_seconds``), ``driver_step``
(:func:`skewlab.engine.runtimes.spark.driver_step.step`), ``publish`` (the next batch's routing file),
``save`` (the engine snapshot) and ``metrics`` (the SQLite sink's flush); ``spark_between`` = the wall
time between the end of one ``process_batch`` and the start of the next (Spark's trigger: offsets and
commit logs, planning, the state store's commit); ``batch`` = ``process_batch`` + ``spark_between``.
Prints milliseconds per measured batch, the median over rounds.
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

PARTS = ("collect", "merge", "task_times", "driver_step", "publish", "save", "metrics", "process_batch",
         "spark_between", "batch")


def main(argv: list[str] | None = None) -> int:
    import statistics

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="hash", help="groupings, comma-separated (each run in every round)")
    ap.add_argument("--rounds", type=int, default=1, help="rounds, the groupings in alternating order")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--service-us", type=float, default=0.0, help="emulated service time per tuple (µs)")
    ap.add_argument("--operator", default="count")
    ap.add_argument("--per-batch", type=int, default=200_000)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--zipf", type=float, default=1.2)
    ap.add_argument("--workers", type=int, default=8)
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    if args.rounds < 1 or not names:
        ap.error("--rounds must be >= 1 and --only name a grouping")
    from skewlab.engine.algorithms import registry

    for n in names:
        if bench_spark.variant_of(n)[0] not in registry.names():
            ap.error(f"--only {n!r}: not a registered grouping ({', '.join(registry.names())})")

    from skewlab.engine.io.metrics_sink import MetricsSink
    from skewlab.engine.runtimes.spark import batch_driver as driver_mod
    from skewlab.engine.runtimes.spark import share_merge
    from skewlab.engine.runtimes.spark.batch_driver import BatchDriver
    from skewlab.engine.runtimes.spark.engine import SparkEngine
    from skewlab.engine.runtimes.spark.sources import RouteFiles

    spent: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    current: dict[str, Any] = {"batch": -1, "ended": None}

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
    share_merge.merge_in_spark = timed("merge", share_merge.merge_in_spark)
    share_merge.merge_on_driver = timed("merge", share_merge.merge_on_driver)
    RouteFiles.publish = timed("publish", RouteFiles.publish)  # type: ignore[method-assign]
    MetricsSink.flush = timed("metrics", MetricsSink.flush)

    per_run: dict[str, list[dict[str, float]]] = defaultdict(list)
    rates: dict[str, list[float]] = defaultdict(list)
    load0 = os.getloadavg()[0]
    for rnd in range(args.rounds):
        for name in names if rnd % 2 == 0 else names[::-1]:
            spent.clear()
            current.update(batch=-1, ended=None)
            ns = argparse.Namespace(per_batch=args.per_batch, batches=args.batches, warmup=args.warmup, keys=args.keys,
                                    zipf=args.zipf, workers=args.workers, operator=args.operator, params={},
                                    master=args.master, service_us=args.service_us, round=rnd)
            with tempfile.TemporaryDirectory(prefix="bench-engine-split-") as tmp:
                out = bench_spark.run_engine(name, ns, tmp)
            # the batches the engine processed (the query's last trigger, refused as the engine stops, has no collect)
            measured = sorted(b for b in spent if "collect" in spent[b])[-args.batches:]
            for b in measured:
                spent[b]["batch"] = spent[b]["process_batch"] + spent[b]["spark_between"]
            per_run[name].append({part: 1e3 * sum(spent[b][part] for b in measured) / len(measured) for part in PARTS})
            rates[name].append(out["tuples_per_second"])
            print(f"round {rnd} {name}: {out['tuples_per_second'] / 1e3:.1f} k tuples/s, batches {measured}", flush=True)
    print(f"# operator {args.operator}, {args.per_batch} tuples/batch, {args.keys} keys, zipf {args.zipf}, "
          f"{args.workers} workers, {args.master}, service {args.service_us:g} µs, combiner on; median of "
          f"{args.rounds} rounds; load {load0:.2f} -> {os.getloadavg()[0]:.2f}")
    print(f"{'ms per batch':16s}" + "".join(f"{n:>16s}" for n in names))
    print(f"{'k tuples/s':16s}" + "".join(f"{statistics.median(rates[n]) / 1e3:16.1f}" for n in names))
    for part in PARTS:
        print(f"  {part:14s}" + "".join(f"{statistics.median(r[part] for r in per_run[n]):16.0f}" for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
