"""Replay of a real, timestamped table in time order: the common part of the trace workloads
(``flights``, ``movielens``, ``pizza``, ``police-stops``).

A trace subclass loads its table once (time of every row, key of every row in a chosen column) and
hands both to :meth:`TimedTrace.set_trace`; this class then provides what every trace shares: the
replay order, the key ids, the interval boundaries (spans of trace time or counts of tuples) and
the batches.  Conventions as in :mod:`skewlab.engine.workloads.synthetic` (vocabulary built once in
the constructor, ``int64`` id arrays, every ``batches`` call replays from the start).
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterator

import numpy as np

from skewlab.engine.config.params import Param
from skewlab.engine.workloads import Workload
from skewlab.engine.workloads.synthetic import interval_sizes

__all__ = ["TimedTrace", "column_codes", "span_param"]


def column_codes(table: dict[Any, Any], column: str) -> tuple[np.ndarray, list[str], np.ndarray]:
    """``(present, names, inverse)`` of a trace table's key column (``""`` = no key): the rows with a key,
    the distinct keys and each present row's index in them; computed once per table and column (kept
    in the table under ``("codes", column)``)."""
    if ("codes", column) not in table:
        keys = table[column]
        present = keys != ""
        names, inverse = np.unique(keys[present], return_inverse=True)
        table["codes", column] = (present, names.tolist(), inverse)
    return table["codes", column]


def span_param(default: int, what: str) -> Param:
    """The ``span`` parameter of a trace: minutes of trace time per interval (0 = intervals of
    ``interval_messages`` tuples); ``what`` names the trace's rows in the help text."""
    return Param("span", "int", default, f"minutes of trace time per interval (60 = one hour, 1440 = one day); "
                 f"0 = intervals of interval_messages {what}", low=0, high=366 * 1440)


class TimedTrace(Workload):
    """A finite trace of keys with a time per key, replayed in time order (the seed is not used).

    * Order: by time, stably (rows with the same time keep the table's order).
    * Rows without a key in the chosen column are skipped and counted in :attr:`skipped`.
    * Intervals: ``span > 0`` — interval i holds the rows of the i-th span of ``span`` minutes of
      trace time (a grid from 1970-01-01 00:00 of the trace's clock, so a span that divides a day
      starts at midnight); spans without rows produce no interval, and ``interval_messages`` is
      ignored.  ``span = 0`` cuts the trace into intervals of ``interval_messages`` rows, as every
      other workload does.
    * ``messages`` caps the replay (the first ``messages`` rows).

    :attr:`times` holds each replayed row's time (seconds); :meth:`boundaries` the row index at which
    each interval starts.
    """

    finite: ClassVar[bool] = True

    def set_trace(self, times: np.ndarray, present: np.ndarray, names: list[str], inverse: np.ndarray) -> None:
        """Install the trace: ``times`` (seconds, already in replay order) of every row, ``present`` the
        rows with a key, ``names`` the distinct keys and ``inverse`` each present row's index in
        ``names`` (as :func:`numpy.unique` returns them)."""
        self.skipped = int(present.size - np.count_nonzero(present))
        self.times: np.ndarray = times[present]
        self.ids: np.ndarray = self.vocab.extend(names)[inverse]  # the trace's keys, in order

    @property
    def length(self) -> int:
        """Rows in one pass over the trace."""
        return int(self.ids.size)

    def boundaries(self, messages: int, interval_messages: int) -> np.ndarray:
        """Row indices ``b`` with interval i = rows ``b[i] .. b[i+1] − 1`` (``b[0] = 0``, ``b[-1]`` = rows
        replayed); :class:`ParamError` for a negative ``messages`` or ``interval_messages < 1``."""
        sizes = interval_sizes(messages, interval_messages)
        next(sizes, None)  # validates both arguments (one-line ParamError)
        total = min(int(messages), self.length)
        span = int(self.p["span"]) * 60
        if span == 0:
            cuts = np.arange(0, total, int(interval_messages), dtype=np.int64)
        else:
            bucket = self.times[:total] // span
            cuts = np.flatnonzero(np.diff(bucket)) + 1 if total else np.zeros(0, np.int64)
            cuts = np.concatenate([[0], cuts]) if total else cuts
        return np.append(cuts, total).astype(np.int64)

    def batches(self, messages: int, interval_messages: int) -> Iterator[np.ndarray]:
        b = self.boundaries(messages, interval_messages)
        for lo, hi in zip(b[:-1], b[1:]):
            yield self.ids[lo:hi].copy()
