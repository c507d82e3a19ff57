"""Keyed window state (engine/control/state.py): the incremental window totals, the sort-free aggregation and
migration paths and the compact pickles give exactly what the straightforward definitions give
(aggregate the concatenated slots with ``np.unique``), on random operation sequences and edge cases."""

import pickle
from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewlab.engine.control.state import (KeyedWindowState, aggregate_pairs, decode, encode, pack_codes, pack_small,
                          searchsorted_ascending, segment_sums, union_sorted, unpack_codes, unpack_small)


def ref_aggregate(codes, weights=None):
    """The original definition: np.unique + float bincount, truncated to int64."""
    codes = np.asarray(codes, dtype=np.int64)
    if codes.size == 0:
        return codes.copy(), np.zeros(0, np.int64)
    uniq, inv = np.unique(codes, return_inverse=True)
    w = None if weights is None else np.asarray(weights)
    return uniq, np.bincount(inv, weights=w, minlength=uniq.size).astype(np.int64)


def ref_merged(slots):
    if not slots:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return ref_aggregate(np.concatenate([c for c, _ in slots]), np.concatenate([n for _, n in slots]))


def assert_pair(a, b):
    assert a[0].dtype == np.int64 and a[1].dtype == np.int64
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 5), st.integers(0, 300)), max_size=60),
       st.booleans())
@settings(max_examples=150, deadline=None)
def test_aggregate_pairs_equals_unique_bincount(rows, shuffled):
    rows = sorted(rows) if not shuffled else rows
    codes = encode([r[0] for r in rows], [r[1] for r in rows])
    counts = np.array([r[2] for r in rows], dtype=np.int64)
    assert_pair(aggregate_pairs(codes, counts), ref_aggregate(codes, counts))
    assert_pair(aggregate_pairs(codes), ref_aggregate(codes))
    floats = counts * 0.75
    assert_pair(aggregate_pairs(codes, floats), ref_aggregate(codes, floats))  # float path: old semantics


def test_aggregate_pairs_returns_copies_of_sorted_input():
    codes = encode([1, 2, 3], [0, 0, 1])
    out, sums = aggregate_pairs(codes, np.array([4, 5, 6]))
    assert out is not codes and not np.shares_memory(out, codes)
    assert sums.tolist() == [4, 5, 6]
    assert aggregate_pairs(np.zeros(0, np.int64))[0].size == 0


@given(st.lists(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 4), st.integers(0, 9)), max_size=25),
                max_size=12),
       st.integers(1, 4),
       st.lists(st.tuples(st.integers(0, 11), st.lists(st.tuples(st.integers(0, 30), st.integers(0, 6)), max_size=8)),
                max_size=4))
@settings(max_examples=120, deadline=None)
def test_incremental_window_equals_recomputation(intervals, window, moves):
    """Random add/slide/move sequences (zero counts included: a code stays while a slot holds it)."""
    s = KeyedWindowState(window)
    ref: deque = deque()
    moves_at = {}
    for at, mv in moves:
        moves_at.setdefault(at, []).extend(mv)
    for i, rows in enumerate(intervals):
        codes = encode([r[0] for r in rows], [r[1] for r in rows])
        counts = np.array([r[2] for r in rows], dtype=np.int64)
        s.add_interval(codes, counts)
        ref.append(ref_aggregate(codes, counts))
        while len(ref) > window:
            ref.popleft()
        assert_pair(s.merged(), ref_merged(ref))
        if i in moves_at:
            mv = dict(moves_at[i])  # one target per key
            keys = np.array(list(mv), dtype=np.int64)
            targets = np.array([mv[k] for k in keys], dtype=np.int64)
            # reference move: relabel every slot and re-aggregate
            moved_units, moved = 0.0, set()
            new_ref: deque = deque()
            for c, n in ref:
                k, w = decode(c)
                nw = np.array([mv.get(int(x), int(y)) for x, y in zip(k, w)], dtype=np.int64)
                ch = nw != w
                moved_units += float(n[ch].sum())
                moved |= set(k[ch].tolist())
                new_ref.append(ref_aggregate(encode(k, nw), n))
            ref = new_ref
            assert s.move(keys, targets) == (moved_units, len(moved))
            for (c, n), (rc, rn) in zip(s.slots, ref):
                assert_pair((c, n), (rc, rn))
            assert_pair(s.merged(), ref_merged(ref))
        assert_pair(s.per_key(), ref_aggregate(decode(s.merged()[0])[0], s.merged()[1]))
        back = pickle.loads(pickle.dumps(s, protocol=pickle.HIGHEST_PROTOCOL))
        assert back.window == s.window and len(back.slots) == len(s.slots)
        for a, b in zip(back.slots, s.slots):
            assert_pair(a, b)
        assert_pair(back.merged(), s.merged())


def test_pickle_roundtrip_keeps_sliding_and_is_compact():
    rng = np.random.default_rng(1)
    s = KeyedWindowState(3)
    for _ in range(5):
        k = rng.integers(0, 50_000, 20_000)
        s.add_interval(encode(k, rng.integers(0, 8, k.size)), rng.integers(1, 1000, k.size))
    raw = sum(c.nbytes + n.nbytes for c, n in s.slots)
    data = pickle.dumps(s, protocol=pickle.HIGHEST_PROTOCOL)
    assert len(data) < raw / 3
    back = pickle.loads(data)
    extra = (encode([7, 7, 49_999], [0, 9, 3]), np.array([1, 2, 3]))
    for st_ in (s, back):
        st_.add_interval(*extra)
    assert_pair(back.merged(), s.merged())
    assert_pair(back.merged(), ref_merged(list(back.slots)))


def test_degenerate_state():
    s = KeyedWindowState(1)
    assert s.merged()[0].size == 0 and s.total() == 0.0 and s.per_worker(3).tolist() == [0, 0, 0]
    assert s.move(np.array([1]), np.array([0])) == (0.0, 0)
    s.add_interval(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert s.per_key()[0].size == 0
    s.add_interval(encode([5], [0]), np.array([2]))
    s.add_interval(encode([5], [1]), np.array([0]))  # zero count: still state held by a slot
    assert_pair(s.merged(), (encode([5], [1]), np.array([0])))
    with pytest.raises(ValueError):
        KeyedWindowState(0)


@given(st.lists(st.integers(-5, 10**12), max_size=40), st.lists(st.integers(0, 10**12), max_size=40))
@settings(max_examples=100, deadline=None)
def test_packing_and_merge_helpers(values, other):
    x = np.array(values, dtype=np.int64)
    assert np.array_equal(unpack_small(pickle.loads(pickle.dumps(pack_small(x)))), x)
    a = np.unique(np.array(other, dtype=np.int64) % (1 << 40))
    b = np.unique(np.abs(x) % (1 << 40))
    assert np.array_equal(unpack_codes(pack_codes(a)), a)
    assert np.array_equal(union_sorted(a, b), np.union1d(a, b))
    assert np.array_equal(searchsorted_ascending(a, np.sort(b)), np.searchsorted(a, np.sort(b)))
    assert np.array_equal(searchsorted_ascending(a, b[::-1]), np.searchsorted(a, b[::-1]))
    ids = np.sort(np.array(other, dtype=np.int64) % 7)
    assert_pair(segment_sums(ids, ids * 3), ref_aggregate(ids, ids * 3))


def test_aggregate_pairs_sparse_and_dense_key_paths():
    """Dense vocabulary ids take the counting-sort path, sparse or huge ids the argsort path."""
    rng = np.random.default_rng(5)
    for hi in (50, 10**9):
        keys = rng.integers(0, hi, 3000)
        workers = rng.integers(0, 300, 3000)
        codes = encode(keys, workers)
        w = rng.integers(0, 4, 3000)
        assert_pair(aggregate_pairs(codes, w), ref_aggregate(codes, w))
        assert_pair(aggregate_pairs(codes), ref_aggregate(codes))
