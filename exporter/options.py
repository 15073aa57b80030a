"""The option model of every command: each option is declared once, as an `Option`.

From that one declaration come its flag, its variable (HELIOS_EXPORTER_<FLAG>: upper case, dashes
as underscores, docs/interface.md section 2), its conversion and checks, its `--help` line and its
row in a generated table. A command's options are a tuple of `Option`s (serve and check:
exporter/config.py's OPTIONS; the others beside their command).

`OptionParser` builds an argparse parser from them that takes every value as text; `resolve`
then merges flag over variable over default, converts and checks each value, and reports every
error together, each naming the flag and its variable: `--timeout / HELIOS_EXPORTER_TIMEOUT:
must be greater than 0, got 0.0`. serve and check resolve in exporter.config (their errors are a
log event); every other command's parser resolves as it parses, and exits 2 with all the errors
as argparse does with one. Only argparse's public interface is used.

This module imports nothing of the package but its defaults: the simulator's command line
declares its options here too.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from exporter.defaults import ENV_PREFIX

Kind = str | Callable[[str], Any]
"""A name in KINDS, or a function of the text that raises ValueError saying what is wrong."""


@dataclass(frozen=True, slots=True)
class Option:
    """One option: `flag` (`--poll-interval`, or a bare name for a positional argument), `kind`,
    `default` (a string is converted like a given value), `help`; then, by keyword, the checks
    of a converted value (`above`, `low`, `below`, `high`, `choices`, `check`), `required`,
    `repeat` (the flag may be given again; `nargs="+"` takes several values a time),
    `exclusive` (at most one option of that name may be set), and for --help `metavar`, `group`
    (a section of the help) and `default_text` (how the default is said, when not by value)."""

    flag: str
    kind: Kind
    default: Any = None
    help: str = ""
    _: KW_ONLY
    above: float | None = None
    low: float | None = None
    below: float | None = None
    high: float | None = None
    choices: Sequence[str] | None = None
    check: Callable[[Any], str | None] | None = None
    required: bool = False
    repeat: bool = False
    nargs: str | None = None
    exclusive: str | None = None
    metavar: str | None = None
    group: str | None = None
    default_text: str | None = None

    @property
    def positional(self) -> bool:
        return not self.flag.startswith("-")

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def env(self) -> str | None:
        """HELIOS_EXPORTER_<FLAG>; None for a positional argument."""
        return None if self.positional else ENV_PREFIX + self.dest.upper()

    @property
    def named(self) -> str:
        """How an error names the option: its flag and its variable (either may have set it)."""
        return self.flag if self.env is None else f"{self.flag} / {self.env}"

    @property
    def is_flag(self) -> bool:
        """A switch without a value (`--no-nvml`); its variable takes true/false."""
        return self.kind == "bool"

    def default_value(self) -> Any:
        if self.repeat:
            return list(self.default or ())
        if isinstance(self.default, str) and self.kind != "text":
            return convert(self, self.default)
        return self.default

    def shown_default(self) -> str | None:
        """The default as --help says it; None when there is nothing to say."""
        if self.default_text is not None:
            return self.default_text
        if self.default is None or self.is_flag or self.repeat:
            return None
        if isinstance(self.default, float):
            return f"{self.default:g}"
        return str(self.default)

    def help_line(self) -> str:
        parts = [] if self.env is None else [f"env {self.env}"]
        if self.required and self.env is not None:
            parts.append("required")  # not argparse's: the variable may give it
        shown = self.shown_default()
        if shown is not None:
            parts.append(f"default {shown}")
        line = f"{self.help} [{'; '.join(parts)}]" if parts else self.help
        return line.replace("%", "%%")  # argparse formats help with %


# -- kinds -----------------------------------------------------------------------------------------
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def parse_bool(text: str) -> bool | None:
    """true/false, 1/0, yes/no, on/off (any case; empty is false); None for anything else."""
    text = text.strip().lower()
    return True if text in _TRUE else False if text in _FALSE else None


def _bool(text: str) -> bool:
    value = parse_bool(text)
    if value is None:
        raise ValueError(f"expected true/false, 1/0, yes/no or on/off, got {text!r}")
    return value


def _float(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"expected a number, got {text.strip()!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {text.strip()!r}")
    return value


def _int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"expected a whole number, got {text.strip()!r}") from None


def _url(text: str) -> str:
    text = text.strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an http(s) URL, got {text!r}")
    return text.rstrip("/")


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets) as (host, port); ValueError otherwise."""
    text = text.strip()
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def _port(text: str) -> int:
    text = text.strip()
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"expected a port number 1-65535, got {text!r}")
    return int(text)


KINDS: Mapping[str, Callable[[str], Any]] = {
    "text": str,  # as given
    "str": str.strip,
    "path": lambda text: Path(text.strip()),
    "float": _float,  # finite
    "int": _int,
    "bool": _bool,
    "url": _url,  # http(s), without a trailing slash
    "listen": parse_listen,
    "port": _port,
}


def _bounds(opt: Option, value: Any) -> str | None:
    if not isinstance(value, int | float):
        return None
    low = opt.above if opt.above is not None else opt.low
    high = opt.below if opt.below is not None else opt.high
    if (opt.above is None or value > opt.above) and (opt.low is None or value >= opt.low) \
            and (opt.below is None or value < opt.below) and (opt.high is None or value <= opt.high):
        return None
    if high is None:
        assert low is not None
        said = f"greater than {low:g}" if opt.above is not None else f"{low:g} or more"
    elif low is None:
        said = f"less than {high:g}" if opt.below is not None else f"{high:g} or less"
    elif opt.low is not None and opt.high is not None:
        said = f"{low:g} to {high:g}"
    else:
        said = (f"in {'(' if opt.above is not None else '['}{low:g}, "
                f"{high:g}{')' if opt.below is not None else ']'}")
    return f"must be {said}, got {value}"


def one_of(values: Sequence[str]) -> str:
    """`a, b or c`."""
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " or " + values[-1]


def convert(opt: Option, text: str) -> Any:
    """One value of `opt` from its text, checked; ValueError saying what is wrong."""
    parse = KINDS[opt.kind] if isinstance(opt.kind, str) else opt.kind
    value = parse(text)
    problem = _bounds(opt, value)
    if problem is None and opt.choices is not None and value not in opt.choices:
        problem = f"expected {one_of(opt.choices)}, got {value!r}"
    if problem is None and opt.check is not None:
        problem = opt.check(value)
    if problem is not None:
        raise ValueError(problem)
    return value


# -- resolving -----------------------------------------------------------------------------------
def _is_set(value: Any) -> bool:
    return value is not None and value is not False and value != []


def raw_value(opt: Option, given: Mapping[str, Any], environ: Mapping[str, str]) -> Any:
    """What the command line gave `opt`, else its variable; None when neither did."""
    raw = given.get(opt.dest)
    if raw is None and opt.env is not None:
        raw = environ.get(opt.env)
    return raw


def resolve(options: Iterable[Option], given: Mapping[str, Any],
            environ: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """Every option's value (the flag's, else its variable's, else the default) from `given`
    (the parser's text values; None where a flag was not given), and every error, in the order
    the options are declared. An option in error takes its default."""
    options = tuple(options)
    values: dict[str, Any] = {}
    errors: list[str] = []
    for opt in options:
        raw, from_env = given.get(opt.dest), False
        if raw is None and opt.env is not None and opt.env in environ:
            raw, from_env = environ[opt.env], True
        values[opt.dest] = opt.default_value()
        if raw is None:
            if opt.required:
                errors.append(f"{opt.named} is required")
            continue
        if isinstance(raw, bool):  # a switch given on the command line
            values[opt.dest] = raw
            continue
        if opt.repeat and from_env:
            errors.append(f"{opt.named}: cannot be set from the environment (give the flag once "
                          "for each value)")
            continue
        try:
            values[opt.dest] = ([convert(opt, item) for item in raw] if opt.repeat
                                else convert(opt, raw))
        except ValueError as exc:
            errors.append(f"{opt.named}: {exc}")
    exclusive: dict[str, list[Option]] = {}
    for opt in options:
        if opt.exclusive is not None and _is_set(values[opt.dest]):
            exclusive.setdefault(opt.exclusive, []).append(opt)
    for first, *others in exclusive.values():
        errors += [f"{other.named}: contradicts {first.named}; drop one of them" for other in others]
    return values, errors


# -- argparse ------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser, options: Iterable[Option]) -> None:
    """Add `options` to `parser`, each taking text (argparse converts nothing, checks nothing
    and defaults to None, so that `resolve` knows what was given and reports every error)."""
    options = tuple(options)
    groups = {title: parser.add_argument_group(title)
              for title in dict.fromkeys(o.group for o in options if o.group is not None)}
    for opt in options:
        target = parser if opt.group is None else groups[opt.group]
        metavar = opt.metavar
        if metavar is None and opt.choices is not None:
            metavar = "{" + ",".join(opt.choices) + "}"
        if opt.positional:
            target.add_argument(opt.flag, metavar=metavar, help=opt.help_line())
        elif opt.is_flag:
            target.add_argument(opt.flag, action="store_true", default=None, help=opt.help_line())
        elif opt.repeat:
            target.add_argument(opt.flag, action="extend" if opt.nargs else "append",
                                nargs=opt.nargs, default=None, metavar=metavar,
                                help=opt.help_line())
        else:
            target.add_argument(opt.flag, default=None, metavar=metavar, help=opt.help_line())


class OptionError(Exception):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("invalid options:\n  " + "\n  ".join(errors))
        self.errors = errors


class OptionParser(argparse.ArgumentParser):
    """An argparse parser of declared options. With `resolve` (the default) a parse returns
    each option's value, from its flag, its variable (read at each parse from `environ`, the
    process environment by default) or its default, and exits 2 listing every error; without
    it the values stay as given, for exporter.config to resolve."""

    def __init__(self, *args: Any, options: Iterable[Option] = (), resolve: bool = True,
                 environ: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.options = tuple(options)
        self.resolve = resolve
        self.environ = environ
        add_arguments(self, self.options)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, rest = super().parse_known_args(args, namespace)
        if self.resolve:
            environ = os.environ if self.environ is None else self.environ
            values, errors = resolve(self.options, vars(parsed), environ)
            if errors:  # with what argparse would refuse next, so that nothing waits for a rerun
                extra = [f"unrecognized arguments: {' '.join(rest)}"] if rest else []
                self.error(str(OptionError(errors + extra)))
            for dest, value in values.items():
                setattr(parsed, dest, value)
        return parsed, rest


def parser(options: Iterable[Option], *, environ: Mapping[str, str] | None = None,
           **kwargs: Any) -> OptionParser:
    """A stand-alone parser of `options` (`python -m simulator`, the tests)."""
    return OptionParser(options=options, environ=environ, **kwargs)


# -- tables --------------------------------------------------------------------------------------
Opt = TypeVar("Opt", bound=Option)


def markdown_table(options: Iterable[Opt], commands: Callable[[Opt], str] | None = None) -> str:
    """flag | environment variable | default | [commands |] meaning, one row an option."""
    head = ["flag", "environment variable", "default", *(["commands"] if commands else []),
            "meaning"]
    rows = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for opt in options:
        default = "required" if opt.required else "(none)" if opt.default is None \
            else f"`{opt.default}`"
        cells = [f"`{opt.flag}`", f"`{opt.env}`", default,
                 *([commands(opt)] if commands else []), opt.help]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)
