#!/usr/bin/env python
"""Plan-generation time of the rebalancing groupings vs key count K and worker count N_D.

Every grouping registered with ``rebalancing = True`` is measured the same way (Fang et al. HPDC
2017 Sec. V, Fig. 10/11: "average generation time" of a migration plan):

1. Costs c(k) of K keys follow a finite Zipf law (exponent ``--zipf``, Table II default 0.85):
   ``--avg``·K tuples drawn multinomially over ranks, ranks shuffled over the keys; state size
   S(k, w) = c(k) (window w = 1).  Keys are synthetic 64-bit fingerprints.
2. Interval 1: every key at its grouping's own routing (``owner``), the grouping ``observe``s the
   statistics and makes a first plan (from pure hashing: the largest plan), which is applied.
3. Interval 2: the costs of ``--fluctuation``·K random keys are permuted among themselves (Fang's
   fluctuation), keys at their current owner; the plan for this interval is timed ``--repeat``
   times (median reported as ``plan_seconds``; the first plan's time is ``first_plan_seconds``).

Parameters are the algorithms' defaults except ``theta_max`` (``--theta``) where declared.  With
``--exact``, algorithms that declare ``compact_threshold`` are also run with the compact
representation switched off (rows named ``<name>/exact``).  Algorithms not registered (other
engineers' work in progress) are skipped; a failing algorithm is reported, not fatal.  Once an
algorithm's plan takes longer than ``--budget`` seconds, larger K for that algorithm are skipped.

Usage: ``python bench/bench_plan.py [--keys 1e4,1e5,1e6] [--workers 10,20,40,80] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from skewlab.engine.algorithms import registry  # noqa: E402
from skewlab.engine.algorithms.grouping import IntervalStats  # noqa: E402
from skewlab.engine.algorithms.keys import mix64  # noqa: E402


def zipf_costs(K: int, z: float, avg: float, rng: np.random.Generator) -> np.ndarray:
    p = np.arange(1, K + 1, dtype=np.float64) ** -float(z)
    p /= p.sum()
    c = rng.multinomial(int(avg * K), p).astype(np.float64)
    rng.shuffle(c)
    return c


def fluctuate(cost: np.ndarray, f: float, rng: np.random.Generator) -> np.ndarray:
    out = cost.copy()
    idx = rng.choice(cost.size, size=int(f * cost.size), replace=False)
    out[idx] = out[rng.permutation(idx)]
    return out


def imbalance(loads: np.ndarray) -> float:
    m = float(loads.mean()) if loads.size else 0.0
    return float(loads.max() / m - 1.0) if m > 0 else 0.0


def measure(name: str, params: dict, K: int, n: int, cost1: np.ndarray, cost2: np.ndarray, keys, repeat: int,
            seed: int = 0) -> dict:
    """Plan time and plan quality of grouping ``name`` (seeded with ``seed``) on the two intervals above."""
    g = registry.create(name, n, seed=seed, params=params)
    s1 = IntervalStats(0, n, keys, cost1, cost1, cost1.astype(np.int64), g.router.owner(keys))
    g.observe(s1)
    t = time.perf_counter()
    p1 = g.plan(s1)
    first = time.perf_counter() - t
    if p1 is not None:
        g.apply(p1)
    s2 = IntervalStats(1, n, keys, cost2, cost2, cost2.astype(np.int64), g.router.owner(keys))
    g.observe(s2)
    times = []
    plan = None
    for _ in range(max(1, repeat)):
        t = time.perf_counter()
        plan = g.plan(s2)
        times.append(time.perf_counter() - t)
    row: dict[str, Any] = {
        "keys": K,
        "workers": n,
        "plan_seconds": statistics.median(times),
        "first_plan_seconds": first,
        "imbalance_before": imbalance(s2.loads()),
    }
    if plan is not None:
        row.update(
            feasible=bool(plan.feasible),
            imbalance_after=plan.imbalance(),
            migration_cost=plan.migration_cost,
            table_size=plan.routing_table_size,
            compact=bool(plan.extra.get("compact", False)),
            load_error=plan.extra.get("load_error"),
            records=plan.extra.get("records"),
        )
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", default="1e4,1e5,1e6", help="comma-separated key counts K")
    ap.add_argument("--workers", default="10,20,40,80", help="comma-separated worker counts N_D")
    ap.add_argument("--algorithms", default="", help="comma-separated names (default: every rebalancing grouping)")
    ap.add_argument("--theta", type=float, default=0.08, help="theta_max where declared (default 0.08)")
    ap.add_argument("--zipf", type=float, default=0.85, help="Zipf exponent z (default 0.85)")
    ap.add_argument("--avg", type=float, default=10.0, help="tuples per key in an interval (default 10)")
    ap.add_argument("--fluctuation", type=float, default=0.1, help="fraction of keys whose costs are permuted")
    ap.add_argument("--repeat", type=int, default=3, help="timed plans per configuration (median)")
    ap.add_argument("--budget", type=float, default=5.0, help="skip larger K once a plan takes longer (s)")
    ap.add_argument("--exact", action="store_true", help="also run compact-capable algorithms without it")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    args = ap.parse_args(argv)

    Ks = [int(float(x)) for x in args.keys.split(",") if x.strip()]
    Ns = [int(x) for x in args.workers.split(",") if x.strip()]
    available = [n for n in registry.names() if registry.get(n).rebalancing]
    wanted = [a.strip() for a in args.algorithms.split(",") if a.strip()] or available
    skipped = [a for a in wanted if a not in available]
    algos = [a for a in wanted if a in available]

    variants: list[tuple[str, str, dict]] = []
    for name in algos:
        declared = {p.name for p in registry.get(name).params}
        params = {"theta_max": args.theta} if "theta_max" in declared else {}
        variants.append((name, name, params))
        if args.exact and "compact_threshold" in declared:
            variants.append((f"{name}/exact", name, {**params, "compact_threshold": 10**12}))

    rows: list[dict] = []
    too_slow: set[str] = set()
    for K in sorted(Ks):
        rng = np.random.default_rng(args.seed)
        keys = mix64(np.arange(K, dtype=np.uint64) + np.uint64(args.seed) * np.uint64(K))
        cost1 = zipf_costs(K, args.zipf, args.avg, rng)
        cost2 = fluctuate(cost1, args.fluctuation, rng)
        for n in Ns:
            for label, name, params in variants:
                if label in too_slow:
                    rows.append({"algorithm": label, "keys": K, "workers": n, "skipped": "over budget at smaller K"})
                    continue
                try:
                    row = measure(name, params, K, n, cost1, cost2, keys, args.repeat)
                except Exception as exc:  # report, keep measuring the others
                    row = {"keys": K, "workers": n, "error": f"{type(exc).__name__}: {exc}"}
                row = {"algorithm": label, **row}
                rows.append(row)
                if row.get("plan_seconds", 0.0) > args.budget:
                    too_slow.add(label)
                if not args.json:
                    print(_fmt(row), flush=True)
    if args.json:
        print(json.dumps({"skipped_unregistered": skipped, "rows": rows}, indent=1))
    elif skipped:
        print(f"skipped (not registered): {', '.join(skipped)}")
    return 0


def _fmt(row: dict) -> str:
    head = f"{row['algorithm']:<16} K={row['keys']:>8} N={row['workers']:>3}"
    if "error" in row or "skipped" in row:
        return f"{head}  {row.get('error') or row.get('skipped')}"
    extra = ""
    if "table_size" in row:
        extra = (
            f" feasible={str(row['feasible']):5} imb {row['imbalance_before']:.3f}->{row['imbalance_after']:.3f}"
            f" mig={row['migration_cost']:.4f} table={row['table_size']:>6}"
            + (f" compact records={row['records']} err={row['load_error']:.1e}" if row.get("compact") else "")
        )
    return f"{head}  plan {row['plan_seconds']:.4f}s (first {row['first_plan_seconds']:.4f}s){extra}"


if __name__ == "__main__":
    raise SystemExit(main())
