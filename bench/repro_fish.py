"""FISH against D-Choices / W-Choices on the flights trace and on Zipf (``skewlab bench fish``).

Not a reproduction of the FISH paper's figures (arXiv 1806.00760 measures latency and memory on
Storm with 128 nodes); a comparison of the routing decisions in the local runtime of ``skewlab
simulate`` (:func:`skewlab.bench.common.simulate`), every grouping with its default parameters,
N workers, 2 sources:

* ``flights`` keyed by ``dest`` (the real, drifting trace of :mod:`skewlab.bench.repro_trace`), in
  intervals of one day over the year and of one hour over the first weeks;
* ``zipf`` (stationary) at z = 1.0, 1.4, 2.0 and ``drift`` (the rank→key mapping moves every
  interval: hot keys change, FISH's "time-evolving" case), K = 10,000 keys, intervals of 5,000.

Reported per grouping: per-interval imbalance ``max/mean − 1`` of the interval's tuples per worker
(median and 90th percentile over the intervals) and the whole-stream imbalance.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from skewlab.bench.common import Context, Section, check, md_table, simulate
from skewlab.engine.cli.simulate import SimulationConfig

KEY = "fish"
TITLE = "FISH vs D-Choices / W-Choices — flights trace and Zipf"
WORKERS = 8
ALGOS = ("hash", "consistent", "pkg", "dchoices", "wchoices", "fish")


def sizes(quick: bool) -> dict[str, Any]:
    if quick:
        return {"day_days": 10, "hour_days": 2, "zipf_messages": 40_000}
    return {"day_days": 365, "hour_days": 28, "zipf_messages": 400_000}


def units(quick: bool, seeds: int = 1) -> int:
    return len(ALGOS) * len(_cases(sizes(quick)))


def _flights_in(days: int) -> int:
    from skewlab.bench.repro_trace import _flights_in as flights_in

    return flights_in(days)


def _cases(S: dict[str, Any]) -> list[dict[str, Any]]:
    out = [
        {"name": f"flights dest, 1-day intervals, {S['day_days']} days", "workload": "flights",
         "params": {"column": "dest", "span": 1440}, "days": S["day_days"], "interval": 1},
        {"name": f"flights dest, 1-hour intervals, {S['hour_days']} days", "workload": "flights",
         "params": {"column": "dest", "span": 60}, "days": S["hour_days"], "interval": 1},
    ]
    for z in (1.0, 1.4, 2.0):
        out.append({"name": f"zipf z = {z}", "workload": "zipf", "params": {"z": z, "keys": 10_000},
                    "messages": S["zipf_messages"], "interval": 5_000})
    out.append({"name": "drift z = 1.4 (shift 50 keys per interval)", "workload": "drift",
                "params": {"z": 1.4, "keys": 10_000, "shift": 50, "period": 1},
                "messages": S["zipf_messages"], "interval": 5_000})
    return out


def _run_case(ctx: Context, case: dict[str, Any]) -> dict[str, Any]:
    messages = _flights_in(case["days"]) if "days" in case else case["messages"]
    rows = []
    for alg in ALGOS:
        cfg = SimulationConfig(algorithm=alg, workers=WORKERS, sources=2, workload=case["workload"],
                               workload_params=case["params"], messages=messages,
                               interval_messages=case["interval"], seed=ctx.seed)
        t0 = time.perf_counter()
        r = simulate(cfg)
        imb = np.array([i["imbalance"] for i in r["intervals"]], dtype=np.float64)
        rows.append({"algorithm": alg, "median": float(np.median(imb)), "p90": float(np.percentile(imb, 90)),
                     "whole": float(r["imbalance"]), "intervals": int(imb.size),
                     "seconds": time.perf_counter() - t0})
        ctx.tick(f"fish {case['name']} {alg}")
    return {"name": case["name"], "messages": messages, "rows": rows}


def run(ctx: Context) -> Section:
    t0 = time.perf_counter()
    S = sizes(ctx.quick)
    results = [_run_case(ctx, c) for c in _cases(S)]
    sec = Section(KEY, TITLE, ctx.command(KEY, seeds=False), "", data={"cases": results, "sizes": S})
    _checks(sec, results)
    sec.markdown = _markdown(results)
    sec.seconds = time.perf_counter() - t0
    return sec


def _by(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["algorithm"]: r for r in res["rows"]}


def _checks(sec: Section, results) -> None:
    for res in results:
        by = _by(res)
        check(sec.checks, f"{res['name']}: FISH's per-interval median <= consistent hashing's (its base)",
              by["fish"]["median"] <= by["consistent"]["median"] + 1e-12,
              f"fish {by['fish']['median']:.3f}, consistent {by['consistent']['median']:.3f}")


def _default(alg: str, name: str) -> Any:
    from skewlab.engine.algorithms import registry

    return next(p.default for p in registry.get(alg).params if p.name == name)


def _decay_text(alg: str) -> str:
    d = float(_default(alg, "decay"))
    return "no decay (counts since the start)" if d >= 1.0 else f"decay {d:g} per epoch"


def _markdown(results) -> str:
    parts = [
        f"Set-up: N = {WORKERS} workers, 2 sources, default parameters of every grouping, as read from the "
        f"registry when this section was generated (FISH: θ = 1/(5N), epoch 250N tuples per source, "
        f"{_decay_text('fish')}, spread {_default('fish', 'spread'):g}, {_default('fish', 'replicas')} ring points "
        f"per worker; D-Choices: θ = 1/(5N), {_decay_text('dchoices')}; W-Choices: θ = 1/(5N), "
        f"{_decay_text('wchoices')}).  One run per case with seed `--seed` (`--seeds` is not used here, so the "
        "command above does not name it).  Per-interval imbalance = max/mean − 1 of the interval's tuples per worker."]
    for res in results:
        rows = sorted(res["rows"], key=lambda r: (r["median"], r["p90"]))
        t = [[r["algorithm"], r["median"], r["p90"], r["whole"]] for r in rows]
        parts.append(f"**{res['name']}** ({res['messages']:,} tuples, {rows[0]['intervals']} intervals)\n\n"
                     + md_table(["grouping", "median", "p90", "whole stream"], t))
    lines = ["**Observations** (from the tables above)", ""]
    for res in results:
        by = _by(res)
        f, d, w = by["fish"], by["dchoices"], by["wchoices"]
        rank = sorted(("fish", "dchoices", "wchoices"), key=lambda a: by[a]["median"])
        lines.append(f"- {res['name']}: per-interval median FISH {f['median']:.3f}, D-Choices {d['median']:.3f}, "
                     f"W-Choices {w['median']:.3f} (best of the three: {rank[0]}); consistent "
                     f"{by['consistent']['median']:.3f}, PKG {by['pkg']['median']:.3f}.")
    best = [res["name"] for res in results
            if _by(res)["fish"]["median"] < min(_by(res)["dchoices"]["median"], _by(res)["wchoices"]["median"])]
    over_pkg = [res["name"] for res in results if _by(res)["fish"]["median"] < _by(res)["pkg"]["median"]]
    lines.append(f"- FISH has a lower per-interval median than both D-Choices and W-Choices in {len(best)} of "
                 f"{len(results)} cases" + (f" ({', '.join(best)})" if best else "") + f", and than PKG in "
                 f"{len(over_pkg)} of {len(results)}" + (f" ({', '.join(over_pkg)})" if over_pkg else "") + ".")
    lines.append("- FISH keeps cold keys on one worker (memory of keyed state as hash), D-/W-Choices split every "
                 "key over two workers (PKG tail); the tables measure balance only.")
    parts.append("\n".join(lines))
    return "\n\n".join(parts)
