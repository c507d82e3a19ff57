"""The routing math: the Router / Planner interface (:mod:`engine.algorithms.grouping`), the registry of
the 19 algorithms (:mod:`engine.algorithms.registry`), key fingerprints (:mod:`engine.algorithms.keys`),
SpaceSaving (:mod:`engine.algorithms.sketches`), routing-table lookups and the streaming groupings
(``groupings/``) and rebalancers (``rebalancers/``) of the five papers.  Pure and vectorised; no
runtime, no I/O."""
