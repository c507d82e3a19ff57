"""Default parameters on real traces (issue 25), run as a user runs them (10 workers, 2 sources,
5,000-tuple intervals): the ``movielens`` ratings keyed by user, where users rate in sessions, the
2013 NYC flights keyed by aircraft (``tailnum``) and the synthetic ``drift`` stream.  A change of a
default that makes a rebalancer worse than not rebalancing (median above its base's, or p90 above
1.05 × its base's), or W-Choices' head lag behind the bursts, fails here."""

from __future__ import annotations

import numpy as np
import pytest

from skewlab.bench.common import simulate
from skewlab.engine.algorithms import registry
from skewlab.engine.cli.simulate import SimulationConfig

WORKERS, INTERVAL = 10, 5_000
#: (workload, its parameters) of the bursty trace
USERS = ("movielens", {"column": "userId"})
AIRCRAFT = ("flights", {"column": "tailnum", "span": 0})
#: the synthetic ``drift`` stream of ``skewlab bench trace`` (200,000 tuples: 40 intervals)
DRIFT = ("drift", {})
DRIFT_MESSAGES = 200_000
REBALANCERS = [a for a in registry.names() if registry.get(a).rebalancing]


def run(algorithm: str, trace, seed: int = 0, plans_on: bool = True, **params) -> dict:
    workload, wparams = trace
    cfg = SimulationConfig(algorithm=algorithm, workers=WORKERS, sources=2, workload=workload,
                           workload_params=dict(wparams), interval_messages=INTERVAL, seed=seed, params=params,
                           messages=DRIFT_MESSAGES if trace is DRIFT else None)
    return simulate(cfg, plans_on=plans_on)


def per_interval(out: dict) -> tuple[float, float]:
    """Median and p90 of the per-interval imbalance (max/mean − 1)."""
    imb = np.array([i["imbalance"] for i in out["intervals"]])
    return float(np.median(imb)), float(np.percentile(imb, 90))


def assert_not_worse(algorithm: str, trace, seed: int) -> None:
    median, p90 = per_interval(run(algorithm, trace, seed))
    base_median, base_p90 = per_interval(run(algorithm, trace, seed, plans_on=False))  # its own base hash
    assert median <= base_median + 1e-12 and p90 <= 1.05 * base_p90 + 1e-12, (median, p90, base_median, base_p90)


#: seeds of the ``movielens`` and ``drift`` checks
SEEDS = tuple(range(8))
#: (rebalancer, seed) worse than their base on the ``movielens`` users with the defaults since the base
#: is plain hash's placement (issue 39; docs/results/traces-vs-hash.md): uhlb seed 1 has a median of
#: 1.242 against its base's 1.238, seed 6 1.298 against 1.238 (p90 equal): one adopted hash member
#: that beat the base on the intervals the gate had judged lost to it on the next bursts
USERS_KNOWN_WORSE = {("uhlb", 1), ("uhlb", 6)}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("algorithm", REBALANCERS)
def test_rebalancer_defaults_are_never_worse_than_not_rebalancing(algorithm, seed, request):
    """The whole ``movielens`` trace by user (21 intervals), seeds 0–7 (seed 1: llfd and readj
    exceeded their base's p90 before the gate judged tables against the base hash; llfd and mintable
    seed 5, minmig, mixed and mixed-bf seed 7 lost to it before the gate's least persistence,
    ``gate_min_persistence``).  The cases of :data:`USERS_KNOWN_WORSE` fail today (strict xfail)."""
    if (algorithm, seed) in USERS_KNOWN_WORSE:
        request.applymarker(pytest.mark.xfail(strict=True, reason="issue 39: uhlb seeds 1 and 6 on the users"))
    assert_not_worse(algorithm, USERS, seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", (0, 1))
@pytest.mark.parametrize("algorithm", REBALANCERS)
def test_rebalancer_defaults_are_never_worse_than_not_rebalancing_by_aircraft(algorithm, seed):
    """The whole flights trace by ``tailnum`` (67 intervals; seed 1: scan and redist had a higher median
    than their base before the gate judged tables against the base hash)."""
    assert_not_worse(algorithm, AIRCRAFT, seed)


#: (rebalancer, seed) that are worse than their base on ``drift`` with the defaults: scan seed 2, median
#: 0.878 against its base's 0.852, p90 equal, since the base is plain hash's placement (issue 39;
#: docs/results/traces-vs-hash.md).  Under the ring (docs/results/gate.md, "The gate on the record of the
#: tables, and a least persistence") they were scan seed 7 and uhlb seed 5; under the salted slot table
#: readj seed 4 and uhlb seed 5.
DRIFT_KNOWN_WORSE = {("scan", 2)}


#: seeds of the ``drift`` check in the default suite; the slow suite runs the others of :data:`SEEDS`
#: (the time they take: docs/design-notes.md, CI budget)
DRIFT_DEFAULT_SEEDS = SEEDS[:4]


@pytest.mark.parametrize("seed", [s if s in DRIFT_DEFAULT_SEEDS else pytest.param(s, marks=pytest.mark.slow)
                                  for s in SEEDS])
@pytest.mark.parametrize("algorithm", REBALANCERS)
def test_rebalancer_defaults_are_never_worse_than_not_rebalancing_on_drift(algorithm, seed, request):
    """The synthetic ``drift`` stream (its rank→key mapping shifts by one key every interval), seeds
    0–7 (4–7 in the slow suite).  The cases of :data:`DRIFT_KNOWN_WORSE` fail today (strict xfail: one
    that starts to pass fails here, so the list is kept exact)."""
    if (algorithm, seed) in DRIFT_KNOWN_WORSE:
        request.applymarker(pytest.mark.xfail(strict=True, reason="issue 25 item 2 open on drift (scan seed 2)"))
    assert_not_worse(algorithm, DRIFT, seed)


def test_gedik_plans_pass_the_gate_on_the_record_of_their_tables():
    """scan on ``drift``, seed 3: its plans realise a small share of their predicted gain on the next
    interval, so judged one by one (``gate_record=false``) they are skipped and the run's median is
    above its base's (0.822 against 0.802; seed 4 until the base became plain hash's placement, issue
    39); with ``gate_record`` (the Gedik family's default) plans whose cost the record of
    the tables against the base hash covers are executed, and the run is not worse than its base."""
    default = run("scan", DRIFT, seed=3)
    one_by_one = run("scan", DRIFT, seed=3, gate_record=False)
    base_median, base_p90 = per_interval(run("scan", DRIFT, seed=3, plans_on=False))
    assert registry.create("scan", WORKERS).p["gate_record"] is True
    assert registry.create("mixed", WORKERS).p["gate_record"] is False
    median, p90 = per_interval(default)
    assert median <= base_median and p90 <= 1.05 * base_p90, (median, p90, base_median, base_p90)
    worse_median, worse_p90 = per_interval(one_by_one)
    assert worse_median > base_median or worse_p90 > 1.05 * base_p90, (worse_median, worse_p90, base_median, base_p90)
    on_record = [r for r in default["intervals"] if r["rebalanced"]
                 and r["gate_horizon"] * r["gate_persistence"] * r["gate_gain"] <= r["gate_cost"]]
    assert on_record and all(-r["gate_horizon"] * r["gate_excess"] > r["gate_cost"] for r in on_record)


def test_skipped_gedik_plans_drop_the_stale_entries():
    """scan on ``drift``, seed 1: when the gate skips a construction, the explicit-hash entries it
    would place differently go back to the consistent hash (a migration noted "stale entries back to
    the base hash"), and the table shrinks by them."""
    out = run("scan", DRIFT, seed=1)
    notes = [e for e in out["events"] if e["kind"] == "rebalance" and e.get("note") == "stale entries back to the base hash"]
    assert notes and all(e["keys"] > 0 for e in notes)
    skipped = [r for r in out["intervals"] if r.get("rebalance_skipped")]
    assert any(r["migrated_keys"] > 0 and not r["back_to_base"] for r in skipped)


def test_the_gate_returns_to_the_base_hash_when_the_tables_lose():
    """uhlb on the bursty users, seed 1: the hash member it adopted did worse than the base (plain
    hash's placement) on the record, so the gate returned every substream to it (a migration noted
    "back to the base hash").  (No Fang or Gedik rebalancer returns there on seeds 0–7 since the base
    is plain hash's placement, issue 39; readj seed 2 under the salted slot table, readj seed 7 under
    the ring, llfd seed 1 and mixed-bf seed 2 before the Fang planners planned from decayed costs and
    the gate asked for a least persistence.)"""
    out = run("uhlb", USERS, seed=1)
    back = [r for r in out["intervals"] if r["back_to_base"]]
    assert back and all(r["routing_table_size"] == 0 and r["migration_cost"] > 0 for r in back)
    notes = [e for e in out["events"] if e["kind"] == "rebalance" and e.get("note") == "back to the base hash"]
    assert len(notes) == len(back)
    assert all(e["gate_excess"] > 0 for e in notes)


@pytest.mark.parametrize("algorithm", ("wchoices", "dchoices"))
def test_default_heads_follow_the_bursts(algorithm):
    """With the default recency decay the head of W-/D-Choices is the users active now: per-interval
    median within 0.02 of shuffle's 0 (counting since the start, as the paper does, W-Choices had
    0.47 and D-Choices 0.73)."""
    median, _ = per_interval(run(algorithm, USERS))
    paper_median, _ = per_interval(run(algorithm, USERS, decay=1.0))
    assert median <= 0.02 < paper_median, (median, paper_median)
