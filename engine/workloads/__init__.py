"""Seeded, deterministic key streams for simulations, benchmarks and the Spark generator source.

A :class:`Workload` owns a :class:`~skewlab.engine.algorithms.keys.Vocabulary` and yields one ``int64`` array of key ids
per interval.  Workloads are registered by name (:data:`WORKLOADS`, a :class:`~skewlab.engine.config.class_registry.ClassRegistry`
like the algorithms') and declare their parameters with :class:`~skewlab.engine.config.params.Param`, like groupings.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Iterator, Mapping

import numpy as np

from skewlab.engine.config.class_registry import ClassRegistry
from skewlab.engine.algorithms.keys import Vocabulary
from skewlab.engine.config.params import Param, ParamError, resolve_params

__all__ = ["UnknownWorkload", "WORKLOADS", "Workload", "create_workload", "register_workload", "workload_class",
           "workload_names"]


class UnknownWorkload(ParamError):
    """No workload is registered under that name (message suggests the nearest one)."""


_WORKLOADS: ClassRegistry[type["Workload"]] = ClassRegistry("workload", (__name__,), unknown=UnknownWorkload)
#: name -> workload class (the registry's live mapping; complete once :func:`workload_names` ran)
WORKLOADS: dict[str, type["Workload"]] = _WORKLOADS.classes


def register_workload(cls: type["Workload"]) -> type["Workload"]:
    """Class decorator: add ``cls`` under ``cls.name``."""
    return _WORKLOADS.register(cls)


class Workload(ABC):
    """A deterministic stream of keys, cut into intervals.

    ``batches(messages, interval_messages)`` yields ``ceil(messages / interval_messages)`` arrays of
    key ids (the last one may be shorter; a finite source such as a file may end earlier).  The same
    ``seed`` and parameters always give the same stream.  ``vocab`` maps ids to key strings and
    fingerprints; ids are stable for the life of the workload object.
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    params: ClassVar[tuple[Param, ...]] = ()
    #: a trace of fixed length whose intervals are known without generating it: the subclass provides
    #: ``boundaries(messages, interval_messages)`` (start index of every interval, then the end), so
    #: the Spark generator source can size its instances' streams exactly
    finite: ClassVar[bool] = False

    def __init__(self, seed: int = 0, params: Mapping[str, Any] | None = None) -> None:
        self.seed = int(seed)
        self.p: dict[str, Any] = resolve_params(self.params, params, owner=f"workload {self.name}")
        self.vocab = Vocabulary()

    @abstractmethod
    def batches(self, messages: int, interval_messages: int) -> Iterator[np.ndarray]:
        """Yield key-id arrays, one per interval, ``messages`` ids in total (fewer if finite)."""

    @property
    def length(self) -> int | None:
        """Keys in one pass of a finite stream (a file); ``None`` for a generator."""
        return None

    def describe(self) -> dict[str, Any]:
        return {"workload": self.name, "seed": self.seed, "params": dict(self.p)}


def workload_names() -> list[str]:
    """Registered workload names, alphabetical."""
    return _WORKLOADS.names()


def workload_class(name: str) -> type[Workload]:
    """The class registered as ``name``; :class:`UnknownWorkload` (with a suggestion) otherwise."""
    return _WORKLOADS.get(name)


def create_workload(name: str, seed: int = 0, params: Mapping[str, Any] | None = None) -> Workload:
    """Instantiate workload ``name``; :class:`ParamError` for unknown names or bad parameters."""
    return workload_class(name)(seed, params)
