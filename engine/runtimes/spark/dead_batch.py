"""A batch whose records are (nearly) all dead letters for one reason: a mistake in the run's settings, said
at once (issue 38 item 3).

A dead letter is a single bad record, counted and sampled while the run goes on.  When (nearly) every
record of a batch is one for the same reason — ``--value-field latency`` where the records have
``latency_ms``, a ``--key-field`` the records do not have, a topic of records without Kafka keys and no
``--key-field`` — the run computes nothing, and a run that goes on quietly loses the whole stream.
:func:`dead_batch_problem` names the reason and the setting it points at; the engine then stops
(exit status 2) unless ``--continue-on-dead-letters`` was given.  For JSON records (``--source
kafka``) the message lists the fields the records do have (:func:`json_field_paths` of a few records
of the topic), so the misspelt name and the right one stand side by side.

"Nearly all": at least :data:`NEARLY_ALL` of the batch's records (tuples + dead letters), and a batch
of at least :data:`MIN_RECORDS` records, so that a trickle of a few malformed records in an otherwise
idle stream is not mistaken for a wrong setting.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from skewlab.engine.workloads.record_fields import (BAD_KEY_TYPE, BAD_VALUE_TYPE, EMPTY_KEY, EMPTY_VALUE,
                                                     MISSING_KEY, MISSING_VALUE)

__all__ = ["MIN_RECORDS", "NEARLY_ALL", "dead_batch_problem", "input_refusal", "json_field_paths"]

NEARLY_ALL = 0.99
MIN_RECORDS = 20

_KEY_REASONS = {MISSING_KEY: "has no field", BAD_KEY_TYPE: "is neither a string nor an integer at",
                EMPTY_KEY: "is empty at"}
_VALUE_REASONS = {MISSING_VALUE: "has no field", BAD_VALUE_TYPE: "is not a finite number at",
                  EMPTY_VALUE: "is blank at"}


def json_field_paths(record: bytes, limit: int = 40) -> list[str]:
    """The dotted paths of the leaves of a JSON object record (``{"user": {"id": 1}, "x": 2}`` →
    ``["user.id", "x"]``), at most ``limit``; ``[]`` for a record that is not a JSON object."""
    try:
        obj = json.loads(record)
    except (ValueError, TypeError):
        return []
    out: list[str] = []

    def walk(node: Any, prefix: str) -> None:
        for name, value in node.items():
            if len(out) >= limit:
                return
            path = f"{prefix}{name}"
            if isinstance(value, dict) and value:
                walk(value, path + ".")
            else:
                out.append(path)

    if isinstance(obj, dict):
        walk(obj, "")
    return out


def dead_batch_problem(batch_id: int, dead: Mapping[str, Sequence[Any]], tuples: int, *, source: str,
                       key_field: str, value_field: str, fields_seen: Sequence[str] | None = None) -> str | None:
    """One line saying that batch ``batch_id``'s records are nearly all dead letters for one reason and
    which setting that points at, or ``None``.  ``dead``: reason → ``(count, samples)``; ``tuples``: the
    batch's good tuples; ``fields_seen``: the fields the records have (JSON paths or CSV columns), if
    known."""
    counts = {str(reason): int(entry[0]) for reason, entry in dead.items()}
    total = int(tuples) + sum(counts.values())
    if not counts or total < MIN_RECORDS:
        return None
    reason, count = max(counts.items(), key=lambda rc: rc[1])
    if count < NEARLY_ALL * total:
        return None
    seen = f" (fields seen: {', '.join(fields_seen)})" if fields_seen else ""
    record = "JSON record" if source == "kafka" else "row"
    if reason in _VALUE_REASONS and value_field:
        why = f"the {record} {_VALUE_REASONS[reason]} {value_field!r} of --value-field{seen}"
    elif reason in _KEY_REASONS and key_field:
        why = f"the {record} {_KEY_REASONS[reason]} {key_field!r} of --key-field{seen}"
    elif reason == "no_key":
        why = f"the records have no Kafka key; name the key's field of the JSON value with --key-field{seen}"
    elif reason == "missing_column":
        why = f"the rows are shorter than the column of --key-field {key_field!r} or --value-field {value_field!r}"
    else:
        why = f"every record is malformed the same way{seen}"
    return (f"batch {batch_id}: {count} of {total} records are dead letters '{reason}': {why}; stopping "
            "(--continue-on-dead-letters goes on)")


def input_refusal(cfg: Any, batch_id: int, dead: Mapping[str, Sequence[Any]], tuples: int) -> str | None:
    """:func:`dead_batch_problem` for the run's settings (``cfg``: its
    :class:`skewlab.engine.runtimes.spark.engine_config.EngineConfig`), or ``None``.  For a Kafka topic the line
    lists the fields of the topic's first records (:func:`skewlab.engine.io.kafka_io.first_values`), read
    only when the batch is refused."""
    settings = dict(source=cfg.source, key_field=cfg.key_field_name(), value_field=(cfg.value_field or "").strip())
    if dead_batch_problem(batch_id, dead, tuples, **settings) is None:
        return None
    seen: list[str] = []
    if cfg.source == "kafka":
        from skewlab.engine.io.kafka_io import first_values

        try:
            for value in first_values(cfg.bootstrap, cfg.topic):
                seen += [p for p in json_field_paths(value) if p not in seen]
        except ValueError:
            pass
    return dead_batch_problem(batch_id, dead, tuples, fields_seen=seen[:20], **settings)
