"""Helpers shared by the Spark engine tests."""

from __future__ import annotations

from collections import Counter

from skewlab.engine.algorithms.keys import fingerprint
from skewlab.engine.runtimes.spark import sources as S
from skewlab.engine.runtimes.spark.engine import EngineConfig


def generator_truth(cfg: EngineConfig, consumed: dict[int, int]) -> Counter:
    """The keys the generator source emitted for ``consumed`` (tuples per source instance)."""
    reader = S.GeneratorStreamReader(dict(cfg.source_options()[1]))
    truth: Counter = Counter()
    for p, end in consumed.items():
        truth.update(S.generator_stream_ids(reader.cfg, p, 0, end))
    return truth


def by_fingerprint(counts: Counter) -> Counter:
    """``counts`` keyed as the Spark driver knows keys (``FingerprintVocabulary.names``: ``#`` + hex)."""
    return Counter({f"#{fingerprint(k):016x}": v for k, v in counts.items()})


def generator_keys_of(cfg: EngineConfig):
    """``keys_of(instance, start, end)`` of the generator source of ``cfg`` (for tests.spark_truth)."""
    reader = S.GeneratorStreamReader(dict(cfg.source_options()[1]))
    return lambda p, start, end: S.generator_stream_ids(reader.cfg, p, start, end)
