"""A run recorded as the Spark engine records it, without Spark: the driver's per-batch step
(:func:`skewlab.engine.runtimes.spark.driver_step.step`) on made-up batch outputs, its interval records
written through the store.  It starts on ``mixed`` (gate off, θmax 0.01, planning from each interval alone) with a skew that moves every
batch, and a ``set-algorithm llfd`` command arrives in batch 3, whose interval also rebalances: the
rebalance of interval 3 and the switch (in effect from interval 4) leave in one export (batch 4) and
are imported in batch 5; interval 4's rebalance is imported in batch 6.  The window total grows from
batch to batch, so a command's moves and its interval do not see the same total state.
"""

from __future__ import annotations

import pickle
from typing import Any, Callable, Mapping

import numpy as np

from skewlab.engine.algorithms import registry
from skewlab.engine.algorithms.keys import FingerprintVocabulary
from skewlab.engine.control.controller import Controller
from skewlab.engine.runtimes.spark.driver_step import DriverSettings, DriverSnapshot, StepInput, step
from skewlab.engine.runtimes.spark.messages import BatchOutput, SourceSide, WorkerSummary
from skewlab.engine.runtimes.spark.state_transfer import ExportRef
from skewlab.storage import connect

KEYS = np.arange(1, 41, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
SKEW = (np.arange(40, 0, -1) ** 2).astype(np.int64)
SETTINGS = DriverSettings("count", True, values="none", top_k=3)
COMMAND_BATCH = 3  # the command is read in this batch and applied from the next interval
SWITCH = {"algorithm": "llfd", "params": {"gate": False, "theta_max": 0.01, "plan_decay": 0.0}}


def _output(b: int, s: DriverSnapshot, exports: tuple[ExportRef, ...], seq: int,
            dead: Mapping[str, tuple[int, tuple[str, ...]]] | None = None, skew: np.ndarray = SKEW) -> BatchOutput:
    counts = np.roll(skew, 7 * b) * (1 + b)
    router = pickle.loads(pickle.dumps(s.controller.planner.router))
    workers = np.asarray(router.route(KEYS.copy()), dtype=np.int64)
    return BatchOutput(workers=workers, fps=KEYS.copy(), counts=counts,
                       states={0: SourceSide(0, b, int(counts.sum()), consumed=seq + int(counts.sum()), first_seq=seq,
                                             dead_letters=dict(dead or {}))},
                       dead_letters={r: [c, list(x)] for r, (c, x) in (dead or {}).items()},
                       exports=exports,
                       summaries={w: WorkerSummary(b, keys=10, held=0, state_bytes=100) for w in range(4)})


def record_run(url: str, batches: int = 7, name: str = "moves",
               dead: Callable[[int], Mapping[str, tuple[int, tuple[str, ...]]]] | None = None,
               task_seconds: Callable[[int], Mapping[int, float]] | None = None,
               skew: np.ndarray = SKEW) -> tuple[int, int, list[dict[str, Any]]]:
    """Run ``batches`` batches into the database at ``url``; the run id, the command id and the
    controller's interval rows (``state_moved``, ``total_state``, ``migration_cost`` of every interval).
    ``dead(b)``: the dead letters the source reports in batch ``b`` (reason → (count, samples));
    ``task_seconds(b)``: the workers' task times of batch ``b`` (each batch's wall time is 0.25 s);
    ``skew``: the keys' tuple counts of batch 0 (batch ``b``: rolled by ``7 b``, times ``b + 1``)."""
    c = Controller(registry.create("mixed", 4, 1, 0, {"gate": False, "theta_max": 0.01, "plan_decay": 0.0}), FingerprintVocabulary(),
                   window=3)
    c.track_orders = True
    store = connect(url)
    try:
        run = store.create_run("mixed", {"gate": False, "theta_max": 0.01, "plan_decay": 0.0}, n_workers=4, name=name,
                               config={"interval": 1.0, "max_workers": 4})
        cid = store.submit_command("set-algorithm", SWITCH, run_id=run)
        s = DriverSnapshot(run_id=run, controller=c, shadow=None, partitions=4)
        exports: tuple[ExportRef, ...] = ()
        seq, rows = 0, []
        for b in range(batches):
            cmds = ({"id": cid, "kind": "set-algorithm", "payload": SWITCH},) if b == COMMAND_BATCH else ()
            out = _output(b, s, exports, seq, dead(b) if dead else None, skew)
            s, d = step(s, StepInput(b, out, started=0.0, clock=lambda: 0.25, wall=1000.0 + b, commands=cmds,
                                     task_seconds=task_seconds(b) if task_seconds else {}), SETTINGS)
            seq += int(out.counts.sum())
            exports = tuple(ExportRef(b + 1, w, t, f"migrations/batch={b + 1}/from-{w}-to-{t}.blob", 64, int(f.size))
                            for w, p in d.route.snapshot.control.items() for t, f in p.exports.items())
            store.record_interval(run, d.record)
            for m in d.marks:
                store.mark_command(m.command_id, m.status, applied_batch=m.applied_batch, run_id=run)
            rows.append(d.row)
        return run, cid, rows
    finally:
        store.close()
