"""The console script's parser (commands/cli.py): --version, HELIOS_EXPORTER_<FLAG> for simulate
and demo.

Only parsing is exercised; no server is started.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from importlib.metadata import version

import pytest

from commands import cli


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("HELIOS_EXPORTER_"):
            monkeypatch.delenv(name)


def parse(*argv: str) -> argparse.Namespace:
    return cli.parse(list(argv))


def test_simulate_reads_listen_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIOS_EXPORTER_LISTEN", "127.0.0.1:8123")
    args = parse("simulate")
    assert args.listen == "127.0.0.1:8123" and args.scenario == "steady"


def test_simulate_without_listen_still_fails(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        parse("simulate")
    assert info.value.code == 2
    assert "--listen" in capsys.readouterr().err


def test_environment_values_are_typed_and_flags_win(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"HELIOS_EXPORTER_LISTEN": "127.0.0.1:1", "HELIOS_EXPORTER_SEED": "7",
           "HELIOS_EXPORTER_DOWN_SECONDS": "1.5", "HELIOS_EXPORTER_SCENARIO": "outage",
           "HELIOS_EXPORTER_OUTAGE_NEW_IMAGE": "yes", "HELIOS_EXPORTER_OUTAGE_KEEP_GENERATION": "off"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = parse("simulate", "--listen", "127.0.0.1:2", "--seed", "9")
    assert (args.listen, args.seed) == ("127.0.0.1:2", 9)
    assert args.down_seconds == 1.5 and args.scenario == "outage"
    assert args.outage_new_image is True and args.outage_keep_generation is False


@pytest.mark.parametrize("value", ["true", "1", "YES", "on"])
def test_demo_boolean_from_the_environment(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("HELIOS_EXPORTER_NO_PROMETHEUS", value)
    monkeypatch.setenv("HELIOS_EXPORTER_DURATION", "2.5")
    monkeypatch.setenv("HELIOS_EXPORTER_ENGINE_PORT", "8001")
    args = parse("demo")
    assert args.no_prometheus is True and args.duration == 2.5 and args.engine_port == 8001


def test_a_bad_boolean_is_a_clear_error(monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HELIOS_EXPORTER_NO_PROMETHEUS", "maybe")
    with pytest.raises(SystemExit) as info:
        parse("demo")
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "HELIOS_EXPORTER_NO_PROMETHEUS" in err and "'maybe'" in err and "true/false" in err


def test_every_bad_variable_is_reported(monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HELIOS_EXPORTER_LISTEN", "127.0.0.1:1")
    monkeypatch.setenv("HELIOS_EXPORTER_SEED", "seven")
    monkeypatch.setenv("HELIOS_EXPORTER_SCENARIO", "chaos")
    monkeypatch.setenv("HELIOS_EXPORTER_DOWN_SECONDS", "nan")
    with pytest.raises(SystemExit) as info:
        parse("simulate")
    assert info.value.code == 2
    err = capsys.readouterr().err
    for needle in ("HELIOS_EXPORTER_SEED", "'seven'", "HELIOS_EXPORTER_SCENARIO", "'chaos'",
                   "HELIOS_EXPORTER_DOWN_SECONDS", "finite"):
        assert needle in err


def test_a_bad_variable_is_ignored_when_its_flag_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIOS_EXPORTER_SEED", "seven")
    assert parse("simulate", "--listen", "h:1", "--seed", "3").seed == 3


def test_each_parse_reads_the_environment_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = cli.command_parser("simulate")
    monkeypatch.setenv("HELIOS_EXPORTER_LISTEN", "h:1")
    assert parser.parse_args([]).listen == "h:1"
    monkeypatch.delenv("HELIOS_EXPORTER_LISTEN")
    with pytest.raises(SystemExit):
        parser.parse_args([])


def test_non_finite_simulator_floats_are_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("simulate", "--listen", "h:1", "--outage-after", "inf")
    assert "finite" in capsys.readouterr().err


def test_serve_and_check_leave_the_environment_to_the_config_loader(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A simulate-only variable with a bad value does not disturb serve, and serve's own
    # variables are merged (with every error at once) by exporter.config, not by argparse.
    monkeypatch.setenv("HELIOS_EXPORTER_OUTAGE_NEW_IMAGE", "maybe")
    monkeypatch.setenv("HELIOS_EXPORTER_LISTEN", "127.0.0.1:9999")
    args = parse("serve", "--engine-url", "http://e:1")
    assert args.listen is None and args.no_nvml is None
    assert parse("check").engine_url is None


BAD = ["--engine-url", "ftp://engine", "--poll-interval", "0"]
BAD_ERRORS = [
    "--engine-url / HELIOS_EXPORTER_ENGINE_URL: expected an http(s) URL, got 'ftp://engine'",
    "--poll-interval / HELIOS_EXPORTER_POLL_INTERVAL: must be greater than 0, got 0.0",
    "--max-series-per-family / HELIOS_EXPORTER_MAX_SERIES_PER_FAMILY: must be greater than 0, "
    "got 0",
]


def _serve_badly(*extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HELIOS_EXPORTER_")}
    environ["HELIOS_EXPORTER_MAX_SERIES_PER_FAMILY"] = "0"
    return subprocess.run([sys.executable, "-m", "exporter", "serve", *BAD, *extra],
                          capture_output=True, text=True, timeout=60, check=False,
                          env=environ | (env or {}))


@pytest.mark.e2e
def test_config_errors_are_one_json_event_with_exit_2() -> None:
    """Every error at once, in the log format asked for: one line a log pipeline parses."""
    done = _serve_badly("--log-format", "json")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    event = json.loads(line)
    assert (event["event"], event["level"], event["command"]) == ("config_invalid", "error",
                                                                  "serve")
    assert event["errors"] == BAD_ERRORS
    assert done.stdout == ""


@pytest.mark.e2e
def test_config_errors_in_logfmt_and_on_the_console() -> None:
    done = _serve_badly(env={"HELIOS_EXPORTER_LOG_FORMAT": "logfmt"})
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("timestamp=") and " level=error event=config_invalid command=serve " \
        in line
    assert all(error in line for error in BAD_ERRORS)
    done = _serve_badly("--log-format", "console")
    assert done.returncode == 2
    assert "config_invalid" in done.stderr and all(e in done.stderr for e in BAD_ERRORS)
    assert not done.stderr.lstrip().startswith("{")


@pytest.mark.e2e
def test_an_invalid_log_format_is_reported_in_the_default_format() -> None:
    """Not a terminal: the default (auto) is JSON, the format error among the others."""
    done = _serve_badly("--log-format", "xml")
    assert done.returncode == 2
    event = json.loads(done.stderr)
    assert event["errors"] == [*BAD_ERRORS, "--log-format / HELIOS_EXPORTER_LOG_FORMAT: expected "
                               "auto, json, logfmt or console, got 'xml'"]


@pytest.mark.e2e
def test_version_names_the_package_and_python() -> None:
    done = subprocess.run([sys.executable, "-m", "exporter", "--version"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"helios-exporter {version('helios-exporter')} "
                           f"(Python {platform.python_version()})\n")
    assert done.stderr == ""


@pytest.mark.e2e
def test_parsing_serve_imports_no_other_command() -> None:
    """`serve` parses its own options alone: the long-running sidecar never imports the
    lab's commands (experiments, geometry, status, demo) or the simulator (about 2.5 MiB of its
    RSS)."""
    code = ("import sys; from exporter import cli; cli.command_parser('serve').parse_args([]); "
            "print('\\n'.join(sorted(sys.modules)))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.split()
    others = [m for m in loaded if m.split(".")[0] in ("lab", "simulator")]
    assert not others, others
    assert "exporter.config" in loaded


def test_the_compare_help_says_the_gates_repetitions() -> None:
    """The table's help line of `compare` names lab/compare/admission.py's count (the table
    imports no lab module to say it)."""
    from lab.compare.admission import MIN_REPETITIONS

    assert f"({MIN_REPETITIONS} repetitions a lane)" in cli.COMMANDS["compare"][0]
