"""Session-scoped SparkSession for tests: ONE ``local[2]`` session for the whole run (startup costs
seconds; every test module that needs Spark shares it).  Built by
:func:`skewlab.engine.runtimes.spark.session.get_session`, so it has the skewlab sources registered."""

from __future__ import annotations

import pytest

__all__ = ["spark"]


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from skewlab.engine.runtimes.spark.session import get_session, stop_session

    session = get_session("local[2]", "skewlab-tests", **{"spark.sql.shuffle.partitions": "2"})
    try:
        yield session
    finally:
        stop_session()
