"""Examples of user code for skewlab (run from the repository root with ``PYTHONPATH=.``)."""
