#!/usr/bin/env python
"""Routing throughput of every streaming grouping (keys/s on one core), ratio vs ``hash``.

Usage::

    python bench/bench_routing.py [--messages M] [--keys K] [--workers N] [--zipf Z]
                                  [--sources S] [--batch B] [--repeat R] [--clock wall|cpu]
                                  [--start both|fingerprints|keys] [--only a,b] [--json PATH|-]

The stream: ``M`` keys drawn from a Zipf distribution with exponent ``Z`` over ``K`` ranks (inverse
CDF over ranks, seeded numpy generator), rank r → key ``str(r)`` → fingerprint through
:class:`skewlab.engine.algorithms.keys.Vocabulary`.  Every grouping in :func:`skewlab.engine.algorithms.registry.names` that is not
rebalancing is measured (``--only a,b`` names some, ``NAME[p=v;q=w]`` with parameters, e.g.
``wchoices[decay=1]`` beside ``wchoices``; a rebalancing one only when named in ``--only``: each instance first applies
one plan computed from the whole stream's statistics, untimed, so that its routing table is used): a
throw-away instance first routes a small warm-up batch (numba JIT
compilation excluded), then for each of ``R`` repeats a fresh instance routes the whole stream in
batches of ``B`` keys, the batches going to the sources in turn; the best repeat is reported
(repeats interleaved, see below).
Only ``route`` calls are timed (wall clock, or ``--clock cpu`` for process CPU time, which is
steadier on a shared machine).  The table also gives the imbalance of the routed stream
(skewlab's headline ``max_w L_w / mean_w L_w − 1``) and the replication (mean number of distinct
workers per key).

Two columns (``--start``): *from fingerprints* times ``route`` on the precomputed uint64 fingerprints
(the routing kernel alone; ``hash`` is then one vectorised ``fp mod n``); *from key strings* times
what the engine's executors do per batch — :func:`skewlab.engine.algorithms.keys.fingerprint_keys` (murmur3 of
the key bytes, numba over the Arrow buffers) and then ``route`` — on a pyarrow string array of the
same stream.

Repeats are interleaved over the groupings: round r times every grouping once (both columns)
before round r + 1 starts, and each grouping reports its best round.  A burst of other work on a
shared machine then slows one round of every grouping alike, instead of all repeats of the one
grouping that happened to run during it.

Issue target: hash >= 10M keys/s; every load-aware grouping >= 0.5x hash.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Any, Callable

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from skewlab.engine.algorithms import registry  # noqa: E402
from skewlab.engine.algorithms.keys import Vocabulary  # noqa: E402
from skewlab.bench.common import write_json  # noqa: E402


def zipf_ranks(messages: int, keys: int, z: float, seed: int) -> np.ndarray:
    """``messages`` ranks in ``[0, keys)`` with P(r) ∝ (r + 1)^-z (inverse CDF, seeded)."""
    weights = np.arange(1, keys + 1, dtype=np.float64) ** -float(z)
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    u = np.random.default_rng(seed).random(messages)
    return np.minimum(np.searchsorted(cdf, u, side="right"), keys - 1).astype(np.int64)


def variant(entry: str) -> tuple[str, dict[str, str]]:
    """``NAME`` or ``NAME[p=v;q=w]`` (an ``--only`` entry) → the grouping's name and its parameters."""
    name, _, rest = entry.partition("[")
    params = dict(kv.split("=", 1) for kv in rest.rstrip("]").split(";") if "=" in kv)
    return name.strip(), params


def measure(name: str, fps: np.ndarray, ranks: np.ndarray, args: argparse.Namespace, *,
            prepare: Callable[[Any], None] | None = None,
            extra: Callable[[Any, np.ndarray], dict] | None = None,
            keys: Any = None) -> dict:
    """Time ``route`` over the stream (see the module docstring) and return one result row.

    ``prepare(g)``, if given, is called (untimed) on every fresh instance — the warm-up one and each
    repeat's — before it routes; ``skewlab.bench.perf`` uses it to apply a plan to rebalancing groupings.
    ``extra(g, workers)``, if given, returns more fields for the row, from the last repeat's instance
    and the workers it routed the stream to.  ``keys`` (a pyarrow string array, the stream's keys as
    they arrive) makes every timed batch start from the key strings: the engine's own executor path
    :func:`skewlab.engine.algorithms.keys.fingerprint_keys` (murmur3 of the key bytes) and then ``route``.
    Without them the row is exactly this script's.
    """
    n, s, b = args.workers, args.sources, args.batch
    label = name
    if keys is not None:
        from skewlab.engine.algorithms.keys import fingerprint_keys

        head = keys.slice(0, min(fps.size, 4096))
        assert np.array_equal(fingerprint_keys(head), fps[: len(head)]), "fingerprint_keys != Vocabulary fingerprints"

        def batch(start: int) -> np.ndarray:
            return fingerprint_keys(keys.slice(start, b))
    else:

        def batch(start: int) -> np.ndarray:
            return fps[start : start + b]

    name, params = variant(name)
    warm = registry.create(name, n, s, seed=args.seed, params=params)
    if prepare is not None:
        prepare(warm)
    for src in range(s):
        warm.router.route(fps[: min(fps.size, 4096)], src)
    best = float("inf")
    outs: list[np.ndarray] = []
    for _ in range(args.repeat):
        g = registry.create(name, n, s, seed=args.seed, params=params)
        if prepare is not None:
            prepare(g)
        outs = []
        src = 0
        clock = time.process_time if args.clock == "cpu" else time.perf_counter
        t0 = clock()
        for start in range(0, fps.size, b):
            outs.append(g.router.route(batch(start), src))
            src = src + 1 if src + 1 < s else 0
        best = min(best, clock() - t0)
    workers = np.concatenate(outs) if outs else np.zeros(0, np.int64)
    loads = np.bincount(workers, minlength=n)
    mean = loads.mean() if loads.size else 0.0
    pairs = np.unique(ranks * n + workers)
    replication = pairs.size / max(np.unique(ranks).size, 1)
    row = {
        "algorithm": label,
        "seconds": best,
        "keys_per_s": fps.size / best if best > 0 else float("inf"),
        "imbalance": float(loads.max() / mean - 1.0) if mean > 0 else 0.0,
        "replication": float(replication),
    }
    if hasattr(g.router, "d_of"):
        row["d"] = [int(g.router.d_of(x)) for x in range(s)]
    if extra is not None:
        row.update(extra(g, workers))
    return row


def measure_rebalancer(name: str, fps: np.ndarray, ranks: np.ndarray, args: Any, **kw: Any) -> dict:
    """:func:`measure` for a rebalancing grouping: before it routes, every instance applies one plan
    from the whole stream's statistics (not timed), so the routing-table lookup is timed; ``kw`` go
    to :func:`measure` (``keys=...`` for the from-key-strings column)."""
    from skewlab.engine.algorithms.grouping import IntervalStats

    n = args.workers
    keys, counts = np.unique(fps, return_counts=True)

    def prepare(g: Any) -> None:
        st = IntervalStats(0, n, keys, counts.astype(float), counts.astype(float), counts, g.router.owner(keys))
        g.observe(st)
        plan = g.plan(st)  # always plan once (even when balanced) so that the table lookup is exercised
        if plan is not None:
            g.apply(plan)

    def extra(g: Any, workers: np.ndarray) -> dict[str, Any]:
        in_range = bool(workers.size == 0 or (workers.min() >= 0 and workers.max() < n))
        return {"table": g.routing_table_size(), "in_range": in_range}

    return measure(name, fps, ranks, args, prepare=prepare, extra=extra, **kw)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=float, default=1e7, help="keys in the stream (default 1e7)")
    ap.add_argument("--keys", type=float, default=1e6, help="distinct keys |K| (default 1e6)")
    ap.add_argument("--workers", type=int, default=50, help="workers n (default 50)")
    ap.add_argument("--zipf", type=float, default=1.0, help="Zipf exponent z (default 1.0)")
    ap.add_argument("--sources", type=int, default=1, help="sources (default 1)")
    ap.add_argument("--batch", type=int, default=100_000, help="keys per route() call (default 1e5)")
    ap.add_argument("--repeat", type=int, default=3, help="timed repeats, best reported (default 3)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--clock", choices=("wall", "cpu"), default="wall",
        help="wall (perf_counter) or cpu (process_time: ignores time descheduled on a busy machine)",
    )
    ap.add_argument(
        "--start", choices=("both", "fingerprints", "keys"), default="both",
        help="what each timed batch starts from: precomputed fingerprints (the routing kernel alone), the key "
             "strings (fingerprinting = murmur3 of the key bytes, as the engine's executors do it, + routing), "
             "or both (default)",
    )
    ap.add_argument("--only", default="",
                    help="comma-separated subset of algorithms, each NAME or NAME[p=v;q=w] (hash always runs); rebalancing ones are measured "
                         "only when named here, each instance after one plan from the stream's statistics")
    ap.add_argument("--json", default="", help="write the results as JSON to this path ('-' = stdout)")
    args = ap.parse_args(argv)
    m, k = int(args.messages), int(args.keys)
    if m < 1 or k < 1 or args.workers < 1 or args.sources < 1 or args.batch < 1 or args.repeat < 1:
        ap.error("messages, keys, workers, sources, batch and repeat must be >= 1")

    names = [x for x in registry.names() if not registry.get(x).rebalancing]
    if args.only:  # refused before the stream is generated (seconds at the defaults)
        wanted = [x.strip() for x in args.only.split(",") if x.strip()]
        unknown = sorted({variant(x)[0] for x in wanted} - set(registry.names()))
        if unknown:
            ap.error(f"unknown algorithm(s) in --only: {', '.join(unknown)}")
        names = ["hash", *[x for x in wanted if x != "hash"]]

    t0 = time.perf_counter()
    ranks = zipf_ranks(m, k, args.zipf, args.seed)
    fps = Vocabulary([str(i) for i in range(k)]).fps[ranks]
    gen_s = time.perf_counter() - t0
    strings = None
    if args.start != "fingerprints":
        import pyarrow as pa

        strings = pa.array(np.array([str(i) for i in range(k)], dtype=object)[ranks], pa.string())
    # Repeats are interleaved (see the module docstring): each round times every grouping once.
    once = argparse.Namespace(**{**vars(args), "repeat": 1})
    best: dict[str, dict] = {}
    for rnd in range(args.repeat):
        print(f"# round {rnd + 1}/{args.repeat}", file=sys.stderr, flush=True)
        for name in names:
            if "error" in best.get(name, {}):
                continue
            try:
                timer = measure_rebalancer if registry.get(variant(name)[0]).rebalancing else measure
                row = timer(name, fps, ranks, once) if args.start != "keys" else {"algorithm": name}
                if strings is not None:
                    from_keys = timer(name, fps, ranks, once, keys=strings)
                    row.update({x: from_keys[x] for x in ("imbalance", "replication", "d") if x in from_keys})
                    row["keys_per_s_from_keys"] = from_keys["keys_per_s"]
                    row["seconds_from_keys"] = from_keys["seconds"]
            except Exception as exc:  # report, go on with the others
                best[name] = {"algorithm": name, "error": f"{type(exc).__name__}: {exc}"}
                continue
            prev = best.setdefault(name, row)
            for secs, rate in (("seconds", "keys_per_s"), ("seconds_from_keys", "keys_per_s_from_keys")):
                if secs in row and row[secs] < prev[secs]:
                    prev[secs], prev[rate] = row[secs], row[rate]
    rows = [best[name] for name in names]
    for field in ("keys_per_s", "keys_per_s_from_keys"):
        base = next((r.get(field) for r in rows if r["algorithm"] == "hash" and "error" not in r), None)
        for r in rows:
            if "error" not in r and base and field in r:
                r[field.replace("keys_per_s", "ratio_vs_hash")] = r[field] / base

    out = sys.stderr if args.json == "-" else sys.stdout
    print(
        f"# {m:,} messages, {k:,} keys, zipf z={args.zipf}, n={args.workers}, sources={args.sources}, "
        f"batch={args.batch}, best of {args.repeat}, {args.clock} clock (stream generated in {gen_s:.1f}s)",
        file=out,
    )
    w = max([12, *(len(r["algorithm"]) for r in rows)])
    print(f"{'':<{w}} {'from fingerprints':>18} {'from key strings':>18}", file=out)
    print(f"{'algorithm':<{w}} {'Mkeys/s':>9} {'vs hash':>8} {'Mkeys/s':>9} {'vs hash':>8} {'imbalance':>10} "
          f"{'repl':>6}  d", file=out)
    nan = float("nan")
    for r in rows:
        if "error" in r:
            print(f"{r['algorithm']:<{w}} ERROR {r['error']}", file=out)
            continue
        print(
            f"{r['algorithm']:<{w}} {r.get('keys_per_s', nan) / 1e6:9.1f} {r.get('ratio_vs_hash', nan):8.2f} "
            f"{r.get('keys_per_s_from_keys', nan) / 1e6:9.1f} {r.get('ratio_vs_hash_from_keys', nan):8.2f} "
            f"{r['imbalance']:10.4f} {r['replication']:6.2f}  {r.get('d', '')}",
            file=out,
        )
    if args.json:
        doc = {
            "config": {
                "messages": m, "keys": k, "workers": args.workers, "zipf": args.zipf,
                "sources": args.sources, "batch": args.batch, "repeat": args.repeat, "seed": args.seed,
                "clock": args.clock, "start": args.start,
            },
            "machine": {"python": platform.python_version(), "processor": platform.processor()},
            "results": rows,
        }
        write_json(args.json, doc, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
