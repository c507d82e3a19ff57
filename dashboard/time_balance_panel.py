"""Time balance: whether an even load became a shorter batch (issue 36, item 4).

Per interval, from what the engine records (no new measurement):

* each worker's task time ``processing_seconds`` (``worker_metrics``: Spark's ``executorRunTime`` of
  the stateful stage's task of that worker, :mod:`skewlab.engine.runtimes.spark.task_metrics`);
* the batch's wall time ``batch_latency_ms`` (``interval_metrics``: from the driver's collect of the
  batch to the end of its step, so the source scan, shuffle, the workers' stage, a split-key run's
  merge stage and the driver's own step are all in it).

Shown: the busiest worker's task time against the mean task time (``busiest / mean``: 1.0 is
balanced *time*, whatever the tuple counts say), and the batch time outside the workers,
``batch − busiest task`` (merge, shuffle, driver; never below 0).  Deviation: the busiest task is
the workers' share of the batch only when every worker has a core to itself; on fewer cores than
workers the tasks queue and part of the queueing is counted as "outside".

Everything of the panel is here: the figure under the per-worker history (:func:`graph`,
:func:`register`: its own callback on the live view's ``tick`` and ``run-select``, over the last
:data:`WINDOW` intervals) and the two KPI cards (:func:`kpi_entries`, drawn by
:func:`skewlab.dashboard.layout.kpi_cards` from the latest interval's workers it already has).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from dash import Input, Output, State, dcc, html, no_update

from skewlab.dashboard import cards
from skewlab.dashboard.figures import _base_layout, _grid, empty_figure

__all__ = ["WINDOW", "balance", "graph", "kpi_entries", "register", "time_balance_figure", "time_series"]

#: intervals on the panel's time axis (the latest ones)
WINDOW = 120
_BUSIEST, _MEAN, _OUTSIDE = "#dc2626", "#2563eb", "#9ca3af"


def balance(task_seconds: Sequence[Any], batch_ms: Any) -> dict[str, float | None]:
    """``busiest``, ``mean`` (s) of the reported task times, ``ratio`` busiest / mean, and ``outside``
    (s) = batch wall time − busiest task, ≥ 0 (None where a figure is missing)."""
    secs = [float(t) for t in task_seconds if t is not None]
    busiest = max(secs) if secs else None
    mean = sum(secs) / len(secs) if secs else None
    ratio = busiest / mean if busiest is not None and mean else None
    outside = None
    if batch_ms is not None and busiest is not None:
        outside = max(float(batch_ms) / 1000.0 - busiest, 0.0)
    return {"busiest": busiest, "mean": mean, "ratio": ratio, "outside": outside}


def time_series(interval_rows: Sequence[Mapping[str, Any]], worker_rows: Sequence[Mapping[str, Any]]) -> dict[str, list]:
    """:func:`balance` of every interval row, with the intervals' worker rows."""
    by_iv: dict[int, list[Any]] = {}
    for w in worker_rows:
        by_iv.setdefault(int(w["interval"]), []).append(w.get("processing_seconds"))
    out: dict[str, list] = {"interval": [], "busiest": [], "mean": [], "ratio": [], "outside": [], "batch": []}
    for r in interval_rows:
        iv = int(r["interval"])
        b = balance(by_iv.get(iv, []), r.get("batch_latency_ms"))
        out["interval"].append(iv)
        out["batch"].append(None if r.get("batch_latency_ms") is None else float(r["batch_latency_ms"]) / 1000.0)
        for k in ("busiest", "mean", "ratio", "outside"):
            out[k].append(b[k])
    return out


def kpi_entries(workers: Sequence[Mapping[str, Any]], batch_ms: Any) -> list[tuple[str, str, str, str]]:
    """The two KPI cards of the latest interval, as :func:`skewlab.dashboard.layout.kpi_cards` lists cards:
    (label, metric, value, class)."""
    b = balance([w.get("processing_seconds") for w in workers], batch_ms)
    if b["ratio"] is None:
        ratio_label, ratio = "busiest task / mean task", "—"
    else:
        ratio_label, ratio = f"busiest / mean task ({b['busiest']:.2f} / {b['mean']:.2f} s)", f"{b['ratio']:.2f}×"
    if b["outside"] is None:
        outside_label, outside = "batch time outside the workers", "—"
    else:
        outside_label, outside = f"outside the workers (of a {float(batch_ms) / 1000.0:.2f} s batch)", f"{b['outside']:.2f} s"
    return [(ratio_label, "task_balance", ratio, ""), (outside_label, "outside_workers", outside, "")]


def graph() -> Any:
    """The figure, for the per-worker history card."""
    caption = html.Div("time balance: the busiest worker's task against the mean task, and the batch time "
                       "outside the workers (merge, shuffle, driver)", className="muted",
                       style={"textAlign": "center", "fontSize": "12px", "marginTop": "6px"})
    return html.Div([dcc.Store(id="time-balance-drawn"), caption,
                     cards.graph("fig-time-balance", "skewlab-time-balance", 300)], id="time-balance")


def time_balance_figure(s: Mapping[str, list], run_id: Any) -> dict[str, Any]:
    """Row 1: busiest / mean task time; row 2: the batch as the busiest task plus the time outside the
    workers (stacked bars), with the mean task time."""
    if not any(v is not None for v in s["busiest"]):
        return empty_figure("no task times recorded (Spark task metrics) for this run", height=300)
    x = s["interval"]
    traces = [
        dict(type="scatter", mode="lines", x=x, y=s["ratio"], name="busiest / mean task time", xaxis="x", yaxis="y",
             line=dict(color=_BUSIEST, width=1.8), hovertemplate="%{y:.2f}×<extra>busiest / mean task</extra>"),
        dict(type="bar", x=x, y=s["busiest"], name="busiest worker's task (s)", xaxis="x2", yaxis="y2", width=0.8,
             marker=dict(color=_BUSIEST, opacity=0.75), hovertemplate="%{y:.3f} s<extra>busiest task</extra>"),
        dict(type="bar", x=x, y=s["outside"], name="outside the workers (s)", xaxis="x2", yaxis="y2", width=0.8,
             marker=dict(color=_OUTSIDE), customdata=s["batch"],
             hovertemplate="%{y:.3f} s of a %{customdata:.3f} s batch<extra>merge, shuffle, driver</extra>"),
        dict(type="scatter", mode="lines", x=x, y=s["mean"], name="mean task (s)", xaxis="x2", yaxis="y2",
             line=dict(color=_MEAN, width=1.5, dash="dash"), hovertemplate="%{y:.3f} s<extra>mean task</extra>"),
    ]
    layout = _grid(2, heights=(0.4, 0.6))
    layout.update(_base_layout(300, f"time-balance-{run_id}", top=56))
    layout.update(barmode="stack")
    layout["yaxis"].update(title=dict(text="busiest / mean", font=dict(size=11)), rangemode="tozero")
    layout["yaxis2"].update(title=dict(text="seconds", font=dict(size=11)), rangemode="tozero")
    layout["xaxis2"].update(title=dict(text="interval", font=dict(size=11)))
    return {"data": traces, "layout": layout}


def register(app: Any, D: Any) -> None:
    """The figure's callback: redrawn when a new interval arrives (or the run changes)."""

    @app.callback(Output("fig-time-balance", "figure"), Output("time-balance-drawn", "data"),
                  Input("tick", "n_intervals"), Input("run-select", "value"), State("time-balance-drawn", "data"))
    def refresh(_n: Any, run_id: Any, drawn: Any):
        if run_id is None:
            return no_update, no_update
        run_id = int(run_id)
        rows = D.store.interval_metrics(run_id, limit=WINDOW, latest=True)
        signature = [run_id, int(rows[-1]["interval"]) if rows else None]
        if drawn == signature:
            return no_update, no_update
        since = int(rows[0]["interval"]) - 1 if rows else None
        upper = signature[1]
        workers = [w for w in D.store.worker_metrics(run_id, since_interval=since)
                   if upper is not None and int(w["interval"]) <= upper]
        return time_balance_figure(time_series(rows, workers), run_id), signature
