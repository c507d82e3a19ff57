"""The frame every panel of the live view sits in: a card with a title (and its metric's definition one
hover away) and a graph with the dashboard's toolbar.  Shared by :mod:`skewlab.dashboard.layout` and the
panels that are modules of their own (:mod:`skewlab.dashboard.dead_letters_panel`,
:mod:`skewlab.dashboard.time_balance_panel`)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from dash import dcc, html

from skewlab.dashboard.definitions import definition
from skewlab.dashboard.figures import empty_figure

__all__ = ["GRAPH_CONFIG", "card", "graph", "info"]

#: Plotly modebar: "download as PNG" (client-side) with a useful file name, no logo.
GRAPH_CONFIG: dict[str, Any] = {
    "displaylogo": False,
    "toImageButtonOptions": {"format": "png", "scale": 2},
    "modeBarButtonsToRemove": ["lasso2d", "select2d"],
}


def info(name: str) -> html.Span:
    return html.Span("i", className="info", title=definition(name))


def card(title: str, body: Sequence[Any], *, metric: str | None = None, extra: Any = None,
         class_name: str = "", card_id: str | None = None) -> html.Div:
    head = [html.H3([title, info(metric)] if metric else title, title=definition(metric) if metric else None)]
    if extra is not None:
        head.append(html.Div(extra, className="card-extra"))
    kw = {"id": card_id} if card_id else {}
    return html.Div([html.Div(head, className="card-head"), *body], className=f"card {class_name}".strip(), **kw)


def graph(gid: str, filename: str, height: int = 300, initial: Mapping[str, Any] | None = None) -> dcc.Graph:
    cfg = dict(GRAPH_CONFIG, toImageButtonOptions={**GRAPH_CONFIG["toImageButtonOptions"], "filename": filename})
    fig = (initial or {}).get(gid)
    return dcc.Graph(id=gid, figure=fig if fig is not None else empty_figure(height=height), config=cfg,
                     className="graph")
