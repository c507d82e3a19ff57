"""Shared machinery of ``skewlab bench``: run context, progress, simulation helpers, figures, results page.

Simulation helpers
------------------
* :func:`zipf_stream` / :func:`workload_stream` draw a whole stream from a registered workload
  (:mod:`skewlab.engine.workloads`) with the given seed: the same key ids ``skewlab simulate`` would see
  (one interval holding every message).
* :func:`route` routes a stream with :func:`skewlab.engine.algorithms.source_routing.route_sources` — the local runtime's own
  routing step (tuple ``i`` belongs to source ``i mod S``, each source routes its sub-sequence in
  order) — and :func:`stream_metrics` measures it with :mod:`skewlab.engine.control.metrics`.  For the streaming
  groupings (no plans, no migration) this is exactly what ``skewlab simulate`` computes for the whole
  run (routing is batch-size invariant); ``tests/bench/test_bench_quick.py`` checks the equality.  It lets a
  reproduction reuse one generated stream for dozens of (algorithm, n) configurations.
* :func:`simulate` is :func:`skewlab.engine.cli.simulate.run_simulation` (same workload set-up, same
  :class:`~skewlab.engine.runtimes.local.LocalRuntime`) that also records every plan the controller asks for
  (the plan's own imbalance, feasibility, table size, ``extra``), which the run summary does not keep.

Results page
------------
Every target returns a :class:`Section` (markdown text, figures, checks).  :func:`write_results`
puts each section between ``<!-- bench:KEY:start -->`` / ``<!-- bench:KEY:end -->`` markers in
``OUT/results/<page>.md`` (one page per target, :data:`RESULT_PAGES`), so running one target refreshes its
section and keeps the rest of the page.

Plots: matplotlib with the non-interactive Agg backend (PNG written directly by the library, no
browser or external renderer; plotly's static export needs kaleido, which drives a Chrome binary).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import math
import os
import platform
import re
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from skewlab.engine.algorithms import registry
from skewlab.engine.control.metrics import load_metrics
from skewlab.engine.cli.progress import Progress

__all__ = [
    "ALGO_STYLE",
    "Check",
    "RESULT_PAGES",
    "TIMING_COLUMN",
    "Spread",
    "Context",
    "Section",
    "check",
    "fmt",
    "machine_info",
    "markdown_tables",
    "md_table",
    "mean_rows",
    "minmax_errors",
    "new_figure",
    "plot_band",
    "result_page",
    "route",
    "save_figure",
    "seal",
    "seal_line",
    "section_re",
    "seed_matrix",
    "simulate",
    "spread",
    "stream_metrics",
    "tables_text",
    "workload_stream",
    "write_results",
    "zipf_stream",
]

FIG_DIR = "figures"


# ---------------------------------------------------------------------------------------------
# Context, sections, checks
# ---------------------------------------------------------------------------------------------
@dataclass
class Check:
    """One invariant of a reproduction (shape or property, never a speed)."""

    name: str
    ok: bool
    detail: str = ""


def check(checks: list[Check], name: str, ok: bool, detail: str = "") -> bool:
    checks.append(Check(name, bool(ok), detail))
    return bool(ok)


@dataclass
class Section:
    """What one bench target produced."""

    key: str
    title: str
    command: str
    markdown: str
    figures: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


#: seeds per reproduction when ``--seeds`` is not given: Fang et al. and Gedik average 5 runs; the
#: quick run uses 2 so that CI exercises the aggregation over seeds
DEFAULT_SEEDS = 5
QUICK_SEEDS = 2


class Context:
    """Output directory, mode, seeds and the shared progress bar of one ``skewlab bench`` run.

    ``seeds`` is ``seed, seed + 1, ..., seed + n_seeds - 1``: a reproduction runs every configuration
    once per seed (stream and grouping seeded alike) and reports the mean with the min–max range
    (:class:`Spread`, :func:`plot_band`).
    """

    def __init__(self, out: str | os.PathLike[str], quick: bool = False, seed: int = 0,
                 progress: Progress | None = None, log: Callable[[str], None] | None = None,
                 n_seeds: int | None = None) -> None:
        self.out = Path(out)
        self.quick = bool(quick)
        self.seed = int(seed)
        self.n_seeds = int(n_seeds) if n_seeds is not None else (QUICK_SEEDS if quick else DEFAULT_SEEDS)
        if self.n_seeds < 1:
            raise ValueError(f"--seeds must be at least 1, got {self.n_seeds}")
        self.seeds = [self.seed + i for i in range(self.n_seeds)]
        self.progress = progress
        self.done = 0
        self.log = log or (lambda msg: None)
        (self.out / FIG_DIR).mkdir(parents=True, exist_ok=True)

    def tick(self, label: str = "", units: int = 1) -> None:
        """One unit of work finished (drives the progress bar)."""
        self.done += units
        if self.progress is not None:
            self.progress.update(self.done, label[:60])

    def command(self, target: str, seeds: bool = True) -> str:
        """The command line that reproduces ``target``; ``seeds=False`` for a target that runs ``--seed``
        only (so the page does not claim ``--seeds`` runs it never made)."""
        parts = ["skewlab bench", target, "--seed", str(self.seed)]
        if seeds:
            parts += ["--seeds", str(self.n_seeds)]
        parts += ["--out", str(self.out)]
        if self.quick:
            parts.insert(2, "--quick")
        return " ".join(parts)

    def figure_path(self, name: str) -> Path:
        return self.out / FIG_DIR / name


# ---------------------------------------------------------------------------------------------
# Machine
# ---------------------------------------------------------------------------------------------
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, Any]:
    """CPU, core count (affinity), memory, load average, versions: where the numbers were measured."""
    import numba

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    mem_gb = None
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal"):
                    mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {
        "cpu": _cpu_model(),
        "cores": cores,
        "memory_gb": mem_gb,
        "load_average": [round(x, 2) for x in load],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(),
    }


def git_commit() -> str:
    """Short commit of the checkout the bench code runs from, ``+dirty`` when it has uncommitted changes;
    ``unknown`` outside a git checkout (an installed wheel)."""
    import subprocess

    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "--short=10", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def machine_line(info: Mapping[str, Any] | None = None) -> str:
    m = dict(info or machine_info())
    la = m["load_average"]
    return (f"{m['cpu']}, {m['cores']} cores available, {m['memory_gb']} GB RAM, {m['platform']}, "
            f"Python {m['python']}, numpy {m['numpy']}, numba {m['numba']}; load average "
            f"{la[0]} / {la[1]} / {la[2]} (1/5/15 min) at {m['date']}, commit {m.get('commit', 'unknown')}")


# ---------------------------------------------------------------------------------------------
# Streams and simulation
# ---------------------------------------------------------------------------------------------
def workload_stream(name: str, params: Mapping[str, Any], messages: int, seed: int):
    """``(workload, key_ids, fps)`` of the whole stream of a registered workload, drawn as ONE interval."""
    from skewlab.engine.workloads import create_workload

    wl = create_workload(name, seed, dict(params))
    parts = list(wl.batches(int(messages), max(int(messages), 1)))
    ids = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return wl, ids, wl.vocab.fps[ids]


def zipf_stream(z: float, keys: int, messages: int, seed: int):
    """Static Zipf stream (``zipf`` workload, f = 0): ``(workload, key_ids, fps)``."""
    return workload_stream("zipf", {"z": float(z), "keys": int(keys)}, messages, seed)


def route(name: str, n: int, sources: int, fps: np.ndarray, seed: int = 0,
          params: Mapping[str, Any] | None = None, router=None) -> tuple[np.ndarray, float]:
    """Workers of every tuple under grouping ``name`` (or the given :class:`~skewlab.engine.algorithms.grouping.Router`)
    with ``sources`` sources.

    Uses the local runtime's :func:`~skewlab.engine.algorithms.source_routing.route_sources`; returns (workers, seconds
    inside ``route``).
    """
    from skewlab.engine.algorithms.source_routing import route_sources

    r = router if router is not None else registry.create(name, n, sources, seed, params or {}).router
    return route_sources(r, np.asarray(fps, dtype=np.uint64), r.n_sources, 0)


def stream_metrics(key_ids: np.ndarray, workers: np.ndarray, n: int) -> dict[str, float]:
    """:func:`skewlab.engine.control.metrics.load_metrics` of the routed stream plus replication and (key, worker) pairs."""
    loads = np.bincount(np.asarray(workers, dtype=np.int64), minlength=n)[:n].astype(np.float64)
    out = load_metrics(loads)
    key_ids = np.asarray(key_ids, dtype=np.int64)
    pairs = distinct = 0
    if key_ids.size:
        codes = key_ids * np.int64(n) + np.asarray(workers, dtype=np.int64)
        top = int(key_ids.max()) + 1
        if top * n <= 50_000_000:  # a bitmap is O(m) where np.unique sorts: same counts, ~10x faster
            mark = np.zeros(top * n, dtype=np.bool_)
            mark[codes] = True
            pairs = int(np.count_nonzero(mark))
            seen = np.zeros(top, dtype=np.bool_)
            seen[key_ids] = True
            distinct = int(np.count_nonzero(seen))
        else:
            pairs = int(np.unique(codes).size)
            distinct = int(np.unique(key_ids).size)
    out["pairs"] = int(pairs)
    out["distinct_keys"] = int(distinct)
    out["replication"] = pairs / distinct if distinct else 0.0
    return out


def plan_summary(plan) -> dict[str, Any]:
    """The fields of a :class:`~skewlab.engine.algorithms.grouping.Plan` the reproductions use (JSON-friendly)."""
    extra = {k: v for k, v in plan.extra.items() if isinstance(v, (int, float, str, bool)) or v is None}
    return {
        "imbalance": plan.imbalance(),
        "feasible": bool(plan.feasible),
        "migration_cost": float(plan.migration_cost),
        "migrated_keys": plan.migrated_keys,
        "table": plan.routing_table_size,
        "seconds": float(plan.plan_seconds),
        "note": plan.note,
        "extra": extra,
    }


def simulate(cfg, progress: Callable[[int, int], None] | None = None, plans_on: bool = True) -> dict[str, Any]:
    """:func:`skewlab.engine.cli.simulate.run_simulation` plus ``result["plans"]``: a summary of every plan.

    Same workload set-up as ``run_simulation`` (Fang's ``instances`` default to the worker count),
    same :class:`~skewlab.engine.runtimes.local.LocalRuntime`; the grouping's ``plan`` is wrapped on the
    instance to record what it returned.  ``plans_on=False``: the grouping never asks for a plan
    (``should_rebalance`` is false), i.e. the rebalancer's own routing without rebalancing.
    """
    from skewlab.engine.runtimes.local import LocalRuntime
    from skewlab.engine.cli.simulate import stream_messages
    from skewlab.engine.workloads import WORKLOADS, create_workload, workload_names

    cfg.validate()
    wparams = dict(cfg.workload_params)
    workload_names()
    wcls = WORKLOADS.get(cfg.workload)
    if wcls is not None and "instances" in {p.name for p in wcls.params} and "instances" not in wparams:
        wparams["instances"] = cfg.workers
    workload = create_workload(cfg.workload, cfg.seed, wparams)
    grouping = registry.create(cfg.algorithm, cfg.workers, cfg.sources, cfg.seed, cfg.params)
    plans: list[dict[str, Any]] = []
    original = grouping.plan

    def recording_plan(stats):
        p = original(stats)
        if p is not None:
            row = plan_summary(p)
            row["interval"] = int(stats.interval)
            plans.append(row)
        return p

    grouping.plan = recording_plan  # type: ignore[method-assign]
    if not plans_on:
        grouping.should_rebalance = lambda stats: False  # type: ignore[method-assign]
    runtime = LocalRuntime(grouping, workload.vocab, window=cfg.window, cost_model=cfg.cost_model)
    messages = stream_messages(cfg.messages, workload)
    out = runtime.run(workload.batches(messages, cfg.interval_messages), cfg.changes, progress)
    out["plans"] = plans
    out["workload"] = workload.describe()
    out["distinct_keys_total"] = len(workload.vocab)
    return out


# ---------------------------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Spread:
    """Mean and min–max range of one number over seeds (``n`` values); formats as ``mean (lo–hi)``."""

    mean: float
    lo: float
    hi: float
    n: int

    def format(self, digits: int = 3) -> str:
        if self.n <= 1 or self.lo == self.hi:
            return fmt(self.mean, digits)
        return f"{fmt(self.mean, digits)} ({fmt(self.lo, digits)}–{fmt(self.hi, digits)})"

    def __str__(self) -> str:
        return self.format()


def spread(values: Iterable[float]) -> Spread:
    """:class:`Spread` of the finite values (NaN and None skipped; all missing -> NaN)."""
    v = np.array([float(x) for x in values if x is not None], dtype=np.float64)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return Spread(float("nan"), float("nan"), float("nan"), 0)
    return Spread(float(v.mean()), float(v.min()), float(v.max()), int(v.size))


def minmax_errors(mean: Sequence[float] | np.ndarray, per_seed: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray | None:
    """matplotlib ``yerr`` of bars drawn at ``mean``: the distances down to the min and up to the max over
    seeds (``per_seed`` is seeds × bars), clipped at 0 (a mean recomputed as a sum of means can differ from
    the seeds' sum by a rounding error, which matplotlib rejects as a negative error); None with one seed."""
    values = np.asarray(per_seed, dtype=np.float64)
    if values.ndim < 2 or values.shape[0] <= 1:
        return None
    m = np.asarray(mean, dtype=np.float64)
    return np.clip(np.stack([m - values.min(axis=0), values.max(axis=0) - m]), 0.0, None)


def mean_rows(rows: Iterable[Mapping[str, Any]], by: Sequence[str]) -> list[dict[str, Any]]:
    """Merge the per-seed rows of each configuration (rows with equal values under ``by``) into one row.

    Rows come in run order (one per seed and configuration).  In the merged row every other field
    ``f`` gets ``f_per_seed`` (its per-seed values, in run order) and ``f`` = the mean over seeds for
    numbers (NaN ignored; bools stay bools: all seeds true) and for equal-length lists of numbers
    (element-wise); any other value is the first seed's.  Configurations keep their first-seen order.
    """
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in by), []).append(r)
    out = []
    for members in groups.values():
        merged: dict[str, Any] = {k: members[0][k] for k in by}
        for f in members[0]:
            if f in by:
                continue
            vals = [m.get(f) for m in members]
            merged[f + "_per_seed"] = vals
            first = vals[0]
            if isinstance(first, (bool, np.bool_)):
                merged[f] = all(bool(v) for v in vals)
            elif isinstance(first, (int, float, np.integer, np.floating)):
                merged[f] = spread(vals).mean
            elif (isinstance(first, (list, tuple)) and first and len({len(v) for v in vals}) == 1
                  and all(isinstance(x, (int, float, np.integer, np.floating)) for x in first)):
                merged[f] = [spread(col).mean for col in zip(*vals)]
            else:
                merged[f] = first
        out.append(merged)
    return out


def seed_matrix(rows: Iterable[Mapping[str, Any]], key: str, x_name: str, xs: Sequence[Any],
                **match: Any) -> np.ndarray:
    """Seeds × ``xs`` array of ``key_per_seed`` from :func:`mean_rows` rows (input of :func:`plot_band`).

    Column ``j`` comes from the row with ``row[x_name] == xs[j]`` and every ``match`` field equal;
    NaN where no row matches.
    """
    rows = list(rows)
    cols = []
    for x in xs:
        r = next((r for r in rows if r.get(x_name) == x and all(r.get(k) == v for k, v in match.items())), None)
        cols.append([np.nan if v is None else float(v) for v in r[key + "_per_seed"]] if r else [])
    width = max((len(c) for c in cols), default=0) or 1
    return np.array([[c[i] if i < len(c) else np.nan for c in cols] for i in range(width)], dtype=np.float64)


def fmt(x: Any, digits: int = 3) -> str:
    """Compact number formatting for tables (``-`` for None/NaN, ``inf``; a :class:`Spread` as mean (lo–hi))."""
    if x is None:
        return "-"
    if isinstance(x, Spread):
        return x.format(digits)
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return f"{int(x):,}"
    try:
        v = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(v):
        return "-"
    if math.isinf(v):
        return "inf"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        return f"{v:.{max(digits - 1, 1)}e}"
    if a >= 100:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}" if a < 1 else f"{v:.{digits}g}"


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], digits: int = 3) -> str:
    """A GitHub markdown table (numbers through :func:`fmt`)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(c if isinstance(c, str) else fmt(c, digits) for c in r) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------
ALGO_STYLE: dict[str, dict[str, Any]] = {
    "hash": {"color": "#444444", "marker": "s", "ls": "-"},
    "uniform": {"color": "#444444", "marker": "s", "ls": "-"},
    "consistent": {"color": "#8c564b", "marker": "D", "ls": "-"},
    "shuffle": {"color": "#7f7f7f", "marker": "x", "ls": ":"},
    "pkg": {"color": "#1f77b4", "marker": "o", "ls": "-"},
    "dchoices": {"color": "#d62728", "marker": "^", "ls": "-"},
    "wchoices": {"color": "#2ca02c", "marker": "v", "ls": "-"},
    "rr-head": {"color": "#9467bd", "marker": "<", "ls": "--"},
    "dkg": {"color": "#ff7f0e", "marker": "P", "ls": "-"},
    "llfd": {"color": "#bcbd22", "marker": ">", "ls": "-"},
    "mintable": {"color": "#9467bd", "marker": "s", "ls": "-"},
    "minmig": {"color": "#17becf", "marker": "d", "ls": "-"},
    "mixed": {"color": "#d62728", "marker": "o", "ls": "-"},
    "mixed-bf": {"color": "#ff7f0e", "marker": "x", "ls": "--"},
    "scan": {"color": "#1f77b4", "marker": "^", "ls": "-"},
    "redist": {"color": "#2ca02c", "marker": "v", "ls": "-"},
    "readj": {"color": "#e377c2", "marker": "o", "ls": "-"},
    "elb": {"color": "#d62728", "marker": "o", "ls": "-"},
    "clb": {"color": "#2ca02c", "marker": "^", "ls": "-"},
    "uhlb": {"color": "#8c564b", "marker": "s", "ls": "-"},
}


def style(name: str) -> dict[str, Any]:
    base = name.split("/")[0].split(" ")[0]
    s = dict(ALGO_STYLE.get(base, {}))
    s.setdefault("marker", "o")
    s["markersize"] = 4
    s["linewidth"] = 1.3
    if "ls" in s:
        s["linestyle"] = s.pop("ls")
    return s


def new_figure(rows: int = 1, cols: int = 1, width: float = 4.2, height: float = 3.2, **kw):
    """``(fig, axes)`` with the Agg backend; ``axes`` is always a 2-D array."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False, **kw)
    for ax in axes.flat:
        ax.grid(True, which="both", alpha=0.25, linewidth=0.6)
    return fig, axes


def save_figure(fig, ctx: Context, name: str, title: str | None = None) -> str:
    """Write ``OUT/figures/NAME`` (PNG, 110 dpi) and return its path relative to OUT."""
    import matplotlib.pyplot as plt

    if title:
        fig.suptitle(title, fontsize=11)
    h = fig.get_size_inches()[1]
    bottom = min(0.42 / h, 0.2) if fig.legends else 0.0  # room for the figure legend (~0.4 in)
    top = 1.0 - min(0.3 / h, 0.15) if title else 1.0
    fig.tight_layout(rect=(0, bottom, 1, top))
    path = ctx.figure_path(name)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"{FIG_DIR}/{name}"


def plot_band(ax, x: Sequence[float], per_seed: Sequence[Sequence[float]], label: str | None = None,
              band_alpha: float = 0.18, **line_style: Any):
    """Mean over seeds as a line, the min–max range over seeds as a shaded band of the same colour.

    ``per_seed`` holds one series per seed (rows), each aligned with ``x``; NaNs are ignored per point.
    Returns the line.
    """
    y = np.asarray(per_seed, dtype=np.float64)
    if y.ndim == 1:
        y = y[None, :]
    with warnings.catch_warnings():  # an all-NaN point is drawn as a gap, not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        mean, lo, hi = np.nanmean(y, axis=0), np.nanmin(y, axis=0), np.nanmax(y, axis=0)
    (line,) = ax.plot(x, mean, label=label, **line_style)
    if y.shape[0] > 1:
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=band_alpha, linewidth=0)
    return line


def legend_once(fig, axes, ncol: int | None = None) -> None:
    """One legend for the whole figure (labels of the first axes that has any)."""
    for ax in np.asarray(axes).flat:
        h, lab = ax.get_legend_handles_labels()
        if h:
            fig.legend(h, lab, loc="lower center", ncol=ncol or min(len(lab), 8), fontsize=8, frameon=False)
            return


def floor_log(values: Sequence[float], floor: float) -> list[float]:
    """Values for a log axis: below ``floor`` (including 0) drawn at ``floor``."""
    return [max(float(v), floor) if v is not None and not math.isnan(float(v)) else float("nan") for v in values]


# ---------------------------------------------------------------------------------------------
# The results pages
# ---------------------------------------------------------------------------------------------
#: bench target -> (file under ``OUT/results/``, title of that page).  docs/results.md, the headline
#: page, is written by hand and links to these.
RESULT_PAGES: dict[str, tuple[str, str]] = {
    "nasir": ("nasir.md", "Nasir et al. ICDE 2016: D-Choices / W-Choices"),
    "fang": ("fang.md", "Fang et al. HPDC 2017: Mixed routing"),
    "gedik": ("gedik.md", "Gedik VLDB J. 2014: partitioning functions for stateful parallelization"),
    "dkg": ("dkg.md", "Dalabasmaz & Can: Dynamic Key Grouping"),
    "guo-zhou": ("guo-zhou.md", "Guo & Zhou Euro-Par 2017: ELB / CLB"),
    "trace": ("traces.md", "Real traces: every grouping per interval"),
    "fish": ("fish.md", "FISH vs D-Choices / W-Choices"),
    "perf": ("performance.md", "Performance: routing, plan generation, store queries"),
}
RESULTS_DIR = "results"

PAGE_HEADER = """# {title}

Part of the [results](../results.md).  A section that starts with `Command: skewlab bench …` is
written by that command (`--out docs` writes this page, between its `bench:KEY` markers); the
other sections are written by hand and kept as they are.  Quality numbers (imbalance, migration, sizes) are
deterministic for a seed; times are not (the load average is in each section's first line).
"""


#: a column whose header names a time or a speed: not deterministic, left out of the compared tables
TIMING_COLUMN = re.compile(r"(^|\s)(s|ms|µs|ns)$|\bplan s\b|/s\b|speed-up|\bwall\b|seconds|\btime\b", re.I)


def markdown_tables(markdown: str) -> list[tuple[str, list[list[str]]]]:
    """Every markdown table of ``markdown`` outside ``<details>``: (caption = nearest non-empty line
    above it, rows of cells including the header, without the ``|---|`` rule)."""
    out: list[tuple[str, list[list[str]]]] = []
    lines = markdown.splitlines()
    in_details = False
    i = 0
    caption = ""
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("<details"):
            in_details = True
        if line.startswith("</details"):
            in_details = False
        if line.startswith("|") and i + 1 < len(lines) and re.match(r"^\|(\s*:?-+:?\s*\|)+$", lines[i + 1].strip()):
            rows = []
            j = i
            while j < len(lines) and lines[j].strip().startswith("|"):
                if j != i + 1:
                    rows.append([c.strip() for c in re.split(r"(?<!\\)\|", lines[j].strip())[1:-1]])
                j += 1
            if not in_details:
                out.append((caption, rows))
            i = j
            continue
        if line:
            caption = line
        i += 1
    return out


def tables_text(markdown: str, timing: bool = True) -> str:
    """A section's tables as text: each table's caption line, then its rows, cells joined by `` | ``;
    tables apart by a blank line.  ``timing=False`` removes the columns that hold a time or a speed
    (:data:`TIMING_COLUMN`) and the tables left with nothing but their row labels."""
    blocks = []
    for caption, rows in markdown_tables(markdown):
        keep = [k for k, h in enumerate(rows[0]) if timing or not TIMING_COLUMN.search(h)]
        if not timing and len(keep) <= 1:
            continue
        body = "\n".join(" | ".join(r[k] for k in keep if k < len(r)) for r in rows)
        blocks.append(f"{caption}\n{body}")
    return "\n\n".join(blocks) + "\n"


def seal(markdown: str) -> str:
    """SHA-256 (hex) of every table of a section's markdown (:func:`tables_text`, timings included)."""
    return hashlib.sha256(tables_text(markdown).encode("utf-8")).hexdigest()


def seal_line(markdown: str) -> str:
    """The last line of a generated section: the seal of its tables (checked by
    :func:`skewlab.bench.results_tables.check_seals`)."""
    return (f"<!-- tables sha256:{seal(markdown)} (seal of this section's tables, "
            "skewlab.bench.results_tables; checked by tests/bench/test_results_tables.py) -->")


def _section_block(sec: Section, info: Mapping[str, Any]) -> str:
    checks = ""
    if sec.checks:
        passed = sum(c.ok for c in sec.checks)
        rows = [[c.name, "pass" if c.ok else "**FAIL**", c.detail] for c in sec.checks]
        checks = (f"\n\n<details><summary>Invariant checks: {passed}/{len(sec.checks)} passed</summary>\n\n"
                  + md_table(["check", "result", "detail"], rows) + "\n\n</details>")
    # figures live in OUT/figures, the page in OUT/results/: links go one folder up
    body = re.sub(r"\]\(" + FIG_DIR + "/", "](../" + FIG_DIR + "/", sec.markdown.strip())
    return (f"<!-- bench:{sec.key}:start -->\n## {sec.title}\n\n"
            f"Command: `{sec.command}` (part of `skewlab bench all`).  "
            f"Wall time {sec.seconds:.0f} s.  Machine: {machine_line(info['machine'])}.{fewer_seeds_note(sec.command)}\n\n"
            f"{body}{checks}\n{seal_line(body)}\n<!-- bench:{sec.key}:end -->\n")


def fewer_seeds_note(command: str) -> str:
    """A sentence for the section header when a full-size run used fewer seeds than the default ('' otherwise)."""
    m = re.search(r"--seeds (\d+)", command)
    if "--quick" in command or not m or int(m.group(1)) >= DEFAULT_SEEDS:
        return ""
    n = int(m.group(1))
    return (f"  **{n} seed{'s' if n > 1 else ''}, not the default {DEFAULT_SEEDS}** (`--seeds {n}`, full sizes): "
            + ("there are no min–max ranges and every per-seed check saw one seed" if n == 1 else
               f"ranges and per-seed checks cover {n} seeds only")
            + "; `skewlab bench` without `--seeds` runs the full set.")


def section_re(key: str) -> re.Pattern[str]:
    """The block ``<!-- bench:KEY:start --> ... <!-- bench:KEY:end -->`` (with its newline) of a page."""
    return re.compile(r"<!-- bench:" + re.escape(key) + r":start -->.*?<!-- bench:" + re.escape(key) + r":end -->\n?", re.S)


def result_page(out: str | os.PathLike[str], key: str) -> Path:
    """``OUT/results/<page>.md`` of a bench target (:data:`RESULT_PAGES`; ``<key>.md`` for another key)."""
    name = RESULT_PAGES.get(key, (f"{key}.md", key))[0]
    return Path(out) / RESULTS_DIR / name


def write_results(out: str | os.PathLike[str], sections: Sequence[Section]) -> list[Path]:
    """Write/refresh each section's page ``OUT/results/<page>.md`` (:data:`RESULT_PAGES`).

    The section goes between ``<!-- bench:KEY:start -->`` / ``<!-- bench:KEY:end -->`` markers: an
    existing block is replaced in place, every other line of the page is kept verbatim (sections written
    by hand after it, in particular); a page without the block gets it after its header, a new page
    gets :data:`PAGE_HEADER` and the block.  Returns the pages written.
    """
    info = {"machine": machine_info()}
    written = []
    for sec in sections:
        path = result_page(out, sec.key)
        path.parent.mkdir(parents=True, exist_ok=True)
        block = _section_block(sec, info)
        title = RESULT_PAGES.get(sec.key, ("", sec.title))[1]
        text = path.read_text(encoding="utf-8") if path.exists() else PAGE_HEADER.format(title=title)
        pattern = section_re(sec.key)
        if pattern.search(text):
            text = pattern.sub(lambda _m: block, text, count=1)
        else:
            m = re.search(r"^## ", text, re.M)
            at = m.start() if m else len(text)
            head = text[:at].rstrip("\n") + "\n\n"
            text = head + block + ("\n" + text[at:] if m else "")
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


class Timer:
    """``with Timer() as t: ...; t.seconds``."""

    def __enter__(self) -> "Timer":
        self.t0 = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seconds = time.perf_counter() - self.t0


def write_json(path: str, obj: Any, indent: int = 1) -> None:
    """A bench's ``--json PATH`` output: ``obj`` as indented JSON (unknown types as ``str``) to ``path``,
    ``-`` for stdout; nothing when ``path`` is empty."""
    if not path:
        return
    import json

    text = json.dumps(obj, indent=indent, default=str)
    if path == "-":
        print(text)
    else:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")


def stderr_is_tty() -> bool:
    return bool(getattr(sys.stderr, "isatty", lambda: False)())
