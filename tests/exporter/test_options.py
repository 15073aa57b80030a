"""The option model (exporter/options.py): one declaration gives the flag, the variable, the
conversion and checks, the --help line; every error is reported together."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from commands import cli
from exporter import options
from exporter.options import Option
from tests.conftest import ROOT

DECLARED = (
    Option("--interval", "float", 2.0, "seconds between redraws", above=0, metavar="S"),
    Option("--share", "float", 0.05, "a fraction", low=0, below=1),
    Option("--ranks", "int", None, "ranks", low=1, high=64),
    Option("--grace", "float", 60.0, "seconds", low=0),
    Option("--port", "port", 8000, "a port"),
    Option("--mode", "str", "same", "how", choices=("same", "new")),
    Option("--state-dir", "path", "/var/lib/x", "where"),
    Option("--name", "text", None, "a name", check=lambda v: None if v != "bad" else "not that"),
    Option("--url", "url", None, "the URL", required=True),
    Option("--probe", "text", (), "a pair (repeatable)", repeat=True),
    Option("--quiet", "bool", False, "say less", exclusive="voice"),
    Option("--loud", "bool", False, "say more", exclusive="voice"),
)


def resolve(given: dict[str, Any], environ: dict[str, str] | None = None
            ) -> tuple[dict[str, Any], list[str]]:
    return options.resolve(DECLARED, {"url": "http://e:1"} | given, environ or {})


def test_the_variable_is_the_flag_in_upper_case_with_underscores() -> None:
    opt = Option("--max-series-per-family", "int", 200, "")
    assert (opt.dest, opt.env) == ("max_series_per_family", "HELIOS_EXPORTER_MAX_SERIES_PER_FAMILY")
    assert opt.named == "--max-series-per-family / HELIOS_EXPORTER_MAX_SERIES_PER_FAMILY"
    positional = Option("action", "str", choices=("begin", "end"))
    assert positional.positional and positional.env is None and positional.named == "action"


def test_defaults_are_typed_and_a_string_default_is_converted() -> None:
    values, errors = resolve({})
    assert errors == []
    assert values == {"interval": 2.0, "share": 0.05, "ranks": None, "grace": 60.0, "port": 8000,
                      "mode": "same", "state_dir": Path("/var/lib/x"), "name": None,
                      "url": "http://e:1", "probe": [], "quiet": False, "loud": False}


def test_the_flag_wins_over_the_variable_which_wins_over_the_default() -> None:
    env = {"HELIOS_EXPORTER_INTERVAL": "0.5", "HELIOS_EXPORTER_GRACE": "7",
           "HELIOS_EXPORTER_QUIET": "yes", "HELIOS_EXPORTER_MODE": " new "}
    values, errors = resolve({"interval": "3"}, env)
    assert errors == []
    assert (values["interval"], values["grace"], values["quiet"], values["mode"]) == (
        3.0, 7.0, True, "new")


def test_a_bad_variable_is_ignored_when_its_flag_is_given() -> None:
    values, errors = resolve({"ranks": "2"}, {"HELIOS_EXPORTER_RANKS": "two"})
    assert errors == [] and values["ranks"] == 2


@pytest.mark.parametrize(("given", "error"), [
    ({"interval": "0"}, "--interval / HELIOS_EXPORTER_INTERVAL: must be greater than 0, got 0.0"),
    ({"interval": "soon"}, "--interval / HELIOS_EXPORTER_INTERVAL: expected a number, got 'soon'"),
    ({"interval": "inf"}, "--interval / HELIOS_EXPORTER_INTERVAL: expected a finite number, got "
                          "'inf'"),
    ({"share": "1"}, "--share / HELIOS_EXPORTER_SHARE: must be in [0, 1), got 1.0"),
    ({"ranks": "65"}, "--ranks / HELIOS_EXPORTER_RANKS: must be 1 to 64, got 65"),
    ({"ranks": "1.5"}, "--ranks / HELIOS_EXPORTER_RANKS: expected a whole number, got '1.5'"),
    ({"grace": "-1"}, "--grace / HELIOS_EXPORTER_GRACE: must be 0 or more, got -1.0"),
    ({"port": "70000"}, "--port / HELIOS_EXPORTER_PORT: expected a port number 1-65535, got "
                        "'70000'"),
    ({"mode": "old"}, "--mode / HELIOS_EXPORTER_MODE: expected same or new, got 'old'"),
    ({"name": "bad"}, "--name / HELIOS_EXPORTER_NAME: not that"),
    ({"url": "ftp://e"}, "--url / HELIOS_EXPORTER_URL: expected an http(s) URL, got 'ftp://e'"),
    ({"url": None}, "--url / HELIOS_EXPORTER_URL is required"),
    ({"quiet": True, "loud": True}, "--loud / HELIOS_EXPORTER_LOUD: contradicts --quiet / "
                                    "HELIOS_EXPORTER_QUIET; drop one of them"),
])
def test_each_check_says_what_is_wrong(given: dict[str, Any], error: str) -> None:
    _, errors = resolve(given)
    assert errors == [error]


def test_every_error_is_reported_together_in_declared_order_and_takes_the_default() -> None:
    env = {"HELIOS_EXPORTER_QUIET": "maybe", "HELIOS_EXPORTER_PROBE": "a:b",
           "HELIOS_EXPORTER_LOUD": "1"}
    values, errors = resolve({"port": "0", "interval": "-2", "url": None}, env)
    assert errors == [
        "--interval / HELIOS_EXPORTER_INTERVAL: must be greater than 0, got -2.0",
        "--port / HELIOS_EXPORTER_PORT: expected a port number 1-65535, got '0'",
        "--url / HELIOS_EXPORTER_URL is required",
        "--probe / HELIOS_EXPORTER_PROBE: cannot be set from the environment (give the flag once "
        "for each value)",
        "--quiet / HELIOS_EXPORTER_QUIET: expected true/false, 1/0, yes/no or on/off, got 'maybe'",
    ]
    assert (values["interval"], values["port"], values["quiet"], values["loud"]) == (
        2.0, 8000, False, True)


def test_repeated_flags_convert_each_value() -> None:
    opt = Option("--record", "path", (), "records", repeat=True, nargs="+")
    parsed = options.parser([opt], environ={}).parse_args(["--record", "a", "b", "--record", "c"])
    assert parsed.record == [Path("a"), Path("b"), Path("c")]


def test_the_parser_exits_2_with_every_error_and_what_it_did_not_recognise(
        capsys: pytest.CaptureFixture[str]) -> None:
    parser = options.parser(DECLARED, environ={"HELIOS_EXPORTER_RANKS": "0"}, prog="cmd")
    with pytest.raises(SystemExit) as info:
        parser.parse_args(["--interval", "0", "--bogus"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.endswith(
        "cmd: error: invalid options:\n"
        "  --interval / HELIOS_EXPORTER_INTERVAL: must be greater than 0, got 0.0\n"
        "  --ranks / HELIOS_EXPORTER_RANKS: must be 1 to 64, got 0\n"
        "  --url / HELIOS_EXPORTER_URL is required\n"
        "  unrecognized arguments: --bogus\n")


def test_the_environment_is_read_at_each_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = options.parser(DECLARED)
    monkeypatch.setenv("HELIOS_EXPORTER_URL", "http://a:1")
    assert parser.parse_args([]).url == "http://a:1"
    monkeypatch.setenv("HELIOS_EXPORTER_URL", "http://b:2/")
    assert parser.parse_args([]).url == "http://b:2"


def test_help_names_the_variable_and_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert DECLARED[0].help_line() == "seconds between redraws [env HELIOS_EXPORTER_INTERVAL; " \
        "default 2]"
    assert DECLARED[8].help_line() == "the URL [env HELIOS_EXPORTER_URL; required]"
    assert Option("--x", "int", None, "50% of it", default_text="all").help_line() == \
        "50%% of it [env HELIOS_EXPORTER_X; default all]"  # argparse formats it with %
    with pytest.raises(SystemExit):
        options.parser(DECLARED, environ={}).parse_args(["--help"])
    out = capsys.readouterr().out.replace("\n", " ")
    assert re.search(r"--interval S +seconds between redraws \[env +HELIOS_EXPORTER_INTERVAL; "
                     r"+default +2\]", out), out
    assert "--mode {same,new}" in out


@pytest.mark.parametrize("name", list(cli.commands()))
def test_every_option_of_every_command_is_documented_and_named_once(name: str) -> None:
    declared = cli.commands()[name].options
    assert [o.flag for o in declared if not o.help.strip()] == []
    dests = [o.dest for o in declared]
    assert len(dests) == len(set(dests))
    for opt in declared:  # the declared default is a valid value
        opt.default_value()


def test_no_command_line_reads_argparse_internals() -> None:
    """argparse's private names change between Python releases: the option model uses its public
    interface only."""
    private = re.compile(r"argparse\._|\._actions\b|\._option_string_actions\b|\._get_")
    offenders = [str(p.relative_to(ROOT)) for folder in ("exporter", "simulator")
                 for p in (ROOT / folder).rglob("*.py") if private.search(p.read_text())]
    assert offenders == []
