"""The registry of groupings by name, read by the CLI, the engine, the dashboard and the benchmarks.

Algorithms register themselves with :func:`register`; modules under ``engine.groupings`` and
``engine.rebalancers`` are discovered and imported on first use.  Names and their display order
are fixed by :data:`NAMES` (the names every issue and document uses).
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from typing import Any, Mapping

from engine.grouping import Planner
from engine.params import ParamError, resolve_params

__all__ = ["NAMES", "UnknownAlgorithm", "create", "describe", "get", "names", "register", "validate_params"]

NAMES: tuple[str, ...] = (
    "hash", "consistent", "shuffle", "pkg", "dchoices", "wchoices", "rr-head", "dkg",
    "llfd", "mintable", "minmig", "mixed", "mixed-bf", "scan", "redist", "readj",
    "elb", "clb", "uhlb",
)

_REGISTRY: dict[str, type[Planner]] = {}
_LOADED = False


class UnknownAlgorithm(ParamError):
    """No grouping is registered under that name (message suggests the nearest one)."""


def register(cls: type[Planner]) -> type[Planner]:
    """Class decorator: add ``cls`` under ``cls.name`` (must be one of :data:`NAMES`)."""
    if cls.name not in NAMES:
        raise ValueError(f"{cls.__name__}.name={cls.name!r} is not a registry name")
    existing = _REGISTRY.get(cls.name)
    if existing is not None and existing is not cls and existing.__qualname__ != cls.__qualname__:
        raise ValueError(f"{cls.name!r} registered twice ({existing.__name__}, {cls.__name__})")
    _REGISTRY[cls.name] = cls
    return cls


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for package in ("engine.groupings", "engine.rebalancers"):
        pkg = importlib.import_module(package)
        for info in pkgutil.iter_modules(pkg.__path__):
            if not info.name.startswith("_"):
                importlib.import_module(f"{package}.{info.name}")


def names() -> list[str]:
    """Registered names in the canonical order."""
    _load()
    return [n for n in NAMES if n in _REGISTRY]


def get(name: str) -> type[Planner]:
    """The class registered as ``name``; :class:`UnknownAlgorithm` (with a suggestion) otherwise."""
    _load()
    cls = _REGISTRY.get(str(name))
    if cls is None:
        close = difflib.get_close_matches(str(name), names(), n=1, cutoff=0.4)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownAlgorithm(f"unknown algorithm {str(name)!r}{hint}; known: {', '.join(names())}")
    return cls


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
    if int(n_workers) < 1:
        raise ParamError(f"workers must be >= 1, got {n_workers}")
    if int(n_sources) < 1:
        raise ParamError(f"sources must be >= 1, got {n_sources}")
    return cls(int(n_workers), int(n_sources), int(seed), validate_params(name, params))


def describe() -> list[dict[str, Any]]:
    """One dict per algorithm: name, summary, paper, family, parameters (for CLI and dashboard)."""
    out = []
    for n in names():
        cls = _REGISTRY[n]
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
