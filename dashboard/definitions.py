"""Metric definitions shown one hover away (panel titles, KPI cards, legend entries).

The load-balance metrics come from :data:`skewlab.engine.control.metrics.METRIC_DEFINITIONS` (one source of truth for
the CLI, the engine and the dashboard); this module adds the *window* each one is computed over and
defines the quantities only the dashboard shows (throughput, batch latency, worker-load bands, hot-key
share, the tolerance line, migration pause).
"""

from __future__ import annotations

from skewlab.engine.control.metrics import METRIC_DEFINITIONS

__all__ = ["DEFINITIONS", "LABELS", "definition"]

_PER_INTERVAL = "window: one interval (one micro-batch)"

#: Display names (axis titles, legends, KPI cards).
LABELS: dict[str, str] = {
    "imbalance": "imbalance",
    "theta_max_observed": "θ observed",
    "seeds_imbalance": "seeds' I",
    "theta_max": "θmax (target)",
    "bound": "best reachable",
    "replication": "replication",
    "routing_table_size": "routing table |A|",
    "amax": "Amax",
    "migration_cost": "migration cost",
    "state_moved": "state moved",
    "keys_moved": "keys moved",
    "pause_ms": "pause (ms)",
    "throughput": "throughput (tuples/s)",
    "batch_latency_ms": "batch latency (ms)",
    "worker_load": "worker load L_w",
    "load_bands": "worker-load bands",
    "tolerance": "tolerance (1+θmax)·L̄",
    "hot_key_share": "share of load",
    "plan_seconds": "plan time (s)",
    "n_workers": "workers",
}

DEFINITIONS: dict[str, str] = {
    **{k: f"{v}; {_PER_INTERVAL}" for k, v in METRIC_DEFINITIONS.items() if k != "migration_cost"},
    "migration_cost": "state moved / total keyed state, per interval (0 = nothing moved); window: one interval",
    "theta_max": "θmax: the rebalancer's imbalance tolerance; it acts when max_w |L_w − L̄| / L̄ > θmax "
                 "(Fang et al. Eq. 1); a parameter, not a measurement",
    "bound": "the best imbalance any grouping could reach in the interval: max(L̄, heaviest key's tuples) / L̄ − 1 "
             "for one owner per key, 0 (the mean) for a grouping that splits keys; the gap to the imbalance is "
             "what a better grouping could still gain (skewlab.dashboard.imbalance_bound); window: one interval",
    "amax": "Amax: the largest routing table the rebalancer may keep (Fang et al.); a parameter",
    "state_moved": "keyed state (window tuples) moved between workers by the migrations of an interval, and "
                   "(hover) the serialized state bytes that crossed to the new workers when the engine reports "
                   "them; window: one interval",
    "keys_moved": "number of keys whose owner changed in the migrations of an interval; window: one interval",
    "pause_ms": "time the moved keys were paused while their state moved (ms), summed over the interval's "
                "migrations, and (hover) the micro-batches their tuples were held at the new worker when the "
                "engine reports them; window: one interval",
    "throughput": "end-to-end tuples / batch processing time (tuples/s); window: one interval",
    "batch_latency_ms": "wall time to process one micro-batch, routing to metrics (ms); window: one interval",
    "worker_load": "L_w: load of worker w in the interval (tuples, or cost under the join cost model); "
                   "window: one interval",
    "load_bands": "min / p25 / median / p75 / max over workers of L_w, per interval",
    "tolerance": "(1 + θmax) · L̄: a worker above this line is overloaded (θmax of the live algorithm, "
                 "or 0.08 when it has none)",
    "hot_key_share": "tuples of the key / all tuples of the interval; workers = where its tuples went; "
                     "window: the latest interval",
    "shadow": "what-if: the same interval's per-key counts replayed through each other grouping "
              "(its own state, rebalancing and migration accounting); mean of the last few intervals",
    "n_workers": "number of workers n the keyed operator runs on",
    "dead_letters": "input records the engine could not read (no key, bad JSON, a missing or non-numeric "
                    "value field, ...), counted per interval and reason as recorded with the interval; the "
                    "samples are the latest records of each reason as text (skewlab.dashboard.dead_letters_panel)",
    "task_balance": "the busiest worker's task time / the mean task time in the interval (Spark's executorRunTime "
                    "of each worker's task): 1.0 = the time is as even as it can be; window: one interval",
    "outside_workers": "batch wall time − the busiest worker's task time: the part of the batch spent outside "
                       "the workers' operator (source scan, shuffle, merge stage, driver step), of the whole "
                       "batch; window: one interval",
}


def definition(name: str) -> str:
    """The hover text of a metric (``name`` if it has none)."""
    return DEFINITIONS.get(name, name)
