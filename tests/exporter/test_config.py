from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from exporter import config as cfg
from exporter import placeholders
from tests.conftest import ROOT


def parse(argv: list[str], env: dict[str, str] | None = None) -> cfg.Config:
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, "serve")
    return cfg.load(parser.parse_args(argv), "serve", env or {})


def test_defaults_match_the_contract() -> None:
    c = parse(["--engine-url", "http://127.0.0.1:8000"])
    assert (c.poll_interval, c.request_cutoff, c.restore_bound, c.down_grace) == (
        5.0, 4200.0, 5400.0, 60.0)


def test_environment_is_read_and_flags_win() -> None:
    env = {"HELIOS_EXPORTER_ENGINE_URL": "http://e:1", "HELIOS_EXPORTER_POLL_INTERVAL": "0.5",
           "HELIOS_EXPORTER_NO_NVML": "true", "HELIOS_EXPORTER_LISTEN": "127.0.0.1:9999"}
    c = parse(["--poll-interval", "2"], env)
    assert c.engine_url == "http://e:1" and c.poll_interval == 2.0 and c.no_nvml
    assert (c.listen_host, c.listen_port) == ("127.0.0.1", 9999)


def test_every_error_is_reported_at_once(tmp_path: Path) -> None:
    with pytest.raises(cfg.ConfigError) as info:
        parse(["--engine-url", "ftp://x", "--poll-interval", "zero", "--listen", "nope",
               "--request-cutoff", "600", "--restore-bound", "60",
               "--events-token-file", str(tmp_path / "missing")])
    text = str(info.value)
    for needle in ("--engine-url", "--poll-interval", "--listen", "--request-cutoff",
                   "--events-token-file"):
        assert needle in text
    assert len(info.value.errors) == 5


def test_readme_configuration_table_is_in_sync() -> None:
    readme = (ROOT / "README.md").read_text()
    assert cfg.markdown_table() in readme, (
        "README configuration table drifted: paste `python -m exporter.config` output")


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "Infinity", "1e400"])
def test_non_finite_floats_are_rejected(value: str) -> None:
    with pytest.raises(cfg.ConfigError) as info:
        parse(["--engine-url", "http://e:1", f"--down-grace={value}"])
    assert info.value.errors == [
        f"--down-grace / HELIOS_EXPORTER_DOWN_GRACE: expected a finite number, got {value!r}"]


def test_every_float_option_rejects_non_finite_values() -> None:
    floats = [o for o in cfg.OPTIONS if o.kind == "float" and "serve" in o.commands]
    assert floats
    env = {"HELIOS_EXPORTER_ENGINE_URL": "http://e:1"} | {o.env: "inf" for o in floats}
    with pytest.raises(cfg.ConfigError) as info:
        parse([], env)
    assert len(info.value.errors) == len(floats)
    assert all("finite" in e for e in info.value.errors)


def test_empty_events_token_file_is_a_config_error(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("  \n")
    with pytest.raises(cfg.ConfigError) as info:
        parse(["--engine-url", "http://e:1", "--events-token-file", str(token)])
    (error,) = info.value.errors
    assert error.startswith("--events-token-file / HELIOS_EXPORTER_EVENTS_TOKEN_FILE:")
    assert "empty" in error


def test_token_and_auth_files_that_cannot_be_read_are_config_errors(tmp_path: Path) -> None:
    token, auth = tmp_path / "token", tmp_path / "auth"
    token.write_text("secret\n")
    auth.write_bytes(b"\xff\xfe not text")  # the sidecar reads it as text
    token.chmod(0)
    try:
        if token.read_bytes():  # running as root: permissions do not stop the read
            pytest.skip("cannot make a file unreadable as root")
    except PermissionError:
        pass
    try:
        with pytest.raises(cfg.ConfigError) as info:
            parse(["--engine-url", "http://e:1", "--events-token-file", str(token),
                   "--preflight-auth-file", str(auth), "--down-grace", "nan"])
    finally:
        token.chmod(0o600)
    errors = info.value.errors
    assert len(errors) == 3
    assert errors[1].startswith("--events-token-file / HELIOS_EXPORTER_EVENTS_TOKEN_FILE: cannot "
                                "read") and "ermission" in errors[1]
    assert errors[2].startswith("--preflight-auth-file / HELIOS_EXPORTER_PREFLIGHT_AUTH_FILE: "
                                "cannot read")


def test_unreadable_auth_file_is_a_config_error(tmp_path: Path) -> None:
    # A directory passes no is_file check; a non-UTF-8 file fails the read (works as root too).
    auth = tmp_path / "auth"
    auth.write_bytes(b"\xff\xfe")
    with pytest.raises(cfg.ConfigError) as info:
        parse(["--engine-url", "http://e:1", "--preflight-auth-file", str(auth),
               "--events-token-file", str(tmp_path)])
    assert [e.split(" / ")[0] for e in info.value.errors] == ["--events-token-file",
                                                              "--preflight-auth-file"]


def test_valid_token_and_auth_files_load(tmp_path: Path) -> None:
    token, auth = tmp_path / "token", tmp_path / "auth"
    token.write_text("secret\n")
    auth.write_text("Bearer abc\n")
    c = parse(["--engine-url", "http://e:1", "--events-token-file", str(token),
               "--preflight-auth-file", str(auth)])
    assert c.events_token_file == token and c.preflight_auth_file == auth


@pytest.mark.parametrize("fmt", ["auto", "json", "logfmt", "console"])
def test_every_log_format_is_accepted(fmt: str) -> None:
    assert parse(["--engine-url", "http://e:1", "--log-format", fmt]).log_format == fmt


def test_an_unknown_log_format_names_the_choices() -> None:
    with pytest.raises(cfg.ConfigError) as info:
        parse(["--engine-url", "http://e:1", "--log-format", "xml"])
    assert info.value.errors == [
        "--log-format / HELIOS_EXPORTER_LOG_FORMAT: expected auto, json, logfmt or console, "
        "got 'xml'"]


def test_pins_are_read_from_flags_and_environment() -> None:
    env = {"HELIOS_EXPORTER_EXPECT_PACKAGE": "helios-2.14.0+47581cca",
           "HELIOS_EXPORTER_EXPECT_POWER_LIMIT_WATTS": "300"}
    c = parse(["--engine-url", "http://e:1", "--expect-ranks", "2",
               "--expect-checkpoint", "qwen3-next-w4a16-r3",
               "--expect-image-digest", "sha256:9f2c"], env)
    assert (c.expect_image_digest, c.expect_package, c.expect_checkpoint, c.expect_ranks,
            c.expect_power_limit_watts) == ("sha256:9f2c", "helios-2.14.0+47581cca",
                                            "qwen3-next-w4a16-r3", 2, 300.0)
    unpinned = parse(["--engine-url", "http://e:1"])
    assert unpinned.expect_ranks is None and unpinned.expect_package is None


def test_bad_pins_are_config_errors() -> None:
    with pytest.raises(cfg.ConfigError) as info:
        parse(["--engine-url", "http://e:1", "--expect-package", "helios 2.14",
               "--expect-checkpoint", "", "--expect-ranks", "0",
               "--expect-power-limit-watts", "-5", "--expect-image-digest", "x" * 129])
    assert [e.split(" / ")[0] for e in info.value.errors] == [  # in OPTIONS order
        "--expect-image-digest", "--expect-package", "--expect-checkpoint", "--expect-ranks",
        "--expect-power-limit-watts"]
    with pytest.raises(cfg.ConfigError) as info:
        parse(["--engine-url", "http://e:1", "--expect-ranks", "65"])
    assert info.value.errors == [
        "--expect-ranks / HELIOS_EXPORTER_EXPECT_RANKS: must be 1 to 64, got 65"]


def test_a_power_limit_pin_needs_nvml() -> None:
    with pytest.raises(cfg.ConfigError) as info:
        parse(["--engine-url", "http://e:1", "--no-nvml", "--expect-power-limit-watts", "300"])
    (error,) = info.value.errors
    assert error.startswith("--expect-power-limit-watts / HELIOS_EXPORTER_EXPECT_POWER_LIMIT_WATTS: "
                            "needs NVML")


def test_every_error_names_the_variable_too() -> None:
    """A value from the environment is as likely as a flag: each error names both. Each
    option's own errors come in OPTIONS order, then those between options."""
    env = {"HELIOS_EXPORTER_ENGINE_URL": "http://e:1", "HELIOS_EXPORTER_MAX_SERIES_PER_FAMILY": "0",
           "HELIOS_EXPORTER_DOWN_GRACE": "-1", "HELIOS_EXPORTER_REQUEST_CUTOFF": "600",
           "HELIOS_EXPORTER_RESTORE_BOUND": "60", "HELIOS_EXPORTER_LOG_LEVEL": "loud",
           "HELIOS_EXPORTER_EXPECT_RANKS": "65"}
    with pytest.raises(cfg.ConfigError) as info:
        parse([], env)
    assert info.value.errors == [
        "--down-grace / HELIOS_EXPORTER_DOWN_GRACE: must be 0 or more, got -1.0",
        "--max-series-per-family / HELIOS_EXPORTER_MAX_SERIES_PER_FAMILY: must be greater than 0, "
        "got 0",
        "--expect-ranks / HELIOS_EXPORTER_EXPECT_RANKS: must be 1 to 64, got 65",
        "--log-level / HELIOS_EXPORTER_LOG_LEVEL: expected debug, info, warning or error, "
        "got 'loud'",
        "--request-cutoff / HELIOS_EXPORTER_REQUEST_CUTOFF: must not be later than "
        "--restore-bound / HELIOS_EXPORTER_RESTORE_BOUND",
    ]


@pytest.mark.parametrize(("flag", "env", "chosen"), [
    (None, None, "auto"), ("json", "logfmt", "json"), (None, "logfmt", "logfmt"),
    ("xml", "json", "auto"), (None, " console ", "console")])
def test_the_log_format_for_configuration_errors(flag: str | None, env: str | None,
                                                 chosen: str) -> None:
    args = argparse.Namespace(log_format=flag)
    environ = {} if env is None else {"HELIOS_EXPORTER_LOG_FORMAT": env}
    assert cfg.requested_log_format(args, environ) == chosen


def test_the_example_events_token_is_refused(tmp_path: Path) -> None:
    """deploy/kubernetes ships a placeholder token: anyone could post events with it."""
    token = tmp_path / "token"
    token.write_text(placeholders.EVENTS_TOKEN + "\n")
    with pytest.raises(cfg.ConfigError) as info:
        parse(["--engine-url", "http://e:1", "--events-token-file", str(token)])
    (error,) = info.value.errors
    assert error.startswith("--events-token-file / HELIOS_EXPORTER_EVENTS_TOKEN_FILE: "
                            f"{token} holds the placeholder token of the deployment example")
    assert placeholders.EVENTS_TOKEN not in error


def test_nvml_all_gpus_flag_env_and_conflict_with_no_nvml() -> None:
    assert not parse(["--engine-url", "http://e:1"]).nvml_all_gpus
    assert parse(["--engine-url", "http://e:1", "--nvml-all-gpus"]).nvml_all_gpus
    assert parse(["--engine-url", "http://e:1"],
                 {"HELIOS_EXPORTER_NVML_ALL_GPUS": "true"}).nvml_all_gpus
    with pytest.raises(cfg.ConfigError) as info:
        parse(["--engine-url", "http://e:1", "--no-nvml", "--nvml-all-gpus"])
    assert info.value.errors == ["--nvml-all-gpus / HELIOS_EXPORTER_NVML_ALL_GPUS: contradicts "
                                 "--no-nvml / HELIOS_EXPORTER_NO_NVML; drop one of them"]
