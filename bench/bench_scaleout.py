#!/usr/bin/env python
"""Throughput against the number of workers on the engine (Nasir et al., ICDE 2016, Fig. 13, on Spark).

Usage::

    PYTHONPATH=. python bench/bench_scaleout.py [--workers 2,4,8,16] [--only hash,pkg,dchoices,wchoices,mixed]
        [--service-us 100] [--per-batch 100000] [--keys 100000] [--zipf 1.2] [--warmup 1] [--batches 3]
        [--figure PATH] [--json PATH]

For every worker count N it runs ``bench/bench_spark.py --master local[N] --workers N`` (its own JVM: the
master differs) with the groupings of ``--only`` (``--baselines none --jvm-warmup``: an unmeasured run of
the first grouping warms the session), a service time of ``--service-us`` per tuple (the paper's fixed
per-tuple work, emulated by a sleep: it does not need a core, so ``local[N]`` runs N workers' sleeps side by
side on fewer cores), Zipf ``--zipf`` over ``--keys`` keys.  ``bench_spark`` refuses batches routed by
another grouping, so each row is the grouping it names.  It prints each grouping's tuples/s per N and its
ratio to ``hash`` at the same N, and ``--figure`` draws tuples/s against N (the paper's Fig. 13 axes).
Worker counts run in the order given; the groupings of one N run back to back in one process.  Results,
commands and load in docs/results/engine.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Mapping, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def scaleout_table(runs: Mapping[int, Mapping[str, Any]]) -> dict[str, dict[int, dict[str, float]]]:
    """Grouping → N → ``{"tps", "x_hash"}`` from ``bench_spark --json`` results per worker count N
    (``x_hash``: its tuples/s over hash's at the same N, when hash ran)."""
    out: dict[str, dict[int, dict[str, float]]] = {}
    for n, res in sorted(runs.items()):
        groupings = res.get("groupings", {})
        hash_tps = groupings.get("hash", {}).get("tuples_per_second")
        for name, r in groupings.items():
            row = {"tps": float(r["tuples_per_second"])}
            if hash_tps:
                row["x_hash"] = row["tps"] / hash_tps
            out.setdefault(name, {})[int(n)] = row
    return out


def draw(table: Mapping[str, Mapping[int, Mapping[str, float]]], path: str, title: str) -> None:
    """Tuples/s against workers, one line per grouping (the house style per grouping; a grouping whose
    colour an earlier line took — ``dchoices`` and ``mixed`` share one — gets the first free colour of
    matplotlib's ``tab10``)."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    from skewlab.bench.common import new_figure, style

    fig, axes = new_figure(width=5.0, height=3.6)
    ax = axes[0][0]
    used: set[str] = set()
    spare = [to_hex(colormaps["tab10"](i)) for i in range(10)]
    for name, per_n in table.items():
        ns = sorted(per_n)
        look = style(name)
        if "color" in look:
            look["color"] = to_hex(look["color"])
            if look["color"] in used:
                look["color"] = next(c for c in spare if c not in used)
            used.add(look["color"])
        ax.plot(ns, [per_n[n]["tps"] / 1e3 for n in ns], label=name, **look)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted({n for per_n in table.values() for n in per_n}))
    ax.get_xaxis().set_major_formatter("{x:.0f}")
    ax.set_xlabel("workers (local[N])")
    ax.set_ylabel("k tuples/s")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _ints(text: str, flag: str, p: argparse.ArgumentParser) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        p.error(f"{flag}: expected comma-separated integers, got {text!r}")
    if not values or min(values) < 1:
        p.error(f"{flag}: expected integers >= 1, got {text!r}")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", default="2,4,8,16", help="worker counts N, comma-separated (local[N] each)")
    p.add_argument("--only", default="hash,pkg,dchoices,wchoices,mixed")
    p.add_argument("--service-us", type=float, default=100.0)
    p.add_argument("--per-batch", type=int, default=100_000)
    p.add_argument("--keys", type=int, default=100_000)
    p.add_argument("--zipf", type=float, default=1.2)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--batches", type=int, default=3)
    p.add_argument("--figure", default=None, help="write the figure (PNG) to PATH")
    p.add_argument("--json", default=None, help="write the per-N results of bench_spark and the table to PATH")
    args = p.parse_args(argv)
    ns = _ints(args.workers, "--workers", p)
    if "hash" not in args.only.split(","):
        p.error("--only must include hash (the reference of every ratio)")
    runs: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="skewlab-bench-scaleout-") as tmp:
        for n in ns:
            out = os.path.join(tmp, f"{n}.json")
            cmd = [sys.executable, os.path.join(ROOT, "bench", "bench_spark.py"), "--master", f"local[{n}]",
                   "--workers", str(n), "--only", args.only, "--service-us", f"{args.service_us:g}",
                   "--per-batch", str(args.per_batch), "--keys", str(args.keys), "--zipf", f"{args.zipf:g}",
                   "--warmup", str(args.warmup), "--batches", str(args.batches), "--baselines", "none",
                   "--jvm-warmup", "--json", out]
            print(f"N = {n}: {' '.join(cmd[1:])}", flush=True)
            res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))})
            if res.returncode != 0:
                print(res.stdout[-3000:], file=sys.stderr)
                print(f"bench_spark failed at N = {n} (exit status {res.returncode})", file=sys.stderr)
                return 1
            with open(out) as fh:
                runs[n] = json.load(fh)
            print(f"  load {os.getloadavg()[0]:.2f}", flush=True)
    table = scaleout_table(runs)
    names = list(table)
    print(f"\nk tuples/s (x hash), service {args.service_us:g} µs per tuple, Zipf {args.zipf:g}, {args.keys:,} keys, "
          f"{args.per_batch:,} tuples per batch")
    print(f"{'grouping':<12}" + "".join(f"{'N = ' + str(n):>18}" for n in ns))
    for name in names:
        cells = []
        for n in ns:
            row = table[name].get(n)
            cells.append(f"{row['tps'] / 1e3:8.1f} ({row.get('x_hash', float('nan')):.2f})" if row else f"{'-':>15}")
        print(f"{name:<12}" + "".join(f"{c:>18}" for c in cells))
    if args.figure:
        draw(table, args.figure, f"Zipf {args.zipf:g}, {args.keys:,} keys, {args.service_us:g} µs per tuple, "
                                 f"{args.per_batch:,} tuples per batch")
        print(f"figure: {args.figure}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "runs": {str(n): r for n, r in runs.items()},
                       "table": {k: {str(n): v for n, v in per_n.items()} for k, per_n in table.items()}}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
