"""Start of a run of ``skewlab engine``: restore it from its checkpoint or create it.

A checkpoint directory that holds an engine snapshot (:class:`EngineSnapshot`) is restored: the
driver's state after its last applied batch, its result sink and the metric intervals not yet in the
database; the run keeps its own grouping, workers, state partitions and sink whatever the command
line says (one line tells so), and its timeline gets a ``restart`` event.  A snapshot of another
stream (:func:`skewlab.engine.io.checkpoint.stream_mismatch`) or one this version cannot read is
refused with one line.  Otherwise the run is created: its grouping, controller and shadow what-if,
its result sink and its row in the database.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Callable

from skewlab.engine.algorithms import registry
from skewlab.engine.algorithms.keys import FingerprintVocabulary
from skewlab.engine.config.params import ParamError
from skewlab.engine.control.controller import Controller
from skewlab.engine.control.shadow import ShadowEvaluator, default_shadow_names
from skewlab.engine.io.checkpoint import STREAM_FIELDS, SnapshotStore, stream_mismatch
from skewlab.engine.io.metrics_sink import MetricsSink
from skewlab.engine.operators import KeyedOperator
from skewlab.engine.runtimes.spark.driver_step import DriverSnapshot
from skewlab.engine.runtimes.spark.engine_config import EngineConfig
from skewlab.engine.runtimes.spark.engine_snapshot import EngineSnapshot, SnapshotRefused
from skewlab.engine.runtimes.spark.result_sink import open_sink, restore_sink, sink_schema

__all__ = ["StartedRun", "start_run", "stream_of"]


@dataclass
class StartedRun:
    """What the engine runs with: the database, the driver's state, the operator's result sink and the
    metrics sink (holding the restored run's unwritten intervals)."""
    store: Any
    snapshot: DriverSnapshot
    results: Any
    sink: MetricsSink


def stream_of(cfg: EngineConfig, store: Any) -> dict[str, Any]:
    """The settings that identify a run's stream (:data:`skewlab.engine.io.checkpoint.STREAM_FIELDS`)."""
    out = {k: getattr(cfg, k) for k in STREAM_FIELDS if k != "db"}
    out["db"] = store.url
    return out


def start_run(cfg: EngineConfig, operator: KeyedOperator, snapshots: SnapshotStore, checkpoint: str,
              log: Callable[[str], None]) -> StartedRun:
    """Restore the run of ``checkpoint`` from its latest snapshot in ``snapshots``, or create one;
    :class:`ParamError` (one line) for a checkpoint that cannot be resumed or an unusable sink."""
    from skewlab.storage import connect

    store = connect(cfg.db)
    latest = snapshots.latest()
    try:
        if latest is None:
            snapshot, results = _create(cfg, operator, store, log)
            pending: tuple[Any, ...] = ()
        else:
            snapshot, results, pending = _restore(cfg, operator, store, snapshots, checkpoint, latest, log)
    except ParamError:
        store.close()
        raise
    if latest is not None:
        snapshot = _record_restart(store, snapshot, log)
    sink = MetricsSink(store, snapshot.run_id, log=log)
    for item in pending:
        sink.enqueue(item)
    sink.flush(force=True)
    return StartedRun(store, snapshot, results, sink)


def _restore(cfg: EngineConfig, operator: KeyedOperator, store: Any, snapshots: SnapshotStore, checkpoint: str,
             latest: tuple[int, bytes], log: Callable[[str], None]) -> tuple[DriverSnapshot, Any, tuple[Any, ...]]:
    """The driver's state, result sink and unwritten intervals of the checkpoint's run."""
    try:
        snap = EngineSnapshot.decode(latest[1], latest[0])
    except SnapshotRefused as exc:
        raise ParamError(f"checkpoint {checkpoint} {exc}; start a new run with --run-name NAME or "
                         "--checkpoint DIR") from None
    diff = stream_mismatch(snap.stream, stream_of(cfg, store))
    if diff:
        raise ParamError(
            f"checkpoint {checkpoint} belongs to run {snap.driver.run_id} on another stream "
            f"({'; '.join(diff)}): restart with that run's settings to resume it, or start a new run "
            "with --run-name NAME or --checkpoint DIR"
        )
    driver = snap.driver
    results = restore_sink(snap.sink, snap.sink_start, driver.partitions, schema=sink_schema(operator))
    run = driver.run_id
    if cfg.max_workers not in (None, driver.partitions) or (cfg.sink and cfg.sink_spec() != results.url):
        log(f"run {run} keeps its {driver.partitions} state partitions and its sink {results.url}: "
            "--max-workers/--sink only set up new runs")
    log(f"restored run {run} at batch {driver.last_batch} from {snapshots.dir}")
    g, n = driver.controller.planner, driver.controller.n_workers
    if (cfg.algorithm, cfg.workers) != (g.name, n) or any(g.p.get(k) != v for k, v in cfg.params.items()):
        log(f"run {run} continues with its own grouping ({g.name} on {n} workers); --algorithm/--workers/--param "
            "only set up new runs — change a running one with 'skewlab control'")
    return driver, results, tuple(snap.pending)


def _create(cfg: EngineConfig, operator: KeyedOperator, store: Any,
            log: Callable[[str], None]) -> tuple[DriverSnapshot, Any]:
    """A new run: its grouping, controller and shadows, its result sink, then its row in the database."""
    vocab = FingerprintVocabulary()
    grouping = registry.create(cfg.algorithm, cfg.workers, cfg.sources, cfg.seed, cfg.params)
    controller = Controller(grouping, vocab, window=cfg.window, cost_model=operator.cost_model)
    names = cfg.shadow if cfg.shadow is not None else default_shadow_names(
        grouping.name, operator.name, operator.mergeable)
    shadow = (  # the shadows join when their kernels are compiled (SparkEngine._kernels_ready, read by BatchDriver)
        ShadowEvaluator([], vocab, n_workers=cfg.workers, n_sources=cfg.sources, seed=cfg.seed,
                        window=cfg.window, cost_model=operator.cost_model,
                        max_tuples=cfg.shadow_max_tuples, waiting=names)
        if names else None
    )
    partitions = cfg.partitions()
    # before the run exists: an unusable sink is a start-up error
    results = open_sink(cfg.sink_spec(), partitions, schema=sink_schema(operator), log=log)
    config = {k: v for k, v in asdict(cfg).items() if k != "db"}
    config["max_workers"] = partitions  # the state partitions: set-workers' upper limit
    # the dashboard and `skewlab control` apply the split-key rule without importing the operator
    config["operator_mergeable"] = operator.mergeable
    config["cost_model"] = operator.cost_model  # the unit of the loads (the imbalance chart's bound)
    config["value_kind"] = cfg.value_kind(operator)  # what its tuples carry (the dashboard's label)
    run_id = store.create_run(
        grouping.name, grouping.p, seed=cfg.seed, n_workers=cfg.workers,
        workload=cfg.workload if cfg.source == "generator" else f"{cfg.source}",
        config=config, name=cfg.run_name,
    )
    return DriverSnapshot(run_id=run_id, controller=controller, shadow=shadow, partitions=partitions), results


def _record_restart(store: Any, snapshot: DriverSnapshot, log: Callable[[str], None]) -> DriverSnapshot:
    """Mark on the run's timeline that the engine restored it from its checkpoint (event ``restart``,
    at the interval it resumes with; drawn by the dashboard like the operator events).  With the
    database down it is carried with the next interval's record instead, as a paused run's commands
    are: the snapshot returned carries it."""
    event = {"kind": "restart", "detail": {"after_batch": snapshot.last_batch}, "command_id": None,
             "interval": snapshot.controller.interval}
    try:
        store.record_event(snapshot.run_id, event["kind"], event["detail"], interval=event["interval"])
    except Exception as exc:  # noqa: BLE001 - the database may be down; the event waits for the next interval
        log(f"cannot record the restart now ({type(exc).__name__}): it goes with the next interval")
        return replace(snapshot, carry_events=(*snapshot.carry_events, event))
    return snapshot
