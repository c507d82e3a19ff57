"""Reproduction of Guo & Zhou, "Stateful load balancing for parallel stream processing", Euro-Par 2017
workshops (``skewlab bench guo-zhou``).

Set-up (paper Sec. 5.1): n = 10 instances, statistic windows of 1 minute over 2 hours (120 windows);
stream S1 — partition key with p = 100 values whose per-window loads are Gaussian (skewlab workload
``gaussian``, 100 substreams, cv = 0.3, loads redrawn every window); stream S2 — the same 100 keys with
Zipf-distributed loads (workload ``zipf``, 100 keys).  The paper gives neither S2's exponent nor how its
distribution changes; we use z = 0.5 (hottest key 5.4 % of the tuples, so one instance's fair share,
10 %, can hold it) and Fang's fluctuation f = 0.5 per window ("S2 simulates the change of data
distribution").  Algorithms: ``elb`` and ``clb`` (the paper's CLB, ``repair`` off; CLB rebalances every
m = 24 windows: 5 balancings in 120 windows, as in the paper's "5 load balancing in total"), the
labelled skewlab extension ``clb+repair`` (``clb`` with ``repair=true``), baselines ``pkg``, ``uhlb``
(θmax = 0.2, skewlab default) and the static key grouping ``hash``.  State: the keyed window state of the last window (window = 1 interval), i.e.
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
#: run label -> (registered algorithm, parameters); ``clb+repair`` is the skewlab extension, labelled
RUNS = {
    "elb": ("elb", {}),
    "clb": ("clb", {}),
    "clb+repair": ("clb", {"repair": True}),
    "pkg": ("pkg", {}),
    "uhlb": ("uhlb", {}),
    "hash": ("hash", {}),
}
ALGOS = tuple(RUNS)
WORKLOADS = {
    "gaussian": ("gaussian", {"substreams": 100, "cv": 0.3}),
    "zipf": ("zipf", {"keys": 100, "z": 0.5, "f": 0.5}),
}
PAPER_MOVE = {"pkg": 21.2, "uhlb": 24.2, "elb": 14.5, "clb": 48.4}  # % per balancing (CLB amortised: 1.6 %)


def sizes(quick: bool) -> dict[str, Any]:
    if quick:
        return {"windows": 24, "per_window": 5_000, "clb_m": 6, "workers": 10}
    return {"windows": 120, "per_window": 50_000, "clb_m": 24, "workers": 10}


def units(quick: bool, seeds: int = 1) -> int:
    return len(ALGOS) * len(WORKLOADS)


def run(ctx: Context) -> Section:
    t0 = time.perf_counter()
    S = sizes(ctx.quick)
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    for wname, (wl, wp) in WORKLOADS.items():
        for alg in ALGOS:
            algorithm, params = RUNS[alg]
            params = dict(params, m=S["clb_m"]) if algorithm == "clb" else dict(params)
            cfg = SimulationConfig(algorithm=algorithm, workers=S["workers"], sources=2, workload=wl, workload_params=wp,
                                   messages=S["windows"] * S["per_window"], interval_messages=S["per_window"],
                                   seed=ctx.seed, params=params, window=1)
            r = simulate(cfg)
            iv = r["intervals"]
            var = np.array([i["load_variance"] for i in iv])
            mean_load = np.array([i["tuples"] / S["workers"] for i in iv])
            mig = np.array([i["migration_cost"] for i in iv])
            reb = np.array([bool(i["rebalanced"]) for i in iv])  # a plan was computed (it may keep the table)
            moved = mig > 0
            runs[(wname, alg)] = {
                "var": var.tolist(),
                "cv2": (var / np.maximum(mean_load, 1e-12) ** 2).tolist(),
                "migration": mig.tolist(),
                "rebalanced": reb.tolist(),
                "var_mean": float(var.mean()), "var_std": float(var.std()),
                "cv2_mean": float(np.mean(var / np.maximum(mean_load, 1e-12) ** 2)),
                "imbalance_mean": float(np.mean([i["imbalance"] for i in iv])),
                "move_mean": float(mig.mean()),
                "move_per_balancing": float(mig[moved].mean()) if moved.any() else 0.0,
                "balancings": int(reb.sum()),
                "moving_windows": int(moved.sum()),
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
            st = style(RUNS[alg][0])
            st["marker"] = None
            if alg != RUNS[alg][0]:  # a labelled extension: its algorithm's colour, dashed
                st["linestyle"] = "--"
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
    pk = [runs[(w, a)]["move_mean"] for w in WORKLOADS for a in ("pkg", "hash")]
    check(c, "pkg and hash never migrate state", max(pk) == 0.0, f"{pk}")
    for w in WORKLOADS:
        u, e = runs[(w, "uhlb")], runs[(w, "elb")]
        check(c, f"{w}: uhlb moves more state per balancing than elb", u["move_per_balancing"] > e["move_per_balancing"],
              f"uhlb {100 * u['move_per_balancing']:.1f} % vs elb {100 * e['move_per_balancing']:.1f} %")
        expect = S["windows"] // S["clb_m"]
        for a in ("clb", "clb+repair"):
            cl = runs[(w, a)]
            check(c, f"{w}: {a} balances every m windows", abs(cl["balancings"] - expect) <= 1,
                  f"{cl['balancings']} balancings, expected ≈ {expect}")



def _markdown(sec, runs, S) -> str:
    parts = [
        f"Set-up: n = {S['workers']}, {S['windows']} statistic windows of {S['per_window']:,} tuples (paper: 120 "
        f"windows of ≈ 6·10⁵), 2 sources, state window = 1 interval; S1 = `gaussian` (p = 100, cv = 0.3), "
        f"S2 = `zipf` (100 keys, z = 0.5, fluctuation f = 0.5); CLB m = {S['clb_m']}; ELB [v, u] = [0.8, 1.2]·mean; "
        "UHLB θmax = 0.2.  `clb` is the paper's CLB (covariance split only, `repair=false`, the default); "
        "`clb+repair` is the **skewlab extension** (`repair=true`: ELB phases 2–3 on the mean loads after the "
        "split), reported separately.  `hash` is static key grouping (fp mod n).  ELB/CLB/UHLB map keys to 1024 "
        "hash substreams (skewlab default; the 100 keys are then almost always one per substream, the paper's "
        "100 substreams)."]
    for f in sec.figures:
        parts.append(f"![{f}]({f})")
    rows = []
    for w in WORKLOADS:
        for a in ALGOS:
            r = runs[(w, a)]
            rows.append([w, a, r["var_mean"], r["var_std"], r["cv2_mean"], r["imbalance_mean"], 100 * r["move_mean"],
                         100 * r["move_per_balancing"], r["balancings"], r["moving_windows"], r["replication"]])
    parts.append("**Load imbalance and state movement (Table 1 / Fig. 4 analogue)** (`plans`: windows in which the "
                 "algorithm was asked for a plan; `moves`: windows in which state moved; `% per move` = mean over "
                 "those)\n\n" + md_table(
                     ["stream", "algorithm", "mean var(L)", "std var(L)", "mean var/mean²", "mean max/mean−1",
                      "state moved % per window", "% per move", "plans", "moves", "replication"], rows))
    parts.append(_discussion(runs))
    return "\n\n".join(parts)


def _verdict(ok: bool, partly: bool = False) -> str:
    return "**Reproduced.**" if ok else ("**Partly reproduced.**" if partly else "**Not reproduced.**")


def _discussion(runs) -> str:
    g = {a: runs[("gaussian", a)] for a in ALGOS}
    z = {a: runs[("zipf", a)] for a in ALGOS}
    both = (g, z)

    def gz(a, key, fmt="{:.3g}", scale=1.0):
        return f"{fmt.format(scale * g[a][key])} / {fmt.format(scale * z[a][key])}"

    lines = ["**Comparison with the paper** (Gaussian / Zipf).  The paper's Table 1 and Figs. 3–4 are measured on "
             "its Twitter stream (10.6 M tweets), which we do not have; we compare on its synthetic streams S1/S2, "
             "whose 100 keys make hashing much coarser than on tweets.", ""]
    # Table 1 / Fig. 3: imbalance
    pkg_best = all(x["pkg"]["var_mean"] < min(x[a]["var_mean"] for a in ("elb", "clb", "uhlb")) for x in both)
    uhlb_clb = all(x["uhlb"]["var_mean"] < x["clb"]["var_mean"] for x in both)
    uhlb_elb = all(x["uhlb"]["var_mean"] < x["elb"]["var_mean"] for x in both)
    order10 = all(10 * x[a]["var_mean"] <= x["clb"]["var_mean"] for x in both for a in ("pkg", "uhlb"))
    lines.append(
        "- *Table 1 / Fig. 3 — \"UHLB and PKG beat our algorithms on load imbalance\"; \"in terms of CLB, UHLB and "
        "PKG reduce imbalance by at least an order of magnitude\".* "
        + _verdict(pkg_best and uhlb_clb and uhlb_elb and order10, pkg_best or uhlb_clb)
        + f" Mean var(L): PKG {gz('pkg', 'var_mean')} (lowest: {'yes' if pkg_best else 'no'}), UHLB "
        f"{gz('uhlb', 'var_mean')}, ELB {gz('elb', 'var_mean')}, CLB {gz('clb', 'var_mean')}, static hash "
        f"{gz('hash', 'var_mean')}.  UHLB < static hash: "
        f"{'yes' if all(x['uhlb']['var_mean'] < x['hash']['var_mean'] for x in both) else 'no'}; "
        f"UHLB < CLB: {'yes' if uhlb_clb else 'no'}; UHLB < ELB: "
        f"{'yes' if uhlb_elb else 'no'}; ≥ 10× below CLB (PKG and UHLB): {'yes' if order10 else 'no'}.  "
        "A 2-universal hash of 100 keys onto 10 instances leaves each instance ≈ 10 ± 3 keys (mean max/mean − 1 "
        f"of UHLB {gz('uhlb', 'imbalance_mean', '{:.2f}')}), so no member reaches θmax = 0.2 and UHLB is asked for a "
        f"plan in {g['uhlb']['balancings']} / {z['uhlb']['balancings']} of {g['uhlb']['windows']} windows; it adopts a "
        f"draw only when it lowers var(L) on the window, which happened in {g['uhlb']['moving_windows']} / "
        f"{z['uhlb']['moving_windows']} windows.  On tweets (many keys per substream) a random member is close to "
        "balanced, which is where the paper's UHLB beats ELB; with 100 keys only ELB's load-aware moves get near "
        "PKG, which splits keys.")
    elb_clb = all(x["elb"]["var_mean"] < x["clb"]["var_mean"] for x in both)
    lines.append(
        f"- *Fig. 3 — \"ELB outperforms CLB on load imbalance\".* {_verdict(elb_clb)} ELB {gz('elb', 'var_mean')} vs "
        f"the paper's CLB {gz('clb', 'var_mean')}.  The skewlab extension `clb+repair` (not the paper's algorithm) "
        f"reaches {gz('clb+repair', 'var_mean')}: the covariance split ignores the instances' mean loads (the η_i² "
        "term the paper drops after Eq. 4), which the repair step restores.")
    # Fig. 4: state movement
    elb_lt_uhlb = all(x["elb"]["move_mean"] < x["uhlb"]["move_mean"] for x in both)
    clb_small = all(x["clb"]["move_mean"] < min(x["elb"]["move_mean"], x["uhlb"]["move_mean"]) for x in both)
    lines.append(
        "- *Fig. 4 — state moved per window: PKG 21.2 %, UHLB 24.2 %, ELB 14.5 %; CLB 48.4 % per balancing, 1.6 % "
        "amortised, \"negligible\" next to the others.* "
        + _verdict(False, elb_lt_uhlb or clb_small)
        + f" Ours, % per window: UHLB {gz('uhlb', 'move_mean', '{:.1f}', 100)}, ELB {gz('elb', 'move_mean', '{:.1f}', 100)}, "
        f"CLB {gz('clb', 'move_mean', '{:.1f}', 100)} ({gz('clb', 'move_per_balancing', '{:.0f}', 100)} % per balancing; "
        f"`clb+repair` {gz('clb+repair', 'move_mean', '{:.1f}', 100)}).  ELB < UHLB: {'yes' if elb_lt_uhlb else 'no'}; "
        f"CLB below both: {'yes' if clb_small else 'no'}.  A redraw of UHLB moves ≈ (n−1)/n = 90 % of the state "
        f"(ours: {gz('uhlb', 'move_per_balancing', '{:.0f}', 100)} % per move), so the paper's 24.2 % per window means "
        "its UHLB moved in roughly a quarter of the windows; ours, adopting only draws that lower var(L), moved in "
        f"{g['uhlb']['moving_windows']} / {z['uhlb']['moving_windows']} of {g['uhlb']['windows']} windows.  ELB moves less than the paper's 14.5 % because it only moves the substreams needed to "
        "bring instances into [v, u].  PKG and hash never migrate state in skewlab (PKG splits each key over two "
        f"workers instead, replication {gz('pkg', 'replication', '{:.2f}')}); the paper's 21.2 % for PKG has no "
        "counterpart in our model (it presumably counts partial states that must be merged).")
    same = all(abs(a - b) <= 0.2 * max(a, b) for a, b in [(g["clb"]["var_mean"], z["clb"]["var_mean"])])
    lines.append(
        f"- *Fig. 2 — CLB on S1 vs S2: \"equal mean var(L), fluctuations differ\".* {_verdict(same)} CLB mean var(L): "
        f"Gaussian {g['clb']['var_mean']:.3g} ± {g['clb']['var_std']:.2g}, Zipf {z['clb']['var_mean']:.3g} ± "
        f"{z['clb']['var_std']:.2g}.  The paper's two means agree (2.09e10 vs 2.08e10), which depends on S2's "
        "exponent (not stated); with our z = 0.5 plus fluctuation the Zipf stream is "
        + ("harder" if z["clb"]["var_mean"] > g["clb"]["var_mean"] else "easier")
        + " to balance.  The paper's absolute values (≈ 2·10¹⁰ tuples²) correspond to ≈ 6·10⁵ tuples per window; "
        "ours are per 5·10⁴ tuples, hence the normalised column var/mean².")
    lines.append(
        "- *Table 2, Figs. 5–6 — processing latency and throughput speed-up on EC2 (Storm/Enorm, Twitter stream, "
        "scale-out 1→15 instances).* **Not reproduced here**: they need the Twitter stream and the authors' "
        "testbed; skewlab's Spark runs are in the sections below, not a reproduction of these figures.")
    lines.append(
        "- *Reconstruction caveat.* The paper's pseudo-code figures (Alg. 1 ELB, Alg. 2 CLB) are missing from the "
        "text we have; both are reconstructed from the prose (see `engine/rebalancers/guo_zhou.py`), so "
        "differences in detail are expected.  With i.i.d. Gaussian windows (the workload's default ρ = 0) the "
        "last window's loads say nothing about the next one, so ELB's per-window moves cannot lower the *next* "
        "window's variance — they follow noise, which bounds what any window-by-window balancer can do here.")
    return "\n".join(lines)
