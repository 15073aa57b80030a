"""`/status` dicts for the on-call view's tests, shaped like what the sidecar answers (exporter/status.py
and exporter/restore/report.py): serving, a window open, a restore into the wrong container."""

from __future__ import annotations

import copy
from typing import Any

from exporter.labels import COLLECTORS

NOW = 1_796_000_000.0  # 2026-11-30 00:53:20 UTC
INCUMBENT = {"generation": "g-20261129T0412Z-7f3a", "image_digest": "sha256:" + "ab" * 32,
             "container_id": "4be1c0ffee12", "package": "helios-2.14.0+47581cca",
             "checkpoint": "qwen3-next-w4a16-r3"}
RESTORED = {**INCUMBENT, "generation": "g-20261130T0451Z-9c1d", "container_id": "9a8b7c6d5e4f"}


def _source(up: bool | None, at: float | None, **extra: Any) -> dict[str, Any]:
    return {"enabled": up is not None, "up": up, "last_success": at,
            "last_duration_seconds": 0.012 if at else None, "last_reason": None,
            "last_error": None, "errors": {}, **extra}


def base() -> dict[str, Any]:
    return {
        "generation": INCUMBENT["generation"],
        "generation_derived": False,
        "identity": {k: v for k, v in INCUMBENT.items() if k != "generation"},
        "snapshot_dropped_fields": [],
        "engine_url": "http://127.0.0.1:8000",
        "engine_up": True,
        "pins": [],
        "offload_geometry": None,
        "restore": {"phase": "serving", "window_open": False,
                    "admission": {"state": "open", "inflight_requests": 0,
                                  "generation": INCUMBENT["generation"], "seen_at": NOW - 1,
                                  "age_seconds": 1.0},
                    "window": None, "checks": {}, "failed_checks": [], "checks_window": None,
                    "last_window": None, "last_verified_engine": None, "unplanned_restarts": 0,
                    "state_file": "/var/lib/helios-exporter/restore-state.json",
                    "state_write_errors": 0, "last_state_write_error": None},
        "bounds": {"request_cutoff": 4200.0, "restore_bound": 5400.0, "down_grace": 60.0},
        "sources": {"engine_snapshot": _source(True, NOW - 1), "engine_metrics": _source(True, NOW - 1),
                    "nvml": _source(None, None), "host": _source(True, NOW - 1)},
        "poll_cycles": 1234,
        "collectors": [{"collector": name, "ok": True, "cause": None, "missing": None}
                       for name in COLLECTORS if name != "engines"],  # helios: no engines
        "web": None,
    }


def failing_collector(name: str = "gpu") -> dict[str, Any]:
    """Serving, with one collector of /metrics raising (as exporter/status.py reports it)."""
    status = base()
    for c in status["collectors"]:
        if c["collector"] == name:
            c.update(ok=False, cause="KeyError at gpu.py:88",
                     missing="the GPU series (helios_gpu_*); HeliosGpuLost and "
                             "HeliosGpuPowerAtLimit cannot fire")
    return status


def with_tls(server_left: float, client_ca_left: float | None = None) -> dict[str, Any]:
    """Serving over TLS, the certificate in force expiring `server_left` seconds after NOW."""
    status = base()
    certificates = [{"certificate": "server", "not_after": NOW + server_left,
                     "subject": "CN=helios-exporter", "where":
                     "tls_server_config.cert_file /etc/helios-exporter/tls/tls.crt"}]
    if client_ca_left is not None:
        certificates.append({"certificate": "client_ca", "not_after": NOW + client_ca_left,
                             "subject": "CN=monitoring-ca", "where":
                             "tls_server_config.client_ca_file /etc/helios-exporter/tls/ca.crt"})
    status["web"] = {"file": "/etc/helios-exporter/web/web-config.yml", "tls": True,
                     "certificates": certificates, "basic_auth_users": 1, "refused_users": [],
                     "last_reload_ok": True, "last_reload_success": NOW - 3600}
    return status


def open_window(started_ago: float = 180.0) -> dict[str, Any]:
    """Phase down, a window opened by a drain `started_ago` seconds before NOW."""
    status = base()
    start = NOW - started_ago
    status["engine_up"] = False
    for name in ("engine_snapshot", "engine_metrics"):
        status["sources"][name].update(up=False, last_reason="connect",
                                       last_error="connection refused", errors={"connect": 7})
    status["restore"].update(phase="down", window_open=True, window={
        "start": start, "start_exact": True, "cause": "drain",
        "request_cutoff_deadline": start + 4200, "restore_deadline": start + 5400,
        "seconds_to_request_cutoff": start + 4200 - NOW,
        "seconds_to_restore_deadline": start + 5400 - NOW,
        "incumbent_inflight_requests": 0, "last_inflight": 0, "incumbent_gone": True,
        "lost_requests": None, "drained": True, "engine_unreachable": True,
        "restore_started": False, "incumbent": dict(INCUMBENT), "reference": dict(INCUMBENT),
        "restored": None, "preflight": {}})
    return status


def wrong_container() -> dict[str, Any]:
    """The window closed on an engine restored into a new container."""
    status = base()
    status["identity"] = {k: v for k, v in RESTORED.items() if k != "generation"}
    status["generation"] = RESTORED["generation"]
    start, end = NOW - 1500, NOW - 300
    status["restore"].update(
        checks={"image": True, "container": False, "package": True, "checkpoint": True,
                "fresh_generation": True, "drained_admission": True},
        failed_checks=[{"check": "container", "expected": INCUMBENT["container_id"],
                        "found": RESTORED["container_id"]}],
        checks_window={"start": start, "end": end, "outcome": "in_time"},
        last_window={"start": start, "end": end, "duration_seconds": end - start,
                     "cause": "drain", "outcome": "in_time",
                     "evidence": {"not_before": end, "not_after": end, "start_exact": True},
                     "lost_requests": 0, "incumbent": dict(INCUMBENT),
                     "reference": dict(INCUMBENT), "restored": dict(RESTORED)},
        last_verified_engine=dict(INCUMBENT), unplanned_restarts=0)
    return status


def copy_of(status: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(status)
