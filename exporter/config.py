"""Configuration of serve and check from flags and HELIOS_EXPORTER_* variables, validated with
every error at once.

`OPTIONS` is the one table of serve/check options, in the option model of every command
(exporter/options.py): each option's kind, default and checks are declared there, and its flag,
variable, --help line and row of the README's configuration table come from it (the table:
`markdown_table`, spliced by `scripts/generate options`; `scripts/generate --check` fails when
they drift). `Config` is the typed result; a test holds its fields to OPTIONS. What no single option
can judge (options that disagree, what the named files hold) is checked in `_validate`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter import defaults, options, placeholders
from exporter.cycle.pins import POWER_LIMIT_TOLERANCE_WATTS
from exporter.labels import ENGINE_KIND_CHOICES
from exporter.logs import FORMATS as LOG_FORMATS
from exporter.logs import LEVELS as LOG_LEVELS
from exporter.snapshot.validate import label_value_ok, max_ranks

ENV_PREFIX = defaults.ENV_PREFIX


class ConfigError(Exception):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("invalid configuration:\n  " + "\n  ".join(errors))
        self.errors = errors


def _label_value(text: str) -> str | None:
    # The engine's value must be a label value to be compared (the snapshot schema's pattern);
    # a pin that is not one could never match.
    if label_value_ok(text):
        return None
    return f"expected 1-128 characters of [A-Za-z0-9._:@/+=-], got {text!r}"


@dataclass(frozen=True, slots=True)
class Option(options.Option):
    """A serve/check option; `commands` says which of the two take it."""

    commands: tuple[str, ...] = ("serve",)


OPTIONS: tuple[Option, ...] = (
    Option("--engine-url", "url", None, "Engine base URL, e.g. http://127.0.0.1:8000.",
           ("serve", "check"), required=True),
    Option("--engine-kind", "str", "helios",
           "What the engine is: helios (its offload snapshot), sglang or vllm (their /metrics "
           "and health path through the mapping of docs/engines.md), or auto (decided from the "
           "engine's /metrics families, and logged).", choices=ENGINE_KIND_CHOICES),
    Option("--listen", "listen", f"{defaults.LISTEN_HOST}:{defaults.LISTEN_PORT}",
           "HOST:PORT the sidecar serves on."),
    Option("--poll-interval", "float", defaults.POLL_INTERVAL,
           "Seconds between poll cycles of every source.", above=0),
    Option("--healthz-stale-polls", "int", defaults.HEALTHZ_STALE_POLLS,
           "/healthz answers 503 once no poll cycle has completed for this many poll intervals "
           "plus the longest a cycle may take (a wedged loop gets the container restarted).",
           above=0),
    Option("--timeout", "float", defaults.ENGINE_TIMEOUT,
           "Seconds allowed for one engine request (whole body).", ("serve", "check"), above=0),
    Option("--max-response-bytes", "int", defaults.MAX_RESPONSE_BYTES,
           "Largest engine response body read, counted as it is decoded (one gzip layer at "
           "most); larger ones count as too_large.", ("serve", "check"),
           above=0),
    Option("--state-dir", "path", defaults.STATE_DIR,
           "Directory for the durable restore-window state (must survive the sidecar)."),
    Option("--no-nvml", "bool", False, "Do not load NVML (no GPU metrics).", exclusive="nvml"),
    Option("--nvml-all-gpus", "bool", False,
           "Export every GPU of the node; by default only the GPUs serving the engine's ranks "
           "(every GPU until a snapshot lists ranks).", exclusive="nvml"),
    Option("--nvml-timeout", "float", defaults.NVML_TIMEOUT,
           "Seconds one NVML poll may take before the GPU is reported hung.", above=0),
    Option("--events-token-file", "path", None,
           "File holding the bearer token for POST /restore/events; without it the endpoint is "
           "disabled."),
    Option("--request-cutoff", "float", defaults.REQUEST_CUTOFF,
           "Seconds from window start to the request cutoff.", above=0),
    Option("--restore-bound", "float", defaults.RESTORE_BOUND,
           "Seconds from window start to the restore deadline.", above=0),
    Option("--down-grace", "float", defaults.DOWN_GRACE,
           "Seconds the engine may be unreachable before a restore window opens.", low=0),
    Option("--preflight-direct-url", "url", None,
           "Completion URL probed directly on the engine after a restore (opt-in)."),
    Option("--preflight-routed-url", "url", None,
           "Completion URL probed through the router after a restore (opt-in)."),
    Option("--preflight-auth-file", "path", None,
           "File holding an Authorization header value sent with preflight probes."),
    Option("--preflight-model", "str", None,
           "model of the preflight completion (omitted: the engine's default model)."),
    Option("--preflight-max-tokens", "int", defaults.PREFLIGHT_MAX_TOKENS,
           "max_tokens of the preflight completion.", above=0),
    Option("--preflight-timeout", "float", defaults.PREFLIGHT_TIMEOUT,
           "Seconds a preflight probe may take.", above=0),
    Option("--engine-pid-file", "path", None, "File holding the engine's pid (host source)."),
    Option("--engine-process-name", "str", None,
           "Engine process name to look for when no pid file is given (host source)."),
    Option("--max-series-per-family", "int", defaults.MAX_SERIES_PER_FAMILY,
           "Cardinality guard: most series exported per engine pass-through family.", above=0),
    Option("--expect-image-digest", "str", None,
           "Pin: the engine's snapshot identity.image_digest must be this "
           "(helios_engine_pin_ok{pin=\"image_digest\"}).", ("serve", "check"), check=_label_value),
    Option("--expect-package", "str", None,
           "Pin: the engine's snapshot identity.package must be this.", ("serve", "check"),
           check=_label_value),
    Option("--expect-checkpoint", "str", None,
           "Pin: the engine's snapshot identity.checkpoint must be this.", ("serve", "check"),
           check=_label_value),
    Option("--expect-ranks", "int", None,
           "Pin: the snapshot's ranks must list this many entries (2 for TP2).",
           ("serve", "check"), low=1, high=max_ranks()),
    Option("--expect-power-limit-watts", "float", None,
           "Pin: every GPU serving a rank must have this enforced NVML power limit (within "
           f"{POWER_LIMIT_TOLERANCE_WATTS:g} W).", above=0),
    Option("--expect-layout", "path", None,
           "Pin: the model layout (JSON, docs/interface.md section 9) whose record sizes the "
           "snapshot's slabs must have (helios_offload_geometry_consistent, rule "
           "record_bytes_match_layout).", ("serve", "check")),
    Option("--web-config-file", "path", None,
           "Prometheus exporter-toolkit web configuration: TLS (tls_server_config) and basic "
           "auth (basic_auth_users, bcrypt); re-read when it changes."),
    Option("--http-read-timeout", "float", defaults.HTTP_READ_TIMEOUT,
           "Seconds a client has to send a whole request (from connecting, or from the first "
           "byte of its next request), or to read a stalled response; then it is disconnected.",
           above=0),
    Option("--http-idle-timeout", "float", defaults.HTTP_IDLE_TIMEOUT,
           "Seconds an idle kept-alive connection stays open.", above=0),
    Option("--http-max-connections", "int", defaults.HTTP_MAX_CONNECTIONS,
           "Most client connections open at once (lowered to fit the file-descriptor limit).",
           above=0),
    Option("--log-format", "str", defaults.LOG_FORMAT,
           "auto (console on a terminal, else JSON), json, logfmt or console; every line on "
           "stderr, library logs included, is in this format.", ("serve", "check"),
           choices=LOG_FORMATS),
    Option("--log-level", "str", defaults.LOG_LEVEL, "debug, info, warning or error.",
           ("serve", "check"), choices=LOG_LEVELS),
)


@dataclass(frozen=True, slots=True)
class Config:
    engine_url: str
    engine_kind: str = "helios"
    listen_host: str = defaults.LISTEN_HOST
    listen_port: int = defaults.LISTEN_PORT
    poll_interval: float = defaults.POLL_INTERVAL
    healthz_stale_polls: int = defaults.HEALTHZ_STALE_POLLS
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

    @property
    def cycle_bound(self) -> float:
        """The longest a healthy poll cycle takes: its slowest source's deadline (the preflight
        probes run as the restore keeper's own task, never inside the cycle)."""
        sources = [self.timeout, defaults.HOST_TIMEOUT]
        if not self.no_nvml:
            sources.append(self.nvml_timeout)
        return max(sources)

    @property
    def stale_after(self) -> float:
        """Seconds without a completed poll cycle after which /healthz answers 503."""
        return self.healthz_stale_polls * self.poll_interval + self.cycle_bound


def of(command: str) -> tuple[Option, ...]:
    """The options of `serve` or `check`, in their declared order."""
    return tuple(opt for opt in OPTIONS if command in opt.commands)


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """The options of `command` as text; `load` resolves them."""
    options.add_arguments(parser, of(command))


_BY_DEST = {opt.dest: opt for opt in OPTIONS}


def _named(dest: str) -> str:
    return _BY_DEST[dest].named


def requested_log_format(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> str:
    """The --log-format asked for (flag, then variable), or the default when it is not one:
    configuration errors are reported in it, before the configuration as a whole is valid."""
    environ = os.environ if environ is None else environ
    raw = options.raw_value(_BY_DEST["log_format"], vars(args), environ)
    text = str(raw).strip() if raw is not None else ""
    return text if text in LOG_FORMATS else defaults.LOG_FORMAT


def load(args: argparse.Namespace, command: str, environ: Mapping[str, str] | None = None) -> Config:
    """Merge flags over environment over defaults; raise ConfigError listing every problem:
    each option's own (in OPTIONS order), then those between options and of the files named."""
    environ = os.environ if environ is None else environ
    values, errors = options.resolve(of(command), vars(args), environ)
    if "listen" in values:
        values["listen_host"], values["listen_port"] = values.pop("listen")
    _validate(values, errors)
    if errors:
        raise ConfigError(errors)
    return Config(**values)


def _validate(v: dict[str, Any], errors: list[str]) -> None:
    """What no option can judge alone: the files' contents, and options that disagree."""
    if v.get("expect_layout") is not None:
        # Derived here only to report its problems with the others; the sidecar derives it again.
        from exporter import layout
        try:
            layout.records(layout.load(Path(v["expect_layout"])))
        except layout.LayoutError as exc:
            errors += [f"{_named('expect_layout')}: {p.message}" for p in exc.problems]
    if v.get("expect_power_limit_watts") is not None and v.get("no_nvml"):
        errors.append(f"{_named('expect_power_limit_watts')}: needs NVML to read the limit; "
                      f"drop {_named('no_nvml')} or the pin")
    if v.get("request_cutoff", 0) > v.get("restore_bound", float("inf")):
        errors.append(f"{_named('request_cutoff')}: must not be later than "
                      f"{_named('restore_bound')}")
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
        from exporter.web import webconfig
        try:
            webconfig.load(Path(v["web_config_file"]))
        except webconfig.WebConfigError as exc:
            errors += [f"{_named('web_config_file')} {v['web_config_file']}: {e}"
                       for e in exc.errors]


def markdown_table(table: Sequence[Option] = OPTIONS) -> str:
    return options.markdown_table(table, lambda opt: ", ".join(opt.commands))
