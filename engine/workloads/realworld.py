"""Real-world key streams: ``words`` (English/other word frequencies from ``wordfreq``) and ``file``
(replay of a text or CSV file).

Conventions as in :mod:`skewlab.engine.workloads.synthetic`: the vocabulary is built once in the
constructor, ``batches(messages, interval_messages)`` yields ``int64`` id arrays of
``interval_messages`` ids (the last may be shorter), each call replays from the start.
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterator, Mapping

import numpy as np

from skewlab.engine.config.params import Param, ParamError
from skewlab.engine.workloads import Workload, register_workload
from skewlab.engine.workloads.key_file import read_key_file
from skewlab.engine.workloads.synthetic import _cdf, _rngs, interval_sizes, sample_cdf

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


@register_workload
class FileWorkload(Workload):
    """Replay the keys of a file, in file order (the seed is not used).

    The file is read by :func:`skewlab.engine.workloads.key_file.read_key_file`, the reader of the Spark
    file source too (its rules: lines, CSV ``column`` by name or 0-based index, ``header``,
    ``delimiter`` (``tab`` means a tab), white space stripped, UTF-8 with an optional BOM).  Records
    without a key are skipped and counted in :attr:`dead_letters` (``{reason: (count, samples)}``, as
    the engine counts them; :attr:`skipped`: those other than blank lines); a line that is not UTF-8
    is an error here (the Spark source emits it as a dead letter).  With ``value_column`` a record
    needs a number there too (the engine's ``--value-field``), so the same records are replayed as
    the engine's operator of values sees; the values themselves are not used (no operator here).

    * ``loop`` false: the stream ends at the end of the file, so fewer than ``messages`` keys may
      come out (the last batch is then shorter).  ``loop`` true: the file repeats until
      ``messages`` keys have been produced.
    * A missing, unreadable, empty, non-UTF-8 or key-less file and an unknown column raise
      :class:`ParamError` with a one-line message in the constructor.

    The whole file is read and encoded into :attr:`vocab` once, in the constructor.
    """

    name: ClassVar[str] = "file"
    summary: ClassVar[str] = "Replay keys from a text file (one per line) or a CSV column; optional loop"
    params: ClassVar[tuple[Param, ...]] = (
        Param("path", "str", "", "file to replay (UTF-8 text)"),
        Param("column", "str", "", "CSV column name or 0-based index; empty = one key per line", high=256),
        Param("value_column", "str", "", "CSV column of each record's value: records without a number there "
              "are dead letters, as in the engine (the local runtime replays keys only)", high=256),
        Param("loop", "bool", False, "start over at the end of the file"),
        Param("header", "bool", False, "with a column index: skip the first row (a name implies a header)"),
        Param("delimiter", "str", ",", "CSV field delimiter: one character, or 'tab'", high=3),
    )

    def __init__(self, seed: int = 0, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(seed, params)
        path = str(self.p["path"])
        owner = "workload file"
        if not path.strip():
            raise ParamError(f"{owner}: parameter path is required (the file to replay)")
        self.path = path
        records = read_key_file(path, str(self.p["column"]), str(self.p["delimiter"]),
                                True if self.p["header"] else None, value_column=str(self.p["value_column"]),
                                owner=owner)
        if not records.keys:
            raise ParamError(f"{owner}: {path!r} is empty")
        if "bad_utf8" in records.errors:
            line = records.errors.index("bad_utf8") + 1
            raise ParamError(f"{owner}: {path!r} is not UTF-8 text (invalid bytes in data line {line})")
        keys = records.good()
        if not keys:
            raise ParamError(f"{owner}: {path!r} contains no keys (empty file or only blank lines/fields)")
        self.dead_letters = records.dead_letters()
        self.skipped = sum(count for reason, (count, _) in self.dead_letters.items() if reason != "empty_line")
        self.ids = self.vocab.encode(keys)  # the file's keys in order, as vocabulary ids

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
