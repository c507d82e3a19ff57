"""A record's key and value: the rules every source applies to the user's own records (issue 24, item 1).

A tuple is a key plus a numeric value.  Sources take them from

* **JSON** (Kafka record values): ``key_field`` / ``value_field`` are dotted paths (``user.id``:
  field ``id`` of the object in field ``user``) into the JSON object of the record's value, parsed
  once per record (:func:`json_fields`, :func:`json.loads`);
* **CSV** (key files): columns by name or index (:mod:`skewlab.engine.workloads.key_file`), the value's
  text parsed by :func:`parse_value`.

Types.  A key is a non-empty string, or a JSON integer (its decimal text: ``42`` and ``"42"`` are one
key, as a CSV column holding 42 gives ``"42"``); anything else is a dead letter.  A value is a
finite number (JSON number, or CSV text :func:`float` accepts); a boolean, a string, an object or
NaN/Infinity is a dead letter.

Dead-letter reasons (the sources emit them in their ``error`` column; the engine counts and samples
them as for every other malformed record): :data:`BAD_JSON` (not a JSON object), :data:`MISSING_KEY`,
:data:`BAD_KEY_TYPE`, :data:`EMPTY_KEY`, :data:`MISSING_VALUE`, :data:`BAD_VALUE_TYPE`,
:data:`EMPTY_VALUE` (a blank CSV field).
"""

from __future__ import annotations

import json
import math
from typing import Any, Sequence

from skewlab.engine.config.params import ParamError

__all__ = ["BAD_JSON", "BAD_KEY_TYPE", "BAD_VALUE_TYPE", "EMPTY_KEY", "EMPTY_VALUE", "MISSING_KEY",
           "MISSING_VALUE", "json_fields", "key_text", "parse_path", "parse_value"]

BAD_JSON = "bad_json"
MISSING_KEY = "missing_key"
BAD_KEY_TYPE = "bad_key_type"
EMPTY_KEY = "empty_key"
MISSING_VALUE = "missing_value"
BAD_VALUE_TYPE = "bad_value_type"
EMPTY_VALUE = "empty_value"

_MISSING = object()


def parse_path(path: str, flag: str = "--key-field") -> tuple[str, ...]:
    """A dotted path (``user.id``) as its parts; ``()`` for an empty path.  ParamError (one line) for an
    empty part (``user..id``, ``.id``)."""
    text = str(path or "").strip()
    if not text:
        return ()
    parts = tuple(p.strip() for p in text.split("."))
    if any(not p for p in parts):
        raise ParamError(f"{flag}: {text!r} is not a dotted field path (an empty part); e.g. user.id")
    return parts


def _walk(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(obj, dict):
            return _MISSING
        obj = obj.get(part, _MISSING)
        if obj is _MISSING:
            return _MISSING
    return obj


def key_text(obj: Any) -> tuple[str | None, str | None]:
    """``(key, None)`` for a JSON key (a non-empty string, or an integer as its decimal text), else
    ``(None, reason)``."""
    if obj is _MISSING or obj is None:
        return None, MISSING_KEY
    if isinstance(obj, str):
        return (obj, None) if obj.strip() else (None, EMPTY_KEY)
    if isinstance(obj, int) and not isinstance(obj, bool):
        return str(obj), None
    return None, BAD_KEY_TYPE


def _number(obj: Any) -> tuple[float | None, str | None]:
    if obj is _MISSING or obj is None:
        return None, MISSING_VALUE
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        value = float(obj)
        return (value, None) if math.isfinite(value) else (None, BAD_VALUE_TYPE)
    return None, BAD_VALUE_TYPE


def parse_value(text: str) -> tuple[float | None, str | None]:
    """A CSV field as a value: ``(float, None)``, or ``(None, reason)`` (blank: :data:`EMPTY_VALUE`;
    not a finite number: :data:`BAD_VALUE_TYPE`)."""
    text = text.strip()
    if not text:
        return None, EMPTY_VALUE
    try:
        value = float(text)
    except ValueError:
        return None, BAD_VALUE_TYPE
    return (value, None) if math.isfinite(value) else (None, BAD_VALUE_TYPE)


def json_fields(data: bytes, key_path: Sequence[str], value_path: Sequence[str]
                ) -> tuple[str | None, float | None, str | None]:
    """``(key, value, reason)`` from one JSON record: the key at ``key_path`` (``()``: not read, key
    ``None``), the value at ``value_path`` (``()``: not read, ``None``); ``reason`` is the first dead
    letter reason (key before value), else ``None``."""
    try:
        obj = json.loads(data)
    except (ValueError, TypeError):  # JSONDecodeError, bad UTF-8 (UnicodeDecodeError)
        return None, None, BAD_JSON
    if not isinstance(obj, dict):
        return None, None, BAD_JSON
    key = None
    if key_path:
        key, reason = key_text(_walk(obj, tuple(key_path)))
        if reason:
            return None, None, reason
    value = None
    if value_path:
        value, reason = _number(_walk(obj, tuple(value_path)))
        if reason:
            return None, None, reason
    return key, value, None
