"""The shape every chart over the run's intervals shares (imbalance, throughput, routing table, migrations):
one graph of :data:`skewlab.dashboard.figures.TIME_FIGURES` ``[name]``, drawn from the window by
:func:`~skewlab.dashboard.figures.time_figure` and extended on each tick by
:func:`~skewlab.dashboard.figures.time_patch` (new points, event labels of the last ``LABELLED_EVENTS``)."""

from __future__ import annotations

from typing import Any, Callable

from skewlab.dashboard import cards
from skewlab.dashboard import figures as F
from skewlab.dashboard.panels.panel import Live, Panel

__all__ = ["time_chart"]


def time_chart(name: str, *, title: str, metric: str, height: int, row: str | None = None, extra: Callable[[], Any] | None = None,
               visible: bool = False, register: Any = None) -> Panel:
    """The panel of time figure ``name`` in a card ``title`` (graph id ``fig-<name>``, PNG file
    ``skewlab-<name>``); ``extra()``: what the card's head shows beside the title; ``visible``: the figure shows the imbalance metrics picked (``Live.visible``)."""
    gid = f"fig-{name}"

    def layout(initial: Any) -> Any:
        return cards.card(title, [cards.graph(gid, f"skewlab-{name}", height, initial)], metric=metric,
                          extra=extra() if extra is not None else None)

    def full(live: Live) -> dict[str, Any]:
        return {gid: F.time_figure(name, live.d, live.visible) if visible else F.time_figure(name, live.d)}

    def patch(live: Live) -> dict[str, Any]:
        return {gid: F.time_patch(name, live.delta)}

    return Panel(id=name, layout=layout, row=row, outputs=((gid, "figure"),), full=full, patch=patch,
                 register=register)
