"""A registry of classes by name: discovered from packages, listed in a declared order, looked up with a
"did you mean" error.  Used by the algorithm registry (:mod:`skewlab.engine.algorithms.registry`) and the workloads
(:mod:`skewlab.engine.workloads`).
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from typing import Generic, Sequence, TypeVar

from skewlab.engine.config.params import ParamError

__all__ = ["ClassRegistry"]

T = TypeVar("T", bound=type)


class ClassRegistry(Generic[T]):
    """Classes registered under their ``name`` attribute.

    * ``packages``: every public module (name not starting with ``_``) of these packages is imported
      on the first lookup, so that their ``@registry.register`` decorators run.
    * ``order``: the names allowed, in display order (registering another name is an error); without
      it any name may register and :meth:`names` is alphabetical.
    * ``unknown``: the :class:`~skewlab.engine.config.params.ParamError` subclass raised by :meth:`get` for an unknown
      name, with the nearest known name suggested (:func:`difflib.get_close_matches`).

    :attr:`classes` is the live ``name -> class`` mapping.
    """

    def __init__(self, what: str, packages: Sequence[str], *, order: Sequence[str] | None = None,
                 unknown: type[ParamError] = ParamError) -> None:
        self.what = what
        self.packages = tuple(packages)
        self.order = None if order is None else tuple(order)
        self.unknown = unknown
        self.classes: dict[str, T] = {}
        self._loaded = False

    def register(self, cls: T) -> T:
        """Class decorator: add ``cls`` under ``cls.name`` (one of :attr:`order`, when declared).

        Registering the same class again (a module imported twice, e.g. reloaded) replaces it; two
        different classes under one name are an error."""
        name = cls.name
        if self.order is not None and name not in self.order:
            raise ValueError(f"{cls.__name__}.name={name!r} is not a registry name")
        existing = self.classes.get(name)
        if existing is not None and existing is not cls and existing.__qualname__ != cls.__qualname__:
            raise ValueError(f"{name!r} registered twice ({existing.__name__}, {cls.__name__})")
        self.classes[name] = cls
        return cls

    def load(self) -> None:
        """Import the packages' modules once (re-entrant: a module being imported may look up names)."""
        if self._loaded:
            return
        self._loaded = True
        for package in self.packages:
            pkg = importlib.import_module(package)
            for info in pkgutil.iter_modules(pkg.__path__):
                if not info.name.startswith("_"):
                    importlib.import_module(f"{package}.{info.name}")

    def names(self) -> list[str]:
        """Registered names, in the declared order (else alphabetical)."""
        self.load()
        if self.order is None:
            return sorted(self.classes)
        return [n for n in self.order if n in self.classes]

    def get(self, name: str) -> T:
        """The class registered as ``name``; :attr:`unknown` (one line, with a suggestion) otherwise."""
        self.load()
        cls = self.classes.get(str(name))
        if cls is None:
            known = self.names()
            close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.4)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise self.unknown(f"unknown {self.what} {str(name)!r}{hint}; known: {', '.join(known)}")
        return cls
