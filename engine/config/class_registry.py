"""A registry of classes by name: discovered from packages, listed in a declared order, looked up with a
"did you mean" error.  Used by the algorithm registry (:mod:`skewlab.engine.algorithms.registry`) and the workloads
(:mod:`skewlab.engine.workloads`).

A user's class comes in the same way everywhere: :func:`load_class` resolves ``package.module:Class``
and checks it against the base class it must extend, with one-line errors.  The operators' loader
(:func:`skewlab.engine.operators.load_operator`) uses it for ``--operator``; a registry built with a
``base`` uses it for specs given as names (``--algorithm package.module:Class``) and for its
``entry_points`` group (installed packages that declare, e.g., ``[project.entry-points."skewlab.groupings"]``).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import inspect
import pkgutil
from typing import Callable, Generic, Sequence, TypeVar

from skewlab.engine.config.params import ParamError

__all__ = ["ClassRegistry", "is_class_spec", "load_class"]

T = TypeVar("T", bound=type)


def is_class_spec(text: str) -> bool:
    """Whether ``text`` has the form of ``package.module:Class`` (not whether it loads)."""
    return ":" in str(text)


def load_class(spec: str, base: type, *, label: str, error: type[ParamError] = ParamError) -> type:
    """The class ``package.module:Class`` names, a concrete subclass of ``base``.

    Raises ``error`` with one line, ``"<label>: <what is wrong>"``, when the spec is malformed, the
    module does not import (its own error included), the module has no such attribute, the attribute
    is not a subclass of ``base``, or it leaves abstract methods unimplemented."""
    module_name, _, attr = str(spec).strip().partition(":")
    if not module_name or not attr:
        raise error(f"{label}: expected package.module:Class")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or the module's own error while importing
        raise error(f"{label}: cannot import {module_name}: {type(exc).__name__}: {exc}"[:300].replace("\n", " ")) from None
    cls = getattr(module, attr, None)
    if cls is None:
        raise error(f"{label}: module {module_name} has no {attr}")
    if not (inspect.isclass(cls) and issubclass(cls, base)):
        raise error(f"{label}: {attr} is not a subclass of {_public_name(base)}")
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(cls.__abstractmethods__))
        raise error(f"{label}: {attr} does not implement {missing}")
    return cls


def _public_name(cls: type) -> str:
    """``cls`` as users import it: its package's name when the package re-exports it
    (``skewlab.engine.operators.KeyedOperator``), else its module's."""
    module = cls.__module__
    package = module.rpartition(".")[0]
    if package and getattr(importlib.import_module(package), cls.__name__, None) is cls:
        return f"{package}.{cls.__name__}"
    return f"{module}.{cls.__name__}"


class ClassRegistry(Generic[T]):
    """Classes registered under their ``name`` attribute.

    * ``packages``: every public module (name not starting with ``_``) of these packages is imported
      on the first lookup, so that their ``@registry.register`` decorators run.
    * ``order``: the names allowed, in display order (registering another name is an error); without
      it any name may register and :meth:`names` is alphabetical.
    * ``unknown``: the :class:`~skewlab.engine.config.params.ParamError` subclass raised by :meth:`get` for an unknown
      name, with the nearest known name suggested (:func:`difflib.get_close_matches`).
    * ``base`` (optional): user classes are accepted, subclasses of it — a name of the form
      ``package.module:Class`` is loaded by :func:`load_class` on lookup and kept under that spec; and
      ``entry_points``: the group of installed entry points (``name = "package.module:Class"``) registered
      under their names on the first lookup.  ``check(cls, label)`` (optional) checks a user class
      further (raising ``unknown`` with one line); ``max_name``: the longest name a user class may
      have (its spec or entry point name; the database's column).  An entry point that does not load
      is left out of :meth:`names`; looking up its name raises its one-line error.

    :attr:`classes` is the live ``name -> class`` mapping (packages' and entry points' classes);
    :attr:`loaded` the user classes loaded from specs.
    """

    def __init__(self, what: str, packages: Sequence[str], *, order: Sequence[str] | None = None,
                 unknown: type[ParamError] = ParamError, base: type | None = None,
                 entry_points: str | None = None, check: Callable[[type, str], None] | None = None,
                 max_name: int | None = None) -> None:
        self.what = what
        self.packages = tuple(packages)
        self.order = None if order is None else tuple(order)
        self.unknown = unknown
        self.base = base
        self.entry_point_group = entry_points
        self.check = check
        self.max_name = max_name
        self.classes: dict[str, T] = {}
        self.loaded: dict[str, T] = {}
        self.broken: dict[str, str] = {}
        self._entry_points: set[str] = set()
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
        """Import the packages' modules once (re-entrant: a module being imported may look up names),
        then register the entry points' classes."""
        if self._loaded:
            return
        self._loaded = True
        for package in self.packages:
            pkg = importlib.import_module(package)
            for info in pkgutil.iter_modules(pkg.__path__):
                if not info.name.startswith("_"):
                    importlib.import_module(f"{package}.{info.name}")
        if self.entry_point_group and self.base is not None:
            for ep in importlib.metadata.entry_points(group=self.entry_point_group):
                self._load_entry_point(ep.name, ep.value)

    def _load_entry_point(self, name: str, value: str) -> None:
        label = f"{self.what} {name!r} (entry point {self.entry_point_group}: {value})"
        if name in self.classes or is_class_spec(name):
            self.broken[name] = f"{label}: the name is taken (a built-in or another entry point)" if name in self.classes \
                else f"{label}: an entry point name cannot contain ':'"
            return
        try:
            self.classes[name] = self._load_user_class(value, label, name)
            self._entry_points.add(name)
        except ParamError as exc:
            self.broken[name] = str(exc)

    def _load_user_class(self, spec: str, label: str, name: str | None = None) -> T:
        assert self.base is not None
        name = spec if name is None else name
        if self.max_name is not None and len(name) > self.max_name:
            raise self.unknown(f"{self.what} {name[:40]!r}...: a name is at most {self.max_name} characters "
                               "(runs store it); use a shorter module path or entry point name")
        cls = load_class(spec, self.base, label=label, error=self.unknown)
        if self.check is not None:
            self.check(cls, label)
        return cls  # type: ignore[return-value]

    def is_user(self, name: str) -> bool:
        """Whether ``name`` is a user's class (an entry point's or a spec's), not one of the packages'."""
        return name in self._entry_points or name in self.loaded

    def names(self) -> list[str]:
        """Registered names, in the declared order (else alphabetical), then the entry points' names
        (alphabetical); user classes loaded from specs are not listed."""
        self.load()
        if self.order is None:
            return sorted(self.classes)
        extra = sorted(n for n in self.classes if n not in self.order)
        return [n for n in self.order if n in self.classes] + extra

    def get(self, name: str) -> T:
        """The class registered as ``name``, or (with a ``base``) loaded from the spec ``name``
        (``package.module:Class``, once per process); :attr:`unknown` (one line, with a suggestion
        for a mistyped name) otherwise."""
        self.load()
        name = str(name)
        cls = self.classes.get(name) or self.loaded.get(name)
        if cls is None and name in self.broken:
            raise self.unknown(self.broken[name])
        if cls is None and self.base is not None and is_class_spec(name):
            cls = self.loaded[name] = self._load_user_class(name, f"{self.what} {name[:120]!r}")
        if cls is None:
            known = self.names()
            close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.4)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise self.unknown(f"unknown {self.what} {str(name)!r}{hint}; known: {', '.join(known)}")
        return cls
