"""Nasir et al. Fig. 4 from Eq. 3 (bench/nasir_fig4.py): the paper's claim that at n = 50 and 100 D-Choices
needs d < n for every skew, while at small n it switches to W-Choices at high skew."""

import pytest

from skewlab.bench.nasir_fig4 import SKEWS, d_over_n


@pytest.mark.parametrize("n", (50, 100))
def test_d_stays_below_n_at_scale(n):
    assert all(d_over_n(z, n)[0] < n for z in SKEWS)


def test_small_n_switches_to_w_choices_at_high_skew():
    d, head = d_over_n(2.0, 5)
    assert d == 5 and head > 0
    assert d_over_n(0.5, 5) == (2, 0)  # no key reaches θ = 1/(5n): PKG's two choices
