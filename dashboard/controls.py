"""Operator controls: forms from the registry's declarations, validation, authorisation, commands.

The dashboard never changes the engine directly: every action becomes a row of the ``commands``
table (:meth:`storage.store.Store.submit_command`) that the engine validates again and marks
``applied`` (with the batch) or ``rejected`` (with its reason).

* **Forms** come from :func:`engine.registry.describe`: one field per declared parameter, typed by its
  ``kind`` (numbers and text as text fields, ``bool`` and ``choice`` as drop-downs), labelled with its
  range and help.
* **Validation** uses the same declarations as the CLI and the engine: each field through
  :meth:`engine.params.Param.coerce` (message: the valid range), then the whole command through
  :func:`engine.commands.validate_command`.  An invalid form is refused here, before any command
  exists.
* **Authorisation** (:class:`Authorizer`) is checked on the server, inside the callback that submits,
  not only by hiding buttons: a read-only dashboard refuses every action, and one with an operator
  token refuses an action whose request does not carry the same token (constant-time comparison).
  The token is never written into a page or a log line.
"""

from __future__ import annotations

import hmac
import ipaddress
from functools import lru_cache
from typing import Any, Mapping, Sequence

from engine import registry
from engine.commands import MAX_WORKERS, CommandError, validate_command
from engine.params import Param, ParamError

__all__ = [
    "Authorizer",
    "MAX_WORKERS",
    "TOKEN_ENV",
    "TOKEN_MIN_LENGTH",
    "algorithm_catalog",
    "build_algorithm_command",
    "build_workers_command",
    "is_loopback",
    "param_declarations",
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
    """:func:`engine.registry.describe`, computed once per process."""
    return tuple(registry.describe())


def param_declarations(algorithm: str) -> tuple[Param, ...]:
    """The declared parameters of ``algorithm`` (ParamError for an unknown name)."""
    return tuple(registry.get(algorithm).params)


def validate_fields(algorithm: str, names: Sequence[str], values: Sequence[Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Parse form values with the declarations: ``(params, errors)``; an empty field means the default."""
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
            params[name] = p.default
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
) -> tuple[str, dict[str, Any]]:
    """``set-param`` (only the changed values) when the form is for the live algorithm, else
    ``set-algorithm``; validated with :func:`engine.commands.validate_command`.  Raises CommandError."""
    if form_algorithm == current_algorithm:
        changed = {k: v for k, v in params.items() if current_params.get(k) != v}
        if not changed:
            raise CommandError("nothing to apply: the form equals the parameters in force")
        kind, payload = "set-param", {"params": changed}
    else:
        kind, payload = "set-algorithm", {"algorithm": form_algorithm, "params": dict(params)}
    validate_command(kind, payload, current_algorithm=current_algorithm, current_params=current_params,
                     operator=operator)
    return kind, payload


def build_workers_command(value: Any) -> tuple[str, dict[str, Any]]:
    """``set-workers`` with an absolute count in [1, MAX_WORKERS] (CommandError otherwise)."""
    if isinstance(value, str):
        value = value.strip()
    try:
        n = int(value) if not isinstance(value, float) else (int(value) if value.is_integer() else None)
    except (TypeError, ValueError):
        n = None
    if n is None:
        raise CommandError(f"set-workers: workers must be an integer in [1, {MAX_WORKERS}]")
    kind, payload = validate_command("set-workers", {"workers": n}, current_algorithm="hash", current_params={})
    return kind, payload


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
    return True, f"command #{cid} {kind} submitted; the engine applies or rejects it at its next batch (see Commands)", cid
