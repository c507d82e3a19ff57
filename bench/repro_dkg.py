"""Reproduction of Dalabasmaz & Can, "Dynamic Key Grouping" (``skewlab bench dkg``).

Set-up (paper Sec. 5.1–5.4): the synthetic ``country-skew-r<R>`` data sets — 204 country names, one hot
country carrying R % of the tuples, R = 0, 10, …, 100 (skewlab workload ``country-skew``, param ``r``;
the rest uniform, see its docstring) — routed by ``shuffle`` (SG), ``hash`` (KG), ``pkg`` and ``dkg``
with 5 sources (spouts) and 10 workers, the paper's first configuration.  Also, at R = 70 (the
synthetic stand-in for the paper's twitter-election data set, 68 % skew, which is not available):
workers n ∈ {10, 50, 100} (Fig. 12) and sources s ∈ {5, 10, 15, 20} (Fig. 13).

Metrics (paper Sec. 4.7, Eq. 7–8): **StdDev** = population standard deviation of the workers' load
*percentages* (skewlab ``load_stddev_pct``; Table 3's values, e.g. KG 20.3 with 10 workers, are on that
scale) and **DistCost** = Σ keys per machine / distinct keys = skewlab's replication.  Latency and
throughput of the Storm deployment are not simulated.

Sizes: the paper's data sets have 10⁷ tuples; the full run uses 2·10⁶ per data set, quick 10⁵.  DKG's
time-based rules run in tuple counts (15 000 / 60 000 tuples per source, see ``engine.groupings.dkg``),
so every source passes several promotion cycles in both sizes.
"""

from __future__ import annotations

import time
from typing import Any

from bench.common import (
    Context,
    Section,
    check,
    legend_once,
    md_table,
    new_figure,
    route,
    save_figure,
    stream_metrics,
    style,
    workload_stream,
)

KEY = "dkg"
TITLE = "Dalabasmaz & Can — Dynamic Key Grouping"
ALGOS = ("shuffle", "hash", "pkg", "dkg")
PAPER_TABLE3 = {  # twitter-election (68 % skew), 5 spouts, 10 workers: StdDev, DistCost
    "shuffle": (0.0001, 2.4491), "hash": (20.3202, 1.0000), "pkg": (12.3513, 1.1647), "dkg": (4.0972, 1.2414),
}


#: quick mode: DKG's cycles scaled down 10x so that 10^5 tuples (20 000 per source) still pass the
#: warm-up and an Old-space promotion (with the defaults the first one is at 60 000 tuples per source)
QUICK_DKG = {"teenage_cycle_tuples": 1_500, "old_cycle_tuples": 6_000, "warmup_tuples": 1_500}


def sizes(quick: bool) -> dict[str, Any]:
    if quick:
        return {"rs": [0, 30, 70, 100], "messages": 100_000, "ns": [10, 50], "ss": [5, 10], "dkg": QUICK_DKG}
    return {"rs": list(range(0, 101, 10)), "messages": 2_000_000, "ns": [10, 50, 100], "ss": [5, 10, 15, 20],
            "dkg": {}}


def units(quick: bool, seeds: int = 1) -> int:
    s = sizes(quick)
    return len(s["rs"]) + 2


def _measure(r: float, n: int, s: int, messages: int, seed: int, dkg_params: dict) -> list[dict[str, Any]]:
    wl, ids, fps = workload_stream("country-skew", {"r": float(r)}, messages, seed)
    out = []
    for alg in ALGOS:
        workers, secs = route(alg, n, s, fps, seed, dkg_params if alg == "dkg" else None)
        met = stream_metrics(ids, workers, n)
        out.append({"r": r, "n": n, "sources": s, "algorithm": alg, "hot_key": wl.hot_key, **met})
    return out


def run(ctx: Context) -> Section:
    t0 = time.perf_counter()
    S = sizes(ctx.quick)
    m = S["messages"]
    rows = []
    for r in S["rs"]:
        rows += _measure(r, 10, 5, m, ctx.seed, S["dkg"])
        ctx.tick(f"dkg r={r}")
    scale_n = []
    for n in S["ns"]:
        scale_n += _measure(70, n, 5, m, ctx.seed, S["dkg"])
    ctx.tick("dkg workers")
    scale_s = []
    for s in S["ss"]:
        scale_s += _measure(70, 10, s, m, ctx.seed, S["dkg"])
    ctx.tick("dkg sources")
    sec = Section(KEY, TITLE, ctx.command(KEY), "", data={"rows": rows, "workers": scale_n, "sources": scale_s})
    _figures(ctx, sec, rows, scale_n, scale_s)
    _checks(sec, rows)
    sec.markdown = _markdown(sec, rows, scale_n, scale_s, S)
    sec.seconds = time.perf_counter() - t0
    return sec


def _val(rows, alg, key, **kw):
    for r in rows:
        if r["algorithm"] == alg and all(r[k] == v for k, v in kw.items()):
            return r[key]
    return float("nan")


def _figures(ctx, sec, rows, scale_n, scale_s) -> None:
    rs = sorted({r["r"] for r in rows})
    fig, axes = new_figure(1, 4, width=3.4, height=3.0)
    for alg in ALGOS:
        axes[0, 0].plot(rs, [_val(rows, alg, "load_stddev_pct", r=r) for r in rs], label=alg, **style(alg))
        axes[0, 1].plot(rs, [_val(rows, alg, "replication", r=r) for r in rs], label=alg, **style(alg))
    axes[0, 0].set_ylabel("StdDev (of load %)")
    axes[0, 1].set_ylabel("DistCost (= replication)")
    for ax in axes[0, :2]:
        ax.set_xlabel("skewness ratio r (%)")
    axes[0, 0].set_title("StdDev vs skew (Fig. 11b)", fontsize=9)
    axes[0, 1].set_title("DistCost vs skew (Fig. 11c)", fontsize=9)
    ns = sorted({r["n"] for r in scale_n})
    for alg in ALGOS:
        axes[0, 2].plot(ns, [_val(scale_n, alg, "load_stddev_pct", n=n) for n in ns], label=alg, **style(alg))
    axes[0, 2].set_xlabel("workers n (r = 70)")
    axes[0, 2].set_ylabel("StdDev (of load %)")
    axes[0, 2].set_title("vs workers (Fig. 12b)", fontsize=9)
    ss = sorted({r["sources"] for r in scale_s})
    for alg in ALGOS:
        axes[0, 3].plot(ss, [_val(scale_s, alg, "load_stddev_pct", sources=s) for s in ss], label=alg, **style(alg))
    axes[0, 3].set_xlabel("sources s (r = 70, n = 10)")
    axes[0, 3].set_ylabel("StdDev (of load %)")
    axes[0, 3].set_title("vs sources (Fig. 13b)", fontsize=9)
    legend_once(fig, axes, ncol=4)
    sec.figures.append(save_figure(fig, ctx, "dkg_skew.png", "DKG vs SG / KG / PKG on country-skew-r (s=5, n=10)"))


def _checks(sec, rows) -> None:
    c = sec.checks
    rs = sorted({r["r"] for r in rows})
    sg = max(_val(rows, "shuffle", "load_stddev_pct", r=r) for r in rs)
    check(c, "shuffle StdDev ≈ 0", sg < 0.01, f"max {sg:.2e}")
    kg = {_val(rows, "hash", "replication", r=r) for r in rs}
    check(c, "hash DistCost = 1", kg == {1.0}, f"{sorted(kg)}")
    pk = max(_val(rows, "pkg", "replication", r=r) for r in rs)
    check(c, "pkg DistCost ≤ 2", pk <= 2.0, f"max {pk:.3f}")
    ok = all(_val(rows, "shuffle", "replication", r=r) >= _val(rows, a, "replication", r=r)
             for r in rs for a in ALGOS)
    check(c, "shuffle DistCost is the largest", ok, "every r")
    hi = [r for r in rs if r >= 50]
    worse = [r for r in hi if _val(rows, "dkg", "load_stddev_pct", r=r) > _val(rows, "pkg", "load_stddev_pct", r=r)]
    check(c, "dkg StdDev ≤ pkg StdDev for r ≥ 50", not worse, f"violations at r = {worse}" if worse else f"r = {hi}")
    k0, k1 = _val(rows, "hash", "load_stddev_pct", r=rs[0]), _val(rows, "hash", "load_stddev_pct", r=rs[-1])
    check(c, "hash StdDev grows with skew", k1 > k0, f"{k0:.2f} → {k1:.2f}")


def _markdown(sec, rows, scale_n, scale_s, S) -> str:
    rs = sorted({r["r"] for r in rows})
    parts = [
        f"Set-up: `country-skew` workload (204 countries, one hot country with r % of the tuples), "
        f"{S['messages']:,} tuples per data set (paper: 10⁷), s = 5 sources, n = 10 workers, DKG defaults "
        + ("(expected keys 100, cycles 15 000 / 60 000 tuples per source, warm-up 15 000)." if not S["dkg"] else
           f"with the quick-mode cycles {S['dkg']} (10x shorter than the defaults, so the small stream passes "
           "an Old-space promotion).") + "  StdDev is the "
        "population standard deviation of the workers' load percentages (Eq. 7), DistCost = replication (Eq. 8).",
    ]
    for f in sec.figures:
        parts.append(f"![{f}]({f})")
    hdr = ["r (%)"] + [f"{a} StdDev" for a in ALGOS] + [f"{a} DistCost" for a in ALGOS]
    t = [[str(r)] + [_val(rows, a, "load_stddev_pct", r=r) for a in ALGOS] + [_val(rows, a, "replication", r=r)
                                                                             for a in ALGOS] for r in rs]
    parts.append("**StdDev and DistCost vs skewness ratio (s = 5, n = 10)**\n\n" + md_table(hdr, t))
    r70 = 70 if 70 in rs else rs[-1]
    t3 = [[a, PAPER_TABLE3[a][0], _val(rows, a, "load_stddev_pct", r=r70), PAPER_TABLE3[a][1],
           _val(rows, a, "replication", r=r70)] for a in ALGOS]
    parts.append(f"**Paper Table 3 (twitter-election, 68 % skew) next to country-skew-r{r70}** (same s = 5, n = 10)\n\n"
                 + md_table(["method", "paper StdDev", "ours StdDev", "paper DistCost", "ours DistCost"], t3))
    ns = sorted({r["n"] for r in scale_n})
    ss = sorted({r["sources"] for r in scale_s})
    tn = [[f"n={n}"] + [_val(scale_n, a, "load_stddev_pct", n=n) for a in ALGOS] +
          [_val(scale_n, a, "replication", n=n) for a in ALGOS] for n in ns]
    ts = [[f"s={s}"] + [_val(scale_s, a, "load_stddev_pct", sources=s) for a in ALGOS] +
          [_val(scale_s, a, "replication", sources=s) for a in ALGOS] for s in ss]
    parts.append("**r = 70: workers and sources**\n\n" + md_table(["setting"] + hdr[1:], tn + ts))
    parts.append(_discussion(rows, scale_n, scale_s, r70))
    return "\n\n".join(parts)


def _discussion(rows, scale_n, scale_s, r70) -> str:
    rs = sorted({r["r"] for r in rows})
    st = {a: _val(rows, a, "load_stddev_pct", r=r70) for a in ALGOS}
    dc = {a: _val(rows, a, "replication", r=r70) for a in ALGOS}
    lines = ["**Comparison with the paper**", ""]

    def close(ours: float, paper: float) -> str:
        rel = abs(ours - paper) / paper
        return f"{ours:.2f} vs {paper:.2f} ({'+' if ours >= paper else '−'}{100 * rel:.0f} %)"

    lines.append(
        f"- *Table 3 (twitter-election, 68 % skew, s = 5, n = 10): StdDev KG 20.3, PKG 12.4, DKG 4.1, SG ≈ 0.* "
        f"country-skew-r{r70} is our synthetic stand-in (the real data set is not available): KG "
        f"{close(st['hash'], 20.3202)}, PKG {close(st['pkg'], 12.3513)}, DKG {close(st['dkg'], 4.0972)}, SG "
        f"{st['shuffle']:.1e}.  Same ranking; KG and PKG are set by the hot key's share alone (KG ≈ one worker with "
        "r %, PKG ≈ two workers with r/2 % each), so a 70 % synthetic key lands close to the paper's 68 % real one; "
        "DKG's value depends on how far the hot key's width grows (Table 1 caps it at 8 of 10 workers).")
    lines.append(
        f"- *DistCost, paper SG 2.45, KG 1.00, PKG 1.16, DKG 1.24; ours SG {dc['shuffle']:.2f}, KG {dc['hash']:.2f}, "
        f"PKG {dc['pkg']:.2f}, DKG {dc['dkg']:.2f}.*  Not comparable in absolute terms: DistCost averages over "
        "*distinct keys*, twitter-election has millions of keys seen once or twice (SG cannot spread them), while "
        "every one of our 204 countries occurs thousands of times, so SG reaches all 10 workers and PKG uses both "
        "choices for most keys.  The ordering KG < PKG < DKG < SG is the paper's.")
    dkg_better = [r for r in rs if _val(rows, "dkg", "load_stddev_pct", r=r) < _val(rows, "pkg", "load_stddev_pct", r=r)]
    pkg_better = [r for r in rs if r not in dkg_better]
    start = next((r for r in rs if all(x in dkg_better for x in rs if r <= x < 100)), None)
    lines.append(
        "- *Fig. 10/11 — KG fine up to ~30 % skew; PKG degrades after 20–30 %; DKG much better and predictable "
        f"above 30 %.*  DKG has the lowest StdDev of the key-based methods for r ≥ {start} "
        f"(r = {r70}: {st['dkg']:.2f} vs PKG {st['pkg']:.2f}); PKG is better at r ∈ {pkg_better} — at low skew two "
        "choices already balance 204 keys almost perfectly, while DKG's hot key must first be promoted to Old space "
        "and then widens one worker at a time.  KG's StdDev grows linearly with r from r = 0 (our cold keys are "
        "uniform, so there is no flat region)."
        + (f"  At r = 100 (one key only) KG and PKG are stuck on 1 and 2 workers while DKG spreads the key over "
           f"{_val(rows, 'dkg', 'replication', r=100):.0f} workers (its Table-1 maximum) — the paper's DistCost \"peak "
           "under 100 % skewness\"." if 100 in rs else ""))
    ns = sorted({r["n"] for r in scale_n})
    if len(ns) > 1:
        lines.append(
            "- *Fig. 12 — StdDev decreases with more workers, DKG closest to SG.* DKG "
            + ", ".join(f"{_val(scale_n, 'dkg', 'load_stddev_pct', n=n):.2f} (n={n})" for n in ns)
            + "; PKG " + ", ".join(f"{_val(scale_n, 'pkg', 'load_stddev_pct', n=n):.2f}" for n in ns)
            + ": reproduced (load percentages shrink as 100/n, so the metric falls with n for every method).")
    ss = sorted({r["sources"] for r in scale_s})
    if len(ss) > 1:
        d = [_val(scale_s, "dkg", "load_stddev_pct", sources=x) for x in ss]
        lines.append(
            "- *Fig. 13 — the number of spouts has no effect.* DKG StdDev "
            + ", ".join(f"{v:.2f} (s={x})" for v, x in zip(d, ss))
            + (": reproduced." if max(d) - min(d) < 0.25 * min(d) else
               ": **not reproduced** — DKG degrades with more sources here.  Each source runs its own Key Spaces "
               "and promotion cycles, and skewlab counts the paper's 15 s / 60 s cycles in tuples *per source*, so "
               "with s sources over the same stream every source passes s times fewer cycles (and estimates load "
               "from s times fewer tuples); in the paper the cycles are wall-clock time and independent of s.")
            + "  KG and PKG do not depend on s.")
    return "\n".join(lines)
