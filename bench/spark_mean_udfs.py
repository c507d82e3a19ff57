"""The windowed per-key mean written as PySpark users write it, for ``bench/bench_spark.py``'s
baselines of ``--operator mean`` (and of a user's mean operator, examples/value_mean.py).

Both compute what the engine's ``mean`` computes: per key and micro-batch ``b`` with tuples of the
key, the mean of the key's values of batches ``(b - window, b]`` and how many tuples it averages.

* :func:`make_window_mean` — ``groupBy("key").applyInPandasWithState``: Spark calls Python once per
  key and micro-batch; the key's state is its ring of per-batch counts and sums.
* :func:`make_bucket_mean` — ``groupBy(pmod(hash(key), B)).applyInPandasWithState``: one call per
  bucket of keys and micro-batch, the bucket's state a table of its keys' rings (numpy arrays,
  pickled), updated with vectorised numpy — what a skilled PySpark engineer writes instead of a call
  per key.

Input rows ``key, batch, value`` (plus ``bucket`` for the second), output
:data:`MEAN_OUT`.  No timeout: state stays until the query ends (the benchmark's keys are bounded).
"""

from __future__ import annotations

import pickle
from typing import Any, Callable, Iterator

MEAN_OUT = "key string, batch long, result double, n long"
KEY_STATE = "last long, counts binary, sums binary"
BUCKET_STATE = "blob binary"


def _advance(counts: Any, sums: Any, last: int, b: int, window: int) -> None:
    """Clear the ring slots (columns of ``counts``/``sums``) of batches ``last+1 … b``, in place."""
    if b - last >= window:
        counts[..., :] = 0
        sums[..., :] = 0.0
    else:
        for x in range(last + 1, b + 1):
            counts[..., x % window] = 0
            sums[..., x % window] = 0.0


def make_window_mean(window: int) -> Callable[..., Iterator[Any]]:
    """The function of ``groupBy("key").applyInPandasWithState``: one call per key and micro-batch."""
    import numpy as np
    import pandas as pd

    W = int(window)

    def mean(key: tuple, frames: Iterator[Any], state: Any) -> Iterator[Any]:
        n, s, b = 0, 0.0, -1
        for pdf in frames:
            if len(pdf):
                n += len(pdf)
                s += float(pdf["value"].sum())
                b = max(b, int(pdf["batch"].max()))
        if n == 0:
            return
        if state.exists:
            last, cb, sb = state.get
            counts = np.frombuffer(cb, dtype="<i8").copy()
            sums = np.frombuffer(sb, dtype="<f8").copy()
            _advance(counts, sums, last, b, W)
            last = max(last, b)
        else:
            counts, sums, last = np.zeros(W, "<i8"), np.zeros(W, "<f8"), b
        counts[b % W] += n
        sums[b % W] += s
        state.update((last, counts.tobytes(), sums.tobytes()))
        total = int(counts.sum())
        yield pd.DataFrame({"key": [key[0]], "batch": [b], "result": [float(sums.sum()) / total], "n": [total]})

    return mean


def make_bucket_mean(window: int) -> Callable[..., Iterator[Any]]:
    """The function of ``groupBy(bucket).applyInPandasWithState``: one call per bucket and batch;
    state = the pickled ``(last batch, keys, counts[K, W], sums[K, W])`` of the bucket's keys."""
    import numpy as np
    import pandas as pd

    W = int(window)

    def mean(bucket: tuple, frames: Iterator[Any], state: Any) -> Iterator[Any]:
        parts = [pdf for pdf in frames if len(pdf)]
        if not parts:
            return
        pdf = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
        b = int(pdf["batch"].max())
        if state.exists:
            last, keys, counts, sums = pickle.loads(state.get[0])
            _advance(counts, sums, last, b, W)
            last = max(last, b)
        else:
            last, keys = b, pd.Index([], dtype=object)
            counts, sums = np.zeros((0, W), "<i8"), np.zeros((0, W), "<f8")
        codes, uniq = pd.factorize(pdf["key"])
        slot = keys.get_indexer(uniq)
        new = slot < 0
        if new.any():
            slot[new] = np.arange(len(keys), len(keys) + int(new.sum()))
            keys = keys.append(pd.Index(uniq[new], dtype=object))
            counts = np.vstack([counts, np.zeros((int(new.sum()), W), "<i8")])
            sums = np.vstack([sums, np.zeros((int(new.sum()), W), "<f8")])
        counts[slot, b % W] += np.bincount(codes, minlength=len(uniq))
        sums[slot, b % W] += np.bincount(codes, weights=pdf["value"].to_numpy(np.float64), minlength=len(uniq))
        state.update((pickle.dumps((last, keys, counts, sums), protocol=pickle.HIGHEST_PROTOCOL),))
        n = counts[slot].sum(axis=1)
        yield pd.DataFrame({"key": np.asarray(uniq, dtype=object), "batch": b, "result": sums[slot].sum(axis=1) / n,
                            "n": n})

    return mean
