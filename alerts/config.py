"""alerts/config.yaml read into a typed `Config`, every problem reported at once."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from exporter import durations
from exporter.defaults import RESTORE_BOUND

# The sidecar's default restore bound: window_memory must outlast it, or a window that stops
# reporting mid-way would be forgotten before its deadline.
DEFAULT_RESTORE_BOUND_S = int(RESTORE_BOUND)

_LABEL_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class ConfigError(Exception):
    """All problems found in the config, reported at once."""


@dataclass(frozen=True)
class Duration:
    """A Prometheus duration as written in the config, with its length in seconds."""

    text: str
    seconds: int

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Config:
    selector: str
    target_labels: tuple[str, ...]
    cluster_label: str
    runbook_base_url: str
    window_memory: Duration
    rate_window: Duration
    at_risk_margin: Duration
    outcome_notice: Duration
    alert_when_no_target: bool
    down_grace: Duration
    page_headroom_ratio: float
    row_pressure_window: Duration
    row_pressure_min_attempts: float
    host_tier_window: Duration
    store_drop_window: Duration
    store_drop_ratio: float
    inert_window: Duration
    power_limit_ratio: float
    power_avg_window: Duration
    restart_window: Duration
    certificate_ticket: Duration
    certificate_page: Duration
    dcgm_selector: str
    for_: Mapping[str, Duration]

    @property
    def join_labels(self) -> tuple[str, ...]:
        """What identifies one sidecar across clusters: every join is `on` these."""
        return (self.cluster_label, *self.target_labels)


class Reader:
    """Pulls typed values out of the raw YAML mapping, collecting every error."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.raw = raw
        self.errors: list[str] = []

    def _get(self, path: str) -> Any:
        node: Any = self.raw
        for part in path.split("."):
            if not isinstance(node, Mapping) or part not in node:
                self.errors.append(f"{path}: missing")
                return None
            node = node[part]
        return node

    def string(self, path: str) -> str:
        value = self._get(path)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            self.errors.append(f"{path}: expected a non-empty string, got {value!r}")
            return ""
        return value if isinstance(value, str) else ""

    def boolean(self, path: str) -> bool:
        value = self._get(path)
        if value is not None and not isinstance(value, bool):
            self.errors.append(f"{path}: expected true or false, got {value!r}")
        return bool(value)

    def number(self, path: str, low: float, high: float) -> float:
        value = self._get(path)
        if value is None:
            return 0.0
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.errors.append(f"{path}: expected a number, got {value!r}")
            return 0.0
        if not low <= float(value) <= high:
            self.errors.append(f"{path}: {value!r} is outside [{low}, {high}]")
        return float(value)

    def duration(self, path: str, *, allow_zero: bool = False) -> Duration:
        value = self._get(path)
        return self._duration(path, value, allow_zero=allow_zero)

    def _duration(self, path: str, value: Any, *, allow_zero: bool) -> Duration:
        if value is None:
            return Duration("0s", 0)
        try:
            length = durations.seconds(value) if isinstance(value, str) else None
        except ValueError:
            length = None
        if length is None or length != int(length):  # the rules' windows are whole seconds
            self.errors.append(f"{path}: expected a duration like 90s, 15m or 3h, got {value!r}")
            return Duration("0s", 0)
        seconds = int(length)
        if seconds == 0 and not allow_zero:
            self.errors.append(f"{path}: must be longer than 0")
        return Duration(value, seconds)

    def label(self, path: str) -> str:
        value = self._get(path)
        if value is not None and not (isinstance(value, str) and _LABEL_RE.match(value)):
            self.errors.append(f"{path}: expected a label name, got {value!r}")
            return ""
        return value if isinstance(value, str) else ""

    def labels(self, path: str) -> tuple[str, ...]:
        value = self._get(path)
        if value is None:
            return ()
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(v, str) and _LABEL_RE.match(v) for v in value)
        ):
            self.errors.append(f"{path}: expected a non-empty list of label names, got {value!r}")
            return ()
        return tuple(value)

    def for_overrides(self, path: str) -> dict[str, Duration]:
        """An optional mapping of alert name to duration (the names are checked against the
        declared alerts by `resolve_for`)."""
        node = self.raw.get(path)
        if node is None:
            return {}
        if not isinstance(node, Mapping):
            self.errors.append(f"{path}: expected a mapping of alert name to duration")
            return {}
        return {name: self._duration(f"{path}.{name}", value, allow_zero=True)
                for name, value in node.items()}


def read_raw(path: Path) -> Mapping[str, Any]:
    """The config's YAML mapping as written (its keys, for checks that name them)."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{path}: expected a YAML mapping")
    return raw


# The alerts the rules declare, as (name, declared `for:`), from a config (alerts.groups).
Declared = Callable[["Config"], Sequence[tuple[str, str]]]


def load_config(path: Path, declared: Declared) -> Config:
    """Read and check the config. Its `for_` is every declared alert's `for:` (the one the
    config's optional `for:` mapping gives instead, where it names the alert)."""
    r = Reader(read_raw(path))
    config = Config(
        selector=r.string("selector"),
        target_labels=r.labels("target_labels"),
        cluster_label=r.label("cluster_label"),
        runbook_base_url=r.string("runbook_base_url").rstrip("/"),
        window_memory=r.duration("window_memory"),
        rate_window=r.duration("rate_window"),
        at_risk_margin=r.duration("restore.at_risk_margin"),
        outcome_notice=r.duration("restore.outcome_notice"),
        alert_when_no_target=r.boolean("exporter.alert_when_no_target"),
        down_grace=r.duration("exporter.down_grace"),
        page_headroom_ratio=r.number("offload.page_headroom_ratio", 0.0, 1.0),
        row_pressure_window=r.duration("offload.row_pressure_window"),
        row_pressure_min_attempts=r.number("offload.row_pressure_min_attempts", 0.0, 1e9),
        host_tier_window=r.duration("offload.host_tier_window"),
        store_drop_window=r.duration("offload.store_drop_window"),
        store_drop_ratio=r.number("offload.store_drop_ratio", 0.0, 1.0),
        inert_window=r.duration("offload.inert_window"),
        power_limit_ratio=r.number("gpu.power_limit_ratio", 0.0, 2.0),
        power_avg_window=r.duration("gpu.power_avg_window"),
        restart_window=r.duration("engine.restart_window"),
        certificate_ticket=r.duration("exporter.certificate_expiry_ticket"),
        certificate_page=r.duration("exporter.certificate_expiry_page"),
        dcgm_selector=r.string("dcgm.selector"),
        for_=r.for_overrides("for"),
    )
    if config.window_memory.seconds and config.window_memory.seconds <= DEFAULT_RESTORE_BOUND_S:
        r.errors.append(
            f"window_memory: must exceed the {DEFAULT_RESTORE_BOUND_S // 60}-minute restore bound"
        )
    if config.cluster_label and config.cluster_label in config.target_labels:
        r.errors.append(f"cluster_label: {config.cluster_label!r} is also in target_labels")
    if config.certificate_page.seconds >= config.certificate_ticket.seconds > 0:
        r.errors.append(f"exporter.certificate_expiry_page: {config.certificate_page} must be "
                        f"shorter than certificate_expiry_ticket ({config.certificate_ticket})")
    try:
        alerts = declared(config)
    except Exception:
        if not r.errors:
            raise
        alerts = ()  # a config too broken to render the rules: its own errors say why
    config = _resolve_for(config, alerts, r)
    if r.errors:
        raise ConfigError("\n".join(f"{path}: {e}" for e in r.errors))
    return config


def _resolve_for(config: Config, alerts: Sequence[tuple[str, str]], r: Reader) -> Config:
    """`config` with the `for:` of every declared alert, in declaration order."""
    unknown = sorted(set(config.for_) - {name for name, _ in alerts})
    if unknown and alerts:
        r.errors.append(f"for: unknown alerts {unknown}")
    durations = {name: config.for_[name] if name in config.for_
                 else r._duration(f"{name}'s declared for", text, allow_zero=True)
                 for name, text in alerts}
    snapshot_for = durations.get("HeliosEngineSnapshotFailing")
    if (
        snapshot_for is not None
        and config.down_grace.seconds
        and snapshot_for.seconds >= config.down_grace.seconds
    ):
        # After --down-grace the sidecar opens a restore window (cause unreachable) and the
        # alert, which requires no open window, could never fire.
        r.errors.append(
            f"for.HeliosEngineSnapshotFailing: {snapshot_for} must be shorter than "
            f"exporter.down_grace ({config.down_grace})"
        )
    return replace(config, for_=durations)
