"""``python3 -m skewlab.engine.cli.warmup``: compile skewlab's numba kernels into numba's on-disk cache once.

Every kernel is compiled with ``cache=True``, so a process loads it from the cache in milliseconds
once any process has compiled it; the first process pays the compilation.  Without this step that
first process is the engine's first micro-batch after an install: its executors compile the live
grouping's routing kernels and its driver compiles every shadow grouping's, which held the first
batch of ``skewlab demo`` for minutes on a 2-core machine.  ``scripts/install`` runs this module after
installing the packages, so the first batch only loads the cache.  Without names it compiles in one
process per CPU (:func:`warm_up_all`), then checks the whole cache in one.

What runs: every registered grouping through the same path as ``skewlab simulate`` (routing,
statistics, rebalancing plans, a worker-count change, window eviction), on small Zipf streams; then the key
fingerprinting and the vocabulary index that the Spark engine's sources and driver use, and the join
operator's pair probe.  The cache
lives where numba puts it (``__pycache__`` beside the sources, or ``$NUMBA_CACHE_DIR``).

``python3 -m skewlab.engine.cli.warmup NAME ...`` compiles only the named groupings, in that order, and
prints ``ready NAME`` on stdout as each one is in the cache — and ``compiling NAME`` before it, at the
first kernel of NAME that numba really compiles (its ``numba:compile`` event: a kernel loaded from the
cache sends none), so a reader knows early whether NAME is cached; after the first name it lowers its
own priority (``nice`` 10).  The Spark engine runs it in the background at start, the live grouping first, and
lets each shadow grouping join when its line arrives
(:mod:`skewlab.engine.runtimes.background_warmup`).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Sequence

__all__ = ["main", "warm_up", "warm_up_all"]

#: (workers, Zipf z) of the streams: few workers and mild skew, many workers and strong skew, and few
#: workers and strong skew, so that every kind of head pick (D-Choices' d small, between 4 and n, and
#: d >= n: the least loaded of all workers) and every state path (window eviction: more intervals than
#: the window) runs
_SETTINGS = ((8, 1.0), (40, 1.6), (4, 1.6))


def warm_up(progress: bool = False, names: Sequence[str] | None = None, ready_lines: bool = False,
            yield_cpu: bool = True) -> float:
    """Compile (or load) the kernels of ``names`` (default: every grouping, then the engine's
    fingerprinting and the join probe) once; returns the seconds it took.  ``ready_lines``: print
    ``ready NAME`` on stdout after each grouping; ``yield_cpu``: lower this process's priority after
    the first of ``names`` (the background child's behaviour; False for a caller that is not a
    child of its own, such as the tests' in-process stand-in for it)."""
    from skewlab.engine.algorithms import registry

    started = time.monotonic()
    only = names is not None
    names = list(names) if only else registry.names()
    announce = _CompileAnnouncer() if ready_lines else None
    for i, name in enumerate(names, start=1):
        if announce is not None:
            announce.current = name
        if progress:
            print(f"\rcompiling routing kernels: {name} ({i}/{len(names)})\033[K", end="", file=sys.stderr, flush=True)
        # the named form (the engine's background warm-up) with a tenth of the tuples: a warm cache costs little
        _simulate(name, per_interval=200 if only else _FULL_INTERVAL)
        if only and i == 1:  # the live grouping comes first: what the engine's first batch needs with it
            _engine_kernels()
        if ready_lines:
            print(f"ready {name}", flush=True)
            if announce is not None:
                announce.current = None
        if only and i == 1 and yield_cpu and hasattr(os, "nice"):
            os.nice(10)  # the rest (shadows) yields the CPU to the engine's batches
    if not only:
        _engine_kernels()
    if progress:
        print("\r\033[K", end="", file=sys.stderr, flush=True)
    return time.monotonic() - started


#: tuples per interval of the whole-cache warm-up's streams
_FULL_INTERVAL = 2_000


def _simulate(name: str, per_interval: int) -> None:
    """Run grouping ``name`` through ``skewlab simulate``'s path on each stream of :data:`_SETTINGS`:
    15 intervals of ``per_interval`` tuples (more than the default window: eviction runs), a worker
    added at interval 5."""
    from skewlab.engine.cli.simulate import SimulationConfig, parse_change, run_simulation

    for workers, z in _SETTINGS:
        run_simulation(SimulationConfig(algorithm=name, workers=workers, messages=15 * per_interval,
                                        interval_messages=per_interval,
                                        workload_params={"keys": per_interval, "z": z},
                                        changes=[parse_change(f"5:workers={workers + 1}")]))


#: processes of :func:`warm_up_all` at most (each holds numba and LLVM: a few hundred MB)
_MAX_PROCESSES = 4


def warm_up_all(progress: bool = False, processes: int | None = None) -> float:
    """Every grouping's kernels, the engine's and the join probe's in numba's cache, compiled by
    ``processes`` interpreters at once (default: one per CPU, at most :data:`_MAX_PROCESSES`); returns
    the seconds it took.

    Each process takes the next grouping when it has finished one (the same streams as :func:`warm_up`
    runs for it), so the slowest grouping (D-Choices' head kernels, about a third of the whole) runs
    beside the others rather than after them.  numba writes each cache file whole (a temporary file, then a rename), but two
    processes that compile signatures of the same function at once each rewrite its index, and the last
    one wins: an entry can be lost.  So the same process then runs :func:`warm_up` over everything: it
    loads what is cached (the same streams: nothing else to compile), compiles what was lost, and the
    cache is complete when it returns."""
    import multiprocessing

    from skewlab.engine.algorithms import registry

    started = time.monotonic()
    names = registry.names()
    n = min(processes or os.cpu_count() or 1, _MAX_PROCESSES, len(names))
    if n > 1:
        # spawn, not fork: a forked child would inherit this process's imported numba/LLVM state
        with multiprocessing.get_context("spawn").Pool(n) as pool:
            for i, name in enumerate(pool.imap_unordered(_warm_one, names), start=1):
                if progress:
                    print(f"\rcompiling routing kernels: {name} done ({i}/{len(names)})\033[K", end="",
                          file=sys.stderr, flush=True)
    warm_up(progress=progress)
    return time.monotonic() - started


def _warm_one(name: str) -> str:
    """One grouping's kernels (a :func:`warm_up_all` pool task); returns the name."""
    _simulate(name, per_interval=_FULL_INTERVAL)
    return name


class _CompileAnnouncer:
    """Prints ``compiling NAME`` once, at the first real numba compilation while ``current`` is NAME."""

    def __init__(self) -> None:
        from numba.core import event

        self.current: str | None = None
        self._said: set[str] = set()
        announcer = self

        class _Listener(event.Listener):
            def on_start(self, ev: Any) -> None:
                name = announcer.current
                if name is not None and name not in announcer._said:
                    announcer._said.add(name)
                    print(f"compiling {name}", flush=True)

            def on_end(self, ev: Any) -> None:
                pass

        event.register("numba:compile", _Listener())


def _engine_kernels() -> None:
    """The key fingerprinting and vocabulary index of the Spark engine's driver, the join probe of its workers."""
    import numpy as np
    import pyarrow as pa

    from skewlab.engine.algorithms.keys import FingerprintVocabulary, fingerprint_keys
    from skewlab.engine.operators.builtin import join_probe

    keys = pa.array([f"k{i % 97}" for i in range(1_000)])
    FingerprintVocabulary().encode_fps(fingerprint_keys(keys))  # the Spark driver's statistics
    join_probe(np.arange(3, dtype=np.int64), np.arange(2, dtype=np.int64))  # the join operator's workers


def main(argv: Sequence[str] | None = None) -> int:
    """The module's command line (see the module docstring); an unknown grouping name is refused in
    one line on stderr, exit status 2."""
    import argparse

    from skewlab.engine.algorithms import registry

    parser = argparse.ArgumentParser(prog="python3 -m skewlab.engine.cli.warmup",
                                     description="Compile skewlab's numba kernels into numba's on-disk cache: "
                                                 "every grouping, or only the named ones (printing 'ready NAME' "
                                                 "as each is cached).")
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"groupings: {', '.join(registry.names())}, or a user's package.module:Class")
    names = parser.parse_args(sys.argv[1:] if argv is None else argv).names
    for name in names:  # a built-in, an installed entry point or a user's package.module:Class
        try:
            registry.get(name)
        except registry.UnknownAlgorithm as exc:
            print(f"{parser.prog}: {exc}", file=sys.stderr)
            return 2
    if names:
        warm_up(names=names, ready_lines=True)
        return 0
    seconds = warm_up_all(progress=sys.stderr.isatty())
    print(f"skewlab: routing kernels compiled and cached ({seconds:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
