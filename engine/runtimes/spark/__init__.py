"""skewlab on Apache Spark: the shared session (:mod:`skewlab.engine.runtimes.spark.session`) and the streaming
sources written as PySpark Python Data Sources (:mod:`skewlab.engine.runtimes.spark.sources`, no JAR).

Importing this package does not import pyspark; the submodules do.
"""

__all__ = ["get_session", "register_sources"]


def get_session(*args, **kwargs):
    """Shortcut for :func:`skewlab.engine.runtimes.spark.session.get_session` (imports pyspark lazily)."""
    from skewlab.engine.runtimes.spark.session import get_session as _get

    return _get(*args, **kwargs)


def register_sources(spark) -> None:
    """Shortcut for :func:`skewlab.engine.runtimes.spark.sources.register`."""
    from skewlab.engine.runtimes.spark.sources import register

    register(spark)
