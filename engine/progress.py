"""Progress of long commands on stderr: a bar on a terminal, plain lines in a log.

* On a terminal (or with ``force``): a bar redrawn in place (at most 5 times a second), first drawn
  after ``delay`` seconds (2 by default) and cleared by ``close()``.
* Anywhere else (a pipe, a log file, CI): one line ``LABEL: DONE/TOTAL (PCT) ...`` every
  :data:`LOG_EVERY` seconds, the first when the run has lasted that long, so shorter runs print
  nothing.

Progress never goes to stdout, so machine-readable output (``--json``) stays clean.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["LOG_EVERY", "Progress"]

#: seconds between two progress lines on a stream that is not a terminal
LOG_EVERY = 10.0


class Progress:
    """``Progress(total, label)``; call ``update(done)``; ``close()`` clears the bar."""

    def __init__(self, total: int, label: str = "", *, stream: TextIO | None = None, delay: float = 2.0, force: bool = False):
        self.total = max(int(total), 1)
        self.label = label
        self.stream = stream or sys.stderr
        self.terminal = force or bool(getattr(self.stream, "isatty", lambda: False)())
        self.delay = delay
        self.started = time.perf_counter()
        self._last = 0.0
        self._logged = self.started
        self._shown = False

    def update(self, done: int, extra: str = "") -> None:
        now = time.perf_counter()
        elapsed = now - self.started
        frac = min(done / self.total, 1.0)
        eta = (elapsed / frac - elapsed) if frac > 0 else 0.0
        if not self.terminal:
            if now - self._logged < LOG_EVERY:
                return
            self._logged = now
            line = f"{self.label}: {done}/{self.total} ({frac:.1%}) {elapsed:.0f} s, eta {eta:.0f} s {extra}"
            self.stream.write(line.rstrip() + "\n")
            self.stream.flush()
            return
        if elapsed < self.delay or (now - self._last < 0.2 and done < self.total):
            return
        self._last = now
        bar = "#" * int(frac * 30)
        line = f"\r{self.label} [{bar:<30}] {frac:6.1%} {done}/{self.total} {elapsed:5.1f}s eta {eta:4.0f}s {extra}"
        self.stream.write(line[:160])
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            self.stream.write("\r" + " " * 160 + "\r")
            self.stream.flush()
