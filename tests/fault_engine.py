"""``python -m tests.fault_engine PHASE:BATCH[:export|:import] ARGS...``: run ``skewlab ARGS...`` (the
real command line, :func:`skewlab.cli.main`) with a hook that kills the process with SIGKILL at
``PHASE`` of the first batch ``>= BATCH`` (:mod:`skewlab.engine.runtimes.spark.batch_phases`); with
``:export`` the first such batch whose workers exported state, with ``:import`` the first whose
workers import state.  Before the kill it prints ``fault injection: SIGKILL at PHASE of batch N`` to
stderr.  The exactly-once tests (tests/end_to_end/test_exactly_once.py) start the engine this way."""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass

from skewlab.engine.runtimes.spark import batch_phases


@dataclass(frozen=True)
class Fault:
    phase: str
    batch: int
    #: "", "export" or "import": fire only in a batch whose workers export / import state
    moving: str = ""

    @classmethod
    def parse(cls, spec: str) -> "Fault":
        """``PHASE:BATCH[:export|:import]``; ValueError for anything else (a typo must not make a
        test whose fault never fires)."""
        parts = spec.split(":")
        if not 2 <= len(parts) <= 3 or parts[0] not in batch_phases.PHASES or not parts[1].isdigit() \
                or (len(parts) == 3 and parts[2] not in ("export", "import")):
            raise ValueError(f"fault spec {spec!r}: want PHASE:BATCH[:export|:import], PHASE one of "
                             f"{'|'.join(batch_phases.PHASES)}")
        return cls(parts[0], int(parts[1]), parts[2] if len(parts) == 3 else "")

    def fires(self, phase: str, batch_id: int, *, exports: bool, imports: bool) -> bool:
        if phase != self.phase or batch_id < self.batch:
            return False
        return {"": True, "export": exports, "import": imports}[self.moving]


def kill_at(fault: Fault) -> batch_phases.PhaseHook:
    """The hook that kills this process at ``fault``."""
    def hook(phase: str, batch_id: int, *, exports: bool, imports: bool) -> None:
        if fault.fires(phase, batch_id, exports=exports, imports=imports):
            print(f"fault injection: SIGKILL at {phase} of batch {batch_id}", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
    return hook


def main(argv: list[str]) -> int:
    from skewlab.cli import main as skewlab_main

    batch_phases.hook = kill_at(Fault.parse(argv[0]))
    return skewlab_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
