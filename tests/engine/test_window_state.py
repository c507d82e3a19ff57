"""The worker's windowed keyed state (skewlab.engine.runtimes.spark.window_state): window semantics, migration by
export / hold / import, and serialisation — checked against a brute-force reference on random
streams with random moves, so every (batch, key) result is emitted once, exactly."""

from __future__ import annotations

import random
from collections import Counter, defaultdict

import numpy as np
import pytest

from skewlab.engine.algorithms.keys import fingerprints
from skewlab.engine.operators.builtin import JOIN_MASK, Join
from skewlab.engine.runtimes.spark.window_state import WorkerWindow


def by_fp(orders):
    """Migration orders as the driver sends them: target -> key fingerprints."""
    return {t: fingerprints(ks) for t, ks in orders.items()}


def merged_results(rows, operator):
    """(batch, key) → result of the workers' merge-stage rows ``(micro-batch, kind, batch, key, bytes,
    share)``, merged by share_merge.merge_rows once per micro-batch, as the engine runs it; a (batch, key)
    written twice fails.  An operator that declares share_type sends its shares in the typed column;
    the same rows with the shares as the operator's bytes must merge to the same table."""
    import pyarrow as pa

    from skewlab.engine.runtimes.spark.share_merge import merge_rows

    from skewlab.engine.runtimes.spark.operator import FINAL

    share_type = operator.share_type
    merged = {}
    for b in sorted({r[0] for r in rows}):
        of_batch = [r[1:] for r in rows if r[0] == b]
        columns = {"kind": pa.array([r[0] for r in of_batch], pa.int32()),
                   "batch": pa.array([r[1] for r in of_batch], pa.int64()),
                   "key": [r[2] for r in of_batch], "data": pa.array([r[3] for r in of_batch], pa.binary())}
        if share_type is not None:
            assert all(r[3] is None for r in of_batch if r[0] != FINAL), "a share of a share_type operator was pickled"
            table = merge_rows(pa.table({**columns, "share": pa.array([r[4] for r in of_batch], share_type)}), operator)
            as_bytes = [operator.dumps(r[4]) if r[3] is None else r[3] for r in of_batch]
            pickled = merge_rows(pa.table({**columns, "data": pa.array(as_bytes, pa.binary())}), operator)
            assert table.sort_by([("batch", "ascending"), ("key", "ascending")]).equals(
                pickled.sort_by([("batch", "ascending"), ("key", "ascending")]))
        else:
            table = merge_rows(pa.table(columns), operator)
        t = table.to_pydict()
        for bb, k, c in zip(t["batch"], t["key"], t["result"]):
            assert (bb, k) not in merged, f"({bb}, {k}) written twice"
            merged[(bb, k)] = c
    return merged


def counts_of(keys):
    c = Counter(keys)
    ks = list(c)
    return ks, np.array([c[k] for k in ks], dtype=np.int64)


def test_sliding_window_counts_and_eviction():
    w = WorkerWindow(3)
    out = []
    for b, keys in enumerate([["a", "a", "b"], ["a"], [], ["a", "c"], ["b"]]):
        ks, cs = counts_of(keys)
        out.append(sorted((r[1], r[2]) for r in w.step(b, ks, cs)["results"]))
    # window of 3 batches: batch 3 sees batches 1..3 (a: 1 + 1), batch 4 sees 2..4 (b: 1)
    assert out == [[("a", 2), ("b", 1)], [("a", 3)], [], [("a", 2), ("c", 1)], [("b", 1)]]
    assert w.totals() == {"a": 1, "b": 1, "c": 1}
    w.step(7, [], np.zeros(0, np.int64))
    assert len(w) == 0  # every window emptied: keys dropped


def test_window_of_one_batch_and_single_key():
    w = WorkerWindow(1)
    for b in range(4):
        res = w.step(b, ["k"], np.array([b + 1]))["results"]
        assert res == [(b, "k", b + 1)]


def test_export_hold_import_keeps_exact_counts():
    a, b = WorkerWindow(4), WorkerWindow(4)
    a.step(0, ["x", "y"], np.array([3, 1]))
    # batch 1: x moves a -> b; b receives x's tuples and holds them
    ex = a.step(1, ["y"], np.array([1]), exports={1: fingerprints(["x"])})["exports"]
    res_b = b.step(1, ["x"], np.array([5]), expect=fingerprints(["x"]))["results"]
    assert res_b == [] and b.held_tuples() == 5
    assert "x" not in a.index
    # batch 2: b imports x's window, releases the held batch-1 tuples (window 3 + 5), then batch 2's
    res = b.step(2, ["x"], np.array([2]), imports=[ex[1]])["results"]
    assert res == [(1, "x", 8), (2, "x", 10)]


def test_export_of_key_without_state_releases_the_hold():
    a, b = WorkerWindow(2), WorkerWindow(2)
    ex = a.step(0, [], np.zeros(0, np.int64), exports={1: fingerprints(["new"])})["exports"]
    assert ex[1]["count"].size == 0 and ex[1]["present"] == [] and ex[1]["keys"] == []
    assert ex[1]["fps"].tolist() == fingerprints(["new"]).tolist()  # the receiver learns the move is complete
    assert b.step(0, ["new"], np.array([2]), expect=fingerprints(["new"]))["results"] == []
    assert b.step(1, [], np.zeros(0, np.int64), imports=[ex[1]])["results"] == [(0, "new", 2)]
    assert not b.expect and not b.held


def test_serialisation_round_trip_keeps_window_and_flights():
    w = WorkerWindow(3)
    w.step(0, ["a", "b"], np.array([1, 2]))
    w.step(1, ["a", "c"], np.array([4, 1]), expect=fingerprints(["z"]))
    w.add(["z"], np.array([7]), 1)
    with pytest.raises(ValueError, match="already at batch 1"):  # a batch never runs twice on one state
        w.step(1, [], np.zeros(0, np.int64))
    v = WorkerWindow.loads(w.dumps())
    assert v.totals() == w.totals() and v.held == w.held and v.expect == w.expect and v.last == w.last
    assert v.step(2, ["a"], np.array([1]))["results"] == w.step(2, ["a"], np.array([1]))["results"]


def _mean_window(operator):
    """A mean window of 3 batches over 6 batches with a key expected (held tuples), as a handler leaves it."""
    w = WorkerWindow(3, operator)
    rng = np.random.default_rng(3)
    for b in range(6):
        codes = rng.integers(0, 5, 40)
        keys = [f"k{i}" for i in range(5)]
        counts = np.bincount(codes, minlength=5).astype(np.int64)
        w.step(b, keys, counts, partials=operator.partials(codes, 5, rng.random(40)),
               expect=fingerprints(["k4"]) if b == 4 else ())
    return w


def _key_major_dumps(w):
    """The serialisation written before the batch-major layout: partials key -> {batch: bytes}."""
    import pickle

    r, c = np.nonzero(w.ring)
    dumps = w.operator.dumps
    partials: dict = {}
    for b, per in w.partials.items():
        for k, p in per.items():
            partials.setdefault(k, {})[b] = dumps(p)
    held = {k: [(b, n, None if p is None else dumps(p)) for b, n, p in e] for k, e in w.held.items()}
    return pickle.dumps((w.window, w.operator.name, w.keys, (r.astype(np.int32), c.astype(np.int16), w.ring[r, c]),
                         w.col_batch, w.last, partials, held, w.expect))


def test_partial_states_load_the_same_from_every_layout():
    """A mean window through the state store: pickled as it is (the built-in's default ``dumps``),
    through an operator's own ``dumps``/``loads`` (a user operator's bytes) and from the key-major
    layout of states written before — each gives the same window and the same next results."""
    from skewlab.engine.operators.builtin import Mean

    class OwnBytes(Mean):
        def dumps(self, partial):
            return repr(partial).encode()

        def loads(self, data):
            return tuple(float(x) if "." in x else int(x) for x in data.decode().strip("()").split(", "))

    for op in (Mean(), OwnBytes()):
        w = _mean_window(op)
        assert w.held and w.partials
        for blob in (w.dumps(), _key_major_dumps(w)):
            v = WorkerWindow.loads(blob, op)
            assert v.partials == w.partials and v.held == w.held and v.totals() == w.totals()
            codes = np.array([0, 1, 1, 4], dtype=np.int64)
            args = (6, [f"k{i}" for i in range(5)], np.bincount(codes, minlength=5).astype(np.int64))
            kw = {"partials": op.partials(codes, 5, np.array([0.5, 1.0, 2.0, 4.0]))}
            assert v.step(*args, **kw)["results"] == _mean_window(op).step(*args, **kw)["results"]


def test_bad_window_is_refused():
    with pytest.raises(ValueError, match="window must be >= 1"):
        WorkerWindow(0)


@pytest.mark.parametrize("W", [3, 25, 1000])
@pytest.mark.parametrize("seed", range(5))
def test_random_stream_with_random_moves_equals_reference(seed, W):
    """4 workers, window ``W``, 30 batches of a skewed stream; after each batch a random set of keys
    moves to random workers (through the protocol: exports in the next batch, imports in the one
    after, serialised state in between).  Every (batch, key) result equals the brute-force window
    count, and each is emitted exactly once.  Windows of 25 and 1000 batches outgrow the ring's first
    16 columns during the run (25: capped at the window)."""
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    n, batches = 4, 30
    workers = [WorkerWindow(W) for _ in range(n)]
    owner: dict[str, int] = {}
    orders: dict[int, dict[int, list[str]]] = {}  # holder -> target -> keys (for the next batch)
    expect: dict[int, list[str]] = {}
    imports: dict[int, list[dict]] = {}
    history: list[Counter] = []
    emitted: dict[tuple[int, str], int] = {}
    seen: set[tuple[int, str, int]] = set()
    for b in range(batches):
        keys = [f"k{int(x)}" for x in nrng.zipf(1.5, 200) % 40]
        history.append(Counter(keys))
        per_worker: dict[int, list[str]] = defaultdict(list)
        for k in keys:
            owner.setdefault(k, hash(k) % n)
            per_worker[owner[k]].append(k)
        next_imports: dict[int, list[dict]] = defaultdict(list)
        for w in range(n):
            ks, cs = counts_of(per_worker[w])
            step = workers[w].step(b, ks, cs, imports=imports.get(w, []), exports=by_fp(orders.get(w, {})),
                                   expect=fingerprints(expect.get(w, [])))
            for r in step["results"]:
                assert (r[0], r[1], w) not in seen, f"result {r[:2]} emitted twice by worker {w}"
                seen.add((r[0], r[1], w))
                emitted[(r[0], r[1])] = emitted.get((r[0], r[1]), 0) + r[2]  # shares: retractions are 0
            for target, blob in step["exports"].items():
                next_imports[target].append(blob)
            workers[w] = WorkerWindow.loads(workers[w].dumps())  # through the state store
        imports = dict(next_imports)
        # plan: move a few known keys (possibly ones still in flight) to random workers
        orders, expect = {}, {}
        for k in rng.sample(sorted(owner), min(4, len(owner))):
            t = rng.randrange(n)
            if t != owner[k]:
                orders.setdefault(owner[k], {}).setdefault(t, []).append(k)
                expect.setdefault(t, []).append(k)
                owner[k] = t
    # drain the last flights
    for extra in (batches, batches + 1):
        for w in range(n):
            step = workers[w].step(extra, [], np.zeros(0, np.int64), imports=imports.get(w, []),
                                   exports=by_fp(orders.get(w, {})) if extra == batches else {},
                                   expect=fingerprints(expect.get(w, [])) if extra == batches else [])
            for r in step["results"]:
                assert (r[0], r[1], w) not in seen
                seen.add((r[0], r[1], w))
                emitted[(r[0], r[1])] = emitted.get((r[0], r[1]), 0) + r[2]
            for target, blob in step["exports"].items():
                imports.setdefault(target, []).append(blob)
        if extra == batches:
            imports = {t: [blob for blob in bl] for t, bl in imports.items()}
    truth = {}
    for b in range(batches):
        for k in history[b]:
            truth[(b, k)] = sum(history[j][k] for j in range(max(0, b - W + 1), b + 1))
    assert {k: v for k, v in emitted.items() if k in truth} == truth
    assert all(v == 0 for k, v in emitted.items() if k not in truth)  # only retractions elsewhere


def _steps(w: WorkerWindow, batches: range, seed: int) -> list[tuple]:
    """Step ``w`` through ``batches`` of a stream over 30 keys, some batches empty; its results."""
    rng = np.random.default_rng(seed)
    out = []
    for b in batches:
        codes = rng.zipf(1.4, 0 if b % 7 == 3 else 50) % 30
        ks, cs = counts_of([f"k{int(c)}" for c in codes])
        out += w.step(b, ks, cs)["results"]
    return out


def test_a_window_longer_than_the_run_holds_the_columns_its_batches_use():
    """A window of 100,000 batches, 40 batches run: the ring grew from 16 to 64 columns (not 100,000
    per key), and every result is the brute-force count over the whole run so far."""
    w = WorkerWindow(100_000)
    results = _steps(w, range(40), seed=3)
    assert w.width == 64 and w.ring.shape == (len(w), 64)
    history: list[Counter] = []
    rng = np.random.default_rng(3)
    for b in range(40):
        history.append(Counter(f"k{int(c)}" for c in rng.zipf(1.4, 0 if b % 7 == 3 else 50) % 30))
    assert {(b, k): n for b, k, n in results} == {
        (b, k): sum(h[k] for h in history[: b + 1]) for b in range(40) for k in history[b]}
    assert WorkerWindow.loads(w.dumps()).width == 64


def test_a_window_wide_ring_written_before_continues_exactly():
    """A state whose ring is as wide as its window (as every state was before the ring grew on
    demand) loads and steps on with the same results as one that grew."""
    grown, wide = WorkerWindow(40), WorkerWindow(40)
    assert _steps(grown, range(10), seed=5) == _steps(wide, range(10), seed=5)
    wide._widen(40)
    assert wide.width == 40 and grown.width == 16
    wide = WorkerWindow.loads(wide.dumps())
    assert wide.width == 40
    assert _steps(WorkerWindow.loads(grown.dumps()), range(10, 60), seed=6) == _steps(wide, range(10, 60), seed=6)


def test_an_import_older_than_the_receivers_ring_widens_it():
    """A worker whose own batches span 3 columns receives a key whose window goes back 18 batches
    (its batch 24 falls on the column of the receiver's batch 40 in a 16-column ring: refused as
    outside the window without the widening): the ring
    widens, and the key's windowed count includes every imported batch."""
    a, b = WorkerWindow(1000), WorkerWindow(1000)
    for t in range(24, 41):
        a.step(t, ["x"], np.array([1]))
    b.step(40, ["y"], np.array([1]))
    blobs = a.step(41, [], np.zeros(0, np.int64), exports=by_fp({1: ["x"]}))["exports"]
    b.step(41, ["x", "y"], np.array([2, 1]), expect=fingerprints(["x"]))
    results = b.step(42, ["x"], np.array([1]), imports=[blobs[1]])["results"]
    assert b.width == 32 and sorted(results) == [(41, "x", 19), (42, "x", 20)]


def join_truth(history, W):
    """(batch, key) -> (pairs, checksum) by brute force over every pair of tuple values."""
    out = {}
    for b, per_key in enumerate(history):
        for k, vals in per_key.items():
            old = [v for j in range(max(0, b - W + 1), b) for v in history[j].get(k, [])]
            pairs = [(a, o) for i, a in enumerate(vals) for o in old + vals[:i]]
            out[(b, k)] = (len(pairs), sum((a ^ o) & JOIN_MASK for a, o in pairs))
    return out


def test_join_probes_every_tuple_in_the_window():
    w = WorkerWindow(2, Join())
    r0 = w.step(0, ["a"], np.array([2]), partials=[np.array([1, 2], np.int64)])["results"]
    r1 = w.step(1, ["a"], np.array([1]), partials=[np.array([4], np.int64)])["results"]
    r2 = w.step(2, ["a"], np.array([1]), partials=[np.array([8], np.int64)])["results"]
    assert r0 == [(0, "a", 1, 1 ^ 2)]
    assert r1 == [(1, "a", 2, (4 ^ 1) + (4 ^ 2))]
    assert r2 == [(2, "a", 1, 8 ^ 4)]  # batch 0 left the window


@pytest.mark.parametrize("seed", range(3))
def test_join_with_random_moves_equals_brute_force(seed):
    """The join's pairs and checksums through export / hold / import and serialisation equal a
    brute-force pair enumeration."""
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    W, n, batches = 3, 3, 12
    workers = [WorkerWindow(W, Join()) for _ in range(n)]
    owner: dict[str, int] = {}
    orders: dict[int, dict[int, list[str]]] = {}
    expect: dict[int, list[str]] = {}
    imports: dict[int, list[dict]] = {}
    history: list[dict[str, list[int]]] = []
    emitted: dict[tuple[int, str], tuple[int, int]] = {}
    seen: set[tuple[int, str, int]] = set()
    seq = 0
    for b in range(batches + 2):
        per_key: dict[str, list[int]] = defaultdict(list)
        if b < batches:
            for x in nrng.zipf(1.5, 60) % 12:
                per_key[f"k{int(x)}"].append(seq)
                seq += int(nrng.integers(1, 5000))
        history.append(dict(per_key))
        next_imports: dict[int, list[dict]] = defaultdict(list)
        for w in range(n):
            mine = [k for k in per_key if owner.setdefault(k, hash(k) % n) == w]
            step = workers[w].step(b, mine, np.array([len(per_key[k]) for k in mine], dtype=np.int64),
                                   partials=[np.asarray(per_key[k], np.int64) for k in mine], imports=imports.get(w, []),
                                   exports=by_fp(orders.get(w, {})), expect=fingerprints(expect.get(w, [])))
            for r in step["results"]:
                assert (r[0], r[1], w) not in seen
                seen.add((r[0], r[1], w))
                p0, c0 = emitted.get((r[0], r[1]), (0, 0))
                emitted[(r[0], r[1])] = (p0 + r[2], c0 + r[3])
            for target, blob in step["exports"].items():
                next_imports[target].append(blob)
            workers[w] = WorkerWindow.loads(workers[w].dumps(), Join())
        imports = dict(next_imports)
        orders, expect = {}, {}
        if b < batches:
            for k in rng.sample(sorted(owner), min(3, len(owner))):
                t = rng.randrange(n)
                if t != owner[k]:
                    orders.setdefault(owner[k], {}).setdefault(t, []).append(k)
                    expect.setdefault(t, []).append(k)
                    owner[k] = t
    truth = join_truth(history, W)
    assert {k: v for k, v in emitted.items() if k in truth} == truth
    assert all(v == (0, 0) for k, v in emitted.items() if k not in truth)


def test_split_key_from_two_holders_is_released_after_both_blobs():
    """A split key (PKG) held by two workers moves to a third: the held tuples are applied only after
    both old shares arrived, so the released result is the whole window."""
    a, b, c = WorkerWindow(5), WorkerWindow(5), WorkerWindow(5)
    a.step(0, ["k"], np.array([11]))
    b.step(0, ["k"], np.array([8]))
    ea = a.step(1, [], np.zeros(0, np.int64), exports={2: fingerprints(["k"])})
    eb = b.step(1, [], np.zeros(0, np.int64), exports={2: fingerprints(["k"])})
    assert ea["results"] == [] and eb["results"] == []  # no retraction: the moved share is written by its new holder
    assert c.step(1, ["k"], np.array([9]), expect=fingerprints(["k"]))["results"] == []
    res = c.step(2, [], np.zeros(0, np.int64), imports=[ea["exports"][2], eb["exports"][2]])["results"]
    assert res == [(1, "k", 28)]


def test_export_to_several_targets_fingerprints_the_state_once(monkeypatch):
    import skewlab.engine.runtimes.spark.window_state as ws

    w = WorkerWindow(3)
    keys = [f"k{i}" for i in range(40)]
    w.step(0, keys, np.arange(1, 41, dtype=np.int64))
    w.step(1, ["held"], np.array([2]), expect=fingerprints(["held"]))
    calls = []
    real = ws.key_fingerprints
    monkeypatch.setattr(ws, "key_fingerprints", lambda ks: calls.append(len(ks)) or real(ks))
    orders = {t: [k for i, k in enumerate(keys) if i % 4 == t] for t in (1, 2, 3)}
    orders[3] = orders[3] + ["held"]
    ex = w.step(2, [], np.zeros(0, np.int64), exports=by_fp(orders))["exports"]
    assert calls == [1]  # the held keys, once, not once per target; the state's fingerprints are kept (WorkerWindow.fps)
    for t, ks in orders.items():
        assert sorted(ex[t]["keys"]) == sorted(ks)
        got = {ex[t]["present"][r]: int(c) for r, c in zip(ex[t]["row"], ex[t]["count"])}
        assert got == {k: int(k[1:]) + 1 for k in ks if k != "held"}
    assert ex[3]["held"] == [("held", 1, 2, None)]
    assert sorted(w.keys) == sorted(k for i, k in enumerate(keys) if i % 4 == 0)


@pytest.mark.parametrize("seed", range(6))
def test_split_keys_moving_with_a_finite_window_merge_to_the_windowed_count(seed):
    """Keys are split over random sets of workers, and after each batch a few of them are gathered
    onto one worker through the protocol (every holder exports, the target holds and imports), while
    others gain a new holder.  The workers' merge-stage rows (operator.merge_stage_rows, as the
    handler of a split-key run sends them), merged by share_merge.merge_rows, give one row per
    (batch, key with tuples) equal to the key's windowed count."""
    from skewlab.engine.runtimes.spark.operator import merge_stage_rows

    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    W, n, batches = 3, 4, 24
    workers = [WorkerWindow(W) for _ in range(n)]
    holders: dict[str, set[int]] = {}
    orders: dict[int, dict[int, list[str]]] = {}
    expect: dict[int, list[str]] = {}
    imports: dict[int, list[dict]] = {}
    moved: set[str] = set()
    history: list[Counter] = []
    rows: list[tuple] = []  # (micro-batch, kind, batch, key, bytes, share)

    def step(w, b, ks, cs, **kw):
        out = workers[w].step(b, ks, cs, **kw)
        rows.extend((b, *r) for r in merge_stage_rows(workers[w], b, ks, out["results"]))
        workers[w] = WorkerWindow.loads(workers[w].dumps())
        return out

    for b in range(batches):
        keys = [f"k{int(x)}" for x in nrng.zipf(1.4, rng.randrange(0, 120)) % 30]
        history.append(Counter(keys))
        per_worker: dict[int, list[str]] = defaultdict(list)
        for k in keys:
            hs = holders.setdefault(k, {rng.randrange(n)})
            per_worker[rng.choice(sorted(hs))].append(k)
        next_imports: dict[int, list[dict]] = defaultdict(list)
        for w in range(n):
            ks, cs = counts_of(per_worker[w])
            out = step(w, b, ks, cs, imports=imports.get(w, []), exports=by_fp(orders.get(w, {})),
                       expect=fingerprints(expect.get(w, [])))
            for target, blob in out["exports"].items():
                next_imports[target].append(blob)
        imports = dict(next_imports)
        orders, expect = {}, {}
        known = sorted(holders)
        for k in rng.sample(known, min(3, len(known))):  # gather a key onto one worker
            t = rng.randrange(n)
            for h in holders[k] - {t}:
                orders.setdefault(h, {}).setdefault(t, []).append(k)
            if holders[k] - {t}:
                expect.setdefault(t, []).append(k)
            holders[k] = {t}
        gathered = {k for o in orders.values() for ks in o.values() for k in ks}
        for k in rng.sample(known, min(3, len(known))):  # split a key that is not in flight
            if k not in gathered and k not in moved:
                holders[k].add(rng.randrange(n))
        moved = gathered
    for extra in (batches, batches + 1):  # drain the last flights
        next_imports = defaultdict(list)
        for w in range(n):
            out = step(w, extra, [], np.zeros(0, np.int64), imports=imports.get(w, []),
                       exports=by_fp(orders.get(w, {})) if extra == batches else {},
                       expect=fingerprints(expect.get(w, [])) if extra == batches else [])
            for target, blob in out["exports"].items():
                next_imports[target].append(blob)
        imports = dict(next_imports)
    merged = merged_results(rows, workers[0].operator)
    truth = {(b, k): sum(history[j][k] for j in range(max(0, b - W + 1), b + 1))
             for b in range(batches) for k in history[b]}
    assert {p: c for p, c in merged.items() if p[0] < batches} == truth


@pytest.mark.parametrize("touch", [False, True], ids=["every-key", "touched"])
@pytest.mark.parametrize("operator", ["count", "mean"])
@pytest.mark.parametrize("seed", range(4))
def test_split_run_moves_a_holders_share_while_other_holders_keep_the_key(seed, operator, touch):
    """A split-key run (``step(..., split=True)``, as the handler runs it when results are merged
    from shares): after each batch one holder of a few split keys sends its share to another worker
    while the key's other holders keep receiving its tuples (``set-workers`` shrinking a D-Choices
    run moves the removed workers' keys this way), and other keys are gathered onto one worker.
    Nothing is held; the exporter reports the exported keys' shares at the export batch.  The merged
    merge-stage rows give one row per (batch, key with tuples), equal to the windowed count / mean
    recomputed from the tuples — before the fix such a key was written twice, each part missing the
    other's.  ``touched``: each worker learns the batch's keys routed elsewhere (topology.touch_rows,
    the TouchedKeys the handler reads) and sends shares only of keys with tuples in the batch — the
    same results, and no row of a key the batch did not have."""
    from skewlab.engine.operators.builtin import Count, Mean
    from skewlab.engine.runtimes.spark.operator import FINAL, merge_stage_rows
    from skewlab.engine.runtimes.spark.topology import touch_rows

    make = Count if operator == "count" else Mean
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    W, n, batches = 3, 4, 20
    workers = [WorkerWindow(W, make()) for _ in range(n)]
    holders: dict[str, set[int]] = {}
    orders: dict[int, dict[int, list[str]]] = {}
    imports: dict[int, list[dict]] = {}
    history: list[list[tuple[str, float]]] = []
    rows: list[tuple] = []  # (micro-batch, kind, batch, key, bytes)
    moved_away = 0

    def step(w, b, tuples, **kw):
        ks = list(dict.fromkeys(k for k, _ in tuples))
        code = {k: i for i, k in enumerate(ks)}
        codes = np.array([code[k] for k, _ in tuples], dtype=np.int64)
        cs = np.bincount(codes, minlength=len(ks)).astype(np.int64) if ks else np.zeros(0, np.int64)
        vals = np.array([v for _, v in tuples], dtype=np.float64)
        partials = None if operator == "count" else workers[w].operator.partials(codes, len(ks), vals)
        out = workers[w].step(b, ks, cs, partials=partials, split=True, **kw)
        assert not workers[w].held  # a split run holds nothing
        assert all(r[0] < b for r in out["results"])  # nor emits its batch's results: the shares make them
        touched = touches.get(w, np.zeros(0, np.uint64)) if touch else None
        rows.extend((b, *r) for r in merge_stage_rows(workers[w], b, ks, out["results"], out["export_shares"], touched))
        workers[w] = WorkerWindow.loads(workers[w].dumps(), workers[w].operator)
        return out

    for b in range(batches + 2):
        tuples = ([(f"k{int(x)}", float(rng.randrange(100))) for x in nrng.zipf(1.4, rng.randrange(0, 120)) % 30]
                  if b < batches else [])
        history.append(tuples)
        per_worker: dict[int, list[tuple[str, float]]] = defaultdict(list)
        for k, v in tuples:
            hs = holders.setdefault(k, {rng.randrange(n)})
            per_worker[rng.choice(sorted(hs))].append((k, v))
        routed = [(k, w) for w, tup in per_worker.items() for k, _ in tup]
        touches = {w: t.keys for w, t in touch_rows(fingerprints([k for k, _ in routed]),
                                                     np.array([w for _, w in routed], np.int64), range(n), b)}
        next_imports: dict[int, list[dict]] = defaultdict(list)
        for w in range(n):
            out = step(w, b, per_worker[w], imports=imports.get(w, []), exports=by_fp(orders.get(w, {})),
                       expect=fingerprints([k for o in orders.values() for t, ks in o.items() if t == w for k in ks]))
            for target, blob in out["exports"].items():
                next_imports[target].append(blob)
        imports, orders = dict(next_imports), {}
        if b >= batches - 1:
            continue
        known = sorted(k for k in holders if len(holders[k]) > 1)
        for k in rng.sample(known, min(3, len(known))):  # one holder's share leaves, the others stay
            h = rng.choice(sorted(holders[k]))
            t = rng.choice(sorted(holders[k] - {h}) if rng.random() < 0.5 else [x for x in range(n) if x != h])
            orders.setdefault(h, {}).setdefault(t, []).append(k)
            holders[k] = (holders[k] - {h}) | {t}
            moved_away += 1
        for k in rng.sample(sorted(holders), min(2, len(holders))):  # gather another key onto one worker
            if any(k in ks for o in orders.values() for ks in o.values()):
                continue
            t = rng.randrange(n)
            for h in holders[k] - {t}:
                orders.setdefault(h, {}).setdefault(t, []).append(k)
            holders[k] = {t}
        for k in rng.sample(sorted(holders), min(3, len(holders))):  # split a key further
            holders[k].add(rng.randrange(n))
    assert moved_away > 10
    if touch:  # no share of a key without tuples in its batch
        assert all(key in {k for k, _ in history[b]} for _, kind, b, key, *_ in rows if kind != FINAL)
    merged = merged_results(rows, workers[0].operator)
    truth = {}
    for b in range(batches):
        for k in {k for k, _ in history[b]}:
            vals = [v for j in range(max(0, b - W + 1), b + 1) for kk, v in history[j] if kk == k]
            truth[(b, k)] = len(vals) if operator == "count" else sum(vals) / len(vals)
    assert merged.keys() == truth.keys()
    assert all(merged[p] == pytest.approx(truth[p]) for p in truth)
