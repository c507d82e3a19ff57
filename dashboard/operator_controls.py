"""The operator sidebar's callbacks: the controls follow the selected run, the algorithm's form is drawn
from the registry's declarations and checked field by field, and a click becomes a command — refused on
the server, whatever the page shows, without the operator token, on a read-only dashboard or for a run
that is not live (:mod:`skewlab.dashboard.controls` holds the rules; the controls' layout is
:func:`skewlab.dashboard.layout.build_layout`'s sidebar)."""

from __future__ import annotations

from typing import Any, Mapping

from dash import ALL, Input, Output, State, ctx, no_update

from skewlab.dashboard.controls import (
    Authorizer,
    build_algorithm_command,
    build_workers_command,
    command_message,
    not_live,
    pause_noop,
    picker_catalog,
    submit,
    validate_fields,
    workers_range,
)
from skewlab.dashboard.layout import RUN_CONTROLS, param_form
from skewlab.engine.control.commands import CommandError

__all__ = ["controls_outputs", "register"]


def register(app: Any, D: Any, auth: Authorizer) -> None:
    """The sidebar's callbacks over the dashboard's data ``D`` (its ``store`` takes the commands)."""
    store = D.store

    @app.callback(Output("algo-select", "options"), Output("algo-select", "value"), Output("workers-input", "value"),
                  Output("workers-range", "children"), Output("controls-note", "children"),
                  *[Output(cid, "disabled") for cid in RUN_CONTROLS],
                  Input("controls-state", "data"), prevent_initial_call=True)
    def sync_controls(cs):
        c = controls_outputs(cs, auth.read_only)
        return (c["algo-options"], c.get("algo-value", no_update), c.get("workers-value", no_update),
                c.get("workers-range", no_update), c["controls-note"], *([c["controls-disabled"]] * len(RUN_CONTROLS)))

    @app.callback(Output("param-form", "children"), Output("apply-btn", "children"), Output("algo-summary", "children"),
                  Output("apply-btn", "disabled"),
                  Input("algo-select", "value"), Input("controls-state", "data"), prevent_initial_call=True)
    def render_form(algo, cs):
        c = controls_outputs(cs, auth.read_only, algo)
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


def controls_outputs(cs: Mapping[str, Any] | None, read_only: bool, algo: str | None = None) -> dict[str, Any]:
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
