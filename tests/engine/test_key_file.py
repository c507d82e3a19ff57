"""The one key-file reader (skewlab.engine.workloads.key_file): its edge cases, and the same key sequence on the
``simulate --input`` path (the ``file`` workload) and the Spark file source's loader."""

import numpy as np
import pytest

from skewlab.engine.config.params import ParamError
from skewlab.engine.workloads import create_workload
from skewlab.engine.workloads.key_file import RAW_BYTES, parse_separator, read_key_file


def write(tmp_path, data: bytes, name="k.txt") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize(
    "data, column, header, keys, errors",
    [
        # one key per line: white space stripped, blank lines are empty_line records
        (b" a \n\n  \nb\n", "", None, ["a", None, None, "b"], [None, "empty_line", "empty_line", None]),
        # CRLF and a last line without newline
        (b"a\r\nb\r\nc", "", None, ["a", "b", "c"], [None, None, None]),
        # a UTF-8 byte-order mark is not part of the first key (nor of the header)
        (b"\xef\xbb\xbfa\nb\n", "", None, ["a", "b"], [None, None]),
        (b"\xef\xbb\xbfw,n\nx,1\n", "w", None, ["x"], [None]),
        # a header by name, blank lines before it skipped; quoted separator is one field
        (b"\nid,word\n1,\"x,y\"\n2, z \n", "word", None, ["x,y", "z"], [None, None]),
        # an index: no header unless asked
        (b"id,word\n1,x\n", "0", None, ["id", "1"], [None, None]),
        (b"id,word\n1,x\n", "0", True, ["1"], [None]),
        # short rows, empty fields, bad UTF-8
        (b"a,b\n1\n2,\n3,\xff\n", "b", None, [None, None, None],
         ["missing_column", "empty_key", "bad_utf8"]),
        # an unclosed quote does not swallow the rest of the row into one key; text after a quote is bad too
        (b"a,b\n1,\"x,y\n2,z\n3,\"q\"r\n", "b", None, [None, "z", None], ["bad_quote", None, "bad_quote"]),
        # empty file: no records
        (b"", "", None, [], []),
        (b"", "word", None, [], []),
    ],
)
def test_read_key_file_edge_cases(tmp_path, data, column, header, keys, errors):
    got = read_key_file(write(tmp_path, data), column, header=header)
    assert got.keys == keys and got.errors == errors
    assert [r is None for r in got.raws] == [e is None for e in errors]


def test_raw_is_the_bad_line_as_readable_text(tmp_path):
    """Issue 38 item 4: a dead letter's sample is the record as text (bytes not UTF-8 escaped), not hex."""
    got = read_key_file(write(tmp_path, b"a,b\n" + b"q" * 40 + b"\n" + b"\xff" + b"r" * 300 + b"\n"), "b")
    assert got.errors == ["missing_column", "bad_utf8"]
    assert got.raws == ["q" * 40, "\\xff" + "r" * (RAW_BYTES - 1) + "…"]


def test_separators(tmp_path):
    assert read_key_file(write(tmp_path, b"a\tb\n1\tq\n"), "b", "tab").keys == ["q"]
    assert read_key_file(write(tmp_path, b"a;b\n1;\"q;r\"\n"), "b", ";").keys == ["q;r"]
    assert parse_separator("\\t") == "\t"
    for bad in ("", ",,", '"', "\n"):
        with pytest.raises(ParamError, match="separator"):
            parse_separator(bad)


@pytest.mark.parametrize(
    "data, column, header, pattern",
    [
        (b"a,b\n1,2\n", "c", None, r"unknown column 'c': not in the header"),
        (b"a,b\n1,2\n", "5", None, r"unknown column '5': the first row .* has 2 column\(s\)"),
        (b"a,b\n1,2\n", "2", True, r"unknown column '2'"),
        (b"a,b\n1,2\n", "b", False, "is a name but header is false"),
    ],
)
def test_column_errors_are_one_line(tmp_path, data, column, header, pattern):
    with pytest.raises(ParamError, match=pattern) as err:
        read_key_file(write(tmp_path, data), column, header=header, owner="test")
    assert "\n" not in str(err.value) and str(err.value).startswith("test: ")


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(ParamError, match="no such file"):
        read_key_file(str(tmp_path / "nope.txt"))
    with pytest.raises(ParamError, match="is a directory"):
        read_key_file(str(tmp_path))


@pytest.mark.parametrize(
    "data, column",
    [
        (b"\xef\xbb\xbf  alpha \r\n\r\nbeta\r\n   \r\nalpha\r\n007\r\n7\r\ngamma", ""),
        (b'id,word,n\r\n1, x ,5\r\n2,"y,z",6\r\n\r\n3,,7\r\n4\r\n5,x,8\r\n', "word"),
        (b'id,word,n\n1, x ,5\n2,"y,z",6\n', "1"),
    ],
)
def test_simulate_and_spark_file_source_read_the_same_keys(tmp_path, data, column):
    from skewlab.engine.runtimes.spark import sources as S

    path = write(tmp_path, data, "same.csv")
    w = create_workload("file", 0, {"path": path, "column": column})
    simulated = [w.vocab.names[i] for i in np.concatenate(list(w.batches(w.length, 4)))]
    keys, errors, _, _ = S.load_key_file(path, column)
    spark = [k for k, e in zip(keys.to_pylist(), errors.to_pylist()) if e is None]
    assert simulated == spark and simulated
