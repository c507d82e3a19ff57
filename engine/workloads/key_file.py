"""The one reader of key files, used by ``skewlab simulate --input`` (the ``file`` workload) and by the
Spark file source (``skewlab-file``), so both replay the same key sequence from the same file.

Rules (one set for both paths):

* **Records.**  The file is cut into physical lines at ``\\n``; a trailing ``\\r`` (CRLF) is dropped,
  and a final line without newline counts.  One line is one record: a quoted field cannot span
  lines.  A UTF-8 byte-order mark at the start of the file is ignored.  Every line is decoded as
  UTF-8 on its own, so one bad line does not hide the others.
* **Key.**  ``column`` empty: the whole line is the key.  Otherwise the line is one CSV row
  (:mod:`csv`, dialect "excel": ``"`` quotes, so ``"x,y"`` is one field) split at ``sep`` (one
  character; ``tab`` or ``\\t`` mean a tab), and ``column`` is a 0-based index (all digits) or a
  column name.  Keys are stripped of surrounding white space and are strings (``"007"`` and ``"7"``
  are different keys).
* **Value.**  ``value_column`` (optional, a name or 0-based index like ``column``; it needs a key
  ``column``): each record's value, a finite number parsed by
  :func:`skewlab.engine.workloads.record_fields.parse_value` (``values[i]``, float; ``None`` without a
  value column).
* **Header.**  ``header=None`` (the default): the file has a header iff ``column`` (or
  ``value_column``) is a name.
  ``header=True`` skips the header also with an index; ``header=False`` with a name is an error.
  The header is the first non-blank line; blank lines before it are not records.
* **Dead letters.**  A record without a key gets ``key=None`` and a reason: ``bad_utf8``,
  ``empty_line`` (blank or white space only), ``missing_column`` (row too short), ``empty_key``
  (the column's field is blank), ``bad_quote`` (a CSV row whose quote is not closed, or with text
  after a closing quote: :mod:`csv` in strict mode refuses it; read leniently, an open quote would
  swallow the rest of the row into one key).  The Spark source emits them as dead letters (column
  ``error``); the ``file`` workload counts them (:meth:`KeyRecords.dead_letters`, the engine's
  ``{reason: (count, samples)}`` form), ``skewlab simulate`` warns and stores them, and a file with a
  ``bad_utf8`` line is refused there.  With a value column also: ``missing_column`` (the row is too
  short for it), ``empty_value`` (its field is blank), ``bad_value_type`` (not a finite number).
* **User errors** (:class:`~skewlab.engine.config.params.ParamError`, one line, prefixed with ``owner``): a
  missing, unreadable or directory path, a bad separator, a column name that is not in the header
  (or with ``header=False``), a column index beyond the first row's width, a value column without a
  key column.

An empty file has no records (the caller decides whether that is an error).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field

from skewlab.engine.config.params import ParamError
from skewlab.engine.workloads.record_fields import parse_value
from skewlab.shared import filesystems

__all__ = ["KeyRecords", "RAW_BYTES", "parse_separator", "raw_text", "read_key_file"]

RAW_BYTES = 200  # bytes of a bad record kept (as readable text, :func:`raw_text`) in ``raws``


def raw_text(data: bytes) -> str:
    """A bad record's first :data:`RAW_BYTES` bytes as readable text, the dead-letter sample an operator
    reads: UTF-8, with bytes that are not UTF-8 (and a character cut at the end) as ``\\xNN`` escapes,
    and ``…`` when the record was longer."""
    data = bytes(data)
    text = data[:RAW_BYTES].decode("utf-8", errors="backslashreplace")
    return text + "…" if len(data) > RAW_BYTES else text


@dataclass
class KeyRecords:
    """One entry per record (data line): ``keys[i]`` and ``values[i]`` (``None`` without a value
    column) or, when the key is None, ``errors[i]`` says why and ``raws[i]`` holds the line's
    first :data:`RAW_BYTES` bytes as text (:func:`raw_text`)."""

    keys: list[str | None] = field(default_factory=list)
    errors: list[str | None] = field(default_factory=list)
    raws: list[str | None] = field(default_factory=list)
    values: list[float | None] = field(default_factory=list)

    def add(self, key: str | None, error: str | None = None, line: bytes = b"", value: float | None = None) -> None:
        self.keys.append(key)
        self.errors.append(error)
        self.values.append(value)
        self.raws.append(None if error is None else raw_text(line))

    def good(self) -> list[str]:
        """The keys of the records that have one, in file order."""
        return [k for k in self.keys if k is not None]

    def dead_letters(self, max_samples: int = 5) -> dict[str, tuple[int, list[str]]]:
        """Records without a key as ``{reason: (count, samples)}`` (samples: the first bytes as text, at
        most ``max_samples`` per reason) — the form the engine counts dead letters in."""
        out: dict[str, tuple[int, list[str]]] = {}
        for error, raw in zip(self.errors, self.raws):
            if error is not None:
                count, samples = out.get(error, (0, []))
                if len(samples) < max_samples:
                    samples.append(raw or "")
                out[error] = (count + 1, samples)
        return out


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def parse_separator(sep: str, owner: str = "key file") -> str:
    """``sep`` as one character (``tab``/``\\t`` → a tab); ParamError unless one non-quote, non-newline char."""
    text = "\t" if sep in ("tab", "\\t") else str(sep)
    if len(text) != 1 or text in "\r\n\"":
        raise ParamError(f"{owner}: the separator (delimiter) must be one character other than a quote or "
                         f"newline, got {sep!r}")
    return text


def _read_bytes(path: str, owner: str) -> bytes:
    """The file's bytes: a local path or a URI (``s3://``, ``hdfs://``: :mod:`skewlab.shared.filesystems`)."""
    try:
        location = filesystems.resolve(path)
    except ValueError as exc:
        raise ParamError(f"{owner}: {exc}") from None
    try:
        return filesystems.read_bytes(location)
    except FileNotFoundError:
        raise ParamError(f"{owner}: no such file {path!r}") from None
    except IsADirectoryError:
        raise ParamError(f"{owner}: {path!r} is a directory, not a file") from None
    except PermissionError:
        raise ParamError(f"{owner}: permission denied reading {path!r}") from None
    except OSError as exc:
        if filesystems.is_dir(location):
            raise ParamError(f"{owner}: {path!r} is a directory, not a file") from None
        raise ParamError(f"{owner}: cannot read {path!r}: {_one_line(getattr(exc, 'strerror', None) or exc)}") from None


def _lines(data: bytes) -> list[bytes]:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [ln[:-1] if ln.endswith(b"\r") else ln for ln in lines]


def _row(text: str, sep: str) -> list[str] | None:
    """One data row's fields, or None if it is not valid CSV (an unclosed quote, text after a quote)."""
    try:
        return next(csv.reader([text], delimiter=sep, strict=True), [])
    except csv.Error:
        return None


def _fields(text: str, sep: str) -> list[str]:
    try:
        return next(csv.reader([text], delimiter=sep, strict=False), [])
    except csv.Error:  # e.g. an unterminated quote: split as plain text
        return text.split(sep)


def read_key_file(path: str, column: str = "", sep: str = ",", header: bool | None = None, *,
                  value_column: str = "", owner: str = "key file") -> KeyRecords:
    """The records of ``path`` under the module's rules; ParamError (one line) for a user error."""
    column = str(column or "").strip()
    value_column = str(value_column or "").strip()
    sep = parse_separator(sep, owner)
    if value_column and not column:
        raise ParamError(f"{owner}: a value column ({value_column!r}) needs a key column too (--key-field)")
    named = [c for c in (column, value_column) if c and not c.isdigit()]
    if header is None:
        header = bool(named)
    elif named and not header:
        raise ParamError(f"{owner}: column {named[0]!r} is a name but header is false")
    lines = _lines(_read_bytes(path, owner))
    out = KeyRecords()
    index: int | None = None
    value_index: int | None = None
    if column and header:
        while lines and not lines[0].strip():
            lines = lines[1:]
        if lines:
            names = [f.strip() for f in _fields(lines[0].decode("utf-8", errors="replace"), sep)]
            lines = lines[1:]
            index = _header_index(column, names, path, owner)
            if value_column:
                value_index = _header_index(value_column, names, path, owner)
    elif column:
        first = next((ln for ln in lines if ln.strip()), None)
        width = 0 if first is None else len(_fields(first.decode("utf-8", errors="replace"), sep))
        index = _checked_index(column, width, path, owner) if first is not None else int(column)
        if value_column:
            value_index = (_checked_index(value_column, width, path, owner) if first is not None
                           else int(value_column))
    for line in lines:
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            out.add(None, "bad_utf8", line)
            continue
        if not text.strip():
            out.add(None, "empty_line", line)
            continue
        if index is None:
            out.add(text.strip())
            continue
        row = _row(text, sep)
        if row is None:
            out.add(None, "bad_quote", line)
        elif index >= len(row) or (value_index is not None and value_index >= len(row)):
            out.add(None, "missing_column", line)
        elif not row[index].strip():
            out.add(None, "empty_key", line)
        elif value_index is None:
            out.add(row[index].strip())
        else:
            value, reason = parse_value(row[value_index])
            if reason:
                out.add(None, reason, line)
            else:
                out.add(row[index].strip(), value=value)
    return out


def _header_index(column: str, names: list[str], path: str, owner: str) -> int:
    """The index of ``column`` (a name of the header ``names``, or a 0-based index within it)."""
    if column.isdigit():
        return _checked_index(column, len(names), path, owner)
    if column not in names:
        shown = ", ".join(repr(h) for h in names[:12]) + (", ..." if len(names) > 12 else "")
        raise ParamError(f"{owner}: unknown column {_one_line(column)!r}: not in the header of "
                         f"{path!r} ({_one_line(shown)})")
    return names.index(column)


def _checked_index(column: str, width: int, path: str, owner: str) -> int:
    index = int(column)
    if index >= width:
        raise ParamError(f"{owner}: unknown column {column!r}: the first row of {path!r} has {width} column(s) "
                         f"(indices 0..{width - 1})")
    return index
