"""The "Shadow what-if" panel: the imbalance the run's shadow groupings would have had on the same
tuples, with a one-line verdict (:func:`skewlab.dashboard.figures.shadow_figure`,
:func:`~skewlab.dashboard.figures.shadow_verdict`); drawn again from the window on each tick with news."""

from __future__ import annotations

from typing import Any, Mapping

from dash import html

from skewlab.dashboard import cards
from skewlab.dashboard import figures as F
from skewlab.dashboard.panels.panel import Live, Panel

__all__ = ["PANEL"]


def layout(initial: Mapping[str, Any]) -> Any:
    return cards.card("Shadow what-if", [html.Div(initial.get("shadow-verdict", ""), id="shadow-verdict",
                                                  className="verdict"),
                                         cards.graph("fig-shadow", "skewlab-shadow", 330, initial)], metric="shadow")


def full(live: Live) -> dict[str, Any]:
    return {"fig-shadow": F.shadow_figure(live.d), "shadow-verdict": F.shadow_verdict(live.d)}


def patch(live: Live) -> dict[str, Any]:
    return full(live) if live.d["new"] else {}


def waiting(message: Any, live: Live) -> dict[str, Any]:
    return {"fig-shadow": message, "shadow-verdict": ""}


PANEL = Panel(id="shadow", layout=layout, row="workers", outputs=(("fig-shadow", "figure"), ("shadow-verdict", "children")),
              full=full, patch=patch, waiting=waiting)
