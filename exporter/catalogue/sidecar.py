"""Families about the sidecar itself: its sources and cost on the engine, the open experiment
phases, its HTTP server, its build, its process, and each collector of /metrics."""

from __future__ import annotations

from exporter.catalogue.model import Family, Promise, Rows
from exporter.labels import (
    AUTH_FAILURE_REASONS,
    AUTH_PATHS,
    COLLECTORS,
    CONNECTION_CLOSE_REASONS,
    ENGINE_PATHS,
    FETCH_OUTCOMES,
    HEALTH_PATH,
    SOURCES,
    TLS_CERTIFICATES,
)

SIDECAR = Promise("4.5")
V2 = Promise("4.5", 2)
V3 = Promise("4.5", 3)
E, HTTP = "exporter", "http"

FAMILIES: Rows = (
    # exporter/collectors/exporter_self.py
    Family("helios_exporter_source_up", "gauge", ("source",), "", help="1 when the source's "
           "latest poll succeeded.", collector=E, promised=SIDECAR,
           labels_doc=f"source={'|'.join(SOURCES)}",
           source="1 when the source's latest poll succeeded; every enabled source, from its "
           "first poll"),
    Family("helios_exporter_source_errors_total", "counter", ("source", "reason"), "polls",
           help="Failed polls by source and closed-set reason.", collector=E, promised=SIDECAR,
           labels_doc="source, reason (the closed set of `exporter/labels.py`)",
           source="failed polls; every reason at 0 from the source's first poll"),
    Family("helios_exporter_source_last_success_timestamp_seconds", "gauge", ("source",),
           "unix seconds", help="When the source last polled successfully (unix seconds).",
           collector=E, promised=SIDECAR,
           source="when the source last polled successfully (once it has)"),
    Family("helios_exporter_source_poll_duration_seconds", "gauge", ("source",), "seconds",
           help="Duration of the source's latest poll.", collector=E,
           source="the source's latest poll"),
    Family("helios_exporter_engine_requests_total", "counter", ("path", "outcome"), "requests",
           help="Requests the sidecar made to the engine, by path and outcome.", collector=E,
           labels_doc=f"path={'|'.join(ENGINE_PATHS)} (and {HEALTH_PATH} with --engine-kind "
           f"sglang or vllm), outcome={'|'.join(FETCH_OUTCOMES)}",
           source="the sidecar's cost on the engine"),
    Family("helios_exporter_engine_response_bytes_total", "counter", ("path",), "bytes",
           help="Body bytes the sidecar read from the engine, by path.", collector=E,
           source="the sidecar's cost on the engine"),
    Family("helios_exporter_engine_labels_dropped_total", "counter", ("family",), "labels",
           help="Engine labels dropped by the pass-through (not allow-listed), by allow-listed "
           "family.", collector=E, source="pass-through hygiene"),
    Family("helios_exporter_snapshot_fields_dropped_total", "counter", ("field",), "polls",
           help="Polls whose snapshot carried an identity field that cannot be a label value "
           "(its restore check is then unknown), or a schema 3 section that breaks the schema or "
           "a histogram rule; the field was left out.", collector=E,
           source="snapshot hygiene: an identity string that cannot be a label value is left out "
           "and counted (`field=identity.<name>`, from the first poll); *(v3)* so is a schema 3 "
           "section that breaks the schema, or a histogram whose buckets fall, whose `+Inf` is "
           "not its count or whose sum has no observations (`field` its path, e.g. "
           "`offload.evictions.row.age_seconds`, once one was)"),
    Family("helios_exporter_engine_malformed_lines_total", "counter", (), "lines",
           help="Allow-listed engine /metrics lines that could not be parsed.", collector=E,
           source="pass-through hygiene"),
    Family("helios_exporter_snapshot_regressions_total", "counter", (), "counters",
           help="Snapshot counters that decreased within one generation (an engine defect).",
           collector=E, source="every counter read from the snapshot (exporter/cycle/derive.py)"),
    Family("helios_exporter_log_lines_dropped_total", "counter", (), "lines",
           help="Log lines dropped because stderr did not take them in time (its queue was "
           "full: a log pipe nobody reads).", collector=E, promised=V3,
           source="the log queue (exporter/logs.py)"),
    Family("helios_exporter_poll_cycles_total", "counter", (), "cycles",
           help="Completed poll cycles.", collector=E, source="the poll loop"),
    Family("helios_exporter_poll_cycle_duration_seconds", "gauge", (), "seconds",
           help="Wall time of the latest poll cycle (all sources together).", collector=E,
           source="the poll loop, after its first cycle"),
    Family("helios_exporter_poll_last_timestamp_seconds", "gauge", (), "unix seconds",
           help="When the latest completed poll cycle began polling its sources (unix "
           "seconds): time() minus this is how old the published view is.", collector=E,
           promised=V3, source="how old /metrics is: the poll loop, after its first cycle "
           "(`/healthz` fails when it stops, section 3)"),
    # exporter/collectors/experiment.py
    Family("helios_experiment_phase_open", "gauge", ("phase",), "", help="1 for each "
           "experiment phase open now (begun, not yet ended).", collector="experiment",
           promised=V2, labels_doc="phase (section 7)",
           source="1, only while the phase is open (at most 16, names validated), for "
           "dashboard annotations"),
    Family("helios_experiment_phase_start_timestamp_seconds", "gauge", ("phase",),
           "unix seconds", help="When the begin capture of each open experiment phase was "
           "taken.", collector="experiment", promised=V2, source="only while the phase is open"),
    # exporter/collectors/http.py
    Family("helios_exporter_http_connections_open", "gauge", (), "connections",
           help="Client connections open now.", collector=HTTP, promised=V2,
           source="client connections open now"),
    Family("helios_exporter_http_connections_max", "gauge", (), "connections", help="Most client "
           "connections kept open (--http-max-connections, lowered to fit the file-descriptor "
           "limit).", collector=HTTP, promised=V2, source="the cap in force"),
    Family("helios_exporter_http_connections_accepted_total", "counter", (), "connections",
           help="Client connections accepted.", collector=HTTP, promised=V2, source="admitted"),
    Family("helios_exporter_http_connections_refused_total", "counter", (), "connections",
           help="Connections refused at the connection cap because every open one was busy "
           "with a request (answered 503, or closed under TLS).", collector=HTTP, promised=V2,
           source="refused at the cap (section 3.2)"),
    Family("helios_exporter_http_connections_closed_total", "counter", ("reason",),
           "connections", help="Connections the sidecar closed itself: slow_request (the "
           "request did not arrive within --http-read-timeout), slow_reader (the client stopped "
           "reading its response), idle (--http-idle-timeout), evicted (closed to make room at "
           "the cap: waiting or idle the longest), head_too_large.", collector=HTTP, promised=V2,
           labels_doc=f"reason={'|'.join(CONNECTION_CLOSE_REASONS)}",
           source="closed by the sidecar"),
    Family("helios_exporter_http_auth_failures_total", "counter", ("path", "reason"), "requests",
           help="Requests refused for their credentials (basic auth or bearer token), by path "
           "and reason: missing, wrong, throttled (the client failed too often and must wait), "
           "or pending (answered 429 while the basic-auth check was not done).", collector=HTTP,
           promised=V2, labels_doc=f"path={'|'.join(AUTH_PATHS)}, "
           f"reason={'|'.join(AUTH_FAILURE_REASONS)} (`pending` is v3: answered 429 while its "
           "basic-auth check was not done, section 3.3)",
           source="refused credentials (bearer token, basic auth)"),
    Family("helios_exporter_http_auth_throttled_clients", "gauge", (), "clients",
           help="Clients whose credentials are not looked at until their penalty for failed "
           "attempts ends.", collector=HTTP, promised=V2,
           source="clients being slowed down now"),
    Family("helios_exporter_http_tls_handshake_failures_total", "counter", (), "handshakes",
           help="TLS handshakes that failed or timed out, and client certificates without an "
           "allowed SAN.", collector=HTTP, promised=V2,
           source="with TLS: failed or timed-out handshakes, client certificates without an "
           "allowed SAN"),
    Family("helios_exporter_tls_certificate_expiry_timestamp_seconds", "gauge", ("certificate",),
           "unix seconds", help="When the certificate in force expires (unix seconds): server, "
           "the earliest NotAfter of tls_server_config's cert_file (or cert) and the chain in "
           "it; client_ca, the earliest of the client CA's certificates. Of the configuration "
           "that last loaded.", collector=HTTP, promised=Promise("4.5", 3),
           labels_doc=f"certificate={'|'.join(TLS_CERTIFICATES)}",
           source="with TLS: when the certificate in force expires (unix seconds), the earliest "
           "NotAfter of the served chain (server) or of the client CA's certificates "
           "(client_ca), of the configuration that last loaded"),
    Family("helios_exporter_web_config_last_reload_successful", "gauge", (), "", help="1 when "
           "the latest change of --web-config-file (or a file it names) loaded; 0: the previous "
           "configuration is still in force.", collector=HTTP, promised=V2,
           source="with `--web-config-file`: 1 when its latest change loaded, 0 while the "
           "previous configuration stays in force"),
    Family("helios_exporter_web_config_last_reload_success_timestamp_seconds", "gauge", (),
           "unix seconds", help="When --web-config-file last loaded (unix seconds).",
           collector=HTTP, promised=V2, source="with `--web-config-file`: when it last loaded"),
    # exporter/collectors/build_info.py
    Family("helios_exporter_build_info", "gauge", ("version", "python_version"), "",
           help="The sidecar's version and the Python running it; always 1.",
           collector="build_info", promised=V2, source="always 1: the sidecar's version"),
    # client_python's standard collectors (exporter/collectors/registry.py): their names and HELP are theirs.
    Family("process_*", None, (), "as client_python's", help=None, collector="process",
           promised=SIDECAR, labels_doc="",
           source="client_python's standard process collector: the sidecar's own CPU, memory, "
           "file descriptors"),
    Family("python_info", "gauge", ("implementation", "major", "minor", "patchlevel", "version"),
           "", help=None, collector="platform", promised=SIDECAR,
           source="client_python's standard platform collector: the sidecar's Python"),
    # exporter/collectors/registry.py, after every collector
    Family("helios_exporter_collector_success", "gauge", ("collector",), "", help="1 when the "
           "collector's series are in this exposition; 0 when it failed and its series were "
           "left out (the sidecar logs why).", collector="registry", promised=V2,
           labels_doc=f"collector={'|'.join(COLLECTORS)}",
           source="1 when the collector's series are in this answer (node_exporter's "
           "scrape_collector_success)"),
    Family("helios_exporter_collector_duration_seconds", "gauge", ("collector",), "seconds",
           help="Time the collector took to render its series.", collector="registry",
           promised=V2, source="time it took to render"),
)
