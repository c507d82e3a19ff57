"""Controller (engine/control/controller.py) after the driver speed-up: statistics, metric rows and summaries
equal the straightforward recomputation from the keyed state; the controller, its state and its
vocabulary survive a snapshot (engine/io/checkpoint.py) bit for bit and keep running identically."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewlab.engine.algorithms import registry
from skewlab.engine.io.checkpoint import SnapshotStore
from skewlab.engine.control.controller import Controller
from skewlab.engine.algorithms.keys import Vocabulary
from skewlab.engine.control.state import decode, encode

K = 300


def ref_stats(c: Controller, interval_codes, interval_counts):
    """The pre-speed-up Controller.stats, recomputed from the slots with np.unique/np.add.at."""
    slots = list(c.state.slots)
    if slots:
        u, inv = np.unique(np.concatenate([s[0] for s in slots]), return_inverse=True)
        wc = np.bincount(inv, weights=np.concatenate([s[1] for s in slots]), minlength=u.size).astype(np.int64)
    else:
        u, wc = np.zeros(0, np.int64), np.zeros(0, np.int64)
    keys_w, _ = decode(u)
    key_ids, inv = np.unique(keys_w, return_inverse=True)
    size = np.bincount(inv, weights=wc, minlength=key_ids.size)
    ik, _ = decode(interval_codes)
    count = np.zeros(key_ids.size, np.int64)
    np.add.at(count, np.searchsorted(key_ids, ik), interval_counts)
    if c.cost_model == "linear":
        cost = count.astype(np.float64)
    else:
        cost = np.zeros(key_ids.size)
        s_pair = wc[np.searchsorted(u, interval_codes)]
        np.add.at(cost, np.searchsorted(key_ids, ik), interval_counts * s_pair.astype(np.float64))
    return key_ids, size, count, cost


def stream(seed, n_batches, size, skew=1.1):
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, K + 1) ** skew
    cdf = np.cumsum(p / p.sum())
    return [np.minimum(np.searchsorted(cdf, rng.random(size)), K - 1).astype(np.int64) for _ in range(n_batches)]


def pair_aggregates(ids, workers, rng):
    """Per-(worker, key) counts in a shuffled order, as the Spark workers return them."""
    codes = encode(ids, workers)
    u, n = np.unique(codes, return_counts=True)
    perm = rng.permutation(u.size)
    k, w = decode(u[perm])
    return k, w, n[perm]


@pytest.mark.parametrize("name,cost_model", [("hash", "linear"), ("pkg", "join"), ("mintable", "linear"),
                                             ("mixed", "join")])
def test_stats_and_rows_equal_recomputation(name, cost_model):
    vocab = Vocabulary([f"k{i}" for i in range(K)])
    c = Controller(registry.create(name, 4, 2, seed=3), vocab, window=3, cost_model=cost_model)
    rng = np.random.default_rng(0)
    seen = set()
    for b, ids in enumerate(stream(1, 9, 4000)):
        workers = np.concatenate([c.planner.router.route(vocab.fps[ids[s::2]], s) for s in range(2)])
        ids = np.concatenate([ids[s::2] for s in range(2)])
        k, w, n = pair_aggregates(ids, workers, rng)
        if b == 5:
            c.resize(5)
        row = c.end_interval(k, w, n)
        codes = np.unique(encode(k, w))
        counts = np.array([n[(encode(k, w) == x)].sum() for x in codes])
        seen |= set(codes.tolist())
        assert row["tuples"] == int(n.sum())
        assert row["distinct_keys"] == np.unique(k).size
        assert row["replication"] == codes.size / np.unique(k).size
        stats = c.stats(codes, counts)
        key_ids, size, count, cost = ref_stats(c, codes, counts)
        assert np.array_equal(stats.key_ids, key_ids) and np.array_equal(stats.size, size)
        assert np.array_equal(stats.count, count) and np.array_equal(stats.cost, cost)
        assert row["total_state"] == float(size.sum())
    s = c.summary()
    assert s["replication"] == len(seen) / len({x >> 20 for x in seen})
    assert s["messages"] == 9 * 4000


def test_controller_snapshot_roundtrip_continues_identically(tmp_path):
    vocab = Vocabulary()
    names = np.array([f"user-{i}-ü" if i % 7 == 0 else f"user-{i}" for i in range(K)] + [""], dtype=object)
    c = Controller(registry.create("mintable", 3, 2, seed=1), vocab, window=2)
    batches = stream(2, 6, 3000)
    store = SnapshotStore(tmp_path, keep=2)
    for b, ids in enumerate(batches[:4]):
        kid = vocab.encode(names[ids].tolist())
        c.end_interval(kid, c.planner.router.route(vocab.fps[kid], b % 2))
        store.save(b, {"controller": c, "shadow": None, "run_id": 1})
    batch, snap = store.latest()
    r = snap["controller"]
    assert batch == 3 and r is not c
    assert r.vocab.names == vocab.names and r.vocab._index == vocab._index and np.array_equal(r.vocab.fps, vocab.fps)
    assert r.results() == c.results() and r.summary() == c.summary()
    for x, y in zip(r.state.merged(), c.state.merged()):
        assert np.array_equal(x, y)
    for b, ids in enumerate(batches[4:], start=4):
        rows = []
        for ctl in (c, r):
            kid = ctl.vocab.encode(names[ids].tolist())
            row = ctl.end_interval(kid, ctl.planner.router.route(ctl.vocab.fps[kid], b % 2))
            rows.append({k: v for k, v in row.items() if k != "plan_seconds"})
        assert rows[0] == rows[1]
    assert r.results() == c.results()
    # the snapshot stays compact: the packed state and names, not 16 bytes per slot entry (plus the
    # Fang planner's decayed cost of each recent key: 16 bytes, FangRebalancer.observe)
    raw = sum(a.nbytes + b.nbytes for a, b in c.state.slots)
    assert (tmp_path / "engine-3.pkl").stat().st_size < raw + 10 * len(vocab) + 8 * len(vocab) + 16 * len(vocab) + 50_000


@given(st.lists(st.text(max_size=6), max_size=30), st.lists(st.text(max_size=6), max_size=10))
@settings(max_examples=80, deadline=None)
def test_vocabulary_pickle_roundtrip(first, more):
    first = [s for s in first if not any(0xD800 <= ord(ch) <= 0xDFFF for ch in s)]
    more = [s for s in more if not any(0xD800 <= ord(ch) <= 0xDFFF for ch in s)]
    v = Vocabulary(first)
    a = pickle.loads(pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL))
    v.encode(more)  # the packed cache is extended, not rebuilt
    b = pickle.loads(pickle.dumps(v))
    a.encode(more)
    for x in (a, b):
        assert x.names == v.names and x._index == v._index and np.array_equal(x.fps, v.fps)
        assert x.fps.dtype == np.uint64 and len(x) == len(v)
        assert x.encode(more).tolist() == v.encode(more).tolist()


def test_empty_controller_pickles_and_degenerate_intervals(tmp_path):
    c = Controller(registry.create("hash", 1), Vocabulary(["solo"]), window=1)
    back = pickle.loads(pickle.dumps(c))
    assert back.summary() == c.summary()
    for ctl in (c, back):
        ctl.end_interval(np.zeros(0, np.int64), np.zeros(0, np.int64))
        ctl.end_interval(np.zeros(5, np.int64), np.zeros(5, np.int64))
    assert back.results() == c.results() == {"solo": 5}
    assert back.summary() == c.summary()


def test_move_orders_follow_the_statistics_and_name_the_planning_algorithm():
    """With ``track_orders`` a rebalance records (key, holder, target) for every key whose window lies
    elsewhere than its new worker, and its migration names the algorithm that planned it."""
    vocab = Vocabulary()
    c = Controller(registry.create("mixed", 4, 1, 0, {"theta_max": 0.01}), vocab, window=3)
    c.track_orders = True
    rng = np.random.default_rng(1)
    for _ in range(4):
        ids = np.asarray(vocab.encode([f"k{int(x)}" for x in rng.zipf(1.3, 3000) % 300]))
        c.end_interval(ids, c.planner.router.route(vocab.fps[ids], 0))
    keys, holders, targets = c.drain_orders()
    assert c.migrations and keys.size and all(m.detail["algorithm"] == "mixed" for m in c.migrations
                                              if m.reason == "rebalance")
    assert np.all(holders != targets) and np.array_equal(targets, c.planner.router.owner(vocab.fps[keys]))
    assert all(x.size == 0 for x in c.drain_orders())  # drained
