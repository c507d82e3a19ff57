"""Every rebalancer against its own base hash and against plain ``hash`` on every trace and seed: the
cases issues 25 (item 2) and 39 (part 1) count.

A *case* is one rebalancer (llfd, mintable, minmig, mixed, mixed-bf, scan, redist, readj, elb, clb,
uhlb) on one trace of ``skewlab bench trace`` (:data:`skewlab.bench.repro_trace.TRACES`: flights by
dest and by tailnum, movielens by user and by movie, pizza, police stops, zipf, drift) and one seed,
run as a user runs it (10 workers, 2 sources, 5,000-tuple intervals, the trace section's set-up).  It
is *worse* when its per-interval median imbalance is above its base's (the same run with plans off:
its base hash) or its p90 above 1.05 × its base's.  It is *above hash* when its median is above
``HASH_TOLERANCE`` (1.02) × the median of plain ``hash`` (the grouping a user would otherwise keep:
Spark's own hash partitioning) on the same trace and seed (issue 39).  Prints the number of worse
cases and of cases above hash, each of them, and the mean relative gain of the median over the base
(``(base − median) / base``); ``--table`` prints instead the per-rebalancer, per-trace table of
docs/results/traces-vs-hash.md (median, hash's median, the base's median; mean over the seeds).
``--param`` overrides a parameter of every rebalancer (e.g. ``--param gate_min_persistence=0.2``: a
row of docs/results/gate.md's least-persistence table).

Usage: ``python bench/gate_cases.py [--seeds 8] [--param NAME=VALUE ...] [--processes 2] [--json | --table]``
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
    HASH_TOLERANCE, P90_SLACK, SYNTHETIC_MESSAGES, TRACE_INTERVAL, TRACE_WORKERS, TRACES, run_per_interval)
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
    """Run every case (of ``algorithms`` and the ``traces`` labelled so, default all), its base and
    plain ``hash`` on its trace and seed; the worse cases, the cases above hash, the mean relative gain
    and every case's medians (``rows``)."""
    from tqdm import tqdm

    labels = [t[0] for t in TRACES]
    unknown = sorted(set(traces or ()) - set(labels)) + sorted(set(algorithms or ()) - set(rebalancers()))
    if unknown:
        raise ValueError(f"not a trace of the trace bench nor a rebalancer: {', '.join(unknown)}")
    picked = [t for t in range(len(TRACES)) if traces is None or labels[t] in traces]
    cases = [(a, t, s) for a in algorithms or rebalancers() for t in picked for s in range(seeds)]
    hashed = sorted({(t, s) for _, t, s in cases})
    jobs = [(a, t, s, on, params) for a, t, s in cases for on in (True, False)]
    jobs += [("hash", t, s, True, {}) for t, s in hashed]
    with Pool(processes) as pool:
        results = list(tqdm(pool.imap(run_case, jobs, chunksize=4), total=len(jobs), desc="runs",
                            file=sys.stderr))
    hash_median = {ts: results[2 * len(cases) + i][0] for i, ts in enumerate(hashed)}
    worse, above, gains, rows = [], [], [], []
    for i, (a, t, s) in enumerate(cases):
        (median, p90), (base_median, base_p90) = results[2 * i], results[2 * i + 1]
        row = {"algorithm": a, "trace": TRACES[t][0], "seed": s, "median": median, "base_median": base_median,
               "p90": p90, "base_p90": base_p90, "hash_median": hash_median[(t, s)]}
        rows.append(row)
        if median > base_median + 1e-12 or p90 > P90_SLACK * base_p90 + 1e-12:
            worse.append(row)
        if median > HASH_TOLERANCE * row["hash_median"] + 1e-12:
            above.append(row)
        gains.append((base_median - median) / base_median if base_median > 0 else 0.0)
    return {"cases": len(cases), "worse": worse, "above_hash": above, "mean_relative_gain": float(np.mean(gains)),
            "params": params, "rows": rows}


def markdown_table(out: dict) -> str:
    """One row per rebalancer, one column group per trace: median, plain hash's median, the base's
    median (each the mean over the seeds); a median above ``HASH_TOLERANCE`` × hash's is bold."""
    labels = [t[0] for t in TRACES if any(r["trace"] == t[0] for r in out["rows"])]
    algs = [a for a in rebalancers() if any(r["algorithm"] == a for r in out["rows"])]
    cell: dict[tuple[str, str], tuple[float, float, float]] = {}
    for a in algs:
        for label in labels:
            mine = [r for r in out["rows"] if r["algorithm"] == a and r["trace"] == label]
            cell[(a, label)] = tuple(float(np.mean([r[k] for r in mine]))  # type: ignore[assignment]
                                     for k in ("median", "hash_median", "base_median"))
    lines = ["| rebalancer | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for a in algs:
        cells = []
        for label in labels:
            m, h, b = cell[(a, label)]
            text = f"{m:.3f}"
            cells.append((f"**{text}**" if m > HASH_TOLERANCE * h + 1e-12 else text) + f" / {h:.3f} / {b:.3f}")
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=8, help="seeds 0 .. SEEDS-1 (default 8)")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    help="a parameter of every rebalancer (repeatable)")
    ap.add_argument("--processes", type=int, default=2)
    out_form = ap.add_mutually_exclusive_group()
    out_form.add_argument("--json", action="store_true")
    out_form.add_argument("--table", action="store_true",
                          help="print the markdown table of docs/results/traces-vs-hash.md")
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
    if args.table:
        print(markdown_table(out))
        return 0
    print(f"{len(out['worse'])} of {out['cases']} cases worse than their base; "
          f"mean relative gain of the median {out['mean_relative_gain']:.3f}")
    for w in out["worse"]:
        print(f"  {w['algorithm']} seed {w['seed']} on {w['trace']}: median {w['median']:.3f} "
              f"(base {w['base_median']:.3f}), p90 {w['p90']:.3f} (base {w['base_p90']:.3f})")
    print(f"{len(out['above_hash'])} of {out['cases']} cases with a median above {HASH_TOLERANCE} × plain hash's")
    for w in out["above_hash"]:
        print(f"  {w['algorithm']} seed {w['seed']} on {w['trace']}: median {w['median']:.3f} "
              f"(hash {w['hash_median']:.3f}, base {w['base_median']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
