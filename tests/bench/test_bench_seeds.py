"""Aggregation over seeds in ``skewlab bench``: :class:`skewlab.bench.common.Spread`, bands, ``--seeds``."""

from __future__ import annotations

import argparse
import math

import numpy as np
import pytest

from skewlab.bench import cli as bench_cli
from skewlab.bench.common import Context, Spread, fmt, md_table, new_figure, plot_band, spread


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
    assert "--seeds" not in ctx.command("fish", seeds=False)  # a target that runs one seed says so


@pytest.mark.slow
def test_fish_page_names_no_seeds_it_did_not_run(tmp_path):
    from skewlab.bench import cli as cli_mod

    secs = cli_mod.run_targets(["fish"], str(tmp_path), quick=True, seed=0, seeds=3, progress=False)
    assert "--seeds" not in secs[0].command and "--seed 0" in secs[0].command
    assert Context(tmp_path).n_seeds == 5 and Context(tmp_path, quick=True).n_seeds == 2


def test_seeds_below_one_is_a_usage_error(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="skewlab")
    bench_cli.add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["bench", "dkg", "--quick", "--seeds", "0", "--out", str(tmp_path)])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--seeds must be at least 1" in err
    assert not (tmp_path / "results").exists()


def test_mean_rows_merges_seeds_of_a_configuration():
    from skewlab.bench.common import mean_rows

    raw = [{"n": 5, "alg": "pkg", "I": 0.1, "d": [2, 4], "ok": True, "name": "a"},
           {"n": 5, "alg": "hash", "I": 1.0, "d": [1, 1], "ok": True, "name": "h"},
           {"n": 5, "alg": "pkg", "I": 0.3, "d": [4, 6], "ok": False, "name": "b"}]
    pkg, hsh = mean_rows(raw, ("n", "alg"))
    assert (pkg["n"], pkg["alg"], hsh["alg"]) == (5, "pkg", "hash")  # first-seen order
    assert math.isclose(pkg["I"], 0.2) and pkg["I_per_seed"] == [0.1, 0.3]
    assert pkg["d"] == [3.0, 5.0] and pkg["d_per_seed"] == [[2, 4], [4, 6]]
    assert pkg["ok"] is False and hsh["ok"] is True
    assert pkg["name"] == "a" and pkg["name_per_seed"] == ["a", "b"]
    assert hsh["I_per_seed"] == [1.0]


def test_seed_matrix_is_seeds_by_x_with_nan_for_missing():
    from skewlab.bench.common import mean_rows, seed_matrix

    rows = mean_rows([{"z": z, "alg": "pkg", "I": z * s} for s in (1, 2) for z in (0.5, 1.0)], ("z", "alg"))
    m = seed_matrix(rows, "I", "z", [0.5, 1.0, 2.0], alg="pkg")
    assert m.shape == (2, 3) and m[:, :2].tolist() == [[0.5, 1.0], [1.0, 2.0]]
    assert np.isnan(m[:, 2]).all()


def test_fig8_bars_with_one_seed_draw_without_error_bars(tmp_path):
    """``bench nasir --seeds 1`` stopped here: head + tail − (head + tail of the seed) rounds below 0, and
    matplotlib rejects a negative ``yerr``."""
    from skewlab.bench import nasir_theta
    from skewlab.bench.common import Section

    groupings = {alg: {"head": [0.1, 0.3], "tail": [0.2, 0.4], "hot_workers": 1, "seeds_imbalance": 0.05,
                       "imbalance": 0.1} for alg in nasir_theta.FIG8_ALGOS}
    run = {"n": 2, "z": 1.4, "theta": 0.0625, "messages": 100, "sources": 2, "warmup": 10, "head_keys": 3,
           "head_share": 0.4, "hot_share": 0.2, "hot_choices": [0, 1], "groupings": groupings}
    f8 = nasir_theta.merge_fig8([run])
    sec = Section("nasir", "t", "cmd", "")
    nasir_theta.fig8_figure(Context(tmp_path, n_seeds=1), sec, f8)
    assert (tmp_path / sec.figures[0]).exists()


def test_minmax_errors_clip_rounding_and_skip_one_seed():
    from skewlab.bench.common import minmax_errors

    head, tail = np.array([0.1]), np.array([0.2])
    assert minmax_errors(head + tail, [[0.1 + 0.2]]) is None
    err = minmax_errors(head + tail, [head + tail - 1e-17, head + tail])
    assert err.shape == (2, 1) and (err >= 0).all()
    err = minmax_errors([2.0], [[1.0], [4.0]])
    assert err.tolist() == [[1.0], [2.0]]


def test_a_full_run_with_fewer_seeds_says_so_in_its_header():
    from skewlab.bench.common import fewer_seeds_note

    assert "1 seed, not the default 5" in fewer_seeds_note("skewlab bench nasir --seed 0 --seeds 1 --out docs")
    assert "2 seeds, not the default 5" in fewer_seeds_note("skewlab bench fang --seed 0 --seeds 2 --out docs")
    assert fewer_seeds_note("skewlab bench fang --seed 0 --seeds 5 --out docs") == ""
    assert fewer_seeds_note("skewlab bench fang --quick --seed 0 --seeds 1 --out docs") == ""
    assert fewer_seeds_note("skewlab bench fish --seed 0 --out docs") == ""


def test_gedik_timing_warns_when_the_machine_was_busy(monkeypatch):
    import os

    from skewlab.bench import repro_gedik

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (17.0, 20.0, 20.0))
    assert "load average was 17.0 on 2 cores" in repro_gedik.busy_note()
    monkeypatch.setattr(os, "getloadavg", lambda: (1.5, 1.0, 1.0))
    assert repro_gedik.busy_note() == ""
