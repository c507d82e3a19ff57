"""The driver's side of a run, shared by both runtimes: the controller (statistics, plans, migration
orders; :mod:`skewlab.engine.control.controller`), the windowed statistics it plans from
(:mod:`skewlab.engine.control.state`), the migration gate, the shadow what-if, operator commands and the load
metrics."""
