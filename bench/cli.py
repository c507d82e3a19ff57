"""``skewlab bench``: paper reproductions and performance benchmarks → figures and ``results/*.md``.

Usage::

    skewlab bench {all,nasir,fang,gedik,dkg,guo-zhou,trace,fish,perf} [--out DIR] [--quick] [--seed N] [--seeds N] [--skip-spark]
    skewlab bench tables [--write] [--out DIR]

``--out DIR`` (default ``docs``) receives ``DIR/figures/*.png`` and one page per target,
``DIR/results/<page>.md`` (:data:`skewlab.bench.common.RESULT_PAGES`; a target refreshes only its own
section of its page).  ``DIR/results.md``, the headline page, is written by hand.  ``--quick`` runs CI-sized
versions of every experiment (≤ 3 minutes for ``all``): the figures and tables are produced and the
invariants checked, but sizes are far too small for the numbers to mean much.  Every target checks
invariants of its results (shapes and properties, never speeds); the exit status is 0 when all pass,
1 when a check failed or a target raised, 2 for usage errors.

``tables`` (:mod:`skewlab.bench.results_tables`) checks the committed pages: every generated section's
seal and the small-size references ``DIR/results/small/`` (``--write`` rewrites those).

The composition root (:mod:`skewlab.cli`) adds the subcommand with :func:`add_commands`;
``python -m skewlab.bench.cli ...`` runs the same thing stand-alone.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from typing import Any, Sequence

from skewlab.bench import TARGETS

__all__ = ["LAST_RUN", "add_commands", "cmd_bench", "main", "run_targets"]

#: the :class:`~skewlab.bench.common.Section` objects of the most recent :func:`cmd_bench` call in this process
#: (for in-process callers such as ``tests/bench/test_bench_quick.py``, which check the data behind the page)
LAST_RUN: list = []


def add_commands(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``bench`` subcommand to an argparse ``subparsers`` object; returns its parser."""
    b = subparsers.add_parser(
        "bench",
        help="paper reproductions and performance benchmarks (figures + results/*.md)",
        description="Reproduce the papers' figures and measure performance; writes DIR/figures/*.png and "
                    "DIR/results/<target>.md.",
    )
    b.add_argument("target", choices=["all", *TARGETS, "tables"],
                   help="what to run ('all' = every section; 'tables' = regenerate the deterministic tables at "
                        "the small size and compare them, and every page's seals, with DIR/results/)")
    b.add_argument("--out", default="docs", metavar="DIR", help="output directory (default docs)")
    b.add_argument("--quick", action="store_true", help="CI-sized run: small sizes, shapes and invariants only")
    b.add_argument("--seed", type=int, default=0, help="base seed of every stream (default 0)")
    b.add_argument("--seeds", type=int, default=None, metavar="N",
                   help="runs per reproduction, seeds SEED..SEED+N-1, reported as mean (min-max) "
                        "(default 5; 2 with --quick)")
    b.add_argument("--skip-spark", action="store_true", help="perf: skip the Spark end-to-end benchmark")
    b.add_argument("--write", action="store_true",
                   help="tables: rewrite the small-size references DIR/results/small/ instead of comparing")
    b.set_defaults(func=cmd_bench)
    return b


def _module(target: str):
    return importlib.import_module(f"skewlab.bench.{TARGETS[target]}")


def run_targets(targets: Sequence[str], out: str, quick: bool = False, seed: int = 0, *,
                skip_spark: bool = False, progress: bool | None = None,
                log=None, seeds: int | None = None) -> list:
    """Run the given targets in order and write ``OUT/results/<page>.md``; returns their :class:`Section` s.

    A target that raises yields a section whose single check failed (with the error), so the
    others still run and the page says what went wrong.
    """
    from skewlab.bench.common import Check, Context, Section, stderr_is_tty, write_results
    from skewlab.engine.cli.progress import Progress

    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        raise ValueError(f"unknown bench target(s) {unknown}; known: {', '.join(TARGETS)}")
    modules = {t: _module(t) for t in targets}
    ctx = Context(out, quick=quick, seed=seed, log=log, n_seeds=seeds)
    total = sum(int(m.units(quick, ctx.n_seeds)) for m in modules.values())
    show = stderr_is_tty() if progress is None else progress
    bar = Progress(total, "skewlab bench", force=show, delay=0.0) if show else None
    ctx.progress = bar
    ctx.skip_spark = skip_spark  # type: ignore[attr-defined]
    sections = []
    try:
        for t in targets:
            t0 = time.perf_counter()
            start_units = ctx.done
            try:
                sec = modules[t].run(ctx)
            except Exception as exc:  # keep going: report the failure in the page and the exit status
                tb = traceback.format_exc(limit=6)
                sec = Section(t, f"{t} (failed)", ctx.command(t),
                              f"This target raised an exception:\n\n```\n{tb}\n```",
                              checks=[Check("target ran", False, f"{type(exc).__name__}: {exc}")])
                sec.seconds = time.perf_counter() - t0
            ctx.done = start_units + int(modules[t].units(quick, ctx.n_seeds))  # re-sync the bar if a target ticked less
            if bar is not None:
                bar.update(ctx.done, t)
            sections.append(sec)
            write_results(out, [sec])  # write as we go: a crash keeps earlier results
    finally:
        if bar is not None:
            bar.close()
    return sections


def cmd_bench(args: argparse.Namespace) -> int:
    if args.target == "tables":
        from skewlab.bench.results_tables import cmd_tables

        return cmd_tables(args.out, getattr(args, "write", False))
    if getattr(args, "write", False):
        print("skewlab bench: error: --write goes with the target 'tables' only", file=sys.stderr)
        return 2
    targets = list(TARGETS) if args.target == "all" else [args.target]
    started = time.perf_counter()
    if args.seeds is not None and args.seeds < 1:
        print(f"skewlab bench: error: --seeds must be at least 1, got {args.seeds}", file=sys.stderr)
        return 2
    sections = run_targets(targets, args.out, quick=args.quick, seed=args.seed,
                           skip_spark=getattr(args, "skip_spark", False), seeds=args.seeds)
    LAST_RUN[:] = sections
    failed = 0
    for sec in sections:
        bad = [c for c in sec.checks if not c.ok]
        failed += bool(bad)
        print(f"{sec.key:<9} {sec.seconds:7.1f} s  checks {len(sec.checks) - len(bad)}/{len(sec.checks)} passed  "
              f"figures {len(sec.figures)}")
        for c in bad:
            print(f"          FAILED {c.name}: {c.detail}")
    print(f"wrote {args.out}/results/ and {args.out}/figures/ in {time.perf_counter() - started:.0f} s")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m skewlab.bench.cli bench all --quick --out /tmp/b``."""
    parser = argparse.ArgumentParser(prog="skewlab")
    sub = parser.add_subparsers(dest="command", required=True)
    add_commands(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
