"""One configuration per source of ``skewlab engine`` (``--source generator|kafka|file``): the settings
that source reads, their checks (one-line :class:`ParamError`, before Spark starts), and the options
of the Spark data source that reads it (:mod:`skewlab.engine.runtimes.spark.sources`).

:meth:`skewlab.engine.runtimes.spark.engine_config.EngineConfig.source_config` builds the one its ``source``
names from the flat command-line settings; the checks common to every source (workers, rate, the
operator, the grouping, the sink) stay in :meth:`EngineConfig.validate`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from skewlab.engine.config.params import ParamError
from skewlab.shared import filesystems

__all__ = ["FileSource", "GeneratorSource", "KafkaSource", "RecordFields", "SourceConfig"]


@dataclass(frozen=True)
class RecordFields:
    """Where each record's key and value are (``--key-field``, ``--value-field``; ``""``: none given),
    and what the operator needs as value: ``kind`` of :data:`skewlab.engine.runtimes.spark.topology.VALUE_KINDS`."""
    key: str
    value: str
    kind: str
    #: ``--operator`` as given and the operator's name, for the messages
    operator: str = ""
    operator_name: str = ""

    def require_value(self, where: str) -> None:
        """An operator of values on records: ``--value-field`` must name ``where`` the value is."""
        if self.kind == "field" and not self.value:
            raise ParamError(f"--operator {self.operator}: {self.operator_name} reads a value per tuple; name it "
                             f"with --value-field ({where}, e.g. amount)")


@dataclass(frozen=True)
class GeneratorSource:
    """Seeded synthetic keys (:mod:`skewlab.engine.workloads`), ``sources`` partitions, at ``rate``
    tuples per second (0: as fast as ``max_per_batch`` allows)."""
    workload: str
    workload_params: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    sources: int = 1
    rate: float = 0.0
    max_per_batch: int = 0

    def check_fields(self, fields: RecordFields) -> None:
        if fields.key or fields.value:
            raise ParamError("--key-field/--value-field name fields of the records of --source kafka|file; the "
                             "generator draws its own keys and seeded values")

    def validate(self) -> None:
        from skewlab.engine.workloads import create_workload

        create_workload(self.workload, self.seed, self.workload_params)  # validates params

    def options(self, fields: RecordFields) -> tuple[str, dict[str, str]]:
        return "skewlab-generator", {
            "workload": self.workload,
            "params": json.dumps(self.workload_params),
            "seed": str(self.seed),
            "partitions": str(self.sources),
            "rate": str(self.rate),
            "max_per_batch": str(self.max_per_batch),
            "values": str(fields.kind == "field").lower(),
        }


@dataclass(frozen=True)
class KafkaSource:
    """A Kafka topic's records; key and value are dotted JSON paths into the record value."""
    bootstrap: str
    topic: str
    max_per_batch: int = 0

    def check_fields(self, fields: RecordFields) -> None:
        from skewlab.engine.workloads.record_fields import parse_path

        fields.require_value("a dotted JSON field of the record value")
        parse_path(fields.key, "--key-field")
        parse_path(fields.value, "--value-field")

    def validate(self) -> None:
        if not self.bootstrap or not self.topic:
            raise ParamError("--source kafka needs --bootstrap HOST:PORT and --topic NAME")

    def options(self, fields: RecordFields) -> tuple[str, dict[str, str]]:
        return "skewlab-kafka", {
            "bootstrap": self.bootstrap,
            "topic": self.topic,
            "max_per_batch": str(self.max_per_batch),
            "key_field": fields.key,
            "value_field": fields.value,
        }


@dataclass(frozen=True)
class FileSource:
    """A text or CSV file's lines (a local path or a URI), replayed once over ``sources`` partitions."""
    path: str
    sources: int = 1
    rate: float = 0.0
    max_per_batch: int = 0

    def check_fields(self, fields: RecordFields) -> None:
        fields.require_value("a CSV column")
        if fields.value and not fields.key:
            raise ParamError("--value-field with --source file needs --key-field too (the CSV column of the key)")

    def validate(self) -> None:
        if not self.path:
            raise ParamError("--source file needs --input FILE")
        location = filesystems.resolve(self.path)
        if not filesystems.is_file(location) or (filesystems.is_local(location) and not os.access(location, os.R_OK)):
            raise ParamError(f"cannot read input file {self.path!r}")

    def options(self, fields: RecordFields) -> tuple[str, dict[str, str]]:
        return "skewlab-file", {
            "path": filesystems.resolve(self.path),
            "column": fields.key,
            "value_column": fields.value,
            "partitions": str(self.sources),
            "rate": str(self.rate),
            "max_per_batch": str(self.max_per_batch),
        }


SourceConfig = GeneratorSource | KafkaSource | FileSource
