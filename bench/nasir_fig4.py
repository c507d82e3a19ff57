"""Nasir et al. ICDE 2016, Fig. 4: the fraction d/n of the workers D-Choices gives a head key, from Eq. 3.

Analytic, as in the paper (Sec. IV-C: "By using Inequality (3), we can find the appropriate value for
d, in case the distribution is known apriori"): for a Zipf(z) distribution over |K| keys with the
exact probabilities (:func:`skewlab.engine.workloads.synthetic.zipf_probabilities`), the head is
H = {k : p_k ≥ θ} with the paper's default θ = 1/(5n), and d is FINDOPTIMALCHOICES on it
(:func:`skewlab.engine.algorithms.groupings.split_key.find_d`, the function D-Choices runs on its
sketch); d = n means D-Choices switches to W-Choices.  The paper's m = 10⁷ messages enters only
through estimated frequencies, so exact probabilities stand for it.  No stream is routed.

    python3 bench/nasir_fig4.py [--keys 10000] [--epsilon 1e-4] [--workers 5,10,50,100]
"""

from __future__ import annotations

import argparse

import numpy as np

from skewlab.engine.algorithms.groupings.split_key import find_d
from skewlab.engine.workloads.synthetic import zipf_probabilities

#: the paper's skews z ∈ {0.1, …, 2.0}
SKEWS = tuple(round(0.1 * i, 1) for i in range(1, 21))


def d_over_n(z: float, n: int, keys: int = 10_000, epsilon: float = 1e-4) -> tuple[int, int]:
    """(d, |H|) of D-Choices for Zipf(z) over ``keys`` keys at ``n`` workers, θ = 1/(5n)."""
    p = zipf_probabilities(keys, z)
    head = p >= 1.0 / (5 * n)
    return find_d(p[head], float(p[~head].sum()), n, epsilon), int(head.sum())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--epsilon", type=float, default=1e-4)
    ap.add_argument("--workers", default="5,10,50,100", help="comma-separated n")
    a = ap.parse_args(argv)
    ns = [int(x) for x in a.workers.split(",")]
    print("| z | " + " | ".join(f"n = {n}: d/n (d, \\|H\\|)" for n in ns) + " |")
    print("|---|" + "---|" * len(ns))
    for z in SKEWS:
        cells = []
        for n in ns:
            d, h = d_over_n(z, n, a.keys, a.epsilon)
            cells.append(f"{d / n:.2f} ({d}, {h})" + (" W-C" if d >= n else ""))
        print(f"| {z} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
