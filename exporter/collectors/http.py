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
        for name, doc, value in (
            ("helios_exporter_http_connections_open", "Client connections open now.", c.open),
            ("helios_exporter_http_connections_max",
             "Most client connections kept open (--http-max-connections, lowered to fit the "
             "file-descriptor limit).", c.max_connections),
        ):
            g = gauge(name, doc)
            g.add_metric([], value)
            yield g
        for name, doc, value in (
            ("helios_exporter_http_connections_accepted_total",
             "Client connections accepted.", c.accepted),
            ("helios_exporter_http_connections_refused_total",
             "Connections refused at the connection cap because every open one was busy with "
             "a request (answered 503, or closed under TLS).", c.refused),
        ):
            m = counter(name, doc)
            m.add_metric([], value)
            yield m
        closed = counter("helios_exporter_http_connections_closed_total",
                         "Connections the sidecar closed itself: slow_request (the request did not "
                         "arrive within --http-read-timeout), slow_reader (the client stopped "
                         "reading its response), idle (--http-idle-timeout), evicted (closed to "
                         "make room at the cap: waiting or idle the longest), head_too_large.",
                         ["reason"])
        for reason, value in sorted(c.closed.items()):
            closed.add_metric([reason], value)
        yield closed
        failures = counter("helios_exporter_http_auth_failures_total",
                           "Requests refused for their credentials (basic auth or bearer token), "
                           "by path and reason: missing, wrong, throttled (the client failed "
                           "too often and must wait), or pending (answered 429 while the "
                           "basic-auth check was not done).", ["path", "reason"])
        for (path, reason), value in sorted(self._failures.counts.items()):
            failures.add_metric([path, reason], value)
        yield failures
        throttled = gauge("helios_exporter_http_auth_throttled_clients",
                          "Clients whose credentials are not looked at until their penalty for "
                          "failed attempts ends.")
        throttled.add_metric([], self._failures.throttled_clients())
        yield throttled
        if self._web is None:
            return
        if self._web.tls_enabled:
            tls = counter("helios_exporter_http_tls_handshake_failures_total",
                          "TLS handshakes that failed or timed out, and client certificates "
                          "without an allowed SAN.")
            tls.add_metric([], c.tls_handshake_failures)
            yield tls
            expiry = gauge("helios_exporter_tls_certificate_expiry_timestamp_seconds",
                           "When the certificate in force expires (unix seconds): server, the "
                           "earliest NotAfter of tls_server_config's cert_file (or cert) and the "
                           "chain in it; client_ca, the earliest of the client CA's "
                           "certificates. Of the configuration that last loaded.",
                           ["certificate"])
            settings = self._web.tls()
            for cert in settings.expiry if settings is not None else ():
                expiry.add_metric([cert.certificate], cert.not_after)
            yield expiry
        ok = gauge("helios_exporter_web_config_last_reload_successful",
                   "1 when the latest change of --web-config-file (or a file it names) loaded; "
                   "0: the previous configuration is still in force.")
        ok.add_metric([], 1.0 if self._web.last_reload_ok else 0.0)
        at = gauge("helios_exporter_web_config_last_reload_success_timestamp_seconds",
                   "When --web-config-file last loaded (unix seconds).")
        at.add_metric([], self._web.last_success)
        yield from (ok, at)
