"""Reproduction of Guo & Zhou, "Stateful load balancing for parallel stream processing", Euro-Par 2017
workshops (``skewlab bench guo-zhou``).

Set-up (paper Sec. 5.1): n = 10 instances, statistic windows of 1 minute over 2 hours (120 windows);
stream S1 — partition key with p = 100 values whose per-window loads are Gaussian (skewlab workload
``gaussian``, 100 substreams, cv = 0.3, loads redrawn every window); stream S2 — the same 100 keys with
Zipf-distributed loads (workload ``zipf``, 100 keys).  The paper gives neither S2's exponent nor how its
distribution changes; we use z = 0.5 (hottest key 5.4 % of the tuples, so one instance's fair share,
10 %, can hold it) and Fang's fluctuation f = 0.5 per window ("S2 simulates the change of data
distribution").  Algorithms: ``elb`` and ``clb`` (CLB rebalances every m = 24 windows: 5 balancings in
120 windows, as in the paper's "5 load balancing in total"), baselines ``pkg`` and ``uhlb`` (θmax = 0.2,
skewlab default).  State: the keyed window state of the last window (window = 1 interval), i.e.
proportional to the data rate as in the paper's Fig. 1 (ψ(o) = r(o)/10).

Metrics (paper Sec. 2.2 / 5): load imbalance var(L_t) = population variance of the instances' tuple
counts in window t (Eq. 1; absolute, so it scales with the window's tuple count squared — we also give
var(L)/mean(L)², which does not) and state movement = state moved / total state per window (Eq. 2).

Sizes: the paper's Poisson rate λ = 10⁴ tuples/s gives 6·10⁵ tuples per window; the full run uses
5·10⁴ per window (120 windows), quick 5·10³ (24 windows, CLB m = 6).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from bench.common import Context, Section, check, legend_once, md_table, new_figure, save_figure, simulate, style
from engine.simulate import SimulationConfig

KEY = "guo-zhou"
TITLE = "Guo & Zhou Euro-Par 2017 — ELB / CLB vs PKG / UHLB"
ALGOS = ("elb", "clb", "pkg", "uhlb")
WORKLOADS = {
    "gaussian": ("gaussian", {"substreams": 100, "cv": 0.3}),
    "zipf": ("zipf", {"keys": 100, "z": 0.5, "f": 0.5}),
}
PAPER_MOVE = {"pkg": 21.2, "uhlb": 24.2, "elb": 14.5, "clb": 48.4}  # % per balancing (CLB amortised: 1.6 %)


def sizes(quick: bool) -> dict[str, Any]:
    if quick:
        return {"windows": 24, "per_window": 5_000, "clb_m": 6, "workers": 10}
    return {"windows": 120, "per_window": 50_000, "clb_m": 24, "workers": 10}


def units(quick: bool) -> int:
    return len(ALGOS) * len(WORKLOADS)


def run(ctx: Context) -> Section:
    t0 = time.perf_counter()
    S = sizes(ctx.quick)
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    for wname, (wl, wp) in WORKLOADS.items():
        for alg in ALGOS:
            params = {"m": S["clb_m"]} if alg == "clb" else {}
            cfg = SimulationConfig(algorithm=alg, workers=S["workers"], sources=2, workload=wl, workload_params=wp,
                                   messages=S["windows"] * S["per_window"], interval_messages=S["per_window"],
                                   seed=ctx.seed, params=params, window=1)
            r = simulate(cfg)
            iv = r["intervals"]
            var = np.array([i["load_variance"] for i in iv])
            mean_load = np.array([i["tuples"] / S["workers"] for i in iv])
            mig = np.array([i["migration_cost"] for i in iv])
            reb = np.array([bool(i["rebalanced"]) for i in iv])
            runs[(wname, alg)] = {
                "var": var.tolist(),
                "cv2": (var / np.maximum(mean_load, 1e-12) ** 2).tolist(),
                "migration": mig.tolist(),
                "rebalanced": reb.tolist(),
                "var_mean": float(var.mean()), "var_std": float(var.std()),
                "cv2_mean": float(np.mean(var / np.maximum(mean_load, 1e-12) ** 2)),
                "imbalance_mean": float(np.mean([i["imbalance"] for i in iv])),
                "move_mean": float(mig.mean()),
                "move_per_balancing": float(mig[reb].mean()) if reb.any() else 0.0,
                "balancings": int(reb.sum()),
                "replication": float(r["replication"]),
                "windows": len(iv),
            }
            ctx.tick(f"guo-zhou {wname} {alg}")
    sec = Section(KEY, TITLE, ctx.command(KEY), "",
                  data={"runs": {f"{w}/{a}": v for (w, a), v in runs.items()}, "sizes": S})
    _figures(ctx, sec, runs)
    _checks(sec, runs, S)
    sec.markdown = _markdown(sec, runs, S)
    sec.seconds = time.perf_counter() - t0
    return sec


def _figures(ctx, sec, runs) -> None:
    fig, axes = new_figure(2, 2, width=4.6, height=2.9)
    for i, w in enumerate(WORKLOADS):
        for alg in ALGOS:
            r = runs[(w, alg)]
            t = np.arange(1, r["windows"] + 1)
            st = style(alg)
            st["marker"] = None
            axes[i, 0].plot(t, np.maximum(r["var"], 1e-3), label=alg, **st)
            axes[i, 1].plot(t, 100 * np.asarray(r["migration"]), label=alg, **st)
        axes[i, 0].set_yscale("log")
        axes[i, 0].set_ylabel(f"{w}: var(L) [tuples²]")
        axes[i, 1].set_ylabel(f"{w}: state moved (%)")
    for ax in axes[1]:
        ax.set_xlabel("statistic window")
    axes[0, 0].set_title("load imbalance over time (Fig. 2/3)", fontsize=9)
    axes[0, 1].set_title("state movement per window (Fig. 4)", fontsize=9)
    legend_once(fig, axes, ncol=4)
    sec.figures.append(save_figure(fig, ctx, "guo_zhou_over_time.png", "ELB / CLB vs PKG / UHLB, n = 10"))


def _checks(sec, runs, S) -> None:
    c = sec.checks
    ok = all(r["windows"] == S["windows"] for r in runs.values())
    check(c, "one row per statistic window", ok, f"{S['windows']} windows × {len(runs)} runs")
    mig = [x for r in runs.values() for x in r["migration"]]
    check(c, "state movement within [0, 1]", min(mig) >= 0 and max(mig) <= 1 + 1e-12, f"max {max(mig):.3f}")
    pk = [runs[(w, "pkg")]["move_mean"] for w in WORKLOADS]
    check(c, "pkg never migrates state (split keys)", max(pk) == 0.0, f"{pk}")
    for w in WORKLOADS:
        u, e = runs[(w, "uhlb")], runs[(w, "elb")]
        check(c, f"{w}: uhlb moves more state per balancing than elb", u["move_per_balancing"] > e["move_per_balancing"],
              f"uhlb {100 * u['move_per_balancing']:.1f} % vs elb {100 * e['move_per_balancing']:.1f} %")
        cl = runs[(w, "clb")]
        expect = S["windows"] // S["clb_m"]
        check(c, f"{w}: clb balances every m windows", abs(cl["balancings"] - expect) <= 1,
              f"{cl['balancings']} balancings, expected ≈ {expect}")


def _markdown(sec, runs, S) -> str:
    parts = [
        f"Set-up: n = {S['workers']}, {S['windows']} statistic windows of {S['per_window']:,} tuples (paper: 120 "
        f"windows of ≈ 6·10⁵), 2 sources, state window = 1 interval; S1 = `gaussian` (p = 100, cv = 0.3), "
        f"S2 = `zipf` (100 keys, z = 0.5, fluctuation f = 0.5); CLB m = {S['clb_m']}; ELB [v, u] = [0.8, 1.2]·mean; "
        "UHLB θmax = 0.2.  ELB/CLB/UHLB map keys to 1024 hash substreams (skewlab default; the 100 keys are then "
        "almost always one per substream, the paper's 100 substreams)."]
    for f in sec.figures:
        parts.append(f"![{f}]({f})")
    rows = []
    for w in WORKLOADS:
        for a in ALGOS:
            r = runs[(w, a)]
            rows.append([w, a, r["var_mean"], r["var_std"], r["cv2_mean"], r["imbalance_mean"], 100 * r["move_mean"],
                         100 * r["move_per_balancing"], r["balancings"], r["replication"]])
    parts.append("**Load imbalance and state movement (Table 1 / Fig. 4 analogue)**\n\n" + md_table(
        ["stream", "algorithm", "mean var(L)", "std var(L)", "mean var/mean²", "mean max/mean−1",
         "state moved % per window", "% per balancing", "balancings", "replication"], rows))
    parts.append(_discussion(runs))
    return "\n\n".join(parts)


def _discussion(runs) -> str:
    g = {a: runs[("gaussian", a)] for a in ALGOS}
    z = {a: runs[("zipf", a)] for a in ALGOS}
    both = (g, z)
    lines = ["**Comparison with the paper**", ""]
    elb_lt_uhlb = all(x["elb"]["move_per_balancing"] < x["uhlb"]["move_per_balancing"] for x in both)
    lines.append(
        f"- *State movement per balancing: PKG 21.2 %, UHLB 24.2 %, ELB 14.5 %, CLB 48.4 % (1.6 % amortised).* "
        f"Ours (Gaussian / Zipf): UHLB {100 * g['uhlb']['move_per_balancing']:.0f} / {100 * z['uhlb']['move_per_balancing']:.0f} %, "
        f"ELB {100 * g['elb']['move_per_balancing']:.1f} / {100 * z['elb']['move_per_balancing']:.1f} %, "
        f"CLB {100 * g['clb']['move_per_balancing']:.0f} / {100 * z['clb']['move_per_balancing']:.0f} % per balancing "
        f"= {100 * g['clb']['move_mean']:.1f} / {100 * z['clb']['move_mean']:.1f} % amortised per window.  "
        + ("ELB < UHLB per balancing and CLB's rare, large moves: reproduced in direction.  " if elb_lt_uhlb else "")
        + "The sizes differ: a redrawn universal hash re-places ≈ (n−1)/n of the substreams, and our UHLB redraws "
        f"whenever θ > 0.2, which with 100 keys on 10 workers happens in almost every window "
        f"({g['uhlb']['balancings']} / {z['uhlb']['balancings']} of {g['uhlb']['windows']}); the paper does not say "
        "when its UHLB rebalanced (24 % suggests far less often, or a hash family that keeps most substreams).  "
        "ELB moves less than the paper's 14.5 % because it only moves the substreams needed to bring instances "
        "into [v, u].  **PKG**: skewlab's PKG never migrates state — it splits each key over two workers instead "
        f"(replication {g['pkg']['replication']:.2f}); the paper's 21.2 % for PKG has no counterpart in our model "
        "(it presumably counts partial states that must be merged).")
    pkg_best = all(x["pkg"]["var_mean"] < min(x[a]["var_mean"] for a in ("elb", "clb", "uhlb")) for x in both)
    elb_clb = all(x["elb"]["var_mean"] < x["clb"]["var_mean"] for x in both)
    uhlb_elb = all(x["uhlb"]["var_mean"] < x["elb"]["var_mean"] for x in both)
    lines.append(
        "- *\"UHLB and PKG beat our algorithms on load imbalance\"; \"ELB outperforms CLB\".*  PKG lowest var(L): "
        f"{'reproduced' if pkg_best else 'not reproduced'} (Gaussian {g['pkg']['var_mean']:.3g}, Zipf "
        f"{z['pkg']['var_mean']:.3g} vs ELB {g['elb']['var_mean']:.3g} / {z['elb']['var_mean']:.3g}; on the Gaussian "
        "stream PKG is nearly perfect because no key is heavy).  ELB < CLB: "
        f"{'reproduced' if elb_clb else 'not reproduced'} (CLB {g['clb']['var_mean']:.3g} / {z['clb']['var_mean']:.3g}).  "
        f"UHLB < ELB: {'reproduced' if uhlb_elb else '**not reproduced**'} (UHLB {g['uhlb']['var_mean']:.3g} / "
        f"{z['uhlb']['var_mean']:.3g})"
        + ("" if uhlb_elb else
           f": a random hash of 100 substreams onto 10 instances is itself imbalanced (mean max/mean − 1 = "
           f"{g['uhlb']['imbalance_mean']:.2f} / {z['uhlb']['imbalance_mean']:.2f}), and redrawing it does not lower the "
           "variance on average; the paper's UHLB (on its Twitter data) must have been luckier or drawn from a "
           "better-spread family")
        + ".")
    lines.append(
        f"- *Gaussian vs Zipf (Fig. 2, CLB): \"equal mean var(L), fluctuations differ\".* CLB mean var(L): Gaussian "
        f"{g['clb']['var_mean']:.3g} ± {g['clb']['var_std']:.2g}, Zipf {z['clb']['var_mean']:.3g} ± "
        f"{z['clb']['var_std']:.2g}.  The paper's two means agree (2.09e10 vs 2.08e10), which depends on S2's exponent "
        "(not stated); with our z = 0.5 plus fluctuation the Zipf stream is "
        + ("harder" if z["clb"]["var_mean"] > g["clb"]["var_mean"] else "easier")
        + " to balance.  The paper's absolute values (≈ 2·10¹⁰ tuples²) correspond to ≈ 6·10⁵ tuples per window; "
        "ours are per 5·10⁴ tuples, hence the normalised column var/mean².")
    lines.append(
        "- *Reconstruction caveat.* The paper's pseudo-code figures (Alg. 1 ELB, Alg. 2 CLB) are missing from the "
        "text we have; both are reconstructed from the prose (see `engine/rebalancers/guo_zhou.py`), so "
        "differences in detail are expected.  With i.i.d. Gaussian windows (the workload's default ρ = 0) the "
        "last window's loads say nothing about the next one, so ELB's per-window moves cannot lower the *next* "
        "window's variance — they follow noise, which bounds what any window-by-window balancer can do here.")
    return "\n".join(lines)
