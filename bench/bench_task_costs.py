#!/usr/bin/env python
"""Where a worker's task time goes in the Spark engine, per grouping and micro-batch size.

Usage::

    python bench/bench_task_costs.py [--groupings hash,dchoices] [--per-batch 8000,200000,1000000]
                                     [--batches 3] [--warmup 1] [--workers 8] [--keys 100000] [--zipf 1.2]
                                     [--json PATH]

For every (batch size, grouping) a fresh :class:`skewlab.engine.runtimes.spark.engine.SparkEngine` runs the ``count``
operator on the ``skewlab-generator`` stream (Zipf, seed 0, 2 sources, unlimited rate) on
``local[2]`` with ``--workers`` workers and as many state partitions.  Over the measured batches it
reports, from the engine's worker rows (``worker_metrics``: tuples and Spark's ``executorRunTime``
of each worker's task), the tuples max / mean over workers and the busiest task's seconds; and from
Spark's SQL metrics of the stateful operator (``FlatMapGroupsInPandasWithState``, read from the SQL
status store through the JVM) the per-task median of: *start* (getting a Python worker), *init*
(initialising it), *run* (the Python worker's whole round trip: data in, function, data out),
*exec* (the operator function itself), *load* / *commit* (the RocksDB state store).

The point: a task costs ``F + v · tuples``.  ``F`` (the task at the smallest batch) is Spark's
per-task work — the Python worker hand-off and the state store — and does not depend on the
grouping; only ``v · tuples`` does.  A grouping that evens the tuples (D-Choices: max / mean ≈ 1
against ≈ 2.2 for ``hash`` at Zipf 1.2) shortens the slowest task by at most
``(F + v·T̄) / (F + 2.2·v·T̄)``, which reaches 0.5 only when ``F ≤ 0.2 · v · T̄`` (``T̄``: mean tuples
per worker).  Results in ``docs/results/engine.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

#: Spark's SQL metric names of the stateful operator -> short column names
METRICS = {
    "time to start Python workers": "start",
    "time to initialize Python workers": "init",
    "time to run Python workers": "run",
    "time to execute Python code": "exec",
    "RocksDB: load - time taken to load the store": "load",
    "time to commit changes": "commit",
}
_UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_TIME = r"([\d.,]+) (ms|s|m|min|h)"


def parse_timing(text: str) -> dict[str, float] | None:
    """``"total (min, med, max ...)\\n503 ms (35 ms, 59 ms, 110 ms (stage 1.0: task 3))"`` → seconds
    ``{"total", "min", "med", "max"}`` (Spark's rendering of a timing SQL metric), or ``None``."""
    m = re.search(_TIME + r" \(" + _TIME + ", " + _TIME + ", " + _TIME, text)
    if not m:
        return None
    g = m.groups()
    vals = [float(g[i].replace(",", "")) * _UNITS[g[i + 1]] for i in range(0, 8, 2)]
    return dict(zip(("total", "min", "med", "max"), vals))


def operator_metrics(spark: Any, since_execution: int) -> list[dict[str, dict[str, float]]]:
    """Per SQL execution after ``since_execution`` that ran the stateful operator: its timing metrics
    (short name → total/min/med/max seconds)."""
    sql = spark._jsparkSession.sharedState().statusStore()
    execs = sql.executionsList()
    out = []
    for i in range(execs.size()):
        eid = int(execs.apply(i).executionId())
        if eid <= since_execution:
            continue
        values = sql.executionMetrics(eid)
        nodes = sql.planGraph(eid).allNodes()
        for q in range(nodes.size()):
            node = nodes.apply(q)
            if "WithState" not in node.name():
                continue
            row: dict[str, dict[str, float]] = {}
            ms = node.metrics()
            for k in range(ms.size()):
                m = ms.apply(k)
                short = METRICS.get(str(m.name()))
                v = values.get(m.accumulatorId())
                if short and v.isDefined():
                    t = parse_timing(str(v.get()))
                    if t:
                        row[short] = t
            if row:
                out.append({"execution": eid, **row})
    return out


def last_execution(spark: Any) -> int:
    execs = spark._jsparkSession.sharedState().statusStore().executionsList()
    return max((int(execs.apply(i).executionId()) for i in range(execs.size())), default=-1)


def run_one(spark: Any, name: str, per_batch: int, args: argparse.Namespace, tmp: str) -> dict[str, Any]:
    from skewlab.engine.runtimes.spark.engine import EngineConfig, SparkEngine
    from skewlab.storage import connect

    tag = f"{name}-{per_batch}"
    cfg = EngineConfig(
        source="generator", db=f"sqlite:///{tmp}/{tag}.sqlite", checkpoint=os.path.join(tmp, tag),
        sink=os.path.join(tmp, tag + "-sink"), algorithm=name, workers=args.workers, max_workers=args.workers,
        sources=2, interval=0.001, rate=0, max_per_batch=per_batch, window=10, workload="zipf",
        workload_params={"keys": args.keys, "z": args.zipf}, shadow=[], max_batches=args.warmup + args.batches,
        master="local[2]")
    before = last_execution(spark)
    engine = SparkEngine(cfg, log=lambda m: None)
    engine.run()
    time.sleep(0.5)  # the SQL listener records the last execution's metrics asynchronously
    store = connect(cfg.db)
    try:
        rows = store.worker_metrics(engine.snapshot.run_id)
    finally:
        store.close()
    batches = sorted({int(r["batch_id"]) for r in rows})[args.warmup:]
    per: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        if int(r["batch_id"]) in batches:
            per.setdefault(int(r["batch_id"]), []).append(r)
    spread, busiest, mean_task = [], [], []
    for b, ws in per.items():
        tuples = [int(w["tuples"] or 0) for w in ws] + [0] * (args.workers - len(ws))
        secs = [float(w["processing_seconds"] or 0.0) for w in ws]
        spread.append(max(tuples) / (sum(tuples) / len(tuples)) if sum(tuples) else 1.0)
        busiest.append(max(secs) if secs else 0.0)
        mean_task.append(sum(secs) / args.workers)
    ops = operator_metrics(spark, before)[args.warmup:]
    med = {short: statistics.median(o[short]["med"] for o in ops if short in o) for short in METRICS.values()
           if any(short in o for o in ops)}
    return {"grouping": name, "per_batch": per_batch, "batches": len(per),
            "tuples_max_over_mean": statistics.mean(spread) if spread else None,
            "busiest_task_s": statistics.mean(busiest) if busiest else None,
            "mean_task_s": statistics.mean(mean_task) if mean_task else None,
            "median_per_task_s": med}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--groupings", default="hash,dchoices")
    p.add_argument("--per-batch", default="8000,200000,1000000", help="micro-batch sizes, comma-separated")
    p.add_argument("--batches", type=int, default=3, help="measured micro-batches per run")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--keys", type=int, default=100_000)
    p.add_argument("--zipf", type=float, default=1.2)
    p.add_argument("--json", default=None, help="write the results as JSON to PATH")
    args = p.parse_args(argv)
    try:
        sizes = [int(x) for x in args.per_batch.split(",") if x]
    except ValueError:
        p.error(f"--per-batch: expected comma-separated integers, got {args.per_batch!r}")
    if not sizes or min(sizes) < 2 or any(s % 2 for s in sizes):
        p.error("--per-batch: every size must be an even number >= 2 (2 source instances)")
    if args.batches < 1 or args.warmup < 1:
        p.error("--batches and --warmup must be >= 1")
    from skewlab.engine.algorithms import registry
    from skewlab.engine.runtimes.spark.session import get_session

    names = [n for n in args.groupings.split(",") if n]
    for n in names:
        registry.get(n)
    spark = get_session("local[2]", "skewlab-bench-task-costs")
    tmp = tempfile.mkdtemp(prefix="skewlab-bench-task-costs-")
    results: list[dict[str, Any]] = []
    cols = list(METRICS.values())
    print(f"{'grouping':<10} {'tuples/batch':>12} {'tuples max/mean':>15} {'busiest task s':>14} {'mean task s':>11}  "
          + " ".join(f"{c:>6}" for c in cols) + "   (per-task medians, s)", flush=True)
    try:
        for size in sizes:
            for name in names:
                r = run_one(spark, name, size, args, tmp)
                r["load"] = [round(x, 2) for x in os.getloadavg()]
                results.append(r)
                m = r["median_per_task_s"]
                print(f"{name:<10} {size:>12,} {r['tuples_max_over_mean']:>15.2f} {r['busiest_task_s']:>14.3f} "
                      f"{r['mean_task_s']:>11.3f}  " + " ".join(f"{m.get(c, float('nan')):>6.3f}" for c in cols)
                      + f"   load {r['load'][0]}", flush=True)
                if args.json:
                    with open(args.json, "w") as fh:
                        json.dump({"args": vars(args), "results": results}, fh, indent=2)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    by = {(r["grouping"], r["per_batch"]): r for r in results}
    if "hash" in names and "dchoices" in names:
        for size in sizes:
            h, d = by[("hash", size)], by[("dchoices", size)]
            if h["busiest_task_s"]:
                print(f"{size:>12,} tuples/batch: busiest task dchoices / hash = {d['busiest_task_s'] / h['busiest_task_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
