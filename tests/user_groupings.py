"""Users' groupings that are wrong in one way each, for the start-up checks of
:func:`skewlab.engine.algorithms.registry.check_grouping` (named ``tests.user_groupings:Class``)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from skewlab.engine.algorithms.grouping import Planner, Router, StreamingPlanner
from skewlab.engine.algorithms.groupings.basic import HashRouter
from skewlab.engine.config.params import Param


class NoRouter(Planner):
    """Leaves the abstract make_router unimplemented."""


class NotParams(StreamingPlanner):
    params: ClassVar[tuple] = ("epsilon",)
    router_class = HashRouter


class BadDefault(StreamingPlanner):
    params: ClassVar[tuple[Param, ...]] = (Param("k", "int", 0, "a count", low=1, high=10),)
    router_class = HashRouter


class FailsToStart(StreamingPlanner):
    router_class = HashRouter

    def reset_planning(self) -> None:
        raise RuntimeError("table file missing")


class OffByOneRouter(Router):
    def route(self, fps: np.ndarray, source: int = 0) -> np.ndarray:
        return np.full(len(fps), self.n_workers, dtype=np.int64)


class OffByOne(StreamingPlanner):
    router_class = OffByOneRouter


class LambdaRouter(Router):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.pick = lambda fps: fps % np.uint64(self.n_workers)

    def route(self, fps: np.ndarray, source: int = 0) -> np.ndarray:
        return self.pick(fps).astype(np.int64)


class Unpicklable(StreamingPlanner):
    router_class = LambdaRouter
