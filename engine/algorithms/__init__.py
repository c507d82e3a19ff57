"""The routing math: the Router / Planner interface (:mod:`skewlab.engine.algorithms.grouping`), the registry of
the 19 algorithms (:mod:`skewlab.engine.algorithms.registry`), key fingerprints (:mod:`skewlab.engine.algorithms.keys`),
SpaceSaving (:mod:`skewlab.engine.algorithms.sketches`), routing-table lookups and the streaming groupings
(``groupings/``) and rebalancers (``rebalancers/``) of the five papers.  Pure and vectorised; no
runtime, no I/O."""
