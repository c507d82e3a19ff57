"""The panels of the dashboard's live view, in page order: :data:`PANELS`.

Each panel is one module that builds one :class:`~skewlab.dashboard.panels.panel.Panel` (its card,
what it draws on the live refresh and how it extends that on a tick, its own callbacks); the page and
the app take everything about the panels from this list.  A new panel is one module and one line here
(docs/add-a-panel.md).  The live view's frame — KPI strip, operator sidebar, commands, events — and
the "Runs & comparison" tab are the page's own (:mod:`skewlab.dashboard.layout`, :mod:`skewlab.dashboard.app`).
"""

from __future__ import annotations

from skewlab.dashboard.panels import (
    dead_letters,
    hot_keys,
    imbalance,
    migration_table,
    migrations,
    routing,
    shadow,
    throughput,
    time_balance,
    worker_history,
    worker_load,
)
from skewlab.dashboard.panels.panel import Live, Panel

__all__ = ["PANELS", "Live", "Panel"]

PANELS: list[Panel] = [
    imbalance.PANEL,
    worker_load.PANEL,
    shadow.PANEL,
    worker_history.PANEL,
    time_balance.PANEL,
    hot_keys.PANEL,
    throughput.PANEL,
    routing.PANEL,
    migrations.PANEL,
    migration_table.PANEL,
    dead_letters.PANEL,
]
