"""Operators by name: the built-ins (:data:`skewlab.engine.operators.builtin.BUILTINS`) and a user's
``package.module:Class``, resolved and checked once at start-up (:func:`load_operator`)."""

from __future__ import annotations

import pickle

from skewlab.engine.config.class_registry import load_class
from skewlab.engine.config.params import ParamError
from skewlab.engine.operators.base import (ENGINE_COLUMNS, PARTIAL_STATES_COLUMN, KeyedOperator, MergeableOperator,
                                          capability_refusal)
from skewlab.engine.operators.builtin import BUILTINS

__all__ = ["OperatorError", "is_mergeable", "load_operator", "operator_class"]


class OperatorError(ParamError):
    """``--operator`` names no usable operator (one line, exit status 2)."""


def is_mergeable(spec: str, declared: bool | None = None) -> bool:
    """Whether the operator ``spec`` may run under a split-key grouping: ``declared`` (the flag a run
    stored in its configuration, ``operator_mergeable``) when known — the dashboard and ``skewlab
    control`` read it there, as the operator's module need not be importable in their process — else
    the class's own declaration (:attr:`KeyedOperator.mergeable`) of the built-in or the user's
    ``package.module:Class``; a user operator that cannot be imported here counts as not mergeable."""
    if declared is not None:
        return bool(declared)
    try:
        return bool(operator_class(spec).mergeable)
    except OperatorError:
        return False


def operator_class(spec: str) -> type[KeyedOperator]:
    """The class ``spec`` names: a built-in (``count``, ``sum``, ...) or ``package.module:Class``, a
    concrete, named subclass of :class:`~skewlab.engine.operators.base.KeyedOperator` (imported, not
    instantiated); :class:`OperatorError` (one line) otherwise."""
    spec = str(spec).strip()
    if spec in BUILTINS:
        return BUILTINS[spec]
    if ":" not in spec:
        raise OperatorError(f"--operator must be one of {'|'.join(BUILTINS)} or package.module:Class, got {spec[:80]!r}")
    cls = load_class(spec, KeyedOperator, label=f"--operator {spec[:80]!r}", error=OperatorError)
    attr = spec.partition(":")[2]
    if not cls.name:
        raise OperatorError(f"--operator {spec[:80]!r}: {attr} has no name (set the class attribute name)")
    taken = [str(c[0]) for c in (cls.combined or ()) if str(c[0]).lower() in ENGINE_COLUMNS]
    if taken:
        raise OperatorError(f"--operator {spec[:80]!r}: {attr} declares a combined column named {taken[0][:40]!r}, a "
                            f"name of the engine's routed rows ({', '.join(ENGINE_COLUMNS)}): rename the column")
    if cls.combined is not None and not (cls.mergeable and cls.combined == PARTIAL_STATES_COLUMN):
        # the default combiner (MergeableOperator.combine_partials) implements them for its own column only
        missing = [m for m in ("pre_aggregate", "partials_combined")
                   if getattr(cls, m) in (getattr(KeyedOperator, m), getattr(MergeableOperator, m))]
        if missing:
            raise OperatorError(f"--operator {spec[:80]!r}: {attr} declares combined rows but does not implement "
                                f"{', '.join(missing)}")
    return cls


def load_operator(spec: str) -> KeyedOperator:
    """The operator ``spec`` names (:func:`operator_class`), created without arguments and, as the
    engine ships it to its executors by pickling, picklable; its declared capabilities checked
    (:func:`~skewlab.engine.operators.base.capability_refusal`)."""
    spec = str(spec).strip()
    cls = operator_class(spec)
    if spec in BUILTINS:
        operator = cls()
    else:
        attr = spec.partition(":")[2]
        try:
            operator = cls()
            pickle.loads(pickle.dumps(operator))
        except Exception as exc:
            raise OperatorError(f"--operator {spec[:80]!r}: cannot create and pickle {attr}(): {type(exc).__name__}: {exc}"[:300]) from None
    refusal = capability_refusal(operator)
    if refusal:
        raise OperatorError(f"--operator {spec[:80]!r}: {cls.__name__} {refusal}"[:300])
    return operator
