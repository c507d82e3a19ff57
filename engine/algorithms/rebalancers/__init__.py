"""Routing-table rebalancers with state migration (Fang, Gedik, Guo & Zhou).

Every module here registers its classes with :func:`skewlab.engine.algorithms.registry.register`; the registry imports
all of them on first use.
"""
