"""The sidecar itself: scraped at all, reading valid engine snapshots, rendering every
collector of /metrics, and running the web configuration last written to its file."""

from __future__ import annotations

from alerts.config import Config
from alerts.promql import Q, join
from alerts.rules import Alert
from alerts.templates import T
from exporter.labels import COLLECTORS

GROUP = "helios-exporter"
NAMES = (
    "HeliosExporterDown",
    "HeliosEngineSnapshotFailing",
    "HeliosExporterCollectorFailing",
    "HeliosExporterWebConfigReloadFailed",
)

# What goes missing from /metrics while a collector fails (exporter/registry.py registers them;
# their docstrings show what each renders), and the alerts that go blind with it.
COLLECTOR_SERIES: dict[str, str] = {
    "offload": "the engine and offload series (helios_engine_up, helios_engine_ranks, "
               "helios_engine_inflight_requests, helios_offload_*, helios_monitoring_generation_*); "
               "the offload alerts cannot fire",
    "pins": "helios_engine_pin_ok; HeliosEnginePinMismatch cannot fire",
    "passthrough": "the engine's re-exported families (helios_engine_native_*)",
    "restore": "the restore window series (helios_restore_*, "
               "helios_engine_unplanned_restarts_total); the restore deadline alerts go on from the "
               "last values seen (for {memory}) and miss every change since; "
               "HeliosRestoreCheckFailed, HeliosEngineSnapshotFailing and "
               "HeliosEngineRestartedOutsideWindow cannot fire",
    "exporter": "the sidecar's source health (helios_exporter_source_*, "
                "helios_exporter_engine_*, helios_exporter_poll_*); HeliosEngineSnapshotFailing "
                "cannot fire",
    "host": "the engine process and host memory series (helios_engine_process_*, "
            "helios_host_memory_*)",
    "experiment": "the open experiment phases (helios_experiment_phase_*)",
    "gpu": "the GPU series (helios_gpu_*); HeliosGpuLost and HeliosGpuPowerAtLimit cannot fire",
    "http": "the sidecar's HTTP server series (helios_exporter_http_*, "
            "helios_exporter_web_config_*)",
    "build_info": "helios_exporter_build_info",
    "process": "the sidecar's process series (process_*: CPU, memory, file descriptors)",
    "platform": "python_info",
}
if tuple(COLLECTOR_SERIES) != COLLECTORS:  # a new collector needs its line here
    raise AssertionError(f"COLLECTOR_SERIES {tuple(COLLECTOR_SERIES)} != COLLECTORS {COLLECTORS}")


def _missing_series(c: Config) -> str:
    """Go template: what the failing collector ($labels.collector) leaves out of /metrics."""
    branches = "{{ else if".join(
        f' eq $labels.collector "{name}" }}}}{series.replace("{memory}", str(c.window_memory))}'
        for name, series in COLLECTOR_SERIES.items()
    )
    return "{{ if" + branches + "{{ else }}its series{{ end }}"


def alerts(c: Config) -> list[Alert]:
    q, t = Q(c), T(c)
    no_target = f"\nor\nabsent({q.sel('up')})" if c.alert_when_no_target else ""
    # absent() has no instance label: name the job alone then.
    sidecar = "{{ $labels.job }}{{ with $labels.instance }}/{{ . }}{{ end }}" + t.cluster
    return [
        Alert(
            name="HeliosExporterDown",
            group=GROUP,
            severity="warning",
            expr=f"{q.sel('up')} == 0{no_target}",
            summary=f"Prometheus cannot scrape the Helios sidecar {sidecar}",
            description=(
                f"Prometheus has not scraped the Helios sidecar {sidecar} for "
                f"{c.for_['HeliosExporterDown']}"
                "{{ if not $labels.instance }} (no target of the job at all){{ end }}. "
                "Engine, offload and GPU metrics are missing; restore alerts continue from the "
                f"last values seen for {c.window_memory}. Inhibited while a restore window is "
                "open (as last seen): a planned outage, covered by the restore alerts."
            ),
            meaning="`up == 0`"
            + (" or no `up` series of the job (`absent`)" if c.alert_when_no_target else ""),
        ),
        Alert(
            name="HeliosEngineSnapshotFailing",
            group=GROUP,
            severity="warning",
            expr=join(
                f"{q.sel('helios_exporter_source_up', source='engine_snapshot')} == 0",
                f"{q.sel('helios_restore_window_open')} == 0",
                op=f"and {q.on}",
            ),
            summary=f"Engine snapshot source failing on {t.target} outside a restore window",
            description=(
                f"The sidecar on {t.target} cannot read a valid /debug/offload/snapshot and no "
                "restore window is open. Last good snapshot: "
                + t.value(
                    "helios_exporter_source_last_success_timestamp_seconds"
                    '{{TARGET},source="engine_snapshot"}',
                    "humanizeTimestamp",
                    "never",
                )
                + ". Offload metrics are missing; see /status for the error. If it keeps "
                f"failing for longer than the sidecar's --down-grace ({c.down_grace}), a "
                "restore window opens (cause unreachable) and this alert resolves, unless an "
                "abort discarded the window of this outage (/status outage_aborted): then it "
                "fires until the engine answers."
            ),
            meaning=(
                '`helios_exporter_source_up{source="engine_snapshot"} == 0` while '
                "`helios_restore_window_open == 0`; `for:` stays below the sidecar's "
                f"`--down-grace` ({c.down_grace}), after which a restore window opens "
                "(cause unreachable) and the alert resolves; after an `abort` of the outage's "
                "window it fires until the engine answers"
            ),
        ),
        Alert(
            name="HeliosExporterCollectorFailing",
            group=GROUP,
            severity="warning",
            expr=f"{q.sel('helios_exporter_collector_success')} == 0",
            summary=(
                "Collector {{ $labels.collector }} of the Helios sidecar "
                f"{t.target} is failing"
            ),
            description=(
                "The {{ $labels.collector }} collector of the sidecar on "
                f"{t.target} has raised on every rendering of /metrics for "
                f"{c.for_['HeliosExporterCollectorFailing']}: its series are left out, the rest "
                "of /metrics stays valid and is scraped. Missing: "
                + _missing_series(c)
                + ". The sidecar logged the error with its traceback (event collector_failed, "
                "collector={{ $labels.collector }}) once per cause; report it to the sidecar "
                "owners with that traceback."
            ),
            meaning=(
                "`helios_exporter_collector_success{collector} == 0`: a collector of /metrics "
                "raised and its series are missing from every scrape, while the rest of "
                "/metrics stays valid"
            ),
        ),
        Alert(
            name="HeliosExporterWebConfigReloadFailed",
            group=GROUP,
            severity="warning",
            expr=f"{q.sel('helios_exporter_web_config_last_reload_successful')} == 0",
            summary=f"The Helios sidecar {t.target} keeps an old web configuration",
            description=(
                f"The sidecar on {t.target} has failed for "
                f"{c.for_['HeliosExporterWebConfigReloadFailed']} to load the latest change of "
                "its --web-config-file (or of a file it names: certificate, key, client CA) and "
                "keeps the configuration that loaded at "
                + t.value(
                    "helios_exporter_web_config_last_reload_success_timestamp_seconds{{TARGET}}",
                    "humanizeTimestamp",
                )
                + ": the change did not apply. A rotated certificate is not served (the old "
                "one is, also once it has expired and clients refuse it) and a new or changed "
                "basic-auth user is refused (the old credentials still work). The sidecar logged "
                "the errors (event web_config_reload_failed). Fix the file: it is re-read when "
                "it changes; turning TLS on or off needs a restart of the sidecar."
            ),
            meaning=(
                "`helios_exporter_web_config_last_reload_successful == 0`: the latest change of "
                "`--web-config-file` (or a file it names) did not load, and the configuration "
                "that last loaded (TLS certificate, basic-auth users) stays in force"
            ),
        ),
    ]
