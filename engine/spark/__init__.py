"""skewlab on Apache Spark: the shared session (:mod:`engine.spark.session`) and the streaming
sources written as PySpark Python Data Sources (:mod:`engine.spark.sources`, no JAR).

Importing this package does not import pyspark; the submodules do.
"""

__all__ = ["get_session", "register_sources"]


def get_session(*args, **kwargs):
    """Shortcut for :func:`engine.spark.session.get_session` (imports pyspark lazily)."""
    from engine.spark.session import get_session as _get

    return _get(*args, **kwargs)


def register_sources(spark) -> None:
    """Shortcut for :func:`engine.spark.sources.register`."""
    from engine.spark.sources import register

    register(spark)
