"""Driver-side Python time of one Spark micro-batch, on output of the real worker operator.

``skewlab engine`` (``engine/runtimes/spark/engine.py``, ``BatchDriver.apply``) collects the workers' output
of a micro-batch with ``toArrow`` — per-(worker, key) tuple counts, export blobs, the sources' side
rows and one summary row per worker (:mod:`skewlab.engine.runtimes.spark.operator`) — and then, on the driver, while
the executors wait for the next batch's routing snapshot:

1. :func:`skewlab.engine.runtimes.spark.operator.unpack_output` splits the Arrow table;
2. ``FingerprintVocabulary.encode_fps`` turns the key fingerprints into ids;
3. ``Controller.end_interval`` merges the counts into the windowed keyed statistics, computes the
   metrics and lets a rebalancing grouping plan (its moves become the next batch's control rows);
   ``state.per_worker`` is read right after it for the worker rows;
4. ``SnapshotStore.save`` pickles and fsyncs the controller (exactly-once snapshot).

This benchmark times those four steps on batches produced the way the executors produce them:
``--tuples`` tuples per batch of a Zipf(``--zipf``) stream over ``--keys`` keys, split over
``--sources`` source instances, each routed by :func:`skewlab.engine.runtimes.spark.topology.make_router` with the
batch's :class:`~skewlab.engine.runtimes.spark.topology.RoutingSnapshot` (the grouping, one control row per worker
with the controller's move orders, the previous batch's export blobs as imports), then grouped by
worker and handed to the real :func:`skewlab.engine.runtimes.spark.operator.make_handler` with an in-memory stand-in
for Spark's ``GroupState`` (as ``tests/engine/test_spark_operator.py`` does); results go to a temporary
sink.  The concatenated handler outputs are the table ``toArrow`` returns.  The handlers' own time
(executor side) is reported for scale, outside ``total``: ``handler`` (wall time of all workers),
``worker_max`` (CPU time of the busiest worker's handler call) and ``straggler`` (``worker_max`` over
the mean of all workers' CPU time) — the per-worker cost of the operator on one core each, without
Spark's scheduling and the machine's other load.

Checks, per batch: the unpacked counts sum to the batch's tuples and the controller saw them all.

Run: ``python -m skewlab.bench.bench_driver [--batches 6] [--groupings hash,dkg,mixed]`` (prints a table of
per-batch milliseconds, median over batches after the first, and the load average).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from skewlab.engine.algorithms import registry
from skewlab.engine.io.checkpoint import SnapshotStore
from skewlab.engine.control.controller import Controller
from skewlab.engine.algorithms.keys import FingerprintVocabulary
from skewlab.engine.runtimes.spark.operator import OUT_ARROW, make_handler, unpack_output
from skewlab.engine.runtimes.spark.topology import RoutingSnapshot, control_payloads, make_router

STAGES = ("unpack", "vocab_encode", "end_interval", "per_worker", "snapshot_save", "total")


class GroupStateStandIn:
    """The part of pyspark's ``GroupState`` the handler uses: one tuple value, exists/get/update/remove."""

    def __init__(self) -> None:
        self.value: tuple | None = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple:
        return self.value  # type: ignore[return-value]

    def update(self, value: tuple) -> None:
        self.value = tuple(value)

    def remove(self) -> None:
        self.value = None


# ---------------------------------------------------------------------------------------------- data
class Stream:
    """Zipf key stream with fixed key names (``user-<id>``, hot keys spread over the id space)."""

    def __init__(self, n_keys: int, z: float, seed: int) -> None:
        rng = np.random.default_rng(seed)
        w = 1.0 / np.arange(1, n_keys + 1, dtype=np.float64) ** z
        self.cdf = np.cumsum(w / w.sum())
        self.perm = rng.permutation(n_keys)
        self.arrow = pa.array([f"user-{i}" for i in range(n_keys)], pa.string())
        self.seed = seed

    def batch(self, b: int, m: int) -> np.ndarray:
        u = np.random.default_rng((self.seed, b)).random(m)
        return self.perm[np.minimum(np.searchsorted(self.cdf, u), self.cdf.size - 1)]


class Executors:
    """The executor side of one engine run: routing per source instance, the worker operator per worker."""

    def __init__(self, partitions: int, window: int, sink: str) -> None:
        self.P = int(partitions)
        self.handler = make_handler(self.P, window, sink, migrations=os.path.join(os.path.dirname(sink), "migrations"))
        self.states: dict[int, GroupStateStandIn] = {}
        self.handler_seconds = 0.0
        #: CPU seconds of each worker's handler call in the last batch (worker -> seconds)
        self.worker_cpu: dict[int, float] = {}

    def run(self, stream: Stream, ids: np.ndarray, snap: RoutingSnapshot, n_sources: int) -> pa.Table:
        """Route ``ids`` (tuple i belongs to source i mod S) with ``snap``, run every worker's handler,
        return the concatenated outputs (what ``toArrow`` gives the driver)."""
        data = snap.dumps()
        parts = []
        per = -(-ids.size // n_sources)
        for s in range(n_sources):
            sel = ids[s::n_sources]
            first = snap.batch_id * per
            rb = pa.RecordBatch.from_arrays(
                [stream.arrow.take(pa.array(sel)), pa.array(np.full(sel.size, s, np.int32)),
                 pa.array(np.arange(first, first + sel.size, dtype=np.int64)), pa.nulls(sel.size, pa.string())],
                names=["key", "source", "seq", "error"])
            parts.extend(make_router(data, lead=s == 0)(iter([rb])))
        routed = pa.Table.from_batches(parts)
        wcol = routed.column("worker").to_numpy()  # data and message rows of worker w alike
        order = np.argsort(wcol, kind="stable")
        routed = routed.take(pa.array(order))
        wsorted = wcol[order]
        bounds = np.flatnonzero(np.diff(wsorted)) + 1
        out = []
        self.worker_cpu = {}
        t0 = time.perf_counter()
        for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, wsorted.size]):
            w = int(wsorted[lo])
            pdf = routed.slice(int(lo), int(hi - lo)).to_pandas()
            c0 = time.process_time()
            frames = list(self.handler((w,), iter([pdf]), self.states.setdefault(w, GroupStateStandIn())))
            self.worker_cpu[w] = time.process_time() - c0
            out.extend(pa.Table.from_pandas(f, schema=OUT_ARROW, preserve_index=False) for f in frames)
        self.handler_seconds = time.perf_counter() - t0
        return pa.concat_tables(out)


# ---------------------------------------------------------------------------------------------- run
def run_grouping(algo: str, stream: Stream, args: argparse.Namespace, base: Path) -> dict[str, Any]:
    """Run ``args.batches`` batches of grouping ``algo``; returns per-stage times and check failures."""
    P = args.workers
    grouping = registry.create(algo, args.workers, args.sources, args.seed, None)
    c = Controller(grouping, FingerprintVocabulary(), window=args.window, cost_model=args.cost_model)
    c.track_orders = True
    store = SnapshotStore(base / algo / "snapshots", keep=2)
    ex = Executors(P, args.window, str(base / algo / "sink"))
    times: dict[str, list[float]] = {k: [] for k in (*STAGES, "handler", "worker_max")}
    straggler: list[float] = []
    failures: list[str] = []
    imports: dict[int, list] = {}
    holding: set[int] = set()
    rows = 0
    for b in range(args.batches):
        orders = c.drain_orders()
        snap = RoutingSnapshot(b, c.planner.router, P, control_payloads(orders, c.vocab.fps,
                                                                  set(range(c.n_workers)) | holding, P, batch=b), imports)
        ids = stream.batch(b, args.tuples)
        table = ex.run(stream, ids, pickle_copy(snap), args.sources)
        rows = table.num_rows
        t0 = time.perf_counter()
        u = unpack_output(table)
        t1 = time.perf_counter()
        key_ids = c.vocab.encode_fps(u.fps)
        t2 = time.perf_counter()
        route_seconds = sum(side.route_seconds for side in u.states.values())
        for s, side in u.states.items():
            if side.source_state:
                c.planner.router.set_source_state(s % c.planner.n_sources, side.router_state())
        row = c.end_interval(key_ids, u.workers, u.counts, route_seconds=route_seconds)
        t3 = time.perf_counter()
        c.state.per_worker(c.n_workers)
        t4 = time.perf_counter()
        store.save(b, {"run_id": 1, "stream": {"source": "generator", "window": c.window}, "controller": c,
                       "shadow": None, "paused": False, "applied_commands": [],
                       "consumed": {s: v.consumed for s, v in u.states.items()}, "dead_total": 0,
                       "pending": [], "partitions": P})
        t5 = time.perf_counter()
        for k, dt in zip(STAGES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t5 - t0)):
            times[k].append(dt)
        times["handler"].append(ex.handler_seconds)
        cpu = [ex.worker_cpu.get(w, 0.0) for w in range(c.n_workers)]
        times["worker_max"].append(max(cpu))
        straggler.append(max(cpu) / (sum(cpu) / len(cpu)) if sum(cpu) > 0 else 0.0)
        if int(u.counts.sum()) != args.tuples or row["tuples"] != args.tuples:
            failures.append(f"{algo} batch {b}: unpacked {int(u.counts.sum())}, controller {row['tuples']}, "
                            f"sent {args.tuples} tuples")
        imports = {}
        for ref in u.exports:
            imports.setdefault(ref.target, []).append(ref)
        holding = {w for w, s in u.summaries.items() if s.keys or s.held}
    med = {k: 1000 * float(np.median(x[1:] if len(x) > 1 else x)) for k, x in times.items()}
    med["straggler"] = float(np.median(straggler[1:] if len(straggler) > 1 else straggler))
    return {"ms": med, "rows": rows, "keys": len(c.vocab), "failures": failures,
            "migrations": len(c.migrations)}


def pickle_copy(snap: RoutingSnapshot) -> RoutingSnapshot:
    """The executors' copy of the snapshot (the routing state they mutate is not the controller's)."""
    return RoutingSnapshot.loads(snap.dumps())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--tuples", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--zipf", type=float, default=1.0)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--sources", type=int, default=2)
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--cost-model", default="linear", choices=("linear", "join"))
    ap.add_argument("--groupings", default="hash,dkg,mixed")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", default=None, help="snapshot and sink directory (default: a temporary directory)")
    args = ap.parse_args(argv)

    stream = Stream(args.keys, args.zipf, args.seed)
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench_driver_"))
    failures: list[str] = []
    print(f"{args.tuples} tuples/batch, {args.keys} keys, zipf {args.zipf}, {args.workers} workers, "
          f"{args.sources} sources, window {args.window}, cost model {args.cost_model}, {args.batches} batches")
    cols = (*STAGES, "handler", "worker_max", "straggler")
    print(f"{'grouping':10s} " + " ".join(f"{s:>13s}" for s in cols)
          + "   (ms per batch: median of batches 2..N; handler = all workers' handlers, wall time; worker_max = "
          "the busiest worker's handler, CPU time; straggler = worker_max / mean over workers)")
    try:
        for algo in args.groupings.split(","):
            r = run_grouping(algo, stream, args, base)
            failures += r["failures"]
            print(f"{algo:10s} " + " ".join(f"{r['ms'][s]:13.1f}" if s != "straggler" else f"{r['ms'][s]:13.2f}"
                                             for s in cols)
                  + f"   ({r['rows']} rows, {r['keys']} keys, {r['migrations']} migrations)", flush=True)
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    try:
        print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    except OSError:
        pass
    if failures:
        print("CHECK FAILED:\n  " + "\n  ".join(failures[:20]))
        return 1
    print("every batch: unpacked counts = tuples sent = tuples seen by the controller")
    return 0


if __name__ == "__main__":
    sys.exit(main())
