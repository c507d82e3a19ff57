"""skewlab benchmarks and paper reproductions (``skewlab bench``).

Modules
-------
* :mod:`bench.cli` — the ``bench`` subcommand (``add_commands``), targets ``all``, ``nasir``, ``fang``,
  ``gedik``, ``dkg``, ``guo-zhou``, ``trace``, ``perf``; options ``--out DIR`` (default ``docs``), ``--quick``,
  ``--seed``.
* :mod:`bench.common` — run context, progress, simulation helpers shared by the reproductions,
  figure/table/results-page writers.
* ``bench.repro_nasir``, ``bench.repro_fang``, ``bench.repro_gedik``, ``bench.repro_dkg``,
  ``bench.repro_guo_zhou`` — one module per paper; each has ``run(ctx) -> Section``
  (``bench.nasir_theta``: the θ sweep of Nasir Q1 / Fig. 7 and Fig. 8, part of ``repro_nasir``).
* ``bench.repro_trace`` — every grouping per interval on a real timestamped trace (``flights``).
* :mod:`bench.perf` — routing throughput, plan time, Spark end-to-end, store query time.
* ``bench.bench_routing``, ``bench.bench_plan``, ``bench.bench_gedik``, ``bench.bench_spark`` — the
  stand-alone benchmark scripts; their functions are reused by the modules above.

Nothing here is imported by the engine; importing :mod:`bench` is cheap (no numba compilation, no
Spark) until a target runs.
"""

__all__ = ["TARGETS"]

#: bench targets in the order ``all`` runs them (module name under :mod:`bench`)
TARGETS: dict[str, str] = {
    "nasir": "repro_nasir",
    "fang": "repro_fang",
    "gedik": "repro_gedik",
    "dkg": "repro_dkg",
    "guo-zhou": "repro_guo_zhou",
    "trace": "repro_trace",
    "perf": "perf",
}
