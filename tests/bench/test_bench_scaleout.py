"""bench/bench_scaleout.py: the table of tuples/s per grouping and worker count against hash at the same
count, the figure, and usage errors refused before any run."""

from __future__ import annotations

import pytest

from skewlab.bench import bench_scaleout as bench


def _res(**tps):
    return {"groupings": {name: {"tuples_per_second": v} for name, v in tps.items()}}


def test_each_ratio_is_against_hash_at_the_same_worker_count():
    table = bench.scaleout_table({4: _res(hash=100.0, wchoices=150.0), 2: _res(hash=80.0, wchoices=80.0)})
    assert table["wchoices"] == {2: {"tps": 80.0, "x_hash": 1.0}, 4: {"tps": 150.0, "x_hash": 1.5}}
    assert table["hash"][4]["x_hash"] == 1.0
    assert "x_hash" not in bench.scaleout_table({8: _res(pkg=10.0)})["pkg"][8]  # no hash at that N: no ratio


def test_the_figure_is_written(tmp_path):
    path = tmp_path / "scaleout.png"
    bench.draw(bench.scaleout_table({2: _res(hash=1e4, dchoices=2e4), 4: _res(hash=1e4, dchoices=3e4)}), str(path), "t")
    assert path.stat().st_size > 1000


@pytest.mark.parametrize("argv, says", [
    (["--workers", "2,x"], "--workers: expected comma-separated integers"),
    (["--workers", "0"], "--workers: expected integers >= 1"),
    (["--only", "pkg,dchoices"], "--only must include hash"),
])
def test_usage_errors_exit_2_before_any_run(argv, says, capsys, monkeypatch):
    monkeypatch.setattr(bench.subprocess, "run", lambda *a, **k: pytest.fail("ran bench_spark"))
    with pytest.raises(SystemExit) as exc:
        bench.main(argv)
    assert exc.value.code == 2 and says in capsys.readouterr().err


def test_a_run_writes_its_table_figure_and_json(tmp_path, monkeypatch, capsys):
    """The whole command with bench_spark's runs replaced by their JSON (the runs themselves: bench_spark's
    own tests): one bench_spark per worker count with local[N], the table, the figure and the JSON."""
    import json
    import types

    seen = []

    def fake_run(cmd, **kw):
        n = int(cmd[cmd.index("--workers") + 1])
        seen.append((n, cmd[cmd.index("--master") + 1]))
        with open(cmd[cmd.index("--json") + 1], "w") as fh:
            json.dump(_res(hash=1000.0 * n, wchoices=1500.0 * n), fh)
        return types.SimpleNamespace(returncode=0, stdout="")

    monkeypatch.setattr(bench.subprocess, "run", fake_run)
    out = tmp_path / "out.json"
    assert bench.main(["--workers", "2,4", "--only", "hash,wchoices", "--figure", str(tmp_path / "f.png"),
                       "--json", str(out)]) == 0
    assert seen == [(2, "local[2]"), (4, "local[4]")]
    assert json.loads(out.read_text())["table"]["wchoices"]["4"] == {"tps": 6000.0, "x_hash": 1.5}
    assert (tmp_path / "f.png").stat().st_size > 1000
    import re

    assert re.search(r"\nwchoices +3\.0 \(1\.50\) +6\.0 \(1\.50\)\n", capsys.readouterr().out)
