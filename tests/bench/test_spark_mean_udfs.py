"""bench/spark_mean_udfs.py: the PySpark baselines' windowed mean (a call per key; a call per bucket)
against the mean recomputed from the tuples of the window, without Spark (the state holder stands in
for Spark's GroupState: exists / get / update)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from skewlab.bench.spark_mean_udfs import make_bucket_mean, make_window_mean


class State:
    def __init__(self) -> None:
        self.value = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self):
        return self.value

    def update(self, value) -> None:
        self.value = value


def _stream(seed: int = 0, batches: tuple[int, ...] = (0, 1, 2, 3, 5, 6, 8, 20)):
    rng = np.random.default_rng(seed)
    for b in batches:  # gaps: a key's slots of batches without tuples are cleared
        n = 300
        yield pd.DataFrame({"key": [f"k{i}" for i in rng.integers(0, 12, n)], "batch": b,
                            "value": rng.integers(0, 1000, n).astype(float)})


def _truth(frames: list[pd.DataFrame], window: int) -> dict[tuple[str, int], tuple[float, int]]:
    allrows = pd.concat(frames)
    out = {}
    for f in frames:
        b = int(f["batch"].iloc[0])
        for key in f["key"].unique():
            w = allrows[(allrows.key == key) & (allrows.batch > b - window) & (allrows.batch <= b)]
            out[(key, b)] = (w.value.mean(), len(w))
    return out


@pytest.mark.parametrize("window", [1, 3])
def test_by_key_and_by_bucket_give_the_windowed_mean(window: int) -> None:
    frames = list(_stream())
    truth = _truth(frames, window)
    by_key, by_bucket = make_window_mean(window), make_bucket_mean(window)
    key_states: dict[str, State] = {}
    bucket_states = {0: State(), 1: State()}
    got_key, got_bucket = {}, {}
    for f in frames:
        for key, part in f.groupby("key"):
            for row in by_key((key,), iter([part]), key_states.setdefault(key, State())):
                got_key.update({(r.key, r.batch): (r.result, r.n) for r in row.itertuples()})
        buckets = f["key"].str[1:].astype(int) % 2
        for bucket, part in f.groupby(buckets):
            half = len(part) // 2  # a bucket's rows may come in several frames
            for row in by_bucket((bucket,), iter([part.iloc[:half], part.iloc[half:]]), bucket_states[bucket]):
                got_bucket.update({(r.key, r.batch): (r.result, r.n) for r in row.itertuples()})
    for got in (got_key, got_bucket):
        assert got.keys() == truth.keys()
        for k, (mean, n) in truth.items():
            assert got[k][1] == n and got[k][0] == pytest.approx(mean)
