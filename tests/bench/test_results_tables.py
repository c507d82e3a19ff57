"""The committed result tables are what their commands print (``skewlab bench tables``).

Two checks, the same as ``skewlab bench tables`` makes (:mod:`skewlab.bench.results_tables`):

* every section ``skewlab bench`` wrote into ``docs/results/*.md`` still matches the seal of its tables,
  so a number edited by hand in a committed page fails here;
* the deterministic tables of the Nasir, Fang, trace and FISH targets, ``bench/gate_cases.py`` and
  ``bench/bench_pkg_distinct.py``, regenerated at the small size, equal the committed references in
  ``docs/results/small/`` (rewritten with ``skewlab bench tables --write``).
"""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

import pytest

from skewlab.bench import TARGETS
from skewlab.bench import cli as bench_cli
from skewlab.bench.common import RESULT_PAGES, markdown_tables, seal_line
from skewlab.bench.results_tables import (
    SMALL_DIR, SMALL_SCRIPTS, SMALL_TARGETS, check_seals, compare_small, deterministic_tables)

DOCS = Path(__file__).resolve().parents[2] / "docs"
SMALL_NAMES = [f"{t}.md" for t in SMALL_TARGETS] + list(SMALL_SCRIPTS)
#: small-size runs of 50–150 s each on 2 cores: compared by the README's ``skewlab bench tables``, which
#: tests/end_to_end/test_readme.py::test_bench_commands runs (slow) and checks names each of them ``ok``;
#: fish.md and pkg_distinct.txt take seconds and are compared here, in every ``pytest``
SLOW_SMALL = {"nasir.md", "fang.md", "trace.md", "gate_cases.txt"}


def test_every_generated_section_is_committed_with_an_intact_seal():
    found = {}
    for page in sorted((DOCS / "results").glob("*.md")):
        for key, ok in check_seals(page.read_text(encoding="utf-8")):
            found[key] = (page.name, ok)
    assert set(found) == set(TARGETS), found
    assert {k: v[0] for k, v in found.items()} == {k: RESULT_PAGES[k][0] for k in TARGETS}
    assert all(ok for _, ok in found.values()), {k: v for k, v in found.items() if not v[1]}


def _edit_first_table_number(text: str, key: str) -> str:
    """The page with one digit of the first table row of section ``key`` changed."""
    start = text.index(f"<!-- bench:{key}:start -->")
    m = re.compile(r"^\|[^\n]*\|\n\|[-| :]+\|\n(\|[^\n]*?)(\d)", re.M).search(text, start)
    digit = str((int(m.group(2)) + 1) % 10)
    return text[:m.start(2)] + digit + text[m.end(2):]


@pytest.mark.parametrize("page,key", [("nasir.md", "nasir"), ("traces.md", "trace"), ("fang.md", "fang")])
def test_a_table_number_edited_by_hand_breaks_the_seal(page, key):
    text = (DOCS / "results" / page).read_text(encoding="utf-8")
    edited = _edit_first_table_number(text, key)
    assert edited != text
    assert dict(check_seals(edited))[key] is False
    prose = text.replace("Set-up:", "Set up:", 1)  # words outside the tables are not sealed
    assert prose != text and dict(check_seals(prose))[key] is True


def test_timing_columns_are_not_compared_and_checks_are_left_out():
    md = ("**T**\n\n| algorithm | migration % | plan s | M tuples/s |\n|---|---|---|---|\n| mixed | 6.9 | 0.0014 | 26 |\n\n"
          "<details><summary>checks</summary>\n\n| check | result | detail |\n|---|---|---|\n| a | pass | 3 s |\n\n</details>")
    assert deterministic_tables(md) == "**T**\nalgorithm | migration %\nmixed | 6.9\n"
    assert "sha256:" in seal_line(md)


@pytest.mark.parametrize("name", [n for n in SMALL_NAMES if n not in SLOW_SMALL])
def test_small_size_tables_equal_the_committed_reference(name):
    assert (DOCS / SMALL_DIR / name).exists(), "missing reference; run: skewlab bench tables --write"
    diff = compare_small(DOCS, [name])[name]
    assert diff == [], "\n".join(diff[:60])


def test_an_edited_reference_is_caught(tmp_path):
    name = "pkg_distinct.txt"
    (tmp_path / SMALL_DIR).mkdir(parents=True)
    committed = (DOCS / SMALL_DIR / name).read_text(encoding="utf-8")
    edited = re.sub(r"hash (\d)\.(\d\d)", lambda m: f"hash {m.group(1)}.{(int(m.group(2)) + 1) % 100:02d}", committed, count=1)
    assert edited != committed
    (tmp_path / SMALL_DIR / name).write_text(edited, encoding="utf-8")
    diff = compare_small(tmp_path, [name])[name]
    assert any(line.startswith("-") and "hash" in line for line in diff), diff
    shutil.copy(DOCS / SMALL_DIR / name, tmp_path / SMALL_DIR / name)
    assert compare_small(tmp_path, [name])[name] == []


def test_unknown_small_table_is_refused():
    with pytest.raises(ValueError, match="no small-size table"):
        compare_small(DOCS, ["gedik.md"])


def test_write_outside_tables_is_a_usage_error(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="skewlab")
    bench_cli.add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["bench", "dkg", "--quick", "--write", "--out", str(tmp_path)])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--write goes with the target 'tables'" in err
    assert not (tmp_path / "results").exists()


def test_pkg_distinct_numbers_quoted_in_the_nasir_page_are_what_the_command_prints():
    """The PKG-distinct quote of nasir.md ("Nasir et al. Fig. 13/14 on the engine") at the command's full
    size (200,000 tuples: seconds), number for number."""
    from skewlab.bench import bench_pkg_distinct
    from skewlab.bench.results_tables import _captured

    printed = _captured(bench_pkg_distinct.main, [])
    want = [re.findall(r"\d+\.\d\d", line.split(":", 1)[1].split(";", 1)[1])
            for line in printed.splitlines() if line.startswith("z = ")]
    page = " ".join((DOCS / "results" / "nasir.md").read_text(encoding="utf-8").split())
    quote = page.split("tuples max / mean: z = 1.2:", 1)[1].split(". With distinct", 1)[0]
    got = [re.findall(r"\d+\.\d\d", part) for part in re.split(r"; z = \d\.\d:", quote)]
    assert got == want, (got, want)


def test_headline_trace_table_is_the_trace_sections():
    """docs/results.md's trace table (written by hand) repeats the trace section's generated tables:
    `hash`'s and `wchoices`' medians, the best rebalancer and the rebalancers above `hash`, per trace."""
    rebalancers = "llfd mintable minmig mixed mixed-bf scan redist readj elb clb uhlb".split()
    section = {}
    for caption, rows in markdown_tables((DOCS / "results" / "traces.md").read_text(encoding="utf-8")):
        if "base median" in rows[0]:
            med = {r[0]: float(r[1]) for r in rows[1:] if r[1] != "-"}
            best = min(rebalancers, key=lambda a: med[a])
            above = [a for a in rebalancers if med[a] > med["hash"]]
            section[caption.strip("*").replace("police-stops", "police stops")] = (med, best, above)
    headline = [rows for caption, rows in markdown_tables((DOCS / "results.md").read_text(encoding="utf-8"))
                if rows[0][:2] == ["trace", "`hash`"]][0]
    assert len(headline) - 1 == len(section) == 8
    for trace, hash_median, w_median, best, above in headline[1:]:
        med, want_best, want_above = section[trace]
        assert float(hash_median) == med["hash"] and float(w_median) == med["wchoices"], trace
        if best.startswith("all 11 at "):
            values = [float(v) for v in best.removeprefix("all 11 at ").split("–")]
            low, high = values[0], values[-1]  # "all 11 at V" when they are equal
            assert (low, high) == (min(med[a] for a in rebalancers), max(med[a] for a in rebalancers)), trace
        else:
            name, value = best.split()
            assert med[name] == float(value) == med[want_best], trace
        named = [] if above == "none" else above.split(": ", 1)[-1].split(", ")
        assert above.startswith(f"{len(want_above)} of 11") or (above == "none" and not want_above), trace
        assert named in (want_above, ["11 of 11"]) or above == "none", trace
