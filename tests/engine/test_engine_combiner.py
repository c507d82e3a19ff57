"""The combiner in the source scan (:attr:`skewlab.engine.operators.KeyedOperator.combined`) on the Spark
engine: for every built-in operator that combines, a run with it and a run without it
(``EngineConfig.combine``) write the same (batch, key) results, equal to the windowed aggregate
recomputed in plain Python from the generator's keys and seeded values over Spark's offset log, through
a split-key grouping (dchoices) and a migration (the switch to the single-owner rebalancer ``mixed``);
the per-worker tuple counts the driver records are the tuples', not the combined rows'; the combiner
is written once for the query (``route_combiner``), not carried by the routing snapshots."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyspark")

from skewlab.engine.runtimes.spark import sources as S  # noqa: E402
from skewlab.engine.runtimes.spark.engine import EngineConfig, SparkEngine  # noqa: E402
from skewlab.engine.runtimes.spark.topology import RoutingSnapshot  # noqa: E402
from skewlab.storage import connect  # noqa: E402
from tests.engine_helpers import generator_keys_of  # noqa: E402
from tests.spark_truth import committed_ranges, window_batches  # noqa: E402

#: operator → the windowed result of a key's values, as the sink's (result, *columns)
AGGREGATES = {
    "count": lambda v: (len(v),),
    "sum": lambda v: (float(sum(v)),),
    "mean": lambda v: (sum(v) / len(v), len(v)),
    "min": lambda v: (float(min(v)),),
    "max": lambda v: (float(max(v)),),
}


def _run(tmp_path, operator: str, combine: bool):
    cfg = EngineConfig(source="generator", db=f"sqlite:///{tmp_path}/db.sqlite", checkpoint=str(tmp_path / "ckpt"),
                       sink=str(tmp_path / "sink"),
                       algorithm="dchoices", workers=3, max_workers=3, sources=2, interval=0.3, rate=0, max_per_batch=2000,
                       window=2, workload="zipf", workload_params={"keys": 80, "z": 1.4}, seed=5, shadow=[],
                       max_batches=5, operator=operator, combine=combine)

    def after(engine, batch_id):
        if batch_id == 1:
            engine.store.submit_command("set-algorithm", {"algorithm": "mixed", "params": {"theta_max": 0.05}})

    engine = SparkEngine(cfg, after_batch=after, log=lambda m: None)
    assert engine.run() == 0 and engine.snapshot.shares_split
    # the combiner is written once for the query, not carried by the batches' routing snapshots
    snap = RoutingSnapshot.loads(engine.driver.routes.read(engine.driver.routes.next_version()))
    assert "combiner" not in vars(snap)
    assert len(list((tmp_path / "ckpt" / "routes").glob("combiner-*.pkl"))) == (1 if combine else 0)
    assert engine.snapshot.controller.migrations, "the switch to mixed moved no key"
    t = engine.results.read().to_pydict()
    cols = [c for c in t if c not in ("batch", "key", "shares")]
    results = {(b, k): tuple(t[c][i] for c in cols) for i, (b, k) in enumerate(zip(t["batch"], t["key"]))}
    assert len(results) == len(t["key"]), "a (batch, key) was written twice"
    store = connect(cfg.db)
    try:
        tuples = {(int(r["batch_id"]), int(r["worker"])): int(r["tuples"] or 0)
                  for r in store.worker_metrics(engine.snapshot.run_id)}
    finally:
        store.close()
    return cfg, results, tuples


def _truth(cfg: EngineConfig, checkpoint, operator: str):
    """(batch, key) → the windowed aggregate, and batch → its tuples, from the offset log."""
    keys_of = generator_keys_of(cfg)
    ranges = committed_ranges(checkpoint)
    per_batch: dict[int, dict[str, list[float]]] = {}
    for b, (start, end) in ranges.items():
        per: dict[str, list[float]] = {}
        for p in end:
            s = start.get(p, 0)
            vals = S.generator_values(cfg.seed, p, np.arange(s, end[p])).tolist()
            for k, v in zip(keys_of(p, s, end[p]), vals):
                per.setdefault(k, []).append(v)
        per_batch[b] = per
    last = max(ranges)  # the last batch's moved keys' tuples wait for an import that never comes
    agg = AGGREGATES[operator]
    truth = {(b, k): agg([v for j in window_batches(per_batch, b, cfg.window) for v in per_batch[j].get(k, [])])
             for b, per in per_batch.items() if b < last for k in per}
    return truth, {b: sum(len(v) for v in per.values()) for b, per in per_batch.items()}


@pytest.mark.parametrize("operator", [o if o == "mean" else pytest.param(o, marks=pytest.mark.slow)
                                      for o in sorted(AGGREGATES)])
def test_combined_and_per_tuple_rows_give_the_same_results_and_loads(spark, tmp_path, operator):
    runs = {}
    for combine in (True, False):
        cfg, results, tuples = _run(tmp_path / str(combine), operator, combine)
        truth, batch_tuples = _truth(cfg, tmp_path / str(combine) / "ckpt", operator)
        got = {k: v for k, v in results.items() if k[0] <= max(b for b, _ in truth)}
        assert got == truth, f"combine={combine}: results differ from the offset log's truth"
        per_batch = {}
        for (b, _), n in tuples.items():
            per_batch[b] = per_batch.get(b, 0) + n
        assert per_batch == {b: n for b, n in batch_tuples.items() if n}, f"combine={combine}: worker tuples"
        runs[combine] = (committed_ranges(tmp_path / str(combine) / "ckpt"), got, tuples)
    (ranges_on, got_on, tuples_on), (ranges_off, got_off, tuples_off) = runs[True], runs[False]
    if ranges_on == ranges_off:  # the same batches: the same results and the same tuples per worker
        assert got_on == got_off and tuples_on == tuples_off
