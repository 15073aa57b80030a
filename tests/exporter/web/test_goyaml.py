"""YAML decoded into Go types as yaml.v2's UnmarshalStrict decodes it (exporter/web/goyaml.py).
The expected values are yaml.v2's, read from its resolve.go and decode.go (v2.4.4)."""

from __future__ import annotations

import math

import pytest

from exporter.web import goyaml
from exporter.web.goyaml import BOOLEAN, DURATION, INTEGER, STRING, Map, Seq, Struct, Zero

SCHEMA = Struct("test.T", {
    "s": STRING, "b": BOOLEAN, "i": INTEGER, "d": DURATION, "list": Seq(STRING, "[]string"),
    "map": Map(STRING, "map[string]string"),
    "inner": Struct("test.Inner", {"s": STRING, "b": BOOLEAN}),
})


def one(text: str) -> goyaml.Decoded:
    return goyaml.decode(text.encode(), SCHEMA)


@pytest.mark.parametrize(("text", "value"), [
    ("1", "1"), ("0x1F", "0x1F"), ("1.50", "1.50"), ("on", "on"), ("yes", "yes"), ("~x", "~x"),
    ("'1'", "1"), ('"true"', "true"), ("2001-12-14", "2001-12-14"), ("1:30", "1:30"),
    ("max-age=31536000; includeSubDomains", "max-age=31536000; includeSubDomains"),
    ("!!str 12", "12"), ("!custom thing", "thing"), ("!!binary aGk=", "hi"),
    ("", ""), ("~", ""), ("null", ""),
])
def test_any_scalar_goes_into_a_string_as_written(text: str, value: str) -> None:
    decoded = one(f"s: {text}\n")
    assert decoded.errors == [] and decoded.value["s"] == value


@pytest.mark.parametrize(("text", "value"), [
    ("true", True), ("True", True), ("TRUE", True), ("yes", True), ("Y", True), ("y", True),
    ("on", True), ("ON", True), ("false", False), ("no", False), ("n", False), ("N", False),
    ("off", False), ("Off", False), ("", False), ("~", False),
])
def test_booleans_are_yaml_1_1s(text: str, value: bool) -> None:
    decoded = one(f"b: {text}\n")
    assert decoded.errors == [] and decoded.value["b"] is value


@pytest.mark.parametrize(("text", "shown"), [
    ('"true"', "!!str `true`"), ("1", "!!int `1`"), ("0", "!!int `0`"), ("yess", "!!str `yess`"),
    ("1.0", "!!float `1.0`"), ("[true]", "!!seq"), ("{a: 1}", "!!map"),
    ("enabled-for-everyone", "!!str `enabled...`"),
])
def test_what_is_no_bool_is_an_error_with_its_line(text: str, shown: str) -> None:
    decoded = one(f"s: fine\nb: {text}\n")
    assert decoded.errors == [f"line 2: b: cannot unmarshal {shown} into bool"]
    assert decoded.failed == {"b"}


@pytest.mark.parametrize(("text", "value"), [
    ("20", 20), ("-3", -3), ("+7", 7), ("0x1f", 31), ("0o17", 15), ("017", 15), ("0b101", 5),
    ("1_000", 1000), ("2.9", 2), ("-2.9", -2), ("1e3", 1000), ("08", 8), ("", 0), ("null", 0),
])
def test_ints_take_integers_and_truncated_floats(text: str, value: int) -> None:
    decoded = one(f"i: {text}\n")
    assert decoded.errors == [] and decoded.value["i"] == value


@pytest.mark.parametrize(("text", "shown"), [
    ('"20"', "!!str `20`"), ("true", "!!bool `true`"), ("ten", "!!str `ten`"),
    (".inf", "!!float `.inf`"), (".nan", "!!float `.nan`"), ("1s", "!!str `1s`"),
    ("99999999999999999999", "!!float `9999999...`"),  # above uint64: a float
])
def test_what_is_no_int_is_an_error(text: str, shown: str) -> None:
    assert one(f"i: {text}\n").errors == [f"line 1: i: cannot unmarshal {shown} into int"]


@pytest.mark.parametrize(("text", "nanoseconds"), [
    ("0", 0), ("'0'", 0), ("100ms", 100_000_000), ("1m30s", 90 * 10 ** 9), ("1.5h", 5400 * 10 ** 9),
    ("-1s", -(10 ** 9)), ('"250us"', 250_000), ("10µs", 10_000), ("10μs", 10_000), ("1.s", 10 ** 9),
    (".5s", 500_000_000), ("5", 5), ("2.7", 2), ("", 0),
])
def test_durations_are_go_durations_or_nanoseconds(text: str, nanoseconds: int) -> None:
    decoded = one(f"d: {text}\n")
    assert decoded.errors == [] and decoded.value["d"] == nanoseconds


@pytest.mark.parametrize("text", ["soon", "1x", "s", ".s", "1s garbage", "true", "[1s]"])
def test_what_is_no_duration_is_an_error(text: str) -> None:
    (error,) = one(f"d: {text}\n").errors
    assert error.startswith("line 1: d: cannot unmarshal ") and error.endswith(" into time.Duration")


def test_unknown_and_repeated_fields_are_errors_and_the_rest_is_decoded() -> None:
    decoded = one("s: a\nnope: 1\ns: b\ninner: {s: x, what: 2}\nmap: {k: v, k: w}\nb: yes\n")
    assert decoded.errors == [
        "line 2: nope: unknown field",
        "line 3: s: field s already set in type test.T",
        "line 4: inner.what: unknown field",
        "line 5: map.k: key 'k' already set in map",
    ]
    assert decoded.value == {"s": "a", "inner": {"s": "x"}, "map": {"k": "v"}, "b": True}


def test_null_sections_are_zero_values_and_absent_ones_are_not_set() -> None:
    decoded = one("inner:\nlist: ~\nmap:\n")
    inner = decoded.value["inner"]
    assert isinstance(inner, Zero) and inner.get("b") is False and inner.get("s") == ""
    assert decoded.value["list"] is None and decoded.value["map"] is None
    assert "s" not in decoded.value
    assert goyaml.decode(b"", SCHEMA).value == {}
    assert isinstance(goyaml.decode(b"~\n", SCHEMA).value, Zero)


def test_lists_and_maps_coerce_their_items_and_keys() -> None:
    decoded = one("list: [a, 1, true, ~]\nmap: {1: on, yes: 0x10, x: }\n")
    assert decoded.value["list"] == ["a", "1", "true", ""]
    assert decoded.value["map"] == {"1": "on", "yes": "0x10", "x": ""}
    bad = one("list: [a, [b], c]\n")
    assert bad.errors == ["line 1: list[1]: cannot unmarshal !!seq into string"]
    assert bad.value["list"] == ["a", "c"]  # as yaml.v2: the bad item is left out


def test_anchors_and_merge_keys() -> None:
    decoded = one("map: &m {a: '1', b: '2'}\ninner:\n  <<: {s: merged, b: on}\n  s: own\n")
    assert decoded.errors == []
    assert decoded.value["inner"] == {"s": "own", "b": True}
    merged = one("map:\n  <<: [{a: x}, {b: y}]\n  c: z\n")
    assert merged.value["map"] == {"a": "x", "b": "y", "c": "z"}
    looped = one("inner: &x\n  <<: *x\n")
    assert any("contains itself" in e for e in looped.errors)


def test_explicit_tags_must_fit() -> None:
    assert one("i: !!int 5\n").value["i"] == 5
    assert one("s: !!int abc\n").errors == ["line 1: s: cannot decode !!str `abc` as a !!int"]
    assert one("b: !!bool yes\n").value["b"] is True


def test_only_the_first_document_is_read_and_syntax_errors_raise() -> None:
    assert one("s: first\n---\ns: [second\n").value == {"s": "first"}
    with pytest.raises(goyaml.YamlError):
        one("s: [unclosed\n")
    with pytest.raises(goyaml.YamlError):
        goyaml.decode(b"s: \xff\xfe\x00bad\n", SCHEMA)


def test_the_top_level_must_be_a_mapping() -> None:
    (error,) = one("just some words here\n").errors
    assert error == "line 1: (top): cannot unmarshal !!str `just so...` into test.T"


def test_plain_scalars_resolve_as_yaml_v2_resolves_them() -> None:
    r = goyaml.resolve_plain
    assert r("y") == (goyaml.BOOL, True) and r("Off") == (goyaml.BOOL, False)
    assert r("0b11") == (goyaml.INT, 3) and r("-0x10") == (goyaml.INT, -16)
    assert r("1.5e3") == (goyaml.FLOAT, 1500.0) and r(".5") == (goyaml.FLOAT, 0.5)
    assert r("-.inf")[1] == -math.inf and math.isnan(r(".NaN")[1])
    assert r("1e999") == (goyaml.STR, "1e999")  # out of range: a string, as ParseFloat errs
    assert r("<<") == (goyaml.STR, "<<") and r("Yes please") == (goyaml.STR, "Yes please")
    assert r("2001-12-14T21:59:43.10Z")[0] == goyaml.TIMESTAMP
