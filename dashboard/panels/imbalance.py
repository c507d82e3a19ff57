"""The "Imbalance over time" panel: imbalance, the observed θ and the seeds' imbalance per interval with
the workers' load bands and the run's events (:data:`skewlab.dashboard.figures.TIME_FIGURES`
``["imbalance"]``); the metrics shown are picked in the card's head (``imb-metrics``), and a change of
pick only shows or hides traces (:func:`register`)."""

from __future__ import annotations

from typing import Any

from dash import Input, Output, Patch, dcc, html

from skewlab.dashboard import figures as F
from skewlab.dashboard.definitions import LABELS, definition
from skewlab.dashboard.panels.time_chart import time_chart

__all__ = ["DEFAULT_METRICS", "PANEL"]

#: the metrics shown on page load
DEFAULT_METRICS = ["imbalance", "theta_max_observed"]


def metric_pick() -> Any:
    """The card head's checklist of :data:`skewlab.dashboard.figures.IMBALANCE_METRICS`."""
    return dcc.Checklist(id="imb-metrics", value=list(DEFAULT_METRICS), inline=True, className="metric-pick",
                         options=[{"label": html.Span(LABELS[m], title=definition(m)), "value": m}
                                  for m in F.IMBALANCE_METRICS])


def register(app: Any, D: Any) -> None:
    """A change of the metrics picked shows or hides their traces (a patch, nothing read again)."""

    @app.callback(Output("fig-imbalance", "figure", allow_duplicate=True), Input("imb-metrics", "value"),
                  prevent_initial_call=True)
    def metric_visibility(visible):
        p = Patch()
        for i, spec in enumerate(F.TIME_FIGURES["imbalance"][0]):
            if spec.y in F.IMBALANCE_METRICS:
                p["data"][i]["visible"] = True if spec.y in (visible or []) else "legendonly"
        return p


PANEL = time_chart("imbalance", title="Imbalance over time", metric="imbalance", height=430, extra=metric_pick,
                   visible=True, register=register)
