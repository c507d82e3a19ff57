"""PKG with and without distinct choices on the Zipf stream of the engine's Fig. 13/14 runs.

Routing only (no Spark): the workload's keys ``k0..k{K-1}`` (``k0`` hottest), Zipf(z) samples from
``numpy.random.default_rng(seed)``, batches of 40,000 through one source's router; prints the two
hash choices of ``k0`` and, per z, the tuples max / mean of hash, pkg, pkg with ``distinct=true``
and dchoices (docs/results/nasir.md, "Nasir et al. Fig. 13/14 on the engine").

    python3 bench/bench_pkg_distinct.py [--workers 8] [--keys 10000] [--tuples 200000] [--seed 0]
"""

from __future__ import annotations

import argparse

import numpy as np

from skewlab.engine.algorithms import registry
from skewlab.engine.algorithms.keys import Vocabulary, candidate
from skewlab.engine.workloads.synthetic import zipf_probabilities

GROUPINGS = (("hash", {}), ("pkg", {}), ("pkg", {"distinct": True}), ("dchoices", {}))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--tuples", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    n = a.workers
    vocab = Vocabulary([f"k{i}" for i in range(a.keys)])
    print(f"k0: F_0 = {int(candidate(vocab.fps[:1], 0, n)[0])}, F_1 = {int(candidate(vocab.fps[:1], 1, n)[0])} (n = {n})")
    for z in (1.2, 1.4, 1.7, 2.0):
        p = zipf_probabilities(a.keys, z)
        ids = np.random.default_rng(a.seed).choice(a.keys, size=a.tuples, p=p)
        row = [f"z = {z}: p(k0) = {p[0]:.3f}"]
        for name, params in GROUPINGS:
            router = registry.create(name, n, 1, params=params).router
            out = np.concatenate([router.route(vocab.fps[ids[i:i + 40_000]]) for i in range(0, a.tuples, 40_000)])
            loads = np.bincount(out, minlength=n)
            row.append(f"{name}{' distinct' if params else ''} {loads.max() / loads.mean():.2f}")
        print("; ".join(row))


if __name__ == "__main__":
    main()
