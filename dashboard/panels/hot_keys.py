"""The "Hot keys" panel: the heaviest keys of the latest interval and their share of the load
(:func:`skewlab.dashboard.figures.hot_keys_figure`); drawn again on each tick with news."""

from __future__ import annotations

from typing import Any, Mapping

from skewlab.dashboard import cards
from skewlab.dashboard import figures as F
from skewlab.dashboard.panels.panel import Live, Panel

__all__ = ["PANEL"]


def layout(initial: Mapping[str, Any]) -> Any:
    return cards.card("Hot keys", [cards.graph("fig-hotkeys", "skewlab-hot-keys", 300, initial)], metric="hot_key_share")


def full(live: Live) -> dict[str, Any]:
    return {"fig-hotkeys": F.hot_keys_figure(live.d)}


def patch(live: Live) -> dict[str, Any]:
    return full(live) if live.d["new"] else {}


PANEL = Panel(id="hot-keys", layout=layout, row="hot-keys", outputs=(("fig-hotkeys", "figure"),), full=full,
              patch=patch)
