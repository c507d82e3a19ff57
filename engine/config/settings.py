"""Run settings (workers, sources, window, interval, ...) declared once, validated everywhere from here.

Like an algorithm's parameters (:class:`~skewlab.engine.config.params.Param`), every setting of a run is declared
once with its type, default, help and range.  The CLI (``simulate``, ``engine``: defaults, help and
checks), the engine's configuration and operator commands (:mod:`skewlab.engine.control.commands`), the dashboard's
worker box (:mod:`skewlab.dashboard.controls`) and the Spark sources' options (:mod:`skewlab.engine.runtimes.spark.sources`)
all validate with :func:`check`, so a bad value gets the same one-line message wherever it is
entered, e.g. ``parameter workers: 5000 is out of range [1, 1024]``.

Limits:

* **workers ≤ 1024** (:data:`MAX_WORKERS`): the Spark engine keeps one state partition per possible
  worker, fixed for a checkpoint's life (``--max-workers``, at most this); the simulator uses the
  same limit so that every simulated configuration can also run on the engine.
* **sources ≤ 4096** (:data:`MAX_SOURCES`): source instances are Spark input partitions of every
  micro-batch; the same bound holds for the simulator's upstream sources.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from skewlab.engine.config.params import Param

__all__ = [
    "DEFAULT_ALGORITHM", "DEFAULT_REBALANCER", "DEFAULT_SPLIT_KEY", "default_algorithm",
    "INTERVAL", "INTERVAL_MESSAGES", "MAX_PER_BATCH", "MAX_SOURCES", "MAX_WORKERS", "MAX_WORKERS_SETTING",
    "MESSAGES", "RATE", "SEED", "SETTINGS", "SOURCES", "WINDOW", "WORKERS", "check", "flag_help",
]

#: The product's default groupings, chosen by measurement on the synthetic streams and the real traces
#: (docs/results/traces.md, "Real trace"; docs/results/gate.md, "Recency and the migration gate"): W-Choices, the lowest per-interval
#: imbalance after shuffle on every trace, where the operator can merge a key's partial states (a
#: split-key grouping puts a hot key on several workers); Mixed, a rebalancer with one owner per key,
#: where it cannot (and for ``plan``, which needs a rebalancer).
DEFAULT_SPLIT_KEY = "wchoices"
DEFAULT_REBALANCER = "mixed"
#: ``simulate`` and the engine's default operator (``count``) are mergeable
DEFAULT_ALGORITHM = DEFAULT_SPLIT_KEY


def default_algorithm(mergeable: bool) -> str:
    """The default grouping for an operator that can (``mergeable``) or cannot merge a key's partial
    states (:func:`skewlab.engine.operators.split_key_refusal`)."""
    return DEFAULT_SPLIT_KEY if mergeable else DEFAULT_REBALANCER

#: Most workers a run can have: the engine's state partitions (see the module docstring).
MAX_WORKERS = 1024
#: Most upstream source instances (Spark input partitions of a micro-batch).
MAX_SOURCES = 4096

WORKERS = Param("workers", "int", 8, "number of workers n", low=1, high=MAX_WORKERS)
MAX_WORKERS_SETTING = Param(
    "max_workers", "int", None,
    "most workers the run can grow to: Spark state partitions, fixed for the checkpoint's life",
    low=1, high=MAX_WORKERS,
)
SOURCES = Param("sources", "int", 2, "number of upstream source instances S", low=1, high=MAX_SOURCES)
WINDOW = Param("window", "int", 10, "state window w in intervals", low=1)
INTERVAL = Param("interval", "float", 2.0, "seconds per micro-batch / interval", low=0, low_open=True)
INTERVAL_MESSAGES = Param("interval_messages", "int", 100_000, "messages per interval", low=1)
MESSAGES = Param("messages", "int", None, "messages to simulate", low=0)
SEED = Param("seed", "int", 0, "random seed")
RATE = Param("rate", "float", 50_000.0, "target tuples/s for generator/file", low=0)
MAX_PER_BATCH = Param("max_per_batch", "int", 2_000_000, "cap on tuples per micro-batch", low=1)

#: Every run setting by name.
SETTINGS: dict[str, Param] = {
    p.name: p for p in (WORKERS, MAX_WORKERS_SETTING, SOURCES, WINDOW, INTERVAL, INTERVAL_MESSAGES, MESSAGES,
                        SEED, RATE, MAX_PER_BATCH)
}


def check(setting: Param | str, value: Any, *, high: float | None = None) -> Any:
    """``value`` parsed and range-checked by the declaration of ``setting`` (a :class:`Param` or its
    name in :data:`SETTINGS`); ``high`` lowers the upper bound for one run (a run's ``--max-workers``).

    Raises :class:`~skewlab.engine.config.params.ParamError` with the declaration's one-line message.
    """
    param = SETTINGS[setting] if isinstance(setting, str) else setting
    if high is not None:
        param = replace(param, high=high)
    return param.coerce(value)


def flag_help(setting: Param, note: str = "") -> str:
    """CLI help of ``setting``: its text, default (and ``note``) and range, e.g.
    ``number of workers n (default 8), in [1, 1024]``."""
    shown = [] if setting.default is None else [f"default {setting.default:g}" if isinstance(setting.default, float)
                                                 else f"default {setting.default}"]
    inner = "; ".join(shown + ([note] if note else []))
    rng = "" if setting.low is None and setting.high is None else f", in {setting.range_text()}"
    return f"{setting.help}{f' ({inner})' if inner else ''}{rng}"
