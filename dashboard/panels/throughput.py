"""The "Throughput & batch latency" panel: tuples per second and each batch's wall time, per interval
(:data:`skewlab.dashboard.figures.TIME_FIGURES` ``["throughput"]``)."""

from skewlab.dashboard.panels.time_chart import time_chart

PANEL = time_chart("throughput", title="Throughput & batch latency", metric="throughput", height=300,
                   row="hot-keys")
