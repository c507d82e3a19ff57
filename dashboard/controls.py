"""Operator controls: forms from the registry's declarations, validation, authorisation, commands.

The dashboard never changes the engine directly: every action becomes a row of the ``commands``
table (:meth:`skewlab.storage.store.Store.submit_command`) that the engine validates again and marks
``applied`` (with the batch) or ``rejected`` (with its reason).

* **Forms** come from :func:`skewlab.engine.algorithms.registry.describe`: one field per declared parameter, typed by its
  ``kind`` (numbers and text as text fields, ``bool`` and ``choice`` as drop-downs), labelled with its
  range and help.
* **Validation** uses the same declarations as the CLI and the engine: each field through
  :meth:`skewlab.engine.config.params.Param.coerce` (message: the valid range), then the whole command through
  :func:`skewlab.engine.control.commands.validate_command`.  An invalid form is refused here, before any command
  exists.
* **Authorisation** (:class:`Authorizer`) is checked on the server, inside the callback that submits,
  not only by hiding buttons: a read-only dashboard refuses every action, and one with an operator
  token refuses an action whose request does not carry the same token (constant-time comparison).
  The token is never written into a page or a log line.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import replace
from functools import lru_cache
from typing import Any, Mapping, Sequence

from skewlab.engine.algorithms import registry
from skewlab.engine.control.commands import CommandError, validate_command
from skewlab.engine.config.params import Param, ParamError
from skewlab.engine.config.settings import MAX_WORKERS, WORKERS, check
from skewlab.storage.run_state import LIVE_STATUSES

__all__ = [
    "Authorizer",
    "MAX_WORKERS",
    "TOKEN_ENV",
    "TOKEN_MIN_LENGTH",
    "algorithm_catalog",
    "picker_catalog",
    "build_algorithm_command",
    "build_workers_command",
    "workers_range",
    "WORKERS_PARAM",
    "command_message",
    "command_state",
    "is_loopback",
    "not_live",
    "param_declarations",
    "pause_noop",
    "submit",
    "validate_fields",
]

TOKEN_ENV = "SKEWLAB_DASHBOARD_TOKEN"
TOKEN_MIN_LENGTH = 8


def is_loopback(host: str | None) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost`` (the default bind address is 127.0.0.1)."""
    if host is None:
        return True
    h = str(host).strip().strip("[]").lower()
    if h in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


class Authorizer:
    """Who may act: nobody (read-only), anybody on the loopback (no token), or token holders."""

    def __init__(self, token: str | None = None, read_only: bool = False) -> None:
        self._token = token or None
        self.read_only = bool(read_only)

    @property
    def token_required(self) -> bool:
        return self._token is not None and not self.read_only

    def refusal(self, given: Any) -> str | None:
        """None if the action may go ahead, else the reason it is refused (never echoes a token)."""
        if self.read_only:
            return "refused: this dashboard is read-only (no operator token configured)"
        if self._token is None:
            return None
        if not isinstance(given, str) or not given:
            return "refused: an operator token is required for control actions"
        if not hmac.compare_digest(given.encode("utf-8", "surrogatepass"), self._token.encode("utf-8", "surrogatepass")):
            return "refused: wrong operator token"
        return None

    def __repr__(self) -> str:  # never show the token
        return f"Authorizer(read_only={self.read_only}, token={'set' if self._token else 'none'})"


# ------------------------------------------------------------------------------------ declarations
@lru_cache(maxsize=1)
def algorithm_catalog() -> tuple[dict[str, Any], ...]:
    """:func:`skewlab.engine.algorithms.registry.describe`, computed once per process."""
    return tuple(registry.describe())


def picker_catalog(live: str | None) -> dict[str, dict[str, Any]]:
    """The algorithm picker's entries by name: :func:`algorithm_catalog` and, when the run's ``live``
    algorithm is a user's grouping (``package.module:Class``, named by the run, never by the page), its
    :func:`skewlab.engine.algorithms.registry.describe_one` — or, when it does not load in this process,
    an entry without a form (``unavailable``) whose summary says why."""
    catalog = {a["name"]: a for a in algorithm_catalog()}
    if live and live not in catalog:
        try:
            catalog[live] = registry.describe_one(live)
        except ParamError as exc:
            catalog[live] = {"name": live, "summary": f"cannot load it in the dashboard: {exc}", "paper": "",
                             "params": [], "unavailable": True}
    return catalog


def param_declarations(algorithm: str) -> tuple[Param, ...]:
    """The declared parameters of ``algorithm`` (ParamError for an unknown name)."""
    return tuple(registry.get(algorithm).params)


def validate_fields(algorithm: str, names: Sequence[str], values: Sequence[Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Parse form values with the declarations: ``(params, errors)``.

    An empty field of a number, bool or choice parameter is an error (its range and default in one
    line), never a silent default; only free-text (``str``) parameters may be empty."""
    try:
        decl = {p.name: p for p in param_declarations(algorithm)}
    except ParamError as exc:
        return {}, {"": str(exc)}
    params: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name, value in zip(names, values):
        p = decl.get(name)
        if p is None:
            errors[name] = f"unknown parameter {name!r} for {algorithm}"
            continue
        if value is None or (isinstance(value, str) and not value.strip() and p.kind != "str"):
            errors[name] = f"parameter {name}: required, {p.range_text()} (default {p.default})"
            continue
        try:
            params[name] = p.coerce(value)
        except ParamError as exc:
            errors[name] = str(exc)
    return params, errors


def build_algorithm_command(
    form_algorithm: str,
    params: Mapping[str, Any],
    *,
    current_algorithm: str,
    current_params: Mapping[str, Any],
    operator: str = "count",
    mergeable: bool | None = None,
) -> tuple[str, dict[str, Any]]:
    """``set-param`` (only the changed values) when the form is for the live algorithm, else
    ``set-algorithm``; validated with :func:`skewlab.engine.control.commands.validate_command` against the
    run's operator (``operator``, ``mergeable``: a split-key grouping needs a mergeable one).  Raises CommandError."""
    if form_algorithm == current_algorithm:
        changed = {k: v for k, v in params.items() if current_params.get(k) != v}
        if not changed:
            raise CommandError("nothing to apply: the form equals the parameters in force")
        kind, payload = "set-param", {"params": changed}
    else:
        kind, payload = "set-algorithm", {"algorithm": form_algorithm, "params": dict(params)}
    validate_command(kind, payload, current_algorithm=current_algorithm, current_params=current_params,
                     operator=operator, mergeable=mergeable)
    return kind, payload


#: The worker count of the form: the run setting :data:`skewlab.engine.config.settings.WORKERS` (same notations, same messages).
WORKERS_PARAM = WORKERS


def build_workers_command(value: Any, max_workers: int | None = None) -> tuple[str, dict[str, Any]]:
    """``set-workers`` with an absolute count in [1, ``max_workers``] (the run's state partitions;
    MAX_WORKERS when unknown); CommandError otherwise."""
    top = int(max_workers) if max_workers else MAX_WORKERS
    if value is None or (isinstance(value, str) and not value.strip()):
        raise CommandError(f"set-workers: enter a worker count in {workers_range(top)}")
    try:
        n = check(WORKERS, value)
    except ParamError:  # said in the run's range, as shown next to the box (not the setting's [1, MAX_WORKERS])
        try:
            check(replace(WORKERS, high=top), value)
        except ParamError as exc:
            raise CommandError(f"set-workers: enter a worker count in {workers_range(top)} ({exc})") from None
        raise
    kind, payload = validate_command("set-workers", {"workers": n}, current_algorithm="hash", current_params={},
                                     max_workers=top)
    return kind, payload


def not_live(run: Mapping[str, Any]) -> str | None:
    """Why operator commands cannot go to ``run`` (its ``id`` and ``status``), or None for a live run:
    only a running or paused engine reads commands; one queued for an ended run would stay pending."""
    status = run.get("status")
    if status in LIVE_STATUSES:
        return None
    return f"run {run.get('id')} is {status or 'unknown'}: controls act on a running engine only"


def workers_range(max_workers: int | None = None) -> str:
    """The worker counts a run accepts, as shown next to the form's worker box."""
    return replace(WORKERS, high=int(max_workers) if max_workers else MAX_WORKERS).range_text()


def pause_noop(kind: str, recent: Sequence[Mapping[str, Any]], status: str | None) -> str | None:
    """Why a ``pause`` / ``resume`` would change nothing (sent as nothing), else None.

    ``recent``: the run's commands, newest first.  The newest pause or resume that was not rejected
    (pending or applied) is what the engine is doing or about to do; a run whose status is
    ``paused`` is paused even without one (a pause from an earlier engine start).
    """
    last = next((c for c in recent if c.get("kind") in ("pause", "resume") and c.get("status") != "rejected"), None)
    pausing = (last is not None and last["kind"] == "pause") or (last is None and status == "paused")
    if kind == "pause" and pausing:
        if last is None:
            return "already paused: nothing sent"
        return f"already paused or pausing (command #{last['id']}): nothing sent"
    if kind == "resume" and not pausing and status != "paused":
        return "not paused: nothing sent"
    return None


def submit(store: Any, auth: Authorizer, token: Any, run_id: int | None, kind: str,
           payload: Mapping[str, Any]) -> tuple[bool, str, int | None]:
    """Authorise, then queue one command for ``run_id``; ``(ok, message, command id)``."""
    refusal = auth.refusal(token)
    if refusal is not None:
        return False, refusal, None
    if run_id is None:
        return False, "no run selected", None
    try:
        cid = store.submit_command(kind, dict(payload), run_id=int(run_id))
    except (ValueError, LookupError) as exc:
        return False, f"refused: {exc}", None
    return True, command_message({"id": cid, "kind": kind, "status": "pending"})[0], cid


def command_state(c: Mapping[str, Any]) -> str:
    """``applied at interval N`` (or batch), ``rejected: reason`` or ``pending…`` for one command row."""
    status = c.get("status")
    if status == "applied":
        where = f"interval {c['interval']}" if c.get("interval") is not None else f"batch {c.get('applied_batch')}"
        return f"applied at {where}" + (f" — {c['reason']}" if c.get("reason") else "")
    if status == "rejected":
        return f"rejected: {c.get('reason') or 'no reason given'}"
    return "pending…"


def command_message(cmd: Mapping[str, Any]) -> tuple[str, str]:
    """The operator's line about one submitted command and its CSS class, from the command's state:
    pending, applied (at which interval) or rejected (with the engine's reason)."""
    head = f"command #{cmd['id']} {cmd['kind']}"
    status = cmd.get("status") or "pending"
    if status == "pending":
        return f"{head} submitted: pending, the engine applies or rejects it at its next batch", "control-msg ok pending"
    return f"{head} {command_state(cmd)}", "control-msg " + ("ok applied" if status == "applied" else "error rejected")
