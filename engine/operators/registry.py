"""Operators by name: the built-ins (:data:`skewlab.engine.operators.builtin.BUILTINS`) and a user's
``package.module:Class``, resolved and checked once at start-up (:func:`load_operator`)."""

from __future__ import annotations

import pickle

from skewlab.engine.config.class_registry import load_class
from skewlab.engine.config.params import ParamError
from skewlab.engine.operators.base import KeyedOperator
from skewlab.engine.operators.builtin import BUILTINS

__all__ = ["OperatorError", "is_mergeable", "load_operator"]


class OperatorError(ParamError):
    """``--operator`` names no usable operator (one line, exit status 2)."""


def is_mergeable(spec: str, declared: bool | None = None) -> bool:
    """Whether the operator ``spec`` may run under a split-key grouping, where its module need not be
    importable (the dashboard, ``skewlab control``): ``declared`` (the flag a run stored in its
    configuration, ``operator_mergeable``) when known, else the built-in's declaration; an unknown
    user operator counts as not mergeable."""
    if declared is not None:
        return bool(declared)
    cls = BUILTINS.get(str(spec))
    return bool(cls and cls.mergeable)


def load_operator(spec: str) -> KeyedOperator:
    """The operator ``spec`` names: a built-in (``count``, ``sum``, ...) or ``package.module:Class``,
    a subclass of :class:`~skewlab.engine.operators.base.KeyedOperator` constructible without
    arguments, importable here and (the engine ships it to its executors by pickling) picklable."""
    spec = str(spec).strip()
    if spec in BUILTINS:
        return BUILTINS[spec]()
    if ":" not in spec:
        raise OperatorError(f"--operator must be one of {'|'.join(BUILTINS)} or package.module:Class, got {spec[:80]!r}")
    cls = load_class(spec, KeyedOperator, label=f"--operator {spec[:80]!r}", error=OperatorError)
    attr = spec.partition(":")[2]
    if not cls.name:
        raise OperatorError(f"--operator {spec[:80]!r}: {attr} has no name (set the class attribute name)")
    if cls.combined is not None:
        missing = [m for m in ("pre_aggregate", "partials_combined") if getattr(cls, m) is getattr(KeyedOperator, m)]
        if missing:
            raise OperatorError(f"--operator {spec[:80]!r}: {attr} declares combined rows but does not implement "
                                f"{', '.join(missing)}")
    try:
        operator = cls()
        pickle.loads(pickle.dumps(operator))
    except Exception as exc:
        raise OperatorError(f"--operator {spec[:80]!r}: cannot create and pickle {attr}(): {type(exc).__name__}: {exc}"[:300]) from None
    return operator
