"""The registry of groupings by name, read by the CLI, the engine, the dashboard and the benchmarks.

Algorithms register themselves with :func:`register`; modules under ``skewlab.engine.algorithms.groupings`` and
``skewlab.engine.algorithms.rebalancers`` are discovered and imported on first use (a :class:`~skewlab.engine.config.class_registry.ClassRegistry`,
the same machinery as the workloads').  The built-ins' names and their display order are fixed by
:data:`NAMES` (the names every issue and document uses).

A user's grouping — a :class:`~skewlab.engine.algorithms.grouping.Planner` subclass written against the
same interface (docs/add-a-grouping.md) — is named like a built-in wherever a name is taken
(``simulate``, ``engine``, ``--shadow``, ``control set-algorithm``, the dashboard): as
``package.module:Class`` (loaded by :func:`skewlab.engine.config.class_registry.load_class`, the loader
of ``--operator``; that spec is then its name in runs, commands and events), or by the name of an
installed ``skewlab.groupings`` entry point (listed by :func:`names` after the built-ins).  It is checked
once per process when first named (:func:`check_grouping`), with one-line errors.
"""

from __future__ import annotations

import pickle
from typing import Any, Mapping

import numpy as np

from skewlab.engine.config.class_registry import ClassRegistry
from skewlab.engine.algorithms.grouping import Planner, Router
from skewlab.engine.config.params import Param, ParamError, resolve_params
from skewlab.engine.config.settings import SOURCES, WORKERS, check

__all__ = ["ENTRY_POINTS", "MAX_NAME", "NAMES", "UnknownAlgorithm", "check_grouping", "create", "describe", "describe_one", "get",
           "names", "register", "validate_params"]

NAMES: tuple[str, ...] = (
    "hash", "consistent", "shuffle", "pkg", "dchoices", "wchoices", "rr-head", "fish", "dkg",
    "llfd", "mintable", "minmig", "mixed", "mixed-bf", "scan", "redist", "readj",
    "elb", "clb", "uhlb",
)

#: the entry point group of installed user groupings (``name = "package.module:Class"``)
ENTRY_POINTS = "skewlab.groupings"
#: the longest name a grouping may have: the database stores it in 64 characters (storage/models.py)
MAX_NAME = 64


class UnknownAlgorithm(ParamError):
    """No grouping is registered under that name (message suggests the nearest one), or a user's
    grouping does not load or fails its check (:func:`check_grouping`)."""


def check_grouping(cls: type[Planner], label: str) -> None:
    """Check a user's grouping class once, before any run uses it; raises :class:`UnknownAlgorithm`
    with one line ``"<label>: <what is wrong>"``.

    Its ``params`` must be a tuple of :class:`~skewlab.engine.config.params.Param` with distinct names
    and valid defaults (the declarations the CLI, commands and dashboard forms validate with); with
    those defaults, on 2 workers and 2 sources, it must construct, its ``router`` must be a
    :class:`~skewlab.engine.algorithms.grouping.Router` that pickles (the Spark engine ships it to the
    executors) and route a batch of keys to workers in ``[0, n)``, one per key."""
    attr = cls.__name__
    declared = cls.params
    if not isinstance(declared, (tuple, list)) or not all(isinstance(p, Param) for p in declared):
        raise UnknownAlgorithm(f"{label}: {attr}.params must be a tuple of skewlab.engine.config.params.Param")
    seen = [p.name for p in declared]
    if len(set(seen)) != len(seen):
        raise UnknownAlgorithm(f"{label}: {attr}.params declares a parameter twice")
    try:
        for p in declared:
            p.coerce(p.default)
    except ParamError as exc:
        raise UnknownAlgorithm(f"{label}: {attr}.params: the default is invalid: {exc}") from None
    n = 2
    try:
        planner = cls(n, 2, 0, None)
        router = planner.router
        if not isinstance(router, Router):
            raise TypeError(f"its router is a {type(router).__name__}, not a skewlab.engine.algorithms.grouping.Router")
        router = pickle.loads(pickle.dumps(router))
        fps = (np.arange(1, 65, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
        workers = np.asarray(router.route(fps, 1))
    except Exception as exc:  # the user's code: any error, said in one line
        raise UnknownAlgorithm(f"{label}: {attr} on {n} workers with its defaults: {type(exc).__name__}: {exc}"[:300]
                               .replace("\n", " ")) from None
    if workers.shape != fps.shape or workers.dtype.kind not in "iu" or workers.size and (
            workers.min() < 0 or workers.max() >= n):
        got = f"{workers.dtype} of shape {workers.shape}" if workers.shape != fps.shape or workers.dtype.kind not in "iu" \
            else f"workers {workers.min()}..{workers.max()}"
        raise UnknownAlgorithm(f"{label}: {attr}'s router.route must return one integer worker in [0, n) per key; "
                               f"on n={n} workers it gave {got}")


_ALGORITHMS: ClassRegistry[type[Planner]] = ClassRegistry(
    "algorithm", ("skewlab.engine.algorithms.groupings", "skewlab.engine.algorithms.rebalancers"), order=NAMES,
    unknown=UnknownAlgorithm, base=Planner, entry_points=ENTRY_POINTS, check=check_grouping, max_name=MAX_NAME)


def register(cls: type[Planner]) -> type[Planner]:
    """Class decorator: add ``cls`` under ``cls.name`` (must be one of :data:`NAMES`)."""
    return _ALGORITHMS.register(cls)


def names() -> list[str]:
    """The built-ins' names in the canonical order, then installed entry points' (alphabetical)."""
    return _ALGORITHMS.names()


def get(name: str) -> type[Planner]:
    """The class registered as ``name``, or the user's grouping ``package.module:Class``;
    :class:`UnknownAlgorithm` (one line) otherwise."""
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
    values = validate_params(name, params)
    if not _ALGORITHMS.is_user(name):
        return cls(int(n_workers), int(n_sources), int(seed), values)
    try:
        planner = cls(int(n_workers), int(n_sources), int(seed), values)
    except ParamError:
        raise
    except Exception as exc:  # the user's constructor: one line, not a traceback
        raise UnknownAlgorithm(f"algorithm {name[:120]!r}: cannot create it on {n_workers} workers: "
                               f"{type(exc).__name__}: {exc}"[:300].replace("\n", " ")) from None
    # its name in runs, commands, events and plans is the name it was asked by (the spec or the entry point)
    planner.name = name  # type: ignore[misc]
    return planner


def describe_one(name: str) -> dict[str, Any]:
    """Name, summary, paper, family and parameters of ``name`` (a built-in or a user's grouping)."""
    cls = get(name)
    return {
        "name": name,
        "summary": cls.summary or f"{cls.__name__} (user grouping)",
        "paper": cls.paper,
        "single_owner": cls.single_owner,
        "rebalancing": cls.rebalancing,
        "params": [p.to_dict() for p in cls.params],
    }


def describe() -> list[dict[str, Any]]:
    """:func:`describe_one` of every name of :func:`names` (for CLI and dashboard)."""
    return [describe_one(n) for n in names()]
