"""Reproduction of Fang et al., "Parallel Stream Processing Against Workload Skewness and Variance",
HPDC 2017 (``skewlab bench fang``).

Set-up (paper Sec. V, Table II; defaults in bold there, partly lost in our text): synthetic Zipf streams
over an integer key domain K with skew z = 0.85 and fluctuation rate f (workload ``zipf``: at every
interval key frequencies are swapped until one task instance of the generator's own seeded hash, not of a
grouping, had its load changed by f·L̄ — see
:class:`skewlab.engine.workloads.synthetic.ZipfWorkload`), N_D task instances, θmax = 0.08, β = 1.5, Amax = 3000,
window w = 1 interval, linear cost (c(k) = tuples, S(k, w) = windowed tuples).  Each configuration is
one :func:`skewlab.bench.common.simulate` run (the local runtime of ``skewlab simulate``): at the end of every
interval the controller asks the rebalancer for a plan when θ > θmax and migrates.

Compared (paper's baselines): ``mixed``, ``mintable``, ``mixed-bf`` (every n = 0..N_A, as the paper's
brute force), ``readj`` (Gedik) and ``pkg``.  readj is a Gedik partitioning function with its own
balance target α; we set α from θmax by inverting Gedik's Eq. 15 (θ_k = (α−1)/(1+α/(N−1)) = θmax) and
its trigger to θmax; σ = 0.1 (Gedik's default) in the sweeps, σ ∈ {0.1, 0.05, 0.03} at the base
configuration (the paper reports the best σ of several; smaller σ costs a lot of plan time).

Seeds: every configuration (sweeps, Amax, compact study, scale-out) runs once per seed of
``ctx.seeds`` with stream and grouping seeded alike (Fang et al. average 5 runs); the algorithms of one
configuration and seed see the same stream.  Tables report the mean and min–max over seeds, figures
the mean line and min–max band, and the invariants are checked on every seed's run.

Reported per run (averages over the intervals after the first, whose plan starts from pure hashing):
migration cost = state moved / total state per interval; plan time = mean wall time of a plan; imbalance
after plan = max/mean − 1 of the tuples routed in the interval *after* each plan (the plan made on
interval k routes interval k + 1, as the other sections measure; Fang's "workload skewness" is this + 1,
but the paper evaluates the plan on the interval it was made from, which the fluctuation f makes look
better than any routed interval; reported separately as the plan's own imbalance); feasibility = share
of plans meeting θmax and Amax.  PKG never migrates and has no plans; its imbalance is the routed one.

Scale-out (Fig. 15: the paper runs to a balanced state, adds one instance and plots throughput over
time on Storm): a static stream (f = 0) on N_D workers, one worker added before interval
``scale_before``; per interval the routed imbalance, the state migrated (the resize's own migration
separately) and the plan time, for Mixed on its consistent-hash base and with ``base=mod``, MinTable,
Readj, PKG and ``hash`` (Storm's key grouping, no balancing).  Throughput is not modelled by the
local simulation, so plan time stands in for the paper's response time.

Also: routing-table size and migration cost vs Amax (Fig. 17/18) for Mixed, and the compact
representation (Sec. IV): plan time and load-estimation error vs the HLHE degree R (Fig. 11), measured
with :func:`skewlab.bench.bench_plan.measure` (plan time of one interval's plan after a first plan, K keys with
Zipf costs, 10 % of the keys' costs permuted in between).

Base hash and parameters.  The sweeps, Readj's σ, the Amax study and the scale-out runs take each
rebalancer's parameters from :func:`_params`: keys outside the routing table go by the papers'
consistent-hash ring (``base=consistent``; the scale-out run ``mixed (base=mod)`` overrides it with fp mod
n), ``gate`` off and, for the Fang family (Readj has no such parameter), ``plan_decay`` 0; ``pkg`` and
``hash`` run with their defaults and have no base.
The compact study does not: it builds Mixed with θmax, Amax and the compact parameters only, so it
plans on skewlab's defaults — the slot-table base (``base=slots``, plain hash's placement at N_D
workers) and ``plan_decay`` 0.4 (the timed second plan sees the second interval's costs plus 0.4 × the
first's) — and, calling the planner directly, without the controller's gate.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from skewlab.bench.common import (Context, Section, Spread, check, fmt, legend_once, md_table, new_figure, plot_band, save_figure,
                          simulate, spread, style)
from skewlab.engine.algorithms import registry
from skewlab.engine.cli.simulate import SimulationConfig

KEY = "fang"
TITLE = "Fang et al. HPDC 2017 — Mixed routing vs MinTable / MixedBF / Readj / PKG"
ALGOS = ("mixed", "mintable", "mixed-bf", "readj", "pkg")
BASE = {"n": 10, "theta": 0.08, "keys": 10_000, "f": 1.0, "amax": 3000}
#: Fig. 15 runs: (label, algorithm, extra parameters)
SCALE_RUNS = (("mixed", "mixed", {}), ("mixed (base=mod)", "mixed", {"base": "mod"}), ("mintable", "mintable", {}),
              ("readj", "readj", {}), ("pkg", "pkg", {}), ("hash", "hash", {}))


def sizes(quick: bool) -> dict[str, Any]:
    if quick:
        return {"intervals": 3, "per": 20_000, "base_keys": 2_000,
                "ns": [5, 20], "thetas": [0.05, 0.3], "keys": [1_000, 10_000], "fs": [0.0, 1.0],
                "amax": [16, 256], "amax_thetas": [0.08], "compact_keys": 10_000, "Rs": [1, 8, 64],
                "readj_sigmas": [0.1], "scale_before": 2, "scale_after": 2}
    return {"intervals": 12, "per": 100_000, "base_keys": BASE["keys"],
            "ns": [5, 10, 20, 30, 40], "thetas": [0.02, 0.05, 0.08, 0.15, 0.3],
            "keys": [5_000, 10_000, 100_000, 1_000_000], "fs": [0.0, 0.5, 1.0, 1.5, 2.0],
            "amax": [16, 64, 256, 1024, 2048, 4096], "amax_thetas": [0.02, 0.08, 0.3],
            "compact_keys": 100_000, "Rs": [1, 2, 4, 8, 16, 32, 64, 128, 256], "readj_sigmas": [0.1, 0.05, 0.03],
            "scale_before": 6, "scale_after": 6}


def units(quick: bool, seeds: int = 1) -> int:
    """Progress units: one per sweep point, σ, Amax θmax, compact study and scale-out run, per seed."""
    s = sizes(quick)
    return seeds * (len(s["ns"]) + len(s["thetas"]) + len(s["keys"]) + len(s["fs"]) + len(s["readj_sigmas"])
                    + len(s["amax_thetas"]) + 2)


def readj_alpha(theta: float, n: int) -> float:
    """α with Gedik's θ_k(α, N) = θmax (Eq. 15 inverted): α = (1 + θ)/(1 − θ/(N − 1)), capped to (1, 4]."""
    a = (1.0 + theta) / (1.0 - theta / max(n - 1, 1)) if n > 1 else 1.0 + theta
    return float(min(max(a, 1.0 + 1e-6), 4.0))


def _params(alg: str, n: int, theta: float, amax: int, sigma: float = 0.1) -> dict[str, Any]:
    """The papers' parameters of ``alg``; every plan is executed (``gate`` off: the papers have no gate),
    keys outside the routing table go by the consistent-hash ring (``base=consistent``: Fang Sec. V,
    Gedik Sec. 5.5; skewlab's default is the slot table) and the Fang rebalancers plan from the last
    interval alone (``plan_decay`` 0, as in Fang Sec. III)."""
    if alg in ("pkg", "hash"):
        return {}
    if alg == "readj":
        return {"theta_max": theta, "alpha": readj_alpha(theta, n), "sigma": sigma, "gate": False, "base": "consistent"}
    p = {"theta_max": theta, "amax": amax, "gate": False, "base": "consistent"}
    if any(q.name == "plan_decay" for q in registry.get(alg).params):
        p["plan_decay"] = 0.0
    return p


#: per-run numbers averaged over the seeds (the mean keeps the key, the seeds' values go to KEY_per_seed)
MEAN_KEYS = ("migration", "routed_imbalance", "plan_seconds", "imbalance_after", "plan_imbalance", "feasible", "table")


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One configuration over seeds: the mean of :data:`MEAN_KEYS`, the fewest plans and the largest table
    of any seed (so invariants on them hold for every seed), and every seed's value as ``KEY_per_seed``."""
    out = {k: rows[0][k] for k in ("algorithm", "n", "theta", "keys", "f", "amax", "sigma")}
    out["seeds"] = [r["seed"] for r in rows]
    for k in MEAN_KEYS + ("plans", "table_max"):
        out[f"{k}_per_seed"] = [r[k] for r in rows]
    for k in MEAN_KEYS:
        out[k] = float(np.mean(out[f"{k}_per_seed"]))
    out["plans"] = int(min(out["plans_per_seed"]))
    out["table_max"] = int(max(out["table_max_per_seed"]))
    out["compact"] = any(r["compact"] for r in rows)
    out["seconds"] = float(sum(r["seconds"] for r in rows))
    return out


class _Runner:
    def __init__(self, ctx: Context, S: dict[str, Any]) -> None:
        self.ctx, self.S = ctx, S
        self.cache: dict[tuple, dict[str, Any]] = {}

    def runs(self, alg: str, n: int, theta: float, keys: int, f: float, amax: int, sigma: float = 0.1,
             intervals: int | None = None, per: int | None = None) -> dict[str, Any]:
        """:func:`aggregate` of one run per seed of ``ctx.seeds``."""
        return aggregate([self.run(alg, n, theta, keys, f, amax, seed, sigma, intervals, per)
                          for seed in self.ctx.seeds])

    def run(self, alg: str, n: int, theta: float, keys: int, f: float, amax: int, seed: int, sigma: float = 0.1,
            intervals: int | None = None, per: int | None = None) -> dict[str, Any]:
        """One simulation, stream and grouping seeded with ``seed``."""
        I = intervals or self.S["intervals"]
        per = per or self.S["per"]
        key = (alg, n, theta if alg != "pkg" else None, keys, f, amax if alg != "pkg" else None, sigma, I, per, seed)
        if key in self.cache:  # pkg ignores θmax/Amax: same run, labelled with this sweep's values
            return dict(self.cache[key], theta=theta, amax=amax)
        cfg = SimulationConfig(algorithm=alg, workers=n, sources=2, workload="zipf",
                               workload_params={"z": 0.85, "keys": keys, "f": f}, messages=I * per,
                               interval_messages=per, seed=seed, window=1,
                               params=_params(alg, n, theta, amax, sigma))
        t0 = time.perf_counter()
        r = simulate(cfg)
        iv = r["intervals"]
        steady = iv[1:] if len(iv) > 1 else iv
        plans = [p for p in r["plans"] if p["interval"] >= 1] or r["plans"]
        row = {
            "algorithm": alg, "n": n, "theta": theta, "keys": keys, "f": f, "amax": amax, "sigma": sigma,
            "seed": seed,
            "migration": float(np.mean([i["migration_cost"] for i in steady])),
            "routed_imbalance": float(np.mean([i["imbalance"] for i in steady])),
            "plans": len(plans),
            "plan_seconds": float(np.mean([p["seconds"] for p in plans])) if plans else 0.0,
            "imbalance_after": _imbalance_after_plans(iv, plans),
            "plan_imbalance": float(np.mean([p["imbalance"] for p in plans])) if plans else
            float(np.mean([i["imbalance"] for i in steady])),
            "feasible": float(np.mean([p["feasible"] for p in plans])) if plans else 1.0,
            "table": float(np.mean([p["table"] for p in plans])) if plans else 0.0,
            "table_max": int(max([p["table"] for p in plans] or [0])),
            "compact": any(bool(p["extra"].get("compact")) for p in plans),
            "seconds": time.perf_counter() - t0,
        }
        self.cache[key] = row
        return row


def _imbalance_after_plans(intervals: list[dict[str, Any]], plans: list[dict[str, Any]]) -> float:
    """Mean routed imbalance of the interval *after* each plan (the plan made at the end of interval k routes
    interval k + 1); with no plan (PKG, or a run that never rebalanced), the mean routed imbalance of the
    intervals after the first.  A plan made on the last interval routes nothing and is left out."""
    by_index = {int(i["interval"]): float(i["imbalance"]) for i in intervals}
    routed = [by_index[p["interval"] + 1] for p in plans if p["interval"] + 1 in by_index]
    if routed:
        return float(np.mean(routed))
    steady = intervals[1:] if len(intervals) > 1 else intervals
    return float(np.mean([i["imbalance"] for i in steady]))


def run(ctx: Context) -> Section:
    t0 = time.perf_counter()
    S = sizes(ctx.quick)
    R = _Runner(ctx, S)
    bk = S["base_keys"]
    ns = len(ctx.seeds)
    sweeps: dict[str, list[dict[str, Any]]] = {"n": [], "theta": [], "keys": [], "f": []}
    for n in S["ns"]:
        for a in ALGOS:
            sweeps["n"].append(R.runs(a, n, BASE["theta"], bk, BASE["f"], BASE["amax"]))
        ctx.tick(f"fang N_D={n}", ns)
    for th in S["thetas"]:
        for a in ALGOS:
            sweeps["theta"].append(R.runs(a, BASE["n"], th, bk, BASE["f"], BASE["amax"]))
        ctx.tick(f"fang θmax={th}", ns)
    for K in S["keys"]:
        big = K > 100_000
        I = max(3, S["intervals"] // 2) if big else None
        per = max(S["per"], K) if big else None
        for a in ALGOS:
            sweeps["keys"].append(R.runs(a, BASE["n"], BASE["theta"], K, BASE["f"], BASE["amax"], intervals=I, per=per))
        ctx.tick(f"fang K={K}", ns)
    for f in S["fs"]:
        for a in ALGOS:
            sweeps["f"].append(R.runs(a, BASE["n"], BASE["theta"], bk, f, BASE["amax"]))
        ctx.tick(f"fang f={f}", ns)
    readj = []
    for sg in S["readj_sigmas"]:
        readj.append(R.runs("readj", BASE["n"], BASE["theta"], bk, BASE["f"], BASE["amax"], sigma=sg))
        ctx.tick(f"fang readj σ={sg}", ns)
    amax_rows = []
    for th in S["amax_thetas"]:
        for am in S["amax"]:
            amax_rows.append(R.runs("mixed", BASE["n"], th, bk, BASE["f"], am))
        ctx.tick(f"fang Amax θmax={th}", ns)
    compact = _compact(ctx, S)
    scale = _scale_out(ctx, S)
    sec = Section(KEY, TITLE, ctx.command(KEY), "",
                  data={"sweeps": sweeps, "readj_sigma": readj, "amax": amax_rows, "compact": compact,
                        "scale_out": scale, "sizes": S, "seeds": list(ctx.seeds)})
    _figures(ctx, sec, sweeps, amax_rows, compact, S)
    _scale_figure(ctx, sec, scale, S)
    _checks(sec, sweeps, amax_rows, compact, S)
    _scale_checks(sec, scale)
    sec.markdown = _markdown(ctx, sec, sweeps, readj, amax_rows, compact, S, scale)
    sec.seconds = time.perf_counter() - t0
    return sec


#: per-(R, values) numbers of the compact study averaged over the seeds
COMPACT_KEYS = ("plan_seconds", "load_error", "imbalance_after", "feasible", "migration_cost", "records", "speedup")


def _compact(ctx: Context, S) -> list[dict[str, Any]]:
    """Fig. 11: Mixed's plan time and load-estimation error vs HLHE degree R (and the exact key space).

    Mixed runs with θmax, Amax and the compact parameters on skewlab's defaults otherwise (the slot-table
    base, ``plan_decay`` 0.4), not with :func:`_params` (see the module docstring).

    Per seed: new keys, Zipf costs and fluctuation drawn with that seed, grouping seeded alike; the
    speed-up over the exact key space is taken within the seed.  Rows: :data:`COMPACT_KEYS` as the mean
    over seeds plus ``KEY_per_seed``; ``compact`` true when every seed's plan used the compact form.
    """
    from skewlab.bench.bench_plan import fluctuate, measure, zipf_costs
    from skewlab.engine.algorithms.keys import mix64

    K, n = S["compact_keys"], BASE["n"]
    base = {"theta_max": BASE["theta"], "amax": BASE["amax"]}
    rep = 1 if ctx.quick else 3
    configs = [("exact", "-", {**base, "compact_threshold": 10**12})]
    configs += [(Rd, values, {**base, "compact_threshold": 0, "hlhe_degree": str(Rd), "compact_values": values})
                for values in ("mean", "representative") for Rd in S["Rs"]]
    per_seed: list[list[dict[str, Any]]] = [[] for _ in configs]
    for seed in ctx.seeds:
        rng = np.random.default_rng(seed)
        keys = mix64(np.arange(K, dtype=np.uint64) + np.uint64(seed) * np.uint64(K))
        cost1 = zipf_costs(K, 0.85, 10.0, rng)
        cost2 = fluctuate(cost1, 0.1, rng)
        exact = None
        for i, (_, _, params) in enumerate(configs):
            row = measure("mixed", params, K, n, cost1, cost2, keys, rep, seed=seed)
            exact = exact or row["plan_seconds"]
            row["speedup"] = exact / row["plan_seconds"] if row["plan_seconds"] else float("nan")
            row["feasible"] = float(bool(row.get("feasible")))
            row["load_error"] = float(row.get("load_error") or 0.0)
            per_seed[i].append(row)
        ctx.tick(f"fang compact seed {seed}")
    out = []
    for (Rd, values, _), rows in zip(configs, per_seed):
        agg: dict[str, Any] = {"R": Rd, "values": values}
        for k in COMPACT_KEYS:
            vals = [float(r[k]) if r.get(k) is not None else float("nan") for r in rows]
            agg[f"{k}_per_seed"] = vals
            agg[k] = float(np.nanmean(vals)) if not all(np.isnan(vals)) else None
        agg["compact"] = all(bool(r.get("compact")) for r in rows)
        out.append(agg)
    return out


#: scalar numbers of a scale-out run averaged over the seeds
SCALE_KEYS = ("resize_migration", "imbalance_before", "imbalance_at", "imbalance_after", "migration_after",
              "first_plan_seconds", "plans_after", "final_table")


def _scale_out(ctx: Context, S) -> list[dict[str, Any]]:
    """Fig. 15: N_D → N_D + 1 before interval ``scale_before`` of a static stream; per-interval series per seed.

    Rows (one per :data:`SCALE_RUNS` label): the series ``imbalance``/``migration``/``table`` as the
    mean over seeds and ``…_per_seed`` (one list per seed); :data:`SCALE_KEYS` as mean plus
    ``…_per_seed``; ``recovery`` the slowest seed's (None when a seed never recovered), ``plans_after``
    the most plans of any seed.
    """
    per_seed = {label: [] for label, _, _ in SCALE_RUNS}
    for seed in ctx.seeds:
        for row in _scale_out_seed(S, seed):
            per_seed[row["label"]].append(row)
        ctx.tick(f"fang scale-out seed {seed}")
    out = []
    for label, alg, _ in SCALE_RUNS:
        rows = per_seed[label]
        agg: dict[str, Any] = {"label": label, "algorithm": alg, "seeds": list(ctx.seeds)}
        for k in ("imbalance", "migration", "table"):
            agg[f"{k}_per_seed"] = [r[k] for r in rows]
            agg[k] = [float(x) for x in np.mean(np.asarray(agg[f"{k}_per_seed"], dtype=np.float64), axis=0)]
        for k in SCALE_KEYS:
            vals = [r[k] for r in rows]
            agg[f"{k}_per_seed"] = vals
            ok = [float(v) for v in vals if v is not None]
            agg[k] = float(np.mean(ok)) if ok else None
        rec = [r["recovery"] for r in rows]
        agg["recovery_per_seed"] = rec
        agg["recovery"] = None if any(x is None for x in rec) else int(max(rec))
        agg["plans_after"] = int(max(agg["plans_after_per_seed"]))
        out.append(agg)
    return out


def _scale_out_seed(S, seed: int) -> list[dict[str, Any]]:
    """The :data:`SCALE_RUNS` of one seed (stream and grouping seeded with ``seed``)."""
    from skewlab.engine.cli.simulate import parse_change

    n, before, per = BASE["n"], S["scale_before"], S["per"]
    out = []
    for label, alg, extra in SCALE_RUNS:
        cfg = SimulationConfig(algorithm=alg, workers=n, sources=2, workload="zipf",
                               workload_params={"z": 0.85, "keys": S["base_keys"], "f": 0.0},
                               messages=(before + S["scale_after"]) * per, interval_messages=per, seed=seed,
                               window=1, params={**_params(alg, n, BASE["theta"], BASE["amax"]), **extra},
                               changes=[parse_change(f"{before}:workers={n + 1}")])
        r = simulate(cfg)
        iv = r["intervals"]
        # no event when nothing had to move (pkg: split keys stay where they are)
        resize = next((e for e in r["migration_events"] if e["reason"] == "workers"), {"migration_cost": 0.0})
        plans = [p for p in r["plans"] if p["interval"] >= before]
        imb = [float(i["imbalance"]) for i in iv]
        # the balanced level before the resize: mean routed imbalance of intervals 1 … before − 1 (each
        # interval's sample differs from the one the plan balanced, so it is above θmax with small intervals)
        level = float(np.mean(imb[1:before])) if before > 1 else imb[0]
        # intervals from the resize until the routed imbalance is back to that level (+10 %) or θmax
        goal = max(BASE["theta"], 1.1 * level)
        recovery = next((j for j, x in enumerate(imb[before:]) if x <= goal + 1e-9), None)
        out.append({
            "label": label, "algorithm": alg, "seed": seed,
            "imbalance": imb, "migration": [float(i["migration_cost"]) for i in iv],
            "table": [int(i["routing_table_size"]) for i in iv],
            "final_table": int(iv[-1]["routing_table_size"]),
            "resize_migration": float(resize["migration_cost"]),
            "imbalance_before": level, "imbalance_at": imb[before],
            "imbalance_after": float(np.mean(imb[before + 1:])) if len(imb) > before + 1 else imb[before],
            "recovery": recovery,
            "first_plan_seconds": plans[0]["seconds"] if plans else None,
            "plans_after": len(plans),
            "migration_after": float(sum(i["migration_cost"] for i in iv[before:])),
        })
    return out


def _per_seed(rows, key: str, scale: float = 1.0) -> list[list[float]]:
    """One series per seed (for :func:`plot_band`) of ``KEY_per_seed`` of rows aligned with the x values."""
    k = f"{key}_per_seed"
    return [[float("nan") if r[k][i] is None else scale * float(r[k][i]) for r in rows] for i in range(len(rows[0][k]))]


def _sp(r, key: str, scale: float = 1.0) -> Spread:
    """:class:`Spread` over the seeds of ``r[KEY_per_seed]`` (times ``scale``)."""
    return spread(scale * float(v) for v in r[f"{key}_per_seed"] if v is not None)


def _t(r, key: str, scale: float = 1.0, digits: int = 2) -> str:
    """``mean (min–max)`` over the seeds for running text."""
    return _sp(r, key, scale).format(digits)


def _band_title(n_seeds: int) -> str:
    return f"mean of {n_seeds} seeds, band = min–max" if n_seeds > 1 else "1 seed"


def _scale_figure(ctx, sec, scale, S) -> None:
    fig, axes = new_figure(1, 2, width=4.2, height=3.0)
    before = S["scale_before"]
    for r in scale:
        st = style(r["algorithm"])
        if "base=mod" in r["label"]:
            st.update(linestyle="--", marker="x")
        xs = list(range(len(r["imbalance"])))
        plot_band(axes[0, 0], xs, r["imbalance_per_seed"], label=r["label"], **st)
        plot_band(axes[0, 1], xs, [[100 * m for m in ms] for ms in r["migration_per_seed"]], label=r["label"], **st)
    for ax in axes.flat:
        ax.axvline(before - 0.5, color="#999999", linestyle=":", linewidth=1)
        ax.set_xlabel(f"interval (worker {BASE['n'] + 1} added before {before})")
    axes[0, 0].axhline(BASE["theta"], color="#999999", linestyle="--", linewidth=0.8)
    axes[0, 0].set_yscale("symlog", linthresh=0.05)
    axes[0, 0].set_ylabel("routed imbalance max/mean − 1")
    axes[0, 1].set_ylabel("state migrated in the interval (%)")
    axes[0, 0].legend(fontsize=7)
    sec.figures.append(save_figure(fig, ctx, "fang_scale_out.png",
                                   f"Scale-out N_D = {BASE['n']} → {BASE['n'] + 1} on a static stream (Fig. 15; "
                                   f"{_band_title(ctx.n_seeds)})"))


def _scale_checks(sec, scale) -> None:
    by = {r["label"]: r for r in scale}
    mixed, mod = by["mixed"], by["mixed (base=mod)"]
    pairs = list(zip(mixed["resize_migration_per_seed"], mod["resize_migration_per_seed"]))
    check(sec.checks, "scale-out: mixed on consistent hashing moves less state at the resize than base=mod "
          "(every seed)", all(a < b for a, b in pairs),
          "; ".join(f"{100 * a:.1f} % vs {100 * b:.1f} %" for a, b in pairs))
    check(sec.checks, "scale-out: pkg and hash never migrate after the resize except for the resize itself",
          all(by[a]["plans_after"] == 0 for a in ("pkg", "hash")), "no plans in any seed")


def _series(rows, x, alg):
    pts = sorted((r[x], r) for r in rows if r["algorithm"] == alg)
    return [p[0] for p in pts], [p[1] for p in pts]


def _figures(ctx, sec, sweeps, amax_rows, compact, S) -> None:
    labels = {"n": "task instances N_D", "theta": "θmax", "keys": "key domain K", "f": "fluctuation rate f"}
    metrics = [("migration", "migration cost / interval"), ("plan_seconds", "plan time (s)"),
               ("imbalance_after", "imbalance after plan\n(next interval)")]
    fig, axes = new_figure(3, 4, width=3.4, height=2.6)
    for j, (sw, rows) in enumerate(sweeps.items()):
        for i, (m, lab) in enumerate(metrics):
            ax = axes[i, j]
            for a in ALGOS:
                if m == "plan_seconds" and a == "pkg":
                    continue
                xs, rs = _series(rows, sw, a)
                plot_band(ax, xs, _per_seed(rs, m), label=a, **style(a))
            if m == "plan_seconds":
                ax.set_yscale("log")
            if sw == "keys":
                ax.set_xscale("log")
            if j == 0:
                ax.set_ylabel(lab)
            if i == 2:
                ax.set_xlabel(labels[sw])
            if m == "imbalance_after" and sw == "theta":
                xs = sorted({r["theta"] for r in rows})
                ax.plot(xs, xs, color="#999999", linestyle=":", linewidth=1, label="θmax")
    legend_once(fig, axes, ncol=6)
    sec.figures.append(save_figure(fig, ctx, "fang_sweeps.png",
                                   "Migration cost, plan time and balance vs N_D, θmax, K, f (Fig. 8–10, 12; "
                                   f"{_band_title(ctx.n_seeds)})"))

    fig, axes = new_figure(1, 3, width=3.6, height=3.0)
    for th in sorted({r["theta"] for r in amax_rows}):
        rs = sorted((r for r in amax_rows if r["theta"] == th), key=lambda r: r["amax"])
        xs = [r["amax"] for r in rs]
        st = {"marker": "o", "markersize": 4}
        line = plot_band(axes[0, 0], xs, _per_seed(rs, "migration", 100), label=f"θmax={th}", **st)
        st["color"] = line.get_color()
        plot_band(axes[0, 1], xs, _per_seed(rs, "table_max"), label=f"θmax={th}", **st)
        plot_band(axes[0, 2], xs, _per_seed(rs, "feasible"), label=f"θmax={th}", **st)
    allx = sorted({r["amax"] for r in amax_rows})
    axes[0, 1].plot(allx, allx, color="#999999", linestyle=":", linewidth=1, label="Amax")
    for ax in axes.flat:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("Amax (N_A)")
        ax.legend(fontsize=7)
    axes[0, 0].set_ylabel("migration cost per interval (%)")
    axes[0, 1].set_ylabel("largest routing table |A|")
    axes[0, 1].set_yscale("log", base=2)
    axes[0, 2].set_ylabel("feasible plans (share)")
    sec.figures.append(save_figure(fig, ctx, "fang_amax.png",
                                   f"Mixed: routing-table bound Amax (Fig. 17; {_band_title(ctx.n_seeds)})"))

    fig, axes = new_figure(1, 2, width=4.0, height=3.0)
    ex = next(r for r in compact if r["R"] == "exact")
    for values, color in (("mean", "#d62728"), ("representative", "#1f77b4")):
        rs = [r for r in compact if r["values"] == values]
        xs = [r["R"] for r in rs]
        lab = f"compact, {values} values" + (" (skewlab default)" if values == "mean" else " (paper)")
        st = {"marker": "o", "markersize": 4, "color": color}
        plot_band(axes[0, 0], xs, _per_seed(rs, "plan_seconds"), label=lab, **st)
        plot_band(axes[0, 1], xs, _per_seed(rs, "load_error", 100), label=lab, **st)
    exs = _sp(ex, "plan_seconds")
    axes[0, 0].axhline(exs.mean, color="#444444", linestyle="--", linewidth=1, label="original key space")
    if exs.n > 1:
        axes[0, 0].axhspan(exs.lo, exs.hi, color="#444444", alpha=0.12, linewidth=0)
    axes[0, 0].set_yscale("log")
    axes[0, 0].set_ylabel("plan time (s)")
    axes[0, 1].set_ylabel("load-estimation error (% of L̄)")
    for ax in axes.flat:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("HLHE degree R")
    legend_once(fig, axes, ncol=3)  # below the panels: inside, it hides the exact key space's line
    sec.figures.append(save_figure(fig, ctx, "fang_compact.png",
                                   f"Compact representation, Mixed, K={S['compact_keys']:,}, N_D={BASE['n']} (Fig. 11; "
                                   f"{_band_title(ctx.n_seeds)})"))


def _checks(sec, sweeps, amax_rows, compact, S) -> None:
    """Invariants, each checked on every seed's run (not only on the mean)."""
    c = sec.checks
    allrows = [r for rows in sweeps.values() for r in rows] + amax_rows
    runs = sum(len(r["seeds"]) for r in allrows)
    pk = [m for r in allrows if r["algorithm"] == "pkg" for m in r["migration_per_seed"]]
    check(c, "pkg never migrates", max(pk) == 0.0, f"{len(pk)} runs")

    def over_amax(r):  # seeds whose plans were all feasible but the table exceeded Amax
        return [t for t, f in zip(r["table_max_per_seed"], r["feasible_per_seed"]) if f == 1.0 and t > r["amax"]]

    over = [r for r in allrows if r["algorithm"] == "mixed" and over_amax(r)]
    check(c, "mixed: feasible plans respect Amax", not over, f"{len(over)} violations")
    mixed_am = [r for r in amax_rows if over_amax(r)]
    check(c, "Amax sweep: |A| ≤ Amax whenever the plan is feasible", not mixed_am,
          f"{sum(len(r['seeds']) for r in amax_rows)} runs")
    bad = [r for r in allrows if not all(0.0 <= m <= 1.0 for m in r["migration_per_seed"])]
    check(c, "migration cost within [0, 1]", not bad, f"{runs} runs")
    over = [r for r in allrows if r["algorithm"] in ("mixed", "mixed-bf") and r["table_max"] > r["amax"]]
    check(c, "mixed, mixed-bf: |A| ≤ Amax in every plan (a hard limit)", not over, f"{len(over)} violations")
    # Fig. 9 on average over the θmax sweep, per seed: at large θmax both migrate about the same and one
    # short run can go either way (Alg. 4 does not guarantee less migration than MinTable plan by plan)
    rows = sweeps["theta"]
    ths = sorted({r["theta"] for r in rows})
    mx = np.array([next(r for r in rows if r["algorithm"] == "mixed" and r["theta"] == th)["migration_per_seed"]
                   for th in ths])
    mt = np.array([next(r for r in rows if r["algorithm"] == "mintable" and r["theta"] == th)["migration_per_seed"]
                   for th in ths])
    check(c, "θmax sweep: mintable migrates more than mixed on average (every seed)",
          bool(np.all(mt.mean(axis=0) >= mx.mean(axis=0))),
          "; ".join(f"θmax={th}: mintable {100 * a:.2f} % vs mixed {100 * b:.2f} % (means)"
                    for th, a, b in zip(ths, mt.mean(axis=1), mx.mean(axis=1))))
    ok = all(r["plans"] > 0 for r in allrows if r["algorithm"] != "pkg" and r["f"] > 0)
    check(c, "rebalancers plan when the stream fluctuates", ok, "every run with f > 0, every seed")
    comp = [r for r in compact if r["R"] != "exact"]
    rep = [r for r in comp if r["values"] == "representative"]
    first, last = rep[0]["load_error_per_seed"], rep[-1]["load_error_per_seed"]
    check(c, "compact (representative values): load error grows with R overall (every seed)",
          all(b >= a for a, b in zip(first, last)),
          f"R={rep[0]['R']}: {_t(rep[0], 'load_error', 100, 3)} %, R={rep[-1]['R']}: {_t(rep[-1], 'load_error', 100, 3)} %")
    check(c, "compact plans used the compact representation", all(r.get("compact") for r in comp),
          f"{len(comp)} values of R, every seed")


def _fmt_pct(x):
    return 100 * x


def _verdict(ok: bool, partly: bool = False) -> str:
    return ("**Verdict: reproduced**" if ok else
            "**Verdict: partly reproduced**" if partly else "**Verdict: not reproduced**")


def _figure_md(sec, name: str) -> str:
    path = next(f for f in sec.figures if f.endswith(name))
    return f"![{path}]({path})"


def _markdown(ctx, sec, sweeps, readj, amax_rows, compact, S, scale) -> str:
    seeds = ctx.seeds
    seed_txt = (f"seeds {seeds[0]} … {seeds[-1]}" if len(seeds) > 1 else f"seed {seeds[0]}")
    parts = [
        f"Set-up: `zipf` workload with z = 0.85 and fluctuation f (Fang's generator; the instance it surges is a "
        "group of the generator's own seeded hash, not a worker of any grouping), 2 sources, "
        f"{S['intervals']} intervals of {S['per']:,} tuples (K = 10⁶: {max(3, S['intervals'] // 2)} intervals of "
        f"10⁶), window w = 1, linear cost; base configuration N_D = {BASE['n']}, θmax = {BASE['theta']}, "
        f"K = {S['base_keys']:,}, f = {BASE['f']}, Amax = {BASE['amax']}, β = 1.5; every sweep varies one of them.  "
        "LLFD, MinTable, MinMig, Mixed and MixedBF run with skewlab's `fill_underloaded` extension, on by default (not in "
        "the paper: the plan also sheds keys from the most-loaded workers until the candidates cover the deficit of "
        "the workers below (1 − θmax)·L̄; engine/algorithms/rebalancers/fang.py, deviation 5).  "
        "Averages over intervals 1 … end (the first plan, from pure hashing, is excluded).  Every configuration "
        f"runs once per seed ({seed_txt}; stream and grouping seeded alike, one stream per seed shared by the "
        "algorithms); tables give `mean (min–max)` over the seeds, figures the mean line and the min–max band.  "
        "Plan times are wall times on the shared machine (noisy at the ms scale)."]
    base_rows = [r for r in sweeps["theta"] if r["theta"] == BASE["theta"]] or sweeps["n"]
    t = []
    for r in sorted(base_rows, key=lambda r: ALGOS.index(r["algorithm"])) + [x for x in readj if x["sigma"] != 0.1]:
        name = r["algorithm"] + (f" (σ={r['sigma']})" if r["algorithm"] == "readj" else "")
        t.append([name, _sp(r, "migration", 100), _sp(r, "plan_seconds"), _sp(r, "plan_imbalance"),
                  _sp(r, "imbalance_after"), _sp(r, "routed_imbalance"), _sp(r, "feasible"), _sp(r, "table")])
    parts.append(f"**Base configuration** (N_D = {BASE['n']}, θmax = {BASE['theta']}, K = {S['base_keys']:,}, f = {BASE['f']})\n\n"
                 + md_table(["algorithm", "migration % / interval", "plan s", "plan's own imbalance",
                             "imbalance after plan (next interval)", "routed imbalance", "feasible share",
                             "mean \\|A\\|"], t))
    disc = _discussion(sweeps, readj, amax_rows, compact, S, scale)
    parts.append(_figure_md(sec, "fang_sweeps.png"))
    parts.append("\n".join(disc[k] for k in ("fig8", "fig9", "fig10", "fig12", "sigma") if k in disc))
    for sw, lab in (("n", "N_D"), ("theta", "θmax"), ("keys", "K"), ("f", "f")):
        xs = sorted({r[sw] for r in sweeps[sw]})
        hdr = [lab] + [f"{a} mig %" for a in ALGOS if a != "pkg"] + [f"{a} plan s" for a in ALGOS if a != "pkg"]
        rows = []
        for x in xs:
            rr = {r["algorithm"]: r for r in sweeps[sw] if r[sw] == x}
            rows.append([str(x)] + [_sp(rr[a], "migration", 100) for a in ALGOS if a != "pkg"]
                        + [_sp(rr[a], "plan_seconds") for a in ALGOS if a != "pkg"])
        parts.append(f"**vs {lab}**\n\n" + md_table(hdr, rows))
    parts.append(_figure_md(sec, "fang_amax.png"))
    if "fig17" in disc:
        parts.append(disc["fig17"])
    t = [[r["theta"], r["amax"], _sp(r, "migration", 100), r["table_max"], _sp(r, "feasible"), _sp(r, "imbalance_after")]
         for r in sorted(amax_rows, key=lambda r: (r["theta"], r["amax"]))]
    parts.append("**Mixed vs Amax** (largest \\|A\\| = largest table of any seed)\n\n"
                 + md_table(["θmax", "Amax", "migration % / interval", "largest \\|A\\|",
                             "feasible share", "imbalance after plan (next interval)"], t))
    parts.append(_figure_md(sec, "fang_compact.png"))
    if "fig11" in disc:
        parts.append(disc["fig11"])
    t = [[str(r["R"]), r["values"], _sp(r, "plan_seconds"), _sp(r, "speedup"),
          _sp(r, "records") if r["R"] != "exact" else "-", _sp(r, "load_error", 100), _sp(r, "imbalance_after"),
          _sp(r, "feasible"), _sp(r, "migration_cost")] for r in compact]
    parts.append(f"**Compact representation** (Mixed, K = {S['compact_keys']:,}, N_D = {BASE['n']}; plan of the "
                 "second interval, median of repeats; speed-up = exact plan time / this plan time within a seed; "
                 "feasible = share of seeds)\n\n"
                 + md_table(["R", "record values", "plan s", "speed-up vs exact", "records", "load error % of L̄",
                             "plan's own imbalance", "feasible", "migration cost"], t))
    parts.append(_figure_md(sec, "fang_scale_out.png"))
    if "fig15" in disc:
        parts.append(disc["fig15"])

    def rec(r):
        vals = r["recovery_per_seed"]
        never = sum(v is None for v in vals)
        got = [v for v in vals if v is not None]
        txt = spread(got).format(2) if got else ""
        if never:
            txt = (txt + f"; never in {never}/{len(vals)}") if got else "never"
        return txt

    t = [[r["label"], _sp(r, "imbalance_before"), _sp(r, "imbalance_at"), _sp(r, "imbalance_after"), rec(r),
          _sp(r, "resize_migration", 100), _sp(r, "migration_after", 100),
          _sp(r, "first_plan_seconds") if r["first_plan_seconds"] is not None else "-",
          _sp(r, "final_table")] for r in scale]
    parts.append(f"**Scale-out** (Fig. 15; N_D = {BASE['n']} → {BASE['n'] + 1} before interval {S['scale_before']} of "
                 f"{S['scale_before'] + S['scale_after']}, static stream f = 0, K = {S['base_keys']:,}, θmax = "
                 f"{BASE['theta']}; imbalance = routed max/mean − 1, before = mean over intervals 1 … {S['scale_before'] - 1}; "
                 "recovery = intervals from the resize until it is back to max(θmax, 1.1 × before), over the seeds "
                 "that recovered)\n\n"
                 + md_table(["algorithm", "imbalance before", "imbalance at resize", "imbalance after (mean)",
                             "recovery (intervals)", "state moved by the resize %", "state migrated from the resize on %",
                             "first plan after resize s", "final \\|A\\|"], t))
    parts.append("**Not reproduced here**\n\n" + disc["other"])
    return "\n\n".join(parts)


def _discussion(sweeps, readj, amax_rows, compact, S, scale) -> dict[str, str]:
    """One verdict line per paper figure (keys ``fig8`` … ``fig15``, ``sigma``, ``other``), from this run's numbers."""
    def get(sw, alg, x):
        return next(r for r in sweeps[sw] if r["algorithm"] == alg and r[sw] == x)

    def mig(sw, alg, x):
        return _t(get(sw, alg, x), "migration", 100)

    out: dict[str, str] = {}
    ths = sorted({r["theta"] for r in sweeps["theta"]})
    # MinTable / Mixed migration ratio per θmax and seed
    ratio = {t: [a / max(b, 1e-12) for a, b in zip(get("theta", "mintable", t)["migration_per_seed"],
                                                   get("theta", "mixed", t)["migration_per_seed"])] for t in ths}
    rmean = [float(np.mean(ratio[t])) for t in ths]
    seeds_below = sum(x <= 1 for t in ths for x in ratio[t])
    n_pairs = sum(len(ratio[t]) for t in ths)
    pt = [get("theta", "mixed", t)["plan_seconds"] for t in ths]
    mixm = [get("theta", "mixed", t)["migration"] for t in ths]
    falls = all(b <= a for a, b in zip(mixm, mixm[1:]))
    out["fig9"] = (
        # the figure's claim is the factor 3: partly needs at least 2× in the mean at every θmax; Mixed merely
        # migrating less (a factor above 1) is said as the direction only
        f"- {_verdict(min(rmean) >= 2.5 and seeds_below == 0, min(rmean) >= 2)}"
        + (" (the direction holds, not the factor)" if 1 < min(rmean) < 2 else "")
        + " — *Fig. 9, \"MinTable incurs three "
        "times the migration cost of Mixed\"; more migration for a stricter θmax; plan time falls as θmax grows; even "
        f"θmax = 0.02 plans in < 1 s.* MinTable / Mixed migration ratio over θmax ∈ {{{', '.join(map(str, ths))}}}: "
        + ", ".join(spread(ratio[t]).format(2) + "×" for t in ths)
        + f" (mean (min–max) over seeds; ratio ≤ 1 in {seeds_below} of {n_pairs} (θmax, seed) runs) — Mixed migrates "
        f"less on average, but by {min(rmean):.1f}–{max(rmean):.1f}×, not 3×; the paper's figure does not state its K "
        "and f, and the ratio depends on how much of the table MinTable's cleaning throws away (ours holds "
        f"~{get('theta', 'mixed', min(ths, key=lambda t: abs(t - BASE['theta'])))['table']:.0f} entries at K = "
        f"{S['base_keys']:,}).  Mixed's migration {'falls' if falls else 'does not fall monotonically'} as θmax grows "
        f"({mig('theta', 'mixed', ths[0])} % at θmax = {ths[0]} → {mig('theta', 'mixed', ths[-1])} % at {ths[-1]}).  "
        f"Plan time: Mixed {_t(get('theta', 'mixed', ths[0]), 'plan_seconds', 1e3)} ms at θmax = {ths[0]} and "
        f"{_t(get('theta', 'mixed', ths[-1]), 'plan_seconds', 1e3)} ms at θmax = {ths[-1]} — "
        + ("falling with θmax as in the paper" if pt[-1] < 0.7 * pt[0] else
           f"no clear trend: every Mixed plan takes {fmt(1e3 * min(pt), 2)}–{fmt(1e3 * max(pt), 2)} ms on average here, where "
           "run-to-run noise on the shared machine is as large as any θmax effect")
        + f"; Readj's plan time does fall steeply ({_t(get('theta', 'readj', ths[0]), 'plan_seconds', 1e3)} → "
        f"{_t(get('theta', 'readj', ths[-1]), 'plan_seconds', 1e3)} ms, its α follows θmax so a strict θmax makes it "
        f"track and readjust many more keys); the < 1 s bound for Mixed "
        + ("holds everywhere." if max(max(get("theta", "mixed", t)["plan_seconds_per_seed"]) for t in ths) < 1
           else "does not hold in every run."))
    ns = sorted({r["n"] for r in sweeps["n"]})
    from skewlab.engine.workloads.synthetic import zipf_probabilities

    p1 = float(zipf_probabilities(S["base_keys"], 0.85)[0])
    hot_n = [n for n in ns if p1 * n > 1 + BASE["theta"]]
    below = all(get("n", "mixed", n)["migration"] < get("n", "mintable", n)["migration"] for n in ns)
    below_seeds = sum(a < b for n in ns for a, b in zip(get("n", "mixed", n)["migration_per_seed"],
                                                         get("n", "mintable", n)["migration_per_seed"]))
    n_runs = sum(len(get("n", "mixed", n)["seeds"]) for n in ns)
    tab = max(r["table_max"] for r in sweeps["n"] if r["algorithm"] == "mixed")
    top = ns[-1]
    jump = get("n", "mixed", top)["migration"] >= 0.8 * get("n", "mintable", top)["migration"]
    out["fig8"] = (
        f"- {_verdict(below and jump, below)} — *Fig. 8, Mixed's migration cost much lower than MinTable for "
        f"N_D ≤ 35, approaching it at N_D = 40.* Mixed / MinTable migration per interval (%): "
        + ", ".join(f"N_D={n}: {mig('n', 'mixed', n)} / {mig('n', 'mintable', n)}" for n in ns)
        + f"; Mixed below MinTable in {below_seeds} of {n_runs} (N_D, seed) runs.  "
        + ("The first half holds; the jump at N_D = 40 is absent: it happens when the minimal table exceeds Amax "
           f"(\"Mixed degenerates to MinTable\"), and with Amax = {BASE['amax']} our largest Mixed table is {tab} "
           "entries" + (" — below the bound." if tab <= BASE["amax"] else ".")
           + "  The Amax sweep (Fig. 17 below) shows the degeneration when the bound binds." if not jump else
           f"At N_D = {top} Mixed's migration comes within 20 % of MinTable's, as in the paper.")
        + (f"  For N_D ≥ {hot_n[0]} no single-owner plan can meet θmax at all: the hottest key alone carries "
           f"p₁ = {100 * p1:.1f} % of the load (z = 0.85, K = {S['base_keys']:,}), more than (1 + θmax)·L̄ = "
           f"{100 * (1 + BASE['theta']) / hot_n[0]:.1f} % — which raises Mixed's imbalance after plan in the figure "
           "(PKG, which splits keys, is unaffected)." if hot_n else ""))
    ks = sorted({r["keys"] for r in sweeps["keys"]})
    kp = [get("keys", "mixed", k)["plan_seconds"] for k in ks]
    more_time = kp[-1] > kp[0]
    less_mig = all(get("keys", "mixed", k)["migration"] < get("keys", "mintable", k)["migration"] for k in ks)
    less_seeds = sum(a < b for k in ks for a, b in zip(get("keys", "mixed", k)["migration_per_seed"],
                                                        get("keys", "mintable", k)["migration_per_seed"]))
    k_runs = sum(len(get("keys", "mixed", k)["seeds"]) for k in ks)
    out["fig10"] = (
        f"- {_verdict(more_time and less_mig, more_time or less_mig)} — *Fig. 10, larger K: more plan time, less "
        "migration than MinTable.* Mixed plan time "
        + ", ".join(f"{_t(get('keys', 'mixed', k), 'plan_seconds', 1e3)} ms (K={k:,})" for k in ks)
        + "; migration Mixed vs MinTable (%) "
        + ", ".join(f"{mig('keys', 'mixed', k)} vs {mig('keys', 'mintable', k)}" for k in ks)
        + f".  Plan time {'grows' if more_time else 'does not grow'} with K and Mixed "
        + ("migrates less than MinTable at every K (on the mean)" if less_mig else
           "does not migrate less than MinTable at every K")
        + f"; Mixed below MinTable in {less_seeds} of {k_runs} (K, seed) runs"
        + ".  Above 10⁵ keys Mixed plans on the compact representation (skewlab's compact_threshold), which keeps "
        "the growth sub-linear.")
    fs = sorted({r["f"] for r in sweeps["f"]})
    f_lo, f_hi = fs[0], fs[-1]
    mg = lambda a, f: get("f", a, f)["migration"]  # noqa: E731
    grows_faster = (mg("readj", f_hi) - mg("readj", f_lo)) > (mg("mixed", f_hi) - mg("mixed", f_lo))
    bf_close = abs(mg("mixed-bf", f_hi) - mg("mixed", f_hi)) <= 0.25 * max(mg("mixed", f_hi), 1e-12)
    slower = get("f", "readj", f_hi)["plan_seconds"] > get("f", "mixed", f_hi)["plan_seconds"]
    n_ok = int(grows_faster) + int(bf_close) + int(slower)
    out["fig12"] = (
        f"- {_verdict(n_ok == 3, n_ok >= 1)} — *Fig. 12, with larger f Readj's migration grows faster than Mixed's "
        f"and Readj plans far slower; MixedBF ≈ Mixed.* MixedBF ≈ Mixed: {'reproduced' if bf_close else '**not reproduced**'} "
        f"(f = {f_hi}: {mig('f', 'mixed-bf', f_hi)} vs {mig('f', 'mixed', f_hi)} %).  Readj plans slower than Mixed: "
        f"{'reproduced' if slower else '**not reproduced**'} (f = {f_hi}: "
        f"{_t(get('f', 'readj', f_hi), 'plan_seconds', 1e3)} ms vs {_t(get('f', 'mixed', f_hi), 'plan_seconds', 1e3)} ms).  "
        f"Readj's migration growing faster: {'reproduced' if grows_faster else '**not reproduced**'} "
        f"(f = {f_lo} → {f_hi}: Readj {mig('f', 'readj', f_lo)} → {mig('f', 'readj', f_hi)} %, Mixed "
        f"{mig('f', 'mixed', f_lo)} → {mig('f', 'mixed', f_hi)} %).  Why: Readj's plans never reach θmax = "
        f"{BASE['theta']} here (the plan's own imbalance {_t(get('f', 'readj', f_hi), 'plan_imbalance')}, routed on the "
        f"next interval {_t(get('f', 'readj', f_hi), 'imbalance_after')}; Mixed "
        f"{_t(get('f', 'mixed', f_hi), 'plan_imbalance')} / {_t(get('f', 'mixed', f_hi), 'imbalance_after')}) — Gedik's "
        "algorithms only place the tracked frequent keys and leave the rest on the consistent hash, i.e. the "
        "paper's own remark that Readj \"works only when the system allows fairly imbalance\" (θmax ≈ 0.3) — so "
        "it does less balancing and moves less.  Both route on the same consistent-hash ring (Mixed's base hash, "
        "as in the paper), and the fluctuation surges an instance of the generator's own seeded hash, so neither "
        f"sees the surge on a single worker (routed imbalance at f = {f_hi}: Readj "
        f"{_t(get('f', 'readj', f_hi), 'routed_imbalance')}, Mixed {_t(get('f', 'mixed', f_hi), 'routed_imbalance')}; "
        f"PKG, which splits every key, {_t(get('f', 'pkg', f_hi), 'routed_imbalance', digits=1)}).  The paper tuned "
        "Readj's δ by binary search; we "
        f"set its α from θmax and tried σ ∈ {{{', '.join(str(r['sigma']) for r in readj)}}} at the base configuration "
        "(next item).")
    if readj:
        out["sigma"] = ("- *Readj's σ* (paper: best of several σ; base configuration): "
                        + "; ".join(f"σ = {r['sigma']}: migration {_t(r, 'migration', 100)} %, plan "
                                    f"{_t(r, 'plan_seconds', 1e3)} ms, plan's own imbalance {_t(r, 'plan_imbalance')}, next "
                                    f"interval {_t(r, 'imbalance_after')}"
                                    for r in readj)
                        + ".  Smaller σ tracks more keys (slower plans) but does not bring Readj to θmax.")
    am = sorted((r for r in amax_rows if r["theta"] == BASE["theta"]), key=lambda r: r["amax"])
    if am:
        small, large = am[0], am[-1]
        drop = 1.0 - large["migration"] / max(small["migration"], 1e-12)
        drop_seeds = sum(b < a for a, b in zip(small["migration_per_seed"], large["migration_per_seed"]))
        strict = sorted((r for r in amax_rows if r["theta"] == min(r2["theta"] for r2 in amax_rows)),
                        key=lambda r: r["amax"])
        out["fig17"] = (
            f"- {_verdict(drop >= 0.2, drop > 0)} — *Fig. 17, migration cost is large when N_A is small and drops "
            f"greatly once N_A suffices (N_A ≥ 2000 at θmax = 0.08).* θmax = {BASE['theta']}: "
            + ", ".join(f"Amax = {r['amax']}: {_t(r, 'migration', 100)} % (feasible {_t(r, 'feasible')}, |A| ≤ "
                        f"{r['table_max']})" for r in am)
            + f"; from the smallest to the largest Amax migration falls by {100 * drop:.1f} % of its value (lower in "
            f"{drop_seeds} of {len(small['seeds'])} seeds).  "
            + ("The drop is large, as in the paper." if drop >= 0.2 else
               "The direction holds but the drop is small, not the paper's large step.")
            + f"  The knee is at a much smaller N_A than the paper's 1000–2000 because our K = {S['base_keys']:,} "
            f"instance needs only ~{large['table_max']} table entries when unconstrained; below that, Mixed keeps "
            "cleaning the table and migrates more, and the plan may be reported infeasible"
            + (f" (θmax = {strict[0]['theta']}, Amax = {strict[0]['amax']}: feasible share {_t(strict[0], 'feasible')})"
               if strict and strict[0]["theta"] != BASE["theta"] else "")
            + "; |A| never exceeds Amax (a hard limit: when both bounds cannot hold θmax gives way, `bound_priority`).  "
            "Fig. 18 (table growth of MinMig over adjustments) is not run.")
    ex = next(r for r in compact if r["R"] == "exact")
    r8 = {r["values"]: r for r in compact if r["R"] == 8}
    rep = [r for r in compact if r["values"] == "representative"]
    mean = [r for r in compact if r["values"] == "mean"]
    if r8 and rep:
        sp8 = max(r["speedup"] for r in r8.values())
        err_rep = max(max(r["load_error_per_seed"]) for r in rep)
        err_mean = max(max(r["load_error_per_seed"]) for r in mean) if mean else 0.0
        out["fig11"] = (
            f"- {_verdict(sp8 >= 5 and err_rep <= 0.01, sp8 > 1 or err_rep <= 0.01)} — *Fig. 11, R = 8 is ~10× "
            f"faster than the original key space (0.6 s vs 6 s); load-estimation error ≤ 1 % for R = 1…256.* "
            f"K = {S['compact_keys']:,}: exact {_t(ex, 'plan_seconds', 1e3)} ms, R = 8 "
            + ", ".join(f"{_t(r, 'plan_seconds', 1e3)} ms ({_t(r, 'speedup')}×, {v} values)" for v, r in r8.items())
            + f".  Load error with the paper's representative values: up to {100 * err_rep:.2f} % of L̄ over "
            f"R = 1…256 and all seeds ({'within' if err_rep <= 0.01 else 'above'} the paper's 1 %; per R in the "
            f"table); with skewlab's mean values {100 * err_mean:.2f} % at most (a record's mean cost is exact until "
            "the record is split).  The compact representation is faster, but our exact planner is already fast "
            "(numba), so the speed-up is smaller than the paper's 10× and noisy at the ms scale.")
    if scale:
        out["fig15"] = _scale_discussion(scale, S)
    out["other"] = (
        "- **Verdict: not reproduced** (not run) — *Fig. 7 (imbalance of plain hashing vs N_D and K), Fig. 13/14 "
        "(throughput and latency on Storm vs f and θmax), Fig. 16 (TPC-H Q5 on Storm), Fig. 18–21 (table growth of "
        "MinMig, window size w, β).*  Fig. 13/14/16 measure throughput and latency of a Storm cluster on real data "
        "sets (Social, Stock) and TPC-H, which we have neither; the local simulation has no throughput model "
        "(skewlab's own Spark throughput is measured in the Performance section, a different experiment).  Fig. 7's "
        "effect (hashing alone is unbalanced) is visible in the routed imbalance of `hash`/`pkg` in the scale-out "
        "table; the parameter studies of Fig. 18–21 are not part of this benchmark.  Every figure here is run with "
        "window w = 1 only; the paper's second setting, w = 5 (Sec. V), is not run (lack of time).")
    return out


def _scale_discussion(scale, S) -> str:
    by = {r["label"]: r for r in scale}
    mx, mod, rj, pk, hs = by["mixed"], by["mixed (base=mod)"], by["readj"], by["pkg"], by["hash"]

    def rec(r):
        vals = r["recovery_per_seed"]
        got = [v for v in vals if v is not None]
        if not got:
            return "never (no seed)"
        txt = f"{max(got)} interval(s)" if min(got) == max(got) else f"{min(got)}–{max(got)} intervals"
        return txt + (f", never in {len(vals) - len(got)}/{len(vals)} seeds" if len(got) < len(vals) else
                      " in every seed")

    faster = (mx["first_plan_seconds"] or 0) < (rj["first_plan_seconds"] or 0)
    balanced = mx["recovery"] is not None and (rj["recovery"] is None or mx["recovery"] <= rj["recovery"])
    ok = faster and balanced
    fp = lambda r: _t(r, "first_plan_seconds", 1e3) if r["first_plan_seconds"] is not None else "-"  # noqa: E731
    return (
        f"- {_verdict(False, ok)} — *Fig. 15, scale-out: after one instance is added, Mixed rebalances at once while "
        f"Readj needs minutes to plan; PKG stays below Mixed's throughput.* "
        f"N_D = {BASE['n']} → {BASE['n'] + 1}: Mixed is back to its balance before the resize after {rec(mx)} "
        f"(imbalance {_t(mx, 'imbalance_before')} before, {_t(mx, 'imbalance_at')} at the resize, "
        f"{_t(mx, 'imbalance_after')} after), its first plan takes {fp(mx)} ms vs Readj {fp(rj)} ms "
        f"(Readj: {rec(rj)}, imbalance after {_t(rj, 'imbalance_after')}"
        + (f"; not minutes as in the paper, which measured Readj on Storm with the Social data: on K = "
           f"{S['base_keys']:,} keys our Readj plans in milliseconds" if (rj["first_plan_seconds"] or 0) < 1 else "")
        + f").  The resize itself moves {_t(mx, 'resize_migration', 100)} % of the state with Mixed on consistent "
        f"hashing (the paper's basic hash function) against {_t(mod, 'resize_migration', 100)} % with `base=mod` "
        f"(h(k) = fp mod n re-homes almost every key; `hash`: {_t(hs, 'resize_migration', 100)} %); from the resize "
        f"on Mixed migrates {_t(mx, 'migration_after', 100)} % in all, MinTable "
        f"{_t(by['mintable'], 'migration_after', 100)} % (its cleaning sends every table entry home).  PKG routes "
        f"with imbalance {_t(pk, 'imbalance_after', digits=1)} after the resize without migrating.  "
        + ("Partly: the paper's plot is throughput over time on Storm with real data, which we do not measure; what "
           "the simulation shows is the direction — Mixed back to balance quickly and planning faster than Readj, "
           "which does not return to θmax." if ok else
           "Not: in this run Mixed does not both recover and plan faster than Readj, and the paper's throughput over "
           "time on Storm is not measured."))
