"""Driver-side Python time of one Spark micro-batch (issue #4): old vs new, interleaved.

``skewlab engine`` (``engine/spark/engine.py``, ``SparkEngine._process``) collects the per-(worker, key)
aggregates of a micro-batch with ``toArrow`` and then, on the driver, while every executor is idle:

1. ``unpack_aggregates`` splits the Arrow table into count rows, per-source side states, timings;
2. ``VocabIndex.encode`` turns the key strings into vocabulary ids;
3. ``Controller.end_interval`` merges the aggregates into the windowed keyed state, computes metrics and
   the :class:`~engine.grouping.IntervalStats`, and lets a rebalancing grouping plan/migrate;
   ``state.per_worker`` is read right after it for the worker rows;
4. ``SnapshotStore.save`` pickles and fsyncs the controller (exactly-once snapshot).

This benchmark reproduces those four steps on synthetic batches shaped like the real ones: ``--tuples``
tuples (default 2M) of a Zipf(``--zipf``) stream over ``--keys`` keys (default 100k), 2 sources, 8 workers,
routed by the grouping itself (per source, in order, like the executors); each worker's tuples go through
the real :func:`engine.spark.topology.make_worker` (Arrow ``group_by``: keys in first-appearance order per
worker, one state row per source, one timing row per worker) and the concatenated outputs are the table
``toArrow`` would return.  The snapshot payload has the shape of ``SparkEngine._save``'s (controller,
``shadow=None``, small dicts).

*Old vs new*: the "old" code is the version of ``engine/{state,controller,checkpoint,metrics,keys}.py`` and
``engine/spark/topology.py`` at git revision ``--legacy-rev`` (read with ``git show``, written to a temporary
package with its ``engine.*`` imports redirected, so it runs side by side with the working tree).  Both
variants get the same batches, alternately first, and the benchmark asserts that they return identical
results (ids, unpacked arrays, every metric row, the final state and summary, and the restored snapshot).
``--legacy-rev none`` measures only the new code.

Run: ``python -m bench.bench_driver [--batches 6] [--groupings hash,dkg,mintable]`` (prints a table of
per-batch milliseconds, median over batches after the first, and the load average).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from engine import registry
from engine.controller import Controller
from engine.keys import fingerprints
from engine.spark import topology as topo

REPO = Path(__file__).resolve().parent.parent
#: the commit before the driver speed-up (the "old" variant)
LEGACY_REV = "5a8fc9e144f86f6ad65910abd95fa38eef0fe92d"
_LEGACY_FILES = {
    "state": "engine/state.py",
    "keys": "engine/keys.py",
    "metrics": "engine/metrics.py",
    "controller": "engine/controller.py",
    "checkpoint": "engine/checkpoint.py",
    "topology": "engine/spark/topology.py",
}


def load_legacy(rev: str) -> dict[str, Any] | None:
    """Import the modules of revision ``rev`` as package ``_skewlab_legacy`` (``None``: git unavailable)."""
    pkg = "_skewlab_legacy"
    root = Path(tempfile.gettempdir()) / f"skewlab_legacy_{rev[:12]}"
    try:
        (root / pkg).mkdir(parents=True, exist_ok=True)
        for mod, path in _LEGACY_FILES.items():
            src = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{path}"], check=True,
                                 capture_output=True, text=True).stdout
            for name in ("state", "keys", "metrics"):
                src = re.sub(rf"\bfrom engine\.{name} import", f"from {pkg}.{name} import", src)
            target = root / pkg / f"{mod}.py"
            if not target.exists() or target.read_text() != src:
                target.write_text(src)
        (root / pkg / "__init__.py").write_text("")
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"legacy revision {rev} not available ({type(exc).__name__}); measuring the new code only")
        return None
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return {m: importlib.import_module(f"{pkg}.{m}") for m in _LEGACY_FILES}


# ---------------------------------------------------------------------------------------------- data
class Stream:
    """Zipf key stream with fixed key names (``user-<id>``, hot keys spread over the id space)."""

    def __init__(self, n_keys: int, z: float, seed: int) -> None:
        rng = np.random.default_rng(seed)
        w = 1.0 / np.arange(1, n_keys + 1, dtype=np.float64) ** z
        self.cdf = np.cumsum(w / w.sum())
        self.perm = rng.permutation(n_keys)
        self.names = [f"user-{i}" for i in range(n_keys)]
        self.arrow = pa.array(self.names, pa.string())
        self.fps = fingerprints(self.names)
        self.seed = seed

    def batch(self, b: int, m: int) -> np.ndarray:
        u = np.random.default_rng((self.seed, b)).random(m)
        return self.perm[np.minimum(np.searchsorted(self.cdf, u), self.cdf.size - 1)]


def agg_table(stream: Stream, ids: np.ndarray, grouping: Any, batch: int, n_sources: int) -> pa.Table:
    """The table ``toArrow`` returns for one batch: route per source (tuple i of source i mod S, in order),
    then every worker's rows through :func:`engine.spark.topology.make_worker`."""
    n = grouping.n_workers
    workers = np.empty(ids.size, np.int64)
    sides = []
    for s in range(n_sources):
        sel = np.arange(s, ids.size, n_sources)
        t = time.perf_counter()
        workers[sel] = grouping.route(stream.fps[ids[sel]], s)
        info = {"source": s, "rows": int(sel.size), "route_seconds": time.perf_counter() - t, "dead_letters": {},
                "consumed": (batch + 1) * int(sel.size), "first_seq": batch * int(sel.size),
                "source_state": grouping.source_state(s)}
        sides.append((s, topo.encode_side(info)))
    work = topo.make_worker(n)
    batches = []
    for w in range(n):
        sel = np.flatnonzero(workers == w)
        inp = [pa.RecordBatch.from_arrays([stream.arrow.take(pa.array(ids[sel])), pa.array(np.full(sel.size, w, np.int32))],
                                          names=["key", "worker"])]
        side = [(s, k) for s, k in sides if s % n == w]
        if side:
            inp.append(pa.RecordBatch.from_arrays([pa.array([k for _, k in side], pa.string()),
                                                   pa.array([n + s % n for s, _ in side], pa.int32())], names=["key", "worker"]))
        batches.extend(work(iter(inp)))
    return pa.Table.from_batches(batches)


# ---------------------------------------------------------------------------------------------- run
class Variant:
    """One implementation (old or new) of the four driver steps, with its own controller and snapshot dir."""

    def __init__(self, label: str, mods: dict[str, Any], algo: str, n: int, sources: int, seed: int, window: int,
                 cost_model: str, directory: Path) -> None:
        self.label = label
        self.mods = mods
        vocab = mods["keys"].Vocabulary()
        grouping = registry.create(algo, n, sources, seed, None)
        self.controller = mods["controller"].Controller(grouping, vocab, window=window, cost_model=cost_model)
        self.index = mods["topology"].VocabIndex()
        self.store = mods["checkpoint"].SnapshotStore(directory, keep=2)
        self.times: dict[str, list[float]] = {k: [] for k in STAGES}
        self.out: dict[str, Any] = {}

    def run(self, table: pa.Table, batch: int) -> None:
        c = self.controller
        t0 = time.perf_counter()
        u = self.mods["topology"].unpack_aggregates(table, key_list=False)
        t1 = time.perf_counter()
        key_ids = self.index.encode(c.vocab, u["key_array"])
        t2 = time.perf_counter()
        route_seconds = sum(side.get("route_seconds", 0.0) for side in u["states"].values())
        row = c.end_interval(key_ids, u["workers"], u["counts"], route_seconds=route_seconds)
        t3 = time.perf_counter()
        per_worker = c.state.per_worker(c.n_workers)
        t4 = time.perf_counter()
        self.store.save(batch, {"run_id": 1, "stream": {"source": "generator", "window": c.window},
                                "controller": c, "shadow": None, "paused": False, "applied_commands": [],
                                "consumed": {s: int(v["consumed"]) for s, v in u["states"].items()},
                                "dead_total": 0, "pending": []})
        t5 = time.perf_counter()
        for k, dt in zip(STAGES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t5 - t0)):
            self.times[k].append(dt)
        self.out = {"u": u, "ids": key_ids, "row": row, "per_worker": per_worker}


#: metrics that are wall-clock measurements (differ between any two runs)
WALL_CLOCK = ("plan_seconds",)
STAGES = ("unpack", "vocab_encode", "end_interval", "per_worker", "snapshot_save", "total")


def same_outputs(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    bad = []
    if not np.array_equal(a["ids"], b["ids"]):
        bad.append("key ids")
    for k in ("workers", "counts"):
        if not (np.array_equal(a["u"][k], b["u"][k]) and a["u"][k].dtype == b["u"][k].dtype):
            bad.append(f"unpack {k}")
    if not a["u"]["key_array"].equals(b["u"]["key_array"]):
        bad.append("unpack key_array")
    for k in ("states", "dead_letters", "seconds"):  # may hold numpy arrays (source states): compare pickles
        if pickle.dumps(a["u"][k]) != pickle.dumps(b["u"][k]):
            bad.append(f"unpack {k}")
    ra, rb = ({k: v for k, v in r.items() if k not in WALL_CLOCK} for r in (a["row"], b["row"]))
    if ra != rb:
        bad.append("end_interval row: " + ", ".join(k for k in ra if ra.get(k) != rb.get(k)))
    if not np.array_equal(a["per_worker"], b["per_worker"]):
        bad.append("per_worker")
    return bad


def final_check(old: Controller, new: Controller) -> list[str]:
    bad = []
    for o, n_ in ((old.state.merged(), new.state.merged()), (old.state.per_key(), new.state.per_key())):
        if not all(np.array_equal(x, y) for x, y in zip(o, n_)):
            bad.append("merged state")
    if {k: v for k, v in old.summary().items() if k not in WALL_CLOCK} != \
            {k: v for k, v in new.summary().items() if k not in WALL_CLOCK}:
        bad.append("summary")
    if old.results() != new.results():
        bad.append("results")
    so, sn = old.stats(), new.stats()
    for f in ("keys", "cost", "size", "count", "worker", "key_ids"):
        if not np.array_equal(getattr(so, f), getattr(sn, f)):
            bad.append(f"stats.{f}")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--tuples", type=int, default=2_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--zipf", type=float, default=1.0)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--sources", type=int, default=2)
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--cost-model", default="linear", choices=("linear", "join"))
    ap.add_argument("--groupings", default="hash,dkg")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--legacy-rev", default=LEGACY_REV, help="git revision of the old code, or 'none'")
    ap.add_argument("--dir", default=None, help="snapshot directory (default: a temporary directory)")
    args = ap.parse_args(argv)

    new_mods = {"keys": importlib.import_module("engine.keys"), "controller": importlib.import_module("engine.controller"),
                "checkpoint": importlib.import_module("engine.checkpoint"), "topology": topo}
    old_mods = load_legacy(args.legacy_rev) if args.legacy_rev != "none" else None
    stream = Stream(args.keys, args.zipf, args.seed)
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench_driver_"))
    failures: list[str] = []
    print(f"{args.tuples} tuples/batch, {args.keys} keys, zipf {args.zipf}, {args.workers} workers, "
          f"{args.sources} sources, window {args.window}, cost model {args.cost_model}, {args.batches} batches")
    print(f"{'grouping':10s} {'variant':7s} " + " ".join(f"{s:>13s}" for s in STAGES) + "   (ms per batch: median of batches 2..N)")
    try:
        for algo in args.groupings.split(","):
            variants = [Variant("new", new_mods, algo, args.workers, args.sources, args.seed, args.window,
                                args.cost_model, base / algo / "new")]
            if old_mods is not None:
                variants.append(Variant("old", old_mods, algo, args.workers, args.sources, args.seed, args.window,
                                         args.cost_model, base / algo / "old"))
            router = pickle.loads(pickle.dumps(variants[0].controller.grouping))  # the executors' copy
            pairs = 0
            for b in range(args.batches):
                table = agg_table(stream, stream.batch(b, args.tuples), router, b, args.sources)
                pairs = table.num_rows
                for v in (variants if b % 2 == 0 else variants[::-1]):
                    v.run(table, b)
                if len(variants) == 2:
                    failures += [f"{algo} batch {b}: {x}" for x in same_outputs(variants[0].out, variants[1].out)]
                # the next batch is routed with the grouping the controller would ship
                router = pickle.loads(pickle.dumps(variants[0].controller.grouping))
                g = variants[0].controller.grouping
                for s in range(args.sources):
                    router.set_source_state(s, g.source_state(s))
            for v in variants:
                med = {k: 1000 * float(np.median(x[1:] if len(x) > 1 else x)) for k, x in v.times.items()}
                print(f"{algo:10s} {v.label:7s} " + " ".join(f"{med[s]:13.1f}" for s in STAGES)
                      + f"   ({pairs} rows, {len(v.controller.vocab)} keys)")
            if len(variants) == 2:
                failures += [f"{algo} final: {x}" for x in final_check(variants[1].controller, variants[0].controller)]
                restored = variants[0].store.latest()
                if restored is None or final_check(variants[1].controller, restored[1]["controller"]):
                    failures.append(f"{algo}: restored snapshot differs")
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    print(f"uptime: {os.popen('uptime').read().strip()}")
    if failures:
        print("MISMATCH old vs new:\n  " + "\n  ".join(failures[:20]))
        return 1
    if old_mods is not None:
        print("old and new results identical (ids, unpacked arrays, metric rows, state, summary, restored snapshot)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
