"""Reproduction of Nasir et al., "When Two Choices Are not Enough", ICDE 2016 (``skewlab bench nasir``).

Set-up (paper Sec. V-A, Table I/III): synthetic Zipf streams (ZF) with exponent z ∈ [0.1, 2.0] over
|K| ∈ {10⁴, 10⁵} keys, s = 5 sources, n ∈ {5, 10, 20, 50, 100} workers, θ = 1/(5n), ε = 10⁻⁴.
Groupings: ``hash`` (KG), ``shuffle`` (SG), ``pkg``, ``dchoices`` (D-C), ``wchoices`` (W-C),
``rr-head`` (RR) and ``dkg``.  For every seed of the run (``ctx.seeds``) every (z, |K|) stream is drawn
once from the ``zipf`` workload with that seed and routed by every (grouping, n), the grouping seeded
alike, with the local runtime's ``route_sources`` (:func:`skewlab.bench.common.route`), so all groupings see
the same tuples.  Results are merged over seeds with :func:`skewlab.bench.common.mean_rows` (mean under the
plain key, ``*_per_seed`` lists); tables show mean (min–max), figures a min–max band, invariants are
checked on every seed, and every figure gets a verdict.  The seed only draws the stream: key names
(``k0`` …) and the hash functions are fixed, so a key's hash choices are the same in every seed.

What is reported
* Fig. 10 analogue — imbalance vs z, per (n, |K|); the paper's I(m) = max − avg of the normalised
  loads ("seeds' I"), and skewlab's headline max/mean − 1 in the tables.
* Fig. 1 / Fig. 11 analogue — imbalance vs n at fixed z.
* Fig. 5 / Fig. 6 analogue — memory: measured distinct (key, worker) pairs of D-C and W-C relative to
  PKG and to SG (the paper *estimates* them with Σ min(f_k, d); we count what the routing produced),
  and replication (pairs / distinct keys) for every grouping.
* Fig. 9 / Q2 — the d chosen by D-Choices (``d_of`` per source after the stream; FINDOPTIMALCHOICES,
  :func:`skewlab.engine.algorithms.groupings.split_key.find_d`) vs the empirical minimum d: Greedy-d with a *fixed* d for
  the head (same head detection, same PKG tail — :class:`FixedDGreedy`), the smallest d in 2..n−1 whose
  I is within ε = 10⁻⁴ of W-C's I on the same stream (n when none is).  The paper runs every d = 2..n;
  we binary-search d, which assumes I(d) is non-increasing in d (it is on every stream we looked at; a
  violation would only make the reported minimum slightly too large).
* Q1 / Fig. 7 and Fig. 8 — the head threshold θ swept from 2/n to 1/(8n) for W-C, RR and D-C, and the
  head / tail load per worker at n = 5, θ = 1/(8n), z = 2 (:mod:`skewlab.bench.nasir_theta`).

Sizes: the paper uses m = 10⁷ messages; the full run uses m = 2·10⁶ per stream (time budget of
``bench all``), quick mode 10⁵ with a reduced grid.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from skewlab.bench import nasir_theta
from skewlab.bench.common import (
    Context,
    Section,
    check,
    legend_once,
    md_table,
    mean_rows,
    new_figure,
    plot_band,
    route,
    save_figure,
    seed_matrix,
    spread,
    stream_metrics,
    style,
    zipf_stream,
)
from skewlab.engine.algorithms import registry
from skewlab.engine.algorithms.groupings.split_key import ST_D, ST_NEXT, DChoicesGrouping, DChoicesRouter

KEY = "nasir"
TITLE = "Nasir et al. ICDE 2016 — D-Choices / W-Choices vs PKG"
ALGOS = ("hash", "shuffle", "pkg", "dchoices", "wchoices", "rr-head", "dkg")
SOURCES = 5
#: the paper's settings, pinned so that product defaults cannot move the reproduction: heads count since the
#: start of the stream (``decay = 1``; issue 25 considered decaying them by default) and the two choices are two
#: independent hashes that may name one worker (``distinct = false``; skewlab's option keeps them apart)
PAPER: dict[str, Any] = {"decay": 1.0, "distinct": False}


def paper_params(alg: str) -> dict[str, Any]:
    """The entries of :data:`PAPER` that ``alg`` has as parameters."""
    names = {p.name for p in registry.get(alg).params}
    return {k: v for k, v in PAPER.items() if k in names}
EPSILON = 1e-4


def sizes(quick: bool) -> dict[str, Any]:
    if quick:
        return {"zs": [0.5, 1.0, 1.5, 2.0], "keys": [10_000], "ns": [5, 50], "messages": 100_000,
                "q2_zs": [1.0, 2.0], "q2_ns": [5, 50], "workers_zs": [1.0, 2.0],
                "q1_zs": [0.5, 1.0, 1.5, 2.0], "q1_ns": [5, 50]}
    return {"zs": [round(0.1 * i, 1) for i in range(1, 21)], "keys": [10_000, 100_000],
            "ns": [5, 10, 20, 50, 100], "messages": 2_000_000,
            "q2_zs": [0.4, 0.8, 1.2, 1.6, 2.0], "q2_ns": [5, 10, 20, 50, 100], "workers_zs": [0.8, 1.4, 2.0],
            "q1_zs": [round(0.2 * i, 1) for i in range(1, 11)], "q1_ns": [5, 10, 20, 50, 100]}


def units(quick: bool, seeds: int = 1) -> int:
    s = sizes(quick)
    return seeds * (len(s["zs"]) * len(s["keys"]) + len(s["q2_zs"]) + len(s["q1_zs"]) + 1) + 1


class FixedDGreedy(DChoicesRouter):
    """Greedy-d with a fixed d for the head (Nasir Q2's "Greedy-d with all possible values of d").

    Identical to ``dchoices`` (same SpaceSaving head detection, warm-up, PKG tail, same kernel) except
    that d is fixed instead of being recomputed by FINDOPTIMALCHOICES: the per-source state column
    ``ST_D`` holds ``fixed_d`` and the refresh point ``ST_NEXT`` is set to −1, which the kernel's
    ``total == ST_NEXT`` test never meets.  A router with ``dchoices``' default parameters; not
    registered (bench-only).
    """

    def __init__(self, n_workers: int, n_sources: int, seed: int, fixed_d: int) -> None:
        self.fixed_d = int(fixed_d)
        super().__init__(n_workers, n_sources, seed, registry.validate_params("dchoices", PAPER))

    def _reset_state(self) -> None:
        super()._reset_state()
        self.state[:, ST_D] = min(self.fixed_d, self.n_workers)
        self.state[:, ST_NEXT] = -1


def _hot_replication(key_ids: np.ndarray, workers: np.ndarray, n: int, min_count: int) -> float:
    """Mean distinct workers over keys with at least ``min_count`` tuples (nan if none)."""
    return nasir_theta.key_replication(key_ids, workers, n, np.flatnonzero(np.bincount(key_ids) >= min_count))


def _mem_ns(S) -> list[int]:
    return [n for n in S["ns"] if n >= 50] or S["ns"][-1:]


def _memory_estimate(ids: np.ndarray, z: float, K: int, S, seed_rows) -> list[dict[str, Any]]:
    """Nasir et al. Sec. IV-B estimates on one stream: mem = Σ_k min(f_k, c_k) with c_k = 2 (PKG, tail),
    d (D-C head, d = the largest d chosen by a source on this stream), n (W-C head, SG).  f_k = the
    key's count in the stream, head H = {k : p_k ≥ θ = 1/(5n)} from the true Zipf probabilities."""
    from skewlab.engine.workloads.synthetic import zipf_probabilities

    f = np.bincount(ids, minlength=K).astype(np.float64)
    p = zipf_probabilities(K, z)  # key id r-1 has rank r at interval 0 (static stream)
    out = []
    for n in _mem_ns(S):
        head = p >= 1.0 / (5 * n)
        d = max(_one(seed_rows, keys=K, z=z, n=n, algorithm="dchoices").get("d", [2]))
        tail2 = np.minimum(f[~head], 2).sum()
        out.append({"z": z, "n": n, "head": int(head.sum()), "d": d,
                    "pkg": float(np.minimum(f, 2).sum()), "sg": float(np.minimum(f, n).sum()),
                    "dchoices": float(np.minimum(f[head], d).sum() + tail2),
                    "wchoices": float(np.minimum(f[head], n).sum() + tail2)})
    return out


def _q2(ctx: Context, S, seed: int) -> list[dict[str, Any]]:
    """Q2 on the streams of one seed: D-C's chosen d vs the smallest fixed d matching W-C's I (|K| = smallest)."""
    K2, m = S["keys"][0], S["messages"]
    out: list[dict[str, Any]] = []
    for z in S["q2_zs"]:
        _, ids, fps = zipf_stream(z, K2, m, seed)
        for n in S["q2_ns"]:
            if n <= 2:
                continue
            wc = stream_metrics(ids, route("wchoices", n, SOURCES, fps, seed, PAPER)[0], n)["seeds_imbalance"]
            g = DChoicesGrouping(n, SOURCES, seed, PAPER).router
            dc_w, _ = route("dchoices", n, SOURCES, fps, router=g)
            dc_i = stream_metrics(ids, dc_w, n)["seeds_imbalance"]
            chosen = [int(g.d_of(s)) for s in range(SOURCES)]
            cache: dict[int, float] = {}

            def imb(d: int) -> float:
                if d not in cache:
                    gd = FixedDGreedy(n, SOURCES, seed, d)
                    cache[d] = stream_metrics(ids, route("dchoices", n, SOURCES, fps, router=gd)[0], n)[
                        "seeds_imbalance"]
                return cache[d]

            lo, hi = 2, n  # d = n is W-C and matches by definition
            while lo < hi:
                mid = (lo + hi) // 2
                if imb(mid) <= wc + EPSILON:
                    hi = mid
                else:
                    lo = mid + 1
            out.append({"z": z, "n": n, "chosen_min": min(chosen), "chosen_max": max(chosen), "min_d": lo,
                        "wc_I": wc, "dc_I": dc_i, "min_d_I": imb(lo) if lo < n else wc,
                        "evaluated": {str(k): v for k, v in sorted(cache.items())}})
        ctx.tick(f"nasir Q2 z={z} seed={seed}")
    return out


def run(ctx: Context) -> Section:
    t_start = time.perf_counter()
    S = sizes(ctx.quick)
    m = S["messages"]
    raw: list[dict[str, Any]] = []
    mem_raw: list[dict[str, Any]] = []
    q2_raw: list[dict[str, Any]] = []
    q1_raw: list[dict[str, Any]] = []
    fig8_runs: list[dict[str, Any]] = []
    for seed in ctx.seeds:  # stream and groupings seeded alike; every grouping routes the seed's stream
        for K in S["keys"]:
            for z in S["zs"]:
                _, ids, fps = zipf_stream(z, K, m, seed)
                seed_rows = []
                for n in S["ns"]:
                    for alg in ALGOS:
                        g = registry.create(alg, n, SOURCES, seed, paper_params(alg)).router
                        workers, secs = route(alg, n, SOURCES, fps, router=g)
                        met = stream_metrics(ids, workers, n)
                        row = {"keys": K, "z": z, "n": n, "algorithm": alg, **met, "route_seconds": secs}
                        if alg == "dchoices":
                            row["d"] = [int(g.d_of(s)) for s in range(SOURCES)]
                        if alg == "shuffle":
                            row["hot_replication"] = _hot_replication(ids, workers, n, 20 * n)
                        seed_rows.append(row)
                raw += seed_rows
                if K == S["keys"][0]:  # the paper's analytic memory estimate (Sec. IV-B) on the same stream
                    mem_raw += _memory_estimate(ids, z, K, S, seed_rows)
                ctx.tick(f"nasir K={K} z={z} seed={seed}")
        q2_raw += _q2(ctx, S, seed)
        # Q1 / Fig. 7 (θ sweep) and Fig. 8 (head and tail load per worker)
        q1_raw += nasir_theta.run_q1(ctx, S, SOURCES, seed)
        fig8_runs.append(nasir_theta.run_fig8(ctx, S, SOURCES, seed))
    rows = mean_rows(raw, ("keys", "z", "n", "algorithm"))
    mem = mean_rows(mem_raw, ("z", "n"))
    q2 = mean_rows(q2_raw, ("z", "n"))
    q1 = mean_rows(q1_raw, ("z", "n", "theta_n", "algorithm"))
    fig8 = nasir_theta.merge_fig8(fig8_runs)

    distinct = _distinct_choices_case(ctx.quick)
    ctx.tick("nasir distinct choices")

    sec = Section(KEY, TITLE, ctx.command(KEY), "",
                  data={"seeds": list(ctx.seeds), "rows": rows, "q2": q2, "memory_estimate": mem, "sizes": S,
                        "distinct_choices": distinct, "q1": q1, "fig8": fig8})
    _figures(ctx, sec, rows, q2, S, mem)
    nasir_theta.figures(ctx, sec, q1, fig8, S["keys"][0])
    _checks(sec, rows, q2, S)
    nasir_theta.checks(sec, q1, fig8, rows)
    sec.markdown = _markdown(sec, rows, q2, S, mem, distinct)
    sec.seconds = time.perf_counter() - t_start
    return sec


def _distinct_choices_case(quick: bool) -> dict[str, Any]:
    """D-Choices on a stream whose hottest key has colliding hash choices (issue #15).

    Zipf z = 1 over K = 10⁴ keys named "0" … "9999" (rank r+1 → key str(r), as the tests and
    ``bench/bench_routing.py`` name them), 10⁶ tuples (quick: 2·10⁵), n = 50, s = 5 sources: the
    hottest key "0" (p₁·n ≈ 5.1, d = 6) has F_0..F_5 naming only five workers.
    """
    from skewlab.engine.algorithms.keys import Vocabulary, candidates

    n, k, m = 50, 10_000, 200_000 if quick else 1_000_000
    w = np.arange(1, k + 1, dtype=np.float64) ** -1.0
    cdf = np.cumsum(w / w.sum())
    ranks = np.minimum(np.searchsorted(cdf, np.random.default_rng(0).random(m), side="right"), k - 1)
    vocab = Vocabulary([str(i) for i in range(k)])
    fps = vocab.fps[ranks]
    g = DChoicesGrouping(n, SOURCES, 0, PAPER).router
    workers, _ = route("dchoices", n, SOURCES, fps, router=g)
    met = stream_metrics(ranks, workers, n)
    d = max(int(g.d_of(s)) for s in range(SOURCES))
    hot = np.bincount(workers[ranks == 0], minlength=n)
    return {"messages": m, "n": n, "d": d,
            "hash_workers": len(set(candidates(vocab.fps[:1], d, n)[0].tolist())),
            "hot_workers": int(np.count_nonzero(hot >= 0.01 * hot.sum())),
            "hot_max_share": float(hot.max() / max(hot.sum(), 1)),
            "imbalance": met["imbalance"], "seeds_imbalance": met["seeds_imbalance"]}


# ---------------------------------------------------------------------------------------------
def _get(rows, **kw) -> list[dict[str, Any]]:
    return [r for r in rows if all(r[k] == v for k, v in kw.items())]


def _one(rows, **kw) -> dict[str, Any]:
    got = _get(rows, **kw)
    return got[0] if got else {}


def _ratio(a: dict[str, Any], b: dict[str, Any], key_a: str, key_b: str, minus: float = 0.0) -> list[float]:
    """Per-seed ``a[key_a] / b[key_b] − minus`` of two merged rows (NaN when a row is missing)."""
    if not a or not b:
        return [float("nan")]
    return [x / y - minus for x, y in zip(a[key_a + "_per_seed"], b[key_b + "_per_seed"])]


def _columns(per_x: list[list[float]]) -> np.ndarray:
    """Seeds × x array from one per-seed list per x (NaN-padded)."""
    width = max(len(c) for c in per_x)
    return np.array([[c[i] if i < len(c) else np.nan for c in per_x] for i in range(width)], dtype=np.float64)


def _figures(ctx: Context, sec: Section, rows, q2, S, mem) -> None:
    floor = 1e-7
    Ks, ns, zs = S["keys"], S["ns"], S["zs"]
    band = f"mean of {ctx.n_seeds} seeds, band = min–max"
    fig, axes = new_figure(len(Ks), len(ns), width=3.3, height=2.8, sharey=True)
    for i, K in enumerate(Ks):
        for j, n in enumerate(ns):
            ax = axes[i, j]
            for alg in ALGOS:
                ys = seed_matrix(rows, "seeds_imbalance", "z", zs, keys=K, n=n, algorithm=alg)
                plot_band(ax, zs, np.maximum(ys, floor), label=alg, **style(alg))
            ax.set_yscale("log")
            ax.set_title(f"n={n}, |K|={K:.0e}", fontsize=9)
            ax.set_xlabel("skew z")
            if j == 0:
                ax.set_ylabel("I = max − avg (normalised)")
    legend_once(fig, axes, ncol=7)
    sec.figures.append(save_figure(fig, ctx, "nasir_imbalance_vs_skew.png",
                                   f"Imbalance vs skew (m={S['messages']:.0e}, s={SOURCES}; values < {floor:g} drawn "
                                   f"at {floor:g}; {band})"))

    wz = S["workers_zs"]
    K = Ks[0]
    fig, axes = new_figure(1, len(wz), width=3.6, height=3.0, sharey=True)
    for j, z in enumerate(wz):
        ax = axes[0, j]
        for alg in ALGOS:
            ys = seed_matrix(rows, "seeds_imbalance", "n", ns, keys=K, z=z, algorithm=alg)
            plot_band(ax, ns, np.maximum(ys, floor), label=alg, **style(alg))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(ns)
        ax.set_xticklabels([str(n) for n in ns])
        ax.set_title(f"z={z}, |K|={K:.0e}", fontsize=9)
        ax.set_xlabel("workers n")
        if j == 0:
            ax.set_ylabel("I = max − avg (normalised)")
    legend_once(fig, axes, ncol=7)
    sec.figures.append(save_figure(fig, ctx, "nasir_imbalance_vs_workers.png",
                                   f"Imbalance vs number of workers ({band})"))

    # memory: relative to PKG and to SG, n in {50, 100} (or the largest available), K = Ks[0]
    mem_ns = _mem_ns(S)
    fig, axes = new_figure(2, 3, width=3.8, height=2.9)
    for n in mem_ns:
        color = "#d62728" if n == mem_ns[0] else "#1f77b4"
        for alg, ls in (("dchoices", "-"), ("wchoices", "--")):
            over_pkg, over_sg, est_pkg, est_sg = [], [], [], []
            for z in zs:
                a = _one(rows, keys=K, z=z, n=n, algorithm=alg)
                over_pkg.append(_ratio(a, _one(rows, keys=K, z=z, n=n, algorithm="pkg"), "pairs", "pairs", 1.0))
                over_sg.append(_ratio(a, _one(rows, keys=K, z=z, n=n, algorithm="shuffle"), "pairs", "pairs"))
                e = _one(mem, z=z, n=n)
                est_pkg.append(_ratio(e, e, alg, "pkg", 1.0))
                est_sg.append(_ratio(e, e, alg, "sg"))
            st = style(alg)
            st["linestyle"] = ls
            st["color"] = color
            for ax, ys in ((axes[0, 0], over_pkg), (axes[0, 1], over_sg), (axes[1, 0], est_pkg), (axes[1, 1], est_sg)):
                plot_band(ax, zs, _columns(ys), label=f"{alg} n={n}", **st)
        axes[1, 2].plot(zs, [_one(mem, z=z, n=n).get("head", float("nan")) for z in zs],
                        color=color, marker="o", markersize=4, label=f"|H|, n={n}")
    axes[0, 0].set_ylabel("measured: pairs / pairs(PKG) − 1")
    axes[0, 0].set_title("memory overhead vs PKG (Fig. 5)", fontsize=9)
    axes[0, 1].set_ylabel("measured: pairs / pairs(SG)")
    axes[0, 1].set_title("memory relative to SG (Fig. 6)", fontsize=9)
    axes[1, 0].set_ylabel("estimate Σmin(f,c): / PKG − 1")
    axes[1, 1].set_ylabel("estimate Σmin(f,c): / SG")
    axes[1, 0].set_title("paper's estimate (Sec. IV-B) vs PKG", fontsize=9)
    axes[1, 1].set_title("paper's estimate vs SG", fontsize=9)
    axes[1, 2].set_ylabel("head size |H| (θ = 1/5n)")
    axes[1, 2].set_yscale("log")
    axes[1, 2].set_title("head size (Fig. 3; no seed dependence)", fontsize=9)
    axes[1, 2].legend(fontsize=7)
    axes[0, 0].legend(fontsize=7)
    n_rep = mem_ns[0]
    for alg in ALGOS:
        plot_band(axes[0, 2], zs, seed_matrix(rows, "replication", "z", zs, keys=K, n=n_rep, algorithm=alg),
                  label=alg, **style(alg))
    axes[0, 2].set_yscale("log")
    axes[0, 2].set_ylabel("replication (pairs / distinct keys)")
    axes[0, 2].set_title(f"replication, n={n_rep}", fontsize=9)
    axes[0, 2].legend(fontsize=7)
    for ax in axes.flat:
        ax.set_xlabel("skew z")
    sec.figures.append(save_figure(fig, ctx, "nasir_memory.png", f"Memory / replication (|K|={K:.0e}; {band})"))

    if q2:
        q_ns = sorted({r["n"] for r in q2})
        fig, axes = new_figure(1, len(q_ns), width=2.9, height=2.8)
        for j, n in enumerate(q_ns):
            ax = axes[0, j]
            zq = sorted({r["z"] for r in q2 if r["n"] == n})
            plot_band(ax, zq, seed_matrix(q2, "chosen_max", "z", zq, n=n), label="D-C chosen d (max over sources)",
                      **style("dchoices"))
            plot_band(ax, zq, seed_matrix(q2, "min_d", "z", zq, n=n), label="empirical minimum d", color="#000000",
                      marker="o", linestyle="--", markersize=4, linewidth=1.2)
            ax.axhline(n, color="#999999", linewidth=0.8, linestyle=":")
            ax.set_title(f"n={n}", fontsize=9)
            ax.set_xlabel("skew z")
            if j == 0:
                ax.set_ylabel("d")
        legend_once(fig, axes, ncol=2)
        sec.figures.append(save_figure(fig, ctx, "nasir_d.png",
                                       f"Q2: d chosen by D-Choices vs the minimum d matching W-C ({band})"))


def _all(rows, key: str) -> list:
    """Every per-seed value of ``key`` over the merged ``rows``."""
    return [v for r in rows for v in r[key + "_per_seed"]]


def _checks(sec: Section, rows, q2, S) -> None:
    """Invariants, checked on every seed (not only on the means)."""
    c = sec.checks
    sh = _get(rows, algorithm="shuffle")
    worst = max(_all(sh, "imbalance"))
    check(c, "shuffle imbalance ≈ 0 (every seed)", worst <= 1e-3, f"max headline imbalance {worst:.2e}")
    hot = [h / r["n"] for r in sh for h in r["hot_replication_per_seed"] if not math.isnan(h)]
    check(c, "shuffle replication ≈ n on keys with ≥ 20n tuples (every seed)", bool(hot) and min(hot) >= 0.99,
          f"min (workers per hot key)/n = {min(hot) if hot else float('nan'):.3f}")
    hr = set(_all(_get(rows, algorithm="hash"), "replication"))
    check(c, "hash replication = 1 (every seed)", hr == {1.0}, f"values {sorted(hr)}")
    pk = max(_all(_get(rows, algorithm="pkg"), "replication"))
    check(c, "pkg replication ≤ 2 (every seed)", pk <= 2.0, f"max {pk:.3f}")
    ok = True
    detail = []
    for r in rows:
        if r["algorithm"] == "shuffle":
            continue
        s = _one(rows, keys=r["keys"], z=r["z"], n=r["n"], algorithm="shuffle")
        if any(a > b + 1e-12 for a, b in zip(r["replication_per_seed"], s["replication_per_seed"])):
            ok = False
            detail.append(f"{r['algorithm']} n={r['n']} z={r['z']}")
    check(c, "shuffle has the highest replication (every seed)", ok, ", ".join(detail[:3]) or "all configurations")
    n_hi = 50 if 50 in S["ns"] else max(S["ns"])
    for K in S["keys"]:
        for z in [z for z in S["zs"] if z >= 1.5]:
            d = _one(rows, keys=K, z=z, n=n_hi, algorithm="dchoices")["seeds_imbalance_per_seed"]
            p = _one(rows, keys=K, z=z, n=n_hi, algorithm="pkg")["seeds_imbalance_per_seed"]
            w = _one(rows, keys=K, z=z, n=n_hi, algorithm="wchoices")["seeds_imbalance_per_seed"]
            check(c, f"dchoices, wchoices ≤ pkg (n={n_hi}, |K|={K}, z={z}; every seed)",
                  all(a <= b and x <= b for a, x, b in zip(d, w, p)),
                  f"worst seed I: dchoices {max(d):.2e}, wchoices {max(w):.2e}; smallest pkg {min(p):.2e}")
    K = S["keys"][0]
    lo = _one(rows, keys=K, z=min(S["zs"]), n=n_hi, algorithm="hash")["seeds_imbalance_per_seed"]
    hi = _one(rows, keys=K, z=max(S["zs"]), n=n_hi, algorithm="hash")["seeds_imbalance_per_seed"]
    check(c, "hash imbalance grows with skew (every seed)", all(b > a for a, b in zip(lo, hi)),
          f"I(z={min(S['zs'])}) ≤ {max(lo):.2e} < I(z={max(S['zs'])}) ≥ {min(hi):.2e}")
    bad = [r for r in q2 for lo_d, hi_d, m in zip(r["chosen_min_per_seed"], r["chosen_max_per_seed"],
                                                   r["min_d_per_seed"])
           if not (2 <= lo_d <= hi_d <= r["n"] and 2 <= m <= r["n"])]
    check(c, "Q2: d values within [2, n] (every seed)", not bad and bool(q2), f"{len(_all(q2, 'min_d'))} runs")
    dc = _get(rows, algorithm="dchoices")
    dd = [(d, r["n"]) for r in dc for d in r["d_per_seed"]]
    check(c, "dchoices d ∈ [2, n] at every source (every seed)", all(2 <= min(d) and max(d) <= n for d, n in dd),
          f"{len(dd)} runs")


#: the paper's figures this bench does not produce, and why
NOT_RUN = (
    "**Not run here** — *Fig. 4 (D-Choices' overhead d/n from Eq. 3 vs skew, |K| = 10⁴, m = 10⁷) and Fig. 12 (imbalance over time of PKG, D-C, W-C on the WP, TW and CT data sets).*  Fig. 4 is analytic (no stream is routed) and has its own command, `python3 bench/nasir_fig4.py` (section \"Nasir et al. Fig. 4\", not generated by `skewlab bench`); Fig. 12 needs the paper's real data sets, which we do not have (the flights trace over time: `skewlab bench trace` and `skewlab bench fish`)."
)


def _markdown(sec: Section, rows, q2, S, mem, distinct) -> str:
    """Set-up, then every figure with its verdict (and the tables behind it), then the notes."""
    K = S["keys"][0]
    ns, zs = S["ns"], S["zs"]
    seeds = sec.data["seeds"]
    n_tab = 50 if 50 in ns else ns[-1]
    zt = [z for z in (0.5, 1.0, 1.5, 2.0) if z in zs] or zs
    text = _discussion(rows, q2, S, mem, distinct, sec.data["q1"], sec.data["fig8"], seeds)
    text.update({f"theta:{k}": v for k, v in nasir_theta.discussion(sec.data["q1"], sec.data["fig8"], _verdict).items()})
    hdr = ["grouping"] + [f"z={z}" for z in zt]

    def table(key: str, title: str) -> str:
        t = [[a] + [spread(_one(rows, keys=K, z=z, n=n_tab, algorithm=a).get(key + "_per_seed", [])) for z in zt]
             for a in ALGOS]
        return f"**{title}, n = {n_tab}, |K| = {K:,}**, mean (min–max) over seeds\n\n" + md_table(hdr, t)

    tables = {"nasir_imbalance_vs_skew.png": [table("seeds_imbalance", "Seeds' I (max − avg of normalised loads)"),
                                              table("imbalance", "Headline imbalance (max/mean − 1)")],
              "nasir_memory.png": [table("replication", "Replication (distinct workers per key)")]}
    if q2:
        t4 = [[r["n"], r["z"], spread(r["chosen_max_per_seed"]), spread(r["min_d_per_seed"]),
               spread(r["dc_I_per_seed"]), spread(r["min_d_I_per_seed"]), spread(r["wc_I_per_seed"])] for r in q2]
        tables["nasir_d.png"] = [
            "**Q2: d chosen by D-Choices vs the empirical minimum**, mean (min–max) over seeds (D-C d = the largest "
            f"over the {SOURCES} sources; min d = the smallest d whose I is within ε = {EPSILON:g} of W-C's, n when "
            "no d < n is)\n\n"
            + md_table(["n", "z", "D-C d", "min d", "I(D-C)", "I(min d)", "I(W-C)"], t4)]
    theta_tables = nasir_theta.tables(sec.data["q1"], sec.data["fig8"])
    tables["nasir_q1_theta.png"] = [theta_tables["q1"]]
    tables["nasir_q1_replication.png"] = [theta_tables["q1_replication"]]
    tables["nasir_fig8_head_tail.png"] = [theta_tables["fig8"]]
    verdicts = {"nasir_imbalance_vs_skew.png": text["skew"], "nasir_imbalance_vs_workers.png": text["workers"],
                "nasir_memory.png": text["memory"], "nasir_d.png": text.get("d", ""),
                "nasir_q1_theta.png": text["theta:q1"], "nasir_q1_replication.png": text["theta:q1_replication"],
                "nasir_fig8_head_tail.png": text["theta:fig8"]}
    parts = [
        f"Set-up: Zipf streams (`zipf` workload) of m = {S['messages']:,} messages (paper: 10⁷), "
        f"|K| ∈ {{{', '.join(f'{k:,}' for k in S['keys'])}}}, z ∈ {{{zs[0]}, …, {zs[-1]}}} ({len(zs)} values), "
        f"s = {SOURCES} sources, n ∈ {{{', '.join(map(str, ns))}}}; default parameters (θ = 1/(5n), ε = 10⁻⁴, "
        "SpaceSaving capacity 10⁴ per source, warm-up 50n tuples per source).  Every configuration runs once per "
        f"seed {', '.join(map(str, seeds))} (stream and grouping seeded alike; every grouping routes the seed's "
        "stream).  The seed draws the stream only: key names and hash functions are fixed, so a key's hash choices "
        "are the same in every seed and the min–max ranges show the variation of the tuple draw, not of the hash "
        "functions (the paper's Eq. 3 is an expectation over both)."]
    for f in sec.figures:
        name = f.split("/")[-1]
        parts.append(f"![{f}]({f})")
        if verdicts.get(name):
            parts.append(verdicts[name])
        parts.extend(tables.get(name, []))
    parts.append(text["distinct"])
    parts.append(text["definitions"])
    parts.append(NOT_RUN)
    return "\n\n".join(p for p in parts if p)


def _verdict(ok: bool, partly: bool = False) -> str:
    return "**Verdict: reproduced**" if ok else ("**Verdict: partly**" if partly else "**Verdict: not**")


def _sp(row: dict[str, Any], key: str, digits: int = 3) -> str:
    """``mean (min–max)`` over seeds of a merged row's ``key``."""
    return spread(row[key + "_per_seed"]).format(digits)


def _discussion(rows, q2, S, mem, distinct, q1, fig8, seeds) -> dict[str, str]:
    """Verdict paragraphs (numbers from this run) keyed by figure: ``skew``, ``workers``, ``memory``, ``d``;
    plus the ``distinct`` choices note and the ``definitions``."""
    K = S["keys"][0]
    ns, zs = S["ns"], S["zs"]
    n_seeds = len(seeds)
    out: dict[str, str] = {}
    n_big = [n for n in ns if n >= 50]
    # ---- Fig. 10: W-C and D-C vs PKG at high skew and scale; the number of keys
    skew_ok, skew_partly, txt = True, True, []
    if n_big:
        n = n_big[-1]
        zz = max(zs)
        p = _one(rows, keys=K, z=zz, n=n, algorithm="pkg")
        w = _one(rows, keys=K, z=zz, n=n, algorithm="wchoices")
        d = _one(rows, keys=K, z=zz, n=n, algorithm="dchoices")
        rr = _one(rows, keys=K, z=zz, n=n, algorithm="rr-head")
        worst_w = max(_all(_get(rows, algorithm="wchoices"), "seeds_imbalance"))
        mid = [(n_, z_) for n_ in ns for z_ in zs if 0.5 <= z_ <= 1.2]
        dkg_worse = [(n_, z_) for n_, z_ in mid
                     if _one(rows, keys=K, z=z_, n=n_, algorithm="dkg")["seeds_imbalance"]
                     > _one(rows, keys=K, z=z_, n=n_, algorithm="pkg")["seeds_imbalance"]]
        others_below = all(a < b for x in (w, d, rr)
                           for a, b in zip(x["seeds_imbalance_per_seed"], p["seeds_imbalance_per_seed"]))
        ok = others_below and worst_w < 1e-3
        skew_ok = ok
        txt.append(
            f"(i) *Fig. 10 — W-C keeps imbalance low everywhere, D-C and RR far below PKG at high skew and scale:* "
            f"{'reproduced' if ok else 'partly'}.  At n = {n}, z = {zz}: I(PKG) = {_sp(p, 'seeds_imbalance')} vs D-C "
            f"{_sp(d, 'seeds_imbalance')}, RR {_sp(rr, 'seeds_imbalance')}, W-C {_sp(w, 'seeds_imbalance')} "
            f"({'below PKG in every seed' if others_below else 'not below PKG in every seed'}); the worst W-C value "
            f"over the whole grid and all {n_seeds} seeds is {worst_w:.2e} (paper: \"constantly low\")"
            + ("" if worst_w < 1e-3 else
               f" — with only {S['messages']:,} messages the warm-up (50n tuples per source routed as tail) is a "
               "sizeable part of the stream")
            + ".  The paper gives Fig. 10 only as a plot, so the comparison is about who wins where.  DKG (not in "
            f"the paper) reaches I = {_sp(_one(rows, keys=K, z=zz, n=n, algorithm='dkg'), 'seeds_imbalance')} there"
            + (f"; its mean is worse than PKG's in {len(dkg_worse)} of the {len(mid)} (n, z ∈ [0.5, 1.2]) settings "
               f"with |K| = {K:,} (see the figure): on these many-key streams its hot keys only widen after "
               "promotion to Old space, its width is capped by Table 1, and its candidates are consecutive workers"
               if dkg_worse else "") + ".")
    if len(S["keys"]) > 1 and n_big:
        n = n_big[0]
        diffs = []
        for z in zs:
            pa = _one(rows, keys=S["keys"][0], z=z, n=n, algorithm="pkg")["seeds_imbalance"]
            pb = _one(rows, keys=S["keys"][1], z=z, n=n, algorithm="pkg")["seeds_imbalance"]
            diffs.append((z, pa, pb))
        hi = [x for x in diffs if x[0] >= 1.0]
        lo = [x for x in diffs if x[0] < 1.0]
        rel = max(abs(x[1] - x[2]) / max(x[1], x[2], 1e-12) for x in hi) if hi else 0.0
        k_ok = rel <= 0.15 and not lo
        skew_ok = skew_ok and k_ok
        dcw = max(_all([r for r in rows if r["n"] == n and r["algorithm"] in ("dchoices", "wchoices")],
                       "seeds_imbalance"))
        txt.append(
            f"(ii) *\"The number of keys does not influence the imbalance\" (|K| = 10⁴ vs 10⁵):* "
            f"{'reproduced' if k_ok else 'partly'}.  For z ≥ 1 "
            + ("this holds" if rel <= 0.15 else "this holds only roughly")
            + f" (n = {n}: PKG's mean I differs by at most {100 * rel:.0f} % between the two |K|; D-C and W-C stay at "
            f"or below {dcw:.1e} for both in every seed). "
            + (f"For z < 1 it does not for PKG: with 10⁴ keys the tail is coarser (mean PKG I up to "
               f"{max(x[1] for x in lo):.1e} vs {max(x[2] for x in lo):.1e} with 10⁵) — at low skew the imbalance "
               "is dominated by the hash granularity of the tail, which the paper's log-scale plots do not resolve."
               if lo else ""))
    if txt:
        out["skew"] = f"{_verdict(skew_ok, skew_partly)} — " + "  ".join(txt)
    # ---- Fig. 1 / Fig. 11: imbalance vs n
    if len(ns) > 1:
        big = [n for n in ns if n >= 20]
        wz = S["workers_zs"]
        pk_worse = [(n, z) for n in big for z in wz
                    if _one(rows, keys=K, z=z, n=n, algorithm="pkg")["seeds_imbalance"]
                    > max(_one(rows, keys=K, z=z, n=n, algorithm=a)["seeds_imbalance"] for a in ("dchoices", "wchoices"))]
        tol = SOURCES * EPSILON
        dc_over = [(n, z) for n in ns for z in wz
                   if max(_one(rows, keys=K, z=z, n=n, algorithm="dchoices")["seeds_imbalance_per_seed"]) > tol]
        ok = len(pk_worse) == len(big) * len(wz) and not dc_over
        out["workers"] = (
            f"{_verdict(ok, bool(pk_worse))} — *the paper (Fig. 1 / Fig. 11): PKG's imbalance grows with n; at "
            f"n ≥ 20 PKG is worse than D-C and W-C, and D-C stays within s·ε = {tol:g}.*  On our Zipf streams (the "
            "paper's Fig. 1/11 use the WP/TW/CT datasets, which we do not have), PKG's mean I is above both in "
            f"{len(pk_worse)} of {len(big) * len(wz)} (n ≥ 20, z ∈ {{{', '.join(map(str, wz))}}}) settings"
            + ("" if len(pk_worse) == len(big) * len(wz) else " (not at " + "; ".join(
                f"n = {n}, z = {z}: PKG {_sp(_one(rows, keys=K, z=z, n=n, algorithm='pkg'), 'seeds_imbalance')}, D-C "
                f"{_sp(_one(rows, keys=K, z=z, n=n, algorithm='dchoices'), 'seeds_imbalance')}, W-C "
                f"{_sp(_one(rows, keys=K, z=z, n=n, algorithm='wchoices'), 'seeds_imbalance')}"
                for n in big for z in wz if (n, z) not in pk_worse)
               + ": at low skew two choices are nearly enough and the three differ by noise at the 10⁻⁶–10⁻⁵ level; "
                 "the paper's \"all algorithms perform equally well\" where balancing is easy)")
            + ", and D-C exceeds s·ε in "
            + (f"{len(dc_over)} setting(s) in at least one seed ({', '.join(f'n = {n}, z = {z}' for n, z in dc_over[:4])})"
               if dc_over else "no setting and no seed") + ".")
    # ---- Fig. 5 / Fig. 6 memory, Fig. 3 head size
    if n_big and mem:
        def worst(values):
            return max(values, key=lambda x: x[0])

        meas_pkg, meas_wc, meas_sg = [], [], []
        for n in n_big:
            for z in zs:
                a = _one(rows, keys=K, z=z, n=n, algorithm="dchoices")
                w = _one(rows, keys=K, z=z, n=n, algorithm="wchoices")
                p = _one(rows, keys=K, z=z, n=n, algorithm="pkg")
                s = _one(rows, keys=K, z=z, n=n, algorithm="shuffle")
                dc_pkg, wc_pkg = np.mean(_ratio(a, p, "pairs", "pairs", 1.0)), np.mean(_ratio(w, p, "pairs", "pairs", 1.0))
                meas_pkg.append((max(dc_pkg, wc_pkg), z, n))
                meas_wc.append((wc_pkg, z, n))
                meas_sg.append((max(np.mean(_ratio(a, s, "pairs", "pairs")), np.mean(_ratio(w, s, "pairs", "pairs"))),
                                z, n))
        est_pkg = [(max(np.mean(_ratio(e, e, "dchoices", "pkg", 1.0)), np.mean(_ratio(e, e, "wchoices", "pkg", 1.0))),
                    e["z"], e["n"]) for e in mem]
        est_dc = [(np.mean(_ratio(e, e, "dchoices", "pkg", 1.0)), e["z"], e["n"]) for e in mem]
        est_sg = [(max(np.mean(_ratio(e, e, "dchoices", "sg")), np.mean(_ratio(e, e, "wchoices", "sg"))), e["z"], e["n"])
                  for e in mem]
        mp, mw, ms = worst(meas_pkg), worst(meas_wc), worst(meas_sg)
        ep, ed, es = worst(est_pkg), worst(est_dc), worst(est_sg)
        pkg_rep = min(_one(rows, keys=K, z=z, n=n_big[0], algorithm="pkg")["replication"] for z in zs)
        hs = {e["z"]: e["head"] for e in mem if e["n"] == _mem_ns(S)[0]}
        # the paper's two bounds: <= ~30 % over PKG, >= 80 % less than SG; reproduced when both hold for the
        # estimate and the measured pairs, partly when one bound holds for one of them, else not
        pkg_ok = [ep[0] <= 0.35, mp[0] <= 0.35]
        sg_ok = [es[0] <= 0.2, ms[0] <= 0.2]
        out["memory"] = (
            f"{_verdict(all(pkg_ok + sg_ok), any(pkg_ok + sg_ok))} — *the paper (Fig. 5/6): D-C and W-C need at most "
            "~30 % more memory than PKG (W-C up to 25 % at n = 100) and at least 80 % less than SG (n ∈ {50, 100}, "
            "|K| = 10⁴).*  With the paper's own estimate mem = Σ_k min(f_k, c_k) (c = 2 for PKG and the tail, d or n "
            f"for the head; Sec. IV-B) evaluated on our streams, the worst mean overhead over PKG is {100 * ep[0]:.0f} % "
            f"(z = {ep[1]}, n = {ep[2]}; D-C alone {100 * ed[0]:.0f} %) and D-C/W-C need at most {100 * es[0]:.0f} % "
            f"of SG's memory ({100 * (1 - es[0]):.0f} % less) — "
            + ("consistent with the paper's bounds" if ep[0] <= 0.35 and es[0] <= 0.2 else
               "above the paper's bounds at the most skewed settings, presumably because few distinct keys occur "
               f"in our shorter stream (m = {S['messages']:,} instead of 10⁷), so the head's extra replicas weigh "
               "more")
            + f".  *Measured* (key, worker) pairs give a larger mean overhead, up to {100 * mp[0]:.0f} % (W-C "
            f"{100 * mw[0]:.0f} %, at z = {mw[1]}, n = {mw[2]}), and at most {100 * ms[0]:.0f} % of SG's pairs.  The "
            "difference is PKG's denominator: the estimate charges PKG 2 states per key, but the least-loaded rule "
            f"often keeps a key on one of its two choices (mean measured PKG replication drops to {pkg_rep:.2f} at "
            f"n = {n_big[0]}), while a W-C head key really lands on ~n workers.  Our streams have "
            f"m = {S['messages']:,} messages (paper 10⁷), which lowers every f_k and with it SG's reference.  "
            f"*Fig. 3 — head size |H| for θ = 1/(5n):* reproduced in shape (the paper gives only the plot; |H| is "
            f"computed from the Zipf probabilities, the same for every seed, n = {_mem_ns(S)[0]}): from "
            f"{hs[min(hs)]:.0f} keys at z = {min(hs)} to {hs[max(hs)]:.0f} at z = {max(hs)}.")
    # ---- Fig. 9 / Q2
    if q2:
        runs = [(r, i) for r in q2 for i in range(len(r["min_d_per_seed"]))]
        gaps = [r["chosen_max_per_seed"][i] - r["min_d_per_seed"][i] for r, i in runs]
        above = sum(g >= 0 for g in gaps)
        below = [(r, i) for (r, i), g in zip(runs, gaps) if g < 0]
        txt = (f"{_verdict(not below, above >= len(runs) / 2)} — *the paper (Fig. 9 / Q2): \"D-C uses a d slightly "
               f"larger than the minimum\", in all cases.*  In {above} of {len(runs)} runs ({len(q2)} settings × "
               f"{n_seeds} seeds) the chosen d (largest over the {SOURCES} sources) is ≥ the empirical minimum (gap "
               f"{min(g for g in gaps if g >= 0) if above else 0} to {max(gaps)}; the large gaps are at z = 2 where "
               "D-C's d approaches n, i.e. W-C).")
        if below:
            from skewlab.engine.workloads.synthetic import zipf_probabilities

            def start_d(r, i):
                return r["chosen_max_per_seed"][i] == max(2, math.ceil(zipf_probabilities(K, r["z"])[0] * r["n"]))

            at_start = [x for x in below if start_d(*x)]
            settings = sorted({(r["n"], r["z"]) for r, _ in below})
            txt += (f" It is below the minimum in {len(below)} run(s) ({len(settings)} setting(s): "
                    + ", ".join(f"n = {n}, z = {z}" for n, z in settings) + "), e.g. " + "; ".join(
                f"n = {r['n']}, z = {r['z']}, seed {seeds[i]} (d = {r['chosen_max_per_seed'][i]} vs "
                f"{r['min_d_per_seed'][i]}, I(D-C) = {r['dc_I_per_seed'][i]:.1e} vs W-C {r['wc_I_per_seed'][i]:.1e})"
                for r, i in below[:3])
                + ".  Eq. (3) bounds the imbalance in *expectation over the hash functions*; on one stream the hot "
                "keys' few choices can collide with each other, which the expectation averages away (and our hash "
                "functions are the same in every seed, so such a collision repeats in every seed)"
                + (f" — and in {len(at_start)} of these runs D-C took the very first candidate of its search, "
                   "d = max(2, ⌈p₁·n⌉), i.e. Eq. (3) held with almost no slack" if at_start else "")
                + ".  The paper reports no such case; it gives neither seeds nor its tolerance for \"matching "
                "W-C\", which we set to ε = 10⁻⁴.")
        out["d"] = txt
    dd = distinct
    out["distinct"] = (
        f"*D-Choices gives a head key d distinct workers (skewlab deviation, see `engine/algorithms/groupings/split_key.py`; "
        "one fixed stream, not seeded by `--seed`).* On a Zipf z = 1 stream of "
        f"{dd['messages']:,} tuples over keys \"0\" … \"9999\" (n = {dd['n']}, s = {SOURCES}) the hottest key has "
        f"d = {dd['d']} but its hash choices F_0..F_{dd['d'] - 1} name only {dd['hash_workers']} workers; it lands on "
        f"{dd['hot_workers']} workers (≥ 1 % of its tuples each; largest share {100 * dd['hot_max_share']:.1f} %) and "
        f"the headline imbalance is {dd['imbalance']:.2g} (seeds' I {dd['seeds_imbalance']:.2g}).  With repeated "
        "choices kept, as the paper's independent hash functions and its public simulator allow, it used 5 workers "
        "and the headline imbalance was 0.12 on this stream (measured before the change; the issue reports 0.012 "
        "for the reference Java simulator on its stream).")
    out["definitions"] = (
        "*Definitions.* The paper's I is max − avg of the normalised loads; skewlab's headline imbalance is "
        "n·I.  Head detection uses guaranteed SpaceSaving counts and a warm-up of 50n tuples per source "
        "(skewlab's fix of the \"hot from the first tuple\" pitfall of the public simulator); this only "
        "affects the first 50n·s tuples.")
    return out
