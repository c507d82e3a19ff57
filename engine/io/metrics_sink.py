"""Buffered, retrying metric writes: the metrics database may go away, the stream must not stop.

The engine hands every finished interval to :meth:`MetricsSink.put`.  Writes go through
:meth:`skewlab.storage.store.Store.record_interval`, which is idempotent by (run, batch), so retrying a
write that may or may not have landed is always safe.  When the database is unreachable the rows stay
in an in-memory queue (bounded only by ``max_buffer``; the oldest rows are *never* dropped silently:
past the bound the engine is told to pause consumption) and are retried with exponential back-off on
every later call.  :attr:`status` says what is going on for the status line.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from skewlab.storage.records import IntervalRecord

__all__ = ["MetricsSink", "PendingInterval"]

try:  # errors that mean "the database is not available now"; anything else is a bug and raises
    from sqlalchemy.exc import InterfaceError, OperationalError

    _TRANSIENT: tuple[type[BaseException], ...] = (OperationalError, InterfaceError, OSError, ConnectionError,
                                                   TimeoutError)
except ImportError:  # pragma: no cover
    _TRANSIENT = (OSError, ConnectionError, TimeoutError)


@dataclass
class PendingInterval:
    """One interval waiting to be written: its record and the operator commands to mark with it."""

    record: IntervalRecord
    #: (id, status, reason[, applied batch]): the batch from which the command takes effect, by default this one
    commands: list[tuple] = field(default_factory=list)

    @property
    def batch_id(self) -> int:
        return self.record.batch_id

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickle; a snapshot written before :class:`IntervalRecord` existed held the parts as
        ``batch_id, interval, metrics, kwargs``: they become the record."""
        if "record" not in state:
            state = {"record": IntervalRecord.from_parts(state["batch_id"], state["interval"], state["metrics"],
                                                         **state.get("kwargs", {})),
                     "commands": state.get("commands", [])}
        self.__dict__.update(state)


class MetricsSink:
    def __init__(self, store: Any, run_id: int, *, max_buffer: int = 1_000,
                 clock: Callable[[], float] = time.monotonic, log: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.run_id = run_id
        self.queue: deque[PendingInterval] = deque()
        self.max_buffer = int(max_buffer)
        self.clock = clock
        self.log = log
        self.failures = 0
        self.written = 0
        self.last_error = ""
        self._next_try = 0.0
        self._backoff = 0.5
        self._lock = threading.RLock()  # the engine flushes from its main loop and from batch callbacks

    @property
    def backlog(self) -> int:
        return len(self.queue)

    @property
    def full(self) -> bool:
        return len(self.queue) >= self.max_buffer

    @property
    def status(self) -> str:
        if not self.queue:
            return "db ok"
        return f"db DOWN, {len(self.queue)} interval(s) buffered ({self.last_error[:60]})"

    def enqueue(self, item: PendingInterval) -> None:
        """Buffer a row without writing yet."""
        with self._lock:
            self.queue.append(item)

    def put(self, item: PendingInterval) -> None:
        self.enqueue(item)
        self.flush()

    def pending(self) -> list[PendingInterval]:
        with self._lock:
            return list(self.queue)

    def flush(self, force: bool = False) -> bool:
        """Try to write everything buffered; True when the buffer is empty afterwards."""
        with self._lock:
            return self._flush(force)

    def _flush(self, force: bool) -> bool:
        if not self.queue:
            return True
        if not force and self.clock() < self._next_try:
            return False
        while self.queue:
            item = self.queue[0]
            try:
                self.store.record_interval(self.run_id, item.record)
                for cid, status, reason, *applied in item.commands:
                    self.store.mark_command(cid, status, reason=reason, run_id=self.run_id,
                                            applied_batch=applied[0] if applied else item.batch_id)
            except _TRANSIENT as exc:  # database unreachable/failing: keep the row, retry later
                self.failures += 1
                first = not self.last_error
                self.last_error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                self._next_try = self.clock() + self._backoff
                self._backoff = min(self._backoff * 2, 10.0)
                if first and self.log:
                    self.log(f"metrics database unavailable, buffering ({self.last_error[:120]})")
                return False
            self.queue.popleft()
            self.written += 1
        if self.last_error and self.log:
            self.log(f"metrics database back, {self.failures} failed attempt(s), nothing lost")
        self.last_error = ""
        self._backoff = 0.5
        self._next_try = 0.0
        return True
