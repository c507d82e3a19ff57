"""One Spark state partition per worker: the grouping label of each worker.

A stateful operator (``groupBy(label).applyInPandasWithState``) hash-partitions its input by the
grouping column: a row with label ``v`` goes to partition ``pmod(murmur3(v, seed 42), P)``, Spark's
``HashPartitioning``.  :func:`worker_labels` picks for worker ``w`` the smallest non-negative int
whose hash lands on partition ``w``, so the rows of worker ``w`` — and its state — live in exactly
one task and one state partition of every micro-batch.

Spark hashes an ``int`` with ``Murmur3_x86_32.hashInt(v, 42)``, which is MurmurHash3 x86/32 of the
value's four little-endian bytes (``mmh3.hash`` computes the same).  ``tests/test_spark_stateful.py``
checks the labels against ``spark_partition_id()``.
"""

from __future__ import annotations

import functools
import struct

import mmh3

__all__ = ["SPARK_HASH_SEED", "spark_partition_of", "worker_labels"]

SPARK_HASH_SEED = 42  # HashPartitioning's Murmur3Hash seed


def spark_partition_of(value: int, partitions: int) -> int:
    """The shuffle partition Spark's hash partitioning gives the ``int`` value ``value``."""
    h = mmh3.hash(struct.pack("<i", int(value)), SPARK_HASH_SEED, signed=True)
    return h % int(partitions)  # Python's % is Spark's pmod for a positive modulus


@functools.lru_cache(maxsize=64)
def worker_labels(partitions: int) -> tuple[int, ...]:
    """Label of every worker ``0 .. partitions - 1``: the smallest int hashed onto its partition."""
    p = int(partitions)
    if p < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    labels: list[int | None] = [None] * p
    missing = p
    v = 0
    while missing:
        w = spark_partition_of(v, p)
        if labels[w] is None:
            labels[w] = v
            missing -= 1
        v += 1
    return tuple(int(x) for x in labels)  # type: ignore[arg-type]
