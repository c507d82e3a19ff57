"""The keyed-operator interface: what a user's (or a built-in) keyed computation provides to the engine.

A worker of the engine receives, per micro-batch, the tuples of the keys routed to it.  The operator
turns them into per-key *partial states* — one per key and batch, computed from the whole batch at
once (:meth:`KeyedOperator.partials`: integer key codes + a value array, no Python call per tuple) —
and the engine keeps, per key, the partial states of the last ``window`` batches.  At batch ``b`` it
asks the operator for the key's result from the partials of the earlier batches still in the window
and the new one (:meth:`KeyedOperator.emit`).  Migration and checkpoints move a key's partials as bytes
(:meth:`KeyedOperator.dumps` / :meth:`KeyedOperator.loads`).

An operator whose result is a function of the *merge* of its partial states — whatever worker each
came from — is :class:`MergeableOperator`: it provides :meth:`MergeableOperator.combine` (associative
and commutative) and :meth:`MergeableOperator.finish`.  Only such an operator may run under a
split-key grouping (several workers hold shares of one key: nasir-icde15's PKG, D-Choices); the rule
is :func:`split_key_refusal`, declared here once and called by the CLI, command validation, the
shadows and the dashboard's form.

Optionally an operator *combines*: it declares :attr:`KeyedOperator.combined` (the columns of a
combined row) and implements :meth:`KeyedOperator.pre_aggregate` and
:meth:`KeyedOperator.partials_combined`.  The source task then ships one row per (key, worker) of its
partition — the tuples' count and the operator's pre-aggregate of their values — instead of a row
per tuple (the combiner of MapReduce, Dean & Ghemawat, OSDI 2004, Sec. 4.3), and the worker computes
its partial states from those rows; an operator that does not declare it gets a row per tuple.
"""

from __future__ import annotations

import pickle
from abc import ABC, abstractmethod
from functools import reduce
from typing import Any, ClassVar, Sequence

import numpy as np
import pyarrow as pa

__all__ = ["KeyedOperator", "MergeableOperator", "split_key_refusal"]


class KeyedOperator(ABC):
    """One keyed, windowed operator.  Subclass it, set the class attributes, implement the methods.

    Instances are created on the driver (validation, naming) and pickled to the executors with the
    query's function, so they must be picklable (plain attributes; the defining module importable on
    the executors — :func:`skewlab.engine.operators.registry.load_operator` checks it at start-up).
    """

    #: the name shown in the dashboard, the run's configuration and the sink's files
    name: ClassVar[str] = ""
    #: reads a value per tuple (``--value-field``); ``False``: only the keys (count)
    needs_value: ClassVar[bool] = True
    #: the Arrow type of the sink's ``result`` column
    result_type: ClassVar[pa.DataType] = pa.float64()
    #: further result columns (name, Arrow type) after ``result``, in the order :meth:`emit` returns them
    columns: ClassVar[tuple[tuple[str, pa.DataType], ...]] = ()
    #: how the controller weighs a key's tuples (``linear``: per tuple; ``join``: per pair probed),
    #: :class:`skewlab.engine.control.controller.Controller` cost models
    cost_model: ClassVar[str] = "linear"
    #: False here; :class:`MergeableOperator` sets it (read it, never set it by hand)
    mergeable: ClassVar[bool] = False
    #: the operator's columns (name, Arrow type) of a *combined row* — one row per (key, worker) of a
    #: source partition, pre-aggregated before the shuffle, beside the engine's ``key``, ``worker`` and
    #: ``tuples`` (how many tuples the row stands for) — in the order :meth:`pre_aggregate` returns
    #: them; ``None``: the operator does not combine, the source ships a row per tuple
    combined: ClassVar[tuple[tuple[str, pa.DataType], ...] | None] = None

    @abstractmethod
    def partials(self, codes: np.ndarray, n_keys: int, values: np.ndarray | None) -> list[Any]:
        """The partial state of each of ``n_keys`` keys from one worker's batch, vectorised.

        ``codes``: int64, tuple ``i`` belongs to key ``codes[i]`` (every code in ``[0, n_keys)``
        occurs); ``values``: the tuples' values (float64; int64 for :data:`join`), ``None`` when
        :attr:`needs_value` is false.  Returns a list of ``n_keys`` partial states."""

    @abstractmethod
    def concat(self, first: Any, then: Any) -> Any:
        """The partial state of one key's tuples ``first`` followed by ``then``, both of one batch on
        one worker (tuples held during a migration, released with the batch's own)."""

    @abstractmethod
    def emit(self, window: Sequence[Any], new: Any) -> tuple:
        """The key's result at a batch: ``window`` the partials of its earlier batches still in the
        window (oldest first), ``new`` the batch's.  Returns ``(result, *columns)``."""

    def pre_aggregate(self, codes: np.ndarray, n_groups: int, values: np.ndarray | None) -> list[np.ndarray]:
        """In the source task (operators that declare :attr:`combined`): the combined columns of
        ``n_groups`` groups of tuples, vectorised — tuple ``i`` is in group ``codes[i]`` (one group per
        (key, worker) of the partition), ``values`` as in :meth:`partials`.  Returns one array of
        ``n_groups`` entries per :attr:`combined` column."""
        raise NotImplementedError(f"operator {self.name} declares no combined rows")

    def partials_combined(self, codes: np.ndarray, n_keys: int, tuples: np.ndarray,
                          columns: Sequence[np.ndarray]) -> list[Any]:
        """On the worker (operators that declare :attr:`combined`): the partial state of each of
        ``n_keys`` keys from combined rows — row ``i`` belongs to key ``codes[i]`` (a key has one row
        per source partition that saw it), stands for ``tuples[i]`` tuples (int64) and carries
        ``columns[j][i]`` of :attr:`combined` column ``j``.  Must equal :meth:`partials` of the tuples
        the rows stand for."""
        raise NotImplementedError(f"operator {self.name} declares no combined rows")

    def dumps(self, partial: Any) -> bytes:
        """One partial state as bytes (migration, checkpoints)."""
        return pickle.dumps(partial, protocol=pickle.HIGHEST_PROTOCOL)

    def loads(self, data: bytes) -> Any:
        return pickle.loads(data)

    @classmethod
    def schema_fields(cls) -> list[pa.Field]:
        """The sink's columns of this operator: ``result`` and :attr:`columns`."""
        return [pa.field("result", cls.result_type)] + [pa.field(n, t) for n, t in cls.columns]


class MergeableOperator(KeyedOperator):
    """A keyed operator whose result is :meth:`finish` of the :meth:`combine` of its partial states:
    the window's batches, and the shares of a key split over several workers, merge alike."""

    mergeable: ClassVar[bool] = True

    @abstractmethod
    def combine(self, a: Any, b: Any) -> Any:
        """Merge two partial states of one key (associative and commutative)."""

    @abstractmethod
    def finish(self, state: Any) -> tuple:
        """The result ``(result, *columns)`` of a merged state."""

    def concat(self, first: Any, then: Any) -> Any:
        return self.combine(first, then)

    def merge(self, states: Sequence[Any]) -> Any:
        """The merge of several partial states of one key (at least one)."""
        return reduce(self.combine, states)

    def emit(self, window: Sequence[Any], new: Any) -> tuple:
        return self.finish(self.merge([*window, new]))


def split_key_refusal(operator: str, mergeable: bool, grouping: str, single_owner: bool) -> str | None:
    """Why ``grouping`` cannot serve the operator named ``operator``, or ``None`` if it can.

    The one rule: a split-key grouping (``single_owner`` false: a key's tuples go to several
    workers) needs a mergeable operator (:attr:`KeyedOperator.mergeable`), because each worker then
    sees only a share of the key and the key's result is the merge of the shares."""
    if single_owner or mergeable:
        return None
    return (f"{grouping} splits keys over workers, and operator {operator} cannot merge a key's "
            "partial states from several workers; use a key grouping or a rebalancer")
