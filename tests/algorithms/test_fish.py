"""FISH (arXiv 1806.00760) as built in engine/algorithms/groupings/fish.py: epoch hot sets with
decayed hotness, hot keys on d_k ring candidates growing with hotness, consistent hashing for the rest."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from skewlab.engine.algorithms import registry
from skewlab.engine.algorithms.groupings.fish import fish_choices, ring_candidates
from skewlab.engine.algorithms.keys import Vocabulary

N = 10
FPS = Vocabulary([str(i) for i in range(2000)]).fps


def zipf(m: int, z: float, seed: int, k: int = 2000) -> np.ndarray:
    p = 1.0 / np.arange(1, k + 1) ** z
    return FPS[np.random.default_rng(seed).choice(k, size=m, p=p / p.sum())]


def imbalance(out: np.ndarray, n: int = N) -> float:
    loads = np.bincount(out, minlength=n)
    return float(loads.max() / loads.mean() - 1.0)


def test_choices_grow_with_hotness():
    # d_k = min(n, max(2, ceil(spread·p·n))): at n = 10, spread 2
    assert fish_choices(0.02, 10, 2.0) == 2  # just hot (θ = 1/(5n))
    assert fish_choices(0.15, 10, 2.0) == 3
    assert fish_choices(0.3, 10, 2.0) == 6
    assert fish_choices(0.5, 10, 2.0) == 10
    assert fish_choices(0.9, 10, 2.0) == 10
    ds = [fish_choices(p, 50, 2.0) for p in np.linspace(0.004, 1, 200)]
    assert ds == sorted(ds)


def test_first_epoch_is_consistent_hashing():
    """No key is hot before a source's first epoch ends: FISH routes as the consistent-hash ring."""
    fish = registry.create("fish", N, params={"epoch": 5000}).router
    ring = registry.create("consistent", N).router
    fps = zipf(5000, 1.4, 1)
    assert np.array_equal(fish.route(fps), ring.route(fps))


def test_cold_keys_stay_on_their_ring_owner_hot_keys_spread_over_their_candidates():
    router = registry.create("fish", N, params={"epoch": 2000}).router
    fps = zipf(40_000, 1.4, 2)
    first = router.route(fps[:-2000])
    hot, d = router.hot(0)  # the hot set of the last epoch
    top = FPS[0]
    cands = router.candidates(int(top))
    out = np.concatenate([first, router.route(fps[-2000:])])
    assert hot.size > 0 and d.max() > 2  # the top key is hot enough for more than two choices
    owner = registry.create("consistent", N).router.route(fps)
    late = np.arange(fps.size) >= 2000  # after the first epoch
    cold_keys = set(np.unique(fps).tolist()) - set(hot.tolist())
    # keys never hot after the first epoch: the ring owner (hot sets change per epoch, so only
    # keys cold in every epoch are checked: those outside the top 100)
    rare = np.isin(fps, FPS[100:]) & late
    assert np.array_equal(out[rare], owner[rare]) and cold_keys
    # the hottest key: exactly its d candidates, the first clockwise distinct workers of the ring
    i = int(np.searchsorted(hot, top))
    assert cands.size == d[i] and len(set(cands.tolist())) == d[i]
    assert cands[0] == owner[fps == top][0]
    last_epoch = np.arange(fps.size) >= fps.size - 2000
    assert set(out[(fps == top) & last_epoch].tolist()) == set(cands.tolist())


def test_ring_candidates_are_the_clockwise_distinct_owners():
    ring = registry.create("consistent", N, params={"replicas": 4}).router.ring
    for fp in FPS[:20]:
        c = ring_candidates(ring, fp, N)
        assert sorted(c.tolist()) == list(range(N))
        assert c[0] == ring.lookup(np.array([fp]))[0]
        assert np.array_equal(ring_candidates(ring, fp, 3), c[:3])


def test_hotness_decays_between_epochs():
    """H_k(e) = α·H_k(e−1) + c_k(e): a burst key is hot after its epoch and cold once its decayed
    hotness falls below θ of the decayed total."""
    e = 1000
    router = registry.create("fish", N, params={"epoch": e, "decay": 0.5, "head_threshold": 0.05}).router
    burst = np.full(e, FPS[7], dtype=np.uint64)
    router.route(burst)
    assert router.hot(0)[0].tolist() == [FPS[7]]
    background = FPS[100:1100]  # 1000 keys once each: nothing hot
    # the background keys' counts of 1 decay to floor(0.5) = 0, so at the end of background epoch j
    # H_7 = ⌊1000·0.5^j⌋ (integer halvings) and the total is 1000 + H_7: key 7 is hot while
    # H_7 >= 0.05·(1000 + H_7), i.e. for j <= 4 (H_7 = 62 vs 53.1), not at j = 5 (31 vs 51.6)
    hot_after = []
    for _ in range(6):
        router.route(background)
        hot_after.append(FPS[7] in router.hot(0)[0])
    assert hot_after == [True, True, True, True, False, False]


def test_without_decay_an_old_burst_stays_hot():
    e = 1000
    router = registry.create("fish", N, params={"epoch": e, "decay": 1.0, "head_threshold": 0.05}).router
    router.route(np.full(e, FPS[7], dtype=np.uint64))
    for _ in range(6):
        router.route(FPS[100:1100])
    assert FPS[7] in router.hot(0)[0]


def test_batching_and_sources_do_not_change_routing():
    fps = zipf(30_000, 1.2, 3)
    whole = registry.create("fish", N, 2, params={"epoch": 1000}).router
    ref = whole.route(fps, 1)
    cut = registry.create("fish", N, 2, params={"epoch": 1000}).router
    rng = np.random.default_rng(0)
    bounds = np.sort(rng.choice(np.arange(1, fps.size), 40, replace=False))
    parts = []
    for a, b in zip(np.r_[0, bounds], np.r_[bounds, fps.size]):
        cut.route(zipf(100, 1.2, int(a)), 0)  # the other source's tuples do not touch source 1
        parts.append(cut.route(fps[a:b], 1))
    assert np.array_equal(np.concatenate(parts), ref)


def test_balances_zipf_better_than_consistent_and_pkg():
    fps = zipf(200_000, 1.4, 4)
    imb = {a: imbalance(registry.create(a, N).router.route(fps)) for a in ("consistent", "pkg", "fish")}
    assert imb["fish"] < imb["pkg"] < imb["consistent"]
    assert imb["fish"] < 0.15


def test_source_state_and_pickle_round_trip():
    fps = zipf(12_000, 1.3, 5)
    a = registry.create("fish", N, 2, params={"epoch": 1000}).router
    a.route(fps[:7000], 1)
    b = registry.create("fish", N, 2, params={"epoch": 1000}).router
    b.set_source_state(1, pickle.loads(pickle.dumps(a.source_state(1))))
    c = pickle.loads(pickle.dumps(a))
    ra = a.route(fps[7000:], 1)
    assert np.array_equal(b.route(fps[7000:], 1), ra)
    assert np.array_equal(c.route(fps[7000:], 1), ra)


def test_resize_keeps_the_hot_set_with_new_candidates():
    router = registry.create("fish", N, params={"epoch": 1000}).router
    router.route(zipf(5000, 1.5, 6))
    hot, _ = router.hot(0)
    router.resize(4)
    hot2, d2 = router.hot(0)
    assert np.array_equal(hot, hot2) and d2.max() <= 4
    out = router.route(zipf(3000, 1.5, 7))
    assert out.min() >= 0 and out.max() < 4


def test_params_are_validated():
    from skewlab.engine.config.params import ParamError

    with pytest.raises(ParamError):
        registry.create("fish", N, params={"decay": 0})
    with pytest.raises(ParamError):
        registry.create("fish", N, params={"spread": -1})
    g = registry.create("fish", N)
    assert g.router.epoch == 250 * N and g.router.theta == pytest.approx(1 / (5 * N))
    assert g.single_owner is False and g.router.owner(FPS[:3]) is None
