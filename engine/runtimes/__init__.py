"""Runtimes that drive the controller: ``local`` (numpy, single process) and ``spark`` (PySpark)."""
