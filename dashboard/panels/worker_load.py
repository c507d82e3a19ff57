"""The "Per-worker load now" panel: the latest interval's load per worker against the tolerance
(all workers up to :data:`~skewlab.dashboard.figures.ALL_WORKERS_MAX`, the most loaded
:data:`~skewlab.dashboard.figures.TOP_N` beyond, or as picked in the card's head, ``worker-view``);
a click on a bar draws that worker's history below it (:func:`register`)."""

from __future__ import annotations

from typing import Any, Mapping

from dash import Input, Output, State, ctx, dcc, html

from skewlab.dashboard import cards
from skewlab.dashboard import figures as F
from skewlab.dashboard.panels.panel import Live, Panel

__all__ = ["PANEL"]


def layout(initial: Mapping[str, Any]) -> Any:
    view = dcc.RadioItems(id="worker-view", value="auto", inline=True, className="view-pick",
                          options=[{"label": "auto", "value": "auto"}, {"label": "top 16", "value": "top"},
                                   {"label": "all", "value": "all"}])
    return cards.card("Per-worker load now", [cards.graph("fig-workers", "skewlab-worker-load", 330, initial),
                                              html.Div(id="worker-detail", className="drill")],
                      metric="worker_load", extra=view)


def cursor(live: Live) -> dict[str, Any]:
    """``bars``: the figure has bars to extend (a run's first workers arrive with a tick after the page)."""
    return {"bars": bool(live.d.get("workers"))}


def full(live: Live) -> dict[str, Any]:
    return {"fig-workers": F.worker_load_figure(live.d, live.view)}


def patch(live: Live) -> dict[str, Any]:
    if not (live.d["new"] and live.d.get("workers")):
        return {}
    fig = (F.worker_load_patch(live.d, live.view) if live.previous.get("bars")
           else F.worker_load_figure(live.d, live.view))
    live.cursor["bars"] = True
    return {"fig-workers": fig}


def register(app: Any, D: Any) -> None:
    """Drill-down: a click on a worker's bar draws its load history with the run's θmax at that interval."""

    @app.callback(Output("worker-detail", "children"),
                  Input("fig-workers", "clickData"), Input("run-select", "value"), Input("worker-view", "value"),
                  State("cursor", "data"), prevent_initial_call=True)
    def drill(click, run_id, _view, cursor):
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
                dcc.Graph(figure=F.worker_detail_figure(h, theta), config={"displaylogo": False},
                          id="fig-worker-detail")]


PANEL = Panel(id="worker-load", layout=layout, row="workers", outputs=(("fig-workers", "figure"),),
              cursor=cursor, full=full, patch=patch, register=register)
