"""Streaming groupings (key grouping baselines and split-key groupings).

Every module here registers its classes with :func:`skewlab.engine.algorithms.registry.register`; the registry imports
all of them on first use.
"""
