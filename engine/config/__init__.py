"""Declarations the rest of the engine validates against: algorithm and source parameters
(:mod:`engine.config.params`), run settings (:mod:`engine.config.settings`) and the generic registry of
named classes (:mod:`engine.config.class_registry`).  Imports nothing else of skewlab's engine."""
