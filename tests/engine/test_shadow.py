import numpy as np

from skewlab.engine.algorithms import registry
from skewlab.engine.algorithms.keys import Vocabulary
from skewlab.engine.runtimes.local import LocalRuntime
from skewlab.engine.control.shadow import ShadowEvaluator, default_shadow_names


def test_default_shadow_set_excludes_live_and_split_key_for_join():
    names = default_shadow_names("hash", "count")
    assert "hash" not in names and "shuffle" in names
    join = default_shadow_names("hash", "join")
    assert all(registry.get(n).single_owner for n in join)


def test_shadow_hash_matches_live_hash_exactly():
    v = Vocabulary([f"k{i}" for i in range(500)])
    rng = np.random.default_rng(0)
    p = 1 / np.arange(1, 501) ** 1.3
    batches = [rng.choice(500, size=4000, p=p / p.sum()) for _ in range(3)]
    live = LocalRuntime(registry.create("hash", 6), v, window=2)
    shadow = ShadowEvaluator(["hash", "shuffle"], v, n_workers=6, max_tuples=0)
    for b in batches:
        row = live.step(b)
        keys, counts = np.unique(b, return_counts=True)
        rows = {r["algorithm"]: r for r in shadow.evaluate(keys, counts)}
        # key grouping does not depend on order: the shadow equals the live run
        assert rows["hash"]["imbalance"] == row["imbalance"]
        assert rows["hash"]["replication"] == 1.0
        assert rows["shuffle"]["imbalance"] < row["imbalance"]
        assert rows["shuffle"]["replication"] > 1.0


def test_shadow_scales_large_intervals_and_resizes():
    v = Vocabulary(["a", "b", "c"])
    s = ShadowEvaluator(["hash"], v, n_workers=2, max_tuples=1000)
    s.evaluate(np.array([0, 1, 2]), np.array([100000, 50000, 50000]))
    assert 900 <= s.controllers["hash"].intervals[-1]["tuples"] <= 1100
    s.resize(5)
    assert s.controllers["hash"].n_workers == 5
    s.evaluate(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert s.controllers["hash"].intervals[-1]["tuples"] == 0


def test_waiting_shadows_join_when_ready_set_up_like_the_live_controller():
    import pickle

    from skewlab.engine.control.controller import Controller

    v = Vocabulary(["a", "b", "c"])
    live = Controller(registry.create("hash", 7, 3, 5), v, window=4)
    s = ShadowEvaluator([], v, n_workers=2, waiting=["pkg", "shuffle"])
    assert s.evaluate(np.array([0, 1]), np.array([3, 4])) == [] and s.waiting == ["pkg", "shuffle"]
    assert s.join({"shuffle": 1.0}, like=live) == ["shuffle"] and s.waiting == ["pkg"]
    c = s.controllers["shuffle"]
    assert (c.n_workers, c.planner.n_sources, c.planner.seed, c.window) == (7, 3, 5, 4)
    s = pickle.loads(pickle.dumps(s))  # the engine's snapshot keeps who is still waiting
    assert s.join(None, like=live) == ["pkg"] and s.waiting == [] and s.names == ["shuffle", "pkg"]
    assert {r["algorithm"] for r in s.evaluate(np.array([0, 1]), np.array([3, 4]))} == {"shuffle", "pkg"}


def test_background_warmup_reports_each_grouping_ready_in_order():
    from skewlab.engine.runtimes.background_warmup import BackgroundWarmup

    w = BackgroundWarmup(["hash", "shuffle"])
    try:
        assert w.wait_for("shuffle")
        ready = w.ready()
        assert set(ready) == {"hash", "shuffle"} and ready["hash"] <= ready["shuffle"]
    finally:
        w.close()
    assert w.finished


def test_background_warmup_reports_progress_while_a_grouping_compiles(tmp_path, monkeypatch):
    """The engine's console says the wait goes on (a line every ``every`` seconds) on a cold cache."""
    from skewlab.engine.runtimes.background_warmup import BackgroundWarmup

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))  # cold: the child compiles, which takes seconds
    waited: list[float] = []
    w = BackgroundWarmup(["pkg"])
    try:
        assert w.wait_for("pkg", progress=waited.append, every=0.5)
    finally:
        w.close()
    assert waited and waited == sorted(waited) and waited[0] >= 0.5


def test_background_warmup_tells_a_cached_grouping_from_one_that_compiles(tmp_path, monkeypatch):
    """What the engine decides the interim hash routing on: with the installed (warm) cache the child
    reports the grouping ready without compiling it; with an empty cache it says ``compiling`` first."""
    from skewlab.engine.runtimes.background_warmup import BackgroundWarmup

    said: list[str] = []  # issue 38 item 7: the engine says "compiling" from on_compiling, only when it does
    warm = BackgroundWarmup(["hash", "pkg"], on_compiling=said.append)
    try:
        assert warm.wait_until_known("pkg") and not warm.compiling()
        assert warm.wait_for("pkg") and said == []
    finally:
        warm.close()
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    cold = BackgroundWarmup(["hash", "pkg"], on_compiling=said.append)
    try:
        cold.wait_until_known("pkg")
        assert "pkg" in cold.compiling() and "hash" in cold.compiling()
        assert cold.wait_for("pkg")
    finally:
        cold.close()
    assert said == ["hash", "pkg"]
