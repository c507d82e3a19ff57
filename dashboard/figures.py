"""Plotly figures of the dashboard, and the ``dash.Patch`` objects that extend them tick by tick.

Every time figure is described once by a tuple of :class:`TraceSpec` (which block of a
:meth:`skewlab.dashboard.data.DashboardData.load` answer feeds which trace).  :func:`time_figure` draws a
reset; :func:`time_patch` turns a delta into a ``Patch`` that *extends* the same traces, adds the new
event lines and annotations, and leaves zoom / legend state alone (``uirevision``).  Data arrays are
always plain lists: numpy arrays would be sent as typed arrays, which a ``Patch`` cannot extend.

Roll-up first: the worker-load bars show every worker up to :data:`ALL_WORKERS_MAX` workers, and the
:data:`TOP_N` most loaded ones (with a min/median/max roll-up line) beyond that — or on request.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping, Sequence

from dash import Patch
from plotly.subplots import make_subplots

from skewlab.dashboard.data import DEFAULT_THETA, OPERATOR_EVENT_KINDS
from skewlab.dashboard.definitions import LABELS
from skewlab.storage.moves import cost_text
from skewlab.storage.run_state import REBALANCE_EVENT_KINDS

__all__ = [
    "ALL_WORKERS_MAX",
    "IMBALANCE_METRICS",
    "TIME_FIGURES",
    "TOP_N",
    "TraceSpec",
    "compare_figure",
    "empty_figure",
    "event_annotations",
    "event_label",
    "format_bytes",
    "hot_keys_figure",
    "migration_extras",
    "shadow_figure",
    "state_scale_top",
    "time_figure",
    "time_patch",
    "worker_detail_figure",
    "worker_heat_figure",
    "worker_heat_patch",
    "worker_load_figure",
    "worker_load_patch",
]

TOP_N = 16
ALL_WORKERS_MAX = 32
IMBALANCE_METRICS = ("imbalance", "theta_max_observed", "seeds_imbalance")

FONT = "Inter, system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
C = {
    "imbalance": "#2563eb",
    "theta_max_observed": "#7c3aed",
    "seeds_imbalance": "#0891b2",
    "theta_max": "#dc2626",
    "band_outer": "rgba(37, 99, 235, 0.12)",
    "band_inner": "rgba(37, 99, 235, 0.28)",
    "median": "#1e3a8a",
    "mean": "#111827",
    "bar": "#3b82f6",
    "over": "#dc2626",
    "live": "#f59e0b",
    "best": "#16a34a",
    "other": "#94a3b8",
    "event": "#6b7280",
    "rebalance": "#f59e0b",
    "amax": "#dc2626",
    "entries": "#0d9488",
    "state": "#6366f1",
    "keys": "#0ea5e9",
    "pause": "#f97316",
    "throughput": "#059669",
    "latency": "#d97706",
    "run_a": "#2563eb",
    "run_b": "#db2777",
}


@dataclass(frozen=True)
class TraceSpec:
    """One trace of a time figure: ``block`` of the load answer, its x and y columns, where it goes."""

    name: str
    block: str
    y: str
    x: str = "interval"
    row: int = 1
    kind: str = "line"  # line | dash | dot | bar | fill_upper | fill_lower | markers
    color: str = "#000000"
    hover: str = ""
    extra: str = ""  # a column of the block whose values add a line to the hover (see _HOVER_EXTRAS)


def _imbalance_specs() -> tuple[TraceSpec, ...]:
    return (
        TraceSpec(LABELS["imbalance"], "series", "imbalance", color=C["imbalance"], hover="imbalance"),
        TraceSpec(LABELS["theta_max_observed"], "series", "theta_max_observed", color=C["theta_max_observed"],
                  hover="theta_max_observed"),
        TraceSpec(LABELS["seeds_imbalance"], "series", "seeds_imbalance", color=C["seeds_imbalance"],
                  hover="seeds_imbalance"),
        TraceSpec(LABELS["theta_max"], "series", "theta_max", kind="dash", color=C["theta_max"], hover="theta_max"),
        TraceSpec("rebalance", "rebalance", "y", kind="markers", color=C["rebalance"], hover="rebalance"),
        TraceSpec("max", "bands", "max", row=2, kind="fill_upper", color=C["band_outer"], hover="load_bands"),
        TraceSpec("min – max", "bands", "min", row=2, kind="fill_lower", color=C["band_outer"], hover="load_bands"),
        TraceSpec("p75", "bands", "p75", row=2, kind="fill_upper", color=C["band_inner"], hover="load_bands"),
        TraceSpec("p25 – p75", "bands", "p25", row=2, kind="fill_lower", color=C["band_inner"], hover="load_bands"),
        TraceSpec("median", "bands", "median", row=2, color=C["median"], hover="load_bands"),
        TraceSpec("mean L̄", "bands", "mean", row=2, kind="dash", color=C["mean"], hover="worker_load"),
        TraceSpec(LABELS["bound"], "series", "bound", kind="dot", color=C["best"], hover="bound", extra="bound_note"),
    )


#: name → (trace specs, row titles, height)
TIME_FIGURES: dict[str, tuple[tuple[TraceSpec, ...], tuple[str, ...], int]] = {
    "imbalance": (_imbalance_specs(), ("imbalance", "worker load L_w"), 430),
    "routing": (
        (
            TraceSpec(LABELS["routing_table_size"], "routing", "entries", color=C["entries"], hover="routing_table_size"),
            TraceSpec(LABELS["amax"], "routing", "amax", kind="dash", color=C["amax"], hover="amax"),
        ),
        ("entries",),
        260,
    ),
    "migrations": (
        (
            TraceSpec(LABELS["state_moved"], "migrations", "state_moved", kind="bar", color=C["state"], hover="state_moved",
                      extra="bytes_moved"),
            TraceSpec(LABELS["keys_moved"], "migrations", "keys_moved", row=2, kind="bar", color=C["keys"],
                      hover="keys_moved"),
            TraceSpec(LABELS["pause_ms"], "migrations", "pause_ms", row=3, kind="bar", color=C["pause"], hover="pause_ms",
                      extra="pause_batches"),
        ),
        ("state", "keys", "pause ms"),
        300,
    ),
    "throughput": (
        (
            TraceSpec("throughput", "series", "throughput", color=C["throughput"], hover="throughput"),
            TraceSpec("batch latency", "series", "batch_latency_ms", row=2, color=C["latency"], hover="batch_latency_ms"),
        ),
        ("tuples/s", "latency ms"),
        300,
    ),
}


#: ``ticklabeloverflow="allow"``: plotly.js's default for outside tick labels ("hide past div") measures
#: every label's bounding box after drawing to hide those past the figure's edge — a forced page layout per
#: axis, ~10 % of the drawing time; ``automargin`` already keeps the labels inside the figure.
_AXIS = dict(gridcolor="#eef1f5", linecolor="#d1d5db", zerolinecolor="#e5e7eb", ticks="", automargin=True,
             ticklabeloverflow="allow")
#: A small template (plotly_white's look): the built-in one adds ~8 kB of JSON to every figure sent.
TEMPLATE: dict[str, Any] = {"layout": dict(
    paper_bgcolor="white", plot_bgcolor="white", xaxis=_AXIS, yaxis=_AXIS,
    colorway=["#2563eb", "#7c3aed", "#0891b2", "#dc2626", "#059669", "#d97706", "#db2777", "#64748b"],
)}

Figure = dict  # figures are plain dicts: built fast, serialised fast, extended by Patch


# ------------------------------------------------------------------------------------ helpers
def _base_layout(height: int, uirevision: Any, top: int = 36, left: int = 56, bottom: int = 40) -> dict[str, Any]:
    """Layout shared by every figure.

    The margins are what ``automargin`` (on for every axis, in :data:`TEMPLATE`) ends up with for the
    usual tick labels, axis titles and legends (measured in Chromium at 1600 px): plotly.js only grows
    a margin that is too small, and every growth costs a second full draw of the figure, so starting
    from the final size saves about a third of the drawing time of the initial page load (issue #5,
    "Speed").  Wider labels or a wrapped legend still push the margins as before.  The legend starts
    :data:`_MODEBAR_PX` below the top of the figure, under the band the chart's toolbar shows in.
    """
    return dict(
        template=TEMPLATE,
        height=height,
        margin=dict(l=left, r=20, t=top, b=bottom),
        font=dict(family=FONT, size=12, color="#1f2937"),
        legend=dict(orientation="h", yref="container", yanchor="top", y=1 - _MODEBAR_PX / height, x=0,
                    traceorder="normal", font=dict(size=11), bgcolor="rgba(0,0,0,0)"),
        hoverlabel=dict(font=dict(family=FONT, size=12)),
        uirevision=uirevision,
        bargap=0.15,
    )


#: Height of the band at the top of a figure that the chart's toolbar uses: the legend starts below it.
_MODEBAR_PX = 28


@lru_cache(maxsize=32)
def _grid_json(rows: int, cols: int, shared: str, heights: tuple[float, ...] | None, titles: tuple[str, ...],
               spacing: float) -> str:
    """Axis domains of a subplot grid, computed once by plotly's make_subplots (then reused as JSON)."""
    kw: dict[str, Any] = {"rows": rows, "cols": cols}
    if shared == "x":
        kw.update(shared_xaxes=True, vertical_spacing=spacing)
    elif shared == "y":
        kw.update(shared_yaxes=True, horizontal_spacing=spacing)
    if heights:
        kw["row_heights"] = list(heights)
    if titles:
        kw["subplot_titles"] = list(titles)
    layout = make_subplots(**kw).to_dict()["layout"]
    layout.pop("template", None)
    return json.dumps(layout)


def _grid(rows: int, cols: int = 1, *, shared: str = "x", heights: tuple[float, ...] | None = None,
          titles: tuple[str, ...] = (), spacing: float = 0.07) -> dict[str, Any]:
    return json.loads(_grid_json(rows, cols, shared, heights, titles, spacing))


def _label_margin(labels: Sequence[str]) -> int:
    """Left margin for category tick labels at 11 px (≈ 5.6 px a character, measured), at least 56."""
    return max(56, int(5.6 * max((len(t) for t in labels), default=0)) + 12)


def _axis_ref(i: int) -> str:
    return "" if i == 1 else str(i)


def empty_figure(message: str = "waiting for data…", height: int = 260) -> Figure:
    layout = _base_layout(height, "empty")
    layout.update(
        xaxis=dict(visible=False), yaxis=dict(visible=False),
        annotations=[dict(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                          font=dict(size=14, color="#6b7280"))],
    )
    return {"data": [], "layout": layout}


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.{digits}g}"
    return str(v)


def format_bytes(n: Any) -> str:
    """A byte count with an SI unit and 3 significant digits: ``512 B``, ``4.1 kB``, ``12.3 MB``, ``1 GB``
    (1 kB = 1000 B); ``–`` for None."""
    if n is None:
        return "–"
    v = float(n)
    for scale, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if abs(v) >= scale * 0.9995:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.0f} B"


def _held(batches: Any) -> str:
    """``1 micro-batch`` / ``3 micro-batches``."""
    return f"{batches} micro-batch" + ("" if batches == 1 else "es")


def migration_extras(bytes_moved: Any, pause_batches: Any, pause_ms: Any = None) -> list[str]:
    """What a migration adds when the engine reported it: the serialized state bytes moved and how long the
    moved keys' tuples were held (micro-batches, with the pause in ms); nothing for None."""
    out = []
    if bytes_moved is not None:
        out.append(f"{format_bytes(bytes_moved)} of serialized state moved")
    if pause_batches is not None:
        out.append(f"tuples held {_held(pause_batches)}" + (f" ({_fmt(pause_ms)} ms)" if pause_ms else ""))
    return out


def event_label(ev: Mapping[str, Any]) -> tuple[str, str]:
    """Short label and hover text of an operator event."""
    kind = ev.get("kind")
    d = ev.get("detail") or {}
    cmd = f" (command #{ev['command_id']})" if ev.get("command_id") is not None else ""
    moved = ""
    if d.get("state_moved") is not None:  # its figure is the move's (the migration table's row of its interval)
        moved = f"; moved {d.get('keys', 0)} keys, state {_fmt(d.get('state_moved'))} (migration #{ev.get('interval')})"
    if kind == "algorithm":
        label = f"→ {d.get('algorithm', '?')}"
        hover = f"interval {ev.get('interval')}: algorithm {ev.get('previous') or d.get('previous', '?')} → {d.get('algorithm')}"
        if d.get("reason"):  # the engine's own switch (no command): while / once its kernels are compiled
            hover += f" ({d['reason']})"
    elif kind == "params":
        changed = ev.get("changed") or {}
        label = ", ".join(f"{'θmax' if k == 'theta_max' else k}={_fmt(v)}" for k, v in list(changed.items())[:2]) or "params"
        hover = f"interval {ev.get('interval')}: parameters of {d.get('algorithm', '?')}: " + (
            ", ".join(f"{k}={v}" for k, v in changed.items()) or "unchanged")
    elif kind == "workers":
        label = f"workers {d.get('previous', '?')}→{d.get('workers', '?')}"
        hover = f"interval {ev.get('interval')}: {label}"
    elif kind == "restart":
        label = "restart"
        hover = (f"interval {ev.get('interval')}: the engine restarted and restored the run from its checkpoint"
                 + (f" (after batch {d['after_batch']})" if d.get("after_batch") is not None else ""))
    else:
        label = str(kind)
        hover = f"interval {ev.get('interval')}: {kind}"
    return label, hover + moved + cmd


def _event_decor(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Vertical dotted lines (every time figure) at the operator events."""
    return [dict(type="line", xref="x", yref="paper", x0=ev["interval"], x1=ev["interval"], y0=0, y1=1,
                 line=dict(color=C["event"], width=1.2, dash="dot"), layer="below")
            for ev in events if ev.get("kind") in OPERATOR_EVENT_KINDS and ev.get("interval") is not None]


#: The imbalance figure labels the latest this many operator events (the ones the Events card lists).
LABELLED_EVENTS = 12
#: Label rows below the top of the plot, and their spacing in px.
_LABEL_ROWS, _LABEL_ROW_PX = 5, 18
#: Narrowest plot area of the imbalance figure at page widths >= 760 px, and an upper estimate of
#: one character of a 10 px label: labels are placed by these (tests/dashboard/test_dashboard_layout.py checks
#: the result in Chromium).
_LABEL_PLOT_PX, _LABEL_CHAR_PX = 560, 6.2
#: Interval axes span at least this many intervals (early runs get integer ticks, not 0.5 steps).
MIN_SPAN = 10


def event_annotations(events: Sequence[Mapping[str, Any]], span: float) -> list[dict[str, Any]]:
    """Labels of the latest :data:`LABELLED_EVENTS` operator events on an axis of ``span`` intervals.

    Each label ends at its event's interval and goes in the first row where it clears the labels
    before it (its width estimated on the narrowest plot, see :data:`_LABEL_PLOT_PX`); with every
    row taken it goes where the row ends furthest left.
    """
    ops = [e for e in events if e.get("kind") in OPERATOR_EVENT_KINDS and e.get("interval") is not None]
    per_px = max(float(span or 0), MIN_SPAN) / _LABEL_PLOT_PX
    ends = [float("-inf")] * _LABEL_ROWS
    out = []
    for ev in sorted(ops[-LABELLED_EVENTS:], key=lambda e: e["interval"]):
        text, hover = event_label(ev)
        x = ev["interval"]
        left = x - (len(text) * _LABEL_CHAR_PX + 12) * per_px
        row = next((r for r in range(_LABEL_ROWS) if ends[r] <= left), min(range(_LABEL_ROWS), key=ends.__getitem__))
        ends[row] = x
        out.append(dict(x=x, y=1.0, yshift=-row * _LABEL_ROW_PX, xref="x", yref="paper", text=text, hovertext=hover,
                        showarrow=False, xanchor="right", yanchor="top", font=dict(size=10, color="#374151"),
                        bgcolor="rgba(255,255,255,0.85)", bordercolor="#d1d5db", borderwidth=1, borderpad=2,
                        name=f"event-{ev.get('kind')}"))
    return out


def _interval_axis(first: Any) -> dict[str, Any]:
    """An interval x axis that spans at least :data:`MIN_SPAN` intervals from ``first``."""
    return dict(autorangeoptions=dict(include=[first, first + MIN_SPAN])) if first is not None else {}


def _below_floor(detail: Mapping[str, Any]) -> bool:
    """Whether a skipped plan's persistence ρ was below the gate's least persistence (events stored
    before the verdict carried the floor have none: False)."""
    rho, floor = detail.get("gate_persistence"), detail.get("gate_min_persistence")
    return rho is not None and floor is not None and rho < floor


def _rebalance_points(data: Mapping[str, Any]) -> dict[str, list]:
    """The rebalance markers: at each rebalance event, its keys, state and cost, and what the interval's
    migrations reported of bytes moved and pause (:func:`migration_extras`)."""
    series = data.get("series") or {}
    at = dict(zip(series.get("interval", []), series.get("imbalance", [])))
    # an executed plan's cost: its interval's migration cost (the move's figure in the card and the table)
    cost = dict(zip(series.get("interval", []), series.get("migration_cost", [])))
    mig = data.get("migrations") or {}
    # the migrations of the interval that planned them (data.migration_series), a delta's possibly in two bars
    per: dict[Any, list] = {}
    for iv, b, p, ms in zip(mig.get("interval", []), mig.get("bytes_moved", []), mig.get("pause_batches", []),
                            mig.get("pause_ms", [])):
        per.setdefault(iv, []).append((b, p, ms))
    extras = {iv: migration_extras(None if all(b is None for b, _, _ in parts) else sum(b or 0 for b, _, _ in parts),
                                   max((p for _, p, _ in parts if p is not None), default=None),
                                   sum(ms or 0.0 for _, _, ms in parts))
              for iv, parts in per.items()}
    xs, ys, texts = [], [], []
    for ev in data.get("events") or []:
        if ev.get("kind") not in REBALANCE_EVENT_KINDS or ev.get("interval") is None:
            continue
        d = ev.get("detail") or {}
        xs.append(ev["interval"])
        ys.append(at.get(ev["interval"]) or 0.0)
        if ev["kind"] == "rebalance_skipped":  # the migration gate (skewlab.engine.control.gate) kept the routing
            texts.append(f"rebalance skipped: plan of {d.get('keys', 0)} keys, cost {_fmt(d.get('migration_cost'))}, "
                         f"predicted gain {_fmt(d.get('gate_gain'))} × persistence {_fmt(d.get('gate_persistence'))} "
                         f"× {d.get('gate_horizon', 1)} interval(s)"
                         + (f", gain forgone so far {_fmt(d['gate_forgone'])}" if d.get("gate_forgone") else "")
                         + (", the tables lose to the base hash" if (d.get("gate_excess") or 0) > 0 else "")
                         + (f", persistence below the least {_fmt(d['gate_min_persistence'])}: the plan's own gain "
                            "does not count" if _below_floor(d) else ""))
            continue
        texts.append(f"rebalance: {d.get('keys', 0)} keys, state {_fmt(d.get('state_moved'))}, "
                     f"migration #{ev['interval']} cost {cost_text(cost.get(ev['interval'], d.get('migration_cost')))}"
                     + ("" if d.get("feasible", True) else " (infeasible)")
                     + "".join(f"<br>{x}" for x in extras.get(ev["interval"], [])))
    return {"interval": xs, "y": ys, "text": texts}


#: Hover lines a column adds to a time trace (``TraceSpec.extra``), for the values that are not None.
_HOVER_EXTRAS = {
    "bound_note": lambda v: f"<br>{v}",
    "bytes_moved": lambda v: f"<br>{format_bytes(v)} of serialized state",
    "pause_batches": lambda v: f"<br>tuples held {_held(v)}",
}


def _hover_extras(data: Mapping[str, Any], spec: TraceSpec, n: int) -> list[str]:
    """The ``n`` hover additions of ``spec`` ("" where its column is None or missing)."""
    values = list((data.get(spec.block) or {}).get(spec.extra) or [])
    values += [None] * (n - len(values))
    return ["" if v is None else _HOVER_EXTRAS[spec.extra](v) for v in values[:n]]


def _column(data: Mapping[str, Any], spec: TraceSpec) -> tuple[list, list]:
    if spec.block == "rebalance":
        block = _rebalance_points(data)
    else:
        block = data.get(spec.block) or {}
    return list(block.get(spec.x, [])), list(block.get(spec.y, []))


# ------------------------------------------------------------------------------------ time figures
def _trace(spec: TraceSpec, x: list, y: list, data: Mapping[str, Any]) -> dict[str, Any]:
    ref = _axis_ref(spec.row)
    tr: dict[str, Any] = dict(x=x, y=y, name=spec.name, legendgroup=spec.hover or spec.name,
                              xaxis=f"x{ref}", yaxis=f"y{ref}", hovertemplate=f"%{{y:.4g}}<extra>{spec.name}</extra>")
    if spec.extra:
        tr.update(hovertext=_hover_extras(data, spec, len(x)),
                  hovertemplate=f"%{{y:.4g}}%{{hovertext}}<extra>{spec.name}</extra>")
    if spec.kind == "bar":
        tr.update(type="bar", marker=dict(color=spec.color), width=0.8)  # one interval wide, even when sparse
    elif spec.kind == "markers":
        tr.update(type="scatter", mode="markers", text=_rebalance_points(data)["text"],
                  hovertemplate="%{text}<extra>interval %{x}</extra>",
                  marker=dict(symbol="triangle-down", size=8, color=spec.color, line=dict(width=0.5, color="#92400e")))
    elif spec.kind == "fill_upper":
        tr.update(type="scatter", mode="lines", line=dict(width=0), showlegend=False)
    elif spec.kind == "fill_lower":
        tr.update(type="scatter", mode="lines", line=dict(width=0), fill="tonexty", fillcolor=spec.color)
    else:
        line = dict(color=spec.color, width=1.8)
        if spec.kind in ("dash", "dot"):
            line["dash"] = spec.kind
        tr.update(type="scatter", mode="lines", line=line)
    return tr


def time_figure(name: str, data: Mapping[str, Any], visible: Sequence[str] | None = None) -> Figure:
    """A reset of time figure ``name`` from a :meth:`DashboardData.load` answer."""
    specs, rows, height = TIME_FIGURES[name]
    traces = []
    for spec in specs:
        x, y = _column(data, spec)
        tr = _trace(spec, x, y, data)
        if name == "imbalance" and spec.y in IMBALANCE_METRICS and visible is not None:
            tr["visible"] = True if spec.y in visible else "legendonly"
        traces.append(tr)
    layout = _grid(len(rows), heights=(0.55, 0.45) if name == "imbalance" else None)
    layout.update(_base_layout(height, f"{name}-{data.get('run_id')}", top=80 if name == "imbalance" else 56))
    for i, title in enumerate(rows, start=1):
        ax = layout.setdefault(f"yaxis{_axis_ref(i)}", {})
        ax.update(title=dict(text=title, font=dict(size=11)), rangemode="tozero")
    xa = layout.setdefault(f"xaxis{_axis_ref(len(rows))}", {})
    xa.update(title=dict(text="interval", font=dict(size=11)))
    xs = (data.get("series") or {}).get("interval") or []
    for i in range(1, len(rows) + 1):
        layout.setdefault(f"xaxis{_axis_ref(i)}", {}).update(_interval_axis(xs[0] if xs else None))
    events = data.get("events") or []
    annotations = event_annotations(events, xs[-1] - xs[0] if xs else 0) if name == "imbalance" else []
    layout.update(shapes=_event_decor(events), annotations=annotations)
    if name == "migrations":  # a delta's migrations of an interval drawn before stack on its bar (migration_series)
        layout["barmode"] = "stack"
    return {"data": traces, "layout": layout}


def time_patch(name: str, delta: Mapping[str, Any]) -> Patch:
    """Extend time figure ``name`` with a delta (new points, event lines); with new operator events the
    imbalance figure's labels are those of ``delta["label_events"]`` (default: the delta's events) on
    an axis of ``delta["label_span"]`` intervals."""
    specs, _, _ = TIME_FIGURES[name]
    p = Patch()
    for i, spec in enumerate(specs):
        x, y = _column(delta, spec)
        if not x:
            continue
        p["data"][i]["x"].extend(x)
        p["data"][i]["y"].extend(y)
        if spec.kind == "markers":
            p["data"][i]["text"].extend(_rebalance_points(delta)["text"])
        if spec.extra:
            p["data"][i]["hovertext"].extend(_hover_extras(delta, spec, len(x)))
    shapes = _event_decor(delta.get("events") or [])
    if shapes:
        p["layout"]["shapes"].extend(shapes)
        if name == "imbalance":  # the labels are placed again, with the new ones
            p["layout"]["annotations"] = event_annotations(delta.get("label_events", delta.get("events") or []),
                                                           delta.get("label_span") or 0)
    return p


# ------------------------------------------------------------------------------------ workers
def _worker_view(workers: Sequence[Mapping[str, Any]], view: str) -> tuple[list[Mapping[str, Any]], bool]:
    show_all = view == "all" or (view == "auto" and len(workers) <= ALL_WORKERS_MAX)
    if show_all:
        return list(workers), True
    return sorted(workers, key=lambda w: -w["load"])[:TOP_N], False


def _worker_arrays(data: Mapping[str, Any], view: str) -> dict[str, Any]:
    workers = data.get("workers") or []
    loads = [w["load"] for w in workers]
    n = len(workers)
    mean = sum(loads) / n if n else 0.0
    theta = data.get("theta_now")
    theta_note = f"θmax={theta:g}" if theta is not None else f"θ={DEFAULT_THETA:g}, display default"
    theta = DEFAULT_THETA if theta is None else theta
    tol = (1.0 + theta) * mean
    shown, all_shown = _worker_view(workers, view)
    over = sum(1 for v in loads if v > tol)
    labels = [f"w{w['worker']}" for w in shown]
    colors = [C["over"] if w["load"] > tol else C["bar"] for w in shown]
    custom = [[w["worker"], w["tuples"], w["distinct_keys"], w["state_size"] or 0, (w["load"] / mean - 1) if mean else 0]
              for w in shown]
    srt = sorted(loads)
    # Roll-up in three short lines above the plot (they fit a half-width card), the last two the key of
    # the mean and tolerance lines: no label inside the plot covers a bar.
    rollup = (f"{n} workers · min {_fmt(srt[0])} · median {_fmt(srt[n // 2])} · max {_fmt(srt[-1])}<br>"
              f"<span style='color:{C['mean']}'>── mean L̄ = {_fmt(mean)}</span>   "
              f"<span style='color:{C['over']}'>- - tolerance (1+θ)·L̄ = {_fmt(tol)}</span><br>"
              f"{over} above tolerance ({theta_note})" if n else "no workers reported yet")
    if not all_shown:
        rollup = f"top {len(shown)} of " + rollup
    shapes = []
    if n:
        shapes = [
            dict(type="line", xref="paper", x0=0, x1=1, y0=mean, y1=mean, line=dict(color=C["mean"], width=1.5)),
            dict(type="line", xref="paper", x0=0, x1=1, y0=tol, y1=tol, line=dict(color=C["over"], width=1.5, dash="dash")),
        ]
    annotations = [
        dict(text=rollup, xref="paper", yref="paper", x=0, y=1.0, xanchor="left", yanchor="bottom", showarrow=False,
             align="left", font=dict(size=11, color="#374151"), name="rollup"),
    ]
    top = max(max(loads) if loads else 0.0, tol) * 1.12 or 1.0
    return dict(x=labels, y=[w["load"] for w in shown], colors=colors, custom=custom, shapes=shapes,
                annotations=annotations, range=[0, top], over=over)


_WORKER_HOVER = ("worker %{customdata[0]}<br>load L_w %{y:.4g} (%{customdata[4]:+.1%} vs mean)<br>"
                 "tuples %{customdata[1]}<br>distinct keys %{customdata[2]}<br>state %{customdata[3]:.4g}<extra></extra>")


def worker_load_figure(data: Mapping[str, Any], view: str = "auto") -> Figure:
    """Per-worker load of the latest interval: bars, the mean and the (1+θmax)·mean tolerance line."""
    if not data.get("workers"):
        return empty_figure("no worker metrics yet", 330)
    a = _worker_arrays(data, view)
    bar = dict(type="bar", x=a["x"], y=a["y"], marker=dict(color=a["colors"]), customdata=a["custom"],
               hovertemplate=_WORKER_HOVER, name="load")
    layout = _base_layout(350, f"workers-{data.get('run_id')}-{view}", top=64, bottom=34)
    layout.update(shapes=a["shapes"], annotations=a["annotations"], showlegend=False, clickmode="event",
                  yaxis=dict(title=dict(text="load L_w (latest interval)", font=dict(size=11)), range=a["range"]),
                  xaxis=dict(type="category", tickfont=dict(size=10 if len(a["x"]) <= 32 else 8)))
    return {"data": [bar], "layout": layout}


def worker_load_patch(data: Mapping[str, Any], view: str = "auto") -> Patch:
    """New bars, lines and roll-up for the latest interval, without touching the rest of the layout."""
    a = _worker_arrays(data, view)
    p = Patch()
    p["data"][0]["x"] = a["x"]
    p["data"][0]["y"] = a["y"]
    p["data"][0]["marker"]["color"] = a["colors"]
    p["data"][0]["customdata"] = a["custom"]
    p["layout"]["shapes"] = a["shapes"]
    p["layout"]["annotations"] = a["annotations"]
    p["layout"]["yaxis"]["range"] = a["range"]
    return p


def worker_detail_figure(h: Mapping[str, Any], theta: float | None) -> Figure:
    """Drill-down of one worker: its load against the mean and tolerance, its state and keys."""
    if not h.get("interval"):
        return empty_figure(f"no rows for worker {h.get('worker')}", 300)
    theta = DEFAULT_THETA if theta is None else theta
    x = h["interval"]

    def line(y: list, name: str, color: str, axis: int = 1, dash: str | None = None, yaxis: str | None = None) -> dict:
        ln = dict(color=color, width=1.6)
        if dash:
            ln["dash"] = dash
        return dict(type="scatter", mode="lines", x=x, y=y, name=name, line=ln, xaxis=f"x{_axis_ref(axis)}",
                    yaxis=yaxis or f"y{_axis_ref(axis)}")

    traces = [
        line(h["load"], f"w{h['worker']} load", C["bar"]),
        line(h["mean"], "mean L̄", C["mean"], dash="dash"),
        line([None if m is None else (1 + theta) * m for m in h["mean"]], "tolerance", C["over"], dash="dot"),
        line(h["state_size"], "state size", C["state"], axis=2),
        line(h["distinct_keys"], "distinct keys", C["keys"], axis=2, dash="dot", yaxis="y3"),
    ]
    layout = _grid(2, spacing=0.12)
    layout.update(_base_layout(320, f"detail-{h['worker']}"))
    layout["yaxis"].update(title=dict(text="load", font=dict(size=11)))
    layout["yaxis2"].update(title=dict(text="state", font=dict(size=11)))
    layout["yaxis3"] = dict(overlaying="y2", side="right", showgrid=False, anchor="x2",
                            title=dict(text="keys", font=dict(size=11)))
    layout["xaxis2"].update(title=dict(text="interval", font=dict(size=11)))
    for ax in ("xaxis", "xaxis2"):
        layout[ax].update(_interval_axis(x[0]))
    return {"data": traces, "layout": layout}


#: The relative maps of :func:`worker_heat_figure`: (heat block column, map title).  Both colour a value
#: relative to the interval's mean over the workers on one fixed scale: 1 (the mean) white, 0 blue, 2+ red.
_HEAT_MAPS = (("relative", "load L_w relative to the mean L̄"), ("time_relative", "task time relative to the mean"))
_HEAT_RANGE = 2.0
_HEAT_SCALE = ((0.0, (29, 78, 216)), (0.5, (248, 250, 252)), (1.0, (220, 38, 38)))
#: The third map, drawn when the engine reports it: each worker's serialized keyed state in bytes, on an
#: absolute scale from 0 (white) to the top of :func:`state_scale_top` (indigo).
_STATE_MAP = ("state_bytes", "keyed state (serialized bytes)")
_STATE_SCALE = ((0.0, (248, 250, 252)), (1.0, (67, 56, 202)))
_HEAT_HOVER = ("w%{customdata[0]} · interval %{x}<br>load L_w %{customdata[1]} (%{customdata[2]}× mean)"
               "<br>task time %{customdata[3]} (%{customdata[4]}× mean)")
_STATE_HOVER = "<br>state %{customdata[5]}"


def _heat_color(v: float, top: float = _HEAT_RANGE, scale: tuple = _HEAT_SCALE) -> str:
    """``v`` on ``scale`` over [0, ``top``] (values beyond clamped), as ``#rrggbb``.

    Colours are computed here: the vendored plotly.js bundle warns (one stack trace per bar) about
    numeric bar colours, which made a few thousand cells take seconds.
    """
    x = min(max(v / top, 0.0), 1.0) if top else 0.0
    (x0, c0), (x1, c1) = next(seg for seg in zip(scale, scale[1:]) if x <= seg[1][0])
    f = (x - x0) / (x1 - x0)
    return "#" + "".join(f"{round(a + f * (b - a)):02x}" for a, b in zip(c0, c1))


def state_scale_top(heat: Mapping[str, Any]) -> float | None:
    """Top of the state map's colour scale: the smallest 1, 2 or 5 × 10^k bytes (at least 1) not below the
    largest state in ``heat``; None when no worker reported its state bytes (no state map)."""
    values = [v for v in heat.get("state_bytes") or [] if v is not None]
    if not values:
        return None
    largest = max(max(values), 1)
    decade = 10.0 ** math.floor(math.log10(largest))
    return next(f * decade for f in (1, 2, 5, 10) if f * decade >= largest)


def _heat_columns(heat: Mapping[str, Any], column: str, state_top: float | None = None) -> dict[str, list]:
    """Cells of one map as bar columns: one bar of height 1 per (worker, interval), coloured by value
    (the state map's on the absolute scale up to ``state_top``, the others relative to the mean)."""
    keep = [i for i, v in enumerate(heat.get(column) or []) if v is not None]

    def at(key: str) -> list:
        col = heat.get(key) or []
        return [col[i] if i < len(col) else None for i in keep]

    ratio = lambda v: "–" if v is None else f"{v:.2f}"  # noqa: E731
    color = ((lambda v: _heat_color(v, state_top, _STATE_SCALE)) if column == _STATE_MAP[0] else _heat_color)
    return {
        "x": at("interval"), "base": [w - 0.5 for w in at("worker")], "y": [1] * len(keep),
        "color": [color(v) for v in at(column)],
        "customdata": [[w, _fmt(ld, 4), ratio(rl), "–" if t is None else f"{t * 1000:.0f} ms", ratio(tr),
                        format_bytes(b)]
                       for w, ld, rl, t, tr, b in zip(at("worker"), at("load"), at("relative"), at("seconds"),
                                                      at("time_relative"), at("state_bytes"))],
    }


def _colorbar_trace(heat: Mapping[str, Any], scale: tuple, top: float, ticks: tuple[list, list], title: str,
                    y: float, length: float) -> dict[str, Any]:
    """An invisible trace that only carries a colour bar of ``scale`` over [0, ``top``]."""
    colors = [[x, "#" + "".join(f"{c:02x}" for c in rgb)] for x, rgb in scale]
    return dict(type="scatter", mode="markers", x=[heat["interval"][0]] * 2, y=[heat["worker"][0]] * 2,
                hoverinfo="skip", showlegend=False, opacity=0, name="scale",
                marker=dict(color=[0.0, top], cmin=0.0, cmax=top, colorscale=colors, size=1, showscale=True,
                            colorbar=dict(title=dict(text=title, font=dict(size=10)), thickness=10, len=length,
                                          y=y, yanchor="top", tickfont=dict(size=9), tickvals=ticks[0],
                                          ticktext=ticks[1])))


def worker_heat_figure(data: Mapping[str, Any]) -> Figure:
    """Per-worker history: worker × interval heat maps of the load and of the task time, each relative to
    the interval's mean over the workers, and — when the engine reports it — of each worker's serialized
    keyed state in bytes (absolute); the hover gives the values themselves.

    Each cell is a bar one interval wide and one worker high (the vendored plotly.js bundle has no
    heatmap trace), so a tick appends cells with a ``Patch`` like the other time figures; the last,
    invisible traces carry the colour bars.
    """
    heat = data.get("heat") or {}
    if not heat.get("interval"):
        return empty_figure("no worker metrics yet", 360)
    has_time = any(v is not None for v in heat.get("time_relative") or [])
    top = state_scale_top(heat)
    maps = _HEAT_MAPS + ((_STATE_MAP,) if top is not None else ())
    hover = _HEAT_HOVER + (_STATE_HOVER if top is not None else "") + "<extra></extra>"
    traces = []
    for row, (column, _title) in enumerate(maps, start=1):
        cols = _heat_columns(heat, column, top)
        ref = _axis_ref(row)
        traces.append(dict(type="bar", x=cols["x"], y=cols["y"], base=cols["base"], width=1.0,
                           marker=dict(color=cols["color"], line=dict(width=0)), customdata=cols["customdata"],
                           hovertemplate=hover, showlegend=False, name=_title, xaxis=f"x{ref}", yaxis=f"y{ref}"))
    titles = (_HEAT_MAPS[0][1], _HEAT_MAPS[1][1] if has_time else "task time: not reported by this engine")
    if top is not None:
        titles += (_STATE_MAP[1],)
    layout = _grid(len(maps), spacing=0.1 if top is None else 0.08, titles=titles)
    relative_ticks = ([0, 0.5, 1, 1.5, 2], ["0", "0.5", "1", "1.5", "≥ 2"])
    if top is None:
        traces.append(_colorbar_trace(heat, _HEAT_SCALE, _HEAT_RANGE, relative_ticks, "× mean", 0.95, 0.9))
    else:
        # one bar beside the two relative maps, one beside the state map (which spans [0, y3] of the figure)
        y3 = layout["yaxis3"]["domain"][1]
        traces.append(_colorbar_trace(heat, _HEAT_SCALE, _HEAT_RANGE, relative_ticks, "× mean", 1.0,
                                      1.0 - layout["yaxis2"]["domain"][0]))
        traces.append(_colorbar_trace(heat, _STATE_SCALE, top, ([0, top / 2, top], [
            format_bytes(0), format_bytes(top / 2), "≥ " + format_bytes(top)]), "bytes", y3, y3))
    height = 360 if top is None else 520
    layout.update(_base_layout(height, f"heat-{data.get('run_id')}", top=30), barmode="overlay", showlegend=False)
    for row in range(1, len(maps) + 1):
        layout[f"yaxis{_axis_ref(row)}"].update(title=dict(text="worker", font=dict(size=11)), autorange="reversed",
                                                 zeroline=False)
    layout[f"xaxis{_axis_ref(len(maps))}"].update(title=dict(text="interval", font=dict(size=11)))
    for ann in layout.get("annotations", []):
        ann["font"] = dict(size=11, color="#374151")
    return {"data": traces, "layout": layout}


def worker_heat_patch(delta: Mapping[str, Any], state_top: float | None = None) -> Patch:
    """Append a delta's worker × interval cells to the heat maps; to the state map too when the figure has
    one, i.e. when ``state_top`` (its colour scale's top, :func:`state_scale_top` of the drawn window) is set."""
    p = Patch()
    heat = delta.get("heat") or {}
    maps = _HEAT_MAPS + ((_STATE_MAP,) if state_top is not None else ())
    for i, (column, _title) in enumerate(maps):
        cols = _heat_columns(heat, column, state_top)
        if not cols["x"]:
            continue
        for key in ("x", "y", "base", "customdata"):
            p["data"][i][key].extend(cols[key])
        p["data"][i]["marker"]["color"].extend(cols["color"])
    return p


# ------------------------------------------------------------------------------------ what-if, hot keys
def shadow_figure(data: Mapping[str, Any]) -> Figure:
    """Live algorithm vs every shadow grouping on the same intervals: imbalance, replication, migration."""
    rows = [r for r in (data.get("shadow") or []) if r.get("imbalance") is not None]
    if not rows:
        return empty_figure("no shadow results (engine started with --shadow '')", 330)
    rows.sort(key=lambda r: (r["imbalance"], r["replication"] or 0.0))
    names = [f"{r['algorithm']} (live)" if r["live"] else r["algorithm"] for r in rows]
    best = next((r for r in rows if not r["live"]), None)
    colors = [C["live"] if r["live"] else (C["best"] if r is best else C["other"]) for r in rows]
    traces = []
    for col, key in enumerate(("imbalance", "replication", "migration_cost"), start=1):
        vals = [r[key] if r[key] is not None else 0.0 for r in rows]
        ref = _axis_ref(col)
        traces.append(dict(type="bar", x=vals, y=names, orientation="h", marker=dict(color=colors), showlegend=False,
                           text=[_fmt(v, 2) for v in vals], textposition="auto", textfont=dict(size=10),
                           xaxis=f"x{ref}", yaxis=f"y{ref}",
                           hovertemplate=f"%{{y}}<br>{key}: %{{x:.4g}}<extra></extra>"))
    height = max(220, 60 + 24 * len(rows))
    layout = _grid(1, 3, shared="y", titles=("imbalance", "replication", "migration cost"), spacing=0.04)
    layout.update(_base_layout(height, f"shadow-{data.get('run_id')}", top=40, left=_label_margin(names), bottom=34))
    for col in (1, 2, 3):
        ref = _axis_ref(col)
        layout[f"yaxis{ref}"].update(autorange="reversed", tickfont=dict(size=11))
        layout[f"xaxis{ref}"].update(rangemode="tozero", tickfont=dict(size=9))
    for ann in layout.get("annotations", []):
        ann["font"] = dict(size=11, color="#374151")
    return {"data": traces, "layout": layout}


def shadow_verdict(data: Mapping[str, Any]) -> str:
    """One line: which grouping would be better now."""
    rows = [r for r in (data.get("shadow") or []) if r.get("imbalance") is not None]
    live = next((r for r in rows if r["live"]), None)
    others = sorted((r for r in rows if not r["live"]), key=lambda r: r["imbalance"])
    if not others:
        return "No shadow groupings recorded for this run."
    b = others[0]
    text = (f"Lowest imbalance now: {b['algorithm']} ({b['imbalance']:.3f}, replication {_fmt(b['replication'])}, "
            f"migration {_fmt(b['migration_cost'])})")
    if live is not None:
        text += f" vs live {live['algorithm']} {live['imbalance']:.3f}"
    n = max(r["intervals"] for r in rows)
    return text + f" — mean of the last {n} interval(s)."


def hot_keys_figure(data: Mapping[str, Any]) -> Figure:
    """Top-k keys of the latest interval: share of the load and the workers each is routed to."""
    hot = data.get("hot_keys") or []
    if not hot:
        return empty_figure("no hot keys yet", 330)
    keys = [h["key"] if len(h["key"]) <= 24 else h["key"][:23] + "…" for h in hot]
    shares = [100.0 * h["share"] for h in hot]

    def where(ws: list[int]) -> str:
        if len(ws) > 6:
            return f"→ {len(ws)} workers"
        return "→ " + ", ".join(f"w{w}" for w in ws) if ws else ""

    bar = dict(
        type="bar", x=shares, y=keys, orientation="h", marker=dict(color=C["bar"]),
        text=[where(h["workers"]) for h in hot], textposition="outside", textfont=dict(size=10),
        customdata=[[h["count"], ", ".join(f"w{w}" for w in h["workers"])] for h in hot],
        hovertemplate="%{y}: %{x:.2f}% of the load (%{customdata[0]} tuples)<br>workers: %{customdata[1]}<extra></extra>",
    )
    layout = _base_layout(max(240, 60 + 24 * len(hot)), f"hot-{data.get('run_id')}", top=16, left=_label_margin(keys))
    top = max(shares) if shares else 1.0
    layout.update(showlegend=False,
                  xaxis=dict(title=dict(text="share of the interval's tuples (%)", font=dict(size=11)),
                             range=[0, top * 1.35]),
                  yaxis=dict(autorange="reversed", tickfont=dict(size=11)))
    return {"data": [bar], "layout": layout}


# ------------------------------------------------------------------------------------ history
def compare_figure(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> Figure:
    """Two runs side by side: imbalance, throughput and latency per interval (interval from run start)."""
    if not a and not b:
        return empty_figure("pick two runs to compare", 420)
    traces = []
    for run, color in ((a, C["run_a"]), (b, C["run_b"])):
        if not run:
            continue
        s = run["series"]
        x0 = s["interval"][0] if s["interval"] else 0
        x = [i - x0 for i in s["interval"]]
        routing = run.get("throughput_kind") == "routing"
        label = f"run {run['run_id']}" + (" (simulate)" if routing else "")
        for row, key in enumerate(("imbalance", "throughput", "batch_latency_ms"), start=1):
            ref = _axis_ref(row)
            what = ("routing tuples/s" if routing else "engine tuples/s") if key == "throughput" else key
            traces.append(dict(type="scatter", mode="lines", x=x, y=list(s[key]), name=label, legendgroup=label,
                               showlegend=row == 1, line=dict(color=color, width=1.6), xaxis=f"x{ref}",
                               yaxis=f"y{ref}", hovertemplate=f"{label} %{{y:.4g}}<extra>{what}</extra>"))
    layout = _grid(3, spacing=0.06)
    layout.update(_base_layout(460, "compare"))
    for row, title in enumerate(("imbalance", "tuples/s", "latency ms"), start=1):
        layout[f"yaxis{_axis_ref(row)}"].update(title=dict(text=title, font=dict(size=11)), rangemode="tozero")
    layout["xaxis3"].update(title=dict(text="interval since the start of the shown window", font=dict(size=11)))
    for ax in ("xaxis", "xaxis2", "xaxis3"):
        layout[ax].update(_interval_axis(0))
    return {"data": traces, "layout": layout}
