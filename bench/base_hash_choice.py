"""The measurements behind the rebalancers' default base hash (issue 39, engine/algorithms/base_hash.py).

Candidates for the worker of a key outside the routing table, at 10 workers: plain ``fp mod n``
(``hash``), the slot table (``base=slots``, built for 10 workers: at 10 it is ``fp mod 10``), jump consistent hash (Lamping & Veach 2014, Fig. 1; a
candidate measured here, not used by the engine) and the consistent-hash ring with 128, 1000 and 4096
points per worker (``base=consistent``).  For each, over 20 draws of 1,000,000 uniform 64-bit
fingerprints: the imbalance max/mean − 1 of keys per worker (uniform keys, median and max over the
draws), the same for 1,000,000 tuples of Zipf(1.0) over the first 100,000 keys of each draw (median),
the share of keys that change worker from 10 to 11 workers (mean), and the routing speed over
4,000,000 fingerprints (best of 7; noisy on a shared machine: report the load with it).

Usage: ``python bench/base_hash_choice.py`` (about a minute).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from skewlab.engine.algorithms.base_hash import SlotTable  # noqa: E402
from skewlab.engine.algorithms.groupings.basic import ConsistentHashRing  # noqa: E402
from skewlab.engine.algorithms.keys import home  # noqa: E402


@njit(cache=True)
def _jump(fps, n, out):  # pragma: no cover - compiled
    """Lamping & Veach (2014) Fig. 1 per fingerprint (checked against their published outputs below)."""
    for x in range(fps.size):
        key = fps[x]
        b = np.int64(-1)
        j = np.int64(0)
        while j < n:
            b = j
            key = key * np.uint64(2862933555777941757) + np.uint64(1)
            j = np.int64(float(b + 1) * (2147483648.0 / float((key >> np.uint64(33)) + np.uint64(1))))
        out[x] = b


def jump(fps: np.ndarray, n: int) -> np.ndarray:
    out = np.empty(fps.size, dtype=np.int64)
    _jump(np.ascontiguousarray(fps, dtype=np.uint64), np.int64(n), out)
    return out


def candidates(n: int, origin: int) -> dict:
    """Every candidate for ``n`` workers; the slot table of a planner built with ``origin`` workers."""
    return {"hash (fp mod n)": lambda f: home(f, n), "slots (fp mod S, S ≥ 2^16)": SlotTable(n, origin).lookup,
            "jump (Lamping & Veach)": lambda f: jump(f, n),
            "ring, 128 points": ConsistentHashRing(n, 128).lookup,
            "ring, 1000 points": ConsistentHashRing(n, 1000).lookup,
            "ring, 4096 points": ConsistentHashRing(n, 4096).lookup}


def _imbalance(workers: np.ndarray, n: int, weights: np.ndarray | None = None) -> float:
    loads = np.bincount(workers, weights=weights, minlength=n)
    return float(loads.max() / loads.mean() - 1.0)


def main() -> int:
    # published outputs of JumpConsistentHash (key, buckets) -> bucket
    for key, buckets, bucket in ((256, 1024, 520), (1, 10, 6), (0xDEADBEEF, 1000, 285)):
        assert jump(np.array([key], dtype=np.uint64), buckets)[0] == bucket
    n, draws = 10, 20
    c10, c11 = candidates(n, n), candidates(n + 1, n)
    zipf = 1.0 / np.arange(1, 100_001, dtype=np.float64)
    zipf /= zipf.sum()
    res: dict[str, dict[str, list[float]]] = {k: {"uniform": [], "zipf": [], "moved": []} for k in c10}
    for d in range(draws):
        rng = np.random.default_rng(d)
        fps = rng.integers(0, 2**64 - 1, 1_000_000, dtype=np.uint64, endpoint=True)
        counts = rng.multinomial(1_000_000, zipf).astype(np.float64)
        for name, f in c10.items():
            w10, w11 = f(fps), c11[name](fps)
            res[name]["uniform"].append(_imbalance(w10, n))
            res[name]["zipf"].append(_imbalance(w10[:100_000], n, counts))
            res[name]["moved"].append(float(np.mean(w10 != w11)))
    fps = np.random.default_rng(99).integers(0, 2**63, 4_000_000, dtype=np.uint64)
    print("| base | uniform keys: median (max) imbalance | Zipf 1.0: median imbalance | keys moved 10 → 11 | M keys/s |")
    print("|---|---|---|---|---|")
    for name, f in c10.items():
        f(fps[:10])
        best = min(_timed(f, fps) for _ in range(7))
        r = res[name]
        print(f"| {name} | {np.median(r['uniform']):.4f} ({max(r['uniform']):.4f}) | {np.median(r['zipf']):.3f} | "
              f"{np.mean(r['moved']):.4f} | {fps.size / best / 1e6:.0f} |")
    print(f"\n1/(n+1) = {1 / (n + 1):.4f}; {draws} draws")
    return 0


def _timed(f, fps: np.ndarray) -> float:
    t0 = time.perf_counter()
    f(fps)
    return time.perf_counter() - t0


if __name__ == "__main__":
    sys.exit(main())
