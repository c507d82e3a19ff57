"""The "Per-worker history" panel: worker × interval heat maps of relative load and task time (and of
state bytes when reported, on a colour scale fixed at the full draw: the cursor's ``state_top``), with
the time-balance figure of :mod:`skewlab.dashboard.panels.time_balance` below them.  A change of the
worker view keeps it as drawn: it shows every worker whatever the view (thousands of cells)."""

from __future__ import annotations

from typing import Any, Mapping

from dash import no_update

from skewlab.dashboard import cards
from skewlab.dashboard import figures as F
from skewlab.dashboard.panels import time_balance
from skewlab.dashboard.panels.panel import Live, Panel

__all__ = ["PANEL"]


def layout(initial: Mapping[str, Any]) -> Any:
    return cards.card("Per-worker history", [cards.graph("fig-heat", "skewlab-worker-history", 360, initial),
                                             time_balance.graph()], metric="worker_load")


def cursor(live: Live) -> dict[str, Any]:
    """``state_top``: the top of the state-bytes colour scale the heat map was drawn with."""
    if live.view_only:
        return {"state_top": live.previous.get("state_top")}
    return {"state_top": F.state_scale_top(live.d.get("heat") or {})}


def full(live: Live) -> dict[str, Any]:
    return {"fig-heat": no_update if live.view_only else F.worker_heat_figure(live.d)}


def patch(live: Live) -> dict[str, Any]:
    return {"fig-heat": F.worker_heat_patch(live.delta, live.previous.get("state_top"))}


def waiting(message: Any, live: Live) -> dict[str, Any]:
    return {"fig-heat": no_update if live.view_only else message}


PANEL = Panel(id="worker-history", layout=layout, outputs=(("fig-heat", "figure"),), cursor=cursor, full=full,
              patch=patch, waiting=waiting)
