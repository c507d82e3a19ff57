"""Keyed operators: the interface a keyed computation implements to run on the engine
(:mod:`~skewlab.engine.operators.base`), the built-ins on it (:mod:`~skewlab.engine.operators.builtin`)
and their lookup by name or ``package.module:Class`` (:mod:`~skewlab.engine.operators.registry`).
See docs/operators.md."""

from skewlab.engine.operators.base import KeyedOperator, MergeableOperator, capability_refusal, split_key_refusal
from skewlab.engine.operators.builtin import BUILTINS
from skewlab.engine.operators.registry import OperatorError, is_mergeable, load_operator

__all__ = ["BUILTINS", "KeyedOperator", "MergeableOperator", "OperatorError", "capability_refusal", "is_mergeable",
           "load_operator", "split_key_refusal"]
