#!/usr/bin/env python
"""Dashboard speed: the per-tick query with 1e5 stored intervals, and the initial page load.

Targets (issue, "Speed"): per-tick query ≤ 50 ms with 1e5 stored intervals; initial page load ≤ 1.5 s.

1. A SQLite file database is filled with one run of ``--intervals`` intervals (default 1e5) as the
   engine writes them: run metrics, ``--workers`` per-worker rows, 10 hot keys, 2 shadow rows and a
   routing size per interval, a migration and a ``rebalance`` event every 5th interval, an operator
   event every 10,000.  Bulk-inserted with SQLAlchemy core (the engine's ``record_interval`` would
   take minutes for 1e5 intervals; the rows are identical in shape).
2. **Per tick**: the engine appends one interval (``Store.record_interval``, not timed), then the
   dashboard's tick is timed: ``DashboardData.load(run, cursor)`` + ``DashboardData.commands(run)``
   (every query of a tick, cache cleared) — ``tick_query_ms`` — and the whole refresh callback through
   Dash's HTTP route (queries + patches + JSON) — ``tick_callback_ms``.  Also an idle tick (no new
   interval).  Median, p95 and max over ``--ticks`` ticks.
3. **Initial page load**, server side: a fresh app (cold caches: the run's event history is scanned
   once) answering ``GET /``, ``/_dash-layout`` (which carries the first render of every figure) and
   ``/_dash-dependencies`` — ``page_server_ms``; and, when Playwright and /usr/bin/chromium are
   available, in a real browser from navigation to every figure drawn: ``page_browser_cold_s`` (new
   browser context) and ``page_browser_warm_s`` (reload, JS cached) — median of ``--pages`` loads —
   and ``page_browser_js_mb``, the JavaScript the first cold load downloaded (2.5 MB with the
   vendored plotly.js basic bundle; 6.1 MB when ``dcc.Graph`` fetches Dash's full plotly.js).

Usage: ``python bench/bench_dashboard.py [--intervals 100000] [--workers 8] [--ticks 50] [--json]``
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sqlalchemy import insert  # noqa: E402

from skewlab.dashboard.app import create_app  # noqa: E402
from skewlab.dashboard.data import DashboardData  # noqa: E402
from skewlab.storage import IntervalRecord, connect  # noqa: E402
from skewlab.storage.models import (  # noqa: E402
    Event,
    HotKey,
    IntervalMetric,
    MigrationEvent,
    RoutingSize,
    ShadowResult,
    WorkerMetric,
)

CHROMIUM = "/usr/bin/chromium"
CHUNK = 20_000


def fill(store: Any, intervals: int, workers: int, seed: int = 0) -> int:
    """One run with ``intervals`` intervals of engine-shaped rows; returns the run id."""
    rng = np.random.default_rng(seed)
    run = store.create_run("mixed", {"theta_max": 0.08, "amax": 3000}, n_workers=workers,
                           config={"interval": 1.0, "operator": "count"}, name="bench")
    t0 = time.time() - intervals
    tables: dict[Any, list[dict[str, Any]]] = {t: [] for t in (IntervalMetric, WorkerMetric, HotKey, ShadowResult,
                                                                RoutingSize, MigrationEvent, Event)}

    def flush(conn: Any, force: bool = False) -> None:
        for model, rows in tables.items():
            if rows and (force or len(rows) >= CHUNK):
                conn.execute(insert(model.__table__), rows)
                rows.clear()

    with store.engine.begin() as conn:
        for i in range(intervals):
            loads = rng.gamma(30.0, 40.0, workers)
            mean = float(loads.mean())
            key = {"run_id": run, "batch_id": i, "interval": i}
            tables[IntervalMetric].append({
                **key, "wall_time": t0 + i, "tuples": int(loads.sum()), "algorithm": "mixed", "n_workers": workers,
                "imbalance": float(loads.max() / mean - 1), "theta_max_observed": float(np.abs(loads - mean).max() / mean),
                "seeds_imbalance": float((loads.max() - mean) / loads.sum()), "load_variance": float(loads.var()),
                "load_stddev": float(loads.std()), "replication": 1.0, "routing_table_size": 100 + i % 50,
                "migration_cost": 0.01, "plan_seconds": 0.001, "tuples_per_second": 1e7, "throughput": 5000.0,
                "batch_latency_ms": 800.0, "feasible": True, "note": "", "extra": "{}"})
            tables[WorkerMetric].extend({**key, "worker": w, "tuples": int(loads[w]), "cost": float(loads[w]),
                                         "distinct_keys": 100, "state_size": 1000.0, "processing_seconds": 0.01}
                                        for w in range(workers))
            tables[HotKey].extend({**key, "rank": r, "key": f"k{r}", "fingerprint": f"{r:016x}", "count": 500 - r,
                                   "share": 0.05, "workers": f"[{r % workers}]"} for r in range(10))
            tables[ShadowResult].extend({**key, "algorithm": a, "imbalance": v, "replication": 1.0,
                                         "migration_cost": 0.0, "note": ""} for a, v in (("hash", 0.4), ("pkg", 0.01)))
            tables[RoutingSize].append({**key, "entries": 100 + i % 50, "memory_bytes": None, "amax": 3000})
            if i % 5 == 0:
                tables[MigrationEvent].append({**key, "seq": 0, "wall_time": t0 + i, "algorithm": "mixed",
                                               "keys_moved": 3, "state_moved": 100.0, "migration_cost": 0.01,
                                               "pause_ms": 1.0, "detail": '{"reason": "rebalance"}'})
                tables[Event].append({"run_id": run, "batch_id": i, "interval": i, "wall_time": t0 + i,
                                      "kind": "rebalance", "detail": '{"keys": 3, "state_moved": 100.0}',
                                      "command_id": None, "dedupe": f"{i}:rebalance"})
            if i % 10_000 == 5_000:
                tables[Event].append({"run_id": run, "batch_id": i, "interval": i, "wall_time": t0 + i,
                                      "kind": "workers", "detail": f'{{"previous": {workers}, "workers": {workers}}}',
                                      "command_id": None, "dedupe": f"{i}:workers"})
            flush(conn)
        flush(conn, force=True)
    return run


def append(store: Any, run: int, i: int, workers: int, rng: np.random.Generator) -> None:
    loads = rng.gamma(30.0, 40.0, workers)
    store.record_interval(
        run, IntervalRecord.from_parts(i, i, {"tuples": int(loads.sum()), "algorithm": "mixed", "n_workers": workers,
                    "imbalance": float(loads.max() / loads.mean() - 1), "throughput": 5000.0, "batch_latency_ms": 800.0},
        workers=[{"worker": w, "tuples": int(v), "cost": float(v)} for w, v in enumerate(loads)],
        hot_keys=[{"key": f"k{r}", "count": 500 - r, "share": 0.05, "workers": [r % workers]} for r in range(10)],
        shadow={"hash": {"imbalance": 0.4}, "pkg": {"imbalance": 0.01}},
        routing={"entries": 120, "amax": 3000},
        migrations=[{"keys_moved": 3, "state_moved": 100.0}] if i % 5 == 0 else None,
        events=[{"kind": "rebalance", "detail": {"keys": 3}}] if i % 5 == 0 else None,
    ))


def stats(ms: list[float]) -> dict[str, float]:
    s = sorted(ms)
    return {"median": round(statistics.median(s), 2), "p95": round(s[min(len(s) - 1, int(0.95 * len(s)))], 2),
            "max": round(s[-1], 2)}


def tick_body(client: Any, run: int, cursor: dict[str, Any]) -> dict[str, Any]:
    """The refresh callback's request, as dash-renderer sends it on a tick."""
    dep = next(d for d in client.get("/_dash-dependencies").get_json() if "fig-imbalance.figure" in d["output"]
               and "allow_duplicate" not in d["output"] and "cursor.data" in d["output"])
    values = {"tick.n_intervals": 1, "run-select.value": run, "worker-view.value": "auto", "cursor.data": cursor,
              "imb-metrics.value": ["imbalance"], "tick.interval": 1000}

    def items(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"id": s["id"], "property": s["property"], "value": values.get(f"{s['id']}.{s['property']}")}
                for s in specs]

    outputs = [{"id": o.split(".")[0], "property": o.split(".")[1]} for o in dep["output"].strip(".").split("...")]
    return {"output": dep["output"], "outputs": outputs, "inputs": items(dep["inputs"]), "state": items(dep["state"]),
            "changedPropIds": ["tick.n_intervals"]}


def bench_ticks(db: str, run: int, workers: int, ticks: int) -> dict[str, Any]:
    store = connect(db)
    D = DashboardData(store)
    t = time.perf_counter()
    d = D.load(run)
    first_load_ms = (time.perf_counter() - t) * 1000
    cursor = {"run_id": run, "last_interval": d["last_interval"], "last_event_id": d["last_event_id"],
              "points": len(d["series"]["interval"])}
    rng = np.random.default_rng(1)
    nxt = d["last_interval"] + 1
    query, idle = [], []
    for _ in range(ticks):
        append(store, run, nxt, workers, rng)
        nxt += 1
        D.cache.clear()
        t = time.perf_counter()
        delta = D.load(run, cursor)
        D.commands(run)
        query.append((time.perf_counter() - t) * 1000)
        assert not delta["reset"] and delta["series"]["interval"] == [nxt - 1], delta["series"]["interval"]
        cursor = dict(cursor, last_interval=delta["last_interval"], last_event_id=delta["last_event_id"],
                      points=cursor["points"] + 1)
        D.cache.clear()
        t = time.perf_counter()
        D.load(run, cursor)
        D.commands(run)
        idle.append((time.perf_counter() - t) * 1000)

    # the whole callback over HTTP (queries + patches + JSON), same shape of ticks
    app = create_app(store=store)
    client = app.server.test_client()
    cb = []
    for _ in range(ticks):
        append(store, run, nxt, workers, rng)
        nxt += 1
        app.skewlab.data.cache.clear()
        body = tick_body(client, run, dict(cursor, ops=0, bars=True, log=[], mig=[]))
        t = time.perf_counter()
        r = client.post("/_dash-update-component", json=body)
        cb.append((time.perf_counter() - t) * 1000)
        assert r.status_code == 200, r.status_code
        cursor = r.get_json()["response"]["cursor"]["data"]
    store.close()
    return {"first_load_ms": round(first_load_ms, 1), "tick_query_ms": stats(query), "idle_tick_query_ms": stats(idle),
            "tick_callback_ms": stats(cb)}


def bench_page_server(db: str, pages: int) -> dict[str, Any]:
    out = []
    for _ in range(pages):
        t = time.perf_counter()
        app = create_app(db)  # cold: new caches, the run's events are scanned once
        client = app.server.test_client()
        for path in ("/", "/_dash-layout", "/_dash-dependencies"):
            assert client.get(path).status_code == 200
        out.append((time.perf_counter() - t) * 1000)
        app.skewlab.store.close()
    return {"page_server_ms": stats(out)}


def bench_page_browser(db: str, pages: int) -> dict[str, Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return {"page_browser": "skipped: playwright not installed"}
    if not os.access(CHROMIUM, os.X_OK):
        return {"page_browser": f"skipped: no {CHROMIUM}"}
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    app = create_app(db)
    srv = make_server("127.0.0.1", 0, app.server, threaded=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_port}/"
    drawn = ("() => ['fig-imbalance','fig-workers','fig-shadow','fig-hotkeys','fig-throughput','fig-routing',"
             "'fig-migrations'].every(id => { const g = document.querySelector('#' + id + ' .js-plotly-plot');"
             " return g && g._fullLayout && g.data && g.data.length; })")
    cold, warm = [], []
    args = ["--no-sandbox", "--headless=new", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"]
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=args)
        js_bytes: list[int] = []
        for k in range(pages):
            ctx = b.new_context(viewport={"width": 1600, "height": 1000})
            page = ctx.new_page()
            if k == 0:  # the JavaScript a cold load downloads (plotly.js is most of it)
                page.on("requestfinished", lambda r: js_bytes.append(r.sizes()["responseBodySize"])
                        if r.resource_type == "script" and len(cold) == 0 else None)
            t = time.perf_counter()
            page.goto(url)
            page.wait_for_function(drawn, timeout=60_000, polling=20)
            cold.append(time.perf_counter() - t)
            t = time.perf_counter()
            page.reload()
            page.wait_for_function(drawn, timeout=60_000, polling=20)
            warm.append(time.perf_counter() - t)
            ctx.close()
        b.close()
    srv.shutdown()
    app.skewlab.store.close()
    return {"page_browser_cold_s": round(statistics.median(cold), 2), "page_browser_warm_s": round(statistics.median(warm), 2),
            "page_browser_js_mb": round(sum(js_bytes) / 1e6, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--intervals", type=float, default=1e5, help="stored intervals (default 1e5)")
    ap.add_argument("--workers", type=int, default=8, help="workers per interval (default 8)")
    ap.add_argument("--ticks", type=int, default=50, help="ticks timed (default 50)")
    ap.add_argument("--pages", type=int, default=3, help="page loads timed (default 3)")
    ap.add_argument("--db", default=None, help="reuse/keep this SQLite file (default: a temporary one)")
    ap.add_argument("--no-browser", action="store_true", help="skip the browser page-load measurement")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    intervals = int(args.intervals)
    tmp = None
    if args.db is None:
        tmp = tempfile.TemporaryDirectory(prefix="skewlab-bench-dashboard-")
        path = os.path.join(tmp.name, "bench.sqlite")
    else:
        path = args.db
    db = f"sqlite:///{path}"
    store = connect(db)
    runs = [r for r in store.list_runs() if r.get("name") == "bench" and r["intervals"] >= intervals]
    t = time.perf_counter()
    run = int(runs[0]["id"]) if runs else fill(store, intervals, args.workers)
    fill_s = time.perf_counter() - t
    store.close()
    out: dict[str, Any] = {"intervals": intervals, "workers": args.workers, "fill_seconds": round(fill_s, 1)}
    out.update(bench_ticks(db, run, args.workers, args.ticks))
    out.update(bench_page_server(db, args.pages))
    if not args.no_browser:
        out.update(bench_page_browser(db, args.pages))
    out["targets"] = {"tick_query_ms": 50, "page_load_s": 1.5}
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:<22} {v}")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
