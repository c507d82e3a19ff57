"""The named points of one micro-batch on the driver, and the hook called at each.

The engine's batch function (:meth:`skewlab.engine.runtimes.spark.engine.SparkEngine.process_batch`)
passes these points in order; at each it calls :data:`hook` — nothing in a deployment.  The
exactly-once tests install a hook that kills the engine at one of them (tests/fault_engine.py), so
that a crash lands exactly between two steps whose order the checkpoint's design depends on
(:mod:`skewlab.engine.io.checkpoint`):

``begun``
    the batch function started, the operator has not run: the previous batch is committed (with
    ``imports``: between a migration's export batch and its import batch);
``collected``
    the operator ran and its state is committed in Spark's state store; nothing is applied (not
    reached for a batch the restored snapshot already applied);
``published``
    the next batch's routing snapshot (with its imports) is written; the engine's snapshot is not;
``saved``
    the engine's snapshot is written; Spark has not committed the batch.

At every point the hook learns whether the batch's workers exported state (``exports``: known from
``collected`` on) and whether they import state (``imports``).
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["PHASES", "PhaseHook", "hook", "reached"]

#: the points of a batch, in the order the driver passes them
PHASES = ("begun", "collected", "published", "saved")


class PhaseHook(Protocol):
    def __call__(self, phase: str, batch_id: int, *, exports: bool, imports: bool) -> None: ...


#: called at each point of each batch; ``None`` (the default) calls nothing
hook: PhaseHook | None = None


def reached(phase: str, batch_id: int, *, exports: bool = False, imports: bool = False) -> None:
    """The driver reached ``phase`` (one of :data:`PHASES`) of batch ``batch_id``: call :data:`hook`."""
    if hook is not None:
        hook(phase, batch_id, exports=exports, imports=imports)
