"""The "Migrations" panel: state moved and migration cost per interval
(:data:`skewlab.dashboard.figures.TIME_FIGURES` ``["migrations"]``)."""

from skewlab.dashboard.panels.time_chart import time_chart

PANEL = time_chart("migrations", title="Migrations", metric="state_moved", height=300, row="routing")
