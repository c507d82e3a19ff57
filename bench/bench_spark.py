#!/usr/bin/env python
"""End-to-end Spark throughput of the stateful engine per grouping vs what plain PySpark offers.

Usage::

    python bench/bench_spark.py [--master local[2]] [--batches 4] [--warmup 2] [--per-batch 200000]
                                [--workers 8] [--keys 100000] [--zipf 1.2] [--window 10]
                                [--only hash,dchoices] [--param ALGO:NAME=VALUE ...] [--service-us US]
                                [--operator count,mean,pkg.module:Class] [--baselines KIND,...]
                                [--buckets 32] [--combiner on|off|on,off|off,on] [--no-jvm] [--jvm-warmup]
                                [--json PATH|-]

Every variant reads the same ``skewlab-generator`` stream (Zipf ``--zipf`` over ``--keys`` keys,
seed 0, 2 source instances, unlimited rate, exactly ``--per-batch`` tuples per micro-batch) and runs
a windowed per-key count (window ``--window`` micro-batches) whose results go to Parquet files
(``--service-us``: plus an emulated service time per tuple, :func:`skewlab.engine.runtimes.spark.operator.make_handler`):

* **baseline (a), keyed state by key** (:func:`run_baseline` with ``kind="stateful"``) — what a
  PySpark user writes for a custom keyed stateful operator:
  ``groupBy("key").applyInPandasWithState(`` :func:`make_window_count` ``)``, per key the counts of
  its last W batches in Spark's state store (RocksDB provider with changelog checkpointing, as the
  engine configures it: :func:`skewlab.engine.runtimes.spark.session.configure_state_store`), ``--workers`` shuffle
  (= state) partitions, results written with ``df.write.parquet`` in ``foreachBatch``.  Spark
  hash-partitions by key; a hot key's partition is the straggler, nothing can rebalance it.  The
  tuple's micro-batch is derived from its sequence number (``seq // (per-batch / sources)``: with
  a fixed batch size every source instance advances by the same number of tuples per batch).
* **baseline (b), JVM aggregation** (``kind="jvm"``) — ``groupBy("key").count()`` of each
  micro-batch in ``foreachBatch``, written to Parquet: no Python, no state, no window; the ceiling a
  JVM operator gets on this stream.
* **native stateful aggregation** (``native``; ``native-mean``) — Spark's own streaming aggregation,
  ``groupBy("key").count()`` (``.agg(avg("value"))``), output mode update, in the same state store
  and partitions: a running total per key since the query started (no window), all in the JVM.
* **the mean in PySpark** (``stateful-mean``; ``bucket-mean``), :mod:`skewlab.bench.spark_mean_udfs`:
  the engine's windowed mean as ``groupBy("key").applyInPandasWithState`` (a Python call per key)
  and as ``groupBy(pmod(hash(key), --buckets)).applyInPandasWithState`` with a table of per-key rings
  per bucket (a call per bucket, vectorised).  Baselines of values read the generator's seeded
  values (``values=true``), as the engine does for an operator of values.
* **the floor of a Python stateful operator** (``python-floor``, :func:`python_floor`) — what any
  operator in a Python worker with its state in Spark's state store pays before doing any work:
  ``groupBy(pmod(hash(key), --workers)).applyInPandasWithState`` of a function that only counts
  its rows, keeps a fixed 1 kB state and emits one row per group, in the same state store and
  partitions.  It ships every 9th tuple (``seq % 9 == 0``), ~22,000 rows per batch at the default
  configuration: as many as the engine's combiner ships (one row per key and source partition,
  22,300–22,600 shuffle records per batch measured), so its tasks move as many rows as the engine's.
  ``python-floor-tws``: the same with Spark 4's other Python state API, ``transformWithStateInPandas``
  (:class:`FloorProcessor`, one value state per group); it needs ``protobuf`` (PySpark's optional
  dependency for that API, not one of skewlab's).
* **what balance can buy on this machine** (``floor-hash``, ``floor-even``, :func:`make_floor_service`):
  ``python-floor`` plus ``--service-us`` per tuple (it sleeps ``--service-us`` × 9 per shipped row,
  each standing for 9 tuples), its tuples grouped by ``pmod(hash(key), --workers)`` (a key's tuples on
  one worker, as hash grouping) or dealt evenly, ``pmod(seq / 9, --workers)`` (every worker the same
  share: perfect balance with no routing, no merge and no per-key state).  ``floor-even`` over
  ``floor-hash`` of the same round is what perfect balance buys that operator on the machine it runs
  on.  It is not a bound for the engine: the floor ships every 9th tuple through the JVM and costs
  more per batch than the engine, which hides more of the busiest worker's time.  Their
  ``tuple_max_over_mean`` is read from the rows each group reports.
* **skewlab** (:func:`run_engine`) — :class:`skewlab.engine.runtimes.spark.engine.SparkEngine` with the grouping:
  routing inside the source scan, ``groupBy(worker label).applyInPandasWithState`` with one task
  and one state partition per worker (``max_workers = workers``, so as many state partitions as
  baseline (a)), controller, snapshots and SQLite metrics on the driver; shadows off, trigger
  interval 1 ms, rate 0.

Baselines run first and again last (a cold JVM slows whatever runs first); the ratios use the mean
of the two runs of each baseline.  With ``--rounds`` > 1 the baselines run inside every round instead,
in the alternating order with the variants, and each variant's ratio to a baseline is the median
[min–max] over rounds of its run against the baseline's run of the same round
(:func:`baseline_round_summary`); ``--jvm-warmup`` runs the first grouping once, unmeasured, before
everything else, so that the first measured grouping does not pay for the cold session either.  Tuples/s = tuples of the measured batches / wall time from the end
of the last warm-up batch to the end of the last measured batch (the first ``--warmup`` batches
include Python worker start-up and JIT compilation).

Per grouping the engine's worker rows (``worker_metrics.processing_seconds``: the run time of the
worker's task from Spark's task metrics, :mod:`skewlab.engine.runtimes.spark.task_metrics`) give, over the measured batches:
``straggler`` = Σ_b max_w t / Σ_b mean_w t (1.0 = every worker busy for the same time) and
``one_core_per_worker_tps`` = tuples / Σ_b max_w t, the throughput if every worker had a core of its
own and the slowest worker set the pace.  ``max_worker_seconds`` is Σ_b max_w t.  From the controller's
interval rows: ``load_over_bound`` = max_w L_w / max(mean_w L_w, heaviest key's load) per batch (mean and
max over the measured batches), 1.0 = as balanced as any single-owner grouping can be (issue #14 asks
≤ 1.1 for the rebalancers).  ``latency``: :func:`worker_latency`; ``migrations``: the run's migrations
(count, keys and serialized bytes moved, longest pause).  ``--operator`` takes several operators
(built-ins or a user's ``package.module:Class``): every grouping runs with each, in the order given;
``--baselines`` picks the baselines (default: (a) and (b) for ``count``, none otherwise).
``--combiner on,off`` (``off,on``) runs every operator with the source scan's combiner (the default for
an operator that combines, :attr:`skewlab.engine.operators.KeyedOperator.combined`) and without it, in
that order.

Each variant's first result batch is checked: its windowed counts (the window starts empty) sum to
the batch's tuples.  Issue targets (reported, not asserted): throughput ≥ 1.0× baseline (a) at
Zipf 0 and ≥ 1.5× at Zipf 1.2 (8 workers); ``max_worker_seconds`` of ``dchoices`` ≤ 0.5× that of
``hash`` at Zipf 1.2.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import types
from typing import Any, Callable, Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

SOURCES = 2
#: defaults of the optional fields of ``args`` (callers such as :mod:`skewlab.bench.perf` may omit them)
DEFAULTS = {"window": 10, "master": "local[2]", "operator": "count", "service_us": 0.0, "buckets": 32, "combine": True}

BASE_OUT = "key string, batch long, count long"
BASE_STATE = "last long, ring binary"


def _arg(args: Any, name: str) -> Any:
    return getattr(args, name, DEFAULTS.get(name))


def make_window_count(window: int) -> Callable[..., Iterator[Any]]:
    """The ``applyInPandasWithState`` function of baseline (a): one call per key and micro-batch.

    Input rows ``key, batch``; state ``(last batch, ring)`` with ``ring`` the key's counts of the
    last ``window`` batches as ``window`` little-endian int64 (slot ``b mod window`` holds batch
    ``b``); output one row ``key, batch, windowed count``.  No timeout: a key's state stays until the
    query ends (the benchmark's key space is bounded)."""
    import numpy as np
    import pandas as pd

    W = int(window)

    def count(key: tuple, frames: Iterator[Any], state: Any) -> Iterator[Any]:
        n = 0
        b = -1
        for pdf in frames:
            if len(pdf):
                n += len(pdf)
                b = max(b, int(pdf["batch"].max()))
        if n == 0:
            return
        if state.exists:
            last, blob = state.get
            ring = np.frombuffer(blob, dtype="<i8").copy()
            if b - last >= W:
                ring[:] = 0
            else:
                for x in range(last + 1, b + 1):
                    ring[x % W] = 0
            last = max(last, b)
        else:
            ring = np.zeros(W, dtype="<i8")
            last = b
        ring[b % W] += n
        state.update((last, ring.tobytes()))
        yield pd.DataFrame({"key": [key[0]], "batch": [b], "count": [int(ring.sum())]})

    return count


def python_floor(bucket: tuple, frames: Iterator[Any], state: Any) -> Iterator[Any]:
    """The ``applyInPandasWithState`` function of baseline ``python-floor``: count the group's rows,
    store a fixed 1 kB state, emit one row (bucket, rows)."""
    import pandas as pd

    rows = sum(len(f) for f in frames)
    state.update((bytes(1024),))
    yield pd.DataFrame({"bucket": [int(bucket[0])], "rows": [rows]})


def make_floor_service(service_us: float) -> Callable[..., Iterator[Any]]:
    """The ``applyInPandasWithState`` function of baselines ``floor-hash`` and ``floor-even``:
    :func:`python_floor` that also sleeps ``service_us`` µs for each tuple its rows stand for
    (:data:`FLOOR_KEEP` per row), the emulated service time of the engine's ``--service-us``."""
    service = float(service_us) * 1e-6 * FLOOR_KEEP

    def floor_service(bucket: tuple, frames: Iterator[Any], state: Any) -> Iterator[Any]:
        import pandas as pd

        rows = sum(len(f) for f in frames)
        if service > 0:
            time.sleep(rows * service)
        state.update((bytes(1024),))
        yield pd.DataFrame({"bucket": [int(bucket[0])], "rows": [rows]})

    return floor_service


def floor_processor() -> Any:
    """The ``transformWithStateInPandas`` processor of baseline ``python-floor-tws``: the work of
    :func:`python_floor` (count the rows, a fixed 1 kB value state, one row out) through that API."""
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor

    class FloorProcessor(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.blob = handle.getValueState("blob", FLOOR_STATE)

        def handleInputRows(self, key: tuple, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            n = sum(len(f) for f in rows)
            self.blob.update((bytes(1024),))
            yield pd.DataFrame({"bucket": [int(key[0])], "rows": [n]})

        def close(self) -> None:
            pass

    return FloorProcessor()


def _gen_opts(args: Any, values: bool = False) -> dict[str, str]:
    opts = {"workload": "zipf", "params": json.dumps({"keys": args.keys, "z": args.zipf}), "seed": "0",
            "partitions": str(SOURCES), "rate": "0", "max_per_batch": str(args.per_batch)}
    return {**opts, "values": "true"} if values else opts


#: the baselines by kind: (label, reads values, output mode, result column whose first batch sums to
#: the batch's tuples or None)
BASELINES: dict[str, tuple[str, bool, str, str | None]] = {
    "stateful": ("(a) applyInPandasWithState by key", False, "append", "count"),
    "jvm": ("(b) JVM groupBy(key).count()", False, "append", "count"),
    "native": ("native groupBy(key).count() stateful", False, "update", "count"),
    "native-mean": ("native groupBy(key).agg(avg) stateful", True, "update", None),
    "stateful-mean": ("mean: applyInPandasWithState by key", True, "append", "n"),
    "bucket-mean": ("mean: applyInPandasWithState by bucket", True, "append", "n"),
    "python-floor": ("floor: applyInPandasWithState, no work", False, "append", None),
    "python-floor-tws": ("floor: transformWithStateInPandas, no work", False, "append", None),
    "floor-hash": ("floor + service time, buckets by hash(key)", False, "append", None),
    "floor-even": ("floor + service time, tuples dealt evenly", False, "append", None),
}
#: the baselines whose groups report the rows they applied (``bucket, rows``)
FLOOR_KINDS = ("python-floor", "python-floor-tws", "floor-hash", "floor-even")

#: baseline python-floor: every FLOOR_KEEP-th tuple (the share of rows the engine's combiner ships)
FLOOR_KEEP = 9
FLOOR_OUT = "bucket int, rows long"
FLOOR_STATE = "blob binary"


def _baseline_query(src: Any, kind: str, args: Any) -> Any:
    """The stateful part of baseline ``kind`` on the generator stream ``src`` (module docstring)."""
    from pyspark.sql import functions as F

    from skewlab.bench import spark_mean_udfs as udfs

    window = _arg(args, "window")
    batch = F.floor(F.col("seq") / (args.per_batch // SOURCES)).cast("long").alias("batch")
    if kind == "stateful":
        return (src.select("key", batch).groupBy("key")
                .applyInPandasWithState(make_window_count(window), BASE_OUT, BASE_STATE, "append", "NoTimeout"))
    if kind == "native":
        return src.groupBy("key").count()
    if kind == "native-mean":
        return src.groupBy("key").agg(F.avg("value").alias("result"))
    if kind == "stateful-mean":
        return (src.select("key", batch, "value").groupBy("key")
                .applyInPandasWithState(udfs.make_window_mean(window), udfs.MEAN_OUT, udfs.KEY_STATE, "append",
                                        "NoTimeout"))
    if kind == "bucket-mean":
        bucket = F.pmod(F.hash("key"), F.lit(int(_arg(args, "buckets")))).alias("bucket")
        return (src.select("key", batch, "value", bucket).groupBy("bucket")
                .applyInPandasWithState(udfs.make_bucket_mean(window), udfs.MEAN_OUT, udfs.BUCKET_STATE, "append",
                                        "NoTimeout"))
    if kind in ("python-floor", "python-floor-tws"):
        bucket = F.pmod(F.hash("key"), F.lit(int(args.workers))).cast("int").alias("bucket")
        grouped = src.filter(F.col("seq") % FLOOR_KEEP == 0).select(bucket).groupBy("bucket")
        if kind == "python-floor-tws":
            return grouped.transformWithStateInPandas(floor_processor(), FLOOR_OUT, "append", "None")
        return grouped.applyInPandasWithState(python_floor, FLOOR_OUT, FLOOR_STATE, "append", "NoTimeout")
    if kind in ("floor-hash", "floor-even"):
        spread = F.hash("key") if kind == "floor-hash" else F.floor(F.col("seq") / FLOOR_KEEP)
        bucket = F.pmod(spread, F.lit(int(args.workers))).cast("int").alias("bucket")
        return (src.filter(F.col("seq") % FLOOR_KEEP == 0).select(bucket).groupBy("bucket")
                .applyInPandasWithState(make_floor_service(_arg(args, "service_us")), FLOOR_OUT, FLOOR_STATE,
                                        "append", "NoTimeout"))
    return src  # jvm: aggregated per micro-batch in foreachBatch


def run_baseline(spark: Any, args: Any, tmp: str, tag: str = "base", kind: str = "stateful") -> dict[str, Any]:
    """Run baseline ``kind`` (:data:`BASELINES`) for ``warmup + batches`` micro-batches; returns the
    rate (:func:`_rate`) and ``first_batch_ok`` (the check above; None for a baseline without one)."""
    from skewlab.engine.runtimes.spark.session import configure_state_store

    if kind not in BASELINES:
        raise ValueError(f"kind must be one of {', '.join(BASELINES)}, got {kind!r}")
    _, values, mode, total_column = BASELINES[kind]
    configure_state_store(spark, args.workers)
    out_dir = os.path.join(tmp, f"{tag}-out")
    stamps: list[tuple[float, int]] = []

    def batch(df: Any, batch_id: int) -> None:
        if len(stamps) >= args.batches + args.warmup:
            return  # enough: later batches run nothing (stopping the query interrupts no real work)
        if kind == "jvm":
            df = df.groupBy("key").count()
        df.write.mode("overwrite").parquet(os.path.join(out_dir, f"batch={batch_id}"))
        stamps.append((time.perf_counter(), int(batch_id)))

    src = spark.readStream.format("skewlab-generator").options(**_gen_opts(args, values)).load()
    q = (_baseline_query(src, kind, args).writeStream.outputMode(mode).foreachBatch(batch)
         .option("checkpointLocation", os.path.join(tmp, tag)).trigger(processingTime="0 seconds").start())
    try:
        while len(stamps) < args.batches + args.warmup:
            time.sleep(0.05)
            if not q.isActive:
                raise RuntimeError(str(q.exception()))
        rows = _input_rows(q, [b for _, b in stamps])
    finally:
        q.stop()
    measured = [(t, rows[b]) for t, b in stamps]
    out = _rate(measured, args.warmup)
    first = stamps[0][1]
    import pyarrow.parquet as pq

    if total_column is None:
        out["first_batch_ok"] = None
    else:
        t = pq.read_table(os.path.join(out_dir, f"batch={first}"))
        out["first_batch_ok"] = int(t.column(total_column).to_numpy().sum()) == rows[first]
    out["batch_tuples"] = sorted(set(rows.values()))
    if kind in FLOOR_KINDS:
        measured_ids = [b for _, b in stamps[args.warmup:]]
        out["tuple_max_over_mean"] = floor_max_over_mean(
            [pq.read_table(os.path.join(out_dir, f"batch={b}")).to_pydict() for b in measured_ids], args.workers)
    return out


def floor_max_over_mean(batches: list[dict[str, list[int]]], n_workers: int) -> float | None:
    """Σ_b max_w rows / Σ_b mean_w rows over the floor baselines' output batches (``bucket``, ``rows``
    per group that had rows; a bucket without a row had none): their tuples max/mean, comparable with
    the engine's ``tuple_max_over_mean``."""
    smax = smean = 0.0
    for t in batches:
        per = [0] * n_workers
        for b, r in zip(t["bucket"], t["rows"]):
            per[int(b)] += int(r)
        smax += max(per)
        smean += sum(per) / n_workers
    return smax / smean if smean > 0 else None


def _input_rows(q: Any, batch_ids: list[int], timeout: float = 10.0) -> dict[int, int]:
    """Input rows of each of ``batch_ids`` from the query's progress reports (the last one is
    reported just after ``foreachBatch`` returns: wait for it)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = {int(p["batchId"]): int(p["numInputRows"]) for p in q.recentProgress}
        if all(b in rows for b in batch_ids) or time.monotonic() > deadline:
            missing = [b for b in batch_ids if b not in rows]
            if missing:
                raise RuntimeError(f"no progress report for batches {missing}")
            return rows
        time.sleep(0.05)


def run_engine(name: str, args: Any, tmp: str) -> dict[str, Any]:
    """Run :class:`SparkEngine` with grouping ``name`` for ``warmup + batches`` micro-batches; returns
    the rate, the per-worker figures of the measured batches (module docstring) and ``first_batch_ok``."""
    from skewlab.engine.runtimes.spark.engine import EngineConfig, SparkEngine
    from skewlab.engine.operators import load_operator
    from skewlab.engine.runtimes.spark.result_sink import read_sink, sink_schema
    from skewlab.storage import connect

    stamps: list[tuple[float, int, int]] = []
    algorithm, params = variant_of(name, getattr(args, "params", {}))
    tag = f"{name}-{getattr(args, 'round', 0)}"
    db = f"sqlite:///{tmp}/{tag}.sqlite"
    sink = os.path.join(tmp, f"{tag}-sink")
    cfg = EngineConfig(
        source="generator", db=db, checkpoint=os.path.join(tmp, tag), sink=sink, wait_for_kernels=True,
        algorithm=algorithm, params=params, workers=args.workers,
        max_workers=_arg(args, "max_workers") or args.workers, sources=SOURCES, interval=0.001, rate=0,
        max_per_batch=args.per_batch, window=_arg(args, "window"),
        workload="zipf", workload_params={"keys": args.keys, "z": args.zipf}, shadow=[],
        max_batches=args.batches + args.warmup, master=_arg(args, "master"), operator=_arg(args, "operator"),
        service_us=_arg(args, "service_us"), combine=_arg(args, "combine"),
    )
    bounds: list[float] = []
    routed_by: list[str] = []

    def after(e: Any, b: int) -> None:
        row = e.snapshot.controller.intervals[-1]
        stamps.append((time.perf_counter(), int(b), int(row["tuples"])))
        routed_by.append(row.get("algorithm") or e.snapshot.controller.planner.name)
        loads = row["worker_loads"]
        bound = max(sum(loads) / len(loads), row["max_key_load"]) if loads else 0.0
        bounds.append(max(loads) / bound if bound > 0 else 1.0)

    engine = SparkEngine(cfg, log=lambda m: None, after_batch=after)
    engine.run()
    out = _rate([(t, n) for t, _, n in stamps], args.warmup)
    # the grouping that really routed the measured batches (the engine waits for its kernels:
    # wait_for_kernels, so a cold numba cache cannot measure hash under another name)
    out["routed_by"] = sorted(set(routed_by[args.warmup:]))
    if out["routed_by"] != [algorithm]:
        raise RuntimeError(f"bench variant {name}: its measured batches were routed by {out['routed_by']}, not {algorithm}")
    measured_bounds = bounds[args.warmup:]
    out["load_over_bound_mean"] = sum(measured_bounds) / len(measured_bounds)
    out["load_over_bound_max"] = max(measured_bounds)
    store = connect(db)
    try:
        wrows = store.worker_metrics(engine.snapshot.run_id)
        migs = store.migration_events(engine.snapshot.run_id)
    finally:
        store.close()
    # every migration of the run (warm-up batches included): keys and serialized bytes moved, longest pause
    out["migrations"] = {"count": len(migs), "keys_moved": sum(int(m["keys_moved"] or 0) for m in migs),
                         "bytes_moved": sum(int(m["bytes_moved"] or 0) for m in migs),
                         "pause_ms_max": max((float(m["pause_ms"] or 0.0) for m in migs), default=0.0)}
    measured = {b for _, b, _ in stamps[args.warmup:]}
    out.update(worker_figures([r for r in wrows if int(r["batch_id"]) in measured], out["tuples"], args.workers))
    _, first_b, first_n = stamps[0]
    res = read_sink(sink, sink_schema(load_operator(_arg(args, "operator"))))
    import numpy as np
    import pyarrow.compute as pc

    # count: the first batch's windowed counts sum to its tuples; an operator with a column ``n`` of the
    # tuples it covers (mean) likewise; join (pairs) and others have no such check
    total = "result" if _arg(args, "operator") == "count" else "n" if "n" in res.column_names else None
    counts = res.filter(pc.equal(res.column("batch"), first_b)).column(total).to_numpy() if total else None
    out["first_batch_ok"] = int(np.sum(counts)) == first_n if total else None
    return out


def variant_of(spec: str, params: dict[str, dict[str, Any]] | None = None) -> tuple[str, dict[str, Any]]:
    """A variant of ``--only``: ``ALGO`` or ``ALGO+NAME=VALUE+...`` (the grouping with those
    parameters, e.g. ``dchoices+tail=pkg``), with the ``--param`` values of ``ALGO`` under the inline ones."""
    from skewlab.engine.config.params import parse_assignments

    algorithm, *assignments = spec.split("+")
    return algorithm, {**(params or {}).get(algorithm, {}), **parse_assignments(assignments)}


def round_summary(rounds: dict[str, list[dict[str, Any]]], reference: str = "hash") -> dict[str, dict[str, Any]]:
    """Per variant over alternating rounds: the median tuples/s and, when ``reference`` ran, the
    median, min and max of its speed-up over the reference's run of the same round, and of the
    reference's busiest-worker seconds over its own (1.0: as balanced in time as the reference)."""
    import statistics

    out: dict[str, dict[str, Any]] = {}
    ref = rounds.get(reference)
    for name, runs in rounds.items():
        row: dict[str, Any] = {"rounds": len(runs), "tps_median": statistics.median(r["tuples_per_second"] for r in runs)}
        if ref and len(ref) == len(runs):
            speed = [r["tuples_per_second"] / h["tuples_per_second"] for r, h in zip(runs, ref)]
            busy = [h["max_worker_seconds"] / r["max_worker_seconds"] for r, h in zip(runs, ref)
                    if r.get("max_worker_seconds") and h.get("max_worker_seconds")]
            row.update(speedup=(statistics.median(speed), min(speed), max(speed)),
                       busiest_gain=(statistics.median(busy), min(busy), max(busy)) if busy else None)
        out[name] = row
    return out


def baseline_round_summary(rounds: dict[str, list[dict[str, Any]]],
                           baselines: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, tuple[float, float, float]]]:
    """Per variant and baseline kind: the median, min and max over rounds of the variant's tuples/s
    over the baseline's run of the same round and operator block (runs carry ``round`` and
    ``block``; ``--rounds`` > 1 runs the baselines inside every round, alternating with the variants)."""
    import statistics

    by_round = {kind: {(b.get("block"), b.get("round")): b["tuples_per_second"] for b in base_runs}
                for kind, base_runs in baselines.items()}
    out: dict[str, dict[str, tuple[float, float, float]]] = {}
    for name, runs in rounds.items():
        for kind, base in by_round.items():
            ratios = [r["tuples_per_second"] / base[(r.get("block"), r.get("round"))] for r in runs
                      if base.get((r.get("block"), r.get("round")))]
            if ratios:
                out.setdefault(name, {})[kind] = (statistics.median(ratios), min(ratios), max(ratios))
    return out


def worker_figures(rows: list[dict[str, Any]], tuples: int, n_workers: int) -> dict[str, Any]:
    """Straggler ratio, Σ max worker seconds and one-core-per-worker throughput from worker rows
    (``batch_id, worker, processing_seconds, tuples``); a worker without a row counts 0 s."""
    by_batch: dict[int, list[float]] = {}
    tuples_by_batch: dict[int, list[int]] = {}
    for r in rows:
        b = int(r["batch_id"])
        by_batch.setdefault(b, [0.0] * n_workers)
        tuples_by_batch.setdefault(b, [0] * n_workers)
        w = int(r["worker"])
        if w < n_workers:
            by_batch[b][w] = float(r.get("processing_seconds") or 0.0)
            tuples_by_batch[b][w] = int(r.get("tuples") or 0)
    if not by_batch:
        return {"max_worker_seconds": None, "mean_worker_seconds": None, "straggler": None,
                "one_core_per_worker_tps": None, "tuple_max_over_mean": None, "latency": None}
    smax = sum(max(v) for v in by_batch.values())
    smean = sum(sum(v) / n_workers for v in by_batch.values())
    tmax = sum(max(v) for v in tuples_by_batch.values())
    tmean = sum(sum(v) / n_workers for v in tuples_by_batch.values())
    return {
        "max_worker_seconds": smax,
        "mean_worker_seconds": smean,
        "straggler": smax / smean if smean > 0 else None,
        "one_core_per_worker_tps": tuples / smax if smax > 0 else None,
        "tuple_max_over_mean": tmax / tmean if tmean > 0 else None,
        "latency": worker_latency(by_batch, tuples_by_batch),
    }


def worker_latency(seconds: dict[int, list[float]], tuples: dict[int, list[int]]) -> dict[str, float] | None:
    """The operator's share of a tuple's latency, as Nasir et al. (ICDE 2016) Fig. 14 reports it:
    ``max_mean`` = the maximum over workers of a worker's mean task seconds per batch, and ``p50`` /
    ``p95`` / ``p99`` = percentiles over tuples of the task seconds of the task that applied them (a
    tuple's result leaves when its worker's task ends); ``mean`` over tuples and ``max`` over the tasks
    that applied tuples, as Guo & Zhou (Euro-Par 2017) Table 2 reports them.  Their latency is a
    message's time in its worker's queue plus its service; in a micro-batch it is the task's time.
    ``seconds`` / ``tuples``: batch → per worker."""
    import numpy as np

    t = np.array([s for b in seconds for s in seconds[b]], dtype=np.float64)
    n = np.array([c for b in seconds for c in tuples[b]], dtype=np.float64)
    if not t.size or n.sum() <= 0:
        return None
    order = np.argsort(t, kind="stable")
    cum = np.cumsum(n[order]) / n.sum()
    per_worker = np.array([seconds[b] for b in sorted(seconds)], dtype=np.float64).mean(axis=0)
    out = {"max_mean": float(per_worker.max()), "mean": float(np.dot(t, n) / n.sum()),
           "max": float(t[n > 0].max())}
    for q in (50, 95, 99):
        out[f"p{q}"] = float(t[order][min(int(np.searchsorted(cum, q / 100.0)), t.size - 1)])
    return out


def _rate(stamps: list[tuple[float, int]], warmup: int) -> dict[str, Any]:
    """Tuples/s of ``stamps`` = [(end time, tuples)] after the first ``warmup`` batches."""
    measured = stamps[warmup:]
    t0 = stamps[warmup - 1][0] if warmup > 0 else measured[0][0]
    tuples = sum(n for _, n in measured)
    seconds = measured[-1][0] - t0
    return {"tuples": tuples, "seconds": seconds, "tuples_per_second": tuples / seconds if seconds > 0 else 0.0}


def _load() -> str:
    try:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load average unknown"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--master", default="local[2]")
    p.add_argument("--batches", type=int, default=4, help="measured micro-batches per variant")
    p.add_argument("--warmup", type=int, default=2, help="micro-batches before the measured ones")
    p.add_argument("--per-batch", type=int, default=200_000, help="tuples per micro-batch")
    p.add_argument("--workers", type=int, default=8, help="engine workers = state partitions = baseline partitions")
    p.add_argument("--keys", type=int, default=100_000)
    p.add_argument("--zipf", type=float, default=1.2)
    p.add_argument("--window", type=int, default=10, help="window in micro-batches")
    p.add_argument("--only", default="hash,dchoices",
                   help="groupings, comma-separated ('all': every registered one); ALGO+NAME=VALUE runs ALGO with "
                        "that parameter (e.g. dchoices+tail=pkg)")
    p.add_argument("--rounds", type=int, default=1,
                   help="measure every grouping this many times, in alternating order (forward, backward, ...); "
                        "the table then gives the median and spread of each one's speed-up over hash of the same round; "
                        "the baselines then run inside every round too, and each ratio to a baseline is against "
                        "its run of the same round")
    p.add_argument("--param", action="append", default=[], metavar="ALGO:NAME=VALUE",
                   help="a parameter of one grouping, e.g. scan:alpha=1.08 (repeatable)")
    p.add_argument("--operator", default="count",
                   help="the engine's operators, comma-separated: built-in names or package.module:Class; every "
                        "grouping runs with each")
    p.add_argument("--baselines", default=None,
                   help=f"baselines, comma-separated, of {', '.join(BASELINES)} ('none': no baseline; default: "
                        "stateful,jvm for --operator count without --service-us, else none)")
    p.add_argument("--buckets", type=int, default=DEFAULTS["buckets"], help="key buckets of baseline bucket-mean")
    p.add_argument("--service-us", type=float, default=0.0,
                   help="emulated service time per tuple in µs (Nasir et al.'s fixed delay per message; "
                        "the baselines have none but floor-hash and floor-even)")
    p.add_argument("--combiner", default="on",
                   help="pre-aggregate in the source scan for operators that combine (EngineConfig.combine): on, "
                        "off, or both in the order given (on,off or off,on: every operator runs with it and "
                        "without it)")
    p.add_argument("--no-jvm", action="store_true", help="skip baseline (b)")
    p.add_argument("--once", action="store_true", help="run each baseline once (first), not first and last")
    p.add_argument("--jvm-warmup", action="store_true",
                   help="run the first grouping once, unmeasured, before the measured variants: the first variant "
                        "of an invocation otherwise pays for the cold JVM and Python workers")
    p.add_argument("--json", default=None, help="write the results as JSON to PATH ('-': stdout)")
    args = p.parse_args(argv)
    if args.warmup < 1 or args.batches < 1:
        p.error("--warmup and --batches must be >= 1")
    from skewlab.engine.runtimes.spark.engine_config import MAX_SERVICE_US

    if not 0 <= args.service_us <= MAX_SERVICE_US:
        p.error(f"--service-us must be in [0, {MAX_SERVICE_US:g}] µs per tuple")
    if args.per_batch % SOURCES:
        p.error(f"--per-batch must be a multiple of {SOURCES} (the source instances)")
    if args.buckets < 1:
        p.error("--buckets must be >= 1")
    combines = [{"on": True, "off": False}.get(x) for x in args.combiner.split(",")]
    if None in combines or len(set(combines)) != len(combines):
        p.error(f"--combiner {args.combiner!r}: expected on, off, on,off or off,on")
    from skewlab.engine.algorithms import registry
    from skewlab.engine.config.params import ParamError, parse_assignments
    from skewlab.engine.operators import OperatorError, load_operator
    from skewlab.engine.runtimes.spark.session import get_session

    operators = [o for o in args.operator.split(",") if o]
    for o in operators:
        try:
            load_operator(o)
        except OperatorError as exc:
            p.error(str(exc))
    if args.baselines is None:
        kinds = ["stateful", "jvm"] if operators == ["count"] and not args.service_us else []
    else:
        kinds = [k for k in args.baselines.split(",") if k and k != "none"]
    kinds = [k for k in kinds if not (args.no_jvm and k == "jvm")]
    for k in kinds:
        if k not in BASELINES:
            p.error(f"--baselines {k!r}: expected one of {', '.join(BASELINES)}")
    if "python-floor-tws" in kinds:
        try:
            import google.protobuf  # noqa: F401 - PySpark's transformWithStateInPandas needs it
        except ImportError:
            p.error("--baselines python-floor-tws needs protobuf (pip install protobuf)")
    names = registry.names() if args.only == "all" else [n for n in args.only.split(",") if n]
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    for n in names:
        try:
            algo, inline = variant_of(n)
            registry.get(algo)
            registry.validate_params(algo, inline)
        except (KeyError, ParamError) as exc:
            p.error(f"--only {n!r}: {exc}")
    algos = [variant_of(n)[0] for n in names]
    args.params = {}
    for item in args.param:
        algo, sep, assignment = item.partition(":")
        if not sep or algo not in algos:
            p.error(f"--param {item!r}: expected ALGO:NAME=VALUE with ALGO one of --only ({', '.join(names)})")
        try:
            args.params.setdefault(algo, {}).update(parse_assignments([assignment]))
            registry.validate_params(algo, args.params[algo])
        except ParamError as exc:
            p.error(f"--param {item!r}: {exc}")
    spark = get_session(args.master, "skewlab-bench")
    tmp = tempfile.mkdtemp(prefix="skewlab-bench-spark-")
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "master": args.master},
        "args": vars(args), "load": [], "baselines": {k: [] for k in kinds}, "groupings": {}}

    def note(line: str) -> None:
        results["load"].append(_load())
        print(f"{line}  [{results['load'][-1]}]", flush=True)

    def save() -> None:
        """Write the results so far (a long run stopped early keeps what it measured)."""
        if args.json and args.json != "-":
            with open(args.json, "w") as fh:
                json.dump(results, fh, indent=2)

    def baseline(kind: str, when: str) -> None:
        r = run_baseline(spark, args, tmp, tag=f"{kind}-{when}".replace(", ", "-").replace(" ", ""), kind=kind)
        r["when"] = when
        results["baselines"][kind].append(r)
        save()
        spread = r.get("tuple_max_over_mean")
        note(f"{BASELINES[kind][0]:<44} {r['tuples_per_second'] / 1e3:9.0f} k tuples/s ({when} run)"
             + (f", tuples max/mean {spread:.2f}" if spread else "")
             + ("  FIRST BATCH COUNTS WRONG" if r["first_batch_ok"] is False else ""))

    try:
        if args.jvm_warmup:  # a whole unmeasured variant, so the first measured one runs on a warm session
            warm = os.path.join(tmp, "jvm-warmup")
            os.makedirs(warm)
            run_engine(names[0], types.SimpleNamespace(**{**vars(args), "operator": operators[0],
                                                          "combine": combines[0]}), warm)
            note(f"{'(jvm warm-up: ' + names[0] + ', not measured)':<44}")
        in_rounds = args.rounds > 1  # baselines alternate with the variants in every round, not first and last
        if not in_rounds:
            for kind in kinds:
                baseline(kind, "first")
        results["rounds"] = {}
        for i, (op, combine) in enumerate((o, c) for o in operators for c in combines):
            op_tmp = os.path.join(tmp, f"operator-{i}")  # a checkpoint per (grouping, operator, combiner, round)
            os.makedirs(op_tmp)
            order = ([("baseline", k) for k in kinds] if in_rounds else []) + [("variant", n) for n in names]
            for rnd, (what, name) in ((k, x) for k in range(args.rounds) for x in (order if k % 2 == 0 else order[::-1])):
                if what == "baseline":
                    baseline(name, f"round {rnd}" + (f", block {i}" if len(operators) * len(combines) > 1 else ""))
                    results["baselines"][name][-1].update(round=rnd, block=i)
                    continue
                label = name if len(operators) == 1 and len(combines) == 1 else f"{name} [{op}]"
                label += "" if combine or len(combines) == 1 else " [no combiner]"
                r = run_engine(name, types.SimpleNamespace(**{**vars(args), "operator": op, "combine": combine,
                                                              "round": rnd}), op_tmp)
                r["operator"] = op
                r["combine"] = combine
                r["round"] = rnd
                r["block"] = i
                results["rounds"].setdefault(label, []).append(r)
                results["groupings"][label] = r
                note(f"{label:<44} {r['tuples_per_second'] / 1e3:9.0f} k tuples/s, max worker "
                     f"{r['max_worker_seconds']:.2f} s, straggler {r['straggler']:.2f}, load / bound "
                     f"{r['load_over_bound_mean']:.2f}" + ("  FIRST BATCH COUNTS WRONG" if r["first_batch_ok"] is False else ""))
                save()
        if not args.once and not in_rounds:
            for kind in reversed(kinds):
                baseline(kind, "last")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ref = {k: sum(r["tuples_per_second"] for r in v) / len(v) for k, v in results["baselines"].items() if v}
    results["reference"] = ref
    print(f"\nZipf {args.zipf}, {args.keys:,} keys, {args.workers} workers, {args.per_batch:,} tuples/batch, "
          f"window {args.window}, {args.batches} measured after {args.warmup} warm-up, {args.master}"
          + (f", service {args.service_us:g} µs per tuple" if args.service_us else ""))
    for kind, v in ref.items():
        print(f"{BASELINES[kind][0]:<44} {v / 1e3:9.0f} k tuples/s (mean of {len(results['baselines'][kind])} runs)")
    hdr = f"{'variant':<44} {'k tuples/s':>10} " + " ".join(f"{'x ' + k:>15}" for k in ref) + \
          f" {'straggler':>9} {'max wkr s':>9} {'1core/wkr k/s':>13} {'tuples max/mean':>15} {'load/bound':>10} " \
          f"{'lat max-mean':>12} {'p50':>6} {'p95':>6} {'p99':>6}"
    print(hdr)
    for name, r in results["groupings"].items():
        r["ratios"] = {k: r["tuples_per_second"] / v for k, v in ref.items() if v}
        r["ratio_vs_stateful"] = r["ratios"].get("stateful")
        r["ratio_vs_jvm"] = r["ratios"].get("jvm")
        r["ratio_vs_baseline"] = r["ratio_vs_stateful"]

        def f(x: Any, fmt: str) -> str:
            return format(x, fmt) if x is not None else "-"

        print(f"{name:<44} {r['tuples_per_second'] / 1e3:10.0f} "
              + " ".join(f(r["ratios"].get(k), "15.2f") for k in ref)
              + f" {f(r['straggler'], '9.2f')} {f(r['max_worker_seconds'], '9.2f')} "
              f"{f(r['one_core_per_worker_tps'] and r['one_core_per_worker_tps'] / 1e3, '13.0f')} "
              f"{f(r['tuple_max_over_mean'], '15.2f')} {f(r['load_over_bound_mean'], '10.2f')} "
              + " ".join(f((r["latency"] or {}).get(k), w) for k, w in
                         (("max_mean", "12.2f"), ("p50", "6.2f"), ("p95", "6.2f"), ("p99", "6.2f"))))
    if args.rounds > 1 and "hash" in results["rounds"]:
        summary = results["round_summary"] = round_summary(results["rounds"])
        print(f"\nmedian [min-max] of {args.rounds} alternating rounds, each against hash's run of the same round:")
        print(f"{'variant':<44} {'k tuples/s':>10} {'x hash':>20} {'busiest task: hash / it':>26}  routed by")
        for name, row in summary.items():
            sp, bz = row.get("speedup"), row.get("busiest_gain")
            routed = sorted({a for r in results["rounds"][name] for a in r["routed_by"]})
            print(f"{name:<44} {row['tps_median'] / 1e3:10.0f} "
                  + (f"{sp[0]:8.2f} [{sp[1]:.2f}-{sp[2]:.2f}]" if sp else f"{'-':>20}") + " "
                  + (f"{bz[0]:14.2f} [{bz[1]:.2f}-{bz[2]:.2f}]" if bz else f"{'-':>26}") + f"  {','.join(routed)}")
    if args.rounds > 1 and kinds:
        # the baselines' own rows too: a floor against the native aggregation, of the same round
        compared = {**results["rounds"], **{f"({k})": v for k, v in results["baselines"].items()}}
        against = results["baseline_round_summary"] = baseline_round_summary(compared, results["baselines"])
        print(f"\nagainst the baselines: median [min-max] of {args.rounds} alternating rounds, each against the "
              f"baseline's run of the same round:")
        print(f"{'variant':<44} " + " ".join(f"{'x ' + k:>22}" for k in kinds))
        for name, row in against.items():
            print(f"{name:<44} " + " ".join(f"{row[k][0]:10.2f} [{row[k][1]:.2f}-{row[k][2]:.2f}]" if k in row
                                            else f"{'-':>22}" for k in kinds))
    g = results["groupings"]
    if "hash" in g and "dchoices" in g and g["hash"]["max_worker_seconds"]:
        results["dchoices_vs_hash_max_worker"] = g["dchoices"]["max_worker_seconds"] / g["hash"]["max_worker_seconds"]
        print(f"max worker seconds dchoices / hash: {results['dchoices_vs_hash_max_worker']:.2f}")
    if args.json == "-":
        print(json.dumps(results, indent=2))
    save()
    return 0


def perf_args(cfg: dict[str, Any]) -> types.SimpleNamespace:
    """The ``args`` of :func:`run_baseline` / :func:`run_engine` from a :mod:`skewlab.bench.perf` config dict."""
    return types.SimpleNamespace(**{k: cfg.get(k, DEFAULTS.get(k)) for k in
                                    ("master", "batches", "warmup", "per_batch", "workers", "keys", "zipf", "window",
                                     "operator", "service_us")})


if __name__ == "__main__":
    sys.exit(main())
