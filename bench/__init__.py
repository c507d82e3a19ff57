"""skewlab benchmarks and paper reproductions (``skewlab bench``).

Modules
-------
* :mod:`skewlab.bench.cli` — the ``bench`` subcommand (``add_commands``), targets ``all``, ``nasir``, ``fang``,
  ``gedik``, ``dkg``, ``guo-zhou``, ``trace``, ``fish``, ``perf``, and ``tables``; options ``--out DIR`` (default
  ``docs``), ``--quick``, ``--seed``, ``--seeds``, ``--write`` (``tables`` only).
* :mod:`skewlab.bench.common` — run context, progress, simulation helpers shared by the reproductions,
  figure/table writers and the results pages (``docs/results/<page>.md``, one per target).
* ``skewlab.bench.repro_nasir``, ``skewlab.bench.repro_fang``, ``skewlab.bench.repro_gedik``, ``skewlab.bench.repro_dkg``,
  ``skewlab.bench.repro_guo_zhou`` — one module per paper; each has ``run(ctx) -> Section``
  (``skewlab.bench.nasir_theta``: the θ sweep of Nasir Q1 / Fig. 7 and Fig. 8, part of ``repro_nasir``).
* ``skewlab.bench.repro_trace`` — every grouping per interval on a real timestamped trace (``flights``).
* ``skewlab.bench.repro_fish`` — FISH vs D-/W-Choices on the flights trace and on Zipf / drift.
* :mod:`skewlab.bench.perf` — routing throughput, plan time, Spark end-to-end, store query time.
* :mod:`skewlab.bench.results_tables` — ``skewlab bench tables``: the seals of the committed pages'
  tables and their small-size regeneration against ``docs/results/small/``.
* ``skewlab.bench.bench_routing``, ``skewlab.bench.bench_plan``, ``skewlab.bench.bench_gedik``, ``skewlab.bench.bench_spark`` — the
  stand-alone benchmark scripts; their functions are reused by the modules above
  (``skewlab.bench.spark_mean_udfs``: the windowed mean in plain PySpark, baselines of ``bench_spark``;
  ``skewlab.bench.bench_distinct``: the ``distinct`` operator's sketch error merged over split workers).

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
    "fish": "repro_fish",
    "perf": "perf",
}
