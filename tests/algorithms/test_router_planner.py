"""The Router / Planner split (engine/algorithms/grouping.py, issue #16): what the Spark engine ships to its
executors every micro-batch is the router alone, and it routes exactly as the planner's router."""

import numpy as np
import pytest

from skewlab.engine.algorithms import registry
from skewlab.engine.control.controller import Controller
from skewlab.engine.algorithms.grouping import IntervalStats, Plan, Planner, Router
from skewlab.engine.algorithms.keys import Vocabulary
from skewlab.engine.config.params import ParamError
from skewlab.engine.algorithms.rebalancers.lossy_counting import LossyCounter, SlidingLossyCounter
from skewlab.engine.algorithms.source_routing import route_sources
from skewlab.engine.runtimes.spark.topology import RoutingSnapshot

K = 400
WORKERS = 4
SOURCES = 3
#: types that only a planner may hold (statistics for planning, plans, the planner itself)
PLANNER_ONLY_TYPES = (Planner, LossyCounter, SlidingLossyCounter, Plan, IntervalStats, np.random.Generator)


@pytest.fixture(scope="module")
def vocab():
    return Vocabulary([f"k{i}" for i in range(K)])


def zipf_batches(n_batches, size, z=1.3, seed=11):
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, K + 1) ** z
    cdf = np.cumsum(p / p.sum())
    return [np.searchsorted(cdf, rng.random(size)).astype(np.int64) for _ in range(n_batches)]


def run_planner(name: str, vocab: Vocabulary) -> Controller:
    """A controller that ran ``name`` over skewed intervals (rebalancers have planned and applied)."""
    c = Controller(registry.create(name, WORKERS, SOURCES, seed=5), vocab, window=3)
    for ids in zipf_batches(4, 3000):
        workers, _ = route_sources(c.planner.router, vocab.fps[ids], SOURCES)
        c.end_interval(ids, workers)
    return c


def reachable(obj, seen=None):
    """Every object reachable from ``obj`` through instance dicts, slots and containers."""
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, (np.ndarray, str, bytes, int, float, bool, type(None), type)):
        return
    seen.add(id(obj))
    yield obj
    if isinstance(obj, dict):
        children = list(obj.keys()) + list(obj.values())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        children = list(obj)
    else:
        children = list(getattr(obj, "__dict__", {}).values())
        for klass in type(obj).__mro__:
            for slot in getattr(klass, "__slots__", ()):
                if hasattr(obj, slot):
                    children.append(getattr(obj, slot))
    for child in children:
        yield from reachable(child, seen)


@pytest.mark.parametrize("name", registry.names())
def test_snapshot_ships_only_the_router_and_it_routes_like_the_planners(name, vocab):
    c = run_planner(name, vocab)
    planner = c.planner
    shipped = RoutingSnapshot.loads(RoutingSnapshot(7, planner.router).dumps()).router
    assert isinstance(shipped, Router) and type(shipped) is type(planner.router)
    leaked = [type(o).__name__ for o in reachable(shipped) if isinstance(o, PLANNER_ONLY_TYPES)]
    assert not leaked, f"{name}: planner state in the routing snapshot: {leaked}"
    planner_only = set(vars(planner)) - {"router", "p", "seed"}
    assert not planner_only & set(vars(shipped)), f"{name}: {planner_only & set(vars(shipped))}"
    if planner.rebalancing and name not in ("clb", "uhlb"):  # (CLB plans after m windows; UHLB may keep h)
        assert c.migrations, f"{name} never rebalanced: the checks above saw no applied plan"
    # executors route with the copy, the driver's router stays as it was: same decisions, batch by batch
    reference = RoutingSnapshot.loads(RoutingSnapshot(7, planner.router).dumps()).router
    for i, ids in enumerate(zipf_batches(3, 1500, seed=23)):
        for s in range(SOURCES):
            fps = vocab.fps[ids[s::SOURCES]]
            assert np.array_equal(shipped.route(fps, s), planner.router.route(fps, s)), (name, i, s)
    for s in range(SOURCES):  # the per-source state the tasks send back is the driver's own
        reference.set_source_state(s, shipped.source_state(s))
    fps = vocab.fps[np.arange(K)]
    for s in range(SOURCES):
        assert np.array_equal(reference.route(fps, s), planner.router.route(fps, s)), (name, s)


@pytest.mark.parametrize("name", ["dchoices", "llfd", "scan", "elb"])
def test_set_params_validates_and_keeps_the_planner(name, vocab):
    c = run_planner(name, vocab)
    planner = c.planner
    before = dict(planner.p)
    with pytest.raises(ParamError):
        planner.set_params({"no_such_param": 1})
    assert planner.p == before and c.planner is planner
    key = planner.params[0].name
    value = planner.params[0].default
    event = c.set_params({key: value})
    assert c.planner is planner and planner.p[key] == value and event["kind"] == "params"


@pytest.mark.parametrize("name", ["llfd", "mintable", "scan", "readj"])
def test_set_params_keeps_a_rebalancers_routing_table(name, vocab):
    c = run_planner(name, vocab)
    table = c.planner.table.as_dict()
    assert table, f"{name} built no routing table"
    event = c.set_params({"theta_max": 0.5})
    assert c.planner.table.as_dict() == table and event["keys"] == 0 and c.planner.p["theta_max"] == 0.5
