#!/usr/bin/env python
"""Latency of the batches that migrate keyed state on the executors (issue target: moving ~1e5 keys,
the batches that migrate take ≤ 1.5× a steady batch; Megaphone, VLDB 2019, is the anchor).

Usage::

    python bench/bench_migration.py [--master local[2]] [--per-batch 200000] [--keys 200000] [--zipf 1.0]
                                    [--window 6] [--workers 8] [--warmup 8] [--settle 5] [--reps 2]
                                    [--quick] [--json PATH|-]

One :class:`skewlab.engine.runtimes.spark.engine.SparkEngine` run (``skewlab-generator`` source, seed 0, 2 source
instances, rate 0, exactly ``--per-batch`` tuples per micro-batch, Zipf ``--zipf`` over ``--keys``
keys, windowed count over ``--window`` micro-batches, ``--workers`` workers = ``max_workers`` state
partitions, shadows off, trigger interval 1 ms).  It starts with ``consistent`` hashing (128 ring
points per worker).  After ``--warmup`` batches, and then every time the previous migration has been
imported and ``--settle`` further batches ran, the ``after_batch`` callback submits the next
operator command (``engine.store.submit_command``); per repetition:

* **small**: ``set-param replicas`` 128 → 129 (one more ring point per worker: ~0.8 % of the keys
  change owner, ~1e3 keys with the defaults);
* **big**: ``set-algorithm hash`` (hash and the ring agree on ~1/n of the keys: ~7/8 of the keys in
  state move, ~1.1e5 with the defaults);
* **big**: ``set-algorithm consistent`` (replicas 128) back: again ~7/8.

The number of workers never changes, so the steady batches before every migration are comparable.

A command submitted after batch ``b`` is applied at the end of batch ``b + 1`` (the *plan* batch:
the controller computes the moves, the driver publishes the orders), the old workers export in
``b + 2`` (*export* batch), the new ones import in ``b + 3`` (*import* batch; see
:mod:`skewlab.engine.runtimes.spark.engine`).  Per migration the bench reports, from the engine's migration row:
keys moved, bytes moved, ``latency_before_ms`` (median ``batch_latency_ms`` of the 5 batches before
the plan), the export and import batches' ``batch_latency_ms`` and their ratios, the pause (batches,
ms); and from its own clock the *period* of each batch — wall time from the end of the previous
batch's ``foreachBatch`` to the end of this one's: everything the batch costs, including what
``batch_latency_ms`` leaves out (Spark planning the batch, reading the routing snapshot and shipping
it in every input partition; on the driver the plan, publishing the next routing snapshot, the
checkpoint snapshot, the metrics write).  Steady period = median period of the 5 batches before
the plan batch and of the batches import + 2 .. import + 5 (on a shared machine the load drifts
within minutes; a reference on both sides of the migration halves that bias); *after* = import + 1.
Note that ``batch_latency_ms`` (the engine's ratios) is taken before the batch's commands are applied
and its next routing snapshot published, so the plan batch's driver work is in no engine latency.

Where the time goes, per batch (the bench wraps the engine instance's methods; engine code is not
changed): ``spark`` = the Spark job of the batch (``foreachBatch`` start to the collected output:
scan + routing, shuffle, the workers' handlers, state store commits); ``handler max`` / ``handler
sum`` = the workers' handler seconds (their summary rows: import, export, window step, results file,
state serialisation); ``driver`` = the rest of ``foreachBatch`` (unpack, controller, commands/plan,
publishing the routing snapshot, checkpoint snapshot, metrics); ``route`` = the size of the routing
snapshot the batch was routed with (the import batch's carries the export blobs; the driver reads it
and Spark pickles it into each input partition, each of which unpickles all of it).

Checks (cheap; the sink's correctness is tested elsewhere): every command produced one migration
row, and its ``keys_moved`` is in the expected range of the keys in state (small: 0.2–2 %, big:
75–95 %).  ``--quick``: a smoke run (one repetition: small, big, big back; 20k keys, 20k tuples per batch;
~40 s of batches after Spark starts at load 2, ~75 s at load 5).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

from skewlab.bench.common import write_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

SOURCES = 2
REPLICAS = 128
#: expected fraction of the keys in state that move, per kind of migration (loose: a check, not a figure)
EXPECTED = {"small": (0.002, 0.02), "big": (0.75, 0.95)}


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def schedule(reps: int, big_only: bool = False) -> list[tuple[str, str, dict[str, Any]]]:
    """The commands of the run, in order: (label, command kind, payload)."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    for _ in range(reps):
        if not big_only:
            out.append(("small", "set-param", {"params": {"replicas": REPLICAS + 1}}))
        out.append(("big", "set-algorithm", {"algorithm": "hash"}))
        out.append(("big", "set-algorithm", {"algorithm": "consistent", "params": {"replicas": REPLICAS}}))
    return out


def _median(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return float(statistics.median(xs)) if xs else None


def _progress(spark: Any, into: dict[int, dict[str, Any]]) -> None:
    """Spark's progress report of the previous batch (reported after its ``foreachBatch`` returned):
    ``durationMs`` (triggerExecution, addBatch, queryPlanning, walCommit, commitOffsets, ...) and the
    state operator's ``commitTimeMs``, keyed by batch id."""
    try:
        qs = spark.streams.active
        lp = qs[0].lastProgress if qs else None
        if lp is None:
            return
        d = json.loads(lp.json) if hasattr(lp, "json") else dict(lp)
        ops = d.get("stateOperators") or [{}]
        into[int(d["batchId"])] = {**{k: float(v) for k, v in (d.get("durationMs") or {}).items()},
                                   "stateCommitMs": float(ops[0].get("commitTimeMs", 0) or 0),
                                   "stateUpdatesMs": float(ops[0].get("allUpdatesTimeMs", 0) or 0)}
    except Exception:  # noqa: BLE001 - a missing report only leaves a gap in the breakdown
        pass


def run(args: Any, tmp: str, spark: Any, log=print) -> dict[str, Any]:
    """One engine run with the migrations of :func:`schedule`; returns per-batch and per-migration rows."""
    import skewlab.engine.runtimes.spark.operator as operator_mod
    from skewlab.engine.runtimes.spark.engine import EngineConfig, SparkEngine

    plan = schedule(args.reps, getattr(args, "big_only", False))
    cfg = EngineConfig(
        source="generator", db=f"sqlite:///{tmp}/mig.sqlite", checkpoint=os.path.join(tmp, "ckpt"),
        sink=os.path.join(tmp, "sink"), algorithm="consistent", params={"replicas": REPLICAS},
        workers=args.workers, max_workers=args.workers, sources=SOURCES, interval=0.001, rate=0,
        max_per_batch=args.per_batch, window=args.window, workload="zipf",
        workload_params={"keys": args.keys, "z": args.zipf}, shadow=[], master=args.master,
        max_batches=args.warmup + len(plan) * (args.settle + 8) + 10,  # a safety cap
    )
    batches: dict[int, dict[str, Any]] = {}  # batch id -> timings and figures
    progress: dict[int, dict[str, Any]] = {}  # batch id -> Spark's durationMs
    cur: dict[str, Any] = {}
    migrations: list[dict[str, Any]] = []  # the engine's migration rows, as driver_step.track_migrations returns them
    events: list[dict[str, Any]] = []  # one per command
    st = {"next": 0, "submit_after": args.warmup - 1, "waiting": None, "last_end": None, "route_copies": {}}

    eng = SparkEngine(cfg, log=(lambda m: None) if not args.verbose else (lambda m: log("  " + m)))

    # ---- instrumentation: wrap the engine instance's steps (engine code unchanged)
    orig_process, orig_unpack = eng.process_batch, operator_mod.unpack_output
    import skewlab.engine.runtimes.spark.driver_step as driver_step

    orig_apply, orig_publish, orig_save = driver_step.apply_commands, driver_step.next_route, eng.driver.save
    orig_track, orig_control = driver_step.track_migrations, driver_step.control_payloads

    def process_batch(df: Any, batch_id: int) -> None:
        cur.clear()
        cur.update(batch=int(batch_id), t_start=time.perf_counter(), plan_ms=0.0, publish_ms=0.0, save_ms=0.0)
        try:
            orig_process(df, batch_id)
        finally:
            end = time.perf_counter()
            if "t_spark_end" in cur:  # applied (not a refused batch while stopping)
                row = dict(cur)
                row["total_ms"] = (end - row["t_start"]) * 1e3
                row["period_ms"] = (end - st["last_end"]) * 1e3 if st["last_end"] is not None else None
                row["spark_ms"] = (row["t_spark_end"] - row["t_start"]) * 1e3
                row["driver_ms"] = row["total_ms"] - row["spark_ms"]
                batches[int(batch_id)] = {k: v for k, v in row.items() if not k.startswith("t_")}
            st["last_end"] = end

    def unpack_output(table: Any) -> Any:
        cur["t_spark_end"] = time.perf_counter()
        u = orig_unpack(table)
        cur["unpack_ms"] = (time.perf_counter() - cur["t_spark_end"]) * 1e3
        s = u.summaries.values()
        cur["handler_max_ms"] = max((x.seconds for x in s), default=0.0) * 1e3
        cur["handler_sum_ms"] = sum(x.seconds for x in s) * 1e3
        cur["exported_keys"] = sum(x.exported_keys for x in s)
        cur["imported_keys"] = sum(x.imported_keys for x in s)
        cur["export_bytes"] = sum(x.export_bytes for x in s)
        cur["state_keys"] = sum(x.keys for x in s)
        cur["state_bytes"] = sum(x.state_bytes for x in s)
        cur["tuples"] = int(u.counts.sum())
        return u

    def timed(name: str, fn: Any) -> Any:
        def wrapper(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                if cur:
                    cur[name] = cur.get(name, 0.0) + (time.perf_counter() - t) * 1e3
        return wrapper

    def track(migrating: Any, batch_id: int, exports: Any, latency_ms: float, *a: Any) -> Any:
        cur["latency_ms"] = latency_ms
        left, done = orig_track(migrating, batch_id, exports, latency_ms, *a)
        migrations.extend(done)
        return left, done

    def after(e: Any, b: int) -> None:
        _progress(spark, progress)
        route = e.driver.routes.path(b + 1)
        row = cur
        row["route_next_bytes"] = os.path.getsize(route) if os.path.exists(route) else None
        if e.snapshot.next_imports and len(st["route_copies"]) < 4:  # the import batch's snapshot, timed after the run
            with open(route, "rb") as fh:
                st["route_copies"][b + 1] = fh.read()
        w = st["waiting"]
        if w is not None and len(migrations) > w["rows_before"]:
            w["rows"] = migrations[w["rows_before"]:]
            w["import_batch"] = b
            st["waiting"] = None
            st["submit_after"] = b + args.settle
        if st["waiting"] is None and b >= st["submit_after"]:
            if st["next"] < len(plan):
                label, kind, payload = plan[st["next"]]
                st["next"] += 1
                keys_state = sum(e.snapshot.worker_keys.values())
                cid = e.store.submit_command(kind, payload, run_id=e.snapshot.run_id)
                ev = {"label": label, "command": kind, "payload": payload, "command_id": cid, "submitted_after": b,
                      "keys_in_state": keys_state, "rows_before": len(migrations), "load": _load()}
                events.append(ev)
                st["waiting"] = ev
                log(f"  batch {b}: submitted {label} {kind} {json.dumps(payload)} ({keys_state} keys in state)  "
                    f"[load {ev['load']}]")
            elif b >= st["submit_after"]:
                e.cfg.max_batches = e.driver.batches_done  # done: stop after this batch

    eng.process_batch = process_batch
    operator_mod.unpack_output = unpack_output
    # the driver's step (engine/runtimes/spark/driver_step.py) calls these module functions by name
    driver_step.apply_commands = timed("plan_ms", orig_apply)
    driver_step.next_route = timed("publish_ms", orig_publish)
    # inside publish: composing the move orders, the per-worker control payload, writing the file (the rest
    # of publish_ms is building and pickling the RoutingSnapshot)
    # (on the class: the controller is pickled into every checkpoint snapshot, a wrapper in its __dict__ is not
    # picklable; restored below)
    from skewlab.engine.control.controller import Controller

    orig_drain = Controller.drain_orders
    Controller.drain_orders = timed("orders_ms", orig_drain)
    driver_step.control_payloads = timed("control_ms", orig_control)  # read by next_route at each call
    eng.driver.routes.publish = timed("write_ms", eng.driver.routes.publish)
    eng.driver.save = timed("save_ms", orig_save)
    driver_step.track_migrations = track
    eng.driver.after_batch = lambda b: after(eng, b)
    load_start = _load()
    t0 = time.time()
    try:
        eng.run()
    finally:
        operator_mod.unpack_output = orig_unpack
        Controller.drain_orders = orig_drain
        driver_step.apply_commands, driver_step.next_route = orig_apply, orig_publish
        driver_step.track_migrations, driver_step.control_payloads = orig_track, orig_control
    wall = time.time() - t0
    stored = eng.store.migration_events(eng.snapshot.run_id)
    for b, d in progress.items():
        if b in batches:
            batches[b]["spark_progress"] = d
            batches[b]["trigger_ms"] = d.get("triggerExecution")
            batches[b]["outside_add_ms"] = d.get("triggerExecution", 0) - d.get("addBatch", 0)
            batches[b]["state_commit_ms"] = d.get("stateCommitMs")
    eng.store.close()

    # ---- per migration
    rows_out: list[dict[str, Any]] = []
    checks: list[str] = []
    for ev in events:
        rows = ev.get("rows") or []
        if not rows:
            checks.append(f"{ev['label']} {ev['command']}: no migration row")
            continue
        m = rows[0]
        d = m["detail"]
        xb, ib = d["export_batch"], d["import_batch"]
        pb = xb - 1
        # steady reference: the 5 batches before the plan and import + 2 .. import + 5 (the load of the shared
        # machine drifts by 2x within minutes; both sides of the migration halve that bias)
        steady_ids = [b for b in list(range(pb - 5, pb)) + list(range(ib + 2, ib + 6)) if b in batches]
        steady_period = _median([batches[b]["period_ms"] for b in steady_ids])
        spread = [batches[b]["period_ms"] for b in steady_ids if batches[b].get("period_ms")]

        def fig(b: int, steady: float | None = steady_period) -> dict[str, Any]:
            r = dict(batches.get(b, {}))
            r["route_bytes"] = batches.get(b - 1, {}).get("route_next_bytes")  # the snapshot b was routed with
            r["period_ratio"] = r["period_ms"] / steady if steady and r.get("period_ms") else None
            return r

        lo, hi = EXPECTED[ev["label"]]
        keys_moved = sum(r["keys_moved"] for r in rows)
        frac = keys_moved / ev["keys_in_state"] if ev["keys_in_state"] else 0.0
        if not lo <= frac <= hi:
            checks.append(f"{ev['label']} {ev['command']}: {keys_moved} keys moved = {frac:.3%} of "
                          f"{ev['keys_in_state']} in state, expected {lo:.1%}–{hi:.1%}")
        before = d["latency_before_ms"]
        steady_rows = [batches[b] for b in steady_ids]
        rows_out.append({
            "label": ev["label"], "command": ev["command"], "payload": ev["payload"], "load": ev["load"],
            "keys_in_state": ev["keys_in_state"], "keys_moved": keys_moved, "moved_fraction": frac,
            "bytes_moved": sum(r["bytes_moved"] for r in rows), "migration_rows": len(rows),
            "plan_batch": pb, "export_batch": xb, "import_batch": ib,
            "latency_before_ms": before,
            "latency_export_ms": d["latency_export_ms"], "latency_import_ms": d["latency_import_ms"],
            "export_ratio": d["latency_export_ms"] / before if before else None,
            "import_ratio": d["latency_import_ms"] / before if before else None,
            "pause_batches": m["pause_batches"], "pause_ms": m["pause_ms"],
            "steady_period_ms": steady_period, "steady_batches": steady_ids,
            "steady_period_min_ms": min(spread, default=None), "steady_period_max_ms": max(spread, default=None),
            "steady": {k: _median([r.get(k) for r in steady_rows]) for k in
                       ("period_ms", "latency_ms", "spark_ms", "driver_ms", "handler_max_ms", "handler_sum_ms",
                        "plan_ms", "publish_ms", "save_ms", "unpack_ms", "route_next_bytes", "trigger_ms", "outside_add_ms",
                        "orders_ms", "control_ms", "write_ms",
                        "state_commit_ms")},
            "steady_route_bytes": _median([batches.get(b - 1, {}).get("route_next_bytes") for b in steady_ids]),
            "plan": fig(pb), "export": fig(xb), "import": fig(ib), "after": fig(ib + 1),
        })
    if len(stored) < sum(len(ev.get("rows") or []) for ev in events):
        checks.append(f"the store holds {len(stored)} migration rows, the engine returned more")
    if len(events) < len(plan):
        checks.append(f"only {len(events)} of {len(plan)} commands were submitted (safety cap reached?)")

    # ---- what carrying the blobs costs in Python, offline: unpickle the import batch's routing snapshot
    carry = []
    from skewlab.engine.runtimes.spark.messages import ImportOrder
    from skewlab.engine.runtimes.spark.topology import RoutingSnapshot

    for b, data in st["route_copies"].items():
        t = time.perf_counter()
        snap = RoutingSnapshot.loads(data)
        t_load = time.perf_counter() - t
        t = time.perf_counter()
        enc = [ImportOrder(x).encode() for bl in snap.imports.values() for x in bl]
        t_enc = time.perf_counter() - t
        carry.append({"batch": b, "route_bytes": len(data), "blobs": sum(len(v) for v in snap.imports.values()),
                      "blob_bytes": sum(x.bytes for v in snap.imports.values() for x in v),
                      "import_rows_bytes": sum(map(len, enc)), "unpickle_ms": t_load * 1e3, "encode_ms": t_enc * 1e3})
    return {"migrations": rows_out, "batches": batches, "checks": checks, "carry": carry,
            "load_start": load_start, "load_end": _load(), "wall_seconds": wall, "run_id": eng.snapshot.run_id}


def _f(x: Any, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def print_table(res: dict[str, Any], out=print) -> None:
    out("| migration | keys moved | MB moved | steady period ms (min–max) | plan × | export × | import × | after × | "
        "steady latency ms | export latency × | import latency × | pause | load |")
    out("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for m in res["migrations"]:
        what = m["payload"].get("algorithm") or f"replicas {m['payload']['params']['replicas']}"
        out(f"| {m['label']}: {m['command']} {what} | {m['keys_moved']:,} | {m['bytes_moved'] / 1e6:.1f} | "
            f"{_f(m['steady_period_ms'], '.0f')} ({_f(m['steady_period_min_ms'], '.0f')}–{_f(m['steady_period_max_ms'], '.0f')}) | "
            f"{_f(m['plan']['period_ratio'], '.2f')} | {_f(m['export']['period_ratio'], '.2f')} | "
            f"{_f(m['import']['period_ratio'], '.2f')} | {_f(m['after']['period_ratio'], '.2f')} | "
            f"{_f(m['latency_before_ms'], '.0f')} | {_f(m['export_ratio'], '.2f')} | {_f(m['import_ratio'], '.2f')} | "
            f"{m['pause_batches']} b, {_f(m['pause_ms'], '.0f')} ms | {m['load']} |")
    out("")
    out("Where the time goes (ms; steady = median of the 5 batches before the plan and import + 2 .. + 5; "
        "after = import + 1):")
    out("| migration | batch | period | Spark outside foreachBatch | spark job | state commit | handler max | handler sum | "
        "driver | of which plan | publish (orders, control, write) | snapshot | routed with MB |")
    out("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for i, m in enumerate(res["migrations"]):
        for name in ("steady", "plan", "export", "import", "after"):
            r = m[name]
            route = m["steady_route_bytes"] if name == "steady" else r.get("route_bytes")
            out(f"| {i + 1} {m['label']} | {name} | {_f(r.get('period_ms'), '.0f')} | {_f(r.get('outside_add_ms'), '.0f')} | "
                f"{_f(r.get('spark_ms'), '.0f')} | {_f(r.get('state_commit_ms'), '.0f')} | "
                f"{_f(r.get('handler_max_ms'), '.0f')} | {_f(r.get('handler_sum_ms'), '.0f')} | "
                f"{_f(r.get('driver_ms'), '.0f')} | {_f(r.get('plan_ms'), '.0f')} | {_f(r.get('publish_ms'), '.0f')} "
                f"({_f(r.get('orders_ms'), '.0f')}, {_f(r.get('control_ms'), '.0f')}, {_f(r.get('write_ms'), '.0f')}) | "
                f"{_f(r.get('save_ms'), '.0f')} | {_f(route and route / 1e6, '.2f')} |")
    if res["carry"]:
        out("")
        for c in res["carry"]:
            out(f"routing snapshot of import batch {c['batch']}: {c['route_bytes'] / 1e6:.2f} MB ({c['blobs']} blobs, "
                f"{c['blob_bytes'] / 1e6:.2f} MB), unpickled in {c['unpickle_ms']:.0f} ms (once per input partition), "
                f"import rows encoded in {c['encode_ms']:.0f} ms ({c['import_rows_bytes'] / 1e6:.2f} MB)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--master", default="local[2]")
    p.add_argument("--per-batch", type=int, default=200_000, help="tuples per micro-batch")
    p.add_argument("--keys", type=int, default=200_000)
    p.add_argument("--zipf", type=float, default=1.0)
    p.add_argument("--window", type=int, default=6, help="window in micro-batches")
    p.add_argument("--workers", type=int, default=8, help="workers = max_workers = state partitions")
    p.add_argument("--warmup", type=int, default=8, help="batches before the first command")
    p.add_argument("--settle", type=int, default=5, help="batches after an import before the next command")
    p.add_argument("--reps", type=int, default=2, help="repetitions of (small, big, big back)")
    p.add_argument("--big-only", action="store_true", help="no small migrations")
    p.add_argument("--quick", action="store_true", help="smoke run: 20k tuples/batch, 20k keys, 1 repetition")
    p.add_argument("--verbose", action="store_true", help="print the engine's status lines")
    p.add_argument("--json", default=None, help="write the results as JSON to PATH ('-': stdout)")
    args = p.parse_args(argv)
    if args.quick:
        args.per_batch, args.keys, args.warmup, args.settle, args.reps = 20_000, 20_000, 7, 5, 1
    if args.per_batch % SOURCES:
        p.error(f"--per-batch must be a multiple of {SOURCES}")
    if args.warmup < args.window + 1 or args.settle < 5:
        p.error("--warmup must exceed --window (a full window before the first migration) and --settle be >= 5 "
                "(the steady figures are the 5 batches before a plan)")
    from skewlab.engine.runtimes.spark.session import get_session

    spark = get_session(args.master, "skewlab-bench-migration")
    tmp = tempfile.mkdtemp(prefix="skewlab-bench-mig-")
    print(f"Zipf {args.zipf} over {args.keys:,} keys, {args.per_batch:,} tuples/batch, window {args.window}, "
          f"{args.workers} workers, {args.master}  [load {_load()}]", flush=True)
    try:
        res = run(args, tmp, spark, log=lambda m: print(m, flush=True))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res["args"] = vars(args)
    res["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform()}
    print(f"\n{res['wall_seconds']:.0f} s, load at start {res['load_start']}, at end {res['load_end']}\n")
    print_table(res)
    for c in res["checks"]:
        print(f"CHECK FAILED: {c}")
    write_json(args.json, res, indent=2)
    return 1 if res["checks"] else 0


if __name__ == "__main__":
    sys.exit(main())
