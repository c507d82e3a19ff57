"""The configuration of one run of ``skewlab engine``: :class:`EngineConfig`, its checks (one line,
:class:`~skewlab.engine.config.params.ParamError`, before Spark starts) and where a run's checkpoint and
results go by default (:func:`default_data_dir`).

Each source's own settings and record fields are checked by its configuration class
(:mod:`skewlab.engine.runtimes.spark.source_config`); :meth:`EngineConfig.validate` keeps the checks every
source shares (workers, operator, grouping, sink, Spark settings).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skewlab.engine.algorithms import registry
from skewlab.engine.config import settings as run_settings
from skewlab.engine.config.params import ParamError
from skewlab.engine.config.settings import MAX_WORKERS, check
from skewlab.engine.operators import KeyedOperator, is_mergeable, load_operator, split_key_refusal
from skewlab.engine.runtimes.spark.conf_values import check_spark_conf
from skewlab.engine.runtimes.spark.source_config import (FileSource, GeneratorSource, KafkaSource, RecordFields,
                                                         SourceConfig)
from skewlab.shared import filesystems

__all__ = ["EngineConfig", "MAX_SERVICE_US", "SOURCES", "default_data_dir"]


#: --service-us above one second per tuple is a typo, not an experiment
MAX_SERVICE_US = 1e6
SOURCES = ("generator", "kafka", "file")


@dataclass
class EngineConfig:
    source: str = "generator"
    db: str | None = None
    #: "" = the default for the operator (:func:`skewlab.engine.config.settings.default_algorithm`)
    algorithm: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    workers: int = run_settings.WORKERS.default
    sources: int = run_settings.SOURCES.default
    interval: float = run_settings.INTERVAL.default
    rate: float = run_settings.RATE.default
    max_per_batch: int = run_settings.MAX_PER_BATCH.default
    checkpoint: str | None = None
    run_name: str = ""
    duration: float | None = None
    #: Spark master; None = the cluster's spark.master, else local[*] (:mod:`skewlab.engine.runtimes.spark.cluster_settings`)
    master: str | None = None
    #: Spark settings given explicitly (``--conf``); they win over the cluster's and skewlab's defaults
    spark_conf: dict[str, str] = field(default_factory=dict)
    window: int = run_settings.WINDOW.default
    operator: str = "count"
    workload: str = "zipf"
    workload_params: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    bootstrap: str = ""
    topic: str = ""
    path: str = ""
    #: the CSV column (file) or dotted JSON path into the record value (kafka) of each record's key;
    #: ``column`` is its older name (``--column``), kept as an alias
    key_field: str = ""
    column: str = ""
    #: the CSV column (file) or dotted JSON path (kafka) of each record's value, for operators that read
    #: one (:attr:`KeyedOperator.needs_value`); the generator draws seeded values itself
    value_field: str = ""
    shadow: list[str] | None = None
    shadow_max_tuples: int = 50_000
    top_k: int = 10
    max_batches: int | None = None
    max_workers: int | None = None
    sink: str | None = None
    #: emulated service time per tuple in µs (0 = none): see :func:`skewlab.engine.runtimes.spark.operator.make_handler`
    service_us: float = 0.0
    #: pre-aggregate in the source scan for an operator that combines (:attr:`KeyedOperator.combined`)
    combine: bool = True
    #: a new run whose grouping's kernels are not compiled when Spark is up waits for them instead of
    #: routing by hash until they are (:mod:`skewlab.engine.runtimes.spark.driver_step`, "joins when ready")
    wait_for_kernels: bool = False
    #: go on when (nearly) all of a batch's records are dead letters for one reason; default: stop with
    #: one line naming the setting it points at (:mod:`skewlab.engine.runtimes.spark.dead_batch`)
    continue_on_dead_letters: bool = False

    def __post_init__(self) -> None:
        if not self.algorithm:  # by the operator class's declaration (an unimportable one: not mergeable)
            self.algorithm = run_settings.default_algorithm(is_mergeable(self.operator))

    def keyed_operator(self) -> KeyedOperator:
        """The operator ``operator`` names (:func:`skewlab.engine.operators.load_operator`; one-line
        :class:`ParamError` if it names none)."""
        return load_operator(self.operator)

    def key_field_name(self) -> str:
        """``--key-field``, else its alias ``--column`` (``""``: the record key, or the whole line)."""
        return (self.key_field or self.column or "").strip()

    def value_kind(self, operator: KeyedOperator | None = None) -> str:
        """What the routed tuples carry as value for ``operator`` (default: the configured one), one
        of :data:`skewlab.engine.runtimes.spark.topology.VALUE_KINDS`: ``seq`` for an operator whose
        values are its tuples' positions (:attr:`KeyedOperator.values_are_positions`: the join),
        ``field`` for an operator of values, ``none`` for one of keys only."""
        op = operator if operator is not None else self.keyed_operator()
        if not op.needs_value:
            return "none"
        return "seq" if op.values_are_positions else "field"

    def record_fields(self, operator: KeyedOperator | None = None) -> RecordFields:
        """Where each record's key and value are, and what ``operator`` (default: the configured one)
        needs as value (:meth:`value_kind`)."""
        op = operator if operator is not None else self.keyed_operator()
        return RecordFields(self.key_field_name(), (self.value_field or "").strip(), self.value_kind(op),
                            operator=self.operator, operator_name=op.name)

    def source_config(self) -> SourceConfig:
        """The configuration of the source ``source`` names (:mod:`skewlab.engine.runtimes.spark.source_config`)."""
        if self.source == "generator":
            return GeneratorSource(self.workload, dict(self.workload_params), seed=self.seed, sources=self.sources,
                                   rate=self.rate, max_per_batch=self.max_per_batch)
        if self.source == "kafka":
            return KafkaSource(self.bootstrap, self.topic, max_per_batch=self.max_per_batch)
        return FileSource(self.path, sources=self.sources, rate=self.rate, max_per_batch=self.max_per_batch)

    def _validate_fields(self, operator: KeyedOperator, source: SourceConfig) -> None:
        """The records' key and value fields against the operator, then against the source (issue 24,
        item 1)."""
        fields = self.record_fields(operator)
        if self.key_field and self.column and self.key_field.strip() != self.column.strip():
            raise ParamError(f"--column is an alias of --key-field: give one, not both ({self.column!r}, "
                             f"{self.key_field!r})")
        if fields.kind != "field" and fields.value:
            raise ParamError(f"--value-field {fields.value}: operator {operator.name} reads no value per tuple "
                             f"({'its values are the positions of its tuples' if fields.kind == 'seq' else 'keys only'}); "
                             "drop it or use sum, mean, min, max, distinct")
        source.check_fields(fields)

    def validate(self) -> None:
        """One-line :class:`ParamError` for every bad setting (before Spark starts)."""
        if self.source not in SOURCES:
            raise ParamError(f"--source must be one of {'|'.join(SOURCES)}, got {self.source!r}")
        operator = self.keyed_operator()
        for name in ("workers", "sources", "interval", "rate", "max_per_batch", "window"):
            check(name, getattr(self, name))
        if self.max_workers is not None:
            check(run_settings.MAX_WORKERS_SETTING, self.max_workers)
            if self.max_workers < self.workers:
                raise ParamError(f"--max-workers must be >= --workers ({self.workers}), got {self.max_workers}")
        if not 0 <= self.service_us <= MAX_SERVICE_US:
            raise ParamError(f"--service-us must be in [0, {MAX_SERVICE_US:g}] µs per tuple, got {self.service_us}")
        if self.duration is not None and self.duration <= 0:
            raise ParamError(f"--duration must be > 0 seconds, got {self.duration}")
        cls = registry.get(self.algorithm)
        registry.validate_params(self.algorithm, self.params)
        source = self.source_config()
        self._validate_fields(operator, source)
        refusal = split_key_refusal(operator.name, operator.mergeable, self.algorithm, cls.single_owner)
        if refusal:
            raise ParamError(refusal)
        source.validate()
        for name in self.shadow or []:
            registry.get(name)
        if self.sink:
            from skewlab.engine.runtimes.spark.result_sink import parse_sink

            parse_sink(self.sink)  # a malformed kafka:// URL
        check_spark_conf(self.spark_conf)  # a bad value fails only once Spark reads it, with a traceback

    def checkpoint_dir(self) -> str:
        """``--checkpoint``, or ``data/checkpoints/<run name, else "default">``, resolved here on the
        driver into an absolute path or a URI (:func:`skewlab.shared.filesystems.resolve`): the
        executors open the state store, route files and sink where the driver means them."""
        return filesystems.resolve(self.checkpoint or default_data_dir() / "checkpoints" / (self.run_name or "default"))

    def partitions(self) -> int:
        """State partitions P = ``--max-workers``, default ``2 * workers`` (capped at MAX_WORKERS): the
        most workers the run can grow to, fixed for the checkpoint's life."""
        return int(self.max_workers) if self.max_workers is not None else min(2 * self.workers, MAX_WORKERS)

    def sink_spec(self) -> str:
        """``--sink`` (a directory or ``kafka://HOST:PORT/TOPIC``), or ``data/results/<checkpoint
        directory name>``: where the operator's results go (:mod:`skewlab.engine.runtimes.spark.result_sink`);
        a directory is resolved on the driver like :meth:`checkpoint_dir`."""
        spec = str(self.sink or default_data_dir() / "results" / os.path.basename(self.checkpoint_dir()))
        return spec if spec.lower().startswith("kafka:") else filesystems.resolve(spec)

    def source_options(self) -> tuple[str, dict[str, str]]:
        """The Spark data source that reads the input and its options (:meth:`source_config`)."""
        return self.source_config().options(self.record_fields())


def default_data_dir() -> Path:
    return Path(os.environ.get("SKEWLAB_DATA_DIR", "data"))
