"""Declarations the rest of the engine validates against: algorithm and source parameters
(:mod:`skewlab.engine.config.params`), run settings (:mod:`skewlab.engine.config.settings`) and the generic registry of
named classes (:mod:`skewlab.engine.config.class_registry`).  Imports nothing else of skewlab's engine."""
