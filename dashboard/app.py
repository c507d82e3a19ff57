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
tab's cursor and *extends* the figures with ``dash.Patch`` (see :mod:`skewlab.dashboard.figures`).
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Mapping, Sequence

from dash import ALL, Dash, Input, Output, Patch, State, ctx, html, no_update
from flask import Response, abort, request

from skewlab.dashboard import dead_letters_panel, time_balance_panel
from skewlab.dashboard import figures as F
from skewlab.dashboard.controls import (
    TOKEN_ENV,
    TOKEN_MIN_LENGTH,
    Authorizer,
    picker_catalog,
    build_algorithm_command,
    build_workers_command,
    workers_range,
    command_message,
    is_loopback,
    not_live,
    pause_noop,
    submit,
    validate_fields,
)
from skewlab.dashboard.data import DEFAULT_WINDOW, DashboardData, status_text, waiting_message
from skewlab.dashboard.layout import (
    RUN_CONTROLS,
    build_layout,
    commands_view,
    event_log,
    kpi_cards,
    migration_table,
    param_form,
    runs_table,
)
from skewlab.engine.control.commands import CommandError
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
) -> Dash:
    """Build the dashboard over the database at ``db_url`` (or an open ``store``).

    ``host`` is the address the server binds to (None: unknown, e.g. under gunicorn — treated as
    non-loopback).  ``read_only`` None means: read-only iff bound to a non-loopback address without a
    token.  A non-loopback address without a token is always read-only.  Raises ``ParamError`` for a
    token shorter than :data:`~skewlab.dashboard.controls.TOKEN_MIN_LENGTH` characters.
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
    app.skewlab = SimpleNamespace(data=data, store=store, auth=auth, read_only=read_only)  # type: ignore[attr-defined]
    export_base = app.get_relative_path("/export/")

    def layout() -> Any:
        return build_layout(read_only=read_only, token_required=auth.token_required, refresh_ms=1000, banner=banner,
                            export_base=export_base, initial=initial_outputs(data, export_base, read_only))

    app.layout = layout
    _register_routes(app, store, loopback_open=(not read_only and token is None))
    _register_callbacks(app, data, store, auth)
    for panel in (dead_letters_panel, time_balance_panel):  # the panels that are modules of their own
        panel.register(app, data)
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


def _register_callbacks(app: Dash, D: DashboardData, store: Any, auth: Authorizer) -> None:
    export_base = app.get_relative_path("/export/")

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
        *[Output(cid, prop) for _, cid, prop in LIVE_OUTPUTS],
        Input("tick", "n_intervals"), Input("run-select", "value"), Input("worker-view", "value"),
        Input("cmd-signal", "data"),
        State("cursor", "data"), State("imb-metrics", "value"), State("controls-state", "data"),
        State("tick", "interval"),
        prevent_initial_call=True,  # the page arrives with its first render (initial_outputs)
    )
    def refresh(_n, run_id, view, _sig, cursor, visible, cstate, tick_ms):
        if run_id is None:
            return (no_update,) * len(LIVE_OUTPUTS)
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
            return (no_update,) * len(LIVE_OUTPUTS)
        out = _common_outputs(D, d, run_id, export_base)
        if out["controls-state"] == cstate:
            out["controls-state"] = no_update
        if out["tick"] == tick_ms:
            out["tick"] = no_update
        if d["reset"]:
            out.update(_full_outputs(d, view or "auto", visible))
            if trig == "worker-view" and cursor and cursor.get("run_id") == run_id:
                out["fig-heat"] = no_update  # shows every worker whatever the view: keep it (thousands of cells)
                out["cursor"]["state_top"] = cursor.get("state_top")  # and the colour scale it was drawn with
            return tuple(out.get(key, no_update) for key, _, _ in LIVE_OUTPUTS)
        out["export-links"] = no_update
        if not d["new"] and not d["events"]:
            return tuple(out.get(key, no_update) for key, _, _ in LIVE_OUTPUTS)
        ops = [e for e in d["events"] if e.get("kind") not in REBALANCE_EVENT_KINDS]
        log = (list(cursor.get("log") or []) + ops)[-_EVENT_LOG_KEEP:]
        new_cursor = dict(cursor, last_interval=d["last_interval"], last_event_id=d["last_event_id"],
                          points=int(cursor.get("points") or 0) + len(d["series"]["interval"]),
                          ops=int(cursor.get("ops") or 0) + len(ops), log=log)
        delta = dict(d, label_events=log, label_span=new_cursor["points"])
        out.update({
            "fig-imbalance": F.time_patch("imbalance", delta), "fig-throughput": F.time_patch("throughput", delta),
            "fig-routing": F.time_patch("routing", delta), "fig-migrations": F.time_patch("migrations", delta),
            "fig-heat": F.worker_heat_patch(delta, cursor.get("state_top")), "cursor": new_cursor,
        })
        if ops:
            out["event-log"] = event_log(log)
        if d["new"]:
            if d.get("workers"):
                out["fig-workers"] = (F.worker_load_patch(d, view or "auto") if cursor.get("bars")
                                      else F.worker_load_figure(d, view or "auto"))
                new_cursor["bars"] = True
            if d.get("migration_rows") is not None:  # the moves were read again (storage.moves)
                new_cursor["mig"] = list(d["migration_rows"])
                out["migration-table"] = migration_table(new_cursor["mig"])
            out.update({"fig-shadow": F.shadow_figure(d), "shadow-verdict": F.shadow_verdict(d),
                        "fig-hotkeys": F.hot_keys_figure(d),
                        "kpis": kpi_cards(dict(d, migration_rows=new_cursor.get("mig") or []))})
        return tuple(out.get(key, no_update) for key, _, _ in LIVE_OUTPUTS)

    @app.callback(Output("fig-imbalance", "figure", allow_duplicate=True), Input("imb-metrics", "value"),
                  prevent_initial_call=True)
    def metric_visibility(visible):
        p = Patch()
        for i, spec in enumerate(F.TIME_FIGURES["imbalance"][0]):
            if spec.y in F.IMBALANCE_METRICS:
                p["data"][i]["visible"] = True if spec.y in (visible or []) else "legendonly"
        return p

    # ---------------------------------------------------------------- drill-down
    @app.callback(Output("worker-detail", "children"),
                  Input("fig-workers", "clickData"), Input("run-select", "value"), Input("worker-view", "value"),
                  State("cursor", "data"), prevent_initial_call=True)
    def drill(click, run_id, _view, cursor):
        from dash import dcc

        if ctx.triggered_id != "fig-workers" or not click or run_id is None:
            return []
        try:
            worker = int(click["points"][0]["customdata"][0])
        except (KeyError, IndexError, TypeError, ValueError):
            return []
        last = (cursor or {}).get("last_interval")
        h = D.worker_history(int(run_id), worker, last)
        st = D.state(int(run_id))
        theta = None if st is None or last is None else st.param_at(int(last), "theta_max")
        return [html.Div(f"worker w{worker} — last {len(h['interval'])} intervals", className="drill-title"),
                dcc.Graph(figure=F.worker_detail_figure(h, theta), config={"displaylogo": False}, id="fig-worker-detail")]

    # ---------------------------------------------------------------- controls
    @app.callback(Output("algo-select", "options"), Output("algo-select", "value"), Output("workers-input", "value"),
                  Output("workers-range", "children"), Output("controls-note", "children"),
                  *[Output(cid, "disabled") for cid in RUN_CONTROLS],
                  Input("controls-state", "data"), prevent_initial_call=True)
    def sync_controls(cs):
        c = _controls_outputs(cs, auth.read_only)
        return (c["algo-options"], c.get("algo-value", no_update), c.get("workers-value", no_update),
                c.get("workers-range", no_update), c["controls-note"], *([c["controls-disabled"]] * len(RUN_CONTROLS)))

    @app.callback(Output("param-form", "children"), Output("apply-btn", "children"), Output("algo-summary", "children"),
                  Output("apply-btn", "disabled"),
                  Input("algo-select", "value"), Input("controls-state", "data"), prevent_initial_call=True)
    def render_form(algo, cs):
        c = _controls_outputs(cs, auth.read_only, algo)
        return (c.get("param-form", []), c.get("apply-label", "Apply"), c.get("algo-summary", ""),
                c.get("apply-disabled", True))

    @app.callback(Output({"type": "param-msg", "algo": ALL, "name": ALL}, "children"),
                  Input({"type": "param-input", "algo": ALL, "name": ALL}, "value"), prevent_initial_call=True)
    def check_fields(values):
        ids = [i["id"] for i in ctx.inputs_list[0]]
        if not ids:
            return []
        _, errors = validate_fields(ids[0]["algo"], [i["name"] for i in ids], values)
        return [errors.get(i["name"], "") for i in ids]

    @app.callback(
        Output("control-msg", "children"), Output("control-msg", "className"), Output("cmd-signal", "data"),
        Input("apply-btn", "n_clicks"), Input("workers-minus", "n_clicks"), Input("workers-plus", "n_clicks"),
        Input("workers-set", "n_clicks"), Input("pause-btn", "n_clicks"), Input("resume-btn", "n_clicks"),
        State("algo-select", "value"), State({"type": "param-input", "algo": ALL, "name": ALL}, "value"),
        State({"type": "param-input", "algo": ALL, "name": ALL}, "id"), State("workers-input", "value"),
        State("token", "value"), State("run-select", "value"),
        prevent_initial_call=True,
    )
    def act(_a, _m, _p, _s, _pause, _resume, algo, values, ids, workers_value, token, run_id):
        trig = ctx.triggered_id
        if trig is None or not (ctx.triggered and ctx.triggered[0].get("value")):
            return no_update, no_update, no_update
        refusal = auth.refusal(token)
        if refusal is not None:  # server side: hidden buttons are not the protection
            return refusal, "control-msg error", no_update
        if run_id is None:
            return "no run selected", "control-msg error", no_update
        run_id = int(run_id)
        refusal = not_live((D.run(run_id) or {"id": run_id, "status": "missing"}))
        if refusal is not None:  # server side too: a disabled button is not the protection
            return f"refused: {refusal}", "control-msg error", no_update
        st = D.state(run_id)
        latest = store.interval_metrics(run_id, limit=1, latest=True)
        current_algo = latest[0]["algorithm"] if latest else (st.algorithm if st else "")
        current_params = dict(st.params) if st else {}
        n_now = (latest[0].get("n_workers") if latest else None) or (D.run(run_id) or {}).get("n_workers") or 1
        run = D.run(run_id) or {}
        config = run.get("config") if isinstance(run.get("config"), Mapping) else {}
        operator = config.get("operator", "count")
        mergeable = config.get("operator_mergeable")
        max_workers = config.get("max_workers")
        try:
            if trig == "apply-btn":
                # fields drawn for another algorithm (the click beat the new form): not this form's values,
                # so the command carries the selected algorithm's defaults, as its form shows them
                fields = [(i["name"], v) for i, v in zip(ids, values) if i.get("algo") == algo]
                params, errors = validate_fields(algo, [n for n, _ in fields], [v for _, v in fields])
                if errors:
                    return ("refused: " + "; ".join(errors.values()), "control-msg error", no_update)
                kind, payload = build_algorithm_command(algo, params, current_algorithm=current_algo,
                                                        current_params=current_params, operator=operator,
                                                        mergeable=mergeable)
            elif trig in ("workers-minus", "workers-plus"):
                kind, payload = build_workers_command(int(n_now) + (1 if trig == "workers-plus" else -1), max_workers)
            elif trig == "workers-set":
                kind, payload = build_workers_command(workers_value, max_workers)
            elif trig in ("pause-btn", "resume-btn"):
                kind, payload = ("pause" if trig == "pause-btn" else "resume"), {}
                noop = pause_noop(kind, store.recent_commands(20, run_id=run_id), run.get("status"))
                if noop is not None:
                    return noop, "control-msg", no_update
            else:
                return no_update, no_update, no_update
        except CommandError as exc:
            return f"refused: {exc}", "control-msg error", no_update
        ok, message, cid = submit(store, auth, token, run_id, kind, payload)
        return message, "control-msg " + ("ok pending" if ok else "error"), (cid if ok else no_update)

    @app.callback(Output("control-msg", "children", allow_duplicate=True),
                  Output("control-msg", "className", allow_duplicate=True),
                  Input("commands", "children"), State("cmd-signal", "data"), State("control-msg", "className"),
                  State("run-select", "value"), prevent_initial_call=True)
    def follow_command(_rows, cid, cls, run_id):
        # The line about the last submitted command follows its state until it is applied or rejected.
        if cid is None or run_id is None or "pending" not in (cls or "").split():
            return no_update, no_update
        row = next((c for c in D.commands(int(run_id)) if c["id"] == int(cid)), None)
        if row is None or row["status"] == "pending":
            return no_update, no_update
        return command_message(row)

    # ---------------------------------------------------------------- comparison
    @app.callback(Output("fig-compare", "figure"), Output("compare-summary", "children"),
                  Input("compare-a", "value"), Input("compare-b", "value"), prevent_initial_call=True)
    def compare(a, b):
        ra = D.run_series(int(a)) if a is not None else None
        rb = D.run_series(int(b)) if b is not None else None
        return F.compare_figure(ra, rb), _compare_table(ra, rb)


#: Outputs of the live refresh callback: (key, component id, property); the layout's ``initial`` uses the keys.
LIVE_OUTPUTS: tuple[tuple[str, str, str], ...] = tuple(
    (key, key.removesuffix("-class"), prop) for key, prop in (
        ("fig-imbalance", "figure"), ("fig-throughput", "figure"), ("fig-routing", "figure"),
        ("fig-migrations", "figure"), ("fig-workers", "figure"), ("fig-heat", "figure"), ("fig-shadow", "figure"),
        ("shadow-verdict", "children"), ("fig-hotkeys", "figure"), ("kpis", "children"),
        ("migration-table", "children"), ("event-log", "children"), ("commands", "children"),
        ("run-status", "children"), ("run-status-class", "className"), ("run-operator", "children"),
        ("export-links", "children"),
        ("tick", "interval"), ("controls-state", "data"), ("cursor", "data"),
    )
)


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


def _full_outputs(d: Mapping[str, Any], view: str, visible: Any) -> dict[str, Any]:
    """A reset: every figure drawn from the window, and a new cursor."""
    ops = [e for e in d["events"] if e.get("kind") not in REBALANCE_EVENT_KINDS]
    cursor = {"run_id": d["run_id"], "last_interval": d["last_interval"], "last_event_id": d["last_event_id"],
              "points": len(d["series"]["interval"]), "ops": len(ops), "bars": bool(d.get("workers")),
              "log": ops[-_EVENT_LOG_KEEP:], "mig": list(d.get("migration_rows") or []),
              "status": d["run"]["status"] or "running", "view": view,
              "state_top": F.state_scale_top(d.get("heat") or {})}
    waiting = waiting_message(d)
    if waiting is not None:  # no tuple yet: say so on every chart; the next tick redraws from scratch
        msg = F.empty_figure(waiting)
        cursor["waiting"] = True
        return {**{k: msg for k, _, p in LIVE_OUTPUTS if p == "figure"}, "shadow-verdict": "", "kpis": kpi_cards(d),
                "migration-table": migration_table(cursor["mig"]), "event-log": event_log(cursor["log"]),
                "cursor": cursor}
    return {
        "fig-imbalance": F.time_figure("imbalance", d, visible), "fig-throughput": F.time_figure("throughput", d),
        "fig-routing": F.time_figure("routing", d), "fig-migrations": F.time_figure("migrations", d),
        "fig-workers": F.worker_load_figure(d, view), "fig-heat": F.worker_heat_figure(d),
        "fig-shadow": F.shadow_figure(d),
        "shadow-verdict": F.shadow_verdict(d), "fig-hotkeys": F.hot_keys_figure(d), "kpis": kpi_cards(d),
        "migration-table": migration_table(cursor["mig"]), "event-log": event_log(cursor["log"]),
        "cursor": cursor,
    }


def initial_outputs(D: DashboardData, export_base: str, read_only: bool = False) -> dict[str, Any]:
    """The first render of the live view (page load): runs, the default run's window, its cursor."""
    runs = D.runs()
    out: dict[str, Any] = {"run-options": _run_options(runs, D.algorithm_switches(runs)),
                           "runs-table": runs_table(runs, export_base),
                           **_controls_outputs(None, read_only)}
    run_id = D.default_run_id()
    if run_id is None:
        msg = F.empty_figure("no runs in the database yet — start one with 'skewlab engine'")
        out.update({k: msg for k, _, p in LIVE_OUTPUTS if p == "figure"})
        return out
    d = D.load(run_id)
    if d.get("missing"):
        return out
    out["run-id"] = run_id
    out.update(_common_outputs(D, d, run_id, export_base))
    out.update(_full_outputs(d, "auto", ["imbalance", "theta_max_observed"]))
    out.update(_controls_outputs(out["controls-state"], read_only))
    return out


def _controls_outputs(cs: Mapping[str, Any] | None, read_only: bool, algo: str | None = None) -> dict[str, Any]:
    """Operator sidebar: algorithm list, the form of ``algo`` (default: the live one), worker count."""
    cs = cs or {}
    catalog = picker_catalog(cs.get("algorithm"))
    out: dict[str, Any] = {"algo-options": [{"label": n, "value": n, "title": a["summary"]} for n, a in catalog.items()]}
    refusal = not_live({"id": cs.get("run_id"), "status": cs.get("status")}) if cs.get("run_id") is not None else None
    out["controls-note"] = refusal or ""
    out["controls-disabled"] = read_only or refusal is not None
    read_only = out["controls-disabled"]
    if cs.get("algorithm"):
        out["algo-value"] = cs["algorithm"]
        out["workers-value"] = str(cs.get("n_workers") or "")
        out["workers-range"] = workers_range(cs.get("max_workers"))
    algo = algo or cs.get("algorithm")
    if algo in catalog:
        same = algo == cs.get("algorithm")
        a = catalog[algo]
        out["param-form"] = param_form(algo, a["params"], (cs.get("params") or {}) if same else {}, read_only)
        out["apply-label"] = ("Apply parameters" if a["params"] else "no parameters") if same else f"Switch to {algo}"
        out["apply-disabled"] = read_only or (same and not a["params"]) or bool(a.get("unavailable"))
        out["algo-summary"] = f"{a['summary']} — {a['paper']}"
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
