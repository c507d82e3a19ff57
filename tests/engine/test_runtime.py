"""Local runtime + controller: state never loses tuples, merged results equal ground truth for every
registered algorithm, including across algorithm switches and worker-count changes."""

import re

import numpy as np
import pytest

from skewlab.engine.algorithms import registry
from skewlab.engine.control.commands import ScheduledCommand
from skewlab.engine.control.controller import Controller
from skewlab.engine.algorithms.keys import Vocabulary
from skewlab.engine.runtimes.local import LocalRuntime, ground_truth
from skewlab.engine.control.state import KeyedWindowState, encode

K = 2000


@pytest.fixture(scope="module")
def vocab():
    return Vocabulary([f"k{i}" for i in range(K)])


def zipf_batches(n_batches, size, z=1.2, seed=3, keys=K):
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, keys + 1) ** z
    cdf = np.cumsum(p / p.sum())
    return [np.searchsorted(cdf, rng.random(size)).astype(np.int64) for _ in range(n_batches)]


def named(vocab, gt):
    return {vocab.names[k]: c for k, c in gt.items()}


def test_state_window_slides_and_move_keeps_counts():
    st = KeyedWindowState(2)
    st.add_interval(encode([1, 1, 2], [0, 0, 1]), np.array([1, 1, 5]))
    st.add_interval(encode([1, 3], [1, 0]), np.array([2, 1]))
    keys, counts = st.per_key()
    assert dict(zip(keys.tolist(), counts.tolist())) == {1: 4, 2: 5, 3: 1}
    moved, n = st.move(np.array([1]), np.array([2]))
    assert (moved, n) == (4.0, 1)
    assert st.per_worker(3).tolist() == [1, 5, 4]
    st.add_interval(encode([3], [0]), np.array([1]))  # the first interval expires
    keys, counts = st.per_key()
    assert dict(zip(keys.tolist(), counts.tolist())) == {1: 2, 3: 2}


@pytest.mark.parametrize("name", registry.names())
def test_merged_results_equal_ground_truth_across_switch_and_resize(name, vocab):
    batches = zipf_batches(9, 3000)
    other = "shuffle" if registry.get(name).single_owner else "hash"
    changes = [ScheduledCommand(2, "set-workers", {"workers": 7}),
               ScheduledCommand(4, "set-algorithm", {"algorithm": other}),
               ScheduledCommand(6, "set-algorithm", {"algorithm": name}),
               ScheduledCommand(7, "set-workers", {"workers": 3})]
    rt = LocalRuntime(registry.create(name, 5, n_sources=3, seed=1), vocab, window=3)
    out = rt.run(batches, changes)
    assert rt.controller.results() == named(vocab, ground_truth(batches, 3))
    assert out["messages"] == sum(b.size for b in batches)
    assert len(out["intervals"]) == len(batches)
    assert [e["kind"] for e in out["events"] if e["kind"] not in ("rebalance", "rebalance_skipped")] == [
        "workers", "switch", "switch", "workers"]
    # a single-owner grouping keeps every key's state on exactly one worker
    if registry.get(name).single_owner:
        codes, _ = rt.controller.state.merged()
        keys = codes >> 20
        assert np.unique(keys).size == keys.size


@pytest.mark.parametrize("name", registry.names())
def test_every_algorithm_handles_degenerate_streams(name):
    v = Vocabulary(["solo"])
    for n in (1, 4):
        rt = LocalRuntime(registry.create(name, n, n_sources=2), v, window=2)
        out = rt.run([np.zeros(0, np.int64), np.zeros(50, np.int64), np.zeros(0, np.int64), np.zeros(7, np.int64)])
        assert rt.controller.results() == {"solo": 7}
        assert out["messages"] == 57
        for it in out["intervals"]:
            assert np.isfinite(it["imbalance"])


def test_hash_metrics_and_no_migration_without_changes(vocab):
    batches = zipf_batches(4, 5000)
    rt = LocalRuntime(registry.create("hash", 4), vocab, window=2)
    out = rt.run(batches)
    assert out["replication"] == 1.0
    assert out["migration_cost"] == 0.0 and out["migrations"] == 0
    ids = np.concatenate(batches)
    expected = np.bincount((vocab.fps[ids] % np.uint64(4)).astype(np.int64), minlength=4)
    assert out["worker_loads"] == expected.astype(float).tolist()
    assert out["imbalance"] == pytest.approx(expected.max() / expected.mean() - 1)


def test_simulate_changes_are_engine_commands_applied_by_apply_command(vocab):
    from skewlab.engine.control.commands import CommandError
    from skewlab.engine.config.params import ParamError
    from skewlab.engine.cli.simulate import SimulationConfig, parse_change

    assert parse_change("3:workers=6") == ScheduledCommand(3, "set-workers", {"workers": 6})
    switch = parse_change("1:algorithm=consistent")
    assert (switch.at, switch.kind, switch.payload["algorithm"]) == (1, "set-algorithm", "consistent")
    assert switch.payload["params"] == registry.validate_params("consistent", {})  # normalised as the engine does
    for bad, fragment in (("2:workers=0", "out of range [1, "), ("2:algorithm=pkgg", "did you mean 'pkg'"),
                          ("2:pause=1", "--change expects")):
        with pytest.raises(ParamError, match=re.escape(fragment)) as info:
            parse_change(bad)
        assert "\n" not in str(info.value) and "--max-workers" not in str(info.value)
    # a schedule built in code is validated in order, like the engine validates each command on arrival
    SimulationConfig(algorithm="hash", changes=[ScheduledCommand(1, "set-algorithm", {"algorithm": "consistent"}),
                                                ScheduledCommand(2, "set-param", {"params": {"replicas": 8}})]).validate()
    for changes, fragment in (([ScheduledCommand(2, "set-param", {"params": {"replicas": 8}})], "unknown parameter"),
                              ([ScheduledCommand(2, "pause")], "no pause")):
        with pytest.raises(ParamError, match=fragment):
            SimulationConfig(algorithm="hash", changes=changes).validate()
    # the runtime applies them through apply_command: an algorithm already in effect is a no-op
    rt = LocalRuntime(registry.create("hash", 4), vocab, window=2)
    assert rt.apply(ScheduledCommand(0, "set-algorithm", {"algorithm": "hash"})) == {}
    assert rt.apply(ScheduledCommand(0, "set-workers", {"workers": 5}))["workers"] == 5
    with pytest.raises(CommandError, match="has no pause"):
        rt.apply(ScheduledCommand(0, "pause"))
    with pytest.raises(CommandError, match="out of range"):
        rt.apply(ScheduledCommand(0, "set-workers", {"workers": 0}))
    assert rt.planner.n_workers == 5


def test_resize_counts_migration_and_moves_state_to_owner(vocab):
    batches = zipf_batches(3, 4000)
    rt = LocalRuntime(registry.create("consistent", 4), vocab, window=5)
    rt.run(batches[:2])
    ev = rt.controller.resize(5)
    assert 0 < ev["migration_cost"] < 0.5
    codes, _ = rt.controller.state.merged()
    keys, workers = codes >> 20, codes & ((1 << 20) - 1)
    owner = rt.planner.router.owner(vocab.fps[keys])
    assert np.array_equal(owner, workers)
    row = rt.step(batches[2])
    assert row["migration_cost"] > 0 and row["workers"] == 5


def test_split_key_state_on_removed_worker_moves_home(vocab):
    batches = zipf_batches(2, 4000)
    rt = LocalRuntime(registry.create("shuffle", 6), vocab, window=5)
    rt.run(batches)
    rt.controller.resize(2)
    codes, _ = rt.controller.state.merged()
    assert (codes & ((1 << 20) - 1)).max() < 2
    assert rt.controller.results() == named(vocab, ground_truth(batches, 5))


def test_join_cost_model_is_quadratic_in_key_frequency():
    v = Vocabulary(["a", "b"])
    c = Controller(registry.create("hash", 1), v, window=1, cost_model="join")
    row = c.end_interval(np.array([0] * 3 + [1]), np.zeros(4, np.int64))
    assert row["worker_loads"] == [3 * 3 + 1 * 1]
    stats = c.stats(encode([0, 1], [0, 0]), np.array([3, 1]))
    assert stats.cost.tolist() == [9.0, 1.0]
    assert stats.size.tolist() == [3.0, 1.0]


def test_controller_rejects_routing_outside_workers():
    c = Controller(registry.create("hash", 2), Vocabulary(["a"]))
    with pytest.raises(ValueError):
        c.end_interval(np.array([0]), np.array([2]))


def test_routing_throughput_excludes_numba_compilation(vocab):
    import numba

    from skewlab.engine.algorithms.grouping import Router, StreamingPlanner

    def new_kernel():  # a new function object each time: numba compiles it at its first call
        @numba.njit(cache=False)
        def kernel(fps, n):
            out = np.empty(fps.size, np.int64)
            for i in range(fps.size):
                out[i] = fps[i] % n
            return out
        return kernel

    first_kernel, later_kernel = new_kernel(), new_kernel()

    class CompilingRouter(Router):
        """Routes with one kernel for its first 4,000 tuples, then with another."""

        def __init__(self, *args):
            super().__init__(*args)
            self.routed = 0

        def route(self, fps, source=0):
            kernel = first_kernel if self.routed < 4000 else later_kernel
            self.routed += fps.size
            return kernel(np.asarray(fps, dtype=np.uint64), np.uint64(self.n_workers))

    class Compiling(StreamingPlanner):
        name = "compiling"
        router_class = CompilingRouter

    batches = zipf_batches(4, 2000)
    out = LocalRuntime(Compiling(4, 2), vocab, window=2).run(batches)
    rows = out["intervals"]
    warm = [it["warmup_seconds"] for it in rows]
    # interval 0: the warm-up copy compiled the first kernel; interval 2: the later kernel compiled in route()
    assert warm[0] > 0 and warm[1] == 0 and warm[2] > 0 and warm[3] == 0
    assert out["warmup_seconds"] == pytest.approx(sum(warm))
    # neither compilation counts as routing time: 2,000 compiled modulos take far less than compiling them
    for i in (0, 2):
        assert rows[i]["tuples"] / rows[i]["tuples_per_second"] < warm[i] / 2
    assert out["messages"] / out["tuples_per_second"] < min(warm[0], warm[2]) / 2
