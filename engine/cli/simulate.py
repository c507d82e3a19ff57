"""``skewlab simulate`` as a function: workload → local runtime → JSON-ready result.

Used by the CLI, the benchmarks and the tests, so all three run exactly the same code.  Given a
store (``--db``), the run is also saved there, one :class:`~skewlab.storage.records.IntervalRecord` per
interval, so the dashboard can show it like an engine run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from skewlab.engine.algorithms import registry
from skewlab.engine.control.commands import CommandError, ScheduledCommand, validate_command
from skewlab.engine.control.controller import COST_MODELS
from skewlab.engine.config.params import ParamError
from skewlab.engine.runtimes.local import LocalRuntime
from skewlab.engine.config.settings import DEFAULT_ALGORITHM, INTERVAL_MESSAGES, MAX_WORKERS, MESSAGES, SOURCES, WINDOW, WORKERS, check
from skewlab.engine.workloads import create_workload, workload_class

__all__ = ["DEFAULT_MESSAGES", "SimulationConfig", "parse_change", "run_simulation", "stream_messages"]

#: messages simulated from a generator workload when ``messages`` is not given
DEFAULT_MESSAGES = 1_000_000


@dataclass
class SimulationConfig:
    """One simulation.  ``messages=None``: one pass over a finite workload (a file), otherwise
    :data:`DEFAULT_MESSAGES`; a number caps a file's stream (or loops it with ``loop=true``)."""

    algorithm: str = DEFAULT_ALGORITHM
    workers: int = WORKERS.default
    sources: int = SOURCES.default
    workload: str = "zipf"
    workload_params: dict[str, Any] = field(default_factory=dict)
    messages: int | None = None
    interval_messages: int = INTERVAL_MESSAGES.default
    seed: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    window: int = WINDOW.default
    cost_model: str = "linear"
    changes: Sequence[ScheduledCommand] = ()

    def validate(self) -> None:
        """Raise :class:`ParamError` (one line) for any invalid setting (ranges from :mod:`skewlab.engine.config.settings`)."""
        check(WORKERS, self.workers)
        check(SOURCES, self.sources)
        if self.messages is not None:
            check(MESSAGES, self.messages)
        check(INTERVAL_MESSAGES, self.interval_messages)
        check(WINDOW, self.window)
        if self.cost_model not in COST_MODELS:
            raise ParamError(f"--cost-model must be one of {'|'.join(COST_MODELS)}, got {self.cost_model!r}")
        params = registry.validate_params(self.algorithm, self.params)
        algorithm = self.algorithm
        for ch in sorted(self.changes, key=lambda c: c.at):  # in the order the runtime applies them
            if ch.kind in ("pause", "resume"):
                raise ParamError(f"--change {ch.at}:{ch.kind}: a simulation has no pause/resume")
            try:
                kind, payload = validate_command(ch.kind, ch.payload, current_algorithm=algorithm,
                                                 current_params=params, max_workers=MAX_WORKERS)
            except CommandError as exc:
                raise ParamError(f"--change at interval {ch.at}: {exc}") from None
            if kind == "set-algorithm":
                algorithm, params = payload["algorithm"], payload["params"]
            elif kind == "set-param":
                params = payload["params"]


#: ``--change INTERVAL:WHAT=VALUE``: WHAT → (command kind, payload field)
_CHANGE_COMMANDS = {"workers": ("set-workers", "workers"), "algorithm": ("set-algorithm", "algorithm")}


def parse_change(text: str) -> ScheduledCommand:
    """``INTERVAL:workers=N`` or ``INTERVAL:algorithm=NAME`` → a ``set-workers`` / ``set-algorithm``
    :class:`~skewlab.engine.control.commands.ScheduledCommand`, validated with
    :func:`~skewlab.engine.control.commands.validate_command` (one-line :class:`ParamError`)."""
    at, sep, rest = str(text).partition(":")
    what, eq, value = rest.partition("=")
    try:
        interval = int(at)
    except ValueError:
        interval = -1
    if not sep or not eq or interval < 0 or what not in _CHANGE_COMMANDS:
        raise ParamError(f"--change expects INTERVAL:workers=N or INTERVAL:algorithm=NAME, got {text!r}")
    kind, name = _CHANGE_COMMANDS[what]
    if what == "workers":
        try:
            value = int(value)
        except ValueError:
            raise ParamError(f"--change {text!r}: workers must be an integer") from None
    try:  # set-workers and set-algorithm do not depend on the algorithm in effect
        kind, payload = validate_command(kind, {name: value}, current_algorithm="", current_params={},
                                         max_workers=MAX_WORKERS)
    except CommandError as exc:
        raise ParamError(f"--change {text!r}: {exc}") from None
    return ScheduledCommand(interval, kind, payload)


def stream_messages(messages: int | None, workload: Any) -> int:
    """Messages to simulate: ``messages`` if given, else the workload's length (one pass over a
    file), else :data:`DEFAULT_MESSAGES`."""
    if messages is not None:
        return int(messages)
    length = workload.length
    return DEFAULT_MESSAGES if length is None else int(length)


def run_simulation(
    cfg: SimulationConfig,
    progress: Callable[[int, int, int], None] | None = None,
    *,
    store: Any = None,
    run_name: str = "",
) -> dict[str, Any]:
    """Run one simulation and return the result dict (the CLI's ``--json`` contract).

    ``progress(interval, messages_done, messages_total)`` is called after every interval.  With
    ``store`` (a :class:`skewlab.storage.store.Store`) the run is saved: a new run (named ``run_name``) with
    one record per interval, finished (or failed) at the end; the result then has ``run_id``.
    The result's ``dead_letters`` counts the input records dropped without a key, by reason (a key
    file's malformed rows, :meth:`skewlab.engine.workloads.key_file.KeyRecords.dead_letters`); the stored
    run carries them with its first interval, as the engine stores its dead letters.
    """
    cfg.validate()
    wparams = dict(cfg.workload_params)
    wcls_params = {p.name for p in workload_class(cfg.workload).params}
    if "instances" in wcls_params and "instances" not in wparams:
        # Fang's fluctuation f is defined on the loads of the n task instances (Sec. V).
        wparams["instances"] = cfg.workers
    workload = create_workload(cfg.workload, cfg.seed, wparams)
    dead: dict[str, tuple[int, list[str]]] = dict(getattr(workload, "dead_letters", {}))
    grouping = registry.create(cfg.algorithm, cfg.workers, cfg.sources, cfg.seed, cfg.params)
    runtime = LocalRuntime(grouping, workload.vocab, window=cfg.window, cost_model=cfg.cost_model)
    total = stream_messages(cfg.messages, workload)
    tick = None if progress is None else (lambda i, done: progress(i, done, total))
    run_id = None
    record = None
    if store is not None:
        run_id = store.create_run(grouping.name, dict(grouping.p), seed=cfg.seed, n_workers=cfg.workers,
                                  workload=cfg.workload, config=_run_config(cfg), name=run_name)
        record = _recorder(store, run_id, dead)
    try:
        out = runtime.run(workload.batches(total, cfg.interval_messages), cfg.changes, tick, record)
    except BaseException as exc:
        if run_id is not None:
            store.finish_run(run_id, "failed", note=f"{type(exc).__name__}: {exc}"[:500])
        raise
    if run_id is not None:
        store.finish_run(run_id)
    result: dict[str, Any] = {
        "algorithm": cfg.algorithm,
        "final_algorithm": runtime.planner.name,
        "params": dict(grouping.p),
        "workers": cfg.workers,
        "final_workers": runtime.planner.n_workers,
        "sources": cfg.sources,
        "seed": cfg.seed,
        "workload": workload.describe(),
        "window": cfg.window,
        "cost_model": cfg.cost_model,
        "distinct_keys": len(workload.vocab),
        "theta_max_observed": out.pop("theta_max_observed"),
        "dead_letters": {reason: count for reason, (count, _) in dead.items()},
    }
    out.pop("algorithm", None)
    out.pop("workers", None)
    result.update(out)
    if run_id is not None:
        result["run_id"] = run_id
    return result


def _recorder(store: Any, run_id: int, dead: dict[str, tuple[int, list[str]]]) -> Callable[[Any], None]:
    """Store each interval's record; the first one also carries the input's dead letters."""
    from skewlab.storage.records import DeadLetterRow

    pending = [DeadLetterRow(reason, count, samples) for reason, (count, samples) in dead.items()]

    def record(rec: Any) -> None:
        if pending:
            rec.dead_letters.extend(pending)
            pending.clear()
        store.record_interval(run_id, rec)

    return record


def _run_config(cfg: SimulationConfig) -> dict[str, Any]:
    """The run's config snapshot: the simulation's settings (the changes as text)."""
    return {
        "runtime": "local", "workload": cfg.workload, "workload_params": dict(cfg.workload_params),
        "messages": cfg.messages, "interval_messages": cfg.interval_messages, "sources": cfg.sources,
        "window": cfg.window, "cost_model": cfg.cost_model,
        "changes": [{"at": ch.at, "kind": ch.kind, "payload": ch.payload} for ch in cfg.changes],
    }

