#!/usr/bin/env python
"""What the room for ``set-workers`` costs: the same engine run with one state partition per worker and
with ``--max-workers`` state partitions, side by side.

Usage::

    PYTHONPATH=. python bench/bench_state_partitions.py [--workers 8] [--max-workers 16] [--rounds 2]
        [--per-batch 100000] [--keys 100000] [--zipf 1.2] [--warmup 4] [--batches 4] [--grouping hash]
        [--operator count] [--master local[2]] [--json PATH|-]

``skewlab engine`` fixes its state partitions P for a checkpoint's life (``--max-workers``, default
``2 × --workers``): a run can grow to P workers.  Every state partition is a task of every micro-batch's
stateful stage, whether a worker uses it or not, and a task of ``applyInPandasWithState`` gets and
releases a Python worker even without rows (``bench/bench_task_costs.py``'s *start* column).  This bench
runs :func:`bench.bench_spark.run_engine` (generator source, Zipf, ``--grouping`` + ``--operator``,
window 10, combiner on) with P = ``--workers`` and with P = ``--max-workers``, alternating the order in
every round (P = workers first in even rounds), each run in the same Spark session after one unmeasured
run, and reports each P's median tuples/s and the median, min and max over rounds of the ratio
(P = workers) / (P = max-workers).  Results and their load in docs/results/engine.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from skewlab.bench import bench_spark  # noqa: E402


def ratio_summary(runs: list[dict[str, Any]], workers: int, max_workers: int) -> dict[str, Any]:
    """Over rounds of ``runs`` (``{"round", "partitions", "tuples_per_second"}``, in round order): each P's
    median tuples/s and the median, min, max of the per-round ratio (P = ``workers``) / (P = ``max_workers``)
    (:func:`bench.bench_spark.round_summary`, with P = ``max_workers`` as the reference)."""
    rounds: dict[int, list[dict[str, Any]]] = {}
    for r in sorted(runs, key=lambda r: int(r["round"])):
        rounds.setdefault(int(r["partitions"]), []).append(r)
    summary = bench_spark.round_summary(rounds, reference=max_workers)  # type: ignore[arg-type]
    out: dict[str, Any] = {"tps_median": {P: summary[P]["tps_median"] for P in (workers, max_workers) if P in summary},
                           "rounds": 0}
    if workers in summary and "speedup" in summary[workers]:
        out["ratio"] = summary[workers]["speedup"]
        out["rounds"] = len(rounds[workers])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--max-workers", type=int, default=None, help="state partitions of the other runs (default 2 x --workers)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--per-batch", type=int, default=100_000)
    p.add_argument("--keys", type=int, default=100_000)
    p.add_argument("--zipf", type=float, default=1.2)
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--grouping", default="hash")
    p.add_argument("--operator", default="count")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--json", default=None, help="write the results as JSON to PATH ('-': stdout)")
    args = p.parse_args(argv)
    max_workers = args.max_workers if args.max_workers is not None else 2 * args.workers
    if args.workers < 1 or max_workers <= args.workers:
        p.error(f"--max-workers must be > --workers ({args.workers}), got {max_workers}")
    if min(args.rounds, args.warmup, args.batches, args.per_batch) < 1:
        p.error("--rounds, --warmup, --batches and --per-batch must be >= 1")
    from skewlab.engine.algorithms import registry
    from skewlab.engine.config.params import ParamError

    try:
        registry.get(args.grouping)
    except ParamError as exc:
        p.error(str(exc))

    def ns(partitions: int, rnd: int) -> argparse.Namespace:
        return argparse.Namespace(per_batch=args.per_batch, batches=args.batches, warmup=args.warmup, keys=args.keys,
                                  zipf=args.zipf, workers=args.workers, max_workers=partitions, operator=args.operator,
                                  master=args.master, params={}, round=f"{rnd}-p{partitions}")  # its own checkpoint

    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="skewlab-bench-partitions-") as tmp:
        bench_spark.run_engine(args.grouping, ns(args.workers, -1), tmp)  # unmeasured: a warm session
        for rnd in range(args.rounds):
            order = (args.workers, max_workers) if rnd % 2 == 0 else (max_workers, args.workers)
            for P in order:
                load0 = os.getloadavg()[0]
                out = bench_spark.run_engine(args.grouping, ns(P, rnd), tmp)
                row = {"round": rnd, "partitions": P, "tuples_per_second": out["tuples_per_second"],
                       "load": [round(load0, 2), round(os.getloadavg()[0], 2)]}
                runs.append(row)
                print(f"round {rnd}: {P:>3} state partitions ({args.workers} workers): "
                      f"{out['tuples_per_second'] / 1e3:6.1f} k tuples/s   load {row['load'][0]} -> {row['load'][1]}",
                      flush=True)
    summary = ratio_summary(runs, args.workers, max_workers)
    if "ratio" in summary:
        med, lo, hi = summary["ratio"]
        print(f"{args.grouping} + {args.operator}, {args.workers} workers: tuples/s at {args.workers} state partitions / "
              f"at {max_workers}: median {med:.2f} [{lo:.2f}-{hi:.2f}] over {summary['rounds']} round(s)")
    if args.json:
        text = json.dumps({"args": vars(args), "runs": runs, "summary": summary}, indent=2)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as fh:
                fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
