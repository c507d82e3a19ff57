"""Ground truth of a Spark engine run, rebuilt from Spark's own offset log (test helper).

Every committed micro-batch's offset range is in ``<checkpoint>/spark/offsets/<batch>`` (last line:
the end offset, JSON ``{instance: position, "route": version}``) and ``commits/<batch>``; the
generator and file sources are pure functions of their options, so the tuples of every batch can be
regenerated and the windowed counts recomputed without trusting anything the engine wrote.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Mapping

from skewlab.engine.runtimes.spark.result_sink import read_sink


def committed_ranges(checkpoint: Path) -> dict[int, tuple[dict[int, int], dict[int, int]]]:
    """Committed batch id → (start, end) position per source instance."""
    spark = Path(checkpoint) / "spark"
    out: dict[int, tuple[dict[int, int], dict[int, int]]] = {}
    prev: dict[int, int] = {}
    ids = sorted(int(p.name) for p in (spark / "offsets").iterdir() if p.name.isdigit())
    for b in ids:
        end_raw = json.loads((spark / "offsets" / str(b)).read_text().strip().splitlines()[-1])
        end = {int(k): int(v) for k, v in end_raw.items() if k != "route"}
        if (spark / "commits" / str(b)).exists():
            out[b] = ({k: prev.get(k, 0) for k in end}, end)
        prev = end
    return out


def batch_keys(checkpoint: Path, keys_of) -> dict[int, Counter]:
    """Committed batch id → Counter of its keys; ``keys_of(instance, start, end)`` lists a range's keys."""
    return {b: Counter(k for p in end for k in keys_of(p, start.get(p, 0), end[p]))
            for b, (start, end) in committed_ranges(checkpoint).items()}


def batch_values(checkpoint: Path, keys_of) -> dict[int, dict[str, list[int]]]:
    """Committed batch id → key → the values (source positions ``seq``) of its tuples in the batch."""
    out: dict[int, dict[str, list[int]]] = {}
    for b, (start, end) in committed_ranges(checkpoint).items():
        per: dict[str, list[int]] = {}
        for p in end:
            s = start.get(p, 0)
            for i, k in enumerate(keys_of(p, s, end[p])):
                per.setdefault(k, []).append(s + i)
        out[b] = per
    return out


def window_batches(per_batch: Mapping[int, Any], batch: int, window: int, *, own: bool = True) -> list[int]:
    """The committed batches of ``per_batch`` inside the window ``(batch - window, batch]`` (without
    ``batch`` itself unless ``own``), oldest first: only batches that exist, so a window of 100,000
    batches costs what the run committed, not 100,000 lookups per (batch, key)."""
    hi = batch if own else batch - 1
    return sorted(j for j in per_batch if batch - window < j <= hi)


def join_truth(per_batch: dict[int, dict[str, list[int]]], window: int) -> dict[tuple[int, str], tuple[int, int]]:
    """(batch, key) → (pairs joined, checksum) of the sliding-window self-join: each tuple with the
    key's tuples of the previous ``window - 1`` batches and the earlier ones of its own batch.  The
    checksum uses :func:`skewlab.engine.operators.builtin.join_probe`, itself checked pair by pair against a
    brute-force enumeration in tests/engine/test_window_state.py."""
    import numpy as np

    from skewlab.engine.operators.builtin import join_probe

    out = {}
    for b, per in per_batch.items():
        for k, vals in per.items():
            old = [v for j in window_batches(per_batch, b, window, own=False) for v in per_batch[j].get(k, [])]
            n = len(vals)
            out[(b, k)] = (n * len(old) + n * (n - 1) // 2,
                           int(join_probe(np.array(vals, dtype=np.int64), np.array(old, dtype=np.int64))))
    return out


def windowed_truth(per_batch: dict[int, Counter], window: int) -> dict[tuple[int, str], int]:
    """(batch, key) → the key's count over batches ``(batch - window, batch]``, for keys in the batch."""
    truth = {}
    for b, counter in per_batch.items():
        for k in counter:
            truth[(b, k)] = sum(per_batch[j][k] for j in window_batches(per_batch, b, window))
    return truth


def ewma_truth(per_batch: dict[int, Counter], window: int, alpha: float) -> dict[tuple[int, str], float]:
    """(batch, key) → the EWMA of the key's tuples per batch over the batches of ``(batch - window,
    batch]`` in which it had tuples, oldest first (examples/ewma_rate.py's definition, folded here
    from the offset log's counts)."""
    out = {}
    for b, counter in per_batch.items():
        for k in counter:
            m = None
            for j in window_batches(per_batch, b, window):
                c = per_batch[j][k]
                if c:
                    m = float(c) if m is None else alpha * c + (1 - alpha) * m
            out[(b, k)] = m
    return out


def sink_results(sink: Any, join: bool = False, schema: Any = None) -> tuple[dict[tuple[int, str], Any], int, int]:
    """The sink's results per (batch, key), the number of rows and of distinct (batch, key) rows
    (equal unless a (batch, key) was written twice).  ``sink``: a Parquet directory or a sink of
    :mod:`skewlab.engine.runtimes.spark.result_sink` (e.g. ``SparkEngine.results``).

    The sink holds one final row per (batch, key), merged over the workers that held shares of the
    key (:mod:`skewlab.engine.runtimes.spark.share_merge`).  Values: the windowed count, or with
    ``join`` (pairs, checksum); ``schema``: the sink's columns when ``sink`` is a directory of another
    operator's results (:func:`skewlab.engine.runtimes.spark.result_sink.sink_schema`)."""
    table = sink.read() if hasattr(sink, "read") else read_sink(str(sink), schema)
    t = table.to_pydict()
    checksums = t["checksum"] if join else [None] * len(t["key"])
    merged = {(b, k): (c, x) if join else c for b, k, c, x in zip(t["batch"], t["key"], t["result"], checksums)}
    return merged, len(t["key"]), len(merged)


def only(merged: dict, truth: dict) -> dict:
    """``merged`` restricted to the (batch, key) pairs of ``truth``; the others must be none but
    results of batches after the truth's last (a stopped run's held tuples, see tests' ``final``)."""
    last = max((b for b, _ in truth), default=-1)
    extra = [k for k in merged if k not in truth and k[0] <= last]
    assert not extra, f"results for keys without tuples: {extra[:3]}"
    return {k: v for k, v in merged.items() if k in truth}
