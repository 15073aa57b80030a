"""YAML read into typed fields as Go's yaml.v2 `UnmarshalStrict` reads it (exporter-toolkit's
decoder, go.yaml.in/yaml/v2), so that a file exporter-toolkit accepts means the same here.

PyYAML only builds the node tree; every scalar is resolved here by yaml.v2's rules, not PyYAML's
(which differ: `y`/`n` are booleans in yaml.v2, `1:30` is not a number, a date is not a date
object), and then converted to the field's Go type the way yaml.v2 converts it:

- into a string: any scalar, as written (`X-XSS-Protection: 1` is the string "1", `on` is "on");
- into a bool: only what yaml.v2 resolves as one (`true`, `yes`, `on`, `y`, ... in any of their
  spellings), never a quoted string or a number;
- into an int: an integer (`0x1f`, `017` and `1_000` included) or a float, truncated (yaml.v2
  does `int64(f)`);
- into a duration (`time.Duration`): a Go duration string (`100ms`, `1m30s`, `"0"`) or a number
  of nanoseconds (`interval: 0` is 0, `interval: 5` is 5 ns);
- null (`~`, `null`, nothing) is the type's zero value, also for a whole section: `rate_limit:`
  with nothing under it is the zero `RateLimiterConfig`, and a null section drops the defaults set
  before decoding (exporter-toolkit's `min_version` TLS12 and the like).

Strict, as `UnmarshalStrict`: a key that is no field is an error, and so is a field or map key
given twice. Merge keys (`<<: *anchor`) merge as in yaml.v2. Every error carries its line, and
decoding goes on after one, as yaml.v2 collects its type errors, so all are reported at once.
A rejected value is shown cut to 7 characters, as yaml.v2 shows it; a value decoded into a
`Secret` (a password hash, a private key) is a string whatever it is and so never shown.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

_TAG = "tag:yaml.org,2002:"
STR, BOOL, INT, FLOAT, NULL = (_TAG + t for t in ("str", "bool", "int", "float", "null"))
BINARY, TIMESTAMP, MERGE, SEQ, MAP = (_TAG + t for t in ("binary", "timestamp", "merge", "seq",
                                                         "map"))
PLAIN = "helios:plain"  # a plain scalar without a tag: resolved here, by yaml.v2's rules

_BOOLS = {**dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On",
                           "ON"), True),
          **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off",
                           "OFF"), False)}
_SPECIAL: dict[str, tuple[str, Any]] = {
    **{k: (BOOL, v) for k, v in _BOOLS.items()},
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), (NULL, None)),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), (FLOAT, math.nan)),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), (FLOAT, math.inf)),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), (FLOAT, -math.inf)),
    "<<": (MERGE, "<<"),
}
_HINT = {**dict.fromkeys("+-", "S"), **dict.fromkeys("0123456789", "D"),
         **dict.fromkeys("yYnNtTfFoO~", "M"), ".": "."}
_YAML_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_DOT_FLOAT = re.compile(r"^\.[0-9]+([eE][-+]?[0-9]+)?$")
_TIMESTAMP = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}"
                        r"([Tt ]\d{1,2}:\d{1,2}:\d{1,2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?)?$")
_DIGITS = {16: set("0123456789abcdefABCDEF"), 10: set("0123456789"), 8: set("01234567"),
           2: set("01")}
INT64 = (-(2 ** 63), 2 ** 63 - 1)
UINT64_MAX = 2 ** 64 - 1


# -- the Go types a field can have --------------------------------------------------------------
@dataclass(frozen=True)
class Scalar:
    kind: str  # "string", "bool", "int", "duration"
    go: str  # the type's name in messages, as Go spells it


@dataclass(frozen=True)
class Seq:
    item: Scalar
    go: str


@dataclass(frozen=True)
class Map:
    value: Scalar
    go: str


@dataclass(frozen=True)
class Struct:
    go: str
    fields: Mapping[str, Kind]


Kind = Scalar | Seq | Map | Struct
STRING = Scalar("string", "string")
BOOLEAN = Scalar("bool", "bool")
INTEGER = Scalar("int", "int")
DURATION = Scalar("duration", "time.Duration")


@dataclass(frozen=True)
class Zero:
    """A section given as null: every field at its zero value (the defaults dropped)."""

    struct: Struct

    def get(self, key: str, default: Any = None) -> Any:  # as a dict of zero values
        return zero(self.struct.fields[key]) if key in self.struct.fields else default


def zero(kind: Kind) -> Any:
    if isinstance(kind, Struct):
        return Zero(kind)
    if isinstance(kind, Seq | Map):
        return None
    return {"string": "", "bool": False, "int": 0, "duration": 0}[kind.kind]


@dataclass
class Decoded:
    """`value` as decoded (dicts for structs and maps, lists, str/bool/int; durations in
    nanoseconds); `errors` as yaml.v2 would report them, with the path of each field."""

    value: Any
    errors: list[str] = field(default_factory=list)
    failed: set[str] = field(default_factory=set)  # paths of fields that did not decode


class YamlError(ValueError):
    """Not YAML at all (a syntax error): nothing was decoded."""


# -- reading ------------------------------------------------------------------------------------
class _Loader(yaml.SafeLoader):
    """PyYAML's parser and composer; plain scalars keep the PLAIN tag, to be resolved here."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and implicit[0]:
            return PLAIN
        return super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]


def decode(data: bytes, schema: Struct) -> Decoded:
    """The first YAML document of `data` decoded into `schema` (as yaml.v2, which reads only the
    first); an empty stream decodes to an empty dict (nothing set). Raises `YamlError`."""
    try:
        documents = yaml.compose_all(data, Loader=_Loader)
        root = next(iter(documents), None)
    except yaml.YAMLError as exc:
        raise YamlError(str(exc)) from exc
    out = Decoded({})
    if root is not None:
        value = _Decoder(out).value(root, schema, "")
        out.value = value if isinstance(value, dict | Zero) else {}  # {} after a type error
    return out


class _Decoder:
    def __init__(self, out: Decoded) -> None:
        self.out = out
        self._merging: list[int] = []

    def error(self, node: yaml.Node, path: str, text: str) -> None:
        self.out.errors.append(f"line {node.start_mark.line + 1}: {path or '(top)'}: {text}")
        self.out.failed.add(path)

    def type_error(self, node: yaml.Node, path: str, kind: Kind) -> None:
        if isinstance(node, yaml.ScalarNode):
            tag = _tag_of(node)
            value = node.value
            shown = f" `{value[:7]}...`" if len(value) > 10 else f" `{value}`"
            what = _short(tag) + shown
        else:
            what = "!!seq" if isinstance(node, yaml.SequenceNode) else "!!map"
        self.error(node, path, f"cannot unmarshal {what} into {kind.go}")

    def value(self, node: yaml.Node, kind: Kind, path: str) -> Any:
        if isinstance(node, yaml.ScalarNode) and _tag_of(node) == NULL:
            return zero(kind)
        if isinstance(kind, Scalar):
            return self.scalar(node, kind, path)
        if isinstance(kind, Seq):
            if not isinstance(node, yaml.SequenceNode):
                self.type_error(node, path, kind)
                return None
            items = []
            for i, child in enumerate(node.value):
                before = len(self.out.errors)
                item = self.value(child, kind.item, f"{path}[{i}]")
                if len(self.out.errors) == before:  # as yaml.v2, a bad item is left out
                    items.append(item)
            return items
        if not isinstance(node, yaml.MappingNode):
            self.type_error(node, path, kind)
            return None
        target: dict[str, Any] = {}
        self.mapping(node, kind, path, target)
        return target

    def mapping(self, node: yaml.MappingNode, kind: Map | Struct, path: str,
                target: dict[str, Any]) -> None:
        done: set[str] = set()  # a struct's fields set by this very mapping
        for key_node, value_node in node.value:
            if _is_merge(key_node):
                self.merge(value_node, kind, path, target)
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self.type_error(key_node, path, STRING)
                continue
            key = self.scalar(key_node, STRING, path)
            where = f"{path}.{key}" if path else key
            if isinstance(kind, Struct):
                if key not in kind.fields:
                    self.error(key_node, where, "unknown field")
                    continue
                if key in done:
                    self.error(key_node, where, f"field {key} already set in type {kind.go}")
                    continue
                done.add(key)
                target[key] = self.value(value_node, kind.fields[key], where)
            else:
                before = len(self.out.errors)
                value = self.value(value_node, kind.value, where)
                if len(self.out.errors) > before:
                    continue
                if key in target:
                    self.error(value_node, where, f"key {key!r} already set in map")
                    continue
                target[key] = value

    def merge(self, node: yaml.Node, kind: Map | Struct, path: str,
              target: dict[str, Any]) -> None:
        nodes = list(reversed(node.value)) if isinstance(node, yaml.SequenceNode) else [node]
        for merged in nodes:  # earlier maps of a sequence take precedence: merged last
            if not isinstance(merged, yaml.MappingNode):
                self.error(merged, path, "map merge requires map or sequence of maps as the value")
                continue
            if id(merged) in self._merging:
                self.error(merged, path, "anchor value contains itself")
                continue
            self._merging.append(id(merged))
            self.mapping(merged, kind, path, target)
            self._merging.pop()

    def scalar(self, node: yaml.Node, kind: Scalar, path: str) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            self.type_error(node, path, kind)
            return zero(kind)
        try:
            tag, resolved = resolve(node)
        except ValueError as exc:
            self.error(node, path, str(exc))
            return zero(kind)
        if tag == NULL:
            return zero(kind)
        if kind.kind == "string":
            return resolved if tag == BINARY else node.value
        if kind.kind == "bool" and tag == BOOL:
            return resolved
        if kind.kind in ("int", "duration"):
            number = _integer(resolved, tag)
            if number is not None:
                return number
            if kind.kind == "duration" and tag == STR:
                nanoseconds = go_duration(resolved)
                if nanoseconds is not None:
                    return nanoseconds
        self.type_error(node, path, kind)
        return zero(kind)


def _integer(resolved: Any, tag: str) -> int | None:
    """An int field's value from an int or a float (truncated, as Go's `int64(f)`)."""
    if tag == INT and INT64[0] <= resolved <= INT64[1]:
        return int(resolved)
    if tag == FLOAT and math.isfinite(resolved) and resolved <= INT64[1] \
            and resolved >= INT64[0]:
        return int(resolved)
    return None


def _tag_of(node: yaml.ScalarNode) -> str:
    try:
        return resolve(node)[0]
    except ValueError:
        return str(node.tag)


def _is_merge(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.value == "<<" and node.tag in (PLAIN, MERGE)


def _short(tag: str) -> str:
    return "!!" + tag.removeprefix(_TAG) if tag.startswith(_TAG) else tag


# -- scalars ------------------------------------------------------------------------------------
def resolve(node: yaml.ScalarNode) -> tuple[str, Any]:
    """(tag, value) of a scalar as yaml.v2 resolves it: a quoted scalar is a string; a plain one
    is null, bool, int, float, timestamp or string by its text; an explicit standard tag must
    fit (`!!int abc` raises ValueError); any other tag leaves the text as it is."""
    tag, text = node.tag, node.value
    if tag == STR:
        return STR, text
    if tag == BINARY:
        try:
            return BINARY, base64.b64decode(text.replace("\n", ""), validate=True).decode(
                "utf-8", errors="replace")
        except (binascii.Error, ValueError) as exc:
            raise ValueError("!!binary value contains invalid base64 data") from exc
    if tag not in (PLAIN, BOOL, INT, FLOAT, NULL, TIMESTAMP):
        return tag, text  # a tag of the application's own: its text
    found = resolve_plain(text)
    if tag == PLAIN or found[0] == tag:
        return found
    if tag == FLOAT and found[0] == INT:
        return FLOAT, float(found[1])
    raise ValueError(f"cannot decode {_short(found[0])} `{text}` as a {_short(tag)}")


def resolve_plain(text: str) -> tuple[str, Any]:
    """yaml.v2's `resolve("", text)`."""
    hint = _HINT.get(text[:1], "") if text else "N"
    if not hint:
        return STR, text
    if text in _SPECIAL:
        special = _SPECIAL[text]
        return (STR, text) if special[0] == MERGE else special
    if hint == "." and _DOT_FLOAT.match(text):
        return FLOAT, float(text)
    if hint in "DS":
        if _TIMESTAMP.match(text):
            return TIMESTAMP, text
        plain = text.replace("_", "")
        number = go_parse_int(plain)
        if number is not None and INT64[0] <= number <= INT64[1]:
            return INT, number
        if number is not None and 0 <= number <= UINT64_MAX and plain[:1] not in "+-":
            return INT, number  # a uint64 above int64: no int field can take it
        if _YAML_FLOAT.match(plain):
            value = float(plain)
            if math.isfinite(value):
                return FLOAT, value
    return STR, text


def go_parse_int(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 0, 64) without its range check: a sign, then `0x`, `0o`, `0b`
    or a leading `0` (octal) choose the base."""
    body, sign = text, 1
    if body[:1] in ("+", "-"):
        sign, body = (-1 if body[0] == "-" else 1), body[1:]
    base, digits = 10, body
    prefix = body[:2].lower()
    if prefix in ("0x", "0o", "0b"):
        base, digits = {"0x": 16, "0o": 8, "0b": 2}[prefix], body[2:]
    elif len(body) > 1 and body[0] == "0":
        base, digits = 8, body[1:]
    if not digits or not set(digits) <= _DIGITS[base]:
        return None
    return sign * int(digits, base)


_DURATION = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 10 ** 9,
            "m": 60 * 10 ** 9, "h": 3600 * 10 ** 9}


def go_duration(text: str) -> int | None:
    """Go's time.ParseDuration in nanoseconds (`1m30s`, `-1.5h`, `250ms`, `0`); None when it is
    not one."""
    body, sign = text, 1
    if body[:1] in ("+", "-"):
        sign, body = (-1 if body[0] == "-" else 1), body[1:]
    if body == "0":
        return 0
    if not body:
        return None
    total, pos = 0.0, 0
    for match in _DURATION.finditer(body):
        number = match.group(1)
        if match.start() != pos or number in ("", "."):
            return None
        total += float(number) * _UNIT_NS[match.group(2)]
        pos = match.end()
    if pos != len(body) or total > INT64[1]:
        return None
    return sign * int(total)
