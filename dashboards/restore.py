"""Helios restore / on-call dashboard: one sidecar's restore window, deadlines, checks, health."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.models import units

from dashboards.lib import (
    PASS_FAIL,
    UP_DOWN,
    Layout,
    Scope,
    Settings,
    base_dashboard,
    datasource_variable,
    q,
    stat_panel,
    states,
    steps,
    table_panel,
    timeline_panel,
    ts_panel,
)

UID = "helios-restore"
FILE = "helios-restore.json"


def _time_left(s: Scope, bound: str, memory: str) -> str:
    # The same expression as the recording rule helios:restore_deadline_time_left:seconds, but
    # on the dashboard's cluster/job/instance: the last deadline Prometheus saw, only while the
    # last window state it saw is open, so it keeps counting down when the sidecar is unreachable.
    deadline = s.sel(f'bound="{bound}"')
    return (f"(last_over_time(helios_restore_deadline_timestamp_seconds{deadline}[{memory}]) - time())\n"
            f"and on ({s.by()})\n"
            f"(last_over_time(helios_restore_window_open{s.sel()}[{memory}]) == 1)")


def build(settings: Settings) -> db.Dashboard:
    s = Scope(settings.cluster_label)
    sel = s.sel
    mem = settings.window_memory
    margin = settings.at_risk_margin_s
    countdown = steps((None, "red"), (0, "orange"), (margin, "green"))
    d = (base_dashboard(
        "Helios restore (on-call)", UID,
        "One engine's restore window during an outage: phase, deadlines counting down, in-flight "
        "requests, post-restore checks, generations and the sidecar's own health.",
        ["restore", "on-call"])
        .with_variable(datasource_variable())
        .with_variable(s.cluster_variable("helios_restore_window_open"))
        .with_variable(s.job_variable("helios_restore_window_open"))
        .with_variable(s.instance_variable("helios_restore_window_open", multi=False))
        .annotation(s.restore_window_annotation(mem))
        .annotation(s.generation_annotation()))
    grid = Layout(d)

    grid.row("Now")
    grid.add(stat_panel(
        "Restore phase",
        "Where the restore stands: serving, draining (admission closing), drained (no requests "
        "left), down (engine unreachable), restoring (engine back, checks pending), verifying. "
        "Last value Prometheus saw, so it stays readable while the sidecar is unreachable. "
        "Outside an outage it must say serving; anything else means a restore is under way: "
        "follow the restore runbook.",
        units.NoUnit,
        q(f"last_over_time(helios_restore_phase{sel()}[{mem}]) == 1", "{{phase}}", instant=True),
        text_mode="name", color="value", no_value="sidecar never scraped"), 5, 5)
    grid.add(stat_panel(
        "Restore window",
        "OPEN from the first sign of an outage (drain, drain event, engine unreachable longer "
        "than the down grace) until the engine serves again with admission open. While open, "
        "the request-cutoff and restore deadlines run: watch the countdowns beside it.",
        units.NoUnit,
        q(f"last_over_time(helios_restore_window_open{sel()}[{mem}])", "window", instant=True),
        mappings=states(("0", "closed", "green"), ("1", "OPEN", "orange"))), 3, 5)
    grid.add(stat_panel(
        "Time to request cutoff",
        "Seconds until the request-cutoff deadline of the open window (window start + request "
        "cutoff, 70 min by default). By then in-flight requests must be 0; negative means the "
        "cutoff passed (HeliosRequestCutoffBreached fires if requests are still in flight: "
        "stop the remaining requests or escalate). Empty when no window is open.",
        units.Seconds, q(_time_left(s, "request_cutoff", mem), "request cutoff", instant=True),
        thresholds=countdown, no_value="no window open"), 4, 5)
    grid.add(stat_panel(
        "Time to restore deadline",
        "Seconds until the restore deadline of the open window (window start + restore bound, "
        "90 min by default). Orange inside the at-risk margin (HeliosRestoreBoundAtRisk), red "
        "once passed (HeliosRestoreBoundBreached): escalate and decide whether to restore into "
        "a new container. Keeps counting from the last values seen when the sidecar is gone.",
        units.Seconds, q(_time_left(s, "restore", mem), "restore deadline", instant=True),
        thresholds=countdown, no_value="no window open"), 4, 5)
    grid.add(stat_panel(
        "In-flight requests",
        "Requests the engine reports in flight (admission.inflight_requests; during a window "
        "the last value from a good snapshot). Must reach 0 before the request cutoff for the "
        "drained_admission check to pass; if it stays above 0 while draining, find the stuck "
        "requests.",
        units.Short,
        q(f"sum by ({s.by()}) (helios_engine_inflight_requests{sel()})", "in flight",
          instant=True),
        thresholds=steps((None, "green"), (1, "orange")),
        no_value="unknown: see Sidecar scrape"), 4, 5)
    grid.add(stat_panel(
        "Engine reachable",
        "Whether the sidecar's latest snapshot poll of the engine succeeded. DOWN during the "
        "restore's down phase is expected; DOWN outside a window means the engine is failing: "
        "see the source errors below.",
        units.NoUnit, q(f"helios_engine_up{sel()}", "engine", instant=True),
        mappings=UP_DOWN), 4, 5)

    grid.row("Window")
    grid.add(stat_panel(
        "Window cause",
        "What opened the window: drain (the engine reported draining or closed), event (restore "
        "tooling posted drain_started) or unreachable (the engine stopped answering for longer "
        "than the down grace). An unplanned 'unreachable' window means an outage nobody "
        "announced: page the engine owner.",
        units.NoUnit, q(f"helios_restore_window_cause{sel()} == 1", "{{cause}}", instant=True),
        text_mode="name", color="value", no_value="no window open"), 4, 5)
    grid.add(stat_panel(
        "Window elapsed",
        "Time since the open window started (the durable start, unchanged by sidecar restarts). "
        "Compare with the restore bound.",
        units.Seconds,
        q(f"(time() - last_over_time(helios_restore_window_start_timestamp_seconds{sel()}[{mem}]))\n"
          f"and on ({s.by()})\n(last_over_time(helios_restore_window_open{sel()}[{mem}]) == 1)",
          "elapsed", instant=True),
        no_value="no window open"), 4, 5)
    grid.add(ts_panel(
        "Deadlines counting down",
        "Seconds left to the request cutoff and to the restore deadline while a window is open, "
        "over time. The line should reach the restore's end well above 0; a line crossing 0 is "
        "a breached deadline.",
        units.Seconds,
        q(_time_left(s, "request_cutoff", mem), "request cutoff", ref="A"),
        q(_time_left(s, "restore", mem), "restore deadline", ref="B"),
        thresholds=countdown, no_value="no window open"), 8, 5)
    grid.add(ts_panel(
        "In-flight requests over time",
        "Requests in flight per engine generation. During a drain it must fall to 0; the restored "
        "generation starts again from 0.",
        units.Short,
        q(f"sum by ({s.by('generation')}) (helios_engine_inflight_requests{sel()})",
          "{{generation}}"),
        min_val=0), 8, 5)
    grid.add(timeline_panel(
        "Phase timeline",
        "The restore phase over time, one lane per phase (the lit lane is the current phase). "
        "A healthy restore walks serving, draining, drained, down, restoring, verifying and back "
        "to serving.",
        q(f"helios_restore_phase{sel()}", "{{phase}}"),
        mappings=states(("0", "-", "transparent"), ("1", "current", "blue"))), 12, 7)
    grid.add(timeline_panel(
        "Generation timeline",
        "Which engine generation (incarnation) was live when. A restore must end with a new "
        "generation; the same generation before and after means the engine was not restarted "
        "(fresh_generation check).",
        q(f"helios_monitoring_generation_info{sel()}", "{{generation}}"),
        mappings=states(("1", "live", "purple"))), 12, 7)

    grid.row("After the window")
    grid.add(stat_panel(
        "Post-restore checks",
        "Checks computed when the last window closed, comparing the restored engine with the "
        "incumbent: image (same image digest), container (the retained container came back), "
        "fresh_generation (a new generation), drained_admission (in-flight reached 0 before "
        "the cutoff), preflight_direct / preflight_routed (probes, when configured). Any FAIL "
        "fires HeliosRestoreCheckFailed: follow its runbook before declaring the restore done. "
        "Empty until a window has closed since the sidecar's state was created.",
        units.NoUnit, q(f"helios_restore_check_ok{sel()}", "{{check}}", instant=True),
        mappings=PASS_FAIL, text_mode="value_and_name", no_value="no window closed yet"), 12, 5)
    grid.add(stat_panel(
        "Last window outcome",
        "How the last window ended: in_time (closed before the restore deadline), late (closed "
        "after it) or aborted (discarded by an abort event). A late window needs a post-mortem.",
        units.NoUnit,
        q(f"helios_restore_last_window_outcome{sel()} == 1", "{{outcome}}", instant=True),
        text_mode="name", color="value", no_value="no window closed yet"), 6, 5)
    grid.add(stat_panel(
        "Last window duration",
        "How long the last closed window lasted, start to close. Compare with the restore bound.",
        units.Seconds,
        q(f"helios_restore_last_window_duration_seconds{sel()}", "duration", instant=True),
        no_value="no window closed yet"), 6, 5)
    grid.add(table_panel(
        "Current incarnation",
        "The engine generation the sidecar reports now with its identity (image digest, "
        "container, package, checkpoint) and start time. After a restore, check that the image "
        "and container are the ones you expected.",
        units.DatetimeISO,
        q(f"helios_monitoring_generation_start_timestamp_seconds{sel()} * 1000\n"
          f"* on ({s.by('generation')}) group_left (image_digest, container_id, package, "
          f"checkpoint)\nhelios_monitoring_generation_info{sel()}",
          "", instant=True, table_format=True),
        rename={"Value": "started"}, no_value="engine never seen"), 24, 5)

    grid.row("Sidecar health")
    grid.add(stat_panel(
        "Sidecar scrape",
        "Whether Prometheus can scrape the sidecar (up). DOWN fires HeliosExporterDown; the "
        "panels above then show the last values Prometheus saw. Check the sidecar pod/host.",
        units.NoUnit, q(f"up{sel()}", "scrape", instant=True), mappings=UP_DOWN), 4, 6)
    grid.add(timeline_panel(
        "Source health",
        "Each source the sidecar polls (engine_snapshot, engine_metrics, nvml, host): up when "
        "its latest poll succeeded. engine_* down during the restore's down phase is expected; "
        "otherwise see the errors beside it.",
        q(f"helios_exporter_source_up{sel()}", "{{source}}"),
        mappings=UP_DOWN), 8, 6)
    grid.add(ts_panel(
        "Source errors",
        "Failed polls per second by source and reason (refused, timeout, http_status, "
        "schema, too_large, hung, ...). Persistent errors outside a window fire "
        "HeliosEngineSnapshotFailing: the reason names what to fix.",
        units.CountsPerSecond,
        q(f"sum by ({s.by('source', 'reason')}) "
          f"(rate(helios_exporter_source_errors_total{sel()}[$__rate_interval]))",
          "{{source}} {{reason}}"),
        min_val=0, no_value="no errors"), 6, 6)
    grid.add(ts_panel(
        "Data age per source",
        "Seconds since each source last succeeded: how stale the sidecar's numbers are. It "
        "should stay near the poll interval; growing age with the source up = a stuck poller, "
        "restart the sidecar (its window state survives restarts).",
        units.Seconds,
        q(f"time() - helios_exporter_source_last_success_timestamp_seconds{sel()}", "{{source}}"),
        thresholds=steps((None, "green"), (60, "orange"), (300, "red")), min_val=0), 6, 6)
    grid.add(timeline_panel(
        "Collector success",
        "Each collector of /metrics (helios_exporter_collector_success): pass when its series "
        "are in the scrape. FAIL means it raised and its series are missing while the rest of "
        "/metrics stays valid (HeliosExporterCollectorFailing says which series; the sidecar "
        "logged collector_failed with the traceback; the status page lists it under Sidecar).",
        q(f"helios_exporter_collector_success{sel()}", "{{collector}}"),
        mappings=PASS_FAIL), 16, 7)
    grid.add(stat_panel(
        "Certificate expiry",
        "Time left until the sidecar's TLS certificate in force, and the client CA it verifies "
        "clients with, expire (helios_exporter_tls_certificate_expiry_timestamp_seconds). "
        "Orange: HeliosExporterCertificateExpiring has opened a ticket; red: "
        "HeliosExporterCertificateExpiryImminent pages. Empty without TLS.",
        units.Seconds,
        q(f"helios_exporter_tls_certificate_expiry_timestamp_seconds{sel()} - time()",
          "{{certificate}}", instant=True),
        thresholds=steps((None, "red"), (settings.certificate_page_s, "orange"),
                         (settings.certificate_ticket_s, "green")),
        no_value="no TLS"), 8, 7)
    return d
