"""Compile groupings' numba kernels in a background process while a runtime starts.

numba compiles a kernel on its first call in a process and caches it on disk (``cache=True``); every
later process loads it in milliseconds.  After a plain ``pip install`` the cache is empty, and the
Spark engine's first batch would compile the live grouping's kernels (in its executors) and every
shadow grouping's (in its driver) — most of a minute on two cores.  :class:`BackgroundWarmup` runs
``python -m skewlab.engine.cli.warmup LIVE SHADOW...`` as a child process (its own interpreter: no
lock shared with the driver), which compiles the live grouping first (while Spark starts), then the
shadows one by one, printing ``ready NAME`` as each is in the cache (and ``compiling NAME`` first when
NAME was not: :meth:`BackgroundWarmup.wait_until_known` tells a cached grouping from one that compiles).  The engine starts its query
once the live grouping is ready and lets each shadow join when its line arrives.  With a warm cache
the child only loads the kernels and is done in seconds; the engine says "compiling" only when the
child does (``on_compiling``), never at a start that merely loads the cache.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Callable, Sequence

__all__ = ["BackgroundWarmup"]


class BackgroundWarmup:
    """One warm-up child process over ``names`` (in order) and the names it has reported ready."""

    def __init__(self, names: Sequence[str], on_compiling: Callable[[str], None] | None = None) -> None:
        """Start the child over ``names``; ``on_compiling(name)`` is called (in the reader thread) once
        per name the child finds missing from numba's cache, when it starts compiling it."""
        self.names = list(dict.fromkeys(names))
        self._on_compiling = on_compiling
        self.started = time.monotonic()
        self._ready: dict[str, float] = {}
        self._compiling: set[str] = set()
        self._lock = threading.Lock()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "skewlab.engine.cli.warmup", *self.names],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
        self._reader = threading.Thread(target=self._read, name="skewlab-warmup", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            word, _, name = line.strip().partition(" ")
            if word == "ready" and name:
                with self._lock:
                    self._ready[name] = time.monotonic() - self.started
            elif word == "compiling" and name:
                with self._lock:
                    new = name not in self._compiling
                    self._compiling.add(name)
                if new and self._on_compiling is not None:
                    self._on_compiling(name)
        self._proc.wait()

    def ready(self) -> dict[str, float]:
        """Names compiled so far → seconds after the start at which each was ready."""
        with self._lock:
            return dict(self._ready)

    def compiling(self) -> frozenset[str]:
        """Names the child found missing from numba's cache (it compiles or compiled them)."""
        with self._lock:
            return frozenset(self._compiling)

    def wait_until_known(self, name: str, stop: threading.Event | None = None) -> bool:
        """Block until the child has either reported ``name`` ready or started compiling it (or exited,
        or ``stop`` is set); returns whether ``name`` is ready.  A cached grouping is ready within the
        child's start-up and cache loads, a missing one says ``compiling`` at its first kernel."""
        while name not in self.ready() and name not in self.compiling():
            if self.finished or (stop is not None and stop.is_set()):
                break
            time.sleep(0.05)
        return name in self.ready()

    @property
    def finished(self) -> bool:
        """The child has exited (all names ready, or it failed: then the engine compiles what is left itself)."""
        return not self._reader.is_alive()

    def wait_for(self, name: str, stop: threading.Event | None = None,
                 progress: Callable[[float], None] | None = None, every: float = 10.0) -> bool:
        """Block until ``name`` is ready (True), the child has exited without it or ``stop`` is set (False);
        ``progress(seconds waited)`` is called every ``every`` seconds of the wait."""
        waiting_since = time.monotonic()
        next_progress = waiting_since + every
        while name not in self.ready():
            if self.finished or (stop is not None and stop.is_set()):
                return name in self.ready()
            time.sleep(0.1)
            now = time.monotonic()
            if progress is not None and now >= next_progress and name not in self.ready():
                progress(now - waiting_since)
                next_progress = now + every
        return True

    def close(self) -> None:
        """Stop the child if it still runs (the run ended first)."""
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._reader.join(timeout=5)
