"""Parameter declarations shared by the CLI, the engine, the dashboard and the benchmarks.

Every grouping declares its parameters once as a tuple of :class:`Param`. The same declaration
is used to

* validate user input (``--param name=value`` on the CLI, operator commands in the engine,
  form fields in the dashboard) with one error message format that states the valid range;
* render help (``skewlab algorithms``) and forms (the dashboard);
* build the keyword arguments a grouping's constructor receives.

Nothing here evaluates user text: values are parsed with ``int``/``float``/explicit boolean
words, or matched against a closed list of choices.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

__all__ = ["Param", "ParamError", "parse_assignments", "resolve_params"]


class ParamError(ValueError):
    """A user-supplied parameter is unknown, of the wrong type or out of range.

    The message is one line, meant to be shown to the user as it is.
    """


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Param:
    """One declared parameter.

    ``kind`` is one of ``"int"``, ``"float"``, ``"bool"``, ``"choice"``, ``"str"`` (free text up to
    ``high`` characters, default 4096; used for paths and column names, never evaluated).  ``low``/``high`` bound
    numeric values (inclusive unless ``low_open``/``high_open``); ``high=None`` means unbounded.
    ``choices`` lists the allowed strings for ``"choice"``.
    """

    name: str
    kind: str
    default: Any
    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.kind not in ("int", "float", "bool", "choice", "str"):
            raise TypeError(f"unknown parameter kind {self.kind!r}")
        if self.kind == "choice" and self.default not in self.choices:
            raise TypeError(f"default {self.default!r} of {self.name} not in choices")

    # ------------------------------------------------------------------ describing
    def range_text(self) -> str:
        """The valid range in a compact human form, e.g. ``[0, 1)`` or ``one of a|b``."""
        if self.kind == "bool":
            return "true|false"
        if self.kind == "choice":
            return "one of " + "|".join(self.choices)
        if self.kind == "str":
            return f"text of at most {int(self.high or 4096)} characters"
        lo = "-inf" if self.low is None else _fmt(self.low)
        hi = "inf" if self.high is None else _fmt(self.high)
        left = "(" if (self.low_open or self.low is None) else "["
        right = ")" if (self.high_open or self.high is None) else "]"
        return f"{left}{lo}, {hi}{right}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly description (used by the dashboard to render forms)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "default": self.default,
            "help": self.help,
            "low": self.low,
            "high": self.high,
            "low_open": self.low_open,
            "high_open": self.high_open,
            "choices": list(self.choices),
            "range": self.range_text(),
        }

    # ------------------------------------------------------------------ validating
    def coerce(self, value: Any) -> Any:
        """Parse ``value`` (a string from a user or an already typed value) and check the range.

        Raises :class:`ParamError` with a one-line message that names the parameter and its range.
        """
        name = self.name
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            raise ParamError(f"parameter {name}: expected true|false, got {_show(value)}")
        if self.kind == "str":
            text = str(value)
            if len(text) > int(self.high or 4096) or "\x00" in text:
                raise ParamError(f"parameter {name}: expected {self.range_text()} without NUL bytes")
            return text
        if self.kind == "choice":
            text = str(value).strip()
            if text not in self.choices:
                raise ParamError(f"parameter {name}: expected {self.range_text()}, got {_show(value)}")
            return text
        if isinstance(value, bool):  # bool is an int subclass; never accept it as a number
            raise ParamError(f"parameter {name}: expected a number in {self.range_text()}, got {_show(value)}")
        try:
            if self.kind == "int":
                if isinstance(value, float):
                    if not value.is_integer():
                        raise ValueError
                    number: float = int(value)
                else:
                    number = _integer(str(value).strip())
            else:
                number = float(str(value).strip()) if not isinstance(value, (int, float)) else float(value)
        except (TypeError, ValueError):
            what = "an integer" if self.kind == "int" else "a number"
            raise ParamError(
                f"parameter {name}: expected {what} in {self.range_text()}, got {_show(value)}"
            ) from None
        if isinstance(number, float) and not math.isfinite(number):
            raise ParamError(f"parameter {name}: expected a finite number in {self.range_text()}, got {_show(value)}")
        if not self.contains(number):
            raise ParamError(f"parameter {name}: {_fmt(number)} is out of range {self.range_text()}")
        return number

    def contains(self, number: float) -> bool:
        if self.low is not None and (number < self.low or (self.low_open and number == self.low)):
            return False
        if self.high is not None and (number > self.high or (self.high_open and number == self.high)):
            return False
        return True


def _integer(text: str) -> int:
    """``"1000"``, ``"1e3"``, ``"1e+06"`` or ``"1.5e3"`` as an int (the notations :meth:`Param.range_text`
    shows); ValueError for a fraction, a non-number or more than 18 digits."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        d = Decimal(text)
    except InvalidOperation:
        raise ValueError(text) from None
    if not d.is_finite() or d.adjusted() > 18 or d != d.to_integral_value():
        raise ValueError(text)
    return int(d)


def _fmt(x: float) -> str:
    """Compact and exact: ``1e+06`` for 10**6, ``1048576`` for 2**20 (what :func:`_integer` and
    ``float`` parse back to the same value)."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    short = f"{x:g}"
    return short if float(short) == x else (str(x) if isinstance(x, int) else repr(float(x)))


def _show(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "...'"


def parse_assignments(items: Iterable[str], flag: str = "") -> dict[str, str]:
    """Split ``["a=1", "b=x"]`` into ``{"a": "1", "b": "x"}``; one-line error on a malformed item,
    naming ``flag`` (the option the items came from, e.g. ``--conf``) when given."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = str(item).partition("=")
        name = name.strip()
        if not sep or not name:
            raise ParamError(f"{flag + ': ' if flag else ''}expected {'KEY=VALUE' if flag else 'name=value'}, "
                             f"got {_show(item)}")
        out[name] = value.strip()
    return out


def resolve_params(
    declared: Sequence[Param], given: Mapping[str, Any] | None, *, owner: str = ""
) -> dict[str, Any]:
    """Defaults overlaid with ``given``, every value validated against ``declared``.

    Unknown names are rejected with the list of known ones.
    """
    by_name = {p.name: p for p in declared}
    values = {p.name: p.default for p in declared}
    for name, raw in (given or {}).items():
        if name not in by_name:
            known = ", ".join(sorted(by_name)) or "none"
            where = f" for {owner}" if owner else ""
            raise ParamError(f"unknown parameter {_show(name)}{where} (known: {known})")
        values[name] = by_name[name].coerce(raw)
    return values
