"""Performance benchmarks (``skewlab bench perf``): how each cost grows as the work grows.

1. **Routing throughput** of every registered grouping vs ``hash`` on the same Zipf stream
   (:func:`skewlab.bench.bench_routing.zipf_ranks`; streaming groupings measured by
   :func:`skewlab.bench.bench_routing.measure`, rebalancers by :func:`skewlab.bench.bench_routing.measure_rebalancer` — the same loop after
   one plan from the stream's own statistics has been applied, so their routing-table lookups are
   exercised).  CPU seconds (``time.process_time``; the machine is shared, and wall-clock time would also
   count time spent waiting for a core) of ``route`` calls only, best of the repeats, for growing stream
   lengths (log-log: time should grow linearly).
2. **Plan generation time** of every rebalancer vs key count K and workers, with
   :func:`skewlab.bench.bench_plan.measure` (Zipf costs z = 0.85, 10 % of the costs permuted between the two
   intervals; the second plan is timed).  Once a plan takes longer than ``BUDGET`` seconds, larger K for
   that algorithm are skipped (reported).
3. **Spark end-to-end** tuples/s of the stateful engine per grouping vs what a PySpark user writes for
   the same windowed per-key count (``groupBy(key).applyInPandasWithState``, one state per key), with
   :func:`skewlab.bench.bench_spark.run_baseline` / ``run_engine`` (skipped in ``--quick`` and with
   ``--skip-spark``; a few groupings and batches so ``bench all`` stays within 30 minutes).
4. **Store query time vs stored rows** — the per-tick read a dashboard does: ``Store.interval_metrics(run,
   since_interval=last − 1)`` (incremental: one new row), the initial window (``limit=500, latest=True``)
   and a full read, on a SQLite store holding 10³ … 10⁵ interval rows of one run (the first rows written
   with ``Store.record_interval``, the engine's path, whose per-row cost is also reported; the rest
   bulk-inserted).  **Hook:** if a module ``skewlab.bench.bench_dashboard`` exists and defines
   ``measure_for_bench(quick: bool, seed: int) -> list[dict]`` (rows with ``stored_rows``, ``query``,
   ``seconds``), its rows are added to the same figure and table.

Times depend on the machine and its load (recorded in the section); ratios are measured within one run.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import statistics
import tempfile
import time
import types
from typing import Any

import numpy as np

from skewlab.bench.common import Context, Section, check, legend_once, md_table, new_figure, save_figure, style
from skewlab.engine.algorithms import registry
from skewlab.engine.algorithms.keys import Vocabulary

KEY = "perf"
TITLE = "Performance — routing, plan generation, Spark end-to-end, store queries"
BUDGET = 5.0


def sizes(quick: bool) -> dict[str, Any]:
    if quick:
        return {"route_keys": 10_000, "route_messages": [10_000, 100_000], "route_workers": 10, "repeat": 1,
                "plan_keys": [1_000, 10_000], "plan_workers": [10], "plan_repeat": 1,
                "store_rows": [100, 1_000], "spark": None}
    return {"route_keys": 100_000, "route_messages": [100_000, 1_000_000, 4_000_000], "route_workers": 50,
            "repeat": 2, "plan_keys": [10_000, 100_000, 1_000_000], "plan_workers": [10, 40], "plan_repeat": 1,
            "store_rows": [1_000, 10_000, 100_000],
            # the baseline calls Python once per key and micro-batch, which is slow: few, small batches
            "spark": {"groupings": ["hash", "pkg", "mixed"], "batches": 2, "warmup": 1, "per_batch": 200_000,
                      "workers": 8, "keys": 100_000, "zipf": 1.0, "window": 10, "master": "local[2]"}}


def units(quick: bool, seeds: int = 1) -> int:
    s = sizes(quick)
    return len(s["route_messages"]) + len(s["plan_keys"]) + 1 + (1 + len(s["spark"]["groupings"]) if s["spark"] else 1)


# ---------------------------------------------------------------------------------------------
# 1. routing
# ---------------------------------------------------------------------------------------------
def _in_range(workers: np.ndarray, n: int) -> bool:
    return bool(workers.size == 0 or (workers.min() >= 0 and workers.max() < n))


def _routing(ctx: Context, S) -> list[dict[str, Any]]:
    from skewlab.bench.bench_routing import measure, measure_rebalancer, zipf_ranks

    K, n = S["route_keys"], S["route_workers"]
    mmax = max(S["route_messages"])
    ranks = zipf_ranks(mmax, K, 1.0, ctx.seed)
    fps_all = Vocabulary([str(i) for i in range(K)]).fps[ranks]
    # CPU time of the process (time.process_time): on the shared 2-core machine wall-clock time also counts the
    # time this process waits for a core; routing is single-threaded, so CPU time is the cost of route() itself
    args = types.SimpleNamespace(workers=n, sources=1, batch=100_000, repeat=S["repeat"], seed=ctx.seed, clock="cpu")
    rows = []
    for m in S["route_messages"]:
        fps, rk = fps_all[:m], ranks[:m]
        for name in registry.names():
            try:
                if registry.get(name).rebalancing:
                    r = measure_rebalancer(name, fps, rk, args)
                else:
                    r = measure(name, fps, rk, args, extra=lambda g, w: {"in_range": _in_range(w, n)})
            except Exception as exc:  # report, keep measuring the others
                r = {"algorithm": name, "error": f"{type(exc).__name__}: {exc}"}
            r["messages"] = m
            rows.append(r)
        hash_rate = next(r["keys_per_s"] for r in rows if r["algorithm"] == "hash" and r["messages"] == m)
        for r in rows:
            if r["messages"] == m and "keys_per_s" in r:
                r["ratio_vs_hash"] = r["keys_per_s"] / hash_rate
        ctx.tick(f"perf routing {m:,}")
    return rows


# ---------------------------------------------------------------------------------------------
# 2. plan time
# ---------------------------------------------------------------------------------------------
def _plans(ctx: Context, S) -> list[dict[str, Any]]:
    from skewlab.bench.bench_plan import fluctuate, measure, zipf_costs
    from skewlab.engine.algorithms.keys import mix64

    names = [n for n in registry.names() if registry.get(n).rebalancing]
    rows: list[dict[str, Any]] = []
    too_slow: set[str] = set()
    for K in sorted(S["plan_keys"]):
        rng = np.random.default_rng(ctx.seed)
        keys = mix64(np.arange(K, dtype=np.uint64) + np.uint64(ctx.seed) * np.uint64(K))
        cost1 = zipf_costs(K, 0.85, 10.0, rng)
        cost2 = fluctuate(cost1, 0.1, rng)
        for n in S["plan_workers"]:
            for name in names:
                if name in too_slow:
                    rows.append({"algorithm": name, "keys": K, "workers": n, "skipped": f"a plan took > {BUDGET:g} s at smaller K"})
                    continue
                declared = {p.name for p in registry.get(name).params}
                params = {"theta_max": 0.08} if "theta_max" in declared else {}
                try:
                    row = measure(name, params, K, n, cost1, cost2, keys, S["plan_repeat"])
                except Exception as exc:
                    row = {"keys": K, "workers": n, "error": f"{type(exc).__name__}: {exc}"}
                row = {"algorithm": name, **row}
                rows.append(row)
                if max(row.get("plan_seconds", 0.0), row.get("first_plan_seconds", 0.0)) > BUDGET:
                    too_slow.add(name)
        ctx.tick(f"perf plans K={K:,}")
    return rows


# ---------------------------------------------------------------------------------------------
# 3. Spark
# ---------------------------------------------------------------------------------------------
def _spark(ctx: Context, S) -> dict[str, Any]:
    cfg = S["spark"]
    if cfg is None:
        return {"skipped": "quick mode"}
    if getattr(ctx, "skip_spark", False):
        return {"skipped": "--skip-spark"}
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return {"skipped": "no Java runtime"}
    try:
        from skewlab.bench.bench_spark import perf_args, run_baseline, run_engine
        from skewlab.engine.runtimes.spark.session import get_session
    except Exception as exc:  # pyspark missing
        return {"skipped": f"Spark unavailable: {exc}"}
    args = perf_args(cfg)
    tmp = tempfile.mkdtemp(prefix="skewlab-bench-spark-")
    out: dict[str, Any] = {"config": cfg, "groupings": {}}
    try:
        spark = get_session(cfg["master"], "skewlab-bench")
        out["baseline"] = run_baseline(spark, args, tmp, tag="first")
        ctx.tick("perf spark baseline")
        base = out["baseline"]["tuples_per_second"]
        for name in cfg["groupings"]:
            try:
                r = run_engine(name, args, tmp)
                r["ratio_vs_baseline"] = r["tuples_per_second"] / base if base else 0.0
            except Exception as exc:
                r = {"error": f"{type(exc).__name__}: {exc}"}
            out["groupings"][name] = r
            ctx.tick(f"perf spark {name}")
        # the baseline again: the machine is shared and warms up (JIT, Python workers); the spread of the two
        # baseline runs shows how much of a ratio is noise
        out["baseline_again"] = run_baseline(spark, args, tmp, tag="last")
        b2 = out["baseline_again"]["tuples_per_second"]
        for r in out["groupings"].values():
            if "tuples_per_second" in r and b2:
                r["ratio_vs_baseline_again"] = r["tuples_per_second"] / b2
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


# ---------------------------------------------------------------------------------------------
# 4. store
# ---------------------------------------------------------------------------------------------
def _metrics_row(i: int, rng: np.random.Generator) -> dict[str, Any]:
    return {"tuples": 100_000, "algorithm": "mixed", "n_workers": 8, "imbalance": float(rng.random()),
            "theta_max_observed": float(rng.random()), "seeds_imbalance": float(rng.random() / 8),
            "load_variance": float(rng.random() * 1e6), "load_stddev": float(rng.random() * 1e3),
            "replication": 1.0, "routing_table_size": int(rng.integers(0, 3000)),
            "migration_cost": float(rng.random() / 10), "plan_seconds": float(rng.random() / 100),
            "tuples_per_second": 1e7, "throughput": 1e5, "batch_latency_ms": 50.0, "feasible": True, "note": ""}


def _store(ctx: Context, S) -> dict[str, Any]:
    from sqlalchemy import insert

    from skewlab.storage import IntervalRecord, connect
    from skewlab.storage.models import IntervalMetric

    tmp = tempfile.mkdtemp(prefix="skewlab-bench-store-")
    rng = np.random.default_rng(ctx.seed)
    rows: list[dict[str, Any]] = []
    writes: list[float] = []
    try:
        store = connect(f"sqlite:///{tmp}/bench.sqlite")
        run_id = store.create_run("mixed", {"theta_max": 0.08}, seed=ctx.seed, n_workers=8, workload="zipf")
        stored = 0
        targets = sorted(S["store_rows"])
        engine_path = min(200, targets[0])
        t_base = time.time()
        for i in range(engine_path):  # the engine's own write path
            t0 = time.perf_counter()
            store.record_interval(run_id, IntervalRecord.from_parts(i, i, _metrics_row(i, rng), wall_time=t_base + i))
            writes.append(time.perf_counter() - t0)
        stored = engine_path
        table = IntervalMetric.__table__
        for target in targets:
            if target > stored:
                chunk = []
                for i in range(stored, target):
                    r = _metrics_row(i, rng)
                    r.update(run_id=run_id, batch_id=i, interval=i, wall_time=t_base + i, extra="{}")
                    chunk.append(r)
                    if len(chunk) == 20_000:
                        with store.engine.begin() as conn:
                            conn.execute(insert(table), chunk)
                        chunk = []
                if chunk:
                    with store.engine.begin() as conn:
                        conn.execute(insert(table), chunk)
                stored = target
            queries = {
                "tick (since_interval = last − 1)": lambda: store.interval_metrics(run_id, since_interval=stored - 2),
                "initial window (latest 500)": lambda: store.interval_metrics(run_id, limit=500, latest=True),
                "full read": lambda: store.interval_metrics(run_id),
            }
            for qname, fn in queries.items():
                times, got = [], 0
                for _ in range(5 if stored <= 10_000 else 3):
                    t0 = time.perf_counter()
                    got = len(fn())
                    times.append(time.perf_counter() - t0)
                rows.append({"stored_rows": stored, "query": qname, "seconds": statistics.median(times),
                             "rows_returned": got})
        store.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = {"rows": rows, "write_seconds_median": statistics.median(writes) if writes else None,
           "writes": len(writes)}
    rows_d, hook = _dashboard(ctx, S)
    out["rows"] += rows_d
    out["dashboard_hook"] = hook
    return out


def _dashboard(ctx: Context, S) -> tuple[list[dict[str, Any]], str]:
    """The dashboard's own tick, when ``bench/bench_dashboard.py`` (another module's benchmark) is present.

    Preferred contract: ``measure_for_bench(quick, seed) -> rows``.  Otherwise its ``fill(store, intervals,
    workers, seed)`` and ``bench_ticks(db, run, workers, ticks)`` are used: a fresh SQLite store per size,
    filled with engine-shaped rows, then the median of ``DashboardData.load + commands`` per tick
    (``tick_query_ms``) and of the whole refresh callback over HTTP (``tick_callback_ms``).
    """
    if importlib.util.find_spec("skewlab.bench.bench_dashboard") is None:
        return [], "bench/bench_dashboard.py not present (hook unused)"
    try:
        mod = importlib.import_module("skewlab.bench.bench_dashboard")
    except Exception as exc:
        return [], f"skewlab.bench.bench_dashboard could not be imported ({type(exc).__name__}: {exc})"
    rows: list[dict[str, Any]] = []
    try:
        fn = getattr(mod, "measure_for_bench", None)
        if fn is not None:
            for r in fn(ctx.quick, ctx.seed):
                rows.append({**r, "query": f"dashboard: {r.get('query', 'tick')}"})
            return rows, "skewlab.bench.bench_dashboard.measure_for_bench"
        if not (hasattr(mod, "fill") and hasattr(mod, "bench_ticks")):
            return [], "skewlab.bench.bench_dashboard has neither measure_for_bench() nor fill()/bench_ticks()"
        from skewlab.storage import connect

        ticks = 3 if ctx.quick else 10
        for n in sorted(S["store_rows"]):
            tmp = tempfile.mkdtemp(prefix="skewlab-bench-dash-")
            try:
                db = f"sqlite:///{tmp}/dash.sqlite"
                store = connect(db)
                run_id = mod.fill(store, n, 8, ctx.seed)
                store.close()
                r = mod.bench_ticks(db, run_id, 8, ticks)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            rows.append({"stored_rows": n, "query": "dashboard: tick queries (DashboardData.load + commands)",
                         "seconds": r["tick_query_ms"]["median"] / 1e3, "rows_returned": 1})
            rows.append({"stored_rows": n, "query": "dashboard: tick callback over HTTP",
                         "seconds": r["tick_callback_ms"]["median"] / 1e3, "rows_returned": 1})
        return rows, (f"skewlab.bench.bench_dashboard.fill + bench_ticks ({ticks} ticks per size, 8 workers, engine-shaped "
                      "rows incl. per-worker, hot-key, shadow rows)")
    except Exception as exc:
        return rows, f"skewlab.bench.bench_dashboard failed: {type(exc).__name__}: {exc}"


# ---------------------------------------------------------------------------------------------
def run(ctx: Context) -> Section:
    t0 = time.perf_counter()
    S = sizes(ctx.quick)
    routing = _routing(ctx, S)
    plans = _plans(ctx, S)
    store = _store(ctx, S)
    ctx.tick("perf store")
    spark = _spark(ctx, S)
    if S["spark"] is None:
        ctx.tick("perf spark skipped")
    sec = Section(KEY, TITLE, ctx.command(KEY), "",
                  data={"routing": routing, "plans": plans, "spark": spark, "store": store, "sizes": S})
    _figures(ctx, sec, routing, plans, spark, store, S)
    _checks(sec, routing, plans, spark, store, S)
    sec.markdown = _markdown(sec, routing, plans, spark, store, S)
    sec.seconds = time.perf_counter() - t0
    return sec


def _figures(ctx, sec, routing, plans, spark, store, S) -> None:
    names = registry.names()
    fig, axes = new_figure(1, 2, width=5.0, height=4.8)
    for name in names:
        rs = sorted((r for r in routing if r["algorithm"] == name and "seconds" in r), key=lambda r: r["messages"])
        if rs:
            axes[0, 0].plot([r["messages"] for r in rs], [r["seconds"] for r in rs], label=name, **style(name))
    axes[0, 0].set_xscale("log")
    axes[0, 0].set_yscale("log")
    axes[0, 0].set_xlabel("tuples routed")
    axes[0, 0].set_ylabel("CPU seconds inside route()")
    mmax = max(S["route_messages"])
    last = [r for r in routing if r["messages"] == mmax and "ratio_vs_hash" in r]
    axes[0, 1].barh([r["algorithm"] for r in last], [r["ratio_vs_hash"] for r in last],
                    color=[style(r["algorithm"]).get("color", "#1f77b4") for r in last])
    axes[0, 1].set_xscale("log")
    axes[0, 1].axvline(1.0, color="#000000", linewidth=0.8)
    axes[0, 1].invert_yaxis()
    axes[0, 1].tick_params(axis="y", labelsize=8)
    axes[0, 1].set_xlabel(f"throughput / hash ({mmax:,} tuples)")
    legend_once(fig, axes[:, :1], ncol=7)
    sec.figures.append(save_figure(fig, ctx, "perf_routing.png",
                                   f"Routing: Zipf z=1, |K|={S['route_keys']:,}, n={S['route_workers']}, one source"))

    rb = [n for n in names if registry.get(n).rebalancing]
    ws = S["plan_workers"]
    fig, axes = new_figure(1, len(ws), width=4.6, height=3.6, sharey=True)
    for j, n in enumerate(ws):
        for name in rb:
            rs = sorted((r for r in plans if r["algorithm"] == name and r.get("workers") == n and "plan_seconds" in r),
                        key=lambda r: r["keys"])
            if rs:
                axes[0, j].plot([r["keys"] for r in rs], [max(r["plan_seconds"], 1e-6) for r in rs], label=name,
                                **style(name))
        axes[0, j].set_xscale("log")
        axes[0, j].set_yscale("log")
        axes[0, j].set_xlabel("keys K")
        axes[0, j].set_title(f"n = {n}", fontsize=9)
    axes[0, 0].set_ylabel("plan time (s)")
    legend_once(fig, axes, ncol=6)
    sec.figures.append(save_figure(fig, ctx, "perf_plan.png", "Plan generation time vs keys (Zipf 0.85 costs)"))

    fig, axes = new_figure(1, 1, width=5.0, height=3.4)
    ax = axes[0, 0]
    qs = sorted({r["query"] for r in store["rows"]})
    for q in qs:
        rs = sorted((r for r in store["rows"] if r["query"] == q), key=lambda r: r["stored_rows"])
        ax.plot([r["stored_rows"] for r in rs], [r["seconds"] for r in rs], marker="o", markersize=4, label=q)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("interval rows stored (one run)")
    ax.set_ylabel("query seconds (median)")
    ax.legend(fontsize=7)
    sec.figures.append(save_figure(fig, ctx, "perf_store.png", "Store.interval_metrics: dashboard tick queries (SQLite)"))

    if spark.get("baseline"):
        fig, axes = new_figure(1, 1, width=4.6, height=3.0)
        names_s = ["by key\n(first)"] + list(spark["groupings"])
        vals = [spark["baseline"]["tuples_per_second"]] + [spark["groupings"][g].get("tuples_per_second", 0.0)
                                                         for g in spark["groupings"]]
        colors = ["#444444"] + [style(g).get("color", "#1f77b4") for g in spark["groupings"]]
        if spark.get("baseline_again"):
            names_s.append("by key\n(last)")
            vals.append(spark["baseline_again"]["tuples_per_second"])
            colors.append("#444444")
        axes[0, 0].bar(names_s, [v / 1e3 for v in vals], color=colors)
        axes[0, 0].set_ylabel("k tuples / s")
        sec.figures.append(save_figure(fig, ctx, "perf_spark.png",
                                       f"Spark end-to-end ({spark['config']['master']}, {spark['config']['per_batch']:,} "
                                       "tuples/batch)"))


def _checks(sec, routing, plans, spark, store, S) -> None:
    c = sec.checks
    names = registry.names()
    errs = [r for r in routing if "error" in r]
    check(c, "every grouping routed the stream", not errs and {r["algorithm"] for r in routing} == set(names),
          "; ".join(f"{r['algorithm']}: {r['error']}" for r in errs[:3]) or f"{len(names)} groupings")
    check(c, "routed workers within [0, n)", all(r.get("in_range", False) for r in routing if "error" not in r), "")
    rb = [n for n in names if registry.get(n).rebalancing]
    kmin = min(S["plan_keys"])
    got = {r["algorithm"] for r in plans if r["keys"] == kmin and "plan_seconds" in r}
    perr = [r for r in plans if "error" in r]
    check(c, "every rebalancer planned at the smallest K", got == set(rb) and not perr,
          "; ".join(f"{r['algorithm']} K={r['keys']}: {r['error']}" for r in perr[:3]) or f"{len(rb)} rebalancers")
    bad = [r for r in store["rows"] if not r["query"].startswith("dashboard") and (
        (r["query"].startswith("tick") and r["rows_returned"] != 1)
        or (r["query"].startswith("initial") and r["rows_returned"] != min(500, r["stored_rows"]))
        or (r["query"] == "full read" and r["rows_returned"] != r["stored_rows"]))]
    check(c, "store queries return the expected rows", not bad, f"{len(store['rows'])} measurements")
    if spark.get("baseline"):
        ok = all("tuples_per_second" in v and v["tuples_per_second"] > 0 for v in spark["groupings"].values())
        check(c, "Spark: every grouping processed tuples", ok, ", ".join(spark["groupings"]))


def _markdown(sec, routing, plans, spark, store, S) -> str:
    mmax = max(S["route_messages"])
    parts = [
        f"Routing: Zipf z = 1 over {S['route_keys']:,} keys, n = {S['route_workers']}, one source, batches of 10⁵, "
        f"CPU time of route() calls, best of {S['repeat']}; streams of {', '.join(f'{m:,}' for m in S['route_messages'])} tuples.  Plan time: "
        f"K ∈ {{{', '.join(f'{k:,}' for k in S['plan_keys'])}}}, n ∈ {{{', '.join(map(str, S['plan_workers']))}}}, "
        "θmax = 0.08 where declared, otherwise each algorithm's defaults."]
    for f in sec.figures:
        parts.append(f"![{f}]({f})")
    names = registry.names()
    rows = []
    for name in names:
        r = next((x for x in routing if x["algorithm"] == name and x["messages"] == mmax), {})
        small = [x for x in routing if x["algorithm"] == name and "seconds" in x]
        slope = None
        if len(small) >= 2:
            xs = np.log([x["messages"] for x in small])
            ys = np.log([x["seconds"] for x in small])
            slope = float(np.polyfit(xs, ys, 1)[0])
        rows.append([name, r.get("keys_per_s", float("nan")) / 1e6 if "keys_per_s" in r else r.get("error", "-"),
                     r.get("ratio_vs_hash"), r.get("imbalance"), slope])
    parts.append(f"**Routing throughput ({mmax:,} tuples)** — `growth` is the log-log slope of time vs tuples "
                 "(1 = linear)\n\n" + md_table(["grouping", "M tuples/s", "vs hash", "imbalance", "growth"], rows))
    rb = [n for n in names if registry.get(n).rebalancing]
    ks = sorted(S["plan_keys"])
    for n in S["plan_workers"]:
        rows = []
        for name in rb:
            cells = []
            for K in ks:
                r = next((x for x in plans if x["algorithm"] == name and x["keys"] == K and x.get("workers") == n), {})
                cells.append(r["plan_seconds"] if "plan_seconds" in r else ("skipped" if "skipped" in r else
                                                                              ("error" if "error" in r else "-")))
            sel = [x for x in plans if x["algorithm"] == name and x.get("workers") == n and "plan_seconds" in x
                   and x["plan_seconds"] > 0]
            slope = None
            if len(sel) >= 2:
                slope = float(np.polyfit(np.log([x["keys"] for x in sel]), np.log([x["plan_seconds"] for x in sel]), 1)[0])
            r_last = next((x for x in plans if x["algorithm"] == name and x["keys"] == ks[-1] and x.get("workers") == n), {})
            rows.append([name] + cells + [slope, r_last.get("imbalance_after"), r_last.get("feasible")])
        parts.append(f"**Plan time (s), n = {n}** — `growth` = log-log slope vs K; plan's own imbalance (max/mean − 1 of the snapshot it was made from: one snapshot, no next interval to route) and feasibility of the largest K\n\n"
                     + md_table(["algorithm"] + [f"K={k:,}" for k in ks] + ["growth", "plan's own imbalance", "feasible"], rows))
    if spark.get("baseline"):
        cfg = spark["config"]
        rows = [["applyInPandasWithState by key (baseline, first)", spark["baseline"]["tuples_per_second"] / 1e3, 1.0, None]]
        for g, r in spark["groupings"].items():
            rows.append([g, r.get("tuples_per_second", 0) / 1e3, r.get("ratio_vs_baseline"),
                         r.get("ratio_vs_baseline_again")])
        if spark.get("baseline_again"):
            rows.append(["applyInPandasWithState by key (baseline, last)", spark["baseline_again"]["tuples_per_second"] / 1e3,
                         None, 1.0])
        parts.append(f"**Spark end-to-end** ({cfg['master']}, {cfg['batches']} measured micro-batches of "
                     f"{cfg['per_batch']:,} tuples after {cfg['warmup']} warm-up, {cfg['workers']} workers, Zipf "
                     f"{cfg['zipf']} over {cfg['keys']:,} keys, window {cfg.get('window', 10)} batches, shadows off; "
                     "baseline: the same windowed per-key count as `groupBy(key).applyInPandasWithState` with one "
                     "state per key, Spark's hash partitioning by key).  The machine is shared: other jobs ran "
                     "at the same time, so absolute rates are noisy; the ratio compares runs minutes apart.\n\n"
                     + md_table(["pipeline", "k tuples/s", "vs first baseline", "vs last baseline"], rows))
    else:
        parts.append(f"**Spark end-to-end**: skipped ({spark.get('skipped') or spark.get('error')}).")
    parts.append(_notes(routing, plans, spark, store, S))
    srows = sorted(store["rows"], key=lambda r: (r["query"], r["stored_rows"]))
    parts.append("**Store query time** (SQLite file, one run; median)"
                 + (f"; `record_interval` (engine write path) median {1e3 * store['write_seconds_median']:.2f} ms per "
                    f"interval over {store['writes']} writes" if store.get("write_seconds_median") else "")
                 + f"; dashboard: {store.get('dashboard_hook')}"
                 + "\n\n" + md_table(["query", "stored rows", "ms", "rows returned"],
                                     [[r["query"], r["stored_rows"], 1e3 * r["seconds"], r["rows_returned"]] for r in srows]))
    return "\n\n".join(parts)


def _notes(routing, plans, spark, store, S) -> str:
    """What the numbers say (filled in from this run)."""
    mmax = max(S["route_messages"])
    last = {r["algorithm"]: r for r in routing if r["messages"] == mmax and "keys_per_s" in r}
    lines = ["**Reading the numbers**", ""]
    if "hash" in last:
        h = last["hash"]["keys_per_s"] / 1e6
        half = sorted(a for a, r in last.items() if a != "hash" and r["ratio_vs_hash"] >= 0.5)
        slow = sorted(((r["ratio_vs_hash"], a) for a, r in last.items() if r["ratio_vs_hash"] < 0.5))
        lines.append(
            f"- Routing from precomputed fingerprints: `hash` routes {h:.0f} M tuples/s (one vectorised `fp mod n`).  "
            f"At ≥ 0.5× hash: {', '.join(half) or 'none'}.  Below: " + ", ".join(f"{a} {x:.3f}×" for x, a in slow)
            + ".  The split-key groupings pay a sequential per-tuple numba loop (SpaceSaving update + choice); the "
            "routing-table rebalancers a hash-index lookup of the routing table for every tuple plus the base hash "
            "(the Gedik ones a consistent-hash ring of 1000 points per channel); ELB/CLB/UHLB one substream-table "
            "lookup.  (The issue's ≥ 0.5× target is measured from the key strings, as the executors route — "
            "murmur3 of the key bytes, then `route` — with `python -m skewlab.bench.bench_routing`: section \"Routing speed "
            "of the split-key groupings against `hash`\" below.)")
        slopes = []
        for a in last:
            pts = [x for x in routing if x["algorithm"] == a and "seconds" in x and x["seconds"] > 0]
            if len(pts) >= 2:
                slopes.append(float(np.polyfit(np.log([x["messages"] for x in pts]), np.log([x["seconds"] for x in pts]), 1)[0]))
        if slopes:
            lines.append(
                f"- Routing time vs stream length: log-log slopes {min(slopes):.2f} … {max(slopes):.2f} "
                + ("— linear: no per-tuple cost grows with the stream." if max(abs(x - 1) for x in slopes) <= 0.35 else
                   "— roughly linear; slopes away from 1 come from fixed per-call costs at the smallest size and from "
                   "machine noise (CPU time of a few ms)."))
    ks = sorted(S["plan_keys"])
    skipped = sorted({r["algorithm"] for r in plans if "skipped" in r})
    sup = []
    for n in S["plan_workers"]:
        for name in {r["algorithm"] for r in plans}:
            sel = [x for x in plans if x["algorithm"] == name and x.get("workers") == n and x.get("plan_seconds", 0) > 0]
            if len(sel) >= 2:
                slope = float(np.polyfit(np.log([x["keys"] for x in sel]), np.log([x["plan_seconds"] for x in sel]), 1)[0])
                if slope > 1.3:
                    sup.append(f"{name} (n={n}, slope {slope:.1f})")
    lines.append(
        f"- Plan time grows sub-linearly or linearly in K for most rebalancers (K = {ks[0]:,} … {ks[-1]:,}); "
        "Fang's algorithms switch to the compact representation above 10⁵ keys, so their cost flattens.  "
        + (f"Super-linear (slope > 1.3): {', '.join(sorted(sup))}"
           + (" — MixedBF runs one full Mixed trial per routing-table entry, and the table grows with K. "
              if any(x.startswith("mixed-bf") for x in sup) else ". ") if sup else "")
        + (f"Skipped at larger K after exceeding {BUDGET:g} s: {', '.join(skipped)}." if skipped else ""))
    st = [r for r in store["rows"] if r["query"].startswith("tick")]
    fr = [r for r in store["rows"] if r["query"] == "full read"]
    if st and fr:
        st_lo, st_hi = min(st, key=lambda r: r["stored_rows"]), max(st, key=lambda r: r["stored_rows"])
        fr_hi = max(fr, key=lambda r: r["stored_rows"])
        lines.append(
            f"- Store: the incremental tick query stays flat ({1e3 * st_lo['seconds']:.2f} ms at {st_lo['stored_rows']:,} "
            f"rows, {1e3 * st_hi['seconds']:.2f} ms at {st_hi['stored_rows']:,}; index on (run, interval)), while a full "
            f"read grows linearly ({1e3 * fr_hi['seconds']:.0f} ms for {fr_hi['stored_rows']:,} rows) — a dashboard must "
            "poll with `since_interval` and open with `latest=True`.")
    if spark.get("baseline"):
        b1 = spark["baseline"]["tuples_per_second"]
        b2 = (spark.get("baseline_again") or {}).get("tuples_per_second")
        lines.append(
            f"- Spark: baseline {b1 / 1e3:.0f}k tuples/s at the start"
            + (f" and {b2 / 1e3:.0f}k at the end of the Spark runs ({100 * abs(b2 - b1) / max(b1, b2):.0f} % apart)" if b2 else "")
            + "; the groupings' ratios have at least that much noise.  The baseline calls its Python function "
            "once per key and micro-batch, the engine once per worker; on local[2] the engine's Python work per "
            "tuple (generator, Arrow conversion, the operator) dominates, so the grouping's own routing cost is "
            "not visible end to end.")
    return "\n".join(lines)
