"""Configuration from flags and HELIOS_EXPORTER_* variables, validated with every error at once.

`OPTIONS` is the one table of serve/check options; the README's configuration table is generated
from it (`python -m exporter.config --markdown`) and a test fails when they drift.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from exporter import defaults, placeholders
from exporter.logs import FORMATS as LOG_FORMATS
from exporter.logs import LEVELS as LOG_LEVELS
from exporter.pins import POWER_LIMIT_TOLERANCE_WATTS
from exporter.snapshot import label_value_ok, max_ranks

ENV_PREFIX = defaults.ENV_PREFIX


class ConfigError(Exception):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("invalid configuration:\n  " + "\n  ".join(errors))
        self.errors = errors


@dataclass(frozen=True, slots=True)
class Option:
    flag: str
    kind: str  # "str" | "float" | "int" | "bool" | "url" | "listen" | "path"
    default: Any
    help: str
    commands: tuple[str, ...] = ("serve",)

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.dest.upper()


OPTIONS: tuple[Option, ...] = (
    Option("--engine-url", "url", None, "Engine base URL (required), e.g. http://127.0.0.1:8000.",
           ("serve", "check")),
    Option("--listen", "listen", f"{defaults.LISTEN_HOST}:{defaults.LISTEN_PORT}",
           "HOST:PORT the sidecar serves on."),
    Option("--poll-interval", "float", defaults.POLL_INTERVAL,
           "Seconds between poll cycles of every source."),
    Option("--timeout", "float", defaults.ENGINE_TIMEOUT,
           "Seconds allowed for one engine request (whole body).", ("serve", "check")),
    Option("--max-response-bytes", "int", defaults.MAX_RESPONSE_BYTES,
           "Largest engine response body read; larger ones count as too_large.", ("serve", "check")),
    Option("--state-dir", "path", defaults.STATE_DIR,
           "Directory for the durable restore-window state (must survive the sidecar)."),
    Option("--no-nvml", "bool", False, "Do not load NVML (no GPU metrics)."),
    Option("--nvml-all-gpus", "bool", False,
           "Export every GPU of the node; by default only the GPUs serving the engine's ranks "
           "(every GPU until a snapshot lists ranks)."),
    Option("--nvml-timeout", "float", defaults.NVML_TIMEOUT,
           "Seconds one NVML poll may take before the GPU is reported hung."),
    Option("--events-token-file", "path", None,
           "File holding the bearer token for POST /restore/events; without it the endpoint is "
           "disabled."),
    Option("--request-cutoff", "float", defaults.REQUEST_CUTOFF,
           "Seconds from window start to the request cutoff."),
    Option("--restore-bound", "float", defaults.RESTORE_BOUND,
           "Seconds from window start to the restore deadline."),
    Option("--down-grace", "float", defaults.DOWN_GRACE,
           "Seconds the engine may be unreachable before a restore window opens."),
    Option("--preflight-direct-url", "url", None,
           "Completion URL probed directly on the engine after a restore (opt-in)."),
    Option("--preflight-routed-url", "url", None,
           "Completion URL probed through the router after a restore (opt-in)."),
    Option("--preflight-auth-file", "path", None,
           "File holding an Authorization header value sent with preflight probes."),
    Option("--preflight-model", "str", None,
           "model of the preflight completion (omitted: the engine's default model)."),
    Option("--preflight-max-tokens", "int", defaults.PREFLIGHT_MAX_TOKENS,
           "max_tokens of the preflight completion."),
    Option("--preflight-timeout", "float", defaults.PREFLIGHT_TIMEOUT,
           "Seconds a preflight probe may take."),
    Option("--engine-pid-file", "path", None, "File holding the engine's pid (host source)."),
    Option("--engine-process-name", "str", None,
           "Engine process name to look for when no pid file is given (host source)."),
    Option("--max-series-per-family", "int", defaults.MAX_SERIES_PER_FAMILY,
           "Cardinality guard: most series exported per engine pass-through family."),
    Option("--expect-image-digest", "str", None,
           "Pin: the engine's snapshot identity.image_digest must be this "
           "(helios_engine_pin_ok{pin=\"image_digest\"}).", ("serve", "check")),
    Option("--expect-package", "str", None,
           "Pin: the engine's snapshot identity.package must be this.", ("serve", "check")),
    Option("--expect-checkpoint", "str", None,
           "Pin: the engine's snapshot identity.checkpoint must be this.", ("serve", "check")),
    Option("--expect-ranks", "int", None,
           "Pin: the snapshot's ranks must list this many entries (2 for TP2).",
           ("serve", "check")),
    Option("--expect-power-limit-watts", "float", None,
           "Pin: every GPU serving a rank must have this enforced NVML power limit (within "
           f"{POWER_LIMIT_TOLERANCE_WATTS:g} W)."),
    Option("--expect-layout", "path", None,
           "Pin: the model layout (JSON, docs/interface.md section 9) whose record sizes the "
           "snapshot's slabs must have (helios_offload_geometry_consistent, rule "
           "record_bytes_match_layout).", ("serve", "check")),
    Option("--web-config-file", "path", None,
           "Prometheus exporter-toolkit web configuration: TLS (tls_server_config) and basic "
           "auth (basic_auth_users, bcrypt); re-read when it changes."),
    Option("--http-read-timeout", "float", defaults.HTTP_READ_TIMEOUT,
           "Seconds a client has to send a whole request (from connecting, or from the first "
           "byte of its next request), or to read a stalled response; then it is disconnected."),
    Option("--http-idle-timeout", "float", defaults.HTTP_IDLE_TIMEOUT,
           "Seconds an idle kept-alive connection stays open."),
    Option("--http-max-connections", "int", defaults.HTTP_MAX_CONNECTIONS,
           "Most client connections open at once (lowered to fit the file-descriptor limit)."),
    Option("--log-format", "str", defaults.LOG_FORMAT,
           "auto (console on a terminal, else JSON), json, logfmt or console; every line on "
           "stderr, library logs included, is in this format.", ("serve", "check")),
    Option("--log-level", "str", defaults.LOG_LEVEL, "debug, info, warning or error.",
           ("serve", "check")),
)


@dataclass(frozen=True, slots=True)
class Config:
    engine_url: str
    listen_host: str = defaults.LISTEN_HOST
    listen_port: int = defaults.LISTEN_PORT
    poll_interval: float = defaults.POLL_INTERVAL
    timeout: float = defaults.ENGINE_TIMEOUT
    max_response_bytes: int = defaults.MAX_RESPONSE_BYTES
    state_dir: Path = Path(defaults.STATE_DIR)
    no_nvml: bool = False
    nvml_all_gpus: bool = False
    nvml_timeout: float = defaults.NVML_TIMEOUT
    events_token_file: Path | None = None
    request_cutoff: float = defaults.REQUEST_CUTOFF
    restore_bound: float = defaults.RESTORE_BOUND
    down_grace: float = defaults.DOWN_GRACE
    preflight_direct_url: str | None = None
    preflight_routed_url: str | None = None
    preflight_auth_file: Path | None = None
    preflight_model: str | None = None
    preflight_max_tokens: int = defaults.PREFLIGHT_MAX_TOKENS
    preflight_timeout: float = defaults.PREFLIGHT_TIMEOUT
    engine_pid_file: Path | None = None
    engine_process_name: str | None = None
    max_series_per_family: int = defaults.MAX_SERIES_PER_FAMILY
    expect_image_digest: str | None = None
    expect_package: str | None = None
    expect_checkpoint: str | None = None
    expect_ranks: int | None = None
    expect_power_limit_watts: float | None = None
    expect_layout: Path | None = None
    web_config_file: Path | None = None
    http_read_timeout: float = defaults.HTTP_READ_TIMEOUT
    http_idle_timeout: float = defaults.HTTP_IDLE_TIMEOUT
    http_max_connections: int = defaults.HTTP_MAX_CONNECTIONS
    log_format: str = defaults.LOG_FORMAT
    log_level: str = defaults.LOG_LEVEL


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    for opt in OPTIONS:
        if command not in opt.commands:
            continue
        help_text = f"{opt.help} [env {opt.env}; default {opt.default}]"
        if opt.kind == "bool":
            parser.add_argument(opt.flag, action="store_true", default=None, help=help_text)
        else:
            parser.add_argument(opt.flag, default=None, metavar=opt.dest.upper(), help=help_text)


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def parse_bool(text: str) -> bool | None:
    """true/false, 1/0, yes/no, on/off (any case; empty is false); None for anything else."""
    text = text.strip().lower()
    return True if text in _TRUE else False if text in _FALSE else None


_BY_DEST = {opt.dest: opt for opt in OPTIONS}


def _named(dest: str) -> str:
    """How an error names an option: its flag and its variable (either may have set it)."""
    opt = _BY_DEST[dest]
    return f"{opt.flag} / {opt.env}"


def requested_log_format(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> str:
    """The --log-format asked for (flag, then variable), or the default when it is not one:
    configuration errors are reported in it, before the configuration as a whole is valid."""
    environ = os.environ if environ is None else environ
    raw = getattr(args, "log_format", None)
    if raw is None:
        raw = environ.get(_BY_DEST["log_format"].env)
    text = str(raw).strip() if raw is not None else ""
    return text if text in LOG_FORMATS else defaults.LOG_FORMAT


def _convert(opt: Option, raw: Any, errors: list[str]) -> Any:
    where = _named(opt.dest)
    conv: dict[str, Callable[[str], Any]] = {"float": float, "int": int, "str": str, "path": Path}
    if opt.kind == "bool":
        if isinstance(raw, bool):
            return raw
        value = parse_bool(str(raw))
        if value is not None:
            return value
        errors.append(f"{where}: expected true/false, got {raw!r}")
        return opt.default
    text = str(raw).strip()
    if opt.kind == "url":
        parts = urlsplit(text)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            errors.append(f"{where}: expected an http(s) URL, got {text!r}")
        return text.rstrip("/")
    if opt.kind == "listen":
        host, sep, port = text.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            errors.append(f"{where}: expected HOST:PORT, got {text!r}")
            return (defaults.LISTEN_HOST, defaults.LISTEN_PORT)
        return (host.strip("[]"), int(port))
    try:
        converted = conv[opt.kind](text)
    except ValueError:
        errors.append(f"{where}: expected a {opt.kind}, got {text!r}")
        return opt.default
    if opt.kind == "float" and not math.isfinite(converted):
        errors.append(f"{where}: expected a finite number, got {text!r}")
        return opt.default
    return converted


def load(args: argparse.Namespace, command: str, environ: Mapping[str, str] | None = None) -> Config:
    """Merge flags over environment over defaults; raise ConfigError listing every problem."""
    environ = os.environ if environ is None else environ
    errors: list[str] = []
    values: dict[str, Any] = {}
    for opt in OPTIONS:
        if command not in opt.commands:
            continue
        raw = getattr(args, opt.dest, None)
        if raw is None:
            raw = environ.get(opt.env)
        if raw is None:
            if opt.default is None:
                values[opt.dest] = None
                continue
            raw = opt.default
        values[opt.dest] = _convert(opt, raw, errors)
    if values.get("engine_url") is None:
        errors.append(f"{_named('engine_url')} is required")
    listen = values.pop("listen", (defaults.LISTEN_HOST, defaults.LISTEN_PORT))
    values["listen_host"], values["listen_port"] = listen
    _validate(values, errors)
    if errors:
        raise ConfigError(errors)
    values = {k: v for k, v in values.items() if v is not None or k in _NULLABLE}
    return Config(**values)


_NULLABLE = {
    "events_token_file", "preflight_direct_url", "preflight_routed_url", "preflight_auth_file",
    "engine_pid_file", "engine_process_name", "preflight_model", "expect_image_digest",
    "expect_package", "expect_checkpoint", "expect_ranks", "expect_power_limit_watts",
    "web_config_file", "expect_layout",
}


def _validate(v: dict[str, Any], errors: list[str]) -> None:
    def positive(key: str) -> None:
        if key in v and isinstance(v[key], int | float) and not v[key] > 0:
            errors.append(f"{_named(key)}: must be greater than 0, got {v[key]}")

    for key in ("poll_interval", "timeout", "max_response_bytes", "nvml_timeout",
                "request_cutoff", "restore_bound", "preflight_max_tokens", "preflight_timeout",
                "max_series_per_family", "expect_power_limit_watts", "http_read_timeout",
                "http_idle_timeout", "http_max_connections"):
        positive(key)
    _validate_pins(v, errors)
    if v.get("nvml_all_gpus") and v.get("no_nvml"):
        errors.append(f"{_named('nvml_all_gpus')}: contradicts {_named('no_nvml')}; "
                      "drop one of them")
    if "down_grace" in v and v["down_grace"] < 0:
        errors.append(f"{_named('down_grace')}: must be 0 or more, got {v['down_grace']}")
    if v.get("request_cutoff", 0) > v.get("restore_bound", float("inf")):
        errors.append(f"{_named('request_cutoff')}: must not be later than "
                      f"{_named('restore_bound')}")
    if v.get("log_format", defaults.LOG_FORMAT) not in LOG_FORMATS:
        errors.append(f"{_named('log_format')}: expected {_one_of(LOG_FORMATS)}, "
                      f"got {v['log_format']!r}")
    if v.get("log_level", defaults.LOG_LEVEL) not in LOG_LEVELS:
        errors.append(f"{_named('log_level')}: expected {_one_of(LOG_LEVELS)}, "
                      f"got {v['log_level']!r}")
    for key in ("events_token_file", "preflight_auth_file"):
        path = v.get(key)
        if path is None:
            continue
        flag = _named(key)
        if not Path(path).is_file():
            errors.append(f"{flag}: {path} is not a readable file")
            continue
        # Read here only to report problems with the others; sidecar.build reads the files again.
        try:  # as the sidecar reads them: the token as bytes, the auth header as text
            content = Path(path).read_bytes() if key == "events_token_file" else Path(path).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            errors.append(f"{flag}: cannot read {path}: {reason}")
            continue
        if key == "events_token_file" and not content.strip():
            errors.append(f"{flag}: {path} is empty (it must hold the bearer token)")
        elif key == "events_token_file" and content.strip() == placeholders.EVENTS_TOKEN.encode():
            errors.append(f"{flag}: {path} holds the placeholder token of the deployment example "
                          "(deploy/kubernetes/secret-events-token.yaml), which anyone can read: "
                          "put a random token in the Secret, e.g. `openssl rand -hex 32`")
    if v.get("web_config_file") is not None:
        # Loaded here (certificates and keys included) only to report its problems with the
        # others; the sidecar loads it again, and again whenever it changes.
        from exporter.web.webconfig import WebConfigError, load
        try:
            load(Path(v["web_config_file"]))
        except WebConfigError as exc:
            errors += [f"{_named('web_config_file')} {v['web_config_file']}: {e}"
                       for e in exc.errors]


def _validate_pins(v: dict[str, Any], errors: list[str]) -> None:
    for key in ("expect_image_digest", "expect_package", "expect_checkpoint"):
        text = v.get(key)
        # The engine's value must be a label value to be compared (the snapshot schema's pattern);
        # a pin that is not one could never match.
        if text is not None and not label_value_ok(text):
            errors.append(f"{_named(key)}: expected 1-128 characters of "
                          f"[A-Za-z0-9._:@/+=-], got {text!r}")
    ranks = v.get("expect_ranks")
    if ranks is not None and not 1 <= ranks <= max_ranks():
        errors.append(f"{_named('expect_ranks')}: must be 1 to {max_ranks()}, got {ranks}")
    if v.get("expect_layout") is not None:
        # Derived here only to report its problems with the others; the sidecar derives it again.
        from exporter.layout import LayoutError, load, records
        try:
            records(load(Path(v["expect_layout"])))
        except LayoutError as exc:
            errors += [f"{_named('expect_layout')}: {p.message}" for p in exc.problems]
    if v.get("expect_power_limit_watts") is not None and v.get("no_nvml"):
        errors.append(f"{_named('expect_power_limit_watts')}: needs NVML to read the limit; "
                      f"drop {_named('no_nvml')} or the pin")


def _one_of(values: Sequence[str]) -> str:
    return ", ".join(values[:-1]) + " or " + values[-1]


def markdown_table(options: Sequence[Option] = OPTIONS) -> str:
    rows = ["| flag | environment variable | default | commands | meaning |",
            "| --- | --- | --- | --- | --- |"]
    for opt in options:
        default = "(none)" if opt.default is None else f"`{opt.default}`"
        rows.append(f"| `{opt.flag}` | `{opt.env}` | {default} | {', '.join(opt.commands)} | "
                    f"{opt.help} |")
    return "\n".join(rows)


if __name__ == "__main__":  # pragma: no cover
    sys.stdout.write(markdown_table() + "\n")
