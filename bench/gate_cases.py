"""Every rebalancer against its own base hash on every trace and seed: the cases issue 25 item 2 counts.

A *case* is one rebalancer (llfd, mintable, minmig, mixed, mixed-bf, scan, redist, readj, elb, clb,
uhlb) on one trace of ``skewlab bench trace`` (:data:`skewlab.bench.repro_trace.TRACES`: flights by
dest and by tailnum, movielens by user and by movie, pizza, police stops, zipf, drift) and one seed,
run as a user runs it (10 workers, 2 sources, 5,000-tuple intervals, the trace section's set-up).  It
is *worse* when its per-interval median imbalance is above its base's (the same run with plans off:
hash, or consistent for the Fang family) or its p90 above 1.05 × its base's.  Prints the number of
worse cases, each of them, and the mean relative gain of the median over the base
(``(base − median) / base``).  ``--param`` overrides a parameter of every rebalancer (e.g.
``--param gate_min_persistence=0.2``: a row of docs/results/gate.md's least-persistence table).

Usage: ``python bench/gate_cases.py [--seeds 8] [--param NAME=VALUE ...] [--processes 2] [--json]``
(704 cases with 8 seeds: about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import sys
from multiprocessing import Pool
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from skewlab.bench.repro_trace import (  # noqa: E402
    P90_SLACK, SYNTHETIC_MESSAGES, TRACE_INTERVAL, TRACE_WORKERS, TRACES, run_per_interval)
from skewlab.engine.algorithms import registry  # noqa: E402
from skewlab.engine.cli.simulate import SimulationConfig  # noqa: E402
from skewlab.engine.config.params import ParamError, parse_assignments  # noqa: E402


def rebalancers() -> list[str]:
    return [a for a in registry.names() if registry.get(a).rebalancing]


def run_case(job: tuple[str, int, int, bool, dict[str, str]]) -> tuple[float, float]:
    """Median and p90 of the per-interval imbalance of one run (``job``: algorithm, trace index,
    seed, plans on, parameters)."""
    algorithm, trace, seed, plans_on, params = job
    _, workload, wparams, synthetic = TRACES[trace]
    cfg = SimulationConfig(algorithm=algorithm, workers=TRACE_WORKERS, sources=2, workload=workload,
                           workload_params=dict(wparams), messages=SYNTHETIC_MESSAGES if synthetic else None,
                           interval_messages=TRACE_INTERVAL, seed=seed, params=dict(params))
    r = run_per_interval(cfg, plans_on)
    return r["median"], r["p90"]


def count_cases(seeds: int, params: dict[str, str], processes: int, algorithms: list[str] | None = None,
                traces: list[str] | None = None) -> dict:
    """Run every case (of ``algorithms`` and the ``traces`` labelled so, default all) and its base;
    the worse cases and the mean relative gain."""
    from tqdm import tqdm

    labels = [t[0] for t in TRACES]
    unknown = sorted(set(traces or ()) - set(labels)) + sorted(set(algorithms or ()) - set(rebalancers()))
    if unknown:
        raise ValueError(f"not a trace of the trace bench nor a rebalancer: {', '.join(unknown)}")
    picked = [t for t in range(len(TRACES)) if traces is None or labels[t] in traces]
    cases = [(a, t, s) for a in algorithms or rebalancers() for t in picked for s in range(seeds)]
    jobs = [(a, t, s, on, params) for a, t, s in cases for on in (True, False)]
    with Pool(processes) as pool:
        results = list(tqdm(pool.imap(run_case, jobs, chunksize=4), total=len(jobs), desc="runs",
                            file=sys.stderr))
    worse, gains = [], []
    for i, (a, t, s) in enumerate(cases):
        (median, p90), (base_median, base_p90) = results[2 * i], results[2 * i + 1]
        if median > base_median + 1e-12 or p90 > P90_SLACK * base_p90 + 1e-12:
            worse.append({"algorithm": a, "trace": TRACES[t][0], "seed": s, "median": median,
                          "base_median": base_median, "p90": p90, "base_p90": base_p90})
        gains.append((base_median - median) / base_median if base_median > 0 else 0.0)
    return {"cases": len(cases), "worse": worse, "mean_relative_gain": float(np.mean(gains)), "params": params}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=8, help="seeds 0 .. SEEDS-1 (default 8)")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    help="a parameter of every rebalancer (repeatable)")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.processes < 1:
        print("gate_cases: --seeds and --processes must be at least 1", file=sys.stderr)
        return 2
    try:
        params = parse_assignments(args.param)
        for a in rebalancers():
            registry.validate_params(a, params)
    except ParamError as exc:
        print(f"gate_cases: {exc}", file=sys.stderr)
        return 2
    out = count_cases(args.seeds, params, args.processes)
    if args.json:
        json.dump(out, sys.stdout, indent=1)
        print()
        return 0
    print(f"{len(out['worse'])} of {out['cases']} cases worse than their base; "
          f"mean relative gain of the median {out['mean_relative_gain']:.3f}")
    for w in out["worse"]:
        print(f"  {w['algorithm']} seed {w['seed']} on {w['trace']}: median {w['median']:.3f} "
              f"(base {w['base_median']:.3f}), p90 {w['p90']:.3f} (base {w['base_p90']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
