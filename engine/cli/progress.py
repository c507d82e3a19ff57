"""Progress of long commands on stderr: a bar on a terminal, plain lines in a log.

* On a terminal (or with ``force``): a :mod:`tqdm` bar redrawn in place (at most 5 times a second),
  first drawn after ``delay`` seconds (2 by default) and cleared by ``close()``.
* Anywhere else (a pipe, a log file, CI): one line ``LABEL: DONE/TOTAL (PCT) ...`` every
  :data:`LOG_EVERY` seconds, the first when the run has lasted that long, so shorter runs print
  nothing.  This part is written here: tqdm on a non-terminal still redraws with ``\\r`` and draws
  its first line at the start, which a log must not get.

Progress never goes to stdout, so machine-readable output (``--json``) stays clean.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from tqdm import tqdm

__all__ = ["LOG_EVERY", "Progress"]

#: seconds between two progress lines on a stream that is not a terminal
LOG_EVERY = 10.0
_BAR_FORMAT = "{desc} [{bar:30}] {percentage:5.1f}% {n}/{total} {elapsed} eta {remaining}{postfix}"


class Progress:
    """``Progress(total, label)``; call ``update(done)`` (absolute count); ``close()`` clears the bar.

    ``total`` may be changed between updates (``simulate`` learns a file's length late)."""

    def __init__(self, total: int, label: str = "", *, stream: TextIO | None = None, delay: float = 2.0, force: bool = False):
        self.label = label
        self.stream = stream or sys.stderr
        self.terminal = force or bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.perf_counter()
        self._logged = self.started
        self._bar = tqdm(total=max(int(total), 1), desc=label, file=self.stream, delay=delay, mininterval=0.2,
                         leave=False, bar_format=_BAR_FORMAT, ascii=" #", disable=False) if self.terminal else None
        self.total = total

    @property
    def total(self) -> int:
        return self._total

    @total.setter
    def total(self, value: int) -> None:
        self._total = max(int(value), 1)
        if self._bar is not None:
            self._bar.total = self._total

    def update(self, done: int, extra: str = "") -> None:
        if self._bar is not None:
            if extra:
                self._bar.set_postfix_str(extra, refresh=False)
            self._bar.update(int(done) - self._bar.n)
            return
        now = time.perf_counter()
        if now - self._logged < LOG_EVERY:
            return
        self._logged = now
        elapsed = now - self.started
        frac = min(done / self.total, 1.0)
        eta = (elapsed / frac - elapsed) if frac > 0 else 0.0
        line = f"{self.label}: {done}/{self.total} ({frac:.1%}) {elapsed:.0f} s, eta {eta:.0f} s {extra}"
        self.stream.write(line.rstrip() + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
