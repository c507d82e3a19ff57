"""The Dash app: :func:`create_app` wires the layout, the callbacks and the export routes.

``create_app(db_url, token=None, read_only=None, host="127.0.0.1")`` returns a ``dash.Dash``;
``app.server`` is its Flask server (for gunicorn: ``gunicorn -w 2 -b 0.0.0.0:8050 'skewlab.dashboard.app:server()'``
with ``SKEWLAB_DB_URL`` and ``SKEWLAB_DASHBOARD_TOKEN`` in the environment, see ``dashboard/README.md``).

Modes (issue, "Security"):

* bound to a loopback address (the default 127.0.0.1) without a token: controls enabled; POSTs must
  name a loopback ``Host`` (a page on another site cannot reach them through DNS rebinding);
* with a token: every control action must carry it (checked on the server, constant time);
* bound elsewhere without a token, or ``read_only=True``: read-only — controls disabled, a banner says
  so, and the server refuses actions even if a request reaches the callback.

Refresh: one ``dcc.Interval`` per tab at the run's interval (``--interval`` of the engine, clamped to
[0.5 s, 10 s]); each tick asks :meth:`skewlab.dashboard.data.DashboardData.load` for the delta since the
tab's cursor and *extends* the figures with ``dash.Patch`` (see :mod:`skewlab.dashboard.figures`): each
panel of :data:`skewlab.dashboard.panels.PANELS` draws its part (its ``full`` or ``patch``), and its own
callbacks (``register``) come after the page's.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Mapping, Sequence

from dash import Dash, Input, Output, State, ctx, html, no_update
from flask import Response, abort, request

from skewlab.dashboard import figures as F
from skewlab.dashboard import operator_controls
from skewlab.dashboard.controls import TOKEN_ENV, TOKEN_MIN_LENGTH, Authorizer, is_loopback
from skewlab.dashboard.data import DEFAULT_WINDOW, DashboardData, status_text, waiting_message
from skewlab.dashboard.layout import build_layout, commands_view, event_log, kpi_cards, runs_table
from skewlab.dashboard.operator_controls import controls_outputs
from skewlab.dashboard.panels import PANELS, Live, Panel, imbalance
from skewlab.engine.config.params import ParamError
from skewlab.storage.run_state import REBALANCE_EVENT_KINDS

__all__ = ["create_app", "server"]


def assets_folder() -> str:
    """The dashboard's static files (stylesheet, plotly.js bundle, polyfill): the ``assets/`` folder
    beside this package's folder — the repository's top-level ``assets/`` in a checkout, and the data
    package ``skewlab/assets`` beside ``skewlab/dashboard`` in an installed wheel."""
    folder = Path(__file__).resolve().parents[1] / "assets"
    if not (folder / "style.css").is_file():
        raise FileNotFoundError("the dashboard's assets/ folder is missing (reinstall skewlab)")
    return str(folder)


ASSETS = assets_folder()
_EVENT_LOG_KEEP = F.LABELLED_EVENTS  # the Events card lists the events the imbalance chart labels


def _refresh_ms(interval_seconds: float | None) -> int:
    s = interval_seconds if interval_seconds and interval_seconds > 0 else 1.0
    return int(min(max(s, 0.5), 10.0) * 1000)


def create_app(
    db_url: str | None = None,
    *,
    token: str | None = None,
    read_only: bool | None = None,
    host: str | None = "127.0.0.1",
    store: Any = None,
    window: int = DEFAULT_WINDOW,
    url_base_pathname: str = "/",
    title: str = "skewlab dashboard",
    panels: Sequence[Panel] = PANELS,
) -> Dash:
    """Build the dashboard over the database at ``db_url`` (or an open ``store``).

    ``host`` is the address the server binds to (None: unknown, e.g. under gunicorn — treated as
    non-loopback).  ``read_only`` None means: read-only iff bound to a non-loopback address without a
    token.  A non-loopback address without a token is always read-only.  Raises ``ParamError`` for a
    token shorter than :data:`~skewlab.dashboard.controls.TOKEN_MIN_LENGTH` characters.
    ``panels``: the live view's panels, in page order (default :data:`skewlab.dashboard.panels.PANELS`).
    """
    if store is None:
        from skewlab.storage import connect

        store = connect(db_url)
    token = token or None
    if token is not None and len(token) < TOKEN_MIN_LENGTH:
        raise ParamError(f"operator token must be at least {TOKEN_MIN_LENGTH} characters")
    loopback = host is not None and is_loopback(host)
    forced = not loopback and token is None
    read_only = bool(read_only) or forced
    auth = Authorizer(token, read_only)
    data = DashboardData(store, window=window)
    banner = None
    if read_only:
        why = (f"bound to {host or 'a non-loopback address'} without an operator token "
               f"(start with --token or ${TOKEN_ENV} to enable controls)") if forced else "started read-only"
        banner = f"Read-only dashboard: control actions are disabled — {why}."

    app = Dash(__name__, title=title, update_title=None, assets_folder=ASSETS, suppress_callback_exceptions=True,
               url_base_pathname=url_base_pathname, serve_locally=True)
    app.index_string = index_string(app.config.requests_pathname_prefix)
    panels = tuple(panels)
    app.skewlab = SimpleNamespace(data=data, store=store, auth=auth, read_only=read_only,  # type: ignore[attr-defined]
                                  panels=panels)
    export_base = app.get_relative_path("/export/")

    def layout() -> Any:
        return build_layout(read_only=read_only, token_required=auth.token_required, refresh_ms=1000, banner=banner,
                            export_base=export_base, panels=panels,
                            initial=initial_outputs(data, export_base, read_only, panels))

    app.layout = layout
    _register_routes(app, store, loopback_open=(not read_only and token is None))
    _register_callbacks(app, data, auth, panels)
    return app


#: Saves the browser's own String#trim / parseInt / parseFloat / Math.sinh / Function#toString before
#: Dash's ``@babel/polyfill`` (core-js 2) replaces them: core-js 2 still counts U+180E as white space
#: (Unicode < 6.3), so in every current browser it swaps these for regex-based JavaScript versions, and
#: plotly.js calls trim / parseInt in every colour it parses (tinycolor): ~0.3 s of a page load.
#: ``assets/0-native-builtins.js`` (loaded after the polyfill, before plotly.js and the renderer) puts
#: them back.  The polyfill itself stays: dash-renderer needs its ``regeneratorRuntime``.
_SAVE_NATIVES = (
    "<script>window.__skewlabNatives={s:String.prototype,"
    "trim:String.prototype.trim,trimStart:String.prototype.trimStart,trimEnd:String.prototype.trimEnd,"
    "trimLeft:String.prototype.trimLeft,trimRight:String.prototype.trimRight,parseInt:window.parseInt,"
    "parseFloat:window.parseFloat,sinh:Math.sinh,toString:Function.prototype.toString};</script>"
)


#: dash-core-components' lazily loaded chunks that the initial page needs (file names of dash 4.x).
_ASYNC_CHUNKS = ("graph", "dropdown")


def index_string(prefix: str) -> str:
    """Dash's index page plus two speed-ups of the initial page load (issue #5, "Speed").

    * ``<link rel="preload">`` of ``_dash-layout`` and ``_dash-dependencies``: the browser fetches
      them while it is still compiling the scripts (the renderer asks for them only once its bundle
      has run) and the renderer's own ``fetch`` takes the preloaded response (same URL, CORS mode and
      credentials: one request each, checked by ``tests/dashboard/test_dashboard_browser.py``);
    * the same for the lazily loaded chunks of ``dcc.Graph`` and ``dcc.Dropdown`` (:data:`_ASYNC_CHUNKS`),
      which dash-core-components would request only once the layout has arrived;
    * :data:`_SAVE_NATIVES` before the scripts (see there).

    plotly.js itself is ``assets/plotly-basic-*.min.js`` (see ``dashboard/README.md``): loaded as a
    page script it defines ``window.Plotly``, which ``dcc.Graph`` uses instead of fetching Dash's full
    4.8 MB bundle.
    """
    preload = "".join(f'<link rel="preload" href="{prefix}{name}" as="fetch" crossorigin="anonymous">'
                      for name in ("_dash-layout", "_dash-dependencies"))
    preload += "".join(f'<link rel="preload" href="{prefix}_dash-component-suites/dash/dcc/async-{name}.js" as="script">'
                       for name in _ASYNC_CHUNKS)
    return f"""<!DOCTYPE html>
<html>
    <head>
        {{%metas%}}
        <title>{{%title%}}</title>
        {preload}
        {{%favicon%}}
        {{%css%}}
    </head>
    <body>
        {{%app_entry%}}
        <footer>
            {{%config%}}
            {_SAVE_NATIVES}
            {{%scripts%}}
            {{%renderer%}}
        </footer>
    </body>
</html>"""


def server() -> Any:
    """WSGI factory for gunicorn: ``gunicorn 'skewlab.dashboard.app:server()'``.

    Reads ``SKEWLAB_DB_URL`` (storage default otherwise) and ``SKEWLAB_DASHBOARD_TOKEN``; the bind
    address is not known here, so without a token the dashboard is read-only.
    """
    return create_app(None, token=os.environ.get(TOKEN_ENV) or None, host=None).server


# ------------------------------------------------------------------------------------ routes
def _register_routes(app: Dash, store: Any, *, loopback_open: bool) -> None:
    from skewlab.storage import UnknownRun

    srv = app.server
    prefix = app.config.routes_pathname_prefix

    @srv.before_request
    def _guard_host() -> None:
        # Controls without a token are only for the loopback: refuse actions addressed to any other
        # host name (a DNS-rebinding page would send its own name in Host).
        if loopback_open and request.method == "POST":
            host = request.host or ""
            name = host[1:].split("]")[0] if host.startswith("[") else host.rsplit(":", 1)[0]
            if not is_loopback(name):
                abort(403)

    assets = f"{prefix}{app.config.assets_url_path.strip('/')}/"

    @srv.after_request
    def _cache_assets(resp: Response) -> Response:
        # Dash links every asset as ``/assets/<file>?m=<mtime>`` (a new URL whenever the file changes)
        # but lets Flask serve it "no-cache", so every page load revalidates the 1.2 MB plotly.js bundle
        # before it may run it.  Cache such fingerprinted URLs like Dash's own component suites.
        if request.path.startswith(assets) and "m" in request.args and resp.status_code in (200, 304):
            resp.headers["Cache-Control"] = "public, max-age=31536000"
        return resp

    @srv.route(f"{prefix}export/run-<int:run_id>.json")
    def export_json(run_id: int) -> Response:
        try:
            payload = store.export_run(run_id)
        except UnknownRun:
            abort(404)
        body = json.dumps(payload, sort_keys=True, allow_nan=False)
        return Response(body, mimetype="application/json",
                        headers={"Content-Disposition": f'attachment; filename="skewlab-run-{run_id}.json"'})

    @srv.route(f"{prefix}export/run-<int:run_id>-csv.zip")
    def export_csv(run_id: int) -> Response:
        try:
            tables = store.export_csv(run_id)
        except UnknownRun:
            abort(404)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, text in tables.items():
                zf.writestr(f"skewlab-run-{run_id}/{name}.csv", text)
        return Response(buf.getvalue(), mimetype="application/zip",
                        headers={"Content-Disposition": f'attachment; filename="skewlab-run-{run_id}-csv.zip"'})


# ------------------------------------------------------------------------------------ callbacks
def _export_links(base: str, run_id: int) -> list[Any]:
    return [html.A("JSON", href=f"{base}run-{run_id}.json", className="export", download=f"skewlab-run-{run_id}.json"),
            html.A("CSV", href=f"{base}run-{run_id}-csv.zip", className="export",
                   download=f"skewlab-run-{run_id}-csv.zip")]


def _register_callbacks(app: Dash, D: DashboardData, auth: Authorizer, panels: Sequence[Panel]) -> None:
    """The page's callbacks: runs list, live refresh (each panel's full draw or patch), operator controls,
    comparison, then each panel's own (``register``)."""
    export_base = app.get_relative_path("/export/")
    outputs = live_outputs(panels)

    # ---------------------------------------------------------------- runs (slow)
    @app.callback(
        Output("run-select", "options"), Output("run-select", "value"), Output("runs-table", "children"),
        Output("compare-a", "options"), Output("compare-b", "options"),
        Input("slow-tick", "n_intervals"), State("run-select", "value"), State("follow", "value"),
        prevent_initial_call=True,  # the page arrives with the list (initial_outputs)
    )
    def runs(_n: Any, current: Any, follow: Any):
        rows = D.runs()
        opts = _run_options(rows, D.algorithm_switches(rows))
        ids = [int(r["id"]) for r in rows]
        value: Any = no_update
        if rows:
            if current not in ids:
                value = D.default_run_id()
            elif follow and "follow" in follow:
                newest = D.default_run_id()
                if newest is not None and newest > int(current):
                    value = newest
        table = runs_table(rows, export_base)
        cmp_opts = [{"label": o["label"], "value": o["value"]} for o in opts]
        return opts, value, table, cmp_opts, cmp_opts

    # ---------------------------------------------------------------- live refresh
    @app.callback(
        *[Output(cid, prop) for _, cid, prop in outputs],
        Input("tick", "n_intervals"), Input("run-select", "value"), Input("worker-view", "value"),
        Input("cmd-signal", "data"),
        State("cursor", "data"), State("imb-metrics", "value"), State("controls-state", "data"),
        State("tick", "interval"),
        prevent_initial_call=True,  # the page arrives with its first render (initial_outputs)
    )
    def refresh(_n, run_id, view, _sig, cursor, visible, cstate, tick_ms):
        if run_id is None:
            return (no_update,) * len(outputs)
        run_id = int(run_id)
        trig = ctx.triggered_id
        # The cursor says what the figures show (run, worker view): Dash drops the response of a call that a
        # newer one overtakes (a tick right after a click), so the click's redraw is redone by the next call.
        full = (trig in (None, "run-select", "worker-view") or not cursor or cursor.get("run_id") != run_id
                or cursor.get("view", "auto") != (view or "auto") or bool(cursor.get("waiting")))
        # a paused / resumed / finished run: the KPIs are drawn again from the window (nothing new arrives)
        full = full or cursor.get("status", "running") != ((D.run(run_id) or {}).get("status") or "running")
        d = D.load(run_id, None if full else cursor)
        if d.get("missing"):
            return (no_update,) * len(outputs)
        out = _common_outputs(D, d, run_id, export_base)
        if out["controls-state"] == cstate:
            out["controls-state"] = no_update
        if out["tick"] == tick_ms:
            out["tick"] = no_update
        if d["reset"]:
            view_only = trig == "worker-view" and bool(cursor) and cursor.get("run_id") == run_id
            out.update(_full_outputs(d, view or "auto", visible, panels, previous=cursor, view_only=view_only))
        else:
            out["export-links"] = no_update
            if d["new"] or d["events"]:
                out.update(_patch_outputs(d, view or "auto", visible, panels, cursor))
        return tuple(out.get(key, no_update) for key, _, _ in outputs)

    # ---------------------------------------------------------------- operator controls
    operator_controls.register(app, D, auth)

    # ---------------------------------------------------------------- comparison
    @app.callback(Output("fig-compare", "figure"), Output("compare-summary", "children"),
                  Input("compare-a", "value"), Input("compare-b", "value"), prevent_initial_call=True)
    def compare(a, b):
        ra = D.run_series(int(a)) if a is not None else None
        rb = D.run_series(int(b)) if b is not None else None
        return F.compare_figure(ra, rb), _compare_table(ra, rb)

    # ---------------------------------------------------------------- the panels' own callbacks
    for panel in panels:
        if panel.register is not None:
            panel.register(app, D)


#: The live refresh's own outputs (key, component id, property), beside its panels' (:func:`live_outputs`).
FRAME_OUTPUTS: tuple[tuple[str, str, str], ...] = tuple(
    (key, key.removesuffix("-class"), prop) for key, prop in (
        ("kpis", "children"), ("event-log", "children"), ("commands", "children"),
        ("run-status", "children"), ("run-status-class", "className"), ("run-operator", "children"),
        ("export-links", "children"),
        ("tick", "interval"), ("controls-state", "data"), ("cursor", "data"),
    )
)


def live_outputs(panels: Sequence[Panel]) -> tuple[tuple[str, str, str], ...]:
    """Outputs of the live refresh callback: (key, component id, property) of each panel's ``outputs``
    (keyed by component id), then :data:`FRAME_OUTPUTS`; the layout's ``initial`` uses the keys."""
    return tuple((cid, cid, prop) for p in panels for cid, prop in p.outputs) + FRAME_OUTPUTS


def _common_outputs(D: DashboardData, d: Mapping[str, Any], run_id: int, export_base: str) -> dict[str, Any]:
    """Outputs refreshed on every tick: commands, status, refresh rate, what the controls act on."""
    run = d["run"]
    status = run["status"]
    return {
        "commands": commands_view(D.commands(run_id)),
        "run-status": run.get("status_text") or status,
        "run-status-class": ("status-badge " + status).strip(),
        "run-operator": f"operator {run.get('operator_label') or run.get('operator') or 'count'}",
        "export-links": _export_links(export_base, run_id),
        "tick": _refresh_ms(run.get("interval_seconds")),
        "controls-state": {"run_id": run_id, "algorithm": d["algorithm"], "params": d["params"],
                           "n_workers": d["n_workers"], "status": status, "operator": run.get("operator") or "count",
                           "max_workers": run.get("max_workers")},
    }


def _full_outputs(d: Mapping[str, Any], view: str, visible: Any, panels: Sequence[Panel], *,
                  previous: Mapping[str, Any] | None = None, view_only: bool = False) -> dict[str, Any]:
    """A reset: every panel drawn from the window (its ``full``), and a new cursor."""
    ops = [e for e in d["events"] if e.get("kind") not in REBALANCE_EVENT_KINDS]
    cursor = {"run_id": d["run_id"], "last_interval": d["last_interval"], "last_event_id": d["last_event_id"],
              "points": len(d["series"]["interval"]), "ops": len(ops), "log": ops[-_EVENT_LOG_KEEP:],
              "status": d["run"]["status"] or "running", "view": view}
    live = Live(d=d, view=view, visible=visible, previous=previous or {}, cursor=cursor, view_only=view_only)
    for p in panels:
        if p.cursor is not None:
            cursor.update(p.cursor(live))
    out: dict[str, Any] = {"kpis": kpi_cards(d), "event-log": event_log(cursor["log"]), "cursor": cursor}
    waiting = waiting_message(d)
    if waiting is not None:  # no tuple yet: say so on every chart; the next tick redraws from scratch
        msg = F.empty_figure(waiting)
        cursor["waiting"] = True
        for p in panels:
            out.update(p.waiting_outputs(msg, live))
        return out
    for p in panels:
        if p.full is not None:
            out.update(p.full(live))
    return out


def _patch_outputs(d: Mapping[str, Any], view: str, visible: Any, panels: Sequence[Panel],
                   cursor: Mapping[str, Any]) -> dict[str, Any]:
    """A tick with new intervals or events: each panel extends what it drew (its ``patch``), the event
    log and the KPIs follow, and the cursor moves on."""
    ops = [e for e in d["events"] if e.get("kind") not in REBALANCE_EVENT_KINDS]
    log = (list(cursor.get("log") or []) + ops)[-_EVENT_LOG_KEEP:]
    new_cursor = dict(cursor, last_interval=d["last_interval"], last_event_id=d["last_event_id"],
                      points=int(cursor.get("points") or 0) + len(d["series"]["interval"]),
                      ops=int(cursor.get("ops") or 0) + len(ops), log=log)
    live = Live(d=d, view=view, visible=visible, previous=cursor, cursor=new_cursor,
                delta=dict(d, label_events=log, label_span=new_cursor["points"]))
    out: dict[str, Any] = {"cursor": new_cursor}
    for p in panels:
        if p.patch is not None:
            out.update(p.patch(live))
    if ops:
        out["event-log"] = event_log(log)
    if d["new"]:
        out["kpis"] = kpi_cards(dict(d, migration_rows=new_cursor.get("mig") or []))
    return out


def initial_outputs(D: DashboardData, export_base: str, read_only: bool = False,
                    panels: Sequence[Panel] = PANELS) -> dict[str, Any]:
    """The first render of the live view (page load): runs, the default run's window drawn by ``panels``,
    its cursor."""
    runs = D.runs()
    out: dict[str, Any] = {"run-options": _run_options(runs, D.algorithm_switches(runs)),
                           "runs-table": runs_table(runs, export_base),
                           **controls_outputs(None, read_only)}
    run_id = D.default_run_id()
    if run_id is None:
        msg = F.empty_figure("no runs in the database yet — start one with 'skewlab engine'")
        out.update({k: msg for k, _, p in live_outputs(panels) if p == "figure"})
        return out
    d = D.load(run_id)
    if d.get("missing"):
        return out
    out["run-id"] = run_id
    out.update(_common_outputs(D, d, run_id, export_base))
    out.update(_full_outputs(d, "auto", imbalance.DEFAULT_METRICS, panels))
    out.update(controls_outputs(out["controls-state"], read_only))
    return out


def _run_options(rows: list[dict[str, Any]], switches: Mapping[int, list[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The run picker's entries: id, name, the groupings the run has routed by (:func:`algorithm_sequence`),
    status and progress."""
    def label(r: Mapping[str, Any]) -> str:
        algos = algorithm_sequence(r["algorithm"], switches.get(int(r["id"]), []))
        name = f"{r['name']} · " if r.get("name") and r["name"] != algos else ""
        return f"#{r['id']} {name}{algos} · {status_text(r)} · {r['intervals']} intervals"

    return [{"label": label(r), "value": int(r["id"])} for r in rows]


def algorithm_sequence(start: str, switches: Sequence[Mapping[str, Any]], shown: int = 4) -> str:
    """``mixed → dchoices``: the run's start grouping and each operator switch after it (the engine's own
    switches while a grouping's kernels compile, which carry a ``reason``, left out; repeats merged);
    a longer history keeps the first and the last ``shown - 1``."""
    seq = [start]
    for d in switches:
        algo = d.get("algorithm")
        if algo and not d.get("reason") and algo != seq[-1]:
            seq.append(str(algo))
    if len(seq) > shown:
        seq = [seq[0], "…", *seq[-(shown - 1):]]
    return " → ".join(seq)


def _compare_table(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> Any:
    if not a and not b:
        return []
    rows = (
        ("intervals shown", "intervals", "int"), ("algorithms", "algorithms", "list"),
        ("mean imbalance", "imbalance_mean", "f"), ("p95 imbalance", "imbalance_p95", "f"),
        ("max θ observed", "theta_observed_max", "f"), ("mean replication", "replication_mean", "f"),
        ("mean migration cost", "migration_cost_mean", "f"), ("max |A|", "routing_table_max", "int"),
        ("mean engine throughput (tuples/s)", "engine", "int"),
        ("mean routing throughput, simulate (tuples/s)", "routing", "int"),
        ("p95 batch latency (ms)", "latency_p95_ms", "int"),
    )

    def cell(run: Mapping[str, Any] | None, key: str, kind: str) -> str:
        if not run:
            return "—"
        if key in ("engine", "routing"):  # two measures, never under one label
            key = "throughput_mean" if run.get("throughput_kind", "engine") == key else ""
        v = run["summary"].get(key)
        if v is None:
            return "—"
        if kind == "list":
            return ", ".join(v)
        if kind == "int":
            return f"{int(v):,}"
        return f"{v:.4f}"

    head = html.Tr([html.Th("")] + [html.Th(f"run {r['run_id']}" if r else "—") for r in (a, b)])
    body = [html.Tr([html.Td(label)] + [html.Td(cell(r, key, kind)) for r in (a, b)]) for label, key, kind in rows]
    return html.Table([html.Thead(head), html.Tbody(body)], className="cmp-table")
