"""The routing kernels of an engine run in the tests, compiled in the test process instead of a warm-up
child per run.

:class:`SparkEngine <skewlab.engine.runtimes.spark.engine.SparkEngine>` starts
:class:`~skewlab.engine.runtimes.background_warmup.BackgroundWarmup` (a ``python -m
skewlab.engine.cli.warmup`` child) at every :meth:`run`: a fresh interpreter that imports numba and loads
the kernels, beside Spark, on a 2-core machine, about 27 times in the default suite.  The tests' engine
runs are the driver in this very process, so :class:`KernelsCompiledInProcess` compiles (or loads from
numba's cache) each grouping's kernels here, once per test session, through the same
:func:`skewlab.engine.cli.warmup.warm_up`, and reports them ready; the executors then load them from the
on-disk cache as after the child.  The fixture :func:`kernels_in_process` (autouse, tests/conftest.py)
puts it in place for every in-process engine run; the child itself is tested on its own
(tests/engine/test_shadow.py, tests/engine/test_warmup.py) and by the tests that run the ``skewlab``
command in a subprocess.  :class:`KernelsCompilingUntilReleased` stands for a cold cache in the test of
what a run does while its grouping's kernels compile.
"""

from __future__ import annotations

import sys
import threading
from typing import Callable, Sequence

import pytest

__all__ = ["KernelsCompiledInProcess", "KernelsCompilingUntilReleased", "kernels_in_process"]

_ENGINE = "skewlab.engine.runtimes.spark.engine"
_warmed: set[str] = set()  # groupings compiled (or loaded) in this process, for the whole session


class KernelsCompiledInProcess:
    """What the engine reads of a :class:`BackgroundWarmup`, with every name ready on construction."""

    def __init__(self, names: Sequence[str], on_compiling: Callable[[str], None] | None = None) -> None:
        """``on_compiling``: not called — the names compile (or load from numba's cache) here, before
        the engine goes on, as a warm cache would have them."""
        from skewlab.engine.cli.warmup import warm_up

        self.names = list(dict.fromkeys(names))
        missing = [n for n in self.names if n not in _warmed]
        if missing:
            warm_up(names=missing, yield_cpu=False)
            _warmed.update(missing)

    def ready(self) -> dict[str, float]:
        return dict.fromkeys(self.names, 0.0)

    def compiling(self) -> frozenset[str]:
        return frozenset()

    @property
    def finished(self) -> bool:
        return True

    def wait_until_known(self, name: str, stop: threading.Event | None = None) -> bool:
        return name in self.names

    def wait_for(self, name: str, stop: threading.Event | None = None,
                 progress: Callable[[float], None] | None = None, every: float = 10.0) -> bool:
        return name in self.names

    def close(self) -> None:
        pass


class KernelsCompilingUntilReleased(KernelsCompiledInProcess):
    """As :class:`KernelsCompiledInProcess`, but the names in ``held`` are reported compiling (as the
    child reports a grouping missing from numba's cache) until :meth:`release`: a cold cache, without
    the minutes of compiling one.  The child's own report of a cold cache is tested with the child
    (tests/engine/test_shadow.py)."""

    held: set[str] = set()  # set by the test before the engine starts

    def __init__(self, names: Sequence[str], on_compiling: Callable[[str], None] | None = None) -> None:
        super().__init__(names)
        self._held = set(self.held) & set(self.names)
        self._lock = threading.Lock()
        for name in sorted(self._held) if on_compiling is not None else ():
            on_compiling(name)  # as the child reports a name missing from the cache

    def release(self) -> None:
        with self._lock:
            self._held.clear()

    def ready(self) -> dict[str, float]:
        with self._lock:
            return {n: 0.0 for n in self.names if n not in self._held}

    def compiling(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._held)

    @property
    def finished(self) -> bool:
        with self._lock:
            return not self._held

    def wait_until_known(self, name: str, stop: threading.Event | None = None) -> bool:
        return name in self.ready()

    def wait_for(self, name: str, stop: threading.Event | None = None,
                 progress: Callable[[float], None] | None = None, every: float = 10.0) -> bool:
        return name in self.ready()


@pytest.fixture(autouse=True)
def kernels_in_process(monkeypatch):
    """Engine runs of this test use :class:`KernelsCompiledInProcess`."""
    engine = sys.modules.get(_ENGINE)  # imported by the test modules that run the engine in-process
    if engine is not None:
        monkeypatch.setattr(engine, "BackgroundWarmup", KernelsCompiledInProcess)
    yield
