"""Load-balance metrics, named once and used everywhere (CLI, engine, storage, dashboard, benchmarks).

For per-worker loads ``L`` (tuples, or cost under a non-linear cost model) with mean ``L̄`` and total
``ΣL``:

=====================  ===============================================  ==============================
name                   definition                                       source
=====================  ===============================================  ==============================
imbalance              max_w L_w / L̄ − 1  (0 = perfect; headline)       skewlab
theta_max_observed     max_w |L_w − L̄| / L̄                              fang-hpdc17 Eq. 1 (θ(d))
seeds_imbalance        max_w L_w/ΣL − avg_w L_w/ΣL                      nasir-icde16 Sec. II, I(m)
load_variance          var_w(L_w)  (population)                         guo-zhou-europar17 (var(L))
load_stddev            std_w(L_w)  (population)
load_stddev_pct        std_w(100 · L_w/ΣL)                              dalabasmaz-dkg (StdDev)
replication            distinct (key, worker) pairs / distinct keys      nasir-icde16 memory; DKG DistCost
=====================  ===============================================  ==============================

All functions return 0.0 (not NaN) for empty or all-zero loads.
"""

from __future__ import annotations

import numpy as np

__all__ = ["METRIC_DEFINITIONS", "format_rate", "load_metrics", "replication"]

METRIC_DEFINITIONS: dict[str, str] = {
    "imbalance": "max_w L_w / mean_w L_w − 1 (0 = perfectly balanced)",
    "theta_max_observed": "max_w |L_w − L̄| / L̄ (Fang et al. θ)",
    "seeds_imbalance": "max_w ℓ_w − mean_w ℓ_w with ℓ_w = L_w / Σ L (Nasir et al. I)",
    "load_variance": "population variance of L_w",
    "load_stddev": "population standard deviation of L_w",
    "load_stddev_pct": "standard deviation of 100·L_w/ΣL (Dalabasmaz & Can StdDev)",
    "replication": "distinct (key, worker) pairs / distinct keys (1 = key grouping; DKG DistCost)",
    "routing_table_size": "entries in the explicit routing table A",
    "migration_cost": "state moved / total state (per interval; cumulative: Σ moved / Σ total)",
    "plan_seconds": "wall time spent computing rebalancing plans",
    "tuples_per_second": "routing throughput of the grouping alone (tuples / time inside route())",
}


def load_metrics(loads: np.ndarray) -> dict[str, float]:
    """Every load-balance metric of one load vector (see the module table)."""
    L = np.asarray(loads, dtype=np.float64)
    out = {
        "imbalance": 0.0,
        "theta_max_observed": 0.0,
        "seeds_imbalance": 0.0,
        "load_variance": 0.0,
        "load_stddev": 0.0,
        "load_stddev_pct": 0.0,
    }
    if L.size == 0:
        return out
    total = float(L.sum())
    mean = total / L.size
    out["load_variance"] = float(L.var())
    out["load_stddev"] = float(L.std())
    if mean <= 0:
        return out
    out["imbalance"] = float(L.max() / mean - 1.0)
    out["theta_max_observed"] = float(np.max(np.abs(L - mean)) / mean)
    share = L / total
    out["seeds_imbalance"] = float(share.max() - share.mean())
    out["load_stddev_pct"] = float((100.0 * share).std())
    return out


def replication(key_ids: np.ndarray, workers: np.ndarray) -> float:
    """Mean number of distinct workers per key over the given (key, worker) occurrences."""
    key_ids = np.asarray(key_ids, dtype=np.int64)
    if key_ids.size == 0:
        return 0.0
    pairs = np.unique(key_ids * np.int64(1 << 20) + np.asarray(workers, dtype=np.int64))
    keys = np.unique(key_ids)
    return float(pairs.size / keys.size)


def format_rate(per_second: float | None, unit: str = "tuples/s") -> str:
    """A rate for a status line: ``850 tuples/s``, ``12.3k tuples/s``, ``4.56M tuples/s`` (3 significant digits)."""
    if per_second is None:
        return f"– {unit}"
    v = float(per_second)
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale * 0.9995:
            return f"{v / scale:.3g}{suffix} {unit}"
    return f"{v:.0f} {unit}"
