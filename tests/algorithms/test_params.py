import pytest

from skewlab.engine.config.params import Param, ParamError, parse_assignments, resolve_params

DECL = (
    Param("theta_max", "float", 0.1, "bound", low=0, high=1, low_open=True),
    Param("amax", "int", 100, "table", low=0),
    Param("flag", "bool", False, "a flag"),
    Param("utility", "choice", "APM", "u", choices=("A", "APM")),
    Param("path", "str", "", "a path"),
)


def test_defaults_and_coercion():
    v = resolve_params(DECL, {"theta_max": "0.5", "amax": "7", "flag": "yes", "utility": "A", "path": "x.txt"})
    assert v == {"theta_max": 0.5, "amax": 7, "flag": True, "utility": "A", "path": "x.txt"}
    assert resolve_params(DECL, None)["amax"] == 100


@pytest.mark.parametrize(
    "given, fragment",
    [
        ({"theta_max": "0"}, "out of range (0, 1]"),
        ({"theta_max": "2"}, "out of range (0, 1]"),
        ({"theta_max": "nan"}, "finite"),
        ({"theta_max": "abc"}, "expected a number in (0, 1]"),
        ({"amax": "1.5"}, "expected an integer in [0, inf)"),
        ({"amax": "-1"}, "out of range [0, inf)"),
        ({"amax": True}, "expected a number"),
        ({"flag": "maybe"}, "expected true|false"),
        ({"utility": "X"}, "one of A|APM"),
        ({"nope": 1}, "unknown parameter 'nope'"),
        ({"path": "a\x00b"}, "NUL"),
    ],
)
def test_errors_are_one_line_and_name_the_range(given, fragment):
    with pytest.raises(ParamError) as exc:
        resolve_params(DECL, given, owner="x")
    msg = str(exc.value)
    assert fragment in msg
    assert "\n" not in msg


def test_parse_assignments():
    assert parse_assignments(["a=1", " b = x=y "]) == {"a": "1", "b": "x=y"}
    with pytest.raises(ParamError):
        parse_assignments(["novalue"])
    with pytest.raises(ParamError):
        parse_assignments(["=3"])


def test_to_dict_has_range_for_forms():
    d = DECL[0].to_dict()
    assert d["range"] == "(0, 1]" and d["default"] == 0.1 and d["kind"] == "float"


def test_integers_accept_the_notations_the_range_shows():
    amax = Param("amax", "int", 3000, "table", low=1, high=1_000_000)
    assert amax.range_text() == "[1, 1e+06]"
    assert [amax.coerce(t) for t in ("1e3", "1000", " 1E3 ", "1.5e3", "1e+06", "1000.0")] == [1000, 1000, 1000, 1500,
                                                                                              1_000_000, 1000]
    for bad, fragment in (("1.5", "expected an integer"), ("1e-1", "expected an integer"), ("1e400", "expected an integer"),
                          ("inf", "expected an integer"), ("2e6", "out of range [1, 1e+06]")):
        with pytest.raises(ParamError) as exc:
            amax.coerce(bad)
        assert fragment in str(exc.value)
    assert all(isinstance(amax.coerce(t), int) for t in ("1e3", "2000"))


def test_ranges_are_shown_exactly():
    assert Param("n", "int", 1, "n", low=1, high=2**20).range_text() == "[1, 1048576]"
    assert Param("x", "float", 0.5, "x", low=0.0, high=0.123456789).range_text() == "[0, 0.123456789]"
