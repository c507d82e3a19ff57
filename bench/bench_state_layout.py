#!/usr/bin/env python
"""Does a worker's batch cost grow with the keys in its window?  Per-batch time of small Spark
streaming queries that differ only in how a worker's sliding window sits in Spark's state store.

Usage::

    python bench/bench_state_layout.py [--master local[2]] [--workers 8] [--per-batch 100000]
                                       [--keys 10000,1000000] [--zipf 1.2] [--window 10]
                                       [--warmup BATCHES] [--batches 3] [--rounds 1]
                                       [--layouts none,blob,groups-64,tws-key,tws-group-64]
                                       [--jvm-warmup 3] [--json PATH|-]

Issue 36 item 1 ("state a batch touches, not the window").  Every run reads the same
``skewlab-generator`` stream as ``bench/bench_spark.py`` (Zipf ``--zipf`` over each of ``--keys``,
seed 0, 2 source instances, exactly ``--per-batch`` tuples per micro-batch) and computes the engine's
windowed per-key ``count`` (window ``--window`` micro-batches) under ``hash``.  The query is a
stand-in of the engine's, not the engine: the same for every layout but for its stateful step.

* **Before the state** (all layouts alike): a ``mapInArrow`` pass plays the engine's source scan
  with its combiner (:mod:`skewlab.engine.runtimes.spark.topology`): per input Arrow batch one row per
  (key, micro-batch) with its ``tuples``; the key's fingerprint
  (:func:`skewlab.engine.runtimes.spark.window_state.key_fingerprints`, the engine's key identity);
  worker ``fp mod P`` (the ``hash`` grouping); the key's group ``(fp >> 32) mod G`` — a function of the
  key alone, as Flink's ``KeyGroupRangeAssignment`` (a key keeps its group when it moves to another
  worker; bits above the worker's, so that under ``hash`` each worker uses all of its G groups); and
  the grouping label of the layout's state row.  The micro-batch of a tuple is ``seq // (per-batch /
  sources)``, as ``bench_spark``'s baselines derive it.
* **The layouts** (``--layouts``), each doing the real work of its layout for every batch — read the
  state it touches, apply the batch's counts to the window ring, emit each touched key's windowed
  count, write the state back:

  - ``blob`` — today's engine (:mod:`skewlab.engine.runtimes.spark.operator`): ``groupBy(worker
    label).applyInPandasWithState``, one binary state value per worker, and per call exactly the
    handler's state path: ``WorkerWindow.loads(state.get[0])``, :meth:`WorkerWindow.step`,
    ``state.update((win.dumps(),))``.  Not the handler itself: no control/side rows, no export, no
    result sink, no stat rows.
  - ``groups-G`` — the worker's keys in G key groups, each group its own state row: ``groupBy(group
    label).applyInPandasWithState``, the label of (worker, group) picked with
    :mod:`skewlab.engine.runtimes.spark.labels`'s trick (:func:`group_labels`: all of a worker's groups
    hash onto the worker's partition, so a worker is still one task), one ``WorkerWindow`` per group
    (same loads/step/dumps).  Spark calls the function only for the groups with input.
  - ``tws-key`` — ``groupBy(worker label).transformWithStateInPandas`` with a ``MapState`` keyed by the
    key (value: last batch, the key's ring as ``window`` int64): per touched key one ``getValue`` and
    one ``updateValue`` (a round trip each to the executor's state server); a key's ring is cleared of
    batches that left the window when it is read (no TTL: the bench's key space is bounded).
  - ``tws-group-G`` — the same API with a ``MapState`` keyed by key group (value: the group's
    ``WorkerWindow`` blob): one ``getValue`` and one ``updateValue`` per touched group.

  - ``none`` — the floor: the ``blob`` query without state (``applyInPandasWithState`` with a state it
    never reads or writes); its results are the batch's counts, not windowed.  What does not depend on
    the state — more distinct keys per batch at more keys: more rows shuffled and emitted — grows in
    it as in every layout.

  The ``tws-*`` layouts need ``protobuf`` (PySpark's optional dependency of that API, not one of
  skewlab's).  All use the RocksDB state store with changelog checkpointing and one state partition
  per worker (:func:`skewlab.engine.runtimes.spark.session.configure_state_store`).
* **Out**: the touched keys' windowed counts and one summary row per call (state keys, state bytes,
  handler wall and CPU seconds — CPU: the Python worker's own, not the JVM's state server it waits
  on); ``foreachBatch`` sums them (one execution of the batch, no sink).

Per run ``--warmup`` batches (default window + 2: the window is full) then ``--batches`` measured ones;
a batch's time is the wall time between the ends of consecutive ``foreachBatch`` calls (trigger 0 s).
``--rounds``: every (layout, keys) run that many times, the order reversed every other round; per
layout the table gives the median [min–max] over rounds of the run's median batch time at each key
count and of the per-round ratio largest keys / smallest keys (issue 36's target: ≤ 1.15 from 1e4 to
1e6 keys).  Checks, per run: the first batch's counts sum to its tuples (the window starts empty);
across layouts at one key count: every measured batch has the same result rows and sum of counts.
The load average is printed with every run.  Numbers and their reading: docs/design/worker-state.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from skewlab.bench.bench_spark import SOURCES, _gen_opts, _load  # noqa: E402 - the same stream and load line

#: the grouping input of every layout: a row per (key, batch) of an input Arrow batch
ROW_SCHEMA = "key string, batch long, tuples long, label int"
OUT_SCHEMA = ("key string, batch long, count long, state_keys long, state_bytes long, seconds double, cpu double, "
              "calls int")
BLOB_STATE = "blob binary"
LAYOUT_RE = re.compile(r"^(none|blob|tws-key)$|^(groups|tws-group)-([0-9]+)$")
DEFAULT_LAYOUTS = "none,blob,groups-64,tws-key,tws-group-64"


def parse_layout(name: str) -> tuple[str, int]:
    """``(kind, groups per worker)`` of a layout name (module docstring); ``ValueError`` if it is none."""
    m = LAYOUT_RE.match(name)
    if not m:
        raise ValueError(f"unknown layout {name!r}: expected none, blob, tws-key, groups-G or tws-group-G")
    if m.group(1):
        return m.group(1), 1
    g = int(m.group(3))
    if g < 1:
        raise ValueError(f"layout {name!r}: G must be >= 1")
    return m.group(2), g


def group_labels(partitions: int, groups: int) -> tuple[int, ...]:
    """Label of group ``g`` of worker ``w`` at index ``w * groups + g``: distinct ints, the first
    ``groups`` (in increasing order) that Spark's hash partitioning puts on partition ``w``
    (:func:`skewlab.engine.runtimes.spark.labels.spark_partition_of`), so every group of a worker is in
    the worker's task and state partition.  ``groups = 1`` gives
    :func:`~skewlab.engine.runtimes.spark.labels.worker_labels`."""
    from skewlab.engine.runtimes.spark.labels import spark_partition_of

    p, g = int(partitions), int(groups)
    if p < 1 or g < 1:
        raise ValueError(f"partitions and groups must be >= 1, got {partitions}, {groups}")
    found: list[list[int]] = [[] for _ in range(p)]
    missing = p * g
    v = 0
    while missing:
        w = spark_partition_of(v, p)
        if len(found[w]) < g:
            found[w].append(v)
            missing -= 1
        v += 1
    return tuple(x for per in found for x in per)


def make_router(partitions: int, groups: int, per_source: int, labels: tuple[int, ...]) -> Callable[..., Iterator[Any]]:
    """The ``mapInArrow`` function before the state (module docstring): generator rows → ``ROW_SCHEMA``."""
    import numpy as np
    import pyarrow as pa

    from skewlab.engine.algorithms.keys import fingerprint_keys

    P, G, per = int(partitions), int(groups), int(per_source)
    table = np.asarray(labels, dtype=np.int32)

    def route(batches: Iterator[Any]) -> Iterator[Any]:
        for rb in batches:
            if not rb.num_rows:
                continue
            t = pa.table({"key": rb.column(rb.schema.get_field_index("key")),
                          "batch": pa.array(rb.column(rb.schema.get_field_index("seq")).to_numpy() // per)})
            agg = t.group_by(["key", "batch"]).aggregate([([], "count_all")])
            keys = agg.column("key").combine_chunks()
            fps = fingerprint_keys(keys)
            worker = (fps % np.uint64(P)).astype(np.int64)
            grp = ((fps >> np.uint64(32)) % np.uint64(G)).astype(np.int64)
            yield pa.RecordBatch.from_arrays(
                [keys, agg.column("batch").combine_chunks(), agg.column("count_all").combine_chunks(),
                 pa.array(table[worker * G + grp])], names=["key", "batch", "tuples", "label"])

    return route


def _keys_counts(frames: Iterator[Any]) -> tuple[int, list[str], Any]:
    """The call's batch, keys and per-key tuples (rows of ``ROW_SCHEMA``)."""
    import numpy as np
    import pandas as pd

    parts = [f for f in frames if len(f)]
    pdf = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
    codes, uniq = pd.factorize(pdf["key"], sort=False)
    counts = np.bincount(codes, weights=pdf["tuples"].to_numpy(np.int64), minlength=len(uniq)).astype(np.int64)
    return int(pdf["batch"].max()), list(uniq), counts


def _out(batch: int, results: list[tuple], state_keys: int, state_bytes: int, started: tuple[float, float]) -> Any:
    """Result rows ``(key, batch, count)`` and the call's summary row as one ``OUT_SCHEMA`` frame;
    ``started``: :func:`_clocks` at the call's start (wall and CPU seconds of the Python worker: on a
    loaded machine the wall time counts waiting for a core, the CPU time does not)."""
    import numpy as np
    import pandas as pd

    m = len(results)
    return pd.DataFrame({
        "key": [r[1] for r in results] + [None],
        "batch": np.full(m + 1, batch, np.int64),
        "count": np.array([r[2] for r in results] + [0], np.int64),
        "state_keys": np.array([0] * m + [state_keys], np.int64),
        "state_bytes": np.array([0] * m + [state_bytes], np.int64),
        "seconds": np.array([0.0] * m + [time.perf_counter() - started[0]]),
        "cpu": np.array([0.0] * m + [time.process_time() - started[1]]),
        "calls": np.array([0] * m + [1], np.int32)})


def _clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _window_step(blob: bytes | None, window: int, batch: int, keys: list[str], counts: Any) -> tuple[list[tuple], Any]:
    """operator.py's state path for ``count``: load the window (or a new one), step it, return
    (results, window)."""
    from skewlab.engine.runtimes.spark.window_state import WorkerWindow, key_fingerprints

    win = WorkerWindow.loads(blob) if blob is not None else WorkerWindow(window)
    step = win.step(batch, keys, counts, fps=key_fingerprints(keys))
    return step["results"], win


def make_blob_handler(window: int, stateless: bool = False) -> Callable[..., Iterator[Any]]:
    """``applyInPandasWithState`` function of ``blob`` and ``groups-G``: one ``WorkerWindow`` per state
    row; ``stateless``: of ``none``, the batch's counts without touching the state."""
    W = int(window)

    def handle(label: tuple, frames: Iterator[Any], state: Any) -> Iterator[Any]:
        started = _clocks()
        batch, keys, counts = _keys_counts(frames)
        if stateless:
            yield _out(batch, [(batch, k, c) for k, c in zip(keys, counts.tolist())], 0, 0, started)
            return
        results, win = _window_step(state.get[0] if state.exists else None, W, batch, keys, counts)
        data = win.dumps()
        state.update((data,))
        yield _out(batch, results, len(win), len(data), started)

    return handle


KEY_VALUE = "last long, ring binary"


def key_processor(window: int) -> Any:
    """``transformWithStateInPandas`` processor of ``tws-key``: a ``MapState`` key → (last batch, ring)."""
    import numpy as np
    from pyspark.sql.streaming import StatefulProcessor

    W = int(window)

    class KeyRings(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.rings = handle.getMapState("rings", "key string", KEY_VALUE)

        def handleInputRows(self, key: tuple, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            started = _clocks()
            batch, keys, counts = _keys_counts(rows)
            results, nbytes = [], 0
            for k, c in zip(keys, counts.tolist()):
                old = self.rings.getValue((k,))
                if old is None:
                    ring = np.zeros(W, "<i8")
                else:
                    last, data = old
                    ring = np.frombuffer(data, "<i8").copy()
                    if batch - last >= W:
                        ring[:] = 0
                    else:
                        for x in range(last + 1, batch + 1):
                            ring[x % W] = 0
                ring[batch % W] += c
                data = ring.tobytes()
                nbytes += len(data) + 8
                self.rings.updateValue((k,), (batch, data))
                results.append((batch, k, int(ring.sum())))
            yield _out(batch, results, len(keys), nbytes, started)

        def close(self) -> None:
            pass

    return KeyRings()


def group_processor(window: int, groups: int) -> Any:
    """``transformWithStateInPandas`` processor of ``tws-group-G``: a ``MapState`` key group → the
    group's ``WorkerWindow`` blob."""
    import numpy as np

    from pyspark.sql.streaming import StatefulProcessor

    from skewlab.engine.runtimes.spark.window_state import key_fingerprints

    W, G = int(window), int(groups)

    class GroupWindows(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.windows = handle.getMapState("windows", "grp int", BLOB_STATE)

        def handleInputRows(self, key: tuple, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            started = _clocks()
            batch, keys, counts = _keys_counts(rows)
            grp = ((key_fingerprints(keys) >> np.uint64(32)) % np.uint64(G)).astype(np.int64)
            results: list[tuple] = []
            n_keys = n_bytes = 0
            for g in np.unique(grp).tolist():
                sel = np.flatnonzero(grp == g)
                old = self.windows.getValue((g,))
                res, win = _window_step(None if old is None else old[0], W, batch, [keys[i] for i in sel.tolist()],
                                        counts[sel])
                data = win.dumps()
                self.windows.updateValue((g,), (data,))
                results.extend(res)
                n_keys += len(win)
                n_bytes += len(data)
            yield _out(batch, results, n_keys, n_bytes, started)

        def close(self) -> None:
            pass

    return GroupWindows()


def _query(spark: Any, layout: str, args: Any, keys: int) -> Any:
    """The streaming DataFrame of ``layout`` at ``keys`` keys (module docstring)."""
    from skewlab.engine.runtimes.spark.labels import worker_labels

    kind, G = parse_layout(layout)
    P = int(args.workers)
    opts = _gen_opts(argparse.Namespace(keys=int(keys), zipf=float(args.zipf), per_batch=args.per_batch))
    per_source = args.per_batch // SOURCES
    if kind == "groups":
        labels = group_labels(P, G)
    else:  # one state row per worker; tws-group: its groups inside the worker's MapState
        labels = tuple(x for x in worker_labels(P) for _ in range(G))
    src = spark.readStream.format("skewlab-generator").options(**opts).load()
    rows = src.mapInArrow(make_router(P, G, per_source, labels), ROW_SCHEMA).groupBy("label")
    if kind in ("none", "blob", "groups"):
        return rows.applyInPandasWithState(make_blob_handler(args.window, kind == "none"), OUT_SCHEMA, BLOB_STATE, "append", "NoTimeout")
    proc = key_processor(args.window) if kind == "tws-key" else group_processor(args.window, G)
    return rows.transformWithStateInPandas(proc, OUT_SCHEMA, "append", "None")


def run_layout(spark: Any, layout: str, args: Any, keys: int, tmp: str, batches: int | None = None) -> dict[str, Any]:
    """Run ``layout`` at ``keys`` keys for ``warmup + batches`` micro-batches: per-batch wall times
    and per-batch sums (result rows, sum of counts, state keys and bytes, handler seconds, calls)."""
    from pyspark.sql import functions as F

    from skewlab.engine.runtimes.spark.session import configure_state_store

    total = args.warmup + (args.batches if batches is None else batches)
    configure_state_store(spark, args.workers)
    seen: list[dict[str, Any]] = []

    def each(df: Any, batch_id: int) -> None:
        if len(seen) >= total:
            return
        r = df.agg(F.count("key").alias("results"), F.sum("count").alias("count_sum"),
                   F.sum("state_keys").alias("state_keys"), F.sum("state_bytes").alias("state_bytes"),
                   F.sum("seconds").alias("handler_seconds"), F.sum("cpu").alias("handler_cpu"),
                   F.sum("calls").alias("calls"),
                   F.max("batch").alias("batch")).collect()[0].asDict()
        seen.append({**{k: (v if v is not None else 0) for k, v in r.items()}, "id": int(batch_id),
                     "end": time.perf_counter()})

    tag = f"{layout}-{keys}-{len(os.listdir(tmp))}"
    q = (_query(spark, layout, args, keys).writeStream.outputMode("append").foreachBatch(each)
         .option("checkpointLocation", os.path.join(tmp, tag)).trigger(processingTime="0 seconds").start())
    try:
        while len(seen) < total:
            time.sleep(0.05)
            if not q.isActive:
                raise RuntimeError(f"layout {layout}, {keys} keys: the query stopped: {q.exception()}")
    finally:
        q.stop()
    times = [b["end"] - a["end"] for a, b in zip(seen, seen[1:])]
    measured = seen[args.warmup:total]
    return {
        "layout": layout, "keys": keys,
        "batch_seconds": times[args.warmup - 1:total - 1],
        "median_seconds": statistics.median(times[args.warmup - 1:total - 1]),
        "first_batch_ok": int(seen[0]["count_sum"]) == args.per_batch,
        "batches": [{k: b[k] for k in ("batch", "results", "count_sum", "state_keys", "state_bytes",
                                       "handler_seconds", "handler_cpu", "calls")} for b in measured],
    }


def summarise(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per layout: median [min–max] over rounds of the median batch seconds at each key count and of
    the per-round ratio (largest keys / smallest keys)."""
    out: dict[str, dict[str, Any]] = {}
    for layout in dict.fromkeys(r["layout"] for r in runs):
        mine = [r for r in runs if r["layout"] == layout]
        ks = sorted({r["keys"] for r in mine})
        row: dict[str, Any] = {"seconds": {}, "handler": {}, "cpu": {}, "state_keys": {}, "state_bytes": {}, "calls": {}}
        for k in ks:
            s = [r["median_seconds"] for r in mine if r["keys"] == k]
            row["seconds"][k] = (statistics.median(s), min(s), max(s))
            last = [r["batches"][-1] for r in mine if r["keys"] == k]
            row["handler"][k] = statistics.median(b["handler_seconds"] for b in last)
            row["cpu"][k] = statistics.median(b["handler_cpu"] for b in last)
            row["state_keys"][k] = statistics.median(b["state_keys"] for b in last)
            row["state_bytes"][k] = statistics.median(b["state_bytes"] for b in last)
            row["calls"][k] = statistics.median(b["calls"] for b in last)
        if len(ks) >= 2:
            by_round: dict[int, dict[int, float]] = {}
            for r in mine:
                by_round.setdefault(r["round"], {})[r["keys"]] = r["median_seconds"]
            ratios = [v[ks[-1]] / v[ks[0]] for v in by_round.values() if ks[0] in v and ks[-1] in v]
            row["ratio"] = (statistics.median(ratios), min(ratios), max(ratios)) if ratios else None
        out[layout] = row
    return out


def agreement(runs: list[dict[str, Any]]) -> list[str]:
    """Disagreements between layouts at one key count: measured batches whose result rows or sum of
    windowed counts differ (every layout computes the same windowed count of the same stream)."""
    bad = []
    for k in sorted({r["keys"] for r in runs}):
        ref: dict[int, tuple[int, int]] = {}
        for r in (x for x in runs if x["keys"] == k and x["layout"] != "none"):  # none: not windowed
            for b in r["batches"]:
                got = (int(b["results"]), int(b["count_sum"]))
                if ref.setdefault(int(b["batch"]), got) != got:
                    bad.append(f"{k} keys, batch {b['batch']}: {r['layout']} gives {got}, another layout "
                               f"{ref[int(b['batch'])]} (result rows, sum of counts)")
    return bad


def _fail(msg: str) -> int:
    print(f"bench_state_layout: {msg}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--master", default="local[2]")
    p.add_argument("--workers", type=int, default=8, help="workers = state partitions")
    p.add_argument("--per-batch", type=int, default=100_000, help="tuples per micro-batch")
    p.add_argument("--keys", default="10000,1000000", help="key counts, comma-separated (the ratio: last / first)")
    p.add_argument("--zipf", type=float, default=1.2)
    p.add_argument("--window", type=int, default=10, help="window in micro-batches")
    p.add_argument("--warmup", type=int, default=None, help="batches before the measured ones (default window + 2)")
    p.add_argument("--batches", type=int, default=3, help="measured micro-batches per run")
    p.add_argument("--rounds", type=int, default=1, help="runs of every (layout, keys), alternating order")
    p.add_argument("--layouts", default=DEFAULT_LAYOUTS,
                   help="comma-separated: none, blob, groups-G, tws-key, tws-group-G (G key groups per worker)")
    p.add_argument("--jvm-warmup", type=int, default=3, help="batches of an unmeasured first run (0: none)")
    p.add_argument("--json", default=None, help="write the runs and the summary as JSON to PATH ('-': stdout)")
    try:
        args = p.parse_args(argv)
    except SystemExit as exc:  # argparse's own usage errors are already one line and status 2
        return int(exc.code or 0)
    try:
        keys = [int(k) for k in args.keys.split(",") if k]
    except ValueError:
        return _fail(f"--keys {args.keys!r}: expected comma-separated integers")
    layouts = [x for x in args.layouts.split(",") if x]
    try:
        for x in layouts:
            parse_layout(x)
    except ValueError as exc:
        return _fail(f"--layouts: {exc}")
    if args.warmup is None:
        args.warmup = args.window + 2
    for name, value, low in (("--workers", args.workers, 1), ("--per-batch", args.per_batch, SOURCES),
                             ("--window", args.window, 1), ("--batches", args.batches, 1),
                             ("--rounds", args.rounds, 1), ("--jvm-warmup", args.jvm_warmup, 0)):
        if value < low:
            return _fail(f"{name} must be >= {low}, got {value}")
    if not keys or min(keys) < 1 or len(set(keys)) != len(keys):
        return _fail(f"--keys {args.keys!r}: expected distinct key counts >= 1")
    if not layouts or len(set(layouts)) != len(layouts):
        return _fail(f"--layouts {args.layouts!r}: expected distinct layouts")
    if args.per_batch % SOURCES:
        return _fail(f"--per-batch must be a multiple of {SOURCES} (the source instances)")
    if args.warmup < args.window:
        return _fail(f"--warmup {args.warmup} < --window {args.window}: the window would not be full when measured")
    if any(x.startswith("tws-") for x in layouts):
        try:
            import google.protobuf  # noqa: F401 - PySpark's transformWithStateInPandas needs it
        except ImportError:
            return _fail("the tws-* layouts need protobuf (pip install protobuf)")

    from skewlab.engine.runtimes.spark.session import get_session

    spark = get_session(args.master, "skewlab-bench-state-layout")
    tmp = tempfile.mkdtemp(prefix="skewlab-bench-state-")
    runs: list[dict[str, Any]] = []
    plan = [(x, k) for x in layouts for k in keys]
    try:
        if args.jvm_warmup:
            run_layout(spark, layouts[0], argparse.Namespace(**{**vars(args), "warmup": 1}), keys[0], tmp,
                       batches=args.jvm_warmup)
            print(f"(jvm warm-up: {layouts[0]}, {keys[0]} keys, not measured)  [{_load()}]", flush=True)
        for rnd in range(args.rounds):
            for layout, k in (plan if rnd % 2 == 0 else plan[::-1]):
                r = run_layout(spark, layout, args, k, tmp)
                r["round"] = rnd
                r["load"] = _load()
                runs.append(r)
                last = r["batches"][-1]
                print(f"round {rnd} {layout:<16} {k:>9,} keys  batch {r['median_seconds']:6.3f} s "
                      f"({', '.join(f'{s:.3f}' for s in r['batch_seconds'])}), handlers {last['handler_seconds']:.3f} s "
                      f"(cpu {last['handler_cpu']:.3f} s) "
                      f"in {last['calls']} calls, state {last['state_keys']:,} keys {last['state_bytes'] / 1e6:.1f} MB"
                      + ("" if r["first_batch_ok"] else "  FIRST BATCH COUNTS WRONG") + f"  [{r['load']}]", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    summary = summarise(runs)
    bad = agreement(runs)
    print(f"\nhash + count, Zipf {args.zipf}, {args.per_batch:,} tuples/batch, window {args.window}, {args.workers} "
          f"workers, {args.master}, {args.batches} measured batches after {args.warmup}; median [min-max] of "
          f"{args.rounds} round(s); {_load()}")
    print(f"{'layout':<16} " + " ".join(f"{f'batch s @ {k:,}':>26}" for k in keys)
          + f" {'ratio ' + str(keys[-1]) + '/' + str(keys[0]):>24}   handler wall s / cpu s / calls per batch @ each keys")
    for layout, row in summary.items():
        cells = " ".join(f"{s[0]:9.3f} [{s[1]:.3f}-{s[2]:.3f}]".rjust(26) for s in row["seconds"].values())
        ratio = row.get("ratio")
        print(f"{layout:<16} {cells} " + (f"{ratio[0]:9.2f} [{ratio[1]:.2f}-{ratio[2]:.2f}]".rjust(24) if ratio else
                                          f"{'-':>24}")
              + "   " + ", ".join(f"{row['handler'][k]:.3f}/{row['cpu'][k]:.3f}/{row['calls'][k]:.0f}" for k in row["handler"]))
    print("results agree across layouts: " + ("yes" if not bad else "NO\n  " + "\n  ".join(bad[:10])))
    ok = not bad and all(r["first_batch_ok"] for r in runs)
    out = {"args": vars(args), "runs": runs, "summary": {k: {**v, "seconds": {str(x): y for x, y in v["seconds"].items()}}
                                                          for k, v in summary.items()},
           "disagreements": bad, "ok": ok}
    if args.json == "-":
        print(json.dumps(out, indent=2, default=str))
    elif args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2, default=str)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
