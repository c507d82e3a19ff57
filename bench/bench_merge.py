#!/usr/bin/env python
"""The cost of one final row per (batch, key): the engine's count under ``hash`` (single owner: the
workers write their results) and ``dchoices`` (split keys: the workers send their window shares to
the key-partitioned merge stage, :mod:`skewlab.engine.runtimes.spark.share_merge`), side by side
with the same two groupings of an older source tree (``--baseline-src``, e.g. the revision before
the merge stage, whose split-key sink held one row per worker share), in one run.

Usage::

    git archive <rev> | tar -x -C ../skewlab-old          # the older tree, once
    python bench/bench_merge.py --baseline-src ../skewlab-old [--rounds 2] [--per-batch 200000]
        [--batches 4] [--warmup 2] [--workers 8] [--keys 100000] [--zipf 1.2] [--window 10]
        [--master local[2]] [--json PATH|-]

Each variant is :func:`skewlab.bench.bench_spark.run_engine` (same stream, settings and tuples/s
definition as ``bench/bench_spark.py``) in its own Python process; the older tree's is imported
from a temporary directory that maps its folders to the ``skewlab.*`` packages as pyproject.toml's
``package-dir`` does, put first on ``PYTHONPATH`` (Spark's local Python workers inherit it).  Rounds
alternate the trees (old, new, old, new, ...) so that a load change hits both; the load average is
printed before and after each variant.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import tomllib

from skewlab.bench.common import write_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GROUPINGS = ("hash", "dchoices")

_CHILD = """
import json, sys, tempfile, types
from skewlab.bench import bench_spark
import skewlab.engine.runtimes.spark.result_sink as sink
args = types.SimpleNamespace(**json.loads(sys.argv[1]))
with tempfile.TemporaryDirectory() as tmp:
    out = bench_spark.run_engine(sys.argv[2], args, tmp)
out["merged"] = "shares" in sink.sink_schema().names
print("RESULT " + json.dumps({k: out[k] for k in ("tuples_per_second", "first_batch_ok", "merged", "max_worker_seconds")}))
"""


def package_view(src: str, into: str) -> str:
    """A directory whose ``skewlab`` package is the source tree ``src`` laid out by its own
    pyproject.toml ``package-dir`` (symbolic links); returns the directory for ``PYTHONPATH``."""
    with open(os.path.join(src, "pyproject.toml"), "rb") as fh:
        mapping = tomllib.load(fh)["tool"]["setuptools"]["package-dir"]
    top = os.path.join(into, "skewlab")
    os.makedirs(top)
    for name in os.listdir(os.path.join(src, mapping["skewlab"])):
        os.symlink(os.path.join(src, mapping["skewlab"], name), os.path.join(top, name))
    for pkg, folder in mapping.items():
        if pkg != "skewlab":
            target = os.path.join(top, pkg.split(".", 1)[1])
            if not os.path.lexists(target):
                os.symlink(os.path.join(src, folder), target)
    return into


def run_variant(grouping: str, args: dict, pythonpath: str | None) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, env.get("PYTHONPATH")) if p)
    before = os.getloadavg()[0]
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(args), grouping], env=env, cwd=pythonpath or ROOT,
                          capture_output=True, text=True)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode or line is None:
        raise RuntimeError(f"{grouping}: variant failed:\n{proc.stderr[-2000:]}")
    return {**json.loads(line[7:]), "load_before": round(before, 2), "load_after": round(os.getloadavg()[0], 2)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline-src", default=None, help="an older skewlab source tree (without: this tree only)")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--per-batch", type=int, default=200_000)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--keys", type=int, default=100_000)
    p.add_argument("--zipf", type=float, default=1.2)
    p.add_argument("--window", type=int, default=10)
    p.add_argument("--json", default=None, help="write the results as JSON to PATH ('-': stdout)")
    a = p.parse_args(argv)
    args = {"master": a.master, "batches": a.batches, "warmup": a.warmup, "per_batch": a.per_batch,
            "workers": a.workers, "keys": a.keys, "zipf": a.zipf, "window": a.window, "operator": "count",
            "service_us": 0.0}
    results: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        trees = [("old", package_view(os.path.abspath(a.baseline_src), os.path.join(tmp, "old")))] if a.baseline_src else []
        trees.append(("this", None))
        for r in range(a.rounds):
            for tree, path in trees:
                for g in GROUPINGS:
                    out = {"round": r, "tree": tree, "grouping": g, **run_variant(g, args, path)}
                    results.append(out)
                    print(f"round {r} {tree:<5} {g:<9} {out['tuples_per_second'] / 1e3:8.0f} k tuples/s  "
                          f"sink {'one row per (batch, key)' if out['merged'] else 'one row per worker share'}  "
                          f"first batch ok {out['first_batch_ok']}  load {out['load_before']} -> {out['load_after']}",
                          flush=True)
    for tree, _ in (trees if a.baseline_src else [("this", None)]):
        mean = {g: sum(x["tuples_per_second"] for x in results if x["tree"] == tree and x["grouping"] == g)
                / max(1, sum(1 for x in results if x["tree"] == tree and x["grouping"] == g)) for g in GROUPINGS}
        print(f"{tree:<5} dchoices / hash = {mean['dchoices'] / mean['hash']:.2f}  "
              f"(means: hash {mean['hash'] / 1e3:.0f} k/s, dchoices {mean['dchoices'] / 1e3:.0f} k/s)")
    write_json(a.json, {"args": args, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
