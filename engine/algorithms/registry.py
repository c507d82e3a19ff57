"""The registry of groupings by name, read by the CLI, the engine, the dashboard and the benchmarks.

Algorithms register themselves with :func:`register`; modules under ``skewlab.engine.algorithms.groupings`` and
``skewlab.engine.algorithms.rebalancers`` are discovered and imported on first use (a :class:`~skewlab.engine.config.class_registry.ClassRegistry`,
the same machinery as the workloads').  Names and their display order are fixed by :data:`NAMES` (the
names every issue and document uses).
"""

from __future__ import annotations

from typing import Any, Mapping

from skewlab.engine.config.class_registry import ClassRegistry
from skewlab.engine.algorithms.grouping import Planner
from skewlab.engine.config.params import ParamError, resolve_params
from skewlab.engine.config.settings import SOURCES, WORKERS, check

__all__ = ["NAMES", "UnknownAlgorithm", "create", "describe", "get", "names", "register", "validate_params"]

NAMES: tuple[str, ...] = (
    "hash", "consistent", "shuffle", "pkg", "dchoices", "wchoices", "rr-head", "fish", "dkg",
    "llfd", "mintable", "minmig", "mixed", "mixed-bf", "scan", "redist", "readj",
    "elb", "clb", "uhlb",
)

class UnknownAlgorithm(ParamError):
    """No grouping is registered under that name (message suggests the nearest one)."""


_ALGORITHMS: ClassRegistry[type[Planner]] = ClassRegistry(
    "algorithm", ("skewlab.engine.algorithms.groupings", "skewlab.engine.algorithms.rebalancers"), order=NAMES, unknown=UnknownAlgorithm)


def register(cls: type[Planner]) -> type[Planner]:
    """Class decorator: add ``cls`` under ``cls.name`` (must be one of :data:`NAMES`)."""
    return _ALGORITHMS.register(cls)


def names() -> list[str]:
    """Registered names in the canonical order."""
    return _ALGORITHMS.names()


def get(name: str) -> type[Planner]:
    """The class registered as ``name``; :class:`UnknownAlgorithm` (with a suggestion) otherwise."""
    return _ALGORITHMS.get(name)


def validate_params(name: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validated parameters of algorithm ``name`` (defaults filled in); raises ``ParamError``."""
    cls = get(name)
    return resolve_params(cls.params, params, owner=name)


def create(
    name: str,
    n_workers: int,
    n_sources: int = 1,
    seed: int = 0,
    params: Mapping[str, Any] | None = None,
) -> Planner:
    """Instantiate ``name`` after validating its parameters."""
    cls = get(name)
    check(WORKERS, n_workers)
    check(SOURCES, n_sources)
    return cls(int(n_workers), int(n_sources), int(seed), validate_params(name, params))


def describe() -> list[dict[str, Any]]:
    """One dict per algorithm: name, summary, paper, family, parameters (for CLI and dashboard)."""
    out = []
    for n in names():
        cls = _ALGORITHMS.classes[n]
        out.append(
            {
                "name": n,
                "summary": cls.summary,
                "paper": cls.paper,
                "single_owner": cls.single_owner,
                "rebalancing": cls.rebalancing,
                "params": [p.to_dict() for p in cls.params],
            }
        )
    return out
