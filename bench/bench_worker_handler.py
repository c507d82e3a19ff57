#!/usr/bin/env python
"""Where one worker's handler time goes in the Spark engine, without Spark.

Usage::

    python bench/bench_worker_handler.py [--operator count] [--tuples 200000] [--keys 100000] [--zipf 1.2]
                                         [--workers 8] [--window 10] [--sources 2] [--batches 15]
                                         [--measure 5] [--combiner on]

Per batch, ``--tuples`` tuples of a Zipf(``--zipf``) stream over ``--keys`` keys (``user-<id>``,
:class:`bench.bench_driver.Stream`) are split over ``--sources`` source instances and routed by the
real source scan (:func:`skewlab.engine.runtimes.spark.topology.make_router`, grouping ``hash``,
with the operator's combiner unless ``--combiner off``); the busiest worker's rows go to the real
:func:`skewlab.engine.runtimes.spark.operator.make_handler` with an in-memory ``GroupState``
stand-in, results to a Parquet sink in a temporary directory.  The first ``batches - measure``
batches fill the window; the last ``--measure`` run under :mod:`cProfile`, and the handler's time is
split by the cumulative time of the functions it calls: state load (``WorkerWindow.loads``),
the operator's partials, ``WorkerWindow.step``, state dump (``WorkerWindow.dumps``), sink write,
output frame (``DataFrame`` construction) and the rest.  The source scan's time per batch (all
sources) is reported beside it.  Prints milliseconds per batch (mean of the measured batches).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

from skewlab.bench.bench_driver import GroupStateStandIn, Stream  # noqa: E402
from skewlab.engine.algorithms import registry  # noqa: E402
from skewlab.engine.operators import load_operator  # noqa: E402
from skewlab.engine.runtimes.spark.operator import make_handler  # noqa: E402
from skewlab.engine.runtimes.spark.topology import RoutingSnapshot, make_router  # noqa: E402

#: phase -> (file suffix, function name) whose cumulative time is the phase's
PHASES = {
    "state_load": ("window_state.py", "loads"),
    "partials": ("builtin.py", "partials_combined"),
    "partials_rows": ("builtin.py", "partials"),
    "step": ("window_state.py", "step"),
    "state_dump": ("window_state.py", "dumps"),
    "sink_write": ("result_sink.py", "write"),
    "out_frame": ("frame.py", "__init__"),
}


def phase_seconds(stats: pstats.Stats) -> dict[str, float]:
    """Cumulative seconds of each phase's function (the outermost call of that name in that file)."""
    out = dict.fromkeys(PHASES, 0.0)
    for (path, _line, name), (_cc, _nc, _tt, ct, callers) in stats.stats.items():  # type: ignore[attr-defined]
        for phase, (suffix, fn) in PHASES.items():
            if name == fn and path.endswith(suffix):
                # only calls from outside the same function (recursion / nested frames are counted once)
                if not any(c[2] == fn and c[0].endswith(suffix) for c in callers):
                    out[phase] = max(out[phase], ct)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--operator", default="count")
    ap.add_argument("--tuples", type=int, default=200_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--zipf", type=float, default=1.2)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--sources", type=int, default=2)
    ap.add_argument("--batches", type=int, default=15)
    ap.add_argument("--measure", type=int, default=5)
    ap.add_argument("--combiner", default="on", choices=("on", "off"))
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    if not 0 < args.measure <= args.batches:
        print("error: --measure must be in 1..--batches", file=sys.stderr)
        return 2

    op = load_operator(args.operator)
    P = args.workers
    stream = Stream(args.keys, args.zipf, args.seed)
    router = registry.create("hash", P).router
    rng = np.random.default_rng(args.seed)
    tmp = tempfile.mkdtemp(prefix="bench-worker-handler-")
    handler = make_handler(P, args.window, os.path.join(tmp, "sink"), op, migrations=os.path.join(tmp, "moves"))
    state = GroupStateStandIn()
    prof = cProfile.Profile()
    scan_s, handler_s, rows_in = [], [], []
    busiest = None
    combiner = op if args.combiner == "on" and op.combined is not None else None  # the query's, once
    for b in range(args.batches):
        ids = stream.batch(b, args.tuples)
        control = {w: {"type": "control", "batch": b, "exports": {}, "expect": []} for w in range(P)}
        snap = RoutingSnapshot(b, router, P, control, {}, values="field" if op.needs_value else "none")
        data = snap.dumps()
        per = -(-ids.size // args.sources)
        t0 = time.perf_counter()
        parts = []
        for s in range(args.sources):
            sel = ids[s::args.sources]
            cols = [stream.arrow.take(pa.array(sel)), pa.array(np.full(sel.size, s, np.int32)),
                    pa.array(np.arange(b * per, b * per + sel.size, dtype=np.int64)), pa.nulls(sel.size, pa.string())]
            names = ["key", "source", "seq", "error"]
            if op.needs_value:
                cols.append(pa.array(rng.random(sel.size)))
                names.append("value")
            parts.extend(make_router(data, lead=s == 0, combiner=combiner)(iter([pa.RecordBatch.from_arrays(cols, names=names)])))
        routed = pa.Table.from_batches(parts)
        t1 = time.perf_counter()
        wcol = routed.column("worker").to_numpy()
        if busiest is None:  # the worker with most rows in the first batch (hash: the hottest key's)
            data_w = wcol[pa.compute.is_null(routed.column("msg")).to_numpy(zero_copy_only=False)]
            busiest = int(np.bincount(data_w, minlength=P).argmax())
        pdf = routed.filter(pa.array(wcol == busiest)).to_pandas()
        measured = b >= args.batches - args.measure
        t2 = time.perf_counter()
        if measured:
            prof.enable()
        frames = list(handler((busiest,), iter([pdf]), state))
        if measured:
            prof.disable()
        t3 = time.perf_counter()
        assert frames
        if measured:
            scan_s.append(t1 - t0)
            handler_s.append(t3 - t2)
            rows_in.append(len(pdf))
    ph = phase_seconds(pstats.Stats(prof))
    n = args.measure
    total = float(np.sum(handler_s))
    print(f"# operator {op.name}, combiner {args.combiner}, {args.tuples} tuples/batch, {args.keys} keys, "
          f"zipf {args.zipf}, {P} workers, window {args.window}; worker {busiest}: {np.mean(rows_in):.0f} rows/batch, "
          f"state {len(state.get[0]) if state.exists else 0} bytes; load {os.getloadavg()[0]:.2f}")
    print(f"source scan (all sources)  {1e3 * np.mean(scan_s):8.1f} ms/batch")
    print(f"handler (busiest worker)   {1e3 * total / n:8.1f} ms/batch (under cProfile)")
    rest = total
    for phase, secs in ph.items():
        if secs:
            print(f"  {phase:24s} {1e3 * secs / n:8.1f} ms  {100 * secs / total:5.1f} %")
            rest -= secs
    print(f"  {'rest':24s} {1e3 * rest / n:8.1f} ms  {100 * rest / total:5.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
