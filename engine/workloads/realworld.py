"""Real-world key streams: ``words`` (English/other word frequencies from ``wordfreq``) and ``file``
(replay of a text or CSV file).

Conventions as in :mod:`engine.workloads.synthetic`: the vocabulary is built once in the
constructor, ``batches(messages, interval_messages)`` yields ``int64`` id arrays of
``interval_messages`` ids (the last may be shorter), each call replays from the start.
"""

from __future__ import annotations

import csv
import io
from typing import Any, ClassVar, Iterator, Mapping

import numpy as np

from engine.params import Param, ParamError
from engine.workloads import Workload, register_workload
from engine.workloads.synthetic import _cdf, _rngs, interval_sizes, sample_cdf

__all__ = ["FileWorkload", "WORDFREQ_LANGUAGES", "WordsWorkload", "word_distribution"]

# Languages with a wordfreq "best" word list (wordfreq 3.x).  Fixed here so that the parameter
# declaration does not depend on importing wordfreq; an unavailable one is a ParamError.
WORDFREQ_LANGUAGES: tuple[str, ...] = (
    "ar", "bg", "bn", "ca", "cs", "da", "de", "el", "en", "es", "fa", "fi", "fil", "fr", "he", "hi",
    "hu", "id", "is", "it", "ja", "ko", "lt", "lv", "mk", "ms", "nb", "nl", "pl", "pt", "ro", "ru",
    "sh", "sk", "sl", "sv", "ta", "tr", "uk", "ur", "vi", "zh",
)


def word_distribution(language: str, n_words: int) -> tuple[list[str], np.ndarray]:
    """The ``n_words`` most frequent words of ``language`` and their probabilities (sum 1).

    Read from the word list shipped inside the installed ``wordfreq`` package
    (``wordfreq.get_frequency_list``, no download): band ``i`` of that list holds the words whose
    frequency rounds to ``10^(−i/100)`` (wordfreq stores centibels), in descending order, and words
    containing a multi-digit sequence are skipped exactly as ``wordfreq.top_n_list`` does.  The
    probabilities are those frequencies renormalised over the chosen words.  Fewer words are
    returned when the list is shorter than ``n_words``.
    """
    try:
        import wordfreq
        from wordfreq.numbers import has_digit_sequence
    except ImportError as exc:  # pragma: no cover - wordfreq is a declared dependency
        raise ParamError(f"workload words: the wordfreq package is not installed ({exc})") from None
    try:
        bands = wordfreq.get_frequency_list(language, wordlist="best")
    except (LookupError, OSError, ValueError) as exc:
        raise ParamError(f"workload words: no wordfreq word list for language {language!r} ({exc})") from None
    words: list[str] = []
    freqs: list[float] = []
    seen: set[str] = set()
    for cb, band in enumerate(bands):
        freq = 10.0 ** (-cb / 100.0)
        for word in band:
            if word in seen or has_digit_sequence(word):
                continue
            seen.add(word)
            words.append(word)
            freqs.append(freq)
            if len(words) >= n_words:
                break
        if len(words) >= n_words:
            break
    if not words:
        raise ParamError(f"workload words: the wordfreq list for {language!r} is empty")
    probs = np.asarray(freqs, dtype=np.float64)
    return words, probs / probs.sum()


@register_workload
class WordsWorkload(Workload):
    """Words drawn i.i.d. from a real word-frequency distribution (``wordfreq``).

    A stand-in for the word-count streams of the papers (Nasir et al.'s Wikipedia/Twitter words,
    Fang et al.'s "Social" topic words) that needs no data set download: the keys are the ``words``
    most frequent words of ``language`` with their real relative frequencies (see
    :func:`word_distribution`), so the head is "the", "to", "and", ... for English.  The
    distribution is static; use ``file`` to replay a real stream with its temporal structure.
    """

    name: ClassVar[str] = "words"
    summary: ClassVar[str] = "Real word frequencies (wordfreq, no download): the N most frequent words of a language"
    params: ClassVar[tuple[Param, ...]] = (
        Param("language", "choice", "en", "wordfreq language code", choices=WORDFREQ_LANGUAGES),
        Param("words", "int", 10_000, "number of most frequent words (distinct keys); fewer if the list "
              "is shorter", low=1, high=1_000_000),
    )

    def __init__(self, seed: int = 0, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(seed, params)
        self.words, self.probs = word_distribution(str(self.p["language"]), int(self.p["words"]))
        self.cdf = _cdf(self.probs)
        self.key_ids = self.vocab.encode(self.words)

    def batches(self, messages: int, interval_messages: int) -> Iterator[np.ndarray]:
        rng, _ = _rngs(self.seed)
        for size in interval_sizes(messages, interval_messages):
            yield self.key_ids[sample_cdf(rng, self.cdf, size)]


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


@register_workload
class FileWorkload(Workload):
    """Replay the keys of a file, in file order (the seed is not used).

    * ``column`` empty: one key per line.  Otherwise the file is CSV (``delimiter``, Python's
      :mod:`csv` dialect "excel" otherwise) and ``column`` is either a 0-based index (all digits)
      or a column name, looked up in the first non-empty row, which is then the header.  With an
      index the first row is data unless ``header`` is true.
    * Every key is stripped of surrounding white space; empty lines, empty fields and rows too
      short to have the column are skipped (:attr:`skipped` counts the skipped non-blank rows).
      ``delimiter`` ``tab`` (or ``\\t``) means a tab.
      Keys are strings (``"007"`` and ``"7"`` are different keys).  The file is read as UTF-8 (a
      byte-order mark is ignored).
    * ``loop`` false: the stream ends at the end of the file, so fewer than ``messages`` keys may
      come out (the last batch is then shorter).  ``loop`` true: the file repeats until
      ``messages`` keys have been produced.
    * A missing, unreadable, non-UTF-8 or key-less file and an unknown column raise
      :class:`ParamError` with a one-line message in the constructor.

    The whole file is read and encoded into :attr:`vocab` once, in the constructor.
    """

    name: ClassVar[str] = "file"
    summary: ClassVar[str] = "Replay keys from a text file (one per line) or a CSV column; optional loop"
    params: ClassVar[tuple[Param, ...]] = (
        Param("path", "str", "", "file to replay (UTF-8 text)"),
        Param("column", "str", "", "CSV column name or 0-based index; empty = one key per line", high=256),
        Param("loop", "bool", False, "start over at the end of the file"),
        Param("header", "bool", False, "with a column index: skip the first row (a name implies a header)"),
        Param("delimiter", "str", ",", "CSV field delimiter: one character, or 'tab'", high=3),
    )

    def __init__(self, seed: int = 0, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(seed, params)
        path = str(self.p["path"])
        if not path.strip():
            raise ParamError("workload file: parameter path is required (the file to replay)")
        self.path = path
        self.skipped = 0
        delim = str(self.p["delimiter"])
        if delim in ("tab", "\\t"):
            delim = "\t"
        if len(delim) != 1 or delim in "\r\n\"":
            raise ParamError(
                f"workload file: parameter delimiter must be one character other than a quote or newline, got {delim!r}"
            )
        self.delimiter = delim
        text = self._read(path)
        column = str(self.p["column"]).strip()
        keys = self._csv_keys(text, column) if column else self._line_keys(text)
        if not keys:
            raise ParamError(f"workload file: {path!r} contains no keys (empty file or only blank lines/fields)")
        self.ids = self.vocab.encode(keys)  # the file's keys in order, as vocabulary ids

    # ------------------------------------------------------------------ reading
    @staticmethod
    def _read(path: str) -> str:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            raise ParamError(f"workload file: no such file {path!r}") from None
        except IsADirectoryError:
            raise ParamError(f"workload file: {path!r} is a directory, not a file") from None
        except PermissionError:
            raise ParamError(f"workload file: permission denied reading {path!r}") from None
        except OSError as exc:
            raise ParamError(f"workload file: cannot read {path!r}: {_one_line(exc.strerror or exc)}") from None
        if not data:
            raise ParamError(f"workload file: {path!r} is empty")
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ParamError(
                f"workload file: {path!r} is not UTF-8 text (invalid byte at offset {exc.start})"
            ) from None

    @staticmethod
    def _line_keys(text: str) -> list[str]:
        return [key for key in (line.strip() for line in text.splitlines()) if key]

    def _csv_keys(self, text: str, column: str) -> list[str]:
        delim = self.delimiter
        try:
            rows = [row for row in csv.reader(io.StringIO(text, newline=""), delimiter=delim) if any(f.strip() for f in row)]
        except csv.Error as exc:
            raise ParamError(f"workload file: {self.path!r} is not valid CSV: {_one_line(exc)}") from None
        if not rows:
            return []
        if column.isdigit():
            index = int(column)
            first = rows[0]
            if index >= len(first):
                raise ParamError(
                    f"workload file: unknown column {column!r}: the first row of {self.path!r} has "
                    f"{len(first)} column(s) (indices 0..{len(first) - 1})"
                )
            if self.p["header"]:
                rows = rows[1:]
        else:
            header = [f.strip() for f in rows[0]]
            if column not in header:
                shown = ", ".join(repr(h) for h in header[:12]) + (", ..." if len(header) > 12 else "")
                raise ParamError(
                    f"workload file: unknown column {_one_line(column)!r} in {self.path!r} (header: {_one_line(shown)})"
                )
            index = header.index(column)
            rows = rows[1:]
        keys: list[str] = []
        for row in rows:
            if index < len(row):
                key = row[index].strip()
                if key:
                    keys.append(key)
                    continue
            self.skipped += 1
        return keys

    @property
    def length(self) -> int:
        """Keys in one pass over the file."""
        return int(self.ids.size)

    # ------------------------------------------------------------------ streaming
    def batches(self, messages: int, interval_messages: int) -> Iterator[np.ndarray]:
        n = self.ids.size
        loop = bool(self.p["loop"])
        pos = 0
        for size in interval_sizes(messages, interval_messages):
            if loop:
                yield np.take(self.ids, np.arange(pos, pos + size, dtype=np.int64), mode="wrap")
                pos = (pos + size) % n
            else:
                if pos >= n:
                    return
                end = min(pos + size, n)
                yield self.ids[pos:end].copy()
                pos = end
