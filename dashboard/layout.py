"""Page layout and the small HTML views the callbacks fill (KPI cards, commands, events, forms).

Live tab: KPI strip (roll-up), imbalance over time with worker-load bands, per-worker load (all
workers up to 32, the most loaded 16 beyond, click a bar to drill down), per-worker history (worker ×
interval heat maps of relative load and task time, and of state bytes when reported), shadow what-if, hot keys,
throughput / latency, routing table vs Amax, migrations with their table; the operator sidebar
(algorithm form, workers, pause / resume, commands with their status, event log).  History tab:
runs with export links, two runs compared side by side.

Every metric title carries its definition in a ``title`` attribute (the browser shows it on hover).
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any, Mapping, Sequence

from dash import dcc, html

from skewlab.dashboard import dead_letters_panel, time_balance_panel
from skewlab.dashboard.cards import GRAPH_CONFIG
from skewlab.dashboard.cards import card as _card
from skewlab.dashboard.cards import graph as _graph
from skewlab.dashboard.controls import command_state, workers_range
from skewlab.dashboard.data import DEFAULT_THETA, operator_label, status_text
from skewlab.dashboard.definitions import LABELS, definition
from skewlab.dashboard.figures import IMBALANCE_METRICS, format_bytes
from skewlab.storage.moves import cost_text
from skewlab.storage.run_state import REBALANCE_EVENT_KINDS

__all__ = [
    "GRAPH_CONFIG", "build_layout", "commands_view", "event_log", "kpi_cards", "migration_table",
    "RUN_CONTROLS", "param_form", "runs_table",
]

#: The operator controls that act on the selected run (disabled when it is not live; the apply
#: button and the parameter fields follow the same rule through the form).
RUN_CONTROLS = ("algo-select", "workers-minus", "workers-input", "workers-plus", "workers-set", "pause-btn",
                "resume-btn")

# ------------------------------------------------------------------------------------ page
def build_layout(*, read_only: bool, token_required: bool, refresh_ms: int, banner: str | None,
                 export_base: str, initial: Mapping[str, Any] | None = None) -> html.Div:
    """The whole page.  ``initial`` holds the first render of every live output (see
    :func:`skewlab.dashboard.app.initial_outputs`) so the page shows data without waiting for a callback."""
    init = dict(initial or {})
    header = html.Header([
        html.Div([html.Span("skewlab", className="brand"), html.Span("live load balancing", className="tagline")],
                 className="brand-box"),
        html.Div([
            html.Label("run", htmlFor="run-select", className="hdr-label"),
            dcc.Dropdown(id="run-select", clearable=False, placeholder="no runs yet", className="run-select",
                         options=init.get("run-options", []), value=init.get("run-id")),
            dcc.Checklist(id="follow", options=[{"label": " follow newest", "value": "follow"}], value=["follow"],
                          className="follow", inputClassName="follow-input"),
            html.Span(init.get("run-status", ""), id="run-status", className=init.get("run-status-class", "status-badge")),
            html.Span(init.get("run-operator", ""), id="run-operator", className="run-operator",
                      title="the run's keyed operator and the field of the records it reads (--value-field)"),
            html.Span(init.get("export-links", []), id="export-links", className="export-links"),
        ], className="hdr-run"),
    ], className="header")
    notices = [html.Div(banner, id="mode-banner", className="banner readonly")] if banner else []

    live = html.Div([
        html.Div(init.get("kpis", []), id="kpis", className="kpis"),
        html.Div([
            html.Div([
                _card("Imbalance over time", [_graph("fig-imbalance", "skewlab-imbalance", 430, init)], metric="imbalance",
                      extra=dcc.Checklist(
                          id="imb-metrics", value=["imbalance", "theta_max_observed"], inline=True,
                          options=[{"label": html.Span(LABELS[m], title=definition(m)), "value": m}
                                   for m in IMBALANCE_METRICS], className="metric-pick")),
                html.Div([
                    _card("Per-worker load now", [
                        _graph("fig-workers", "skewlab-worker-load", 330, init),
                        html.Div(id="worker-detail", className="drill"),
                    ], metric="worker_load", extra=dcc.RadioItems(
                        id="worker-view", value="auto", inline=True, className="view-pick",
                        options=[{"label": "auto", "value": "auto"}, {"label": "top 16", "value": "top"},
                                 {"label": "all", "value": "all"}])),
                    _card("Shadow what-if", [html.Div(init.get("shadow-verdict", ""), id="shadow-verdict", className="verdict"),
                                             _graph("fig-shadow", "skewlab-shadow", 330, init)], metric="shadow"),
                ], className="row2"),
                _card("Per-worker history", [_graph("fig-heat", "skewlab-worker-history", 360, init),
                                             time_balance_panel.graph()], metric="worker_load"),
                html.Div([
                    _card("Hot keys", [_graph("fig-hotkeys", "skewlab-hot-keys", 300, init)], metric="hot_key_share"),
                    _card("Throughput & batch latency", [_graph("fig-throughput", "skewlab-throughput", 300, init)],
                          metric="throughput"),
                ], className="row2"),
                html.Div([
                    _card("Routing table vs Amax", [_graph("fig-routing", "skewlab-routing", 260, init)],
                          metric="routing_table_size"),
                    _card("Migrations", [_graph("fig-migrations", "skewlab-migrations", 300, init)], metric="state_moved"),
                ], className="row2"),
                _card("Recent migration events", [html.Div(init.get("migration-table", migration_table([])),
                                                           id="migration-table", className="table-box")],
                      metric="migration_cost"),
                dead_letters_panel.card(),
            ], className="main-col"),
            html.Aside(_sidebar(read_only, token_required, init), className="side-col"),
        ], className="live-grid"),
    ])

    history = html.Div([
        _card("Runs", [
            html.P("Every run in the database, newest first. Export any run's metrics (all tables) as JSON or CSV.",
                   className="muted"),
            html.Div(init.get("runs-table"), id="runs-table", className="table-box"),
        ]),
        _card("Compare two runs", [
            html.Div([
                html.Div([html.Label("run A"), dcc.Dropdown(id="compare-a", placeholder="pick a run",
                                                                   options=init.get("run-options", []))], className="cmp-pick"),
                html.Div([html.Label("run B"), dcc.Dropdown(id="compare-b", placeholder="pick a run",
                                                                   options=init.get("run-options", []))], className="cmp-pick"),
            ], className="cmp-row"),
            html.Div(id="compare-summary"),
            _graph("fig-compare", "skewlab-compare", 460),
        ], metric="imbalance"),
    ])

    return html.Div([
        dcc.Store(id="cursor", data=init.get("cursor")),
        dcc.Store(id="controls-state", data=init.get("controls-state")),
        dcc.Store(id="cmd-signal"),
        dcc.Interval(id="tick", interval=init.get("tick", refresh_ms)),
        dcc.Interval(id="slow-tick", interval=5_000),
        html.Div(export_base, id="export-base", hidden=True),
        header,
        *notices,
        dcc.Tabs(id="tabs", value="live", className="tabs", children=[
            dcc.Tab(label="Live", value="live", children=live, className="tab", selected_className="tab-on"),
            dcc.Tab(label="Runs & comparison", value="runs", children=history, className="tab",
                    selected_className="tab-on"),
        ]),
        html.Footer(["skewlab dashboard · reads the metrics store, writes only operator commands · ",
                     "hover (i) for a metric's definition · charts download as PNG from their toolbar"],
                    className="footer"),
    ], className="page" + (" read-only" if read_only else ""))


def _sidebar(read_only: bool, token_required: bool, init: Mapping[str, Any]) -> list[Any]:
    dis = bool(init.get("controls-disabled", read_only))
    token_box = []
    if token_required:
        token_box = [html.Div([
            html.Label("operator token", htmlFor="token"),
            dcc.Input(id="token", type="password", placeholder="required for actions", autoComplete="off",
                      className="text-input", debounce=False),
        ], className="field")]
    else:
        token_box = [dcc.Input(id="token", type="hidden", value="")]
    controls = [
        *token_box,
        html.Div([
            html.Label("algorithm", htmlFor="algo-select"),
            dcc.Dropdown(id="algo-select", clearable=False, disabled=dis, className="algo-select",
                         options=init.get("algo-options", []), value=init.get("algo-value")),
            html.Div(init.get("algo-summary", ""), id="algo-summary", className="muted small"),
        ], className="field"),
        html.Div(init.get("param-form", []), id="param-form", className="param-form"),
        html.Button(init.get("apply-label", "Apply"), id="apply-btn", n_clicks=0,
                    disabled=bool(init.get("apply-disabled", dis)), className="btn primary"),
        html.Hr(),
        html.Div([
            html.Label(["workers", html.Span(init.get("workers-range") or workers_range(), id="workers-range", className="range"),
                        html.Span("i", className="info", title=definition("n_workers"))], htmlFor="workers-input"),
            html.Div([
                html.Button("−1", id="workers-minus", n_clicks=0, disabled=dis, className="btn", title="remove a worker"),
                dcc.Input(id="workers-input", type="text", disabled=dis, className="text-input workers-input",
                          value=init.get("workers-value"), autoComplete="off"),
                html.Button("+1", id="workers-plus", n_clicks=0, disabled=dis, className="btn", title="add a worker"),
                html.Button("Set", id="workers-set", n_clicks=0, disabled=dis, className="btn"),
            ], className="workers-row"),
        ], className="field"),
        html.Div([
            html.Button("Pause", id="pause-btn", n_clicks=0, disabled=dis, className="btn"),
            html.Button("Resume", id="resume-btn", n_clicks=0, disabled=dis, className="btn"),
        ], className="btn-row"),
        html.Div(init.get("controls-note", ""), id="controls-note", className="control-msg muted"),
        html.Div(id="control-msg", className="control-msg", role="status"),
    ]
    return [
        _card("Operator controls", controls, class_name="controls"),
        _card("Commands", [html.Div(init.get("commands", []), id="commands", className="commands")]),
        _card("Events", [html.Div(init.get("event-log", []), id="event-log", className="event-log")]),
    ]


# ------------------------------------------------------------------------------------ views
def _fmt(v: Any, kind: str = "g") -> str:
    if v is None:
        return "—"
    if kind == "int":
        return f"{int(v):,}"
    if kind == "pct":
        return f"{100 * v:.1f}%"
    if kind == "rate":
        return f"{v / 1000:,.1f}k" if v >= 1000 else f"{v:,.0f}"
    return f"{v:.3f}" if abs(v) < 100 else f"{v:,.0f}"


def kpi_cards(data: Mapping[str, Any]) -> list[html.Div]:
    """Roll-up of the latest interval."""
    s = data.get("series") or {}

    def last(k: str) -> Any:
        v = s.get(k) or []
        return v[-1] if v else None

    theta_now = data.get("theta_now")
    routing = data.get("routing") or {}
    if "amax_now" in data:  # the interval's own Amax (None: its algorithm has none)
        amax = data["amax_now"]
    else:
        amax = (routing.get("amax") or [None])[-1] if routing.get("amax") else None
    workers = data.get("workers") or []
    over = 0
    if workers:
        mean = sum(w["load"] for w in workers) / len(workers)
        tol = (1 + (theta_now if theta_now is not None else DEFAULT_THETA)) * mean
        over = sum(1 for w in workers if w["load"] > tol)
    imb = last("imbalance")
    entries = last("routing_table_size")
    plan = data.get("plan") or {}
    infeasible = plan.get("feasible") is False
    over_amax = entries is not None and amax is not None and entries > amax
    status = (data.get("run") or {}).get("status") or "running"
    throughput = _fmt(last("throughput"), "rate") if status == "running" else f"0 · {status}"
    cards = [
        ("imbalance", "imbalance", _fmt(imb), "bad" if theta_now is not None and imb is not None and imb > theta_now else ""),
        ("θ observed / θmax", "theta_max_observed", f"{_fmt(last('theta_max_observed'))} / {_fmt(theta_now)}", ""),
        ("workers (overloaded)", "n_workers", f"{_fmt(last('n_workers'), 'int')} ({over})", "bad" if over else ""),
        ("replication", "replication", _fmt(last("replication")), ""),
        ("routing |A| / Amax", "routing_table_size",
         f"{_fmt(entries, 'int')} / {_fmt(amax, 'int')}", "bad" if over_amax or infeasible else ""),
        ("last migration cost · interval", "migration_cost", _last_move(data.get("migration_rows")), ""),
        ("throughput (tuples/s)", "throughput", throughput, ""),
        ("batch latency", "batch_latency_ms", f"{_fmt(last('batch_latency_ms'), 'int')} ms", ""),
        *time_balance_panel.kpi_entries(workers, last("batch_latency_ms")),
    ]
    out = [html.Div([html.Div(label, className="kpi-label"), html.Div(value, className="kpi-value")],
                    className=f"kpi {cls}".strip(), title=definition(metric), id=f"kpi-{metric}")
           for label, metric, value, cls in cards]
    interval = last("interval")
    algo = data.get("algorithm") or "—"
    out.insert(0, html.Div([html.Div("algorithm · interval", className="kpi-label"),
                            html.Div(f"{algo} · #{interval if interval is not None else '—'}", className="kpi-value",
                                     id="kpi-algorithm-value")],
                           className="kpi kpi-algorithm",
                           title="the algorithm of the latest interval shown, and that interval; the other cards "
                                 "show the same interval with its own settings (θmax, Amax)"))
    if over_amax or infeasible:
        out.append(_plan_alert(plan if infeasible else {}, entries if over_amax else None, amax))
    return out


def _last_move(moves: Sequence[Mapping[str, Any]] | None) -> str:
    """The newest move's figure and the interval that planned it, as the migration table's first row
    shows them (both from :func:`skewlab.storage.moves.moves`); "—" before the first move."""
    if not moves:
        return "—"
    return f"{cost_text(moves[0].get('migration_cost'))} · #{moves[0]['interval']}"


def _plan_alert(plan: Mapping[str, Any], entries: Any, amax: Any) -> html.Div:
    """The KPI strip's warning: the latest plan was infeasible (with its note) or |A| exceeds Amax."""
    note = str(plan.get("note") or "")
    parts = []
    if plan:
        parts.append(f"plan of interval {plan.get('interval')} infeasible" + (f": {note}" if note else ""))
    if entries is not None and "Amax" not in note:
        parts.append(f"routing table has {int(entries):,} entries > Amax={int(amax):,}")
    label = "plan infeasible" if plan else "limit exceeded"
    return html.Div([html.Div(label, className="kpi-label"), html.Div("; ".join(parts), className="kpi-note")],
                    className="kpi bad", id="kpi-plan-alert", role="alert", style={"gridColumn": "1 / -1"})


def _payload_text(kind: str, payload: Mapping[str, Any]) -> str:
    if kind == "set-algorithm":
        params = payload.get("params") or {}
        return f"→ {payload.get('algorithm')}" + (f" ({len(params)} params)" if params else "")
    if kind == "set-param":
        return ", ".join(f"{k}={v}" for k, v in (payload.get("params") or {}).items())
    if kind == "set-workers":
        return f"workers={payload.get('workers')}"
    return ""


def commands_view(rows: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Recent commands: pending, applied (at which interval) or rejected (with the engine's reason)."""
    if not rows:
        return [html.Div("no commands yet", className="muted small")]
    items = []
    for c in rows:
        status = c["status"]
        state = command_state(c)
        items.append(html.Li([
            html.Span(f"#{c['id']}", className="cmd-id"),
            html.Span(c["kind"], className="cmd-kind"),
            html.Span(_payload_text(c["kind"], c.get("payload") or {}), className="cmd-payload"),
            html.Div(state, className=f"cmd-state {status}"),
        ], className=f"cmd {status}", id=f"cmd-{c['id']}", **{"data-status": status}))
    return [html.Ul(items, className="cmd-list")]


def event_log(events: Sequence[Mapping[str, Any]], limit: int = 12) -> list[Any]:
    """The latest operator events (the same ones drawn on the time axes)."""
    from skewlab.dashboard.figures import event_label

    ops = [e for e in events if e.get("kind") not in REBALANCE_EVENT_KINDS][-limit:]
    if not ops:
        return [html.Div("no operator events in this window", className="muted small")]
    return [html.Ul([html.Li([html.Span(f"#{e.get('interval')}", className="ev-iv"),
                              html.Span(event_label(e)[0], className=f"ev-kind {e.get('kind')}")],
                             title=event_label(e)[1]) for e in reversed(ops)], className="ev-list")]


def param_form(algorithm: str, declarations: Sequence[Mapping[str, Any]], values: Mapping[str, Any],
               disabled: bool) -> list[Any]:
    """One field per declared parameter (from :func:`skewlab.engine.algorithms.registry.describe`), pre-filled with ``values``."""
    if not declarations:
        return [html.Div(f"{algorithm} has no parameters", className="muted small")]
    out = []
    for p in declarations:
        name = p["name"]
        value = values.get(name, p["default"])
        # the algorithm is part of the id: a click that arrives before the form for a newly selected
        # algorithm is drawn carries the old algorithm's fields, which the Apply callback ignores
        pid = {"type": "param-input", "algo": algorithm, "name": name}
        cls = f"param-input param-input-{name}"
        if p["kind"] == "bool":
            field = dcc.Dropdown(id=pid, options=[{"label": "true", "value": True}, {"label": "false", "value": False}],
                                 value=bool(value), clearable=False, disabled=disabled, className=cls)
        elif p["kind"] == "choice":
            field = dcc.Dropdown(id=pid, options=[{"label": c, "value": c} for c in p["choices"]], value=str(value),
                                 clearable=False, disabled=disabled, className=cls)
        else:
            field = dcc.Input(id=pid, type="text", value=_input_text(value), disabled=disabled,
                              className=f"text-input {cls}", debounce=False, autoComplete="off")
        label = "θmax" if name == "theta_max" else ("Amax" if name == "amax" else name)
        out.append(html.Div([
            html.Label([label, html.Span(p["range"] if p["kind"] not in ("bool", "choice") else "", className="range"),
                        html.Span("i", className="info", title=p["help"])],
                       title=p["help"]),
            field,
            html.Div(id={"type": "param-msg", "algo": algorithm, "name": name}, className="param-msg"),
        ], className="field"))
    return out


def _input_text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(value)
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def started(ts: Any) -> str:
    """Epoch seconds as local ``YYYY-MM-DD HH:MM``."""
    try:
        return _dt.datetime.fromtimestamp(float(ts)).strftime("%Y-%m-%d %H:%M")
    except (TypeError, ValueError, OverflowError, OSError):
        return ""


def _table(columns: Sequence[tuple[str, str]], rows: Sequence[Mapping[str, Any]], empty: str,
           cell: Any = None) -> Any:
    if not rows:
        return html.Div(empty, className="muted small")
    render = cell or (lambda key, row: row.get(key, ""))
    return html.Table([
        html.Thead(html.Tr([html.Th(label) for label, _ in columns])),
        html.Tbody([html.Tr([html.Td(render(key, r)) for _, key in columns]) for r in rows]),
    ], className="data-table")


def _num(v: Any, digits: int = 4) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.{digits}g}"
    return f"{v:,}" if isinstance(v, int) else str(v)


#: Columns of the migration table: (header, row key).
_MIGRATION_COLUMNS = (
    ("interval", "interval"), ("imported at", "imported"), ("algorithm", "algorithm"), ("reason", "reason"),
    ("keys moved", "keys_moved"),
    ("state moved", "state_moved"), ("bytes moved", "bytes_moved"), ("migration cost", "migration_cost"),
    ("pause ms", "pause_ms"), ("pause batches", "pause_batches"),
)
#: Columns older engines did not report: shown only when a row has a value, empty cells where one has not.
_MIGRATION_OPTIONAL = ("bytes_moved", "pause_batches", "imported")


def _migration_cell(key: str, row: Mapping[str, Any]) -> str:
    """One cell of the migration table (bytes as kB / MB; an optional column's missing value empty)."""
    v = row.get(key)
    if key in ("algorithm", "reason"):
        return v or ""
    if key == "imported":  # only when the import completed in a later interval than the one that planned it
        return "" if v is None or v == row.get("interval") else f"{int(v):,}"
    if key == "migration_cost":
        return cost_text(v)
    if key in _MIGRATION_OPTIONAL:
        return "" if v is None else (format_bytes(v) if key == "bytes_moved" else f"{int(v):,}")
    return _num(v)


def migration_table(rows: Sequence[Mapping[str, Any]]) -> Any:
    """The most recent migration events (newest first) under the interval that planned them (the numbering
    of the commands and the KPI cards; "imported at" when the import completed later), with the bytes moved
    and the micro-batches the moved keys were held when a row reports them."""
    reported = {k for r in rows for k in _MIGRATION_OPTIONAL
                if r.get(k) is not None and (k != "imported" or r[k] != r.get("interval"))}
    cols = [c for c in _MIGRATION_COLUMNS if c[1] not in _MIGRATION_OPTIONAL or c[1] in reported]
    return _table(cols, rows, "no migrations in this window", _migration_cell)


def runs_table(rows: Sequence[Mapping[str, Any]], export_base: str) -> Any:
    """Every run with its progress and export links."""
    cols = (("id", "id"), ("name", "name"), ("algorithm", "algorithm"), ("workers", "n_workers"),
            ("workload", "workload"), ("operator", "operator"), ("status", "status"), ("intervals", "intervals"), ("started", "created_at"),
            ("export", "export"))

    def cell(key: str, r: Mapping[str, Any]) -> Any:
        if key == "export":
            rid = r["id"]
            return [html.A("JSON", href=f"{export_base}run-{rid}.json", className="export"), " · ",
                    html.A("CSV", href=f"{export_base}run-{rid}-csv.zip", className="export")]
        if key == "created_at":
            return started(r.get(key))
        if key == "operator":  # the run's keyed operator and the field it reads: mean(amount), user.ops:Ewma
            return operator_label(r.get("config") if isinstance(r.get("config"), Mapping) else {})
        if key == "status":
            return html.Span(status_text(r), className=f"status-badge {r.get(key) or ''}")
        if key == "n_workers" and r.get("last_workers") is not None and r["last_workers"] != r.get(key):
            return f"{r['last_workers']} (started with {r.get(key)})"  # after a set-workers: what runs now
        v = r.get(key)
        return "" if v is None else str(v)

    return _table(cols, rows, "no runs in this database yet", cell)
