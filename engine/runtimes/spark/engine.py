"""``skewlab engine``: a PySpark Structured Streaming query with a swappable grouping and keyed
state on the executors.

The query (:meth:`SparkEngine._start_query`): the source routes each input partition with the
routing snapshot published for the batch (:mod:`skewlab.engine.runtimes.spark.sources`, :mod:`skewlab.engine.runtimes.spark.topology`)
→ ``groupBy(worker label).applyInPandasWithState``: every worker is one task and one state partition,
its sliding-window keyed state is in Spark's RocksDB state store, checkpointed and restored by Spark
with the offsets, and it writes its results to the sink — Parquet files or a Kafka topic
(:mod:`skewlab.engine.runtimes.spark.operator`, :mod:`skewlab.engine.runtimes.spark.result_sink`) →
``foreachBatch`` on the driver.  The number of state partitions is ``--max-workers``, fixed for the
checkpoint's life.

Per micro-batch ``b`` the driver (``foreachBatch``), which keeps statistics, not state:

1. runs the batch's operator and collects only statistics: per-(worker, key fingerprint) tuple counts
   (:class:`~skewlab.engine.algorithms.keys.FingerprintVocabulary`), each worker's summary (keys and bytes of state, held
   tuples), the task times from Spark's task metrics, references to the state blobs workers
   exported and the sources' side rows; a batch the restored snapshot already applied is re-run (the
   state must advance with Spark's batch; its exports and result files are identical) and nothing
   is applied (exactly-once, see :mod:`skewlab.engine.io.checkpoint`);
2. the :class:`~skewlab.engine.control.controller.Controller` closes the interval from those statistics: metrics,
   rebalancing plans, and the move orders of the migration path;
3. shadow what-if of the other groupings (:mod:`skewlab.engine.control.shadow`), hot keys;
4. pending operator commands (validated, :mod:`skewlab.engine.control.commands`) are applied: they take effect from
   batch ``b + 1`` (recorded as its ``applied_batch``), whose routing snapshot is published next, and
   their events are numbered with its interval;
5. publishes batch ``b + 1``'s routing snapshot: the grouping's router, every worker's orders (keys to export
   and to whom, keys to expect) and references to the blobs the workers wrote in ``b`` for their new
   workers to import (:mod:`skewlab.engine.runtimes.spark.state_transfer`: the state's bytes go from
   task to task through the checkpoint's filesystem, never through the driver);
6. snapshot to the checkpoint directory, then metrics to the database through the buffered sink
   (:mod:`skewlab.engine.io.metrics_sink`), then one status line.

Migration therefore spans three batches: planned at the end of ``t``; in ``t + 1`` the sources route
moved keys to their new workers, the old workers export the keys' windows and the new ones hold the
keys' tuples; in ``t + 2`` the new workers import the windows, apply the held tuples and emit their
results.  The migration row is recorded when the import completes, with the bytes that crossed and
the pause (batches, milliseconds).

Before a query starts the engine publishes the snapshot of the next batch; Spark's offset log names
the snapshot each batch was planned with, so a replay after a crash routes identically.

Pausing stops the streaming query after the current batch (offsets stay in Spark's checkpoint, no
record is lost) and polls for ``resume``; resuming restarts the query from the checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from skewlab.engine.algorithms import registry
from skewlab.engine.io.checkpoint import STREAM_FIELDS, SnapshotStore, stream_mismatch
from skewlab.engine.control.commands import apply_command
from skewlab.engine.control.controller import Controller, compose_orders
from skewlab.engine.io.interval_record import interval_record, rebalance_events, worker_rows
from skewlab.engine.algorithms.keys import FingerprintVocabulary
from skewlab.engine.runtimes.spark.driver_memory import limit_retained_memory, release_unused
from skewlab.engine.control.metrics import format_rate
from skewlab.engine.io.metrics_sink import MetricsSink, PendingInterval
from skewlab.engine.config.params import ParamError
from skewlab.engine.config import settings as run_settings
from skewlab.engine.config.settings import MAX_WORKERS, check
from skewlab.engine.control.shadow import ShadowEvaluator, default_shadow_names
from skewlab.engine.operators import KeyedOperator, is_mergeable, load_operator, split_key_refusal
from skewlab.engine.operators.builtin import Join
from skewlab.engine.runtimes.background_warmup import BackgroundWarmup
from skewlab.engine.runtimes.spark.cluster_settings import check_executors, is_local_master
from skewlab.engine.runtimes.spark.result_sink import open_sink, restore_sink, sink_schema
from skewlab.engine.runtimes.spark.state_transfer import ExportRef, prune
from skewlab.storage.records import IntervalRecord
from skewlab.shared import filesystems

__all__ = ["EngineConfig", "SparkEngine", "SOURCES"]

# py4j logs every exception our foreachBatch callback raises, with the whole traceback; the engine
# logs its own failures in one line and refuses batches on purpose while stopping.
logging.getLogger("py4j.clientserver").setLevel(logging.CRITICAL)


#: fault injection for the reliability tests: "migration:<batch>" kills the process with SIGKILL
#: right after the first rebalance that moves state at or after that batch, before its snapshot.
_FAULT = os.environ.get("SKEWLAB_FAULT_INJECT", "")


def _fault(phase: str, batch_id: int, *, exports: bool = False, imports: bool = False) -> None:
    """Fault injection for the exactly-once tests: ``SKEWLAB_FAULT_INJECT=<phase>:<batch>[:export|:import]``
    kills the process with SIGKILL at ``phase`` of the first batch ``>= batch`` (with ``:export``:
    the first such batch whose workers exported state; with ``:import``: whose workers import state).
    Phases, in order: ``begun`` (the batch's function started, its operator has not run: the previous
    batch is committed — with ``:import``, between a migration's export and its import), ``collected``
    (the operator ran and its state is committed, nothing applied), ``published`` (the next batch's
    routing snapshot, with its imports, is written; our snapshot is not), ``saved`` (our snapshot is
    written; Spark has not committed the batch)."""
    parts = _FAULT.split(":")
    if len(parts) < 2 or parts[0] != phase or batch_id < int(parts[1]):
        return
    if len(parts) > 2 and ((parts[2] == "export" and not exports) or (parts[2] == "import" and not imports)):
        return
    print(f"fault injection: SIGKILL at {phase} of batch {batch_id}", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


class EngineFailed(RuntimeError):
    """The streaming query died (a failed batch or source); the message is one line for the operator.
    Nothing is lost: the failed batch was not committed and is replayed by the next start."""


def _quiet_stream_errors(spark: Any) -> None:
    """Silence Spark's multi-page ERROR for a foreachBatch failure; the engine logs it in one line."""
    try:
        jvm = spark.sparkContext._jvm
        level = jvm.org.apache.logging.log4j.Level.OFF
        for name in ("org.apache.spark.sql.execution.streaming.MicroBatchExecution",
                     "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
                     "org.apache.spark.sql.execution.streaming.StreamExecution"):
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)
    except Exception:  # noqa: BLE001 - logging is cosmetic
        pass


_PY_ERROR = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:Error|Exception)): (.+)$")


def _first_line(exc: BaseException) -> str:
    """One line for the operator.  A Spark error that wraps a Python traceback (a failed source or
    batch function) gives the wrapped exception's own line (``ValueError: topic ... does not exist``),
    prefixed by Spark's error class, instead of "Traceback (most recent call last):"."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    lines = text.splitlines()
    first = lines[0]
    if "Traceback (most recent call last)" in text:
        inner = [m for m in map(_PY_ERROR.match, (x.strip() for x in lines[1:])) if m]
        if inner:
            head = first.split("Traceback (most recent call last)")[0].rstrip(": ")
            cls = re.findall(r"\[([A-Z_]+)\]", head)
            return f"{cls[-1] + ': ' if cls else ''}{inner[-1].group(1)}: {inner[-1].group(2)}"[:300]
    return first[:300]


def _await_trigger_end(query: Any, timeout: float = 30.0) -> None:
    """Wait until the query's running trigger has ended (Spark writes the batch's commit log entry
    after ``foreachBatch`` returns, inside the trigger), so a stop right after a batch does not leave
    that batch uncommitted and replayed on the next start.  A trigger that begins meanwhile runs
    ``process_batch``, which refuses while stopping and so ends it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if not query.isActive or not (query.status or {}).get("isTriggerActive"):
                return
        except Exception:  # noqa: BLE001 - a query failing meanwhile has ended its trigger
            return
        time.sleep(0.05)


#: --service-us above one second per tuple is a typo, not an experiment
MAX_SERVICE_US = 1e6
SOURCES = ("generator", "kafka", "file")


@dataclass
class EngineConfig:
    source: str = "generator"
    db: str | None = None
    #: "" = the default for the operator (:func:`skewlab.engine.config.settings.default_algorithm`)
    algorithm: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    workers: int = run_settings.WORKERS.default
    sources: int = run_settings.SOURCES.default
    interval: float = run_settings.INTERVAL.default
    rate: float = run_settings.RATE.default
    max_per_batch: int = run_settings.MAX_PER_BATCH.default
    checkpoint: str | None = None
    run_name: str = ""
    duration: float | None = None
    #: Spark master; None = the cluster's spark.master, else local[*] (:mod:`skewlab.engine.runtimes.spark.cluster_settings`)
    master: str | None = None
    #: Spark settings given explicitly (``--conf``); they win over the cluster's and skewlab's defaults
    spark_conf: dict[str, str] = field(default_factory=dict)
    window: int = run_settings.WINDOW.default
    operator: str = "count"
    workload: str = "zipf"
    workload_params: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    bootstrap: str = ""
    topic: str = ""
    path: str = ""
    #: the CSV column (file) or dotted JSON path into the record value (kafka) of each record's key;
    #: ``column`` is its older name (``--column``), kept as an alias
    key_field: str = ""
    column: str = ""
    #: the CSV column (file) or dotted JSON path (kafka) of each record's value, for operators that read
    #: one (:attr:`KeyedOperator.needs_value`); the generator draws seeded values itself
    value_field: str = ""
    shadow: list[str] | None = None
    shadow_max_tuples: int = 50_000
    top_k: int = 10
    max_batches: int | None = None
    max_workers: int | None = None
    sink: str | None = None
    #: emulated service time per tuple in µs (0 = none): see :func:`skewlab.engine.runtimes.spark.operator.make_handler`
    service_us: float = 0.0
    #: pre-aggregate in the source scan for an operator that combines (:attr:`KeyedOperator.combined`)
    combine: bool = True

    def __post_init__(self) -> None:
        if not self.algorithm:  # a user operator that is not importable here counts as not mergeable
            self.algorithm = run_settings.default_algorithm(is_mergeable(self.operator))

    def keyed_operator(self) -> KeyedOperator:
        """The operator ``operator`` names (:func:`skewlab.engine.operators.load_operator`; one-line
        :class:`ParamError` if it names none)."""
        return load_operator(self.operator)

    def key_field_name(self) -> str:
        """``--key-field``, else its alias ``--column`` (``""``: the record key, or the whole line)."""
        return (self.key_field or self.column or "").strip()

    def value_kind(self, operator: KeyedOperator | None = None) -> str:
        """What the routed tuples carry as value for ``operator`` (default: the configured one), one
        of :data:`skewlab.engine.runtimes.spark.topology.VALUE_KINDS`: ``seq`` for the join (its
        tuples' positions), ``field`` for an operator of values, ``none`` for one of keys only."""
        op = operator if operator is not None else self.keyed_operator()
        if not op.needs_value:
            return "none"
        return "seq" if isinstance(op, Join) else "field"

    def _validate_fields(self, operator: KeyedOperator) -> None:
        """The records' key and value fields against the source and the operator (issue 24, item 1)."""
        from skewlab.engine.workloads.record_fields import parse_path

        key_field, value_field = self.key_field_name(), (self.value_field or "").strip()
        if self.key_field and self.column and self.key_field.strip() != self.column.strip():
            raise ParamError(f"--column is an alias of --key-field: give one, not both ({self.column!r}, "
                             f"{self.key_field!r})")
        if self.source == "generator" and (key_field or value_field):
            raise ParamError("--key-field/--value-field name fields of the records of --source kafka|file; the "
                             "generator draws its own keys and seeded values")
        kind = self.value_kind(operator)
        if kind != "field" and value_field:
            raise ParamError(f"--value-field {value_field}: operator {operator.name} reads no value per tuple "
                             f"({'its tuples are joined by position' if kind == 'seq' else 'keys only'}); drop it "
                             "or use sum, mean, min, max, distinct")
        if kind == "field" and self.source != "generator" and not value_field:
            where = "a dotted JSON field of the record value" if self.source == "kafka" else "a CSV column"
            raise ParamError(f"--operator {self.operator}: {operator.name} reads a value per tuple; name it with "
                             f"--value-field ({where}, e.g. amount)")
        if self.source == "kafka":
            parse_path(key_field, "--key-field")
            parse_path(value_field, "--value-field")
        if self.source == "file" and value_field and not key_field:
            raise ParamError("--value-field with --source file needs --key-field too (the CSV column of the key)")

    def validate(self) -> None:
        """One-line :class:`ParamError` for every bad setting (before Spark starts)."""
        if self.source not in SOURCES:
            raise ParamError(f"--source must be one of {'|'.join(SOURCES)}, got {self.source!r}")
        operator = self.keyed_operator()
        for name in ("workers", "sources", "interval", "rate", "max_per_batch", "window"):
            check(name, getattr(self, name))
        if self.max_workers is not None:
            check(run_settings.MAX_WORKERS_SETTING, self.max_workers)
            if self.max_workers < self.workers:
                raise ParamError(f"--max-workers must be >= --workers ({self.workers}), got {self.max_workers}")
        if not 0 <= self.service_us <= MAX_SERVICE_US:
            raise ParamError(f"--service-us must be in [0, {MAX_SERVICE_US:g}] µs per tuple, got {self.service_us}")
        if self.duration is not None and self.duration <= 0:
            raise ParamError(f"--duration must be > 0 seconds, got {self.duration}")
        cls = registry.get(self.algorithm)
        registry.validate_params(self.algorithm, self.params)
        self._validate_fields(operator)
        refusal = split_key_refusal(operator.name, operator.mergeable, self.algorithm, cls.single_owner)
        if refusal:
            raise ParamError(refusal)
        if self.source == "kafka" and (not self.bootstrap or not self.topic):
            raise ParamError("--source kafka needs --bootstrap HOST:PORT and --topic NAME")
        if self.source == "file":
            if not self.path:
                raise ParamError("--source file needs --input FILE")
            location = filesystems.resolve(self.path)
            if not filesystems.is_file(location) or (filesystems.is_local(location)
                                                     and not os.access(location, os.R_OK)):
                raise ParamError(f"cannot read input file {self.path!r}")
        if self.source == "generator":
            from skewlab.engine.workloads import create_workload

            create_workload(self.workload, self.seed, self.workload_params)  # validates params
        for name in self.shadow or []:
            registry.get(name)
        if self.sink:
            from skewlab.engine.runtimes.spark.result_sink import parse_sink

            parse_sink(self.sink)  # a malformed kafka:// URL

    def checkpoint_dir(self) -> str:
        """``--checkpoint``, or ``data/checkpoints/<run name, else "default">``, resolved here on the
        driver into an absolute path or a URI (:func:`skewlab.shared.filesystems.resolve`): the
        executors open the state store, route files and sink where the driver means them."""
        return filesystems.resolve(self.checkpoint or default_data_dir() / "checkpoints" / (self.run_name or "default"))

    def partitions(self) -> int:
        """State partitions P = ``--max-workers``, default ``2 * workers`` (capped at MAX_WORKERS): the
        most workers the run can grow to, fixed for the checkpoint's life."""
        return int(self.max_workers) if self.max_workers is not None else min(2 * self.workers, MAX_WORKERS)

    def sink_spec(self) -> str:
        """``--sink`` (a directory or ``kafka://HOST:PORT/TOPIC``), or ``data/results/<checkpoint
        directory name>``: where the operator's results go (:mod:`skewlab.engine.runtimes.spark.result_sink`);
        a directory is resolved on the driver like :meth:`checkpoint_dir`."""
        spec = str(self.sink or default_data_dir() / "results" / os.path.basename(self.checkpoint_dir()))
        return spec if spec.lower().startswith("kafka:") else filesystems.resolve(spec)

    def source_options(self) -> tuple[str, dict[str, str]]:
        if self.source == "generator":
            return "skewlab-generator", {
                "workload": self.workload,
                "params": json.dumps(self.workload_params),
                "seed": str(self.seed),
                "partitions": str(self.sources),
                "rate": str(self.rate),
                "max_per_batch": str(self.max_per_batch),
                "values": str(self.value_kind() == "field").lower(),
            }
        if self.source == "file":
            return "skewlab-file", {
                "path": filesystems.resolve(self.path),
                "column": self.key_field_name(),
                "value_column": self.value_field,
                "partitions": str(self.sources),
                "rate": str(self.rate),
                "max_per_batch": str(self.max_per_batch),
            }
        return "skewlab-kafka", {
            "bootstrap": self.bootstrap,
            "topic": self.topic,
            "max_per_batch": str(self.max_per_batch),
            "key_field": self.key_field_name(),
            "value_field": self.value_field,
        }


def _interrupt(*_: Any) -> None:
    raise KeyboardInterrupt


def _capture_library_warnings(path: Path) -> None:
    """Send Python warnings (pyspark's and pandas' FutureWarnings, say) to ``path``, not the console.

    The console carries the engine's status lines only; the warnings are kept in the Spark log.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    logging.captureWarnings(True)
    logger = logging.getLogger("py.warnings")
    if not any(getattr(h, "baseFilename", None) == str(path.resolve()) for h in logger.handlers):
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
    logger.propagate = False


def default_data_dir() -> Path:
    return Path(os.environ.get("SKEWLAB_DATA_DIR", "data"))


class SparkEngine:
    """Owns the Spark query, the controller, the snapshots and the metrics sink of one run."""

    def __init__(self, cfg: EngineConfig, *, log: Callable[[str], None] | None = None,
                 after_batch: Callable[["SparkEngine", int], None] | None = None,
                 spark_log: Path | None = None) -> None:
        """``spark_log``: file for the JVM's own output and for Python warnings, so that the console
        carries the engine's lines only (``skewlab engine``); ``None`` leaves both where they are."""
        cfg.validate()
        #: the keyed operator the workers run (pickled to the executors with the query's function)
        self.operator = cfg.keyed_operator()
        self.spark_log = spark_log
        self.after_batch = after_batch
        self.cfg = cfg
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.checkpoint = cfg.checkpoint_dir()
        self.snapshots = SnapshotStore(filesystems.join(self.checkpoint, "skewlab"))
        from skewlab.engine.runtimes.spark.sources import RouteFiles

        self.routes = RouteFiles(filesystems.join(self.checkpoint, "routes"))
        #: where exporting tasks write migrated state for the importing tasks (state_transfer)
        self.migration_dir = filesystems.join(self.checkpoint, "migrations")
        self.stop_requested = threading.Event()
        self.in_batch = threading.Lock()
        self.paused = False
        self.batches_done = 0
        self.started = time.monotonic()
        self.store = None
        self.sink: MetricsSink | None = None
        self.run_id: int | None = None
        self.last_batch = -1
        self.applied_commands: list[int] = []
        self.consumed: dict[int, int] = {}
        self.dead_total = 0
        self._carry_events: list[dict[str, Any]] = []
        self._stopping = False
        self._idle_since: float | None = None
        self._backpressure = False
        self._interrupted = False
        self._batch_error: BaseException | None = None  # what failed in our own batch function
        self._task_times: Any = None  # skewlab.engine.runtimes.spark.task_metrics.TaskTimes, made at the first batch
        #: names of keys the workers reported by name (their most frequent keys: the hot keys' names)
        self.key_names: dict[int, str] = {}
        #: keys in each worker's state and tuples it holds for state in flight, after the last batch
        #: (from the workers' summary rows): a worker with either gets a control row even when it is no
        #: longer among the controller's workers
        self.worker_keys: dict[int, int] = {}
        self.worker_held: dict[int, int] = {}
        self.worker_bytes: dict[int, int] = {}
        #: migrations whose state is in flight: planned, exported, imported (see _track_migrations)
        self.migrating: list[dict[str, Any]] = []
        self._migrations_seen = 0
        #: what the next batch's routing snapshot carries besides the grouping: composed move orders
        #: (key id -> (holders, target)) and references to the export blobs per receiving worker
        self.next_orders = compose_orders([])  # composed (key ids, holders, targets)
        self.next_imports: dict[int, list[ExportRef]] = {}
        #: a grouping that splits keys has run: shares of a key may be on several workers, so the
        #: workers send their shares to the merge stage, which writes the results (share_merge)
        self.shares_split = False
        self._latencies: list[float] = []
        #: the numba warm-up child of :meth:`run` (None outside run(): waiting shadows join at once)
        self.kernels: BackgroundWarmup | None = None
        limit_retained_memory()  # the driver's per-batch temporaries go back to the system when freed
        self._restore_or_init()
        self.controller.track_orders = True

    # ------------------------------------------------------------------ state
    def _restore_or_init(self) -> None:
        from skewlab.storage import connect

        self.store = connect(self.cfg.db)
        latest = self.snapshots.latest()
        if latest is not None:
            batch, snap = latest
            diff = stream_mismatch(snap.get("stream"), self._stream())
            if diff:
                self.store.close()
                raise ParamError(
                    f"checkpoint {self.checkpoint} belongs to run {snap['run_id']} on another stream "
                    f"({'; '.join(diff)}): restart with that run's settings to resume it, or start a new run "
                    "with --run-name NAME or --checkpoint DIR"
                )
            self.controller: Controller = snap["controller"]
            if not isinstance(self.controller.vocab, FingerprintVocabulary):
                self.store.close()
                raise ParamError(
                    f"checkpoint {self.checkpoint} was written by an engine version whose driver kept key names; "
                    "start a new run with --run-name NAME or --checkpoint DIR")
            self.shadow: ShadowEvaluator | None = snap["shadow"]
            self.run_id = snap["run_id"]
            self.last_batch = batch
            self.paused = snap.get("paused", False)
            self.applied_commands = snap.get("applied_commands", [])
            self.consumed = snap.get("consumed", {})
            self.dead_total = snap.get("dead_total", 0)
            if snap.get("partitions") is None:
                self.store.close()
                raise ParamError(
                    f"checkpoint {self.checkpoint} was written by an engine that kept the state in the driver; "
                    "start a new run with --run-name NAME or --checkpoint DIR")
            self.partitions = int(snap["partitions"])
            try:
                self.results = restore_sink(snap["sink"], snap.get("sink_start"), self.partitions,
                                            schema=sink_schema(self.operator))
            except ParamError:
                self.store.close()
                raise
            if self.cfg.max_workers not in (None, self.partitions) or (self.cfg.sink and self.cfg.sink_spec() != self.results.url):
                self.log(f"run {snap['run_id']} keeps its {self.partitions} state partitions and its sink {self.results.url}: "
                         "--max-workers/--sink only set up new runs")
            self.worker_keys = snap.get("worker_keys", {})
            self.worker_held = snap.get("worker_held", {})
            self.worker_bytes = snap.get("worker_bytes", {})
            self.migrating = snap.get("migrating", [])
            self.next_orders = snap.get("next_orders", compose_orders([]))
            self.next_imports = snap.get("next_imports", {})
            if any(not isinstance(r, ExportRef) for refs in self.next_imports.values() for r in refs):
                self.store.close()
                raise ParamError(
                    f"checkpoint {self.checkpoint} was written by an engine version that carried migrated state "
                    "through the driver; start a new run with --run-name NAME or --checkpoint DIR")
            self._migrations_seen = snap.get("migrations_seen", len(self.controller.migrations))
            self.shares_split = bool(snap.get("shares_split", False))
            self._latencies = snap.get("latencies", [])
            pending = snap.get("pending", [])
            self.log(f"restored run {self.run_id} at batch {batch} from {self.snapshots.dir}")
            g = self.controller.planner
            if (self.cfg.algorithm, self.cfg.workers) != (g.name, self.controller.n_workers) or any(
                    g.p.get(k) != v for k, v in self.cfg.params.items()):
                self.log(f"run {self.run_id} continues with its own grouping ({g.name} on {self.controller.n_workers} "
                         "workers); --algorithm/--workers/--param only set up new runs — change a running one with "
                         "'skewlab control'")
        else:
            vocab = FingerprintVocabulary()
            grouping = registry.create(self.cfg.algorithm, self.cfg.workers, self.cfg.sources, self.cfg.seed, self.cfg.params)
            self.controller = Controller(grouping, vocab, window=self.cfg.window, cost_model=self.operator.cost_model)
            names = self.cfg.shadow if self.cfg.shadow is not None else default_shadow_names(
                grouping.name, self.operator.name, self.operator.mergeable)
            self.shadow = (  # the shadows join when their kernels are compiled (_join_shadows)
                ShadowEvaluator([], vocab, n_workers=self.cfg.workers, n_sources=self.cfg.sources, seed=self.cfg.seed,
                                window=self.cfg.window, cost_model=self.operator.cost_model,
                                max_tuples=self.cfg.shadow_max_tuples, waiting=names)
                if names else None
            )
            self.partitions = self.cfg.partitions()
            try:  # before the run exists: an unusable sink is a start-up error
                self.results = open_sink(self.cfg.sink_spec(), self.partitions, schema=sink_schema(self.operator),
                                         log=self.log)
            except ParamError:
                self.store.close()
                raise
            config = {k: v for k, v in asdict(self.cfg).items() if k != "db"}
            config["max_workers"] = self.partitions  # the state partitions: set-workers' upper limit
            # the dashboard and `skewlab control` apply the split-key rule without importing the operator
            config["operator_mergeable"] = self.operator.mergeable
            self.run_id = self.store.create_run(
                grouping.name, grouping.p, seed=self.cfg.seed, n_workers=self.cfg.workers,
                workload=self.cfg.workload if self.cfg.source == "generator" else f"{self.cfg.source}",
                config=config, name=self.cfg.run_name,
            )
            pending = []
        self.sink = MetricsSink(self.store, self.run_id, log=self.log)
        for item in pending:
            self.sink.enqueue(item)
        self.sink.flush(force=True)

    def _stream(self) -> dict[str, Any]:
        """The settings that identify this run's stream (:data:`skewlab.engine.io.checkpoint.STREAM_FIELDS`)."""
        out = {k: getattr(self.cfg, k) for k in STREAM_FIELDS if k != "db"}
        out["db"] = self.store.url
        return out

    def _publish_route(self, batch_id: int) -> None:
        """Publish the routing snapshot the sources use for ``batch_id`` (see skewlab.engine.runtimes.spark.sources):
        the grouping, the state partitions, every worker's control payload (exports, keys to expect:
        the moves the controller ordered since the last publication, composed with those already
        published for this batch) and references to the export blobs each worker imports in that batch.  With
        state to export or import the batch runs even if no tuple arrives (``flush``)."""
        from skewlab.engine.runtimes.spark.topology import RoutingSnapshot, combiner_bytes, control_payloads

        self.next_orders = compose_orders([self.next_orders, self.controller.drain_orders()])
        fresh = self.controller.migrations[self._migrations_seen:]
        self._migrations_seen = len(self.controller.migrations)
        if fresh:
            self.migrating.append({"export_batch": batch_id, "events": [m.to_dict() for m in fresh],
                                   "latency_before_ms": float(np.median(self._latencies[-5:])) if self._latencies else None})
        holding = ({w for w, n in self.worker_keys.items() if n} | {w for w, n in self.worker_held.items() if n}
                   | set(self.next_imports))
        control = control_payloads(self.next_orders, self.controller.vocab.fps,
                                   set(range(self.controller.n_workers)) | holding, self.partitions)
        self.shares_split = self.shares_split or not self.controller.planner.single_owner
        for payload in control.values():
            payload["split"] = self.shares_split  # results through the merge stage (share_merge)
        self.routes.publish(batch_id, RoutingSnapshot(batch_id, self.controller.planner.router, self.partitions,
                                                      control, self.next_imports,
                                                      values=self.cfg.value_kind(self.operator),
                                                      combiner=combiner_bytes(self.operator) if self.cfg.combine else None
                                                      ).dumps(),
                            flush=bool(self.next_imports or self.next_orders[0].size))

    def _track_migrations(self, batch_id: int, exports: list[ExportRef], latency_ms: float
                          ) -> list[dict[str, Any]]:
        """Follow each migration through its batches: the export batch (the old workers' state leaves
        their tasks: bytes moved), then the import batch (the new workers merge it and release the held
        tuples).  Returns the storage rows of the migrations that completed in ``batch_id``."""
        done: list[dict[str, Any]] = []
        now = time.time()
        for m in list(self.migrating):
            if m["export_batch"] == batch_id:
                m["bytes_moved"] = sum(ref.bytes for ref in exports)
                m["latency_export_ms"] = latency_ms
                m["export_end"] = now
            elif m["export_batch"] < batch_id:
                self.migrating.remove(m)
                events = m["events"]
                total = max((e["total_state"] for e in events), default=0.0)
                moved = sum(e["state_moved"] for e in events)
                done.append({  # the algorithm that planned it (a later switch may have replaced it since)
                    "algorithm": next((e["algorithm"] for e in events if e.get("algorithm")), self.controller.planner.name),
                    "keys_moved": sum(e["keys"] for e in events),
                    "state_moved": moved,
                    "migration_cost": moved / total if total > 0 else 0.0,
                    "bytes_moved": m.get("bytes_moved", 0),
                    "pause_batches": batch_id - m["export_batch"],
                    "pause_ms": (now - m["export_end"]) * 1000.0 if "export_end" in m else None,
                    "detail": {"reason": "+".join(dict.fromkeys(e["reason"] for e in events)),
                               "planned_interval": events[0]["interval"], "export_batch": m["export_batch"],
                               "import_batch": batch_id, "latency_before_ms": m["latency_before_ms"],
                               "latency_plan_ms": m.get("latency_plan_ms"),
                               "moves": [{"reason": e["reason"], "interval": e["interval"], "keys": e["keys"],
                                          "state_moved": e["state_moved"]} for e in events],
                               "latency_export_ms": m.get("latency_export_ms"), "latency_import_ms": latency_ms},
                })
        return done

    def _save(self, batch_id: int) -> None:
        assert self.sink is not None
        self.snapshots.save(batch_id, {
            "run_id": self.run_id,
            "stream": self._stream(),
            "controller": self.controller,
            "shadow": self.shadow,
            "paused": self.paused,
            "applied_commands": self.applied_commands[-1000:],
            "consumed": self.consumed,
            "dead_total": self.dead_total,
            "pending": self.sink.pending(),
            "partitions": self.partitions,
            "sink": self.results.url,
            "sink_start": self.results.start,
            "worker_keys": self.worker_keys,
            "worker_held": self.worker_held,
            "worker_bytes": self.worker_bytes,
            "migrating": self.migrating,
            "next_orders": self.next_orders,
            "next_imports": self.next_imports,
            "migrations_seen": self._migrations_seen,
            "shares_split": self.shares_split,
            "latencies": self._latencies[-20:],
        })

    # ------------------------------------------------------------------ commands
    def _apply_commands(self, batch_id: int) -> tuple[list[tuple[int, str, str | None]], list[dict[str, Any]]]:
        """Apply the pending operator commands; they take effect from batch ``batch_id`` (the next one),
        whose interval is the controller's next.  Returns (command marks, events without interval)."""
        marks: list[tuple[int, str, str | None]] = []
        events: list[dict[str, Any]] = []
        try:
            pending = self.store.pending_commands(self.run_id)
        except Exception as exc:  # noqa: BLE001 - database down: no commands this batch
            self.log(f"cannot read commands: {type(exc).__name__}")
            return marks, events
        for cmd in pending:
            cid = int(cmd["id"])
            if cid in self.applied_commands:
                continue
            before = self.controller.planner.name, dict(self.controller.planner.p)
            res = apply_command(self.controller, cmd.get("kind"), cmd.get("payload"), operator=self.operator.name,
                                mergeable=self.operator.mergeable, max_workers=self.partitions, paused=None if self._backpressure else self.paused)
            self.applied_commands.append(cid)
            marks.append((cid, res.status, res.reason or None))
            if res.status == "rejected":
                self.log(f"command {cid} {cmd.get('kind')} rejected: {res.reason}")
                continue
            if res.action == "pause":
                self.paused = True
            elif res.action == "resume":
                self.paused = False
            if res.action == "workers" and self.shadow is not None:
                self.shadow.resize(self.controller.n_workers)
            if res.action == "switch" and self.shadow is not None:  # the what-if keeps every algorithm used
                self.shadow.add(*before, like=self.controller)
            kind = {"switch": "algorithm", "params": "params", "workers": "workers"}.get(res.action, res.action)
            detail = {k: v for k, v in res.event.items() if k not in ("interval", "kind")}
            events.append({"kind": kind, "detail": detail, "command_id": cid})
            # numbered as the dashboard and 'skewlab control status' do: the first interval in effect
            self.log(f"command {cid} {cmd.get('kind')} applied at interval {self.controller.interval} "
                     f"(batch {batch_id}, {res.action})")
        return marks, events

    # ------------------------------------------------------------------ one micro-batch
    def process_batch(self, df: Any, batch_id: int) -> None:
        if self._stopping or self._done():
            # Never return normally without applying: Spark would commit the batch. Failing leaves
            # it uncommitted, so it is replayed (and applied once) on the next start.
            raise RuntimeError("skewlab engine stopping; batch left for replay")
        with self.in_batch:
            _fault("begun", batch_id, imports=bool(self.next_imports) and batch_id == self.last_batch + 1)
            if batch_id <= self.last_batch:
                # The workers' state must still advance with Spark's batch: run the operator (its
                # exports and result files are the same as the first time), apply nothing.
                self._collect(df, batch_id)
                self.log(f"batch {batch_id} already applied (restored snapshot); operator re-run, nothing applied")
                return
            try:
                self._process(df, batch_id)
                release_unused()  # the batch's Arrow buffers are free once _process returned
                if self.after_batch is not None:
                    self.after_batch(self, batch_id)
            except Exception as exc:
                self._batch_error = exc
                self.log(f"batch {batch_id} failed: {type(exc).__name__}: {_first_line(exc)}")
                raise

    def _collect(self, df: Any, batch_id: int) -> dict[str, Any]:
        """Run the batch's operator: collect its statistics (:func:`~skewlab.engine.runtimes.spark.operator.unpack_output`)
        and, if workers sent shares, run the merge stage that writes the results
        (:func:`~skewlab.engine.runtimes.spark.share_merge.merge_in_spark`) on the executors.  The
        operator output is persisted in between, so the stateful stage runs once."""
        from pyspark.sql import functions as F

        from skewlab.engine.runtimes.spark.operator import MERGE_KINDS, unpack_output
        from skewlab.engine.runtimes.spark.share_merge import merge_in_spark

        df = df.persist()
        try:
            # the collected table is freed here: only its numeric columns live on
            u = unpack_output(df.filter(~F.col("kind").isin(*MERGE_KINDS)).toArrow())
            if any(s.get("shares") for s in u["summaries"].values()):
                merge_in_spark(df, batch_id, self.partitions, self.results, self.operator)
        finally:
            df.unpersist()
        return u

    def _process(self, df: Any, batch_id: int) -> None:
        t0 = time.perf_counter()
        c = self.controller
        events = self._carry_events
        self._carry_events = []
        n = c.n_workers
        # The sources routed this batch with the snapshot published for it (route_dir); the workers'
        # stateful operator ran on it (_start_query); only statistics, exports and side rows arrive.
        u = self._collect(df, batch_id)
        _fault("collected", batch_id, exports=bool(u["exports"]), imports=bool(self.next_imports))
        used = {side.get("route_batch") for side in u["states"].values()} - {batch_id}
        if used:
            raise RuntimeError(
                f"batch {batch_id} was routed with the snapshot of batch {sorted(used, key=str)[0]} (routing files in "
                f"{self.routes.dir} do not match this checkpoint); start a new run with --run-name or --checkpoint"
            )
        for s, side in u["states"].items():
            if side.get("source_state"):
                c.planner.router.set_source_state(s % c.planner.n_sources, side["source_state"])
            if side.get("consumed", -1) >= 0:
                if side["first_seq"] != self.consumed.get(s, side["first_seq"]):
                    self.log(f"warning: source {s} batch {batch_id} starts at {side['first_seq']}, "
                             f"expected {self.consumed.get(s)} (gap or overlap in the source)")
                self.consumed[s] = int(side["consumed"])
        dead = u["dead_letters"]
        self.dead_total += sum(v[0] for v in dead.values())
        key_ids = c.vocab.encode_fps(u["fps"])
        if len(self.key_names) > 100_000:  # a long run's drifting heads: keep the recent names
            self.key_names = {}
        self.key_names.update(u["names"])
        route_seconds = sum(side.get("route_seconds", 0.0) for side in u["states"].values())
        row = c.end_interval(key_ids, u["workers"], u["counts"], route_seconds=route_seconds)
        for w, summary in u["summaries"].items():
            self.worker_keys[w] = summary["keys"]
            self.worker_held[w] = summary["held"]
            self.worker_bytes[w] = summary["state_bytes"]

        # shadow what-if and hot keys on the interval's per-key counts
        uk, inv = np.unique(key_ids, return_inverse=True) if key_ids.size else (key_ids, key_ids)
        per_key = np.bincount(inv, weights=u["counts"], minlength=uk.size).astype(np.int64) if key_ids.size else key_ids
        self._join_shadows(batch_id)
        shadow_rows = self.shadow.evaluate(uk, per_key) if self.shadow is not None else []
        hot = self._hot_keys(uk, per_key, key_ids, u["workers"], row["tuples"])

        batch_seconds = time.perf_counter() - t0
        batch_latency_ms = batch_seconds * 1000.0
        self._latencies = [*self._latencies[-19:], batch_latency_ms]  # the reference of migrations
        task_seconds = self._task_seconds(df, batch_id)
        workers_rows = worker_rows(
            np.bincount(u["workers"], weights=u["counts"], minlength=n)[:n], np.bincount(u["workers"], minlength=n)[:n],
            row["worker_loads"], c.state.per_worker(c.n_workers), state_bytes=self.worker_bytes,
            task_seconds=task_seconds)
        migrations = self._track_migrations(batch_id, u["exports"], batch_latency_ms)
        events.extend(rebalance_events(c.events, row["interval"]))
        # Operator commands take effect from the next batch: its routing snapshot is published below.
        marks, cmd_events = self._apply_commands(batch_id + 1)
        events.extend({**e, "interval": row["interval"] + 1} for e in cmd_events)  # the interval they start
        record = interval_record(
            row, batch_id, batch_seconds=batch_seconds, amax=c.planner.p.get("amax"), workers=workers_rows,
            hot_keys=hot, shadow=shadow_rows, migrations=migrations, events=events, dead_letters=dead)
        self.last_batch = batch_id
        self.batches_done += 1
        item = PendingInterval(record, [(cid, status, reason, batch_id + 1) for cid, status, reason in marks])
        self.sink.enqueue(item)
        # The next batch's routing snapshot, then our snapshot (it holds the unwritten rows, so
        # nothing is lost on a crash; rows already written are re-sent idempotently after a
        # restart), then the database.
        self.next_orders = compose_orders([])
        self.next_imports = {}
        for ref in u["exports"]:
            self.next_imports.setdefault(ref.target, []).append(ref)
        self._publish_route(batch_id + 1)
        _fault("published", batch_id, exports=bool(u["exports"]))
        self._save(batch_id)
        _fault("saved", batch_id, exports=bool(u["exports"]))
        # Spark started this batch after committing batch_id - 1, so the imports of batch_id - 1 (the
        # exports of batch_id - 2) will not be replayed: their files go.
        prune(self.migration_dir, batch_id - 1)
        if not self.sink.flush() and self.sink.full and not self.paused:
            # Back-pressure: never drop metric rows; stop consuming until the database is back.
            self.paused = self._backpressure = True
            self.log(f"metrics buffer full ({self.sink.backlog} intervals): pausing consumption until the database is back")
        for m in self.migrating:  # the planning batch's whole time, commands and publication included
            if m["export_batch"] == batch_id + 1:
                m["latency_plan_ms"] = (time.perf_counter() - t0) * 1000.0
        self.log(self._status_line(batch_id, row, record, dead))

    def _task_seconds(self, df: Any, batch_id: int) -> dict[int, float]:
        """Run time of each worker's task in this batch from Spark's task metrics
        (:mod:`skewlab.engine.runtimes.spark.task_metrics`); empty when Spark has not recorded them."""
        from skewlab.engine.runtimes.spark.task_metrics import TaskTimes

        if self._task_times is None:
            self._task_times = TaskTimes(df.sparkSession, f"skewlab-{self.run_id}")
        times = self._task_times.of_batch(batch_id)
        if times is None:
            self.log(f"batch {batch_id}: Spark has not recorded its task metrics in time; worker task times left empty")
            return {}
        return times

    def _hot_keys(self, uk, per_key, key_ids, workers, total) -> list[dict[str, Any]]:
        if uk.size == 0 or total <= 0:
            return []
        top = np.argsort(-per_key, kind="stable")[: self.cfg.top_k]
        fps = self.controller.vocab.fps
        out = []
        for rank, i in enumerate(top):
            k = int(uk[i])
            fp = int(fps[k])
            dest = sorted(set(workers[key_ids == k].tolist()))
            out.append({"key": self.key_names.get(fp, f"#{fp:016x}"), "fingerprint": fp, "count": int(per_key[i]),
                        "share": float(per_key[i] / total), "workers": dest, "rank": rank})
        return out

    def _join_shadows(self, batch_id: int) -> None:
        """Let the waiting shadow groupings whose kernels are compiled join (all of them outside
        :meth:`run` or once the warm-up child has exited: then the driver compiles what is left)."""
        if self.shadow is None or not self.shadow.waiting:
            return
        kernels = self.kernels
        ready = None if kernels is None or kernels.finished else kernels.ready()
        joined = self.shadow.join(ready, like=self.controller)
        if joined and kernels is not None:
            left = len(self.shadow.waiting)
            self.log(f"batch {batch_id}: shadow grouping(s) {', '.join(joined)} joined "
                     f"({time.monotonic() - kernels.started:.0f} s after start; "
                     + (f"{left} still compiling)" if left else "all shadows running)"))

    def _status_line(self, batch_id: int, row: dict[str, Any], record: IntervalRecord, dead: dict) -> str:
        parts = [
            f"batch {batch_id}", f"{row['algorithm']}", f"n={row['workers']}", f"tuples={row['tuples']}",
            f"imbalance={row['imbalance']:.3f}", f"repl={row['replication']:.2f}" if row["tuples"] else "repl=–",
            f"|A|={row['routing_table_size']}", f"migr={row['migration_cost']:.3f}",
            format_rate(record.throughput), f"latency={record.batch_latency_ms:.0f}ms",
        ]
        if dead:
            parts.append(f"dead={sum(v[0] for v in dead.values())}")
        parts.append(self.sink.status if self.sink else "")
        if self.paused:
            parts.append("PAUSED")
        return " | ".join(parts)

    # ------------------------------------------------------------------ the query
    def _start_query(self, spark: Any) -> Any:
        """Source (routing in the scan) → ``groupBy(worker label).applyInPandasWithState`` (each
        worker's keyed state in its own state partition, :mod:`skewlab.engine.runtimes.spark.operator`) →
        ``foreachBatch`` (the driver's statistics and planning)."""
        from pyspark.sql import functions as F

        from skewlab.engine.runtimes.spark.labels import worker_labels
        from skewlab.engine.runtimes.spark.operator import OUT_SCHEMA, STATE_SCHEMA, make_handler
        from skewlab.engine.runtimes.spark.session import configure_state_store
        from skewlab.engine.runtimes.spark.topology import combined_schema

        fmt, opts = self.cfg.source_options()
        opts["route_dir"] = str(self.routes.dir)  # the sources route (skewlab.engine.runtimes.spark.sources)
        opts["route_values"] = self.cfg.value_kind(self.operator)  # each tuple's value, for the operator
        if self.cfg.combine and self.operator.combined is not None:
            opts["route_combined"] = combined_schema(self.operator)  # a row per (key, worker) of a source task
        P = self.partitions
        configure_state_store(spark, P)
        module = sys.modules.get(type(self.operator).__module__)
        if module is not None and not module.__name__.startswith("skewlab."):
            # a user's operator travels with the handler by value: its module need not be importable
            # on the executors (Spark pickles the handler with its own cloudpickle)
            from pyspark import cloudpickle

            cloudpickle.register_pickle_by_value(module)
        self._publish_route(self.last_batch + 1)  # after: its combiner pickles a user's operator by value
        labels = F.array(*[F.lit(v) for v in worker_labels(P)])
        routed = spark.readStream.format(fmt).options(**opts).load()
        out = (routed.withColumn("label", F.element_at(labels, (F.col("worker") % P) + 1))
               .groupBy("label")
               .applyInPandasWithState(make_handler(P, self.cfg.window, self.results, self.operator, named=self.cfg.top_k,
                                                    service_us=self.cfg.service_us, migrations=self.migration_dir),
                                       OUT_SCHEMA, STATE_SCHEMA, "append", "NoTimeout"))
        return (
            out.writeStream.outputMode("append").foreachBatch(self.process_batch)
            .option("checkpointLocation", filesystems.spark_location(filesystems.join(self.checkpoint, "spark")))
            .trigger(processingTime=f"{self.cfg.interval} seconds")
            .queryName(f"skewlab-{self.run_id}")
            .start()
        )

    def request_stop(self, *_: Any) -> None:
        self._interrupted = True
        if not self.stop_requested.is_set():
            self.log("stopping: finishing the current batch and flushing metrics (Ctrl-C again to force)")
            self.stop_requested.set()
        else:
            raise KeyboardInterrupt

    def run(self) -> int:
        """Run until ``--duration`` passes, ``max_batches`` are done or Ctrl-C; returns an exit status."""
        from skewlab.engine.runtimes.spark.session import get_session

        if self.spark_log is not None:
            _capture_library_warnings(self.spark_log)
        previous_handlers = {}
        main_thread = threading.current_thread() is threading.main_thread()
        if main_thread:  # while Spark starts, SIGTERM stops like Ctrl-C does (the run is marked stopped)
            previous_handlers[signal.SIGTERM] = signal.signal(signal.SIGTERM, _interrupt)
        status = "finished"
        reason = None
        query = None
        try:
            live = self.controller.planner.name
            waiting = list(self.shadow.waiting) if self.shadow is not None else []
            self.kernels = BackgroundWarmup([live, *waiting])
            self.log(f"routing kernels: compiling {live}" + (f" and {len(waiting)} shadow grouping(s)" if waiting else "")
                     + " in the background while Spark starts (numba; the first run after an install compiles, "
                     "later runs load them from the cache in seconds); shadows join when ready")
            started = time.monotonic()
            spark = get_session(self.cfg.master, f"skewlab-engine-{self.run_id}", jvm_output=self.spark_log,
                                **self.cfg.spark_conf)
            if not is_local_master(spark.sparkContext.master):
                check_executors(spark)  # one line, not a hung query, when the executors cannot run skewlab
            _quiet_stream_errors(spark)
            spark_up = time.monotonic()
            waiting_live = live not in self.kernels.ready()
            self.log(f"Spark started in {spark_up - started:.0f} s"
                     + (f"; waiting for the routing kernels of {live} …" if waiting_live else ""))
            self.kernels.wait_for(live, self.stop_requested)
            if waiting_live:
                self.log(f"routing kernels of {live} ready {time.monotonic() - spark_up:.0f} s later")
            # After the session: SparkContext installs its own SIGINT handler (cancel jobs + raise),
            # which would interrupt a batch; ours finishes the batch and flushes metrics first.
            if main_thread:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    previous_handlers.setdefault(sig, signal.signal(sig, self.request_stop))
            try:
                self.store.update_run(self.run_id, status="running")  # a restored run is running again
            except Exception:  # noqa: BLE001 - the database may be down; metrics are buffered anyway
                pass
            self.log(f"run {self.run_id}: {self.controller.planner.name} on {self.cfg.source}, "
                     f"{self.controller.n_workers} workers, master {spark.sparkContext.master}, "
                     f"checkpoint {self.checkpoint}, db {self.store.url}"
                     + (f", Spark log {self.spark_log}" if self.spark_log is not None else ""))
            while not self._done():
                if self.paused:
                    self._wait_resume()
                    continue
                query = self._start_query(spark)
                while not self._done() and not self.paused:
                    try:
                        terminated = query.awaitTermination(0.5)
                    except Exception as exc:  # noqa: BLE001 - StreamingQueryException from a failed batch
                        if self._done():
                            break  # the batch refused while stopping; it is replayed on the next start
                        if self._batch_error is not None:  # our own message, not Spark's wrapper of it
                            raise EngineFailed(f"streaming query failed: {_first_line(self._batch_error)}") from None
                        raise EngineFailed(f"streaming query failed: {_first_line(exc)}") from None
                    if terminated:
                        break
                    if self.sink is not None:
                        self.sink.flush()
                    if self.cfg.source == "file" and self._file_exhausted(query):
                        self.log("input file fully replayed; stopping")
                        self.stop_requested.set()
                self._stop_query(query)
                query = None
        except KeyboardInterrupt:
            status = "stopped"
        except BaseException as exc:
            status, reason = "failed", _first_line(exc)
            raise
        finally:
            if self._interrupted and status != "failed":
                status = "stopped"
            if query is not None:
                self._stop_query(query)
            if self.kernels is not None:
                self.kernels.close()
            if self.sink is not None and not self.sink.flush(force=True):
                self.log(f"warning: {self.sink.backlog} interval(s) not yet written; they are kept in the snapshot "
                         "and written on the next start")
            try:
                self.store.finish_run(self.run_id, status, note=reason)
            except Exception:  # noqa: BLE001
                pass
            for sig, handler in previous_handlers.items():
                signal.signal(sig, handler)
        self.log(f"run {self.run_id} {status} after {self.batches_done} batch(es)")
        return 0

    def _file_exhausted(self, query: Any) -> bool:
        """A finite file is done when the query has had no data for a few trigger intervals."""
        status = query.status or {}
        busy = status.get("isDataAvailable") or status.get("isTriggerActive") or self.batches_done == 0
        now = time.monotonic()
        if busy:
            self._idle_since = None
            return False
        if self._idle_since is None:
            self._idle_since = now
        return now - self._idle_since > max(3 * self.cfg.interval, 3.0)

    def _stop_query(self, query: Any) -> None:
        """Stop between batches: new batches refuse to start, the running one finishes first."""
        self._stopping = True
        try:
            with self.in_batch:
                pass
            _await_trigger_end(query)
            query.stop()
        except Exception:  # noqa: BLE001 - the query may already have failed on the refused batch
            pass
        finally:
            self._stopping = False

    def _done(self) -> bool:
        if self.stop_requested.is_set():
            return True
        if self.cfg.duration is not None and time.monotonic() - self.started >= self.cfg.duration:
            return True
        return self.cfg.max_batches is not None and self.batches_done >= self.cfg.max_batches

    def _wait_resume(self) -> None:
        """Paused: the query is stopped; poll commands until ``resume`` (or stop)."""
        self.log("paused: query stopped, polling for resume")
        try:
            self.store.update_run(self.run_id, status="paused")
        except Exception:  # noqa: BLE001
            pass
        while self.paused and not self._done():
            time.sleep(0.5)
            if self._backpressure:
                if self.sink is not None and self.sink.flush(force=True):
                    self.paused = self._backpressure = False
                    self.log("metrics database back: resuming consumption")
                continue
            marks, events = self._apply_commands(self.last_batch + 1)
            self._carry_events.extend(events)
            for cid, status, reason in marks:
                try:
                    self.store.mark_command(cid, status, reason=reason or "", applied_batch=self.last_batch + 1,
                                            run_id=self.run_id)
                except Exception:  # noqa: BLE001
                    pass
            if marks:
                self._save(self.last_batch)
        try:
            self.store.update_run(self.run_id, status="running")
        except Exception:  # noqa: BLE001
            pass
