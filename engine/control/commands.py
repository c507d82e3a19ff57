"""Operator commands: validation against the registry's declarations, and application to a controller.

Commands travel dashboard/CLI → ``commands`` table → engine.  The store accepts only the known kinds
and JSON-object payloads; here the engine validates the *content* (algorithm registered, parameters
declared and in range, worker count in the range of :data:`skewlab.engine.config.settings.WORKERS`, operator/grouping
compatible) and either applies the
command or rejects it with a one-line reason.  Nothing in a payload is evaluated: names are looked up
in the registry, values are parsed by :class:`~skewlab.engine.config.params.Param`.

Semantics are absolute: ``set-workers 8`` means "8 workers", so applying a command twice is harmless.

The same records drive both runtimes: the Spark engine applies the commands it reads from the table,
the local runtime (``skewlab simulate --change``) a schedule of :class:`ScheduledCommand`; both go
through :func:`apply_command`.

=================  ==========================================  ======================================
kind               payload                                     effect
=================  ==========================================  ======================================
``set-algorithm``  ``{"algorithm": NAME, "params": {...}}``    switch (state follows the migration
                                                               path); params default as declared
``set-param``      ``{"params": {NAME: VALUE, ...}}``          change parameters of the current one
``set-workers``    ``{"workers": N}``                          resize (migration path)
``pause``          ``{}``                                      stop consuming after the current batch
                                                               (a no-op while paused)
``resume``         ``{}``                                      consume again (a no-op while running)
=================  ==========================================  ======================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from skewlab.engine.algorithms import registry
from skewlab.engine.config.params import ParamError
from skewlab.engine.config.settings import MAX_WORKERS, WORKERS, check
from skewlab.engine.operators import is_mergeable, split_key_refusal
from skewlab.shared import COMMAND_KINDS

__all__ = ["CommandError", "CommandResult", "MAX_WORKERS", "ScheduledCommand", "apply_command", "validate_command"]

_FIELDS = {
    "set-algorithm": {"algorithm", "params"},
    "set-param": {"params"},
    "set-workers": {"workers"},
    "pause": set(),
    "resume": set(),
}


class CommandError(ValueError):
    """The command cannot be applied; the message is the rejection reason (one line)."""


@dataclass
class CommandResult:
    status: str  # "applied" | "rejected"
    reason: str = ""
    action: str = ""  # "switch", "params", "workers", "pause", "resume", "noop"
    event: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ScheduledCommand:
    """A command (``kind`` and ``payload`` as in the table above) applied before interval ``at`` starts."""

    at: int
    kind: str
    payload: Mapping[str, Any] = field(default_factory=dict)


def validate_command(
    kind: Any,
    payload: Any,
    *,
    current_algorithm: str,
    current_params: Mapping[str, Any],
    operator: str = "count",
    mergeable: bool | None = None,
    max_workers: int = MAX_WORKERS,
) -> tuple[str, dict[str, Any]]:
    """Check a command; return ``(kind, normalised payload)`` or raise :class:`CommandError`.

    ``operator``: the run's operator; ``mergeable``: whether it is (the run's stored
    ``operator_mergeable``; ``None``: :func:`skewlab.engine.operators.is_mergeable` of the name)."""
    if not isinstance(kind, str) or kind not in COMMAND_KINDS:
        raise CommandError(f"unknown command kind {str(kind)[:40]!r}; known: {', '.join(COMMAND_KINDS)}")
    if payload is None:
        payload = {}
    if not isinstance(payload, Mapping):
        raise CommandError(f"{kind}: payload must be a JSON object")
    extra = set(map(str, payload)) - _FIELDS[kind]
    if extra:
        raise CommandError(f"{kind}: unexpected field(s) {', '.join(sorted(extra))[:80]}")
    try:
        if kind == "set-algorithm":
            name = payload.get("algorithm")
            if not isinstance(name, str):
                raise CommandError("set-algorithm: 'algorithm' must be a registry name or package.module:Class")
            if len(name) > 64:
                raise CommandError(f"set-algorithm: unknown algorithm {name[:40]!r}... (name too long)")
            cls = registry.get(name)
            refusal = split_key_refusal(operator, is_mergeable(operator, mergeable), name, cls.single_owner)
            if refusal:
                raise CommandError(f"set-algorithm: {refusal}")
            params = payload.get("params") or {}
            if not isinstance(params, Mapping):
                raise CommandError("set-algorithm: 'params' must be an object")
            return kind, {"algorithm": name, "params": registry.validate_params(name, params)}
        if kind == "set-param":
            params = payload.get("params")
            if not isinstance(params, Mapping) or not params:
                raise CommandError("set-param: 'params' must be a non-empty object of name: value")
            validated = registry.validate_params(current_algorithm, {**dict(current_params), **dict(params)})
            return kind, {"params": validated}
        if kind == "set-workers":
            n = payload.get("workers")
            if isinstance(n, bool) or not isinstance(n, (int, float, str)):
                raise CommandError("set-workers: 'workers' must be an integer")
            try:
                n_int = int(n) if not isinstance(n, float) or float(n).is_integer() else None
            except ValueError:
                n_int = None
            if n_int is None:
                raise CommandError(f"set-workers: 'workers' must be an integer, got {str(n)[:20]!r}")
            try:
                check(WORKERS, n_int, high=max_workers)
            except ParamError as exc:
                # below MAX_WORKERS, the limit is the Spark run's own --max-workers
                limit = "" if max_workers >= MAX_WORKERS else (
                    " (the run's --max-workers: Spark's state partitions, fixed for the checkpoint's life)")
                raise CommandError(f"set-workers: {exc}{limit}") from None
            return kind, {"workers": n_int}
        return kind, {}
    except ParamError as exc:
        raise CommandError(f"{kind}: {exc}") from None


def apply_command(controller: Any, kind: Any, payload: Any, *, operator: str = "count",
                  mergeable: bool | None = None, max_workers: int = MAX_WORKERS, paused: bool | None = None) -> CommandResult:
    """Validate and apply one command to a :class:`~skewlab.engine.control.controller.Controller`.

    Never raises for bad commands: returns a rejected result with the reason, state unchanged.
    Pause/resume are returned as actions for the runtime to carry out; ``paused`` is the runtime's
    operator pause state (None: unknown), with which a pause while paused, or a resume while running,
    is an applied ``noop`` (no second pause / resume event).
    """
    g = controller.planner
    try:
        kind, clean = validate_command(kind, payload, current_algorithm=g.name, current_params=g.p,
                                       operator=operator, mergeable=mergeable, max_workers=max_workers)
    except CommandError as exc:
        return CommandResult("rejected", str(exc))
    if kind == "set-algorithm":
        if clean["algorithm"] == g.name and clean["params"] == g.p:
            return CommandResult("applied", "already in effect", "noop")
        return CommandResult("applied", "", "switch", controller.switch(clean["algorithm"], clean["params"]))
    if kind == "set-param":
        if clean["params"] == g.p:
            return CommandResult("applied", "already in effect", "noop")
        return CommandResult("applied", "", "params", controller.set_params(clean["params"]))
    if kind == "set-workers":
        if clean["workers"] == g.n_workers:
            return CommandResult("applied", "already in effect", "noop")
        return CommandResult("applied", "", "workers", controller.resize(clean["workers"]))
    if paused is not None and (kind == "pause") == bool(paused):
        return CommandResult("applied", "already paused" if paused else "not paused", "noop")
    return CommandResult("applied", "", kind)
