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

Seeds: every (stream, algorithm) runs once per seed of ``ctx.seeds`` (stream and grouping seeded alike;
all algorithms of a seed see the same stream).  Tables give the mean over the seeds with the min–max
range, the figures the mean with a min–max band or error bars; the invariant checks hold for every
seed.  ``sec.data["runs"]`` keeps each number's mean under its old name (per-window series: the mean
per window) and the per-seed values under ``<name>_per_seed``.

Sizes: the paper's Poisson rate λ = 10⁴ tuples/s gives 6·10⁵ tuples per window; the full run uses
5·10⁴ per window (120 windows), quick 5·10³ (24 windows, CLB m = 6).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from skewlab.bench.common import (Context, Section, Spread, check, legend_once, md_table, mean_rows, new_figure, plot_band,
                          save_figure, simulate, spread, style)
from skewlab.engine.cli.simulate import SimulationConfig

KEY = "guo-zhou"
TITLE = "Guo & Zhou Euro-Par 2017 — ELB / CLB vs PKG / UHLB"
#: run label -> (registered algorithm, parameters); ``clb+repair`` is the skewlab extension, labelled
RUNS = {  # the paper's algorithms execute every plan (no gate)
    "elb": ("elb", {"gate": False}),
    "clb": ("clb", {"gate": False}),
    "clb+repair": ("clb", {"repair": True, "gate": False}),
    "pkg": ("pkg", {}),
    "uhlb": ("uhlb", {"gate": False}),
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
    return seeds * len(ALGOS) * len(WORKLOADS)


def run_one(S: dict[str, Any], wname: str, alg: str, seed: int) -> dict[str, Any]:
    """One (stream, algorithm, seed) simulation: per-window series and their summaries."""
    wl, wp = WORKLOADS[wname]
    algorithm, params = RUNS[alg]
    params = dict(params, m=S["clb_m"]) if algorithm == "clb" else dict(params)
    cfg = SimulationConfig(algorithm=algorithm, workers=S["workers"], sources=2, workload=wl, workload_params=wp,
                           messages=S["windows"] * S["per_window"], interval_messages=S["per_window"],
                           seed=seed, params=params, window=1)
    r = simulate(cfg)
    iv = r["intervals"]
    var = np.array([i["load_variance"] for i in iv])
    mean_load = np.array([i["tuples"] / S["workers"] for i in iv])
    mig = np.array([i["migration_cost"] for i in iv])
    reb = np.array([bool(i["rebalanced"]) for i in iv])  # a plan was computed (it may keep the table)
    moved = mig > 0
    return {
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


#: per-window series of a run (averaged window by window over the seeds)
def aggregate(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    """One run's results over seeds (:func:`skewlab.bench.common.mean_rows`): the mean under each name (series:
    per window), ``<name>_per_seed``; every seed must have the same number of windows."""
    merged = mean_rows(per_seed, by=("windows",))
    if len(merged) != 1:
        raise ValueError(f"seeds disagree on the number of windows: {[r['windows'] for r in per_seed]}")
    return merged[0]


def run(ctx: Context) -> Section:
    t0 = time.perf_counter()
    S = sizes(ctx.quick)
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    for wname in WORKLOADS:
        for alg in ALGOS:
            per_seed = []
            for seed in ctx.seeds:
                per_seed.append(run_one(S, wname, alg, seed))
                ctx.tick(f"guo-zhou {wname} {alg} seed {seed}")
            runs[(wname, alg)] = aggregate(per_seed)
    sec = Section(KEY, TITLE, ctx.command(KEY), "",
                  data={"runs": {f"{w}/{a}": v for (w, a), v in runs.items()}, "sizes": S, "seeds": list(ctx.seeds)})
    figs = _figures(ctx, sec, runs)
    _checks(sec, runs, S)
    sec.markdown = _markdown(sec, figs, runs, S)
    sec.seconds = time.perf_counter() - t0
    return sec


def _sp(r: dict[str, Any], key: str, scale: float = 1.0) -> Spread:
    """:class:`Spread` over seeds of one summary number of a run."""
    return spread(scale * v for v in r[f"{key}_per_seed"])


def _style(alg: str) -> dict[str, Any]:
    st = style(RUNS[alg][0])
    if alg != RUNS[alg][0]:  # a labelled extension: its algorithm's colour, dashed
        st["linestyle"] = "--"
    return st


def _figures(ctx, sec, runs) -> dict[str, str]:
    """Series over windows (mean line, min–max band over seeds) and the per-run summary (bars, min–max
    error bars); their paths by name."""
    n_seeds = len(sec.data["seeds"])
    note = f"mean of {n_seeds} seeds, band = min–max" if n_seeds > 1 else "one seed"
    figs: dict[str, str] = {}
    fig, axes = new_figure(2, 2, width=4.6, height=2.9)
    for i, w in enumerate(WORKLOADS):
        for alg in ALGOS:
            r = runs[(w, alg)]
            t = np.arange(1, r["windows"] + 1)
            st = _style(alg)
            st["marker"] = None
            plot_band(axes[i, 0], t, np.maximum(np.asarray(r["var_per_seed"], dtype=np.float64), 1e-3), label=alg, **st)
            plot_band(axes[i, 1], t, 100 * np.asarray(r["migration_per_seed"], dtype=np.float64), label=alg, **st)
        axes[i, 0].set_yscale("log")
        axes[i, 0].set_ylabel(f"{w}: var(L) [tuples²]")
        axes[i, 1].set_ylabel(f"{w}: state moved (%)")
    for ax in axes[1]:
        ax.set_xlabel("statistic window")
    axes[0, 0].set_title("load imbalance over time (Fig. 2/3)", fontsize=9)
    axes[0, 1].set_title("state movement per window (Fig. 4)", fontsize=9)
    legend_once(fig, axes, ncol=6)
    figs["over_time"] = save_figure(fig, ctx, "guo_zhou_over_time.png", f"ELB / CLB vs PKG / UHLB, n = 10; {note}")

    fig, axes = new_figure(1, 3, width=3.4, height=3.0)
    x = np.arange(len(WORKLOADS))
    width = 0.8 / len(ALGOS)
    panels = (("cv2_mean", 1.0, "mean var(L) / mean(L)²  (Table 1)", True),
              ("move_mean", 100.0, "state moved, % per window (Fig. 4)", False),
              ("move_per_balancing", 100.0, "state moved, % per move", False))
    for j, (key, scale, label, log) in enumerate(panels):
        ax = axes[0, j]
        for k, alg in enumerate(ALGOS):
            sp = [_sp(runs[(w, alg)], key, scale) for w in WORKLOADS]
            floor = 1e-8 if log else 0.0
            mean = np.array([max(v.mean, floor) for v in sp])
            err = np.array([[max(v.mean, floor) - max(v.lo, floor) for v in sp],
                            [max(v.hi, floor) - max(v.mean, floor) for v in sp]])
            st = _style(alg)
            ax.bar(x + (k - (len(ALGOS) - 1) / 2) * width, mean, width, color=st.get("color"),
                   hatch="//" if st.get("linestyle") == "--" else None, edgecolor="white", linewidth=0.3,
                   yerr=err if n_seeds > 1 else None, capsize=1.5, error_kw={"linewidth": 0.8}, label=alg)
        ax.set_xticks(x)
        ax.set_xticklabels(list(WORKLOADS), fontsize=8)
        ax.set_title(label, fontsize=9)
        if log:
            ax.set_yscale("log")
    legend_once(fig, axes, ncol=6)
    figs["summary"] = save_figure(fig, ctx, "guo_zhou_summary.png",
                                  f"Per-run summary, n = 10; {note.replace('band', 'error bar')}")
    sec.figures.extend(figs.values())
    return figs


def _checks(sec, runs, S) -> None:
    """The invariants, for every seed (the detail names the worst seed where there is one)."""
    c = sec.checks
    seeds = sec.data["seeds"]
    lengths = {len(v) for r in runs.values() for v in r["var_per_seed"]}
    check(c, "one row per statistic window", lengths == {S["windows"]},
          f"{S['windows']} windows × {len(runs)} runs × {len(seeds)} seeds")
    mig = [x for r in runs.values() for series in r["migration_per_seed"] for x in series]
    check(c, "state movement within [0, 1]", min(mig) >= 0 and max(mig) <= 1 + 1e-12, f"max {max(mig):.3f}")
    pk = [v for w in WORKLOADS for a in ("pkg", "hash") for v in runs[(w, a)]["move_mean_per_seed"]]
    check(c, "pkg and hash never migrate state", max(pk) == 0.0, f"max over {len(pk)} runs: {max(pk)}")
    for w in WORKLOADS:
        u, e = runs[(w, "uhlb")]["move_per_balancing_per_seed"], runs[(w, "elb")]["move_per_balancing_per_seed"]
        i = int(np.argmin(np.asarray(u) - np.asarray(e)))  # the seed closest to violating it
        check(c, f"{w}: uhlb moves more state per balancing than elb", all(a > b for a, b in zip(u, e)),
              f"every seed; closest seed {seeds[i]}: uhlb {100 * u[i]:.1f} % vs elb {100 * e[i]:.1f} %")
        expect = S["windows"] // S["clb_m"]
        for a in ("clb", "clb+repair"):
            bal = runs[(w, a)]["balancings_per_seed"]
            check(c, f"{w}: {a} balances every m windows", all(abs(b - expect) <= 1 for b in bal),
                  f"{', '.join(map(str, bal))} balancings (per seed), expected ≈ {expect}")


def _markdown(sec, figs, runs, S) -> str:
    n_seeds = len(sec.data["seeds"])
    items = _comparison(runs, n_seeds)
    parts = [
        f"Set-up: n = {S['workers']}, {S['windows']} statistic windows of {S['per_window']:,} tuples (paper: 120 "
        f"windows of ≈ 6·10⁵), 2 sources, state window = 1 interval; S1 = `gaussian` (p = 100, cv = 0.3), "
        f"S2 = `zipf` (100 keys, z = 0.5, fluctuation f = 0.5); CLB m = {S['clb_m']}; ELB [v, u] = [0.8, 1.2]·mean; "
        "UHLB θmax = 0.2.  `clb` is the paper's CLB (covariance split only, `repair=false`, the default); "
        "`clb+repair` is the **skewlab extension** (`repair=true`: ELB phases 2–3 on the mean loads after the "
        "split), reported separately.  `hash` is static key grouping (fp mod n).  ELB/CLB/UHLB map keys to 1024 "
        "hash substreams (skewlab default; the 100 keys are then almost always one per substream, the paper's "
        f"100 substreams).  Every run is repeated with {n_seeds} seeds (seeds {sec.data['seeds'][0]}…"
        f"{sec.data['seeds'][-1]}; stream and grouping seeded alike): numbers are `mean (min–max)` over the seeds."]
    parts.append(f"![{figs['over_time']}]({figs['over_time']})")
    parts.append(_figure_verdict(items, ("fig3", "fig2", "fig4")))
    parts.append(f"![{figs['summary']}]({figs['summary']})")
    rows = []
    for w in WORKLOADS:
        for a in ALGOS:
            r = runs[(w, a)]
            rows.append([w, a, _sp(r, "var_mean"), _sp(r, "var_std"), _sp(r, "cv2_mean"), _sp(r, "imbalance_mean"),
                         _sp(r, "move_mean", 100), _sp(r, "move_per_balancing", 100), _sp(r, "balancings"),
                         _sp(r, "moving_windows"), _sp(r, "replication")])
    parts.append("**Load imbalance and state movement (Table 1 / Fig. 4 analogue)** (`plans`: windows in which the "
                 "algorithm was asked for a plan; `moves`: windows in which state moved; `% per move` = mean over "
                 "those)\n\n" + md_table(
                     ["stream", "algorithm", "mean var(L)", "std var(L)", "mean var/mean²", "mean max/mean−1",
                      "state moved % per window", "% per move", "plans", "moves", "replication"], rows))
    parts.append(_figure_verdict(items, ("table1", "fig4")))
    parts.append(_discussion(items))
    return "\n\n".join(parts)


def _level(k: int, n: int) -> str:
    """Verdict of a claim that holds in ``k`` of ``n`` seeds."""
    return "reproduced" if k == n else ("not" if k == 0 else "partly")


def _yes(k: int, n: int) -> str:
    return f"yes ({k}/{n} seeds)" if k == n else (f"no (0/{n} seeds)" if k == 0 else f"in {k}/{n} seeds")


def _figure_verdict(items: dict[str, dict[str, str]], keys: tuple[str, ...]) -> str:
    """One verdict line for a figure or table that shows several of the paper's claims."""
    levels = [items[k]["level"] for k in keys]
    level = levels[0] if len(set(levels)) == 1 else "partly"
    return (f"**Verdict: {level}** — " + "; ".join(f"{items[k]['claim']}: {items[k]['level']} ({items[k]['short']})"
                                                 for k in keys) + ".  Details below.")


def _comparison(runs, n_seeds: int) -> dict[str, dict[str, str]]:
    """The paper's claims one by one: claim, verdict level, short reason, full text (numbers over seeds)."""
    g = {a: runs[("gaussian", a)] for a in ALGOS}
    z = {a: runs[("zipf", a)] for a in ALGOS}
    both = (g, z)
    seeds = range(n_seeds)

    def ps(x, a, key):
        return x[a][f"{key}_per_seed"]

    def holds(pred) -> int:
        """Seeds in which ``pred(x, i)`` holds on both streams."""
        return sum(all(pred(x, i) for x in both) for i in seeds)

    def gz(a, key, digits=3, scale=1.0):
        return f"{_sp(g[a], key, scale).format(digits)} / {_sp(z[a], key, scale).format(digits)}"

    def var(x, a, i):
        return ps(x, a, "var_mean")[i]

    items: dict[str, dict[str, str]] = {}
    # Table 1 / Fig. 3: imbalance
    pkg_best = holds(lambda x, i: var(x, "pkg", i) < min(var(x, a, i) for a in ("elb", "clb", "uhlb")))
    uhlb_clb = holds(lambda x, i: var(x, "uhlb", i) < var(x, "clb", i))
    uhlb_elb = holds(lambda x, i: var(x, "uhlb", i) < var(x, "elb", i))
    uhlb_hash = holds(lambda x, i: var(x, "uhlb", i) < var(x, "hash", i))
    order10 = holds(lambda x, i: all(10 * var(x, a, i) <= var(x, "clb", i) for a in ("pkg", "uhlb")))
    all_four = holds(lambda x, i: (var(x, "pkg", i) < min(var(x, a, i) for a in ("elb", "clb", "uhlb"))
                                   and var(x, "uhlb", i) < min(var(x, "clb", i), var(x, "elb", i))
                                   and all(10 * var(x, a, i) <= var(x, "clb", i) for a in ("pkg", "uhlb"))))
    level = "reproduced" if all_four == n_seeds else ("partly" if pkg_best or uhlb_clb else "not")
    items["table1"] = {
        "claim": "Table 1 (PKG and UHLB ≥ 10× below CLB, both below ELB)", "level": level,
        "short": f"PKG lowest in {pkg_best}/{n_seeds} seeds, UHLB below CLB in {uhlb_clb}/{n_seeds}, "
                 f"below ELB in {uhlb_elb}/{n_seeds}; with 100 keys a random hash leaves UHLB ≈ static hash",
        "text": (
            "- *Table 1 / Fig. 3 — \"UHLB and PKG beat our algorithms on load imbalance\"; \"in terms of CLB, UHLB and "
            f"PKG reduce imbalance by at least an order of magnitude\".* **Verdict: {level}** — "
            f"mean var(L): PKG {gz('pkg', 'var_mean')} (lowest: {_yes(pkg_best, n_seeds)}), UHLB "
            f"{gz('uhlb', 'var_mean')}, ELB {gz('elb', 'var_mean')}, CLB {gz('clb', 'var_mean')}, static hash "
            f"{gz('hash', 'var_mean')}.  UHLB < static hash: {_yes(uhlb_hash, n_seeds)}; UHLB < CLB: "
            f"{_yes(uhlb_clb, n_seeds)}; UHLB < ELB: {_yes(uhlb_elb, n_seeds)}; ≥ 10× below CLB (PKG and UHLB): "
            f"{_yes(order10, n_seeds)}.  A 2-universal hash of 100 keys onto 10 instances leaves each instance ≈ "
            f"10 ± 3 keys (mean max/mean − 1 of UHLB {gz('uhlb', 'imbalance_mean', 2)}), so no member reaches "
            f"θmax = 0.2 and UHLB is asked for a plan in {gz('uhlb', 'balancings')} of {g['uhlb']['windows']} "
            "windows; it adopts a draw only when it lowers var(L) on the window, which happened in "
            f"{gz('uhlb', 'moving_windows')} windows.  On tweets (many keys per substream) a random member is close "
            "to balanced, which is where the paper's UHLB beats ELB; with 100 keys only ELB's load-aware moves get "
            "near PKG, which splits keys.")}
    elb_clb = holds(lambda x, i: var(x, "elb", i) < var(x, "clb", i))
    level = _level(elb_clb, n_seeds)
    items["fig3"] = {
        "claim": "Fig. 3 (ELB below CLB)", "level": level,
        "short": f"ELB below CLB in {elb_clb}/{n_seeds} seeds on both streams",
        "text": (
            f"- *Fig. 3 — \"ELB outperforms CLB on load imbalance\".* **Verdict: {level}** — ELB "
            f"{gz('elb', 'var_mean')} vs the paper's CLB {gz('clb', 'var_mean')} (ELB lower: {_yes(elb_clb, n_seeds)}).  "
            f"The skewlab extension `clb+repair` (not the paper's algorithm) reaches {gz('clb+repair', 'var_mean')}: "
            "the covariance split ignores the instances' mean loads (the η_i² term the paper drops after Eq. 4), "
            "which the repair step restores.")}
    # Fig. 4: state movement
    mv = lambda x, a, i: ps(x, a, "move_mean")[i]  # noqa: E731
    elb_lt_uhlb = holds(lambda x, i: mv(x, "elb", i) < mv(x, "uhlb", i))
    clb_small = holds(lambda x, i: mv(x, "clb", i) < min(mv(x, "elb", i), mv(x, "uhlb", i)))
    level = "partly" if elb_lt_uhlb or clb_small else "not"
    clb_amortised = max(_sp(x["clb"], "move_mean", 100).mean for x in both)
    balancing_share = g["clb"]["balancings"] / g["clb"]["windows"]
    if clb_amortised <= 3 * 1.6:
        clb_note = (f"CLB amortised ({gz('clb', 'move_mean', 2, 100)} %) is of the order of the paper's 1.6 %, so it "
                    "is the small ELB, not a larger CLB, that keeps CLB from being \"negligible\" next to ELB here.")
    else:
        clb_note = (f"CLB amortised ({gz('clb', 'move_mean', 2, 100)} %) is well above the paper's 1.6 %: it "
                    f"balances in {100 * balancing_share:.0f} % of the windows here (the paper: 5 of 120, 4 %) "
                    "and each balancing re-splits most substreams.")
    items["fig4"] = {
        "claim": "Fig. 4 (ELB moves less than UHLB; CLB negligible)", "level": level,
        "short": f"ELB < UHLB in {elb_lt_uhlb}/{n_seeds} seeds, CLB below both in {clb_small}/{n_seeds}; "
                 "PKG moves no state in skewlab's model",
        "text": (
            "- *Fig. 4 — state moved per window: PKG 21.2 %, UHLB 24.2 %, ELB 14.5 %; CLB 48.4 % per balancing, 1.6 % "
            f"amortised, \"negligible\" next to the others.* **Verdict: {level}** — ours, % per window: UHLB "
            f"{gz('uhlb', 'move_mean', 2, 100)}, ELB {gz('elb', 'move_mean', 2, 100)}, CLB "
            f"{gz('clb', 'move_mean', 2, 100)} ({gz('clb', 'move_per_balancing', 2, 100)} % per balancing; "
            f"`clb+repair` {gz('clb+repair', 'move_mean', 2, 100)}).  ELB < UHLB: {_yes(elb_lt_uhlb, n_seeds)}; "
            f"CLB below both: {_yes(clb_small, n_seeds)}.  A redraw of UHLB moves ≈ (n−1)/n = 90 % of the state "
            f"(ours: {gz('uhlb', 'move_per_balancing', 2, 100)} % per move), so the paper's 24.2 % per window means "
            "its UHLB moved in roughly a quarter of the windows; ours, adopting only draws that lower var(L), moved "
            f"in {gz('uhlb', 'moving_windows')} of {g['uhlb']['windows']} windows.  ELB moves less than the paper's "
            "14.5 % because it only moves the substreams needed to bring instances into [v, u].  "
            + clb_note + "  PKG and hash never migrate state in skewlab (PKG splits each key over two workers "
            f"instead, replication {gz('pkg', 'replication', 3)}); the paper's 21.2 % for PKG has no counterpart "
            "in our model (it presumably counts partial states that must be merged).")}
    cg, cz = _sp(g["clb"], "var_mean"), _sp(z["clb"], "var_mean")
    level = "reproduced" if abs(cg.mean - cz.mean) <= 0.2 * max(cg.mean, cz.mean) else "not"
    harder = "harder" if cz.mean > cg.mean else "easier"
    items["fig2"] = {
        "claim": "Fig. 2 (CLB: equal mean var(L) on S1 and S2)", "level": level,
        "short": f"Zipf/Gaussian ratio of CLB's mean var(L) {cz.mean / cg.mean:.2g}; S2's exponent is not stated",
        "text": (
            f"- *Fig. 2 — CLB on S1 vs S2: \"equal mean var(L), fluctuations differ\".* **Verdict: {level}** — CLB "
            f"mean var(L): Gaussian {cg} (std over windows {_sp(g['clb'], 'var_std').format(2)}), Zipf {cz} (std "
            f"{_sp(z['clb'], 'var_std').format(2)}).  The paper's two means agree (2.09e10 vs 2.08e10), which depends "
            f"on S2's exponent (not stated); with our z = 0.5 plus fluctuation the Zipf stream is {harder} to "
            "balance.  The paper's absolute values (≈ 2·10¹⁰ tuples²) correspond to ≈ 6·10⁵ tuples per window; "
            "ours are per 5·10⁴ tuples, hence the normalised column var/mean².")}
    items["latency"] = {
        "claim": "Table 2, Figs. 5–6", "level": "not", "short": "needs the Twitter stream and the EC2 testbed",
        "text": (
            "- *Table 2, Figs. 5–6 — processing latency and throughput speed-up on EC2 (Storm/Enorm, Twitter stream, "
            "scale-out 1→15 instances).* **Verdict: not** — not reproduced here: they need the Twitter stream and "
            "the authors' testbed; skewlab's Spark runs are in the sections below, not a reproduction of these "
            "figures.")}
    return items


def _discussion(items: dict[str, dict[str, str]]) -> str:
    lines = ["**Comparison with the paper** (Gaussian / Zipf, each `mean (min–max)` over the seeds).  The paper's "
             "Table 1 and Figs. 3–4 are measured on its Twitter stream (10.6 M tweets), which we do not have; we "
             "compare on its synthetic streams S1/S2, whose 100 keys make hashing much coarser than on tweets.", ""]
    lines += [items[k]["text"] for k in ("table1", "fig3", "fig4", "fig2", "latency")]
    lines.append(
        "- *Reconstruction caveat.* The paper's pseudo-code figures (Alg. 1 ELB, Alg. 2 CLB) are missing from the "
        "text we have; both are reconstructed from the prose (see `engine/algorithms/rebalancers/guo_zhou.py`), so "
        "differences in detail are expected.  With i.i.d. Gaussian windows (the workload's default ρ = 0) the "
        "last window's loads say nothing about the next one, so ELB's per-window moves cannot lower the *next* "
        "window's variance — they follow noise, which bounds what any window-by-window balancer can do here.")
    return "\n".join(lines)
