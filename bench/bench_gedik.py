"""Plan-construction time of Gedik's scan / redist / readj vs channels N and tracked keys R.

Gedik, VLDB J. 2014, Sec. 4.2 (complexities: scan O(R·N·log N), redist O(R²·N·log N),
readj O(R³·log N)) and Sec. 5.5 (construction time).  Target from the issue: readj for N = 50
with R = 2N + 1 tracked keys in <= 0.5 s (a Scala reimplementation needs 7.9 s).

Instance (deterministic): ``R`` heavy keys carry half of ``M = 10^6`` tuples with Zipf(0.5)
weights, every one above the frequency threshold δ = σθ/N (LCL); 5000 light keys of 100 tuples
each stay below δ and remain on the consistent hash.  Two scenarios:

* ``first`` — owners are the consistent-hash homes (the explicit hash starts empty);
* ``scale-out`` — a plan for N − 1 channels was applied, then the region grows to N.

Times are wall-clock seconds of ``grouping.plan(stats)`` (median of ``--repeat`` runs, after one
warm-up run that also compiles the numba kernels), i.e. the whole construction: δ, tracked set,
greedy kernel, ``make_plan``.  The lossy counter update (``observe``) is timed separately.

Usage: ``python bench/bench_gedik.py [--json] [--n 10 25 50] [--tracked 2n+1 200] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from skewlab.engine.algorithms import registry  # noqa: E402
from skewlab.engine.algorithms.grouping import IntervalStats  # noqa: E402
from skewlab.engine.algorithms.keys import fingerprints  # noqa: E402

ALGOS = ("scan", "redist", "readj")
LIGHT_KEYS, LIGHT_COUNT, HEAVY_TUPLES = 5000, 100, 500_000


def instance(r: int) -> tuple[np.ndarray, np.ndarray]:
    keys = fingerprints([f"heavy{i}" for i in range(r)] + [f"light{i}" for i in range(LIGHT_KEYS)])
    w = 1.0 / np.sqrt(np.arange(1, r + 1))
    heavy = np.floor(HEAVY_TUPLES * w / w.sum()).astype(np.int64)
    counts = np.concatenate([heavy, np.full(LIGHT_KEYS, LIGHT_COUNT, dtype=np.int64)])
    return keys, counts


def stats_for(keys, counts, worker, n) -> IntervalStats:
    return IntervalStats(0, n, keys, counts.astype(float), counts.astype(float), counts, worker)


def time_plan(algo: str, n: int, r: int, scenario: str, repeat: int) -> dict:
    keys, counts = instance(r)
    g = registry.create(algo, n - 1 if scenario == "scale-out" else n, params={"base": "consistent"})  # the paper's H_c
    if scenario == "scale-out":
        st0 = stats_for(keys, counts, g.base(keys), n - 1)
        g.observe(st0)
        g.apply(g.plan(st0))
        owners = g.router.route(keys)
        g.resize(n)
    else:
        owners = g.base(keys)
    st = stats_for(keys, counts, owners, n)
    t0 = time.perf_counter()
    g.observe(st)
    observe_s = time.perf_counter() - t0
    plan = g.plan(st)  # warm-up (and numba compilation on a cold cache)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        plan = g.plan(st)
        times.append(time.perf_counter() - t0)
    ch = np.bincount(st.home if st.home is not None else g.base(keys), weights=counts, minlength=n)
    return {
        "algorithm": algo,
        "scenario": scenario,
        "n": n,
        "tracked": int(plan.extra.get("explicit", 0)),
        "plan_seconds": statistics.median(times),
        "observe_seconds": observe_s,
        "imbalance": plan.imbalance(),
        "consistent_imbalance": float(ch.max() / ch.mean() - 1),
        "b": plan.extra.get("b"),
        "m": plan.extra.get("m"),
        "migration_cost": plan.migration_cost,
        "readj_steps": plan.extra.get("readj_steps"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    ap.add_argument("--n", type=int, nargs="+", default=[10, 25, 50], help="channel counts")
    ap.add_argument("--tracked", nargs="+", default=["2n+1", "200"], help="tracked keys R: numbers or '2n+1'")
    ap.add_argument("--scenario", nargs="+", default=["first", "scale-out"], choices=["first", "scale-out"])
    ap.add_argument("--algorithms", nargs="+", default=list(ALGOS), choices=list(ALGOS))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    rows = []
    for n in args.n:
        for spec in args.tracked:
            r = 2 * n + 1 if spec == "2n+1" else int(spec)
            for scenario in args.scenario:
                for algo in args.algorithms:
                    rows.append(time_plan(algo, n, r, scenario, max(1, args.repeat)))
    if args.json:
        print(json.dumps({"benchmark": "gedik-plan-time", "rows": rows}, indent=2))
    else:
        print(f"{'algo':7} {'scenario':9} {'N':>3} {'R':>4} {'plan s':>9} {'observe s':>9} "
              f"{'imb':>6} {'CH imb':>6} {'b':>6} {'m':>6} {'steps':>5}")
        for x in rows:
            b = "inf" if x["b"] is None or x["b"] == float("inf") else f"{x['b']:.3f}"
            m = "-" if x["m"] is None else f"{x['m']:.2f}"
            print(f"{x['algorithm']:7} {x['scenario']:9} {x['n']:>3} {x['tracked']:>4} {x['plan_seconds']:>9.4f} "
                  f"{x['observe_seconds']:>9.4f} {x['imbalance']:>6.3f} {x['consistent_imbalance']:>6.3f} "
                  f"{b:>6} {m:>6} {x['readj_steps'] if x['readj_steps'] is not None else '-':>5}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
