"""The "Routing table vs Amax" panel: the routing table's entries |A| against the grouping's Amax, per
interval (:data:`skewlab.dashboard.figures.TIME_FIGURES` ``["routing"]``)."""

from skewlab.dashboard.panels.time_chart import time_chart

PANEL = time_chart("routing", title="Routing table vs Amax", metric="routing_table_size", height=260,
                   row="routing")
