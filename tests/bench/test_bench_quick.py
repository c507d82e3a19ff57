"""``skewlab bench all --quick``: every figure and table is produced and the reproductions' invariants hold.

Runs the whole quick benchmark once, in-process, through an argparse parser built with
``skewlab.bench.cli.add_commands`` (the way ``skewlab/cli.py`` wires it), then checks the page, the figures and
the data behind them.  In the slow suite, beside tests/end_to_end/test_readme.py::test_bench_commands, which
runs the same command as the README writes it (its share of the README command: docs/design-notes.md, CI budget).
"""

from __future__ import annotations

import argparse
import re
import shutil

import numpy as np
import pytest

from skewlab.bench import TARGETS
from skewlab.bench import cli as bench_cli
from skewlab.bench.common import Section, result_page, write_results
from skewlab.bench.results_tables import check_seals

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    parser = argparse.ArgumentParser(prog="skewlab")
    sub = parser.add_subparsers(dest="command", required=True)
    bench_cli.add_commands(sub)
    args = parser.parse_args(["bench", "all", "--quick", "--out", str(out), "--seed", "0"])
    code = args.func(args)
    sections = {s.key: s for s in bench_cli.LAST_RUN}
    return out, code, sections


def test_exit_status_and_every_section(quick_run):
    out, code, sections = quick_run
    for s in sections.values():  # no unfilled f-string placeholder in the generated text (Gedik Fig. 3/4 had one)
        assert not re.search(r"\{[a-z_]+\[", s.markdown), s.key
    failed = {k: [(c.name, c.detail) for c in s.checks if not c.ok] for k, s in sections.items()}
    assert code == 0, failed
    assert list(sections) == list(TARGETS)
    for s in sections.values():
        assert s.checks and all(c.ok for c in s.checks), (s.key, failed[s.key])


def test_page_links_every_figure_and_figures_exist(quick_run):
    out, _, sections = quick_run
    pages = {key: result_page(out, key).read_text(encoding="utf-8") for key in TARGETS}
    text = "\n".join(pages.values())
    for key, page in pages.items():
        assert f"<!-- bench:{key}:start -->" in page and f"<!-- bench:{key}:end -->" in page
        assert page.startswith("# ") and "](../results.md)" in page  # its own header, a link to the headline
    assert not (out / "results.md").exists()  # the headline page is written by hand
    linked = set(re.findall(r"!\[[^\]]*\]\(\.\./(figures/[^)]+\.png)\)", text))
    on_disk = {f"figures/{p.name}" for p in (out / "figures").glob("*.png")}
    assert linked == on_disk and len(on_disk) >= 14
    assert "](figures/" not in text  # every figure link goes one folder up, from results/ to figures/
    for f in linked:
        data = (out / f).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000
    for s in sections.values():
        assert set(s.figures) <= linked
        assert "|---|" in s.markdown  # at least one table
        assert f"`{s.command}`" in pages[s.key]  # exact command recorded next to the section
        assert dict(check_seals(pages[s.key]))[s.key] is True  # the tables carry their seal
    assert "seed 0" in text and "load average" in text and ", commit " in text


def test_nasir_invariants(quick_run):
    rows = quick_run[2]["nasir"].data["rows"]
    assert quick_run[2]["nasir"].data["seeds"] == [0, 1]
    for r in rows:  # one value per seed, the plain key is their mean; the invariants hold in every seed
        assert len(r["seeds_imbalance_per_seed"]) == 2
        assert r["seeds_imbalance"] == pytest.approx(np.mean(r["seeds_imbalance_per_seed"]))
        if r["algorithm"] == "shuffle":
            assert max(r["imbalance_per_seed"]) < 1e-3
        if r["algorithm"] == "hash":
            assert r["replication_per_seed"] == [1.0, 1.0]
        if r["algorithm"] == "pkg":
            assert max(r["replication_per_seed"]) <= 2.0
        if r["algorithm"] == "shuffle":
            assert r["imbalance"] < 1e-3
            if not np.isnan(r["hot_replication"]):  # nan: no key with >= 20n tuples in this stream
                assert r["hot_replication"] == pytest.approx(r["n"], rel=0.01)
        if r["algorithm"] == "hash":
            assert r["replication"] == 1.0
        if r["algorithm"] == "pkg":
            assert r["replication"] <= 2.0

    assert any(r["algorithm"] == "shuffle" and not np.isnan(r["hot_replication"]) for r in rows)

    def I(alg, z, n):
        return next(r["seeds_imbalance"] for r in rows if r["algorithm"] == alg and r["z"] == z and r["n"] == n)

    assert I("dchoices", 2.0, 50) <= I("pkg", 2.0, 50)
    assert I("wchoices", 2.0, 50) <= I("pkg", 2.0, 50)
    for q in quick_run[2]["nasir"].data["q2"]:
        assert 2 <= q["min_d"] <= q["n"] and 2 <= q["chosen_min"] <= q["chosen_max"] <= q["n"]
        assert len(q["min_d_per_seed"]) == 2 and all(2 <= d <= q["n"] for d in q["min_d_per_seed"])
    # Q1 / Fig. 7: every (z, n) of the θ sweep has W-C, RR and D-C at θ = 2/n … 1/(8n)
    q1 = quick_run[2]["nasir"].data["q1"]
    sizes = quick_run[2]["nasir"].data["sizes"]
    assert {(r["algorithm"], r["theta_n"]) for r in q1} == {
        (a, c) for a in ("wchoices", "rr-head", "dchoices") for c in (2.0, 1.0, 0.5, 0.25, 0.125)}
    assert len(q1) == 15 * len(sizes["q1_zs"]) * len(sizes["q1_ns"])
    for r in q1:
        assert r["head_keys"] >= 0 and 1.0 <= r["replication"] <= r["n"]
    # Fig. 8: head + tail loads of every grouping add up to the stream
    for g in quick_run[2]["nasir"].data["fig8"]["groupings"].values():
        assert sum(g["head"]) + sum(g["tail"]) == pytest.approx(1.0)
        for head, tail in zip(g["head_per_seed"], g["tail_per_seed"]):
            assert sum(head) + sum(tail) == pytest.approx(1.0)
    page = quick_run[2]["nasir"].markdown
    assert page.count("**Verdict: ") >= len(quick_run[2]["nasir"].figures)


def test_fang_runs_every_seed_and_ends_every_figure_with_a_verdict(quick_run):
    sec = quick_run[2]["fang"]
    fang = sec.data
    assert fang["seeds"] == [0, 1]  # --quick: 2 seeds
    rows = [r for rows in fang["sweeps"].values() for r in rows] + fang["amax"] + fang["readj_sigma"]
    for r in rows:
        assert r["seeds"] == [0, 1] and len(r["migration_per_seed"]) == 2
        assert r["migration"] == pytest.approx(np.mean(r["migration_per_seed"]))
        assert r["table_max"] == max(r["table_max_per_seed"]) and r["plans"] == min(r["plans_per_seed"])
    # each seed draws its own stream: the seeds' migration costs differ for the rebalancers
    assert any(len(set(r["migration_per_seed"])) > 1 for r in rows if r["algorithm"] == "mixed")
    for r in fang["scale_out"]:
        assert len(r["imbalance_per_seed"]) == 2
        assert r["imbalance"] == pytest.approx(np.mean(r["imbalance_per_seed"], axis=0).tolist())
        assert len(r["resize_migration_per_seed"]) == 2
    assert all(len(r["plan_seconds_per_seed"]) == 2 for r in fang["compact"])
    # every figure is followed by a verdict before the next figure, and tables show mean (min–max)
    after = sec.markdown.split("![")[1:]
    assert len(after) == len(sec.figures) == 4
    for part in after:
        assert re.search(r"\*\*Verdict: (reproduced|partly reproduced|not reproduced)\*\* — ", part), part[:80]
    assert re.search(r"\| [0-9.e+-]+ \([0-9.e+-]+–[0-9.e+-]+\) \|", sec.markdown)


def test_fang_gedik_dkg_guo_zhou_invariants(quick_run):
    s = quick_run[2]
    fang = s["fang"].data
    allrows = [r for rows in fang["sweeps"].values() for r in rows] + fang["amax"]
    assert all(r["migration"] == 0.0 for r in allrows if r["algorithm"] == "pkg")
    assert all(r["table_max"] <= r["amax"] for r in fang["amax"] if r["feasible"] == 1.0)
    # Fig. 9 on average over the θmax sweep (at θmax = 0.3 both migrate about the same)
    th = fang["sweeps"]["theta"]
    mixed = np.mean([r["migration"] for r in th if r["algorithm"] == "mixed"])
    mintable = np.mean([r["migration"] for r in th if r["algorithm"] == "mintable"])
    assert mintable >= mixed
    assert all(r["table_max"] <= r["amax"] for r in allrows if r["algorithm"] in ("mixed", "mixed-bf"))
    scale = {r["label"]: r for r in fang["scale_out"]}
    assert scale["mixed"]["resize_migration"] < 0.3 < scale["mixed (base=mod)"]["resize_migration"]

    ged = s["gedik"].data["channels"]
    cons = {r["n"]: r["m"] for r in ged if r["algorithm"] == "consistent"}
    uni = {r["n"]: r["m"] for r in ged if r["algorithm"] == "uniform"}
    assert all(cons[n] < uni[n] for n in cons if n >= 3)

    dkg = s["dkg"].data["rows"]
    assert {r["replication"] for r in dkg if r["algorithm"] == "hash"} == {1.0}
    hot = [r for r in dkg if r["r"] == 70]
    st = {r["algorithm"]: r["load_stddev_pct"] for r in hot}
    assert st["shuffle"] < st["dkg"] < st["pkg"] < st["hash"]
    per = {r["algorithm"]: r["load_stddev_pct_per_seed"] for r in hot}
    assert len(per["dkg"]) == 2 and all(s_ < d < p < k for s_, d, p, k in
                                        zip(per["shuffle"], per["dkg"], per["pkg"], per["hash"]))
    assert s["dkg"].markdown.count("**Verdict: ") >= 4

    gz = s["guo-zhou"].data["runs"]
    assert gz["gaussian/pkg"]["move_mean"] == 0.0 and gz["zipf/pkg"]["move_mean"] == 0.0
    assert gz["gaussian/uhlb"]["move_per_balancing"] > gz["gaussian/elb"]["move_per_balancing"]

    from skewlab.engine.algorithms import registry

    cuts = s["trace"].data["cuts"]
    assert [c["name"] for c in cuts] == ["hour", "day"]
    for c in cuts:  # every grouping of the registry, per interval and whole stream
        assert {r["algorithm"] for r in c["rows"]} == set(registry.names())
        assert all(0 <= r["median"] <= r["p90"] for r in c["rows"])
    day = {r["algorithm"]: r for r in cuts[1]["rows"]}
    assert day["shuffle"]["median"] < day["pkg"]["median"] < day["hash"]["median"]

    perf = s["perf"].data
    assert {r["algorithm"] for r in perf["routing"]} >= {"hash", "mixed", "dchoices"}
    assert all("error" not in r for r in perf["routing"])


def test_bench_route_equals_simulate():
    """The reproductions' shortcut (route the whole stream once) gives exactly `skewlab simulate`'s loads."""
    from skewlab.bench.common import route, stream_metrics, zipf_stream
    from skewlab.engine.cli.simulate import SimulationConfig, run_simulation

    for alg in ("pkg", "dchoices", "dkg"):
        sim = run_simulation(SimulationConfig(algorithm=alg, workers=7, sources=3, workload="zipf",
                                              workload_params={"z": 1.3, "keys": 500}, messages=20_000,
                                              interval_messages=5_000, seed=4))
        _, ids, fps = zipf_stream(1.3, 500, 20_000, 4)
        workers, _ = route(alg, 7, 3, fps, seed=4)
        met = stream_metrics(ids, workers, 7)
        assert np.bincount(workers, minlength=7).tolist() == [int(x) for x in sim["worker_loads"]]
        assert met["replication"] == pytest.approx(sim["replication"])
        assert met["imbalance"] == pytest.approx(sim["imbalance"])


def test_single_target_keeps_other_sections(quick_run, tmp_path):
    """A target rewrites its own block of its own page; the page's hand-written sections and the other
    pages stay as they are."""
    out, _, _ = quick_run
    shutil.copytree(out / "results", tmp_path / "results")
    (tmp_path / "figures").mkdir()
    dkg_page = tmp_path / "results" / "dkg.md"
    foreign = "\n## Other\n\nWritten by hand, after the generated section.\n"
    dkg_page.write_text(dkg_page.read_text(encoding="utf-8") + foreign, encoding="utf-8")
    nasir_before = (tmp_path / "results" / "nasir.md").read_text(encoding="utf-8")
    code = bench_cli.main(["bench", "dkg", "--quick", "--out", str(tmp_path)])
    assert code == 0
    new = dkg_page.read_text(encoding="utf-8")
    assert new.count("<!-- bench:dkg:start -->") == 1 and new.endswith(foreign) and new.count("## Other") == 1
    assert new.index("<!-- bench:dkg:end -->") < new.index("## Other")
    assert (tmp_path / "results" / "nasir.md").read_text(encoding="utf-8") == nasir_before  # untouched


def test_existing_page_without_block_is_kept(tmp_path):
    """A page written by hand first: the generated block goes after its header, before its sections."""
    (tmp_path / "results").mkdir()
    other = "# DKG\n\nIntro.\n\n## Reliability\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    (tmp_path / "results" / "dkg.md").write_text(other, encoding="utf-8")
    write_results(tmp_path, [Section("dkg", "DKG", "cmd", "body\n\n| x |\n|---|\n| 1 |")])
    write_results(tmp_path, [Section("dkg", "DKG", "cmd", "body\n\n| x |\n|---|\n| 2 |")])
    page = (tmp_path / "results" / "dkg.md").read_text(encoding="utf-8")
    assert page.startswith("# DKG\n\nIntro.\n\n<!-- bench:dkg:start -->") and page.count("## Reliability") == 1
    assert page.rstrip().endswith("| 1 | 2 |") and page.count("bench:dkg:start") == 1 and "| 2 |" in page
    write_results(tmp_path, [Section("nasir", "Nasir", "cmd", "body |---|")])
    assert (tmp_path / "results" / "nasir.md").read_text(encoding="utf-8").startswith("# Nasir et al.")


def _verdict_after_every_figure(markdown: str) -> None:
    """Each figure of a section is followed by a verdict line before the next figure (or the end)."""
    chunks = markdown.split("![")[1:]
    assert chunks
    for chunk in chunks:
        assert re.search(r"\*\*Verdict: (reproduced|partly|not)\*\* — \S", chunk), chunk[:80]


def test_gedik_guo_zhou_seeds_and_verdicts(quick_run):
    """Both reproductions run every configuration once per seed (seeded by that seed), report the mean
    with the per-seed values, check invariants per seed and give a verdict under every figure."""
    s = quick_run[2]
    ged = s["gedik"]
    assert ged.data["seeds"] == [0, 1]
    for key in ("skew", "channels", "utility", "size"):
        for r in ged.data[key]:
            vals = [v for v in r["b_per_seed"] if v is not None]
            assert len(r["b_per_seed"]) == 2 and r["b"] == pytest.approx(np.mean(vals))
    ch = ged.data["channels"]
    cons = {r["n"]: r["m_per_seed"] for r in ch if r["algorithm"] == "consistent"}
    uni = {r["n"]: r["m_per_seed"] for r in ch if r["algorithm"] == "uniform"}
    assert all(c < u for n in cons if n >= 3 for c, u in zip(cons[n], uni[n]))
    # the seed moves the keys' hash positions and the ring: consistent hashing's balance differs by seed
    assert any(len(set(r["b_per_seed"])) > 1 for r in ged.data["skew"] if r["algorithm"] == "consistent")
    _verdict_after_every_figure(ged.markdown)
    # Fig. 12–14 (construction time) are reported from the timed plans, with a verdict; not listed as not run
    timing = ged.markdown.split("**Construction time (Fig. 12–14)**")[1].split("**Not run**")[0]
    assert "| N = " in timing and "| z = " in timing and "| σ = " in timing and "**Verdict: " in timing
    assert "Fig. 12–14 (partitioning-function construction time" not in ged.markdown

    gz = s["guo-zhou"]
    runs = gz.data["runs"]
    windows = gz.data["sizes"]["windows"]
    for r in runs.values():
        assert len(r["var_per_seed"]) == 2 and all(len(v) == windows for v in r["var_per_seed"])
        assert r["var_mean"] == pytest.approx(np.mean(r["var_mean_per_seed"]))
        assert r["var"] == pytest.approx(np.mean(r["var_per_seed"], axis=0).tolist())
    assert len(set(runs["gaussian/hash"]["var_mean_per_seed"])) == 2  # stream seeded by the loop's seed
    assert all(u > e for u, e in zip(runs["zipf/uhlb"]["move_per_balancing_per_seed"],
                                     runs["zipf/elb"]["move_per_balancing_per_seed"]))
    _verdict_after_every_figure(gz.markdown)
    for sec in (ged, gz):
        assert "with 2 seeds" in sec.markdown and "`mean (min–max)`" in sec.markdown
