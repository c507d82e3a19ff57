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

from engine.spark.operator import read_sink


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


def windowed_truth(per_batch: dict[int, Counter], window: int) -> dict[tuple[int, str], int]:
    """(batch, key) → the key's count over batches ``(batch - window, batch]``, for keys in the batch."""
    truth = {}
    for b, counter in per_batch.items():
        for k in counter:
            truth[(b, k)] = sum(per_batch.get(j, Counter())[k] for j in range(b - window + 1, b + 1))
    return truth


def sink_results(sink_dir: Path) -> tuple[dict[tuple[int, str], int], int]:
    """(batch, key) → windowed count from the sink, and the number of result rows (duplicates count)."""
    t = read_sink(str(sink_dir)).to_pydict()
    rows = list(zip(t["batch"], t["key"], t["count"]))
    return {(b, k): c for b, k, c in rows}, len(rows)
