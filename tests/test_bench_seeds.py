"""Aggregation over seeds in ``skewlab bench``: :class:`bench.common.Spread`, bands, ``--seeds``."""

from __future__ import annotations

import argparse
import math

import numpy as np

from bench import cli as bench_cli
from bench.common import Context, Spread, fmt, md_table, new_figure, plot_band, spread


def test_spread_mean_min_max_and_skips_missing():
    s = spread([0.1, 0.3, None, float("nan"), 0.2])
    assert (s.n, s.lo, s.hi) == (3, 0.1, 0.3) and math.isclose(s.mean, 0.2)
    assert fmt(s) == "0.2 (0.1–0.3)"
    assert str(spread([2.0, 2.0])) == "2"  # no range when every seed agrees
    assert spread([]).n == 0 and fmt(spread([])) == "-"


def test_table_cells_accept_spreads():
    table = md_table(["alg", "I"], [["pkg", spread([1e-4, 3e-4])]])
    assert "| pkg | 2.00e-04 (1.00e-04–3.00e-04) |" in table


def test_band_draws_mean_line_and_min_max_fill():
    fig, axes = new_figure()
    ax = axes[0, 0]
    line = plot_band(ax, [1, 2, 3], [[1, 2, 3], [3, 4, 5]], label="x")
    assert list(line.get_ydata()) == [2, 3, 4]
    assert len(ax.collections) == 1  # the band
    plot_band(ax, [1, 2, 3], [[1, 2, 3]], label="one seed")
    assert len(ax.collections) == 1  # one seed: no band


def test_context_seeds_and_command(tmp_path):
    ctx = Context(tmp_path, seed=3, n_seeds=4)
    assert ctx.seeds == [3, 4, 5, 6]
    assert "--seed 3 --seeds 4" in ctx.command("nasir")
    assert Context(tmp_path).n_seeds == 5 and Context(tmp_path, quick=True).n_seeds == 2


def test_seeds_below_one_is_a_usage_error(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="skewlab")
    bench_cli.add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["bench", "dkg", "--quick", "--seeds", "0", "--out", str(tmp_path)])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--seeds must be at least 1" in err
    assert not (tmp_path / "results.md").exists()
