"""What a panel of the live view is: :class:`Panel`, and :class:`Live`, what a panel draws with.

A panel is one module that builds one :class:`Panel` (its ``PANEL``), listed once in
:data:`skewlab.dashboard.panels.PANELS`; the page (:func:`skewlab.dashboard.layout.build_layout`) and
the app (:func:`skewlab.dashboard.app.create_app`) read nothing else about it.  A panel draws in one
or both of two ways:

* **on the live refresh** — the page's one callback on ``tick`` / ``run-select`` / ``worker-view``
  that loads the run once per tick (:meth:`skewlab.dashboard.data.DashboardData.load`) and keeps a
  cursor of what the figures show: the panel lists the ``outputs`` it fills there and gives ``full``
  (draw from the whole window: page load, a change of run or view, a tab that fell behind) and
  ``patch`` (extend what is drawn with the delta of a tick, usually a ``dash.Patch``);
* **with callbacks of its own** (``register(app, data)``) — for what the shared load does not read
  (e.g. the dead letters) or for its own controls (e.g. the imbalance chart's metric picker).

The live refresh reads two controls of panels by id: the worker view (``worker-view``, in the
per-worker load panel's card) and the imbalance metrics picked (``imb-metrics``, in the imbalance
panel's card); a panel sees them as :attr:`Live.view` and :attr:`Live.visible`, and the page needs both
panels.  Docs: docs/add-a-panel.md walks through a panel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

__all__ = ["Live", "Panel"]


@dataclass
class Live:
    """One call of the live refresh, as a panel's ``cursor`` / ``full`` / ``patch`` / ``waiting`` sees it.

    ``d``: what :meth:`~skewlab.dashboard.data.DashboardData.load` returned — the whole window on a full
    draw, only the new intervals and events on a patch; ``delta``: on a patch, ``d`` with the event labels
    the time axes show (``label_events``, ``label_span``); ``view``: the worker view (auto / top / all);
    ``visible``: the imbalance metrics picked; ``previous``: the cursor the page sent (empty on page load);
    ``cursor``: the cursor this call sends back — a panel that remembers something between ticks adds
    its fields here (``cursor`` on a full draw, or in ``patch``); ``view_only``: a full draw only because
    the worker view changed on the same run.
    """

    d: Mapping[str, Any]
    view: str = "auto"
    visible: Sequence[str] | None = None
    previous: Mapping[str, Any] = field(default_factory=dict)
    cursor: dict[str, Any] = field(default_factory=dict)
    view_only: bool = False
    delta: Mapping[str, Any] | None = None


#: A panel's function of the live refresh: outputs by component id.
Draw = Callable[[Live], Mapping[str, Any]]


@dataclass(frozen=True)
class Panel:
    """One panel of the live view.

    ``id``: its name (the id of its card on the page, where it has one); ``layout(initial)``: its card,
    drawn with ``initial`` (the first render by component id, so the page shows data without waiting for
    a callback), or None for a panel drawn inside another panel's card; ``row``: panels next to each other
    in :data:`~skewlab.dashboard.panels.PANELS` with the same ``row`` sit side by side;
    ``outputs``: the (component id, property) pairs it fills on the live refresh; ``cursor(live)``: the
    fields it keeps in the cursor on a full draw (read back in ``live.previous`` on a patch);
    ``full(live)`` / ``patch(live)``: its outputs on a full draw / on a tick with news (leave out an
    output to keep what is drawn); ``waiting(message, live)``: its outputs while the run has no tuple yet
    (default: every figure says ``message``); ``register(app, data)``: adds its own callbacks.
    """

    id: str
    layout: Callable[[Mapping[str, Any]], Any] | None = None
    row: str | None = None
    outputs: tuple[tuple[str, str], ...] = ()
    cursor: Callable[[Live], Mapping[str, Any]] | None = None
    full: Draw | None = None
    patch: Draw | None = None
    waiting: Callable[[Any, Live], Mapping[str, Any]] | None = None
    register: Callable[[Any, Any], None] | None = None

    def waiting_outputs(self, message: Any, live: Live) -> Mapping[str, Any]:
        """Its outputs while the run has no tuple yet: ``waiting``, or ``message`` on each figure."""
        if self.waiting is not None:
            return self.waiting(message, live)
        return {cid: message for cid, prop in self.outputs if prop == "figure"}
