"""Routing one interval over S sources: the routing step every runtime and the shadow evaluator share.

Every interval's tuples are dealt to the S sources round robin (tuple i of the stream belongs to
source i mod S, the usual simulation set-up of Nasir et al. Sec. V with several sources, each with its
own local view).  Each source routes its sub-sequence in stream order with ``router.route``; the
sources' states are independent, so routing each source's batch in one call has exactly the
semantics of interleaving them tuple by tuple.

Used by the local runtime (:mod:`skewlab.engine.runtimes.local`), the shadow "what-if" (:mod:`skewlab.engine.control.shadow`)
and the benchmarks; it depends on the router only, on no runtime.
"""

from __future__ import annotations

import time

import numpy as np

from skewlab.engine.algorithms.grouping import Router

__all__ = ["route_sources"]


def route_sources(router: Router, fps: np.ndarray, n_sources: int, offset: int = 0) -> tuple[np.ndarray, float]:
    """Route one interval's fingerprints; tuple i belongs to source ``(offset + i) mod n_sources``.

    Returns the workers and the seconds spent inside ``router.route`` (routing throughput).
    """
    m = fps.size
    workers = np.empty(m, dtype=np.int64)
    spent = 0.0
    for s in range(n_sources):
        first = (s - offset) % n_sources
        sel = slice(first, None, n_sources)
        part = fps[sel]
        t0 = time.perf_counter()
        routed = router.route(part, s)
        spent += time.perf_counter() - t0
        workers[sel] = routed
    return workers, spent
