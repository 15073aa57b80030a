"""The sidecar itself: scraped at all, and reading valid engine snapshots."""

from __future__ import annotations

from alerts.config import Config
from alerts.promql import Q, join
from alerts.rules import Alert
from alerts.templates import T

GROUP = "helios-exporter"
NAMES = ("HeliosExporterDown", "HeliosEngineSnapshotFailing")


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
    ]
