"""The "Recent migration events" panel: the run's latest moves, newest first
(:func:`skewlab.dashboard.layout.migration_table` of :func:`skewlab.storage.moves.moves`), kept in the
cursor (``mig``) so a tick that did not read them again draws the KPI card of the last move from it."""

from __future__ import annotations

from typing import Any, Mapping

from dash import html

from skewlab.dashboard import cards
from skewlab.dashboard.layout import migration_table
from skewlab.dashboard.panels.panel import Live, Panel

__all__ = ["PANEL"]


def layout(initial: Mapping[str, Any]) -> Any:
    return cards.card("Recent migration events", [html.Div(initial.get("migration-table", migration_table([])),
                                                           id="migration-table", className="table-box")],
                      metric="migration_cost")


def cursor(live: Live) -> dict[str, Any]:
    return {"mig": list(live.d.get("migration_rows") or [])}


def full(live: Live) -> dict[str, Any]:
    return {"migration-table": migration_table(live.cursor["mig"])}


def patch(live: Live) -> dict[str, Any]:
    if not live.d["new"] or live.d.get("migration_rows") is None:  # read again only when a move is new
        return {}
    live.cursor["mig"] = list(live.d["migration_rows"])
    return full(live)


PANEL = Panel(id="migration-table", layout=layout, outputs=(("migration-table", "children"),), cursor=cursor,
              full=full, patch=patch, waiting=lambda message, live: full(live))
