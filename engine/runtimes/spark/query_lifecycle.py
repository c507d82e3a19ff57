"""The streaming query's lifecycle in one run of ``skewlab engine``: start it, watch it, pause and
resume it, stop it between batches, and the signals that ask for a stop.

The engine (:class:`skewlab.engine.runtimes.spark.engine.SparkEngine`) defines the query, and its batch
driver (:class:`skewlab.engine.runtimes.spark.batch_driver.BatchDriver`, the :class:`Batches` this class
reads) does each batch's work; this class decides when the query runs:

- it runs until ``--duration`` passes, ``max_batches`` are applied, the input file is fully replayed
  (``--source file``) or a stop is asked (Ctrl-C, SIGTERM, or the engine on a dead input);
- pausing stops the query after the current batch (offsets stay in Spark's checkpoint, no record is
  lost) and polls (:meth:`Batches.while_paused`: commands, the metrics database) until the run
  is no longer paused; resuming starts the query again from the checkpoint;
- a stop happens between batches: batches that begin meanwhile refuse (:meth:`running_batch`), which
  leaves them uncommitted and replayed on the next start, and the running one finishes first;
- while Spark starts, SIGTERM interrupts at once (nothing runs yet); once it is up (SparkContext has
  installed its own SIGINT handler, which would cancel a batch's jobs) SIGINT and SIGTERM ask for a
  stop after the current batch, and a second one forces it.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

if TYPE_CHECKING:
    from skewlab.engine.io.metrics_sink import MetricsSink

__all__ = ["Batches", "EngineFailed", "QueryLifecycle", "first_line"]


class EngineFailed(RuntimeError):
    """The streaming query died (a failed batch or source); the message is one line for the operator.
    Nothing is lost: the failed batch was not committed and is replayed by the next start."""


_PY_ERROR = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:Error|Exception)): (.+)$")


def first_line(exc: BaseException) -> str:
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


def await_trigger_end(query: Any, timeout: float = 30.0) -> None:
    """Wait until the query's running trigger has ended (Spark writes the batch's commit log entry
    after ``foreachBatch`` returns, inside the trigger), so a stop right after a batch does not leave
    that batch uncommitted and replayed on the next start.  A trigger that begins meanwhile runs the
    batch function, which refuses while stopping and so ends it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if not query.isActive or not (query.status or {}).get("isTriggerActive"):
                return
        except Exception:  # noqa: BLE001 - a query failing meanwhile has ended its trigger
            return
        time.sleep(0.05)


class RunLimits(Protocol):
    """What the lifecycle reads of the run's configuration (:class:`skewlab.engine.runtimes.spark.engine_config.EngineConfig`)."""
    source: str
    interval: float
    duration: float | None
    max_batches: int | None


class Batches(Protocol):
    """What the lifecycle reads of the driver that runs the query's batches."""
    paused: bool
    batches_done: int
    #: what failed in the engine's own batch function, if anything (its message beats Spark's wrapper)
    batch_error: BaseException | None
    sink: MetricsSink | None

    def while_paused(self) -> None: ...

    def mark_run(self, status: str) -> None: ...


def _interrupt(*_: Any) -> None:
    raise KeyboardInterrupt


class QueryLifecycle:
    """Runs a query until the run is done; see the module's docstring."""

    def __init__(self, batches: Batches, cfg: RunLimits, log: Callable[[str], None]) -> None:
        self.batches = batches
        self.cfg = cfg
        self.log = log
        #: set to stop the run after the current batch
        self.stop_requested = threading.Event()
        #: held while a batch function runs (a stop waits for it)
        self.in_batch = threading.Lock()
        #: whether Ctrl-C or SIGTERM asked for the stop (the run is then "stopped", not "finished")
        self.interrupted = False
        self.started = time.monotonic()
        self._stopping = False
        self._idle_since: float | None = None
        self._previous_handlers: dict[int, Any] = {}

    # ------------------------------------------------------------------ when the run is done
    def done(self) -> bool:
        if self.stop_requested.is_set():
            return True
        if self.cfg.duration is not None and time.monotonic() - self.started >= self.cfg.duration:
            return True
        return self.cfg.max_batches is not None and self.batches.batches_done >= self.cfg.max_batches

    @contextmanager
    def running_batch(self) -> Iterator[None]:
        """Around the batch function: refuse a batch that begins while stopping or done (raising, never
        returning normally without applying it: Spark would commit it; failing leaves it uncommitted,
        replayed and applied once on the next start), and hold :attr:`in_batch` while it runs."""
        if self._stopping or self.done():
            raise RuntimeError("skewlab engine stopping; batch left for replay")
        with self.in_batch:
            yield

    def request_stop(self, *_: Any) -> None:
        """Ctrl-C / SIGTERM once Spark is up: stop after the current batch; a second one forces it."""
        self.interrupted = True
        if not self.stop_requested.is_set():
            self.log("stopping: finishing the current batch and flushing metrics (Ctrl-C again to force)")
            self.stop_requested.set()
        else:
            raise KeyboardInterrupt

    # ------------------------------------------------------------------ signals
    def interrupt_on_sigterm(self) -> None:
        """While Spark starts, SIGTERM stops like Ctrl-C does (the run is marked stopped).  Signal
        handlers are the main thread's: elsewhere this and :meth:`stop_on_signals` do nothing."""
        if threading.current_thread() is threading.main_thread():
            self._previous_handlers[signal.SIGTERM] = signal.signal(signal.SIGTERM, _interrupt)

    def stop_on_signals(self) -> None:
        """Once Spark is up: SIGINT and SIGTERM ask for a stop after the current batch
        (:meth:`request_stop`) instead of SparkContext's handler cancelling its jobs."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous_handlers.setdefault(sig, signal.signal(sig, self.request_stop))

    def restore_signals(self) -> None:
        for sig, handler in self._previous_handlers.items():
            signal.signal(sig, handler)
        self._previous_handlers.clear()

    # ------------------------------------------------------------------ the query
    def drive(self, start_query: Callable[[], Any]) -> None:
        """Start the query (``start_query()``), watch it, stop it to pause and start it again on resume, until the
        run is done; the query is stopped between batches however this returns.  A failed query
        raises :class:`EngineFailed` with one line."""
        query = None
        try:
            while not self.done():
                if self.batches.paused:
                    self.wait_resume()
                    continue
                query = start_query()
                self._watch(query)
                self.stop_query(query)
                query = None
        finally:
            if query is not None:
                self.stop_query(query)

    def _watch(self, query: Any) -> None:
        """Until the run is done or paused: wait for the query, flush the metrics sink between polls,
        and stop once a finite file is replayed."""
        while not self.done() and not self.batches.paused:
            try:
                terminated = query.awaitTermination(0.5)
            except Exception as exc:  # noqa: BLE001 - StreamingQueryException from a failed batch
                if self.done():
                    return  # the batch refused while stopping; it is replayed on the next start
                if self.batches.batch_error is not None:  # our own message, not Spark's wrapper of it
                    raise EngineFailed(f"streaming query failed: {first_line(self.batches.batch_error)}") from None
                raise EngineFailed(f"streaming query failed: {first_line(exc)}") from None
            if terminated:
                return
            if self.batches.sink is not None:
                self.batches.sink.flush()
            if self.cfg.source == "file" and self.file_exhausted(query):
                self.log("input file fully replayed; stopping")
                self.stop_requested.set()

    def file_exhausted(self, query: Any) -> bool:
        """A finite file is done when the query has had no data for a few trigger intervals."""
        status = query.status or {}
        busy = status.get("isDataAvailable") or status.get("isTriggerActive") or self.batches.batches_done == 0
        now = time.monotonic()
        if busy:
            self._idle_since = None
            return False
        if self._idle_since is None:
            self._idle_since = now
        return now - self._idle_since > max(3 * self.cfg.interval, 3.0)

    def stop_query(self, query: Any) -> None:
        """Stop between batches: new batches refuse to start, the running one finishes first."""
        self._stopping = True
        try:
            with self.in_batch:
                pass
            await_trigger_end(query)
            query.stop()
        except Exception:  # noqa: BLE001 - the query may already have failed on the refused batch
            pass
        finally:
            self._stopping = False

    def wait_resume(self) -> None:
        """Paused: the query is stopped; poll (:meth:`Batches.while_paused`) until the run is no
        longer paused, or it is done."""
        self.log("paused: query stopped, polling for resume")
        self.batches.mark_run("paused")
        while self.batches.paused and not self.done():
            time.sleep(0.5)
            self.batches.while_paused()
        self.batches.mark_run("running")
