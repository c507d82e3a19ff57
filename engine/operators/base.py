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
A :class:`MergeableOperator` may instead set :attr:`MergeableOperator.combine_partials` and get a
default combiner from its own :meth:`~KeyedOperator.partials` and :meth:`MergeableOperator.merge`
(one binary column of dumped partial states).

Capabilities: what the engine does for an operator follows from its declarations, never from its class
or name — a user's operator that declares a capability gets the same path as a built-in:

* :attr:`KeyedOperator.partial_is_tuple_count` — a key's partial state of a batch is the number of its
  tuples: the worker keeps the window as integer counts in its dense ring and no partial states
  (``count``'s fast path);
* :attr:`KeyedOperator.values_are_positions` — a tuple's value is its position in its source, not a
  field of the record (``join``: its pairs are told apart by position);
* :attr:`KeyedOperator.cost_model` — how the controller weighs a key's tuples;
* :attr:`KeyedOperator.share_type` — a partial state is one value of an Arrow type, and
  :meth:`MergeableOperator.merge_shares` merges a column of them: a split key's shares travel to the
  merge stage as one typed column and merge vectorised, with no pickle, ``combine`` or ``finish`` per key
  (issue 36, item 2: "a mergeable operator merges columns, not pickles").

:func:`capability_refusal` checks a declaration against the operator's own behaviour on a sample batch.
"""

from __future__ import annotations

import pickle
from abc import ABC, abstractmethod
from functools import reduce
from typing import Any, ClassVar, Sequence

import numpy as np
import pyarrow as pa

__all__ = ["ENGINE_COLUMNS", "KeyedOperator", "MergeableOperator", "PARTIAL_STATES_COLUMN", "capability_refusal",
           "split_key_refusal"]

#: the columns of a routed row the engine owns — ``key``, ``worker``, ``msg`` (a message row's bytes),
#: ``tuples`` (:data:`skewlab.engine.runtimes.spark.topology.ROUTED_SCHEMA`,
#: :func:`~skewlab.engine.runtimes.spark.topology.combined_schema`) and ``label``, the grouping column
#: the engine adds for the stateful stage: no :attr:`KeyedOperator.combined` column may take one of
#: these names, in any case (Spark resolves column names case-insensitively;
#: :func:`skewlab.engine.operators.registry.operator_class` refuses it)
ENGINE_COLUMNS: tuple[str, ...] = ("key", "worker", "msg", "tuples", "label")


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
    #: capability (a :class:`MergeableOperator`'s only): a partial state is one value of this Arrow type
    #: (``None``: not declared).  Then a worker of a split-key run sends its shares to the merge stage as
    #: one column of this type (the handler output's ``share`` column,
    #: :func:`skewlab.engine.runtimes.spark.operator.out_schema`), not one pickle per key, and the merge
    #: stage merges a batch's shares at once with :meth:`MergeableOperator.merge_shares`.  ``count``
    #: declares ``pa.int64()``.  Checked on a sample batch at start-up (:func:`capability_refusal`).
    share_type: ClassVar[pa.DataType | None] = None
    #: the operator's columns (name, Arrow type) of a *combined row* — one row per (key, worker) of a
    #: source partition, pre-aggregated before the shuffle, beside the engine's ``key``, ``worker``,
    #: ``msg`` and ``tuples`` (how many tuples the row stands for; no column may take one of the
    #: :data:`ENGINE_COLUMNS` names) — in the order :meth:`pre_aggregate` returns them; ``None``: the
    #: operator does not combine, the source ships a row per tuple
    combined: ClassVar[tuple[tuple[str, pa.DataType], ...] | None] = None
    #: capability: a key's partial state of a batch is the number of its tuples in the batch (an int:
    #: :meth:`partials` is ``np.bincount(codes, minlength=n_keys).tolist()``, :meth:`concat` — and a
    #: mergeable operator's ``combine`` — add).  The worker then keeps the window as integer counts in
    #: its dense ring, no partial states (nothing to pickle per key and batch, no ``partials`` call):
    #: a mergeable operator's result is ``finish`` of the window's count, summed vectorised over all
    #: keys; another's is :meth:`emit` of the key's non-zero counts of the window's batches.  Needs
    #: ``needs_value = False``.  Checked
    #: on a sample batch at start-up (:func:`capability_refusal`).  ``count`` declares it.
    partial_is_tuple_count: ClassVar[bool] = False
    #: capability: the value of each tuple is its position in its source (int64: the Kafka offset, the
    #: file's line, the generator's sequence number), not a field of the record — the routed tuples
    #: carry it (value kind ``seq``), and ``--value-field`` is refused.  Needs :attr:`needs_value`.
    #: ``join`` declares it (its pairs' join values are functions of the two positions).
    values_are_positions: ClassVar[bool] = False

    @abstractmethod
    def partials(self, codes: np.ndarray, n_keys: int, values: np.ndarray | None) -> list[Any]:
        """The partial state of each of ``n_keys`` keys from one worker's batch, vectorised.

        ``codes``: int64, tuple ``i`` belongs to key ``codes[i]`` (every code in ``[0, n_keys)``
        occurs); ``values``: the tuples' values (float64; int64 positions when :attr:`values_are_positions`), ``None`` when
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


#: the combined row's column of :attr:`MergeableOperator.combine_partials`: the group's partial state,
#: as the operator's :meth:`KeyedOperator.dumps`
PARTIAL_STATES_COLUMN: tuple[tuple[str, pa.DataType], ...] = (("partial", pa.binary()),)


class MergeableOperator(KeyedOperator):
    """A keyed operator whose result is :meth:`finish` of the :meth:`combine` of its partial states:
    the window's batches, and the shares of a key split over several workers, merge alike.

    Set :attr:`combine_partials` (and leave :attr:`~KeyedOperator.combined` unset) to combine in the
    source scan with no code of your own: the source task computes :meth:`~KeyedOperator.partials` of
    each (key, worker) group of its partition and ships it dumped in one binary column
    (:data:`PARTIAL_STATES_COLUMN`); the worker loads a key's rows and merges them (:meth:`merge`).  Sound for
    any mergeable operator: the merge of the partial states of a key's tuples split over source
    partitions is the partial state of all of them — the property a split-key grouping already relies
    on.  Opt-in, not the default: it trades a vectorised ``partials`` over a worker's tuples for a
    Python ``dumps`` per group in the source and a ``loads`` per row on the worker, which pays only when
    groups hold many tuples (docs/operators.md, "Combining in the source scan", has the measurement)."""

    mergeable: ClassVar[bool] = True
    #: combine in the source scan with the default combiner (dumped :meth:`partials` per (key, worker)
    #: group, merged on the worker by :meth:`merge`) when :attr:`~KeyedOperator.combined` is not declared
    combine_partials: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.combine_partials and cls.combined is None:
            cls.combined = PARTIAL_STATES_COLUMN
        elif not cls.combine_partials and "combined" not in vars(cls) and cls.combined == PARTIAL_STATES_COLUMN:
            cls.combined = None  # a subclass that turns the inherited default combiner off

    def pre_aggregate(self, codes: np.ndarray, n_groups: int, values: np.ndarray | None) -> list[np.ndarray]:
        """The default combiner (:attr:`combine_partials`): each group's partial state, dumped."""
        if self.combined != PARTIAL_STATES_COLUMN:
            return super().pre_aggregate(codes, n_groups, values)
        dumps = self.dumps
        return [np.array([dumps(p) for p in self.partials(codes, n_groups, values)] if n_groups else [], dtype=object)]

    def partials_combined(self, codes: np.ndarray, n_keys: int, tuples: np.ndarray,
                          columns: Sequence[np.ndarray]) -> list[Any]:
        """The default combiner (:attr:`combine_partials`): the :meth:`merge` of each key's loaded rows."""
        if self.combined != PARTIAL_STATES_COLUMN:
            return super().partials_combined(codes, n_keys, tuples, columns)
        loads = self.loads
        groups: list[list[Any]] = [[] for _ in range(n_keys)]
        for c, data in zip(np.asarray(codes).tolist(), columns[0]):
            groups[c].append(loads(data))
        return [g[0] if len(g) == 1 else self.merge(g) for g in groups]

    @abstractmethod
    def combine(self, a: Any, b: Any) -> Any:
        """Merge two partial states of one key (associative and commutative)."""

    @abstractmethod
    def finish(self, state: Any) -> tuple:
        """The result ``(result, *columns)`` of a merged state."""

    def merge_shares(self, groups: np.ndarray, n_groups: int, shares: pa.Array) -> list[np.ndarray]:
        """With :attr:`~KeyedOperator.share_type`: the result columns (``result``, then :attr:`~KeyedOperator.columns`)
        of ``n_groups`` keys, vectorised — each key's :meth:`finish` of the :meth:`combine` of its shares.
        Share ``i`` (``shares``, an array of :attr:`~KeyedOperator.share_type`) belongs to key ``groups[i]`` (int64,
        sorted; every key in ``[0, n_groups)`` has at least one share).  Returns one array of
        ``n_groups`` entries per result column."""
        raise NotImplementedError(f"operator {self.name} declares no share_type")

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


def capability_refusal(operator: KeyedOperator) -> str | None:
    """Why ``operator``'s declared capabilities do not hold, in one line, or ``None`` if they do.

    Cheap checks, at start-up (:func:`skewlab.engine.operators.registry.load_operator`):
    :attr:`KeyedOperator.partial_is_tuple_count` against :meth:`~KeyedOperator.partials` of a sample
    batch of 6 tuples of 3 keys (must be the counts ``[1, 2, 3]``), :meth:`~KeyedOperator.concat` and a
    mergeable operator's ``combine`` of two counts (must add), and no :attr:`KeyedOperator.needs_value`
    (the ring reads none); :attr:`KeyedOperator.values_are_positions` needs :attr:`KeyedOperator.needs_value`; ``combine_partials`` needs a :class:`MergeableOperator`;
    :attr:`KeyedOperator.share_type` against :meth:`~MergeableOperator.merge_shares` of a sample
    (:func:`_share_type_refusal`).
    A probe cannot prove a declaration right; it catches the declaration that is plainly wrong."""
    cls = type(operator)
    if cls.values_are_positions and not cls.needs_value:
        return "declares values_are_positions but needs_value = False (it reads no value to position)"
    if getattr(cls, "combine_partials", False) and not cls.mergeable:
        return "declares combine_partials but is not a MergeableOperator (the default combiner merges partial states)"
    if cls.share_type is not None:
        refusal = _share_type_refusal(operator)
        if refusal is not None:
            return refusal
    if not cls.partial_is_tuple_count:
        return None
    if cls.needs_value:
        return "declares partial_is_tuple_count but needs_value = True (the ring of tuple counts reads no value)"
    codes = np.array([0, 1, 1, 2, 2, 2], dtype=np.int64)
    try:
        got = list(operator.partials(codes, 3, None))
        added = [operator.concat(2, 3)] + ([operator.combine(2, 3)] if cls.mergeable else [])  # type: ignore[attr-defined]
    except Exception as exc:  # the user's code on a sample batch: any failure refuses the declaration
        return f"declares partial_is_tuple_count, but its methods fail on tuple counts: {type(exc).__name__}: {exc}"[:300]
    if not (len(got) == 3 and all(_is_int(p) and p == n for p, n in zip(got, (1, 2, 3)))):
        return (f"declares partial_is_tuple_count, but partials of 6 tuples of keys [0, 1, 1, 2, 2, 2] are "
                f"{got!r:.80}, not the tuple counts [1, 2, 3]")
    if not all(_is_int(a) and a == 5 for a in added):
        return (f"declares partial_is_tuple_count, but {'concat/combine' if cls.mergeable else 'concat'}(2, 3) "
                f"gives {added!r:.60}, not 5: a key's counts must add")
    return None


def _share_type_refusal(operator: Any) -> str | None:
    """Why a declared :attr:`KeyedOperator.share_type` does not hold, or ``None``: the shares of
    3 keys from two workers (the :meth:`~KeyedOperator.partials` of the same 6 tuples, values 1..6 and
    their doubles) as one column of the type, merged by :meth:`~MergeableOperator.merge_shares`, must
    give each key's ``finish`` of ``combine`` of its two shares."""
    cls = type(operator)
    if not cls.mergeable:
        return "declares share_type but is not a MergeableOperator (its shares are merged)"
    codes = np.array([0, 1, 1, 2, 2, 2], dtype=np.int64)
    values = np.arange(1, 7, dtype=np.int64 if cls.values_are_positions else np.float64)
    try:
        a = list(operator.partials(codes, 3, values if cls.needs_value else None))
        b = list(operator.partials(codes, 3, 2 * values if cls.needs_value else None))
        want = [tuple(operator.finish(operator.combine(x, y))) for x, y in zip(a, b)]
        column = pa.array(a + b, type=cls.share_type)
        got_cols = operator.merge_shares(np.array([0, 0, 1, 1, 2, 2], np.int64), 3, column.take([0, 3, 1, 4, 2, 5]))
        got = [tuple(r) for r in zip(*(pa.array(c).to_pylist() for c in got_cols))]
    except Exception as exc:  # the user's code on a sample batch: any failure refuses the declaration
        return f"declares share_type {cls.share_type}, but its shares fail on a sample batch: {type(exc).__name__}: {exc}"[:300]
    same = len(got) == 3 and all(len(g) == len(w) and all(_same_value(x, y) for x, y in zip(g, w))
                                 for g, w in zip(got, want))
    if not same:
        return (f"declares share_type {cls.share_type}, but merge_shares of two workers' shares of 3 keys gives "
                f"{got!r:.80}, not finish(combine(a, b)) {want!r:.80}")
    return None


def _same_value(x: Any, y: Any) -> bool:
    """Two result values alike: equal, or floats within 1e-9 relative."""
    if isinstance(x, float) or isinstance(y, float):
        try:
            return bool(np.isclose(float(x), float(y), rtol=1e-9, atol=0.0))
        except (TypeError, ValueError):
            return False
    return bool(x == y)


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)
