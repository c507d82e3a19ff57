"""A small progress bar on stderr for long commands (shown only on a terminal, after ~2 s)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """``Progress(total, label)``; call ``update(done)``; ``close()`` clears the line.

    Prints nothing when the stream is not a terminal (unless ``force``) or before ``delay`` seconds
    have passed, so short runs and machine-readable output stay clean.
    """

    def __init__(self, total: int, label: str = "", *, stream: TextIO | None = None, delay: float = 2.0, force: bool = False):
        self.total = max(int(total), 1)
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = force or bool(getattr(self.stream, "isatty", lambda: False)())
        self.delay = delay
        self.started = time.perf_counter()
        self._last = 0.0
        self._shown = False

    def update(self, done: int, extra: str = "") -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        elapsed = now - self.started
        if elapsed < self.delay or (now - self._last < 0.2 and done < self.total):
            return
        self._last = now
        frac = min(done / self.total, 1.0)
        bar = "#" * int(frac * 30)
        eta = (elapsed / frac - elapsed) if frac > 0 else 0.0
        line = f"\r{self.label} [{bar:<30}] {frac:6.1%} {done}/{self.total} {elapsed:5.1f}s eta {eta:4.0f}s {extra}"
        self.stream.write(line[:160])
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            self.stream.write("\r" + " " * 160 + "\r")
            self.stream.flush()
