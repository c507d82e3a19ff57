"""Value cleaning for the store: every value reaches the database through these functions.

Floats that are NaN or infinite become NULL (``None``); numpy scalars are accepted everywhere; text is
kept verbatim except that NUL characters (which PostgreSQL ``TEXT`` cannot hold) become the four
characters ``\\x00``, unpaired surrogates are backslash-escaped, and overlong text is truncated to its
bound (ending in ``…``).  JSON is written with sorted keys, ASCII only and no NaN.
"""

from __future__ import annotations

import json
import math
import re
import time
from typing import Any, Mapping, Sequence

from skewlab.storage.tables import JSON_COLUMNS

#: bounds, in characters, of a dead-letter reason, free text, a hot key's text and one JSON value
REASON_CHARS = 200
TEXT_CHARS = 2_000
KEY_CHARS = 500
JSON_CHARS = 262_144
NAME_RE = re.compile(r"^[A-Za-z0-9_.:+\-]{1,64}$")


def wall_clock() -> float:
    """Seconds since the epoch (the time stamps of every table)."""
    return time.time()


def as_float(value: Any) -> float | None:
    """A finite float, or None (None, NaN, ±inf)."""
    if value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"expected a number, got {type(value).__name__}") from exc
    return out if math.isfinite(out) else None


def as_int(value: Any, default: int | None = None) -> int | None:
    """An int (numpy integers and integral floats accepted), or ``default`` for None."""
    if value is None:
        return default
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) or (hasattr(value, "dtype") and getattr(value.dtype, "kind", "") == "f"):
        fv = float(value)
        if not math.isfinite(fv):
            return default
        if fv != int(fv):
            raise ValueError(f"expected an integer, got {fv!r}")
        return int(fv)
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"expected an integer, got {type(value).__name__}") from exc


def as_bool(value: Any) -> bool | None:
    return None if value is None else bool(value)


def clean_text(value: Any, limit: int = TEXT_CHARS) -> str:
    """Text stored verbatim, except NUL → ``\\x00``, lone surrogates escaped, truncated to ``limit``."""
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        s = bytes(value).decode("utf-8", errors="backslashreplace")
    else:
        s = value if isinstance(value, str) else str(value)
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        s = s.encode("utf-8", errors="backslashreplace").decode("utf-8")
    if "\x00" in s:
        s = s.replace("\x00", "\\x00")
    if len(s) > limit:
        s = s[: max(limit - 1, 0)] + "…"
    return s


def check_name(value: Any, what: str) -> str:
    """An algorithm / parameter name: a short identifier (the engine checks it against the registry)."""
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise ValueError(f"{what} must be 1-64 characters of letters, digits, '_', '.', ':', '+', '-'")
    return value


def plain_json(obj: Any, strict: bool = False) -> Any:
    """numpy scalars / arrays and tuples → plain JSON types.

    Non-finite floats become None, or raise ``ValueError`` when ``strict`` (command payloads: a NaN
    parameter value is an error, not a missing value).  Mapping keys must be text when ``strict``,
    else they are converted with ``str``.
    """
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        if strict:
            raise ValueError("NaN and infinity are not valid JSON")
        return None
    if isinstance(obj, Mapping):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                if strict:
                    raise ValueError(f"JSON object keys must be text, got {type(k).__name__}")
                k = str(plain_json(k))
            out[k] = plain_json(v, strict)
        return out
    if isinstance(obj, (list, tuple)):
        return [plain_json(v, strict) for v in obj]
    if hasattr(obj, "tolist"):  # numpy arrays and scalars
        return plain_json(obj.tolist(), strict)
    raise ValueError(f"value of type {type(obj).__name__} is not JSON-serialisable")


def dump_json(obj: Any, what: str, limit: int = JSON_CHARS, strict: bool = False) -> str:
    """JSON text (sorted keys, ASCII, no NaN) of ``obj``; ``ValueError`` if impossible or too long."""
    try:
        out = json.dumps(plain_json(obj, strict), sort_keys=True, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{what} is not JSON-serialisable: {exc}") from exc
    if len(out) > limit:
        raise ValueError(f"{what} is too large ({len(out)} > {limit} characters of JSON)")
    return out


def load_json(text: str | None, default: Any) -> Any:
    if text is None or text == "":
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default


def normalise_records(obj: Any, fields: Sequence[str], what: str, key_field: str | None = None) -> list[dict[str, Any]]:
    """Normalise a list of mappings, a columnar mapping of sequences, or ``{key: mapping}``.

    Unknown field names raise ``ValueError`` listing the valid ones (catches typos early).
    """
    if obj is None:
        return []
    items: list[Mapping[str, Any]]
    if isinstance(obj, Mapping):
        values = list(obj.values())
        if values and all(isinstance(v, Mapping) for v in values):
            if key_field is None:
                raise ValueError(f"{what}: expected a list of mappings or a mapping of equal-length columns")
            items = [{key_field: k, **v} for k, v in obj.items()]
        elif all(hasattr(v, "__len__") and not isinstance(v, (str, bytes, Mapping)) for v in values):
            n = {len(v) for v in values}
            if len(n) > 1:
                raise ValueError(f"{what}: columns have different lengths {sorted(n)}")
            m = n.pop() if n else 0
            items = [{k: obj[k][i] for k in obj} for i in range(m)]
        else:
            raise ValueError(f"{what}: expected a list of mappings or a mapping of equal-length columns")
    elif isinstance(obj, (str, bytes)):
        raise ValueError(f"{what}: expected a list of mappings")
    else:
        items = list(obj)
    out = []
    allowed = set(fields)
    for item in items:
        if not isinstance(item, Mapping):
            raise ValueError(f"{what}: every entry must be a mapping, got {type(item).__name__}")
        unknown = set(item) - allowed
        if unknown:
            raise ValueError(f"{what}: unknown field(s) {sorted(map(str, unknown))}; valid: {', '.join(fields)}")
        out.append(dict(item))
    return out


def decode_row(table: str, row: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for col in JSON_COLUMNS.get(table, ()):
        if col in out:
            out[col] = load_json(out[col], [] if col in ("workers", "sample") else (None if col == "params" else {}))
    return out

def no_duplicates(rows: list[dict[str, Any]], field: str, what: str) -> None:
    seen = set()
    for r in rows:
        if r[field] in seen:
            raise ValueError(f"{what}: duplicate {field} {r[field]!r}")
        seen.add(r[field])


def fingerprint_hex(value: Any) -> str | None:
    """A uint64 fingerprint as 16 hex digits (ints, numpy integers, or hex text accepted)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = int(value, 16)
        except ValueError as exc:
            raise ValueError("fingerprint text must be hexadecimal") from exc
    v = int(value) & 0xFFFFFFFFFFFFFFFF
    return f"{v:016x}"
