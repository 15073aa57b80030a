"""The sidecar's own HTTP server: connections, slow clients, failed credentials, e.g.

    helios_exporter_http_connections_open 3.0
    helios_exporter_http_connections_max 256.0
    helios_exporter_http_connections_accepted_total 1042.0
    helios_exporter_http_connections_refused_total 0.0
    helios_exporter_http_connections_closed_total{reason="slow_request"} 3900.0
    helios_exporter_http_auth_failures_total{path="/metrics",reason="wrong"} 2.0
    helios_exporter_http_auth_throttled_clients 0.0
    helios_exporter_http_tls_handshake_failures_total 1.0              (with TLS)
    helios_exporter_tls_certificate_expiry_timestamp_seconds{certificate="server"} 1.7e+09
    helios_exporter_web_config_last_reload_successful 1.0              (with --web-config-file)

Values as of the latest rendering of /metrics (once per poll cycle, like every other series).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from exporter.collectors.families import counter, gauge
from exporter.web.auth import AuthFailures
from exporter.web.connections import ConnectionGuard
from exporter.web.state import WebConfigState


class HttpCollector:
    def __init__(self, connections: ConnectionGuard, failures: AuthFailures,
                 web: WebConfigState | None) -> None:
        self._conns, self._failures, self._web = connections, failures, web

    def collect(self) -> Iterator[Metric]:
        c = self._conns
        for name, value in (
            ("helios_exporter_http_connections_open", c.open),
            ("helios_exporter_http_connections_max", c.max_connections),
        ):
            g = gauge(name)
            g.add_metric([], value)
            yield g
        for name, value in (
            ("helios_exporter_http_connections_accepted_total", c.accepted),
            ("helios_exporter_http_connections_refused_total", c.refused),
        ):
            m = counter(name)
            m.add_metric([], value)
            yield m
        closed = counter("helios_exporter_http_connections_closed_total")
        for reason, value in sorted(c.closed.items()):
            closed.add_metric([reason], value)
        yield closed
        failures = counter("helios_exporter_http_auth_failures_total")
        for (path, reason), value in sorted(self._failures.counts.items()):
            failures.add_metric([path, reason], value)
        yield failures
        throttled = gauge("helios_exporter_http_auth_throttled_clients")
        throttled.add_metric([], self._failures.throttled_clients())
        yield throttled
        if self._web is None:
            return
        if self._web.tls_enabled:
            tls = counter("helios_exporter_http_tls_handshake_failures_total")
            tls.add_metric([], c.tls_handshake_failures)
            yield tls
            expiry = gauge("helios_exporter_tls_certificate_expiry_timestamp_seconds")
            settings = self._web.tls()
            for cert in settings.expiry if settings is not None else ():
                expiry.add_metric([cert.certificate], cert.not_after)
            yield expiry
        ok = gauge("helios_exporter_web_config_last_reload_successful")
        ok.add_metric([], 1.0 if self._web.last_reload_ok else 0.0)
        at = gauge("helios_exporter_web_config_last_reload_success_timestamp_seconds")
        at.add_metric([], self._web.last_success)
        yield from (ok, at)
