"""The deterministic tables of the results pages, and ``skewlab bench tables``: are they what their commands print?

Quality numbers (imbalance, migration, sizes) are deterministic for a seed; times are not.  This
module

* extracts a section's deterministic tables (:func:`deterministic_tables`): every markdown table of
  the section except the invariant checks, with the columns that hold a time or a speed removed
  (:data:`skewlab.bench.common.TIMING_COLUMN`);
* seals every table (:func:`skewlab.bench.common.seal_line`): each section ``skewlab bench`` writes
  ends with the SHA-256 of its tables (:func:`skewlab.bench.common.tables_text`, timings included), so
  a number edited by hand in a committed page no longer matches its seal (:func:`check_seals`);
* regenerates them at the quick (CI) size (:func:`small_tables`) — the nasir, fang, trace and fish
  targets through their own ``run`` as ``skewlab bench TARGET --quick --seed 0`` runs it,
  ``bench/gate_cases.py`` with one seed and ``bench/bench_pkg_distinct.py`` with 40,000 tuples, the
  very code whose full-size runs fill the pages — and compares them with the committed small-size
  references under ``docs/results/small/`` (:data:`SMALL_DIR`).  The full-size runs take from seconds
  to 27 minutes each on the shared machine; the small ones run the same code on fewer tuples and seeds,
  so a change in what a command computes shows up in its small table.

``skewlab bench tables`` compares (exit status 1 and the differing lines when they differ);
``skewlab bench tables --write`` rewrites the references, each stamped with the date, commit, machine
and load of the run (the stamp is not compared).  ``tests/bench/test_results_tables.py`` runs both
checks.
"""

from __future__ import annotations

import contextlib
import io
import re
import tempfile
from pathlib import Path
from typing import Callable, Sequence

from skewlab.bench.common import seal, section_re, tables_text

__all__ = [
    "SMALL_DIR", "SMALL_SCRIPTS", "SMALL_TARGETS", "check_seals", "cmd_tables", "compare_small",
    "deterministic_tables", "small_tables", "write_small",
]

#: small-size references, relative to the docs folder (``--out``)
SMALL_DIR = Path("results") / "small"
#: ``skewlab bench`` targets whose quick-size tables are compared (the cheap, deterministic ones)
SMALL_TARGETS = ("nasir", "fang", "trace", "fish")
_SEAL_RE = re.compile(r"<!-- tables sha256:([0-9a-f]{64}) ")


def deterministic_tables(markdown: str) -> str:
    """:func:`tables_text` without the timing columns: what a run at the same size and seed repeats exactly."""
    return tables_text(markdown, timing=False)


def check_seals(page: str) -> list[tuple[str, bool]]:
    """``(section key, seal matches)`` for every generated section of a page's text.  The seal covers
    the section's text from after its ``Command:`` line up to the seal itself."""
    found = []
    for key in re.findall(r"<!-- bench:([\w-]+):start -->", page):
        block = section_re(key).search(page).group(0)
        m = _SEAL_RE.search(block)
        if not m:
            found.append((key, False))
            continue
        body = block[:m.start()].split("\n\n", 2)[2] if block.count("\n\n") >= 2 else ""
        found.append((key, seal(body) == m.group(1)))
    return found


# ---------------------------------------------------------------------------------------------
# Small-size references
# ---------------------------------------------------------------------------------------------
def _captured(main: Callable[[Sequence[str]], object], argv: Sequence[str]) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(list(argv))
    return buf.getvalue()


def _gate_cases_small() -> str:
    from skewlab.bench import gate_cases

    return _captured(gate_cases.main, ["--seeds", "1", "--processes", "1"])


def _pkg_distinct_small() -> str:
    from skewlab.bench import bench_pkg_distinct

    return _captured(bench_pkg_distinct.main, ["--tuples", "40000"])


#: small-size commands that print their table (reference file name -> (command line, runner))
SMALL_SCRIPTS: dict[str, tuple[str, Callable[[], str]]] = {
    "gate_cases.txt": ("python bench/gate_cases.py --seeds 1 --processes 1", _gate_cases_small),
    "pkg_distinct.txt": ("python bench/bench_pkg_distinct.py --tuples 40000", _pkg_distinct_small),
}


def small_tables(names: Sequence[str] | None = None) -> dict[str, tuple[str, str]]:
    """Run the small-size generators; ``{reference file name: (command, deterministic text)}``.

    ``names`` picks some of ``<target>.md`` (:data:`SMALL_TARGETS`) and :data:`SMALL_SCRIPTS` (all by default).
    """
    import importlib

    from skewlab.bench import TARGETS
    from skewlab.bench.common import Context

    wanted = list(names) if names is not None else [f"{t}.md" for t in SMALL_TARGETS] + list(SMALL_SCRIPTS)
    got: dict[str, tuple[str, str]] = {}
    for name in wanted:
        if name in SMALL_SCRIPTS:
            command, runner = SMALL_SCRIPTS[name]
            got[name] = (command, runner())
            continue
        target = name[:-3]
        if target not in SMALL_TARGETS:
            raise ValueError(f"no small-size table {name!r}; known: "
                             f"{', '.join([f'{t}.md' for t in SMALL_TARGETS] + list(SMALL_SCRIPTS))}")
        with tempfile.TemporaryDirectory() as tmp:  # the target's own run(), as `skewlab bench TARGET --quick`
            sec = importlib.import_module(f"skewlab.bench.{TARGETS[target]}").run(Context(tmp, quick=True, seed=0))
        bad = [c.name for c in sec.checks if not c.ok]
        if bad:
            raise RuntimeError(f"{target} --quick failed its checks: {bad}")
        got[name] = (f"skewlab bench {target} --quick --seed 0", deterministic_tables(sec.markdown))
    return got


def _stamp(command: str) -> str:
    from skewlab.bench.common import machine_line

    return f"<!-- generated by `{command}` (via `skewlab bench tables --write`); {machine_line()} -->\n"


def _unstamped(text: str) -> str:
    return text.split("\n", 1)[1] if text.startswith("<!-- generated by") else text


def write_small(docs: str | Path, names: Sequence[str] | None = None) -> list[Path]:
    """Regenerate the small-size references under ``DOCS/results/small/``; returns the files written."""
    folder = Path(docs) / SMALL_DIR
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (command, text) in small_tables(names).items():
        (folder / name).write_text(_stamp(command) + text, encoding="utf-8")
        written.append(folder / name)
    return written


def compare_small(docs: str | Path, names: Sequence[str] | None = None) -> dict[str, list[str]]:
    """Regenerate the small-size tables and diff them with the committed references:
    ``{file name: differing lines (unified diff)}``, empty lists when they agree."""
    import difflib

    folder = Path(docs) / SMALL_DIR
    diffs = {}
    for name, (_command, text) in small_tables(names).items():
        path = folder / name
        committed = _unstamped(path.read_text(encoding="utf-8")) if path.exists() else ""
        diffs[name] = list(difflib.unified_diff(committed.splitlines(), text.splitlines(),
                                                f"committed {path}", "regenerated", lineterm="", n=0))
    return diffs


def cmd_tables(docs: str, write: bool) -> int:
    """``skewlab bench tables [--write]``: 0 when every seal and small table matches, 1 otherwise."""
    import sys

    if write:
        for path in write_small(docs):
            print(f"wrote {path}")
        return 0
    failed = 0
    for page in sorted((Path(docs) / "results").glob("*.md")):
        for key, ok in check_seals(page.read_text(encoding="utf-8")):
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} seal of {page.name} [{key}]"
                  + ("" if ok else ": its tables differ from what its command wrote (edited by hand?)"))
    for name, diff in compare_small(docs).items():
        failed += bool(diff)
        print(f"{'ok  ' if not diff else 'FAIL'} small-size {name}")
        for line in diff[:40]:
            print("    " + line)
    sys.stdout.flush()
    return 1 if failed else 0
